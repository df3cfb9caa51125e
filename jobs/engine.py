"""The one seam between the training loop and DeepSpeed: build, step, evaluate, save, load, export.

The loop never touches `deepspeed` directly; every backend path (ZeRO 0-3, offload, precision)
goes through `Engine`, so each has one place to be tested.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from bert_core.checkpoint import save_state_dict
from bert_core.model import BertForPreTraining, PreTrainingOutput
from jobs.config import PretrainConfig
from jobs.optim import build_optimizer, deepspeed_optimizer_config, per_tensor_groups


def deepspeed_config(cfg: PretrainConfig, world_size: int, load_universal: bool = False) -> dict:
    """Our config -> DeepSpeed's JSON config (the template in cluster/deepspeed/ mirrors it).
    `load_universal`: the engine loads universal checkpoints (jobs/reshard.py) instead of ZeRO ones."""
    t, o, d = cfg.train, cfg.optim, cfg.deepspeed
    zero: dict = {"stage": d.zero_stage}
    if d.zero_stage >= 1:
        # overlap_comm: gradient reduction on a side CUDA stream during backward; CPU has no streams.
        zero.update(overlap_comm=cfg.scaling.use_gpu, contiguous_gradients=True, reduce_bucket_size=5e7)
    if d.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": cfg.scaling.use_gpu}
    if d.offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": cfg.scaling.use_gpu}
    if d.zero_stage == 3:
        # Release checkpoints need whole weights gathered on rank 0 at export.
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    ds = {
        "train_micro_batch_size_per_gpu": t.micro_batch_size,
        "gradient_accumulation_steps": t.grad_accum_steps,
        "train_batch_size": t.micro_batch_size * t.grad_accum_steps * world_size,
        "gradient_clipping": o.grad_clip,
        "zero_optimization": zero,
        # AdamW and GPU LAMB: DeepSpeed's own (fused Adam, CPU Adam under offload, FusedLamb); CPU LAMB: ours.
        **deepspeed_optimizer_config(o.name, o.lr, (o.beta1, o.beta2), o.eps, o.weight_decay, cfg.scaling.use_gpu),
        "steps_per_print": 10**9,  # progress is ours; DeepSpeed's own prints would interleave
        "wall_clock_breakdown": False,
    }
    if d.precision == "bf16":
        ds["bf16"] = {"enabled": True}
    elif d.precision == "fp16":
        ds["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16, "hysteresis": 2}
    if load_universal:
        ds["checkpoint"] = {"load_universal": True}
    return ds


def lr_lambda(cfg: PretrainConfig):
    """Linear warmup, then linear / polynomial decay to zero at max_steps, or constant."""
    o, total = cfg.optim, cfg.train.max_steps

    def factor(step: int) -> float:
        if step < o.warmup_steps:
            return (step + 1) / o.warmup_steps
        if o.schedule == "constant":
            return 1.0
        progress = min(1.0, (step - o.warmup_steps) / max(1, total - o.warmup_steps))
        power = 1.0 if o.schedule == "linear" else o.poly_power
        return max(0.0, 1.0 - progress) ** power

    return factor


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """No weight decay on biases and LayerNorm weights (original BERT's AdamWeightDecay exclusions)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "LayerNorm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@dataclass
class StepStats:
    loss: float
    mlm_loss: float
    nsp_loss: float
    mlm_correct: int
    mlm_count: int
    nsp_correct: int
    nsp_count: int
    optimizer_stepped: bool
    finite: bool = True  # False: the loss was NaN/inf on some rank and the micro-batch was skipped
    micro_batches: int = 1  # micro-batches the losses average over (0: buffered, nothing computed yet)


def _losses(loss: torch.Tensor, out: PreTrainingOutput) -> tuple[float, float, float]:
    return float(loss.detach()), float(out.mlm_loss.detach()), float(out.nsp_loss.detach())


def _counts(out: PreTrainingOutput, batch: dict) -> tuple[int, int, int, int]:
    mlm_correct = int((out.mlm_logits.argmax(-1) == out.mlm_targets).sum())
    nsp = batch["next_sentence_label"]
    nsp_correct = int((out.nsp_logits.argmax(-1) == nsp).sum())
    return mlm_correct, int(out.mlm_targets.numel()), nsp_correct, int(nsp.numel())


TAG = "engine"  # the one tag of a resume checkpoint: `<dir>/engine` holds DeepSpeed's files

# Parameter-group options that differ between our groups (no decay on biases and LayerNorm; LAMB's adapt).
PER_GROUP_OPTIONS = ("weight_decay", "adapt")


class Engine:
    reads_data = True  # every rank streams its own shard (pipelines: only first-stage ranks)

    def __init__(self, model: BertForPreTraining, cfg: PretrainConfig, load_universal: bool = False):
        """`load_universal`: built to resume from a universal checkpoint at another world size
        (jobs/reshard.py); DeepSpeed decides how it loads when the engine is built, not at load."""
        import deepspeed  # imported here: DS_ACCELERATOR must be set by the caller first

        self.cfg, self.load_universal = cfg, load_universal
        o = cfg.optim
        world = dist.get_world_size() if dist.is_initialized() else 1
        groups = param_groups(model, o.weight_decay)
        client_optimizer = build_optimizer(o.name, groups, o.lr, (o.beta1, o.beta2), o.eps, o.weight_decay,
                                           cfg.scaling.use_gpu, zero_stage=cfg.deepspeed.zero_stage,
                                           world_size=world)
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model,
            optimizer=client_optimizer,
            # LAMB's trust ratio is per tensor: DeepSpeed flattens a group, so give it one group per tensor.
            model_parameters=(per_tensor_groups(groups) if o.name == "lamb" else groups)
            if client_optimizer is None else None,
            config=deepspeed_config(cfg, world, load_universal),
            lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg)),
            dist_init_required=False,
        )
        self.device = self.engine.device

    @property
    def data_parallel(self) -> tuple[int, int]:
        """(this rank's replica, number of replicas): who shares the data."""
        return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)

    @property
    def global_step(self) -> int:
        return self.engine.global_steps

    @property
    def lr(self) -> float:
        return self.scheduler.optimizer.param_groups[0]["lr"]  # what the next step uses

    def grad_norm(self) -> float:
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else math.nan

    def scale_lr(self, scale: float) -> None:
        """Train on at `scale` x the configured learning rate, from the current schedule position on
        (loss rollbacks). Call after `load`: a checkpoint's scheduler state carries its own base lr."""
        base = self.cfg.optim.lr * scale
        self.scheduler.base_lrs = [base] * len(self.scheduler.base_lrs)
        factor = lr_lambda(self.cfg)(self.scheduler.last_epoch)
        for group in self.scheduler.optimizer.param_groups:
            group["lr"] = base * factor

    def _to_device(self, batch: dict) -> dict:
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items() if k != "example_id"}

    def _finite_everywhere(self, loss: torch.Tensor) -> bool:
        flag = torch.isfinite(loss.detach()).to(torch.int32).reshape(1)
        if dist.is_initialized():
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return bool(flag.item())

    def step(self, batch: dict, inject_nan: bool = False) -> StepStats:
        """One micro-batch forward/backward; DeepSpeed steps the optimizer at accumulation boundaries.

        A NaN/inf loss on any rank skips the micro-batch on every rank: no backward and no engine step,
        so neither the gradients nor DeepSpeed's accumulation and step counters see it. `inject_nan`
        (fault injection for tests) makes this rank's loss NaN.
        """
        self.engine.train()
        batch = self._to_device(batch)
        out: PreTrainingOutput = self.engine(**batch)
        loss = out.loss * math.nan if inject_nan else out.loss
        if not self._finite_everywhere(loss):
            return StepStats(*_losses(loss, out), *_counts(out, batch),
                             optimizer_stepped=False, finite=False)
        self.engine.backward(loss)
        boundary = self.engine.is_gradient_accumulation_boundary()
        self.engine.step()
        return StepStats(*_losses(loss, out), *_counts(out, batch),
                         optimizer_stepped=boundary)

    @torch.no_grad()
    def evaluate(self, batches) -> dict:
        """MLM/NSP accuracy and loss over `batches`, summed over all ranks (every rank must call it)."""
        self.engine.eval()
        totals = torch.zeros(6, dtype=torch.float64)
        for batch in batches:
            batch = self._to_device(batch)
            out: PreTrainingOutput = self.engine(**batch)
            mc, mn, nc, nn_ = _counts(out, batch)
            totals += torch.tensor([float(out.mlm_loss) * mn, mc, mn, float(out.nsp_loss) * nn_, nc, nn_],
                                   dtype=torch.float64)
        if dist.is_initialized():
            dist.all_reduce(totals)  # gloo and nccl both reduce CPU float64 tensors
        mloss, mc, mn, nloss, nc, nn_ = totals.tolist()
        return {"mlm_loss": mloss / max(mn, 1), "mlm_acc": mc / max(mn, 1),
                "nsp_loss": nloss / max(nn_, 1), "nsp_acc": nc / max(nn_, 1), "mlm_tokens": int(mn)}

    def save(self, ckpt_dir: str | os.PathLike, client_state: dict) -> None:
        """Sharded resume checkpoint: every rank writes its ZeRO partition (all ranks must call)."""
        self.engine.save_checkpoint(str(ckpt_dir), tag=TAG, client_state=client_state)

    def load(self, ckpt_dir: str | os.PathLike, weights_only: bool = False, schedule: bool = True) -> dict:
        """Resume (everything) or hand off between phases: `weights_only` leaves the optimizer fresh,
        `schedule=False` keeps this run's own warmup and decay instead of the saved one.
        `ckpt_dir` is what `save` wrote, or its universal form (jobs/reshard.py) for a load_universal engine."""
        if self.load_universal and weights_only:
            # DeepSpeed's universal loader restores the optimizer state whatever it is asked; weights alone
            # load from the saved checkpoint at any world size.
            raise ValueError("a load_universal engine loads everything; load weights_only from the saved checkpoint")
        options = [{k: g[k] for k in PER_GROUP_OPTIONS if k in g} for g in self.optimizer.param_groups]
        _, client_state = self.engine.load_checkpoint(
            str(ckpt_dir), tag=TAG, load_module_only=weights_only,
            load_optimizer_states=not weights_only, load_lr_scheduler_states=schedule and not weights_only)
        if self.load_universal and self.cfg.deepspeed.zero_stage == 3:
            # DeepSpeed 0.19.8's ZeRO-3 universal loader copies group 0's options onto every group, which
            # would put weight decay on biases and LayerNorm; give each group its own back.
            for group, own in zip(self.optimizer.param_groups, options):
                group.update(own)
        return client_state or {}

    def export(self, out_dir: str | os.PathLike, tokenizer_dir: str | None = None) -> Path | None:
        """Release checkpoint (HF safetensors + config [+ tokenizer]); every rank calls, rank 0 writes."""
        if self.cfg.deepspeed.zero_stage == 3:
            state = self.engine._zero3_consolidated_16bit_state_dict()  # gathers partitions onto rank 0
        else:
            state = self.engine.module.state_dict()
        rank = dist.get_rank() if dist.is_initialized() else 0
        if rank != 0:
            return None
        state = {k: v.detach().float().cpu() for k, v in state.items()}
        return save_state_dict(state, self.cfg.model, out_dir, architectures=["BertForPreTraining"],
                               tokenizer_dir=tokenizer_dir)


def build_engine(cfg: PretrainConfig, load_universal: bool = False) -> Engine:
    """A fresh engine as the config asks: data parallel (ZeRO 0-3) or pipeline x data parallel. Seeded, so
    every rank starts from the same weights; `load_universal` as in Engine (data parallel only)."""
    torch.manual_seed(cfg.train.seed)
    if cfg.deepspeed.pipeline_stages > 1:
        from jobs.pipeline_parallel import PipelineEngine

        return PipelineEngine(cfg)
    return Engine(BertForPreTraining(cfg.model), cfg, load_universal=load_universal)
