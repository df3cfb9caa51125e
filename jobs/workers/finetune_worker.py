"""What each fine-tuning worker runs: stream its train shard, step, evaluate on select, keep the best.

Contract with the driver (jobs/finetune.py): `config` holds the resolved FinetuneConfig as a dict
(labels settled), `init_files` (an object ref to the starting checkpoint's files, so a worker on
any node can build the model), `select_rows` (object ref: the select split's rows, read by rank 0 for the
metrics), `steps_per_epoch`, `total_steps` and the MLflow run id. The workers never see an evaluation row:
the driver scores the chosen model on those once the run is over.

Evaluation on select runs on rank 0 over the whole (unsplit) split while the other ranks wait: it is
small, and an exact metric needs every row exactly once. Every evaluation reports a checkpoint of the
whole training state: each rank's part of the engine (weights, optimizer moments, schedule) and its RNG,
and rank 0's place in the data, evaluation history, early-stopping count and the best model so far (HF
format). A worker that dies (train.max_failures) costs the steps since the last evaluation: the restarted
group loads that checkpoint and takes up the epoch where it was. The final report's checkpoint holds the
best model and its history, which the driver exports. Training runs on the engine pretraining uses
(jobs/engine/data_parallel.py: DeepSpeed, ZeRO 0-2).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
import time
import weakref
from pathlib import Path

import numpy as np
import ray
import ray.train
import torch
import torch.distributed as dist

from jobs.runtime import resubmit
from jobs.loops import ft_tasks
from jobs.config.finetune import FinetuneConfig
from jobs.loops.metrics import format_duration
from jobs.engine.objectives import objective_for
from jobs.engine.seam import next_in_lockstep

log = logging.getLogger("bert_foundry.finetune")


def build_engine(model, cfg: FinetuneConfig, total_steps: int):
    """The engine pretraining runs (jobs/engine/data_parallel.py: DeepSpeed, ZeRO 0-2, gradient clipping, AdamW with
    warmup then linear decay), over `model` and its task's objective. Needs a process group: Ray Train's
    in a fine-tuning worker, `single_process_group()` in a sweep trial."""
    if not cfg.scaling.use_gpu:
        os.environ["DS_ACCELERATOR"] = "cpu"  # before deepspeed is imported by the engine
    from jobs.engine.data_parallel import Engine

    return Engine(model, objective_for(model), optim=cfg.optim.engine_optim(total_steps), deepspeed=cfg.deepspeed,
                  micro_batch_size=cfg.train.batch_size, grad_accum_steps=1, max_steps=total_steps,
                  use_gpu=cfg.scaling.use_gpu)


def single_process_group() -> None:
    """A one-rank gloo group for an engine that runs outside Ray Train (a Tune trial): DeepSpeed needs a
    group even alone. Kept for the process's life; a reused trial actor finds it already there."""
    for key, value in (("LOCAL_RANK", "0"), ("RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(key, value)  # deepspeed.initialize asserts a launcher's variables even so
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def build_model(cfg: FinetuneConfig, init_dir: Path):
    """The task's head on the starting checkpoint's encoder (and pooler, where the head has one). The head
    is always fresh, even when the checkpoint has one of another task or size. Returns (model,
    {"loaded", "fresh", "unused"} key lists)."""
    from bert_core.checkpoint import load_pretrained
    from bert_core.model import BertModel

    backbone, info = load_pretrained(init_dir, BertModel, output_loading_info=True)  # any head is left unused
    cls = ft_tasks.head_class(cfg.task)
    kwargs = {} if cfg.task.kind == "question-answering" else {"num_labels": ft_tasks.num_labels(cfg.task)}
    model = cls(backbone.config, **kwargs)
    own = model.bert.state_dict()
    state = {k: v for k, v in backbone.state_dict().items() if k in own and k not in info["missing_keys"]}
    model.bert.load_state_dict(state, strict=False)
    loaded = {f"bert.{k}" for k in state}
    unused = sorted(info["unexpected_keys"] + [f"bert.{k}" for k in backbone.state_dict()
                                               if k not in own and k not in info["missing_keys"]])
    return model.train(), {"loaded": sorted(loaded), "fresh": sorted(set(model.state_dict()) - loaded),
                           "unused": unused}


BOOKKEEPING = ("row_index", "window")  # which row and doc-stride window a feature is: not model input


def collate(batch: dict) -> dict:
    """numpy batch -> the model's tensors (inputs and labels), padded to the batch's longest row (dynamic
    padding); the bookkeeping columns stay in the numpy batch."""
    length = int(batch["attention_mask"].sum(1).max())
    out = {}
    for k, v in batch.items():
        if k in BOOKKEEPING:
            continue
        t = torch.tensor(v)  # a copy: Ray hands out read-only arrays
        out[k] = t[:, :length] if t.ndim == 2 else t  # ids, types, mask, token labels: (B, T)
    return out


def materialize_files(files: dict[str, bytes], owner: object) -> Path:
    """The starting checkpoint's files (sent through the object store) in a local folder that lives as long as
    `owner` (Ray reuses worker processes: a folder per trial left behind filled /tmp by ~90 MB a trial)."""
    d = Path(tempfile.mkdtemp(prefix="ft-init-"))
    weakref.finalize(owner, shutil.rmtree, d, ignore_errors=True)
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


class Worker:
    def __init__(self, config: dict):
        from jobs.runtime.faults import Faults
        from jobs.registry.tracking import RankZeroLogger

        self.cfg = cfg = FinetuneConfig.from_dict(config["cfg"])
        self.config = config
        ctx = ray.train.get_context()
        self.rank, self.world = ctx.get_world_rank(), ctx.get_world_size()
        torch.manual_seed(cfg.train.seed)  # the same fresh head on every rank
        self.init_dir = materialize_files(ray.get(config["init_files"]), self)
        self.best_dir = Path(tempfile.mkdtemp(prefix="ft-best-"))  # rank 0: the best export so far
        weakref.finalize(self, shutil.rmtree, self.best_dir, ignore_errors=True)
        self.logger = RankZeroLogger(cfg.tracking.tracking_uri, config.get("mlflow_run_id"), self.rank)
        run_dir = Path(cfg.output_dir).resolve() / cfg.run_name  # Ray Train's storage of this run
        self.faults = Faults(cfg.train, self.rank, self.world, cfg.run_name, marker_dir=run_dir,
                             registered_in=run_dir)  # tests only
        self.metric = ft_tasks.main_metric(cfg.task)
        self.id2label = None if cfg.task.kind == "question-answering" or ft_tasks.num_labels(cfg.task) == 1 \
            else dict(enumerate(cfg.task.labels))
        # The training state a checkpoint holds (state.json): where the loop is and what it has seen.
        self.step, self.epoch, self.epoch_steps = 0, 0, 0  # epoch_steps: steps of `epoch` already taken
        self.best, self.best_step, self.history, self.bad_evals = -math.inf, 0, [], 0
        self.nonfinite, self.resumes, self.stopped = 0, 0, False
        model, info = build_model(cfg, self.init_dir)
        if self.rank == 0:
            log.info(f"[init] {len(info['loaded'])} tensors from {cfg.init}; fresh: {info['fresh']}; "
                     f"unused: {info['unused']}")
        self.engine = build_engine(model, cfg, config["total_steps"])
        checkpoint = ray.train.get_checkpoint()
        if checkpoint:
            self.restore(checkpoint)

    STATE = ("step", "epoch", "epoch_steps", "best", "best_step", "history", "bad_evals", "nonfinite", "resumes",
             "stopped")

    def restore(self, checkpoint) -> None:
        """A restarted worker group (a worker died: train.max_failures) or a resubmitted run (the same run_name)
        goes on from the last evaluation's checkpoint: weights, optimizer moments and schedule, this rank's RNG,
        the loop's place, the best model. A finished run's final checkpoint restores the same way: with steps left
        (a larger train.max_steps or train.epochs) it trains on, else it reports again."""
        with checkpoint.as_directory() as d:
            d = Path(d)
            state = json.loads((d / "state.json").read_text())
            earlier = resubmit.read(d)
            if (d / "engine").is_dir():
                self.engine.load(d / "engine")
            if (d / f"rng-rank{self.rank}.npy").is_file():
                torch.set_rng_state(torch.from_numpy(np.load(d / f"rng-rank{self.rank}.npy")))
            if self.rank == 0 and (d / "model").is_dir():
                shutil.copytree(d / "model", self.best_dir, dirs_exist_ok=True)
        for name in self.STATE:
            setattr(self, name, state[name])
        # A checkpoint of this submission's own MLflow run: a worker died. Another's: the run was resubmitted
        # (the driver checked its basis: jobs/resubmit.py), and its failures were that submission's.
        resubmitted = earlier is not None and earlier["run_id"] != self.config.get("mlflow_run_id")
        self.resumes = 0 if resubmitted else self.resumes + 1
        if self.rank == 0:
            log.info(f"[resume] step {self.step}, epoch {self.epoch + 1}, {self.epoch_steps} steps of it already "
                     f"taken; best {self.metric} {self.best:.4f} at step {self.best_step} "
                     + ("(continued from an earlier submission)" if resubmitted else f"(restart {self.resumes})"))

    def _next_batch(self, batches):
        return next_in_lockstep(batches)

    def _epoch_batches(self, epoch: int):
        """This rank's batches of `epoch`, less the ones a resumed run took before it restarted (with one worker
        exactly those; with more, Ray Data's split may hand a rank other rows in a new execution)."""
        t = self.cfg.train
        batches = iter(ray.train.get_dataset_shard("train").iter_batches(
            batch_size=t.batch_size, batch_format="numpy", local_shuffle_buffer_size=4 * t.batch_size,
            local_shuffle_seed=t.seed + 7919 * epoch + self.rank))
        for _ in range(self.epoch_steps):
            next(batches, None)
        return batches

    def run(self) -> None:
        t, total = self.cfg.train, self.config["total_steps"]
        first, start = self.step, time.perf_counter()
        window_loss, window_n, window_samples, window_start = 0.0, 0, 0, time.perf_counter()
        epoch = min(self.epoch, t.epochs - 1)
        while self.epoch < t.epochs and self.step < total and not self.stopped:
            epoch = self.epoch
            batches = self._epoch_batches(epoch)
            while self.step < total and not self.stopped:
                raw = self._next_batch(batches)
                if raw is None:
                    break
                stats = self.engine.step(collate(raw))
                self.step, self.epoch_steps = self.step + 1, self.epoch_steps + 1
                self.faults.maybe_fail(self.step)
                step = self.step
                if stats.finite:
                    window_loss, window_n = window_loss + stats.loss, window_n + 1
                else:  # skipped on every rank by the engine: no update from a NaN/inf loss
                    self.nonfinite += 1
                    if self.rank == 0:
                        log.warning(f"step {step}: non-finite loss {stats.loss}, batch skipped "
                                    f"({self.nonfinite} so far)")
                window_samples += len(raw["row_index"]) * self.world
                if step % t.log_every == 0 or step == total:
                    rate = window_samples / max(time.perf_counter() - window_start, 1e-9)
                    eta = (time.perf_counter() - start) / (step - first) * (total - step)
                    metrics = {"loss": window_loss / window_n if window_n else math.nan, "lr": self.engine.lr,
                               "samples_per_s": rate, "epoch": epoch}
                    if self.rank == 0:
                        log.info(f"step {step:>6}/{total} | epoch {epoch + 1}/{t.epochs} | loss {metrics['loss']:.4f} "
                                 f"| lr {metrics['lr']:.2e} | {rate:,.1f} samples/s | eta {format_duration(eta)}")
                    self.logger.log({f"train/{k}": v for k, v in metrics.items()}, step=step)
                    window_loss, window_n, window_samples, window_start = 0.0, 0, 0, time.perf_counter()
                if t.eval_every_steps and step % t.eval_every_steps == 0:
                    self.evaluate(epoch)
            if self.stopped or self.step >= total:
                break
            self.epoch, self.epoch_steps = epoch + 1, 0  # before the evaluation: its checkpoint resumes there
            if not t.eval_every_steps:
                self.evaluate(epoch)
        if not self.history or self.history[-1]["step"] != self.step:
            self.evaluate(epoch)  # the last steps are always evaluated
        # every rank reports; the driver reads rank 0's counts (a checkpoint carries them into the Result)
        counts = {**self.logger.close(self.cfg.tracking.flush_timeout_s), "nonfinite_skipped": self.nonfinite,
                  "resumes": self.resumes, "stopped_at_step": self.step if self.stopped else 0}
        self._report(counts)  # with the engine too: a resubmission with more steps trains on from here

    def evaluate(self, epoch: int) -> None:
        """Rank 0 scores the select split; every rank reports it with a checkpoint of the whole training state (the
        best model so far rides along). Sets `stopped` (early stopping), the same on every rank."""
        step = self.step
        metrics = self._select_metrics() if self.rank == 0 else {}
        decision = [metrics]
        if dist.is_initialized():
            dist.broadcast_object_list(decision, src=0)
        metrics = decision[0]
        value = metrics[self.metric]
        improved = value > self.best
        if improved:
            self.best, self.best_step, self.bad_evals = value, step, 0
        else:
            self.bad_evals += 1
        self.history.append({"step": step, "epoch": epoch, **metrics})
        self.stopped = bool(self.cfg.train.patience and self.bad_evals >= self.cfg.train.patience)
        if self.rank == 0:
            log.info(f"[eval] step {step}: " + " ".join(f"{k} {v:.4f}" for k, v in metrics.items())
                     + (" (best so far)" if improved else f" (best {self.best:.4f} at step {self.best_step})"))
            if improved:
                shutil.rmtree(self.best_dir, ignore_errors=True)
                self.engine.export(self.best_dir, self.init_dir, self.id2label)
        self.logger.log(metrics, step=step)
        self._report({**metrics, "step": step, "epoch": epoch, "best_step": self.best_step, "best": self.best})

    def _report(self, metrics: dict) -> None:
        """Report `metrics` with a checkpoint: every rank's part of the engine (resume) and RNG; rank 0's
        training state, the best model so far and its history (what the driver exports)."""
        from jobs.engine.checkpoint_parts import write_rank_files

        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            self.engine.save(tmp / "engine", client_state={"step": self.step})
            np.save(tmp / f"rng-rank{self.rank}.npy", torch.get_rng_state().numpy())
            if self.rank == 0:
                (tmp / "state.json").write_text(json.dumps({k: getattr(self, k) for k in self.STATE}))
                resubmit.record(tmp, self.config.get("mlflow_run_id"), self.step, self.config["basis"])
                (tmp / "history.json").write_text(json.dumps(
                    [h for h in self.history if h["step"] <= self.best_step], indent=1))
                if any(self.best_dir.iterdir()):
                    shutil.copytree(self.best_dir, tmp / "model")
            write_rank_files(tmp, self.rank)  # last: a part without it is known to be partial
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(tmp))

    def _select_metrics(self) -> dict:
        """The task's official metrics on the select split, `select/<name>`."""
        from pipelines.tasks.common import load_tokenizer

        task = self.cfg.task
        tokenizer = load_tokenizer(str(self.init_dir)) if task.kind == "question-answering" else None
        raw = list(ray.train.get_dataset_shard(ft_tasks.SELECT).iter_batches(
            batch_size=self.cfg.train.eval_batch_size, batch_format="numpy"))
        arrays = self.engine.predict([collate(b) for b in raw], pad_to=task.max_seq_len)
        for k in ("row_index", "window", *ft_tasks.TARGETS[task.kind]):
            parts = [b[k] for b in raw]
            if parts[0].ndim == 2:  # token labels: pad back to full width with the ignore index
                parts = [np.pad(p, [(0, 0), (0, task.max_seq_len - p.shape[1])], constant_values=-100) for p in parts]
            arrays[k] = np.concatenate(parts)
        order = np.lexsort((arrays["window"], arrays["row_index"]))
        arrays = {k: v[order] for k, v in arrays.items()}
        return ft_tasks.dev_metrics(task, ft_tasks.SELECT, ray.get(self.config["select_rows"]), arrays, tokenizer)


def train_loop_per_worker(config: dict) -> None:
    Worker(config).run()
