"""File modes for what the project writes: the modes a plain mkdir and open would give, read from the umask."""

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
