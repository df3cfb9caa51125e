"""A sweep's search on the driver: Tune's trial schedulers and search algorithms, as the sweep config makes them.

PBT mutates only inside the search space (a choice moves among its values, a float range is clipped to its bounds)
and draws from a generator of its own, seeded by pbt.seed; ASHA stops trials at rungs of the evaluations a trial
makes, and rebuilds its rungs from the trials' reports when a sweep is resumed (Tune restores a scheduler as it
was made, empty). Used by jobs/sweep.py; the trial itself is jobs/workers/sweep_trial.py.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from ray import tune
from ray.air.constants import EXPR_RESULT_FILE
from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining
from ray.tune.search.optuna import OptunaSearch

from jobs.config.sweep import EXPLOIT, SweepConfig, max_evaluations


def scheduler(cfg: SweepConfig, train_features: int):
    """The search's trial scheduler: ASHA over the evaluations a trial makes (max_evaluations), or seeded PBT
    mutating inside the search space."""
    if cfg.scheduler == "asha":
        return ResumableASHA(time_attr="training_iteration", max_t=max_evaluations(cfg, train_features),
                             grace_period=cfg.asha.grace_period, reduction_factor=cfg.asha.reduction_factor)
    p = cfg.pbt
    return SeededPBT(p.seed, time_attr="training_iteration", perturbation_interval=p.perturbation_interval,
                     quantile_fraction=p.quantile_fraction, resample_probability=p.resample_probability,
                     **pbt_mutations(cfg))


def pbt_mutations(cfg: SweepConfig) -> dict:
    """PBT's hyperparam_mutations and custom_explore_fn, inside the search space: a choice is its list of values
    (explore moves to a neighbouring value or resamples one), a float range a resampler with a clip to [low, high]
    (explore multiplies by 1.2 or 0.8, which a Tune domain would let leave the range)."""
    mutations, bounds = {}, {}
    for key in cfg.pbt.mutate:
        spec = cfg.search_space[key]
        if spec["type"] == "choice":
            mutations[key] = list(spec["values"])
        else:
            mutations[key] = Resample(spec["low"], spec["high"], log=spec["type"] == "loguniform")
            bounds[key] = (spec["low"], spec["high"])
    return {"hyperparam_mutations": mutations, "custom_explore_fn": Clip(bounds) if bounds else None}


def unequal_training(cfg: SweepConfig) -> str:
    """Why the search's scheduler compares unequal training ("" if it does not): ASHA and PBT compare trials at equal
    evaluation counts. train.epochs searched sets each trial's learning-rate schedule, so at a count a shorter run
    is further through its own, whatever the evaluation cadence (per epoch, a 1-epoch trial's first evaluation is
    at its schedule's end, a 3-epoch trial's a third through); train.batch_size searched makes every
    eval_every_steps steps unequal rows seen, which per-epoch evaluation makes equal."""
    why, every = [], cfg.finetune.train.eval_every_steps
    if "train.epochs" in cfg.search_space:
        why.append("train.epochs searched: at an evaluation count a shorter run is further through its learning-rate "
                   "schedule, at its end with its rate decayed while longer runs are partway; set "
                   "finetune.train.epochs and search the rest" + (
                       ", or raise asha.grace_period to the evaluations the longest trial makes, so that ASHA stops "
                       "no trial early and each is judged at its best" if cfg.scheduler == "asha" else ""))
    if "train.batch_size" in cfg.search_space and every:
        why.append(f"train.batch_size searched with finetune.train.eval_every_steps={every}: a smaller batch has seen "
                   "fewer rows at each evaluation; evaluate per epoch (eval_every_steps=0) to compare equal rows")
    if not why:
        return ""
    cut = "stops trials" if cfg.scheduler == "asha" else "replaces trials with copies of others"
    return (f"{cfg.scheduler.upper()} compares trials at equal evaluation counts, so it {cut} for being at "
            f"another point of their training, not for being worse: " + "; ".join(why))


def optuna_storage(path: Path) -> str:
    """Where a sweep's Optuna study lives: SQLite beside Tune's results (optuna-dashboard opens it)."""
    return f"sqlite:///{path / 'optuna.db'}"


def tune_space(cfg: SweepConfig) -> dict:
    """search_space -> Ray Tune domains, keyed by the dotted field names."""
    out = {}
    for key, spec in cfg.search_space.items():
        kind = spec["type"]
        if kind == "loguniform":
            out[key] = tune.loguniform(float(spec["low"]), float(spec["high"]))
        elif kind == "uniform":
            out[key] = tune.uniform(float(spec["low"]), float(spec["high"]))
        elif kind == "choice":
            out[key] = tune.choice(spec["values"])
        else:
            out[key] = tune.grid_search(spec["values"])
    return out


def search_algorithm(cfg: SweepConfig, path: Path):
    """Optuna's TPE (its study in SQLite beside the results) or Tune's random/grid variants, seeded."""
    if cfg.search == "optuna":
        import optuna

        path.mkdir(parents=True, exist_ok=True)
        # a new search (Tune found nothing to restore): a study left by an attempt that died before Tune saved its
        # state would hand TPE trials of that attempt, some forever RUNNING
        (path / "optuna.db").unlink(missing_ok=True)
        sampler = optuna.samplers.TPESampler(seed=cfg.search_seed, n_startup_trials=cfg.optuna.startup_trials)
        return BestScoreOptuna(sampler=sampler, study_name=cfg.name,
                               storage=optuna.storages.RDBStorage(optuna_storage(path)))
    from ray.tune.search import BasicVariantGenerator

    # constant_grid_search: a sample's random values held over the grid's points; Tune's default draws new ones at
    # each point, so a train.seed grid repeated no configuration over seeds (each seed had its own optim.lr, and the
    # champion's "mean over seeds" was one trial's score: the luckiest)
    return BasicVariantGenerator(random_state=cfg.search_seed, max_concurrent=cfg.max_concurrent,
                                 constant_grid_search=True)


@dataclass
class Resample:
    """A uniform (log-uniform) draw from [low, high] with Python's `random`, which SeededPBT seeds."""

    low: float
    high: float
    log: bool = False

    def __call__(self) -> float:
        if self.log:
            return math.exp(random.uniform(math.log(self.low), math.log(self.high)))
        return random.uniform(self.low, self.high)


@dataclass
class Clip:
    """PBT's custom_explore_fn: an explored float back inside its field's declared [low, high]."""

    bounds: dict  # field -> (low, high)

    def __call__(self, config: dict) -> dict:
        for key, (low, high) in self.bounds.items():
            config[key] = min(max(float(config[key]), low), high)
        return config


class SeededPBT(PopulationBasedTraining):
    """PopulationBasedTraining whose random choices (the donor among the top trials, explore's resample and
    perturbation) come from a generator of its own, seeded by pbt.seed: PBT draws from Python's global `random`,
    which is swapped for this scheduler's state only while it decides. A resumed sweep restarts it from the seed
    (Tune restores a scheduler as it was made)."""

    def __init__(self, seed: int, **kwargs):
        super().__init__(**kwargs)
        self.rng_state, self._deciding = random.Random(seed).getstate(), False

    def _own_random(self, decide, *args):
        if self._deciding:  # a decision within a decision: already on this scheduler's state
            return decide(*args)
        outer, self._deciding = random.getstate(), True
        random.setstate(self.rng_state)
        try:
            return decide(*args)
        finally:
            self.rng_state, self._deciding = random.getstate(), False
            random.setstate(outer)

    def on_trial_add(self, tune_controller, trial) -> None:
        """A trial restored on a resumed sweep, or requeued by Tune's retry, counts its perturbation interval from
        its latest checkpoint's iteration, where it resumes: PBT's new state for it counts from 0, so with
        checkpoint_every > 1 it perturbed between the trial's checkpoints, where a function trainable's save has
        none to give, and PBT skipped every exploit (a random search)."""
        super().on_trial_add(tune_controller, trial)
        latest = trial.run_metadata.checkpoint_manager.latest_checkpoint_result
        at = latest.metrics.get(self._time_attr) if latest is not None and latest.metrics else None
        if at is not None:
            state = self._trial_state[trial]
            state.last_perturbation_time = state.last_train_time = at

    def _checkpoint_or_exploit(self, *args):
        return self._own_random(super()._checkpoint_or_exploit, *args)

    def _get_new_config(self, trial, trial_to_clone):
        config, operations = self._own_random(super()._get_new_config, trial, trial_to_clone)
        # the exploiting trial's count of exploits, over the donor's that its config was copied from: the trial names
        # its reports after this exploit by it, apart from those after an earlier exploit of the same checkpoint
        config[EXPLOIT] = int(trial.config.get(EXPLOIT, 0)) + 1
        return config, operations


class ResumableASHA(ASHAScheduler):
    """ASHAScheduler that, on a resumed sweep, rebuilds its rungs from each restored trial's reports (Tune restores
    the scheduler as it was made, empty): a trial restored with results is replayed into its bracket, so the cutoffs
    a resumed trial meets count the trials that reached a rung before the interrupt."""

    def on_trial_add(self, tune_controller, trial) -> None:
        super().on_trial_add(tune_controller, trial)
        bracket = self._trial_info[trial.trial_id]
        for result in reported(trial):
            if self._time_attr in result and result.get(self._metric) is not None:
                bracket.on_result(trial, result[self._time_attr], self._metric_op * result[self._metric])


def reported(trial) -> list[dict]:
    """A restored trial's reports, as Tune's JSON logger persisted them to result.json in the trial's folder under
    the sweep's storage (none for a new trial)."""
    if not trial.has_reported_at_least_once:
        return []
    path = Path(trial.path, EXPR_RESULT_FILE)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def resume_warning(restored) -> str:
    """What a resumed search's scheduler (`restored`: the one Tune saved with the experiment, as it was made) keeps
    of its decisions before the interrupt."""
    resumes = "; trials resume from their last checkpoints"
    if isinstance(restored, ResumableASHA):
        return "ASHA's rungs are rebuilt from the restored trials' reports" + resumes
    if isinstance(restored, SeededPBT):
        return ("PBT's history starts over: its trials' scores and quantiles are forgotten, each trial's next "
                "perturbation counts from its last checkpoint, and its random choices restart from pbt.seed" + resumes)
    return (f"this sweep was begun with an earlier version's {type(restored).__name__}, which it resumes with as "
            "saved (ASHA: no rungs rebuilt, its max_t of then; PBT: unseeded, perturbing by Tune's domains); start a "
            "new sweep name for the current scheduler" + resumes)



def kept_settings(cfg: SweepConfig, tune_config, run_config) -> str:
    """What Tune's restore keeps from the saved experiment that this command set otherwise ("" for nothing): the
    sweep's identity leaves these out (jobs/registry/sweep_parent.RESOURCES), but Tuner.restore runs with the saved
    concurrency and failure budget. Not cpus_per_trial and gpus_per_trial: Tune gives restored trials the resources
    of this command's trainable, as the capacity check assumes."""
    concurrent = tune_config.max_concurrent_trials  # a random or grid search keeps its limit in its generator
    saved = {"max_concurrent": concurrent if concurrent is not None else getattr(tune_config.search_alg,
                                                                                  "max_concurrent", None),
             "max_trial_failures": run_config.failure_config.max_failures if run_config.failure_config else None}
    now = {"max_concurrent": cfg.max_concurrent, "max_trial_failures": cfg.max_trial_failures}
    kept = [f"{k} {saved[k]} (this command: {now[k]})" for k in saved if saved[k] is not None and saved[k] != now[k]]
    return "; ".join(kept)



class BestScoreOptuna(OptunaSearch):
    """OptunaSearch telling TPE each trial's best evaluation ("best_score", the trial's own best report), not its
    last: Tune hands a finished trial's last result to the search, and the sweep ranks trials by their peak, so a
    trial that peaked at 0.92 and ended at 0.85 (every patience-stopped trial ends below its best) taught TPE 0.85
    and steered it away from what the sweep would have chosen."""

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if result and result.get("best_score") is not None and isinstance(self.metric, str):
            result = {**result, self.metric: result["best_score"]}
        super().on_trial_complete(trial_id, result, error)
