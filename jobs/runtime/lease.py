"""A folder one job writes at a time: its lease, an exclusive flock on <folder>/.lease naming the holder.

Two jobs on one folder (overlapping cron runs, a CI retry while the first attempt still runs) would each take the
other's files for their own: a second prediction job cleared the first's shard in flight, and a second training job
on a run_name "continued" from the first's checkpoint while both wrote one Ray Train folder. The second is refused at
once, naming the holder. The kernel releases the lock when its holder exits, killed outright (SIGKILL, OOM) too, so
a rerun after a crash goes on at once: no stale lock file to remove by hand.

What a lock guards depends on the storage, and these are not detected: NFS mounted `nolock` and FUSE mounts (gcsfuse)
lock on the local node only, so two jobs on two nodes are neither refused nor warned; on NFS with locks, a holder whose
node is lost (not only its process) keeps the lock until the server gives the node up (its lease, 90 s by default on
NFSv4; on NFSv3, until that node is back).
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
    """Another live job holds the folder's lease; its text says who (pid, host, since when), or that no one knows (a
    holder that could not write the file)."""


def _holder(fd: int) -> str:
    return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "holder unknown"


@contextlib.contextmanager
def lease(folder: Path, job: str):
    """Hold `folder`'s lease while the block runs: an exclusive flock on <folder>/.lease, which the kernel releases
    when the holder exits. A second holder is refused at once (LeaseHeld). Storage whose flock fails is said (the
    `[job]` line) and written unguarded; storage that locks on this node only is not detected (the module docstring).
    The file stays: unlinking it would let a process that opened the old file lock it beside a new one."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LEASE
    try:  # 0o666, the umask decides: in a team's output root (umask 002) the group's next job may write it too
        fd, writable = os.open(path, os.O_RDWR | os.O_CREAT, 0o666), True
    except PermissionError:  # another user's .lease, not writable by this one: flock needs no write access
        # the folder first: in one this user may not search (mode 0700), is_file() raises EACCES itself
        if not os.access(folder, os.W_OK | os.X_OK) or not path.is_file():
            raise _unusable(folder) from None
        try:
            fd, writable = os.open(path, os.O_RDONLY), False
        except PermissionError:
            raise _unreadable(path) from None
    named = False
    try:
        try:
            _lock_exclusive(fd)
        except BlockingIOError:
            raise LeaseHeld(_holder(fd)) from None
        except OSError as e:  # Lustre without flock: ENOSYS; NFS locks exclusively only a file open for writing: EBADF
            why = ("its storage takes no lock" if writable else
                   f"{path} is read-only for this user and its storage (NFS) locks it only shared")
            print(f"[{job}] {folder}: {why} ({e.strerror}): a second job started on this folder now would not be "
                  "refused", flush=True)
        if writable:  # a read-only holder names no one: each writer empties the file when it ends (not when killed)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                      f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}".encode(), 0)
            named = True
        yield
    finally:
        if named:
            os.ftruncate(fd, 0)  # else a later holder that may not write it would leave this job's name there
        os.close(fd)  # releases the lock


def _unusable(folder: Path) -> ConfigError:
    return ConfigError(f"{folder}: this user may not write in it (another user's run folder): the job could write no "
                       "checkpoint there; give another run_name or output_dir")


def _unreadable(path: Path) -> ConfigError:
    """No lock can be taken on a .lease this user may neither write nor read (another user's, mode 0600): whether
    that user's job still runs there cannot be known."""
    return ConfigError(f"{path} is another user's and this user may not read it: whether a job of theirs still runs "
                       "there cannot be known; give another run_name or output_dir, or ask them to make it readable")


def _lock_exclusive(fd: int, tries: int = 5, wait_s: float = 0.02) -> None:
    """flock(LOCK_EX | LOCK_NB), tried again for ~0.1 s: a --check's probe holds a shared lock for microseconds, a
    running job for its whole run; BlockingIOError where it is still held."""
    for i in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if i == tries - 1:
                raise
            time.sleep(wait_s)


def probe(folder: Path) -> None:
    """LeaseHeld while a job holds `folder`'s lease, and a ConfigError for a folder or .lease this user may not use, as
    lease() would be refused; nothing written, no folder made (no .lease: no job has held it). A shared lock taken
    and dropped at once: it needs only a read-only open, on NFS too. Storage whose flock fails passes: the run says
    so."""
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        raise _unusable(folder)
    try:
        fd = os.open(folder / LEASE, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return
    except PermissionError:
        raise _unreadable(folder / LEASE) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise LeaseHeld(_holder(fd)) from None
    except OSError:
        pass
    finally:
        os.close(fd)


def _refused(field: str, run_name: str, folder: Path, holder: LeaseHeld) -> ConfigError:
    return ConfigError(f"{field}={run_name!r}: another job holds the lease of {folder} (as last recorded there: "
                       f"{holder}): wait for it to end, or give another {field}")


@contextlib.contextmanager
def run_lease(storage: str, run_name: str, job: str, field: str = "run_name"):
    """A training job's lease on its run folder, <storage>/<run_name> (the folder Ray Train or Tune writes and
    jobs/runtime/resubmit.py reads), held from before the resubmission checks to the job's end: a second job on the
    same name would continue from the first's checkpoint while both write there. Refused with a ConfigError naming
    the folder and the holder, before any Ray work. `storage` is a folder path: the jobs refuse a URI before this
    (jobs/config/sections.py check_output_dir)."""
    folder = Path(storage).resolve() / run_name
    held = contextlib.ExitStack()
    try:
        held.enter_context(lease(folder, job))
    except LeaseHeld as holder:
        raise _refused(field, run_name, folder, holder) from None
    with held:
        yield


def probe_run_lease(storage: str, run_name: str, field: str = "run_name") -> None:
    """--check's look at run_lease: refused as the run would be while a job runs on `run_name`, without taking the
    lease or making the run folder. No run_name (the run makes a new, timestamped one) names no folder to probe."""
    if not run_name:
        return
    folder = Path(storage).resolve() / run_name
    try:
        probe(folder)
    except LeaseHeld as holder:
        raise _refused(field, run_name, folder, holder) from None
