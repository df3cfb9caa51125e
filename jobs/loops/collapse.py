"""What a collapsed fine-tuned model scores on its task's main metric: the baseline a seed run (jobs/sweep.py) must
beat to set the median, and the chosen model (jobs/finetune.py) to be registered without a warning."""

from __future__ import annotations

import warnings

import numpy as np

from jobs.config.finetune import TaskConfig
from jobs.loops.ft_tasks import SELECT, dev_metrics, metric_name, num_labels


def majority_baseline(task: TaskConfig, rows: list[dict], split: str = SELECT) -> float:
    """`rows` of `split` scored as a collapsed model would score them: every row its majority class (the share for
    accuracy, 0 for MCC), one constant score (correlation 0: regression, STS-B), no label or entity predicted (F1 0),
    no answer (SQuAD: the share of unanswerable questions); -inf where that has no fixed score (token accuracy,
    multi-label exact match) or no row exists."""
    name = metric_name(task)
    if not rows:
        return -np.inf
    if task.kind == "question-answering":
        from pipelines.tasks.squad import squad_metrics

        return float(squad_metrics({r["id"]: "" for r in rows}, rows)[name])
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
    return "predicting the majority class" if task.kind == "classification" else "predicting no " + (
        "entity" if task.kind == "token-classification" else "label")
