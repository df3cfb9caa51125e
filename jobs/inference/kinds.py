"""What a fine-tuned model folder predicts, read without torch or transformers: its kind (config.json's architecture
and problem type), each kind's output columns and their Arrow types, and the question-answering windows. The driver
of jobs/predict.py needs only these, so it starts without importing torch and transformers (~1.6 s on a 2-core
machine, before Ray starts); the model replicas load the weights (jobs/inference/predictor.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

OUTPUT_COLUMNS = {"classification": ("label", "score", "scores"), "multi-label": ("labels", "score", "scores"),
                  "regression": ("value",), "token-classification": ("entities",),
                  "question-answering": ("answer", "answer_start", "score", "null_score")}
# what the served model answers per row: the kind's columns and, where an input can be cut (a text to the model's
# length, a question to max_query_length), whether it was, as batch prediction's `truncated`; a tagger windows its
# long texts, never cuts them
SERVED_COLUMNS = {kind: (*columns, *(("truncated",) if kind != "token-classification" else ()))
                  for kind, columns in OUTPUT_COLUMNS.items()}
# each output column's Arrow type: a part whose values are all None (QA rows without a span) keeps it
OUTPUT_TYPES = {"label": "string", "labels": "string", "score": "double", "scores": "string", "value": "double",
                "entities": "string", "answer": "string", "answer_start": "int64", "null_score": "double",
                "truncated": "bool"}


def model_kind(config, folder: str | Path = "") -> str:
    """The task kind of an HF BERT config: its architecture's head, and for sequence heads the problem type (what
    the fine-tuning job exports: multi_label_classification, regression). As the pipeline reads it: one logit without
    a problem type is a label with its sigmoid, not a regression value. `folder`, if given, is named in a refusal."""
    arch = (config.architectures or [""])[0]
    if arch.endswith("ForTokenClassification"):
        return "token-classification"
    if arch.endswith("ForQuestionAnswering"):
        return "question-answering"
    if not arch.endswith("ForSequenceClassification"):
        raise ValueError(f"not a fine-tuned model: architecture {arch or '(none)'!r}; predict needs a "
                         "sequence classification, token classification or question answering head")
    if config.problem_type == "multi_label_classification":
        return "multi-label"
    if config.problem_type == "regression":  # one logit without it (another tool's model): the pipeline's sigmoid
        if (config.num_labels or 1) > 1:  # bert_core loads and re-exports these; `value` would be the first output's
            names = ", ".join(str(name) for name in list(config.id2label.values())[:5])
            raise ValueError(
                f"{f'{folder}: ' if folder else ''}a regression of {config.num_labels} outputs (problem_type "
                f"regression, num_labels {config.num_labels}: {names}{', ...' if config.num_labels > 5 else ''}); "
                "predict and the served model write one value per row, so they take a regression of one output "
                "(num_labels 1) only; a transformers text-classification pipeline (function_to_apply='none', "
                "top_k=None) answers every output")
        return "regression"
    return "classification"


def folder_kind(folder: str | Path) -> str:
    """model_kind of a model folder's config.json, read as JSON (what AutoConfig would read for these fields)."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise ValueError(f"no config.json in {folder}: not a transformers model folder")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a JSON config ({exc})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} is not a JSON config (a {type(config).__name__}, not an object)")
    outputs = regression_outputs(config) if config.get("problem_type") == "regression" else []
    return model_kind(SimpleNamespace(architectures=config.get("architectures"),
                                      problem_type=config.get("problem_type"),
                                      num_labels=len(outputs), id2label=dict(enumerate(outputs))))


def regression_outputs(config: dict) -> list[str]:
    """A regression head's output names as transformers 5 counts them from config.json: num_labels (over id2label,
    whose names it then drops), else id2label's, else 2 (AutoConfig's default)."""
    labels = config.get("id2label")
    names = [str(name) for name in labels.values()] if isinstance(labels, dict) else None
    outputs = config.get("num_labels")
    if not isinstance(outputs, int) or isinstance(outputs, bool):
        outputs = len(names) if names is not None else 2
    return names if names is not None and len(names) == outputs else [f"LABEL_{i}" for i in range(outputs)]


@dataclass
class QASettings:
    """Windows and spans for question answering (the fine-tuning task's settings when the registry has them)."""

    max_seq_len: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    n_best: int = 20
    max_answer_length: int = 30
    # SQuAD v2 (a question may have no answer): a model whose config has no null_threshold answers "" where the null
    # score beats the best span (threshold 0, as the scorer judges it); otherwise it always answers, as the pipeline
    version_2: bool = False

    @classmethod
    def from_task(cls, task: dict) -> "QASettings":
        """The settings a fine-tuning task (its TaskConfig as a dict, e.g. a version's `task_config`) names; the
        defaults for the rest."""
        return cls(**{f: (str(task[f]).strip().lower() in ("true", "1") if f == "version_2" else int(task[f]))
                      for f in cls.__dataclass_fields__ if f in task})
