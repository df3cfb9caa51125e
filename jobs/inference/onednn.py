"""A model's linear layers on oneDNN's prepacked fp32 kernels, for inference on CPUs.

PyTorch's nn.Linear on a CPU calls its BLAS (MKL in the official wheels), which on this project's 2-core AMD EPYC
VM runs a 1600x384 @ 384x1536 product at ~104 GFLOP/s per thread; oneDNN's inner product, its weight reordered once
into the kernel's blocked layout, at ~249 (bench/onednn_linear.py). The linear layers are ~84% of a BERT forward
there, so MiniLM-L6 predicts ~1.9x as many rows per thread, in fp32, its logits within ~1e-7 of nn.Linear's. This is
what torch.compile's CPU "freezing" does (inductor's mkldnn weight prepack), without a compile: no warm-up and no
recompile when batch shapes change.

    packed = pack_linears(model)  # after .eval(), on the CPU; 0 where oneDNN is missing or disagrees

Inference only: the packed weight has no gradient and is not in the state dict; pickling the model stores it
in plain layout and packs it again on load. bf16 autocast does not reach these
kernels, so bf16 runs keep nn.Linear.
"""

from __future__ import annotations

import torch


class PackedLinear(torch.nn.Module):
    """nn.Linear's forward, its weight reordered once for oneDNN's inner product."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None)
        self.bias = None if linear.bias is None else linear.bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")

    def __getstate__(self):
        """Pickled (MLflow saving a pyfunc that holds the model, copy.deepcopy) with its weight in plain layout: a
        oneDNN tensor has no storage to pickle."""
        return {**super().__getstate__(), "weight": self.weight.to_dense()}

    def __setstate__(self, state):
        super().__setstate__(state)
        self.weight = torch.ops.mkldnn._reorder_linear_weight(self.weight, None)


def available() -> bool:
    """oneDNN is in this torch build and answers a linear layer as nn.Linear does (checked on a small one)."""
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    try:
        with torch.no_grad():
            linear = torch.nn.Linear(64, 48)
            x = torch.randn(2, 5, 64)
            return bool(torch.allclose(PackedLinear(linear)(x), linear(x), rtol=1e-4, atol=1e-5))
    except RuntimeError:  # a CPU or build whose oneDNN has no such primitive
        return False


def pack_linears(model: torch.nn.Module) -> int:
    """Replace every fp32 nn.Linear of a CPU model by a PackedLinear; how many were replaced (0: none, where
    oneDNN is unavailable)."""
    linears = [(parent, name) for parent in model.modules() for name, child in parent.named_children()
               if type(child) is torch.nn.Linear and child.weight.device.type == "cpu"
               and child.weight.dtype == torch.float32]
    if not linears or not available():
        return 0
    for parent, name in linears:
        setattr(parent, name, PackedLinear(getattr(parent, name)))
    return len(linears)
