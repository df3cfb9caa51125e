"""What a process needs before DeepSpeed loads its JIT-compiled ops (`before_op_loads`): no build lock left by a
killed build in torch's extension cache, a cache and a `ninja` of this Python environment's own, and one py-cpuinfo
answer per CPU, kept beside the ops.

torch builds an op under a lock file (`<cache>/<python and device>/<op>/lock`, its FileBaton) and every
other process that needs the op waits until the file is gone. A build that is killed (a SIGKILLed worker,
a cancelled job) leaves the file behind, and from then on every process that loads that op, on that
machine, waits forever with nothing on the console. So:

- `HolderBaton` (installed by `before_op_loads` in place of torch's FileBaton) writes the building process's host,
  pid and start (in clock ticks since boot) into the lock, and a process waiting on a lock whose holder on this
  host has died (or whose pid is now another process's), or whose holder elsewhere has held it longer than any
  build takes, stops waiting with an error that says so, instead of forever;
- `clear_stale_locks`, called before DeepSpeed loads its ops, removes a lock whose holder on this host is gone
  (the next job builds the op at once), and a lock of unknown holder (written by a plain torch) once it is older
  than any build takes; a lock of a live build is named, so that a job that waits on it says on what.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import socket
import sys
import time
from pathlib import Path

from torch.utils.file_baton import FileBaton

from jobs.runtime.files import write_atomic
from bert_core.files import alive

STALE_AFTER_S = 20 * 60  # DeepSpeed's ops build in 1-3 minutes on CPU and about as long with CUDA
log = logging.getLogger("bert_foundry.train")


def extensions_root() -> Path:
    """Where torch builds and finds DeepSpeed's ops: TORCH_EXTENSIONS_DIR when set; else inside this Python
    environment (`<venv>/torch_extensions`), so two checkouts, each with its own environment, never rebuild or lock
    each other's ops (torch's default, one folder per user, is shared by all of them); torch's default only where
    the environment is read-only (a system Python in an image)."""
    if os.environ.get("TORCH_EXTENSIONS_DIR"):
        return Path(os.environ["TORCH_EXTENSIONS_DIR"])
    if (own := _environment_cache()) is not None:
        return own
    from torch.utils.cpp_extension import get_default_build_root

    return Path(get_default_build_root())


def _environment_cache() -> Path | None:
    """`<venv>/torch_extensions`, or None where the environment is read-only."""
    return Path(sys.prefix) / "torch_extensions" if os.access(sys.prefix, os.W_OK) else None


def use_environment_cache() -> None:
    """Point torch's JIT builds at the environment's own cache in this process and the processes it starts (a
    TORCH_EXTENSIONS_DIR already set is kept)."""
    if not os.environ.get("TORCH_EXTENSIONS_DIR") and (own := _environment_cache()) is not None:
        os.environ["TORCH_EXTENSIONS_DIR"] = str(own)


def use_environment_ninja() -> None:
    """Put the `ninja` of this environment's `ninja` package (which DeepSpeed requires) first on PATH for torch's
    builds, in this process and the processes it starts. torch runs the first `ninja` on PATH, and two ninjas of
    different versions (here the package's 1.13 and the system's 1.11) hash a build's commands differently: each
    takes the other's build for a stale one and rebuilds the op, 25-35 s each, whenever a job started without the
    environment on PATH (`make`, `python jobs/...`) follows one started with it (`ray job submit`, an activated
    environment). Without the package (a system ninja only) PATH is left as it is."""
    try:
        import ninja  # the pip package: its binary's folder, the environment's scripts folder
    except ImportError:
        return
    bin_dir = ninja.BIN_DIR
    path = os.environ.get("PATH", os.defpath)
    if os.path.isfile(os.path.join(bin_dir, "ninja")) and path.split(os.pathsep)[0] != bin_dir:
        os.environ["PATH"] = os.pathsep.join([bin_dir, path])


def _host() -> str:
    return socket.gethostname()


def _holder_fields(lock: Path) -> tuple[str, int, int | None] | None:
    """(host, pid, start ticks or None) the lock names: "host pid ticks" (HolderBaton's), "host pid" (before the
    ticks were written); None for any other content."""
    try:
        fields = Path(lock).read_text().split()
        if len(fields) not in (2, 3):
            return None
        return fields[0], int(fields[1]), int(fields[2]) if len(fields) == 3 else None
    except (OSError, ValueError):
        return None


def holder(lock: Path) -> tuple[str, int] | None:
    """(host, pid) of the process building under `lock`, or None if the lock does not name one."""
    h = _holder_fields(lock)
    return None if h is None else h[:2]


def holder_gone(lock: Path) -> bool:
    """Whether `lock` names a process of this host that no longer runs: gone, or its pid now another process's (a
    container restarted under its hostname numbers its processes from 1 again, and a busy node reuses pids). The
    lock names its builder's start in the kernel's clock ticks since boot, which no wall clock moves (an NTP step,
    a file server's clock behind: a live build judged killed, its lock removed under it); a lock without them (an
    older writer's) is another process's when that one started after the lock was written."""
    h = _holder_fields(lock)
    if h is None or h[0] != _host():
        return False
    if not alive(h[1]):
        return True
    ticks = _start_ticks(h[1])
    if h[2] is not None and ticks is not None:
        return ticks != h[2]
    started = _started(h[1])
    return started is not None and started > Path(lock).stat().st_mtime + 1


def _start_ticks(pid: int) -> int | None:
    """Process `pid`'s start, in clock ticks since boot (/proc/<pid>/stat field 22); None where it cannot tell."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _started(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), from /proc; None where it cannot tell."""
    try:
        ticks = _start_ticks(pid)
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return None if ticks is None else boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def stale_elsewhere(lock: Path, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether `lock` names no holder, or one on another host (whose life this host cannot see), and is older than
    any build takes."""
    h = holder(lock)
    return (h is None or h[0] != _host()) and time.time() - Path(lock).stat().st_mtime > stale_after_s


class HolderBaton(FileBaton):
    """torch's build lock, with the builder's host and pid in the file, and a wait that ends if the builder dies."""

    def try_acquire(self) -> bool:
        acquired = bool(super().try_acquire())
        if acquired:
            ticks = _start_ticks(os.getpid())
            Path(self.lock_file_path).write_text(f"{_host()} {os.getpid()}{'' if ticks is None else f' {ticks}'}\n")
        return acquired

    def wait(self) -> None:
        while os.path.exists(self.lock_file_path):
            try:
                gone, stale = holder_gone(Path(self.lock_file_path)), stale_elsewhere(Path(self.lock_file_path))
            except FileNotFoundError:  # the build finished (or another waiter removed it) as this looked
                continue
            if gone or stale:  # a build on another host dead since this began waiting: the age rule, as before loads
                who = holder(Path(self.lock_file_path)) or ("", "unknown")  # another waiter may have removed it
                try:
                    os.remove(self.lock_file_path)
                except FileNotFoundError:
                    pass
                raise RuntimeError(f"the build this process waited on was killed (pid {who[1]} held "
                                   f"{self.lock_file_path}{'' if gone else f', older than {STALE_AFTER_S // 60} min'}"
                                   "); the lock is removed: the next load builds the op")
            time.sleep(self.wait_seconds)


def install_holder_baton() -> None:
    """Make torch's JIT builds (DeepSpeed's ops) lock with HolderBaton in this process."""
    import torch.utils.cpp_extension as cpp_extension

    cpp_extension.FileBaton = HolderBaton


def clear_stale_locks(root: Path | None = None, stale_after_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove, under `root` (torch's extension cache), the build locks whose holder on this host is gone and those
    of unknown holder older than `stale_after_s`; returns them."""
    root = extensions_root() if root is None else root
    removed, now = [], time.time()
    for lock in sorted(root.glob("*/*/lock")) + sorted(root.glob("*/lock")):
        try:
            age, held_by = now - lock.stat().st_mtime, holder(lock)
            if holder_gone(lock):
                lock.unlink()
                removed.append(lock)
                log.warning(f"[deepspeed] removed {lock}: the build that held it (pid {held_by[1]}) was killed, and "
                            "every load of that op would have waited on it")
            elif stale_elsewhere(lock, stale_after_s):  # another host: age only
                lock.unlink()
                removed.append(lock)
                log.warning(f"[deepspeed] removed {lock}, a build lock {age / 60:.0f} min old: a killed build "
                            "left it, and every load of that op would have waited on it forever")
            else:
                log.warning(f"[deepspeed] {lock} is {age:.0f} s old: another process is building that op; a "
                            f"load waits for it (if nothing is building, delete the file)")
        except FileNotFoundError:  # another rank on this node removed it, or the build finished
            continue
    return removed


def before_op_loads() -> None:
    """Call before DeepSpeed loads (and perhaps builds) its ops: in every engine's process, once per engine."""
    use_environment_cache()
    use_environment_ninja()
    install_holder_baton()
    clear_stale_locks()
    remember_cpu_info()


def remember_cpu_info(root: Path | None = None) -> None:
    """DeepSpeed names each CPU op's build by its compiler flags and asks py-cpuinfo for two of them (-march,
    SIMD width) at every load of FusedAdam or CPUAdam, and CPUAdam's constructor asks once more; each answer runs
    a Python subprocess (about 2 CPU-seconds here, in every worker of every job). The answer depends on the CPU
    alone: the first one is kept for the process (DeepSpeed imports `get_cpu_info` from the module at each call)
    and on disk beside the ops it built (`<extensions_root>/cpuinfo/<cpu key>.json`), so later processes on a
    machine with this CPU ask no one."""
    import functools

    try:
        import cpuinfo
    except ImportError:  # DeepSpeed then reads lscpu instead
        return
    if hasattr(cpuinfo.get_cpu_info, "cache_info"):
        return
    ask = cpuinfo.get_cpu_info
    folder = (extensions_root() if root is None else root) / "cpuinfo"

    @functools.cache
    def get_cpu_info() -> dict:
        key = cpu_key()
        if key is None:  # no /proc/cpuinfo to name the CPU by: this process's answer only
            return ask()
        path = folder / f"{key}.json"
        try:
            info = json.loads(path.read_text())
            if complete(info):
                return info
        except (OSError, ValueError):  # not yet asked on this CPU, or an unreadable file
            pass
        info = ask()
        if complete(info):  # a failed ask answers {} (py-cpuinfo's child died): never kept, asked again next time
            _write_atomic(path, json.dumps(info))
        return info

    get_cpu_info.__wrapped__ = ask
    cpuinfo.get_cpu_info = get_cpu_info


def complete(info: dict) -> bool:
    """Whether a py-cpuinfo answer holds what DeepSpeed reads (`arch` outside any try, and `flags`)."""
    return isinstance(info, dict) and bool(info.get("arch")) and "flags" in info


def _write_atomic(path: Path, text: str) -> None:
    """`text` into `path` whole or not at all; a cache that cannot be written (read-only) is left as it is: the next
    process asks again."""
    try:
        write_atomic(path, text.encode())
    except OSError:
        pass


# The /proc/cpuinfo fields that name a CPU's model and features, on x86 (vendor_id .. flags), Arm (Features, CPU
# ...), POWER (cpu, revision) and RISC-V (isa); per-core fields (processor, cpu MHz, apicid) are left out.
CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags", "Features", "CPU implementer",
              "CPU architecture", "CPU variant", "CPU part", "CPU revision", "cpu", "revision", "isa")


def cpu_key() -> str | None:
    """A name for this machine's CPU model and features (what py-cpuinfo's answer depends on); None where there is
    no /proc/cpuinfo."""
    import cpuinfo

    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    return cpu_key_of(text, platform.machine(), getattr(cpuinfo, "CPUINFO_VERSION_STRING", ""))


def cpu_key_of(cpuinfo_text: str, machine: str, version: str) -> str:
    """A hash of /proc/cpuinfo's identifying fields (CPU_FIELDS, each distinct line once: the core count does not
    change it), the machine type and py-cpuinfo's version."""
    fields = sorted({line.strip() for line in cpuinfo_text.splitlines()
                     if line.split(":")[0].strip() in CPU_FIELDS})
    fields.append(f"py-cpuinfo {version} {machine}")
    return hashlib.sha256("\n".join(fields).encode()).hexdigest()[:16]
