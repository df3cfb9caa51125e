"""A build lock a killed JIT build left in torch's extension cache is removed before DeepSpeed loads its ops
(otherwise every later load of that op waits forever); a young one is named and kept."""

import json
import logging
import os
import time
from pathlib import Path

from jobs.runtime.op_locks import clear_stale_locks, extensions_root


def lock(root, op, age_s):
    path = root / "py311_cpu" / op / "lock"
    path.parent.mkdir(parents=True)
    path.touch()
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


def test_stale_locks_are_removed_and_young_ones_named(tmp_path, caplog):
    stale, young = lock(tmp_path, "fused_adam", 3600), lock(tmp_path, "deepspeed_shm_comm", 30)
    with caplog.at_level(logging.WARNING, logger="bert_foundry.train"):
        assert clear_stale_locks(tmp_path) == [stale]
    assert not stale.exists() and young.exists()
    assert f"removed {stale}" in caplog.text and f"{young} is 30 s old" in caplog.text
    assert clear_stale_locks(tmp_path / "empty") == []  # no cache yet: nothing to do


def test_the_cache_is_the_environments_own_or_the_one_named_in_the_environment(tmp_path, monkeypatch):
    """Two checkouts with their own virtual environments build their ops into their own caches, not torch's
    per-user one: before_op_loads names the cache for torch (and the processes it starts), unless one is named."""
    import sys

    from jobs.runtime.op_locks import before_op_loads

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert extensions_root() == tmp_path
    before_op_loads()
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(tmp_path)  # a cache the user named is kept
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    assert extensions_root() == Path(sys.prefix) / "torch_extensions"
    before_op_loads()
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(Path(sys.prefix) / "torch_extensions")
    from torch.utils.cpp_extension import _get_build_directory

    assert Path(_get_build_directory("fused_adam", verbose=False)).parent == Path(sys.prefix) / "torch_extensions"


def test_ops_build_with_the_environments_ninja_whatever_path_the_job_started_with(monkeypatch):
    """torch runs the first `ninja` on PATH; a system ninja of another version hashes a build's commands differently
    from the environment's, so the two take each other's builds for stale ones and rebuild the op (seen: every job
    after a `ray job submit` one rebuilt both ops, ~55 s). Whatever PATH a job starts with, before_op_loads puts
    the environment's ninja first, once."""
    import shutil
    import sys

    from jobs.runtime.op_locks import use_environment_ninja

    bin_dir = str(Path(sys.executable).parent)
    assert os.path.isfile(os.path.join(bin_dir, "ninja"))  # the `ninja` package, which DeepSpeed requires
    others = [d for d in os.environ["PATH"].split(os.pathsep) if d != bin_dir]
    monkeypatch.setenv("PATH", os.pathsep.join(others))  # as `make` and a plain `python jobs/...` start a job
    use_environment_ninja()  # what before_op_loads calls first thing
    assert shutil.which("ninja") == os.path.join(bin_dir, "ninja")
    use_environment_ninja()
    assert os.environ["PATH"] == os.pathsep.join([bin_dir, *others])  # once, not once per engine
    monkeypatch.delenv("PATH")
    use_environment_ninja()
    assert os.environ["PATH"] == os.pathsep.join([bin_dir, os.defpath])  # the system's tools still found


def test_deepspeed_asks_py_cpuinfo_once_per_process_for_every_op():
    """Each op DeepSpeed loads asks for the CPU's -march and SIMD flags, and each ask ran a py-cpuinfo subprocess
    (~1 s), twice per op; after remember_cpu_info, the flags of two ops come from one answer."""
    import cpuinfo
    from deepspeed.ops.op_builder.cpu import CPUAdamBuilder, FusedAdamBuilder

    from jobs.runtime.op_locks import remember_cpu_info

    remember_cpu_info()
    remember_cpu_info()  # idempotent: one cache, not a cache of a cache
    cpuinfo.get_cpu_info.cache_clear()
    flags = [FusedAdamBuilder().cxx_args(), CPUAdamBuilder().cxx_args()]
    assert all("-march=native" in f for f in flags)
    info = cpuinfo.get_cpu_info.cache_info()
    assert (info.misses, info.currsize) == (1, 1) and info.hits >= 3, info
    assert not hasattr(cpuinfo.get_cpu_info.__wrapped__, "cache_info")


def test_the_cpu_answer_is_kept_on_disk_for_later_processes(tmp_path, monkeypatch):
    """py-cpuinfo's answer (a subprocess of ~2 CPU-seconds in every worker of every job) is asked once per CPU: a
    later process on the same CPU reads it from the cache; another CPU, or a torn file, asks again."""
    import cpuinfo

    from jobs.runtime import op_locks

    asked = []

    def ask():
        asked.append(1)
        return {"arch": "X86_64", "flags": ["avx2", "avx512f"]}

    def new_process():  # py-cpuinfo's own function again, as a fresh process imports it
        monkeypatch.setattr(cpuinfo, "get_cpu_info", ask)
        op_locks.remember_cpu_info(tmp_path)

    new_process()
    assert cpuinfo.get_cpu_info() == cpuinfo.get_cpu_info() == ask() and len(asked) == 2  # one ask, plus mine
    new_process()
    assert cpuinfo.get_cpu_info()["flags"] == ["avx2", "avx512f"] and len(asked) == 2  # from disk: nobody asked
    cached = tmp_path / "cpuinfo" / f"{op_locks.cpu_key()}.json"
    assert [p.name for p in (tmp_path / "cpuinfo").iterdir()] == [cached.name]
    cached.write_text('{"arch": "X86')  # torn
    new_process()
    assert cpuinfo.get_cpu_info()["arch"] == "X86_64" and len(asked) == 3
    assert json.loads(cached.read_text())["arch"] == "X86_64"  # rewritten whole
    monkeypatch.setattr(op_locks, "cpu_key", lambda: "another-cpu")
    new_process()
    cpuinfo.get_cpu_info()
    assert len(asked) == 4 and (tmp_path / "cpuinfo" / "another-cpu.json").is_file()
    monkeypatch.setattr(op_locks, "cpu_key", lambda: "a-third-cpu")
    monkeypatch.setattr(cpuinfo, "get_cpu_info", lambda: asked.append(1) or {})  # py-cpuinfo's child died
    op_locks.remember_cpu_info(tmp_path)
    assert cpuinfo.get_cpu_info() == {} and not (tmp_path / "cpuinfo" / "a-third-cpu.json").exists()  # not kept
    (tmp_path / "cpuinfo" / "a-third-cpu.json").write_text("{}")  # nor trusted, if some other writer kept it
    new_process()
    assert cpuinfo.get_cpu_info()["arch"] == "X86_64" and len(asked) == 6
    assert json.loads((tmp_path / "cpuinfo" / "a-third-cpu.json").read_text())["arch"] == "X86_64"
    assert sorted(p.name for p in (tmp_path / "cpuinfo").iterdir()) == sorted(  # no temporary file left behind
        ["a-third-cpu.json", "another-cpu.json", cached.name])


CPUINFO = """processor\t: {core}
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
cpu MHz\t\t: {mhz}
apicid\t\t: {core}
flags\t\t: {flags}
"""


def test_the_cpu_key_names_model_and_features_not_cores_or_clocks():
    """Two CPUs share a cached answer only if their model and flags are the same: a build for avx512 must never be
    taken for a CPU without it. Per-core lines (processor, apicid, cpu MHz) and the core count change nothing."""
    from jobs.runtime.op_locks import cpu_key_of

    def text(cores=2, flags="fpu avx2 avx512f", mhz="2400.0", **swap):
        body = "\n".join(CPUINFO.format(core=c, mhz=mhz, flags=flags) for c in range(cores))
        for old, new in swap.items():
            body = body.replace(old.replace("_", " "), new)
        return body

    key = cpu_key_of(text(), "x86_64", "9.0.0")
    assert cpu_key_of(text(cores=64, mhz="3100.5"), "x86_64", "9.0.0") == key
    assert cpu_key_of(text(flags="fpu avx2"), "x86_64", "9.0.0") != key
    assert cpu_key_of(text(AMD_EPYC="AMD EPYC 9654"), "x86_64", "9.0.0") != key
    assert cpu_key_of(text().replace("model\t\t: 17", "model\t\t: 160"), "x86_64", "9.0.0") != key
    assert cpu_key_of(text(), "aarch64", "9.0.0") != key
    assert cpu_key_of(text(), "x86_64", "9.0.1") != key
    power = "processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\nrevision\t: 2.2 (pvr 004e 1202)\n"
    assert cpu_key_of(power, "ppc64le", "9.0.0") != cpu_key_of(power.replace("POWER9", "POWER10"), "ppc64le", "9.0.0")


BUILD = """
import sys, time
from pathlib import Path
from jobs.runtime.op_locks import HolderBaton
baton = HolderBaton(sys.argv[1])
assert baton.try_acquire()
print("building", flush=True)
time.sleep(600)  # killed mid-build
"""


def _killed_build(lock_path) -> int:
    import signal
    import subprocess
    import sys
    from pathlib import Path

    p = subprocess.Popen([sys.executable, "-c", BUILD, str(lock_path)], cwd=Path(__file__).resolve().parents[2],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "building"
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    return p.pid


def test_a_killed_builds_lock_names_it_and_is_removed_at_once(tmp_path, caplog):
    """The lock of a build killed a moment ago (young: the age rule would keep it for 20 minutes) is removed
    before the next load, because its holder is gone; a live holder's lock is kept."""
    from jobs.runtime.op_locks import HolderBaton, holder

    lock_path = tmp_path / "py311_cpu" / "fused_adam" / "lock"
    lock_path.parent.mkdir(parents=True)
    pid = _killed_build(lock_path)
    assert lock_path.exists() and holder(lock_path)[1] == pid
    live = HolderBaton(str(tmp_path / "py311_cpu" / "cpu_adam" / "lock"))
    (tmp_path / "py311_cpu" / "cpu_adam").mkdir()
    assert live.try_acquire()  # this process: alive
    with caplog.at_level(logging.WARNING, logger="bert_foundry.train"):
        assert clear_stale_locks(tmp_path) == [lock_path]
    assert f"the build that held it (pid {pid}) was killed" in caplog.text
    assert not lock_path.exists() and os.path.exists(live.lock_file_path)
    live.release()


def test_a_process_waiting_on_a_killed_build_stops_waiting(tmp_path):
    import pytest

    from jobs.runtime.op_locks import HolderBaton

    lock_path = tmp_path / "lock"
    _killed_build(lock_path)
    waiter = HolderBaton(str(lock_path), wait_seconds=0.01)
    assert not waiter.try_acquire()  # torch then waits on the holder
    with pytest.raises(RuntimeError, match="the build this process waited on was killed"):
        waiter.wait()
    assert not lock_path.exists() and waiter.try_acquire()  # the next load builds
    waiter.release()


def test_torchs_builds_lock_with_the_holder_baton_once_ops_are_about_to_load():
    import torch.utils.cpp_extension as cpp_extension

    from jobs.runtime.op_locks import HolderBaton, before_op_loads

    before_op_loads()
    assert cpp_extension.FileBaton is HolderBaton


def test_a_lock_whose_pid_is_now_another_process_or_whose_other_host_builder_died_while_waiting_ends(tmp_path):
    """A restarted container (the same hostname, pids from 1 again) or a busy node gives the dead builder's pid to
    a new process: its lock was kept for ever and every load waited. A process that started after the lock was
    written is not its builder. A waiter on another host's lock past the age rule stops waiting too (only the
    check before loads applied it)."""
    import socket

    import pytest

    from jobs.runtime.op_locks import HolderBaton, _start_ticks, _started, holder_gone

    reused = lock(tmp_path, "cpu_adam", 0)
    reused.write_text(f"{socket.gethostname()} {os.getpid()}\n")  # this process's pid, the lock older than it
    before_me = _started(os.getpid()) - 600  # not "an hour ago": a suite's process may have run for longer
    os.utime(reused, (before_me, before_me))
    assert holder_gone(reused) and clear_stale_locks(tmp_path) == [reused]
    mine = lock(tmp_path, "fused_adam", 0)
    mine.write_text(f"{socket.gethostname()} {os.getpid()}\n")  # written after this process started: its builder
    assert not holder_gone(mine)
    # a live builder's lock names its start in ticks since boot: no clock judges it, not its file's time behind the
    # builder's start (a file server's clock behind, an NTP step forward while it built), nor a pid reused since
    ticks = _start_ticks(os.getpid())
    clocked = lock(tmp_path, "cpu_lion", 0)
    clocked.write_text(f"{socket.gethostname()} {os.getpid()} {ticks}\n")
    os.utime(clocked, (before_me, before_me))
    assert not holder_gone(clocked) and clocked.exists()
    clocked.write_text(f"{socket.gethostname()} {os.getpid()} {ticks - 1}\n")  # a builder before this process
    assert holder_gone(clocked)
    clocked.unlink()
    baton = HolderBaton(str(tmp_path / "baton-lock"))
    assert baton.try_acquire() and Path(baton.lock_file_path).read_text().split()[1:] == [str(os.getpid()), str(ticks)]
    baton.release()
    elsewhere = lock(tmp_path, "deepspeed_shm_comm", 0)
    elsewhere.write_text("another-host 12345\n")
    os.utime(elsewhere, (time.time() - 24 * 3600, time.time() - 24 * 3600))
    with pytest.raises(RuntimeError, match="older than 20 min"):
        HolderBaton(str(elsewhere), wait_seconds=0.01).wait()
    assert not elsewhere.exists()
