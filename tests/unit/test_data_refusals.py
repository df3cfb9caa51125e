"""Your own data refused the same way whatever format wrote it, and said in one line: classes written as ids in one
file and as names in another (CSV's text ids too), 0/1 indicator vectors, decimal classes read alike in every
format, and a data refusal ending a job as `error: <message>` with exit status 2, as a config mistake does."""

import json
import sys
import types

import numpy as np
import pandas as pd
import pytest

from jobs.config.io import cli
from pipelines.tasks import TaskDataError
from pipelines.tasks import stream
from pipelines.tasks.files import Columns, check_columns, read_file


def _classes(path, fmt):
    """How stream_rows' survey (stream._read) records the classes of the file at `path`."""
    records = stream._read({"path": np.asarray([str(path)]), "fmt": np.asarray([fmt])}, "classification", Columns())
    return {p: c for rec in records for p, c in json.loads(rec["classes"][-1]).items()}


def _labels(path, fmt, kind="classification"):
    rows, rejects = [], {}
    for batch in read_file(str(path), fmt, kind):
        rows += [r["label"] for r in batch.rows]
        rejects.update(batch.rejects)
    return rows, rejects


def test_text_ids_in_one_file_beside_names_in_another_are_refused_as_json_ids_are(tmp_path):
    """A `datasets` to_csv export of a ClassLabel column ("0" / "1") beside hand-labelled rows ("neg" / "pos"): read
    together they trained a four-class head. Refused, naming both files, as the same ids in JSON Lines were. CSV's
    "0" beside JSON's 0 is one class; digits and names within one file are that file's classes; task.labels lets a
    text file's digits be classes of their own beside names (a JSON integer is an id whatever it says)."""
    (tmp_path / "ids.csv").write_text("text,label\n" + "".join(f"e{i},{i % 2}\n" for i in range(4)))
    (tmp_path / "names.csv").write_text("text,label\n" + "".join(f"n{i},{'pos' if i % 2 else 'neg'}\n"
                                                                  for i in range(4)))
    (tmp_path / "both.csv").write_text("text,label\na,0\nb,other\n")
    (tmp_path / "ids.xlsx").parent.mkdir(exist_ok=True)
    pd.DataFrame({"text": ["x", "y"], "label": [0, 1]}).to_excel(tmp_path / "ids.xlsx", index=False)
    (tmp_path / "ids.jsonl").write_text("".join(json.dumps({"text": f"j{i}", "label": i % 2}) + "\n"
                                                for i in range(4)))
    names = _classes(tmp_path / "names.csv", "csv")
    for ids in (_classes(tmp_path / "ids.csv", "csv"), _classes(tmp_path / "ids.xlsx", "xlsx")):
        with pytest.raises(TaskDataError, match=r"ids.(csv|xlsx) writes its classes as integers \(ids\) and "
                                                r"\S*names.csv as names.*task.labels"):
            stream._mixed_classes({**ids, **names}, "data/", ())
        for labels in (("0", "1"), ("neg", "pos"), ("0", "neg")):
            stream._mixed_classes({**ids, **names}, "data/", labels)
    stream._mixed_classes({**_classes(tmp_path / "ids.csv", "csv"), **_classes(tmp_path / "ids.jsonl", "jsonl")},
                          "data/", ())
    stream._mixed_classes(_classes(tmp_path / "both.csv", "csv"), "data/", ())
    with pytest.raises(TaskDataError):  # JSON integers are ids: labels naming both ways keep neither
        stream._mixed_classes({**_classes(tmp_path / "ids.jsonl", "jsonl"), **names}, "data/", ("0", "neg"))


@pytest.mark.parametrize("label", [[1, 1], [0, 0], [0, 0, 0], [1.0, 1.0]])
def test_a_0_1_list_that_repeats_a_value_is_an_indicator_vector_refused_up_front(tmp_path, label):
    """[1, 1] / [0, 0] / [0, 0, 0] are read as multi-hot rows ("both labels", "none of the three"), which were read as
    the class "1" or "0"; the reader cannot tell them from ids listed twice. Refused, at a first such row by
    check_columns, before Ray; [0, 1] alone is the classes 0 and 1."""
    path = tmp_path / "hot.jsonl"
    path.write_text(json.dumps({"text": "a", "label": label}) + "\n" + json.dumps({"text": "b", "label": [1, 0, 1]})
                    + "\n")
    with pytest.raises(TaskDataError, match="indicator vector"):
        check_columns([(str(path), "jsonl")], "multi-label")
    path.write_text(json.dumps({"text": "a", "label": [0, 1]}) + "\n")
    assert _labels(path, "jsonl", "multi-label") == ([["0", "1"]], {})


def test_a_refusal_inside_the_read_reaches_the_driver_as_a_record_not_a_ray_traceback(tmp_path):
    """A file refused past its first rows (check_columns passed) raised inside a Ray Data task: ~190 lines of Ray's
    traceback around the one line. stream._read carries the refusal as a record; the survey hands it on to
    stream_rows, which raises it on the driver."""
    path = tmp_path / "hot.jsonl"
    path.write_text("".join(json.dumps({"text": f"t{i}", "label": [0, 1] if i < 3 else [1, 1]}) + "\n"
                            for i in range(6)))
    records = list(stream._read({"path": np.asarray([str(path)]), "fmt": np.asarray(["jsonl"])}, "multi-label",
                                Columns()))
    said = [r for rec in records for r in rec["refused"] if r]
    assert len(said) == 1 and "indicator vector" in said[0] and str(path) in said[0]
    batch = {k: np.concatenate([rec[k] for rec in records]) for k in records[0]}
    assert stream._survey(batch, "multi-label")["refused"] == said


def test_a_data_refusal_ends_a_job_with_one_line_and_exit_status_2(capsys):
    """cli: a TaskDataError (task.labels naming none of the files' labels, no usable rows), and one raised in a Ray
    task (a RayTaskError whose cause is one), is `error: <message>` on stderr, exit status 2, as a ConfigError is. A
    bug keeps its traceback."""
    from ray.exceptions import RayTaskError

    def raises(exc):
        def main():
            raise exc
        return main

    in_task = RayTaskError("MapBatches(_read)", "Traceback ...\nlots of lines", TaskDataError("f.jsonl: refused"))
    for exc, line in ((TaskDataError("x: no usable rows"), "x: no usable rows"),
                      (in_task.as_instanceof_cause(), "f.jsonl: refused")):
        with pytest.raises(SystemExit) as ended:
            cli(raises(exc))
        assert ended.value.code == 2 and capsys.readouterr().err == f"error: {line}\n"
    with pytest.raises(KeyError):
        cli(raises(KeyError("a bug")))


def test_a_decimal_class_is_one_class_in_every_format(tmp_path):
    """Half-star ratings as classes: the same DataFrame written as CSV, `;`-CSV with a decimal comma, JSON Lines,
    Parquet and Excel. 1.5 was a class in CSV and Excel and a non_integer_label reject in the others (half the rows
    lost; beside a CSV, refused as ids beside names). Every format now names it "1.5", as to_csv writes it; 1.0 is
    the class "1"."""
    df = pd.DataFrame({"text": [f"t{i}" for i in range(6)], "label": [0.5, 1.0, 1.5, 2.0, 4.5, 5.0]})
    df.to_csv(tmp_path / "half.csv", index=False)
    df.to_csv(tmp_path / "half_semi.csv", index=False, sep=";", decimal=",")
    df.to_json(tmp_path / "half.jsonl", orient="records", lines=True)
    df.to_parquet(tmp_path / "half.parquet")
    df.to_excel(tmp_path / "half.xlsx", index=False)
    want = (["0.5", "1", "1.5", "2", "4.5", "5"], {})
    for name, fmt in (("half.csv", "csv"), ("half_semi.csv", "csv"), ("half.jsonl", "jsonl"),
                      ("half.parquet", "parquet"), ("half.xlsx", "xlsx")):
        assert _labels(tmp_path / name, fmt) == want, name
    stream._mixed_classes({**_classes(tmp_path / "half.csv", "csv"), **_classes(tmp_path / "half.jsonl", "jsonl")},
                          "data/", ())
    (tmp_path / "whole.jsonl").write_text("".join(json.dumps({"text": f"w{i}", "label": i}) + "\n" for i in range(3)))
    stream._mixed_classes({**_classes(tmp_path / "whole.jsonl", "jsonl"), **_classes(tmp_path / "half.csv", "csv")},
                          "data/", ())  # whole stars in one file, half stars in another: ratings both, no ids
    path = tmp_path / "lists.jsonl"
    path.write_text(json.dumps({"text": "a", "label": [1.5, 2]}) + "\n")
    assert _labels(path, "jsonl", "multi-label") == ([["1.5", "2"]], {})


def test_a_file_of_rows_with_no_class_is_neither_ids_nor_names(tmp_path):
    """A shard of negatives only (every multi-label cell empty: no class) beside a labelled shard was recorded as a
    file of ids (no class is a name) and the folder refused as "integers (ids) ... and names", though it holds no
    integer. A file with no class says nothing about how classes are written; a file of ids beside one still is."""
    (tmp_path / "labelled.csv").write_text("text,label\na,x|y\nb,y\nc,\n")
    (tmp_path / "negatives.csv").write_text("text,label\nd,\ne,\nf,\n")
    (tmp_path / "ids.csv").write_text("text,label\ng,0|1\nh,1\n")

    def classes(name):
        records = stream._read({"path": np.asarray([str(tmp_path / name)]), "fmt": np.asarray(["csv"])},
                               "multi-label", Columns(label_separator="|"))
        return {p: c for rec in records for p, c in json.loads(rec["classes"][-1]).items()}

    stream._mixed_classes({**classes("labelled.csv"), **classes("negatives.csv")}, "data/", ())
    stream._mixed_classes(classes("labelled.csv"), "data/", (), given={"dev": classes("negatives.csv")})
    assert classes("negatives.csv") == {}
    with pytest.raises(TaskDataError, match=r"ids.csv writes its classes as integers \(ids\)"):
        stream._mixed_classes({**classes("labelled.csv"), **classes("negatives.csv"), **classes("ids.csv")},
                              "data/", ())


@pytest.mark.parametrize("label, repeats", [([1, 1], True), ([0, 0, 0], True), ([0.0, 1.0], False)])
def test_the_indicator_vector_refusal_gives_both_readings_of_a_repeated_0_or_1(tmp_path, label, repeats):
    """[1, 1] is a multi-hot row or the class id 1 listed twice (annotators' ids concatenated): the reader cannot
    tell, so the refusal says what to do for either; [0.0, 1.0] repeats nothing and is multi-hot only."""
    path = tmp_path / "hot.jsonl"
    path.write_text(json.dumps({"text": "a", "label": label}) + "\n")
    with pytest.raises(TaskDataError, match="indicator vector") as refused:
        check_columns([(str(path), "jsonl")], "multi-label")
    assert ("if these are class ids listed more than once, list each once" in str(refused.value)) == repeats


class LocalDataset:
    """ray.data's from_items -> map_batches -> materialize / take_all / iter_rows, run in this process: a block an
    item, numpy batches, a generator's records each a block of their own (as Ray Data gives them)."""

    def __init__(self, blocks: list[dict]):
        self.blocks = blocks
        self.context = types.SimpleNamespace(execution_options=types.SimpleNamespace(preserve_order=False))

    def map_batches(self, fn, batch_size=None, batch_format=None, fn_kwargs=None, **_):
        out = []
        for block in self.blocks:
            got = fn(block, **(fn_kwargs or {}))
            out += [{k: np.asarray(v, dtype=object) for k, v in b.items()}
                    for b in (got if isinstance(got, types.GeneratorType) else [got])]
        return LocalDataset(out)

    def materialize(self):
        return self

    def take_all(self) -> list[dict]:
        return [{k: v[i] for k, v in b.items()} for b in self.blocks for i in range(len(next(iter(b.values()))))]

    def iter_rows(self):
        return iter(self.take_all())


def test_a_file_refused_partway_through_refuses_the_whole_read(tmp_path, monkeypatch):
    """stream_rows, Ray Data run here: a second file whose fourth row is a 0/1 indicator vector ([1, 1]; its first
    rows, [0, 1], are classes) is refused, naming it. _read carries the refusal as a record so that Ray prints no
    traceback; were stream_rows not to raise it, the file's rows before the refusal would train and the rest be
    dropped without a word."""
    def from_items(items, **_):
        return LocalDataset([{k: np.asarray([v]) for k, v in item.items()} for item in items])

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(data=types.SimpleNamespace(from_items=from_items)))
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": f"a{i}", "label": [i % 3]}) + "\n"
                                              for i in range(12)))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"text": f"b{i}", "label": [0, 1] if i < 3 else [1, 1]})
                                              + "\n" for i in range(6)))
    with pytest.raises(TaskDataError, match=r"b.jsonl: a label \[1, 1\] is a 0/1 indicator vector"):
        stream.stream_rows(str(tmp_path), "jsonl", "multi-label", Columns(), fraction=0.2, max_rows=4)
    (tmp_path / "b.jsonl").unlink()  # the stand-in runs a whole read: without the refused file, rows to train
    assert len(stream.stream_rows(str(tmp_path), "jsonl", "multi-label", Columns(), fraction=0.2, max_rows=4).train)
