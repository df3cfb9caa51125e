"""MLflow's Compare view of a PBT trial: best/<metric> beside the searched values that made it (best_hp/<field>),
not the values a later exploit set (hp/<field>'s last). A real SQLite store; TrialRun._report with stand-ins for the
engine, the loop and Tune's report."""
from types import SimpleNamespace

import pytest
import ray.tune
from mlflow.tracking import MlflowClient

from jobs.config.finetune import FinetuneConfig
from jobs.workers import sweep_trial

METRIC = "select/accuracy"


@pytest.fixture
def trial(tmp_path, monkeypatch):
    """A trial's run, started at lr 1e-4, and report(lr, step, score): one evaluation made under lr."""
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.create_experiment("sweep")
    parent = client.create_run(experiment).info.run_id
    data = sweep_trial.TrialInputs(FinetuneConfig(), [], None, 10, [], {}, client.tracking_uri, experiment, parent, "s")
    run_id = sweep_trial._trial_run(client, data, "t_00000", "t", {"optim.lr": 1e-4})
    monkeypatch.setattr(ray.tune, "report", lambda *a, **k: None)
    run = object.__new__(sweep_trial.TrialRun)
    run.own_best, run.total, run.pred_classes, run.restored_from, run.segment = float("-inf"), 100, 2, "", ""
    run.cfg = SimpleNamespace(train=SimpleNamespace(seed=0))
    run.loop = SimpleNamespace(metric=METRIC, stopped=False)
    run.logger = SimpleNamespace(log=lambda m, step: [client.log_metric(run_id, k, v, step=step) for k, v in m.items()])

    def report(lr: float, step: int, score: float) -> None:
        run.params = {"optim.lr": lr}  # a PBT exploit sets the trial's config anew
        run.engine = SimpleNamespace(optimizer=SimpleNamespace(param_groups=[{"initial_lr": lr, "weight_decay": 0}]))
        run._report({METRIC: score, "step": step}, checkpoint=False, final=False)

    return client, run_id, report


def test_a_pbt_trials_best_score_is_shown_beside_the_lr_that_made_it(trial):
    client, run_id, report = trial
    report(1e-4, 10, 0.70)
    report(3e-4, 20, 0.90)  # after an exploit: its peak
    report(5e-5, 30, 0.85)  # after another
    report(1e-3, 40, 0.90)  # a tie: the first evaluation to reach the best stays it (at_best's idxmax)
    metrics = client.get_run(run_id).data.metrics
    assert metrics[f"best/{METRIC}"] == 0.90
    assert metrics["best_hp/optim.lr"] == pytest.approx(3e-4)
    assert metrics["hp/optim.lr"] == pytest.approx(1e-3)  # the last, as before
    history = [m.value for m in client.get_metric_history(run_id, "best_hp/optim.lr")]
    assert history == pytest.approx([1e-4, 3e-4])  # logged only where the best improved
