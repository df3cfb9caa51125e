"""Exact data position across restarts: every example of an epoch is trained on exactly once.

Ray Data streams each worker its split of the training set. After a restart (a dead worker, a
resubmitted job, a different worker count) a new streaming execution begins, and without help it
would re-read the whole epoch. Here a filter in that execution skips every example whose gradient is
already in the restored checkpoint:

- `DataPosition` (saved in each checkpoint by rank 0) holds the epoch and a bitmap of the examples
  consumed so far in it: all ranks' ids are gathered at checkpoint time.
- `DataPositionTracker`, a tiny Ray actor created by the driver, holds the position the next
  execution must start from. Rank 0 sets it from the restored checkpoint before any rank iterates,
  and resets it at each epoch boundary.
- `SkipConsumed`, an actor-pool stage appended to the training dataset, reads the tracker once when
  its execution starts and drops consumed examples.

Example ids are `(shard << 32) + row` (pipelines.prepare); the manifest's shard sizes map them to
dense indices 0..N-1 for the bitmap.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import ray


@dataclass
class DataPosition:
    epoch: int
    consumed: np.ndarray  # (N,) bool over dense example indices

    @classmethod
    def start(cls, num_examples: int) -> "DataPosition":
        return cls(0, np.zeros(num_examples, dtype=bool))

    @property
    def samples_consumed(self) -> int:
        return int(self.consumed.sum())

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(buf, epoch=self.epoch, n=len(self.consumed), bits=np.packbits(self.consumed))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "DataPosition":
        z = np.load(io.BytesIO(data))
        return cls(int(z["epoch"]), np.unpackbits(z["bits"], count=int(z["n"])).astype(bool))


class ExampleIndex:
    """example_id -> dense index, from the shard row counts of the manifest (in shard order)."""

    def __init__(self, shard_rows: list[int]):
        self.offsets = np.concatenate([[0], np.cumsum(shard_rows)]).astype(np.int64)
        self.num_examples = int(self.offsets[-1])

    def __call__(self, example_ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(example_ids, dtype=np.int64)
        return self.offsets[ids >> 32] + (ids & 0xFFFFFFFF)


@ray.remote(num_cpus=0)
class DataPositionTracker:
    def __init__(self, num_examples: int):
        self._position = DataPosition.start(num_examples).to_bytes()

    def set(self, position: bytes) -> None:
        self._position = position

    def get(self) -> bytes:
        return self._position


class SkipConsumed:
    """Ray Data actor-pool stage: drop examples already consumed in the current epoch."""

    def __init__(self, tracker, shard_rows: list[int]):
        self.index = ExampleIndex(shard_rows)
        self.consumed = DataPosition.from_bytes(ray.get(tracker.get.remote())).consumed

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        keep = ~self.consumed[self.index(batch["example_id"])]
        return {k: v[keep] for k, v in batch.items()}


def skip_consumed(ds: "ray.data.Dataset", tracker, shard_rows: list[int]) -> "ray.data.Dataset":
    # A lookup per row: no CPU reserved, so the stage never starves the parquet reads beside it.
    return ds.map_batches(SkipConsumed, fn_constructor_args=(tracker, shard_rows), batch_format="numpy",
                          compute=ray.data.ActorPoolStrategy(size=1), num_cpus=0, zero_copy_batch=True)
