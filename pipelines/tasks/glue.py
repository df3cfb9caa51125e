"""GLUE: the nine tasks from the TSV files of the GLUE download, into BERT features and scores.

The files' quirks, all handled here (the reason a generic CSV reader gets them wrong):
  * Quoting is off: quotes are ordinary characters inside sentences (csv.QUOTE_NONE), so a line
    is split on tabs and nothing else, and a row is exactly one line ending in "\\n".
  * CoLA train/dev have no header (source, label, author's mark, sentence); every test file
    has one, with an index column and no label column.
  * MRPC files start with a UTF-8 byte-order mark (inherited from the MSR corpus).
  * Columns are found by header name (MNLI has 12 columns in train, 16 in dev, its pair in
    sentence1 / sentence2 and the label in gold_label), never by position.
  * Real QQP (and a few STS-B) rows are broken by tabs or newlines inside a text; such a row has
    the wrong number of fields and is rejected as "wrong_column_count".
Rejected rows are counted by reason in TaskSplit.rejects and logged (see tasks.common).

Rows: {"idx", "text_a", "text_b", "label"}; text_b is None for single-sentence tasks; label is
the class index into GlueTask.labels, the float score for STS-B, or -1 / NaN for test splits
(which carry no labels). idx is the file's index/id column (what a GLUE submission needs) or,
for files without one, the 0-based data-row number.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pipelines.tasks.common import TaskDataError, TaskSplit, load_tokenizer

UNLABELED = -1  # label of a classification row from a test split


@dataclass(frozen=True)
class GlueTask:
    name: str
    dir_name: str  # folder of the task in the GLUE download (glue_data/<dir_name>/)
    files: dict  # split -> file name
    text_columns: tuple  # header names of text_a (and text_b)
    label_column: str  # header name of the label (absent from test files)
    labels: tuple | None  # label strings in class-index order; None = regression
    metrics: tuple  # names of glue_metrics outputs for this task
    index_column: str | None = "index"  # test files' row id column (QQP: "id")
    headerless: tuple | None = None  # column names of labeled files that have no header (CoLA)

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)


_STD = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
_BINARY = ("0", "1")
_NLI = ("entailment", "not_entailment")

GLUE_TASKS: dict[str, GlueTask] = {t.name: t for t in (
    GlueTask("cola", "CoLA", _STD, ("sentence",), "label", _BINARY, ("matthews_corrcoef",),
             headerless=("source", "label", "author_label", "sentence")),
    GlueTask("sst2", "SST-2", _STD, ("sentence",), "label", _BINARY, ("accuracy",)),
    GlueTask("mrpc", "MRPC", _STD, ("#1 String", "#2 String"), "Quality", _BINARY, ("accuracy", "f1")),
    GlueTask("stsb", "STS-B", _STD, ("sentence1", "sentence2"), "score", None, ("pearson", "spearmanr")),
    GlueTask("qqp", "QQP", _STD, ("question1", "question2"), "is_duplicate", _BINARY, ("accuracy", "f1"),
             index_column="id"),
    GlueTask("mnli", "MNLI", {"train": "train.tsv", "dev_matched": "dev_matched.tsv",
                              "dev_mismatched": "dev_mismatched.tsv", "test_matched": "test_matched.tsv",
                              "test_mismatched": "test_mismatched.tsv"},
             ("sentence1", "sentence2"), "gold_label", ("contradiction", "entailment", "neutral"), ("accuracy",)),
    GlueTask("qnli", "QNLI", _STD, ("question", "sentence"), "label", _NLI, ("accuracy",)),
    GlueTask("rte", "RTE", _STD, ("sentence1", "sentence2"), "label", _NLI, ("accuracy",)),
    GlueTask("wnli", "WNLI", _STD, ("sentence1", "sentence2"), "label", _BINARY, ("accuracy",)),
)}


def glue_task(name: str) -> GlueTask:
    """The task spec by name; case, '-' and '_' are ignored ("SST-2", "sts_b", "MNLI")."""
    key = name.lower().replace("-", "").replace("_", "")
    if key not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task {name!r}; expected one of {sorted(GLUE_TASKS)}")
    return GLUE_TASKS[key]


def _task_file(task: GlueTask, data_dir: str | os.PathLike, split: str) -> str:
    if split not in task.files:
        raise ValueError(f"GLUE {task.name} has no split {split!r}; expected one of {sorted(task.files)}")
    name = task.files[split]
    # data_dir may be the task folder (glue_data/MRPC) or the download root (glue_data).
    candidates = (os.path.join(data_dir, name), os.path.join(data_dir, task.dir_name, name))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"GLUE {task.name} {split} file not found: {candidates[0]} (nor {candidates[1]})")


def _lines(path: str):
    """(0-based line number, text or None if not UTF-8, raw bytes); splits on b"\\n" only."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f):
            if n == 0 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield n, raw.decode("utf-8").rstrip("\r\n"), raw
            except UnicodeDecodeError:
                yield n, None, raw


def _row(spec: GlueTask, fields: list[str], col: dict, labeled: bool, index: int | None, data_row: int):
    """The row dict, or the reject reason."""
    if len(fields) != len(col):
        return "wrong_column_count"
    if not labeled:
        label = math.nan if spec.is_regression else UNLABELED
    elif spec.is_regression:
        try:
            label = float(fields[col[spec.label_column]])
        except ValueError:
            return "bad_score"
        if not math.isfinite(label):  # "NaN", "inf" parse: a NaN target poisons the loss, a NaN gold reads as unlabeled
            return "bad_score"
    else:
        value = fields[col[spec.label_column]].strip()
        if value not in spec.labels:
            return "unknown_label"
        label = spec.labels.index(value)
    if index is not None:
        try:
            data_row = int(fields[index])
        except ValueError:
            return "bad_index"
    texts = [fields[col[c]] for c in spec.text_columns]
    return {"idx": data_row, "text_a": texts[0], "text_b": texts[1] if len(texts) > 1 else None, "label": label}


def load_glue(task: str, data_dir: str | os.PathLike, split: str) -> TaskSplit:
    """Rows of one GLUE split; see the module docstring for the row format and reject reasons."""
    spec = glue_task(task)
    path = _task_file(spec, data_dir, split)
    out = TaskSplit([], path)
    lines = _lines(path)
    test = split.startswith("test")
    if spec.headerless and not test:
        header, first_data_line = list(spec.headerless), 0
    else:
        first_data_line = 1
        first = next(lines, None)
        if first is not None and first[1] is None:
            raise TaskDataError(f"{path}: the header line is not UTF-8 (a UTF-16 'Unicode text' export? save as UTF-8)")
        if first is None or not first[1]:
            raise TaskDataError(f"{path}: empty file or missing header line")
        header = first[1].split("\t")
    col = {name: i for i, name in enumerate(header)}
    missing = [c for c in spec.text_columns if c not in col]
    if missing or (not test and spec.label_column not in col):
        raise TaskDataError(f"{path}: header {header} lacks {missing or [spec.label_column]} "
                            f"(GLUE {spec.name} expects {list(spec.text_columns) + [spec.label_column]})")
    labeled = spec.label_column in col
    index = col.get(spec.index_column) if test else None

    for n, line, raw in lines:
        where = f"line {n + 1}"
        if line is None:
            out.reject("invalid_utf8", where, raw.decode("utf-8", "replace"))
        elif not line.strip():
            out.reject("blank_line", where, line)
        else:
            row = _row(spec, line.split("\t"), col, labeled, index, n - first_data_line)
            if isinstance(row, str):
                out.reject(row, where, line)
            else:
                out.rows.append(row)
    if not out.rows:
        raise TaskDataError(f"{path}: no usable rows ({dict(out.rejects)})")
    return out.report()


def glue_features(rows, tokenizer, max_seq_len: int) -> dict[str, np.ndarray]:
    """input_ids, token_type_ids, attention_mask (N, max_seq_len) int64 and labels (N,).

    `rows` is a list of row dicts or a column mapping of "text_a", "text_b", "label". Pairs are truncated
    longest-first as transformers does (the served pipeline's way); original BERT's _truncate_seq_pair cuts the
    second text first where the two tie, so an odd cut can differ by one piece per side.
    labels are int64 class indices (-1 unlabeled) or float32 scores (NaN unlabeled).
    """
    tok = load_tokenizer(tokenizer)
    if isinstance(rows, Mapping):
        text_a, text_b, labels = list(rows["text_a"]), rows.get("text_b"), list(rows["label"])
    else:
        text_a, text_b, labels = [r["text_a"] for r in rows], [r.get("text_b") for r in rows], [r["label"] for r in rows]
    text_b = None if text_b is None or all(b is None for b in text_b) else list(text_b)
    if text_b is not None and any(b is None for b in text_b):
        raise ValueError("text_b is None for some rows and set for others; one task per call")
    enc = tok(text_a, text_b, truncation="longest_first", max_length=max_seq_len, padding="max_length",
              return_tensors="np", return_token_type_ids=True, return_attention_mask=True)
    regression = any(isinstance(v, (float, np.floating)) for v in labels)
    features = {k: enc[k].astype(np.int64) for k in ("input_ids", "token_type_ids", "attention_mask")}
    features["labels"] = np.asarray(labels, dtype=np.float32 if regression else np.int64)
    return features


def glue_metrics(task: str, predictions, labels) -> dict[str, float]:
    """The task's GLUE metrics, plus "score": their mean, the number the GLUE leaderboard shows.

    predictions: class ids (N,) or logits (N, C); for STS-B, scores (N,) or (N, 1).
    Metrics come from scikit-learn / scipy; F1 is of the positive class (MRPC, QQP).
    """
    from scipy.stats import pearsonr, spearmanr  # deferred: a job's config checks need neither
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    from pipelines.tasks.labels import correlation

    spec = glue_task(task)
    preds, gold = np.asarray(predictions), np.asarray(labels)
    if spec.is_regression:
        preds = preds.reshape(-1).astype(np.float64)
        unlabeled = np.isnan(gold.astype(np.float64))
    else:
        preds = preds.argmax(-1) if preds.ndim == 2 else preds
        unlabeled = gold == UNLABELED
    if unlabeled.any():
        raise ValueError(f"{int(unlabeled.sum())} unlabeled rows (a test split?) cannot be scored")
    if preds.shape != gold.shape:
        raise ValueError(f"predictions {preds.shape} and labels {gold.shape} differ in shape")
    scorers = {
        "accuracy": lambda: accuracy_score(gold, preds),
        "f1": lambda: f1_score(gold, preds),
        "matthews_corrcoef": lambda: matthews_corrcoef(gold, preds),
        "pearson": lambda: correlation(pearsonr, preds, gold),
        "spearmanr": lambda: correlation(spearmanr, preds, gold),
    }
    out = {name: float(scorers[name]()) for name in spec.metrics}
    out["score"] = float(np.mean(list(out.values())))
    return out
