"""The sweep job's configuration: a fine-tuning config (the trials' base) plus the search and its scheduling.

    finetune_config: ../finetune/pkgdocs.yaml   # the base trial config (relative to this file)
    finetune: {init: ...}                       # overrides on top of it
    search_space:
      optim.lr: {type: loguniform, low: 1.0e-5, high: 1.0e-3}
      train.batch_size: {type: choice, values: [8, 16]}

The whole tree (the fine-tuning config included) is validated before any Ray work, with errors naming
the field and the allowed values. jobs/search/schedulers.py turns the validated space into Ray Tune domains.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from bert_core.config import ConfigError
from jobs.config.io import as_number, deep_merge, from_dict, parse_overrides, read_yaml, to_dict, yaml_load
from jobs.config.finetune import FinetuneConfig, FinetuneTrainConfig
from jobs.config.sections import check_seed
from jobs.runtime.faults import FaultsConfig

# The fine-tuning fields a sweep may search, with their types.
SEARCHABLE = {"optim.lr": float, "optim.weight_decay": float, "optim.warmup_ratio": float,
              "train.batch_size": int, "train.epochs": int, "train.seed": int}
DISTRIBUTIONS = ("loguniform", "uniform", "choice", "grid")
# Set in a trial's config by the PBT scheduler at each exploit (jobs/search/schedulers.SeededPBT): the n-th exploit of
# this trial. Tune retries a trial with the config it has, so a retry of an exploit sees the same n and the next
# exploit a new one; the trial names the reports after an exploit by it (jobs/workers/sweep_trial.TrialRun.restore)
EXPLOIT = "pbt_exploit"
SCHEDULERS = ("asha", "pbt")
SEARCHES = ("random", "grid", "optuna")
# Fields PBT may not mutate: a trial restored from a donor's checkpoint goes on from the donor's data position and
# learning-rate schedule, which these fields define (the field -> why)
PBT_FIXED = {"train.batch_size": "the donor's epoch position counts batches of its own size",
             "train.epochs": "it sets the total steps, and with them the learning-rate schedule in progress",
             "train.seed": "it sets the data order the donor's epoch position is a place in"}


@dataclass
class AshaConfig:
    grace_period: int = 1  # evaluations every trial gets before it can be stopped
    reduction_factor: float = 2.0  # 1/reduction_factor of the trials go on at each rung


@dataclass
class PbtConfig:
    perturbation_interval: int = 1  # evaluations between exploit/explore decisions
    quantile_fraction: float = 0.25  # the bottom share copies a top-share trial's checkpoint
    resample_probability: float = 0.25  # explore: resample from the space instead of perturbing
    mutate: list[str] = field(default_factory=lambda: ["optim.lr", "optim.weight_decay"])  # searched fields PBT changes
    seed: int = 0  # seeds PBT's own random choices: which top trial to copy, how to perturb (jobs/search/schedulers.SeededPBT)


@dataclass
class OptunaConfig:
    # TPE's random start-up: the first this-many trials are sampled at random, the rest by TPE from the scores so
    # far (Optuna's default 10; a sweep of fewer trials than this never leaves random search)
    startup_trials: int = 10


@dataclass
class SeedsConfig:
    count: int = 5  # the best configuration is re-run over this many seeds; 0 skips the re-run (and registration)
    first_seed: int = 1000  # seeds first_seed, first_seed + 1, ...; a degenerate run gets the next unused one
    max_reseeds: int = 3  # at most this many extra runs replace degenerate ones


@dataclass
class SweepConfig:
    name: str = ""  # Tune experiment + MLflow parent run; the same name again resumes an interrupted sweep
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)  # every trial starts from this
    search_space: dict = field(default_factory=dict)  # searched field -> {type, low, high} or {type, values}
    scheduler: str = "asha"  # asha | pbt
    search: str = "random"  # random | grid | optuna (TPE)
    num_samples: int = 8  # trials (search=grid or grid fields alone: 1; a train.seed grid repeats over seeds)
    max_concurrent: int = 2  # trials running at once
    cpus_per_trial: float = 1.0  # each trial fine-tunes in-process on one worker
    gpus_per_trial: float = 0.0
    # evaluations per trial (ASHA's max_t), and per seed run: both stop there, their learning-rate schedule the whole
    # run's, so that what ships is what was chosen; 0 = the most a trial of the space makes (max_evaluations)
    max_evals: int = 0
    # evaluations between a trial's checkpoints (weights + optimizer: 3x the model), and always the last one;
    # PBT exploits only checkpoints, so pbt.perturbation_interval must be a multiple of it
    checkpoint_every: int = 1
    asha: AshaConfig = field(default_factory=AshaConfig)
    pbt: PbtConfig = field(default_factory=PbtConfig)
    optuna: OptunaConfig = field(default_factory=OptunaConfig)
    seeds: SeedsConfig = field(default_factory=SeedsConfig)
    search_seed: int = 0  # random/Optuna sampling seed
    # a trial whose process dies (a lost node, an OOM kill) or that raises restarts from its last checkpoint
    # (from scratch before its first) this many times before it counts as failed
    max_trial_failures: int = 1
    faults: FaultsConfig = field(default_factory=FaultsConfig)  # testing only: faults.kill_trial_at_step

    def validate(self) -> "SweepConfig":
        check_name("name", self.name)
        if self.scheduler not in SCHEDULERS:
            raise ConfigError(f"scheduler must be one of {SCHEDULERS}, got {self.scheduler!r}")
        if self.search not in SEARCHES:
            raise ConfigError(f"search must be one of {SEARCHES}, got {self.search!r}")
        for name in ("num_samples", "max_concurrent"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.cpus_per_trial <= 0 or not 0 <= self.gpus_per_trial <= 1:
            raise ConfigError(f"cpus_per_trial must be > 0 and gpus_per_trial in [0, 1] (a trial trains in one "
                              f"process on one device), got {self.cpus_per_trial:g} and {self.gpus_per_trial:g}")
        if (self.gpus_per_trial > 0) != self.finetune.scaling.use_gpu:  # a trial trains where scaling.use_gpu says
            raise ConfigError(f"gpus_per_trial={self.gpus_per_trial:g} with finetune.scaling.use_gpu="
                              f"{str(self.finetune.scaling.use_gpu).lower()}: a trial would reserve a GPU and train "
                              "on CPU, or train on a GPU it never reserved; set both (gpus_per_trial > 0 and "
                              "finetune.scaling.use_gpu=true) or neither")
        if self.checkpoint_every < 1:
            raise ConfigError(f"checkpoint_every must be >= 1, got {self.checkpoint_every}")
        for name in ("max_evals", "max_trial_failures"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.asha.grace_period < 1 or self.asha.reduction_factor <= 1:
            raise ConfigError("asha.grace_period must be >= 1 and asha.reduction_factor > 1")
        if self.scheduler == "pbt" and self.max_evals:  # it only loosened the perturbation_interval check below
            raise ConfigError(f"max_evals is ASHA's budget (its max_t), and PBT's trials train to their end: set "
                              f"max_evals=0 with scheduler=pbt, got {self.max_evals}")
        if self.scheduler == "asha" and self.max_evals and self.asha.grace_period > self.max_evals:
            raise ConfigError(f"asha.grace_period ({self.asha.grace_period}) must be <= max_evals ({self.max_evals}): "
                              "no trial may be stopped before it has made that many evaluations")
        if self.scheduler == "pbt" and self.search == "optuna":
            raise ConfigError("scheduler pbt cannot run with search optuna: PBT makes new configurations itself "
                              "(exploit and explore) and Ray Tune refuses a search algorithm beside it; use search "
                              "random or grid, or scheduler asha")
        p = self.pbt
        if p.perturbation_interval < 1 or not 0 < p.quantile_fraction <= 0.5 or not 0 <= p.resample_probability <= 1:
            raise ConfigError("pbt.perturbation_interval must be >= 1, pbt.quantile_fraction in (0, 0.5], "
                              "pbt.resample_probability in [0, 1]")
        if self.optuna.startup_trials < 1:
            raise ConfigError(f"optuna.startup_trials must be >= 1, got {self.optuna.startup_trials}")
        if self.search == "optuna" and self.optuna.startup_trials >= self.num_samples:
            import warnings

            warnings.warn(f"optuna.startup_trials={self.optuna.startup_trials} >= num_samples={self.num_samples}: "
                          "every trial is sampled at random, TPE never runs", stacklevel=2)
        if self.seeds.count < 0 or self.seeds.max_reseeds < 0 or self.seeds.first_seed < 0:
            raise ConfigError("seeds.count, seeds.first_seed and seeds.max_reseeds must be >= 0")
        check_seed("search_seed", self.search_seed)
        check_seed("pbt.seed", self.pbt.seed)
        self.faults.validate("sweep")
        try:  # the base first: a searched value is checked against it
            self.finetune.validate()
        except ConfigError as exc:
            raise ConfigError(f"finetune.{exc}") from None
        if self.finetune.faults != FaultsConfig():
            raise ConfigError("finetune.faults must be left off in a sweep: a trial is not a Ray Train worker; "
                              "the sweep's own faults section (faults.kill_trial_at_step) injects its faults")
        if self.finetune.train.max_failures != FinetuneTrainConfig.max_failures:
            import warnings

            warnings.warn(f"finetune.train.max_failures={self.finetune.train.max_failures} is a Ray Train "
                          f"fine-tune's and no trial reads it: a trial is retried max_trial_failures="
                          f"{self.max_trial_failures} times", stacklevel=2)
        if self.finetune.deepspeed.zero_stage != 0:
            raise ConfigError(f"finetune.deepspeed.zero_stage must be 0 in a sweep, got "
                              f"{self.finetune.deepspeed.zero_stage}: each trial trains in one process, so ZeRO has "
                              f"no ranks to shard over")
        self._validate_space()
        self._validate_seed_runs()
        if self.scheduler == "pbt":
            if p.perturbation_interval % self.checkpoint_every:
                raise ConfigError(f"pbt.perturbation_interval ({p.perturbation_interval}) must be a multiple of "
                                  f"checkpoint_every ({self.checkpoint_every}): PBT exploits checkpoints")
            bad = [k for k in p.mutate if k not in self.search_space or self.search_space[k]["type"] == "grid"]
            if not p.mutate or bad:
                raise ConfigError(f"pbt.mutate must name searched, non-grid fields of search_space "
                                  f"{sorted(self.search_space)}, got {p.mutate}")
            if self.search_space.get("train.seed", {}).get("type") == "grid":
                raise ConfigError("scheduler=pbt cannot take train.seed as a grid field: PBT changes a trial's "
                                  "configuration as it trains (an exploit takes the donor's, train.seed included), so no "
                                  "configuration is trained over the seeds to be judged by their mean; drop train.seed "
                                  "from search_space (seeds.count reruns the champion over seeds)")
            fixed = [k for k in p.mutate if k in PBT_FIXED]
            if fixed:
                raise ConfigError(f"pbt.mutate cannot take {fixed[0]}: {PBT_FIXED[fixed[0]]}, so a trial restored "
                                  f"with it changed would train on a wrong place or schedule; PBT may mutate "
                                  f"{sorted(set(SEARCHABLE) - set(PBT_FIXED))}")
        only_grid = all(spec["type"] == "grid" for spec in self.search_space.values())
        if (self.search == "grid" or only_grid) and self.num_samples > 1:  # (Tune repeats the whole grid, a seed
            # grid's seeds too: each (point, seed) trained num_samples times, alike)
            raise ConfigError(f"search={self.search} with num_samples={self.num_samples} over grid fields alone trains "
                              f"every grid point {self.num_samples} times alike (a trial's every random choice is its "
                              "train.seed's): identical runs; set num_samples=1, and make train.seed a grid field to "
                              "repeat each point over seeds")
        # choice fields alone (grid ones beside them): more samples than distinct combinations repeat one alike, as a
        # grid repeated over num_samples does (refused above). Not under PBT, whose members part at their first
        # exploit or mutation. Fewer may repeat too (Tune draws each with replacement): grid fields train each once
        choices = [spec["values"] for spec in self.search_space.values() if spec["type"] == "choice"]
        distinct = math.prod(len({as_number(v, "") for v in values}) for values in choices)
        if (choices and self.num_samples > distinct and self.scheduler != "pbt"
                and all(spec["type"] in ("choice", "grid") for spec in self.search_space.values())):
            at = " at each grid point" if len(choices) < len(self.search_space) else ""
            raise ConfigError(f"num_samples={self.num_samples} over choice fields alone, with {distinct} distinct "
                              f"combination(s) of values{at}: {self.num_samples - distinct} sample(s) at least repeat "
                              "one alike (a trial's every random choice is its train.seed's): identical runs; make "
                              "them grid fields with num_samples=1 (each combination trained once; random draws of "
                              "choices repeat some even below that count), or search a field over a range "
                              "(uniform, loguniform)")
        trials = self.num_samples * math.prod(len(spec["values"]) for spec in self.search_space.values()
                                              if spec["type"] == "grid")
        if self.scheduler == "pbt" and trials < 2:
            raise ConfigError(f"scheduler=pbt needs at least 2 trials to compare (num_samples times the grid's "
                              f"points), got {trials}: one trial never exploits nor explores, a single run reported "
                              f"as PBT")
        if self.scheduler == "pbt" and self.max_concurrent < trials:  # a queued trial starts when one ends
            raise ConfigError(f"scheduler=pbt compares the trials that run at once: max_concurrent="
                              f"{self.max_concurrent} < {trials} trials (num_samples={self.num_samples} times the "
                              f"grid's points) would run them in groups that "
                              f"never meet (each group trained to its end before the next starts); set "
                              f"max_concurrent >= {trials}, and cpus_per_trial so that they fit the cluster")
        return self

    def check_environment(self) -> "SweepConfig":
        """What this machine must provide (FinetuneConfig.check_environment), before any Ray work, for trials that
        each train in one process: finetune.scaling.num_workers is no trial's, so one GPU is asked for, not one per
        worker; a refusal names the finetune. key it is about. Your own files' columns too (TaskConfig.check_files):
        read by Ray Data tasks, a column they lack failed there, as a task's traceback after the cluster had started."""
        ft = replace(self.finetune, scaling=replace(self.finetune.scaling, num_workers=1))
        try:
            ft.check_environment()
        except ConfigError as exc:
            raise ConfigError(f"finetune.{exc}") from None
        return self

    def _validate_seed_runs(self) -> None:
        """The champion's seed runs are new seeds: one the search trained with (finetune.train.seed, or a train.seed
        grid's) replays the chosen trial (the same config, head init and data order), whose score the search picked
        as the best of its trials, into the seeds' median and spread."""
        s = self.seeds
        searched = self.search_space.get("train.seed", {}).get("values") or [self.finetune.train.seed]
        reruns = range(s.first_seed, s.first_seed + s.count + s.max_reseeds)
        if s.count and (both := sorted({int(v) for v in searched} & set(reruns))):
            raise ConfigError(f"seeds.first_seed={s.first_seed}: the seed runs (seeds {reruns.start}..{reruns.stop - 1}"
                              f", seeds.count and max_reseeds) would repeat the search's train.seed {both}, replaying "
                              f"the chosen trial as an independent seed; set seeds.first_seed past them")

    def _validate_space(self) -> None:
        if not self.search_space:
            raise ConfigError(f"search_space must name at least one of {sorted(SEARCHABLE)}")
        for key, spec in self.search_space.items():
            where = f"search_space.{key}"
            if key not in SEARCHABLE:
                raise ConfigError(f"{where}: unknown field; allowed: {sorted(SEARCHABLE)}")
            if not isinstance(spec, dict) or spec.get("type") not in DISTRIBUTIONS:
                raise ConfigError(f"{where}.type must be one of {DISTRIBUTIONS}, got {spec!r}")
            kind = spec["type"]
            allowed = {"type", "values"} if kind in ("choice", "grid") else {"type", "low", "high"}
            if set(spec) != allowed:
                raise ConfigError(f"{where} ({kind}) takes exactly the keys {sorted(allowed)}, got {sorted(spec)}")
            if kind in ("choice", "grid"):
                values = spec["values"]
                if not isinstance(values, list) or not values:
                    raise ConfigError(f"{where}.values must be a non-empty list, got {values!r}")
                for v in values:
                    self._check_value(key, v, f"{where}.values")
            else:
                low, high = (as_number(spec[k], f"{where}.{k}") for k in ("low", "high"))
                if SEARCHABLE[key] is int:
                    raise ConfigError(f"{where}: {key} is an integer; use type choice or grid")
                if not low < high or (kind == "loguniform" and low <= 0):
                    raise ConfigError(f"{where} needs low < high" + (" and low > 0" if kind == "loguniform" else "")
                                      + f", got low={low}, high={high}")
                self._check_value(key, low, f"{where}.low")
                self._check_value(key, high, f"{where}.high")
                spec["low"], spec["high"] = float(low), float(high)  # YAML 1.1 reads 1e-5 as a string
            if key == "train.seed" and kind != "grid":
                raise ConfigError(f"{where}: train.seed can only be a grid field (each configuration trained over "
                                  f"every seed listed, and judged by their mean), got type {kind}: a sampled seed "
                                  f"gives each configuration other seeds, and a lucky draw the win; "
                                  + ("search optuna takes no grid: leave train.seed out" if self.search == "optuna"
                                     else "or leave it out") + " (seeds.count reruns the champion over seeds)")
            if self.search == "optuna" and kind == "grid":
                raise ConfigError(f"{where}: search optuna cannot take type grid; use choice")
            if self.search == "grid" and kind != "grid":
                raise ConfigError(f"{where}: search grid needs every field of type grid, got {kind}")
        cap = self.finetune.train.max_steps
        if "train.epochs" in self.search_space and cap:  # (FinetuneTrainConfig.steps: min(epochs' steps, max_steps))
            raise ConfigError(f"search_space.train.epochs cannot be searched with finetune.train.max_steps={cap}: the "
                              "cap decides how long a trial trains, so trials apart only in epochs can be the same "
                              "run, and the best configuration names an epochs value that had no effect; search one "
                              "of them: drop train.epochs from search_space (search_space.train.epochs=null) or the "
                              "cap (finetune.train.max_steps=0)")

    def _check_value(self, key: str, value, where: str) -> None:
        """The fine-tuning config's own rules decide what a searched value may be."""
        tp = SEARCHABLE[key]
        if tp is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{where}: {key} takes integers, got {value!r}")
        value = as_number(value, where)
        trial = FinetuneConfig.from_dict(deep_merge(self.finetune.to_dict(), nested(key, tp(value))))
        try:
            trial.validate()
        except ConfigError as exc:
            raise ConfigError(f"{where}: {value!r} is not a valid {key}: {exc}") from None

    def to_dict(self) -> dict:
        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SweepConfig":
        return from_dict(cls, d)


def nested(dotted: str, value) -> dict:
    """"optim.lr", 1e-4 -> {"optim": {"lr": 1e-4}}"""
    head, _, rest = dotted.partition(".")
    return {head: nested(rest, value) if rest else value}


def apply(base: dict, params: dict) -> dict:
    """A trial's fine-tuning config dict: `base` with the sampled {dotted field: value} set."""
    out = base
    for key, value in params.items():
        if key in SEARCHABLE:
            out = deep_merge(out, nested(key, SEARCHABLE[key](value)))
    return out


def load_sweep_config(path: str | Path | None, overrides: list[str] | None = None) -> SweepConfig:
    """The YAML (its `finetune_config:` file read first, `finetune:` merged over it), the dotted overrides,
    then the whole tree validated. A field's spec given whole (in a file over its base, or as a mapping on the
    command line) replaces the one before it; `null` for a field stops searching it."""
    data = read_yaml(path, merge=_merge_files) if path is not None else {}
    ours = [o for o in overrides or [] if o.partition("=")[0].strip() == "finetune_config"]
    overrides = [o for o in overrides or [] if o not in ours]  # not SweepConfig's field: read here, before the merge
    if ours:  # the command line's: relative to the working directory (a file's is to that file, read_yaml)
        data["finetune_config"] = parse_overrides(ours[-1:])["finetune_config"]
    base = data.pop("finetune_config", None)
    if base is not None:
        if not isinstance(base, str):
            raise ConfigError(f"finetune_config must be a file name, got {base!r}")
        data["finetune"] = deep_merge(read_yaml(base), _mapping(data.get("finetune"), "finetune"))
    updates = parse_overrides(overrides or [], SweepConfig)
    _mapping(data.get("search_space"), "search_space")
    _mapping(updates.get("search_space"), "search_space")
    # search_space keys are dotted field names, which overrides split: merge both nested, then join again
    whole = {field for item in overrides or [] if item.startswith("search_space.")  # specs given as mappings
             for field in _specs(item.partition("=")[0].removeprefix("search_space."), item.partition("=")[2])}
    # `search_space={...}` given whole is the space: the YAML's fields are not searched beside it
    given = any(item.partition("=")[0].strip() == "search_space" for item in overrides or [])
    update = updates.pop("search_space", None) or {}  # null: no space, refused by validate as a file's null is
    space = _merge_space({} if given else _nest(data.get("search_space") or {}), update, whole)
    data = deep_merge(data, updates)
    # a field set to null is not searched (one its base file searches, say); a null that names no field is left to
    # validate, which refuses it as an unknown field
    data["search_space"] = {k: v for k, v in _join_fields(space).items() if v is not None or k not in SEARCHABLE}
    return SweepConfig.from_dict(data).validate()


def _merge_files(base: dict, child: dict) -> dict:
    """read_yaml's merge of a sweep file over its base: deep_merge, but each field the child's search_space names
    gets the child's spec whole. Merged key by key, a choice over a base's loguniform kept its low and high beside
    the values, and was refused for keys the child never wrote; a null (not searched) is kept to the end, where
    load_sweep_config drops it, so that a file further down the chain can search the field again."""
    merged = deep_merge(base, {k: v for k, v in child.items() if k != "search_space"})
    old, new = base.get("search_space"), child.get("search_space")
    if isinstance(old, dict) and isinstance(new, dict):
        old, new = _join_fields(_nest(old)), _join_fields(_nest(new))
        for name, spec in new.items():  # a part of a spec (high: 1e-3) was merged into the base's before: say why not
            if isinstance(spec, dict) and "type" not in spec and isinstance(old.get(name), dict):
                raise ConfigError(f"search_space.{name} {spec} names no type: a sweep file's spec replaces its "
                                  f"base's whole (the base's: {old[name]}); give the whole spec")
        merged["search_space"] = {**old, **new}
    elif "search_space" in child:
        merged["search_space"] = new  # no mapping on one side: the child's, as deep_merge has it (a bad one refused)
    return merged


def _mapping(value, name: str) -> dict:
    """`value` (None: empty), which must be a mapping: a list or a word there was an AttributeError's traceback."""
    if value is not None and not isinstance(value, dict):
        raise ConfigError(f"{name} must be a mapping of fields (a YAML mapping, or {name}.<field>=... overrides), "
                          f"got {value!r}")
    return value or {}


def _specs(path: str, raw) -> list[str]:
    """The fields an override of `path` gives whole specs of, as mappings (`{type: choice, values: [...]}`): itself,
    or in a group of fields (`search_space.optim={lr: {...}}`) each field it names, the group's others kept."""
    try:
        value = yaml_load(raw) if isinstance(raw, str) else raw
    except yaml.YAMLError:
        return []
    if not isinstance(value, dict):
        return []
    if {"type", "values", "low", "high"} & set(value):
        return [path]
    return [field for key, spec in value.items() for field in _specs(f"{path}.{key}", spec)]


def _merge_space(base: dict, update: dict, whole: set[str], path: str = "") -> dict:
    """deep_merge, but a spec given whole, as one mapping (`search_space.optim.lr={type: choice, values: [...]}`:
    its field in `whole`), replaces the YAML's: merged, the loguniform's low and high stayed beside the choice's
    values, and no override can remove a key. Parts (`...lr.type=uniform ...lr.high=1e-2`) still merge into it."""
    merged = dict(base)
    for key, value in update.items():
        field = f"{path}.{key}" if path else str(key)
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and field not in whole:
            merged[key] = _merge_space(merged[key], value, whole, field)
        else:
            merged[key] = value
    return merged


def _nest(space: dict) -> dict:
    out: dict = {}
    for key, spec in space.items():
        out = deep_merge(out, nested(str(key), spec))
    return out


def _join_fields(space: dict, prefix: str = "") -> dict:
    """{"optim": {"lr": {"type": ...}}} -> {"optim.lr": {"type": ...}}; a spec is a mapping with a distribution's
    keys (type, values, low, high), or anything that is not a mapping (refused by validate)."""
    out = {}
    for key, value in space.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value and not set(value) & {"type", "values", "low", "high"}:
            out.update(_join_fields(value, name))
        else:
            out[name] = value
    return out


def check_name(field: str, name: str) -> None:
    """A sweep's name is a folder under output_dir, an MLflow filter's value and part of a registered model's name: a
    plain name (no '/', quote, space, '..' or '.')."""
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", name or ""):
        raise ConfigError(f"{field} must be a plain name of letters, digits, '.', '_' and '-' (not starting with '.' "
                          f"or '-'), got {name!r}")
    if re.search(r"-seeds-\d+$", name):  # the folder of another sweep's seed re-runs (jobs/sweep.py): its runs
        raise ConfigError(f"{field}={name!r} ends like a sweep's seed re-runs (<name>-seeds-<n>), whose folder it "
                          "would share: choose another name")


def max_evaluations(cfg: SweepConfig, train_features: int) -> int:
    """ASHA's max_t: max_evals, else the most evaluations a trial of the space makes over `train_features`
    (_evaluations). Refuses an asha.grace_period above it."""
    made = _evaluations(cfg, train_features, {})
    most = cfg.max_evals or made
    if cfg.scheduler == "asha" and cfg.asha.grace_period > min(most, made):  # (a max_evals above what trials make
        # left a grace period no trial reaches: ASHA stopped nothing, a random search reported as ASHA)
        raise ConfigError(f"asha.grace_period ({cfg.asha.grace_period}) must be <= the evaluations a trial makes "
                          f"({min(most, made)}: {train_features:,} train features, finetune.train and the searched "
                          f"fields{f', max_evals={cfg.max_evals}' if cfg.max_evals else ''})")
    if cfg.scheduler == "pbt" and cfg.pbt.perturbation_interval >= most:
        raise ConfigError(f"pbt.perturbation_interval ({cfg.pbt.perturbation_interval}) must be < the evaluations a "
                          f"trial makes ({most}: {train_features:,} train features, finetune.train and the searched "
                          f"fields): PBT would never exploit or explore, a random search reported as PBT")
    return most


def _evaluations(cfg: SweepConfig, train_features: int, point: dict) -> int:
    """The most evaluations a trial makes over `train_features` with the searched values of `point` (the others: the
    smallest batch size, the most epochs a field may take), evaluated as jobs/loops/finetune.py does: every
    train.eval_every_steps steps, else every epoch, and always the last step."""
    t = cfg.finetune.train

    def values(key: str, default: int) -> list[int]:
        spec = cfg.search_space.get(key)
        return [int(point[key])] if key in point else [int(v) for v in spec["values"]] if spec else [default]

    def evaluations(batch_size: int, epochs: int) -> int:
        per_epoch, total = replace(t, batch_size=batch_size, epochs=epochs).steps(train_features)
        return math.ceil(total / (t.eval_every_steps or per_epoch))

    return max(evaluations(b, e) for b in values("train.batch_size", t.batch_size)
               for e in values("train.epochs", t.epochs))


def kept_checkpoints(cfg: SweepConfig, train_features: int) -> int:
    """The checkpoints a PBT sweep keeps (all of them): each trial's evaluations over checkpoint_every, its last
    always, summed over the trials validate counts (num_samples at each grid point, a grid's train.batch_size and
    train.epochs its own); more where an exploit takes a donor's earlier checkpoint and the trial redoes steps."""
    grid = {k: spec["values"] for k, spec in cfg.search_space.items() if spec["type"] == "grid"}
    points = (dict(zip(grid, values)) for values in itertools.product(*grid.values()))
    return cfg.num_samples * sum(-(-_evaluations(cfg, train_features, p) // cfg.checkpoint_every) for p in points)
