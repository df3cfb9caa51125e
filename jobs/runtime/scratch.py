"""Scratch folders that do not outlive their process, even one that is SIGKILLed.

Ray ends Train workers, Tune trials and actor-pool workers without running their cleanup (`weakref.finalize`,
`atexit` and `finally` blocks are skipped), so a temporary folder a worker made for its starting checkpoint
stayed behind in /tmp: ~90 MB per fine-tuning worker, about 47 GB after a day of test runs on one machine.

A scratch folder is named after the host and the process that made it
(`<tmp>/bert-foundry-scratch-<uid>/<prefix>-<host>-<pid>-<random>`), and each new one first removes the folders of
this host's processes that no longer run. What a killed process leaves is therefore gone at the next start of any
worker on that machine; a live process's folders are never touched. The root is the user's own (mode 0700, refused
if another user owns it or it is a link): one root for all made a second user's jobs fail, and let one user swap
another's folders.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import weakref
from pathlib import Path

from bert_core.files import alive


def root() -> Path:
    return Path(tempfile.gettempdir()) / f"bert-foundry-scratch-{os.getuid()}"


def _own_root(under: Path) -> None:
    """`under` made (0700) or found as this user's own folder; raises if another user owns it or it is a link."""
    under.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = under.lstat()
    if under.is_symlink() or info.st_uid != os.getuid():
        raise PermissionError(f"scratch root {under} is not a folder of this user (uid {os.getuid()}): remove it, or "
                              "set TMPDIR to a folder of your own")


def _host() -> str:
    return "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40] or "host"


def sweep(under: Path | None = None) -> list[Path]:
    """Remove the scratch folders of this host's processes that have exited; returns them."""
    under = root() if under is None else under
    host, removed = f"-{_host()}-", []
    for d in sorted(under.glob(f"*{host}*")) if under.is_dir() else []:
        pid = d.name.split(host, 1)[1].split("-", 1)[0]
        if pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def scratch_dir(prefix: str, owner: object | None = None, under: Path | None = None) -> Path:
    """A new empty folder for this process, removed when `owner` is collected (if given), when the process ends
    normally, or, if it is killed, by the next scratch_dir call on this host."""
    under = root() if under is None else under
    _own_root(under)
    sweep(under)
    d = Path(tempfile.mkdtemp(prefix=f"{prefix}-{_host()}-{os.getpid()}-", dir=under))
    if owner is not None:
        weakref.finalize(owner, shutil.rmtree, d, ignore_errors=True)  # also runs at a normal exit
    else:
        atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d
