"""File modes for what the project writes (the modes a plain mkdir and open would give, read from the umask),
whether the process a left-over folder names still runs (scratch folders, a corpus's build folder), and where a
killed atomic write (checkpoint.atomic_dir) left a folder's last whole copy."""

from __future__ import annotations

import glob
import os
from pathlib import Path


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


def moved_aside(out_dir: Path) -> Path | None:
    """The latest copy of a missing `out_dir` that a killed write left under `.NAME.old-*/` (None: none, or the
    folder is there)."""
    if out_dir.exists():
        return None
    aside = sorted(out_dir.parent.glob(f".{glob.escape(out_dir.name)}.old-*/{glob.escape(out_dir.name)}"),
                   key=lambda p: p.stat().st_mtime)
    return aside[-1] if aside else None


def moved_aside_said(folder: str | os.PathLike) -> str:
    """For the error of a reader that finds `folder` missing: where a write killed between atomic_dir's two renames
    left its last whole copy ("; ... at PATH: ..."), else "". A reader says so and moves nothing: a rename of its own
    could land in
    a live write's gap, and that write would then fail to rename its new copy in."""
    folder = Path(folder)
    aside = moved_aside(folder) if folder.parent.is_dir() else None
    return (f"; a write killed while replacing it left its last whole copy at {aside}: the next write of "
            f"{folder.name} puts it back, or move it there yourself") if aside else ""
