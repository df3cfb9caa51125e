"""Exact data position across restarts: no example of an epoch is trained on twice, and none is left out but the
equal split's remainder (fewer than the worker count; a pipeline's fewer than its replicas) and the batches of a
non-finite loss (skipped, counted, marked consumed).

Ray Data streams each worker its split of the training set. After a restart (a dead worker, a
resubmitted job, a different worker count) a new streaming execution begins, and without help it
would re-read the whole epoch. Here a filter in that execution skips every example whose gradient is
already in the restored checkpoint:

- `DataPosition` (saved in each checkpoint by rank 0) holds the epoch and a bitmap of the examples
  consumed so far in it: all ranks' ids are gathered at checkpoint time.
- `DataPositionTracker`, a tiny Ray actor created by the driver, holds the position the streams of
  the current epoch start from. Rank 0 sets it from the restored checkpoint before any rank opens a
  stream. Each reading rank reports when it has read an epoch to the end; once all have, the tracker
  moves to the next epoch with nothing consumed, and only then do the ranks open that epoch's stream
  (jobs/workers/pretrain_worker.py). So every stream of an epoch sees that epoch's position, however far ahead of
  the training loop its rank reads (jobs/loops/epoch_stream.py).
- `skip_consumed`, a map stage appended to the training dataset (fused with the parquet read), drops
  the examples the tracker's position marks consumed. It runs as plain tasks, which fetch the
  position once per process and version: no actor to start at every epoch.

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


class PositionTracker:
    """The state behind DataPositionTracker (a plain class, so it can be tested without Ray)."""

    def __init__(self, num_examples: int, readers: int):
        self.num_examples, self.readers, self._version = num_examples, readers, 0
        self.set(DataPosition.start(num_examples).to_bytes())

    def set(self, position: bytes) -> None:
        """The position a (restored) run starts from; forgets which readers ended which epoch."""
        self._position, self._epoch = position, DataPosition.from_bytes(position).epoch
        self._ended: set[int] = set()
        self._version += 1

    def end_epoch(self, epoch: int, rank: int) -> None:
        """`rank` has read `epoch` to the end; when every reader has, the next epoch starts empty."""
        if epoch != self._epoch:
            return  # a report from before the last set() (a restarted run)
        self._ended.add(rank)
        if len(self._ended) == self.readers:
            self.set(DataPosition(epoch + 1, np.zeros(self.num_examples, dtype=bool)).to_bytes())

    def epoch(self) -> int:
        return self._epoch

    def get(self) -> bytes:
        return self._position

    def get_if_newer(self, version: int) -> tuple[int, bytes | None]:
        return self._version, (self._position if self._version != version else None)


DataPositionTracker = ray.remote(num_cpus=0)(PositionTracker)

_positions: dict = {}  # per task process: tracker -> (version, consumed bitmap, ExampleIndex)


def _skip(batch: dict[str, np.ndarray], tracker, shard_rows: list[int]) -> dict[str, np.ndarray]:
    """Ray Data map task: drop examples already consumed in the current epoch."""
    consumed, index = current_position(tracker, shard_rows,
                                       lambda version: ray.get(tracker.get_if_newer.remote(version)))
    return drop_consumed(batch, consumed, index)


def current_position(tracker, shard_rows: list[int], ask) -> tuple[np.ndarray, ExampleIndex]:
    """This task process's copy of `tracker`'s position (the consumed bitmap, the index into it). `ask(version)`
    returns (the latest version, its position bytes, or None while `version` is the latest): a task fetches a
    position once per version, not once per batch."""
    version, consumed, index = _positions.get(tracker, (0, None, None))
    latest, position = ask(version)
    if position is not None:
        consumed, index = DataPosition.from_bytes(position).consumed, index or ExampleIndex(shard_rows)
        _positions[tracker] = (latest, consumed, index)
    return consumed, index


def drop_consumed(batch: dict[str, np.ndarray], consumed: np.ndarray, index: ExampleIndex) -> dict[str, np.ndarray]:
    """`batch` less the examples `consumed` marks (the batch itself when none is)."""
    keep = ~consumed[index(batch["example_id"])]
    return batch if keep.all() else {k: v[keep] for k, v in batch.items()}


def skip_consumed(ds: "ray.data.Dataset", tracker, shard_rows: list[int]) -> "ray.data.Dataset":
    return ds.map_batches(_skip, fn_args=(tracker, shard_rows), batch_format="numpy", zero_copy_batch=True)
