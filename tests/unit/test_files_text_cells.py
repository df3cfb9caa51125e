"""Text cells read as their labels are: a text cell that says it holds no value (Excel's error cells, pandas' "nan") is
missing_text as such a label is missing_label, and a byte-order mark inside a joined CoNLL file starts its document
(pipelines/tasks/files.py, pipelines/tasks/cells.py, pipelines/tasks/conll.py)."""

import collections

from pipelines.tasks import Columns
from pipelines.tasks.conll import load_conll
from pipelines.tasks.files import read_file
from tests.unit.test_files_task import read, write

BOM = b"\xef\xbb\xbf"
DOC_A = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
DOC_B = "-DOCSTART- -X- -X- O\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n"


def test_a_joined_conll_files_byte_order_mark_is_no_sentence_and_starts_its_document(tmp_path):
    """`cat a.conll b.conll`, b saved with a BOM: its "\ufeff-DOCSTART-" line was kept as a one-token sentence tagged
    O (4 columns; wrong_column_count with 2), and a and b were one document to the carve. Each file's document keeps
    the name it has read alone."""
    split = load_conll(write(tmp_path, "joined.conll", DOC_A.encode() + BOM + DOC_B.encode()))
    assert [s["tokens"] for s in split] == [["EU", "rejects"], ["Peter", "Blackburn"]] and not split.rejects
    assert [s["document"] for s in split] == [0, 1]
    alone = {}
    for name, data in (("a.conll", DOC_A.encode()), ("b.conll", BOM + DOC_B.encode())):
        rows, _, _, _ = read(write(tmp_path, name, data), "conll", "token-classification")
        alone[name] = rows[0]["document"]
    rows, rejects, _, _ = read(write(tmp_path, "train.conll", DOC_A.encode() + BOM + DOC_B.encode()), "conll",
                               "token-classification")
    assert [r["tokens"] for r in rows] == [["EU", "rejects"], ["Peter", "Blackburn"]] and not rejects
    assert [r["document"] for r in rows] == [alone["a.conll"], alone["b.conll"]]
    two = "-DOCSTART- O\n\nEU B-ORG\n\n".encode() + BOM + "-DOCSTART- O\n\nPeter B-PER\n".encode()
    rows, rejects, _, _ = read(write(tmp_path, "two.conll", two), "conll", "token-classification")
    assert [r["tokens"] for r in rows] == [["EU"], ["Peter"]] and not rejects
    assert rows[0]["document"] != rows[1]["document"]


def test_text_cells_that_say_no_value_are_missing_text_as_such_labels_are_missing_label(tmp_path):
    """A text column that is a formula whose lookup failed (#N/A, #REF!), or pandas' astype(str) of a missing text:
    trained on and scored as the input "#N/A". The label column's rule, for text and pair alike; "NA" and "null" are
    text (as they are classes)."""
    data = ("text,pair,label\nfine,ok,1\n#N/A,ok,1\nfine,#REF!,0\nnan,ok,1\n <NA> ,ok,0\n#SPILL!,ok,1\n"
            "NA,null,0\nok,fine,#N/A\nok,fine,#SPILL!\n")
    rows, rejects, samples, _ = read(write(tmp_path, "t.csv", data), "csv", columns=Columns(text_pair="pair"))
    assert [(r["text_a"], r["text_b"]) for r in rows] == [("fine", "ok"), ("NA", "null")]
    assert rejects == {"missing_text": 5, "missing_label": 2} and samples[0][:2] == ("missing_text", "line 3")
    inputs = [r["text_a"] for b in read_file(write(tmp_path, "p.csv", "text\nfine\n#DIV/0!\nNaN\n"), "csv",
                                             "classification", labeled=False) for r in b.rows]
    assert inputs == ["fine"]
    batches = list(read_file(write(tmp_path, "tag.csv", "text\nPeter rose\n#N/A\n"), "csv", "token-classification",
                             Columns(tokens=""), labeled=False))
    assert [r["text"] for b in batches for r in b.rows] == ["Peter rose"]
    assert sum((b.rejects for b in batches), collections.Counter()) == {"missing_text": 1}
    qa = "context,question\nParis is in France.,Where is Paris?\n#N/A,Where?\n"
    batches = list(read_file(write(tmp_path, "q.csv", qa), "csv", "question-answering", labeled=False))
    assert [r["question"] for b in batches for r in b.rows] == ["Where is Paris?"]
    assert batches[-1].rejects == {"missing_field": 1}


def test_excel_error_cells_in_a_text_column_are_missing_text(tmp_path):
    """A workbook whose text column looks its text up: the lookups that failed are error cells (openpyxl reads one
    as its code), no input to train on, as in its label column."""
    import openpyxl

    book = openpyxl.Workbook()
    for row in (["text", "label"], ["Cannot log in", 1], ["#N/A", 1], ["#REF!", 0], [None, 1], ["Refund", "#N/A"]):
        book.active.append(row)
    book.active["A5"].value, book.active["A5"].data_type = "#SPILL!", "e"  # a dynamic array's error
    book.save(tmp_path / "lookups.xlsx")
    book = openpyxl.load_workbook(tmp_path / "lookups.xlsx")
    assert [c.data_type for c in book.active["A"][2:5]] == ["e", "e", "e"]
    rows, rejects, samples, _ = read(str(tmp_path / "lookups.xlsx"), "xlsx")
    assert [(r["text_a"], r["label"]) for r in rows] == [("Cannot log in", "1")]
    assert rejects == {"missing_text": 3, "missing_label": 1} and samples[0][:2] == ("missing_text", "row 3")
