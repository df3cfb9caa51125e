"""jobs.loops.epoch_stream: epochs read ahead in a thread, seen by the loop one at a time; and the position
tracker that lets a rank open the next epoch only once every rank has read this one."""

import threading
import time

import numpy as np
import pytest

from jobs.loops.data_position import DataPosition, PositionTracker
from jobs.loops.epoch_stream import EpochStream


class Epochs:
    """open_epoch for the stream: epoch e is [e*10, e*10+1, ...]; records when each epoch was opened."""

    def __init__(self, size: int = 4, slow_open_s: float = 0.0):
        self.size, self.slow_open_s = size, slow_open_s
        self.opened: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, epoch: int):
        time.sleep(self.slow_open_s)
        with self.lock:
            self.opened.append(epoch)
        return iter([epoch * 10 + i for i in range(self.size)])


def wait_for(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("depth", [0, 1, 3, 64])
def test_the_loop_sees_each_epoch_whole_and_in_order(depth):
    stream = EpochStream(Epochs(), epoch=2, depth=depth)
    seen = []
    for _ in range(3):
        seen.append(list(stream))
        stream.advance()
    stream.close()
    assert seen == [[20, 21, 22, 23], [30, 31, 32, 33], [40, 41, 42, 43]]


def test_the_next_epoch_opens_while_the_loop_is_still_in_this_one():
    epochs = Epochs(size=4)
    stream = EpochStream(epochs, epoch=0, depth=16)
    assert next(stream) == 0
    wait_for(lambda: 1 in epochs.opened)  # the loop has taken one batch of epoch 0
    assert [next(stream) for _ in range(3)] == [1, 2, 3]
    stream.close()


def test_without_read_ahead_an_epoch_opens_when_the_loop_reaches_it():
    epochs = Epochs(size=2)
    stream = EpochStream(epochs, epoch=0, depth=0)
    assert list(stream) == [0, 1]
    time.sleep(0.1)
    assert epochs.opened == [0]
    stream.advance()
    assert epochs.opened == [0, 1]


def test_what_the_loop_leaves_of_an_epoch_is_dropped_at_advance():
    """Ranks end an epoch together: a rank whose neighbour ran out first leaves its last batch behind."""
    stream = EpochStream(Epochs(size=4), epoch=0, depth=8)
    assert [next(stream), next(stream)] == [0, 1]
    stream.advance()
    assert list(stream) == [10, 11, 12, 13]
    stream.close()


def test_the_reader_never_runs_more_than_depth_batches_ahead():
    epochs = Epochs(size=100)
    stream = EpochStream(epochs, epoch=0, depth=5)
    assert next(stream) == 0
    time.sleep(0.2)
    assert stream._queue.qsize() <= 5 and epochs.opened == [0]
    stream.close()


def test_a_reader_error_is_raised_in_the_loop():
    def open_epoch(epoch):
        if epoch == 1:
            raise OSError("shard 7 vanished")
        return iter([1, 2])

    stream = EpochStream(open_epoch, epoch=0, depth=4)
    assert list(stream) == [1, 2]
    stream.advance()
    with pytest.raises(OSError, match="shard 7 vanished"):
        next(stream)


def test_a_reader_error_in_an_epoch_the_loop_has_left_is_raised_not_waited_on():
    """A rank whose neighbour ran out first moves on while its reader still reads the old epoch: an error there was
    dropped with the old epoch's batches, the reader had ended, and the loop waited forever (the other ranks too, in
    their lockstep all-reduce): a hang that Ray Train never restarts."""
    def open_epoch(epoch):
        def batches():
            yield 1
            time.sleep(0.2)  # the loop advances meanwhile
            raise OSError("a Ray Data task failed")
        return batches()

    stream = EpochStream(open_epoch, epoch=0, depth=4)
    assert next(stream) == 1
    stream.advance()
    result = []
    thread = threading.Thread(target=lambda: result.append(pytest.raises(OSError, next, stream)), daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive() and "a Ray Data task failed" in str(result[0].value)


def test_close_ends_the_reader():
    stream = EpochStream(Epochs(size=1000), epoch=0, depth=2)
    next(stream)
    stream.close()
    stream._thread.join(timeout=2)
    assert not stream._thread.is_alive()


# -- the tracker the streams of an epoch read their position from (jobs/loops/data_position.py) ----------

def position(epoch: int, consumed: list[bool]) -> bytes:
    return DataPosition(epoch, np.array(consumed)).to_bytes()


def test_the_tracker_moves_to_the_next_epoch_only_when_every_reader_has_ended_this_one():
    tracker = PositionTracker(num_examples=4, readers=2)
    tracker.set(position(3, [True, False, True, False]))  # a run restored mid-epoch 3
    tracker.end_epoch(3, rank=0)
    tracker.end_epoch(3, rank=0)  # a rank reports once per epoch; a repeat changes nothing
    assert tracker.epoch() == 3  # rank 1 may still be reading epoch 3: its position must hold
    assert DataPosition.from_bytes(tracker.get()).consumed.tolist() == [True, False, True, False]
    tracker.end_epoch(3, rank=1)
    now = DataPosition.from_bytes(tracker.get())
    assert now.epoch == tracker.epoch() == 4 and not now.consumed.any()


def test_a_restored_position_forgets_the_ends_reported_before_it():
    tracker = PositionTracker(num_examples=2, readers=2)
    tracker.end_epoch(0, rank=0)  # then the worker group dies; the run restores epoch 0
    tracker.set(position(0, [True, False]))
    tracker.end_epoch(0, rank=1)
    assert tracker.epoch() == 0
    tracker.end_epoch(5, rank=0)  # a report for another epoch (from before the restore) is ignored
    assert tracker.epoch() == 0


def test_a_reader_fetches_the_position_only_when_it_changed():
    tracker = PositionTracker(num_examples=2, readers=1)
    version, data = tracker.get_if_newer(0)
    assert data is not None and tracker.get_if_newer(version) == (version, None)
    tracker.end_epoch(0, rank=0)
    assert tracker.get_if_newer(version)[1] is not None
