"""A two-phase pretraining logs on its parent run (the registered model's) the data the model was last trained on:
`data/examples_train` is phase 2's prepared set, and phase 1's is `phase1/data/examples_train`, as its other
metrics are; a phase 1 an earlier submission finished is not fit again. Everything but jobs/pretrain.run's own bookkeeping is stubbed: no Ray, no MLflow, no training."""

import contextlib
import copy
import itertools
import json
from types import SimpleNamespace

from jobs.registry import tracking


def manifest(examples_train: int) -> dict:
    return {"counts": {"documents_read": 103, "documents_kept": 100, "examples_train": examples_train},
            "rejects": {"too_short": 3}}


def test_the_parent_run_logs_phase_2s_examples_and_phase_1s_under_its_prefix(tmp_path, monkeypatch):
    import pipelines.prepare
    from jobs import pretrain
    from jobs.config.io import load_config
    from jobs.config.pretrain import PretrainConfig
    from jobs.runtime import resubmit

    prepared = iter([manifest(9000), manifest(2500)])  # 128 then 512 tokens: fewer, longer examples
    monkeypatch.setattr(pipelines.prepare, "prepare", lambda data: SimpleNamespace(
        path=str(tmp_path / "prepared"), tokenizer_dir=str(tmp_path / "tok"), manifest=next(prepared)))
    fit = lambda cfg, prepared, run_id: SimpleNamespace(  # noqa: E731
        metrics={"eval_after/mlm_acc": 0.5}, checkpoint=SimpleNamespace(path=str(tmp_path)))
    monkeypatch.setattr(PretrainConfig, "check_environment", lambda self: None)
    for name, stub in {"prefer_loopback": lambda: None, "refuse_finished_before_ray": lambda cfg: None,
                       "init_ray": lambda: "", "ensure_capacity": lambda demand: None,
                       "refuse_sqlite_across_machines": lambda uri: None,
                       "resolve_config": lambda cfg, tokenizer_dir: copy.deepcopy(cfg), "_continues": lambda *a: None,
                       "_lineage": lambda prepared: {}, "_tag_phase2_lineage": lambda *a: None, "_fit": fit,
                       "_report_ignored": lambda cfg: 0, "fetch_release": lambda *a: None,
                       "summary": lambda *a: ""}.items():
        monkeypatch.setattr(pretrain, name, stub)
    ids = itertools.count()
    logged = {}
    for name, stub in {"resolve_tracking_uri": lambda uri: uri, "start_run": lambda *a, **k: f"run{next(ids)}",
                       "ending": lambda *a, **k: contextlib.nullcontext(), "log_curves": lambda *a: None,
                       "finish_run": lambda uri, run_id, metrics, *a, **k: logged.update(metrics) or {}}.items():
        monkeypatch.setattr(tracking, name, stub)
    monkeypatch.setattr(resubmit, "refuse_phase1_past_hand_off", lambda cfg: None)
    cfg = load_config(PretrainConfig, None, ["data.sources=[x]", "run_name=two", "train.max_steps=200",
                                             "phase2.max_steps=200", f"output_dir={tmp_path / 'runs'}"])
    pretrain.run(cfg)
    assert logged["data/examples_train"] == 2500 and logged["phase1/data/examples_train"] == 9000
    assert logged["data/documents_kept"] == 100 and logged["data/rejected/too_short"] == 3


def finished_phase1(run_dir, step: int, release: bool = True, metrics: dict | None = None):
    """A phase-1 folder as Ray Train and the workers leave it: its latest checkpoint recorded at `step`, holding the
    release its last checkpoint is written with, and Ray's snapshot naming it with the metrics it was reported with."""
    from jobs.runtime import resubmit

    checkpoint = run_dir / f"checkpoint_{step:06d}"
    (checkpoint / "release" if release else checkpoint).mkdir(parents=True)
    resubmit.record(checkpoint, "run-of-phase-1", step, {"prepared set": "x"})
    (run_dir / "checkpoint_manager_snapshot.json").write_text(json.dumps({"latest_checkpoint_result": {
        "version": 0, "checkpoint_dir_name": checkpoint.name, "metrics": metrics or {}}}))
    return checkpoint


def test_a_finished_phase_is_told_by_its_last_checkpoint(tmp_path):
    from jobs.runtime import resubmit

    assert resubmit.finished(tmp_path / "none", 200) is None
    finished_phase1(tmp_path / "short", 150)
    assert resubmit.finished(tmp_path / "short", 200) is None  # steps left
    finished_phase1(tmp_path / "cut", 200, release=False)
    assert resubmit.finished(tmp_path / "cut", 200) is None  # not its final checkpoint (no release written)
    checkpoint = finished_phase1(tmp_path / "done", 200, metrics={"eval_after/mlm_acc": 0.7})
    assert resubmit.finished(tmp_path / "done", 200) == (checkpoint, {"eval_after/mlm_acc": 0.7},
                                                          {"run_id": "run-of-phase-1", "step": 200,
                                                           "basis": {"prepared set": "x"}})


def test_a_phase_1_an_earlier_submission_finished_is_not_fit_again(tmp_path, monkeypatch):
    """Resubmitted in phase 2, the job fit phase 1 again: a Ray Train run that trained no step but started its workers,
    evaluated and wrote its last checkpoint (optimizer state and release) anew, under a new phase-1 run, every time.
    Phase 2 now starts from that checkpoint at once; phase 1's metrics are those Ray recorded with it, and the job's
    run names the phase-1 run that trained it."""
    import pipelines.prepare
    from jobs import pretrain
    from jobs.config.io import load_config
    from jobs.config.pretrain import PretrainConfig

    prepared = iter([manifest(9000), manifest(2500)])
    monkeypatch.setattr(pipelines.prepare, "prepare", lambda data: SimpleNamespace(
        path=str(tmp_path / "prepared"), tokenizer_dir=str(tmp_path / "tok"), manifest=next(prepared)))
    fitted, inits, started, logged = [], [], [], {}

    def fit(cfg, prepared, run_id):
        fitted.append(cfg.run_name)
        return SimpleNamespace(metrics={"step": 100}, checkpoint=SimpleNamespace(path=str(tmp_path / "p2")))

    def phase2_config(resolved, checkpoint, tokenizer_dir):
        inits.append(checkpoint)
        return resolved.phase2_run(checkpoint, tokenizer_dir)

    def continues(cfg, prepared):
        return {"run_id": "run-of-phase-1", "step": 200} if cfg.run_name.endswith("phase1") else None

    monkeypatch.setattr(PretrainConfig, "check_environment", lambda self: None)
    for name, stub in {"prefer_loopback": lambda: None, "refuse_finished_before_ray": lambda cfg: None,
                       "init_ray": lambda: "", "ensure_capacity": lambda demand: None,
                       "refuse_sqlite_across_machines": lambda uri: None,
                       "resolve_config": lambda cfg, tokenizer_dir: copy.deepcopy(cfg), "_continues": continues,
                       "_lineage": lambda prepared: {}, "_tag_phase2_lineage": lambda *a: None, "_fit": fit,
                       "phase2_config": phase2_config, "_report_ignored": lambda cfg: 0,
                       "fetch_release": lambda *a: None, "summary": lambda *a: ""}.items():
        monkeypatch.setattr(pretrain, name, stub)
    ids = itertools.count()
    for name, stub in {"resolve_tracking_uri": lambda uri: uri,
                       "start_run": lambda *a, tags, **k: started.append((a[3], tags)) or f"run{next(ids)}",
                       "ending": lambda *a, **k: contextlib.nullcontext(), "log_curves": lambda *a: None,
                       "finish_run": lambda uri, run_id, metrics, *a, **k: logged.update(metrics) or {}}.items():
        monkeypatch.setattr(tracking, name, stub)
    checkpoint = finished_phase1(tmp_path / "runs" / "two-phase1", 200,
                                 metrics={"step": 200, "eval_after/mlm_acc": 0.7, "eval_before/mlm_acc": 0.0})
    cfg = load_config(PretrainConfig, None, ["data.sources=[x]", "run_name=two", "train.max_steps=200",
                                             "phase2.max_steps=200", f"output_dir={tmp_path / 'runs'}"])
    pretrain.run(cfg)
    assert fitted == ["two-phase2"] and inits == [str(checkpoint)]
    assert [name for name, _ in started] == ["two", "two-phase2"]
    assert started[0][1]["continued_from"] == "run-of-phase-1" and started[0][1]["continued_at_step"] == "200"
    assert logged["phase1/eval_after/mlm_acc"] == 0.7 and logged["phase1/step"] == 200 and logged["step"] == 100
