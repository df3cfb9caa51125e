"""Question answering from a user's own files: the answers' shapes, their whitespace, rows without answers, and SQuAD
JSON read as inputs to predict."""

import collections
import json

import numpy as np
import pytest

from pipelines.tasks import TaskDataError, read_file, stream
from pipelines.tasks.files import Columns, check_columns
from tests.unit.test_files_task import SQUAD, jsonl, read, write


def test_qa_answers_as_one_object_pair_up_or_are_refused(tmp_path):
    """{"text": "Paris", "answer_start": 25} is one answer (not a TypeError naming no file); lists pair up; a text
    beside a list of starts, or lists of unequal lengths, are unparseable_label (not the answer "P")."""
    context = "The capital of France is Paris."
    path = write(tmp_path, "qa.jsonl", jsonl(
        {"context": context, "question": "One?", "answers": {"text": "Paris", "answer_start": 25}},
        {"context": context, "question": "Mixed?", "answers": {"text": "Paris", "answer_start": [25]}},
        {"context": context, "question": "Unequal?", "answers": {"text": ["Paris", "The"], "answer_start": [25]}},
        {"context": context, "question": "Text?", "answers": "Paris"}))
    check_columns([(path, "jsonl")], "question-answering")
    rows, rejects, _, _ = read(path, "jsonl", "question-answering")
    assert [r["answers"] for r in rows] == [{"text": ["Paris"], "answer_start": [25]}]
    assert rejects == {"unparseable_label": 3}


def test_qa_answers_are_trimmed_and_rows_without_answers_are_missing_labels(tmp_path):
    """An answer's whitespace is trimmed (its start moved), whitespace alone is no answer; answers absent or null are
    missing_label, [] is SQuAD v2's unanswerable question, refused where task.version_2 is false."""
    context = "The capital of France is Paris and it is big."
    path = write(tmp_path, "qa.jsonl", jsonl(
        {"context": context, "question": "Lead?", "answers": {"text": [" Paris"], "answer_start": [24]}},
        {"context": context, "question": "Trail?", "answers": [{"text": "Paris ", "answer_start": 25}]},
        {"context": context, "question": "Blank?", "answers": [{"text": " ", "answer_start": 24}]},
        {"context": context, "question": "Absent?"},
        {"context": context, "question": "Null?", "answers": None},
        {"context": context, "question": "None?", "answers": []},
        {"context": context, "question": "Columns?", "answers": {"text": [], "answer_start": []}}))
    rows, rejects, _, _ = read(path, "jsonl", "question-answering")
    assert [r["answers"] for r in rows[:2]] == [{"text": ["Paris"], "answer_start": [25]}] * 2
    assert [r["is_impossible"] for r in rows] == [False, False, True, True]
    assert rejects == {"no_valid_answer": 1, "missing_label": 2}  # " Paris" at 24 is trimmed, not off its start
    v1 = [b for b in read_file(path, "jsonl", "question-answering", version_2=False)]
    assert sum(len(b.rows) for b in v1) == 2 and v1[0].rejects["unanswerable_needs_version_2"] == 2
    squad = write(tmp_path, "v2.json", json.dumps(SQUAD))
    v1 = list(read_file(squad, "squad", "question-answering", version_2=False))
    assert [r["id"] for r in v1[0].rows] == ["q1"] and v1[0].rejects["unanswerable_needs_version_2"] == 1


def test_squad_json_inputs_to_predict_keep_every_question(tmp_path):
    """labeled=False: each question with a context and a question is an input, answered or not, its id repeated or
    absent (as the same rows in JSON Lines), none dropped by the training checks."""
    qas = [{"id": "q1", "question": "Where?"}, {"id": "q1", "question": "Again?"}, {"question": "No id?"},
           {"id": "q4", "question": "Answered?", "answers": [{"text": "France", "answer_start": 12}]},
           {"id": "q5", "question": "Wrong?", "answers": [{"text": "France", "answer_start": 3}]}, {"id": "q6"}]
    path = write(tmp_path, "in.json", json.dumps({"data": [{"title": "T", "paragraphs": [
        {"context": "Paris is in France.", "qas": qas}]}]}))
    batches = list(read_file(path, "squad", "question-answering", labeled=False))
    rows = [r for b in batches for r in b.rows]
    assert [r["id"] for r in rows] == ["q1", "q1", "in.json:2", "q4", "q5"]
    assert all(r["answers"] == {"text": [], "answer_start": []} for r in rows)
    assert batches[0].rejects == {"missing_field": 1}
    bad = write(tmp_path, "bad.json", json.dumps({"data": [{"paragraphs": [{"context": "x", "qas": qas[-1:]}]}]}))
    assert [(b.rows, b.rejects) for b in read_file(bad, "squad", "question-answering", labeled=False)] == [
        ([], {"missing_field": 1})]  # counted, not raised in a Ray task
    empty = write(tmp_path, "empty.json", json.dumps({"data": []}))
    assert [b.rejects for b in read_file(empty, "squad", "question-answering", labeled=False)] == [{"empty_file": 1}]
    with pytest.raises(TaskDataError, match="no usable questions"):  # to train: no answer on any question
        list(read_file(write(tmp_path, "q.json", json.dumps({"data": [{"paragraphs": [
            {"context": "Paris is in France.", "qas": qas[:3]}]}]})), "squad", "question-answering"))


def test_qa_answer_starts_in_utf16_units_are_kept_at_their_character(tmp_path):
    """JSONL from a JavaScript annotation tool: an emoji before the answer counts two UTF-16 units."""
    context = "Great \U0001F389 news: Paris won."
    path = write(tmp_path, "qa.jsonl", jsonl(
        {"context": context, "question": "Who?", "answers": [{"text": "Paris", "answer_start": 15}]}))
    rows, rejects, _, _ = read(path, "jsonl", "question-answering")
    assert context.index("Paris") == 14 and [r["answers"] for r in rows] == [{"text": ["Paris"], "answer_start": [14]}]
    assert not rejects and notes(path) == {"answer_offset_in_other_units": 1}  # converted in a question kept


def notes(path, fmt="jsonl", **kw) -> collections.Counter:
    return sum((b.notes for b in read_file(path, fmt, "question-answering", **kw)), collections.Counter())


def test_answers_off_their_start_are_notes_and_a_dev_file_keeps_them_to_score(tmp_path):
    """Own QA files as load_squad: an answer off its answer_start was counted as a record rejected
    (answer_offset_mismatch in data.rejected.*) while its question was kept; and a dev or select file's question whose
    every answer was off was rejected (no_valid_answer), so dev EM/F1 differed from the official script, which scores
    answers by their text. Read scored_only, such answers are kept at -1; counted as notes, in questions kept only."""
    context = "Paris is the capital of France."
    path = write(tmp_path, "qa.jsonl", jsonl(
        {"context": context, "question": "Capital?", "answers": {"text": ["Paris", "Paris"], "answer_start": [0, 3]}},
        {"context": context, "question": "Country?", "answers": [{"text": "France", "answer_start": 2}]}))
    rows, rejects, _, _ = read(path, "jsonl", "question-answering")
    assert [r["question"] for r in rows] == ["Capital?"] and rejects == {"no_valid_answer": 1}
    assert notes(path) == {"answer_offset_mismatch": 1}  # the question kept's second answer; not the rejected one's
    dev = [r for b in read_file(path, "jsonl", "question-answering", scored_only=True) for r in b.rows]
    assert [r["answers"] for r in dev] == [{"text": ["Paris", "Paris"], "answer_start": [0, -1]},
                                          {"text": ["France"], "answer_start": [-1]}]
    assert notes(path, scored_only=True) == {"answer_offset_mismatch": 2}
    squad = write(tmp_path, "dev.json", json.dumps({"data": [{"paragraphs": [{"context": context, "qas": [
        {"id": "c", "question": "Country?", "answers": [{"text": "France", "answer_start": 2}]}]}]}]}))
    assert [r["id"] for b in read_file(squad, "squad", "question-answering", scored_only=True) for r in b.rows] == ["c"]
    assert notes(squad, "squad", scored_only=True) == {"answer_offset_mismatch": 1}
    # the training files' notes, read by Ray Data tasks, reach the driver through the survey (stream.StreamedRows)
    part = next(stream._read({"path": np.asarray([path]), "fmt": np.asarray(["jsonl"])}, "question-answering",
                             Columns()))
    assert json.loads(stream._survey(part, "question-answering")["notes"][0]) == {"answer_offset_mismatch": 1}


def test_an_answer_start_written_as_a_float_or_digit_string_is_the_offset_it_means(tmp_path):
    """pandas writes an int column holding a null as floats (24.0), a CSV or a stringly export "24": the offset is
    right, and the answer was dropped as answer_offset_mismatch. 0.5, true or -1 stay no offset."""
    records = [{"context": "Paris is big", "question": f"q{i}", "answers": {"text": ["Paris"], "answer_start": [s]}}
               for i, s in enumerate([0.0, "0", 0, 0.5, True, -1])]
    rows, rejects, _, _ = read(write(tmp_path, "qa.jsonl", jsonl(*records)), "jsonl", "question-answering")
    assert [r["question"] for r in rows] == ["q0", "q1", "q2"]
    assert all(r["answers"]["answer_start"] == [0] for r in rows) and rejects.get("no_valid_answer") == 3, rejects
