"""The fine-tuned model and its engine, built alike by the Ray Train worker (jobs/workers/finetune_worker.py), a
sweep's trial (jobs/workers/sweep_trial.py) and the benches, which run them without Ray: nothing here imports it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from jobs.config.finetune import FinetuneConfig
from jobs.engine.objectives import objective_for
from jobs.loops import ft_tasks


def build_engine(model, cfg: FinetuneConfig, total_steps: int):
    """The engine pretraining runs (jobs/engine/data_parallel.py: DeepSpeed, ZeRO 0-2, gradient clipping, AdamW with
    warmup then linear decay), over `model` and its task's objective. Needs a process group: Ray Train's
    in a fine-tuning worker, `single_process_group()` in a sweep trial."""
    if not cfg.scaling.use_gpu:
        os.environ["DS_ACCELERATOR"] = "cpu"  # before deepspeed is imported by the engine
    from jobs.engine.data_parallel import Engine

    return Engine(model, objective_for(model), optim=cfg.optim.engine_optim(total_steps), deepspeed=cfg.deepspeed,
                  micro_batch_size=cfg.train.batch_size, grad_accum_steps=1, max_steps=total_steps,
                  use_gpu=cfg.scaling.use_gpu)


def single_process_group(use_gpu: bool = False) -> None:
    """A one-rank group for an engine that runs outside Ray Train (a Tune trial, the benches): DeepSpeed needs a
    group even alone. NCCL on a GPU, as Ray Train gives its GPU workers (DeepSpeed's ZeRO collectives and the
    loops' own take CUDA tensors, which gloo does not reduce-scatter), else gloo. Kept for the process's life; a
    reused trial actor finds it already there."""
    for key, value in (("LOCAL_RANK", "0"), ("RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(key, value)  # deepspeed.initialize asserts a launcher's variables even so
    backend = "nccl" if use_gpu else "gloo"
    if not dist.is_initialized():
        if use_gpu:
            torch.cuda.set_device(0)
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    elif dist.get_backend() != backend:
        raise RuntimeError(f"this process already holds a {dist.get_backend()} process group; an engine with "
                           f"use_gpu={use_gpu} needs {backend}")


def build_model(cfg: FinetuneConfig, init_dir: Path):
    """The task's head on the starting checkpoint's encoder (and pooler, where the head has one). The head
    is always fresh, even when the checkpoint has one of another task or size. A BERT checkpoint gets BERT's
    heads (bert_core/model.py), a ModernBERT one (the modern recipe's release) ModernBERT's
    (bert_core/modern_heads.py). Returns (model, {"loaded", "fresh", "unused"} key lists)."""
    from bert_core.checkpoint import load_pretrained
    from bert_core.model import BertModel

    if ft_tasks.recipe_of_checkpoint(init_dir) == "modern":
        return _build_modern(cfg, init_dir)
    backbone, info = load_pretrained(init_dir, BertModel, output_loading_info=True)  # any head is left unused
    cls = ft_tasks.head_class(cfg.task)
    model = cls(backbone.config, **ft_tasks.head_kwargs(cfg.task))
    own = model.bert.state_dict()
    state = {k: v for k, v in backbone.state_dict().items() if k in own and k not in info["missing_keys"]}
    model.bert.load_state_dict(state, strict=False)
    loaded = {f"bert.{k}" for k in state}
    unused = sorted(info["unexpected_keys"] + [f"bert.{k}" for k in backbone.state_dict()
                                               if k not in own and k not in info["missing_keys"]])
    return model.train(), {"loaded": sorted(loaded), "fresh": sorted(set(model.state_dict()) - loaded),
                           "unused": unused}


def _build_modern(cfg: FinetuneConfig, init_dir: Path):
    """build_model for a ModernBERT checkpoint (any of its heads, or none): the encoder's weights (`model.*`) all
    load, strictly, and so does the head's dense/act/norm (`head.*`) where the checkpoint has one (the MLM head
    has the same layer under the same name: transformers' from_pretrained starts a classifier from it too); the
    classifier is fresh, and whatever else the checkpoint holds (the decoder, another task's classifier) is left
    unused."""
    from bert_core.checkpoint import read_state_dict
    from bert_core.modern_config import ModernConfig

    config = ModernConfig.from_dict(json.loads((init_dir / "config.json").read_text())).validate()
    model = ft_tasks.head_class(cfg.task, "modern")(config, **ft_tasks.head_kwargs(cfg.task))
    state = read_state_dict(init_dir)
    own = model.model.state_dict()
    missing = sorted(f"model.{k}" for k in own if f"model.{k}" not in state)
    if missing:
        raise ValueError(f"{init_dir} is a ModernBERT checkpoint without {len(missing)} of its encoder's weights "
                         f"(e.g. {missing[:3]}): a fine-tune would start that part from random values")
    model.model.load_state_dict({k: state[f"model.{k}"] for k in own}, strict=True)
    loaded = {f"model.{k}" for k in own}
    head = model.head.state_dict()
    if all(f"head.{k}" in state for k in head):
        model.head.load_state_dict({k: state[f"head.{k}"] for k in head}, strict=True)
        loaded |= {f"head.{k}" for k in head}
    return model.train(), {"loaded": sorted(loaded), "fresh": sorted(set(model.state_dict()) - loaded),
                           "unused": sorted(set(state) - loaded)}
