"""Sweep fine-tuning hyperparameters with Ray Tune; re-run the best over seeds; register the seed-median model.

    python jobs/sweep.py --config configs/sweep/pkgdocs.yaml finetune.init=/path/to/hf-bert-folder

Trials fine-tune in-process in a Tune function trainable (jobs/workers/sweep_trial.py) on features made once
here; ASHA (default) or PBT schedules them, random / grid / Optuna TPE samples them. Every trial is
an MLflow run nested under the sweep's parent run, which gets the results table (CSV) and a plot of
every trial's metric over training (PNG). The best configuration is then re-run over `seeds.count`
seeds; runs that collapsed to one class are reported and replaced by new seeds; the median, mean, std,
min and max go to the parent run, and the median run's model is registered, tagged with the spread.
Every choice (ASHA's and PBT's, the best trial, the seed-median run) is made on the task's select split; the
trials never see the evaluation split, on which the registered model alone is scored, once (the model card's
and the version's numbers; pipelines/tasks/roles.py).
The same command again, with the same name, resumes an interrupted sweep from Tune's storage and its parent run;
another config, init or data under that name is another sweep, with a parent run of its own.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import shutil
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # `python jobs/sweep.py` from a checkout: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.runtime import console, lease  # noqa: E402
from jobs.runtime.cluster import init_ray, prefer_loopback, refuse_sqlite_across_machines  # noqa: E402
from jobs.config.io import add_check_argument, checked, cli  # noqa: E402
from jobs.config.sweep import SweepConfig, kept_checkpoints, load_sweep_config, max_evaluations  # noqa: E402
from jobs.search.outcome import champion, scored, settle_runs, std_text, summary, unregistered  # noqa: E402


class SweepInterrupted(RuntimeError):
    """The search was stopped before every trial ended; its state is saved and the same name resumes it."""


@dataclass
class SweepResult:
    name: str
    metric: str  # the task's main select metric (e.g. "select/accuracy"); higher is better; Tune's "score"
    best_config: dict  # the searched fields {"optim.lr": ...} in effect at the best trial's best evaluation
    best_score: float  # its best evaluation (a train.seed grid: the mean of best_config's over best_seeds seeds)
    table: list[dict]  # one row per trial: trial_id, status, searched fields at its best, best, evaluations, ...
    table_path: str  # the table as CSV (also an artifact of the parent run)
    plot_path: str  # every trial's metric over training steps (PNG; also an artifact)
    best_schedule: str = ""  # how PBT reached best_config ("" if the trial trained with it throughout: at_best)
    seeds: dict = field(default_factory=dict)  # scores and seeds (aligned), degenerate, median, mean, std, min, max
    export_dir: str = ""  # the seed-median run's best model in HF format ("" without a seed re-run)
    mlflow: dict = field(default_factory=dict)  # parent_run_id, median_run_id, model_uri, registered_model, ...
    eval_metric: str = ""  # the main metric on the evaluation split (e.g. "dev/accuracy")
    evaluation: dict = field(default_factory=dict)  # the registered (seed-median) model on the evaluation split
    data: dict = field(default_factory=dict)  # {split: {"rows", "sha256"}} for train, select and evaluation
    unregistered: str = ""  # why nothing is registered though finetune.tracking.registered_model is set ("" if not)
    best_seeds: int = 0  # a train.seed grid: the seeds best_score is the mean over (best_config names none); else 0


def refuse_earlier_seed_runs(out_dir: Path) -> None:
    """The seed re-runs are experiments of their own beside the search's (<name>-seeds-<round>), and fit() restores
    any it finds: a sweep whose search folder is gone (removed, as the basis refusal says, to start again) would
    take an earlier sweep's finished seed trials for its own, their median model registered under this search's
    best config. Refused, naming them, before any Ray work; a search that is there (resumed) keeps its seeds."""
    import glob

    from ray import tune

    if tune.Tuner.can_restore(str(out_dir)):
        return
    prefix = f"{out_dir.name}-seeds-"  # then the round: another sweep's name may start so ("bert-seeds-ablation")
    earlier = sorted(p.name for p in out_dir.parent.glob(f"{glob.escape(prefix)}*")
                     if p.is_dir() and p.name[len(prefix):].isdigit())
    if earlier:
        from bert_core.config import ConfigError

        raise ConfigError(f"name {out_dir.name!r}: {out_dir.parent} holds {', '.join(earlier)}, the seed re-runs of "
                          f"an earlier sweep of this name whose search ({out_dir}) is not there; this sweep would "
                          f"take them for its own: remove them too, or give another name")


def run(cfg: SweepConfig) -> SweepResult:
    cfg.validate()  # idempotent; a config built by hand is refused here, before any Ray work
    cfg.check_environment()  # output folder, GPUs, paths of a submitted job: also before Ray
    with lease.run_lease(cfg.finetune.output_dir, cfg.name, "sweep", field="name"):  # a second sweep: refused here
        return _run(cfg)


def _run(cfg: SweepConfig) -> SweepResult:
    if note := unregistered(cfg):  # said, not refused: a sweep to explore registers nothing by design
        print(f"[sweep] warning: {note}", flush=True)
    prefer_loopback()
    from jobs.loops import ft_tasks
    from jobs.registry import tracking
    from jobs.finetune import check_init, init_name, pin_alias, resolve_init

    ft = cfg.finetune
    tracking_uri = tracking.resolve_tracking_uri(ft.tracking.tracking_uri)
    out_dir = Path(ft.output_dir).resolve() / cfg.name
    refuse_earlier_seed_runs(out_dir)
    init = pin_alias(ft.init, tracking_uri)  # the alias read once: the trials' weights and the lineage agree
    init_dir = resolve_init(init, tracking_uri, out_dir / "init")
    check_init(ft.task.max_seq_len, init, init_dir)
    from jobs.runtime.capacity import Demand, ensure_capacity, has_autoscaler

    demand = Demand.of_trial(cfg)  # one trial at least must fit: Tune waits for one without end, saying so in its log
    dashboard = ""
    if ft.task.name == "files":  # your files are read by Ray Data tasks, which wait for nodes as the trials do
        dashboard = init_ray()
        refuse_sqlite_across_machines(tracking_uri, grows=has_autoscaler())  # before the autoscaler is asked
        ensure_capacity(demand)  # an empty autoscaling cluster's wait said and bounded here, not silent
    rows = ft_tasks.load_rows(ft.task, init_dir)
    base = copy.deepcopy(ft)  # the trials' base config, derived values settled; not changed after logging
    base.run_name, base.tracking.tracking_uri, base.init = cfg.name, tracking_uri, init_name(init, init_dir)
    base.task.with_labels(rows.labels)
    if ft.tracking.registered_model:  # refused now, not at the registration after the whole sweep
        from jobs.registry.versions import task_config_tag

        task_config_tag(dataclasses.asdict(base.task))
    ft_tasks.note_truncated(base.task, rows, init_dir)
    print(ft_tasks.rows_line(ft.task, rows), flush=True)

    dashboard = dashboard or init_ray()
    # trials start before the nodes they need: refused before the autoscaler is asked for them
    refuse_sqlite_across_machines(tracking_uri, grows=has_autoscaler())
    ensure_capacity(demand)
    import ray

    from jobs.finetune import _features, numpy_blocks
    from jobs.workers.sweep_trial import TrialInputs

    ray.data.DataContext.get_current().enable_progress_bars = False
    # features once, as Ray Data tasks (as the fine-tuning job's), materialized; each trial deals itself the train
    # features in its own seed's order (jobs/loops/train_order.py), as a one-worker fine-tune with that seed does. The
    # trials get train and select only: no evaluation row reaches a choice
    train, select = _features(base, rows.train, init_dir), _features(base, rows.select, init_dir, evaluation=True)
    n_train, metric, train = train.count(), ft_tasks.main_metric(base.task), numpy_blocks(train)
    evals = max_evaluations(cfg, n_train)  # refuses an ASHA grace period above it, before the parent run and trials
    print(f"[sweep] {cfg.name}: {cfg.num_samples} trials, {cfg.scheduler} + {cfg.search} search over "
          f"{sorted(cfg.search_space)}; {n_train:,} train features, at most {evals} evaluations a trial; "
          f"main metric {metric}", flush=True)
    from jobs.search.schedulers import unequal_training

    if unequal := unequal_training(cfg):  # the schedulers' time is evaluations: equal ones, unequal training
        print(f"[sweep] warning: {unequal}", flush=True)
    if cfg.scheduler == "pbt":  # Tune's PBT restores a donor's checkpoint some reports after choosing it: none deleted
        files = sorted(init_dir.glob("*.safetensors")) or sorted(init_dir.glob("*.bin"))  # one copy of the weights
        each = 3 * sum(f.stat().st_size for f in files) / 2**30  # with Adam's two moments; more under ZeRO and bf16
        kept = kept_checkpoints(cfg, n_train)  # every trial's, more where an exploit redoes steps
        print(f"[sweep] PBT keeps every checkpoint: {kept:,} or more, each at least ~{each:.2f} GiB (the weights and "
              f"Adam's two moments), ~{kept * each:,.1f} GiB or more under {out_dir}", flush=True)
    from ray import tune

    from jobs.registry.sweep_parent import parent_run

    parent_id, experiment_id = parent_run(cfg, base, tracking_uri, task_data=(
        ft_tasks.data_source(ft.task), ft_tasks.rows_digest(rows)), data_tags=ft_tasks.split_tags(rows),
        restoring=tune.Tuner.can_restore(str(out_dir)), tokenizer_dir=str(init_dir))  # fit() restores its experiment
    data = TrialInputs(base, train, select, n_train, rows.select,
                       {f.name: f.read_bytes() for f in init_dir.iterdir() if f.is_file()}, tracking_uri,
                       experiment_id, parent_id, cfg.name, threads=cfg.cpus_per_trial,
                       checkpoint_every=cfg.checkpoint_every, faults=cfg.faults, max_evals=cfg.max_evals,
                       kill_marker=str(Path(cfg.finetune.output_dir).resolve() / cfg.name / "killed-trial"))
    with tracking.ending(tracking_uri, parent_id):  # any other error: the parent ends FAILED, with it named
        try:
            result = search_and_seeds(cfg, base, data, rows, tracking_uri, parent_id, out_dir)
        except SweepInterrupted:
            from mlflow.tracking import MlflowClient

            from jobs.search.outcome import nested_runs

            try:  # the resume hint stays the error raised, whatever the store says
                client = MlflowClient(tracking_uri)
                for child in nested_runs(client, parent_id):  # its trials' too (else RUNNING for ever if not resumed)
                    if child.info.status == "RUNNING":
                        client.set_terminated(child.info.run_id, "KILLED")
                        client.set_tag(child.info.run_id, "tune_status", "interrupted")
                client.set_terminated(parent_id, "KILLED")  # RUNNING again when resumed, as each trial's run
            except Exception as exc:  # noqa: BLE001 - a store down: the runs say RUNNING until resumed
                print(f"[sweep] the interrupted runs could not be marked KILLED: {tracking.redact(str(exc))}",
                      flush=True)
            raise
    print(summary(result, tracking_uri, dashboard, Path(ft.output_dir).resolve()), flush=True)
    return result


def search_and_seeds(cfg: SweepConfig, base, data, rows, tracking_uri: str, parent_id: str,
                     out_dir: Path) -> SweepResult:
    """The search (table, plot, best configuration on the parent run), then the seed re-run of the best."""
    from jobs.loops import collapse, ft_tasks
    from jobs.search.schedulers import tune_space

    metric = ft_tasks.main_metric(base.task)
    grids = math.prod(len(s["values"]) for s in cfg.search_space.values() if s["type"] == "grid")
    grid = fit(cfg, cfg.name, data, tune_space(cfg), search=True, expected=cfg.num_samples * grids)
    table = trial_table(cfg, grid, tracking_uri, parent_id)
    table_path, plot_path = out_dir / "trials.csv", out_dir / "trials.png"
    write_table(table, table_path)
    plot(grid, metric, plot_path)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    client.log_artifact(parent_id, str(table_path))
    client.log_artifact(parent_id, str(plot_path))
    import pandas as pd

    rule = "=" * 72  # a block of its own, as the summaries are
    print("\n".join(["", rule, f"trials           {table_path}", pd.DataFrame(table).to_string(index=False), rule]),
          flush=True)

    best_config, best_score, schedule, over = champion(grid, cfg.search_space)  # over: a seed grid's seeds, meaned
    client.log_batch(parent_id, metrics=_metrics({"best_config_mean_score": best_score, "best_config_seeds": over}
                                                 if over else {"best_trial_score": best_score}))
    client.set_tag(parent_id, "best_config", str(best_config))
    if schedule:
        client.set_tag(parent_id, "best_config_schedule", schedule)
    result = SweepResult(cfg.name, metric, best_config, best_score, table, str(table_path), str(plot_path),
                         best_schedule=schedule, data=rows.summary(), unregistered=unregistered(cfg), best_seeds=over,
                         mlflow={"parent_run_id": parent_id, "trial_run_ids": [r["mlflow_run_id"] for r in table]})
    if cfg.seeds.count:
        majority = collapse.majority_baseline(base.task, rows.select)
        seed_runs(cfg, data, best_config, majority, result, client, out_dir, rows)
    client.set_terminated(parent_id, "FINISHED")
    return result


def fit(cfg: SweepConfig, name: str, data, space: dict, search: bool, expected: int):
    """One Tune experiment of `expected` trials in <output_dir>/<name>; an interrupted one with that name is
    restored instead. Raises SweepInterrupted when it stops with trials unfinished."""
    from ray import tune

    from jobs.search.schedulers import kept_settings, resume_warning, scheduler, search_algorithm
    from jobs.workers.sweep_trial import trial

    storage = Path(cfg.finetune.output_dir).resolve()

    trainable = tune.with_resources(tune.with_parameters(trial, data=data),
                                    {"cpu": cfg.cpus_per_trial, "gpu": cfg.gpus_per_trial})
    path = storage / name
    if tune.Tuner.can_restore(str(path)):
        print(f"[sweep] resuming {name} from {path}", flush=True)
        tuner = tune.Tuner.restore(str(path), trainable=trainable, resume_unfinished=True, resume_errored=False)
        if search:  # the scheduler the experiment was saved with, as it was made (Tuner has no public accessor)
            print(f"[sweep] warning: {resume_warning(tuner._local_tuner._tune_config.scheduler)}", flush=True)
        if kept := kept_settings(cfg, tuner._local_tuner._tune_config, tuner._local_tuner._run_config):
            print(f"[sweep] warning: a resumed sweep runs with the settings it was saved with: {kept}", flush=True)
        grid = tuner.fit()
    else:
        alg = search_algorithm(cfg, path) if search else None
        # a variant generator limits itself (Tune ignores max_concurrent_trials for one, and warns)
        limit = None if alg is not None and cfg.search != "optuna" else cfg.max_concurrent
        tune_config = tune.TuneConfig(metric="score", mode="max", num_samples=cfg.num_samples if search else 1,
                                      max_concurrent_trials=limit, reuse_actors=True, search_alg=alg,
                                      scheduler=scheduler(cfg, data.train_features) if search else None)
        run_config = tune.RunConfig(name=name, storage_path=str(storage),
                                    # PBT restores a donor's checkpoint some reports after choosing it
                                    checkpoint_config=tune.CheckpointConfig(
                                        num_to_keep=None if search and cfg.scheduler == "pbt" else 2),
                                    failure_config=tune.FailureConfig(max_failures=cfg.max_trial_failures),
                                    verbose=0 if console.quiet() else 1)  # quiet: our table, not Tune's status
        grid = tune.Tuner(trainable, param_space=space, tune_config=tune_config, run_config=run_config).fit()
    unfinished = _unfinished(path, expected)
    if unfinished:  # Ctrl+C (SIGINT) or SIGUSR1 stopped Tune, which saved the experiment's state
        raise SweepInterrupted(f"{name} was interrupted with {unfinished} trial(s) unfinished; run the same "
                               f"command again (same name) to resume it from {path}")
    return grid


def _unfinished(path: Path, expected: int) -> int:
    """Trials of the experiment saved at `path` that a restore would run: not yet created, or saved as pending,
    running or paused. (After an interrupt the returned ResultGrid counts a stopped trial as terminated; the
    saved state, which Tuner.restore reads, does not.)"""
    from ray.tune import ExperimentAnalysis

    trials = ExperimentAnalysis(str(path)).trials
    return max(0, expected - len(trials)) + sum(t.status in ("PENDING", "RUNNING", "PAUSED") for t in trials)


def trial_table(cfg: SweepConfig, grid, tracking_uri: str, parent_id: str) -> list[dict]:
    """One row per trial; also ends every trial's MLflow run with Tune's verdict (settle_runs)."""
    from mlflow.tracking import MlflowClient

    from jobs.workers.sweep_trial import at_best, by_step

    rows = []
    settled = settle_runs(grid, MlflowClient(tracking_uri), parent_id,
                          cfg.max_evals if cfg.scheduler == "asha" else 0)  # ASHA's budget; seed runs have none
    for result, (trial_id, status, mlflow_run) in zip(grid, settled):
        df = result.metrics_dataframe
        reported = df is not None and len(df) and "score" in df
        df = by_step(df) if reported else df  # a step reported again after a restart counts once
        last = result.metrics or {}
        rows.append({"trial_id": trial_id, "status": status,
                     **(at_best(result, cfg.search_space)[0] if scored(df)
                        else {k: (result.config or {}).get(k) for k in cfg.search_space}),
                     "best": float(df["score"].max()) if reported else float("nan"),
                     "evaluations": int(len(df)) if reported else 0, "last_step": int(last.get("step", 0)),
                     "restored_from": last.get("restored_from", "") if reported else "",
                     "mlflow_run_id": mlflow_run.info.run_id if mlflow_run is not None else ""})
    return rows


def write_table(table: list[dict], path: Path) -> None:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(table).to_csv(path, index=False)


def plot(grid, metric: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jobs.workers.sweep_trial import by_step

    fig, ax = plt.subplots(figsize=(8, 5))
    for result in grid:
        df = result.metrics_dataframe
        if df is not None and len(df) and "score" in df:
            df = by_step(df)  # a step reported again after a restart: its last report
            label, color = str(result.metrics.get("trial_id", ""))[:12], None
            # one line a segment (a PBT exploit's reports go on from the donor's step), in the trial's colour
            segments = df["segment"].fillna("").astype(str) if "segment" in df else [""] * len(df)
            for _, part in df.groupby(segments, sort=False):
                line, = ax.plot(part["step"], part["score"], marker="o", label=label, color=color)
                label, color = None, line.get_color()
    ax.set_xlabel("training step")
    ax.set_ylabel(metric)
    ax.set_title(f"sweep trials: {metric} over training")  # the select split's metric, which ranks them
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def seed_runs(cfg: SweepConfig, data, best_config: dict, majority: float, result: SweepResult, client,
              out_dir: Path, rows) -> None:
    """The best configuration over `seeds.count` seeds; degenerate runs (one predicted class, or no better than
    a collapsed model: one class or label set, a constant score, no entity or answer) are reported and replaced by new
    seeds, at most `seeds.max_reseeds` times. Each seed's run trains on the features in its own seed's order, as
    jobs/finetune.py with that train.seed and one worker does (jobs/loops/train_order.py)."""
    from ray import tune

    from bert_core.checkpoint import atomic_dir
    from jobs.loops import ft_tasks

    s = cfg.seeds
    fixed = {k: v for k, v in best_config.items() if k != "train.seed"}
    data = dataclasses.replace(data, phase="seeds", export=True)
    good, degenerate, next_seed, round_, want, reseeds_left = [], [], s.first_seed, 0, s.count, s.max_reseeds
    while want:
        seeds = list(range(next_seed, next_seed + want))
        next_seed += want
        grid = fit(cfg, f"{cfg.name}-seeds-{round_}", data, {**fixed, "train.seed": tune.grid_search(seeds)},
                   search=False, expected=len(seeds))
        settle_runs(grid, client, result.mlflow["parent_run_id"])  # as the search's trials: none left RUNNING
        bad = 0
        for r in grid:
            why, score = _degenerate(r, majority)
            if why:
                bad += 1
                # a run that died before its first report has no config in its result: its seed is unknown
                seed = (r.config or {}).get("train.seed", "unknown")
                degenerate.append({"seed": seed, "score": score, "why": why})
                print(f"[seeds] degenerate run, re-seeding: seed {seed} ({why})", flush=True)
            else:
                good.append((score, r))
        want = min(bad, reseeds_left)  # each degenerate run is replaced by a new seed while reseeds last
        reseeds_left -= want
        round_ += 1
    runs = good
    if not runs:
        result.seeds = {"degenerate": degenerate, "scores": []}
        print(f"[seeds] every seed run was degenerate: {degenerate}; nothing registered", flush=True)
        if cfg.finetune.tracking.registered_model:  # a `sweep && promote` would judge an older @candidate
            raise RuntimeError(f"every seed run was degenerate ({len(degenerate)}, seeds.max_reseeds="
                               f"{cfg.seeds.max_reseeds} spent): nothing registered as "
                               f"{cfg.finetune.tracking.registered_model}")
        return
    scores = sorted(score for score, _ in runs)
    stats = {"median": statistics.median(scores), "mean": statistics.fmean(scores),
             "min": scores[0], "max": scores[-1]}
    if len(scores) > 1:  # one seed has no spread to measure (it read "std 0.0000 over 1 seeds")
        stats["std"] = statistics.stdev(scores)
    score, median_run = min(runs, key=lambda sr: (abs(sr[0] - stats["median"]), sr[0]))
    parent_id = result.mlflow["parent_run_id"]
    client.log_batch(parent_id, metrics=_metrics({f"seeds.{k}": v for k, v in stats.items()}
                                                 | {"seeds.count": len(scores), "seeds.degenerate": len(degenerate)}))
    spread = (f"{result.metric} median {stats['median']:.4f} mean {stats['mean']:.4f} std {std_text(stats)} "
              f"min {stats['min']:.4f} max {stats['max']:.4f} over {len(scores)} seeds"
              + (f" ({len(degenerate)} more left out as degenerate: collapsed or failed)" if degenerate else ""))
    client.set_tag(parent_id, "seed_spread", spread)
    export_dir = out_dir / "best"
    with median_run.checkpoint.as_directory() as d, atomic_dir(export_dir) as tmp:  # a stop keeps the earlier one
        shutil.copytree(Path(d) / "best", tmp, dirs_exist_ok=True)
    median_run_id = _run_of(client, parent_id, median_run)
    from jobs.finetune import judge_chosen

    df = median_run.metrics_dataframe
    chosen = df[df["step"] == median_run.metrics["best_step"]].iloc[-1].to_dict()  # its select metrics when chosen
    task = data.base.task
    evaluation = judge_chosen(export_dir, task, chosen, rows, cfg.finetune.train.eval_batch_size)
    result.evaluation, result.eval_metric = evaluation, ft_tasks.eval_metric(task)
    info = register(cfg, client, median_run_id, export_dir, {**stats, "run": score}, spread, dataclasses.asdict(task),
                    client.get_run(data.parent_run_id).data.tags, rows, evaluation, len(degenerate))
    result.seeds = {**stats, "scores": [sc for sc, _ in runs], "seeds": [r.config["train.seed"] for _, r in runs],
                    "degenerate": degenerate, "median_seed": median_run.config["train.seed"]}
    result.export_dir = str(export_dir)
    result.mlflow.update(info, median_run_id=median_run_id)
    print(f"[seeds] {spread}; median run seed {result.seeds['median_seed']} ({score:.4f})", flush=True)


def _degenerate(r, majority: float) -> tuple[str, float]:
    """Why a seed run must not set the median ("" if it may): it failed, or at its best evaluation it
    predicted a single class or scored no better than `majority`, what a collapsed model scores on the
    same metric (the best single class or label set, a constant score, no entity, no answer: jobs.loops.collapse)."""
    from jobs.workers.sweep_trial import by_step

    if r.error or r.checkpoint is None:
        return f"failed: {r.error}", float("nan")
    df = by_step(r.metrics_dataframe)  # a step reported again after a restart: the report its model follows from
    at_best = df[df["step"] == r.metrics["best_step"]].iloc[-1]
    score = float(df["score"].max())
    if int(at_best["pred_classes"]) == 1:
        return f"collapsed: 1 predicted class(es), {score:.4f} vs the best constant prediction's {majority:.4f}", score
    if score <= majority + 1e-9:
        return f"no better than a collapsed model: {score:.4f} vs its {majority:.4f}", score
    return "", score


def register(cfg: SweepConfig, client, run_id: str, export_dir: Path, stats: dict, spread: str, task: dict,
             lineage: dict, rows, evaluation: dict, degenerate: int = 0) -> dict:
    """Log the median run's model in its own MLflow run, with its evaluation-split metrics; register it with the
    seed spread (on select) and the degenerate seed runs it left out, the evaluation metrics, each split's size and
    digest, the task config that evaluates it (jobs/promote.py reads it) and a model card naming the sweep's lineage."""
    import json

    from jobs.loops import ft_tasks
    from jobs.registry import tracking, versions

    t, hf_task = cfg.finetune.tracking, ft_tasks.HF_TASK[cfg.finetune.task.kind]
    tags = {**{f"seed_{k}": f"{v:.6f}" for k, v in stats.items()}, "seed_spread": spread, "sweep": cfg.name,
            "seed_degenerate": str(degenerate), "task": task["name"], "task_config": json.dumps(task),
            **ft_tasks.split_tags(rows), **{f"eval.{k}": f"{v:.6f}" for k, v in evaluation.items()}}
    metric = ft_tasks.main_metric(cfg.finetune.task)
    init = lineage.get("lineage.init", cfg.finetune.init)  # an alias pinned to its version, a folder resolved
    card = versions.model_card(f"{hf_task}: {task['name']}, sweep {cfg.name} from {init}", evaluation,
                               lineage, spread, chosen_on=f"the seed-median run, {metric} {stats['run']:.4f} (seed "
                               f"median {stats['median']:.4f})", data=rows.summary())
    return tracking.finish_run(tracking.resolve_tracking_uri(t.tracking_uri), run_id, evaluation, str(export_dir),
                               t.registered_model, t.alias, task=hf_task, version_tags=tags, description=card,
                               input_example=tracking.input_example(rows.held()))


def _run_of(client, parent_id: str, result) -> str:
    trial_id = result.metrics.get("trial_id")
    found = client.search_runs([client.get_run(parent_id).info.experiment_id], max_results=1, filter_string=(
        f"tags.`mlflow.parentRunId` = '{parent_id}' and tags.trial_id = '{trial_id}'"))
    return found[0].info.run_id


def _metrics(values: dict) -> list:
    import time

    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    return [Metric(k, float(v), now, 0) for k, v in values.items()]


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, SweepConfig]:
    """The command line and the config it names, loaded and validated as a run uses it (no framework imported)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML file (see configs/sweep/)")
    console.add_argument(parser)
    add_check_argument(parser)
    parser.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. num_samples=16")
    args = parser.parse_intermixed_args(argv)
    return args, load_sweep_config(args.config, args.overrides)


def main(argv: list[str] | None = None) -> SweepResult:
    args, cfg = parse(argv)  # fails here, before any Ray work
    console.configure(args.verbose)
    if args.check:
        cfg.check_environment()
        lease.probe_run_lease(cfg.finetune.output_dir, cfg.name, field="name")  # a sweep running: refused as run() is
        return checked("sweep", args.config, args.overrides)
    return run(cfg)


if __name__ == "__main__":
    cli(main)
