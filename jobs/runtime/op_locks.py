"""What a process needs before DeepSpeed loads its JIT-compiled ops (`before_op_loads`): no stale build lock in
torch's extension cache, and one py-cpuinfo answer for every op.

Stale build locks in torch's JIT extension cache, where DeepSpeed's CPU and CUDA ops are compiled.

torch builds an op under a lock file (`<cache>/<python and device>/<op>/lock`, its FileBaton) and every
other process that needs the op waits until the file is gone. A build that is killed (a SIGKILLed worker,
a cancelled job) leaves the file behind, and from then on every process that loads that op, on that
machine, waits forever with nothing on the console. Before DeepSpeed loads its ops an engine calls
`clear_stale_locks`: a lock older than any build takes is removed, with a warning that says so; a younger
one is named, so that a job that waits on it says on what.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

STALE_AFTER_S = 20 * 60  # DeepSpeed's ops build in 1-3 minutes on CPU and about as long with CUDA
log = logging.getLogger("bert_foundry.train")


def extensions_root() -> Path:
    from torch.utils.cpp_extension import get_default_build_root

    return Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())


def clear_stale_locks(root: Path | None = None, stale_after_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove build locks older than `stale_after_s` under `root` (torch's extension cache); returns them."""
    root = extensions_root() if root is None else root
    removed, now = [], time.time()
    for lock in sorted(root.glob("*/*/lock")) + sorted(root.glob("*/lock")):
        try:
            age = now - lock.stat().st_mtime
            if age > stale_after_s:
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
    clear_stale_locks()
    remember_cpu_info()


def remember_cpu_info() -> None:
    """DeepSpeed names each CPU op's build by its compiler flags and asks py-cpuinfo for two of them (-march,
    SIMD width) at every load of FusedAdam or CPUAdam, and CPUAdam's constructor asks once more; each answer runs
    a Python subprocess (1.1 s wall, measured here). The CPU does not change while a process lives: the first
    answer is kept (DeepSpeed imports `get_cpu_info` from the module at each call)."""
    import functools

    try:
        import cpuinfo
    except ImportError:  # DeepSpeed then reads lscpu instead
        return
    if not hasattr(cpuinfo.get_cpu_info, "cache_info"):
        cpuinfo.get_cpu_info = functools.cache(cpuinfo.get_cpu_info)
