"""The one seam between a training loop and DeepSpeed: build, step, evaluate, predict, save, load, export.

`Engine` runs any bert_core model under any objective (jobs/engine/objectives.py): pretraining and
fine-tuning share it. Loops never touch `deepspeed` directly; every backend path (ZeRO 0-3, offload,
precision) goes through here, so each has one place to be tested. Pipeline stages are the other
implementation of the same seam (jobs/engine/pipeline.py; the shared half is jobs/engine/seam.py).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from bert_core.checkpoint import save_state_dict
from jobs.config.sections import DeepSpeedConfig, OptimConfig
from jobs.engine.ds_config import deepspeed_config, lr_lambda, param_groups
from jobs.runtime.op_locks import before_op_loads
from jobs.engine.optim import build_optimizer, per_tensor_groups
from jobs.engine.seam import (PER_GROUP_OPTIONS, TAG, EngineBase, StepStats, compile_muon_at_first_call,
                              quiet_forced_memory_reports)

__all__ = ["Engine", "StepStats", "TAG", "PER_GROUP_OPTIONS", "build_engine", "pretrain_engine_options"]


def _floats(sums: dict[str, torch.Tensor]) -> dict[str, float]:
    return {k: float(v) for k, v in sums.items()}


def all_reduce_sums(sums: dict[str, float]) -> dict[str, float]:
    """Sum each key over all ranks (every rank must call); a rank without batches has no keys."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return dict(sums)
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, sums)  # small dicts, once per evaluation
    total: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            total[k] = total.get(k, 0.0) + v
    return total


def fp32_masters(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A bf16 / fp16 run's weights as the optimizer holds them, in fp32 and whole, by parameter name (every rank must
    call: ZeRO gathers each one's partitions). The module's own weights are their 16-bit rounding (~3 significant
    digits in bf16): a release written from them was not the model that trained. None where DeepSpeed keeps no fp32
    copy it can give (ZeRO-0's 16-bit optimizer): the module's weights stand."""
    from deepspeed.utils import safe_get_full_fp32_param

    out = {}
    for name, param in module.named_parameters():
        full = safe_get_full_fp32_param(param)
        if full is not None:
            out[name] = full.detach().float().cpu()
    return out


class Engine(EngineBase):
    """`model` (any bert_core head) trained by `objective` under DeepSpeed, data parallel with ZeRO 0-3.

    Takes the config sections it needs, not a job config: fine-tuning passes its own.
    `load_universal`: built to resume from a universal checkpoint at another world size
    (jobs/workers/reshard.py); DeepSpeed decides how it loads when the engine is built, not at load.
    """

    def __init__(self, model: torch.nn.Module, objective, *, optim: OptimConfig, deepspeed: DeepSpeedConfig,
                 micro_batch_size: int, grad_accum_steps: int, max_steps: int, use_gpu: bool,
                 load_universal: bool = False):
        before_op_loads()  # before DeepSpeed loads (and perhaps builds) its ops
        import deepspeed as ds  # imported here: DS_ACCELERATOR must be set by the caller first

        compile_muon_at_first_call()
        quiet_forced_memory_reports()

        o = optim
        world = dist.get_world_size() if dist.is_initialized() else 1
        groups = param_groups(model, o.weight_decay)
        client_optimizer = build_optimizer(o.name, groups, o.lr, (o.beta1, o.beta2), o.eps, o.weight_decay,
                                           zero_stage=deepspeed.zero_stage, world_size=world)
        engine, optimizer, _, scheduler = ds.initialize(
            model=model,
            optimizer=client_optimizer,
            # LAMB's trust ratio is per tensor: DeepSpeed flattens a group, so give it one group per tensor.
            model_parameters=(per_tensor_groups(groups) if o.name == "lamb" else groups)
            if client_optimizer is None else None,
            config=deepspeed_config(o, deepspeed, micro_batch_size=micro_batch_size,
                                    grad_accum_steps=grad_accum_steps, world_size=world, use_gpu=use_gpu,
                                    load_universal=load_universal),
            lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(o, max_steps)),
            dist_init_required=False,
        )
        super().__init__(engine, optimizer, scheduler, objective, optim=o, max_steps=max_steps,
                         zero_stage=deepspeed.zero_stage, load_universal=load_universal)
        # DeepSpeed keeps no gradient norm at ZeRO-0 in fp32 (its clipping computes one and drops it): taken here
        self._own_norm, self._norm = deepspeed.zero_stage == 0 and deepspeed.precision == "fp32", math.nan
        self.precision = deepspeed.precision
        # What `export` names: the model's own class and config (bert_core.checkpoint reads the class name).
        self.architecture, self.model_config = type(model).__name__, model.config
        if deepspeed.compile:
            # The collator's host packing leaves no nonzero() in the graph; a batch built without it
            # still traces with this flag (see bert_core.model.compile_model).
            torch._dynamo.config.capture_dynamic_output_shape_ops = True
            engine.compile()

    @property
    def data_parallel(self) -> tuple[int, int]:
        return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)

    def grad_norm(self) -> float:
        """The last optimizer step's global gradient norm, before clipping."""
        return self._norm if self._own_norm else super().grad_norm()

    def _finite_everywhere(self, loss: torch.Tensor) -> bool:
        flag = torch.isfinite(loss.detach()).to(torch.int32).reshape(1)
        if dist.is_initialized():
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return bool(flag.item())

    def step(self, batch: dict, inject_nan: bool = False) -> StepStats:
        """One micro-batch forward/backward; DeepSpeed steps the optimizer at accumulation boundaries.

        A NaN/inf loss on any rank skips the micro-batch on every rank: no backward and no engine step,
        so neither the gradients nor DeepSpeed's accumulation and step counters see it. `inject_nan`
        (fault injection for tests, jobs/runtime/faults.py) makes this rank's loss NaN.
        """
        self.engine.train()
        batch = self._to_device(batch)
        loss, sums = self.objective(self.engine, batch)
        if inject_nan:
            loss = loss * math.nan
        if not self._finite_everywhere(loss):
            return StepStats(float(loss.detach()), _floats(sums), optimizer_stepped=False, finite=False)
        self.engine.backward(loss)  # at a boundary, ZeRO-0's gradients are all-reduced by now
        boundary = self.engine.is_gradient_accumulation_boundary()
        if boundary and self._own_norm:
            grads = [p.grad for p in self.engine.module.parameters() if p.grad is not None]
            self._norm = float(torch.nn.utils.get_total_norm(grads)) if grads else math.nan
        self.engine.step()
        return StepStats(float(loss.detach()), _floats(sums), optimizer_stepped=boundary)

    @torch.no_grad()
    def evaluate(self, batches) -> dict:
        """objective.metrics over `batches`' sums, summed over all ranks (every rank must call it)."""
        self.engine.eval()
        totals: dict[str, float] = {}
        for batch in batches:
            _, sums = self.objective(self.engine, self._to_device(batch))
            for k, v in sums.items():
                totals[k] = totals.get(k, 0.0) + float(v)
        return self.objective.metrics(all_reduce_sums(totals))

    @torch.no_grad()
    def predict(self, batches, pad_to: int | None = None) -> dict[str, np.ndarray]:
        """objective.outputs over this rank's `batches`, concatenated along rows (the caller gathers across
        ranks); a batch's "example_id" column, when it has one, comes back as "example_id". Batches padded
        only to their longest row (dynamic padding) give per-token outputs that are padded back to `pad_to`
        positions, with a logit no softmax picks."""
        self.engine.eval()
        parts: dict[str, list[np.ndarray]] = {}
        for batch in batches:
            outputs = {k: v.numpy() for k, v in self.objective.outputs(self.engine, self._to_device(batch)).items()}
            for k, v in outputs.items():
                per_token = v.ndim == 3 or k in ("start_logits", "end_logits")  # (B, T, C), QA's (B, T)
                if pad_to and per_token:
                    width = [(0, 0), (0, pad_to - v.shape[1])] + [(0, 0)] * (v.ndim - 2)
                    outputs[k] = np.pad(v, width, constant_values=-1e4)
            if "example_id" in batch:
                outputs["example_id"] = np.asarray(batch["example_id"])
            for k, v in outputs.items():
                parts.setdefault(k, []).append(v)
        return {k: np.concatenate(v) for k, v in parts.items()}

    def release_state(self) -> dict[str, torch.Tensor]:
        """The model's whole weights as a release holds them: fp32 on the CPU, by name, in bf16 and fp16 the
        optimizer's fp32 weights rather than the module's 16-bit copies of them. Every rank calls (ZeRO-3 gathers
        the partitions, and fp32_masters gathers under every ZeRO stage); rank 0 gets them, the others {}."""
        if self.zero_stage == 3:
            state = self.engine._zero3_consolidated_16bit_state_dict()  # gathers partitions onto rank 0
        else:
            state = self.engine.module.state_dict()
        # Every rank before any returns: ZeRO-3's consolidation gives ranks other than 0 None, and merging it there
        # raised before they joined fp32_masters' gather, which rank 0 then waited in.
        masters = fp32_masters(self.engine.module) if self.precision != "fp32" else {}
        if dist.is_initialized() and dist.get_rank() != 0:
            return {}
        return {k: v.detach().float().cpu() for k, v in {**state, **masters}.items()}

    def export(self, out_dir: str | os.PathLike, tokenizer_dir: str | None = None,
               id2label: dict[int, str] | None = None, max_length: int | None = None,
               state: dict[str, torch.Tensor] | None = None) -> Path | None:
        """Release checkpoint (HF safetensors + config [+ tokenizer, cutting at `max_length`]) of the model's own
        architecture; every rank calls, rank 0 writes. `state`: what each rank's `release_state` gave earlier (a sweep
        trial's best evaluation), to write instead of the current weights. Give it on every rank or on none: without it,
        every rank joins the gather of the current ones."""
        if state is None:
            state = self.release_state()
        if dist.is_initialized() and dist.get_rank() != 0:
            return None
        state = {k: v.detach().float().cpu() for k, v in state.items()}
        return save_state_dict(state, self.model_config, out_dir, architectures=[self.architecture],
                               tied_weights=getattr(self.engine.module, "tied_weights", ()),
                               problem_type=getattr(self.engine.module, "problem_type", None),
                               tokenizer_dir=tokenizer_dir, id2label=id2label, max_length=max_length)
