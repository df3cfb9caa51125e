"""Exact resume: across a killed worker and a resubmitted run, every example of the epoch is trained
on exactly once, and the resumed run's loss matches an uninterrupted one."""

import collections
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from jobs.config import PretrainConfig
from jobs.config_io import load_config
from jobs.pretrain import run

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
MICRO_BATCH = 8


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resume")
    ray.init(num_cpus=2)
    try:
        yield tmp
    finally:
        ray.shutdown()


def job(tmp: Path, name: str, *extra: str):
    (tmp / name).mkdir(exist_ok=True)
    cfg = load_config(PretrainConfig, REPO / "configs/pretrain/quickstart.yaml", [
        f"run_name={name}", f"output_dir={tmp}/runs", f"data.output_root={tmp}/prepared",
        f"corpus.harvest_dir={tmp}/corpus", "corpus.harvest_max_mb=0.4", "data.tokenizer.vocab_size=1000",
        f"train.micro_batch_size={MICRO_BATCH}", "train.log_every=10", "train.eval_batches=4",
        "train.checkpoint_every=5", f"train.record_ids_dir={tmp / name}", "optim.warmup_steps=5",
        f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db", f"tracking.artifact_location={tmp}/art",
        *extra])
    return run(cfg)


def effective_ids(record_dir: Path) -> collections.Counter:
    """Ids whose gradient survived: for each (rank, step) the last attempt that ran it wins."""
    counts: collections.Counter = collections.Counter()
    for f in record_dir.glob("ids-rank*.txt"):
        by_step = {}
        for line in f.read_text().splitlines():
            _, step, *ids = line.split()
            by_step[int(step)] = ids
        for ids in by_step.values():
            counts.update(int(i) for i in ids)
    return counts


def train_ids(result) -> set[int]:
    files = sorted(Path(result.data_dir).glob("train/*.parquet"))
    return {int(i) for f in files for i in pq.read_table(f, columns=["example_id"])["example_id"].to_pylist()}


def steps_per_epoch(tmp: Path, workers: int = 2) -> int:
    probe = job(tmp, "probe", "train.max_steps=1")
    n = len(train_ids(probe))
    return -(-(n // workers) // MICRO_BATCH), n


def assert_epoch_covered_once(counts: collections.Counter, ids: set[int], workers: int):
    assert max(counts.values()) == 1, "an example was trained on twice"
    assert set(counts) <= ids
    assert len(ids) - len(counts) < workers  # only the equal split's remainder may be left out


def test_killed_worker_resumes_exactly(workdir):
    steps, _ = steps_per_epoch(workdir)
    resumed = job(workdir, "killed", f"train.max_steps={steps}", "train.fail_at_step=12")
    assert (workdir / "killed" / "failed-killed").is_file()  # the worker really died
    ids = train_ids(resumed)
    assert_epoch_covered_once(effective_ids(workdir / "killed"), ids, workers=2)
    assert resumed.metrics["samples_consumed_in_epoch"] >= len(ids) - 1

    clean = job(workdir, "uninterrupted", f"train.max_steps={steps}")
    assert resumed.metrics["eval_after/mlm_loss"] == pytest.approx(clean.metrics["eval_after/mlm_loss"], rel=0.03)
    assert resumed.metrics["eval_before/mlm_loss"] == pytest.approx(clean.metrics["eval_before/mlm_loss"])


def test_resubmitted_run_resumes_exactly(workdir):
    steps, _ = steps_per_epoch(workdir)
    first = job(workdir, "resubmitted", "train.max_steps=10")
    assert first.metrics["step"] == 10
    again = job(workdir, "resubmitted", f"train.max_steps={steps}")  # same name: continues at step 10
    assert again.metrics["step"] == steps
    assert_epoch_covered_once(effective_ids(workdir / "resubmitted"), train_ids(again), workers=2)
