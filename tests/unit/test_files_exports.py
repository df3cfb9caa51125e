"""A user's own files as other tools write them (pandas, spreadsheets, downloads): compressed, cut short, with an
index column, float ids, binary or integer text, a later export naming a column differently."""

import collections
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.tasks import Columns, TaskDataError, read_file, resolve_files
from tests.unit.test_files_task import jsonl, read, write


def test_inputs_as_pandas_writes_them(tmp_path):
    """What pandas writes by default: to_csv's unnamed index column (QA inputs were all rejected: the header's ""
    was read as the answers), ids of an int column holding a NaN (floats: 101.0 is the id 101, NaN none); and QA
    inputs to predict repeating an id are each answered (windows are keyed by position)."""
    def rows(path, fmt, kind, columns=Columns()):
        batches = list(read_file(str(path), fmt, kind, columns, labeled=False))
        return [r for b in batches for r in b.rows], sum((b.rejects for b in batches), collections.Counter())

    (tmp_path / "qa.csv").write_text(",id,question,context\n0,q1,Where?,In Paris.\n1,q1,Who?,Ada did.\n")
    got, rejects = rows(tmp_path / "qa.csv", "csv", "question-answering", Columns(id="id"))
    assert [(r["id"], r["question"]) for r in got] == [("q1", "Where?"), ("q1", "Who?")] and not rejects
    pq.write_table(pa.table({"id": [101.0, float("nan"), 103.0], "text": ["a", "b", "c"]}), tmp_path / "ids.parquet")
    got, _ = rows(tmp_path / "ids.parquet", "parquet", "classification", Columns(id="id"))
    assert [r["id"] for r in got] == ["101", "ids.parquet:1", "103"]


def test_every_file_is_checked_for_its_columns_before_any_work(tmp_path):
    """A folder of exports whose later file names a column differently is refused up front, naming that file (it
    was found by a Ray task, after the files before it were read); a UTF-16 file too, naming the fix."""
    from pipelines.tasks.files import check_columns

    (tmp_path / "a.csv").write_text("text\nfine\n")
    (tmp_path / "b.csv").write_text("Text\nfine\n")
    with pytest.raises(TaskDataError, match=r"b\.csv: expected columns \['text'\], found \['Text'\]"):
        check_columns(resolve_files(str(tmp_path), labeled=False), "classification", labeled=False)
    (tmp_path / "b.csv").write_bytes("text\nfine\n".encode("utf-16"))
    with pytest.raises(TaskDataError, match=r"b\.csv: UTF-16 text .*save it as UTF-8"):
        check_columns(resolve_files(str(tmp_path), labeled=False), "classification", labeled=False)


def test_compressed_files_are_read_as_their_inner_format(tmp_path):
    """Exports are often compressed: data.csv.gz is CSV, .jsonl.bz2 JSON Lines, a .json.xz SQuAD document (sniffed
    under the compression), each decompressed as it is read; in a folder too."""
    import bz2
    import gzip
    import lzma

    (tmp_path / "a.csv.gz").write_bytes(gzip.compress(b"text,label\nfine day,pos\nbad day,neg\n"))
    (tmp_path / "b.jsonl.bz2").write_bytes(bz2.compress(b'{"text": "a walk", "label": "pos"}\n'))
    (tmp_path / "~$a.csv").write_bytes(b"\x00" * 162)  # the lock file Excel keeps beside a file it has open
    files = resolve_files(str(tmp_path))
    assert [(Path(p).name, f) for p, f in files] == [("a.csv.gz", "csv"), ("b.jsonl.bz2", "jsonl")]
    assert [read(p, f)[0][0]["text_a"] for p, f in files] == ["fine day", "a walk"]
    squad = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "Ada wrote it.", "qas": [
        {"id": "q", "question": "Who?", "answers": [{"text": "Ada", "answer_start": 0}], "is_impossible": False}]}]}]}
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "dev.json.xz").write_bytes(lzma.compress(json.dumps(squad).encode()))
    [(path, fmt)] = resolve_files(str(tmp_path / "s" / "dev.json.xz"))
    assert fmt == "squad" and read(path, fmt, "question-answering")[0][0]["answers"]["text"] == ["Ada"]


def test_text_cells_of_other_types(tmp_path):
    """Parquet text written as binary (older Hive / Impala writers) is decoded (invalid_utf8 when it is not UTF-8);
    numeric texts are what a CSV holds (an integer's digits; a float as pandas' to_csv writes it, NaN missing_text);
    a JSON line nested past Python's stack is bad_json."""
    def inputs(path, fmt):
        batches = list(read_file(str(path), fmt, "classification", labeled=False))
        return [r["text_a"] for b in batches for r in b.rows], sum((b.rejects for b in batches), collections.Counter())

    pq.write_table(pa.table({"text": pa.array([b"caf\xc3\xa9", b"\xff"], pa.binary())}), tmp_path / "b.parquet")
    assert inputs(tmp_path / "b.parquet", "parquet") == (["café"], {"invalid_utf8": 1})
    pq.write_table(pa.table({"text": [12345, 678]}), tmp_path / "n.parquet")
    assert inputs(tmp_path / "n.parquet", "parquet") == (["12345", "678"], {})
    pq.write_table(pa.table({"text": [3.5, float("nan"), 101.0, 1e-07]}), tmp_path / "f.parquet")
    assert inputs(tmp_path / "f.parquet", "parquet") == (["3.5", "101.0", "1e-07"], {"missing_text": 1})
    assert inputs(write(tmp_path, "f.jsonl", jsonl({"text": 2.25}, {"text": None})), "jsonl") == (["2.25"],
                                                                                                   {"missing_text": 1})
    path = write(tmp_path, "deep.jsonl", jsonl({"text": "fine"}, "[" * 100_000 + "]" * 100_000))
    assert inputs(path, "jsonl") == (["fine"], {"bad_json": 1})
    # a whole binary table: its labels and ids are the text they hold (every label was unparseable, ids "b'a1'")
    binary = {"id": pa.array([b"a1", b"a2", b"a3"], pa.binary()), "text": pa.array([b"x", b"y", b"z"], pa.binary()),
              "label": pa.array([b"pos", b"neg", b"\xff"], pa.binary())}
    pq.write_table(pa.table(binary), tmp_path / "all.parquet")
    rows, rejects, _, _ = read(str(tmp_path / "all.parquet"), "parquet", columns=Columns(id="id"))
    assert [(r["id"], r["label"]) for r in rows] == [("a1", "pos"), ("a2", "neg")] and rejects == {"invalid_utf8": 1}
    batches = list(read_file(str(tmp_path / "all.parquet"), "parquet", "classification", Columns(id="id"),
                             labeled=False))
    assert [r["id"] for b in batches for r in b.rows] == ["a1", "a2", "a3"]


def test_a_compressed_file_cut_short_keeps_its_records_and_says_so(tmp_path):
    """An interrupted download: the records before the cut are read, then one truncated_gzip reject (it was an
    EOFError out of a Ray task); a file named .gz that is not gzip is corrupt_gzip; a compressed Parquet file (it
    compresses inside) is an unknown type; a folder holding an export and a compressed copy of it is refused."""
    import gzip
    import zlib

    data = gzip.compress(b"text,label\n" + b"".join(b"row %d,a\n" % i for i in range(5000)))
    (tmp_path / "cut.csv.gz").write_bytes(data[:len(data) // 2])
    rows, rejects, _, _ = read(str(tmp_path / "cut.csv.gz"), "csv")
    assert 0 < len(rows) < 5000 and rejects == {"truncated_gzip": 1}
    assert [r["text_a"] for r in rows] == [f"row {i}" for i in range(len(rows))]
    # JSON Lines keeps as many: gzip's read() raised before returning the 1 MiB chunk it had decompressed, and a
    # small file lost every record ("after 0 records")
    lines = b"".join(b'{"text": "row %d", "label": "a"}\n' % i for i in range(20_000))
    data = gzip.compress(lines)
    (tmp_path / "cut.jsonl.gz").write_bytes(data[:len(data) // 2])
    whole = len(zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[:len(data) // 2]).split(b"\n")) - 1
    rows, rejects, _, _ = read(str(tmp_path / "cut.jsonl.gz"), "jsonl")
    assert len(rows) == whole > 0 and rejects == {"truncated_gzip": 1}
    (tmp_path / "not.csv.gz").write_bytes(b"text,label\nplain,a\n")
    assert read(str(tmp_path / "not.csv.gz"), "csv")[:2] == ([], {"corrupt_gzip": 1})
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "t.parquet.gz").write_bytes(gzip.compress(b"PAR1"))
    with pytest.raises(TaskDataError, match=r"unknown file type '\.gz'"):
        resolve_files(str(tmp_path / "p" / "t.parquet.gz"))
    (tmp_path / "twice").mkdir()
    (tmp_path / "twice" / "train.csv").write_text("text,label\na,b\n")
    (tmp_path / "twice" / "train.csv.gz").write_bytes(gzip.compress(b"text,label\na,b\n"))
    with pytest.raises(TaskDataError, match=r"holds train\.csv and a compressed copy of it"):
        resolve_files(str(tmp_path / "twice"))


def test_every_kind_decodes_binary_text_and_a_cell_may_say_invalid_utf8(tmp_path):
    """QA contexts and questions, and text to tag, read from binary Parquet columns too; a CSV cell whose text is
    the words "invalid_utf8" is text, not a reject."""
    def inputs(path, fmt, kind, columns=Columns()):
        batches = list(read_file(str(path), fmt, kind, columns, labeled=False))
        return [r for b in batches for r in b.rows], sum((b.rejects for b in batches), collections.Counter())

    pq.write_table(pa.table({"question": pa.array([b"Who?", b"\xff"], pa.binary()),
                             "context": pa.array([b"Ada did.", b"x"], pa.binary())}), tmp_path / "qa.parquet")
    rows, rejects = inputs(tmp_path / "qa.parquet", "parquet", "question-answering")
    assert [(r["question"], r["context"]) for r in rows] == [("Who?", "Ada did.")] and rejects == {"invalid_utf8": 1}
    pq.write_table(pa.table({"text": pa.array([b"Ada Lovelace"], pa.binary())}), tmp_path / "tag.parquet")
    rows, _ = inputs(tmp_path / "tag.parquet", "parquet", "token-classification", Columns(tokens=""))
    assert rows[0]["text"] == "Ada Lovelace"
    (tmp_path / "t.csv").write_text("text\ninvalid_utf8\n")
    assert [r["text_a"] for r in inputs(tmp_path / "t.csv", "csv", "classification")[0]] == ["invalid_utf8"]


# --- text in another encoding than UTF-8 (columns.encoding) ---

def test_excel_csv_in_cp1252_reads_with_its_encoding_named(tmp_path):
    """Excel's "CSV" on Windows writes cp1252: read as UTF-8 every row with an accent or a curly quote would be
    invalid_utf8 (a whole French file rejected), so it is refused naming the setting; with
    task.columns.encoding=cp1252 each reads as its text, and a byte cp1252 does not define (0x81) costs its record
    alone, counted as invalid_cp1252."""
    text = "text,label\nCafé crème,pos\n“Quoted” – dash,neg\nplain,pos\n".encode("cp1252") + b"bad \x81 byte,neg\n"
    path = write(tmp_path, "reviews.csv", text)
    with pytest.raises(TaskDataError, match="task.columns.encoding=cp1252"):
        read(path, "csv")
    rows, rejects, samples, _ = read(path, "csv", columns=Columns(encoding="cp1252"))
    assert [r["text_a"] for r in rows] == ["Café crème", "“Quoted” – dash", "plain"]
    assert rejects == {"invalid_cp1252": 1} and samples[0][:2] == ("invalid_cp1252", "line 5")


@pytest.mark.parametrize("fmt, name, data", [
    ("tsv", "a.tsv", "text\tlabel\nnaïve\tpos\n"),
    ("jsonl", "a.jsonl", '{"text": "naïve", "label": "pos"}\n'),
    ("jsonl", "b.jsonl", '[{"text": "naïve", "label": "pos"}]'),  # a JSON array where JSON Lines was expected
])
def test_every_text_format_reads_in_the_named_encoding_compressed_too(tmp_path, fmt, name, data):
    import gzip

    for encoding, suffix in (("latin-1", ""), ("utf-16", ".gz")):  # utf-16: its byte-order mark is read, not refused
        raw = data.encode(encoding)
        path = write(tmp_path, name + suffix, gzip.compress(raw) if suffix else raw)
        rows, rejects, _, _ = read(path, fmt, columns=Columns(encoding=encoding))
        assert [r["text_a"] for r in rows] == ["naïve"] and not rejects, (encoding, rejects)


def test_excel_csv_with_semicolons_where_the_decimal_mark_is_a_comma(tmp_path):
    """Excel in most of Europe writes "CSV" with semicolons (its decimal mark is the comma), in cp1252: read at commas
    every row was one field and the file was refused for its columns; a header with a semicolon and no comma splits
    the file at semicolons (quoted ones kept), and a regression label's decimal comma is its decimal point. A
    comma-separated file whose text holds semicolons is read as before."""
    text = 'Text;Label\r\n"Gut; sehr gut, wirklich";pos\r\nSchlecht;neg\r\n'.encode("cp1252")
    rows, rejects, _, _ = read(write(tmp_path, "de.csv", text), "csv",
                               columns=Columns(text="Text", label="Label", encoding="cp1252"))
    assert [(r["text_a"], r["label"]) for r in rows] == [("Gut; sehr gut, wirklich", "pos"), ("Schlecht", "neg")]
    assert not rejects
    rows, _, _, _ = read(write(tmp_path, "us.csv", "text,label\nfine; really,pos\n"), "csv")
    assert [r["text_a"] for r in rows] == ["fine; really"]
    rows, _, _, _ = read(write(tmp_path, "q.csv", 'id;"text, raw";label\n1;"a, b";pos\n'), "csv",
                         columns=Columns(text="text, raw"))  # a quoted comma in a semicolon header
    assert [r["text_a"] for r in rows] == ["a, b"]
    rows, _, _, _ = read(write(tmp_path, "one.csv", '"text; raw",label\n"hello; world",pos\n'), "csv",
                         columns=Columns(text="text; raw"))  # a quoted semicolon in a comma header
    assert [r["text_a"] for r in rows] == ["hello; world"]
    # its numbers have decimal commas: a regression label "3,5" is 3.5 there; in a comma CSV "1,000" is no number
    rows, rejects, _, _ = read(write(tmp_path, "scores.csv", "text;score\na;3,5\nb;-1\nc;2.25\n"), "csv",
                               "regression", Columns(label="score"))
    assert [r["label"] for r in rows] == [3.5, -1.0, 2.25] and not rejects
    rows, rejects, _, _ = read(write(tmp_path, "us-scores.csv", 'text,score\na,"1,000"\nb,2\n'), "csv",
                               "regression", Columns(label="score"))
    assert [r["label"] for r in rows] == [2.0] and rejects == {"unparseable_label": 1}
    # pandas' to_csv(sep=";", decimal=",") of an integer label column with a gap writes "1,0": the class 1, as "1.0"
    # is in a comma CSV; "1,5" is the class "1.5", as a comma CSV's "1.5" and JSON's 1.5 are
    rows, rejects, _, _ = read(write(tmp_path, "classes.csv", "text;label\na;1,0\nb;0,0\nc;1\nd;1,5\n"), "csv")
    assert [r["label"] for r in rows] == ["1", "0", "1", "1.5"] and not rejects
    rows, _, _, _ = read(write(tmp_path, "comma-classes.csv", 'text,label\na,"1,0"\n'), "csv")
    assert [r["label"] for r in rows] == ["1,0"]  # a comma CSV's quoted "1,0" is a class of its own, as written


def test_a_parquet_file_whose_page_does_not_decode_keeps_the_rows_before_it(tmp_path):
    """A Parquet file with a corrupt page (a copy cut short in the middle, a bad disk sector): the rows of the pages
    before it are read and the rest counted as corrupt_parquet, naming the file and how far it read, as a compressed
    text file cut short is; before, a bare OSError without the file's name failed the whole job."""
    path = tmp_path / "big.parquet"
    texts = [f"row {i} " + "x" * (i % 97) for i in range(40_000)]
    pq.write_table(pa.table({"text": texts, "label": ["pos", "neg"] * 20_000}), path, compression="snappy",
                   data_page_size=16_384, row_group_size=20_000)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 2048] = b"\xff" * 2048
    path.write_bytes(bytes(data))
    rows, rejects, samples, _ = read(str(path), "parquet")
    assert 0 < len(rows) < 40_000 and rows[0]["text_a"] == "row 0 "
    assert rejects == {"corrupt_parquet": 1}
    assert samples[0][0] == "corrupt_parquet" and samples[0][1] == str(path) and "after " in samples[0][2]


def test_excel_workbooks_as_people_keep_them(tmp_path):
    """An .xlsx as labels are kept by hand: a title and a blank row above the table, a column without a header and
    notes right of it, numbers as labels (1 and 1.0 are the class 1), a blank row inside (counted), formatted empty
    rows below (not counted), the data on a named sheet; the lock file Excel keeps beside an open workbook is not
    data. Predict reads it unlabeled and counts its rows from the workbook."""
    import openpyxl

    from jobs.inference.inputs import estimate_rows

    book = openpyxl.Workbook()
    book.active.title = "Notes"
    sheet = book.create_sheet("Labels")
    for row in (["Support tickets, labelled by hand"], [], ["id", "text", "label", None, None, "comment"],
                [7, "Cannot log in", 1, None, None, "checked"], [8.0, "Refund please", 2.0], [],
                [9, "Where is my parcel", None], [10, "App crashes", 1]):
        sheet.append(row)
    sheet.cell(row=40, column=2).number_format = "0.00"  # a formatted cell far below: an empty row in the XML
    path = tmp_path / "tickets.xlsx"
    book.save(path)
    (tmp_path / "~$tickets.xlsx").write_bytes(b"\x00" * 165)
    files = resolve_files(str(tmp_path))
    assert files == [(str(path), "xlsx")]
    rows, rejects, samples, _ = read(str(path), "xlsx", columns=Columns(id="id", sheet="Labels"))
    assert [(r["id"], r["text_a"], r["label"]) for r in rows] == [
        ("7", "Cannot log in", "1"), ("8", "Refund please", "2"), ("10", "App crashes", "1")]
    assert rejects == {"blank_line": 1, "missing_label": 1} and samples[1][:2] == ("missing_label", "row 7")
    inputs = [r for b in read_file(str(path), "xlsx", "classification", Columns(sheet="Labels"), labeled=False)
              for r in b.rows]
    assert [r["text_a"] for r in inputs] == ["Cannot log in", "Refund please", "Where is my parcel", "App crashes"]
    assert estimate_rows(files, sheet="Labels") >= 5
    with pytest.raises(TaskDataError, match=r"no sheet 'Sheet1' of cells; its sheets: \['Notes', 'Labels'\]"):
        read(str(path), "xlsx", columns=Columns(sheet="Sheet1"))
    with pytest.raises(TaskDataError, match=r"expected columns \['text', 'label'\], found \['read me'\]"):
        book = openpyxl.Workbook()
        book.active.append(["read me"])
        book.save(tmp_path / "other.xlsx")
        read(str(tmp_path / "other.xlsx"), "xlsx")
    # an OLE2 compound file: a .xls renamed, or an .xlsx encrypted (a password, a sensitivity label)
    old = write(tmp_path, "old.xlsx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 512)
    with pytest.raises(TaskDataError, match="an encrypted workbook .* or a .xls .*renamed"):
        read(old, "xlsx")


def test_excel_cells_read_as_excels_csv_export_writes_them(tmp_path):
    """TRUE / FALSE labels are the classes "true" and "false" (as from Excel's CSV, and JSON's true and pandas' True),
    a score column mixing numbers and numbers stored as text is one type, every row is read where the writer recorded
    a smaller table than it wrote (openpyxl's read-only mode stops at that dimension), and a chart sheet is passed
    over, or refused by name."""
    import re
    import zipfile

    import openpyxl

    book = openpyxl.Workbook()
    for row in (["text", "label", "score"], ["a", True, "3"], ["b", False, 4], ["c", True, 2.5],
                *[["d", False, 1]] * 7):
        book.active.append(row)
    book.save(tmp_path / "full.xlsx")
    with zipfile.ZipFile(tmp_path / "full.xlsx") as src, zipfile.ZipFile(tmp_path / "cut.xlsx", "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                data = re.sub(rb'<dimension ref="[^"]+"', b'<dimension ref="A1:C4"', data)
            dst.writestr(item, data)
    rows, rejects, _, _ = read(str(tmp_path / "cut.xlsx"), "xlsx")
    assert [r["label"] for r in rows] == ["true", "false", "true"] + ["false"] * 7 and not rejects
    rows, rejects, _, _ = read(str(tmp_path / "cut.xlsx"), "xlsx", "regression", Columns(label="score"))
    assert [r["label"] for r in rows[:3]] == [3.0, 4.0, 2.5] and len(rows) == 10 and not rejects
    from openpyxl.chart import BarChart, Reference

    chart = BarChart()
    chart.add_data(Reference(book.active, min_col=3, min_row=1, max_row=4), titles_from_data=True)
    book.create_chartsheet("Chart", 0).add_chart(chart)  # a chart sheet first: the data sheet is still the one read
    book.save(tmp_path / "charts.xlsx")
    assert len(read(str(tmp_path / "charts.xlsx"), "xlsx")[0]) == 10
    with pytest.raises(TaskDataError, match=r"no sheet 'Chart' of cells; its sheets: \['Sheet'\]"):
        read(str(tmp_path / "charts.xlsx"), "xlsx", columns=Columns(sheet="Chart"))


def test_mac_excel_tab_delimited_text_lines_end_in_a_lone_cr(tmp_path):
    """Excel for Mac's "Tab delimited Text" ends its lines with a lone CR, in Mac Roman: read at \\n the whole file
    was one line (its header swallowing every row); now each CR ends a row, with and without the encoding named,
    compressed too. In a file with \\n line ends a lone CR is a character of its field, as before."""
    import gzip

    text = "text\tlabel\rCafé crème\tpos\r\"said \"\"no\"\"\"\tneg\rplain\tpos\r".encode("mac_roman")
    rows, rejects, _, _ = read(write(tmp_path, "a.txt", text), "tsv", columns=Columns(encoding="mac_roman"))
    assert [(r["text_a"], r["label"]) for r in rows] == [("Café crème", "pos"), ('said "no"', "neg"),
                                                        ("plain", "pos")] and not rejects
    plain = b"text\tlabel\rfine day\tpos\rbad day\tneg\r"
    rows, rejects, _, _ = read(write(tmp_path, "b.tsv.gz", gzip.compress(plain)), "tsv")
    assert [r["text_a"] for r in rows] == ["fine day", "bad day"] and not rejects
    rows, _, _, _ = read(write(tmp_path, "c.tsv", b"text\tlabel\nline\rbreak\tpos\n"), "tsv")
    assert [r["text_a"] for r in rows] == ["line\rbreak"]
    cell = b'text\tlabel\r"line one\nline two"\tpos\rb\tneg\r'  # a line break inside a cell: Excel writes a LF
    rows, _, _, _ = read(write(tmp_path, "d.tsv", cell), "tsv")
    assert [(r["text_a"], r["label"]) for r in rows] == [("line one\nline two", "pos"), ("b", "neg")]


def test_a_lone_cr_in_a_csv_line_is_text_and_old_mac_csv_lines_end_in_one(tmp_path):
    """A hand-rolled export with a lone CR in an unquoted cell: csv ended the row there, so `first,part\rsecond
    part,1` became two rows, one labelled "part" (a class no one wrote), and `has\rcr inside,1` lost its head. In a
    file of \n or \r\n line ends a lone CR is a character of its field (as in TSV); in a file of CR line ends
    (old Mac Excel's "CSV") it ends the row."""
    rows, rejects, _, _ = read(write(tmp_path, "a.csv", b"text,label\r\nhas\rcr inside,1\r\nfirst,part\rsecond,1\r\n"
                                     b'"quoted\rcr",0\r\n'), "csv")
    assert [(r["text_a"], r["label"]) for r in rows] == [("has\rcr inside", "1"), ("quoted\rcr", "0")]
    assert rejects == {"wrong_column_count": 1}
    rows, _, _, _ = read(write(tmp_path, "pua.csv", "text,label\n\ue000 an icon font's glyph,1\n".encode()), "csv")
    assert [r["text_a"] for r in rows] == ["\ue000 an icon font's glyph"]  # the mark stands for a CR only if one was
    rows, rejects, _, _ = read(write(tmp_path, "mac.csv", b'text,label\rfine day,pos\r"two\nlines",neg\r'), "csv")
    assert [(r["text_a"], r["label"]) for r in rows] == [("fine day", "pos"), ("two\nlines", "neg")] and not rejects
    # csv.writer's \r\n through Windows' text mode is \r\r\n: a line end, quoted or not
    data = b'"label","text"\r\r\npos,"hello, world"\r\r\nneg,plain\r\r\n'
    rows, rejects, _, _ = read(write(tmp_path, "win.csv", data), "csv", columns=Columns(label="label"))
    assert [(r["text_a"], r["label"]) for r in rows] == [("hello, world", "pos"), ("plain", "neg")] and not rejects
    # more CRs than LFs, all inside quoted cells (paragraph breaks): still a file of LF line ends
    data = b'text,label\n"a\rb\rc",pos\n"d\re\rf",neg\n'
    rows, rejects, _, _ = read(write(tmp_path, "paras.csv", data), "csv")
    assert [(r["text_a"], r["label"]) for r in rows] == [("a\rb\rc", "pos"), ("d\re\rf", "neg")] and not rejects


def test_plain_text_conll_and_squad_read_in_the_named_encoding(tmp_path):
    path = write(tmp_path, "docs.txt", "première ligne\r\nseconde\n".encode("cp1252"))
    got = [r for b in read_file(path, "text", "classification", Columns(encoding="cp1252"), labeled=False)
           for r in b.rows]
    assert [r["text_a"] for r in got] == ["première ligne", "seconde"]
    path = write(tmp_path, "train.conll", "Zürich B-LOC\nliegt O\n\n".encode("latin-1"))
    rows, rejects, _, _ = read(path, "conll", "token-classification", Columns(encoding="latin-1"))
    assert rows[0]["tokens"] == ["Zürich", "liegt"] and not rejects
    qa = {"id": "q", "question": "Wer?", "answers": [{"text": "Müller", "answer_start": 0}], "is_impossible": False}
    paragraph = {"context": "Müller schrieb es.", "qas": [qa]}
    squad = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [paragraph]}]}
    path = write(tmp_path, "dev.json", json.dumps(squad, ensure_ascii=False).encode("latin-1"))
    rows, rejects, _, _ = read(path, "squad", "question-answering", Columns(encoding="latin-1"))
    assert rows[0]["answers"]["text"] == ["Müller"] and not rejects


def test_a_utf16_file_names_the_encoding_to_set_and_an_unknown_encoding_is_refused(tmp_path):
    path = write(tmp_path, "a.csv", "text\nfine\n".encode("utf-16"))
    with pytest.raises(TaskDataError, match=r"a\.csv: UTF-16 text .*set task\.columns\.encoding=utf-16"):
        read(path, "csv")
    with pytest.raises(ValueError, match="'cp-1252' is not a text encoding Python knows"):
        read(path, "csv", columns=Columns(encoding="cp-1252"))


def test_bytes_the_named_encoding_does_not_define_cost_their_record_alone_never_the_file(tmp_path):
    """Half a UTF-16 surrogate pair (an emoji a tool cut) and a file ending in an odd byte: the record holding it is
    rejected and counted, the rest read; the decoding never raises (a raised error failed the file's Ray task)."""
    head = "text,label\nfirst,a\n".encode("utf-16")
    cut = "cut ".encode("utf-16-le") + b"\x3d\xd8" + ",b\n".encode("utf-16-le")  # a high surrogate alone
    tail = "last,c\n".encode("utf-16-le") + b"Z"  # an odd byte: no UTF-16 character
    path = write(tmp_path, "a.csv", head + cut + tail)
    rows, rejects, _, _ = read(path, "csv", columns=Columns(encoding="utf-16"))
    assert [r["text_a"] for r in rows] == ["first", "last"] and rejects == {"invalid_utf_16": 2}


def test_a_truncated_download_keeps_every_record_before_the_cut_in_any_encoding(tmp_path):
    import gzip

    data = "text,label\n" + "".join(f"row {i} café,a\n" for i in range(20_000))
    whole = gzip.compress(data.encode("latin-1"))
    path = write(tmp_path, "a.csv.gz", whole[:len(whole) // 2])
    as_utf8, _, _, _ = read(write(tmp_path, "b.csv.gz", gzip.compress(data.encode())[:len(whole) // 2]), "csv")
    rows, rejects, _, _ = read(path, "csv", columns=Columns(encoding="latin-1"))
    assert rejects == {"truncated_gzip": 1} and len(rows) > 0.9 * len(as_utf8) > 5_000
    assert [r["text_a"] for r in rows] == [f"row {i} café" for i in range(len(rows))]


@pytest.mark.parametrize("data, encoding, error", [
    ("text\nfine\n".encode("utf-32"), "utf-16", r"UTF-32 text \(its byte-order mark\), not utf-16: set "
                                                r"task\.columns\.encoding=utf-32"),
    (b"\xef\xbb\xbftext\ncaf\xc3\xa9\n", "cp1252", r"UTF-8 text \(its byte-order mark\), not cp1252: leave "
                                                  r"task\.columns\.encoding unset"),
], ids=["utf-32-named-utf-16", "utf-8-named-cp1252"])
def test_a_byte_order_mark_that_contradicts_the_named_encoding_is_refused(tmp_path, data, encoding, error):
    """Read as the named encoding, such a file is text full of NULs or starting "ï»¿" (its header unreadable)."""
    with pytest.raises(TaskDataError, match=error):
        read(write(tmp_path, "a.csv", data), "csv", columns=Columns(encoding=encoding))
    rows, _, _, _ = read(write(tmp_path, "b.csv", "\ufefftext,label\nfine,a\n".encode("utf-16-le")), "csv",
                         columns=Columns(encoding="utf-16-le"))  # named without a BOM, written with one
    assert [r["text_a"] for r in rows] == ["fine"]
    rows, rejects, _, _ = read(write(tmp_path, "c.csv", b"\xef\xbb\xbftext,label\nfine,a\n"), "csv",
                               columns=Columns(encoding="utf-8-sig"))
    assert [r["text_a"] for r in rows] == ["fine"] and not rejects


def test_tables_joined_or_annotated_by_hand_lose_no_row_and_read_no_column_twice(tmp_path):
    """A Parquet file naming a column twice is refused as a CSV header is (its last column was read, unsaid); notes
    beside and below a spreadsheet's table are no rejects; a JSON Lines file joined from two (`cat a.jsonl b.jsonl`,
    b written with a byte-order mark) loses no record at the join."""
    import openpyxl

    table = pa.Table.from_arrays([pa.array(["a", "b"]), pa.array(["x", "y"]), pa.array([1, 0])],
                                 names=["text", "text", "label"])
    pq.write_table(table, tmp_path / "twice.parquet")
    with pytest.raises(TaskDataError, match=r"names column 'text' more than once"):
        read(str(tmp_path / "twice.parquet"), "parquet")
    book = openpyxl.Workbook()
    for row in (["text", "label"], ["good", "pos"], ["bad", "neg"]):
        book.active.append(row)
    book.active["E8"], book.active["E9"] = "checked by Ann", "2026-11-30"
    book.save(tmp_path / "notes.xlsx")
    rows, rejects, _, _ = read(str(tmp_path / "notes.xlsx"), "xlsx")
    assert [r["text_a"] for r in rows] == ["good", "bad"] and not rejects
    joined = jsonl({"text": "a", "label": 1}).encode() + b"\xef\xbb\xbf" + jsonl({"text": "b", "label": 0}).encode()
    rows, rejects, _, _ = read(write(tmp_path, "joined.jsonl", joined), "jsonl")
    assert [r["text_a"] for r in rows] == ["a", "b"] and not rejects


def test_a_file_named_with_brackets_is_that_file_not_a_glob(tmp_path):
    """train[1].csv was read as the glob train[1].csv, the class [1]: train1.csv beside it was trained on, with no
    word; sales[2024-01].csv matched nothing ("no data files match"), though it exists. A glob is one where no such
    file is (data/*[12].csv)."""
    for name in ("train[1].csv", "train1.csv", "sales[2024-01].csv"):
        write(tmp_path, name, f"text,label\n{name} row,1\n")
    assert resolve_files(str(tmp_path / "train[1].csv")) == [(str(tmp_path / "train[1].csv"), "csv")]
    assert resolve_files(str(tmp_path / "sales[2024-01].csv")) == [(str(tmp_path / "sales[2024-01].csv"), "csv")]
    assert resolve_files(str(tmp_path / "train[12].csv")) == [(str(tmp_path / "train1.csv"), "csv")]  # a glob
