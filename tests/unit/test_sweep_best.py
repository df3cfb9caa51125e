"""The sweep's best configuration is the one in effect at the best evaluation, not the best trial's last (PBT mutates
a trial's config in place), read from the rows Tune keeps of each report (no Tune run); the champion is a trial that
did not fail; a step reported again after a restart counts once; a trial its own patience ended is finished; each seed
run trains in its seed's global order; a PBT exploit's train/loss window starts empty, not with the donor's steps."""

import dataclasses
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
            params=params, logger=SimpleNamespace(log=lambda *a, **k: None), total=100, pred_classes=2, own_best=0.0,
            restored_from=donor, segment="", cfg=SimpleNamespace(train=SimpleNamespace(seed=0)),
            loop=SimpleNamespace(metric="select/f1", stopped=False),
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


def scored(steps, error=None, **last):
    """A trial's Result from its (step, score) reports, in the order made; `last` added to its last report."""
    from ray.tune import Result

    rows = [{"step": st, "score": sc, "select/f1": sc, "hp/optim.lr": 3e-5, "hp/train.batch_size": 16,
             "restored_from": "", "total_steps": 40, "trial_id": f"t{len(steps)}"} for st, sc in steps]
    rows[-1].update(last)
    return Result(metrics=rows[-1], checkpoint=None, error=error, path="/nonexistent",
                  metrics_dataframe=pd.DataFrame(rows))


def test_the_champion_is_the_best_trial_that_did_not_fail():
    from jobs.search.outcome import champion

    diverged = scored([(10, 0.95), (20, 0.96)], error=FloatingPointError("non-finite loss"))  # best, then NaN
    healthy, low = scored([(10, 0.8), (20, 0.9), (30, 0.85)]), scored([(10, 0.5)])
    assert champion([diverged, healthy, low], FIELDS)[1] == 0.9
    with pytest.raises(RuntimeError, match="no trial ended without an error"):
        champion([diverged], FIELDS)


def test_a_grid_repeated_over_seeds_is_judged_by_each_points_mean_not_its_luckiest_seed():
    from jobs.search.outcome import champion

    fields = {"optim.lr": {"type": "grid", "values": [1e-4, 3e-4]}, "train.seed": {"type": "grid", "values": [1, 2, 3]}}

    def trial(lr, seed, score):
        result = scored([(10, score)])
        result.metrics_dataframe["hp/optim.lr"] = lr
        result.metrics_dataframe["hp/train.seed"] = seed
        return result

    steady = [trial(1e-4, seed, score) for seed, score in ((1, 0.80), (2, 0.81), (3, 0.80))]
    lucky = [trial(3e-4, seed, score) for seed, score in ((1, 0.83), (2, 0.55), (3, 0.52))]
    config, score, _, seeds = champion(lucky + steady, fields)
    # the mean over its 3 seeds, paired with the configuration without a seed: no one trial (not its best seed's,
    # 0.81 with train.seed 2) scored the mean, and the seed runs re-run it over seeds of their own
    assert config == {"optim.lr": 1e-4} and score == pytest.approx(0.81 / 3 + 1.6 / 3) and seeds == 3
    # a configuration whose other seeds failed does not stand on its one survivor
    survivor = trial(1e-3, 1, 0.95)
    failed = [dataclasses.replace(trial(1e-3, seed, 0.5), error=FloatingPointError("nan")) for seed in (2, 3)]
    assert champion([survivor, *failed, *steady], fields)[0]["optim.lr"] == 1e-4
    # a configuration drawn twice (a choice repeated over num_samples) has two trials per seed: its seeds count once
    # each, so it does not win by its draws over one drawn once that scored better on every seed
    twice = [trial(3e-4, seed, 0.72) for seed in (1, 2, 3)] * 2
    once = [trial(1e-3, seed, 0.90) for seed in (1, 2, 3)]
    assert champion(twice + once, fields) == ({"optim.lr": 1e-3}, pytest.approx(0.90), "", 3)
    assert champion(steady, {"optim.lr": fields["optim.lr"]})[1:] == (0.81, "", 0)  # no seed grid: one trial's


def test_a_pbt_exploit_of_a_donor_behind_keeps_the_trials_own_earlier_reports():
    """Trial a peaks at 0.95 at step 20, then exploits a donor's step-10 checkpoint and reports steps 20 and 30 again
    from that model: those replaced its own reports of the steps, and its 0.95 was lost to the champion choice (trial
    c's 0.90 won). A restart within a stretch still counts a step once."""
    from jobs.search.outcome import champion

    def trial(rows):
        result = scored([(step, score) for step, score, _, _ in rows])
        result.metrics_dataframe["segment"] = [segment for _, _, segment, _ in rows]
        result.metrics_dataframe["hp/optim.lr"] = [lr for _, _, _, lr in rows]
        return result

    a = trial([(10, 0.70, "", 5e-5), (20, 0.95, "", 5e-5), (30, 0.60, "", 5e-5), (20, 0.80, "x1", 3e-4),
               (30, 0.85, "x1", 3e-4), (30, 0.86, "x1", 3e-4), (40, 0.86, "x1", 3e-4)])  # 30 again: a restart
    c = trial([(10, 0.90, "", 3e-4), (20, 0.88, "", 3e-4)])
    config, score, _, _ = champion([a, c], FIELDS)
    assert (config["optim.lr"], score) == (5e-5, 0.95)
    from jobs.workers.sweep_trial import by_step

    assert by_step(a.metrics_dataframe)["step"].tolist() == [10, 20, 30, 20, 30, 40]


def test_a_second_exploit_of_the_same_donor_checkpoint_keeps_the_first_tries_reports(monkeypatch, tmp_path):
    """Trial a exploits donor b's step-40 checkpoint with lr 2e-5 (a first attempt reports step 50 and dies; its retry
    reports 50 and 60: 0.80, 0.70), is in the bottom quantile again while b has not perturbed, and PBT clones b@40
    into it once more (the donor's checkpoint of its last perturbation), lr 5e-5 now: 50, 60, 70 (0.72, 0.74, 0.75).
    Both exploits were named b@40, so the second's reports replaced the first's: at_best said 0.75 at lr 5e-5, the
    table's best and evaluations agreed, while the trial's own best was 0.80 at 2e-5. The retry rejoins its try."""
    from ray import tune

    from jobs.search.schedulers import SeededPBT
    from jobs.workers import sweep_trial
    from jobs.config.sweep import EXPLOIT
    from jobs.workers.sweep_trial import at_best, by_step

    monkeypatch.setattr(sweep_trial, "retune", lambda *args: None)  # the engine's optimizer: none here
    sent = []
    monkeypatch.setattr("ray.tune.report", lambda metrics, checkpoint=None: sent.append(metrics))
    donor_state = {"step": 40, "epoch": 0, "epoch_steps": 40, "trial_id": "b"}
    pbt = SeededPBT(0, time_attr="training_iteration", perturbation_interval=2,
                    hyperparam_mutations={"optim.lr": [2e-5, 5e-5]})
    a, b = SimpleNamespace(config={"optim.lr": 1e-5, "train.batch_size": 16}), SimpleNamespace(
        config={"optim.lr": 3e-5, "train.batch_size": 16})

    def process(config):
        """Trial a's process (sweep_trial.trial's TrialRun) started with `config`."""
        params = {k: v for k, v in config.items() if k in sweep_trial.SEARCHABLE}
        return SimpleNamespace(
            engine=SimpleNamespace(load=lambda d, schedule: dict(donor_state),
                                   optimizer=SimpleNamespace(param_groups=[{"initial_lr": params["optim.lr"],
                                                                            "weight_decay": 0.0}])),
            loop=SimpleNamespace(load_state=lambda state: None, step=40, bad_evals=0, stopped=False,
                                 metric="select/f1"),
            logger=SimpleNamespace(restore_counts=lambda d: None, ask=lambda request: [], log=lambda *a, **k: None),
            steps_per_epoch=100, trial_id="a", cfg=SimpleNamespace(optim=None, train=SimpleNamespace(seed=0)),
            best_state=None, own_best=-1.0, segment="", restored_from="", params=params, total=100, pred_classes=2,
            exploit=int(config.get(EXPLOIT, 0)))

    def restored(config):
        """The process restored from b's step-40 checkpoint: an exploit, or Tune's retry of one."""
        trial = process(config)
        sweep_trial.TrialRun.restore(trial, tune.Checkpoint.from_directory(str(tmp_path)))
        return trial

    def report(trial, *scores):
        for step, score in scores:
            sweep_trial.TrialRun._report(trial, {"step": step, "select/f1": score}, checkpoint=False, final=False)
            sent[-1].update(trial_id="a_00000", config=dict(trial.params))

    report(process(a.config), (20, 0.60), (40, 0.65))  # its own, before any exploit
    named = []
    first = [[(50, 0.50)], [(50, 0.80), (60, 0.70)]]  # an attempt that died after step 50, then Tune's retry
    second = [[(50, 0.72), (60, 0.74), (70, 0.75)]]
    for lr, attempts in ((2e-5, first), (5e-5, second)):
        a.config, _ = pbt._get_new_config(a, b)
        a.config["optim.lr"] = lr  # the explored value, as the reviewer's sweep drew it
        segments = []
        for scores in attempts:  # a retry restarts with the config the trial has
            trial = restored(a.config)
            segments.append(trial.segment)
            report(trial, *scores)
        assert len(set(segments)) == 1 and segments[0].startswith("b@40")  # the retry rejoined its exploit's
        named.append(segments[0])
    assert named[0] != named[1]

    result = result_of(sent)
    kept = by_step(result.metrics_dataframe)
    assert kept["step"].tolist() == [20, 40, 50, 60, 50, 60, 70]  # the dead attempt's 50 replaced by its retry's
    assert kept["score"].max() == 0.80 and len(kept) == 7  # the table's best and evaluations columns
    config, score, schedule = at_best(result, FIELDS)
    assert (config["optim.lr"], score) == (2e-5, 0.80) and "b" in schedule


def test_a_trial_its_own_patience_ended_is_finished_not_stopped_by_the_scheduler(monkeypatch):
    from jobs.search.outcome import RUN_STATUS, trial_status

    sent = reports(monkeypatch, (10, 0.9, 3e-5, ""))
    assert sent[-1]["patience_stopped"] is False  # every report says whether the loop's patience ended the trial
    patience = scored([(10, 0.9), (20, 0.8)], patience_stopped=True)  # step 20 of 40
    assert trial_status(patience) == "finished (patience)" and RUN_STATUS["finished (patience)"] == "FINISHED"
    assert trial_status(scored([(10, 0.9), (20, 0.8)], patience_stopped=False)) == "stopped early"
    assert trial_status(scored([(10, 0.9), (40, 0.8)])) == "finished"
    # ASHA stops every trial at max_evals: one that survived every rung to that budget finished, it was not killed
    budget = scored([(10, 0.9), (20, 0.8)], patience_stopped=False, training_iteration=2)
    assert trial_status(budget, max_evals=2) == "finished (max_evals)" == next(
        k for k, v in RUN_STATUS.items() if k == "finished (max_evals)" and v == "FINISHED")
    cut = scored([(10, 0.9)], patience_stopped=False, training_iteration=1)  # stopped at a rung before the budget
    assert trial_status(cut, max_evals=2) == "stopped early"


def test_steps_reported_again_after_a_restart_count_once_and_the_last_report_wins(monkeypatch, tmp_path):
    from jobs import sweep
    from jobs.workers.sweep_trial import at_best

    # checkpoint at 20; reported 30 (0.9), died; restarted from 20, reported 30 again (0.7) and 40 (0.8)
    result = scored([(10, 0.5), (20, 0.6), (30, 0.9), (30, 0.7), (40, 0.8)])
    assert at_best(result, FIELDS)[1] == 0.8  # 0.9 was made by weights the run no longer went on from

    class Client:  # the MLflow calls trial_table makes: one trial run, its status set
        def __init__(self, uri):
            self.ended = {}

        def get_run(self, run_id):
            return SimpleNamespace(info=SimpleNamespace(experiment_id="1"))

        def search_runs(self, experiments, filter_string, max_results, page_token):
            page = type("Page", (list,), {"token": None})  # one page: MLflow's PagedList
            run = SimpleNamespace(data=SimpleNamespace(tags={"trial_id": "t5"}), info=SimpleNamespace(run_id="r"))
            return page([run])

        def set_terminated(self, run_id, status):
            self.ended[run_id] = status

        def set_tag(self, *args):
            pass

    monkeypatch.setattr("mlflow.tracking.MlflowClient", Client)
    cfg = SimpleNamespace(search_space=FIELDS, scheduler="asha", max_evals=0)
    row, = sweep.trial_table(cfg, [result], "sqlite:///unused.db", "parent")
    assert row["evaluations"] == 4 and row["best"] == 0.8 and row["status"] == "finished"
    # a trial that died before its first report (restored by a resumed sweep, or its actor never started): Tune's
    # Result holds its id alone, no config; a row of its own, not an AttributeError that failed every resume
    from ray.tune import Result

    unseen = Result(metrics={"trial_id": "t9"}, checkpoint=None, error=RuntimeError("actor died"), path="/none")
    assert unseen.config is None
    row, = sweep.trial_table(cfg, [unseen], "sqlite:///unused.db", "parent")
    assert row["status"] == "failed" and row["optim.lr"] is None and row["evaluations"] == 0
    from matplotlib.axes import Axes

    plotted, draw = [], Axes.plot
    monkeypatch.setattr(Axes, "plot", lambda self, x, y, **k: plotted.append(list(x)) or draw(self, x, y, **k))
    sweep.plot([result], "select/f1", tmp_path / "trials.png")
    assert plotted == [[10, 20, 30, 40]]


def test_each_seed_run_trains_in_its_own_seeds_order_as_a_one_worker_finetune_with_that_seed():
    """A seed run's spread is the spread of fine-tunes: a trial with train.seed s trains on the batches a one-worker
    fine-tune with seed s does, epoch after epoch, and another seed on others (the trials' local shuffle alone once
    left every seed on the base seed's order, and the seed spread understated the variance)."""
    import numpy as np

    from jobs.loops.train_order import TrainFeatures
    from jobs.workers.finetune_worker import Worker
    from jobs.workers.sweep_trial import TrialRun

    blocks = [{"input_ids": np.arange(n0, n1)[:, None] * np.ones((1, 4), np.int64), "labels": np.arange(n0, n1)}
              for n0, n1 in ((0, 30), (30, 31), (31, 100))]

    def order(cls, seed, epoch, taken=0, **rank):
        cfg = SimpleNamespace(train=SimpleNamespace(batch_size=8, seed=seed))
        owner = SimpleNamespace(cfg=cfg, train=TrainFeatures(blocks), **rank)
        return [b["labels"].tolist() for b in cls._epoch_batches(owner, epoch, taken)]

    for seed in (0, 1003):
        for epoch in (0, 1):
            trial = order(TrialRun, seed, epoch)
            assert trial == order(Worker, seed, epoch, rank=0, world=1)
            assert sorted(sum(trial, [])) == list(range(100))
            assert order(TrialRun, seed, epoch, taken=3) == trial[3:]
    assert order(TrialRun, 0, 0) != order(TrialRun, 1003, 0) and order(TrialRun, 0, 0) != order(TrialRun, 0, 1)


def test_a_seed_run_that_died_unseen_is_ended_failed_not_left_running(monkeypatch, tmp_path):
    """A seed trial killed outright (a lost node, OOM) with its retries spent never reaches its own except block:
    its nested run stayed RUNNING. Tune's verdict ends it, as the search's trials' runs are ended."""
    from mlflow.tracking import MlflowClient
    from ray.tune import Result

    from jobs import sweep
    from jobs.config.finetune import FinetuneConfig
    from jobs.config.sweep import SweepConfig
    from jobs.workers.sweep_trial import TrialInputs

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.create_experiment("seeds")
    parent = client.create_run(experiment).info.run_id
    dead = client.create_run(experiment, tags={"mlflow.parentRunId": parent, "trial_id": "s_00000"}).info.run_id
    cfg = SweepConfig(name="s", finetune=FinetuneConfig())
    cfg.seeds.count, cfg.seeds.max_reseeds = 1, 0
    monkeypatch.setattr(sweep, "fit", lambda *args, **kwargs: [Result(
        metrics={}, checkpoint=None, error=RuntimeError("worker died"), path="/results/trial_s_00000_0",
        metrics_dataframe=None)])
    data = TrialInputs(cfg.finetune, [], None, 10, [], {}, "", "", "p", "s")
    result = SimpleNamespace(seeds={}, mlflow={"parent_run_id": parent})
    sweep.seed_runs(cfg, data, {}, 0.5, result, client, tmp_path, None)
    assert result.seeds["degenerate"][0]["seed"] == "unknown"  # it died before it reported even its config
    run = client.get_run(dead)
    assert run.info.status == "FAILED" and run.data.tags["tune_status"] == "failed"


def test_every_nested_run_is_found_past_one_search_page(tmp_path):
    """One search returns at most 1,000 runs, the newest: a sweep of more trials left its oldest runs RUNNING, their
    rows without a run id. Pages of 2 over 5 runs (and another parent's run, not one of them)."""
    from mlflow.tracking import MlflowClient

    from jobs.search.outcome import nested_runs

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.create_experiment("sweep")
    parent, other = (client.create_run(experiment).info.run_id for _ in range(2))
    ours = {client.create_run(experiment, tags={"mlflow.parentRunId": parent}).info.run_id for _ in range(5)}
    client.create_run(experiment, tags={"mlflow.parentRunId": other})
    found = [r.info.run_id for r in nested_runs(client, parent, page_size=2)]
    assert sorted(found) == sorted(ours)


def test_a_trial_that_recovered_on_a_retry_is_not_tagged_as_failed(tmp_path):
    """A trial's first attempt raised (its run tagged `error`, FAILED) and Tune's retry trained it to its end: the
    run ended FINISHED, tune_status finished, still tagged `error`, which marks a failed trial. The error stays, as
    `last_error`; a trial that failed keeps its `error`."""
    from mlflow.tracking import MlflowClient
    from ray.tune import Result

    from jobs.search.outcome import settle_runs

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.create_experiment("sweep")
    parent = client.create_run(experiment).info.run_id
    runs = {t: client.create_run(experiment, tags={"mlflow.parentRunId": parent, "trial_id": t,
                                                    "error": "RuntimeError: CUDA out of memory"}).info.run_id
            for t in ("a_00000", "a_00001")}
    grid = [Result(metrics={"trial_id": t, "step": 40, "total_steps": 40}, checkpoint=None, path=f"/x/trial_{t}",
                   error=RuntimeError("diverged") if t == "a_00001" else None,
                   metrics_dataframe=pd.DataFrame([{"step": 40, "score": 0.9}])) for t in runs]
    assert [s for _, s, _ in settle_runs(grid, client, parent)] == ["finished", "failed"]
    recovered, failed = (client.get_run(runs[t]) for t in runs)
    assert recovered.info.status == "FINISHED" and "error" not in recovered.data.tags
    assert recovered.data.tags["last_error"] == "RuntimeError: CUDA out of memory"
    assert failed.info.status == "FAILED" and failed.data.tags["error"] == "RuntimeError: CUDA out of memory"
    assert "last_error" not in failed.data.tags


def test_an_earlier_sweeps_seed_runs_without_its_search_are_refused(tmp_path):
    """A sweep whose search folder is gone restored the seed experiments an earlier sweep of its name left beside
    it, and registered their median model under its own best config. Refused, naming them; a search that is there
    (resumed) keeps them, and other sweeps' seed runs are not this one's."""
    from bert_core.config import ConfigError
    from jobs.sweep import refuse_earlier_seed_runs

    (tmp_path / "s-seeds-0").mkdir()
    (tmp_path / "s[1]-seeds-0").mkdir()
    (tmp_path / "s-seeds-ablation").mkdir()  # a sweep named so: its search, not s's seeds
    refuse_earlier_seed_runs(tmp_path / "other")
    refuse_earlier_seed_runs(tmp_path / "s[1]x")
    with pytest.raises(ConfigError, match=r"name 's': .* holds s-seeds-0, the seed re-runs of an earlier sweep"):
        refuse_earlier_seed_runs(tmp_path / "s")
    with pytest.raises(ConfigError, match=r"holds s\[1\]-seeds-0"):
        refuse_earlier_seed_runs(tmp_path / "s[1]")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "tuner.pkl").write_bytes(b"")  # the search is there: Tune restores it, and its seeds with it
    refuse_earlier_seed_runs(tmp_path / "s")


def test_a_resume_names_the_settings_tune_keeps_from_the_saved_experiment():
    """Tuner.restore runs with the saved concurrency and failure budget: a new max_concurrent was silently ignored.
    The trials' CPUs and GPUs are not named: Tune gives restored trials the resumed trainable's resources."""
    from ray import tune

    from jobs.config.sweep import SweepConfig
    from jobs.search.schedulers import kept_settings

    from ray.tune.search import BasicVariantGenerator

    cfg = SweepConfig(name="s", max_concurrent=4, max_trial_failures=1)
    saved = (tune.TuneConfig(max_concurrent_trials=2),
             tune.RunConfig(failure_config=tune.FailureConfig(max_failures=1)))
    assert kept_settings(cfg, *saved) == "max_concurrent 2 (this command: 4)"
    # a random or grid search (PBT's) keeps its limit in its variant generator, the Tune config's None
    generator = (tune.TuneConfig(search_alg=BasicVariantGenerator(max_concurrent=2)), saved[1])
    assert kept_settings(cfg, *generator).startswith("max_concurrent 2 (this command: 4)")
    cfg.max_concurrent = 2
    assert kept_settings(cfg, *saved) == kept_settings(cfg, *generator) == ""


@pytest.mark.parametrize("saved_by", ["b", "a"])
def test_an_exploit_starts_its_own_train_loss_window_and_a_restart_keeps_its_own(monkeypatch, tmp_path, saved_by):
    """A checkpoint carries the loop's train/loss sums since its last progress line (loss_window). Trial a restored
    from donor b's checkpoint (a PBT exploit) averaged b's steps into its first train/loss, logged on a's own run;
    it starts an empty window, as its patience starts anew. Its own restart goes on with the window it saved."""
    from ray import tune

    from jobs.loops.finetune import FinetuneLoop, _Window
    from jobs.workers import sweep_trial

    monkeypatch.setattr(sweep_trial, "retune", lambda *args: None)  # the engine's optimizer: none here
    window = {"loss_sum": 12.5, "finite_steps": 5}
    state = {"step": 40, "epoch": 0, "epoch_steps": 40, "trial_id": saved_by, "loss_window": window, "bad_evals": 2}
    loop = FinetuneLoop(None, None, metric="select/f1", total_steps=100, optim_lr=1e-4, epoch_batches=None,
                        select_metrics=None, report=None)
    trial = SimpleNamespace(
        engine=SimpleNamespace(load=lambda d, schedule: dict(state)), loop=loop, steps_per_epoch=100, trial_id="a",
        logger=SimpleNamespace(restore_counts=lambda d: None, ask=lambda request: [], run_id="run-a"),
        cfg=SimpleNamespace(optim=None), best_state=None, own_best=-1.0, segment="", restored_from="", exploit=1)
    sweep_trial.TrialRun.restore(trial, tune.Checkpoint.from_directory(str(tmp_path)))
    assert loop.step == 40
    assert (loop.loss_window, loop.bad_evals) == ((_Window.EMPTY, 0) if saved_by == "b" else (window, 2))


def test_a_seed_grids_best_is_recorded_as_a_configuration_and_its_mean_not_as_one_trial(monkeypatch, tmp_path):
    """With a train.seed grid the summary, the parent's best_config tag and its best_trial_score paired the mean over
    the seeds (0.80) with the best seed's config, its train.seed included: a trial that scored 0.90, not 0.80. The
    configuration is recorded without a seed, and its score as the mean over its 3 seeds."""
    from mlflow.tracking import MlflowClient

    from jobs import sweep
    from jobs.config.finetune import FinetuneConfig
    from jobs.config.sweep import SweepConfig

    fields = {"optim.lr": {"type": "grid", "values": [1e-4, 3e-4]}, "train.seed": {"type": "grid", "values": [1, 2, 3]}}

    def trial(lr, seed, score):
        result = scored([(10, score)])
        result.metrics_dataframe["hp/optim.lr"], result.metrics_dataframe["hp/train.seed"] = lr, seed
        return result

    grid = [trial(1e-4, s, sc) for s, sc in ((1, 0.80), (2, 0.90), (3, 0.70))]
    grid += [trial(3e-4, s, 0.75) for s in (1, 2, 3)]
    monkeypatch.setattr(sweep, "fit", lambda *args, **kwargs: grid)
    monkeypatch.setattr(sweep, "trial_table", lambda *args: [])
    monkeypatch.setattr(sweep, "plot", lambda grid, metric, path: path.write_bytes(b""))
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    parent = client.create_run(client.create_experiment("s", artifact_location=str(tmp_path / "art"))).info.run_id
    cfg = SweepConfig(name="s", finetune=FinetuneConfig(), search_space=fields, num_samples=1)
    cfg.seeds.count = 0
    result = sweep.search_and_seeds(cfg, cfg.finetune, None, SimpleNamespace(summary=dict),
                                    f"sqlite:///{tmp_path}/mlflow.db", parent, tmp_path)
    run = client.get_run(parent)
    assert (result.best_config, result.best_seeds) == ({"optim.lr": 1e-4}, 3)
    assert run.data.tags["best_config"] == "{'optim.lr': 0.0001}"
    assert run.data.metrics == {"best_config_mean_score": pytest.approx(0.80), "best_config_seeds": 3}
    line = sweep.summary(result, "sqlite:///m.db", "", tmp_path).splitlines()[3]
    assert line == f"best config      {result.metric} 0.8000 (the mean over 3 seeds) with {{'optim.lr': 0.0001}}"
