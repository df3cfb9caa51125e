"""Pipeline parallelism for BertForPreTraining with DeepSpeed's PipelineModule.

The model becomes a flat list of L + 4 layers, each a bert_core module (same parameter names, same
numerics as BertForPreTraining's unpadded path), cut into stages by DeepSpeed:

    0        EmbeddingPipe          tied "embed"  -> bert.embeddings.*
    1..L     EncoderLayerPipe                     -> bert.encoder.layer.{i}.*
    L+1      PreTrainingHeadsPipe                 -> bert.pooler.*, cls.seq_relationship.*, cls.predictions.transform.*
    L+2      MLM decoder            tied "embed"  -> (reads bert.embeddings.word_embeddings.weight)
    L+3      OutputBiasPipe                       -> cls.predictions.bias

Stage contract: stages exchange tuples of tensors, and only the hidden states are floating point
(DeepSpeed sends a gradient back for every floating tensor it received, so nothing else may be one):

    data     (input_ids (B,T), token_type_ids (B,T), attention_mask (B,T), mlm_labels (B,T), nsp_labels (B,))
    encoder  (hidden (N,H), indices (N,), attention_mask (B,T), mlm_labels (B,T), nsp_labels (B,))
    heads    (hidden (M,H) -> logits (M,V), nsp_logits (B,2), mlm_targets (M,), nsp_labels (B,))

The labels ride along with the activations instead of being read again by the last stage: only the
first stage's ranks read data (each the whole set, keeping its replica's rows: jobs/pretrain.py
splits nothing for pipelines), so the last stage has no batch of its own; `train_step`/`evaluate` feed
the other stages placeholders. N (real tokens), M (masked tokens) and T (padded length) change per batch,
so the module is built with `dynamic_shape=True` (one small shape message per transfer).

Import only after DS_ACCELERATOR is set (as jobs/engine/data_parallel.py): it imports deepspeed.
"""

from __future__ import annotations

import copy
import glob
import itertools
import json
import math
import os
import re
from pathlib import Path
from typing import Iterable, Iterator

import deepspeed
import torch
import torch.distributed as dist
import torch.nn.functional as F
from deepspeed.pipe import LayerSpec, PipelineModule, TiedLayerSpec
from torch import nn

from bert_core.checkpoint import save_state_dict
from bert_core.config import BertConfig, ConfigError
from bert_core.model import (IGNORE_INDEX, _cu_seqlens, BertEmbeddings, BertForPreTraining, BertLayer, BertPooler,
                             BertPredictionHeadTransform, Packing, init_weights, masked_lm_loss)
from jobs.config.sections import PARTITION_METHODS
from jobs.config.pretrain import PretrainConfig
from jobs.engine.ds_config import deepspeed_config, lr_lambda, param_groups
from jobs.runtime.op_locks import before_op_loads
from jobs.engine.objectives import PretrainingObjective, pretraining_sums
from jobs.engine.seam import (OPTIMIZER_LAYOUT, EngineBase, StepStats, collective_device, compile_muon_at_first_call,
                              quiet_forced_memory_reports)

PIPE_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "mlm_labels", "next_sentence_label")
TIED_KEY = "embed"
TIED_ATTR = "word_embeddings.weight"  # the one tensor both copies of the tied module share


# ----------------------------------------------------------------------------- layers


class EmbeddingPipe(BertEmbeddings):
    """Data tuple -> packed embeddings: pad tokens are dropped here and never reach a stage boundary."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        init_weights(self, config)

    def forward(self, inputs):
        input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels = inputs
        B, T = input_ids.shape
        position_ids = torch.arange(T, device=input_ids.device).expand(B, T)  # (B, T)
        packing = Packing.from_mask(attention_mask)
        x = super().forward(*(packing.pack(t) for t in (input_ids, token_type_ids, position_ids)))  # (N, H)
        return x, packing.indices, attention_mask, mlm_labels, nsp_labels


class TiedWordEmbeddings(nn.Module):
    """The last stage's copy of the tied "embed" module: only the table the MLM decoder reads.

    DeepSpeed builds a tied module from the first spec with its key that a stage holds, so the last
    stage (which holds only the decoder spec) gets this instead of a full BertEmbeddings with unused
    position/type tables. Its weight is overwritten by a broadcast from stage 0 at construction and kept
    equal by all-reducing its gradient with stage 0's (PipelineModule's tied-weight groups).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        init_weights(self, config)


class EncoderLayerPipe(BertLayer):
    def forward(self, inputs):
        x, indices, attention_mask, *labels = inputs
        packing = Packing(indices, _cu_seqlens(attention_mask), *attention_mask.shape)
        mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T), True = attend
        return super().forward(x, mask, packing), indices, attention_mask, *labels


class PreTrainingHeadsPipe(nn.Module):
    """Pooler + NSP, and the MLM transform on the M masked positions only (sparse MLM, as the model)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.pooler = BertPooler(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)
        self.transform = BertPredictionHeadTransform(config)
        init_weights(self, config)

    def forward(self, inputs):
        x, indices, attention_mask, mlm_labels, nsp_labels = inputs
        sequence_output = Packing(indices, None, *attention_mask.shape).unpack(x)  # (B, T, H)
        nsp_logits = self.seq_relationship(self.pooler(sequence_output))  # (B, 2)
        masked = torch.nonzero(mlm_labels.flatten() != IGNORE_INDEX, as_tuple=False).flatten()  # (M,)
        hidden = self.transform(sequence_output.flatten(0, 1).index_select(0, masked))  # (M, H)
        return hidden, nsp_logits, mlm_labels.flatten().index_select(0, masked), nsp_labels.view(-1)


def mlm_decode(embeddings: nn.Module, inputs):
    """forward_fn of the tied decoder spec: logits against the word-embedding table (no bias yet)."""
    hidden, *rest = inputs
    return F.linear(hidden, embeddings.word_embeddings.weight), *rest  # (M, V)


class OutputBiasPipe(nn.Module):
    """HF's output-only MLM bias; its own layer because a tied spec's forward_fn sees only the tied module."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, inputs):
        logits, *rest = inputs
        return logits + self.bias.to(logits.dtype), *rest


def layer_specs(config: BertConfig) -> list[LayerSpec]:
    return [
        TiedLayerSpec(TIED_KEY, EmbeddingPipe, config, tied_weight_attr=[TIED_ATTR]),
        *(LayerSpec(EncoderLayerPipe, config) for _ in range(config.num_hidden_layers)),
        LayerSpec(PreTrainingHeadsPipe, config),
        TiedLayerSpec(TIED_KEY, TiedWordEmbeddings, config, forward_fn=mlm_decode, tied_weight_attr=[TIED_ATTR]),
        LayerSpec(OutputBiasPipe, config),
    ]


# ----------------------------------------------------------------------------- module


# Running sums the loss function keeps on the last stage (PretrainingObjective's, so the metrics match
# the data-parallel engine's); reduced over all ranks by `_reduce_tally`.
TALLY = PretrainingObjective.sum_keys


def pretraining_loss(outputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Last layer's outputs -> (MLM mean over masked tokens + NSP mean, this micro-batch's sums).

    Exactly BertForPreTraining's loss; the labels arrive inside `outputs` (see the stage contract).
    """
    mlm_logits, nsp_logits, mlm_targets, nsp_labels = outputs
    mlm_loss = masked_lm_loss(mlm_logits, mlm_targets)
    nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels)
    with torch.no_grad():
        sums = pretraining_sums(mlm_loss, nsp_loss, mlm_logits, mlm_targets, nsp_logits, nsp_labels)
    return mlm_loss + nsp_loss, sums


def _seed_layer(seed) -> None:
    # Torch's generator only (DeepSpeed's default also reseeds `random` and numpy, and fails on the
    # numpy-int layer offsets its "parameters" partitioner produces).
    torch.manual_seed(int(seed))


class BertPipe(PipelineModule):
    """BertForPreTraining as a DeepSpeed PipelineModule over `num_stages` x (world / num_stages) ranks.

    Needs torch.distributed and deepspeed.comm initialised (`deepspeed.init_distributed`), and LOCAL_RANK
    set (Ray Train sets it). Layer l is initialised from seed `seed + l` whatever the partition, so every
    data-parallel replica of a stage starts identical. Real weights go in through
    `build_pipeline_engine(state_dict=...)`, before deepspeed.initialize: after it, the optimizer's fp32 copy
    (ZeRO-1's, or fp16's masters, taken at initialize) overwrites the module at the first optimizer step.
    """

    def __init__(self, config: BertConfig, num_stages: int, partition_method: str = "parameters", seed: int = 0):
        if partition_method not in PARTITION_METHODS:
            raise ConfigError(f"partition_method must be one of {PARTITION_METHODS}, got {partition_method!r}")
        super().__init__(layer_specs(config), num_stages=num_stages, loss_fn=self._loss,
                         seed_layers=True, seed_fn=_seed_layer, base_seed=seed, partition_method=partition_method,
                         dynamic_shape=True)
        self.config = config
        # A plain tensor, not a buffer: DeepSpeed casts a module's buffers to bf16/fp16 with its weights.
        self.tally = torch.zeros(len(TALLY), dtype=torch.float64, device=next(self.parameters()).device)

    def _loss(self, outputs, _labels):
        loss, sums = pretraining_loss(outputs)
        self.tally += torch.stack([sums[k].to(self.tally.device) for k in TALLY])
        return loss

    def local_layers(self) -> Iterator[tuple[int, nn.Module]]:
        """(layer index, module) for each module this stage holds; a tied module once, at its first spec."""
        seen = set()
        for idx in range(self._local_start, self._local_stop):
            spec = self._layer_specs[idx]
            module = self.tied_modules[spec.key] if isinstance(spec, TiedLayerSpec) else self._modules[str(idx)]
            if id(module) not in seen:
                seen.add(id(module))
                yield idx, module


# ----------------------------------------------------------------------------- weight mapping


def _name_table(num_layers: int) -> list[tuple[str, int, str]]:
    """(HF prefix, layer index, prefix inside that layer's state_dict), one row per renamed block."""
    L = num_layers
    return [
        ("bert.embeddings.", 0, ""),
        *((f"bert.encoder.layer.{i}.", 1 + i, "") for i in range(L)),
        ("bert.pooler.", L + 1, "pooler."),
        ("cls.seq_relationship.", L + 1, "seq_relationship."),
        ("cls.predictions.transform.", L + 1, "transform."),
        ("bert.embeddings.word_embeddings.", L + 2, "word_embeddings."),  # the last stage's tied copy
        ("cls.predictions.bias", L + 3, "bias"),
    ]


def to_layer_states(state_dict: dict[str, torch.Tensor], config: BertConfig) -> dict[int, dict[str, torch.Tensor]]:
    """BertForPreTraining state_dict (HF names) -> {layer index: that layer's state_dict}.

    The word-embedding table goes to layer 0 and to layer L+2 (the tied copy a last stage builds);
    the decoder's own key is the same tensor and is skipped.
    """
    table = _name_table(config.num_hidden_layers)
    layers: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in state_dict.items():
        if key in BertForPreTraining.tied_weights:
            continue
        rows = [(idx, local + key[len(hf):]) for hf, idx, local in table if key.startswith(hf)]
        if not rows:
            raise KeyError(f"{key!r} has no place in the pipeline layers")
        for idx, name in rows:
            layers.setdefault(idx, {})[name] = value
    return layers


def from_layer_states(layers: dict[int, dict[str, torch.Tensor]], config: BertConfig) -> dict[str, torch.Tensor]:
    """{layer index: layer state_dict} -> BertForPreTraining state_dict, tied decoder key included."""
    table = _name_table(config.num_hidden_layers)
    out: dict[str, torch.Tensor] = {}
    for idx in sorted(layers):
        for name, value in layers[idx].items():
            hf = next((h + name[len(p):] for h, i, p in table if i == idx and name.startswith(p)), None)
            if hf is None:
                raise KeyError(f"layer {idx} key {name!r} has no HF name")
            out.setdefault(hf, value)  # the tied copy at L+2 repeats layer 0's table; the first wins
    for tied, source in BertForPreTraining.tied_weights.items():
        out[tied] = out[source]
    return out


def load_pretraining_state(pipe: BertPipe, state_dict: dict[str, torch.Tensor]) -> None:
    """Load a BertForPreTraining state_dict into this stage's layers (every rank calls it for its own), before
    deepspeed.initialize: a pipe it wraps is refused, since its optimizer's fp32 copy would undo the load."""
    if "checkpoint_parallel_write_pipeline" in vars(pipe):  # set on the module by DeepSpeed's PipelineEngine only
        raise ValueError("load_pretraining_state: this BertPipe is already wrapped by deepspeed.initialize, whose "
                         "optimizer holds its own fp32 copy of the weights and writes it back at the first step; "
                         "pass the weights as build_pipeline_engine(..., state_dict=...), or restore a checkpoint "
                         "with engine.load_checkpoint")
    layers = to_layer_states(state_dict, pipe.config)
    with torch.no_grad():
        for idx, module in pipe.local_layers():
            module.load_state_dict(layers[idx], strict=True)


def layer_states(pipe: BertPipe) -> dict[int, dict[str, torch.Tensor]]:
    """This stage's {layer index: state_dict} as detached CPU fp32 tensors, a 16-bit run's parameters as its optimizer
    holds them in fp32 (the module's are their rounding: a bf16 release was not the model that trained). Every
    data-parallel rank of the stage calls it: ZeRO gathers each parameter's partitions."""
    from deepspeed.utils import safe_get_full_fp32_param

    out = {}
    for idx, module in pipe.local_layers():
        state = {k: v.detach().float().cpu() for k, v in module.state_dict().items()}
        for name, param in module.named_parameters():
            full = safe_get_full_fp32_param(param)
            if full is not None:
                state[name] = full.detach().float().cpu()
        out[idx] = state
    return out


def gather_layer_states(engine) -> dict[int, dict[str, torch.Tensor]] | None:
    """All stages' layer states on global rank 0 (stage 0, replica 0); None elsewhere. Every rank calls it."""
    pipe: BertPipe = engine.module
    states = layer_states(pipe)  # on every rank: a collective of each stage's data-parallel ranks
    mine = states if engine.grid.data_parallel_id == 0 else {}
    rank = dist.get_rank()
    gathered = [None] * dist.get_world_size() if rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    if rank != 0:
        return None
    merged: dict[int, dict[str, torch.Tensor]] = {}
    for part in gathered:
        merged.update(part)
    return merged


def consolidated_state_dict(engine) -> dict[str, torch.Tensor] | None:
    """The whole model as a BertForPreTraining state_dict on rank 0, None elsewhere. Every rank calls it."""
    layers = gather_layer_states(engine)
    return None if layers is None else from_layer_states(layers, engine.module.config)


def state_dict_from_layer_checkpoint(ckpt_dir: str | os.PathLike, config: BertConfig) -> dict[str, torch.Tensor]:
    """engine.save_checkpoint's per-layer files (`<dir>/<tag>/layer_XX-model_states.pt`) -> HF names.

    No process group needed. The files hold the module's weights (16-bit in a bf16 run), so a release is not cut
    from them (it takes the fp32 master copy, consolidated_state_dict); tests/e2e/test_pipeline_parallel.py reads
    them to check a saved pipeline maps to the released weights.
    """
    layers = {}
    for path in glob.glob(os.path.join(ckpt_dir, "layer_*-model_states.pt")):
        idx = int(re.match(r"layer_(\d+)", os.path.basename(path)).group(1))
        layers[idx] = torch.load(path, map_location="cpu", weights_only=True)
    if 0 not in layers:
        raise FileNotFoundError(f"no layer_00-model_states.pt under {ckpt_dir}: not a pipeline checkpoint tag dir")
    return from_layer_states(layers, config)


# ----------------------------------------------------------------------------- engine


def build_pipeline_engine(cfg: PretrainConfig, num_stages: int, partition_method: str = "parameters",
                          state_dict: dict[str, torch.Tensor] | None = None):
    """deepspeed.initialize on a BertPipe -> (PipelineEngine, optimizer, lr scheduler).

    Every rank calls it inside an initialised process group (Ray Train's). The data-parallel degree is
    world / num_stages, and DeepSpeed's batch arithmetic uses it, not the world size. `state_dict`
    (HF names) replaces the seeded initial weights.
    """
    checked = copy.deepcopy(cfg)
    checked.deepspeed.pipeline_stages, checked.deepspeed.partition_method = num_stages, partition_method
    checked.validate_pipeline()  # the job's rules, before any process-group work
    before_op_loads()  # its communication op loads here
    compile_muon_at_first_call()
    quiet_forced_memory_reports()
    deepspeed.init_distributed(dist_init_required=False)  # wrap the existing torch process group
    world = dist.get_world_size()
    if num_stages < 1 or world % num_stages:
        raise ConfigError(f"pipeline stages ({num_stages}) must divide the number of workers ({world})")
    pipe = BertPipe(cfg.model, num_stages, partition_method, seed=cfg.train.seed)
    if state_dict is not None:
        load_pretraining_state(pipe, state_dict)
    engine, optimizer, _, scheduler = deepspeed.initialize(
        model=pipe,
        model_parameters=param_groups(pipe, cfg.optim.weight_decay),
        config=deepspeed_config(cfg.optim, cfg.deepspeed, micro_batch_size=cfg.train.micro_batch_size,
                                grad_accum_steps=cfg.train.grad_accum_steps, world_size=world // num_stages,
                                use_gpu=cfg.scaling.use_gpu),
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg.optim, cfg.train.max_steps)),
        dist_init_required=False,
    )
    return engine, optimizer, scheduler


def pipe_batch(batch: dict[str, torch.Tensor]) -> tuple[tuple[torch.Tensor, ...], tuple]:
    """A collator batch (bert_core.masking) -> DeepSpeed's (inputs, labels); labels travel in inputs."""
    return tuple(batch[k] for k in PIPE_INPUTS), ()


def _feed(engine, batches: Iterable[dict] | None) -> Iterator:
    if engine.is_first_stage():
        return map(pipe_batch, batches)
    return itertools.repeat(((), ()))  # the last stage pops an (unused) label entry per micro-batch


def _reduce_tally(engine) -> dict[str, float]:
    """Sum the last stages' tallies over every rank (others hold zeros) and reset them."""
    pipe: BertPipe = engine.module
    totals = pipe.tally.clone()
    pipe.tally.zero_()
    dist.all_reduce(totals)
    return dict(zip(TALLY, totals.tolist()))


def train_step(engine, micro_batches: Iterable[dict] | None) -> StepStats:
    """One optimizer step over gradient_accumulation_steps micro-batches (the pipeline schedule needs them
    all at once). Every rank calls it; only stage-0 ranks need `micro_batches`, others may pass None.
    The loss is the mean over the step's micro-batches and data-parallel replicas; sums are totals."""
    engine.module.tally.zero_()
    loss = float(engine.train_batch(_feed(engine, micro_batches)))
    return StepStats(loss, _reduce_tally(engine), optimizer_stepped=True,
                     micro_batches=engine.gradient_accumulation_steps())


@torch.no_grad()
def evaluate(engine, batches: Iterable[dict] | None, num_batches: int) -> dict:
    """PretrainingObjective's metrics over `num_batches` batches per replica, summed over replicas: the dict
    jobs.engine.data_parallel.Engine.evaluate returns. Every rank calls it with the same `num_batches`."""
    engine.module.tally.zero_()
    engine.eval_batch(_feed(engine, batches), num_micro_batches=num_batches)
    return PretrainingObjective().metrics(_reduce_tally(engine))


def export(engine, config: BertConfig, out_dir: str | os.PathLike, tokenizer_dir: str | None = None) -> Path | None:
    """Release checkpoint from a pipeline run; every rank calls, rank 0 gathers the stages and writes."""
    state = consolidated_state_dict(engine)
    if state is None:
        return None
    return save_state_dict(state, config, out_dir, architectures=["BertForPreTraining"], tokenizer_dir=tokenizer_dir)


# ----------------------------------------------------------------------------- the Engine seam


class PipelineEngine(EngineBase):
    """The training loop's engine seam (jobs/engine/seam.py) over a DeepSpeed PipelineEngine, pretraining only.

    DeepSpeed's pipeline schedule takes a whole optimizer step (grad_accum_steps micro-batches) in one
    call: `step` buffers micro-batches and runs the schedule on the last one. Only first-stage ranks read
    data (`reads_data`); the other stages pass None and receive activations. A non-finite step loss marks the
    step non-finite: ZeRO-1's and the bf16 and fp16 optimizers' overflow checks (stage 0 in fp32 has none, so
    PretrainConfig refuses it) have then dropped its update and left the learning rate where it was, and the
    step counts, as DeepSpeed's own step count does (data parallel skips the micro-batch before any engine step
    instead). Its micro-batches count toward train.rollback_after. Pipelines resume on their own topology
    (jobs/workers/reshard.py), so `load_universal` is always False.
    """

    def __init__(self, cfg: PretrainConfig):
        d = cfg.deepspeed
        engine, optimizer, scheduler = build_pipeline_engine(cfg, d.pipeline_stages, d.partition_method)
        super().__init__(engine, optimizer, scheduler, PretrainingObjective(), optim=cfg.optim,
                         max_steps=cfg.train.max_steps, zero_stage=d.zero_stage)
        self.grad_accum_steps, self.model_config = cfg.train.grad_accum_steps, cfg.model
        self.partition_method = d.partition_method
        self._pending: list[dict | None] = []

    @property
    def reads_data(self) -> bool:
        return self.engine.is_first_stage()

    @property
    def data_parallel(self) -> tuple[int, int]:
        return self.engine.grid.data_parallel_id, self.engine.grid.data_parallel_size

    def step(self, batch: dict | None, inject_nan: bool = False) -> StepStats:
        if inject_nan:
            raise ValueError("NaN injection is not supported with pipeline stages")
        self._pending.append(self._to_device(batch) if batch is not None else None)
        if len(self._pending) < self.grad_accum_steps:
            return StepStats(0.0, {}, optimizer_stepped=False, micro_batches=0)
        micro_batches, self._pending = self._pending, []
        stats = train_step(self.engine, micro_batches if self.reads_data else None)
        stats.micro_batches = len(micro_batches)
        stats.finite = math.isfinite(stats.loss)  # if not, the optimizer dropped the update; the step still counts
        return stats

    def evaluate(self, batches) -> dict:
        """Every rank calls it; first-stage ranks bring the batches, all agree on how many to run."""
        batches = [self._to_device(b) for b in batches] if self.reads_data else []
        count = torch.tensor([len(batches) if self.reads_data else 2**31 - 1], dtype=torch.int64,
                             device=collective_device())
        dist.all_reduce(count, op=dist.ReduceOp.MIN)
        return evaluate(self.engine, batches[:int(count)] if self.reads_data else None, int(count))

    def export(self, out_dir: str | os.PathLike, tokenizer_dir: str | None = None) -> Path | None:
        return export(self.engine, self.model_config, out_dir, tokenizer_dir)

    def _optimizer_layout(self) -> dict:
        """EngineBase's, with where DeepSpeed cut the layers into stages in place of rank 0's group count (the cut and
        the model decide every stage's groups; rank 0's record is read by all). Each stage's optimizer state covers its
        own layers: one saved under another cut (another deepspeed.partition_method, or a DeepSpeed whose partitioner
        changed) loads into no stage, and a 16-bit hand-off then takes the layer files' weights instead."""
        layout = {k: v for k, v in super()._optimizer_layout().items() if k != "groups"}
        return {**layout, "stage_bounds": [int(b) for b in self.engine.module.parts]}

    def load(self, ckpt_dir: str | os.PathLike, weights_only: bool = False, schedule: bool = True) -> dict:
        """EngineBase's. A resume (the optimizer state too) of a checkpoint whose layers were cut into stages otherwise
        is refused naming both cuts: DeepSpeed's own failure names a parameter-alignment setting. The driver refuses
        another partition_method (jobs/workers/reshard.py); this also catches a DeepSpeed that cuts anew."""
        record = Path(ckpt_dir) / OPTIMIZER_LAYOUT
        saved = json.loads(record.read_text()).get("stage_bounds") if record.is_file() else None  # None: not recorded
        ours = self._optimizer_layout()["stage_bounds"]
        if not weights_only and saved is not None and saved != ours:
            raise ConfigError(f"{ckpt_dir} was saved with the pipeline's layers cut into stages at {saved}; this run "
                              f"cuts them at {ours} (deepspeed.partition_method={self.partition_method!r}), and each "
                              "stage's optimizer state loads only into the layers it was saved with. Resume with the "
                              "cut it was saved with, or hand its weights alone to a new run_name "
                              "(train.init_checkpoint with train.reset_optimizer=true)")
        return super().load(ckpt_dir, weights_only, schedule)
