"""Two-phase pretraining around its phases: a run_name switched between one phase and two, and masking caps that
cap nothing under dynamic masking."""

import json
from pathlib import Path

import pytest

from bert_core.config import ConfigError
from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig


def _finished(run_dir: Path, step: int = 100_000) -> None:
    """A run folder as Ray Train and our record leave it: a snapshot naming its latest checkpoint."""
    from jobs.runtime import resubmit

    (run_dir / "checkpoint_000001").mkdir(parents=True)
    resubmit.record(run_dir / "checkpoint_000001", "run-abc", step, {"prepared set": "x"})
    (run_dir / "checkpoint_manager_snapshot.json").write_text(json.dumps(
        {"latest_checkpoint_result": {"version": 0, "checkpoint_dir_name": "checkpoint_000001", "metrics": {}}}))


def _cfg(tmp_path, *overrides):
    return load_config(PretrainConfig, None, ["data.sources=[x]", "run_name=bert", f"output_dir={tmp_path / 'runs'}",
                                              *overrides])


def test_a_single_phase_runs_checkpoints_refuse_a_two_phase_job_on_its_run_name(tmp_path):
    """It found no checkpoint in bert-phase1 and trained phase 1 again from step 0, then wrote over bert/release."""
    from jobs.pretrain import refuse_other_layout

    _finished(tmp_path / "runs" / "bert")
    with pytest.raises(ConfigError, match=r"bert holds a single-phase run's checkpoints.*train\.init_checkpoint"):
        refuse_other_layout(_cfg(tmp_path, "phase2.max_steps=10"))
    refuse_other_layout(_cfg(tmp_path))  # the same job single-phase continues it
    _finished(tmp_path / "runs" / "bert-phase1", step=5)  # a two-phase run of its own: it continues that
    refuse_other_layout(_cfg(tmp_path, "phase2.max_steps=10"))


def test_a_two_phase_runs_checkpoints_refuse_a_single_phase_job_on_its_run_name(tmp_path):
    from jobs.pretrain import refuse_other_layout

    _finished(tmp_path / "runs" / "bert-phase1")
    with pytest.raises(ConfigError, match="bert-phase1 holds a two-phase run's checkpoints"):
        refuse_other_layout(_cfg(tmp_path, "phase2.max_steps=0"))
    refuse_other_layout(_cfg(tmp_path, "phase2.max_steps=10"))
    refuse_other_layout(_cfg(tmp_path, "phase2.max_steps=0", "run_name=other"))  # another run_name: a new run


@pytest.mark.parametrize("overrides", [["phase2.max_steps=10", "phase2.max_predictions=30"],
                                       ["data.max_predictions=10"]])
def test_a_static_cap_under_dynamic_masking_without_a_dynamic_cap_is_refused(overrides):
    """It capped nothing: phase 2's collator drew 15% of 512 tokens whatever phase2.max_predictions said."""
    with pytest.raises(ConfigError, match=r"max_predictions=\d+ caps masks drawn when examples are prepared.*"
                                          r"train\.masking\.max_predictions"):
        load_config(PretrainConfig, None, ["data.sources=[x]", *overrides])


def test_the_caps_that_apply_still_validate_and_phase_2_derives_its_own():
    for overrides in (["phase2.max_steps=10"], ["phase2.max_steps=10", "train.masking.max_predictions=20"],
                      ["data.masking=static", "phase2.max_steps=10", "phase2.max_predictions=80"]):
        cfg = load_config(PretrainConfig, None, ["data.sources=[x]", *overrides])
        assert cfg.phase2_run("/ckpt", "/tok").phase == 2  # data.max_predictions=80 set by phase2_run, not refused
    for path in sorted(Path("configs/pretrain").glob("*.yaml")):
        load_config(PretrainConfig, str(path), ["data.sources=[x]"])



@pytest.mark.parametrize("story, refused", [
    ("A finished phase 1 and failed in phase 2; B finished phase 2 and registered", True),
    ("A finished and registered; B trained phase 2 on and failed to register", False),
    ("A finished phase 1 and failed in phase 2", False),
])
def test_a_finished_two_phase_job_is_judged_by_the_run_that_last_trained_phase_2(tmp_path, story, refused):
    """A resubmission does not fit a finished phase 1 again, so phase 1's record names the first job's phase-1 run:
    judged by it, C (the same job submitted again) registered B's weights a second time in the first story, and was
    refused in the second, though B registered nothing. Phase 2's record names the job that last trained it."""
    from mlflow.tracking import MlflowClient

    from jobs.pretrain import refuse_finished_before_ray
    from jobs.runtime import resubmit

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    experiment = client.create_experiment("pre", artifact_location=str(tmp_path / "art"))

    def run(status: str, parent: str | None = None) -> str:
        r = client.create_run(experiment, tags={"mlflow.parentRunId": parent} if parent else {}).info.run_id
        client.set_terminated(r, status)
        return r

    def checkpoint(phase: int, step: int, run_id: str) -> None:
        folder = tmp_path / "runs" / f"two-phase{phase}" / f"checkpoint_{step:06d}"
        (folder / "release").mkdir(parents=True)
        resubmit.record(folder, run_id, step, {"prepared set": "x"})
        (folder.parent / "checkpoint_manager_snapshot.json").write_text(json.dumps(
            {"latest_checkpoint_result": {"checkpoint_dir_name": folder.name, "metrics": {}}}))

    a = run("FINISHED" if story.startswith("A finished and") else "FAILED")
    checkpoint(1, 200, run("FINISHED", a))  # phase 1, trained by A alone
    if "B" in story:
        b = run("FINISHED" if story.endswith("registered") else "FAILED")
        checkpoint(2, 100, run("FINISHED", b))
    else:
        checkpoint(2, 40, run("FAILED", a))  # A's phase 2, cut short
    cfg = _cfg(tmp_path, "run_name=two", "train.max_steps=200", "phase2.max_steps=100", f"tracking.tracking_uri={uri}")
    if refused:
        with pytest.raises(ConfigError, match=r"run_name='two-phase2' has finished: .*Give phase 2 more steps"):
            refuse_finished_before_ray(cfg)
    else:
        refuse_finished_before_ray(cfg)
