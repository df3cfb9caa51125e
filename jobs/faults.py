"""Fault injection for the resume and rollback tests, in one place the training loop consults.

The switches are train.fail_at_step (with train.fail_in_checkpoint), train.nan_at_step and
train.nan_micro_batches (all 0 = off, the production default), and the sweep's kill_trial_at_step. Production code paths only ask `nan_now`,
`maybe_fail` and `maybe_kill_trial`; nothing else in the loops or the engine knows about faults (the
engine's `step(inject_nan=...)` takes the answer).
"""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

from jobs.config import TrainConfig


class Faults:
    def __init__(self, train: TrainConfig, rank: int, world: int, run_name: str):
        self.t, self.rank, self.world, self.run_name = train, rank, world, run_name
        self.nan_injected = 0

    def nan_now(self, step: int, rollbacks: int) -> bool:
        """train.nan_at_step: rank 0's loss is NaN for train.nan_micro_batches, before any rollback.
        `step` is the number of optimizer steps taken so far."""
        t = self.t
        if (not t.nan_at_step or self.rank != 0 or rollbacks or step + 1 < t.nan_at_step
                or self.nan_injected >= t.nan_micro_batches):
            return False
        self.nan_injected += 1
        return True

    def maybe_fail(self, step: int, in_checkpoint: bool = False) -> None:
        """train.fail_at_step kills rank 1's process (SIGKILL, as a dead node would) on the first attempt: after
        the step, or with train.fail_in_checkpoint once it has written its shard of that step's checkpoint and
        before it reports it (the other ranks are then writing or reporting theirs)."""
        if (self.t.fail_at_step and step == self.t.fail_at_step and in_checkpoint == self.t.fail_in_checkpoint
                and self.rank == min(1, self.world - 1)):
            marker = Path(self.t.record_ids_dir or tempfile.gettempdir()) / f"failed-{self.run_name}"
            sigkill_once(marker, str(os.getpid()))


def maybe_kill_trial(data: dict, step: int, trial_id: str) -> None:
    """The sweep's kill_trial_at_step (in the trial's shared `data`): SIGKILL the first trial's process in the
    search phase after that step, once, as a lost node or an OOM kill would; Tune restarts it."""
    if step == data.get("kill_trial_at_step") and data.get("phase") == "search" and trial_id.endswith("_00000"):
        sigkill_once(Path(data["kill_marker"]), trial_id)


def sigkill_once(marker: Path, note: str) -> None:
    """SIGKILL this process, as a dead node would, unless `marker` says it was done before (so the restarted
    attempt goes on); the marker holds `note`."""
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(note)
        os.kill(os.getpid(), signal.SIGKILL)
