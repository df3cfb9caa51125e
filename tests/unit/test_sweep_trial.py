"""One sweep trial (jobs/workers/sweep_trial.py) with stand-ins for its model, engine, store session and Tune: a
sweep's max_evals ends a trial and a seed run at that many evaluations, on the whole run's learning-rate schedule; a
PBT exploit is counted on the trial's run apart from its restarts."""

import json
from types import SimpleNamespace

import pytest

from jobs.config.finetune import FinetuneConfig


def test_max_evals_ends_a_seed_run_where_asha_cut_the_trials_on_the_whole_runs_schedule(monkeypatch, tmp_path):
    """max_evals=2 of a 3-epoch config (an evaluation an epoch): ASHA judged the trials at their 2nd evaluation, and
    the champion's seed runs trained all 3 epochs, the model registered trained otherwise than the one chosen. A seed
    run now ends at its 2nd evaluation (final: its checkpoint carries the export), its learning rate decaying over
    the 3 epochs' schedule as the trials' did."""
    import ray.tune

    import jobs.registry.metric_logger
    from jobs.workers import sweep_trial
    from tests.unit.test_finetune_loop import ROWS, TinyEngine, epoch_batches

    class Engine(TinyEngine):
        def release_state(self):
            return {}

    scheduled = []

    def build_engine(model, cfg, total):
        scheduled.append(total)
        return Engine()

    monkeypatch.setattr(sweep_trial, "materialize_files", lambda files, owner: tmp_path)
    monkeypatch.setattr(sweep_trial, "build_model", lambda cfg, init_dir: (None, None))
    monkeypatch.setattr(sweep_trial, "single_process_group", lambda use_gpu: None)
    monkeypatch.setattr(sweep_trial, "build_engine", build_engine)
    monkeypatch.setattr(jobs.registry.metric_logger, "RankZeroLogger", lambda *a: SimpleNamespace(log=print))
    monkeypatch.setattr(ray.tune, "get_checkpoint", lambda: None)
    monkeypatch.setattr(sweep_trial.TrialRun, "_epoch_batches", lambda self, epoch, taken: epoch_batches(epoch, taken))
    monkeypatch.setattr(sweep_trial.TrialRun, "_after_step", lambda self, step: None)  # no fault injected
    monkeypatch.setattr(sweep_trial.TrialRun, "_select_metrics",
                        lambda self: {self.loop.metric: 0.5 + self.loop.step / 100})
    reports = []
    monkeypatch.setattr(sweep_trial.TrialRun, "_report",
                        lambda self, record, checkpoint, final: reports.append((record["step"], checkpoint, final)))
    cfg = FinetuneConfig()
    cfg.train.batch_size, cfg.train.epochs, cfg.train.patience = 4, 3, 0  # 5 steps an epoch, 15 in all
    data = SimpleNamespace(init_files={}, train_features=ROWS, tracking_uri="", checkpoint_every=1, max_evals=2,
                           export=True, phase="seeds")
    run = sweep_trial.TrialRun(cfg, data, {"optim.lr": 1e-4}, "run", "s_00000")
    run.loop.run()
    assert reports == [(5, True, False), (10, True, True)]  # the 2nd evaluation ends it, exported
    assert scheduled == [15]  # the schedule of the whole run: the trials' learning rate at step 10
    data.max_evals = 0  # none: the whole run
    reports.clear()
    sweep_trial.TrialRun(cfg, data, {"optim.lr": 1e-4}, "run", "s_00000").loop.run()
    assert [step for step, _, _ in reports] == [5, 10, 15] and reports[-1][2]


@pytest.fixture
def trial_of(monkeypatch, tmp_path):
    """sweep_trial.trial for trial a_00000 with its training a stand-in: trial_of(config, checkpoint of whose)."""
    import ray.tune
    from mlflow.tracking import MlflowClient

    from jobs.workers import sweep_trial

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.create_experiment("s")
    parent = client.create_run(experiment).info.run_id
    data = sweep_trial.TrialInputs(FinetuneConfig(), [], None, 10, [], {}, f"sqlite:///{tmp_path}/mlflow.db",
                                   experiment, parent, "s")
    from ray.train._internal.storage import StorageContext

    storage = StorageContext(str(tmp_path / "runs"), "s")  # Tune's: it writes the marker a trial looks for first
    monkeypatch.setattr(ray.tune, "get_context", lambda: SimpleNamespace(
        get_trial_id=lambda: "a_00000", get_trial_name=lambda: "a", get_storage=lambda: storage))
    monkeypatch.setattr(sweep_trial, "TrialRun", lambda *a, **k: SimpleNamespace(
        loop=SimpleNamespace(run=lambda: None), close=lambda client: None))

    def trial_of(config: dict, saved_by: str = ""):
        checkpoint = None
        if saved_by:
            folder = tmp_path / f"checkpoint-{saved_by}"
            folder.mkdir(exist_ok=True)
            run = client.search_runs([experiment], "tags.trial_id = 'a_00000'")[0].info.run_id
            (folder / sweep_trial.TRIAL_FILE).write_text(json.dumps(
                {"trial_id": saved_by, "run_id": run if saved_by == "a_00000" else "run-of-b"}))
            checkpoint = ray.tune.Checkpoint.from_directory(str(folder))
        monkeypatch.setattr(ray.tune, "get_checkpoint", lambda: checkpoint)
        sweep_trial.trial(config, data)
        run, = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{parent}'")
        return {k: v for k, v in run.data.tags.items() if k in ("restarts", "pbt.exploits")}

    return trial_of


def test_a_pbt_exploit_is_counted_apart_from_the_trials_restarts(trial_of):
    """Each PBT exploit starts the trial's function again on a donor's checkpoint: it raised the run's `restarts`
    tag, which README says counts process deaths and OOM kills, so a trial that never failed read as restarted three
    times. An exploit (SeededPBT counts them in the trial's config) is `pbt.exploits`; a retry of one (the process
    died before its own next checkpoint: Tune restores the donor's again, with the same count) and a restart from its
    own checkpoint are restarts."""
    from jobs.config.sweep import EXPLOIT

    assert trial_of({"optim.lr": 1e-4}) == {}  # its first start: a new run
    for n in (1, 2, 3):
        tags = trial_of({"optim.lr": 2e-4, EXPLOIT: n}, saved_by="b_00001")
    assert tags == {"pbt.exploits": "3"}
    assert trial_of({"optim.lr": 2e-4, EXPLOIT: 3}, saved_by="b_00001") == {"pbt.exploits": "3", "restarts": "1"}
    assert trial_of({"optim.lr": 2e-4, EXPLOIT: 3}, saved_by="a_00000") == {"pbt.exploits": "3", "restarts": "2"}


def test_a_pbt_exploit_trains_on_with_its_own_learning_rate_and_decay_at_the_donors_step(tmp_path):
    """A donor's optimizer state brings the donor's learning rate and weight decay (ray#36660): restore puts this
    trial's back, at the donor's place on this trial's schedule (step 40 of 100, 10 warming up: 2/3 of the peak), and
    the next scheduler step goes on from there. A real torch optimizer and scheduler; no DeepSpeed engine."""
    import torch
    from ray import tune

    from jobs.config.finetune import FinetuneOptimConfig
    from jobs.engine.ds_config import lr_lambda, param_groups
    from jobs.workers import sweep_trial

    optim = FinetuneOptimConfig(lr=1e-5, weight_decay=0.01)
    factor = lr_lambda(optim.engine_optim(100), 100)
    opt = torch.optim.AdamW(param_groups(torch.nn.Linear(4, 2), optim.weight_decay), lr=optim.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, factor)  # this trial's, from its start (load leaves it)

    def load(d, schedule):  # the donor's optimizer state: its lr at step 40, its peak and decay
        for group in opt.param_groups:
            group.update(lr=3e-5 * factor(40), initial_lr=3e-5, weight_decay=0.1)
        return {"step": 40, "epoch": 0, "epoch_steps": 40, "trial_id": "b_00001"}

    trial = SimpleNamespace(
        engine=SimpleNamespace(load=load, optimizer=opt, scheduler=scheduler),
        loop=SimpleNamespace(load_state=lambda state: setattr(trial.loop, "step", state["step"]), step=0,
                             bad_evals=0, stopped=False, metric="select/f1"),
        logger=SimpleNamespace(restore_counts=lambda d: None, ask=lambda request: [], run_id="run"),
        steps_per_epoch=100, trial_id="a_00000", cfg=SimpleNamespace(optim=optim), exploit=1)
    sweep_trial.TrialRun.restore(trial, tune.Checkpoint.from_directory(str(tmp_path)))
    assert trial.restored_from == "b_00001" and factor(40) == pytest.approx(2 / 3)
    assert [(g["lr"], g["initial_lr"], g["weight_decay"]) for g in opt.param_groups] == [
        (pytest.approx(optim.lr * factor(40)), optim.lr, 0.01), (pytest.approx(optim.lr * factor(40)), optim.lr, 0.0)]
    assert scheduler.get_last_lr() == [pytest.approx(optim.lr * factor(40))] * 2
    opt.step()
    scheduler.step()  # step 41 of this trial's schedule, not of the donor's lr nor from this trial's step 1
    assert [g["lr"] for g in opt.param_groups] == [pytest.approx(optim.lr * factor(41))] * 2
