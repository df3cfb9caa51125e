"""A run's curves.png (jobs/registry/curves.py): every series that changed is drawn, losses first, and what is not
drawn is named; a two-phase pretraining draws each phase's run, where its workers logged its steps. Real SQLite
stores; the panels drawn are read off matplotlib's set_title."""

import copy
from types import SimpleNamespace

import matplotlib.axes
import matplotlib.figure
import pytest

from jobs.registry import tracking

# what a pretraining worker logs at each logging step (window summary, data position, GPU memory), and at evaluations
TRAIN = ["loss", "mlm_loss", "mlm_acc", "mlm_tokens", "nsp_loss", "nsp_acc", "tokens_per_s", "samples_per_s",
         "data_wait_share", "nonfinite_skipped", "mfu", "epoch", "lr", "grad_norm", "nonfinite_total", "rollbacks",
         "skipped_steps", "gpu_mem_gb"]
CONSTANT = {"train/nonfinite_skipped", "train/nonfinite_total", "train/rollbacks", "train/skipped_steps",
            "train/epoch"}


@pytest.fixture
def drawn(monkeypatch):
    """The panels' titles and the figure's text, as log_curves draws them."""
    seen = SimpleNamespace(titles=[], text=[])
    title, text = matplotlib.axes.Axes.set_title, matplotlib.figure.Figure.text
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title",
                        lambda self, t, *a, **k: (seen.titles.append(t), title(self, t, *a, **k))[1])
    monkeypatch.setattr(matplotlib.figure.Figure, "text",
                        lambda self, x, y, s, *a, **k: (seen.text.append(s), text(self, x, y, s, *a, **k))[1])
    return seen


def _run(tmp_path, series: dict) -> tuple[str, str]:
    """A run with `series` (name -> values at steps 1, 2, ...) logged over steps."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("curves", (tmp_path / "art").as_uri())).info.run_id
    points = [Metric(k, float(v), 0, step) for k, values in series.items() for step, v in enumerate(values, 1)]
    for i in range(0, len(points), 1000):
        client.log_batch(run_id, metrics=points[i:i + 1000])
    return uri, run_id


def test_a_pretraining_runs_losses_and_accuracies_are_drawn_and_its_constant_counters_named(tmp_path, drawn):
    """The first 12 series by name were drawn: counters and data_wait_share, never train/mlm_loss, mlm_acc, nsp_*
    or tokens_per_s, of the 23 a pretraining run logs over steps."""
    series = {f"train/{k}": [0.0] * 10 if f"train/{k}" in CONSTANT else [10.0 - s for s in range(10)] for k in TRAIN}
    series.update({f"eval/{k}": [1.0, 2.0] for k in ("mlm_loss", "mlm_acc", "mlm_tokens", "nsp_loss", "nsp_acc")})
    uri, run_id = _run(tmp_path, series)
    assert tracking.log_curves(uri, run_id) == tracking.CURVES
    assert set(drawn.titles) == set(series) - CONSTANT  # every series that changed, each once
    assert len(drawn.titles) == len(set(drawn.titles)) == 18
    losses = [t for t in drawn.titles if "loss" in t]
    assert drawn.titles[:len(losses)] == losses and "train/loss" in losses  # losses first, then the scores
    assert drawn.titles[len(losses):len(losses) + 3] == ["eval/mlm_acc", "eval/nsp_acc", "train/mlm_acc"]
    (note,) = drawn.text
    assert all(f"{k}=0" in note.replace("\n", " ") for k in CONSTANT)  # named, with their value, not drawn


def test_series_past_the_panels_are_named_in_the_figure_and_on_the_console(tmp_path, drawn, capsys):
    """A NER run with many entity types: select/f1_<type> filled the first panels by name and train/loss, its
    curve, was never drawn."""
    series = {f"select/f1_{t}": [0.1, 0.2, 0.3] for t in ("DATE", "EVENT", "FAC", "GPE", "LAW", "LOC", "MONEY",
                                                         "NORP", "ORG", "PERSON", "PRODUCT", "QUANTITY")}
    series.update({"select/accuracy": [0.5, 0.6, 0.7], "select/loss": [2.0, 1.5, 1.0], "train/loss": [3.0, 2.0, 1.0],
                   "train/lr": [1e-5, 2e-5, 3e-5]})
    uri, run_id = _run(tmp_path, series)
    assert tracking.log_curves(uri, run_id, max_panels=8) == tracking.CURVES
    assert drawn.titles[:2] == ["select/loss", "train/loss"] and len(drawn.titles) == 8
    over = sorted(set(series) - set(drawn.titles))
    assert "train/lr" in over and len(over) == 8
    note, said = " ".join(drawn.text).replace("\n", " "), capsys.readouterr().out
    assert all(k in note and k in said for k in over)


def test_a_two_phase_pretraining_draws_each_phases_curves(tmp_path, monkeypatch):
    """The workers log each phase's steps to its child run; only the parent, which holds final metrics alone, was
    drawn (finish_run): no curves.png anywhere. Everything but the MLflow runs is stubbed: no Ray, no training."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    import pipelines.prepare
    from jobs import pretrain
    from jobs.config.io import load_config
    from jobs.config.pretrain import PretrainConfig
    from jobs.runtime import resubmit

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)

    def fit(cfg, prepared, run_id):  # a phase's workers: rank 0 logs its steps to the phase's run
        client.log_batch(run_id, metrics=[Metric("train/loss", 5.0 - s, 0, s) for s in range(1, 5)])
        return SimpleNamespace(metrics={"eval_after/mlm_acc": 0.5}, checkpoint=SimpleNamespace(path=str(tmp_path)))

    for name, stub in {"check_environment": lambda self: None}.items():
        monkeypatch.setattr(PretrainConfig, name, stub)
    for name, stub in {"prefer_loopback": lambda: None, "refuse_finished_before_ray": lambda cfg: None,
                       "init_ray": lambda: "", "ensure_capacity": lambda demand: None,
                       "refuse_sqlite_across_machines": lambda uri: None, "data_metrics": lambda manifest: {},
                       "resolve_config": lambda cfg, tokenizer_dir: copy.deepcopy(cfg), "_continues": lambda *a: None,
                       "_lineage": lambda prepared: {"lineage.job": "pretrain"}, "_fit": fit,
                       "_report_ignored": lambda cfg: 0, "fetch_release": lambda *a: None,
                       "summary": lambda *a: ""}.items():
        monkeypatch.setattr(pretrain, name, stub)
    monkeypatch.setattr(pipelines.prepare, "prepare", lambda data: SimpleNamespace(
        path=str(tmp_path / "prepared"), tokenizer_dir=str(tmp_path / "tok"), manifest={}))
    monkeypatch.setattr(resubmit, "refuse_phase1_past_hand_off", lambda cfg: None)
    monkeypatch.setattr(tracking, "finish_run", lambda *a, **k: {})  # the parent's model: not this test's
    cfg = load_config(PretrainConfig, None, ["data.sources=[x]", "run_name=two", "train.max_steps=200",
                                             "phase2.max_steps=200", f"tracking.tracking_uri={uri}",
                                             f"tracking.artifact_location={tmp_path / 'art'}",
                                             f"output_dir={tmp_path / 'runs'}"])
    pretrain.run(cfg)
    phases = client.search_runs([client.get_experiment_by_name(cfg.tracking.experiment).experiment_id],
                                "tags.phase != ''")
    assert sorted(r.data.tags["phase"] for r in phases) == ["1", "2"]
    for phase in phases:
        assert phase.info.status == "FINISHED"
        assert tracking.CURVES in [a.path for a in client.list_artifacts(phase.info.run_id)]
