"""The fine-tuning heads' losses do not depend on what a window is batched with, and are 0, not NaN, for a
micro-batch with nothing to learn (bert_core/model.py: span_loss, labelled_mean_ce)."""

import pytest
import torch

from bert_core import modern_heads
from bert_core.config import tiny
from bert_core.model import IGNORE_INDEX, BertForQuestionAnswering, BertForTokenClassification
from bert_core.modern_config import tiny as modern_tiny

T = 24


def qa_model():
    torch.manual_seed(0)
    model = BertForQuestionAnswering(tiny(vocab_size=300).validate()).eval()
    with torch.no_grad():  # a head whose bias is far from 0: a pad's logit under unpadding is this bias alone
        model.qa_outputs.bias.fill_(3.0)
    return model


def test_a_qa_windows_loss_is_the_same_alone_and_beside_a_longer_window():
    """Under unpadding a pad's start/end logit is the head's bias alone, and HF's softmax over every position counted
    it: a short window's loss was 3.93 alone and 5.68 beside a 128-token window (MiniLM), and differed between the
    unpadded and padded paths. The softmax now runs over the window's real tokens."""
    model = qa_model()
    g = torch.Generator().manual_seed(1)
    short, n = torch.randint(1, 300, (1, T), generator=g), 9
    ids = torch.cat([short, torch.randint(1, 300, (1, T), generator=g)])
    mask = torch.ones(2, T, dtype=torch.long)
    mask[0, n:] = 0
    ids = ids * mask
    start, end = torch.tensor([2]), torch.tensor([5])
    with torch.no_grad():
        alone = model(short[:, :n], start_positions=start, end_positions=end).loss
        for unpad in (True, False):
            model.bert.unpad = unpad
            logits = model(ids, attention_mask=mask).logits[:1]  # the short window's row, in the batch of two
            beside = model(ids[:1], attention_mask=mask[:1], start_positions=start, end_positions=end).loss
            # the row's loss as the batch of two computes it: its own row of the (2, T) batch
            both = model(ids, attention_mask=mask, start_positions=torch.tensor([2, T + 1]),
                         end_positions=torch.tensor([5, T + 1])).loss  # the long window's answer is out: not counted
            torch.testing.assert_close(beside, alone, rtol=1e-5, atol=1e-5, msg=f"unpad={unpad}")
            torch.testing.assert_close(both, alone, rtol=1e-5, atol=1e-5, msg=f"unpad={unpad}")
            assert logits.shape == (1, T, 2)


@pytest.mark.parametrize("head", ["bert", "modern"])
def test_a_tagging_micro_batch_with_no_labelled_token_has_loss_0_and_zero_gradients(head):
    """Sentences whose words tokenize to nothing (a zero-width space, U+FFFD) are kept with every label -100; a
    micro-batch of only those made the mean cross-entropy 0/0 = NaN, skipped as a divergence (a sweep trial with
    max_nonfinite_steps=1 failed as 'diverged'). The masked LM's loss was already 0 there."""
    torch.manual_seed(0)
    model = (BertForTokenClassification(tiny(vocab_size=300).validate(), num_labels=5) if head == "bert" else
             modern_heads.ModernBertForTokenClassification(modern_tiny(vocab_size=300).validate(), num_labels=5))
    model.eval()  # dropout off: the last check compares two forwards
    ids = torch.randint(1, 300, (2, 8))
    out = model(ids, attention_mask=torch.ones_like(ids), labels=torch.full((2, 8), IGNORE_INDEX))
    assert out.loss.item() == 0.0
    out.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    some = torch.full((2, 8), IGNORE_INDEX)
    some[0, 1] = 3
    torch.testing.assert_close(model(ids, attention_mask=torch.ones_like(ids), labels=some).loss,
                               torch.nn.functional.cross_entropy(model(ids).logits[0, 1:2].float(), some[0, 1:2]))


def test_a_qa_micro_batch_whose_answers_all_lie_outside_has_loss_0():
    model = qa_model()
    ids = torch.randint(1, 300, (2, T))
    out = model(ids, attention_mask=torch.ones_like(ids), start_positions=torch.tensor([T + 3, T]),
                end_positions=torch.tensor([T + 5, T + 1]))
    assert out.loss.item() == 0.0
    out.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
