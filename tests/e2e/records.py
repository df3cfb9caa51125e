"""What a pretraining run's `faults.record_ids_dir` says happened: the example ids each optimizer step trained on,
per rank and attempt (jobs/workers/pretrain_worker.py's _record_ids), read back to check that every example of an
epoch was trained on exactly once across the run's restarts."""

import collections
from pathlib import Path

import pyarrow.parquet as pq


def effective_ids(record_dir: Path, epoch: int = 0) -> collections.Counter:
    """Ids of `epoch` whose gradient survived: each step counts from the last attempt that ran it, on all the
    ranks that attempt had (a resume on fewer workers leaves the dropped ranks' later steps behind)."""
    lines = [line.split() for f in sorted(record_dir.glob("ids-rank*.txt")) for line in f.read_text().splitlines()]
    # Rank 0 runs in every attempt; its record lists the attempts in the order they ran.
    rank0 = [line.split()[0] for line in (record_dir / "ids-rank0.txt").read_text().splitlines()]
    order = {attempt: i for i, attempt in enumerate(dict.fromkeys(rank0))}
    last = {}
    for attempt, step, *_ in lines:
        last[step] = max(last.get(step, attempt), attempt, key=order.__getitem__)
    counts: collections.Counter = collections.Counter()
    for attempt, step, step_epoch, *ids in lines:
        if attempt == last[step] and int(step_epoch) == epoch:
            counts.update(int(i) for i in ids)
    return counts


def train_ids(data_dir: Path) -> set[int]:
    """The example ids of a prepared set's train shards (a run's `data_dir`)."""
    files = sorted(Path(data_dir).glob("train/*.parquet"))
    return {int(i) for f in files for i in pq.read_table(f, columns=["example_id"])["example_id"].to_pylist()}


def first_steps(record_dir: Path) -> list[int]:
    """The first step each attempt ran, in the order the attempts ran (rank 0 runs in every attempt)."""
    firsts: dict[str, int] = {}
    for line in (record_dir / "ids-rank0.txt").read_text().splitlines():
        attempt, step = line.split()[:2]
        firsts.setdefault(attempt, int(step))
    return list(firsts.values())


def finished_epochs(record_dir: Path) -> int:
    """How many epochs the run finished: the epoch of rank 0's last recorded step (it runs in every attempt)."""
    return int((record_dir / "ids-rank0.txt").read_text().splitlines()[-1].split()[2])


def assert_epoch_covered_once(counts: collections.Counter, ids: set[int], workers: int):
    assert max(counts.values()) == 1, "an example was trained on twice"
    assert set(counts) <= ids
    assert len(ids) - len(counts) < workers  # only the equal split's remainder may be left out
