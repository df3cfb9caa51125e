"""Non-finite losses: skip and count them; after `train.rollback_after` in a row, roll back.

A micro-batch whose loss is NaN or inf on any rank is skipped on every rank (no backward, no optimizer
step: the engine's step counters never see it), so one bad batch costs one batch. A run of them means
the weights or optimizer state are already poisoned, and skipping cannot help: the loop then raises
`NonFiniteLossError`, which Ray Train's failure handling (`train.max_failures`) answers by restarting
the worker group from the last checkpoint. The `RollbackLedger` actor, created by the driver, outlives
the worker group and tells the restarted workers to train on at `rollback_lr_factor` times the learning
rate (compounding over rollbacks). Every rollback is one of the run's `max_failures`.
"""

from __future__ import annotations

import math
import uuid

import ray


class NonFiniteLossError(RuntimeError):
    """Raised on every rank at once; Ray Train restarts the workers from the last checkpoint."""


@ray.remote(num_cpus=0)
class Verdict:
    """Why a run must end, which no restart can change: a fine-tune's weights that diverged diverge again from the
    same checkpoint at the same learning rate. Its workers set it and return (an error would be retried
    train.max_failures times, each retraining up to the same step); the driver reads it after `fit` and raises.
    It also counts each rank's starts in this submission: the worker-group restarts survived (a count carried in
    checkpoints missed the failures that came before the next one was written)."""

    def __init__(self):
        self._why = ""
        self._starts: dict[int, int] = {}

    def started(self, rank: int) -> int:
        """This rank's starts so far, this one included."""
        self._starts[rank] = self._starts.get(rank, 0) + 1
        return self._starts[rank]

    def set(self, why: str) -> None:
        self._why = self._why or why

    def get(self) -> str:
        return self._why


@ray.remote(num_cpus=0)
class RollbackLedger:
    """The rollbacks of one Ray Train run, kept outside the workers so a restart can read them."""

    def __init__(self):
        self._rollbacks: list[dict] = []

    def record(self, step: int, lr_factor: float) -> None:
        # an id of its own: checkpoints carry the rollbacks to a resubmitted job (whose ledger starts empty), and a
        # restart within this job finds them in its checkpoint and here (jobs/workers/pretrain_worker.py)
        self._rollbacks.append({"id": uuid.uuid4().hex, "step": step, "lr_factor": lr_factor})

    def rollbacks(self) -> list[dict]:
        return list(self._rollbacks)


def lr_scale(rollbacks: list[dict]) -> float:
    """The learning rate's factor after `rollbacks` (compounding)."""
    return math.prod(r["lr_factor"] for r in rollbacks)


class LossGuard:
    """Counts non-finite micro-batches; says when a streak has reached the rollback threshold."""

    def __init__(self, rollback_after: int, skipped: int = 0):
        self.rollback_after = rollback_after  # 0 = skip forever, never roll back
        self.skipped = skipped  # in this run's lineage (restored from the checkpoint)
        self.streak = 0

    def observe(self, stats) -> bool:
        """Record an engine step's result (jobs/engine/seam.StepStats); True when the run must roll back now. A
        pipeline's step is all its micro-batches, finite or not together: its micro-batches count as skipped, and
        the step as one toward the streak (one NaN micro-batch of eight is one bad result, as it is in data
        parallel). A micro-batch it only buffered is no result yet (micro_batches 0) and breaks no streak: with
        grad_accum_steps >= 2 the buffered ones reset it before every step, and a diverged pipeline run never rolled
        back."""
        if stats.finite:
            self.streak = 0 if stats.micro_batches else self.streak
            return False
        self.skipped += max(stats.micro_batches, 1)
        self.streak += 1
        return bool(self.rollback_after) and self.streak >= self.rollback_after
