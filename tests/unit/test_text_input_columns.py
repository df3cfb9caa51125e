"""A plain-text input (`.txt`, one input per line) holds one column, the text: a column the mapping names beside it
(columns.id, columns.text_pair) is refused before any work, as every other format's file lacking it is. It was not:
the rows silently got `<file>:<n>` ids where the user asked for an id column, and a pair model's inputs were all
rejected as missing_text after the whole run. No Ray."""

import dataclasses

import pytest

from jobs.inference import inputs
from pipelines.tasks import read_file
from pipelines.tasks.common import TaskDataError
from pipelines.tasks.files import Columns


@pytest.fixture
def docs(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text("first line\nsecond line\n")
    return str(path)


@pytest.mark.parametrize("kind, setting", [("classification", {"id": "doc_id"}),
                                           ("classification", {"text_pair": "hypothesis"}),
                                           ("regression", {"id": "doc_id"}),
                                           ("token-classification", {"id": "doc_id", "tokens": ""})])
def test_a_plain_text_input_is_refused_for_a_column_it_cannot_hold(docs, kind, setting):
    columns = dataclasses.replace(Columns(), **setting)
    named = next(k for k in setting if setting[k])
    with pytest.raises(TaskDataError, match=rf"set task.columns.{named}.*plain-text file") as e:
        inputs.check_columns([(docs, "text")], kind, columns)
    assert "found ['text']" in str(e.value)
    with pytest.raises(TaskDataError, match=f"task.columns.{named}"):  # read_file alone too: before any row
        next(read_file(docs, "text", kind, columns, labeled=False))


def test_a_plain_text_input_reads_as_before_with_its_own_columns(docs):
    inputs.check_columns([(docs, "text")], "classification", Columns())
    rows = [r for b in read_file(docs, "text", "classification", Columns(), labeled=False) for r in b.rows]
    assert [(r["id"], r["text_a"], r["text_b"]) for r in rows] == [("docs.txt:0", "first line", None),
                                                                     ("docs.txt:1", "second line", None)]
    named = dataclasses.replace(Columns(), text="body")  # the text column's name is the line's, whatever it is
    assert [r["text_a"] for b in read_file(docs, "text", "classification", named, labeled=False) for r in b.rows] \
        == ["first line", "second line"]


def test_fine_tuning_reads_no_plain_text_file(docs):
    """Fine-tuning's files are labeled: the text format (no label column) is refused as a format there."""
    with pytest.raises(TaskDataError, match="format 'text' cannot hold classification rows"):
        next(read_file(docs, "text", "classification", Columns()))
