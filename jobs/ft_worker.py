"""What each fine-tuning worker runs: stream its train shard, step, evaluate on dev, keep the best.

Contract with the driver (jobs/finetune.py): `config` holds the resolved FinetuneConfig as a dict
(labels settled), `init_files` (an object ref to the starting checkpoint's files, so a worker on
any node can build the model), `eval_rows` (object ref: {split: rows}, read by rank 0 for the
metrics), `steps_per_epoch`, `total_steps` and the MLflow run id.

Evaluation runs on rank 0 over the whole (unsplit) dev set while the other ranks wait: dev sets are
small, and an exact metric needs every row exactly once. A checkpoint (the HF export plus the
evaluation history) is reported only when the main metric improves, so the latest checkpoint Ray
keeps is the best one. Training runs on the engine pretraining uses (jobs/engine.py: DeepSpeed, ZeRO 0-2).
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

from jobs import ft_tasks
from jobs.finetune_config import FinetuneConfig
from jobs.metrics import format_duration
from jobs.objectives import objective_for
from jobs.seam import next_in_lockstep

log = logging.getLogger("bert_foundry.finetune")


def build_engine(model, cfg: FinetuneConfig, total_steps: int):
    """The engine pretraining runs (jobs/engine.py: DeepSpeed, ZeRO 0-2, gradient clipping, AdamW with
    warmup then linear decay), over `model` and its task's objective. Needs a process group: Ray Train's
    in a fine-tuning worker, `single_process_group()` in a sweep trial."""
    if not cfg.scaling.use_gpu:
        os.environ["DS_ACCELERATOR"] = "cpu"  # before deepspeed is imported by the engine
    from jobs.engine import Engine

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


BOOKKEEPING = ("row_index", "window")  # which dev row and doc-stride window a feature is: not model input


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
        from jobs.tracking import RankZeroLogger

        self.cfg = cfg = FinetuneConfig.from_dict(config["cfg"])
        self.config = config
        ctx = ray.train.get_context()
        self.rank, self.world = ctx.get_world_rank(), ctx.get_world_size()
        torch.manual_seed(cfg.train.seed)  # the same fresh head on every rank
        self.init_dir = materialize_files(ray.get(config["init_files"]), self)
        model, info = build_model(cfg, self.init_dir)
        if self.rank == 0:
            log.info(f"[init] {len(info['loaded'])} tensors from {cfg.init}; fresh: {info['fresh']}; "
                     f"unused: {info['unused']}")
        self.engine = build_engine(model, cfg, config["total_steps"])
        self.logger = RankZeroLogger(cfg.tracking.tracking_uri, config.get("mlflow_run_id"), self.rank)
        self.metric = ft_tasks.main_metric(cfg.task)
        self.best, self.best_step, self.history, self.bad_evals, self.nonfinite = -math.inf, 0, [], 0, 0
        self.id2label = None if cfg.task.kind == "question-answering" or ft_tasks.num_labels(cfg.task) == 1 \
            else dict(enumerate(cfg.task.labels))

    def _next_batch(self, batches):
        return next_in_lockstep(batches)

    def run(self) -> None:
        t, total = self.cfg.train, self.config["total_steps"]
        step, start, stop = 0, time.perf_counter(), False
        window_loss, window_n, window_samples, window_start = 0.0, 0, 0, time.perf_counter()
        for epoch in range(t.epochs):
            batches = iter(ray.train.get_dataset_shard("train").iter_batches(
                batch_size=t.batch_size, batch_format="numpy", local_shuffle_buffer_size=4 * t.batch_size,
                local_shuffle_seed=t.seed + 7919 * epoch + self.rank))
            while step < total and not stop:
                raw = self._next_batch(batches)
                if raw is None:
                    break
                stats = self.engine.step(collate(raw))
                step += 1
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
                    eta = (time.perf_counter() - start) / step * (total - step)
                    metrics = {"loss": window_loss / window_n if window_n else math.nan, "lr": self.engine.lr,
                               "samples_per_s": rate, "epoch": epoch}
                    if self.rank == 0:
                        log.info(f"step {step:>6}/{total} | epoch {epoch + 1}/{t.epochs} | loss {metrics['loss']:.4f} "
                                 f"| lr {metrics['lr']:.2e} | {rate:,.1f} samples/s | eta {format_duration(eta)}")
                    self.logger.log({f"train/{k}": v for k, v in metrics.items()}, step=step)
                    window_loss, window_n, window_samples, window_start = 0.0, 0, 0, time.perf_counter()
                if t.eval_every_steps and step % t.eval_every_steps == 0:
                    stop = self.evaluate(step, epoch)
            if stop or step >= total:
                break
            if not t.eval_every_steps:
                stop = self.evaluate(step, epoch)
                if stop:
                    break
        if not self.history or self.history[-1]["step"] != step:
            self.evaluate(step, epoch)  # the last steps are always evaluated
        # every rank reports; the driver reads rank 0's counts
        ray.train.report({**self.logger.close(self.cfg.tracking.flush_timeout_s),
                          "nonfinite_skipped": self.nonfinite})

    def evaluate(self, step: int, epoch: int) -> bool:
        """Rank 0 scores the dev set; every rank reports (a checkpoint only on improvement). Returns
        whether to stop early, the same on every rank."""
        metrics = self._dev_metrics() if self.rank == 0 else {}
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
        report = {**metrics, "step": step, "epoch": epoch, "best_step": self.best_step, "best": self.best}
        if self.rank == 0:
            log.info(f"[eval] step {step}: " + " ".join(f"{k} {v:.4f}" for k, v in metrics.items())
                     + (" (best so far)" if improved else f" (best {self.best:.4f} at step {self.best_step})"))
        self.logger.log(metrics, step=step)
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = None
            if improved and self.rank == 0:
                self.engine.export(Path(tmp) / "model", self.init_dir, self.id2label)
                (Path(tmp) / "history.json").write_text(json.dumps(self.history, indent=1))
                checkpoint = ray.train.Checkpoint.from_directory(tmp)
            ray.train.report(report, checkpoint=checkpoint)
        return bool(self.cfg.train.patience and self.bad_evals >= self.cfg.train.patience)

    def _dev_metrics(self) -> dict:
        from pipelines.tasks.common import load_tokenizer

        eval_rows = ray.get(self.config["eval_rows"])
        tokenizer = load_tokenizer(str(self.init_dir)) if self.cfg.task.kind == "question-answering" else None
        out = {}
        for split in ft_tasks.eval_splits(self.cfg.task):
            raw = list(ray.train.get_dataset_shard(split).iter_batches(
                batch_size=self.cfg.train.eval_batch_size, batch_format="numpy"))
            arrays = self.engine.predict([collate(b) for b in raw], pad_to=self.cfg.task.max_seq_len)
            for k in ("row_index", "window", *ft_tasks.TARGETS[self.cfg.task.kind]):
                parts = [b[k] for b in raw]
                if parts[0].ndim == 2:  # token labels: pad back to full width with the ignore index
                    parts = [np.pad(p, [(0, 0), (0, self.cfg.task.max_seq_len - p.shape[1])], constant_values=-100)
                             for p in parts]
                arrays[k] = np.concatenate(parts)
            order = np.lexsort((arrays["window"], arrays["row_index"]))
            arrays = {k: v[order] for k, v in arrays.items()}
            out.update(ft_tasks.dev_metrics(self.cfg.task, split, eval_rows[split], arrays, tokenizer))
        return out


def train_loop_per_worker(config: dict) -> None:
    Worker(config).run()
