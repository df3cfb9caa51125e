"""Pipeline configs the job runs but should speak about, and the pipeline's weight-loading contract: a pipeline fed
too few micro-batches a step is warned of (its stages idle), the ZeRO refusal names what the precision allows, and
weights go in before deepspeed.initialize, never after."""

import warnings
from pathlib import Path

import pytest
import torch

from bert_core.config import ConfigError, tiny
from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "pretrain" / "quickstart.yaml"
FOUR_STAGES = ["deepspeed.pipeline_stages=4", "deepspeed.zero_stage=1", "scaling.num_workers=4"]


def _warnings(overrides: list[str]) -> list[str]:
    from jobs.config import pretrain

    pretrain._WARNED.clear()  # warned once a process: another test's config may have said it already
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_config(PretrainConfig, QUICKSTART, overrides)
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_a_pipeline_at_one_micro_batch_a_step_is_warned_naming_both_fields_and_its_idle_share():
    """DeepSpeed's TrainSchedule fills the stages only with one step's micro-batches: 4 stages fed 1 idle 3/4."""
    said = [m for m in _warnings([*FOUR_STAGES, "train.grad_accum_steps=1"]) if "pipeline_stages" in m]
    assert len(said) == 1, said
    assert "train.grad_accum_steps=1" in said[0] and "deepspeed.pipeline_stages=4" in said[0]
    assert "75%" in said[0] and said[0].startswith("[train] ")


@pytest.mark.parametrize("overrides", [
    [*FOUR_STAGES, "train.grad_accum_steps=8"],  # 2 x stages: idle 3/11
    ["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1", "train.grad_accum_steps=4"],
    ["train.grad_accum_steps=1"],  # data parallel: no pipeline to fill
])
def test_a_pipeline_fed_enough_micro_batches_and_data_parallel_are_not_warned(overrides):
    assert not [m for m in _warnings(overrides) if "pipeline_stages" in m]


def test_the_pipeline_refusal_at_zero2_in_fp32_offers_only_the_stage_fp32_allows():
    """The refusal offered ZeRO-0, which the next check refuses in fp32: one refusal sent the user to another."""
    with pytest.raises(ConfigError) as refused:
        load_config(PretrainConfig, QUICKSTART, ["deepspeed.pipeline_stages=2"])  # quickstart's zero_stage=2
    message = str(refused.value)
    assert "needs deepspeed.zero_stage=1" in message and "needs deepspeed.zero_stage 0 or 1" not in message
    assert "deepspeed.precision=fp32" in message
    fp16 = ["deepspeed.pipeline_stages=2", "deepspeed.precision=fp16", "scaling.use_gpu=true",
            "train.grad_accum_steps=4"]
    with pytest.raises(ConfigError, match="needs deepspeed.zero_stage 0 or 1"):
        load_config(PretrainConfig, QUICKSTART, fp16)
    assert load_config(PretrainConfig, QUICKSTART, [*fp16, "deepspeed.zero_stage=0"]).deepspeed.zero_stage == 0


def test_weights_go_in_before_deepspeed_initialize_and_into_a_built_engine_are_refused(deepspeed_world_of_one):
    """Loaded after deepspeed.initialize, weights served one step: ZeRO-1's fp32 partition still held the seeded init
    and was copied back over the module at the first optimizer step."""
    from bert_core.model import BertForPreTraining
    from jobs.engine import pipeline

    cfg = PretrainConfig()
    cfg.model = tiny(vocab_size=64)
    cfg.deepspeed.zero_stage, cfg.train.micro_batch_size = 1, 2
    torch.manual_seed(123)  # weights other than the pipe's seeded init
    state = BertForPreTraining(cfg.model).state_dict()
    engine, _, _ = pipeline.build_pipeline_engine(cfg, 1, state_dict=state)
    loaded = pipeline.from_layer_states(pipeline.layer_states(engine.module), cfg.model)
    assert all(torch.equal(loaded[k], state[k].float()) for k in state)
    with pytest.raises(ValueError, match=r"build_pipeline_engine\(.*state_dict="):
        pipeline.load_pretraining_state(engine.module, state)
