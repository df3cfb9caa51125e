"""Own files as people's tools write them, where a guess about the file decides what is read: the encoding of a CSV
exported by Excel on Windows, the delimiter of a European CSV whose header names hold commas, the sheet a workbook
keeps its data on, a CSV without a header row, a TSV's decimal-comma scores (pipelines/tasks/file_head.py, excel.py
and files.py, through read_file and check_columns as the jobs call them)."""

import pytest

from pipelines.tasks import Columns, TaskDataError
from pipelines.tasks.files import check_columns
from tests.unit.test_files_task import read, write


def test_a_cp1252_export_is_refused_naming_the_encoding_not_half_read(tmp_path):
    """Excel's "CSV" on Windows writes cp1252: read as UTF-8, "Très bon" and "Café “ok”" were invalid_utf8 rejects
    and the run trained on the unaccented rest. Its head holds bytes that are not UTF-8 and no character that is, so
    the file is refused before any work, naming the byte, its line and the setting; with it every row reads."""
    text = "text,label\r\n\"Très bon\",pos\r\nBad,neg\r\n\"Café “ok”\",pos\r\n".encode("cp1252")
    path = write(tmp_path, "excel.csv", text)
    with pytest.raises(TaskDataError, match=r"excel.csv: not UTF-8: byte 0xE8 on line 2 \('\"Très bon\",pos' read as "
                                            r"cp1252\).*set task.columns.encoding=cp1252 \(or latin-1\)"):
        check_columns([(path, "csv")], "classification")
    rows, rejects, _, _ = read(path, "csv", columns=Columns(encoding="cp1252"))
    assert [r["text_a"] for r in rows] == ["Très bon", "Bad", "Café “ok”"] and not rejects
    tsv = write(tmp_path, "excel.tsv", "text\tlabel\nnaïve\tpos\ncafé\tneg\n".encode("latin-1"))
    with pytest.raises(TaskDataError, match="byte 0xEF on line 2"):
        read(tsv, "tsv")
    # CoNLL-2002's Spanish and Dutch files are latin-1: as own data too, refused, not reduced to unaccented sentences
    conll = write(tmp_path, "esp.train", "El DA O\nCafé NC B-LOC\n\nLa DA O\nPeñón NC B-LOC\n".encode("latin-1"))
    with pytest.raises(TaskDataError, match="esp.train: not UTF-8: byte 0xE9 on line 2"):
        read(conll, "conll", kind="token-classification")
    rows, rejects, _, _ = read(conll, "conll", kind="token-classification", columns=Columns(encoding="latin-1"))
    assert [r["tokens"] for r in rows] == [["El", "Café"], ["La", "Peñón"]] and not rejects


def test_a_utf8_file_with_a_corrupt_row_keeps_its_per_row_reject(tmp_path):
    """A UTF-8 file with one corrupt row has valid characters past ASCII too: not a one-byte encoding, so the row is
    one invalid_utf8 reject, as before; and so is a stray 0xFF in ASCII text (ÿ is seldom cp1252 text)."""
    data = "text,label\nnaïve,pos\n".encode() + b"Caf\xe9,neg\n" + "“quoted”,pos\n".encode()
    rows, rejects, samples, _ = read(write(tmp_path, "mostly.csv", data), "csv")
    assert [r["text_a"] for r in rows] == ["naïve", "“quoted”"]
    assert rejects == {"invalid_utf8": 1} and samples[0][:2] == ("invalid_utf8", "line 3")
    rows, rejects, _, _ = read(write(tmp_path, "stray.tsv", b"text\tlabel\ngood\t1\nbad\xff\t0\n"), "tsv")
    assert [r["text_a"] for r in rows] == ["good"] and rejects == {"invalid_utf8": 1}


def test_one_stray_byte_is_a_corrupt_row_and_an_accidental_utf8_pair_no_proof(tmp_path):
    """An ASCII head with one stray byte (a UTF-8 file whose accents come later) keeps its per-row reject: refused,
    the advice (cp1252) would have garbled the later rows silently. cp1252 prose with an accidental valid UTF-8 pair
    ("Spaß“" is DF 93) is still cp1252: refused, its accented rows were all invalid_utf8 and the rest trained on."""
    data = b"text,label\ndon\x92t,neg\n" + b"plain,pos\n" * 110_000 + "naïve café,pos\n".encode()  # past 1 MiB
    rows, rejects, _, _ = read(write(tmp_path, "stray.csv", data), "csv")
    assert rejects == {"invalid_utf8": 1} and rows[-1]["text_a"] == "naïve café"
    german = "text,label\n„Das macht Spaß“,pos\nNicht gut,neg\nSchön,pos\n".encode("cp1252")
    with pytest.raises(TaskDataError, match=r"german.csv: not UTF-8: byte 0x84 on line 2.*set task.columns.encoding="
                                            r"cp1252.*If it is UTF-8 with corrupt rows, set task.columns.encoding="
                                            r"utf-8"):
        read(write(tmp_path, "german.csv", german), "csv")


def test_the_csv_delimiter_is_the_one_that_splits_header_and_rows_alike(tmp_path):
    """A German header `Kommentar;Note (1,0-5,0);Klasse` parses into three fields at commas as well: the header alone
    chose the comma and the file was refused with a message about task.columns.text / label. Its data lines split
    into three fields at semicolons only, so the semicolon is chosen; and a comma file whose header holds more
    semicolons than commas is read at commas where its rows say so."""
    data = "\ufeffKommentar;Note (1,0-5,0);Klasse\nSehr gut, danke;1,5;pos\nSchlecht;4,0;neg\nGeht so;3,0;neg\n"
    columns = Columns(text="Kommentar", label="Klasse")
    rows, rejects, _, _ = read(write(tmp_path, "de.csv", data), "csv", columns=columns)
    assert [(r["text_a"], r["label"]) for r in rows] == [("Sehr gut, danke", "pos"), ("Schlecht", "neg"),
                                                         ("Geht so", "neg")] and not rejects
    data = "Frage;Antwort;Notiz,label\nja,pos\nnein,neg\nvielleicht,neg\n"
    rows, rejects, _, _ = read(write(tmp_path, "names.csv", data), "csv", columns=Columns(text="Frage;Antwort;Notiz"))
    assert [(r["text_a"], r["label"]) for r in rows] == [("ja", "pos"), ("nein", "neg"), ("vielleicht", "neg")]


def test_a_workbook_with_a_readme_first_names_the_sheet_to_read(tmp_path):
    """A workbook whose first sheet is a README and whose data is on another: the error said "found ['This workbook
    contains...']; set task.columns.text / task.columns.label", never the sheet. The sheet that has the columns is
    named in the setting; where none has, the sheets are listed beside the columns to set."""
    import openpyxl

    book = openpyxl.Workbook()
    book.active.title = "README"
    book.active.append(["This workbook contains the labelled tickets. See sheet Data."])
    data = book.create_sheet("Data")
    for row in (["Text", "Label"], ["printer jams", "hardware"], ["cannot log in", "account"]):
        data.append(row)
    book.save(tmp_path / "tickets.xlsx")
    path, columns = str(tmp_path / "tickets.xlsx"), Columns(text="Text", label="Label")
    with pytest.raises(TaskDataError, match=r"first sheet 'README' has no header row naming the columns \['Text', "
                                            r"'Label'\], its sheet 'Data' has one: set task.columns.sheet=Data$"):
        check_columns([(path, "xlsx")], "classification", columns)
    rows, _, _, _ = read(path, "xlsx", columns=Columns(text="Text", label="Label", sheet="Data"))
    assert [r["label"] for r in rows] == ["hardware", "account"]
    with pytest.raises(TaskDataError, match=r"expected columns \['Ticket', 'Label'\], found \['This workbook .*\] on "
                                            r"its first sheet 'README', and no other of its sheets \['Data'\] has a "
                                            r"header row naming them; set task.columns.sheet, or task.columns.text / "
                                            r"task.columns.label$"):
        check_columns([(path, "xlsx")], "classification", Columns(text="Ticket", label="Label"))


def test_a_csv_without_a_header_row_is_refused_saying_so(tmp_path):
    """AG News', Yelp's and sentiment140's CSVs have no header row: their first row was shown as the columns found
    and the user told to set task.columns.*, which names no column of such a file. Where the names found are
    numbers or sentences, the message says the header is missing; a header that misnames a column gets no such
    hint."""
    data = '0,"1467810369","Mon Apr 06","NO_QUERY","user","@switchfoot awww, that\'s a bummer"\n4,"1467810370",' \
           '"Mon Apr 06","NO_QUERY","u2","great day"\n'
    with pytest.raises(TaskDataError, match=r"found \['0', '1467810369', .*; set task.columns.text / task.columns."
                                            r"label; the file seems to have no header row .*: add one naming its"):
        check_columns([(write(tmp_path, "s140.csv", data), "csv")], "classification")
    data = '"3","Wall St. Bears Claw Back Into the Black (Reuters)","Short-sellers are seeing green again."\n'
    with pytest.raises(TaskDataError, match="no header row"):
        check_columns([(write(tmp_path, "ag.csv", data), "csv")], "classification")
    with pytest.raises(TaskDataError, match=r"set task.columns.text$"):
        check_columns([(write(tmp_path, "named.csv", "sentence,label\ngood,1\n"), "csv")], "classification")
    survey = "Timestamp,How would you rate our service today?,Comment\n1,2,3\n"  # a header (a question), misnamed
    with pytest.raises(TaskDataError, match=r"set task.columns.text / task.columns.label$"):
        check_columns([(write(tmp_path, "survey.csv", survey), "csv")], "classification")


def test_a_tsv_reads_decimal_comma_scores_but_not_thousands(tmp_path):
    """German Excel's "Text (Tab delimited)" writes 4,5 for 4.5: only semicolon CSVs read decimal commas, so a TSV's
    fractional scores were unparseable_label and the regression trained on its whole numbers alone. A TSV score
    "d,d" is read as a decimal unless three digits follow the comma: "1,000" may be a thousand, and stays refused."""
    data = "Satz1\tSatz2\tScore\nEin Mann isst.\tJemand isst.\t4,5\nEin Hund\tEine Katze\t1\nKinder\tErwachsene\t" \
           "2,25\nJa\tNein\t0\nviel\tmehr\t1,000\nwenig\tmehr\t0,125\n"
    rows, rejects, _, _ = read(write(tmp_path, "sts.tsv", data), "tsv", "regression",
                               Columns(text="Satz1", text_pair="Satz2", label="Score"))
    assert [r["label"] for r in rows] == [4.5, 1.0, 2.25, 0.0, 0.125] and rejects == {"unparseable_label": 1}
    rows, _, _, _ = read(write(tmp_path, "c.tsv", "text\tlabel\na\t1,0\n"), "tsv")  # a class is its text, as before
    assert [r["label"] for r in rows] == ["1,0"]
