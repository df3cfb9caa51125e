"""jobs/inference/kinds.py: a model folder's kind read from config.json as transformers reads it, without torch."""

import json
import subprocess
import sys

import pytest
import transformers

from jobs.inference.kinds import folder_kind, model_kind
from tests.unit.test_predictor import tiny

HEADS = [("BertForSequenceClassification", {"num_labels": 3}, "classification"),
         ("BertForSequenceClassification", {"num_labels": 3, "problem_type": "multi_label_classification"},
          "multi-label"),
         ("BertForSequenceClassification", {"num_labels": 1, "problem_type": "regression"}, "regression"),
         ("BertForSequenceClassification", {"num_labels": 1}, "classification"),  # the pipeline's sigmoid label
         ("BertForTokenClassification", {"num_labels": 5}, "token-classification"),
         ("BertForQuestionAnswering", {}, "question-answering")]


@pytest.mark.parametrize("head, config, kind", HEADS)
def test_the_folders_kind_is_what_its_transformers_config_says(tmp_path, head, config, kind):
    folder = tiny(tmp_path, head, **config)
    assert folder_kind(folder) == model_kind(transformers.AutoConfig.from_pretrained(folder)) == kind


def test_a_folder_without_a_readable_config_is_named(tmp_path):
    with pytest.raises(ValueError, match="no config.json in .*: not a transformers model folder"):
        folder_kind(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is not a JSON config"):
        folder_kind(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="a list, not an object"):
        folder_kind(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForMaskedLM"]}))
    with pytest.raises(ValueError, match="not a fine-tuned model: architecture 'BertForMaskedLM'"):
        folder_kind(tmp_path)


def test_the_prediction_driver_resolves_a_model_without_importing_torch(tmp_path):
    """The driver of jobs/predict.py plans the job before Ray starts: importing torch and transformers there cost
    ~1.6 s of every prediction job on a 2-core machine (only the model replicas need them)."""
    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=2)
    code = ("import sys; from pathlib import Path; from jobs.predict import resolve_model; "
            f"ref = resolve_model({folder!r}, 'sqlite:///{tmp_path}/mlflow.db', Path({str(tmp_path / 'dl')!r})); "
            "print(ref.kind, sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-2] == "classification []", out.stdout + out.stderr
