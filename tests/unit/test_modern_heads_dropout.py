"""bert_core.modern_heads in training mode: the classifier dropout sits where transformers' ModernBERT heads put it
(head -> dropout -> classifier), so a fine-tuning run trains the head the export's users load. The parity tests
(tests/parity/test_modern_heads_parity.py) compare eval mode, where the dropout is off and its place never shows."""

import dataclasses

import pytest
import torch
import transformers
from transformers.initialization import no_init_weights

from bert_core import modern, modern_heads
from bert_core.model import IGNORE_INDEX
from tests.parity.test_modern_parity import ATOL, batch, config, scramble_

HEADS = {  # ours, theirs, labels of the padded batch
    "sequence": (lambda c: modern_heads.ModernBertForSequenceClassification(c, 3),
                 transformers.ModernBertForSequenceClassification, lambda ids, mask: {"labels": torch.tensor([2, 0])}),
    "tokens": (lambda c: modern_heads.ModernBertForTokenClassification(c, 5),
               transformers.ModernBertForTokenClassification,  # pads ignored: their logits are meaningless
               lambda ids, mask: {"labels": torch.where(mask.bool(), ids % 5, IGNORE_INDEX)}),
    "qa": (modern_heads.ModernBertForQuestionAnswering, transformers.ModernBertForQuestionAnswering,
           lambda ids, mask: {}),  # QA's loss runs over the pads too (see the parity tests): logits only
}


@pytest.mark.parametrize("head", list(HEADS))
def test_the_classifier_dropout_is_applied_where_transformers_applies_it(head):
    """Only classifier_dropout on (one dropout call per forward each, so the same seed draws the same mask): the
    training-mode logits and loss of ours equal theirs, and differ between two seeds (the dropout is on)."""
    make_ours, their_class, labels = HEADS[head]
    cfg = dataclasses.replace(config("tiny"), classifier_dropout=0.1).validate()
    torch.manual_seed(0)
    ours = make_ours(cfg)
    scramble_(ours, seed=1)
    hf_config = modern.transformers_config(cfg)
    hf_config.num_labels = ours.classifier.out_features
    with no_init_weights():
        theirs = their_class(hf_config)
    theirs.load_state_dict(ours.state_dict(), strict=True)
    theirs.set_attn_implementation("sdpa")
    ours.train(), theirs.train()
    ids, mask, _ = batch()
    real, labels = mask.bool(), labels(ids, mask)
    outputs = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        mine = ours(ids, attention_mask=mask, **labels)
        torch.manual_seed(seed)
        ref = theirs(input_ids=ids, attention_mask=mask, **labels)
        ref_logits = torch.stack((ref.start_logits, ref.end_logits), -1) if head == "qa" else ref.logits
        a, b = (mine.logits, ref_logits) if head == "sequence" else (mine.logits[real], ref_logits[real])
        torch.testing.assert_close(a, b, rtol=0, atol=ATOL)
        if labels:
            torch.testing.assert_close(mine.loss, ref.loss, rtol=0, atol=ATOL)
        outputs.append(a)
    assert torch.equal(outputs[0], outputs[1]) and (outputs[0] - outputs[2]).abs().max() > 100 * ATOL
