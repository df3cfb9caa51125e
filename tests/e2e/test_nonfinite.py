"""NaN/inf losses on 2 Ray Train workers: a short streak is skipped and counted; a streak of
train.rollback_after restarts the workers from the last checkpoint at a lower learning rate."""

from pathlib import Path

import math

import pytest
import ray

from jobs.config import PretrainConfig
from jobs.config_io import load_config
from jobs.pretrain import run

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
LR = 2e-3


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    ray.init(num_cpus=2)
    try:
        yield tmp_path_factory.mktemp("nonfinite")
    finally:
        ray.shutdown()


def job(tmp: Path, name: str, nan_micro_batches: int):
    cfg = load_config(PretrainConfig, REPO / "configs/pretrain/quickstart.yaml", [
        f"run_name={name}", f"output_dir={tmp}/runs", f"data.output_root={tmp}/prepared",
        f"corpus.harvest_dir={tmp}/corpus", "corpus.harvest_max_mb=0.4", "data.tokenizer.vocab_size=1000",
        "train.max_steps=20", "train.log_every=5", "train.checkpoint_every=5", "train.eval_batches=2",
        "train.rollback_after=3", "train.rollback_lr_factor=0.5", "train.max_failures=1",
        "train.nan_at_step=8", f"train.nan_micro_batches={nan_micro_batches}",
        f"optim.lr={LR}", "optim.warmup_steps=2", "optim.schedule=constant",
        f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db", f"tracking.artifact_location={tmp}/art"])
    return run(cfg).metrics


def test_short_nan_streak_is_skipped_and_counted(workdir):
    m = job(workdir, "skipped", nan_micro_batches=2)
    assert m["step"] == 20 and m["rollbacks"] == 0
    assert m["nonfinite_total"] == 2
    assert m["lr"] == pytest.approx(LR)
    assert math.isfinite(m["loss"]) and m["eval_after/mlm_loss"] < m["eval_before/mlm_loss"]


def test_nan_streak_rolls_back_to_the_last_checkpoint_at_a_lower_lr(workdir):
    m = job(workdir, "rolled-back", nan_micro_batches=3)
    assert m["step"] == 20 and m["rollbacks"] == 1
    assert m["lr"] == pytest.approx(0.5 * LR)  # the restarted workers train on at half the rate
    assert m["nonfinite_total"] == 0  # the skips happened after step 5's checkpoint, in the discarded attempt
    assert math.isfinite(m["loss"]) and m["eval_after/mlm_loss"] < m["eval_before/mlm_loss"]
