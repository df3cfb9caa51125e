"""Pretraining's engine, built from its config: data parallel (ZeRO 0-3, jobs/engine/data_parallel.py) or
pipeline x data parallel (jobs/engine/pipeline.py). The engines know no job; this is where pretraining picks one."""

from __future__ import annotations

import torch

from bert_core.model import BertForPreTraining
from bert_core.modern import ModernBertForMaskedLM
from jobs.config.pretrain import PretrainConfig
from jobs.engine.data_parallel import Engine
from jobs.engine.objectives import MaskedLMObjective, PretrainingObjective
from jobs.engine.seam import EngineBase
from jobs.runtime.op_locks import before_op_loads


def pretrain_engine_options(cfg: PretrainConfig) -> dict:
    """The sections and numbers of a PretrainConfig that an engine is built from."""
    return dict(optim=cfg.optim, deepspeed=cfg.deepspeed, micro_batch_size=cfg.train.micro_batch_size,
                grad_accum_steps=cfg.train.grad_accum_steps, max_steps=cfg.train.max_steps,
                use_gpu=cfg.scaling.use_gpu)


def build_engine(cfg: PretrainConfig, load_universal: bool = False) -> EngineBase:
    """A fresh pretraining engine as the config asks: data parallel (ZeRO 0-3) or pipeline x data parallel.
    Seeded, so every rank starts from the same weights; `load_universal` as in Engine (data parallel only)."""
    torch.manual_seed(cfg.train.seed)
    if cfg.deepspeed.pipeline_stages > 1:
        before_op_loads()  # before DeepSpeed loads (and perhaps builds) its ops
        from jobs.engine.pipeline import PipelineEngine  # imports deepspeed: only once DS_ACCELERATOR is set

        engine = PipelineEngine(cfg)
    else:
        model, objective = pretraining_model(cfg)
        engine = Engine(model, objective, load_universal=load_universal, **pretrain_engine_options(cfg))
    engine.names = cfg.setting_names()  # a phase 2's resume names phase2.* where it changed
    return engine


def pretraining_model(cfg: PretrainConfig):
    """(model, objective) for the config's recipe. BERT without NSP (train.nsp=false) keeps its pooler and NSP
    head, as its release does, frozen: no loss trains them, and weight decay would otherwise wear them down."""
    if cfg.recipe == "modern":
        return ModernBertForMaskedLM(cfg.model), MaskedLMObjective()
    model = BertForPreTraining(cfg.model)
    if not cfg.train.nsp:
        for p in (*model.bert.pooler.parameters(), *model.cls.seq_relationship.parameters()):
            p.requires_grad_(False)
    return model, PretrainingObjective(nsp=cfg.train.nsp)
