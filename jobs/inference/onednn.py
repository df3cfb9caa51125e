"""A model's linear layers on oneDNN's prepacked fp32 kernels, for inference on CPUs.

PyTorch's nn.Linear on a CPU calls its BLAS (MKL in the official wheels), which on a 2-core AMD EPYC VM of family 26
ran a 1600x384 @ 384x1536 product at ~104 GFLOP/s per thread; oneDNN's inner product, its weight reordered once into
the kernel's blocked layout, at ~249 (bench/onednn_linear.py). The linear layers are ~84% of a BERT forward there, so
MiniLM-L6 predicted ~1.9x as many rows per thread (on a family-25 EPYC, MKL is nearer oneDNN: 1.19x the product,
1.15x the rows, BENCHMARKS.md 2026-12-01), in fp32, its logits within a few 1e-6 of nn.Linear's,
relative (the kernels sum in another order; the real MiniLM-L6 at logits ~3 measured 1.5e-6 of the largest logit for a
sequence classifier, 2.7e-6 for a token classifier: tests/unit/test_onednn.py). This is what torch.compile's CPU
"freezing" does (inductor's mkldnn weight prepack), without a compile: no warm-up and no recompile when batch shapes
change. A feed-forward layer's exact GELU (BERT's `intermediate_act_fn`) is fused into its linear layer's kernel, as
inductor fuses it: one pass over the 4x-wide activations instead of two.

    packed = pack_linears(model)  # after .eval(), on the CPU; 0 where oneDNN is missing or disagrees

Inference only: the packed weight has no gradient and is not in the state dict; pickling the model stores it
in plain layout and packs it again on load. bf16 autocast does not reach these
kernels, so bf16 runs keep nn.Linear.
"""

from __future__ import annotations

import torch


class PackedLinear(torch.nn.Module):
    """nn.Linear's forward, its weight reordered once for oneDNN's inner product; with `activation="gelu"`, followed by
    the exact (erf) GELU in the same kernel."""

    def __init__(self, linear: torch.nn.Linear, activation: str = "none"):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None)
        self.bias = None if linear.bias is None else linear.bias.detach()
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.activation == "gelu":
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "gelu", [], "none")
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


def pack_linears(model: torch.nn.Module, fuse_gelu: bool = True) -> int:
    """Replace every fp32 nn.Linear of a CPU model by a PackedLinear, the exact GELU after a feed-forward layer's
    fused into it (`fuse_gelu`); how many were replaced (0: none, where oneDNN is unavailable)."""
    linears = [(parent, name) for parent in model.modules() for name, child in parent.named_children()
               if type(child) is torch.nn.Linear and child.weight.device.type == "cpu"
               and child.weight.dtype == torch.float32]
    if not linears or not available():
        return 0
    for parent, name in linears:
        if fuse_gelu and name == "dense" and _exact_gelu(getattr(parent, "intermediate_act_fn", None)):
            _fuse_gelu(parent)
        else:
            setattr(parent, name, PackedLinear(getattr(parent, name)))
    return len(linears)


def _exact_gelu(act) -> bool:
    """transformers' GELUActivation on torch's erf GELU (BERT's hidden_act "gelu"), or nn.GELU without tanh."""
    if isinstance(act, torch.nn.GELU):
        return act.approximate == "none"
    return getattr(act, "act", None) is torch.nn.functional.gelu


def _fuse_gelu(block: torch.nn.Module) -> None:
    """A feed-forward block's `dense` then `intermediate_act_fn` (BertIntermediate) as one kernel; kept apart where
    the fused block does not answer as the two did (checked on the block's own weights)."""
    dense, act = block.dense, block.intermediate_act_fn
    with torch.no_grad():
        eye = torch.nn.Linear(64, 64)  # the kernel's GELU alone, over the range where GELUs part
        eye.weight.copy_(torch.eye(64))
        eye.bias.zero_()
        z = torch.linspace(-6, 6, 64)[None]
        x = torch.randn(2, 3, dense.in_features)
        expected = act(dense(x))
        block.dense, block.intermediate_act_fn = PackedLinear(dense, "gelu"), torch.nn.Identity()
        if (torch.allclose(PackedLinear(eye, "gelu")(z), act(z), rtol=1e-4, atol=1e-6)
                and torch.allclose(block(x), expected, rtol=1e-4, atol=1e-5)):
            return
    block.dense, block.intermediate_act_fn = PackedLinear(dense), act
