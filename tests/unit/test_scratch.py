"""Scratch folders (jobs/runtime/scratch.py): a SIGKILLed process's folder is removed by the next scratch_dir on the
host, a live process's is kept, and an owner's folder goes with the owner."""

import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from jobs.runtime.scratch import scratch_dir

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import sys, time
from pathlib import Path
from jobs.runtime.scratch import scratch_dir
d = scratch_dir("ft-init", under=Path(sys.argv[1]))
(d / "model.safetensors").write_bytes(b"x" * 1024)
print(d, flush=True)
time.sleep(600)
"""


def _child(under: Path) -> tuple[subprocess.Popen, Path]:
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(under)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    return p, Path(p.stdout.readline().strip())


def test_killed_process_folder_is_removed_and_live_one_kept(tmp_path):
    killed, killed_dir = _child(tmp_path)
    live, live_dir = _child(tmp_path)
    try:
        os.kill(killed.pid, signal.SIGKILL)  # no cleanup runs, as when Ray kills a worker
        killed.wait(timeout=30)
        assert killed_dir.is_dir() and live_dir.is_dir()
        mine = scratch_dir("ft-best", under=tmp_path)
        assert not killed_dir.exists()
        assert live_dir.is_dir() and (live_dir / "model.safetensors").is_file()
        assert mine.is_dir() and str(os.getpid()) in mine.name
    finally:
        live.kill()
        live.wait(timeout=30)


def test_owner_collected_removes_its_folder(tmp_path):
    class Owner:
        pass

    owner = Owner()
    d = scratch_dir("predict-model", owner, under=tmp_path)
    (d / "f").write_text("x")
    del owner
    gc.collect()
    time.sleep(0.1)
    assert not d.exists()


def test_the_root_is_this_users_own(tmp_path):
    """One root for every user (created 0755 by the first) made another user's scratch_dir fail, and a root another
    user made could have its folders swapped: each user has a root of their own, made 0700, and one owned by
    someone else, or a link, is refused."""
    import pytest

    from jobs.runtime.scratch import root

    assert root().name == f"bert-foundry-scratch-{os.getuid()}"
    mine = tmp_path / "mine"
    scratch_dir("x", under=mine)
    assert mine.stat().st_mode & 0o777 == 0o700
    (tmp_path / "link").symlink_to(mine)
    with pytest.raises(PermissionError, match="is not a folder of this user"):
        scratch_dir("x", under=tmp_path / "link")
    if os.getuid() == 0:  # root can make a folder another user owns
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        with pytest.raises(PermissionError, match="is not a folder of this user"):
            scratch_dir("x", under=theirs)
