"""A build lock a killed JIT build left in torch's extension cache is removed before DeepSpeed loads its ops
(otherwise every later load of that op waits forever); a young one is named and kept."""

import logging
import os
import time

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


def test_the_cache_is_torchs_or_the_one_named_in_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert extensions_root() == tmp_path
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    assert extensions_root().name == "torch_extensions"


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
