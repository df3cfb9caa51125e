"""What every task reader shares: the loaded-split type with its reject counts, and tokenizers.

Bad input follows the rule of pipelines.sources: a missing file raises FileNotFoundError naming
it (configuration error); a file whose structure is wrong throughout (bad header, not JSON)
raises TaskDataError; a bad record is skipped, counted by reason in `TaskSplit.rejects`, and
logged once per file -- never silently dropped.
"""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

logger = logging.getLogger(__name__)

SAMPLE_CHARS = 200  # excerpt of a rejected record kept for the report
MAX_SAMPLES = 20  # rejected records kept as excerpts per file


class TaskDataError(ValueError):
    """A task file is unusable as a whole (wrong header, not JSON, no records)."""


@dataclass
class TaskSplit(Sequence):
    """One split of a task: a sequence of row dicts plus what was rejected on the way in."""

    rows: list[dict[str, Any]]
    path: str
    rejects: collections.Counter = field(default_factory=collections.Counter)  # reason -> count
    samples: list[tuple[str, str, str]] = field(default_factory=list)  # (reason, where, excerpt)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows)

    def reject(self, reason: str, where: str, record: str) -> None:
        self.rejects[reason] += 1
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append((reason, where, record[:SAMPLE_CHARS]))

    def report(self) -> "TaskSplit":
        """Log the reject counts (if any); returns self so readers can end with it."""
        if self.rejects:
            counts = ", ".join(f"{k}={v}" for k, v in sorted(self.rejects.items()))
            logger.warning("%s: kept %d records, skipped %d (%s); first: %s", self.path, len(self.rows),
                           sum(self.rejects.values()), counts, self.samples[0])
        return self


def require_file(path: str | os.PathLike, what: str) -> str:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    return path


def load_tokenizer(tokenizer):
    """A fast (Rust-backed) BERT tokenizer from a directory, or the tokenizer itself.

    Offsets (SQuAD) and word ids (CoNLL) only exist on fast tokenizers, so a slow one is refused.
    Our release checkpoints hold vocab.txt + tokenizer.json, which BertTokenizerFast loads.
    """
    if isinstance(tokenizer, (str, os.PathLike)):
        from transformers import BertTokenizerFast  # deferred: a 5 s import most callers of readers skip

        return BertTokenizerFast.from_pretrained(os.fspath(tokenizer))
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError(f"need a fast tokenizer (offset mapping, word ids), got {type(tokenizer).__name__}")
    return tokenizer


def count_too_long(rows: list[dict], kind: str, tokenizer, max_seq_len: int) -> int:
    """Rows longer than `max_seq_len` word pieces with their special tokens, which the features cut to fit: sentences
    (and pairs) of `text_a`/`text_b`, or a token-classification row's `tokens`. Extractive QA spreads a long context
    over windows instead, so nothing is cut: 0."""
    if kind == "question-answering" or not rows:
        return 0
    if kind == "token-classification":
        enc = tokenizer([list(r["tokens"]) for r in rows], is_split_into_words=True, verbose=False)
    else:  # Arrow hands back numpy strings, and NaN or None for a missing pair
        pairs = [r.get("text_b") for r in rows]
        enc = tokenizer([str(r["text_a"]) for r in rows],
                        [str(b) for b in pairs] if all(isinstance(b, str) for b in pairs) else None,
                        verbose=False)  # counting: no "longer than the maximum" warning per long row
    return sum(len(ids) > max_seq_len for ids in enc["input_ids"])


def batch_rows(batch) -> list[dict]:
    """Row dicts from a column batch (Ray Data's numpy / pandas formats) or a list of rows."""
    if isinstance(batch, Mapping):
        columns = list(batch)
        return [dict(zip(columns, values)) for values in zip(*(batch[c] for c in columns))]
    if hasattr(batch, "to_dict"):  # pandas.DataFrame
        return batch.to_dict("records")
    return list(batch)


class TaskFeaturizer:
    """Ray Data `map_batches` callable for any `*_features` function of this package.

    Run it on an actor pool (`ds.map_batches(TaskFeaturizer, fn_constructor_args=(squad_train_features,
    tokenizer_dir), fn_constructor_kwargs={...}, concurrency=n)`) so each actor loads the tokenizer
    once; batches may come out with more rows than went in (SQuAD windows).
    """

    def __init__(self, features: Callable, tokenizer, **kwargs):
        self.features, self.tokenizer, self.kwargs = features, load_tokenizer(tokenizer), kwargs

    def __call__(self, batch) -> dict:
        return self.features(batch_rows(batch), self.tokenizer, **self.kwargs)
