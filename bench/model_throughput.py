"""Training-step throughput: bert_core BertForPreTraining vs transformers.BertForPreTraining.

Same config, same batches, same optimizer (AdamW), 15% masked labels, NSP labels. Batches are
padded like real ones: each row's length is drawn uniformly from [seq_len/2, seq_len]. Tokens/s
counts real (non-pad) tokens, the work a pretraining run wants done. Steps of the two models
alternate, and each model's rate is the median over its steps, so that bursts of load from other
processes on a shared machine neither hit one model only nor dominate the result.

CPU (default): presets tiny, mini, base at seq 128, fp32.
GPU (when CUDA is available): presets base, large at seq 128 and 512, bf16 autocast, plus MFU
with FLOPs/token = 6N + 12*L*T*H (N = parameter count, Kaplan et al. / PaLM appendix B).

    python bench/model_throughput.py                       # defaults for the device found
    python bench/model_throughput.py --presets base --seq-len 128 --batch-size 8 --steps 4
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass

import torch

from bert_core.config import BertConfig, preset
from bert_core.model import IGNORE_INDEX, BertForPreTraining, compile_model

PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}  # dense bf16 tensor-core peaks


@dataclass
class Row:
    preset: str
    seq_len: int
    batch_size: int
    ours_tps: float  # real tokens per second
    hf_tps: float
    ours_mfu: float | None = None
    hf_mfu: float | None = None

    @property
    def ratio(self) -> float:
        return self.ours_tps / self.hf_tps


def make_batches(cfg: BertConfig, batch_size: int, seq_len: int, n: int, device, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        lengths = torch.randint(seq_len // 2, seq_len + 1, (batch_size,), generator=g)
        mask = (torch.arange(seq_len) < lengths[:, None]).long()
        ids = torch.randint(5, cfg.vocab_size, (batch_size, seq_len), generator=g) * mask
        types = ((torch.arange(seq_len) >= (lengths[:, None] // 2)) & mask.bool()).long()
        chosen = (torch.rand(batch_size, seq_len, generator=g) < 0.15) & mask.bool()
        chosen[:, 1] = True  # every row has a masked token
        labels = torch.where(chosen, ids, IGNORE_INDEX)
        nsp = torch.randint(0, 2, (batch_size,), generator=g)
        batches.append(tuple(t.to(device) for t in (ids, types, mask, labels, nsp)))
    return batches


def ours_step(model, batch):
    ids, types, mask, labels, nsp = batch
    return model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp).loss


def hf_step(model, batch):
    ids, types, mask, labels, nsp = batch
    return model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels,
                 next_sentence_label=nsp).loss


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def bench_pair(cfg: BertConfig, batch_size: int, seq_len: int, steps: int, warmup: int, device,
               bf16: bool, compile_ours: bool) -> tuple[float, float]:
    import transformers  # only the benchmark needs it

    torch.manual_seed(0)
    ours = BertForPreTraining(cfg).to(device).train()
    hf = transformers.BertForPreTraining(transformers.BertConfig(**cfg.to_hf_dict())).to(device).train()
    runners = {"ours": (compile_model(ours) if compile_ours else ours, ours_step),
               "hf": (hf, hf_step)}
    opts = {name: torch.optim.AdamW(m.parameters(), lr=1e-4) for name, (m, _) in runners.items()}
    batches = make_batches(cfg, batch_size, seq_len, n=4, device=device)
    rates = {name: [] for name in runners}  # real tokens/s of each timed step
    for i in range(warmup + steps):
        batch = batches[i % len(batches)]
        for name, (model, step) in runners.items():
            sync(device)
            t0 = time.perf_counter()
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = step(model, batch)
            loss.backward()
            opts[name].step()
            opts[name].zero_grad(set_to_none=True)
            sync(device)
            if i >= warmup:
                rates[name].append(int(batch[2].sum()) / (time.perf_counter() - t0))
    return statistics.median(rates["ours"]), statistics.median(rates["hf"])


def flops_per_token(cfg: BertConfig, seq_len: int) -> float:
    return 6 * cfg.num_parameters() + 12 * cfg.num_hidden_layers * seq_len * cfg.hidden_size


def default_peak_tflops() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((peak for key, peak in PEAK_TFLOPS.items() if key in name), None)


def run(presets, seq_lens, batch_size, steps, warmup, peak_tflops, compile_ours=False) -> list[Row]:
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    rows = []
    for name in presets:
        cfg = preset(name)
        for seq_len in seq_lens:
            ours_tps, hf_tps = bench_pair(cfg, batch_size, seq_len, steps, warmup, device, bf16=cuda,
                                          compile_ours=compile_ours)
            row = Row(name, seq_len, batch_size, ours_tps, hf_tps)
            if peak_tflops:
                per_token = flops_per_token(cfg, seq_len)
                row.ours_mfu, row.hf_mfu = (tps * per_token / (peak_tflops * 1e12) for tps in (ours_tps, hf_tps))
            rows.append(row)
            print(format_row(row), flush=True)
    return rows


HEADER = f"{'preset':<8}{'seq':>5}{'batch':>6}{'ours tok/s':>13}{'HF tok/s':>12}{'ratio':>8}{'ours MFU':>10}{'HF MFU':>9}"


def format_row(r: Row) -> str:
    mfu = (f"{r.ours_mfu:>10.1%}{r.hf_mfu:>9.1%}" if r.ours_mfu is not None else f"{'-':>10}{'-':>9}")
    return f"{r.preset:<8}{r.seq_len:>5}{r.batch_size:>6}{r.ours_tps:>13,.0f}{r.hf_tps:>12,.0f}{r.ratio:>7.2f}x{mfu}"


def main(argv=None):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", default="base,large" if cuda else "tiny,mini,base",
                   help="comma-separated bert_core.config presets")
    p.add_argument("--seq-len", default="128,512" if cuda else "128", help="comma-separated sequence lengths")
    p.add_argument("--batch-size", type=int, default=64 if cuda else 8)
    p.add_argument("--steps", type=int, default=20 if cuda else 4, help="timed steps per model")
    p.add_argument("--warmup", type=int, default=5 if cuda else 1)
    p.add_argument("--peak-tflops", type=float, default=default_peak_tflops(),
                   help="accelerator peak for MFU (default by device name: H100/H200 989 bf16)")
    p.add_argument("--compile", action="store_true", help="torch.compile our model (not HF's)")
    args = p.parse_args(argv)

    device = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
    print(f"device: {device}; {'bf16 autocast' if cuda else 'fp32'}; AdamW; 15% MLM + NSP labels; "
          f"row lengths ~ U[seq/2, seq]; tokens/s = median over steps of real tokens / step time")
    print(HEADER, flush=True)
    run(args.presets.split(","), [int(s) for s in args.seq_len.split(",")], args.batch_size, args.steps,
        args.warmup, args.peak_tflops, compile_ours=args.compile)


if __name__ == "__main__":
    main()
