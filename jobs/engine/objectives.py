"""Loss -> counts -> metrics, one objective per head; the engine runs whichever it is given.

Contract with jobs/engine/data_parallel.py (and jobs/finetune.py):
- `objective(model, batch) -> (loss, sums)`: `batch` holds the model's forward kwargs (labels included);
  `loss` is the mean loss with grad; `sums` are detached scalar float64 tensors that add up over
  micro-batches and ranks (the engine all-reduces them), so every metric is a ratio of two sums.
- `objective.metrics(sums) -> dict`: summed counts (as floats) -> metrics.
- `objective.outputs(model, batch) -> dict`: eval only, no grad: the raw predictions a task metric
  needs, row-aligned with the batch, detached on CPU. Labels in `batch` are ignored.
"""

from __future__ import annotations

import torch

from bert_core import modern, modern_heads
from bert_core.model import (IGNORE_INDEX, BertForPreTraining, BertForQuestionAnswering,
                             BertForSequenceClassification, BertForTokenClassification)


def _sums(**values) -> dict[str, torch.Tensor]:
    # Left on their device: a host sync per micro-batch would stall a GPU pipeline's last stage.
    return {k: torch.as_tensor(v).detach().to(torch.float64).reshape(()) for k, v in values.items()}


def _inputs(batch: dict, labels: tuple[str, ...]) -> dict:
    return {k: v for k, v in batch.items() if k not in labels}


def _ratio(sums: dict[str, float], num: str, den: str) -> float:
    return sums.get(num, 0.0) / max(sums.get(den, 0.0), 1.0)


def pretraining_sums(mlm_loss, nsp_loss, mlm_logits, mlm_targets, nsp_logits, nsp_labels) -> dict[str, torch.Tensor]:
    """MLM/NSP sums of one micro-batch; jobs/engine/pipeline.py's last stage computes the same."""
    M, B = mlm_targets.numel(), nsp_labels.numel()
    return _sums(mlm_loss_sum=mlm_loss.double() * M, mlm_correct=(mlm_logits.argmax(-1) == mlm_targets).sum(),
                 mlm_count=M, nsp_loss_sum=nsp_loss.double() * B,
                 nsp_correct=(nsp_logits.argmax(-1) == nsp_labels.view(-1)).sum(), nsp_count=B)


def mlm_sums(mlm_loss, mlm_logits, mlm_targets) -> dict[str, torch.Tensor]:
    M = mlm_targets.numel()
    return _sums(mlm_loss_sum=mlm_loss.double() * M, mlm_correct=(mlm_logits.argmax(-1) == mlm_targets).sum(),
                 mlm_count=M)


def mlm_metrics(sums: dict[str, float]) -> dict[str, float]:
    """Token-weighted MLM loss and accuracy (the pretraining eval keys)."""
    return {"mlm_loss": _ratio(sums, "mlm_loss_sum", "mlm_count"), "mlm_acc": _ratio(sums, "mlm_correct", "mlm_count"),
            "mlm_tokens": int(sums.get("mlm_count", 0))}


class PretrainingObjective:
    """Masked LM + next-sentence prediction (BertForPreTraining); loss = MLM mean + NSP mean.

    `nsp=False` (train.nsp): the loss is the MLM mean alone, and no NSP metric is reported. The NSP head and
    pooler stay in the model (a BERT release checkpoint has them), frozen by the builder
    (jobs/workers/pretrain_engine.pretraining_model), so every trainable parameter gets a gradient."""

    name = "pretraining"
    labels = ("mlm_labels", "next_sentence_label")
    sum_keys = ("mlm_loss_sum", "mlm_correct", "mlm_count", "nsp_loss_sum", "nsp_correct", "nsp_count")

    def __init__(self, nsp: bool = True):
        self.nsp = nsp

    def __call__(self, model, batch):
        if not self.nsp:
            out = model(**_inputs(batch, ("next_sentence_label",)))
            return out.mlm_loss, mlm_sums(out.mlm_loss, out.mlm_logits, out.mlm_targets)
        out = model(**batch)
        return out.loss, pretraining_sums(out.mlm_loss, out.nsp_loss, out.mlm_logits, out.mlm_targets,
                                          out.nsp_logits, batch["next_sentence_label"])

    def metrics(self, sums: dict[str, float]) -> dict[str, float]:
        """Token-weighted MLM loss and accuracy, example-weighted NSP (with NSP in the loss)."""
        if not self.nsp:
            return mlm_metrics(sums)
        return {**mlm_metrics(sums), "nsp_loss": _ratio(sums, "nsp_loss_sum", "nsp_count"),
                "nsp_acc": _ratio(sums, "nsp_correct", "nsp_count")}

    @torch.no_grad()
    def outputs(self, model, batch):
        out = model(**_inputs(batch, self.labels))  # no mlm_labels: dense (B, T, V) logits
        return {"mlm_logits": out.mlm_logits.detach().cpu(), "nsp_logits": out.nsp_logits.detach().cpu()}


class MaskedLMObjective:
    """Masked LM alone, for the modern encoder (bert_core.modern.ModernBertForMaskedLM): the pretraining batch
    (bert_core.masking.PretrainingCollator's) without segments or NSP labels; the same MLM sums and metrics as
    PretrainingObjective without NSP. The host-built masked positions spare the step a nonzero()."""

    name = "masked_lm"

    @staticmethod
    def _inputs(batch: dict) -> dict:
        """The model's inputs; packed rows (train.packing) carry their sequence and position ids."""
        return {"input_ids": batch["input_ids"], "attention_mask": batch.get("attention_mask"),
                **{k: batch[k] for k in ("sequence_ids", "position_ids") if k in batch}}

    def __call__(self, model, batch):
        out = model(**self._inputs(batch), labels=batch["mlm_labels"], mlm_positions=batch.get("mlm_positions"))
        return out.loss, mlm_sums(out.loss, out.logits, out.targets)

    def metrics(self, sums: dict[str, float]) -> dict[str, float]:
        return mlm_metrics(sums)

    @torch.no_grad()
    def outputs(self, model, batch):
        return {"mlm_logits": model(**self._inputs(batch)).logits.detach().cpu()}  # (B, T, V)


class ClassificationObjective:
    """Sequence classification (cross-entropy), or regression (MSE) when num_labels == 1, as the model."""

    labels = ("labels",)

    def __init__(self, num_labels: int, multi_label: bool = False):
        self.num_labels, self.multi_label = num_labels, multi_label
        self.name = "regression" if num_labels == 1 else "multi_label" if multi_label else "classification"

    def __call__(self, model, batch):
        out = model(**batch)
        if self.multi_label:  # (B, C) 0/1 targets: "accuracy" is the share of rows with every label right
            B = batch["labels"].shape[0]
            exact = ((out.logits.detach() > 0) == (batch["labels"] > 0.5)).all(-1).sum()
            return out.loss, _sums(loss_sum=out.loss.double() * B, correct=exact, count=B)
        labels = batch["labels"].view(-1)
        B = labels.numel()
        if self.num_labels == 1:
            sq_err = ((out.logits.detach().squeeze(-1).double() - labels.double()) ** 2).sum()
            return out.loss, _sums(loss_sum=out.loss.double() * B, sq_err=sq_err, count=B)
        correct = (out.logits.detach().argmax(-1) == labels).sum()
        return out.loss, _sums(loss_sum=out.loss.double() * B, correct=correct, count=B)

    def metrics(self, sums: dict[str, float]) -> dict[str, float]:
        second = ("mse", "sq_err") if self.num_labels == 1 else ("accuracy", "correct")
        return {"loss": _ratio(sums, "loss_sum", "count"), second[0]: _ratio(sums, second[1], "count"),
                "count": int(sums.get("count", 0))}

    @torch.no_grad()
    def outputs(self, model, batch):
        return {"logits": model(**_inputs(batch, self.labels)).logits.detach().float().cpu()}  # (B, num_labels)


class TokenClassificationObjective:
    """Per-token cross-entropy; labels IGNORE_INDEX (sub-word continuations, pads) carry no loss or count."""

    name = "token_classification"
    labels = ("labels",)

    def __call__(self, model, batch):
        out = model(**batch)
        labels = batch["labels"]
        labelled = labels != IGNORE_INDEX
        count = labelled.sum()
        # The mean over labelled tokens: ours is 0 when a batch has none, F.cross_entropy's NaN; the sum is zero.
        loss_sum = torch.where(count > 0, out.loss.detach().double() * count, 0.0)
        correct = ((out.logits.detach().argmax(-1) == labels) & labelled).sum()
        return out.loss, _sums(loss_sum=loss_sum, correct=correct, count=count)

    def metrics(self, sums: dict[str, float]) -> dict[str, float]:
        return {"loss": _ratio(sums, "loss_sum", "count"), "accuracy": _ratio(sums, "correct", "count"),
                "count": int(sums.get("count", 0))}

    @torch.no_grad()
    def outputs(self, model, batch):
        return {"logits": model(**_inputs(batch, self.labels)).logits.detach().float().cpu()}  # (B, T, C)


class QuestionAnsweringObjective:
    """Mean of start and end cross-entropy; an answer truncated out of the window (position >= T, HF's
    rule) carries no loss and is not counted."""

    name = "question_answering"
    labels = ("start_positions", "end_positions")

    def __call__(self, model, batch):
        out = model(**batch)
        T = out.logits.shape[1]
        # The model's clamping: negative positions count as 0 (the [CLS] token), T and beyond are ignored.
        start, end = batch["start_positions"].view(-1).clamp(0, T), batch["end_positions"].view(-1).clamp(0, T)
        answered = start < T
        count = answered.sum()
        loss_sum = torch.where(count > 0, out.loss.detach().double() * count, 0.0)
        logits = out.logits.detach()
        start_correct = ((logits[..., 0].argmax(-1) == start) & answered).sum()
        end_correct = ((logits[..., 1].argmax(-1) == end) & answered).sum()
        return out.loss, _sums(loss_sum=loss_sum, start_correct=start_correct, end_correct=end_correct,
                               count=count)

    def metrics(self, sums: dict[str, float]) -> dict[str, float]:
        return {"loss": _ratio(sums, "loss_sum", "count"), "start_acc": _ratio(sums, "start_correct", "count"),
                "end_acc": _ratio(sums, "end_correct", "count"), "count": int(sums.get("count", 0))}

    @torch.no_grad()
    def outputs(self, model, batch):
        logits = model(**_inputs(batch, self.labels)).logits.detach().float().cpu()  # (B, T, 2)
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


def objective_for(model: torch.nn.Module):
    """The objective that trains `model`'s head (a bert_core.model or bert_core.modern_heads head, possibly
    compiled): the heads of both recipes share a call contract, so one objective serves a task's two heads."""
    model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
    if isinstance(model, BertForPreTraining):
        return PretrainingObjective()
    if isinstance(model, modern.ModernBertForMaskedLM):
        return MaskedLMObjective()
    if isinstance(model, (BertForSequenceClassification, modern_heads.ModernBertForSequenceClassification)):
        return ClassificationObjective(model.num_labels, getattr(model, "multi_label", False))
    if isinstance(model, (BertForTokenClassification, modern_heads.ModernBertForTokenClassification)):
        return TokenClassificationObjective()
    if isinstance(model, (BertForQuestionAnswering, modern_heads.ModernBertForQuestionAnswering)):
        return QuestionAnsweringObjective()
    raise TypeError(f"no objective for {type(model).__name__}")
