"""A regression head of several outputs (problem_type regression, num_labels > 1: bert_core loads and re-exports
them) is refused by every entry that takes a model folder: batch prediction writes one `value` per row, and wrote
the first output alone, dropping the others without a word."""

import json

import pytest
import transformers

from bert_core.config import ConfigError
from jobs import predict
from jobs.config.predict import PredictConfig
from jobs.inference.kinds import folder_kind, model_kind
from jobs.inference.model_ref import model_folder_kind, resolve_model
from jobs.inference.predictor import Predictor
from test_predictor import tiny

OUTPUTS = {0: "fluency", 1: "adequacy", 2: "style"}
REFUSED = r"a regression of 3 outputs \(problem_type regression, num_labels 3: fluency, adequacy, style\)"


def quality(tmp_path) -> str:
    """A quality model scoring fluency, adequacy and style: one regression head of three outputs."""
    return tiny(tmp_path, "BertForSequenceClassification", num_labels=3, problem_type="regression",
                id2label=OUTPUTS, label2id={v: k for k, v in OUTPUTS.items()})


def test_the_replicas_and_the_served_model_refuse_a_regression_of_several_outputs(tmp_path):
    """Predictor is what the replicas and the served model (served_model.PredictorModel.load_context) load."""
    folder = quality(tmp_path)
    with pytest.raises(ValueError, match=f"^{folder}: {REFUSED}") as refused:
        Predictor(folder)
    assert "\n" not in str(refused.value) and "one output (num_labels 1)" in str(refused.value)
    with pytest.raises(ValueError, match=REFUSED):
        model_kind(transformers.AutoConfig.from_pretrained(folder))


def test_a_model_folder_refuses_it_before_any_ray_work(tmp_path):
    folder = quality(tmp_path)
    with pytest.raises(ValueError, match=f"^{REFUSED}"):  # its callers name the model, as they asked for it
        folder_kind(folder)
    with pytest.raises(ConfigError, match=f"^model '{folder}': {REFUSED}"):
        resolve_model(folder, "", tmp_path / "unused")
    with pytest.raises(ConfigError, match=REFUSED):  # --check
        model_folder_kind(folder)
    (tmp_path / "in.csv").write_text("text\na fine day\n")
    cfg = PredictConfig(model=folder, input=str(tmp_path / "in.csv"), output=str(tmp_path / "out"))
    with pytest.raises(ConfigError, match=REFUSED):
        predict.check(cfg, None)
    with pytest.raises(ConfigError, match=REFUSED):
        predict.run(cfg)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("config, outputs", [({"id2label": {"0": "a", "1": "b", "2": "c"}}, 3), ({"num_labels": 4}, 4),
                                             ({}, 2), ({"num_labels": 1}, 1),
                                             ({"id2label": {"0": "a", "1": "b"}, "num_labels": 1}, 1),
                                             ({"id2label": {"0": "a"}, "num_labels": 3}, 3)])
def test_a_folders_outputs_are_counted_as_transformers_counts_them(tmp_path, config, outputs):
    """num_labels when config.json has it (over id2label: transformers 5 reads it so), else id2label's, else 2
    (AutoConfig's default): the driver, which reads config.json as JSON, refuses the folders the replicas would."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "problem_type": "regression",
                                                      "architectures": ["BertForSequenceClassification"], **config}))
    assert transformers.AutoConfig.from_pretrained(tmp_path).num_labels == outputs
    if outputs == 1:
        assert folder_kind(tmp_path) == "regression"
    else:
        with pytest.raises(ValueError, match=f"a regression of {outputs} outputs"):
            folder_kind(tmp_path)


def test_a_regression_of_one_output_still_predicts_its_value(tmp_path):
    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=1, problem_type="regression")
    assert folder_kind(folder) == "regression"
    (out,) = Predictor(folder).predict([{"id": "0", "text_a": "a fine day", "text_b": None}])
    assert set(out) == {"id", "value", "truncated"} and isinstance(out["value"], float)
