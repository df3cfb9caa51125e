"""The reference for jobs/finetune.py: the same classification fine-tune with `transformers.Trainer`, and our
engine's step loop (jobs/engine/data_parallel.py, DeepSpeed, as the fine-tuning worker builds it) run in process on the
same batches. Used by tests/e2e/test_finetune.py::test_pkgdocs_matches_the_transformers_trainer
and bench/finetune_throughput.py.

What is the same on both sides: the starting checkpoint, the rows, the features (our `glue_features`,
same tokenizer and max_seq_len, batches cut to their longest row as jobs.loops.finetune.collate does), the
hyperparameters (AdamW lr / betas / eps, weight decay off for biases and LayerNorm weights, warmup of
ceil(warmup_ratio * total) steps then linear decay to 0, grad clipping, batch size, epochs), the seed,
fp32, and the model's dropout (both read hidden_dropout_prob from the same config.json). The AdamW kernel is each
side's own default: the Trainer's `TrainingArguments.optim` (torch's fused AdamW for torch >= 2.8), our engine's
DeepSpeed AdamW (its fused Adam; jobs/engine/optim.deepspeed_optimizer_config). What differs,
and is seed noise: the fresh classifier head's draw (same N(0, 0.02) init, different RNG stream),
the shuffling (Trainer: a fresh full random permutation every epoch from its own RNG; our job: a full permutation
every epoch seeded by (train.seed, epoch), jobs/loops/train_order.py; the in-process engine loop here: a full
permutation per epoch, `batches`), and the first warmup step (HF starts at lr 0, we at lr/warmup).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from jobs.config.finetune import FinetuneConfig

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def features(cfg: FinetuneConfig, rows: list[dict], init_dir: Path) -> dict[str, np.ndarray]:
    """The features our job's Featurizer makes for a classification task (same function, same tokenizer)."""
    from pipelines.tasks import glue_features
    from pipelines.tasks.common import load_tokenizer

    tokenizer = load_tokenizer(str(init_dir))
    return glue_features([{"text_a": r["text_a"], "text_b": r.get("text_b"), "label": r["label"]} for r in rows],
                         tokenizer, cfg.task.max_seq_len)


def collate(items: list[dict]) -> dict[str, torch.Tensor]:
    """Rows -> a batch cut to its longest row: jobs.loops.finetune.collate's dynamic padding."""
    batch = {k: torch.as_tensor(np.stack([it[k] for it in items])) for k in (*MODEL_INPUTS, "labels")}
    length = int(batch["attention_mask"].sum(1).max())
    return {k: v[:, :length] if v.ndim == 2 else v for k, v in batch.items()}


def batches(feats: dict[str, np.ndarray], batch_size: int, seed: int, epoch: int) -> list[dict]:
    """One epoch of shuffled training batches (the in-process loop's data order)."""
    order = np.random.default_rng(seed * 1000 + epoch).permutation(len(feats["labels"]))
    rows = [{k: feats[k][i] for k in (*MODEL_INPUTS, "labels")} for i in order]
    return [collate(rows[i:i + batch_size]) for i in range(0, len(rows), batch_size)]


def total_steps(cfg: FinetuneConfig, n_train: int) -> int:
    """jobs.finetune's step count for one worker."""
    steps = -(-n_train // cfg.train.batch_size) * cfg.train.epochs
    return min(steps, cfg.train.max_steps) if cfg.train.max_steps else steps


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float((np.asarray(logits).argmax(-1) == np.asarray(labels)).mean())


def training_arguments(cfg: FinetuneConfig, n_train: int, out_dir: Path, gpu: bool):
    """The Trainer's arguments: our job's hyperparameters, and everything else as a user's Trainer has it. `optim` is
    left to the Trainer (torch's fused AdamW for torch >= 2.8): forcing "adamw_torch" ran torch's per-tensor loop on
    the CPU, ~100 ms of a ~1 s step slower than the Trainer's default (BENCHMARKS.md, fine-tuning, 2026-12-02)."""
    from transformers import TrainingArguments

    t, o = cfg.train, cfg.optim
    return TrainingArguments(
        output_dir=str(out_dir), seed=t.seed, data_seed=t.seed, use_cpu=not gpu,
        per_device_train_batch_size=t.batch_size, per_device_eval_batch_size=t.eval_batch_size,
        num_train_epochs=t.epochs, max_steps=total_steps(cfg, n_train),  # the job's: its max_steps is only a cap
        learning_rate=o.lr, weight_decay=o.weight_decay, adam_beta1=o.beta1, adam_beta2=o.beta2,
        adam_epsilon=o.eps, max_grad_norm=o.grad_clip, lr_scheduler_type="linear",
        warmup_steps=o.warmup_steps(total_steps(cfg, n_train)),
        eval_strategy="epoch", save_strategy="no", logging_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_num_workers=0, bf16=gpu, fp16=False)


def trainer_run(cfg: FinetuneConfig, init_dir: Path, train: dict, dev: dict, num_labels: int, out_dir: Path,
                test: dict | None = None, gpu: bool = False) -> dict:
    """transformers.Trainer on the same features and hyperparameters, evaluated after every epoch (and, given
    `test`, its final model's accuracy there: "test"). `gpu`: on the CUDA device in bf16 (autocast over fp32
    weights), each step's clock stopped after a device sync; else on the CPU in fp32.

    Returns {"dev": [accuracy per epoch], "best", "step_s": [seconds of each optimizer step, from
    on_step_begin to on_step_end: forward, backward, clip, AdamW, schedule], "train_s": Trainer's
    train_runtime (its whole loop, data loading and the per-epoch evaluations included), "samples"}.
    """
    from transformers import AutoModelForSequenceClassification, Trainer, TrainerCallback

    class Clock(TrainerCallback):
        def __init__(self):
            self.step_s, self.dev, self._t = [], [], 0.0

        def on_step_begin(self, args, state, control, **kw):
            self._t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if gpu:
                torch.cuda.synchronize()
            self.step_s.append(time.perf_counter() - self._t)

        def on_evaluate(self, args, state, control, metrics=None, **kw):
            self.dev.append(metrics["eval_accuracy"])

    class Rows(torch.utils.data.Dataset):
        def __init__(self, f):
            self.f = f

        def __len__(self):
            return len(self.f["labels"])

        def __getitem__(self, i):
            return {k: self.f[k][i] for k in (*MODEL_INPUTS, "labels")}

    torch.manual_seed(cfg.train.seed)
    model = AutoModelForSequenceClassification.from_pretrained(str(init_dir), num_labels=num_labels)
    args = training_arguments(cfg, len(train["labels"]), out_dir, gpu)
    clock = Clock()
    trainer = Trainer(model=model, args=args, train_dataset=Rows(train), eval_dataset=Rows(dev),
                      data_collator=collate, callbacks=[clock],
                      compute_metrics=lambda p: {"accuracy": accuracy(p.predictions, p.label_ids)})
    out = trainer.train()
    result = {"dev": clock.dev, "best": max(clock.dev), "step_s": clock.step_s,
              "train_s": out.metrics["train_runtime"], "samples": len(train["labels"]) * cfg.train.epochs}
    if test is not None:
        result["test"] = accuracy(trainer.predict(Rows(test)).predictions, test["labels"])
    return result


def engine_run(cfg: FinetuneConfig, init_dir: Path, train: dict, dev: dict) -> dict:
    """Our worker's model, objective and engine, stepped in this process on the same kind of batches
    (no Ray: a one-rank process group, as a sweep trial runs it; NCCL with cfg.scaling.use_gpu). Same return shape
    as trainer_run, "train_s" being the loop with its per-epoch evaluations; on a GPU each step's clock stops after
    a device sync, as the Trainer's does."""
    from jobs.workers import finetune_model

    torch.manual_seed(cfg.train.seed)  # as the Worker does before building the head
    model, _ = finetune_model.build_model(cfg, init_dir)
    finetune_model.single_process_group(cfg.scaling.use_gpu)
    engine = finetune_model.build_engine(model, cfg, total_steps(cfg, len(train["labels"])))
    dev_batches = [collate([{k: dev[k][i] for k in (*MODEL_INPUTS, "labels")}
                            for i in range(s, min(s + cfg.train.eval_batch_size, len(dev["labels"])))])
                   for s in range(0, len(dev["labels"]), cfg.train.eval_batch_size)]
    step_s, dev_acc, steps, start = [], [], 0, time.perf_counter()
    for epoch in range(cfg.train.epochs):
        for batch in batches(train, cfg.train.batch_size, cfg.train.seed, epoch):
            if cfg.train.max_steps and steps >= cfg.train.max_steps:
                break
            t0 = time.perf_counter()
            engine.step(batch)
            if cfg.scaling.use_gpu:
                torch.cuda.synchronize()
            step_s.append(time.perf_counter() - t0)
            steps += 1
        dev_acc.append(engine.evaluate(dev_batches)["accuracy"])
    return {"dev": dev_acc, "best": max(dev_acc), "step_s": step_s, "train_s": time.perf_counter() - start,
            "samples": len(train["labels"]) * cfg.train.epochs}
