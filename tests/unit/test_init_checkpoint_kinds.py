"""train.init_checkpoint names a folder that is no whole resume checkpoint: the run's release, the run folder, or the
partial checkpoint the job reports as ignored. The driver took each, and every worker restart then failed on
DeepSpeed's bare `AssertionError('')` (no model states to load) or on a rank's missing optimizer file, until
train.max_failures ran out. Refused on the driver now, naming what the folder is and what to give instead."""

import json

import pytest

from bert_core.config import ConfigError
from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig
from jobs.engine.checkpoint_parts import RAY_SNAPSHOT, write_rank_files, write_topology
from jobs.engine.data_parallel import TAG
from jobs.runtime.resubmit import record, refuse_unloadable_init

WHOLE, PARTIAL = "checkpoint_2026-12-01_10-00-00.000000", "checkpoint_2026-12-01_11-00-00.000000"


def engine_files(checkpoint, rank: int) -> None:
    """What Engine.save leaves of `rank`'s part (ZeRO-2): its optimizer partition, and rank 0 the model states."""
    engine = checkpoint / "engine" / TAG
    engine.mkdir(parents=True, exist_ok=True)
    (engine / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt").write_bytes(b"x" * 10)
    if rank == 0:
        (engine / "mp_rank_00_model_states.pt").write_bytes(b"x" * 10)


def run_tree(root):
    """A run with a whole registered checkpoint, a newer one whose rank 1 died while uploading, and its release."""
    run = root / "runs" / "bert"
    for name, ranks in ((WHOLE, (0, 1)), (PARTIAL, (0,))):
        checkpoint = run / name
        for rank in ranks:
            engine_files(checkpoint, rank)
            if rank == 0:
                write_topology(checkpoint, 2, 2)
                record(checkpoint, "run-a", 2000, {})
            write_rank_files(checkpoint, rank)
    (run / RAY_SNAPSHOT).write_text(json.dumps({"checkpoint_results": [{"checkpoint_dir_name": WHOLE}],
                                                "latest_checkpoint_result": {"checkpoint_dir_name": WHOLE}}))
    (run / "release").mkdir()
    (run / "release" / "config.json").write_text("{}")
    (run / "release" / "model.safetensors").write_bytes(b"x")
    return run


def hand_off(folder, reset: bool = False) -> None:
    refuse_unloadable_init(load_config(PretrainConfig, None, [
        "data.sources=[x]", f"train.init_checkpoint={folder}", f"train.reset_optimizer={str(reset).lower()}",
        "scaling.num_workers=2", "deepspeed.zero_stage=2"]))


@pytest.mark.parametrize("reset", [False, True])
def test_an_init_checkpoint_that_is_no_whole_resume_checkpoint_is_refused_on_the_driver(tmp_path, reset):
    run = run_tree(tmp_path)
    with pytest.raises(ConfigError, match=rf"^train.init_checkpoint={run / 'release'} is a release \(an HF model "
                                          rf"folder\).*Fine-tuning.*init={run / 'release'}.*{run / WHOLE}"):
        hand_off(run / "release", reset)
    with pytest.raises(ConfigError, match=rf"^train.init_checkpoint={run} is a run folder.*latest registered "
                                          rf"checkpoint.*train.init_checkpoint={run / WHOLE}"):
        hand_off(run, reset)
    with pytest.raises(ConfigError, match=rf"^train.init_checkpoint={run / PARTIAL} is an incomplete checkpoint "
                                          rf"\(missing rank 1's part\).*train.init_checkpoint={run / WHOLE}"):
        hand_off(run / PARTIAL, reset)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"is no resume checkpoint: .*checkpoint_\*"):
        hand_off(tmp_path / "empty", reset)
    hand_off(run / WHOLE, reset)  # the whole registered checkpoint loads


def test_a_release_or_run_folder_without_a_registered_checkpoint_is_told_so(tmp_path):
    run = run_tree(tmp_path)
    (run / RAY_SNAPSHOT).write_text(json.dumps({"checkpoint_results": [], "latest_checkpoint_result": None}))
    with pytest.raises(ConfigError, match="run folder, and Ray Train registered no checkpoint in it"):
        hand_off(run)
    lone = tmp_path / "bert-base-uncased"
    lone.mkdir()
    (lone / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"is a release \(an HF model folder\).*<output_dir>/<run>/checkpoint_\*"):
        hand_off(lone)


def test_checkpoints_from_before_part_listings_or_topology_and_uris_still_pass(tmp_path):
    """A checkpoint written before rank listings (topology.json alone says what it is) or before topology.json
    (DeepSpeed's model states do) is taken as it was; a URI is not listed here (the workers read it as they load)."""
    before_listings = tmp_path / "checkpoint_1"
    engine_files(before_listings, 0)
    write_topology(before_listings, 2, 2)
    hand_off(before_listings)
    before_topology = tmp_path / "checkpoint_0"
    engine_files(before_topology, 0)
    hand_off(before_topology)
    hand_off("s3://bucket/runs/bert/checkpoint_0")
    hand_off("gs://bucket/runs/bert/release", reset=True)
