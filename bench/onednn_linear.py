"""oneDNN's prepacked linear kernels (jobs/inference/onednn.py) against nn.Linear, side by side in one run, one thread.

  gemm     a BERT-small FFN product, 1600 tokens x 384 -> 1536 (a batch of 32 rows of 50 pieces): nn.Linear (the
           build's BLAS: MKL in the official wheels) against PackedLinear, GFLOP/s: one call of each in turn per
           repeat, the median call of each (load bursts hit both alike); their outputs must agree (fp32 sums in
           another order) or the bench stops before printing a rate
  model    jobs/inference/predictor.Predictor's forward over real rows (the pkgdocs harvest: installed packages'
           documentation, mean ~50 word pieces) with all-MiniLM-L6-v2 and a 4-class head, cpu_kernels="torch"
           against "onednn" (and "onednn" with the feed-forward GELU left outside the kernel), rows/s, and the
           largest difference of their logits (over LOGIT_TOLERANCE stops the bench before any rate)

    python bench/onednn_linear.py              # 1,000 rows
    python bench/onednn_linear.py --rows 3000 --threads 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
LOGIT_TOLERANCE = 1e-4  # fp32 both ways, sums in another order: 1.2e-07 recorded on MiniLM-L6


def gemm(repeats: int = 50) -> tuple[float, float]:
    import torch

    from jobs.inference.onednn import PackedLinear

    linear = torch.nn.Linear(384, 1536)
    packed, x = PackedLinear(linear), torch.randn(1600, 384)
    flops = 2 * 1600 * 384 * 1536
    seconds: dict = {linear: [], packed: []}
    with torch.inference_mode():
        dense_out, packed_out = linear(x), packed(x)  # warm, and the outputs compared
        if not torch.allclose(dense_out, packed_out, rtol=1e-4, atol=1e-4):
            sys.exit(f"gemm: PackedLinear differs from nn.Linear by up to "
                     f"{float((dense_out - packed_out).abs().max()):.1e}: no rate is given")
        for i in range(repeats):
            for f in (linear, packed) if i % 2 == 0 else (packed, linear):  # who goes first alternates
                start = time.perf_counter()
                f(x)
                seconds[f].append(time.perf_counter() - start)
    return flops / statistics.median(seconds[linear]) / 1e9, flops / statistics.median(seconds[packed]) / 1e9


def model_rows(folder: Path, texts: list[str], kernels: str, fuse_gelu: bool = True) -> tuple[float, list]:
    from jobs.inference.onednn import pack_linears
    from jobs.inference.predictor import Predictor

    predictor = Predictor(folder, max_batch_tokens=4096, cpu_kernels=kernels if fuse_gelu else "torch")
    if not fuse_gelu:
        assert pack_linears(predictor.model, fuse_gelu=False) > 0
    encoded = predictor.encode([{"id": str(i), "text_a": t} for i, t in enumerate(texts)])
    predictor.forward(encoded[:64])  # warm
    start = time.perf_counter()
    logits = predictor.forward(encoded)
    return len(texts) / (time.perf_counter() - start), logits


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--corpus-dir", default=str(ROOT / "data/corpus/bench-own-data"))
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch

    from predict_vs_pipeline import model_folder, texts_of

    torch.set_num_threads(args.threads)
    dense, packed = gemm()
    texts = texts_of(args.corpus_dir, args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        folder = model_folder(Path(tmp) / "model")
        torch_rate, torch_logits = model_rows(folder, texts, "torch")
        unfused_rate, unfused_logits = model_rows(folder, texts, "onednn", fuse_gelu=False)
        onednn_rate, onednn_logits = model_rows(folder, texts, "onednn")
    diffs = {}
    for name, logits in (("onednn", onednn_logits), ("onednn, GELU outside", unfused_logits)):
        if len(logits) != len(torch_logits):
            sys.exit(f"{name}: {len(logits)} rows of logits for {len(torch_logits)}: no rate is given")
        diffs[name] = max(float(np.abs(a[0] - b[0]).max()) for a, b in zip(torch_logits, logits))
        if diffs[name] > LOGIT_TOLERANCE:
            sys.exit(f"{name}: logits differ from nn.Linear's by up to {diffs[name]:.1e} (> {LOGIT_TOLERANCE:g}): "
                     "no rate is given")
    diff = diffs["onednn"]
    print(f"threads {args.threads} | cores {os.cpu_count()} | load {os.getloadavg()[0]:.2f} | "
          f"torch {torch.__version__}")
    print(f"gemm 1600x384 @ 384x1536   nn.Linear {dense:7.1f} GFLOP/s   PackedLinear {packed:7.1f} GFLOP/s   "
          f"{packed / dense:.2f}x")
    print(f"MiniLM-L6, {len(texts)} rows      torch {torch_rate:7.1f} rows/s     onednn {onednn_rate:7.1f} "
          f"rows/s     {onednn_rate / torch_rate:.2f}x   max |logit diff| {diff:.1e}   (GELU outside the kernel: "
          f"{unfused_rate:.1f} rows/s, {unfused_rate / torch_rate:.2f}x)")


if __name__ == "__main__":
    main()
