"""One sweep trial: a fine-tune in-process inside a Ray Tune function trainable (one worker, no Ray Train).

Contract with the driver (jobs/sweep.py), through `tune.with_parameters(trial, data=TrialInputs(...))`: what
every trial of a phase shares, once in the object store. The trial's sampled hyperparameters arrive as Tune's
`config` ({"optim.lr": ..., ...}) and win over `data.base`; after a PBT exploit the config also counts the trial's
exploits (EXPLOIT).

A trial is a fine-tune with Tune's report: the loop (evaluation cadence, best, patience, the non-finite policy)
is jobs/loops/finetune.py's, as the fine-tuning worker's is; this module supplies batches, the report and the
checkpoint. Every trial deals itself the train features the driver made (numpy blocks in the object store) in a new
order every epoch, seeded by its train.seed, as a one-worker fine-tune does (jobs/loops/train_order.py). Every
evaluation reports the select split's metrics (`score` = the task's main metric; a trial never sees the evaluation
split) and the searched fields it was made under (`hp/<field>`), every `checkpoint_every`-th and the last with a
Tune checkpoint of the whole training state (the engine's DeepSpeed checkpoint: weights, optimizer moments, step; the
loop's state), which PBT exploits and a resumed sweep continues from; ASHA needs only the metrics. Training runs on
the engine pretraining and fine-tuning use (jobs/engine/data_parallel.py), in a one-rank process group. On a restore the
weights, the optimizer moments and the loop's place come from the checkpoint, while the learning rate, weight
decay and schedule come from this trial's (possibly mutated) config (ray#36660: a restored optimizer state would
otherwise bring the donor's hyperparameters back).

Each trial is its own MLflow run under the sweep's parent run (tag `mlflow.parentRunId`), found again by
its Tune trial id after a restart; nothing is read from MLFLOW_RUN_ID (mlflow#15713).
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from jobs.config.finetune import FinetuneConfig, FinetuneOptimConfig
from jobs.config.sweep import EXPLOIT, SEARCHABLE, apply
from jobs.loops import ft_tasks
from jobs.loops.finetune import FinetuneLoop, _Window, select_metrics
from jobs.loops.train_order import TrainFeatures, epoch_batches
from jobs.runtime.faults import FaultsConfig, maybe_kill_trial
from jobs.runtime.shared_storage import require_shared_storage
from jobs.workers.finetune_model import build_engine, build_model, single_process_group
from jobs.workers.finetune_worker import materialize_files


@dataclass
class TrialInputs:
    """What every trial of a sweep phase shares; the driver makes it once (jobs/sweep.py)."""

    base: FinetuneConfig  # the resolved fine-tuning config every trial starts from (labels settled)
    train: list  # object refs: the train split's features as numpy blocks, made once (jobs/loops/train_order.py)
    select: Any  # ray.data.MaterializedDataset: the select split's features
    train_features: int  # their count: a trial's steps per epoch are ceil(train_features / its batch size)
    select_rows: list[dict]  # the select split's rows (its metrics need them: SQuAD's answers, ...)
    init_files: dict[str, bytes]  # the starting checkpoint's files
    tracking_uri: str
    experiment_id: str
    parent_run_id: str  # the sweep's MLflow run; each trial's run is nested under it
    sweep: str  # the sweep's name (a tag of each trial's run)
    phase: str = "search"  # search | seeds
    threads: float = 1.0  # torch threads: the trial's CPUs
    checkpoint_every: int = 1  # evaluations between checkpoints (and always the last)
    # the sweep's max_evals (0: none): a trial, and a seed run, ends at that many evaluations into its schedule, as
    # ASHA's max_t cut the trials the champion was chosen from
    max_evals: int = 0
    export: bool = False  # the seed phase: the last checkpoint holds the best model in HF format (`best/`)
    faults: FaultsConfig = field(default_factory=FaultsConfig)  # testing only: faults.kill_trial_at_step
    kill_marker: str = ""  # where the trial kill remembers it happened (once per sweep)


def trial(config: dict, data: TrialInputs) -> None:
    """The Tune function trainable."""
    from mlflow.tracking import MlflowClient
    from ray import tune

    params = {k: v for k, v in config.items() if k in SEARCHABLE}
    cfg = FinetuneConfig.from_dict(apply(data.base.to_dict(), params))
    ctx, exploit = tune.get_context(), int(config.get(EXPLOIT, 0))
    require_shared_storage(ctx.get_storage())  # before any training, not at the trial's first checkpoint
    client = MlflowClient(data.tracking_uri)
    run_id = trial_run(client, data, ctx.get_trial_id(), ctx.get_trial_name(), params,
                       own_run=own_run(tune.get_checkpoint(), ctx.get_trial_id()), exploit=exploit)
    torch.set_num_threads(max(1, int(data.threads)))
    run = None
    try:
        run = TrialRun(cfg, data, params, run_id, ctx.get_trial_id(), exploit=exploit)
        run.loop.run()
    except SystemExit:
        # Tune ends a trial's thread this way (tune.report raises it) when a scheduler stops or pauses the
        # trial or the sweep is interrupted; which one it was only the driver knows, so it settles the status.
        raise
    except BaseException as exc:
        from jobs.registry.redaction import redact

        error = redact(f"{type(exc).__name__}: {exc}")[:5000]
        _at_the_end(lambda: (client.set_tag(run_id, "error", error), client.set_terminated(run_id, "FAILED")))
        raise  # the trial's own error, whatever the store answered
    finally:
        if run is not None:
            run.close(client)
    _at_the_end(lambda: client.set_terminated(run_id, "FINISHED"))


def _at_the_end(request) -> None:
    """A request to the store as a trial ends, failing fast: the store down then must not make a trained trial a
    failed one (nor replace a failed one's own error); the sweep's driver ends every trial's run with Tune's verdict
    (jobs/search/outcome.settle_runs)."""
    from jobs.registry.metric_logger import quick_request

    quick_request(request, "MLflow request as the trial ended failed ({}); the sweep's driver ends the trial's run")


TRIAL_FILE = "trial.json"  # in a trial's checkpoint: whose it is, and its MLflow run


def own_run(checkpoint, trial_id: str) -> str:
    """The MLflow run recorded in `checkpoint` if it is this trial's own (a restart), "" otherwise (none, or a PBT
    donor's)."""
    if checkpoint is None:
        return ""
    with checkpoint.as_directory() as d:
        path = Path(d) / TRIAL_FILE
        recorded = json.loads(path.read_text()) if path.is_file() else {}
    return recorded.get("run_id") or "" if recorded.get("trial_id") == trial_id else ""


def trial_run(client, data: TrialInputs, trial_id: str, trial_name: str, params: dict, own_run: str = "",
              exploit: int = 0) -> str:
    """This trial's MLflow run: the one already made for this trial id (a restart, or a PBT exploit: its config's
    `exploit` count is past the run's), else a new nested run. A restart whose checkpoint names its run (`own_run`)
    asks the store failing fast, and trains on with that run when the store is down (warned; its restarts tag is not
    raised then); a new trial needs the store."""
    if own_run:
        from jobs.registry.metric_logger import quick_request

        made, run_id = quick_request(lambda: _trial_run(client, data, trial_id, trial_name, params, exploit),
                                     f"MLflow unreachable as trial {trial_id} restarts ({{}}); it trains on, logging "
                                     f"to its run {own_run} when the store is back")
        return run_id if made else own_run
    return _trial_run(client, data, trial_id, trial_name, params, exploit)


def _trial_run(client, data: TrialInputs, trial_id: str, trial_name: str, params: dict, exploit: int = 0) -> str:
    from mlflow.entities import Param

    parent = data.parent_run_id
    found = client.search_runs([data.experiment_id], filter_string=(
        f"tags.`mlflow.parentRunId` = '{parent}' and tags.trial_id = '{trial_id}'"), max_results=1)
    if found:  # its process started again, counted on the run: a PBT exploit, or a restart (a death, an interrupt)
        run, tags = found[0], found[0].data.tags
        # a new exploit (SeededPBT counts them in the config) restarted it on a donor's checkpoint: nothing failed; a
        # retry of an exploit has the exploit's count, and one of a sweep begun before the count none: restarts
        if exploit > int(tags.get("pbt.exploits", "0")):
            client.set_tag(run.info.run_id, "pbt.exploits", str(exploit))
        else:
            client.set_tag(run.info.run_id, "restarts", str(int(tags.get("restarts", "0")) + 1))
        client.update_run(run.info.run_id, status="RUNNING")
        return run.info.run_id
    run = client.create_run(data.experiment_id, run_name=trial_name, tags={
        "mlflow.parentRunId": parent, "trial_id": trial_id, "sweep": data.sweep, "phase": data.phase})
    client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
    return run.info.run_id


def retune(engine, optim: FinetuneOptimConfig, step: int) -> None:
    """Put `optim`'s peak learning rate and weight decay on a restored engine, at schedule position `step`: a
    loaded optimizer state carries the saving trial's values (the decay-free group keeps none)."""
    sched = engine.scheduler
    for group, decay in zip(engine.optimizer.param_groups, (optim.weight_decay, 0.0)):
        group["weight_decay"], group["initial_lr"] = decay, optim.lr
    sched.base_lrs = [optim.lr] * len(sched.base_lrs)
    sched.last_epoch = step
    lrs = [optim.lr * f(step) for f in sched.lr_lambdas]
    for group, lr in zip(engine.optimizer.param_groups, lrs):
        group["lr"] = lr
    sched._last_lr = lrs


class TrialRun:
    """The trial's model, engine and loop, and what the loop asks of a trial: batches, select metrics, the report."""

    def __init__(self, cfg: FinetuneConfig, data: TrialInputs, params: dict, run_id: str, trial_id: str,
                 exploit: int = 0):
        from ray import tune

        from jobs.registry.metric_logger import RankZeroLogger

        self.cfg, self.data, self.params, self.trial_id, self.exploit = cfg, data, params, trial_id, exploit
        torch.manual_seed(cfg.train.seed)
        self.init_dir = materialize_files(data.init_files, self)
        model, _ = build_model(cfg, self.init_dir)
        t = cfg.train
        self.steps_per_epoch, schedule = t.steps(data.train_features)
        # max_evals: the loop ends at that many evaluations (ASHA's max_t; a seed run as the trials it follows), the
        # learning rate on the whole run's schedule, as a trial ASHA cut there had it
        cut = data.max_evals * (t.eval_every_steps or self.steps_per_epoch)
        self.total = min(schedule, cut) if data.max_evals else schedule
        single_process_group(cfg.scaling.use_gpu)
        self.engine = build_engine(model, cfg, schedule)
        self.logger = RankZeroLogger(data.tracking_uri, run_id, 0)
        self.best_state, self.restored_from, self.pred_classes = None, "", 0
        self.segment = ""  # a new one at each PBT exploit: its reports are another model's, whatever their steps
        self.own_best = -math.inf  # its own best score (best/<metric>): a PBT donor's loop state carries the donor's
        self.select_batches, self.tokenizer = None, None  # read at the first evaluation
        self.train = None  # the train features, read at the first epoch
        self.loop = FinetuneLoop(
            self.engine, t, metric=ft_tasks.main_metric(cfg.task), total_steps=self.total, optim_lr=cfg.optim.lr,
            epoch_batches=self._epoch_batches, select_metrics=self._select_metrics, report=self._report,
            keep_best=self._keep_best, after_step=self._after_step, track=self.logger.log,
            checkpoint_every=data.checkpoint_every)
        checkpoint = tune.get_checkpoint()
        if checkpoint is not None:
            self.restore(checkpoint)

    def restore(self, checkpoint) -> None:
        with checkpoint.as_directory() as d:
            # weights and moments; the optimizer state brings the old lr and decay too, the schedule stays this trial's
            state = self.engine.load(d, schedule=False)
            self.logger.restore_counts(Path(d))  # its own restart's: the outage counts before it (a donor's: not)
        if "epoch" not in state:  # a checkpoint of a trial from before the shared loop: its place from its step
            state["epoch"], state["epoch_steps"] = divmod(state["step"], self.steps_per_epoch)
        self.loop.load_state(state)
        self.best_state = state.get("best_state")
        if state["trial_id"] == self.trial_id and "torch_rng" in state:  # its own restart: dropout where it was
            torch.set_rng_state(state["torch_rng"])  # (__init__ seeded it as at the trial's start)
            if "cuda_rng" in state and torch.cuda.is_available():
                torch.cuda.set_rng_state(state["cuda_rng"])
        # its own restart: the same stretch of reports, from the same donor (kept in its checkpoints)
        self.segment, self.restored_from = state.get("segment", ""), state.get("restored_from", "")
        if state["trial_id"] != self.trial_id:  # PBT exploit: another trial's weights, this trial's hyperparameters
            self.restored_from = state["trial_id"]
            # a donor is often behind: the trial reports steps it reported before, from another model, which must
            # not replace its own earlier reports of them (by_step). Named by the donor's checkpoint and the exploit's
            # count (EXPLOIT), not drawn: a retry of the trial before its own next checkpoint restores that checkpoint
            # with that config again, and rejoins its segment; a later exploit of the same checkpoint (PBT clones the
            # donor's checkpoint of its last perturbation, which may not have moved) starts one of its own, its
            # earlier try's reports kept. No count: a scheduler that sets none (a sweep begun before it did)
            self.segment = f"{state['trial_id']}@{state['step']}" + (f"#{self.exploit}" if self.exploit else "")
            self.loop.bad_evals, self.loop.stopped = 0, False  # its patience is its own, from here
            # and so is its train/loss: the donor's steps since its last progress line would be averaged into this
            # trial's first one, on this trial's run (its own restart keeps its window)
            self.loop.loss_window = dict(_Window.EMPTY)
            self.logger.ask(lambda client: client.set_tag(self.logger.run_id, "pbt.restored_from", self.restored_from))
        retune(self.engine, self.cfg.optim, self.loop.step)  # this config's hyperparameters win (ray#36660)
        # this trial's evaluations so far are its run's (a donor's are not); none where the store is down (counted):
        # its own best then starts anew
        history = self.logger.ask(lambda client: client.get_metric_history(self.logger.run_id, self.loop.metric))
        scores = [(m.step, m.value) for m in history or []]
        # an exploit: all of them (its own weights made them, whatever the donor's step); its own restart: as its
        # checkpoint says (one from before it kept own_best: up to the restored step, an evaluation after it was
        # redone by this restart)
        if state["trial_id"] != self.trial_id:
            self.own_best = max((v for _, v in scores), default=-math.inf)
        else:
            self.own_best = state.get("own_best", max((v for s, v in scores if s <= self.loop.step), default=-math.inf))

    def close(self, client) -> None:
        """Flush the metrics still buffered (a tracking server that was down) and record on the trial's run how
        many writes failed or never arrived, as the fine-tuning job's summary does."""
        counts = self.logger.close(self.cfg.tracking.flush_timeout_s)
        if any(counts.values()):
            try:
                client.set_tag(self.logger.run_id, "tracking", " ".join(f"{k}={v}" for k, v in counts.items()))
            except Exception:  # still unreachable: Tune's own result files hold the metrics
                pass

    def _epoch_batches(self, epoch: int, taken: int):
        """The train features of `epoch` in this trial's order (its seed's), less the `taken` before a restore."""
        import ray

        if self.train is None:
            self.train = TrainFeatures(ray.get(self.data.train))
        t = self.cfg.train
        return epoch_batches(self.train, seed=t.seed, epoch=epoch, rank=0, world=1, batch_size=t.batch_size,
                             taken=taken)

    def _after_step(self, step: int) -> None:
        maybe_kill_trial(self.data.faults, step, self.trial_id, self.data.phase, Path(self.data.kill_marker))

    @torch.no_grad()
    def _select_metrics(self) -> dict:
        """The task's official metrics on the select split (as the fine-tuning worker's); keeps how many classes
        were predicted for the report (1 = collapsed to one class; 0 where that does not apply)."""
        task = self.cfg.task
        if self.select_batches is None:
            from pipelines.tasks.common import load_tokenizer

            self.select_batches = list(self.data.select.iter_batches(
                batch_size=self.cfg.train.eval_batch_size, batch_format="numpy"))
            self.tokenizer = load_tokenizer(str(self.init_dir)) if task.kind in ft_tasks.NEEDS_TOKENIZER else None
        metrics, self.pred_classes = select_metrics(self.engine, task, self.select_batches, self.data.select_rows,
                                                    self.tokenizer)
        return metrics

    def _keep_best(self) -> None:
        """The seed phase exports the best evaluation's weights at the end: kept as the release holds them, the
        optimizer's fp32 weights in bf16 and fp16. The module's own state was their 16-bit copies, and the export
        put the optimizer's weights of the moment over them: the last step's, not the best's."""
        if self.data.export:
            self.best_state = self.engine.release_state()  # a one-rank trial: rank 0's, the whole model

    def _report(self, record: dict, checkpoint: bool, final: bool) -> None:
        from ray import tune

        step = record["step"]
        # the searched fields this report was made under: PBT changes them during a trial, so the driver reads the
        # config of a trial's best evaluation from that report's `hp/` (at_best, below), not the trial's last
        hp = {f"hp/{k}": v for k, v in self.params.items()}
        # best/<metric>: the trial's best evaluation so far, which ranks it (at_best); MLflow's compare view shows a
        # metric's last value, and select/<metric>'s last is not the trial's score where it peaked earlier. Its own
        # reports' best, not the loop's (after a PBT exploit, the donor's)
        # best_hp/<field>: the searched values of the evaluation that made best/<metric> (its first, as at_best),
        # which Compare shows beside it; hp/<field>'s last is a later exploit's where PBT perturbed the trial since
        improved = float(record[self.loop.metric]) > self.own_best
        self.own_best = max(self.own_best, float(record[self.loop.metric]))
        self.logger.log({**{k: float(v) for k, v in hp.items()}, f"best/{self.loop.metric}": self.own_best,
                         **({f"best_hp/{k}": float(v) for k, v in self.params.items()} if improved else {})}, step=step)
        groups = self.engine.optimizer.param_groups
        report = {**record, **hp, "score": record[self.loop.metric], "best_score": self.own_best,
                  "total_steps": self.total,
                  "pred_classes": self.pred_classes, "restored_from": self.restored_from, "seed": self.cfg.train.seed,
                  "segment": self.segment,
                  # the trial's own patience ended it (train.patience): a normal end, not the scheduler's stop
                  "patience_stopped": self.loop.stopped,
                  # the peak lr and decay the optimizer trains with; after a PBT exploit, this trial's mutated
                  # values (a restored optimizer state carries the donor's)
                  "optimizer_lr": groups[0]["initial_lr"], "optimizer_weight_decay": groups[0]["weight_decay"]}
        if not checkpoint:
            tune.report(report)  # ASHA and the table need only the metrics; a checkpoint is the whole state
            return
        with tempfile.TemporaryDirectory() as tmp:
            rng = {"torch_rng": torch.get_rng_state(),  # dropout from here: a restart goes on as the trial would have
                   **({"cuda_rng": torch.cuda.get_rng_state()} if torch.cuda.is_available() else {})}
            self.engine.save(tmp, {**self.loop.state(), "best_state": self.best_state, "trial_id": self.trial_id,
                                   "segment": self.segment, "restored_from": self.restored_from,
                                   "own_best": self.own_best, **rng})
            if final and self.data.export:
                self.export_best(Path(tmp) / "best")
            self.logger.save_counts(Path(tmp))  # a restart of this trial goes on from these counts
            (Path(tmp) / TRIAL_FILE).write_text(json.dumps({"trial_id": self.trial_id, "run_id": self.logger.run_id}))
            tune.report(report, checkpoint=tune.Checkpoint.from_directory(tmp))

    def export_best(self, out: Path) -> None:
        """The best evaluation's weights in HF format (the last checkpoint carries them), and the history up to it."""
        self.engine.export(out, self.init_dir, ft_tasks.id2label(self.cfg.task), max_length=self.cfg.task.max_seq_len,
                           state=self.best_state)
        (out.parent / "history.json").write_text(json.dumps(self.loop.best_history(), indent=1))


# -- read back on the driver: the config each report was made under ---------------------------------------

def at_best(result, fields) -> tuple[dict, float, str]:
    """A trial's best select score, the searched `fields` in effect at the report that made it, and "" or a note of the
    PBT schedule that led there. Not Result.config: that is the trial's last report's config, and PBT sets a trial's
    config anew at each exploit or explore, so a trial that peaked and was then perturbed would pair its best score
    with a later config, which the seed runs would then retrain with."""
    df, trial = by_step(result.metrics_dataframe), (result.metrics or {}).get("trial_id", result.path)
    if not df["score"].notna().any():
        raise ValueError(f"trial {trial} reported no select score")
    at = int(df["score"].idxmax())
    config, first = _config_of(df, at, fields, trial), _config_of(df, 0, fields, trial)
    donors = sorted({str(d) for d in df["restored_from"].iloc[: at + 1].fillna("") if d})
    history = ([f"started with {first}"] if first != config else []) + (
        [f"continued from the weights of trial(s) {', '.join(donors)}"] if donors else [])
    schedule = f"PBT schedule: in effect at step {int(df['step'][at])}; the trial {' and '.join(history)}"
    return config, float(df["score"][at]), schedule if history else ""


def by_step(df):
    """A trial's reports, one per evaluated step in step order: a trial restarted from an earlier checkpoint reports
    the steps after it again, and the last report of a step wins (the one its later evaluations follow from). A PBT
    exploit starts a `segment` of its own: a donor behind the trial made it report steps again, from another model,
    and those do not replace its own; its reports stay in the order made (a step may come twice, once a segment)."""
    if "segment" in df and df["segment"].fillna("").astype(str).ne("").any():
        return df.assign(segment=df["segment"].fillna("").astype(str)).drop_duplicates(
            ["segment", "step"], keep="last").reset_index(drop=True)
    return df.drop_duplicates("step", keep="last").sort_values("step", kind="stable").reset_index(drop=True)


def _config_of(df, at: int, fields, trial: str) -> dict:
    """The searched fields report `at` ran under: the trial's own `hp/<field>`, else Tune's `config/<field>` (its
    trainable's config, which it records with each report: a report from before trials reported `hp/`)."""
    config = {}
    for k in fields:
        value = next((df[c][at] for c in (f"hp/{k}", f"config/{k}") if c in df and df[c].notna()[at]), None)
        if value is None:
            raise ValueError(f"trial {trial}: report {at} carries neither hp/{k} nor config/{k}, so the config it "
                             "was made under is unknown")
        config[k] = SEARCHABLE[k](value)  # a plain int or float, as Tune's config holds it
    return config
