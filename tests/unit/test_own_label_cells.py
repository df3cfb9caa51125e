"""A label cell of your own files read alike in every format: a list of classes where one class is wanted (Doccano's
and Label Studio's exports) refused naming task.kind=multi-label, and a multi-label row with no class (an empty label
set: the all-zeros target) told apart from one whose label is missing, as each format can write them."""

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.tasks import TaskDataError
from pipelines.tasks.files import Columns, check_columns, read_file


def _read(path, fmt, kind, columns=Columns()):
    """(labels of the rows kept, reject reason -> count)."""
    labels, rejects = [], {}
    for batch in read_file(str(path), fmt, kind, columns):
        labels += [r["label"] for r in batch.rows]
        rejects.update(batch.rejects)
    return labels, rejects


def _write(path, fmt, labels):
    """A file of one row per label, its label column holding `labels` as that format's writer holds them."""
    texts = [f"row {i}" for i in range(len(labels))]
    if fmt == "jsonl":
        path.write_text("".join(json.dumps({"text": t, "label": x}) + "\n" for t, x in zip(texts, labels)))
    elif fmt == "parquet":
        pq.write_table(pa.table({"text": texts, "label": labels}), path)
    elif fmt == "xlsx":
        pd.DataFrame({"text": texts, "label": labels}).to_excel(path, index=False)
    else:  # csv: the cells as written
        path.write_text("text,label\n" + "".join(f"{t},{x}\n" for t, x in zip(texts, labels)))
    return path


@pytest.mark.parametrize("fmt, labels", [
    ("jsonl", [["sports"], ["politics"]]),  # Doccano / Label Studio JSONL: "label": ["sports"]
    ("jsonl", [[], ["sports"]]),  # Doccano's row nobody labelled first
    ("parquet", [["sports"], ["politics"]]),
    ("csv", ['"[""sports""]"', '"[""politics""]"']),  # a JSON list in a cell
    ("csv", ["['sports']", "['politics']"]),  # pandas' to_csv of a list column
    ("xlsx", ['["sports"]', '["politics"]'])])
def test_a_list_of_classes_under_classification_is_refused_naming_multi_label(tmp_path, fmt, labels):
    """Before, a JSON list was an unparseable_label reject on every row (the run refused for "no usable rows",
    naming no fix) and a CSV cell ["sports"] was the class '["sports"]', silently. The file is refused on its first
    list, naming task.kind=multi-label and the list's unwrapping, before any cluster work (check_columns)."""
    path = _write(tmp_path / f"doccano.{fmt}", fmt, labels)
    for read in (lambda: _read(path, fmt, "classification"),
                 lambda: check_columns([(str(path), fmt)], "classification")):
        with pytest.raises(TaskDataError, match=r"doccano\.\w+(, (line|row) \d+: the label \S+ is a list|: its label "
                                                r"column 'label' holds lists) of classes.*task\.kind=multi-label"
                                                r".*without the list"):
            read()


def test_a_stray_list_among_a_files_classes_is_read_as_before(tmp_path):
    """One list among a file's classes is a bad row, not a file of lists: a JSON list is counted, as a label of another
    type is; a cell's text is its class as written; a list cell beside joined classes is counted."""
    path = _write(tmp_path / "t.jsonl", "jsonl", [None, "pos", ["pos"], "neg"])
    assert _read(path, "jsonl", "classification") == (["pos", "neg"], {"missing_label": 1, "unparseable_label": 1})
    path = _write(tmp_path / "t.csv", "csv", ["pos", '"[""pos""]"', "neg"])
    assert _read(path, "csv", "classification") == (["pos", '["pos"]', "neg"], {})
    path = _write(tmp_path / "m.csv", "csv", ["a|b", "[]", "c"])
    assert _read(path, "csv", "multi-label", Columns(label_separator="|")) == ([["a", "b"], ["c"]],
                                                                             {"unparseable_label": 1})


def test_a_stray_list_on_the_files_first_row_is_a_counted_reject(tmp_path):
    """A file that trained before, one list on its row 1 and classes after it, was refused advising multi-label: one
    row decided the file. It trains, the list an unparseable_label reject (check_columns lets it through too)."""
    path = _write(tmp_path / "stray.jsonl", "jsonl", [["sports"], "a", "b", "a", "b", "a"])
    check_columns([(str(path), "jsonl")], "classification")
    assert _read(path, "jsonl", "classification") == (["a", "b", "a", "b", "a"], {"unparseable_label": 1})


@pytest.mark.parametrize("labels", [['"[1, 5]"', "low", "high"], ["low", '"[1, 5]"', "high"]])
def test_a_class_written_as_a_range_is_a_class(tmp_path, labels):
    """A bucket `[1, 5]` among plain classes was rejected (row 2) or refused the file advising multi-label (row 1),
    which would read it as the classes 1 and 5. It is the class as written, as before."""
    path = _write(tmp_path / "t.csv", "csv", labels)
    check_columns([(str(path), "csv")], "classification")
    assert _read(path, "csv", "classification") == ([x.strip('"') for x in labels], {})


def test_a_file_mostly_of_lists_is_refused_whatever_its_first_label(tmp_path):
    """Lists are the file's labels where half its first labels, two or more, are: refused at the first, even after a
    class (Doccano's export of a project whose first rows were labeled by hand)."""
    path = _write(tmp_path / "doccano.jsonl", "jsonl", [None, "sports", ["politics"], ["sports"]])
    for read in (lambda: _read(path, "jsonl", "classification"),
                 lambda: check_columns([(str(path), "jsonl")], "classification")):
        with pytest.raises(TaskDataError, match=r'doccano\.jsonl, line 3: the label \["politics"\] is a list of '
                                                r"classes.*task\.kind=multi-label"):
            read()


def test_a_class_that_only_looks_like_a_list_stays_a_class(tmp_path):
    """Brackets around a name that is no list ("[MASK]", "[1, 5)") are a class as written."""
    path = _write(tmp_path / "t.csv", "csv", ["[MASK]", '"[1, 5)"', "pos"])
    assert _read(path, "csv", "classification") == (["[MASK]", "[1, 5)", "pos"], {})


# (format, separator, labels as written, labels read or the reject): an empty label set is [] (the all-zeros
# target) in every format; a missing label (null, NaN, absent, an empty cell where cells hold JSON lists) is
# missing_label. A cell of classes joined by a separator has no other way to write the empty set than the empty cell.
_EMPTY_AND_MISSING = [
    ("jsonl", "", [[], None, ["x"]], [[], "missing_label", ["x"]]),
    ("parquet", "", [[], None, ["x"]], [[], "missing_label", ["x"]]),
    ("csv", "", ["[]", "", '"[""x""]"', "nan"], [[], "missing_label", ["x"], "missing_label"]),
    ("xlsx", "", ["[]", None, '["x"]'], [[], "missing_label", ["x"]]),
    ("csv", "|", ["", "x|y", "nan"], [[], ["x", "y"], "missing_label"]),
    ("jsonl", "|", ["", None, "x|y"], [[], "missing_label", ["x", "y"]]),
    ("parquet", "|", ["", None, "x|y"], [[], "missing_label", ["x", "y"]]),
    ("xlsx", "|", [None, "x|y", "#N/A"], [[], ["x", "y"], "missing_label"]),  # Excel's empty cell, as its CSV's
]


@pytest.mark.parametrize("fmt, sep, labels, read", _EMPTY_AND_MISSING)
def test_an_empty_label_set_and_a_missing_label_read_alike_in_every_format(tmp_path, fmt, sep, labels, read):
    path = _write(tmp_path / f"m.{fmt}", fmt, labels)
    kept, rejects = _read(path, fmt, "multi-label", Columns(label_separator=sep))
    assert kept == [x for x in read if x != "missing_label"]
    assert rejects == ({"missing_label": read.count("missing_label")} if "missing_label" in read else {})


@pytest.mark.parametrize("fmt, cell", [("csv", '"[""x"", ""y""]"'), ("csv", "[]"), ("csv", "\"['x']\""),
                                       ("xlsx", '["x", "y"]')])
def test_a_json_list_cell_read_with_a_label_separator_is_refused(tmp_path, fmt, cell):
    """With task.columns.label_separator set, a cell `["x", "y"]` was the one class '["x", "y"]' and `[]` the class
    "[]": a file whose cells are JSON lists is refused, naming the setting to unset."""
    path = _write(tmp_path / f"m.{fmt}", fmt, ["", cell, cell, "a|b"])  # half its labels are lists
    with pytest.raises(TaskDataError, match=r"m\.\w+, (line|row) 3: the label .* is a list of classes.*"
                                            r"task\.columns\.label_separator='\|'.*leave it unset"):
        _read(path, fmt, "multi-label", Columns(label_separator="|"))


def test_the_lists_are_counted_over_the_first_100_labels_only(tmp_path):
    """The decision is taken at the 100th label, not at the end of the file: 100 classes and then 200 lists train
    (the lists rejected), where a rule read to the end would refuse the file (and hold it whole in a Ray task)."""
    path = _write(tmp_path / "late.jsonl", "jsonl", ["a", "b"] * 50 + [["sports"]] * 200)
    check_columns([(str(path), "jsonl")], "classification")
    assert _read(path, "jsonl", "classification") == (["a", "b"] * 50, {"unparseable_label": 200})


def test_one_list_in_two_labels_is_a_stray_row_not_the_files_way(tmp_path):
    """Half of the labels are lists, but one list is no way of writing them: it takes two or more."""
    path = _write(tmp_path / "two.jsonl", "jsonl", [["sports"], "a"])
    check_columns([(str(path), "jsonl")], "classification")
    assert _read(path, "jsonl", "classification") == (["a"], {"unparseable_label": 1})


def test_a_decimal_class_is_one_name_in_csv_excel_and_json(tmp_path):
    """Half-star classes as each writer holds them: Excel's numbers formatted `0.00`, its CSV export's text "4.50"
    (and a TSV's, or an Excel text cell's), JSON's 4.5, a `;` CSV's "4,50". The comma CSV's classes were "4.50" and
    "2.50" while every other format named them "4.5" and "2.5" ("3.00" was "3" already): a train workbook beside
    its dev CSV rejected every half-star dev row as label_not_in_train. A code with a leading zero ("01.10") is not
    a number as a writer writes one, and stays as written, as "007" does."""
    import openpyxl

    want = ["4.5", "3", "2.5", "-0.25", "4.5"]
    book = openpyxl.Workbook()
    book.active.append(["text", "label"])
    for i, value in enumerate([4.5, 3.0, 2.5, -0.25, 4.5]):
        book.active.append([f"row {i}", value])
        book.active.cell(i + 2, 2).number_format = "0.00"
    book.save(tmp_path / "stars.xlsx")
    (tmp_path / "stars.tsv").write_text("text\tlabel\n" + "".join(
        f"row {i}\t{x}\n" for i, x in enumerate(["4.50", "3.00", "2.50", "-0.250", "+4.50"])))
    (tmp_path / "semi.csv").write_text("text;label\n" + "".join(
        f"row {i};{x}\n" for i, x in enumerate(["4,50", "3,00", "2,50", "-0,250", "4,5"])))
    files = {"stars.xlsx": "xlsx", "stars.tsv": "tsv", "semi.csv": "csv",
             "stars.csv": _write(tmp_path / "stars.csv", "csv", ["4.50", "3.00", "2.50", "-0.250", "+4.50"]),
             "text.xlsx": _write(tmp_path / "text.xlsx", "xlsx", ["4.50", "3.00", "2.50", "-0.250", "+4.50"]),
             "stars.jsonl": _write(tmp_path / "stars.jsonl", "jsonl", [4.5, 3.0, 2.5, -0.25, 4.5])}
    for name in files:
        fmt = name.rsplit(".", 1)[1]
        assert _read(tmp_path / name, fmt, "classification") == (want, {}), name
    codes = ["007", "01.10", "007.0", "1.0", "1.10", "A.50", "4.50.1"]
    assert _read(_write(tmp_path / "codes.csv", "csv", codes), "csv", "classification")[0] == [
        "007", "01.10", "007", "1", "1.1", "A.50", "4.50.1"]
    joined = _write(tmp_path / "m.csv", "csv", ["4.50|1.0", "2.50"])
    assert _read(joined, "csv", "multi-label", Columns(label_separator="|"))[0] == [["4.5", "1"], ["2.5"]]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_list_column_pandas_read_from_parquet_and_saved_as_text_keeps_its_classes(tmp_path, fmt):
    """pd.read_parquet (or Dataset.to_pandas) holds a list column as numpy arrays, and to_csv writes an array's str():
    "['toxic' 'insult']", no comma. Python reads adjacent strings as one: the class "toxicinsult", no reject. Each
    string is its class now, as in the Parquet file; an array of ids ("[0 2]") reads as the list of ids."""
    labels = [["toxic", "insult"], [], ["toxic", "insult", "obscene"], ["toxic"]]
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(4)], "label": labels}), tmp_path / "ml.parquet")
    frame = pd.read_parquet(tmp_path / "ml.parquet")
    assert type(frame.label[0]).__name__ == "ndarray"
    frame.to_csv(tmp_path / f"ml.{fmt}", index=False, sep="," if fmt == "csv" else "\t")
    assert "['toxic' 'insult']" in (tmp_path / f"ml.{fmt}").read_text()
    assert _read(tmp_path / f"ml.{fmt}", fmt, "multi-label") == _read(tmp_path / "ml.parquet", "parquet",
                                                                        "multi-label") == (labels, {})
    ids = pd.DataFrame({"text": ["a", "b"], "label": [pd.array([0, 2]).to_numpy(), pd.array([1]).to_numpy()]})
    ids.to_csv(tmp_path / "ids.csv", index=False)
    assert _read(tmp_path / "ids.csv", "csv", "multi-label") == ([["0", "2"], ["1"]], {})
