"""The collapsed-model baseline is the best score of any constant prediction, each scored with the task's metric:
a model that predicts the minority class (or every label) everywhere is collapsed too."""

from types import SimpleNamespace

import numpy as np
import pytest

from jobs.config.finetune import TaskConfig
from jobs.loops.collapse import collapsed_as, majority_baseline


def _seed_result(score, pred_classes=2):
    import pandas as pd
    from ray.tune import Checkpoint, Result

    df = pd.DataFrame({"step": [2], "score": [score], "pred_classes": [pred_classes]})
    return Result(metrics={"best_step": 2}, checkpoint=Checkpoint("/nonexistent"), error=None, path="/nonexistent",
                  metrics_dataframe=df)


def test_qqp_always_duplicate_beats_always_not_and_is_the_baseline(tmp_path, monkeypatch, capsys):
    """QQP, 63% "not duplicate": the majority scores (0.63 + F1 0) / 2 = 0.315, "duplicate" everywhere
    (0.37 + 2 * 0.37 / 1.37) / 2 = 0.455. A model that says "duplicate" everywhere was registered without a
    warning, and a seed run between the two set the median."""
    from jobs.finetune import judge_chosen
    from jobs.sweep import _degenerate
    from pipelines.tasks import glue_metrics

    labels = [0] * 63 + [1] * 37
    rows = [{"text_a": "q1", "text_b": "q2", "label": y, "row_index": i} for i, y in enumerate(labels)]
    task = TaskConfig(name="qqp", labels=["0", "1"])
    always = {c: glue_metrics("qqp", np.full(len(labels), c), np.asarray(labels))["score"] for c in (0, 1)}
    assert always[0] == pytest.approx(0.315) and always[1] == pytest.approx((0.37 + 2 * 0.37 / 1.37) / 2)
    assert majority_baseline(task, rows) == pytest.approx(always[1])
    assert majority_baseline(task, rows, "dev") == pytest.approx(always[1])
    monkeypatch.setattr("jobs.registry.scorer.evaluate_model", lambda *a: {"dev/score": always[1]})
    judge_chosen(tmp_path, task, {}, SimpleNamespace(evaluation={"dev": rows}), 8)
    out = capsys.readouterr().out
    assert f"is no better than {collapsed_as(task)} ({always[1]:.4f})" in out, out
    assert "no better than a collapsed model" in _degenerate(_seed_result(0.40), majority_baseline(task, rows))[0]
    assert _degenerate(_seed_result(0.60), majority_baseline(task, rows))[0] == ""


def test_multi_label_baseline_is_the_best_constant_label_set():
    """No label predicted scores micro-F1 0; every label on, or each label its rows' majority, scores more: a model
    that predicts label 0 for every row (micro-F1 0.9 here) learned nothing."""
    from sklearn.metrics import f1_score

    from jobs.sweep import _degenerate

    task = TaskConfig(name="files", kind="multi-label", labels=["a", "b", "c"])
    rows = [{"label": [0], "row_index": i} for i in range(9)] + [{"label": [1], "row_index": 9}]
    gold = np.zeros((10, 3), dtype=int)
    gold[:9, 0] = gold[9, 1] = 1
    assert f1_score(gold, np.ones_like(gold), average="micro") == pytest.approx(0.5)
    label_0 = f1_score(gold, np.tile([1, 0, 0], (10, 1)), average="micro")
    assert label_0 == pytest.approx(0.9)
    assert majority_baseline(task, rows) == pytest.approx(label_0)
    assert "no better than" in _degenerate(_seed_result(0.85), majority_baseline(task, rows))[0]
    task.metric = "exact_match"  # the commonest label set: 9 rows of 10
    assert majority_baseline(task, rows) == pytest.approx(0.9)
    assert collapsed_as(task) == "predicting one set of labels for every row (the best-scoring one)"


def test_squad_v1_baseline_is_scored_by_v1_1s_rules():
    """Answering nothing on SQuAD v1.1 matches exactly a gold that normalises to "" (kept by evaluate-v1.1.py)."""
    rows = [{"id": "1", "is_impossible": False, "answers": {"text": ["The", "Paris"], "answer_start": [0, 4]}},
            {"id": "2", "is_impossible": False, "answers": {"text": ["Paris"], "answer_start": [4]}}]
    task = TaskConfig(name="squad", kind="question-answering", version_2=False)
    assert majority_baseline(task, rows) == 0.0  # F1 (the main metric): no token shared
    assert (majority_baseline(TaskConfig(name="files", kind="question-answering", metric="exact", version_2=False),
                              rows)) == pytest.approx(50.0)


def test_a_task_of_thousands_of_classes_scores_its_baseline_in_a_few_passes():
    """Every class present was scored, each a pass over the rows with an N x C array of logits (3,000 classes of
    5,000 rows: half an hour); the three commonest give the same best (a rarer constant scores no better on accuracy
    or macro F1)."""
    import time

    n, classes = 5000, 3000
    labels = [0] * 800 + [1] * 300 + [i % classes for i in range(n - 1100)]
    task = TaskConfig(name="files", kind="classification", labels=[str(i) for i in range(classes)])
    rows = [{"text_a": "x", "label": y, "row_index": i} for i, y in enumerate(labels)]
    start = time.process_time()
    assert majority_baseline(task, rows) == pytest.approx(labels.count(0) / n)  # accuracy: the majority's share
    assert time.process_time() - start < 10


def test_a_part_of_speech_baseline_tags_every_word_with_the_commonest_tag():
    """Word tags that are no entities (part of speech): NOUN on 6 of 10 words. Every word NOUN scores accuracy 0.6 and
    macro F1 (over the gold's tags) 0.75 / 3; a seed run scoring no more learned nothing. Every other test scores
    class labels or entities."""
    from sklearn.metrics import f1_score

    from jobs.sweep import _degenerate

    tags = [["NOUN", "VERB", "NOUN"], ["DET", "NOUN", "NOUN", "VERB"], ["NOUN", "VERB", "NOUN"]]
    rows = [{"tokens": ["w"] * len(t), "ner_tags": t, "row_index": i} for i, t in enumerate(tags)]
    task = TaskConfig(name="files", kind="token-classification", labels=["NOUN", "VERB", "DET"])
    gold = [t for words in tags for t in words]
    nouns = f1_score(gold, ["NOUN"] * len(gold), labels=["DET", "NOUN", "VERB"], average="macro", zero_division=0)
    assert nouns == pytest.approx(0.75 / 3)
    assert majority_baseline(task, rows) == pytest.approx(nouns)  # f1, the kind's first metric
    assert "no better than a collapsed model" in _degenerate(_seed_result(0.25), majority_baseline(task, rows))[0]
    assert _degenerate(_seed_result(0.40), majority_baseline(task, rows))[0] == ""
    task.metric = "accuracy"
    assert majority_baseline(task, rows) == pytest.approx(0.6)
    assert collapsed_as(task) == "tagging every word with the most common tag"
