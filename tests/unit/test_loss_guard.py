"""Non-finite losses: a NaN micro-batch is skipped without touching weights, optimizer or schedule;
streaks trigger a rollback; a rollback's learning-rate scale applies from the current schedule position."""

import math

import pytest
import torch

from bert_core.config import tiny
from bert_core.model import BertForPreTraining
from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config
from jobs.engine.seam import StepStats
from jobs.loops.loss_guard import LossGuard

VOCAB = 64


def _batch(seed: int, B: int = 4, T: int = 16) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (B, T), generator=g)
    labels = torch.full((B, T), -100)
    labels[:, 2:5] = ids[:, 2:5]
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": torch.ones_like(ids),
            "mlm_labels": labels, "next_sentence_label": torch.randint(0, 2, (B,), generator=g)}


def _stats(finite: bool, micro_batches: int = 1) -> StepStats:
    return StepStats(0.0 if finite else math.nan, finite=finite, micro_batches=micro_batches)


def test_guard_counts_skips_and_asks_for_rollback_only_after_a_streak():
    guard = LossGuard(rollback_after=3)
    assert [guard.observe(_stats(f)) for f in (False, False, True, False, False)] == [False] * 5  # streak broken
    assert guard.observe(_stats(False)) is True and guard.skipped == 5
    never = LossGuard(rollback_after=0)
    assert not any(never.observe(_stats(False)) for _ in range(100)) and never.skipped == 100


def test_a_diverged_pipeline_run_rolls_back_though_it_buffers_micro_batches():
    """A pipeline runs grad_accum_steps micro-batches in one step and answers the ones it only buffers with an
    empty result (micro_batches 0): those reset the streak before every step, so a diverged run with
    grad_accum_steps >= 2 never rolled back. The buffered ones break no streak; a step is one result toward it (one
    NaN step of eight micro-batches rolled back at once with rollback_after=5), its micro-batches all skipped."""
    guard = LossGuard(rollback_after=3)
    step = [_stats(True, 0)] * 7 + [_stats(False, 8)]  # grad_accum_steps=8, the step's loss NaN
    assert [guard.observe(s) for s in step * 2] == [False] * 16 and (guard.streak, guard.skipped) == (2, 16)
    assert [guard.observe(s) for s in step] == [False] * 7 + [True] and guard.skipped == 24
    guard.streak = 0
    assert not any(guard.observe(s) for s in [_stats(False, 8), _stats(True, 8), _stats(False, 8)])  # broken


def _engine(zero_stage: int):
    from jobs.engine.data_parallel import Engine
    from jobs.workers.pretrain_engine import pretrain_engine_options
    from jobs.engine.objectives import PretrainingObjective

    cfg = load_config(PretrainConfig, None, [
        "data.sources=[x]", "train.max_steps=10", "optim.warmup_steps=2", "optim.lr=1e-2",
        f"deepspeed.zero_stage={zero_stage}"])
    cfg.model = tiny(vocab_size=VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    return Engine(BertForPreTraining(cfg.model), PretrainingObjective(), **pretrain_engine_options(cfg))


def _weights(engine) -> dict[str, torch.Tensor]:
    if engine.zero_stage == 3:
        return {k: v.clone() for k, v in engine.engine._zero3_consolidated_16bit_state_dict().items()}
    return {k: v.detach().clone() for k, v in engine.engine.module.state_dict().items()}


@pytest.mark.parametrize("zero_stage", [0, 2, 3])
def test_nan_micro_batch_leaves_weights_optimizer_and_schedule_untouched(deepspeed_world_of_one, zero_stage):
    engine = _engine(zero_stage)
    assert engine.step(_batch(0)).optimizer_stepped
    before, lr, steps = _weights(engine), engine.lr, engine.global_step
    position = engine.scheduler.last_epoch  # the lr factor is 1.0 on both sides of warmup's end: check the count
    skipped = engine.step(_batch(1), inject_nan=True)
    assert not skipped.finite and not skipped.optimizer_stepped and math.isnan(skipped.loss)
    after = _weights(engine)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert (engine.lr, engine.global_step, engine.scheduler.last_epoch) == (lr, steps, position)
    nxt = engine.step(_batch(1))  # the next finite micro-batch steps normally
    assert nxt.finite and nxt.optimizer_stepped and math.isfinite(nxt.loss)
    assert engine.global_step == steps + 1
    stepped = _weights(engine)
    assert any(not torch.equal(before[k], v) for k, v in stepped.items())
    assert all(torch.isfinite(v).all() for v in stepped.values())  # no NaN gradient was left behind


def test_scale_lr_applies_from_the_current_schedule_position(deepspeed_world_of_one):
    engine = _engine(zero_stage=2)
    for seed in range(4):
        engine.step(_batch(seed))
    unscaled = engine.lr
    engine.scale_lr(0.25)
    assert engine.lr == pytest.approx(0.25 * unscaled)
    assert all(g["lr"] == pytest.approx(0.25 * unscaled) for g in engine.scheduler.optimizer.param_groups)
    engine.step(_batch(9))
    schedule = 1 - (5 - 2) / (10 - 2)  # linear decay after 2 warmup steps, at step 5 of 10
    assert engine.lr == pytest.approx(0.25 * 1e-2 * schedule)
