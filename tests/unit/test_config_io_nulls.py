# Findings 2 and 4 of the config review: need this patch's jobs/config/io.py change (they fail without it).
import pytest

from bert_core.config import ConfigError
from jobs.config.finetune import FinetuneConfig
from jobs.config.io import load_config, parse_overrides
from jobs.config.predict import PredictConfig
from jobs.config.pretrain import PretrainConfig
from jobs.config.promote import PromoteConfig


@pytest.mark.parametrize("cls, overrides, message", [
    (PromoteConfig, ["model=m", "task=null"], r"^task must be a mapping .*got None"),  # was a TypeError's traceback
    (PromoteConfig, ["model=m", "task=/data/heldout.csv"], r"^task must be a mapping .*'/data/heldout.csv'"),  # task..
    (PredictConfig, ["faults=abc"], r"^faults must be a mapping .*got 'abc'"),  # was "faults.a does not apply"
])
def test_a_mapping_field_given_something_else_is_refused_by_name(cls, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(cls, None, overrides).validate()


def test_a_mapping_fields_null_section_in_yaml_is_refused_by_name(tmp_path):
    (tmp_path / "promote.yaml").write_text("min_delta: 0.01\ntask:\n  # dev_file: /data/heldout.csv\n")
    with pytest.raises(ConfigError, match=r"^task must be a mapping .*got None"):
        load_config(PromoteConfig, str(tmp_path / "promote.yaml"), ["model=m"])


@pytest.mark.parametrize("override", ["tracking.registered_model=null", "tracking.artifact_location=NULL",
                                      "run_name=~"])
def test_null_for_a_text_field_on_the_command_line_is_refused_as_in_yaml(override):
    """YAML's null for a text field is refused; the command line's was the text "null" (a model registered as
    "null", artifacts in ./null)."""
    key = override.partition("=")[0]
    with pytest.raises(ConfigError, match=rf"^{key} is text, not null: an empty value \(`{key}=`\) is none"):
        parse_overrides([override], FinetuneConfig)


def test_a_text_fields_quoted_null_and_an_optional_ones_null_are_kept():
    assert parse_overrides(["task.columns.text='null'"], FinetuneConfig)["task"]["columns"]["text"] == "null"
    assert parse_overrides(["run_name=nullish"], FinetuneConfig)["run_name"] == "nullish"
    assert parse_overrides(["data.tokenizer.path=null"], PretrainConfig)["data"]["tokenizer"]["path"] is None
    assert parse_overrides(["tracking.registered_model="], FinetuneConfig)["tracking"]["registered_model"] == ""
    assert load_config(PromoteConfig, None, ["model=m", "task={}"]).validate().task == {}


@pytest.mark.parametrize("section, override", [("pretrain", "run_name=null"), ("sweep", "name=null"),
                                                ("pretrain", "tracking.registered_model=null")])
def test_the_quickstarts_null_advice_names_its_own_overrides(section, override):
    """The quickstart prefixes the fields an error names with its section: the advice's `run_name=` too, else it
    advised an override the quickstart refuses."""
    from jobs.config.sweep import SweepConfig
    from jobs.quickstart import scoped

    cls = {"pretrain": PretrainConfig, "sweep": SweepConfig}[section]
    with pytest.raises(ConfigError) as e:
        parse_overrides([override], cls)
    key = override.partition("=")[0]
    said = str(scoped(section, cls, e.value, [override]))
    assert said.startswith(f"{section}.{key} is text") and f"(`{section}.{key}=`) is none" in said, said
    assert f"(`{section}.{key}=\"'null'\"` in a shell)" in said, said
