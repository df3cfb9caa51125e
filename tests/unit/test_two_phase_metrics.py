"""A two-phase pretraining logs on its parent run (the registered model's) the data the model was last trained on:
`data/examples_train` is phase 2's prepared set, and phase 1's is `phase1/data/examples_train`, as its other
metrics are. Everything but jobs/pretrain.run's own bookkeeping is stubbed: no Ray, no MLflow, no training."""

import contextlib
import copy
import itertools
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
