"""A real DeepSpeed op build, killed while its compiler runs (SIGKILL to the whole process group, as when a job is
cancelled or its pod evicted), leaves torch's build lock behind; the next process that loads the op builds it at once
and says what it removed, instead of waiting on the dead build's lock with nothing on the console
(jobs/runtime/op_locks.py). The build goes to a fresh extension cache, so nothing here touches the environment's."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
COMPILERS = ("ninja", "c++", "g++", "gcc", "cc1plus", "cc")
LOAD = """
import os
os.environ["DS_ACCELERATOR"] = "cpu"
from jobs.runtime.op_locks import before_op_loads
before_op_loads()
from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder
ShareMemCommBuilder().load(verbose=False)
print("loaded", flush=True)
"""


def compiling(pid: int) -> bool:
    try:
        return any(c.name() in COMPILERS for c in psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return False


def test_a_build_killed_mid_way_does_not_block_the_next_load(tmp_path):
    cache = tmp_path / "torch_extensions"
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(cache), "DS_ACCELERATOR": "cpu"}
    first = subprocess.Popen([sys.executable, "-c", LOAD], cwd=ROOT, env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (list(cache.glob("*/lock")) and compiling(first.pid)):
        assert first.poll() is None, "the first build ended before it could be killed"
        assert time.monotonic() < deadline, "the first load never started compiling"
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)  # the loader and its compilers: nothing of it cleans up
    first.wait()
    (lock,) = cache.glob("*/lock")
    assert lock.read_text().split()[1] == str(first.pid)  # the dead build's lock is still there, naming it

    start = time.monotonic()
    second = subprocess.run([sys.executable, "-c", LOAD], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert second.returncode == 0 and "loaded" in second.stdout, second.stderr[-2000:]
    assert f"removed {lock}: the build that held it (pid {first.pid}) was killed" in second.stderr
    assert not lock.exists() and list(cache.glob("*/*.so"))  # built, and its lock released
    print(f"the next load built the op in {time.monotonic() - start:.0f} s")
