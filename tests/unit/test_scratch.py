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
