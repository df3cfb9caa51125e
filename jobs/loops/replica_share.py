"""A data-parallel replica's share of the pretraining data, for loops that read more than their share: every
pipeline first-stage rank reads the whole (unsplit) training set, and every rank the whole eval set."""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import numpy as np

from bert_core.masking import PretrainingCollator, masked_once


def eval_share(rows: dict[str, np.ndarray], collator: PretrainingCollator, replica: int, replicas: int) -> dict:
    """`replica`'s rows of the run's eval set, every replicas-th: dynamic masks are drawn into the whole set
    first (masked_once), alike on every rank, so no row's masks depend on the split or on the micro-batches."""
    if "masked_positions" not in rows:
        rows = masked_once(rows, collator)
    return {k: v[replica::replicas] for k, v in rows.items()}


def replica_batches(batches: Iterable[dict], keep: Callable[[dict], np.ndarray], size: int) -> Iterator[dict]:
    """The rows of `batches` that `keep` marks, in the order read, in micro-batches of exactly `size` rows, and
    the share's last rows (fewer) as a final shorter one: every kept row once.

    Pipelines need it: their replicas step in lockstep, one micro-batch each, and a replica's share of a shuffled
    read batch varies (with a small `size`, down to nothing). Here every replica's batches but its last are full,
    and the shares (example index mod replicas) differ by at most one row, so replicas end an epoch together; where
    one share is a multiple of `size` and the next one row longer, that row is left at the lockstep end, untrained
    in this epoch (at most replicas - 1 rows an epoch). Rows held here are not consumed yet (the loop marks rows once
    trained), so a restart reads them again."""
    parts: list[dict] = []
    held = 0
    for batch in batches:
        mask = keep(batch)
        if mask.any():
            parts.append({k: v[mask] for k, v in batch.items()})
            held += int(mask.sum())
        while held >= size:
            rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
            yield {k: v[:size] for k, v in rows.items()}
            parts, held = [{k: v[size:] for k, v in rows.items()}], held - size
    if held:
        yield {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
