"""Our config sections -> what DeepSpeed is built from: its JSON config, the LR schedule, the param groups.

Each function takes the sections it reads, never a whole job config, so pretraining and fine-tuning
(whose configs compose the same OptimConfig / DeepSpeedConfig sections) build their engines alike.
"""

from __future__ import annotations

import torch

from jobs.config.sections import DeepSpeedConfig, OptimConfig
from jobs.engine.optim import deepspeed_optimizer_config


def deepspeed_config(optim: OptimConfig, ds: DeepSpeedConfig, *, micro_batch_size: int, grad_accum_steps: int,
                     world_size: int, use_gpu: bool, load_universal: bool = False) -> dict:
    """Our sections -> DeepSpeed's JSON config (the template in cluster/deepspeed/ mirrors it).
    `world_size` is the data-parallel degree; `load_universal`: the engine loads universal checkpoints
    (jobs/workers/reshard.py) instead of ZeRO ones."""
    o, d = optim, ds
    zero: dict = {"stage": d.zero_stage}
    if d.zero_stage >= 1:
        # overlap_comm: gradient reduction on a side CUDA stream during backward; CPU has no streams.
        zero.update(overlap_comm=use_gpu, contiguous_gradients=True, reduce_bucket_size=5e7)
    if d.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": use_gpu}
    if d.offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": use_gpu}
    if d.zero_stage == 3:
        # Release checkpoints need whole weights gathered on rank 0 at export.
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    config = {
        "train_micro_batch_size_per_gpu": micro_batch_size,
        "gradient_accumulation_steps": grad_accum_steps,
        "train_batch_size": micro_batch_size * grad_accum_steps * world_size,
        "gradient_clipping": o.grad_clip,
        "zero_optimization": zero,
        # AdamW: DeepSpeed's own (fused Adam, CPU Adam under offload); LAMB: ours (jobs/engine/optim.py says why).
        **deepspeed_optimizer_config(o.name, o.lr, (o.beta1, o.beta2), o.eps, o.weight_decay),
        "steps_per_print": 10**9,  # progress is ours; DeepSpeed's own prints would interleave
        "wall_clock_breakdown": False,
    }
    if d.precision == "bf16":
        config["bf16"] = {"enabled": True}
        # Gradients reduced across ranks in fp32, as Megatron does for bf16 (its --grad-reduce-in-bf16 is the opt-out):
        # DeepSpeed's default is the model's dtype, so it would round the fp32 sum of the micro-batches to bf16 before
        # the all-reduce and add the ranks' shares in bf16 (~0.7% off at 64 ranks). Twice the gradient traffic. Every
        # engine takes it: ZeRO 1-3's optimizers at build, ZeRO-0 and the pipeline engine in their bucketed all-reduce.
        config["communication_data_type"] = "fp32"
        if d.zero_stage >= 1:
            # Gradients summed over micro-batches in fp32, as Megatron does for bf16: DeepSpeed's default is the
            # model's dtype, and bf16 (8 bits of mantissa) loses ~1% of an accumulated gradient at 64 micro-batches.
            # ZeRO-0 cannot (DeepSpeed refuses the mix): PretrainConfig refuses bf16 there with accumulation.
            config["data_types"] = {"grad_accum_dtype": "fp32"}
    elif d.precision == "fp16":
        config["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16, "hysteresis": 2}
    if load_universal:
        config["checkpoint"] = {"load_universal": True}
    return config


def lr_lambda(optim: OptimConfig, max_steps: int):
    """Linear warmup, then linear / polynomial decay to zero at max_steps, or constant."""
    o = optim

    def factor(step: int) -> float:
        if step < o.warmup_steps:
            return (step + 1) / o.warmup_steps
        if o.schedule == "constant":
            return 1.0
        # decay over the steps after warmup, from the peak; NVIDIA's PolyWarmUpScheduler decays (1 - step/max_steps)
        # ** 0.5 over all of them, so its rate drops to (1 - warmup share) ** 0.5 of the peak as its warmup ends
        # (~0.85 in its phase 1, ~0.93 in its phase 2)
        progress = min(1.0, (step - o.warmup_steps) / max(1, max_steps - o.warmup_steps))
        power = 1.0 if o.schedule == "linear" else o.poly_power
        return max(0.0, 1.0 - progress) ** power

    return factor


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """No weight decay on biases and LayerNorm weights (original BERT's AdamWeightDecay exclusions).

    An empty group is left out: a pipeline stage holds only its own layers, and one holding only the tied word
    embeddings (no bias) or only the MLM output bias (no matrix) would hand DeepSpeed's ZeRO optimizer a group it
    indexes `params[0]` of (an IndexError in every worker's deepspeed.initialize)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "LayerNorm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]
