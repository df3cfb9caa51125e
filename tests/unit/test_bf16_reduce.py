"""What DeepSpeed itself reduces bf16 gradients in, built from the job's config: fp32 in every engine (ZeRO 0-3, and
the pipeline engine, whose replicas reduce through DeepSpeed's bucketed all-reduce), not the model's bf16."""

import pytest
import torch

from bert_core.config import tiny
from jobs.config.pretrain import PretrainConfig
from jobs.config.sections import DeepSpeedConfig, OptimConfig
from tests.unit.test_loss_guard import VOCAB, _batch

# real bf16 engines built and stepped on the CPU (~15 s here): `make test`, not `make test-fast`
pytestmark = pytest.mark.slow
B = 4  # test_loss_guard's _batch: 4 rows of 16 tokens over its VOCAB


@pytest.mark.parametrize("zero_stage", [0, 1, 2, 3])
def test_a_bf16_engine_reduces_its_gradients_in_fp32(deepspeed_world_of_one, zero_stage):
    """ZeRO-0 too, with one micro-batch a step (fine-tuning's; the config refuses its bf16 accumulation)."""
    from bert_core.model import BertForPreTraining
    from jobs.engine.data_parallel import Engine
    from jobs.engine.objectives import PretrainingObjective

    accumulated = 2 if zero_stage else 1
    engine = Engine(BertForPreTraining(tiny(vocab_size=VOCAB)), PretrainingObjective(), optim=OptimConfig(),
                    deepspeed=DeepSpeedConfig(zero_stage=zero_stage, precision="bf16"), micro_batch_size=B,
                    grad_accum_steps=accumulated, max_steps=10, use_gpu=False)
    assert engine.engine.communication_data_type == torch.float32
    # ZeRO's optimizers take the dtype at build (ZeRO-1 in bf16 with fp32 accumulation is DeepSpeed's BF16_Optimizer,
    # which reduces through the engine's all-reduce)
    assert getattr(engine.optimizer, "communication_data_type", torch.float32) == torch.float32
    for seed in range(4):
        stats = engine.step(_batch(seed))
    assert stats.optimizer_stepped and engine.global_step == 4 // accumulated


def test_a_bf16_pipeline_reduces_its_replicas_gradients_in_fp32(deepspeed_world_of_one, monkeypatch):
    """The pipeline engine's data-parallel reduce (ZeRO-1's bf16 optimizer: `_bf16_reduce_grads`) goes through
    DeepSpeed's bucketed all-reduce, which casts each bucket to the engine's communication dtype."""
    import deepspeed.comm

    from jobs.engine.pipeline import PipelineEngine

    cfg = PretrainConfig()
    cfg.model = tiny(vocab_size=VOCAB)
    cfg.deepspeed.precision, cfg.deepspeed.zero_stage, cfg.train.micro_batch_size = "bf16", 1, B
    engine = PipelineEngine(cfg)
    assert engine.engine.communication_data_type == torch.float32
    reduced, all_reduce = [], deepspeed.comm.all_reduce

    def spy(tensor, *args, **kwargs):
        reduced.append((tensor.dtype, tensor.numel()))
        return all_reduce(tensor, *args, **kwargs)

    monkeypatch.setattr(deepspeed.comm, "all_reduce", spy)
    assert engine.step(_batch(0)).optimizer_stepped
    buckets = {dtype for dtype, n in reduced if n > 1000}  # gradient buckets, not the loss or the flags
    assert buckets == {torch.float32}, reduced
