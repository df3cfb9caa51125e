"""What a collapsed fine-tuned model scores on its task's main metric: the baseline a seed run (jobs/sweep.py) must
beat to set the median, and the chosen model (jobs/finetune.py) to be registered without a warning."""

from __future__ import annotations

import collections
import warnings

import numpy as np

from jobs.config.finetune import TaskConfig
from jobs.loops.ft_tasks import SELECT, dev_metrics, is_iob, metric_name, num_labels, tag_metrics


def majority_baseline(task: TaskConfig, rows: list[dict], split: str = SELECT) -> float:
    """`rows` of `split` scored as a collapsed model would score them: every row its majority class (the share for
    accuracy, 0 for MCC), one constant score (correlation 0: regression, STS-B), no label or entity predicted (F1 0),
    every word its most common tag (word tags that are no entities, as part of speech: their macro F1 and accuracy),
    no answer (SQuAD: the share of unanswerable questions); -inf where that has no fixed score (token accuracy,
    multi-label exact match) or no row exists."""
    name = metric_name(task)
    if not rows:
        return -np.inf
    if task.kind == "question-answering":
        from pipelines.tasks.squad import squad_metrics

        return float(squad_metrics({r["id"]: "" for r in rows}, rows)[name])
    if task.kind == "token-classification" and not is_iob(task.labels):  # word tags (part of speech): its F1 is over
        gold = [[str(t) for t in r["ner_tags"]] for r in rows]  # every tag, "no entity" is no prediction of them
        common = collections.Counter(t for words in gold for t in words).most_common(1)
        scores = tag_metrics(gold, [[common[0][0]] * len(words) for words in gold]) if common else {}
        return scores.get(name, -np.inf)
    if num_labels(task) == 1 or name in ("micro_f1", "macro_f1", "f1") and task.kind != "classification":
        return 0.0
    if task.kind != "classification":
        return -np.inf
    labels = np.asarray([int(r["label"]) for r in rows])
    logits = np.eye(num_labels(task))[np.full(len(rows), np.bincount(labels).argmax())]
    with warnings.catch_warnings():  # sklearn warns that MCC of a constant prediction is 0, which it is
        warnings.simplefilter("ignore")
        metrics = dev_metrics(task, split, rows, {"logits": logits, "labels": labels})
    return metrics[f"{split}/{name}"]


def collapsed_as(task: TaskConfig) -> str:
    """The collapsed prediction majority_baseline scores, in words."""
    if task.kind == "question-answering":
        return "answering no question"
    if num_labels(task) == 1:
        return "a constant score"
    if task.kind == "token-classification" and not is_iob(task.labels):
        return "tagging every word with the most common tag"
    return "predicting the majority class" if task.kind == "classification" else "predicting no " + (
        "entity" if task.kind == "token-classification" else "label")
