"""What each Ray Train worker runs: stream its shard, mask at batch time, step the engine, report.

Contract with the driver (jobs/pretrain.py): `config` holds the whole PretrainConfig as a dict plus
the prepared-data facts (special ids, continuation mask, train shard sizes), the data-position
tracker actor and the MLflow run id. Nothing else is captured from the driver, and no driver-local
path is read, so workers may run on any node.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import ray
import ray.train
import torch
import torch.distributed as dist

from bert_core.masking import PretrainingCollator
from bert_core.tokenizer import SpecialIds
from jobs.runtime import resubmit
from jobs.config.pretrain import PretrainConfig
from jobs.loops.data_position import DataPosition, ExampleIndex
from jobs.workers.pretrain_engine import build_engine
from jobs.loops.epoch_stream import EpochStream
from jobs.loops.replica_share import eval_share, replica_batches
from jobs.runtime.faults import Faults
from jobs.runtime.shared_storage import require_shared_storage
from jobs.loops.loss_guard import LossGuard, NonFiniteLossError, lr_scale
from jobs.loops.metrics import MetricsWindow, flops_per_token, peak_for, progress_line
from jobs.engine.checkpoint_parts import restore_rng, rng_arrays, rng_states, write_rank_files, write_topology
from jobs.workers.reshard import load_engine
from jobs.engine.objectives import PretrainingObjective
from jobs.engine.seam import in_lockstep, longest, summed

# Progress goes through logging: Ray Train V2 tees a worker's print() to both stdout and its logger.
log = logging.getLogger("bert_foundry.train")


class Prepared(NamedTuple):
    """A micro-batch as the stream hands it to the loop: read and collated (masks drawn) ahead of it."""

    raw: dict  # the rows as read (the loop records their example ids); {} on later pipeline stages
    batch: dict | None  # the model's tensors; None on later pipeline stages
    index: int  # the collator's count when it drew this batch's masks (masks are a function of it)


NO_DATA = Prepared({}, None, 0)  # later pipeline stages: their inputs are stage 0's activations

def peak_flops(use_gpu: bool, precision: str = "bf16") -> float | None:
    """Dense half-precision peak of the local accelerator, for MFU; None on CPU, on an unknown GPU and for fp32
    training (which the half-precision peak does not measure)."""
    if not (use_gpu and torch.cuda.is_available()) or precision not in ("bf16", "fp16"):
        return None
    return peak_for(torch.cuda.get_device_name())


def eval_line(m: dict) -> str:
    nsp = f"nsp_acc {m['nsp_acc']:.4f} " if "nsp_acc" in m else ""  # no NSP in the loss: none measured
    return f"mlm_acc {m['mlm_acc']:.4f} {nsp}mlm_loss {m['mlm_loss']:.4f}"


class Worker:
    """One rank's training state; `run()` is the loop. Split out so each piece fits on a screen."""

    def __init__(self, config: dict):
        self.config = config
        self.cfg = cfg = PretrainConfig.from_worker(config["cfg"])
        if not cfg.scaling.use_gpu:
            os.environ["DS_ACCELERATOR"] = "cpu"  # before deepspeed is imported by the engine
        from jobs.registry.metric_logger import RankZeroLogger

        self.ctx = ctx = ray.train.get_context()
        self.rank, self.world = ctx.get_world_rank(), ctx.get_world_size()
        self.t = cfg.train
        self.engine = None  # built by restore()
        # Pipelines: every first-stage rank streams the whole (unsplit) set and keeps its replica's share.
        self.pipelined = cfg.deepspeed.pipeline_stages > 1
        self.replica, self.replicas = 0, 1  # data-parallel position, known once the engine is built
        self.eval_share: dict | None = None  # this replica's eval rows, masked (evaluate)
        self.logger = RankZeroLogger(cfg.tracking.tracking_uri, config.get("mlflow_run_id"), self.rank)
        self.index = ExampleIndex(config["train_shard_rows"])
        self.tracker = config["data_tracker"]
        self.ledger = config["rollback_ledger"]
        self.guard = LossGuard(self.t.rollback_after)
        self.rollbacks, self.rollback_log, self.saved_rollbacks = 0, [], []  # saved: the checkpoint's (earlier jobs')
        self.faults = Faults(cfg.faults, self.rank, self.world, cfg.run_name,  # tests only (jobs/runtime/faults.py)
                             marker_dir=Path(cfg.output_dir).resolve() / cfg.run_name)  # seen by every node
        self.special = SpecialIds(**config["special_ids"])
        self.continuation = (np.asarray(config["continuation"], dtype=bool) if self.t.masking.whole_word
                             else None)
        self.collate = self._collator(self.t.seed * 1000 + self.rank)  # each rank draws its own masks
        self.mask_next = 0  # the collator count of the next batch the loop takes (checkpointed)
        self.position = DataPosition.start(self.index.num_examples)
        self.pending_ids: list[np.ndarray] = []  # this rank's ids consumed since the last checkpoint
        self.step_ids: list[tuple[int, np.ndarray]] = []  # (epoch, ids) the next optimizer step trains (_record_ids)
        self.step, self.before = 0, {}
        self.step_lr = float("nan")  # the rate the last optimizer step trained at (run(): logged as train/lr)
        self.carried: dict | None = None  # the log window's steps before the checkpoint restored (_run_window)
        self.stream = None  # opened by restore()
        if self.cfg.faults.record_ids_dir:  # rank 0's pid names this attempt in every rank's record
            self.attempt = int(_gather(np.array(os.getpid()))[0])

    def _collator(self, seed: int) -> PretrainingCollator:
        return PretrainingCollator(self.special, self.config["tokenizer_size"], self.cfg.data.max_seq_len,
                                   self.t.masking, seed=seed, continuation=self.continuation, packing=self.t.packing)

    # -- engine and data position ----------------------------------------------------------------
    def _load_engine(self, ckpt_dir: Path, weights_only: bool = False, schedule: bool = True) -> dict:
        self.engine, client_state = load_engine(ckpt_dir, self.cfg, self.world, self.ctx.get_local_rank(),
                                                self.ctx.get_node_rank(), weights_only=weights_only,
                                                schedule=schedule)
        return client_state

    def restore(self) -> None:
        """Load what the run resumes from (its own last checkpoint, or the phase hand-off's), build the
        engine, open this rank's stream. The engine is built here, not in __init__: how DeepSpeed loads is
        fixed at build. The stream opens first, so the first batches are on their way while DeepSpeed
        initialises (pipelines open it after: the engine says which ranks read)."""
        checkpoint, plan = ray.train.get_checkpoint(), None
        if checkpoint:
            with checkpoint.as_directory() as d:
                self.position = DataPosition.from_bytes((Path(d) / "data_position.npz").read_bytes())
                rng = dict(np.load(Path(d) / "rng.npz"))
                saved = rng.get("mask_next")  # per rank; absent in checkpoints from before read-ahead collation
                if saved is not None:
                    self._start_masks(int(saved[min(self.rank, len(saved) - 1)]))
                state = self._load_engine(Path(d))
                self.logger.restore_counts(Path(d))  # the MLflow outage counts of the attempts before this one
                if saved is None:
                    self._start_masks(state["micro_batches"])
            # resubmitted with more (or fewer) steps, another warmup or decay: optim.* may change, said so once the
            # rollbacks set the rate (each absent from checkpoints before it was kept)
            plan = dict(planned=state.get("max_steps", self.t.max_steps), saved_warmup=state.get("warmup_steps"),
                        schedule=state.get("schedule"), poly_power=state.get("poly_power"))
            self.step, self.before = state["step"], state.get("eval_before", {})
            self.carried = state.get("log_window")  # absent from checkpoints before it was kept: an empty window
            self._record_weights("restored")
            self.guard.skipped = state.get("nonfinite_skipped", 0)
            self.saved_rollbacks = state.get("rollbacks", [])
            restore_rng(rng, self.rank)
            if self.rank == 0:
                log.info(f"[resume] step {self.step}, epoch {self.position.epoch}, "
                         f"{self.position.samples_consumed:,} examples of the epoch already consumed")
        elif self.t.init_checkpoint:  # phase hand-off: weights (and maybe optimizer) only
            self._open_stream()
            with ray.train.Checkpoint(self.t.init_checkpoint).as_directory() as d:
                self._load_engine(Path(d), weights_only=self.t.reset_optimizer, schedule=False)
            if not self.t.reset_optimizer:  # its moments carried over; its steps (and skipped ones) counted anew
                self.engine.restart_counts()
            if self.rank == 0:
                log.info(f"[init] weights from {self.t.init_checkpoint}"
                         f"{' (fresh optimizer)' if self.t.reset_optimizer else ' (optimizer carried over)'}")
        else:
            self._open_stream()
            self.engine = build_engine(self.cfg)
        self.replica, self.replicas = self.engine.data_parallel
        self._apply_rollbacks()
        line = plan and self.engine.resumed_plan(**plan, saved_scale=lr_scale(self.saved_rollbacks))
        if line and self.rank == 0:
            log.warning(line)
        if self.pipelined:
            self.stream = (EpochStream(self._open_epoch, self.position.epoch, self.t.prefetch_batches)
                           if self.engine.reads_data else itertools.repeat(NO_DATA))

    def _start_masks(self, index: int) -> None:
        """Resume the masks where the checkpoint's loop was, then open the stream (which draws them ahead)."""
        self.collate.load_state_dict({**self.collate.state_dict(), "batches_produced": index})
        self.mask_next = index
        self._open_stream()

    def _apply_rollbacks(self) -> None:
        """After a loss rollback (see jobs/loops/loss_guard.py) train on at the reduced learning rate: this job's
        (the ledger's) and those of the jobs before it that the checkpoint carries (a resubmission's ledger starts
        empty, and scale_lr sets the rate from optim.lr), each once."""
        mine = ray.get(self.ledger.rollbacks.remote())
        self.rollback_log = list({r.get("id", i): r for i, r in enumerate([*self.saved_rollbacks, *mine])}.values())
        self.rollbacks = len(self.rollback_log)
        if self.rollbacks:
            scale = lr_scale(self.rollback_log)
            self.engine.scale_lr(scale)
            if self.rank == 0:
                log.info(f"[rollback] {self.rollbacks} so far: resuming at step {self.step} with "
                         f"{scale:g} x the learning rate")

    def _open_stream(self) -> None:
        """Publish the position the run starts from (every rank waits until it is set), then open this
        rank's batches, epoch after epoch, read ahead across epoch ends (jobs/loops/epoch_stream.py)."""
        if self.rank == 0:
            ray.get(self.tracker.set.remote(self.position.to_bytes()))
        _barrier()
        self.first_epoch = self.position.epoch
        if not self.pipelined:
            self.stream = EpochStream(self._open_epoch, self.position.epoch, self.t.prefetch_batches)

    def _open_epoch(self, epoch: int):
        """Epoch `epoch`'s batches (called by the stream's reader, ahead of the loop). A later epoch opens
        once every reading rank has read the one before to the end and the tracker has moved on: its
        streams then drop nothing, whatever the restored epoch's position was (jobs/loops/data_position.py)."""
        if epoch > self.first_epoch:
            self.tracker.end_epoch.remote(epoch - 1, self.rank)
            while ray.get(self.tracker.epoch.remote()) < epoch:
                time.sleep(0.05)
        batches = self._read("train", local_shuffle_buffer_size=8 * self.t.micro_batch_size,
                             local_shuffle_seed=self.t.seed + 7919 * epoch + self.rank)
        return (self._prepare(raw) for raw in batches)

    def _prepare(self, raw: dict) -> Prepared:
        """Collate in the stream's reader, ahead of the loop. Masks are a function of the collator's seed
        and count, so a batch read ahead and left behind at an epoch end only skips a count, and a
        resumed run that restarts the count at the checkpoint's `mask_next` draws what the first would."""
        index = self.collate.batches_produced
        return Prepared(raw, self.collate(raw), index)

    def _read(self, dataset: str, **iter_kwargs):
        """This rank's micro-batches of `dataset`. Ray splits the data between ranks, except for pipelines
        (see jobs/pretrain.py): there each first-stage rank reads the whole set and keeps the examples whose index
        falls to its data-parallel replica, re-batched to micro_batch_size rows (replica_batches)."""
        mb, replicas = self.t.micro_batch_size, self.replicas if self.pipelined else 1
        batches = ray.train.get_dataset_shard(dataset).iter_batches(
            batch_size=mb * replicas, batch_format="numpy", **iter_kwargs)
        if replicas == 1:
            return iter(batches)
        return replica_batches(batches, lambda b: self.index(b["example_id"]) % replicas == self.replica, mb)

    @staticmethod
    def _next_batch(batches) -> tuple[Prepared | None, float]:
        """The next batch in lockstep, and the seconds this rank waited for it, collation included where
        it was not done ahead (the all-reduce that keeps ranks in lockstep is a wait for the other ranks,
        not for data: it is not counted)."""
        start = time.perf_counter()
        raw = next(batches, None)
        waited = time.perf_counter() - start
        return in_lockstep(raw), waited

    def _new_epoch(self, stream) -> None:
        self.position = DataPosition(self.position.epoch + 1, np.zeros(self.index.num_examples, dtype=bool))
        self.pending_ids = []  # those examples belong to the finished epoch
        if isinstance(stream, EpochStream):
            stream.advance()

    # -- evaluation ------------------------------------------------------------------------------
    def evaluate(self) -> dict:
        """MLM/NSP metrics on the run's fixed eval rows (jobs/pretrain.py), this replica scoring every
        replicas-th row: the examples and their masks are the same before and after training and on any worker
        count or micro-batch size (dynamic masks are drawn once, 32 rows at a time, on every rank alike; a
        resubmission reads as many rows as its checkpoint's run did: jobs/pretrain._held_out_read), so the metrics of a
        run resubmitted on another count, or of runs of different sizes, compare."""
        if not self.engine.reads_data:
            return self.engine.evaluate([])
        collate = self._collator(10**6)
        if self.eval_share is None:
            self.eval_share = eval_share(ray.get(self.config["eval_rows"]), collate, self.replica, self.replicas)
        share, mb = self.eval_share, self.t.micro_batch_size
        n = len(share["example_id"])
        return self.engine.evaluate(collate({k: v[i:i + mb] for k, v in share.items()}) for i in range(0, n, mb))

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> None:
        t = self.t
        self.restore()
        if self.step == 0:
            self.before = self.evaluate()
            if self.rank == 0:
                log.info(f"[eval] before training: {eval_line(self.before)}")
            self.logger.log({f"eval/{k}": v for k, v in self.before.items()}, step=0)
        flops_token = flops_per_token(self.cfg.model, self.cfg.data.max_seq_len)
        peak = peak_flops(self.cfg.scaling.use_gpu, self.cfg.deepspeed.precision)
        window, start_step, run_start, metrics = MetricsWindow(), self.step, time.perf_counter(), {}
        batches, empty_epochs, self.save_owed = self.stream, 0, False
        while self.step < t.max_steps:
            item, waited = self._next_batch(batches)
            if item is None:
                # one empty epoch is a resumed epoch's consumed end; two in a row would loop forever, stepping never
                empty_epochs += 1
                if empty_epochs == 2:
                    raise RuntimeError("an epoch of the training data gave no batch to any rank: this rank's share "
                                       "of the data is empty (fewer training examples than data-parallel ranks?)")
                self._new_epoch(batches)
                continue
            empty_epochs = 0
            raw, batch = item.raw, item.batch
            if raw:
                self.mask_next = item.index + 1
            lr = self.engine.lr  # the rate this step trains at: DeepSpeed steps the schedule right after the update
            stats = self.engine.step(batch, inject_nan=self.faults.nan_now(self.step, self.rollbacks))
            if raw:
                self.pending_ids.append(np.asarray(raw["example_id"]))
                if stats.finite:  # a skipped micro-batch is consumed (marked at the checkpoint) but trains nothing
                    self.step_ids.append((self.position.epoch, self.pending_ids[-1]))
            if self.guard.observe(stats):
                self._roll_back()
            if not stats.finite:  # skipped (data parallel), or a pipeline step whose update the optimizer dropped
                window.nonfinite += max(stats.micro_batches, 1)
            else:
                window.add(stats, tokens=int(batch["attention_mask"].sum()) if raw else 0,
                           samples=len(raw["example_id"]) if raw else 0, data_wait=waited)
            if not stats.optimizer_stepped:
                continue
            self.step, self.step_lr = self.step + 1, lr
            self.faults.maybe_fail(self.step)
            self._record_ids(stats.finite)
            last = self.step == t.max_steps
            if self.step % t.log_every == 0 or last:
                window.data_wait = longest(window.data_wait)  # in lockstep, a rank short of data stalls all
                window, self.carried = self._run_window(window), None
                metrics = window.summary(1 if not self.pipelined else self.replicas, flops_token, peak,
                                         devices=self.world, metrics=self.engine.objective.metrics)
                metrics.update(self._position_metrics())
                if self.cfg.scaling.use_gpu and torch.cuda.is_available():
                    metrics["gpu_mem_gb"] = torch.cuda.max_memory_allocated() / 2**30
                eta = (time.perf_counter() - run_start) / (self.step - start_step) * (t.max_steps - self.step)
                if self.rank == 0:
                    log.info(progress_line(self.step, t.max_steps, metrics, eta))
                self.logger.log({f"train/{k}": v for k, v in metrics.items() if k != "step"}, step=self.step)
                window = MetricsWindow()
            if self._checkpoint_due(last):
                saving = time.perf_counter()
                self.checkpoint(metrics, last, window)
                window.start += time.perf_counter() - saving  # the save and upload are no window's steps
        if isinstance(batches, EpochStream):
            batches.close()
        if start_step >= t.max_steps:  # resumed a finished run: report its final state again
            self.checkpoint(metrics, True, window)

    def _run_window(self, window: MetricsWindow) -> MetricsWindow:
        """The run's window since the last log (every rank calls it): data parallel, every rank's share summed, the
        run's loss, accuracies and rates, not rank 0's (a pipeline's ranks each hold the run's loss and sums); plus the
        steps of it before the checkpoint this process restored (self.carried, every rank's already). Its rates stay
        this process's: tokens, samples and seconds are all counted from the restore."""
        if not self.pipelined:
            window = window.summed(summed, PretrainingObjective.sum_keys)
        c = self.carried
        if not c:
            return window
        return replace(window, micro_steps=window.micro_steps + c["micro_steps"], loss=window.loss + c["loss"],
                       sums={k: window.sums.get(k, 0.0) + c["sums"].get(k, 0.0) for k in {*window.sums, *c["sums"]}},
                       nonfinite=window.nonfinite + c["nonfinite"])

    def _checkpoint_due(self, last: bool) -> bool:
        """Whether the step just taken saves a checkpoint: the last, and every checkpoint_every-th, but not inside a
        non-finite streak (a pipeline counts a step whose update the optimizer dropped): a rollback restores the
        latest checkpoint, and one saved mid-streak holds the weights that were giving NaN, so every rollback would
        return to them. The save waits for the next finite step."""
        every = self.t.checkpoint_every
        self.save_owed = self.save_owed or bool(every and self.step % every == 0)
        if last or (self.save_owed and not self.guard.streak):
            self.save_owed = False
            return True
        return False

    def _position_metrics(self) -> dict:
        """Where the run is, reported with each window's metrics. `lr`: the rate the step just taken trained at, as
        grad_norm is its own (the engine's `lr` is the next step's by now). `skipped_steps`: optimizer steps DeepSpeed
        dropped on an overflow (jobs/engine/seam.py), counted in `step` all the same: max_steps, checkpoints and resumes
        count DeepSpeed's steps."""
        return dict(step=self.step, epoch=self.position.epoch, lr=self.step_lr, grad_norm=self.engine.grad_norm(),
                    nonfinite_total=self.guard.skipped, rollbacks=self.rollbacks,
                    skipped_steps=self.engine.skipped_steps)

    # -- checkpoints -----------------------------------------------------------------------------
    def checkpoint(self, metrics: dict, last: bool, window: MetricsWindow | None = None) -> None:
        """All ranks save their shard of engine state; rank 0 adds the data position and RNG states.
        The final report also carries the release checkpoint (HF format). `window`: the steps since the last log,
        whose loss and sums the checkpoint keeps so a resume's first log averages the same steps (None: none kept)."""
        from ray.train import Checkpoint

        ids = _gather(np.concatenate(self.pending_ids) if self.pending_ids else np.zeros(0, np.int64))
        rngs = _gather(rng_states())
        run = None if window is None else self._run_window(window)  # every rank's (an all-reduce): any world size
        kept = None if run is None else {"micro_steps": run.micro_steps, "loss": run.loss, "sums": dict(run.sums),
                                         "nonfinite": run.nonfinite}
        mask_next = _gather(np.array(self.mask_next))
        self.pending_ids = []
        if self.rank == 0:
            self.position.consumed[self.index(np.concatenate(ids))] = True
        report = {**{k: v for k, v in metrics.items() if isinstance(v, (int, float))},  # the last log's ...
                  "step": self.step, "epoch": self.position.epoch,  # ... and where this checkpoint is, over its own
                  "samples_consumed_in_epoch": self.position.samples_consumed}
        with tempfile.TemporaryDirectory() as tmp:
            self.engine.save(Path(tmp) / "engine", client_state={
                "step": self.step, "micro_batches": self.mask_next, "max_steps": self.t.max_steps,
                "warmup_steps": self.engine.optim.warmup_steps, "schedule": self.engine.optim.schedule,
                "poly_power": self.engine.optim.poly_power,
                "eval_before": self.before, "nonfinite_skipped": self.guard.skipped, "rollbacks": self.rollback_log,
                "log_window": kept})
            self._record_weights("saved")
            self.faults.maybe_fail(self.step, "write")
            if self.rank == 0:
                (Path(tmp) / "data_position.npz").write_bytes(self.position.to_bytes())
                d = self.cfg.deepspeed
                write_topology(Path(tmp), self.world, d.zero_stage, d.pipeline_stages, d.partition_method)
                resubmit.record(Path(tmp), self.config.get("mlflow_run_id"), self.step, self.config["basis"],
                                self.config.get("held_out"))
                np.savez(Path(tmp) / "rng.npz", mask_next=np.stack(mask_next), **rng_arrays(rngs))
            if last:
                after = self.evaluate()
                report.update({f"eval_before/{k}": v for k, v in self.before.items()})
                report.update({f"eval_after/{k}": v for k, v in after.items()})
                if self.rank == 0:
                    log.info(f"[eval] after training:  {eval_line(after)}")
                self.logger.log({f"eval/{k}": v for k, v in after.items()}, step=self.step)
                # rank 0's counts reach the driver's summary
                report.update(self.logger.close(self.cfg.tracking.flush_timeout_s))
                self.engine.export(Path(tmp) / "release")  # the driver adds the tokenizer files
            if self.rank == 0:  # after close() on the last; a restart from this checkpoint goes on from these counts
                self.logger.save_counts(Path(tmp))
            write_rank_files(Path(tmp), self.rank)  # last: a part without it is known to be partial
            run_dir = Path(self.cfg.output_dir).resolve() / self.cfg.run_name  # pretrain.py's RunConfig
            ray.train.report(report, checkpoint=Checkpoint.from_directory(tmp),
                             checkpoint_upload_fn=self.faults.upload_fn(self.step, run_dir))

    def _roll_back(self) -> None:
        """Every rank sees the same streak (finiteness is all-reduced), so all raise here together."""
        if self.rank == 0:
            ray.get(self.ledger.record.remote(self.step, self.t.rollback_lr_factor))
        _barrier()
        raise NonFiniteLossError(
            f"{self.guard.streak} non-finite losses in a row before step {self.step + 1}: rolling back to the "
            f"last checkpoint at {self.t.rollback_lr_factor:g} x the learning rate (a rollback counts as one "
            f"of train.max_failures={self.t.max_failures})")

    # -- id recording, for the resume tests ------------------------------------------------------
    def _record_ids(self, trained: bool = True) -> None:
        """faults.record_ids_dir: append (attempt, step, epoch, ids) per rank: the micro-batches this optimizer step
        trained, a line per epoch they were read in (a step can straddle an epoch end); not the non-finite ones
        skipped, and none of a pipeline step whose update the optimizer dropped (`trained` False)."""
        step_ids, self.step_ids = self.step_ids, []
        if not self.cfg.faults.record_ids_dir or not trained or not step_ids:  # a later pipeline stage reads none
            return
        with open(Path(self.cfg.faults.record_ids_dir) / f"ids-rank{self.rank}.txt", "a") as f:
            for epoch, part in itertools.groupby(step_ids, key=lambda e: e[0]):
                ids = np.concatenate([i for _, i in part])
                f.write(f"{self.attempt} {self.step} {epoch} {' '.join(map(str, ids.tolist()))}\n")

    def _record_weights(self, event: str) -> None:
        """faults.record_ids_dir: append (attempt, event, step, sha256 of this rank's module parameters) to
        weights-rank{r}.txt, at every checkpoint saved and every checkpoint restored."""
        if not self.cfg.faults.record_ids_dir:
            return
        digest = hashlib.sha256()
        for _, p in sorted(self.engine.engine.module.named_parameters()):
            digest.update(p.detach().float().cpu().numpy().tobytes())
        with open(Path(self.cfg.faults.record_ids_dir) / f"weights-rank{self.rank}.txt", "a") as f:
            f.write(f"{self.attempt} {event} {self.step} {digest.hexdigest()}\n")


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def _gather(array: np.ndarray | dict) -> list:
    """Every rank's array (or dict of arrays), on every rank (small objects: ids since the last checkpoint, RNGs)."""
    if not dist.is_initialized():
        return [array]
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, array)
    return out


def train_loop_per_worker(config: dict) -> None:
    require_shared_storage(ray.train.get_context().get_storage())  # before any training, not at its checkpoint
    Worker(config).run()
