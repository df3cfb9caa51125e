"""Labels and metrics of a user's own data (pipelines/tasks/files.py reads the rows): the label set taken from train
in a stable order, labels encoded as indices (a label train lacks is rejected and counted, never mapped to another
class), and the metrics of classification, multi-label classification and regression."""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable

import numpy as np

from pipelines.tasks.common import TaskDataError

_INTEGER = re.compile(r"[+-]?\d+")


def label_set(labels: Iterable, kind: str) -> tuple[str, ...]:
    """Label names in class-index order from the train split's raw labels (per row: a class, or a list
    of classes for multi-label / tags for token classification): all integer-like -> sorted numerically
    ("2" < "10"), else sorted as strings."""
    if kind not in ("classification", "multi-label", "token-classification"):
        raise ValueError(f"{kind} has no label set")
    names = set()
    for label in labels:
        names.update([str(label)] if kind == "classification" else map(str, label))
    if not names:
        raise TaskDataError(f"no labels in the train split of this {kind} task")
    integers = all(_INTEGER.fullmatch(x) for x in names)
    return tuple(sorted(names, key=lambda x: (int(x), x) if integers else x))


def require_held_labels(labels: tuple, held: Iterable[str], kind: str, spec: str) -> None:
    """Refuse task.labels (`labels`, non-empty) that name none of the labels the training files hold (`held`, every
    row's, before any carve): no training row would be left. A classification or multi-label task's labels must each
    be held: a subset is a choice (the other labels' rows rejected and counted), but a label no row holds is a head
    output with no row to learn from (as "+1" was beside the files' "1", all its rows rejected). A tag no training
    word holds is allowed: a tag set names I-X where every X in train is one word, and refusing it would reject every
    dev sentence that has one."""
    held = set(held)
    missing, held = [x for x in labels if x not in held], sorted(held)
    shown = f"{held[:10]}{' ...' if len(held) > 10 else ''}"
    if len(missing) == len(labels):  # else no training row is left, and an error about carving
        ids = all(str(n).isdigit() for n in held)  # a pandas / datasets to_json export of ClassLabel columns: ids
        raise TaskDataError(f"task.labels {list(labels)} names none of the {len(held)} labels the training files hold "
                            f"({shown}); name them as the files write them, or leave task.labels empty to take them "
                            f"from the training files" + (
                                "; the files hold integer ids, which are the labels here: task.labels does not name "
                                "them (write the names into the files, or use the parquet or save_to_disk folder "
                                "`datasets` writes, whose ClassLabel names them)" if ids else ""))
    if missing and kind in ("classification", "multi-label"):
        raise TaskDataError(f"task.labels {missing} name no row of the training files {spec!r}, which hold the labels "
                            f"{shown}: each would be a head output with no row to learn from; name labels the files "
                            "hold (a subset is a choice: the other labels' rows are rejected and counted)")


LABEL_REJECTS = ("label_not_in_train", "tag_not_in_train")  # encode_labels' reasons


def encode_labels(rows, kind: str, labels: tuple[str, ...], samples: list | None = None
                  ) -> tuple[list[dict], collections.Counter]:
    """Rows with label as its index into `labels` (multi-label: a list of indices); a row whose label
    (token classification: any tag) is not in `labels` is rejected, never mapped to another class. `samples`: the
    first rejected row of each reason is appended to it as (reason, "id <row id>", the first label `labels` lacks), as
    files.FileBatch.samples holds a file's first rejects, to be said the same way."""
    index = {name: i for i, name in enumerate(labels)}
    out, rejects = [], collections.Counter()
    for row in rows:
        if kind == "classification" and str(row["label"]) in index:
            out.append({**row, "label": index[str(row["label"])]})
        elif kind == "multi-label" and all(str(x) in index for x in row["label"]):
            out.append({**row, "label": [index[str(x)] for x in row["label"]]})
        elif kind in ("regression", "question-answering") or (
                kind == "token-classification" and all(str(t) in index for t in row["ner_tags"])):
            out.append(row)
        else:
            reason = LABEL_REJECTS[kind == "token-classification"]
            rejects[reason] += 1
            if samples is not None and all(r != reason for r, _, _ in samples):
                names = row["ner_tags"] if reason == "tag_not_in_train" else \
                    row["label"] if kind == "multi-label" else [row["label"]]
                samples.append((reason, f"id {row.get('id')}", next(str(x) for x in names if str(x) not in index)))
    return out, rejects


def unknown_label_said(reason: str, label: str, labels: tuple[str, ...]) -> str:
    """What a reject line of a label the task's labels lack (LABEL_REJECTS; "" for other reasons) adds: those labels
    (`labels`: task.labels where set, else train's), and the one `label` differs from only in case or blanks, where
    one does: another tool's export of the dev file writes "Neutral" for train's "neutral", and a whole class is gone
    from the split that judges the model. Not "train's": a training row is rejected only where task.labels is set."""
    if reason not in LABEL_REJECTS:
        return ""
    folded = "".join(label.split()).casefold()
    twin = next((x for x in labels if "".join(x.split()).casefold() == folded), None)
    return f"the task's labels: {list(labels[:10])}{f' ... ({len(labels)})' if len(labels) > 10 else ''}" + (
        f"; {label!r} differs from {twin!r} only in case or blanks: write it as {twin!r}" if twin else "")


def file_metrics(kind: str, predictions, labels, label_names: tuple[str, ...],
                 threshold: float = 0.5) -> dict[str, float]:
    """classification: accuracy, macro_f1 of class ids (N,) or logits (N, C); multi-label: micro_f1,
    macro_f1 and exact_match (all C right) of sigmoid(logits) > threshold against (N, C) 0/1 labels; regression:
    pearson, spearman, mse. Computed by scikit-learn / scipy. Single-label macro_f1 averages over the labels the
    gold holds: a class the split lacks adds no term however it is predicted (a wrong prediction of it still costs
    its row, the true class's recall), so two models on the same rows are averaged over the same labels.
    Multi-label macro_f1 averages over the labels the gold holds or the model predicts: each label is scored alone,
    and a label the split lacks put on every row cost nothing (its false positives touch no gold label's term),
    while a label neither holds adds no term (its 0/0 is no miss)."""
    from scipy.special import expit  # deferred, as seqeval in conll.py: a job's config checks need neither
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score

    preds, gold = np.asarray(predictions), np.asarray(labels)
    if kind == "classification":
        preds = preds.argmax(-1) if preds.ndim == 2 else preds
        return {"accuracy": float(accuracy_score(gold, preds)),
                "macro_f1": float(f1_score(gold, preds, labels=np.unique(gold), average="macro", zero_division=0))}
    if kind == "multi-label":
        if preds.shape != gold.shape or preds.shape[-1] != len(label_names):
            raise ValueError(f"logits {preds.shape} and labels {gold.shape} must both be (N, {len(label_names)})")
        hits, gold = (expit(preds.astype(np.float64)) > threshold).astype(int), gold.astype(int)
        return {"micro_f1": float(f1_score(gold, hits, average="micro", zero_division=0)),
                "macro_f1": float(f1_score(gold, hits, labels=np.flatnonzero(gold.any(0) | hits.any(0))
                                           if (gold.any() or hits.any()) else None, average="macro",
                                           zero_division=0)),
                "exact_match": float(accuracy_score(gold, hits))}
    if kind == "regression":
        preds, gold = preds.reshape(-1).astype(np.float64), gold.reshape(-1).astype(np.float64)
        return {"pearson": correlation(pearsonr, preds, gold), "spearman": correlation(spearmanr, preds, gold),
                "mse": float(np.mean((preds - gold) ** 2))}
    raise ValueError(f"file_metrics scores classification, multi-label and regression; {kind} keeps its task's metric")


def require_varied_scores(rows: list[dict], where: str, remedy: str) -> None:
    """Refuse a regression split whose gold scores are all one value: Pearson and Spearman are undefined (NaN), and
    a NaN select metric reads as diverged weights."""
    if rows and len({float(r["label"]) for r in rows}) == 1:
        raise TaskDataError(f"{where}: every row's score is {float(rows[0]['label']):g}: Pearson and Spearman are "
                            f"undefined without variation; give {remedy}")


def correlation(coefficient, preds: np.ndarray, gold: np.ndarray) -> float:
    """scipy's pearsonr or spearmanr of predicted and gold scores, 0.0 where the predictions are one finite value: a
    model collapsed to the mean (in bf16, its scores round to one number) ranks nothing, which is no correlation, and
    NaN was taken for diverged weights (the fine-tuning loop ends a run on a non-finite select metric). Predictions
    that are not finite stay NaN. Constant gold scores are refused where the rows are read."""
    if np.isfinite(preds).all() and np.ptp(preds) == 0:
        return 0.0
    return float(coefficient(preds, gold)[0])
