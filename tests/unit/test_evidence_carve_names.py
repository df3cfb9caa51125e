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


def test_the_same_carve_settings_blame_the_files_or_an_override_as_before():
    candidate, champion = version(2, ROWS[:4]), version(1, ROWS[:4])
    with pytest.raises(ValueError, match=r"the task's files or a task\.\* override changed them, and rows"):
        same_data(CFG, candidate, champion, judged(), "dev", ROWS[:3], ())
