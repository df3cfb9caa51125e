"""A sweep's verdict on its trials: each trial's status (failed, stopped by the scheduler, ended by its own
patience, finished), the MLflow run status that follows from it, and the champion among the trials that did not
fail; and the summary the sweep ends with. Used by jobs/sweep.py."""

from __future__ import annotations

from pathlib import Path


# A trial's MLflow run status from its row's status. A trial the scheduler stopped did not complete its
# budget and did not fail: KILLED (MLflow's "ended before it finished"), with tag tune_status=stopped early.
# One its own patience (train.patience) ended made its normal end: FINISHED, tag tune_status=finished (patience).
RUN_STATUS = {"finished": "FINISHED", "finished (patience)": "FINISHED", "finished (max_evals)": "FINISHED",
              "stopped early": "KILLED", "failed": "FAILED"}


def champion(results, fields) -> tuple[dict, float, str, int]:
    """at_best of the trial with the best select score among those that ended without an error (a trial that
    scored well, then diverged and failed, is not a champion; Tune's get_best_result looks at no status), and 0.

    With train.seed searched (a grid repeated over seeds), a configuration is judged by the mean of its seeds' best
    scores, which is the score returned with the number of seeds it is the mean over, and the configuration without
    train.seed (no seed's trial scored that mean; its best seed's stands for its schedule): the best single trial was
    the configuration whose seeds varied most, its luckiest seed. Only the configurations with the most distinct seeds
    scored compete: one whose other seeds failed would stand on its one survivor's score. A configuration drawn
    more than once (a choice field repeated over num_samples) has a trial per draw and seed: its seeds count once
    each, each the mean of its draws (counted as trials, the configuration drawn most often won, however it
    scored)."""
    import statistics

    from jobs.workers.sweep_trial import at_best

    best = [at_best(r, fields) for r in results if not r.error and scored(r.metrics_dataframe)]
    if not best:
        raise RuntimeError("no trial ended without an error and with a select score: nothing to choose from "
                           "(see the trials table for each one's status and error)")
    if "train.seed" not in fields:
        return (*max(best, key=lambda b: b[1]), 0)
    groups: dict[str, dict] = {}  # configuration -> seed -> its trials
    for b in best:
        seeds = groups.setdefault(repr(sorted((k, v) for k, v in b[0].items() if k != "train.seed")), {})
        seeds.setdefault(b[0].get("train.seed"), []).append(b)
    most = max(map(len, groups.values()))
    mean, seeds = max(((statistics.fmean(statistics.fmean(b[1] for b in trials) for trials in g.values()), g)
                       for g in groups.values() if len(g) == most), key=lambda m: m[0])
    config, _, schedule = max((b for trials in seeds.values() for b in trials), key=lambda b: b[1])
    return {k: v for k, v in config.items() if k != "train.seed"}, mean, schedule, len(seeds)


def scored(df) -> bool:
    return df is not None and len(df) > 0 and "score" in df and bool(df["score"].notna().any())


def trial_status(result, max_evals: int = 0) -> str:
    """The row status of a trial from Tune's result: failed (an error), stopped early (by the scheduler, before
    its last step), finished (patience) (its own train.patience ended it), finished (max_evals) (it made the
    sweep's `max_evals` evaluations: ASHA's budget, reached by the trials that survived every rung) or finished."""
    last = result.metrics or {}
    if result.error:
        return "failed"
    if last.get("patience_stopped"):
        return "finished (patience)"
    if max_evals and last.get("training_iteration", 0) >= max_evals:
        return "finished (max_evals)"
    df = result.metrics_dataframe
    if df is not None and len(df) and "score" in df and last.get("step", 0) < last.get("total_steps", 0):
        return "stopped early"
    return "finished"


def unregistered(cfg) -> str:
    """Why a sweep that names a registered model registers none, whatever its trials do ("" if it may register one):
    seeds.count=0 runs no seed runs, and the seed-median run's model is the one registered. A sweep to explore is
    legitimate, but a `sweep && promote` after it would judge the version registered before, as if this sweep's."""
    t = cfg.finetune.tracking
    if cfg.seeds.count or not t.registered_model:
        return ""
    return (f"seeds.count=0: no seed runs, nothing registered as {t.registered_model}@{t.alias}; a promote after "
            f"this sweep judges the last {t.registered_model}@{t.alias}, registered before it")


def std_text(stats: dict) -> str:
    return f"{stats['std']:.4f}" if "std" in stats else "n/a (one seed)"


def summary(r, tracking_uri: str, dashboard: str, storage: Path) -> str:
    """The sweep's closing table (jobs/sweep.py's SweepResult `r`): trials, the best, the seeds, the registered
    model and where everything is."""
    from jobs.registry.tracking import redact
    from jobs.runtime import console

    best = (f"best config      {r.metric} {r.best_score:.4f} (the mean over {r.best_seeds} seeds)" if r.best_seeds
            else f"best trial       {r.metric} {r.best_score:.4f}")  # a seed grid's: no one trial scored it
    lines = ["", "=" * 72, f"sweep            {r.name}: {len(r.table)} trials "
             f"({sum(t['status'] == 'stopped early' for t in r.table)} stopped early, "
             f"{sum(t['status'] == 'failed' for t in r.table)} failed)",
             f"{best} with {r.best_config}"
             + (f" ({r.best_schedule}{'; the seed runs train with it throughout' if r.seeds else ''})"
                if r.best_schedule else "")]
    if r.seeds.get("scores"):
        lines.append(f"over seeds       median {r.seeds['median']:.4f} mean {r.seeds['mean']:.4f} "
                     f"std {std_text(r.seeds)} min {r.seeds['min']:.4f} max {r.seeds['max']:.4f} "
                     f"({len(r.seeds['scores'])} seeds, {len(r.seeds['degenerate'])} degenerate)")
        lines.append(f"median model     {r.export_dir}")
    if r.evaluation:
        main = r.eval_metric
        sizes = ", ".join(f"{split} {info['rows']:,}" for split, info in r.data.items())
        lines.append(f"evaluation       {main} {r.evaluation[main]:.4f} (the registered model, once; {sizes} rows)")
    if r.mlflow.get("version"):
        lines.append(f"registered model models:/{r.mlflow['registered_model']}@{r.mlflow['alias']} "
                     f"(v{r.mlflow['version']})")
    elif r.unregistered:
        lines.append(f"registered model none: {r.unregistered}")
    lines += [f"MLflow parent    {r.mlflow['parent_run_id']} in {redact(tracking_uri)}",  # no credentials printed
              f"table / plot     {r.table_path} / {r.plot_path}",
              f"Tune results     {storage / r.name}", f"Ray dashboard    {dashboard or 'not running'}",
              console.logs_line("trials, Ray Tune"),
              "=" * 72]
    return "\n".join(lines)


def settle_runs(grid, client, parent_id: str, max_evals: int = 0) -> list[tuple[str, str, object]]:
    """(trial id, status, MLflow run or None) of each trial of `grid`, whose run it ends with Tune's verdict (see
    RUN_STATUS): a trial stopped by the scheduler had its thread ended mid-run (it cannot end its own run), a failed
    one may have died unseen (a killed process, its retries spent: its run stayed RUNNING). A trial that raised once
    and then recovered on Tune's retry keeps its attempt's error as tag `last_error`: tag `error` marks a failed one."""
    runs = {r.data.tags.get("trial_id"): r for r in nested_runs(client, parent_id)}
    out = []
    for result in grid:
        # a trial that failed before its first report has no metrics: find its id in its folder's name
        trial_id = (result.metrics or {}).get("trial_id") or next(
            (t for t in runs if t and t in Path(str(result.path)).name), "")
        status, mlflow_run = trial_status(result, max_evals), runs.get(trial_id)
        if mlflow_run is not None:
            run_id, error = mlflow_run.info.run_id, mlflow_run.data.tags.get("error")
            client.set_terminated(run_id, RUN_STATUS[status])
            client.set_tag(run_id, "tune_status", status)
            if error is not None and status != "failed":
                client.set_tag(run_id, "last_error", error)
                client.delete_tag(run_id, "error")
        out.append((trial_id, status, mlflow_run))
    return out


def nested_runs(client, parent_id: str, page_size: int = 1000) -> list:
    """Every run under `parent_id`, page by page: one search returns at most 1,000 (the newest), and a sweep of
    more trials left its oldest RUNNING, their rows without a run."""
    experiment, runs, token = client.get_run(parent_id).info.experiment_id, [], None
    while True:
        page = client.search_runs([experiment], filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'",
                                  max_results=page_size, page_token=token)
        runs += page
        token = page.token
        if not token:
            return runs
