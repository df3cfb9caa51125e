"""Decimal classes that fold into one (a file's 3.10 beside its 3.1; task.labels' "a" beside "a "), the Delta
check's parents and its cost on object stores, the Total Row of a stacked Excel Table and of malformed table parts,
and the wording of a training row's label line."""

import io
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from bert_core.config import ConfigError
from jobs.config.finetune import FinetuneConfig
from jobs.config.io import load_config
from pipelines.tasks import Columns, TaskDataError, resolve_files
from tests.unit.test_config_decimal_classes import FILES, MINILM
from tests.unit.test_files_delta import delta_table
from tests.unit.test_files_task import read


# -- 1. two texts of one file that fold into one class ----------------------------------------------------------

@pytest.mark.parametrize("name,data", [
    ("ver.csv", "text,label\na,3.1\nb,3.9\nc,3.10\n"),
    ("ver.jsonl", '{"text": "a", "label": "3.1"}\n{"text": "b", "label": "3.9"}\n{"text": "c", "label": "3.10"}\n'),
])
def test_two_label_texts_of_one_file_that_fold_into_one_class_are_refused_naming_both(tmp_path, name, data):
    """3.10 and 3.1 (Python versions; ICD-9's 250.10 and 250.1) are two classes a file writes apart: dropping the
    trailing zero merged them, with no reject and no line."""
    (tmp_path / name).write_text(data)
    with pytest.raises(TaskDataError, match=rf"{name}: the labels '3.1' \(.*\) and '3.10' \(.*\) are one class"):
        read(str(tmp_path / name), name.rsplit(".", 1)[1])


def test_joined_classes_that_fold_into_one_are_refused_too(tmp_path):
    (tmp_path / "m.csv").write_text("text,label\na,3.10|x\nb,3.1\n")
    with pytest.raises(TaskDataError, match=r"m.csv: the labels '3.10' \(.*\) and '3.1' \(.*\) are one class"):
        read(str(tmp_path / "m.csv"), "csv", "multi-label", Columns(label_separator="|"))


def test_a_decimal_written_one_way_a_file_is_still_one_class_across_files_and_signs(tmp_path):
    """The point of the fold: a CSV's 4.50 is an Excel or JSON number's 4.5; +4.5 and 1.0 are 4.5 and 1 in one file."""
    (tmp_path / "a.csv").write_text("text,label\na,4.50\nb,+4.50\nc,1.0\nd,1\n")
    (tmp_path / "b.jsonl").write_text('{"text": "e", "label": 4.5}\n{"text": "f", "label": "4.5"}\n')
    labels = {r["label"] for p, f in (("a.csv", "csv"), ("b.jsonl", "jsonl"))
              for r in read(str(tmp_path / p), f)[0]}
    assert labels == {"4.5", "1"}


def test_task_labels_that_fold_into_one_class_are_refused_as_written(tmp_path):
    (tmp_path / "t.csv").write_text("text,label\na,3.1\nb,3.9\n")
    init = [f"init={MINILM}", f"task.train_file={tmp_path / 't.csv'}"]
    with pytest.raises(ConfigError, match=r"task.labels must be distinct.*\['3.10', '3.1', '3.9'\].*'3.10' and '3.1'"):
        load_config(FinetuneConfig, FILES, [*init, "task.labels=['3.10', '3.1', '3.9']"])
    with pytest.raises(ConfigError, match=r"task.labels must be distinct.*'3.1' and '3.1 ' are one class"):
        load_config(FinetuneConfig, FILES, [*init, "task.labels=['3.1', '3.1 ', '3.9']"])  # ended as ['3.1', '3.1']


# -- 2, 3, 5. Delta: a table's parents, one listing on an object store, the hidden-parent rule --------------------

def test_a_partition_a_part_file_or_a_glob_inside_a_delta_table_is_refused(tmp_path):
    table = delta_table(tmp_path / "reviews")
    (table / "label=ham").mkdir()
    pq.write_table(pa.table({"text": ["x"]}), table / "label=ham" / "p.parquet")
    for spec in (table / "label=ham", table / "label=ham" / "*.parquet", table / "part-00000-bbb-c000.snappy.parquet"):
        with pytest.raises(TaskDataError, match=rf"inside a Delta table, {table} \(it holds _delta_log/\)"):
            resolve_files(str(spec), split="train")


def test_a_csv_inside_a_delta_tables_folder_is_no_part_file(tmp_path):
    table = delta_table(tmp_path / "reviews")
    (table / "notes.csv").write_text("text,label\na,b\n")
    assert [p.rsplit("/", 1)[1] for p, _ in resolve_files(str(table / "notes.csv"))] == ["notes.csv"]


def test_a_glob_on_an_object_store_lists_once_not_a_lookup_a_folder(monkeypatch):
    fs = MemoryFileSystem()
    for i in range(40):
        fs.pipe(f"/ownb/parts/date={i:04d}/part-0.parquet", b"x")
    calls = []
    monkeypatch.setattr(MemoryFileSystem, "isdir", lambda self, p: calls.append(p) or fs.exists(p) and
                        not fs.isfile(p))
    found = resolve_files("memory://ownb/parts/*/*.parquet", split="train")
    assert len(found) == 40 and len(calls) <= 4, calls  # the glob's root and the fixed part's parents
    fs.pipe("/ownb/parts/date=0003/_delta_log/0.json", b"{}")
    with pytest.raises(TaskDataError, match=r"ownb/parts/date=0003 is a Delta table"):
        resolve_files("memory://ownb/parts/*/*.parquet", split="train")
    fs.rm("/ownb", recursive=True)


def test_a_delta_log_below_a_hidden_folder_is_passed_over_with_it(tmp_path):
    folder = tmp_path / "spark"
    (folder / "_old" / "_delta_log").mkdir(parents=True)
    (folder / "_old" / "_delta_log" / "0.json").write_text("{}")
    pq.write_table(pa.table({"text": ["a"], "label": ["ham"]}), folder / "part-00000.parquet")
    assert [p.rsplit("/", 1)[-1] for p, _ in resolve_files(str(folder), split="train")] == ["part-00000.parquet"]


# -- 4, 5. Excel Total Rows ---------------------------------------------------------------------------------------

def _book(path, rows, tables):
    import openpyxl
    from openpyxl.worksheet.table import Table

    book = openpyxl.Workbook()
    for row in rows:
        book.active.append(row)
    for name, ref, header in tables:
        table = Table(displayName=name, ref=ref, headerRowCount=header)
        table.totalsRowCount = 1
        book.active.add_table(table)
    book.save(path)
    return str(path)


def test_the_total_row_of_a_table_stacked_under_the_first_is_a_reject(tmp_path):
    path = _book(tmp_path / "s.xlsx", [["text", "label"], ["a", "pos"], ["Total", 1], [], ["text", "label"],
                                       ["b", "neg"], ["Total", 1]], [("A", "A1:B3", 1), ("B", "A5:B7", 1)])
    rows, rejects, _, _ = read(path, "xlsx")
    assert [(r["text_a"], r["label"]) for r in rows] == [("a", "pos"), ("b", "neg")]
    assert rejects == {"totals_row": 2, "blank_line": 1, "repeated_header": 1}


@pytest.mark.parametrize("rows,ref,header", [
    ([["Ratings, 2024"], [], ["text", "label"], ["a", "pos"], ["b", "neg"], ["Total", 2]], "A3:B6", 1),  # a title
    ([["text", "label"], ["a", "pos"], ["b", "neg"], ["Total", 2]], "A2:B4", 0),  # a table without a header row
])
def test_a_total_row_is_found_under_a_title_and_in_a_table_without_a_header_row(tmp_path, rows, ref, header):
    rows, rejects, _, _ = read(_book(tmp_path / "t.xlsx", rows, [("T", ref, header)]), "xlsx")
    assert [r["text_a"] for r in rows] == ["a", "b"] and rejects == {"totals_row": 1}


_TABLE = ('<table xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" id="1" name="T" displayName="T" '
          'ref="{ref}" totalsRowCount="{count}"><tableColumns count="2"><tableColumn id="1" name="text"/>'
          '<tableColumn id="2" name="label"/></tableColumns></table>')


def _replaced(tmp_path, part: str, data: bytes) -> str:
    good = _book(tmp_path / "g.xlsx", [["text", "label"], ["a", "pos"], ["Total", 1]], [("T", "A1:B3", 1)])
    out = io.BytesIO()
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, data if item.filename == part else src.read(item))
    (tmp_path / "bad.xlsx").write_bytes(out.getvalue())
    return str(tmp_path / "bad.xlsx")


@pytest.mark.parametrize("data", [b"<not xml", _TABLE.format(ref="A1:", count=1).encode(),
                                  _TABLE.format(ref="A1:B3", count="one").encode()], ids=["xml", "ref", "count"])
def test_a_malformed_table_part_reads_the_sheet_without_its_totals(tmp_path, data):
    """Excel repairs such a workbook on opening; the totals lookup gives up, the rows are read as before it was."""
    rows, rejects, _, _ = read(_replaced(tmp_path, "xl/tables/table1.xml", data), "xlsx")
    assert [r["text_a"] for r in rows] == ["a", "Total"] and not rejects


def test_a_malformed_sheet_part_openpyxl_cannot_open_is_refused_naming_the_file(tmp_path):
    """openpyxl's own reader fails on it (an XML ParseError traceback): one line naming the file, as a .xls renamed."""
    with pytest.raises(TaskDataError, match="bad.xlsx: not an Excel workbook that openpyxl can read"):
        read(_replaced(tmp_path, "xl/worksheets/_rels/sheet1.xml.rels", b"<not xml"), "xlsx")


# -- 6. the label line's list ---------------------------------------------------------------------------------------

def test_the_label_line_names_the_tasks_labels_not_trains():
    """A training row's label_not_in_train line comes only where task.labels is a subset of the files' labels: the
    list said is task.labels, and a row in train cannot be told to write its label "as train does"."""
    from pipelines.tasks.labels import unknown_label_said

    said = unknown_label_said("label_not_in_train", "POS", ("neg", "pos"))
    assert "train" not in said and "the task's labels: ['neg', 'pos']" in said
    assert "'POS' differs from 'pos' only in case or blanks: write it as 'pos'" in said

