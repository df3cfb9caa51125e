"""What each fine-tuning worker runs: deal itself its train rows, step, evaluate on select, keep the best.

Contract with the driver (jobs/finetune.py): `config` holds the resolved FinetuneConfig itself (`cfg`, labels
settled; Ray pickles the dataclass), `init_files` (an object ref to the starting checkpoint's files, so a worker
on any node can build the model), `train_blocks` (object refs: the training features' numpy blocks, from which
every rank deals itself its rows of each epoch: jobs/loops/train_order.py), `select_rows` (object ref: the select
split's rows, read by rank 0 for the metrics), `steps_per_epoch`, `total_steps` and the MLflow run id. The
workers never see an evaluation row: the driver scores the chosen model on those once the run is over.

Evaluation on select runs on rank 0 over the whole (unsplit) split while the other ranks wait: it is
small, and an exact metric needs every row exactly once. Every evaluation reports a checkpoint of the
whole training state: each rank's part of the engine (weights, optimizer moments, schedule) and its RNG,
and rank 0's place in the data, evaluation history, early-stopping count and the best model so far (HF
format). A worker that dies (train.max_failures) costs the steps since the last evaluation: the restarted
group loads that checkpoint and takes up the epoch where it was, row for row (_epoch_batches).
The final report's checkpoint holds the best model and its history, which the driver exports. Weights that diverged
end the run at once (loss_guard.Verdict), not after train.max_failures restarts. Training runs on the engine
pretraining uses (jobs/engine/data_parallel.py: DeepSpeed, ZeRO 0-2); the loop (evaluation cadence, best, patience,
the non-finite policy) is jobs/loops/finetune.py's, shared with the sweep's trials.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path

import numpy as np
import ray
import ray.train
import torch
import torch.distributed as dist

from jobs.engine.seam import summed
from jobs.loops import ft_tasks
from jobs.loops.finetune import FinetuneLoop, select_metrics
from jobs.loops.train_order import TrainFeatures, epoch_batches
from jobs.runtime import resubmit
from jobs.runtime.scratch import scratch_dir
from jobs.runtime.shared_storage import require_shared_storage
from jobs.workers.finetune_model import build_engine, build_model

log = logging.getLogger("bert_foundry.finetune")


def materialize_files(files: dict[str, bytes], owner: object) -> Path:
    """The starting checkpoint's files (sent through the object store) in a local folder that lives as long as
    `owner`, or until a later worker on this host finds its process gone (jobs/runtime/scratch.py: Ray kills its
workers without cleanup, and a folder per worker left behind filled /tmp by ~90 MB a worker)."""
    d = scratch_dir("ft-init", owner)
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


class Worker:
    """One rank: the model and engine, this rank's batches, the select metrics (rank 0's, shared), the report and
    its checkpoint. The loop, with its evaluation, early stopping and non-finite policy, is FinetuneLoop's."""

    def __init__(self, config: dict):
        from jobs.registry.metric_logger import RankZeroLogger
        from jobs.runtime.faults import Faults

        self.cfg = cfg = config["cfg"]
        self.config = config
        ctx = ray.train.get_context()
        self.rank, self.world = ctx.get_world_rank(), ctx.get_world_size()
        torch.manual_seed(cfg.train.seed)  # the same fresh head on every rank
        self.init_dir = materialize_files(ray.get(config["init_files"]), self)
        self.best_dir = scratch_dir("ft-best", self)  # rank 0: the best export so far
        self.logger = RankZeroLogger(cfg.tracking.tracking_uri, config.get("mlflow_run_id"), self.rank)
        run_dir = Path(cfg.output_dir).resolve() / cfg.run_name  # Ray Train's storage of this run
        faults = Faults(cfg.faults, self.rank, self.world, cfg.run_name, marker_dir=run_dir,
                        registered_in=run_dir)  # tests only
        # worker-group restarts in this submission, counted outside the workers: two failures before the next
        # checkpoint restored the same one, and a count carried in it said 1
        self.resumes = ray.get(config["verdict"].started.remote(self.rank)) - 1
        self.train = TrainFeatures(ray.get(config["train_blocks"]))  # zero-copy from this node's object store
        self.select_rows, self.tokenizer = None, None  # rank 0, read at the first evaluation
        model, info = build_model(cfg, self.init_dir)
        if self.rank == 0:
            log.info(f"[init] {len(info['loaded'])} tensors from {cfg.init}; fresh: {info['fresh']}; "
                     f"unused: {info['unused']}")
        self.engine = build_engine(model, cfg, config["total_steps"])
        self.loop = FinetuneLoop(
            self.engine, cfg.train, metric=ft_tasks.main_metric(cfg.task), total_steps=config["total_steps"],
            optim_lr=cfg.optim.lr, epoch_batches=self._epoch_batches, select_metrics=self._select_metrics,
            report=self._report, keep_best=self._keep_best, after_step=faults.maybe_fail, track=self.logger.log,
            log=log if self.rank == 0 else None, summed=summed)
        checkpoint = ray.train.get_checkpoint()
        if checkpoint:
            self.restore(checkpoint)

    def restore(self, checkpoint) -> None:
        """A restarted worker group (a worker died: train.max_failures) or a resubmitted run (the same run_name)
        goes on from the last evaluation's checkpoint: weights, optimizer moments and schedule, this rank's RNG,
        the loop's place, the best model. A finished run's final checkpoint restores the same way: with steps left
        (a larger train.max_steps or train.epochs) it trains on, else it evaluates and reports again."""
        with checkpoint.as_directory() as d:
            d = Path(d)
            state = json.loads((d / "state.json").read_text())
            earlier = resubmit.read(d)
            if (d / "engine").is_dir():
                self.engine.load(d / "engine")
            self.logger.restore_counts(d)  # the MLflow outage counts of the attempts before this one
            if (d / f"rng-rank{self.rank}.npy").is_file():
                torch.set_rng_state(torch.from_numpy(np.load(d / f"rng-rank{self.rank}.npy")))
            if (d / f"cuda-rng-rank{self.rank}.npy").is_file() and torch.cuda.is_available():  # dropout on a GPU
                torch.cuda.set_rng_state(torch.from_numpy(np.load(d / f"cuda-rng-rank{self.rank}.npy")))
            if self.rank == 0 and (d / "model").is_dir():
                shutil.copytree(d / "model", self.best_dir, dirs_exist_ok=True)
        self.loop.load_state(state)
        if self.rank == 0:
            self._say_replanned(state)
        # A checkpoint of this submission's own MLflow run: a worker died. Another's: the run was resubmitted
        # (the driver checked its basis: jobs/runtime/resubmit.py), and its failures were that submission's.
        resubmitted = earlier is not None and earlier["run_id"] != self.config.get("mlflow_run_id")
        loop = self.loop
        if self.rank == 0:
            log.info(f"[resume] step {loop.step}, epoch {loop.epoch + 1}, {loop.epoch_steps} steps of it already "
                     f"taken; best {loop.metric} {loop.best:.4f} at step {loop.best_step} "
                     + ("(continued from an earlier submission)" if resubmitted and not self.resumes
                        else f"(restart {self.resumes})"))

    def _say_replanned(self, state: dict) -> None:
        """Warn where the checkpoint's run (`state`: its state.json) planned its learning-rate schedule otherwise: a
        resubmission with more (or fewer) epochs or steps, or another optim.warmup_ratio (optim.* is outside the
        continuation basis: it may change on resubmission, said so). A checkpoint from before state.json kept
        total_steps is taken as planned over this run's total; one from before it kept warmup_steps, as warmed up by
        this run's ratio, an unknown the line does not name as a change (and no line for the warmup alone)."""
        planned = state.get("total_steps", self.loop.total)
        line = self.engine.resumed_plan(planned, state.get("warmup_steps"), self.cfg.optim.engine_optim(planned),
                                        total="steps planned (train.epochs, train.max_steps)",
                                        warmup="warmup steps (optim.warmup_ratio x steps planned)")
        if line:
            log.warning(line)

    def _epoch_batches(self, epoch: int, taken: int):
        """This rank's batches of `epoch` in the epoch's seeded order, less the `taken` a resumed run took before it
        restarted (exactly those: the order depends on train.seed, the epoch and the worker count alone). Every rank
        has as many: they end the epoch together."""
        t = self.cfg.train
        return epoch_batches(self.train, seed=t.seed, epoch=epoch, rank=self.rank, world=self.world,
                             batch_size=t.batch_size, taken=taken)

    def _select_metrics(self) -> dict:
        """Rank 0 scores the whole select split; every rank gets its metrics (the same early-stopping decision)."""
        metrics = {}
        if self.rank == 0:
            task = self.cfg.task
            if self.select_rows is None:
                from pipelines.tasks.common import load_tokenizer

                self.select_rows = ray.get(self.config["select_rows"])
                self.tokenizer = load_tokenizer(str(self.init_dir)) if task.kind in ft_tasks.NEEDS_TOKENIZER else None
            batches = list(ray.train.get_dataset_shard(ft_tasks.SELECT).iter_batches(
                batch_size=self.cfg.train.eval_batch_size, batch_format="numpy"))
            metrics, _ = select_metrics(self.engine, task, batches, self.select_rows, self.tokenizer)
        decision = [metrics]
        if dist.is_initialized():
            dist.broadcast_object_list(decision, src=0)
        return decision[0]

    def _keep_best(self) -> None:
        """Every rank calls the export (the decision is broadcast: all call it at once); rank 0 writes. In bf16 and
        fp16 under ZeRO its fp32 weights are gathered from every rank: called on rank 0 alone, it hung."""
        if self.rank == 0:
            shutil.rmtree(self.best_dir, ignore_errors=True)
        self.engine.export(self.best_dir, self.init_dir, ft_tasks.id2label(self.cfg.task),
                           max_length=self.cfg.task.max_seq_len)

    def run(self) -> None:
        self.loop.run()

    def _report(self, metrics: dict, checkpoint: bool, final: bool) -> None:
        """Report `metrics` with a checkpoint (every evaluation's: a restart loses the steps since the last): every
        rank's part of the engine and RNG; rank 0's training state, the best model so far and its history (what the
        driver exports). The final report also carries rank 0's counts (the driver reads them from the Result)."""
        from jobs.engine.checkpoint_parts import write_rank_files

        loop = self.loop
        if final:
            metrics = {**metrics, **self.logger.close(self.cfg.tracking.flush_timeout_s),
                       "nonfinite_skipped": loop.nonfinite, "resumes": self.resumes,
                       "stopped_at_step": loop.step if loop.stopped else 0}
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            self.engine.save(tmp / "engine", client_state={"step": loop.step})
            np.save(tmp / f"rng-rank{self.rank}.npy", torch.get_rng_state().numpy())
            if torch.cuda.is_available():  # GPU dropout draws from it; the seeding at start resets it
                np.save(tmp / f"cuda-rng-rank{self.rank}.npy", torch.cuda.get_rng_state().numpy())
            if self.rank == 0:
                # the schedule's plan beside the loop's place: a resubmission's own is compared with it (restore)
                plan = {"total_steps": loop.total, "warmup_steps": self.engine.optim.warmup_steps}
                (tmp / "state.json").write_text(json.dumps({**loop.state(), **plan}))
                resubmit.record(tmp, self.config.get("mlflow_run_id"), loop.step, self.config["basis"])
                (tmp / "history.json").write_text(json.dumps(loop.best_history(), indent=1))
                self.logger.save_counts(tmp)  # after close() on the final; a restart goes on from these counts
                if any(self.best_dir.iterdir()):
                    shutil.copytree(self.best_dir, tmp / "model")
            write_rank_files(tmp, self.rank)  # last: a part without it is known to be partial
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(tmp))


def train_loop_per_worker(config: dict) -> None:
    require_shared_storage(ray.train.get_context().get_storage())  # before any training, not at its checkpoint
    try:
        Worker(config).run()
    except FloatingPointError as exc:  # every rank at the same step (the decision is all-reduced or broadcast)
        ray.get(config["verdict"].set.remote(str(exc)))  # the driver raises it: a restart would diverge again
