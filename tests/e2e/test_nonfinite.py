"""NaN/inf losses on 2 Ray Train workers: a short streak is skipped and counted; a streak of
train.rollback_after restarts the workers from the last checkpoint at a lower learning rate, on that
checkpoint's weights and at the step after it."""

import math
from pathlib import Path

import pytest

from jobs.pretrain import run
from tests.e2e.quick import quick_config

pytestmark = pytest.mark.slow
LR = 2e-3


def job(tmp: Path, data: Path, name: str, nan_micro_batches: int) -> dict:
    (tmp / name).mkdir(exist_ok=True)
    return run(quick_config(
        tmp, name, f"faults.record_ids_dir={tmp / name}", "train.max_steps=20", "train.log_every=5", "train.checkpoint_every=5", "train.eval_batches=2",
        "train.rollback_after=3", "train.rollback_lr_factor=0.5", "train.max_failures=1",
        "faults.nan_at_step=8", f"faults.nan_micro_batches={nan_micro_batches}",
        f"optim.lr={LR}", "optim.warmup_steps=2", "optim.schedule=constant", corpus_mb=0.4,
        data_dir=data)).metrics


def attempts(record_dir: Path, kind: str) -> list[dict[int, list[str]]]:
    """Per attempt, in the order they ran: {step: the rest of rank 0's `kind` record line}."""
    out: dict[str, dict[int, list[str]]] = {}
    for line in (record_dir / f"{kind}-rank0.txt").read_text().splitlines():
        attempt, step, *rest = line.split()
        out.setdefault(attempt, {})[int(step)] = rest
    return list(out.values())


def test_short_nan_streak_is_skipped_and_counted(ray_tmp, shared_data):
    m = job(ray_tmp, shared_data, "skipped", nan_micro_batches=2)
    assert m["step"] == 20 and m["rollbacks"] == 0
    assert m["nonfinite_total"] == 2
    assert m["lr"] == pytest.approx(LR)
    assert math.isfinite(m["loss"]) and m["eval_after/mlm_loss"] < m["eval_before/mlm_loss"]


def test_nan_streak_rolls_back_to_the_last_checkpoint_at_a_lower_lr(ray_tmp, shared_data):
    m = job(ray_tmp, shared_data, "rolled-back", nan_micro_batches=3)
    assert m["step"] == 20 and m["rollbacks"] == 1
    assert m["lr"] == pytest.approx(0.5 * LR)  # the restarted workers train on at half the rate
    assert m["nonfinite_total"] == 0  # the skips happened after step 5's checkpoint, in the discarded attempt
    assert math.isfinite(m["loss"]) and m["eval_after/mlm_loss"] < m["eval_before/mlm_loss"]
    # The restarted workers went on from the last checkpoint (every 5 steps; the NaNs begin at step 8), not
    # from scratch: the first attempt ran steps 1-7, the restarted one begins at 6, on step 5's weights (the
    # sha256 of rank 0's parameters as restored equals the one recorded when step 5 was saved).
    first, restarted = attempts(ray_tmp / "rolled-back", "ids")
    assert min(first) == 1 and max(first) == 7 and min(restarted) == 6
    weights = [line.split() for line in (ray_tmp / "rolled-back" / "weights-rank0.txt").read_text().splitlines()]
    saved = {int(step): digest for _, event, step, digest in weights if event == "saved"}
    assert [(event, int(step), digest) for _, event, step, digest in weights if event == "restored"] == [
        ("restored", 5, saved[5])]
