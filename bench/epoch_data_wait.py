"""Data wait across epoch ends: the same multi-epoch pretraining run with and without read-ahead.

Both sides run jobs.pretrain.run on the quickstart config (tiny BERT, 2 Ray Train workers, ZeRO-2 on CPU)
over the same prepared set (harvested installed docs, prepared once before either side runs), for the
same number of epochs, logging a metrics window every --log-every steps:

  on demand   train.prefetch_batches=0: each epoch's Ray Data stream opens when the loop reaches it
              (what every run did before jobs/loops/epoch_stream.py)
  read ahead  train.prefetch_batches=N (default 64): a reader thread opens the next epoch's stream
              while the loop still trains on the current one

Per window the job logs `train/data_wait_share` (the share of the window's wall time the loop spent
waiting for a batch, collation included) to MLflow; this script reads every window back from the SQLite
store and prints, per side, the mean, the worst window, and the worst window holding an epoch start.
Repetitions alternate which side goes first (the machine is shared).

    python bench/epoch_data_wait.py                        # 4 epochs, 1 repetition
    python bench/epoch_data_wait.py --epochs 3 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.config.pretrain import PretrainConfig  # noqa: E402
from jobs.config.io import load_config  # noqa: E402

QUICKSTART = Path(__file__).resolve().parents[1] / "configs/pretrain/quickstart.yaml"


def config(tmp: Path, name: str, args, *extra: str) -> PretrainConfig:
    return load_config(PretrainConfig, QUICKSTART, [
        f"run_name={name}", f"output_dir={tmp}/runs", f"data.output_root={tmp}/prepared",
        f"corpus.harvest_dir={tmp}/corpus", f"corpus.harvest_max_mb={args.corpus_mb}",
        f"data.tokenizer.vocab_size={args.vocab}", f"train.micro_batch_size={args.micro_batch}",
        f"train.log_every={args.log_every}", "train.eval_batches=2", "optim.warmup_steps=10",
        f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db", f"tracking.artifact_location={tmp}/art",
        "tracking.registered_model=", *extra])


def windows(tracking_uri: str, run_id: str) -> list[tuple[int, int, float]]:
    """(step, epoch, data wait share) of every metrics window of the run."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    epoch = {m.step: int(m.value) for m in client.get_metric_history(run_id, "train/epoch")}
    wait = client.get_metric_history(run_id, "train/data_wait_share")
    return sorted((m.step, epoch[m.step], m.value) for m in wait)


def summarize(rows: list[tuple[int, int, float]]) -> dict:
    waits = [w for _, _, w in rows]
    starts = [w for (_, e, w), (_, prev, _) in zip(rows[1:], rows) if e != prev]
    return {"windows": len(rows), "epochs": rows[-1][1] + 1, "mean": statistics.mean(waits), "max": max(waits),
            "max_epoch_start": max(starts) if starts else float("nan")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--corpus-mb", type=float, default=1.0)
    p.add_argument("--vocab", type=int, default=2000)
    p.add_argument("--micro-batch", type=int, default=16)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--prefetch", type=int, default=64, help="train.prefetch_batches of the read-ahead side")
    p.add_argument("--workdir", default="", help="keep runs and data here (default: a temp dir)")
    args = p.parse_args()

    from jobs import pretrain
    from jobs.runtime.cluster import init_ray
    from pipelines.harvest import harvest_installed_docs
    from pipelines.prepare import prepare

    tmp = Path(args.workdir or tempfile.mkdtemp(prefix="epoch-wait-"))
    base = config(tmp, "probe", args)
    init_ray()
    harvest_installed_docs(base.corpus.harvest_dir, max_mb=args.corpus_mb)
    prepared = prepare(base.data)
    train_rows = sum(s["rows"] for s in prepared.manifest["shards"]["train"])
    per_epoch = -(-(train_rows // base.scaling.num_workers) // args.micro_batch)
    steps = args.epochs * per_epoch
    sides = {"on demand": "train.prefetch_batches=0", "read ahead": f"train.prefetch_batches={args.prefetch}"}
    print(f"{train_rows:,} train examples, {per_epoch} steps an epoch on {base.scaling.num_workers} workers, "
          f"{steps} steps ({args.epochs} epochs), a window every {args.log_every} steps; "
          f"load avg {os.getloadavg()[0]:.1f}", flush=True)
    results: dict[str, list[dict]] = {s: [] for s in sides}
    for rep in range(args.repeats):
        order = list(sides) if rep % 2 == 0 else list(sides)[::-1]
        for side in order:
            name = f"{side.replace(' ', '-')}-{rep}-{time.strftime('%H%M%S')}"  # a fresh run, never a resume
            start = time.perf_counter()
            r = pretrain.run(config(tmp, name, args, sides[side], f"train.max_steps={steps}"))
            s = summarize(windows(base.tracking.tracking_uri, r.mlflow["run_id"]))
            s["wall_s"] = time.perf_counter() - start
            s["load"] = os.getloadavg()[0]
            results[side].append(s)
            print(f"[bench] {side}: {s}", flush=True)

    print(f"\n{'side':<12}{'windows':>8}{'epochs':>7}{'mean wait':>11}{'worst':>8}{'worst at epoch start':>22}"
          f"{'wall s':>8}")
    for side, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{side:<12}{med['windows']:>8.0f}{med['epochs']:>7.0f}{med['mean']:>11.1%}{med['max']:>8.1%}"
              f"{med['max_epoch_start']:>22.1%}{med['wall_s']:>8.1f}")
    worst = {side: statistics.median(r["max_epoch_start"] for r in runs) for side, runs in results.items()}
    print(f"worst epoch-start window, on demand / read ahead: {worst['on demand'] / max(worst['read ahead'], 1e-9):.1f}x")


if __name__ == "__main__":
    main()
