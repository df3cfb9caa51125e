"""The order a fine-tune trains in: every epoch a new permutation of all the training features, seeded by
(train.seed, epoch), dealt to the data-parallel ranks. Plain numpy: no Ray in here.

The driver makes the features once (Ray Data tasks: jobs/finetune._features) and leaves them in the object store as
numpy blocks, in the rows' order; every worker reads them from there (zero-copy on its node) and takes the rows of
each of its batches by index (`TrainFeatures`). Epoch e's order is `default_rng([seed, e]).permutation(N)`; rank r
of W takes every W-th row of it starting at r, the first N // W of those, in batches of train.batch_size (the last
one short). So:

  * every epoch visits every row once but the N mod W left over (other rows each epoch), in an order unrelated to
    the file's and to the previous epoch's: a file grouped by label (many exports are) reaches the model shuffled,
    no epoch ends on a run of one class, and no two epochs repeat their batches;
  * every rank has the same number of batches, so the ranks end an epoch together;
  * the same seed, rows and worker count give the same batches: a restarted or resubmitted run (which keeps its
    worker count: jobs/finetune.continuation_basis) skips the batches its checkpoint took and goes on row for row;
  * a sweep trial (one worker) with train.seed s trains in the order a one-worker fine-tune with seed s does.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


class TrainFeatures:
    """The training features as the numpy blocks the driver made (column -> array, rows first; any number of blocks,
    in the rows' order), read by row number without joining them: a join would copy the split into every worker."""

    def __init__(self, blocks: list[dict[str, np.ndarray]]):
        self.blocks = [b for b in blocks if b and len(next(iter(b.values())))]
        if not self.blocks:
            raise ValueError("no training features: every block is empty")
        first = self.blocks[0]
        for i, b in enumerate(self.blocks):
            if b.keys() != first.keys() or any(b[k].shape[1:] != first[k].shape[1:] for k in first):
                raise ValueError(f"training feature block {i} has columns "
                                 f"{ {k: v.shape[1:] for k, v in b.items()} }, block 0 "
                                 f"{ {k: v.shape[1:] for k, v in first.items()} }: the features were made unevenly")
        self.starts = np.concatenate([[0], np.cumsum([len(next(iter(b.values()))) for b in self.blocks])])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def take(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The features of `rows` (row numbers over all blocks), in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        block = np.searchsorted(self.starts, rows, side="right") - 1
        out = {k: np.empty((len(rows), *v.shape[1:]), dtype=v.dtype) for k, v in self.blocks[0].items()}
        for b in np.unique(block):
            at = block == b
            local = rows[at] - self.starts[b]
            for k, column in out.items():
                column[at] = self.blocks[b][k][local]
        return out


def rank_rows(num_rows: int, seed: int, epoch: int, rank: int, world: int) -> np.ndarray:
    """The row numbers rank `rank` of `world` trains on in `epoch`, in order: num_rows // world of them."""
    order = np.random.default_rng([seed, epoch]).permutation(num_rows)
    return order[rank::world][: num_rows // world]


def epoch_batches(features: TrainFeatures, *, seed: int, epoch: int, rank: int, world: int, batch_size: int,
                  taken: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """This rank's numpy batches of `epoch`, less the first `taken` (trained on before a restore)."""
    rows = rank_rows(len(features), seed, epoch, rank, world)
    for start in range(taken * batch_size, len(rows), batch_size):
        yield features.take(rows[start:start + batch_size])
