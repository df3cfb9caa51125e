"""A label train lacks (label_not_in_train, tag_not_in_train) said as every other reject reason is: the first row of
the reason in its split, with its file and id and the label, and the label of train it differs from only in case or
blanks where there is one. Before, such rows were only counted: a dev file's `Neutral` beside train's `neutral` took
a whole class out of the split that judges the model, and no line named it."""

import json
import sys
import types

import numpy as np

from jobs.config.finetune import TaskConfig
from jobs.loops import ft_tasks
from pipelines.tasks import stream
from pipelines.tasks.files import Columns
from pipelines.tasks.labels import encode_labels
from tests.unit.test_data_refusals import LocalDataset

LABELS = ("negative", "neutral", "positive")


def test_encode_labels_keeps_the_first_row_of_each_reason_with_its_id_and_label():
    rows = [{"id": "d:0", "label": "negative"}, {"id": "d:1", "label": "Neutral"}, {"id": "d:2", "label": "meh"}]
    samples = []
    kept, rejects = encode_labels(rows, "classification", LABELS, samples)
    assert [r["label"] for r in kept] == [0] and rejects == {"label_not_in_train": 2}
    assert samples == [("label_not_in_train", "id d:1", "Neutral")]  # the first only, as a file's first reject
    samples = []
    encode_labels([{"id": "m:0", "label": ["neutral", "Positive "]}], "multi-label", LABELS, samples)
    assert samples == [("label_not_in_train", "id m:0", "Positive ")]  # the class train lacks, not the row's first
    samples = []
    encode_labels([{"id": "s:0", "tokens": ["Ann", "runs"], "ner_tags": ["B-per", "O"]}], "token-classification",
                  ("B-PER", "O"), samples)
    assert samples == [("tag_not_in_train", "id s:0", "B-per")]
    assert encode_labels(rows, "classification", LABELS)[1] == {"label_not_in_train": 2}  # no samples asked: as before


def test_a_label_that_differs_from_trains_only_in_case_or_blanks_is_pointed_at():
    from pipelines.tasks.labels import unknown_label_said

    said = unknown_label_said("label_not_in_train", "Neutral", LABELS)
    assert "the task's labels: ['negative', 'neutral', 'positive']" in said
    assert "'Neutral' differs from 'neutral' only in case or blanks: write it as 'neutral'" in said
    assert "only in case" in unknown_label_said("label_not_in_train", "very  Positive", ("very positive", "bad"))
    assert "only in case" not in unknown_label_said("label_not_in_train", "meh", LABELS)
    assert unknown_label_said("missing_text", "Neutral", LABELS) == ""  # other reasons' lines are as they were
    many = unknown_label_said("label_not_in_train", "x", tuple(f"c{i}" for i in range(30)))
    assert "... (30)" in many and len(many) < 200


def test_a_dev_files_label_train_lacks_gets_its_data_line(tmp_path, monkeypatch, capsys):
    """ft_tasks' driver encodes a given dev file with train's labels: the first row rejected is printed as
    _read_files prints the file's other reasons, the file's path, the row's id, the label and train's twin of it."""
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text("text,label\nt,neutral\n")
    dev.write_text("text,label\n" + "".join(f"dev {i},{['negative', 'Neutral', 'positive'][i % 3]}\n"
                                            for i in range(9)) + "bad,\n")
    select = [{"id": f"s{i}", "text_a": f"sel {i}", "text_b": None, "label": i % 3} for i in range(6)]

    def streamed(spec, fmt, kind, columns, **kwargs):  # the training files as stream_rows gives them, without Ray
        return stream.StreamedRows(stream.StreamedSplit(None, 100, "0" * 64), select, kwargs["dev"], LABELS,
                                   samples={"label_not_in_train": [spec, "id train.csv:7", "NEUTRAL"]})

    monkeypatch.setattr(stream, "stream_rows", streamed)
    rows = ft_tasks.load_rows(TaskConfig(name="files", kind="classification", train_file=str(train),
                                         dev_file=str(dev)))
    assert rows.rejected["dev"] == {"label_not_in_train": 3, "missing_label": 1}
    printed = capsys.readouterr().out
    assert f"[data] {dev}: rejected (missing_label) line 11: 'bad,'" in printed  # the reader's line, as before
    assert (f"[data] {dev}: rejected (label_not_in_train) id dev.csv:1: 'Neutral' (the task's labels: ['negative', "
            "'neutral', 'positive']; 'Neutral' differs from 'neutral' only in case or blanks") in printed
    assert printed.count("rejected (label_not_in_train)") == 2, printed  # one a split: dev's, train's
    assert f"[data] {train}: rejected (label_not_in_train) id train.csv:7: 'NEUTRAL' (the task's labels" in printed


def test_a_training_row_outside_task_labels_is_named_by_the_stream(tmp_path, monkeypatch):
    """stream_rows (Ray Data run here): task.labels a subset of the files' labels rejects the others' rows in the
    carve's tasks; the first of them reaches the driver with the training files' other first rejects."""
    def from_items(items, **_):
        return LocalDataset([{k: np.asarray([v]) for k, v in item.items()} for item in items])

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(data=types.SimpleNamespace(from_items=from_items)))
    labels = ["neg", "pos", "POS"]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"text": f"row {i}", "label": labels[i % 3]}) + "\n"
                                                  for i in range(30)))
    out = stream.stream_rows(str(tmp_path / "train.jsonl"), "jsonl", "classification", Columns(), fraction=0.2,
                             max_rows=4, labels=("neg", "pos"))
    assert sum(n for counts in out.rejected.values() for n in counts.values()) == 10
    path, where, label = out.samples["label_not_in_train"]
    assert path == str(tmp_path / "train.jsonl") and where.startswith("id train.jsonl:") and label == "POS"
    assert int(where.rsplit(":", 1)[1]) % 3 == 2
