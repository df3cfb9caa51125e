"""same_data's refusal of evaluation rows other than a version's registered ones: where the two registered task configs
carve the dev split apart (your own files, dev carved with task.selection_fraction), it names those settings, as no
files changed and no task.* override gives both versions their rows; otherwise it blames the files or an override."""

import json
import types
from dataclasses import asdict

import pytest

from jobs.config.finetune import TaskConfig
from jobs.registry.evidence import same_data
from pipelines.tasks.roles import split_digest

ROWS = [{"text_a": f"row {i}", "text_b": None, "label": i % 2, "row_index": i} for i in range(6)]
CFG = types.SimpleNamespace(task={})


def version(n: int, rows: list[dict], **task) -> types.SimpleNamespace:
    registered = asdict(TaskConfig(name="files", kind="classification", train_file="data/train.csv", **task))
    return types.SimpleNamespace(version=n, tags={"data.dev.sha256": split_digest(rows),
                                                  "task_config": json.dumps(registered)})


def judged(**task) -> TaskConfig:
    return TaskConfig(name="files", kind="classification", train_file="data/train.csv", **task)


def test_dev_splits_carved_with_another_selection_fraction_are_refused_naming_it():
    candidate = version(2, ROWS[:4], selection_fraction=0.2)
    champion = version(1, ROWS[:2], selection_fraction=0.1)
    with pytest.raises(ValueError) as refused:
        same_data(CFG, candidate, champion, judged(selection_fraction=0.2), "dev", ROWS[:4], ())
    said = str(refused.value)
    assert ("v2 was registered with task.selection_fraction=0.2, v1 (champion) with task.selection_fraction=0.1"
            in said), said
    assert "the task's files or a task.* override changed them" not in said
    assert "no task.* override gives both theirs: name evaluation rows neither trained on with task.dev_file" in said


def test_a_given_dev_file_is_not_carved_its_files_are_still_blamed():
    """Both with a dev file: selection_fraction moves select only, so it is not named; the files are blamed."""
    candidate = version(2, ROWS[:4], selection_fraction=0.2, dev_file="data/dev.csv")
    champion = version(1, ROWS[:2], selection_fraction=0.1, dev_file="data/dev.csv")
    with pytest.raises(ValueError, match=r"the task's files or a task\.\* override changed them") as refused:
        same_data(CFG, candidate, champion, judged(dev_file="data/dev.csv"), "dev", ROWS[:4], ())
    assert "selection_fraction" not in str(refused.value)


def test_another_label_set_is_named_its_order_is_not():
    """task.labels rejects a row of another class: a version trained on fewer classes was evaluated on fewer rows."""
    candidate = version(2, ROWS[:4], labels=["pos", "neg", "neutral"])
    champion = version(1, ROWS[:2], labels=["neg", "pos"])
    with pytest.raises(ValueError) as refused:
        same_data(CFG, candidate, champion, judged(labels=["pos", "neg", "neutral"]), "dev", ROWS[:4], ())
    assert 'v2 was registered with task.labels=["neg", "neutral", "pos"]' in str(refused.value)
    reordered = version(3, ROWS[:4], labels=["neutral", "neg", "pos"])
    with pytest.raises(ValueError, match=r"the task's files or a task\.\* override changed them") as refused:
        same_data(CFG, reordered, candidate, judged(labels=["neutral", "neg", "pos"]), "dev", ROWS[:3], ())
    assert "task.labels" not in str(refused.value)


# TaskConfig's fields that shape no evaluation row: what a row is read as, how it is windowed, scored or trained on
SHAPE_NO_ROW = {"name", "kind", "max_seq_len", "max_train_examples", "metric", "multi_label_threshold", "doc_stride",
                "max_query_length", "n_best", "max_answer_length", "iob_scheme", "label_all_subwords",
                "max_train_per_label"}


def test_every_task_setting_is_said_to_carve_rows_or_not():
    """A setting added to TaskConfig that changes which rows an evaluation split holds, and is not in CARVED_BY, would
    let a refusal blame the files for rows the settings carved: each field is classified here or there."""
    from dataclasses import fields

    from jobs.registry.evidence import CARVED_BY

    assert {f.name for f in fields(TaskConfig)} == set(CARVED_BY) | SHAPE_NO_ROW
    assert not set(CARVED_BY) & SHAPE_NO_ROW


def test_the_same_carve_settings_blame_the_files_or_an_override_as_before():
    candidate, champion = version(2, ROWS[:4]), version(1, ROWS[:4])
    with pytest.raises(ValueError, match=r"the task's files or a task\.\* override changed them, and rows"):
        same_data(CFG, candidate, champion, judged(), "dev", ROWS[:3], ())
