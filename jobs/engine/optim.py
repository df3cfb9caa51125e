"""Optimizers for pretraining: DeepSpeed's AdamW, and our LAMB (on every device).

LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes") as
NVIDIA's BERT recipe runs it: Adam moments with bias correction, weight decay added to the update,
and each parameter tensor's step scaled by its trust ratio ||p|| / ||update||.

DeepSpeed's own LAMB (`"type": "Lamb"` -> FusedLamb) is not used, on GPU either: under ZeRO with several ranks
it takes each norm over the slice of a tensor its rank holds (no reduction across ranks: 16 GPUs would apply 16
trust ratios to the parts of one weight), and it has no exclusion of biases and LayerNorm (NVIDIA's `adapt`).
The engine is handed a `Lamb` instance (torch._foreach ops: CUDA kernels on GPU, a few per tensor). Two
DeepSpeed facts shape this module:
- ZeRO 1-3 (and the bf16 / fused-fp16 wrappers) flatten each param group into one fp32 tensor and give
  the optimizer that flat tensor -- or, with several ranks, this rank's slice of it. A per-tensor trust
  ratio survives only if every group holds exactly one tensor (`per_tensor_groups`), and with several
  ranks the norms must be summed over ranks (`Lamb(partitioned=True)`).
- ZeRO accepts an optimizer outside its tested list only with "zero_allow_untested_optimizer": true,
  and ZeRO-Offload only takes DeepSpeedCPUAdam unless "zero_force_ds_cpu_optimizer": false.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

OPTIMIZERS = ("adamw", "lamb")


class Lamb(torch.optim.Optimizer):
    """Layer-wise adaptive moments (LAMB); the "layer" is each parameter tensor in a group.

    update = m_hat / (sqrt(v_hat) + eps) + weight_decay * p
    p     -= lr * trust * update,  trust = ||p|| / ||update||  (1 when either norm is 0)

    Group options beyond Adam's:
      adapt       False skips the trust ratio (trust = 1), NVIDIA's exclusion of biases and LayerNorm
      max_trust   upper clamp on the trust ratio; None leaves it unclamped (NVIDIA) -- timm's trust_clip
                  is max_trust=1.0, DeepSpeed's FusedLamb clamps to [0.01, 10]
    partitioned: each tensor this rank holds is one rank's slice of a larger tensor (ZeRO with more
      than one rank and one tensor per group); squared norms are summed over the default process
      group, so every rank uses the whole tensor's ratio. All ranks must then call `step` together.
      DeepSpeed's ZeRO optimizers call it once per param group (stage_1_and_2.py's `_optimizer_step(i)` at
      ZeRO-1 and 2, once per sub-group at ZeRO-3): one small all-reduce per tensor. Only ZeRO-1 in bf16 without
      offload, which DeepSpeed runs with its BF16_Optimizer, steps every group in one call.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.01, bias_correction: bool = True,
                 adapt: bool = True, max_trust: float | None = None, partitioned: bool = False):
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"lr, eps and weight_decay must be >= 0, got {lr}, {eps}, {weight_decay}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must lie in [0, 1), got {betas}")
        if max_trust is not None and max_trust <= 0:
            raise ValueError(f"max_trust must be > 0 or None, got {max_trust}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        bias_correction=bias_correction, adapt=adapt, max_trust=max_trust)
        super().__init__(params, defaults)
        self.partitioned = partitioned

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if not self.state and not self.partitioned and self._all_grads_zero():
            # DeepSpeed's bf16/fp16 wrapper at ZeRO-0 steps once with zero gradients to build the state: with weight
            # decay that update is p itself, trust ||p|| / ||wd p|| = 1 / wd, and it scaled every decayed matrix by
            # (1 - lr) and counted a step before training began. No gradient, no step.
            return loss
        # Pass 1 builds every update and its norms; the norms of all the groups this call holds then cross ranks in
        # one all-reduce (per tensor where DeepSpeed steps one group per call: see `partitioned`); pass 2 applies.
        # Costs one transient copy of the params.
        pending = [work for group in self.param_groups if (work := self._updates(group)) is not None]
        adapted = [w for w in pending if w[0]["adapt"]]
        if adapted:
            sq_norms = torch.cat([torch.stack(_sq_norms(params) + _sq_norms(updates))
                                  for _, params, updates in adapted])
            if self.partitioned and dist.is_initialized() and dist.get_world_size() > 1:
                dist.all_reduce(sq_norms)
            offset = 0
            for group, params, updates in adapted:
                n = len(params)
                w, u = sq_norms[offset:offset + n].sqrt(), sq_norms[offset + n:offset + 2 * n].sqrt()
                offset += 2 * n
                trust = torch.where((w > 0) & (u > 0), w / u, 1.0)
                if group["max_trust"] is not None:
                    trust = trust.clamp(max=group["max_trust"])
                # Stays on device: no .item() sync per tensor on GPU.
                torch._foreach_mul_(updates, [t.to(x.dtype) for t, x in zip(trust.unbind(), updates)])
        for group, params, updates in pending:
            torch._foreach_add_(params, updates, alpha=-group["lr"])
        return loss

    def _all_grads_zero(self) -> bool:
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        return bool(grads) and not any(bool(g.any()) for g in grads)

    def _updates(self, group: dict):
        """Moments advanced in place; returns (group, params, updates) or None when no grads."""
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return None
        grads = [p.grad for p in params]
        if any(g.is_sparse for g in grads):
            raise RuntimeError("Lamb does not support sparse gradients")
        exp_avgs, exp_avg_sqs, steps = [], [], []
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            steps.append(state["step"])

        beta1, beta2 = group["betas"]
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)  # m = beta1 m + (1 - beta1) g
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        if group["bias_correction"]:
            updates = torch._foreach_div(exp_avgs, [1 - beta1 ** s for s in steps])
            denom = torch._foreach_div(exp_avg_sqs, [1 - beta2 ** s for s in steps])
            torch._foreach_sqrt_(denom)
        else:
            updates = torch._foreach_mul(exp_avgs, 1.0)  # a copy: the moments must not be touched
            denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denom, group["eps"])
        torch._foreach_div_(updates, denom)
        if group["weight_decay"] != 0:
            torch._foreach_add_(updates, params, alpha=group["weight_decay"])
        return group, params, updates


def _sq_norms(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    # Squared (not plain) norms: partial sums of squares add across ranks, norms do not.
    return [n.float() ** 2 for n in torch._foreach_norm(tensors)]


def per_tensor_groups(param_groups: list[dict]) -> list[dict]:
    """One group per parameter tensor, options copied from its group.

    Needed under any DeepSpeed wrapper that flattens groups (ZeRO 1-3, bf16, fused fp16): the optimizer
    then sees one flat tensor per group, which must be one model tensor for the trust ratio to be
    layer-wise. A group without an explicit "adapt" adapts its weight matrices, not its biases and LayerNorm
    weights (1-D: the tensors param_groups keeps out of weight decay; NVIDIA's exclusion by name). apex's rule,
    adapted iff the group has weight decay, made LAMB at optim.weight_decay=0 plain Adam with no word of it.
    """
    out = []
    for group in param_groups:
        options = {k: v for k, v in group.items() if k != "params"}
        out.extend({"params": [p], **options, "adapt": options.get("adapt", p.ndim >= 2)} for p in group["params"])
    return out


def uses_deepspeed_optimizer(name: str) -> bool:
    """Whether DeepSpeed builds the optimizer from its config (else we pass one to deepspeed.initialize)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    return name == "adamw"


def deepspeed_optimizer_config(name: str, lr: float, betas: tuple[float, float], eps: float,
                               weight_decay: float) -> dict:
    """Top-level DeepSpeed config keys for the optimizer, to merge into the engine's config.

    AdamW: DeepSpeed picks fused Adam on device, CPU Adam under ZeRO-Offload. LAMB: no "optimizer" entry (ours is
    passed in), and ZeRO must be told to accept it.
    """
    if not uses_deepspeed_optimizer(name):
        return {"zero_allow_untested_optimizer": True}
    return {"optimizer": {"type": "AdamW", "params": {"lr": lr, "betas": list(betas), "eps": eps,
                                                      "weight_decay": weight_decay}}}


def build_optimizer(name: str, param_groups: list[dict], lr: float, betas: tuple[float, float], eps: float,
                    weight_decay: float, *, zero_stage: int = 0, world_size: int = 1,
                    max_trust: float | None = None) -> torch.optim.Optimizer | None:
    """The optimizer to pass as `optimizer=` to deepspeed.initialize, or None where DeepSpeed builds it.

    `param_groups` keep their own "weight_decay"; `weight_decay` is the default for groups without one.
    Our Lamb always gets one group per tensor (the wrapper DeepSpeed puts around it is not known here),
    and sums norms over ranks when ZeRO slices tensors across more than one rank.
    """
    if uses_deepspeed_optimizer(name):
        return None
    return Lamb(per_tensor_groups(param_groups), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                max_trust=max_trust, partitioned=zero_stage >= 1 and world_size > 1)
