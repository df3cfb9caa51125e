"""Numeric parity of bert_core.modern_heads with transformers' ModernBertFor{SequenceClassification,
TokenClassification,QuestionAnswering}: our weights in their class and theirs in ours (strict loads, no key
mapping), same logits and loss on a padded batch, for every loss each head has.

Inputs and weights as tests/parity/test_modern_parity.py (two rows of different lengths, a small local window,
scrambled weights), on tiny and on tiny with every ModernBERT switch flipped (biases on, SwiGLU, ...).
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here is built in memory

import pytest
import torch
import transformers
from transformers.initialization import no_init_weights

from bert_core import modern, modern_heads
from bert_core.model import IGNORE_INDEX
from tests.parity.test_modern_parity import ATOL, LENGTHS, T, batch, config, scramble_

CASES = ["tiny", "tiny_flipped"]


def labelled(kind: str, problem: str = "single", pooling: str = "cls"):
    """-> (our head, the transformers class, its config, label kwargs) for one head and one kind of loss."""
    cfg = config(kind)
    g = torch.Generator().manual_seed(7)
    hf = modern.transformers_config(cfg)
    if problem == "tokens":
        ours = modern_heads.ModernBertForTokenClassification(cfg, num_labels=5)
        hf.num_labels = 5
        labels = torch.randint(0, 5, (2, T), generator=g)
        ignored = (torch.rand(2, T, generator=g) < 0.3) | (torch.arange(T) >= torch.tensor(LENGTHS)[:, None])
        labels[ignored] = IGNORE_INDEX  # continuations and pads
        return ours, transformers.ModernBertForTokenClassification, hf, {"labels": labels}
    if problem == "qa":
        ours = modern_heads.ModernBertForQuestionAnswering(cfg)
        # Row 1's start and row 0's end lie past the end (>= T): ignored, so each CE keeps one term.
        positions = {"start_positions": torch.tensor([5, T + 7]), "end_positions": torch.tensor([T + 3, 20])}
        return ours, transformers.ModernBertForQuestionAnswering, hf, positions
    num_labels, multi_label = {"single": (3, False), "regression": (1, False), "multi": (4, True)}[problem]
    ours = modern_heads.ModernBertForSequenceClassification(cfg, num_labels, multi_label, classifier_pooling=pooling)
    hf.num_labels, hf.classifier_pooling, hf.problem_type = num_labels, pooling, ours.problem_type
    labels = {"single": torch.randint(0, 3, (2,), generator=g), "regression": torch.randn(2, generator=g),
              "multi": (torch.rand(2, 4, generator=g) < 0.5).float()}[problem]
    return ours, transformers.ModernBertForSequenceClassification, hf, {"labels": labels}


def blank(hf_class, hf_config):
    with no_init_weights():  # every weight is set afterwards
        return hf_class(hf_config).eval()


def assert_same_outputs(ours, theirs, label_kwargs):
    """Logits at real positions (all of them for a sequence head) and the loss, with their eager and SDPA
    attention, on the padded batch.

    QA's loss is the exception: its softmax runs over all T positions, pads included, as transformers' does,
    and pad rows are meaningless (transformers' own eager and SDPA attention give different pad logits and QA
    losses 2.5e-3 apart on this batch). So QA's loss is compared on the same rows unpadded.
    """
    ids, mask, _ = batch()
    qa = "start_positions" in label_kwargs
    inputs = [(ids, mask, not qa)]  # (ids, attention mask, compare the loss)
    if qa:
        inputs.append((ids.masked_fill(~mask.bool(), 7), torch.ones_like(mask), True))
    for impl in ("eager", "sdpa"):
        theirs.set_attn_implementation(impl)
        for input_ids, attention_mask, check_loss in inputs:
            with torch.no_grad():
                mine = ours(input_ids, attention_mask=attention_mask, **label_kwargs)
                ref = theirs(input_ids=input_ids, attention_mask=attention_mask, **label_kwargs)
            ref_logits = torch.stack((ref.start_logits, ref.end_logits), dim=-1) if qa else ref.logits  # QA: (B, T, 2)
            real = attention_mask.bool()
            a, b = (mine.logits, ref_logits) if mine.logits.dim() == 2 else (mine.logits[real], ref_logits[real])
            torch.testing.assert_close(a, b, rtol=0, atol=ATOL, msg=lambda m: f"logits, {impl}: {m}")
            if check_loss:
                torch.testing.assert_close(mine.loss, ref.loss, rtol=0, atol=ATOL, msg=lambda m: f"loss, {impl}: {m}")


HEADS = [("single", "cls"), ("single", "mean"), ("regression", "cls"), ("multi", "mean"), ("tokens", None),
         ("qa", None)]


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("problem,pooling", HEADS)
def test_our_weights_in_transformers_give_the_same_logits_and_loss(kind, problem, pooling):
    torch.manual_seed(0)
    ours, hf_class, hf_config, label_kwargs = labelled(kind, problem, pooling)
    scramble_(ours.eval(), seed=1)
    theirs = blank(hf_class, hf_config)
    theirs.load_state_dict(ours.state_dict(), strict=True)
    assert_same_outputs(ours, theirs, label_kwargs)


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("problem,pooling", HEADS)
def test_transformers_weights_in_ours_give_the_same_logits_and_loss(kind, problem, pooling):
    torch.manual_seed(0)
    ours, hf_class, hf_config, label_kwargs = labelled(kind, problem, pooling)
    theirs = blank(hf_class, hf_config)
    scramble_(theirs, seed=3)
    ours.eval().load_state_dict(theirs.state_dict(), strict=True)
    assert_same_outputs(ours, theirs, label_kwargs)


def test_the_pooling_matters():
    """Guards the parity tests: cls and mean pooling give different logits on this batch."""
    ids, mask, _ = batch()
    torch.manual_seed(0)
    cls_head = modern_heads.ModernBertForSequenceClassification(config("tiny"), 3).eval()
    scramble_(cls_head, seed=1)
    mean_head = modern_heads.ModernBertForSequenceClassification(config("tiny"), 3, classifier_pooling="mean")
    mean_head.load_state_dict(cls_head.state_dict())
    with torch.no_grad():
        gap = (cls_head(ids, attention_mask=mask).logits - mean_head.eval()(ids, attention_mask=mask).logits)
    assert gap.abs().max() > 100 * ATOL


@pytest.mark.parametrize("problem", ["single", "tokens", "qa"])
def test_token_type_ids_are_accepted_and_ignored(problem):
    """The fine-tuning loop passes BERT's inputs; ModernBERT has no segment embeddings."""
    torch.manual_seed(0)
    ours, _, _, label_kwargs = labelled("tiny", problem)
    ours.eval()
    ids, mask, _ = batch()
    token_types = (torch.arange(T) >= 10).long().expand(2, T)
    with torch.no_grad():
        plain = ours(ids, attention_mask=mask, **label_kwargs)
        typed = ours(ids, token_types, mask, **label_kwargs)
    assert torch.equal(plain.logits, typed.logits) and torch.equal(plain.loss, typed.loss)


def test_the_classifier_is_initialised_as_transformers_does():
    """Truncated normal with std H^-1/2 (their "final_out"), zero bias; the shared head as the MLM model's."""
    torch.manual_seed(0)
    cfg = config("tiny")
    head = modern_heads.ModernBertForTokenClassification(cfg, num_labels=32).classifier
    std, cutoff = cfg.hidden_size ** -0.5, cfg.initializer_cutoff_factor
    assert torch.equal(head.bias, torch.zeros(32))
    assert head.weight.abs().max() <= cutoff * std and 0.8 * std < head.weight.std() < 1.0 * std  # 0.88 std if cut at 2
