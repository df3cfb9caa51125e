"""What a registered model is loaded with: the transformers class for its task; and the settings a plain transformers
pipeline needs to answer as batch prediction does (pipeline_config), which the parity tests run it with. Every
fine-tuned kind is served by our pyfunc (jobs/inference/served_model.py), not a pipeline."""

from __future__ import annotations

import json
import os
from pathlib import Path

PRETRAINING = "pretraining"  # not a pipeline task: the release checkpoint, every tensor, as the model
# The transformers class that loads a model folder for each task the registry logs (jobs/registry/tracking.py), and
# that batch prediction and the promotion scorer load it with.
TASK_MODELS = {PRETRAINING: "BertForPreTraining", "fill-mask": "AutoModelForMaskedLM",
               "text-classification": "AutoModelForSequenceClassification",
               "question-answering": "AutoModelForQuestionAnswering",
               "token-classification": "AutoModelForTokenClassification"}


def model_class(task: str, model_dir: str | os.PathLike):
    """The transformers class that loads `model_dir` for `task`. A pretraining release loads as its own
    architecture (config.json's: BertForPreTraining, or ModernBertForMaskedLM for the modern recipe):
    transformers' AutoModelForPreTraining knows no ModernBERT, and a BERT class would load a ModernBERT folder
    with every weight missing and only a warning."""
    import transformers

    name = TASK_MODELS[task]
    if task == PRETRAINING:
        name = json.loads((Path(model_dir) / "config.json").read_text())["architectures"][0]
    return getattr(transformers, name)


def pipeline_config(task: str, model, tokenizer) -> dict:
    """How a transformers pipeline runs any input as jobs/inference/predictor.py predicts (the parity tests' reference:
    tests/unit/test_predictor.py), and the tokenizer's length limit set to the model's positions. Without it one
    input longer than the positions takes a pipeline down (an index error in the position embeddings).
      text-classification   truncation to the limit (a pair: the longer text first, as the tokenizer does)
      token-classification  windows of the limit overlapping by a quarter of it, so every word of a long input
                            is tagged; words take their first piece's tag, entities are grouped (B-/I-), the
                            outside words ("O") left out of each window before overlapping groups are merged.
                            (MLflow's served tagger failed a whole request on an input that answers nothing: its
                            _parse_tokenizer_output reads item [0])"""
    limit = min(int(tokenizer.model_max_length), int(model.config.max_position_embeddings))
    tokenizer.model_max_length = limit
    if task == "text-classification":
        return {"truncation": True}
    if task == "token-classification":
        return {"aggregation_strategy": "first", "stride": limit // 4}
    return {}
