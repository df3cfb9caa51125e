"""Fault injection for the resume, rollback and trial-restart tests: the `faults:` section of every job's config
and the one place the loops and workers consult it. Testing only: every field defaults to off, and a
production config never sets one.

Production code paths only ask `nan_now`, `maybe_fail`, `upload_fn` and `maybe_kill_trial`; nothing else
in the loops or the engine knows about faults (the engine's `step(inject_nan=...)` takes the answer).
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from dataclasses import dataclass, fields
from pathlib import Path

from bert_core.config import ConfigError
from jobs.engine.checkpoint_parts import checkpoint_folders, registered_checkpoints

FAULT_POINTS = ("", "write", "upload")  # where faults.fail_at_step kills: after the step, or in its checkpoint


@dataclass
class FaultsConfig:
    """Testing only: faults a test injects to prove a recovery path. 0 / "" = off, the production default."""

    fail_at_step: int = 0  # pretrain, finetune: SIGKILL one worker (rank 1, else 0) at this step, first attempt only
    fail_in_checkpoint: str = ""  # pretrain: ... in that step's checkpoint: "write" (its part written, not
    #                               reported) or "upload" (half-way through copying its part); "" = after the step
    nan_at_step: int = 0  # pretrain: rank 0's loss is NaN from this step on, first attempt only
    nan_micro_batches: int = 0  # pretrain: ... for this many micro-batches
    record_ids_dir: str = ""  # pretrain: each rank appends the example ids (and weight digests) of every step here
    kill_trial_at_step: int = 0  # sweep: SIGKILL the first search trial's process after this step, once

    # the fields each job reads; one set elsewhere would silently do nothing, so validate refuses it
    USED = {"pretrain": ("fail_at_step", "fail_in_checkpoint", "nan_at_step", "nan_micro_batches", "record_ids_dir"),
            "finetune": ("fail_at_step",), "sweep": ("kill_trial_at_step",)}

    def validate(self, job: str, checkpoint_every: int = 0) -> "FaultsConfig":
        """`job`: pretrain | finetune | sweep. `checkpoint_every`: pretraining's train.checkpoint_every."""
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default and f.name not in self.USED[job]:
                raise ConfigError(f"faults.{f.name} does not apply to {job} (set {value!r}); allowed in {job}: "
                                  f"{', '.join(f'faults.{n}' for n in self.USED[job])}")
            if isinstance(value, int) and value < 0:
                raise ConfigError(f"faults.{f.name} must be >= 0, got {value}")
        if bool(self.nan_at_step) != bool(self.nan_micro_batches):  # either alone injects nothing
            raise ConfigError(f"faults.nan_at_step and faults.nan_micro_batches go together (NaN on rank 0 from that "
                              f"step, for that many micro-batches), got nan_at_step={self.nan_at_step} and "
                              f"nan_micro_batches={self.nan_micro_batches}: set both, or neither")
        if self.fail_in_checkpoint not in FAULT_POINTS:
            raise ConfigError(f"faults.fail_in_checkpoint must be 'write', 'upload' or '' (after the step), "
                              f"got {self.fail_in_checkpoint!r}")
        if self.fail_in_checkpoint and not (self.fail_at_step and checkpoint_every
                                            and self.fail_at_step % checkpoint_every == 0):
            raise ConfigError(f"faults.fail_in_checkpoint needs faults.fail_at_step on a checkpoint step (a multiple "
                              f"of train.checkpoint_every={checkpoint_every}), got {self.fail_at_step}")
        return self


class Faults:
    def __init__(self, faults: FaultsConfig, rank: int, world: int, run_name: str, marker_dir: Path | None = None,
                 registered_in: Path | None = None):
        """`faults`: the job's faults section. The marker that makes a kill happen once goes to `marker_dir` (the
        jobs pass their run or output folder, on storage every node sees: a restarted rank on another node finds it,
        and a new run of the name starts without it), else faults.record_ids_dir, else the temp folder. With
        `registered_in` (a Ray Train run folder) a kill first waits until Ray Train has registered every checkpoint
        reported there, so the restart resumes from the last one (fine-tuning's test asks exactly that). Without it
        the kill can beat the controller's poll of the last report (pretraining's test)."""
        self.t, self.rank, self.world, self.run_name = faults, rank, world, run_name
        self.registered_in = registered_in
        self.point = faults.fail_in_checkpoint
        self.marker_dir = marker_dir or Path(faults.record_ids_dir or tempfile.gettempdir())
        self.nan_injected = 0

    def nan_now(self, step: int, rollbacks: int) -> bool:
        """faults.nan_at_step: rank 0's loss is NaN for faults.nan_micro_batches, before any rollback.
        `step` is the number of optimizer steps taken so far."""
        t = self.t
        if (not t.nan_at_step or self.rank != 0 or rollbacks or step + 1 < t.nan_at_step
                or self.nan_injected >= t.nan_micro_batches):
            return False
        self.nan_injected += 1
        return True

    def _armed(self, step: int, point: str) -> bool:
        return (bool(self.t.fail_at_step) and step == self.t.fail_at_step and point == self.point
                and self.rank == min(1, self.world - 1))

    @property
    def _marker(self) -> Path:
        return self.marker_dir / f"failed-{self.run_name}"

    def maybe_fail(self, step: int, point: str = "") -> None:
        """faults.fail_at_step kills rank 1's process (SIGKILL, as a dead node would) on the first attempt: after
        the step, or with faults.fail_in_checkpoint="write" once it has written its part of that step's
        checkpoint and before it reports it (the other ranks are then writing or reporting theirs)."""
        if self._armed(step, point):
            if self.registered_in and not self._marker.exists():
                wait_until_registered(self.registered_in)
            sigkill_once(self._marker, str(os.getpid()))

    def upload_fn(self, step: int, run_dir: Path):
        """The report's `checkpoint_upload_fn`: None (Ray's own upload) unless faults.fail_in_checkpoint="upload"
        arms this step, where rank 1 copies its part into the run's checkpoint folder file by file, as Ray's
        copy does, and is SIGKILLed half-way: the folder is left partial, its report never completes."""
        if not self._armed(step, "upload") or self._marker.exists():
            return None
        marker = self._marker

        def copy_half_then_die(checkpoint, checkpoint_dir_name: str):
            import pyarrow.fs

            src = Path(checkpoint.path)
            files = sorted(p for p in src.rglob("*") if p.is_file())
            for path in files[:len(files) // 2]:
                dest = run_dir / checkpoint_dir_name / path.relative_to(src)
                dest.parent.mkdir(parents=True, exist_ok=True)
                pyarrow.fs.copy_files(str(path), str(dest))
            sigkill_once(marker, str(os.getpid()))

        return copy_half_then_die


def maybe_kill_trial(faults: FaultsConfig, step: int, trial_id: str, phase: str, marker: Path) -> None:
    """faults.kill_trial_at_step (the sweep's): SIGKILL the first trial's process in the search phase after that
    step, once (`marker` remembers it), as a lost node or an OOM kill would; Tune restarts it."""
    if step == faults.kill_trial_at_step and phase == "search" and trial_id.endswith("_00000"):
        sigkill_once(marker, trial_id)


def wait_until_registered(run_dir: Path, timeout_s: float = 120.0) -> None:
    """Block until Ray Train's checkpoint registry in `run_dir` lists every checkpoint folder there (it collects
    reports by polling the workers, so a report is registered a moment after `ray.train.report` returns)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if {d.name for d in checkpoint_folders(run_dir)} <= (registered_checkpoints(run_dir) or set()):
            return
        time.sleep(0.2)
    raise TimeoutError(f"Ray Train registered no checkpoint in {run_dir} within {timeout_s:.0f} s")


def sigkill_once(marker: Path, note: str) -> None:
    """SIGKILL this process, as a dead node would, unless `marker` says it was done before (so the restarted
    attempt goes on); the marker holds `note`."""
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(note)
        os.kill(os.getpid(), signal.SIGKILL)
