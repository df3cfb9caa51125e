"""jobs/loops/train_order.py: the fine-tune's order of the training features, a new one every epoch, dealt to ranks."""

import numpy as np
import pytest

from jobs.loops.train_order import TrainFeatures, epoch_batches, rank_rows


def features(n: int, cuts=(7, 7, 40)) -> TrainFeatures:
    """n rows whose every column says the row's number, in blocks cut at `cuts` (one of them empty)."""
    rows = np.arange(n)
    return TrainFeatures([{"input_ids": np.repeat(part[:, None], 5, axis=1), "labels": part, "score": part / 2}
                          for part in np.split(rows, cuts)])


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation of where each row stands in two orders of the same rows."""
    pa, pb = np.empty(len(a)), np.empty(len(b))
    pa[a], pb[b] = np.arange(len(a)), np.arange(len(b))
    return float(np.corrcoef(pa, pb)[0, 1])


def test_take_reads_rows_across_blocks_in_the_order_asked():
    f = features(100)
    assert len(f) == 100 and len(f.blocks) == 3  # the empty block is dropped
    rows = np.array([99, 0, 6, 7, 39, 40, 6])
    got = f.take(rows)
    assert got["labels"].tolist() == rows.tolist() and got["score"].tolist() == (rows / 2).tolist()
    assert got["input_ids"].shape == (7, 5) and (got["input_ids"] == rows[:, None]).all()
    assert got["input_ids"].dtype == np.int64 and got["input_ids"].flags.writeable


def test_blocks_made_unevenly_or_not_at_all_are_refused():
    with pytest.raises(ValueError, match="block 1 has columns"):
        TrainFeatures([{"input_ids": np.zeros((2, 4))}, {"input_ids": np.zeros((2, 5))}])
    with pytest.raises(ValueError, match="every block is empty"):
        TrainFeatures([{"input_ids": np.zeros((0, 4))}])


@pytest.mark.parametrize("n,world", [(100, 1), (100, 3), (101, 4), (8, 8)])
def test_each_epoch_every_rank_gets_as_many_rows_none_twice_and_at_most_world_minus_one_left_out(n, world):
    for epoch in range(3):
        parts = [rank_rows(n, 5, epoch, rank, world) for rank in range(world)]
        assert all(len(p) == n // world for p in parts)
        seen = np.concatenate(parts)
        assert len(set(seen.tolist())) == len(seen) and n - len(seen) == n % world


def test_epochs_are_new_orders_unrelated_to_the_file_and_to_each_other():
    """The rows' order in their file (here: sorted by label, as many exports are) and the last epoch's say nothing
    of the next epoch's: a fine-tune shuffled once, with a small local buffer after, repeated its batches each epoch
    (rank correlation ~0.995 from one epoch to the next) and ended every epoch on the same rows."""
    n = 3000
    labels = np.arange(n) * 3 // n  # rows 0..999 of class 0, then class 1, then class 2
    orders = [rank_rows(n, 0, epoch, 0, 1) for epoch in range(3)]
    for a, b in ((orders[0], orders[1]), (orders[1], orders[2])):
        assert abs(spearman(a, b)) < 0.1
        assert len(set(a[-100:]) & set(b[-100:])) < 20  # the rows that end an epoch, just before its evaluation
    for order in orders:
        assert abs(spearman(order, np.arange(n))) < 0.1
        assert 0.25 < (labels[order[-300:]] == 0).mean() < 0.42  # the end of an epoch is no run of one class


def test_the_same_seed_gives_the_same_batches_and_a_restore_goes_on_row_for_row():
    f = features(100)
    whole = [b["labels"].tolist() for b in epoch_batches(f, seed=7, epoch=1, rank=1, world=2, batch_size=8)]
    assert [len(b) for b in whole] == [8] * 6 + [2]
    again = [b["labels"].tolist() for b in epoch_batches(f, seed=7, epoch=1, rank=1, world=2, batch_size=8)]
    rest = [b["labels"].tolist() for b in epoch_batches(f, seed=7, epoch=1, rank=1, world=2, batch_size=8, taken=4)]
    assert again == whole and rest == whole[4:]
    other = [b["labels"].tolist() for b in epoch_batches(f, seed=8, epoch=1, rank=1, world=2, batch_size=8)]
    assert other != whole
