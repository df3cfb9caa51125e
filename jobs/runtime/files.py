"""Files written whole or not at all: a reader (another process, the next run) never sees half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bert_core.files import umask


def write_atomic(path: Path, data: bytes) -> None:
    """`data` at `path`, whole or not at all: a unique temporary file beside it, flushed to disk, then a rename.
    The file gets the mode a plain open would (the umask's), not mkstemp's 0600: predictions and manifests on
    shared storage are read by other users."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """The rename to disk too: after a power loss right after it, the folder could otherwise hold the old file."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # a filesystem that takes no fsync of a folder (some network mounts)
        pass
    finally:
        os.close(fd)
