"""What each Ray Train worker runs: stream its shard, mask at batch time, step the engine, report.

Contract with the driver (jobs/pretrain.py): `config` holds the whole PretrainConfig as a dict plus
the prepared-data facts (special ids, continuation mask) and the MLflow run id. Nothing else is
captured from the driver, and no driver-local path is read, so workers may run on any node.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import ray.train
import torch

from bert_core.masking import PretrainingCollator
from bert_core.model import BertForPreTraining
from bert_core.tokenizer import SpecialIds
from jobs.config import PretrainConfig
from jobs.metrics import MetricsWindow, flops_per_token, progress_line

# Progress goes through logging: Ray Train V2 tees a worker's print() to both stdout and its logger.
log = logging.getLogger("bert_foundry.train")

PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def peak_flops(use_gpu: bool) -> float | None:
    """Dense bf16 peak of the local accelerator, for MFU; None on CPU where MFU is not meaningful."""
    if not (use_gpu and torch.cuda.is_available()):
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)


def _batches(iterator, collate, batch_size: int, seed: int):
    """Endless (epoch, batch) stream over this worker's shard; each epoch re-reads the shard."""
    epoch = 0
    while True:
        for batch in iterator.iter_batches(batch_size=batch_size, batch_format="numpy", drop_last=True,
                                           local_shuffle_buffer_size=8 * batch_size,
                                           local_shuffle_seed=seed + epoch):
            yield epoch, collate(batch)
        epoch += 1


def train_loop_per_worker(config: dict) -> None:
    cfg = PretrainConfig.from_dict(config["cfg"])
    if not cfg.scaling.use_gpu:
        os.environ["DS_ACCELERATOR"] = "cpu"  # before deepspeed is imported by the engine
    from jobs.engine import Engine  # noqa: E402  (needs DS_ACCELERATOR)
    from jobs.tracking import RankZeroLogger

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    t = cfg.train
    torch.manual_seed(t.seed)  # identical initial weights on every rank
    engine = Engine(BertForPreTraining(cfg.model), cfg)

    special = SpecialIds(**config["special_ids"])
    continuation = np.asarray(config["continuation"], dtype=bool) if t.masking.whole_word else None

    def collator(seed: int) -> PretrainingCollator:
        return PretrainingCollator(special, cfg.model.vocab_size, cfg.data.max_seq_len, t.masking, seed=seed,
                                   continuation=continuation)

    train_collate = collator(t.seed * 1000 + rank)  # each rank draws its own masks
    eval_shard = ray.train.get_dataset_shard("eval")

    def evaluate() -> dict:
        eval_collate = collator(10**6 + rank)  # fresh each time: same masks before and after training
        batches = (eval_collate(b) for _, b in zip(range(t.eval_batches), eval_shard.iter_batches(
            batch_size=t.micro_batch_size, batch_format="numpy")))
        return engine.evaluate(batches)

    start_step = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            state = engine.load(Path(d) / "engine")
        start_step = state["step"]
        # Every rank produces the same number of micro-batches, so rank 0's count restores them all.
        train_collate.load_state_dict({**train_collate.state_dict(), "batches_produced": state["micro_batches"]})

    logger = RankZeroLogger(cfg.tracking.tracking_uri, config.get("mlflow_run_id"), rank)
    before = evaluate() if start_step == 0 else config.get("eval_before", {})
    if rank == 0 and before:
        log.info(f"[eval] before training: mlm_acc {before['mlm_acc']:.4f} nsp_acc {before['nsp_acc']:.4f} "
                 f"mlm_loss {before['mlm_loss']:.4f}")
        logger.log({f"eval/{k}": v for k, v in before.items()}, step=0)

    flops_token = flops_per_token(cfg.model, cfg.data.max_seq_len)
    peak = peak_flops(cfg.scaling.use_gpu)
    stream = _batches(ray.train.get_dataset_shard("train"), train_collate, t.micro_batch_size, t.seed + rank)
    window, run_start, step, metrics = MetricsWindow(), time.perf_counter(), start_step, {}
    while step < t.max_steps:
        wait_start = time.perf_counter()
        epoch, batch = next(stream)
        waited = time.perf_counter() - wait_start
        stats = engine.step(batch)
        window.add(stats, tokens=int(batch["attention_mask"].sum()), samples=len(batch["input_ids"]),
                   data_wait=waited)
        if not stats.optimizer_stepped:
            continue
        step += 1
        last = step == t.max_steps
        if step % t.log_every == 0 or last:
            metrics = window.summary(world, flops_token, peak)
            metrics.update(step=step, epoch=epoch, lr=engine.lr, grad_norm=engine.grad_norm())
            if torch.cuda.is_available() and cfg.scaling.use_gpu:
                metrics["gpu_mem_gb"] = torch.cuda.max_memory_allocated() / 2**30
            elapsed = time.perf_counter() - run_start
            eta = elapsed / (step - start_step) * (t.max_steps - step)
            if rank == 0:
                log.info(progress_line(step, t.max_steps, metrics, eta))
            logger.log({f"train/{k}": v for k, v in metrics.items() if k != "step"}, step=step)
            window = MetricsWindow()
        if last or (t.checkpoint_every and step % t.checkpoint_every == 0):
            _report_checkpoint(engine, train_collate, cfg, config, step, metrics, before, last, evaluate,
                               logger, rank)
    if start_step >= t.max_steps:  # resumed a finished run: report its final state again
        _report_checkpoint(engine, train_collate, cfg, config, step, metrics, before, True, evaluate, logger, rank)


def _report_checkpoint(engine, collate, cfg, config, step, metrics, before, last, evaluate, logger, rank):
    """All ranks save their shard of engine state; the final report also carries the release checkpoint."""
    from ray.train import Checkpoint

    report = {"step": step, **{k: v for k, v in metrics.items() if isinstance(v, (int, float))}}
    with tempfile.TemporaryDirectory() as tmp:
        engine.save(Path(tmp) / "engine", client_state={"step": step, "micro_batches": collate.state_dict()["batches_produced"]})
        if last:
            after = evaluate()
            report.update({f"eval_before/{k}": v for k, v in before.items()})
            report.update({f"eval_after/{k}": v for k, v in after.items()})
            if rank == 0:
                log.info(f"[eval] after training:  mlm_acc {after['mlm_acc']:.4f} nsp_acc {after['nsp_acc']:.4f} "
                         f"mlm_loss {after['mlm_loss']:.4f}")
            logger.log({f"eval/{k}": v for k, v in after.items()}, step=step)
            engine.export(Path(tmp) / "release")  # the driver adds the tokenizer files
        ray.train.report(report, checkpoint=Checkpoint.from_directory(tmp))
