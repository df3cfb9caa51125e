"""jobs/engine/objectives.py: each head's loss, sums that add up over micro-batches, metrics on hand-computed cases."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bert_core.config import tiny
from bert_core.model import (IGNORE_INDEX, BertForPreTraining, BertForQuestionAnswering,
                             BertForSequenceClassification, BertForTokenClassification, HeadOutput)
from jobs.engine.objectives import (ClassificationObjective, PretrainingObjective, QuestionAnsweringObjective,
                             TokenClassificationObjective, objective_for)

B, T, VOCAB = 6, 12, 100


def config():
    return tiny(vocab_size=VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).validate()


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (B, T), generator=g)
    mask = (torch.arange(T) < torch.tensor([12, 10, 7, 12, 3, 9])[:, None]).long()
    return g, {"input_ids": ids * mask, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}


def pretraining_batch():
    g, batch = inputs()
    masked = (torch.rand(B, T, generator=g) < 0.3) & batch["attention_mask"].bool()
    masked[:, 0] = True
    return {**batch, "mlm_labels": torch.where(masked, batch["input_ids"], IGNORE_INDEX),
            "next_sentence_label": torch.randint(0, 2, (B,), generator=g)}


def token_batch():
    g, batch = inputs()
    labels = torch.randint(0, 3, (B, T), generator=g)
    labels[~batch["attention_mask"].bool()] = IGNORE_INDEX
    labels[:, 1::3] = IGNORE_INDEX  # sub-word continuations
    return {**batch, "labels": labels}


def qa_batch():
    g, batch = inputs()
    start = torch.randint(0, 3, (B,), generator=g)
    start[2] = T + 5  # an answer truncated out of the window: no loss, not counted
    return {**batch, "start_positions": start, "end_positions": (start + 2).clamp(max=T + 5)}


CASES = {
    "pretraining": (lambda: BertForPreTraining(config()), PretrainingObjective, pretraining_batch),
    "classification": (lambda: BertForSequenceClassification(config(), num_labels=3),
                       lambda: ClassificationObjective(3), lambda: {**inputs()[1], "labels": torch.arange(B) % 3}),
    "regression": (lambda: BertForSequenceClassification(config(), num_labels=1),
                   lambda: ClassificationObjective(1), lambda: {**inputs()[1], "labels": torch.linspace(0, 5, B)}),
    "token": (lambda: BertForTokenClassification(config(), num_labels=3), TokenClassificationObjective, token_batch),
    "qa": (lambda: BertForQuestionAnswering(config()), QuestionAnsweringObjective, qa_batch),
}


def _split(batch, rows):
    return {k: v[rows] for k, v in batch.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_loss_is_the_models_and_sums_add_up_over_micro_batches(case):
    make_model, make_objective, make_batch = CASES[case]
    torch.manual_seed(0)
    model, objective, batch = make_model().eval(), make_objective(), make_batch()
    loss, sums = objective(model, batch)
    assert loss.requires_grad and loss.dim() == 0
    assert torch.allclose(loss, model(**batch).loss)
    assert all(v.dim() == 0 and v.dtype == torch.float64 and not v.requires_grad for v in sums.values())
    halves = [objective(model, _split(batch, rows))[1] for rows in (slice(0, 2), slice(2, B))]
    for k, v in sums.items():
        assert float(halves[0][k] + halves[1][k]) == pytest.approx(float(v), rel=1e-5), k
    metrics = objective.metrics({k: float(v) for k, v in sums.items()})
    assert all(math.isfinite(v) for v in metrics.values())


def test_pretraining_reproduces_the_old_step_stats_and_eval_keys():
    torch.manual_seed(0)
    model, batch = BertForPreTraining(config()).eval(), pretraining_batch()
    with torch.no_grad():
        out = model(**batch)
    _, sums = PretrainingObjective()(model, batch)
    s = {k: float(v) for k, v in sums.items()}
    M = int((batch["mlm_labels"] != IGNORE_INDEX).sum())
    assert s["mlm_count"] == M and s["nsp_count"] == B
    assert s["mlm_correct"] == int((out.mlm_logits.argmax(-1) == out.mlm_targets).sum())
    assert s["nsp_correct"] == int((out.nsp_logits.argmax(-1) == batch["next_sentence_label"]).sum())
    m = PretrainingObjective().metrics(s)
    assert set(m) == {"mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc", "mlm_tokens"}
    assert m["mlm_loss"] == pytest.approx(float(out.mlm_loss)) and m["nsp_loss"] == pytest.approx(float(out.nsp_loss))
    assert m["mlm_acc"] == s["mlm_correct"] / M and m["mlm_tokens"] == M


class Fixed(nn.Module):
    """A head that returns given logits, with the real heads' loss."""

    def __init__(self, logits, loss_fn):
        super().__init__()
        self.logits, self.loss_fn = logits.requires_grad_(), loss_fn

    def forward(self, input_ids=None, **labels):
        return HeadOutput(self.loss_fn(self.logits, **labels) if labels else None, self.logits)


def test_classification_metrics_by_hand():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0], [0.0, 0.5]])
    labels = torch.tensor([0, 0, 0, 1])  # argmax [0, 1, 0, 1]: 3 of 4 right
    model = Fixed(logits, lambda x, labels: F.cross_entropy(x, labels))
    loss, sums = ClassificationObjective(2)(model, {"input_ids": torch.zeros(4, 1), "labels": labels})
    m = ClassificationObjective(2).metrics({k: float(v) for k, v in sums.items()})
    assert m["accuracy"] == 0.75 and m["count"] == 4
    assert m["loss"] == pytest.approx(float(F.cross_entropy(logits, labels)))


def test_regression_metrics_by_hand():
    preds, labels = torch.tensor([[1.0], [2.0], [4.0]]), torch.tensor([1.0, 3.0, 2.0])  # errors 0, 1, 2
    model = Fixed(preds, lambda x, labels: F.mse_loss(x.squeeze(-1), labels))
    _, sums = ClassificationObjective(1)(model, {"input_ids": torch.zeros(3, 1), "labels": labels})
    m = ClassificationObjective(1).metrics({k: float(v) for k, v in sums.items()})
    assert m["mse"] == pytest.approx(5 / 3) and m["loss"] == pytest.approx(5 / 3) and m["count"] == 3


def test_token_classification_counts_only_labelled_tokens():
    logits = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]])  # (2, 3, 2)
    labels = torch.tensor([[0, IGNORE_INDEX, 1], [1, IGNORE_INDEX, IGNORE_INDEX]])  # 3 labelled, 2 right
    model = Fixed(logits, lambda x, labels: F.cross_entropy(x.flatten(0, 1), labels.flatten(),
                                                            ignore_index=IGNORE_INDEX))
    _, sums = TokenClassificationObjective()(model, {"input_ids": torch.zeros(2, 3), "labels": labels})
    m = TokenClassificationObjective().metrics({k: float(v) for k, v in sums.items()})
    assert m["count"] == 3 and m["accuracy"] == pytest.approx(2 / 3)
    keep = labels != IGNORE_INDEX
    assert m["loss"] == pytest.approx(float(F.cross_entropy(logits[keep], labels[keep])))
    _, none = TokenClassificationObjective()(model, {"input_ids": torch.zeros(2, 3),
                                                      "labels": torch.full((2, 3), IGNORE_INDEX)})
    assert float(none["count"]) == 0 and float(none["loss_sum"]) == 0  # not NaN: sums stay addable


def test_question_answering_metrics_skip_truncated_answers():
    torch.manual_seed(0)
    model, batch = BertForQuestionAnswering(config()).eval(), qa_batch()
    out = model(**batch)
    _, sums = QuestionAnsweringObjective()(model, batch)
    s = {k: float(v) for k, v in sums.items()}
    answered = batch["start_positions"] < T
    assert s["count"] == int(answered.sum()) == B - 1
    starts = out.logits[..., 0].argmax(-1)
    assert s["start_correct"] == int((starts == batch["start_positions"])[answered].sum())
    m = QuestionAnsweringObjective().metrics(s)
    assert set(m) == {"loss", "start_acc", "end_acc", "count"}
    assert m["loss"] == pytest.approx(float(out.loss))


@pytest.mark.parametrize("case, shapes", [
    ("pretraining", {"mlm_logits": (B, T, VOCAB), "nsp_logits": (B, 2)}),
    ("classification", {"logits": (B, 3)}), ("regression", {"logits": (B, 1)}),
    ("token", {"logits": (B, T, 3)}), ("qa", {"start_logits": (B, T), "end_logits": (B, T)})])
def test_outputs_are_row_aligned_detached_cpu_predictions(case, shapes):
    make_model, make_objective, make_batch = CASES[case]
    torch.manual_seed(0)
    model = make_model().eval()
    out = make_objective().outputs(model, make_batch())  # labels in the batch are ignored
    assert {k: tuple(v.shape) for k, v in out.items()} == shapes
    assert all(v.device.type == "cpu" and not v.requires_grad for v in out.values())


def test_objective_for_each_head():
    c = config()
    assert isinstance(objective_for(BertForPreTraining(c)), PretrainingObjective)
    assert objective_for(BertForSequenceClassification(c, num_labels=1)).name == "regression"
    assert objective_for(BertForSequenceClassification(c, num_labels=3)).num_labels == 3
    assert isinstance(objective_for(BertForTokenClassification(c)), TokenClassificationObjective)
    assert isinstance(objective_for(BertForQuestionAnswering(c)), QuestionAnsweringObjective)
    with pytest.raises(TypeError, match="no objective"):
        objective_for(nn.Linear(2, 2))


def test_the_modern_objective_keeps_packed_sequences_apart():
    """train.packing (the modern recipe's default) packs several examples to a row: the objective must hand the
    model their sequence ids, or each attends to its row-mates. The same examples and masks, packed and unpacked,
    give the same loss and sums under weights whose attention is sharp (ModernBERT's 0.02 init hides the gap)."""
    import numpy as np

    from bert_core import modern
    from bert_core.masking import MaskingConfig, PretrainingCollator
    from bert_core.tokenizer import SpecialIds
    from jobs.engine.objectives import MaskedLMObjective

    special, vocab = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4), 500
    rng = np.random.default_rng(0)
    rows = np.empty(24, dtype=object)
    rows[:] = [np.concatenate([[special.cls], rng.integers(5, vocab, n), [special.sep]])
               for n in rng.integers(8, 40, 24)]
    batch = {"input_ids": rows, "num_a_tokens": np.array([len(r) for r in rows]), "next_sentence_label": np.zeros(24)}
    plain, packed = (PretrainingCollator(special, vocab, 128, MaskingConfig(rate=0.3), seed=3, packing=p)(batch)
                     for p in (False, True))
    assert len(packed["input_ids"]) < len(plain["input_ids"]) and packed["sequence_ids"].max() > 1
    torch.manual_seed(0)
    model = modern.ModernBertForMaskedLM(modern.tiny(vocab_size=modern.pad_vocab_size(vocab))).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape) * 3 * p.shape[-1] ** -0.5)
        (loss, sums), (packed_loss, packed_sums) = (MaskedLMObjective()(model, b) for b in (plain, packed))
    torch.testing.assert_close(packed_loss, loss, rtol=0, atol=1e-5)
    assert packed_sums["mlm_count"] == sums["mlm_count"] and packed_sums["mlm_correct"] == sums["mlm_correct"]
