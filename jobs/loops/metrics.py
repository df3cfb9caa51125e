"""Step-window metrics: averages, rates, MFU and ETA, kept out of the training loop's way."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from bert_core.config import BertConfig
from bert_core.modern_config import ModernConfig


# Dense bf16/fp16 tensor-core peaks (datasheets, without sparsity), first match of the device name wins: the PCIe and
# NVL cards run lower clocks than the SXM parts that share their names. The job's MFU and the bench's use this one.
PEAK_BF16_FLOPS = {"H100 PCIe": 756e12, "H100 NVL": 835e12, "H200 NVL": 835e12, "H100": 989e12, "H200": 989e12,
                   "A100": 312e12}


def peak_for(device_name: str) -> float | None:
    return next((v for k, v in PEAK_BF16_FLOPS.items() if k in device_name), None)


def flops_per_token(model: BertConfig | ModernConfig, seq_len: int) -> float:
    """Training FLOPs per token: 6N (dense forward + backward) + 12*K*H (attention scores and values), K the keys a
    token attends to summed over the layers: seq_len in a global layer, the window (local_attention + 1) in the
    modern encoder's local ones. MFU counts the attention the model needs, not the masked-out scores a dense
    kernel computes too (two in three modern layers are local: counting them at seq_len overstated its MFU by
    15-25% at 1024 tokens). A packed row counts as one sequence of its length (the usual nominal figure)."""
    from bert_core.modern_config import LOCAL

    types = model.layer_types if isinstance(model, ModernConfig) else [""] * model.num_hidden_layers
    keys = sum(min(seq_len, model.local_attention + 1) if t == LOCAL else seq_len for t in types)
    return 6 * model.num_parameters(include_embeddings=False) + 12 * keys * model.hidden_size


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


@dataclass
class MetricsWindow:
    """Accumulates micro-step statistics between two reports of one rank."""

    start: float = field(default_factory=time.perf_counter)
    data_wait: float = 0.0  # seconds waiting for the next batch (collation included unless read ahead; at a report,
    #                       the longest of any rank: the lockstep all-reduce makes the others wait for it)
    micro_steps: int = 0
    loss: float = 0.0  # sum over micro-steps of the mean loss
    sums: dict[str, float] = field(default_factory=dict)  # the objective's sums (jobs/engine/objectives.py)
    tokens: int = 0  # real (non-pad) tokens
    samples: int = 0
    nonfinite: int = 0  # skipped micro-batches (NaN/inf loss); not in the averages above

    def add(self, stats, tokens: int, samples: int, data_wait: float) -> None:
        n = stats.micro_batches  # a pipeline step reports once for all its micro-batches
        self.micro_steps += n
        self.loss += stats.loss * n
        for k, v in stats.sums.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
        self.tokens += tokens
        self.samples += samples
        self.data_wait += data_wait

    def summed(self, add: Callable[[list[float]], list[float]], keys: tuple[str, ...]) -> "MetricsWindow":
        """This window with every data-parallel rank's counts and sums added (`add`: an all-reduce of a list of
        floats, every rank calling it with the same `keys`, the objective's sum keys): the run's loss, accuracies
        and rates, not rank 0's share of the data. A key no rank has stays out; data_wait and start stay this
        rank's (the caller takes the longest wait), and so does the non-finite count: every rank skips a micro-batch
        that is non-finite on any (data parallel steps in lockstep), so each holds the run's count, and the sum was
        it times the ranks, against the run's nonfinite_total."""
        unknown = set(self.sums) - set(keys)
        if unknown:
            raise ValueError(f"sums {sorted(unknown)} are not among the keys every rank adds: {keys}")
        values = [self.micro_steps, self.loss, self.tokens, self.samples,
                  *(self.sums.get(k, 0.0) for k in keys), *(float(k in self.sums) for k in keys)]
        total = add(values)
        steps, loss, tokens, samples = total[:4]
        found = total[4:4 + len(keys)], total[4 + len(keys):]
        return MetricsWindow(start=self.start, data_wait=self.data_wait, micro_steps=int(steps), loss=loss,
                             sums={k: v for k, v, seen in zip(keys, *found) if seen}, tokens=int(tokens),
                             samples=int(samples), nonfinite=self.nonfinite)

    def summary(self, replicas: int, flops_token: float, peak_flops: float | None, devices: int,
                metrics: Callable[[dict[str, float]], dict] = lambda sums: {}) -> dict:
        """The window's mean loss, `metrics` (the objective's) of its sums, and rates. Per-run rates count a
        rank's tokens x `replicas` (every data-parallel replica moves at its pace: they step in lockstep), or a
        `summed` window's with replicas=1; MFU divides by all `devices` (replicas x pipeline stages). A window whose
        micro-batches were all skipped as non-finite has no loss or accuracy to average: they read NaN, not 0."""
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        tokens_per_s = self.tokens * replicas / elapsed
        averages = metrics(self.sums)
        if not self.micro_steps:
            averages = {k: v if isinstance(v, int) else math.nan for k, v in averages.items()}  # counts stay 0
        out = {
            "loss": self.loss / self.micro_steps if self.micro_steps else math.nan, **averages,
            "tokens_per_s": tokens_per_s, "samples_per_s": self.samples * replicas / elapsed,
            "data_wait_share": self.data_wait / elapsed,
            "nonfinite_skipped": self.nonfinite,  # micro-batches skipped for a NaN/inf loss in this window
        }
        if peak_flops:
            out["mfu"] = tokens_per_s * flops_token / (peak_flops * devices)
        return out


def progress_line(step: int, total: int, m: dict, eta_s: float) -> str:
    nsp = f"nsp_acc {m['nsp_acc']:.3f} | " if "nsp_acc" in m else ""  # MLM-only objectives have none
    return (f"step {step:>6}/{total} | loss {m['loss']:.4f} | mlm_acc {m['mlm_acc']:.3f} | "
            f"{nsp}lr {m['lr']:.2e} | {m['tokens_per_s']:,.0f} tok/s | "
            f"{m['samples_per_s']:,.1f} samples/s | data wait {m['data_wait_share']:.0%} | "
            f"eta {format_duration(eta_s)}" + (f" | skipped {m['nonfinite_skipped']} non-finite"
                                               if m.get("nonfinite_skipped") else ""))
