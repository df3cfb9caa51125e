"""Training-step throughput: bert_core BertForPreTraining vs transformers.BertForPreTraining.

Same config, same batches, same optimizer (AdamW; fused on CUDA), 15% masked labels, NSP labels.
Batches are padded like real ones: each row's length is drawn uniformly from [seq_len/2, seq_len].
Tokens/s counts real (non-pad) tokens, the work a pretraining run wants done.

Every runner starts from the same weights (ours, seed 0, exported and loaded by transformers), and before any
is timed each one's loss on the same batch (eval mode: no dropout) must match the first runner's, or the bench
stops: a faster step that computes something else does not get a ratio.

Timing: each runner does blocks of `--block` back-to-back steps (forward, backward, optimizer
step) between two device synchronizations, so the GPU is never starved by a per-step sync of
ours; runners alternate block by block (all of them on the device together), and each runner's
rate is the median over its blocks, so bursts of load from other processes hit every runner alike.

Runners (GPU default: ours-compiled, hf-compiled and hf; `--runners` picks any of):
  ours           eager, packing built on the host by the collator (`host_packing`)
  ours-compiled  torch.compile of the whole forward + loss + backward, host packing
  ours-sync      compiled, packing built on the device (nonzero(): a host sync per forward)
  ours-padattn   compiled, host packing, attention re-padded to (B, T) for SDPA (no varlen flash)
  hf             transformers' BertForPreTraining, eager, its default (SDPA) attention
  hf-compiled    the same under torch.compile

CPU (default): presets tiny, mini, base at seq 128, fp32, runners ours and hf.
GPU (when CUDA is available): presets base, large at seq 128 and 512, bf16 autocast, plus MFU
with the job's FLOPs/token (jobs.loops.metrics.flops_per_token, what train/mfu logs): 6N + 12*L*T*H,
N the parameters without embeddings (Kaplan et al. / PaLM appendix B), and beside it the same with
embeddings in N (this bench's MFU before it took the job's formula); and HFU, hardware utilisation: the matmul
FLOPs each runner's step executes (`hardware_flops`: ours skips padding and runs the decoder on the masked 15%,
transformers computes every padded position) over its time and the peak.

    python bench/model_throughput.py                       # defaults for the device found
    python bench/model_throughput.py --presets base --seq-len 128 --tokens 32768 --profile
    python bench/model_throughput.py --presets base --seq-len 128 --attention-dropout 0   # MosaicBERT's recipe
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field

import torch

import bert_core.model as model_lib
from bert_core.checkpoint import load_pretrained, save_pretrained
from bert_core.config import BertConfig, preset
from bert_core.model import IGNORE_INDEX, BertForPreTraining, compile_model, host_packing
from jobs.loops.metrics import flops_per_token, peak_for



@dataclass
class Row:
    preset: str
    seq_len: int
    batch_size: int
    tps: dict[str, float] = field(default_factory=dict)  # runner -> real tokens per second
    mfu: dict[str, float] = field(default_factory=dict)  # the job's formula: N without embeddings
    mfu_emb: dict[str, float] = field(default_factory=dict)  # N with embeddings
    hfu: dict[str, float] = field(default_factory=dict)  # the matmul FLOPs each runner's step executes


def make_batches(cfg: BertConfig, batch_size: int, seq_len: int, n: int, seed: int = 0) -> list[dict]:
    """CPU batches as the collator gives them, host packing included."""
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
        batch = dict(input_ids=ids, token_type_ids=types, attention_mask=mask, mlm_labels=labels,
                     next_sentence_label=nsp)
        batch.update(host_packing(mask, labels))
        batches.append(batch)
    return batches


def hardware_flops(cfg: BertConfig, batch: dict, runner: str, varlen: bool = True) -> float:
    """The matmul FLOPs one training step of `runner` executes on `batch` (forward + backward, 3x the forward): what
    hardware utilisation counts, where MFU counts the model's FLOPs of every real token. Ours (packed) runs the
    encoder's dense layers on the real tokens only, attention on each row's own length (varlen flash; ours-padattn
    re-pads to T, as every ours runner does where the varlen kernel is not available: `varlen` False), and the MLM
    transform + decoder on the masked tokens; transformers runs all of them on every padded position. Not counted:
    the embedding lookups, element-wise work, and flash's recompute in backward."""
    H, L, V = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    mask = batch["attention_mask"]
    B, T = mask.shape
    lengths = mask.sum(1).double()
    packed = not runner.startswith("hf")
    tokens = float(lengths.sum()) if packed else B * T
    attention = float((lengths ** 2).sum()) if packed and varlen and runner != "ours-padattn" else B * T * T
    head = float((batch["mlm_labels"] != IGNORE_INDEX).sum()) if packed else B * T
    forward = (2 * L * (4 * H * H + 2 * H * cfg.intermediate_size) * tokens + 4 * L * H * attention
               + 2 * (H * H + H * V) * head + 2 * B * (H * H + 2 * H))  # + pooler and NSP
    return 3 * forward


def to_device(batch: dict, device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


class Runner:
    """One model + optimizer + how it steps."""

    def __init__(self, name: str, weights: str, device, fused: bool):
        """`weights`: a release folder (save_pretrained) that every runner loads, so all start equal."""
        import transformers  # only the benchmark needs it

        self.name = name
        if name.startswith("hf"):
            model = transformers.BertForPreTraining.from_pretrained(weights)
        else:
            model = load_pretrained(weights, BertForPreTraining)
        self.model = model.to(device).train()
        self.forward = compile_model(self.model) if name in ("ours-compiled", "ours-sync", "ours-padattn") \
            else torch.compile(self.model) if name == "hf-compiled" else self.model
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=fused)

    def loss(self, b: dict) -> torch.Tensor:
        if self.name.startswith("hf"):
            return self.forward(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"],
                                attention_mask=b["attention_mask"], labels=b["mlm_labels"],
                                next_sentence_label=b["next_sentence_label"]).loss
        packing = {} if self.name == "ours-sync" else \
            {k: b[k] for k in ("unpad_indices", "cu_seqlens", "mlm_positions")}
        return self.forward(b["input_ids"], b["token_type_ids"], b["attention_mask"], mlm_labels=b["mlm_labels"],
                            next_sentence_label=b["next_sentence_label"], **packing).loss

    def eval_loss(self, b: dict, bf16: bool, device) -> float:
        """The loss on `b` without dropout or an update: equal weights must give equal losses."""
        self.model.eval()
        with torch.no_grad(), self.attention(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = float(self.loss(b))
        self.model.train()
        return loss

    def step(self, b: dict, bf16: bool, device) -> None:
        with self.attention(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = self.loss(b)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def attention(self):
        """ours-padattn: the packed path's attention re-pads to (B, T) for SDPA instead of varlen flash."""
        if self.name != "ours-padattn":
            return contextlib.nullcontext()
        return _patched(model_lib, "flash_varlen_available", lambda *a: False)


@contextlib.contextmanager
def _patched(module, name, value):
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def initial_weights(cfg: BertConfig, folder: str) -> str:
    """Our model at seed 0 as a release folder, which ours and transformers both load."""
    torch.manual_seed(0)
    save_pretrained(BertForPreTraining(cfg), folder)
    return folder


def check_losses(losses: dict[str, float], rtol: float) -> None:
    """Stop, before any rate is printed, when a runner's loss on the shared batch differs from the first's, or any
    loss is not finite (every comparison with NaN is False, and an inf reference would make the tolerance inf)."""
    first, ref = next(iter(losses.items()))
    bad = {name: loss for name, loss in losses.items()
           if not (math.isfinite(loss) and math.isfinite(ref)) or abs(loss - ref) > rtol * abs(ref)}
    if bad:
        sys.exit(f"loss mismatch on the same batch and weights: {first} {ref:.6f}, "
                 + ", ".join(f"{name} {loss:.6f}" for name, loss in bad.items())
                 + f" (tolerance {rtol:g} relative): the runners do not compute the same step, no ratio is given")


def bench_config(cfg: BertConfig, runner_names: list[str], batch_size: int, seq_len: int, blocks: int,
                 block: int, warmup: int, device, bf16: bool) -> tuple[dict[str, float], dict[str, float]]:
    """Each runner's real tokens/s, and the matmul FLOPs its step executes per real token over these batches."""
    batches = make_batches(cfg, batch_size, seq_len, n=8)
    gpu_batches = [to_device(b, device) for b in batches]
    for b in gpu_batches:  # N and M vary per batch: compile them symbolic at once, not after a recompile
        torch._dynamo.maybe_mark_dynamic(b["unpad_indices"], 0)
        torch._dynamo.maybe_mark_dynamic(b["mlm_positions"], 0)
    real_tokens = [int(b["attention_mask"].sum()) for b in batches]
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    varlen = model_lib.flash_varlen_available(gpu_batches[0]["input_ids"].to(torch.bfloat16 if bf16 else torch.float),
                                              head_dim)
    hw_per_token = {name: sum(hardware_flops(cfg, b, name, varlen) for b in batches) / sum(real_tokens)
                    for name in runner_names}
    with tempfile.TemporaryDirectory() as tmp:
        weights = initial_weights(cfg, tmp)
        runners = [Runner(name, weights, device, fused=device.type == "cuda") for name in runner_names]
    # fp32 sums differ in order only; bf16 autocast rounds each matmul, and the paths differ in where it casts
    check_losses({r.name: r.eval_loss(gpu_batches[0], bf16, device) for r in runners}, rtol=1e-2 if bf16 else 1e-4)
    for runner in runners:
        for i in range(warmup):  # compiles here (the first two shapes: then N is symbolic)
            runner.step(gpu_batches[i % len(gpu_batches)], bf16, device)
    sync(device)
    rates: dict[str, list[float]] = {name: [] for name in runner_names}
    for j in range(blocks):
        for runner in runners[j % len(runners):] + runners[:j % len(runners)]:  # who goes first rotates
            t0 = time.perf_counter()
            tokens = 0
            for i in range(block):
                k = (j * block + i) % len(gpu_batches)
                runner.step(gpu_batches[k], bf16, device)
                tokens += real_tokens[k]
            sync(device)
            rates[runner.name].append(tokens / (time.perf_counter() - t0))
    del runners
    torch.cuda.empty_cache() if device.type == "cuda" else None
    return {name: statistics.median(r) for name, r in rates.items()}, hw_per_token


def flops_per_token_with_embeddings(cfg: BertConfig, seq_len: int) -> float:
    """The job's formula with the embedding tables counted in N (this bench's MFU until 2026-11-28)."""
    return 6 * cfg.num_parameters() + 12 * cfg.num_hidden_layers * seq_len * cfg.hidden_size


def default_peak_tflops() -> float | None:
    if not torch.cuda.is_available():
        return None
    peak = peak_for(torch.cuda.get_device_name())  # the job's table: its train/mfu and this bench's agree
    return peak / 1e12 if peak else None


KERNEL_CLASSES = (  # (class, substrings of CUDA kernel names), first match wins
    ("attention", ("flash", "fmha", "attention", "mem_eff")),
    ("matmul", ("gemm", "cutlass", "sm90_xmma", "nvjet", "matmul", "cublas", "wgmma")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("fused (triton)", ("triton",)),
)


def kernel_time_by_class(events) -> dict[str, float]:
    """Device time (us) of the kernels alone, by KERNEL_CLASSES. The profiler also gives the ops that launched them
    (aten::mm, a Triton kernel's host-side call) and GPU-side annotations (Optimizer.step#AdamW.step) a self device
    time: summing those too counted each kernel twice (seen on torch 2.11: "GPU busy 193% of wall")."""
    from torch.autograd import DeviceType

    by_class: dict[str, float] = {}
    for e in events:
        t = getattr(e, "self_device_time_total", 0.0) or 0.0
        if t <= 0 or e.device_type != DeviceType.CUDA or getattr(e, "is_user_annotation", False):
            continue
        key = e.key.lower()
        cls = next((c for c, subs in KERNEL_CLASSES if any(s in key for s in subs)), "other")
        by_class[cls] = by_class.get(cls, 0.0) + t
    return by_class


def profile(cfg: BertConfig, name: str, batch_size: int, seq_len: int, device, bf16: bool, out_dir: str | None):
    """Kernel time by class over 5 steps, and the host-device syncs the step makes."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(name, initial_weights(cfg, tmp), device, fused=True)
    batches = [to_device(b, device) for b in make_batches(cfg, batch_size, seq_len, n=8)]
    for i in range(4):
        runner.step(batches[i], bf16, device)
    sync(device)
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for i in range(5):
            runner.step(batches[i % len(batches)], bf16, device)
        sync(device)
        wall = time.perf_counter() - t0
    events = prof.key_averages()
    by_class = kernel_time_by_class(events)
    gpu_total = sum(by_class.values()) or 1e-9
    syncs = {e.key: e.count for e in events
             if e.key in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpyAsync", "aten::nonzero",
                          "aten::item", "aten::_local_scalar_dense")}
    print(f"profile {cfg_name(cfg)} seq {seq_len} batch {batch_size} runner {name}: 5 steps, wall {wall * 1e3:.1f} ms,"
          f" GPU busy {gpu_total / 1e3:.1f} ms ({gpu_total / 1e6 / wall:.0%} of wall)")
    for cls, t in sorted(by_class.items(), key=lambda kv: -kv[1]):
        print(f"  {cls:<16}{t / 1e3:>9.1f} ms  {t / gpu_total:>6.1%}")
    print(f"  host-side calls in 5 steps (4 are the profiler's own syncs): {syncs}")
    if out_dir:
        with open(os.path.join(out_dir, f"profile_{name}_{seq_len}.txt"), "w") as f:
            f.write(events.table(sort_by="self_cuda_time_total", row_limit=-1))


def cfg_name(cfg: BertConfig) -> str:
    return f"L{cfg.num_hidden_layers}/H{cfg.hidden_size}"


def run(presets, seq_lens, tokens, runners, blocks, block, warmup, peak_tflops, batch_size=None,
        dropout: dict | None = None) -> list[Row]:
    """`dropout`: BertConfig dropout fields to override, for both models alike (default: BERT's 0.1 everywhere)."""
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    rows = []
    for name in presets:
        cfg = preset(name, **(dropout or {}))
        for seq_len in seq_lens:
            bs = batch_size or max(1, tokens // seq_len)
            tps, hw_per_token = bench_config(cfg, runners, bs, seq_len, blocks, block, warmup, device, bf16=cuda)
            row = Row(name, seq_len, bs, tps)
            if peak_tflops:
                row.hfu.update({r: t * hw_per_token[r] / (peak_tflops * 1e12) for r, t in tps.items()})
                for mfu, per_token in ((row.mfu, flops_per_token(cfg, seq_len)),
                                       (row.mfu_emb, flops_per_token_with_embeddings(cfg, seq_len))):
                    mfu.update({r: t * per_token / (peak_tflops * 1e12) for r, t in tps.items()})
            rows.append(row)
            print(format_row(row, runners), flush=True)
    return rows


BASELINES = ("hf", "hf-compiled")  # each one run gets its ratio column: ours (the first runner) over it


def header(runners: list[str]) -> str:
    cols = "".join(f"{r + ' tok/s':>22}" for r in runners)
    mfus = "".join(f"{r + ' MFU':>18}" for r in runners)
    mfus_emb = "".join(f"{r + ' MFU w/ emb':>24}" for r in runners)
    hfus = "".join(f"{r + ' HFU':>18}" for r in runners)
    ratios = "".join(f"{'ratio ' + runners[0] + '/' + b:>28}" for b in BASELINES if b in runners)
    return f"{'preset':<8}{'seq':>5}{'batch':>6}{cols}{mfus}{mfus_emb}{hfus}{ratios}"


def format_row(r: Row, runners: list[str]) -> str:
    cols = "".join(f"{r.tps[n]:>22,.0f}" for n in runners)
    mfus = "".join(f"{r.mfu[n]:>18.1%}" if n in r.mfu else f"{'-':>18}" for n in runners)
    mfus_emb = "".join(f"{r.mfu_emb[n]:>24.1%}" if n in r.mfu_emb else f"{'-':>24}" for n in runners)
    hfus = "".join(f"{r.hfu[n]:>18.1%}" if n in r.hfu else f"{'-':>18}" for n in runners)
    # against each baseline run: eager transformers, and compiled (like for like with ours-compiled)
    ratios = "".join(f"{r.tps[runners[0]] / r.tps[b]:>27.2f}x" for b in BASELINES if b in runners)
    return f"{r.preset:<8}{r.seq_len:>5}{r.batch_size:>6}{cols}{mfus}{mfus_emb}{hfus}{ratios}"


def main(argv=None):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", default="base,large" if cuda else "tiny,mini,base",
                   help="comma-separated bert_core.config presets")
    p.add_argument("--seq-len", default="128,512" if cuda else "128", help="comma-separated sequence lengths")
    p.add_argument("--tokens", type=int, default=65536 if cuda else 1024,
                   help="padded tokens per batch (batch size = tokens / seq_len)")
    p.add_argument("--batch-size", type=int, default=None, help="fixed batch size (overrides --tokens)")
    p.add_argument("--runners", default="ours-compiled,hf-compiled,hf" if cuda else "ours,hf",
                   help="comma-separated: ours, ours-compiled, ours-sync, ours-padattn, hf, hf-compiled")
    p.add_argument("--blocks", type=int, default=5 if cuda else 4, help="timed blocks per runner")
    p.add_argument("--block", type=int, default=10 if cuda else 1, help="steps per timed block")
    p.add_argument("--warmup", type=int, default=6 if cuda else 1)
    p.add_argument("--peak-tflops", type=float, default=default_peak_tflops(),
                   help="accelerator peak for MFU (default by device name: H100/H200 989 bf16)")
    p.add_argument("--hidden-dropout", type=float, default=None,
                   help="dropout on embeddings and residual branches, both models (default: the preset's, 0.1)")
    p.add_argument("--attention-dropout", type=float, default=None,
                   help="dropout on attention weights, both models (default 0.1; MosaicBERT and cramming use 0)")
    p.add_argument("--profile", action="store_true", help="also profile the first runner on the first config")
    p.add_argument("--profile-dir", default=os.environ.get("OUT"), help="where the full profile tables go")
    args = p.parse_args(argv)

    runners = args.runners.split(",")
    dropout = {k: v for k, v in (("hidden_dropout_prob", args.hidden_dropout),
                                 ("attention_probs_dropout_prob", args.attention_dropout)) if v is not None}
    presets, seq_lens = args.presets.split(","), [int(s) for s in args.seq_len.split(",")]
    device = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
    print(f"device: {device}; torch {torch.__version__}; {'bf16 autocast' if cuda else 'fp32'}; "
          f"AdamW{' (fused)' if cuda else ''}; 15% MLM + NSP labels; row lengths ~ U[seq/2, seq]; "
          f"tokens/s = median over {args.blocks} blocks of {args.block} steps of real tokens / block time"
          + (f"; dropout {dropout}" if dropout else ""))
    if args.profile:
        cfg = preset(presets[0], **dropout)
        profile(cfg, runners[0], args.batch_size or args.tokens // seq_lens[0], seq_lens[0],
                torch.device("cuda" if cuda else "cpu"), cuda, args.profile_dir)
    print(header(runners), flush=True)
    run(presets, seq_lens, args.tokens, runners, args.blocks, args.block, args.warmup, args.peak_tflops,
        batch_size=args.batch_size, dropout=dropout)


if __name__ == "__main__":
    main()
