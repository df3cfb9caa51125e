"""The exact-resume map stage on a real Ray Data pipeline and a real tracker actor: `skip_consumed` drops exactly the
examples the tracker's position marks consumed, every column with them, in every read task, and a running pipeline's
tasks follow a new position (a restored run's, the next epoch's) instead of the copy they fetched first.

The pure parts (the index, the bitmap, the fetch-once-per-version cache) are unit-tested in
tests/unit/test_data_position.py; this module is the Ray glue around them (`_skip`, `skip_consumed`), and what
bench/mutants_ray.py runs against that glue's mutants, one fresh process and Ray per mutant."""

import numpy as np
import pytest
import ray

from jobs.loops.data_position import DataPosition, DataPositionTracker, _skip, skip_consumed

pytestmark = pytest.mark.slow  # a real local Ray cluster: `make test`, not `make test-fast`

SHARD_ROWS = [3, 0, 2, 4]  # an empty shard in the middle, as a tiny bucket can leave
IDS = np.array([(s << 32) + r for s, rows in enumerate(SHARD_ROWS) for r in range(rows)], dtype=np.int64)


def dataset() -> "ray.data.Dataset":
    """The examples in three blocks (three read tasks), each row carrying its dense index as a second column."""
    return ray.data.from_items([{"example_id": int(i), "dense": k} for k, i in enumerate(IDS)], override_num_blocks=3)


def position(epoch: int, consumed: list[int]) -> bytes:
    bits = np.zeros(len(IDS), dtype=bool)
    bits[consumed] = True
    return DataPosition(epoch, bits).to_bytes()


def read(ds) -> list[tuple[int, int]]:
    return sorted((int(r["example_id"]), int(r["dense"])) for r in ds.take_all())


def expected(kept: list[int]) -> list[tuple[int, int]]:
    return sorted((int(IDS[k]), k) for k in kept)


def test_the_stage_drops_exactly_the_consumed_examples_and_follows_each_new_position(ray_up):
    tracker = DataPositionTracker.remote(len(IDS), 1)
    stage = skip_consumed(dataset(), tracker, SHARD_ROWS)

    assert read(stage) == expected(list(range(9)))  # a fresh run: nothing consumed, nothing dropped

    ray.get(tracker.set.remote(position(0, [0, 2, 3, 8])))  # a restored run: first, last, and each side of a shard
    assert read(stage) == expected([1, 4, 5, 6, 7])

    ray.get(tracker.set.remote(position(1, [4, 5, 6])))  # a later position: the tasks drop the new set, not the old
    assert read(stage) == expected([0, 1, 2, 3, 7, 8])

    ray.get(tracker.set.remote(position(1, list(range(9)))))  # an epoch read to its end on restore: nothing left
    assert read(stage) == []


def test_the_map_function_asks_the_actor_and_drops_the_consumed_rows_of_every_column(ray_up):
    """`_skip` as a read task calls it, here in the test's own process: mutmut (`make mutants`) learns which tests
    reach a function only from calls in that process, not from Ray's workers."""
    tracker = DataPositionTracker.remote(len(IDS), 1)
    ray.get(tracker.set.remote(position(2, [1, 3, 7])))
    batch = {"example_id": IDS, "dense": np.arange(len(IDS))}
    kept = _skip(batch, tracker, SHARD_ROWS)
    np.testing.assert_array_equal(kept["dense"], [0, 2, 4, 5, 6, 8])
    np.testing.assert_array_equal(kept["example_id"], IDS[[0, 2, 4, 5, 6, 8]])
    ray.get(tracker.set.remote(position(3, [])))
    assert _skip(batch, tracker, SHARD_ROWS) is batch  # nothing consumed: the batch itself, not a copy


def test_each_tracker_keeps_its_own_position_in_a_task_process(ray_up):
    """Two trackers at the same version (two training sets read in one worker process): each batch is filtered by
    its own tracker's bitmap, not by the copy the process fetched first."""
    first, second = DataPositionTracker.remote(len(IDS), 1), DataPositionTracker.remote(len(IDS), 1)
    ray.get([first.set.remote(position(0, [0, 1])), second.set.remote(position(0, [7, 8]))])
    batch = {"example_id": IDS, "dense": np.arange(len(IDS))}
    np.testing.assert_array_equal(_skip(batch, first, SHARD_ROWS)["dense"], [2, 3, 4, 5, 6, 7, 8])
    np.testing.assert_array_equal(_skip(batch, second, SHARD_ROWS)["dense"], [0, 1, 2, 3, 4, 5, 6])
