"""A folder one job writes at a time: its lease, an exclusive flock on <folder>/.lease naming the holder.

Two jobs on one folder (overlapping cron runs, a CI retry while the first attempt still runs) would each take the
other's files for their own: a second prediction job cleared the first's shard in flight, and a second training job
on a run_name "continued" from the first's checkpoint while both wrote one Ray Train folder. The second is refused at
once, naming the holder. The kernel releases the lock when its holder exits, killed outright (SIGKILL, OOM) too, so
a rerun after a crash goes on at once: no stale lock file to remove by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path

from bert_core.config import ConfigError

LEASE = ".lease"


class LeaseHeld(RuntimeError):
    """Another live job holds the folder's lease; its text says who (pid, host, since when)."""


@contextlib.contextmanager
def lease(folder: Path, job: str):
    """Hold `folder`'s lease while the block runs: an exclusive flock on <folder>/.lease, which the kernel releases
    when the holder exits. A second holder is refused at once (LeaseHeld). Storage that takes no lock is said (the
    `[job]` line) and written unguarded. The file stays: unlinking it would let a process that opened the old file
    lock it beside a new one."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LEASE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LeaseHeld(os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "a job") from None
        except OSError as e:  # storage without locks (Lustre without flock, NFS mounted nolock): ENOLCK, ENOSYS, ...
            print(f"[{job}] {folder}: its storage takes no lock ({e.strerror}): a second job started on this "
                  "folder now would not be refused", flush=True)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}"
                  .encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def run_lease(storage: str, run_name: str, job: str, field: str = "run_name"):
    """A training job's lease on its run folder, <storage>/<run_name> (the folder Ray Train or Tune writes and
    jobs/runtime/resubmit.py reads), held from before the resubmission checks to the job's end: a second job on the
    same name would continue from the first's checkpoint while both write there. Refused with a ConfigError naming
    the folder and the holder, before any Ray work. Storage at a URI (s3://, gs://) takes no lock: said, not
    refused."""
    if "://" in storage:
        print(f"[{job}] {storage.rstrip('/')}/{run_name}: storage at a URI takes no lock: a second job started on "
              f"this {field} now would not be refused", flush=True)
        yield
        return
    folder = Path(storage).resolve() / run_name
    held = contextlib.ExitStack()
    try:
        held.enter_context(lease(folder, job))
    except LeaseHeld as holder:
        raise ConfigError(f"{field}={run_name!r}: another job is running on {folder} ({holder}): wait for it to "
                          f"end, or give another {field}") from None
    with held:
        yield
