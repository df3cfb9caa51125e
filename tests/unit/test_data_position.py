"""jobs/loops/data_position.py's pure parts: the example-id -> bitmap index, the saved position, and what the map stage
does with them: fetch the position once per version, drop the examples a restored run already trained on (the
tracker's state machine is in test_epoch_stream.py; the stage on a real Ray Data pipeline in tests/e2e/test_resume.py).
The tracker here is the actor's own class, PositionTracker, called directly."""

import numpy as np
import pytest

from jobs.loops import data_position
from jobs.loops.data_position import DataPosition, ExampleIndex, PositionTracker, current_position, drop_consumed

SHARD_ROWS = [3, 0, 2, 4]  # an empty shard in the middle, as a tiny bucket can leave


def example_ids(shard_rows=SHARD_ROWS) -> np.ndarray:
    """Every example id of the set in dense order: (shard << 32) + row (pipelines.prepare)."""
    return np.array([(s << 32) + r for s, rows in enumerate(shard_rows) for r in range(rows)], dtype=np.int64)


def test_example_ids_map_one_to_one_onto_dense_indices_in_shard_order():
    index = ExampleIndex(SHARD_ROWS)
    assert index.num_examples == 9
    np.testing.assert_array_equal(index(example_ids()), np.arange(9))
    np.testing.assert_array_equal(index([(3 << 32) + 3, (0 << 32) + 1, (2 << 32) + 0]), [8, 1, 3])
    big = ExampleIndex([5, 2**31, 7])  # row numbers use all 32 bits below the shard
    assert big((2 << 32) + 6) == 5 + 2**31 + 6


def test_a_position_round_trips_through_bytes():
    consumed = np.random.default_rng(0).random(1001) < 0.3  # not a multiple of 8 bits
    restored = DataPosition.from_bytes(DataPosition(4, consumed).to_bytes())
    assert restored.epoch == 4 and restored.consumed.dtype == bool
    np.testing.assert_array_equal(restored.consumed, consumed)
    assert restored.samples_consumed == consumed.sum()
    assert DataPosition.start(5).samples_consumed == 0 and DataPosition.start(5).epoch == 0


class Tracker:
    """A PositionTracker and the versions a task asked it with (`ask` is what the stage sends the actor)."""

    def __init__(self):
        self.tracker, self.asked = PositionTracker(num_examples=9, readers=1), []

    def ask(self, version):
        self.asked.append(version)
        return self.tracker.get_if_newer(version)


@pytest.fixture
def tracker():
    data_position._positions.clear()  # a fresh task process
    yield Tracker()
    data_position._positions.clear()


def skip(batch, t: Tracker):
    """What the stage (jobs.loops.data_position._skip) does with a batch, the actor call replaced by the tracker's method."""
    return drop_consumed(batch, *current_position(t, SHARD_ROWS, t.ask))


def batch_of(ids: np.ndarray) -> dict[str, np.ndarray]:
    return {"example_id": ids, "input_ids": ids * 10}


def test_the_stage_drops_exactly_the_examples_consumed_in_this_epoch(tracker):
    consumed = np.zeros(9, dtype=bool)
    consumed[[0, 4, 8]] = True
    tracker.tracker.set(DataPosition(2, consumed).to_bytes())
    ids = example_ids()[::-1]
    out = skip(batch_of(ids), tracker)
    kept = [i for i in ids if ExampleIndex(SHARD_ROWS)(i) not in (0, 4, 8)]
    assert out["example_id"].tolist() == kept and out["input_ids"].tolist() == [i * 10 for i in kept]


def test_a_batch_with_nothing_consumed_passes_through_uncopied(tracker):
    batch = batch_of(example_ids())
    assert skip(batch, tracker) is batch


def test_a_task_fetches_the_position_once_per_version_and_follows_a_new_one(tracker):
    consumed = np.zeros(9, dtype=bool)
    consumed[:5] = True
    tracker.tracker.set(DataPosition(0, consumed).to_bytes())
    ids = example_ids()
    assert skip(batch_of(ids), tracker)["example_id"].tolist() == ids[5:].tolist()
    assert skip(batch_of(ids), tracker)["example_id"].tolist() == ids[5:].tolist()
    first, second = tracker.asked
    assert first == 0 and second == tracker.tracker.get_if_newer(-1)[0]  # the second asks with what it holds
    tracker.tracker.end_epoch(0, rank=0)  # every reader is done: the next epoch starts with nothing consumed
    assert skip(batch_of(ids), tracker)["example_id"].tolist() == ids.tolist()
