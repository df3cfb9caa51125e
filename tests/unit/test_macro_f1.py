"""Macro F1 averages over the labels the gold holds (single-label: the same for every model and resample; a class
absent from a split added a 0 term for a model that predicted it and none for another), and, multi-label, the labels
a model predicts: there a label the split lacks put on every row cost nothing."""

import numpy as np
import pytest

from jobs.loops.ft_tasks import tag_metrics
from pipelines.tasks import file_metrics


def test_a_label_the_split_lacks_adds_no_term():
    names = ("a", "b", "c")
    gold = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0]])  # no row has c
    perfect = np.where(gold == 1, 5.0, -5.0)  # logits: every label right
    assert file_metrics("multi-label", perfect, gold, names)["macro_f1"] == 1.0  # was 2/3: c's 0/0 counted as 0
    spammy = perfect.copy()
    spammy[:, 2] = 5.0  # c, which no row holds, on every row: its F1 is 0, a term of its own
    assert file_metrics("multi-label", spammy, gold, names)["macro_f1"] == pytest.approx(2 / 3)  # was 1.0
    assert file_metrics("multi-label", np.full((3, 3), -5.0), np.zeros((3, 3)), names)["macro_f1"] == 0.0
    classes = np.array([0, 0, 1, 1])
    errs_to_a, errs_to_c = np.array([0, 0, 1, 0]), np.array([0, 0, 1, 2])  # one mistake each, on the same row
    # both averaged over a and b (the gold's): the mistake costs b's recall in both, and a's precision in the first
    assert file_metrics("classification", np.eye(3)[errs_to_a], classes, names)["macro_f1"] == \
        pytest.approx(np.mean([0.8, 2 / 3]))
    assert file_metrics("classification", np.eye(3)[errs_to_c], classes, names)["macro_f1"] == \
        pytest.approx(np.mean([1.0, 2 / 3]))
    assert tag_metrics([["NN", "VB"]], [["NN", "JJ"]])["f1"] == 0.5  # NN 1, VB 0; JJ (not in gold) no term
