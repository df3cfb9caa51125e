"""What each fine-tuning worker runs: stream its train shard, step, evaluate on dev, keep the best.

Contract with the driver (jobs/finetune.py): `config` holds the resolved FinetuneConfig as a dict
(labels settled), `init_files` (an object ref to the starting checkpoint's files, so a worker on
any node can build the model), `eval_rows` (object ref: {split: rows}, read by rank 0 for the
metrics), `steps_per_epoch`, `total_steps` and the MLflow run id.

Evaluation runs on rank 0 over the whole (unsplit) dev set while the other ranks wait: dev sets are
small, and an exact metric needs every row exactly once. A checkpoint (the HF export plus the
evaluation history) is reported only when the main metric improves, so the latest checkpoint Ray
keeps is the best one.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import ray
import ray.train
import torch
import torch.distributed as dist

from jobs import ft_tasks
from jobs.finetune_config import FinetuneConfig, FinetuneOptimConfig
from jobs.metrics import format_duration
from jobs.objectives import objective_for
from jobs.seam import next_in_lockstep

log = logging.getLogger("bert_foundry.finetune")
NO_DECAY = ("bias", "LayerNorm.weight")


@dataclass
class StepStats:
    loss: float
    sums: dict
    optimizer_stepped: bool
    finite: bool
    micro_batches: int = 1


class LocalEngine:
    """The Engine seam (step / evaluate / predict / export) over plain PyTorch: AdamW, warmup then linear
    decay, DDP through Ray Train. It runs the same objectives (jobs/objectives.py) as jobs.engine.Engine;
    fine-tuning does not use DeepSpeed yet (a BERT-base fine-tune fits one device without ZeRO), and the
    loop calls only these methods, so moving it onto Engine is a change to `_engine` below."""

    def __init__(self, model, objective, optim: FinetuneOptimConfig, total_steps: int, distributed: bool = True):
        import ray.train.torch

        self.module, self.objective, self.grad_clip = model, objective, optim.grad_clip
        # DDP over gloo on CPU; a sweep trial (jobs/sweep_trial.py) runs in-process, outside Ray Train
        self.model = ray.train.torch.prepare_model(model) if distributed else model
        params = [(n, p) for n, p in self.module.named_parameters() if p.requires_grad]
        groups = [{"params": [p for n, p in params if not n.endswith(NO_DECAY)], "weight_decay": optim.weight_decay},
                  {"params": [p for n, p in params if n.endswith(NO_DECAY)], "weight_decay": 0.0}]
        self.optimizer = torch.optim.AdamW(groups, lr=optim.lr, betas=(optim.beta1, optim.beta2), eps=optim.eps)
        warmup = int(optim.warmup_ratio * total_steps)

        def schedule(step: int) -> float:
            if step < warmup:
                return (step + 1) / (warmup + 1)
            return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, schedule)

    @property
    def lr(self) -> float:
        return self.scheduler.get_last_lr()[0]

    def step(self, batch: dict) -> StepStats:
        self.model.train()
        loss, sums = self.objective(self.model, batch)
        loss.backward()
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss.detach()
        return StepStats(float(loss), sums, True, bool(torch.isfinite(loss)))

    @torch.no_grad()
    def evaluate(self, batches) -> dict:
        self.module.eval()
        total: dict = {}
        for batch in batches:
            _, sums = self.objective(self.module, batch)
            total = {k: total.get(k, 0) + v for k, v in sums.items()}
        return self.objective.metrics(total)

    @torch.no_grad()
    def predict(self, batches, pad_to: int | None = None) -> dict[str, np.ndarray]:
        """Eval outputs of these batches; per-token outputs are padded back to `pad_to` positions (batches
        are padded only to their longest row) with a logit no softmax picks."""
        self.module.eval()
        parts: dict[str, list] = {}
        for batch in batches:
            for k, v in self.objective.outputs(self.module, batch).items():
                v = v.numpy()
                per_token = v.ndim == 3 or (v.ndim == 2 and k != "logits")  # (B, T, C) tokens, (B, T) QA
                if pad_to and per_token:
                    width = [(0, 0), (0, pad_to - v.shape[1])] + [(0, 0)] * (v.ndim - 2)
                    v = np.pad(v, width, constant_values=-1e4)
                parts.setdefault(k, []).append(v)
        return {k: np.concatenate(v) for k, v in parts.items()}

    def export(self, out_dir: Path, tokenizer_dir: Path, id2label: dict | None) -> None:
        from bert_core.checkpoint import save_pretrained

        save_pretrained(self.module, out_dir, tokenizer_dir=tokenizer_dir, id2label=id2label)


def _engine(model, objective, cfg: FinetuneConfig, total_steps: int) -> LocalEngine:
    return LocalEngine(model, objective, cfg.optim, total_steps)


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
        self.engine = _engine(model, objective_for(model), cfg, config["total_steps"])
        self.logger = RankZeroLogger(cfg.tracking.tracking_uri, config.get("mlflow_run_id"), self.rank)
        self.metric = ft_tasks.main_metric(cfg.task)
        self.best, self.best_step, self.history, self.bad_evals = -math.inf, 0, [], 0
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
                window_loss, window_n = window_loss + stats.loss, window_n + 1
                window_samples += len(raw["row_index"]) * self.world
                if step % t.log_every == 0 or step == total:
                    rate = window_samples / max(time.perf_counter() - window_start, 1e-9)
                    eta = (time.perf_counter() - start) / step * (total - step)
                    metrics = {"loss": window_loss / window_n, "lr": self.engine.lr, "samples_per_s": rate,
                               "epoch": epoch}
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
        ray.train.report(self.logger.close(self.cfg.tracking.flush_timeout_s))

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
