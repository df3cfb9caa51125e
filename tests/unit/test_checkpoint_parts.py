"""A checkpoint folder's parts: which ones a half-written checkpoint lacks, which folders of a run Ray Train
never registered (ignored on resume, reported by the job), and the RNG states every rank's part carries."""

import json

import numpy as np
import pytest
import torch

from jobs.engine.checkpoint_parts import (RAY_SNAPSHOT, ignored_checkpoints, missing_parts, restore_rng, rng_arrays,
                                          rng_states, write_rank_files, write_topology)


def part(folder, rank, files):
    """What rank `rank` uploads: its files, then its listing (rank 0 adds the topology)."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".staging-{folder.name}-{rank}"
    for name, data in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_bytes(data)
    if rank == 0:
        write_topology(staging, world_size=2, zero_stage=2)
    write_rank_files(staging, rank)
    for path in staging.rglob("*"):
        if path.is_file():
            target = folder / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())


def whole(folder):
    part(folder, 0, {"engine/zero_pp_rank_0_optim_states.pt": b"a" * 100, "data_position.npz": b"p"})
    part(folder, 1, {"engine/zero_pp_rank_1_optim_states.pt": b"b" * 100})


def test_missing_parts_names_the_rank_and_the_short_file(tmp_path):
    whole(tmp_path / "ok")
    assert missing_parts(tmp_path / "ok") == []
    part(tmp_path / "rank1-died", 0, {"engine/zero_pp_rank_0_optim_states.pt": b"a" * 100})
    assert missing_parts(tmp_path / "rank1-died") == ["rank 1's part"]
    whole(tmp_path / "cut")
    (tmp_path / "cut/engine/zero_pp_rank_1_optim_states.pt").write_bytes(b"b" * 40)  # an upload cut short
    assert missing_parts(tmp_path / "cut") == ["engine/zero_pp_rank_1_optim_states.pt (rank 1)"]
    part(tmp_path / "rank0-died", 1, {"engine/zero_pp_rank_1_optim_states.pt": b"b"})
    assert missing_parts(tmp_path / "rank0-died") == ["topology.json (rank 0's part)"]
    # the listings themselves cut short by the upload: parts missing (the JSON error failed the finished job)
    whole(tmp_path / "cut-listing")
    listing = tmp_path / "cut-listing/rank-1.files.json"
    assert listing.is_file()
    listing.write_text(listing.read_text()[:10])
    assert missing_parts(tmp_path / "cut-listing") == ["rank 1's part (its listing unreadable)"]
    (tmp_path / "cut-listing/topology.json").write_text('{"world_si')
    assert missing_parts(tmp_path / "cut-listing") == ["topology.json (rank 0's part, unreadable)"]


def test_ignored_checkpoints_are_the_folders_ray_never_registered(tmp_path):
    run = tmp_path / "run"
    whole(run / "checkpoint_1")
    part(run / "checkpoint_2", 0, {"engine/zero_pp_rank_0_optim_states.pt": b"a"})
    whole(run / "checkpoint_3")
    assert ignored_checkpoints(run) == {}  # no registry: nothing to compare with, nothing claimed
    (run / RAY_SNAPSHOT).write_text(json.dumps({"checkpoint_results": [{"checkpoint_dir_name": "checkpoint_1"}]}))
    assert ignored_checkpoints(run) == {"checkpoint_2": "incomplete, missing rank 1's part",
                                        "checkpoint_3": "whole, but its report never reached Ray Train"}


def test_a_test_kill_waits_until_ray_registered_the_last_checkpoint(tmp_path):
    """Fine-tuning's fault injection kills only once Ray Train lists every reported checkpoint folder, so
    the restart resumes from the last one; a folder the registry lacks keeps it waiting (here: timing out)."""
    import threading

    import pytest

    from jobs.runtime.faults import wait_until_registered

    run = tmp_path / "run"
    (run / "checkpoint_1").mkdir(parents=True)
    with pytest.raises(TimeoutError, match="registered no checkpoint"):
        wait_until_registered(run, timeout_s=0.5)  # no registry yet
    snapshot = {"checkpoint_results": [{"checkpoint_dir_name": "checkpoint_1"}]}
    (run / RAY_SNAPSHOT).write_text(json.dumps(snapshot))
    (run / "checkpoint_2").mkdir()
    with pytest.raises(TimeoutError):
        wait_until_registered(run, timeout_s=0.5)  # the last report not collected yet
    snapshot["checkpoint_results"].append({"checkpoint_dir_name": "checkpoint_2"})
    later = threading.Timer(0.3, lambda: (run / RAY_SNAPSHOT).write_text(json.dumps(snapshot)))
    later.start()
    wait_until_registered(run, timeout_s=10)  # returns once the controller registers it
    later.join()


# -- the RNG states a checkpoint carries (rng.npz), here with no Ray import: the GPU machine has none ----------

def test_a_checkpoint_restores_each_ranks_cpu_generator_after_the_engine_reseeded_it(tmp_path):
    """Each rank gets its own state back: the two saved here differ (a draw between them), so rank 0's restored on
    every rank would fail."""
    torch.manual_seed(5)
    torch.rand(3)
    rank0 = rng_states()
    expected = {0: torch.rand(4)}
    rank1 = rng_states()
    expected[1] = torch.rand(4)
    assert not torch.equal(expected[0], expected[1])
    np.savez(tmp_path / "rng.npz", **rng_arrays([rank0, rank1]))
    saved = dict(np.load(tmp_path / "rng.npz"))
    for rank in (1, 0):
        torch.manual_seed(0)  # what build_engine does on every rank
        restore_rng(saved, rank=rank)
        assert torch.equal(torch.rand(4), expected[rank]), rank
    torch.manual_seed(0)
    fresh = torch.rand(4)
    torch.manual_seed(0)
    restore_rng(saved, rank=2)  # a rank the checkpoint had not: keeps its fresh seed
    assert torch.equal(torch.rand(4), fresh)


def test_a_checkpoint_carries_and_restores_each_ranks_cuda_generator_state(monkeypatch):
    """The CUDA half's wiring, with torch.cuda's generator calls recorded (a real device: the test below)."""
    cuda_states = iter([np.full(16, 7, np.uint8), np.full(16, 9, np.uint8)])
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda: torch.from_numpy(next(cuda_states)))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state: restored.append(state.numpy().copy()))
    saved = rng_arrays([rng_states(), rng_states()])
    assert sorted(saved) == ["cuda_rank0", "cuda_rank1", "rank0", "rank1"]
    restore_rng(saved, rank=1)
    assert len(restored) == 1 and (restored[0] == 9).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_checkpoint_restores_the_cuda_generator_too(tmp_path):
    """GPU dropout draws from the CUDA generator, which build_engine's torch.manual_seed re-seeds."""
    torch.manual_seed(5)
    torch.rand(3, device="cuda")
    np.savez(tmp_path / "rng.npz", **rng_arrays([rng_states()]))
    expected = torch.rand(4, device="cuda")
    torch.manual_seed(0)
    restore_rng(dict(np.load(tmp_path / "rng.npz")), rank=0)
    assert torch.equal(torch.rand(4, device="cuda"), expected)
