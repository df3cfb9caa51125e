"""The dynamic collator's choice of MLM targets: what it must never make a target (test_masking.py holds the
statistics of masking and the collator's shapes)."""

import numpy as np

from bert_core.masking import IGNORE_INDEX
from tests.unit.test_masking import SPECIAL, V, make_collator


def test_a_literal_mask_id_in_the_text_is_never_a_dynamic_target():
    """SpecialIds.never_targets holds [MASK]: a [MASK] id already in a row's text is structure, as static masking
    treats it (test_examples.py). Made a target, its label would be [MASK] itself. Six text tokens a row, one of them
    [MASK], a budget of one target: a collator that took it for text would pick it in about one row of six."""
    rng = np.random.default_rng(0)
    rows = np.empty(64, dtype=object)
    for i in range(len(rows)):
        text = rng.integers(999, V, 6)
        text[2] = SPECIAL.mask  # position 3 of the row
        rows[i] = np.concatenate([[SPECIAL.cls], text[:3], [SPECIAL.sep], text[3:], [SPECIAL.sep]])
    batch = {"input_ids": rows, "num_a_tokens": np.full(len(rows), 5), "next_sentence_label": np.zeros(len(rows))}
    labels = make_collator()(batch)["mlm_labels"].numpy()  # (64, T)
    assert (labels != IGNORE_INDEX).sum(1).min() == 1  # every row got its one target, elsewhere
    assert not (labels == SPECIAL.mask).any()
    assert (labels[:, 3] == IGNORE_INDEX).all()
