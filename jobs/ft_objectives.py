"""Fine-tuning objectives: loss -> counts -> metrics for the bert_core heads.

Contract (shared with the Engine seam, see jobs/engine.py): an objective is called as
`objective(model, batch) -> (loss, sums)`, where sums are detached scalar tensors that add up
across micro-batches and ranks (so an all-reduce of sums, then `metrics(sums)`, gives run-wide
numbers); `outputs(model, batch)` returns what evaluation needs, as CPU tensors. Batches hold the
tensors the heads take (input_ids, token_type_ids, attention_mask and the task's labels); any
other key (row_index, window) is bookkeeping and is not passed to the model.
"""

from __future__ import annotations

import torch

IGNORE_INDEX = -100  # torch's cross_entropy default; pipelines.tasks.conll writes it


def _inputs(batch: dict) -> dict:
    return {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}


class ClassificationObjective:
    """Sequence classification; num_labels == 1 is regression (MSE), as the head does."""

    def __init__(self, num_labels: int):
        self.num_labels = num_labels

    def __call__(self, model, batch: dict):
        out = model(**_inputs(batch), labels=batch["labels"])
        n = torch.tensor(float(batch["labels"].shape[0]))
        sums = {"loss_sum": out.loss.detach() * n, "count": n}
        if self.num_labels > 1:
            sums["correct"] = (out.logits.argmax(-1) == batch["labels"]).sum().detach().float()
        return out.loss, sums

    def metrics(self, sums: dict) -> dict:
        count = max(float(sums["count"]), 1.0)
        out = {"loss": float(sums["loss_sum"]) / count}
        if "correct" in sums:
            out["accuracy"] = float(sums["correct"]) / count
        return out

    def outputs(self, model, batch: dict) -> dict:
        return {"logits": model(**_inputs(batch)).logits.detach().float().cpu()}  # (B, C)


class TokenClassificationObjective:
    """Per-token labels; IGNORE_INDEX positions (continuations, specials, padding) are left out."""

    def __init__(self, num_labels: int):
        self.num_labels = num_labels

    def __call__(self, model, batch: dict):
        out = model(**_inputs(batch), labels=batch["labels"])
        keep = batch["labels"] != IGNORE_INDEX
        n = keep.sum().detach().float()
        correct = ((out.logits.argmax(-1) == batch["labels"]) & keep).sum().detach().float()
        return out.loss, {"loss_sum": out.loss.detach() * n, "count": n, "correct": correct}

    def metrics(self, sums: dict) -> dict:
        count = max(float(sums["count"]), 1.0)
        return {"loss": float(sums["loss_sum"]) / count, "token_accuracy": float(sums["correct"]) / count}

    def outputs(self, model, batch: dict) -> dict:
        return {"logits": model(**_inputs(batch)).logits.detach().float().cpu()}  # (B, T, C)


class QuestionAnsweringObjective:
    """Start/end positions per window ([CLS] = 0 where the window holds no answer)."""

    num_labels = 2

    def __call__(self, model, batch: dict):
        out = model(**_inputs(batch), start_positions=batch["start_positions"], end_positions=batch["end_positions"])
        n = torch.tensor(float(batch["input_ids"].shape[0]))
        both = ((out.start_logits.argmax(-1) == batch["start_positions"])
                & (out.end_logits.argmax(-1) == batch["end_positions"])).sum().detach().float()
        return out.loss, {"loss_sum": out.loss.detach() * n, "count": n, "span_correct": both}

    def metrics(self, sums: dict) -> dict:
        count = max(float(sums["count"]), 1.0)
        return {"loss": float(sums["loss_sum"]) / count, "span_accuracy": float(sums["span_correct"]) / count}

    def outputs(self, model, batch: dict) -> dict:
        out = model(**_inputs(batch))
        return {"start_logits": out.start_logits.detach().float().cpu(),  # (B, T)
                "end_logits": out.end_logits.detach().float().cpu()}
