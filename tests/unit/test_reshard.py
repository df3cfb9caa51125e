"""When a resume goes through DeepSpeed's universal checkpoint, and when no resume at that size exists."""

import pytest

from bert_core.config import ConfigError
from jobs.engine.checkpoint_parts import read_topology, write_topology
from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config
from jobs.engine.ds_config import deepspeed_config
from jobs.workers.reshard import needs_universal


def cfg_with(*overrides):
    return load_config(PretrainConfig, None, ["data.sources=[x]", *overrides])


def test_topology_round_trip(tmp_path):
    assert read_topology(tmp_path) is None  # a checkpoint from before the file: loads as saved
    write_topology(tmp_path, world_size=3, zero_stage=2)
    assert read_topology(tmp_path) == {"world_size": 3, "zero_stage": 2, "pipeline_stages": 1}


@pytest.mark.parametrize("saved, world, overrides, expected", [
    (None, 4, [], False),  # unknown: DeepSpeed's own check speaks if the size changed
    ({"world_size": 2, "zero_stage": 2}, 2, [], False),
    ({"world_size": 2, "zero_stage": 2}, 1, [], True),
    ({"world_size": 2, "zero_stage": 2}, 3, [], True),
    ({"world_size": 4, "zero_stage": 1}, 2, ["deepspeed.zero_stage=1"], True),
    ({"world_size": 2, "zero_stage": 3}, 3, ["deepspeed.zero_stage=3"], True),
    ({"world_size": 2, "zero_stage": 0}, 3, ["deepspeed.zero_stage=0"], False),  # whole state on every rank
    ({"world_size": 2, "zero_stage": 2}, 1, ["optim.name=lamb"], True),
    ({"world_size": 2, "zero_stage": 3}, 4, ["deepspeed.zero_stage=3", "optim.name=lamb"], True),
])
def test_converts_only_partitioned_state_saved_at_another_size(saved, world, overrides, expected):
    assert needs_universal(saved, world, cfg_with(*overrides)) is expected


def test_a_new_size_keeps_the_zero_stage():
    with pytest.raises(ConfigError, match="ZeRO-2.*zero_stage is 3"):
        needs_universal({"world_size": 2, "zero_stage": 2}, 1, cfg_with("deepspeed.zero_stage=3"))


@pytest.mark.parametrize("saved_stage, stage", [(0, 2), (2, 0), (2, 3), (3, 1), (0, 1), (1, 0)])
def test_a_resume_on_the_same_workers_refuses_a_zero_stage_deepspeed_cannot_load(saved_stage, stage):
    """DeepSpeed would fail inside every restarted worker (ZeRO-0 has no optimizer partitions, ZeRO-3 its own layout):
    refused before any engine is built, naming both stages."""
    with pytest.raises(ConfigError, match=f"checkpoint is ZeRO-{saved_stage} .*zero_stage is {stage}; "
                                          f"set deepspeed.zero_stage={saved_stage}"):
        needs_universal({"world_size": 2, "zero_stage": saved_stage}, 2, cfg_with(f"deepspeed.zero_stage={stage}"))


def test_zero1_and_zero2_load_each_others_checkpoints_only_at_the_saved_size():
    """One optimizer class and partition layout: a same-size resume loads as saved (tested through a real engine in
    test_engine.py); a new size keeps the stage."""
    assert not needs_universal({"world_size": 2, "zero_stage": 1}, 2, cfg_with("deepspeed.zero_stage=2"))
    assert not needs_universal({"world_size": 2, "zero_stage": 2}, 2, cfg_with("deepspeed.zero_stage=1"))
    with pytest.raises(ConfigError, match="ZeRO-1 .*zero_stage is 2"):
        needs_universal({"world_size": 2, "zero_stage": 1}, 4, cfg_with("deepspeed.zero_stage=2"))


def test_lamb_under_zero2_reshards_only_onto_one_worker():
    with pytest.raises(ConfigError, match="lamb under ZeRO-2 resumes on 2 workers .* or on 1, not on 3"):
        needs_universal({"world_size": 2, "zero_stage": 2}, 3, cfg_with("optim.name=lamb"))


def test_pipeline_runs_resume_on_their_own_topology():
    pipe = ["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1", "scaling.num_workers=4"]
    assert not needs_universal({"world_size": 4, "zero_stage": 1, "pipeline_stages": 2}, 4, cfg_with(*pipe))
    with pytest.raises(ConfigError, match="pipeline run resumes on the 4 workers"):
        needs_universal({"world_size": 4, "zero_stage": 1, "pipeline_stages": 2}, 2,
                        cfg_with("deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1"))
    with pytest.raises(ConfigError, match="pipeline_stages=2; a resume keeps it"):
        needs_universal({"world_size": 4, "zero_stage": 1, "pipeline_stages": 2}, 4, cfg_with("scaling.num_workers=4"))


def test_a_hand_off_of_weights_keeps_the_pipeline_layout(tmp_path):
    """Weights alone skip the resume's rules, but a pipeline checkpoint's weights are per-layer files a data-parallel
    engine has no reader for (and back): refused naming the layouts, before any engine is built."""
    from jobs.workers.reshard import load_engine

    write_topology(tmp_path, world_size=4, zero_stage=1, pipeline_stages=2)
    with pytest.raises(ConfigError, match="pipeline_stages=2; a hand-off of its weights keeps it \\(got 1\\)"):
        load_engine(tmp_path, cfg_with(), world_size=2, local_rank=0, node_rank=0, weights_only=True)


def test_deepspeed_config_asks_for_universal_loading_only_when_told():
    cfg = cfg_with()
    common = dict(micro_batch_size=8, grad_accum_steps=1, use_gpu=False)
    assert "checkpoint" not in deepspeed_config(cfg.optim, cfg.deepspeed, world_size=2, **common)
    assert deepspeed_config(cfg.optim, cfg.deepspeed, world_size=1, load_universal=True,
                            **common)["checkpoint"] == {"load_universal": True}


def test_the_driver_refuses_a_resubmission_whose_checkpoint_the_workers_could_not_load(tmp_path):
    """jobs/pretrain.py checks the latest checkpoint's ZeRO stage (resubmit.refuse_unloadable) before Ray Train
    starts: in the workers the refusal would come once per restart, spending train.max_failures on one config error."""
    import json

    from jobs.runtime.resubmit import refuse_unloadable

    (tmp_path / "checkpoint_000003").mkdir()
    write_topology(tmp_path / "checkpoint_000003", world_size=2, zero_stage=0)
    refuse_unloadable(tmp_path, cfg_with("scaling.num_workers=2", "deepspeed.zero_stage=2"))  # no snapshot: a new run
    (tmp_path / "checkpoint_manager_snapshot.json").write_text(json.dumps(
        {"latest_checkpoint_result": {"checkpoint_dir_name": "checkpoint_000003"}}))
    with pytest.raises(ConfigError, match="ZeRO-0 .*zero_stage is 2"):
        refuse_unloadable(tmp_path, cfg_with("scaling.num_workers=2", "deepspeed.zero_stage=2"))
    refuse_unloadable(tmp_path, cfg_with("scaling.num_workers=2", "deepspeed.zero_stage=0"))


def test_a_hand_off_checkpoint_the_workers_could_not_load_is_refused_on_the_driver(tmp_path):
    """train.init_checkpoint was checked in the workers only: after the corpus was prepared and DeepSpeed built, and
    retried train.max_failures times. The driver refuses it as it refuses its own run's checkpoint."""
    from jobs.runtime.resubmit import refuse_unloadable_init

    write_topology(tmp_path, world_size=2, zero_stage=2)
    carried = [f"train.init_checkpoint={tmp_path}", "train.reset_optimizer=false"]
    with pytest.raises(ConfigError, match="ZeRO"):
        refuse_unloadable_init(cfg_with(*carried, "deepspeed.zero_stage=3"))
    refuse_unloadable_init(cfg_with(*carried, "deepspeed.zero_stage=2"))  # its own stage and size: loads
    refuse_unloadable_init(cfg_with(f"train.init_checkpoint={tmp_path}", "train.reset_optimizer=true",
                                    "deepspeed.zero_stage=1"))  # its weights alone: any stage of ZeRO 0-2
    # but ZeRO-3's weights are in its partitions' files and ZeRO 0-2's in one: DeepSpeed failed on a bare assertion
    with pytest.raises(ConfigError, match=r"zero_stage=2; a hand-off of its weights needs ZeRO-3 on both sides or "
                                          r"on neither \(got 3\)"):
        refuse_unloadable_init(cfg_with(f"train.init_checkpoint={tmp_path}", "train.reset_optimizer=true",
                                        "deepspeed.zero_stage=3"))
    write_topology(tmp_path, world_size=4, zero_stage=1, pipeline_stages=2)
    with pytest.raises(ConfigError, match="a hand-off of its weights keeps it"):
        refuse_unloadable_init(cfg_with(f"train.init_checkpoint={tmp_path}", "train.reset_optimizer=true"))


def test_a_pipeline_resume_keeps_its_partition_method_and_a_hand_off_of_its_weights_may_change_it(tmp_path):
    """Each stage's ZeRO state covers the layers its cut gave it: a resubmission with another
    deepspeed.partition_method passed the driver, and every worker restart failed on DeepSpeed's "parameter-alignment
    layout does not match" until train.max_failures ran out. Refused on the driver now, naming both methods."""
    import json

    from jobs.runtime.resubmit import refuse_unloadable, refuse_unloadable_init
    from jobs.workers.reshard import hand_off_layout

    pipe = ["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1", "scaling.num_workers=4"]
    checkpoint = tmp_path / "checkpoint_000001"
    checkpoint.mkdir()
    write_topology(checkpoint, world_size=4, zero_stage=1, pipeline_stages=2, partition_method="parameters")
    saved = read_topology(checkpoint)
    assert saved["partition_method"] == "parameters"
    (tmp_path / "checkpoint_manager_snapshot.json").write_text(json.dumps(
        {"latest_checkpoint_result": {"checkpoint_dir_name": checkpoint.name}}))
    refused = "partition_method='parameters'; a resume keeps it \\(got 'uniform'\\)"
    with pytest.raises(ConfigError, match=refused):
        refuse_unloadable(tmp_path, cfg_with(*pipe, "deepspeed.partition_method=uniform"))
    with pytest.raises(ConfigError, match=refused):  # its optimizer handed on is resumed too
        refuse_unloadable_init(cfg_with(*pipe, "deepspeed.partition_method=uniform",
                                        f"train.init_checkpoint={checkpoint}", "train.reset_optimizer=false"))
    refuse_unloadable(tmp_path, cfg_with(*pipe, "deepspeed.partition_method=parameters"))
    # weights alone: layer files are indexed by global layer, any cut reads them
    refuse_unloadable_init(cfg_with(*pipe, "deepspeed.partition_method=uniform", f"train.init_checkpoint={checkpoint}",
                                    "train.reset_optimizer=true"))
    hand_off_layout(saved, cfg_with(*pipe, "deepspeed.partition_method=uniform"))
    # a topology from before the method was recorded: unknown, not refused (a data-parallel one has none to refuse)
    assert not needs_universal({"world_size": 4, "zero_stage": 1, "pipeline_stages": 2}, 4,
                               cfg_with(*pipe, "deepspeed.partition_method=uniform"))
    write_topology(tmp_path, world_size=2, zero_stage=1, partition_method="uniform")
    assert "partition_method" not in read_topology(tmp_path)
