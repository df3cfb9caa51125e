"""The sweep's best configuration is the one in effect at the best evaluation, not the best trial's last (PBT mutates
a trial's config in place), read from the rows Tune keeps of each report (no Tune run)."""

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

FIELDS = {"optim.lr": {"type": "loguniform", "low": 1e-5, "high": 1e-3},
          "train.batch_size": {"type": "choice", "values": [8, 16]}}


def reports(monkeypatch, *steps):
    """What a trial reports at each evaluation (jobs/workers/sweep_trial.TrialRun._report, through a stub trial),
    with Tune's own fields: its id and the trainable's config of the moment (ray.tune.Trainable)."""
    from jobs.workers import sweep_trial

    sent = []
    monkeypatch.setattr("ray.tune.report", lambda metrics, checkpoint=None: sent.append(metrics))
    for step, score, lr, donor in steps:
        params = {"optim.lr": lr, "train.batch_size": 16}
        trial = SimpleNamespace(
            params=params, logger=SimpleNamespace(log=lambda *a, **k: None), total=100, pred_classes=2,
            restored_from=donor, cfg=SimpleNamespace(train=SimpleNamespace(seed=0)),
            loop=SimpleNamespace(metric="select/f1"),
            engine=SimpleNamespace(optimizer=SimpleNamespace(param_groups=[{"initial_lr": lr, "weight_decay": 0.01}])))
        sweep_trial.TrialRun._report(trial, {"step": step, "select/f1": score}, checkpoint=False, final=False)
        sent[-1].update(trial_id="a_00000", config=params)
    return sent


def result_of(rows, hp=True):
    """A Result as Tune's ResultGrid builds it: the last report's metrics, every report flattened with "/" as
    ExperimentAnalysis reads result.json (so Tune's config becomes config/<field> columns)."""
    from ray.tune import Result

    df = pd.json_normalize(rows, sep="/")
    if not hp:  # reports from before a trial reported its hyperparameters: only Tune's config/ columns
        df = df.drop(columns=[c for c in df if c.startswith("hp/")])
    return Result(metrics=rows[-1], checkpoint=None, error=None, path="/nonexistent", metrics_dataframe=df)


def test_a_trial_perturbed_after_its_peak_keeps_the_config_of_its_peak(monkeypatch):
    from jobs.workers.sweep_trial import at_best

    # peaks at 0.91 with lr 3e-5; PBT then perturbs it to 1.2e-4 and it degrades: Result.config says 1.2e-4
    result = result_of(reports(monkeypatch, (10, 0.80, 3e-5, ""), (20, 0.91, 3e-5, ""), (30, 0.70, 1.2e-4, ""),
                               (40, 0.65, 1.2e-4, "")))
    assert result.config["optim.lr"] == 1.2e-4 and result.metrics["hp/optim.lr"] == 1.2e-4  # each report says its own
    config, score, schedule = at_best(result, FIELDS)
    assert config == {"optim.lr": 3e-5, "train.batch_size": 16} and score == 0.91
    assert type(config["train.batch_size"]) is int and type(config["optim.lr"]) is float  # plain, for the seed runs
    assert schedule == ""  # trained with that config from its first report on its own weights


def test_a_pbt_winner_reached_through_a_schedule_is_named_so(monkeypatch):
    from jobs.sweep import SweepResult, summary
    from jobs.workers.sweep_trial import at_best

    # starts at 1e-5; exploits trial b_00001 at step 20 with a perturbed 5e-5; best at 30, perturbed again after
    result = result_of(reports(monkeypatch, (10, 0.60, 1e-5, ""), (20, 0.75, 5e-5, "b_00001"),
                               (30, 0.88, 5e-5, "b_00001"), (40, 0.80, 2e-4, "b_00001")))
    config, score, schedule = at_best(result, FIELDS)
    assert config["optim.lr"] == 5e-5 and score == 0.88
    assert "in effect at step 30" in schedule and "started with {'optim.lr': 1e-05" in schedule
    assert "b_00001" in schedule
    line = summary(SweepResult("s", "select/f1", config, score, [], "t.csv", "t.png", best_schedule=schedule,
                               mlflow={"parent_run_id": "p"}), "sqlite:///m.db", "", Path("/tmp"))
    assert f"with {config} (PBT schedule: in effect at step 30" in line


def test_reports_without_hp_fall_back_to_tunes_config_columns_and_neither_is_an_error(monkeypatch):
    from jobs.workers.sweep_trial import at_best

    result = result_of(reports(monkeypatch, (10, 0.9, 3e-5, ""), (20, 0.5, 1e-4, "")), hp=False)
    assert at_best(result, FIELDS)[0]["optim.lr"] == 3e-5
    result.metrics_dataframe = result.metrics_dataframe.drop(columns=["config/optim.lr"])
    with pytest.raises(ValueError, match="trial a_00000: report 0 carries neither hp/optim.lr nor config/optim.lr"):
        at_best(result, FIELDS)
