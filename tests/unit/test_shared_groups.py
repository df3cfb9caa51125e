"""Given dev / select files are not regrouped: their rows may share a group (a SQuAD context, a pair's first sentence)
with training rows. The job counts them (never drops them: the splits and their digests stay as they were), says so
in the [data] line, and tags data.shared_group.<split> only where some are (other runs' tag sets are unchanged).
Ray Data runs in this process (tests.unit.test_data_refusals.LocalDataset)."""

import json
import sys
import types

import numpy as np
import pytest

from jobs.loops import ft_files, ft_tasks
from tests.unit.test_data_refusals import LocalDataset


@pytest.fixture
def local_ray(monkeypatch):
    def from_items(items, **_):
        return LocalDataset([{k: np.asarray([v]) for k, v in item.items()} for item in items])

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(data=types.SimpleNamespace(from_items=from_items)))


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def qa(i: int, k: int) -> dict:
    """Question k of paragraph i."""
    context = f"Paragraph {i}: the river Foo{i} flows through the town of Bar{i} since {1800 + i}."
    answer = f"Foo{i}" if k == 0 else str(1800 + i)
    return {"id": f"q{i}_{k}", "context": context, "question": f"Question {k} on paragraph {i}?",
            "answers": {"text": [answer], "answer_start": [context.index(answer)]}}


def qa_task(tmp_path, dev: bool):
    train = write_jsonl(tmp_path / "train.jsonl", [qa(i, 0) for i in range(60)])
    given = {"dev_file": write_jsonl(tmp_path / "dev.jsonl", [qa(i, 1) for i in range(60)])} if dev else {}
    return ft_tasks.task_config({"name": "files", "kind": "question-answering", "train_file": train, **given,
                                 "columns": {"context": "context", "question": "question", "answers": "answers",
                                             "id": "id"}})


def test_questions_split_at_random_share_their_contexts_with_dev_counted_said_and_tagged(tmp_path, local_ray):
    """Question 0 of each paragraph in train, question 1 in dev: every train and select row's context is a dev
    row's. All rows stay where they were; the counts reach the tags and the [data] line, with what to do."""
    task = qa_task(tmp_path, dev=True)
    rows = ft_files.load_files(task)
    assert len(rows.train) + len(rows.select) == 60 and len(rows.evaluation["dev"]) == 60  # nothing dropped
    assert not any(rows.dropped.values())
    tags = ft_tasks.split_tags(rows)
    assert tags["data.shared_group.train"] == str(len(rows.train))
    assert tags["data.shared_group.select"] == str(len(rows.select))
    line = ft_tasks.rows_line(task, rows)
    assert (f"; warning: sharing a context with dev: {len(rows.train)} train, {len(rows.select)} select (given files "
            "are not regrouped") in line
    assert "carve dev from train (no task.dev_file) or split the files by context" in line


def test_a_carved_dev_shares_no_group_and_adds_no_tag_or_warning(tmp_path, local_ray):
    rows = ft_files.load_files(task := qa_task(tmp_path, dev=False))
    assert rows.shared_group == {}
    assert not [k for k in ft_tasks.split_tags(rows) if k.startswith("data.shared_group")]
    assert "warning" not in ft_tasks.rows_line(task, rows)


def test_pairs_whose_premise_is_a_dev_premise_are_counted_by_first_sentence(tmp_path, local_ray):
    """MNLI-style files: a premise with its hypotheses, one hypothesis in dev. A given select file whose pairs
    share no premise adds nothing for select."""
    def pair(i, k):
        return {"text": f"Premise number {i} about the town.", "pair": f"Hypothesis {k} of {i}.", "label": k % 2}

    train = write_jsonl(tmp_path / "train.jsonl", [pair(i, k) for i in range(40) for k in (0, 1)])
    dev = write_jsonl(tmp_path / "dev.jsonl", [pair(i, 2) for i in range(10)])  # premises 0-9 are also in train
    select = write_jsonl(tmp_path / "select.jsonl", [pair(100 + i, k) for i in range(10) for k in (0, 1)])
    task = ft_tasks.task_config({"name": "files", "kind": "classification", "train_file": train, "dev_file": dev,
                                 "select_file": select, "columns": {"text": "text", "text_pair": "pair"}})
    rows = ft_files.load_files(task)
    assert len(rows.train) == 80 and rows.shared_group == {"train": 20}
    tags = ft_tasks.split_tags(rows)
    assert tags["data.shared_group.train"] == "20" and "data.shared_group.select" not in tags
    assert ("sharing a first sentence (text_a) with dev: 20 train" in (line := ft_tasks.rows_line(task, rows))
            and "carve dev and select from train (no task.dev_file, task.select_file)" in line)
