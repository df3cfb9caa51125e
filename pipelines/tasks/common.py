"""What every task reader shares: the loaded-split type with its reject counts, and tokenizers.

Bad input follows the rule of pipelines.sources: a missing file raises FileNotFoundError naming
it (configuration error); a file whose structure is wrong throughout (bad header, not JSON)
raises TaskDataError; a bad record is skipped, counted by reason in `TaskSplit.rejects`, and
logged once per file -- never silently dropped. What is read another way inside a record that is kept (a SQuAD
answer whose start was converted or is off its text) is counted apart, in `TaskSplit.notes`: no record was skipped.
"""

from __future__ import annotations

import collections
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

logger = logging.getLogger(__name__)

SAMPLE_CHARS = 200  # excerpt of a rejected record kept for the report
MAX_SAMPLES = 20  # rejected records kept as excerpts per file


class TaskDataError(ValueError):
    """A task file is unusable as a whole (wrong header, not JSON, no records)."""


def named_once(path, wanted: list, header: list) -> list:
    """`wanted` (the columns read), each named once in `header`; else TaskDataError: a dict of the row (a CSV line's
    zip, a Parquet batch's columns) would keep the last one's values, unsaid."""
    twice = [c for c, k in collections.Counter(wanted).items() if k > 1]
    if twice:
        raise TaskDataError(f"{path}: the header names column {twice[0]!r} more than once ({header}); rename all but "
                            "the one to read")
    return wanted


@dataclass
class TaskSplit(Sequence):
    """One split of a task: a sequence of row dicts plus what was rejected on the way in."""

    rows: list[dict[str, Any]]
    path: str
    rejects: collections.Counter = field(default_factory=collections.Counter)  # reason -> count
    samples: list[tuple[str, str, str]] = field(default_factory=list)  # (reason, where, excerpt)
    # reason -> count of answers converted, dropped or kept without a training target, in records kept: no reject,
    # and what publishes rejects (jobs/loops/ft_tasks: data.rejected.<split>.* tags) reads `rejects` alone
    notes: collections.Counter = field(default_factory=collections.Counter)
    noted: list[tuple[str, str, str]] = field(default_factory=list)  # (reason, where, excerpt) of the first notes

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

    def note(self, reason: str, where: str, record: str) -> None:
        self.notes[reason] += 1
        if len(self.noted) < MAX_SAMPLES:
            self.noted.append((reason, where, record[:SAMPLE_CHARS]))

    def report(self) -> "TaskSplit":
        """Log the reject and note counts (if any); returns self so readers can end with it."""
        if self.rejects:
            counts = ", ".join(f"{k}={v}" for k, v in sorted(self.rejects.items()))
            logger.warning("%s: kept %d records, skipped %d (%s); first: %s", self.path, len(self.rows),
                           sum(self.rejects.values()), counts, self.samples[0])
        if self.notes:
            counts = ", ".join(f"{k}={v}" for k, v in sorted(self.notes.items()))
            logger.warning("%s: answers converted, dropped or kept without a training target, in records kept "
                           "(%s); first: %s", self.path, counts, self.noted[0])
        return self


def require_file(path: str | os.PathLike, what: str) -> str:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    return path


def load_tokenizer(tokenizer):
    """A fast (Rust-backed) BERT tokenizer from a directory (require_wordpiece's), or the tokenizer itself.

    Offsets (SQuAD) and word ids (CoNLL) only exist on fast tokenizers, so a slow one is refused, and so is one
    whose model is not WordPiece. Our release checkpoints hold vocab.txt + tokenizer.json, which BertTokenizerFast
    loads. A folder's normalizer flags that its tokenizer_config.json leaves out are taken from its tokenizer.json,
    as bert_core.checkpoint's export writes them: transformers rebuilds BERT's normalizer from tokenizer_config.json
    with do_lower_case true by default, so a cased starting model's tokenizer.json alone fine-tuned on lowercased
    ids and was scored and served, once exported, on cased ones.
    """
    if isinstance(tokenizer, (str, os.PathLike)):
        from transformers import BertTokenizerFast  # deferred: a 5 s import most callers of readers skip

        folder = require_wordpiece(tokenizer)
        tok = BertTokenizerFast.from_pretrained(folder, **_unstated_flags(folder))
        # features are padded and cut on the right whatever the checkpoint says ("padding_side": "left"): the
        # fine-tuning collate trims padding columns from the right, and the head reads [CLS] at position 0
        tok.padding_side = tok.truncation_side = "right"
        return tok
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError(f"need a fast tokenizer (offset mapping, word ids), got {type(tokenizer).__name__}")
    model = type(tokenizer.backend_tokenizer.model).__name__
    if model != WORDPIECE:
        raise TypeError(f"need a WordPiece tokenizer, got {type(tokenizer).__name__} with a {model} model")
    return tokenizer


def _unstated_flags(folder: str) -> dict:
    """The flags (do_lower_case, strip_accents, tokenize_chinese_chars) `folder`'s tokenizer.json's BertNormalizer
    states and its tokenizer_config.json does not: those the export adds, so both sides read the same tokenizer."""
    from bert_core.checkpoint import _normalizer_settings  # deferred, as transformers is: it imports torch

    path = os.path.join(folder, "tokenizer_config.json")
    settings = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            settings = json.load(f)
    stated = _normalizer_settings(Path(folder) / "tokenizer.json")
    return {k: v for k, v in stated.items() if k not in settings}


WORDPIECE = "WordPiece"  # the `tokenizers` model (tokenizer.json's model.type) of BERT's tokenizers


def require_wordpiece(folder: str | os.PathLike) -> str:
    """`folder` (as a str), once it is known to hold a WordPiece tokenizer: a tokenizer.json whose model is
    WordPiece, or BERT's vocab.txt alone. BertTokenizerFast loads any other folder without a word: a byte-level
    BPE tokenizer.json (ModernBERT's, RoBERTa's) is read as a WordPiece vocabulary that leaves most words [UNK],
    a folder without a tokenizer as an empty one that leaves every word [UNK]. Raises ConfigError (a model of
    another kind) or FileNotFoundError, naming the folder; reads JSON only, so drivers call it before any Ray work.
    """
    from bert_core.config import ConfigError

    folder = os.fspath(folder)
    spec = os.path.join(folder, "tokenizer.json")
    if os.path.isfile(spec):
        with open(spec, encoding="utf-8") as f:
            model = (json.load(f).get("model") or {}).get("type")
        if model != WORDPIECE:
            raise ConfigError(f"{folder}: tokenizer.json's model is {model}; bert-foundry fine-tunes and predicts "
                              f"with {WORDPIECE} tokenizers only (BERT's vocab.txt and tokenizer.json, or ours): "
                              "read as one, this tokenizer would turn most words into [UNK]")
    elif not os.path.isfile(os.path.join(folder, "vocab.txt")):
        raise FileNotFoundError(f"no tokenizer (tokenizer.json or vocab.txt) in {folder}")
    return folder


def count_too_long(rows: list[dict], kind: str, tokenizer, max_seq_len: int, max_query_length: int = 64) -> int:
    """Rows longer than `max_seq_len` word pieces with their special tokens, which the features cut to fit: sentences
    (and pairs) of `text_a`/`text_b`, or a token-classification row's `tokens`. Extractive QA spreads a long context
    over windows instead: its rows whose question is over `max_query_length` pieces, which the features cut."""
    if not rows:
        return 0
    if kind == "question-answering":  # as squad._encode cuts them
        enc = tokenizer([str(r["question"]).lstrip() for r in rows], add_special_tokens=False, verbose=False)
        return sum(len(ids) > max_query_length for ids in enc["input_ids"])
    if kind == "token-classification":
        enc = tokenizer([list(r["tokens"]) for r in rows], is_split_into_words=True, verbose=False)
    else:  # Arrow hands back numpy strings, and NaN or None for a missing pair
        pairs = [r.get("text_b") for r in rows]
        enc = tokenizer([str(r["text_a"]) for r in rows],
                        [str(b) for b in pairs] if all(isinstance(b, str) for b in pairs) else None,
                        verbose=False)  # counting: no "longer than the maximum" warning per long row
    return sum(len(ids) > max_seq_len for ids in enc["input_ids"])


UNKNOWN_SHARE = 0.05  # of a text's word pieces: more [UNK]s than this, and the tokenizer does not cover the text


def unknown_share(rows: list[dict], kind: str, tokenizer) -> float:
    """The share of [UNK] among the word pieces of `rows`' text (their sentences, a token-classification row's
    `tokens`, a QA row's question and context): ~0 where the vocabulary covers the text's characters, and a large
    share where it does not (another script, a vocabulary of another language), which nothing else would notice."""
    if kind == "token-classification":
        texts = [" ".join(r["tokens"]) for r in rows]
    elif kind == "question-answering":
        texts = [f"{r['question']} {r['context']}" for r in rows]
    else:  # a missing pair: NaN or None
        texts = [str(r["text_a"]) for r in rows] + [r["text_b"] for r in rows if isinstance(r.get("text_b"), str)]
    ids = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"] if texts else []
    pieces = sum(map(len, ids))
    return sum(row.count(tokenizer.unk_token_id) for row in ids) / pieces if pieces else 0.0


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
