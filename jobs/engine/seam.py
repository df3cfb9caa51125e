"""What the training loop sees of an engine, whichever implementation runs it.

jobs/engine/data_parallel.py's `Engine` (one model on every rank, ZeRO 0-3) and jobs/engine/pipeline.py's
`PipelineEngine` (a model cut into stages) are two real implementations of this seam; both own a
DeepSpeed engine, its optimizer and LR scheduler, and share the parts that do not depend on how the
model is laid out. Its own module so that neither engine module imports the other.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import pickle
import re
import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from jobs.config.sections import SETTING_NAMES, OptimConfig
from jobs.engine.ds_config import lr_lambda

TAG = "engine"  # the one tag of a resume checkpoint: `<dir>/engine` holds DeepSpeed's files

log = logging.getLogger("bert_foundry.engine")


def _deepspeed_globals() -> list:
    """What DeepSpeed pickles, besides tensors, containers and numbers, in the checkpoints our engines write:
    its loss scaler, ZeRO stage enum and fragment addresses (read file by file for fp32 ZeRO 0-3; the e2e
    tests resume pipeline-stage checkpoints and world-size changes through it too)."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    return [LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address]


def load_checkpoint_file(path: str | os.PathLike, map_location=None):
    """One file of a DeepSpeed resume checkpoint, unpickled with `torch.load(weights_only=True)` and only
    DeepSpeed's own classes allowed (DeepSpeed itself loads with weights_only=False: any code in the file
    would run). A file holding anything else is refused, naming it."""
    with torch.serialization.safe_globals(_deepspeed_globals()):
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as exc:
            found = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
            raise ValueError(f"{path}: refused to load a checkpoint file that holds objects other than tensors "
                             f"and DeepSpeed's training state ({found[1] if found else exc}); unpickling it could "
                             f"run code") from None


def compile_muon_at_first_call() -> None:
    """DeepSpeed's ZeRO 1-3 and bf16 optimizers import its Muon optimizer (once a process, at the engine build or the
    first gradient reduction) whatever the optimizer, to ask isinstance, and that module decorates three functions
    with `@compiler.compile()`, i.e. `torch.compile`, whose decorator imports Inductor's compiler: ~1.5 CPU-seconds
    in every worker of every job, every restart, for kernels only Muon runs. Made to compile at a function's first
    call instead: the same `torch.compile(fn)`, loaded only by a run that steps Muon (optim.name offers no Muon
    here, so none does). Left as it is where DeepSpeed's `compile()` is no longer plain `torch.compile` (another
    version) or Muon was imported already. Call once DeepSpeed is importable (DS_ACCELERATOR set), before
    deepspeed.initialize."""
    import sys

    from deepspeed.runtime import compiler

    if compiler.compile() is not torch.compile or "deepspeed.runtime.zero.muon.original_muon" in sys.modules:
        return

    def at_first_call():
        def decorate(fn):
            import torch._dynamo  # loaded already: every torch optimizer's constructor imports it

            compiled = []

            @functools.wraps(fn)
            def call(*args, **kwargs):
                if not compiled:
                    compiled.append(torch.compile(fn))
                return compiled[0](*args, **kwargs)

            # traced from a compiled caller (Muon's update), Dynamo steps over this frame, not into its compile
            return torch._dynamo.disable(call, recursive=False)

        return decorate

    compiler.compile = at_first_call


def quiet_forced_memory_reports() -> None:
    """DeepSpeed's bf16 optimizer (ZeRO-0/1 in bf16) forces its memory reports on, whatever the config's
    `memory_breakdown`: two per engine and two per parameter group, each a full `gc.collect()` and four printed lines.
    A collection walks the whole heap: ~1 s each in a process that holds much (a test session, a worker late in a
    long run), six per engine built. Turned off (the engine's own reports follow `memory_breakdown`, which no config
    here sets)."""
    from deepspeed.runtime import bf16_optimizer, utils

    if bf16_optimizer.see_memory_usage is utils.see_memory_usage:
        bf16_optimizer.see_memory_usage = lambda message, force=False: None


@contextmanager
def weights_only_loading(engine):
    """DeepSpeed `engine`'s checkpoint reads (model, optimizer and pipeline-layer files) go through
    load_checkpoint_file while the block runs."""
    checkpoint_engine = engine.checkpoint_engine
    checkpoint_engine.load = load_checkpoint_file  # an instance attribute: shadows the class's method
    try:
        yield
    finally:
        del checkpoint_engine.load


OPTIMIZER_LAYOUT = "optimizer_layout.json"  # beside the engine's checkpoint tag: EngineBase.save
# Parameter-group options that differ between our groups (no decay on biases and LayerNorm; LAMB's adapt).
PER_GROUP_OPTIONS = ("weight_decay", "adapt")
# What a built engine's parameter groups take from its config, and a loaded optimizer state overwrites with the
# saving run's: `load` puts them back. Not "step" (FusedAdam keeps its step count in the group).
CONFIG_OPTIONS = (*PER_GROUP_OPTIONS, "betas", "eps")


@dataclass
class StepStats:
    """One `step`: the mean loss over its micro-batches, and the objective's sums (see jobs/engine/objectives.py)
    over them -- this rank's for a data-parallel engine, all replicas' for a pipeline."""

    loss: float
    sums: dict[str, float] = field(default_factory=dict)
    optimizer_stepped: bool = False
    finite: bool = True  # False: the loss was NaN/inf on some rank and the micro-batch was skipped
    micro_batches: int = 1  # micro-batches the loss averages over (0: buffered, nothing computed yet)


class EngineBase:
    """The shared half of both engines: schedule position, LR, gradient norm, resume checkpoints.

    Subclasses build the DeepSpeed engine and implement `step`, `evaluate`, `export` and `data_parallel`.
    """

    reads_data = True  # this rank streams its own shard (pipelines: only first-stage ranks)

    def __init__(self, engine, optimizer, scheduler, objective, *, optim: OptimConfig, max_steps: int,
                 zero_stage: int, load_universal: bool = False):
        self.engine, self.optimizer, self.scheduler = engine, optimizer, scheduler
        self.objective = objective
        self.optim, self.max_steps, self.zero_stage, self.load_universal = optim, max_steps, zero_stage, load_universal
        self.device = engine.device
        self.loaded_lr: float | None = None  # the peak lr (optim.lr) of the run whose optimizer state `load` took
        self.names = dict(SETTING_NAMES)  # what set the total, warmup and lr (a pretraining's: its setting_names)

    @property
    def data_parallel(self) -> tuple[int, int]:
        """(this rank's replica, number of replicas): who shares the data."""
        raise NotImplementedError

    @property
    def module(self) -> torch.nn.Module:
        """The model DeepSpeed wraps (whole on this rank below ZeRO-3; a pipeline's stages otherwise)."""
        return self.engine.module

    @property
    def global_step(self) -> int:
        return self.engine.global_steps

    @property
    def lr(self) -> float:
        return self.scheduler.optimizer.param_groups[0]["lr"]  # what the next step uses

    def advance_schedule(self) -> None:
        """The learning-rate schedule one step on with no update: a fine-tune's skipped (non-finite) batch still counts
        as a step of its run, whose schedule must then still end at 0 on its last step."""
        self.scheduler.step()

    def replanned(self, planned: int, planned_optim: OptimConfig | None = None, total: str = "",
                  warmup: str | None = "", saved_scale: float = 1.0) -> str:
        """The line for a resume whose learning-rate schedule is not the one its checkpoint's run planned: another
        total (`planned`, the checkpoint's; `total`: what the user set it with, "": self.names'), another warmup or
        another decay (`planned_optim`: the checkpoint's schedule settings, None for this run's; `warmup`: what set its
        warmup steps, "": self.names', or None where the checkpoint did not record them and `planned_optim`'s are a
        guess, not named as a change).
        The schedule is this run's, so the next step takes its rate at this position, which can jump (a run given more
        steps: from near 0 at its old end back to a share of the peak; a longer warmup: down into it again; a constant
        decay: back to the peak). The checkpoint's rate is its own plan's: its total, warmup and decay and its peak lr
        as loaded (this run's optim.lr may differ: `load` named that change already), times `saved_scale`, the
        learning-rate scale of the loss rollbacks the checkpoint carries (loss_guard.lr_scale; the loaded peak is
        before them). Call after this run's own rollbacks are applied (`scale_lr`): the next step's rate is the scaled
        one."""
        old = planned_optim or self.optim
        total, warmup = total or self.names["total"], self.names["warmup"] if warmup == "" else warmup
        changes = []
        if planned != self.max_steps:
            changes.append((f"{total} {planned:,} -> {self.max_steps:,}", "total"))
        if warmup is not None and old.warmup_steps != self.optim.warmup_steps:
            changes.append((f"{warmup} {old.warmup_steps:,} -> {self.optim.warmup_steps:,}", "warmup"))
        changes += [(said, "decay") for said in self._decay_changes(old)]
        at, base = self.scheduler.last_epoch, self.scheduler.base_lrs[0]
        was = (base if self.loaded_lr is None else self.loaded_lr * saved_scale) * lr_lambda(old, planned)(at)
        now = base * lr_lambda(self.optim, self.max_steps)(at)
        words = [what for _, what in changes]
        new = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
        return (f"[resume] {', '.join(said for said, _ in changes)}: the learning-rate schedule is planned "
                f"{'over' if words[0] == 'total' else 'with'} the new {new}, so the next step trains at lr {now:.3g}, "
                f"where the checkpoint's plan was at {was:.3g}")

    def _decay_changes(self, old: OptimConfig) -> list[str]:
        """How `old`'s decay after warmup differs from this run's, named; a poly_power only where both decay poly (under
        linear or constant it changes no rate, and a change of schedule is named already)."""
        o = self.optim
        if old.schedule != o.schedule:
            return [f"optim.schedule {old.schedule} -> {o.schedule}"]
        if o.schedule == "poly" and old.poly_power != o.poly_power:
            return [f"optim.poly_power {old.poly_power:g} -> {o.poly_power:g}"]
        return []

    def resumed_plan(self, planned: int, saved_warmup: int | None, guess: OptimConfig | None = None, *,
                     schedule: str | None = None, poly_power: float | None = None, **labels) -> str | None:
        """`replanned`'s line where a resumed checkpoint's schedule (its total `planned`; its warmup steps
        `saved_warmup`, None where the checkpoint did not record them: `guess`'s settings stand in, not named as a
        change; its decay, `schedule` and `poly_power`, each None where not recorded: this run's stands in) is not this
        run's; None where it is the same plan. `labels`: replanned's (saved_scale too)."""
        decay = {k: v for k, v in (("schedule", schedule), ("poly_power", poly_power)) if v is not None}
        if saved_warmup is None:
            old, labels = dataclasses.replace(guess or self.optim, **decay), {**labels, "warmup": None}
        else:
            old = dataclasses.replace(self.optim, warmup_steps=saved_warmup, **decay)
        same_warmup = saved_warmup in (None, self.optim.warmup_steps)
        if planned == self.max_steps and same_warmup and not self._decay_changes(old):
            return None
        return self.replanned(planned, old, **labels)

    def restart_counts(self) -> None:
        """A new run over a carried-over optimizer (a phase hand-off): its step, sample and skipped-step counts start
        at 0, as its own schedule does; the moments (and their bias correction's steps) stay the saving run's."""
        self.engine.global_steps = self.engine.global_samples = self.engine.skipped_steps = 0

    def grad_norm(self) -> float:
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else math.nan

    @property
    def skipped_steps(self) -> int:
        """Optimizer steps DeepSpeed skipped on a gradient overflow (fp16 loss scaling; ZeRO's overflow check): counted
        in `global_step`, and in the loop's step that resume positions rest on, but no update and no schedule step.
        DeepSpeed keeps the count in its checkpoints, so it is the run's total across resumes."""
        return int(self.engine.skipped_steps)

    def scale_lr(self, scale: float) -> None:
        """Train on at `scale` x the configured learning rate, from the current schedule position on
        (loss rollbacks). Call after `load`: a checkpoint's scheduler state carries its own base lr."""
        base = self.optim.lr * scale
        self.scheduler.base_lrs = [base] * len(self.scheduler.base_lrs)
        factor = lr_lambda(self.optim, self.max_steps)(self.scheduler.last_epoch)
        for group in self.scheduler.optimizer.param_groups:
            group["lr"] = base * factor

    def _to_device(self, batch: dict) -> dict:
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items() if k != "example_id"}

    def step(self, batch: dict | None, inject_nan: bool = False) -> StepStats:
        raise NotImplementedError

    def evaluate(self, batches) -> dict:
        raise NotImplementedError

    def export(self, out_dir: str | os.PathLike, tokenizer_dir: str | None = None) -> Path | None:
        raise NotImplementedError

    def save(self, ckpt_dir: str | os.PathLike, client_state: dict) -> None:
        """Sharded resume checkpoint: every rank writes its ZeRO partition (all ranks must call); rank 0 records the
        optimizer state's layout beside it (a 16-bit hand-off loads the fp32 weights from a state of its own layout)."""
        self.engine.save_checkpoint(str(ckpt_dir), tag=TAG, client_state=client_state)
        if not dist.is_initialized() or dist.get_rank() == 0:
            (Path(ckpt_dir) / OPTIMIZER_LAYOUT).write_text(json.dumps(self._optimizer_layout()))

    def load(self, ckpt_dir: str | os.PathLike, weights_only: bool = False, schedule: bool = True) -> dict:
        """Resume (everything) or hand off between phases: `weights_only` leaves the optimizer fresh,
        `schedule=False` keeps this run's own warmup and decay instead of the saved one.
        `ckpt_dir` is what `save` wrote, or its universal form (jobs/workers/reshard.py) for a load_universal engine."""
        if self.load_universal and weights_only:
            # DeepSpeed's universal loader restores the optimizer state whatever it is asked; weights alone
            # load from the saved checkpoint at any world size.
            raise ValueError("a load_universal engine loads everything; load weights_only from the saved checkpoint")
        if weights_only and self.zero_stage == 3:
            # DeepSpeed gathers ZeRO-3 weights with zero_to_fp32, which unpickles every rank's files itself
            # (weights_only=False), past the checkpoint engine: read them the safe way first
            for f in sorted((Path(ckpt_dir) / TAG).glob("*.pt")):
                load_checkpoint_file(f, map_location="cpu")
        built = [{k: g[k] for k in CONFIG_OPTIONS if k in g} for g in self.optimizer.param_groups]
        # a 16-bit module's own weights are its optimizer's fp32 weights rounded (~3 digits in bf16): a hand-off takes
        # those from the saved optimizer (then drops its moments and step counts) where its recorded layout is ours
        masters = weights_only and self._masters_saved_alike(ckpt_dir)
        with weights_only_loading(self.engine):
            _, client_state = self.engine.load_checkpoint(
                str(ckpt_dir), tag=TAG, load_module_only=weights_only and not masters,
                load_optimizer_states=not weights_only or masters,
                load_lr_scheduler_states=schedule and not weights_only)
        if masters:
            self._fresh_optimizer_state()
        if not weights_only or masters:
            self._keep_config(built, warn=schedule and not masters)  # a hand-off's (or PBT's) new settings are its own
        return client_state or {}

    def _optimizer_layout(self) -> dict:
        """What a saved optimizer state must match to load into this engine: written beside it (OPTIMIZER_LAYOUT)."""
        return {"optimizer": type(getattr(self.optimizer, "optimizer", self.optimizer)).__name__,
                "groups": len(self.optimizer.param_groups), "zero_stage": self.zero_stage,
                "bf16": bool(self.engine.bfloat16_enabled()), "fp16": bool(self.engine.fp16_enabled()),
                "data_parallel": int(self.engine.dp_world_size)}

    def _masters_saved_alike(self, ckpt_dir: str | os.PathLike) -> bool:
        """Whether this engine keeps fp32 weights in a ZeRO-1/2/3 (or bf16) optimizer apart from its 16-bit module, and
        `ckpt_dir`'s optimizer state was saved in the layout it can load (the same optimizer, parameter groups,
        ZeRO stage, precision and data-parallel size; a checkpoint from before the record: no). ZeRO-0's 16-bit
        optimizer keeps none."""
        sixteen = self.engine.bfloat16_enabled() or self.engine.fp16_enabled()
        if not sixteen or self.zero_stage not in (1, 2, 3):
            return False
        record = Path(ckpt_dir) / OPTIMIZER_LAYOUT
        saved = json.loads(record.read_text()) if record.is_file() else None
        if saved == self._optimizer_layout():
            return True
        if not dist.is_initialized() or dist.get_rank() == 0:
            log.warning(f"[resume] {ckpt_dir}'s optimizer state was saved in another layout "
                        f"({saved or 'not recorded'}; this run: {self._optimizer_layout()}): its weights are taken as "
                        "the module holds them, rounded to 16 bits, not from its optimizer's fp32 copy")
        return False

    def _fresh_optimizer_state(self) -> None:
        """The optimizer as built, over the loaded fp32 weights: no moments, no step counts (a phase's reset)."""
        base = getattr(self.optimizer, "optimizer", self.optimizer)  # the torch optimizer DeepSpeed's wraps
        base.state.clear()  # Adam's and LAMB's moments are made again at their first step
        for group in base.param_groups:
            if "step" in group:  # FusedAdam and FusedLamb count steps in the group
                group["step"] = 0
        self.restart_counts()

    def _keep_config(self, built: list[dict], warn: bool = True) -> None:
        """Train on with this run's optimizer settings after loading another run's state: the loaded param groups and
        scheduler carry the saving run's peak lr (and each group its weight decay, betas, eps), so a resubmission
        with a new optim.lr would otherwise train at the old one while tracking logs the new. `built`: each group's
        CONFIG_OPTIONS as this engine was built. Warns on rank 0, naming each setting that changed (old -> new).
        Also sets each group's lr from the schedule position: a load that keeps this run's own schedule
        (`schedule=False`) would otherwise take its first step at the saving run's last lr."""
        groups, sched = self.optimizer.param_groups, self.scheduler
        changed = {}
        saved_lr = groups[0].get("initial_lr", sched.base_lrs[0])  # the saving run's optim.lr (before any rollback)
        self.loaded_lr = saved_lr  # the peak of the checkpoint's own plan, whose rate `replanned` gives
        if saved_lr != self.optim.lr:
            changed[self.names["lr"]] = (saved_lr, self.optim.lr)
            sched.base_lrs = [self.optim.lr] * len(sched.base_lrs)
        # Named from the first group (the decayed one): ZeRO-3's universal loader (DeepSpeed 0.19.8) copies its options
        # onto every group, which the update undoes.
        changed.update({k: (_as_plain(groups[0].get(k)), _as_plain(v)) for k, v in built[0].items()
                        if _as_plain(groups[0].get(k)) != _as_plain(v)})
        # ZeRO-1/2's and the 16-bit optimizers' clip_grad is loaded with their state (DeepSpeed's _load_global_state):
        # a resubmission's new optim.grad_clip reached the config, and the saved run's clipped the rest of the run
        clip = self.engine.gradient_clipping()
        if getattr(self.optimizer, "clip_grad", clip) != clip:
            changed["optim.grad_clip"] = (self.optimizer.clip_grad, clip)
            self.optimizer.clip_grad = clip
        for group, own in zip(groups, built):
            group.update(own)
        lrs = [base * f(sched.last_epoch) for base, f in zip(sched.base_lrs, sched.lr_lambdas)]
        for group, lr in zip(groups, lrs):
            group["lr"], group["initial_lr"] = lr, self.optim.lr
        sched._last_lr = lrs
        if changed and warn and (not dist.is_initialized() or dist.get_rank() == 0):
            log.warning("[resume] the checkpoint's optimizer state was saved with other settings; training on with "
                        "this run's: " + "; ".join(f"{k} {old} -> {new}" for k, (old, new) in changed.items()))


def _as_plain(value):
    """A group option as compared and printed: betas are a list in some optimizers, a tuple in others."""
    return tuple(value) if isinstance(value, list) else value


def collective_device() -> torch.device:
    """Where a tensor of a collective must live: the rank's CUDA device when the process group runs NCCL (Ray Train
    picks it for GPU workers, and NCCL takes no CPU tensor), else the CPU (gloo)."""
    if dist.is_initialized() and "nccl" in str(dist.get_backend()):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def longest(seconds: float) -> float:
    """The most seconds any rank spent (every rank calls this)."""
    if not dist.is_initialized():
        return seconds
    most = torch.tensor([seconds], dtype=torch.float64, device=collective_device())
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    return float(most)


def summed(values: list[float]) -> list[float]:
    """`values` added over every rank (each calls this with as many); float64, so token counts stay exact."""
    if not dist.is_initialized():
        return list(values)
    total = torch.tensor(values, dtype=torch.float64, device=collective_device())
    dist.all_reduce(total)
    return total.tolist()


def in_lockstep(batch):
    """`batch`, or None on every rank if any rank has none (an all-reduce: every rank waits for the others)."""
    has = torch.tensor([0 if batch is None else 1], dtype=torch.int32, device=collective_device())
    if dist.is_initialized():
        dist.all_reduce(has, op=dist.ReduceOp.MIN)
    return batch if int(has) else None
