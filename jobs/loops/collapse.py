"""What a collapsed fine-tuned model scores on its task's main metric: the baseline a seed run (jobs/sweep.py) must
beat to set the median, and the chosen model (jobs/finetune.py) to be registered without a warning."""

from __future__ import annotations

import collections
import warnings

import numpy as np

from jobs.config.finetune import TaskConfig
from jobs.loops.ft_tasks import SELECT, dev_metrics, is_iob, metric_name, num_labels, tag_metrics


def majority_baseline(task: TaskConfig, rows: list[dict], split: str = SELECT) -> float:
    """`rows` of `split` scored as a collapsed model would score them: the best score of any one class for every
    row (each class scored with the task's metric: on QQP, 63% "not duplicate", always "duplicate" scores F1 0.54
    where the majority scores 0; MCC 0), of the same labels for every row (multi-label: none, all, each one its
    rows' majority, the commonest set: all on scores micro-F1 above 0), one constant score (correlation 0:
    regression, STS-B), no entity predicted (F1 0), every word its most common tag (word tags that are no entities,
    as part of speech: their macro F1 and accuracy), no answer (SQuAD: the share of unanswerable questions); -inf
    where that has no fixed score (token accuracy) or no row exists."""
    name = metric_name(task)
    if not rows:
        return -np.inf
    if task.kind == "question-answering":
        from pipelines.tasks.squad import squad_metrics

        return float(squad_metrics({r["id"]: "" for r in rows}, rows, version_2=task.version_2)[name])
    if task.kind == "token-classification" and not is_iob(task.labels):  # word tags (part of speech): its F1 is over
        gold = [[str(t) for t in r["ner_tags"]] for r in rows]  # every tag, "no entity" is no prediction of them
        common = collections.Counter(t for words in gold for t in words).most_common(1)
        scores = tag_metrics(gold, [[common[0][0]] * len(words) for words in gold]) if common else {}
        return scores.get(name, -np.inf)
    if num_labels(task) == 1 or name == "f1" and task.kind == "token-classification":
        return 0.0
    if task.kind == "classification":
        labels = np.asarray([int(r["label"]) for r in rows])
        # the three commonest classes: a binary task's both (its F1 is the positive class's, which may be the rarer);
        # with more classes a rarer constant scores no better on accuracy, macro or weighted F1, or MCC (0 for any),
        # and each class scored is a pass over the rows (a task of thousands of classes scored them all for minutes)
        constants = []
        for c, _ in collections.Counter(labels.tolist()).most_common(3):
            one = np.zeros(num_labels(task))
            one[c] = 1.0
            constants.append(np.broadcast_to(one, (len(rows), len(one))))
    elif task.kind == "multi-label":  # sigmoid(+-inf) is 1 or 0: on or off at any threshold in (0, 1)
        labels = np.zeros((len(rows), num_labels(task)))
        for i, r in enumerate(rows):
            labels[i, np.asarray(r["label"], dtype=np.int64)] = 1.0
        commonest = collections.Counter(map(tuple, labels)).most_common(1)[0][0]
        sets = (np.zeros(labels.shape[1]), np.ones(labels.shape[1]), labels.mean(0) > 0.5, commonest)
        constants = [np.broadcast_to(np.where(np.asarray(on, dtype=bool), np.inf, -np.inf), labels.shape)
                     for on in sets]
    else:
        return -np.inf
    with warnings.catch_warnings():  # sklearn warns that MCC of a constant prediction is 0, which it is
        warnings.simplefilter("ignore")
        return max(dev_metrics(task, split, rows, {"logits": c, "labels": labels})[f"{split}/{name}"]
                   for c in constants)


def collapsed_as(task: TaskConfig) -> str:
    """The collapsed prediction majority_baseline scores, in words."""
    if task.kind == "question-answering":
        return "answering no question"
    if num_labels(task) == 1:
        return "a constant score"
    if task.kind == "token-classification" and not is_iob(task.labels):
        return "tagging every word with the most common tag"
    if task.kind == "classification":
        return "predicting one class for every row (the best-scoring one)"
    if task.kind == "multi-label":
        return "predicting one set of labels for every row (the best-scoring one)"
    return "predicting no entity"
