"""File modes for what the project writes (the modes a plain mkdir and open would give, read from the umask), and
whether the process a left-over folder names still runs (scratch folders, a corpus's build folder)."""

from __future__ import annotations

import os


def umask() -> int:
    """The process's umask, read without setting it (os.umask sets it, and a thread creating a file meanwhile
    would get the temporary one); os.umask where /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            return int(next(line.split()[1] for line in f if line.startswith("Umask:")), 8)
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def alive(pid: int) -> bool:
    """Whether process `pid` of this host (and pid namespace) runs; a zombie counts until reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
