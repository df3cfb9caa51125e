"""A user's own labeled files: every format and kind, each reject reason, label order, metrics."""

import collections
import json
import re
import shutil
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.tasks import (Columns, TaskDataError, encode_labels, file_metrics, label_set, load_squad, read_file,
                             resolve_files)


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return str(path)


def read(path, fmt, kind="classification", columns=Columns(), batch_rows=2048):
    """(rows, rejects, samples) of all batches, and the batches' row counts."""
    rows, rejects, samples, sizes = [], {}, [], []
    for batch in read_file(path, fmt, kind, columns, batch_rows):
        rows += batch.rows
        sizes.append(len(batch.rows))
        samples += batch.samples
        for reason, count in batch.rejects.items():
            rejects[reason] = rejects.get(reason, 0) + count
    return rows, rejects, samples, sizes


def jsonl(*records):
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


# --- sentence classification from CSV / TSV / JSON Lines ---

def test_tsv_rows_and_numeric_label_order(tmp_path):
    path = write(tmp_path, "train.tsv", "text\tlabel\ngood film\t10\nbad film\t2\nok \"film\"\t1\n")
    rows, rejects, _, _ = read(path, "tsv")
    assert rows[0] == {"id": "train.tsv:0", "text_a": "good film", "text_b": None, "label": "10"}
    assert rows[2]["text_a"] == 'ok "film"' and not rejects  # quotes are characters in TSV
    assert label_set([r["label"] for r in rows], "classification") == ("1", "2", "10")  # not "1" < "10" < "2"


def test_label_set_orders_and_unions():
    assert label_set(["pos", "neg", "neutral", "neg"], "classification") == ("neg", "neutral", "pos")
    assert label_set(["10", "2", "b"], "classification") == ("10", "2", "b")  # not all integers: as strings
    assert label_set(["-1", "0", "+3"], "classification") == ("-1", "0", "+3")
    assert label_set([["b", "a"], [], ["c"]], "multi-label") == ("a", "b", "c")
    assert label_set([["O", "B-PER"], ["I-PER"]], "token-classification") == ("B-PER", "I-PER", "O")
    with pytest.raises(TaskDataError, match="no labels"):
        label_set([[], []], "multi-label")


def test_csv_quoting_bom_pairs_and_ids(tmp_path):
    text = '\ufeffid,premise,hypothesis,label\nq1,"Hello, world","line one\nline two",entail\nq2,a,b,contra\n'
    path = write(tmp_path, "pairs.csv", text)
    columns = Columns(text="premise", text_pair="hypothesis", id="id")
    rows, rejects, _, _ = read(path, "csv", columns=columns)
    assert rows == [{"id": "q1", "text_a": "Hello, world", "text_b": "line one\nline two", "label": "entail"},
                    {"id": "q2", "text_a": "a", "text_b": "b", "label": "contra"}]
    assert not rejects


def test_csv_bad_records_are_counted(tmp_path):
    data = (b"text,label\ngood,pos\n\nCaf\xff,pos\none,two,three\n,neg\nfine,\n"
            b'"quoted, with comma",neg\nlast,neg\n')
    rows, rejects, samples, _ = read(write(tmp_path, "t.csv", data), "csv")
    assert [r["text_a"] for r in rows] == ["good", "quoted, with comma", "last"]
    assert rejects == {"blank_line": 1, "invalid_utf8": 1, "wrong_column_count": 1, "missing_text": 1,
                       "missing_label": 1}
    assert ("invalid_utf8", "line 4", "Caf\ufffd,pos") in samples


def test_a_csv_quote_that_never_closes_costs_its_line_not_the_rest(tmp_path):
    data = 'text,label\ngood,pos\n"unclosed,neg\nfine,pos\nlast,neg\n"ok" then text,neg\n"two\nlines",pos\n'
    rows, rejects, samples, _ = read(write(tmp_path, "q.csv", data), "csv")
    assert [r["text_a"] for r in rows] == ["good", "fine", "last", "two\nlines"]
    assert rejects == {"unclosed_quote": 1, "bad_csv": 1}  # text after a closing quote: not read as "ok then text"
    assert samples[0][:2] == ("unclosed_quote", "line 3, quote not closed by line 6")


def test_tsv_written_by_a_csv_writer(tmp_path):
    """pandas' to_csv(sep="\t") quotes a field holding a quote, a tab or a newline; a GLUE TSV's quotes are
    characters. A field quoted whole without a doubled quote is GLUE's (a quotation as the sentence)."""
    data = ('text\tlabel\n"He said ""hi"""\t1\n"two\nlines"\t0\n"tab\there"\t1\n"a quotation"\t0\n'
            'she said "no\t1\n"so it goes\n')
    rows, rejects, samples, _ = read(write(tmp_path, "w.tsv", data), "tsv")
    assert [r["text_a"] for r in rows] == ['He said "hi"', "two\nlines", "tab\there", '"a quotation"', 'she said "no']
    assert [r["id"] for r in rows][:3] == ["w.tsv:0", "w.tsv:1", "w.tsv:2"]  # ids: the record's number, as CSV's
    assert rejects == {"unclosed_quote": 1} and samples[0][:2] == ("unclosed_quote", "line 8")
    data = '"text"\t"label"\n"plain"\t"1"\n"x"\t"0"\n'  # QUOTE_ALL: the quoted header says so
    rows, rejects, _, _ = read(write(tmp_path, "all.tsv", data), "tsv")
    assert [(r["text_a"], r["label"]) for r in rows] == [("plain", "1"), ("x", "0")] and not rejects


def test_a_run_on_tsv_quote_never_makes_a_half_row(tmp_path):
    """A quoted field that never closes is rejected on its own line; the lines after it are read as they are (a
    GLUE TSV whose sentence opens a quotation), never as the second half of a record."""
    data = 'text\tlabel\n"opens\nnext line\t1\nhe said "ok" then\t0\n'
    rows, rejects, samples, _ = read(write(tmp_path, "r.tsv", data), "tsv")
    assert [r["text_a"] for r in rows] == ["next line", 'he said "ok" then']
    assert rejects == {"unclosed_quote": 1} and samples[0][1] == "line 2, quote not closed by line 4"


def test_a_csv_record_of_big_quoted_fields_over_many_lines_is_one_row(tmp_path):
    """csv.field_size_limit() bounds a field, not a record: two quoted fields of 70,000 characters each, with
    newlines in them, are one row (not an unclosed quote whose last lines become a row of their own)."""
    a, b = "x" * 70_000 + "\ny", "z" * 70_000 + "\nw"
    rows, rejects, _, _ = read(write(tmp_path, "big.csv", f'a,b,label\n"{a}","{b}",1\nnext,one,2\n'), "csv",
                               columns=Columns(text="a", text_pair="b"))
    assert [(r["text_a"], r["text_b"], r["label"]) for r in rows] == [(a, b, "1"), ("next", "one", "2")]
    assert not rejects


def test_a_tsv_text_column_last_running_over_lines_is_one_row(tmp_path):
    """pandas with the text column last: its quoted field with a newline ends the line at full width; the record
    is the lines up to the closing quote. A GLUE line whose last field opens a quotation stays as it is."""
    data = 'label\ttext\n0\t"first part\nsecond part"\n1\tnext\n'
    rows, rejects, _, _ = read(write(tmp_path, "last.tsv", data), "tsv")
    assert [(r["text_a"], r["label"]) for r in rows] == [("first part\nsecond part", "0"), ("next", "1")]
    data = 'label\ttext\n1\t"said ""hi"""\n0\t"first part\nsecond\tpart"\n1\tnext\n'  # a writer's file: a tab too
    rows, rejects, _, _ = read(write(tmp_path, "tab.tsv", data), "tsv")
    assert [r["text_a"] for r in rows] == ['said "hi"', "first part\nsecond\tpart", "next"] and not rejects
    data = 'label\ttext\n0\t"a quotation opens\n1\tthen "closes" here\n1\tthird\n'
    rows, rejects, _, _ = read(write(tmp_path, "glue.tsv", data), "tsv")
    assert [r["text_a"] for r in rows] == ['"a quotation opens', 'then "closes" here', "third"] and not rejects


def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    with pytest.raises(TaskDataError, match=r"t.csv: the header names column 'text' more than once"):
        read(write(tmp_path, "t.csv", "text,label,text\na,1,b\n"), "csv")
    with pytest.raises(TaskDataError, match=r"t.tsv: the header names column 'label' more than once"):
        read(write(tmp_path, "t.tsv", "text\tlabel\tlabel\na\t1\t2\n"), "tsv")
    rows, _, _, _ = read(write(tmp_path, "u.csv", "note,text,note,label\nx,a,y,1\n"), "csv")  # not a mapped column
    assert [(r["text_a"], r["label"]) for r in rows] == [("a", "1")]


def test_a_byte_order_mark_is_never_in_a_header_or_a_record(tmp_path):
    bom = b"\xef\xbb\xbf"
    rows, rejects, _, _ = read(write(tmp_path, "b.tsv", bom + b"text\tlabel\na\t1\n"), "tsv")
    assert [(r["text_a"], r["label"]) for r in rows] == [("a", "1")] and not rejects
    rows, rejects, _, _ = read(write(tmp_path, "b.jsonl", bom + jsonl({"text": "a", "label": 1}).encode()), "jsonl")
    assert [(r["text_a"], r["label"]) for r in rows] == [("a", "1")] and not rejects
    squad = write(tmp_path, "dev.json", bom + json.dumps(SQUAD, indent=2).encode())
    assert resolve_files(squad) == [(squad, "squad")]  # sniffed past the mark: not JSON Lines
    assert [r["id"] for r in read(squad, "squad", "question-answering")[0]] == ["q1", "q3"]


def test_float_class_labels_as_pandas_writes_them(tmp_path):
    """An int label column holding a NaN is written by pandas as floats: 1.0, 0.0, null (NaN in Parquet)."""
    path = write(tmp_path, "f.jsonl", jsonl({"text": "a", "label": 1.0}, {"text": "b", "label": 0.0},
                                             {"text": "c", "label": None}, {"text": "d", "label": 1.5},
                                             {"text": "e", "label": 2}))
    rows, rejects, _, _ = read(path, "jsonl")
    assert [(r["text_a"], r["label"]) for r in rows] == [("a", "1"), ("b", "0"), ("d", "1.5"), ("e", "2")]
    assert rejects == {"missing_label": 1}  # 1.5: the class "1.5", as a CSV's "1.5" below
    pq.write_table(pa.table({"text": ["a", "b", "c"], "label": [1.0, float("nan"), None]}), tmp_path / "f.parquet")
    rows, rejects, _, _ = read(str(tmp_path / "f.parquet"), "parquet")
    assert [r["label"] for r in rows] == ["1"] and rejects == {"missing_label": 2}
    # to_csv writes them "1.0", "0.0", "": the classes 1 and 0 of a file written without the gap, ids too; a class
    # "1.5" or "v1.0" in a CSV is text, as it was
    text = "id,text,label\n101.0,a,1.0\n,b,\n103.0,c,0.0\n104.5,d,1.5\n-2.00,e,v1.0\n"
    rows, rejects, _, _ = read(write(tmp_path, "f.csv", text), "csv", columns=Columns(id="id"))
    assert [(r["id"], r["label"]) for r in rows] == [("101", "1"), ("103", "0"), ("104.5", "1.5"), ("-2", "v1.0")]
    assert rejects == {"missing_label": 1}


def test_a_json_array_where_json_lines_was_expected(tmp_path):
    """pandas' to_json(orient="records") without lines=True, or a pretty-printed list: read line by line it kept
    its last object only."""
    records = [{"text": "a", "label": 1}, {"text": "b", "label": 0}, "not an object"]
    path = write(tmp_path, "arr.jsonl", "\n".join(["[", *(json.dumps(r) + "," for r in records[:-1]),
                                                   json.dumps(records[-1]), "]"]))
    rows, rejects, samples, _ = read(path, "jsonl")
    assert [r["text_a"] for r in rows] == ["a", "b"] and rejects == {"bad_json": 1} and samples[0][1] == "item 2"
    path = write(tmp_path, "pretty.json", json.dumps(records[:2], indent=2))
    assert resolve_files(path) == [(path, "jsonl")] and len(read(path, "jsonl")[0]) == 2
    # broken JSON between elements (a file cut short, text between them or after the array) is refused naming the
    # item: read on, every record after the break would be lost; a comma before the closing bracket is let pass
    cases = {"cut": ('[\n{"text": "a", "label": 1},\n{"text": "b", "la', "the file ends inside it, at item 1"),
             "junk": ('[{"text": "a", "label": 1} x {"text": "b"}]', "after item 0: 'x {"),
             "after": ('[{"text": "a", "label": 1}] {"text": "b"}', "text follows its closing bracket: '{")}
    for name, (text, where) in cases.items():
        refused = r"a JSON array \(not JSON Lines.*not valid JSON: " + re.escape(where)
        with pytest.raises(TaskDataError, match=refused):
            read(write(tmp_path, f"{name}.jsonl", text), "jsonl")
    comma = '[\n{"text": "a", "label": 1},\n{"text": "b", "label": 0},\n]'
    rows, rejects, _, _ = read(write(tmp_path, "comma.jsonl", comma), "jsonl")
    assert [r["text_a"] for r in rows] == ["a", "b"] and not rejects
    rows, rejects, _, _ = read(write(tmp_path, "lines.jsonl", jsonl([1, 2], {"text": "a", "label": 1})), "jsonl")
    assert len(rows) == 1 and rejects == {"bad_json": 1}  # JSON Lines whose first line is an array
    long_first = jsonl([{"text": f"t{i}", "label": 0} for i in range(400)], *[{"text": "a", "label": 1}] * 1000)
    rows, rejects, _, _ = read(write(tmp_path, "long.jsonl", long_first), "jsonl")  # a first line past the sniff
    assert len(rows) == 1000 and rejects == {"bad_json": 1}


def test_tsv_bad_lines_are_counted(tmp_path):
    data = b"sentence\tlabel\na\t0\nCaf\xff\t1\nx\ty\tz\n\n   \nb\t1\n"
    rows, rejects, samples, _ = read(write(tmp_path, "t.tsv", data), "tsv", columns=Columns(text="sentence"))
    assert [(r["id"].rsplit(":", 1)[1], r["label"]) for r in rows] == [("0", "0"), ("5", "1")]  # ids: data line
    assert rejects == {"invalid_utf8": 1, "wrong_column_count": 1, "blank_line": 2}
    assert samples[0][:2] == ("invalid_utf8", "line 3")


def test_jsonl_rejects_and_label_types(tmp_path):
    path = write(tmp_path, "t.jsonl", jsonl(
        {"text": "a", "label": 1}, "{not json", "[1, 2]", "", {"text": "b", "label": "pos"},
        {"text": "c", "label": 2.0}, {"text": "d", "label": True}, {"text": "e", "label": None},
        {"text": "f", "label": {"a": 1}}, {"text": "g"}, {"text": "", "label": 1}, {"text": "h", "label": 3}))
    rows, rejects, _, _ = read(path, "jsonl")
    assert [(r["text_a"], r["label"]) for r in rows] == [("a", "1"), ("c", "2"), ("h", "3")]  # 2.0 is the class 2
    # True is the class "true" (as Excel's TRUE and pandas' True), a str beside the file's JSON ints
    assert rejects == {"bad_json": 2, "blank_line": 1, "mixed_label_types": 2, "unparseable_label": 1,
                       "missing_label": 2, "missing_text": 1}
    rows, rejects, _, _ = read(write(tmp_path, "u.jsonl", b'{"text": "a", "label": "x"}\n{"text": "\xff"}\n'), "jsonl")
    assert rejects == {"invalid_utf8": 1} and len(rows) == 1


def test_missing_columns_name_expected_found_and_the_setting(tmp_path):
    expected = r"expected columns \['text', 'label'\], found \['sentence', 'y'\]; set task.columns.text / task.columns.label"
    with pytest.raises(TaskDataError, match=expected):
        read(write(tmp_path, "a.csv", "sentence,y\nhi,1\n"), "csv")
    with pytest.raises(TaskDataError, match=expected):
        read(write(tmp_path, "a.jsonl", jsonl({"sentence": "hi", "y": 1})), "jsonl")
    pq.write_table(pa.table({"sentence": ["hi"], "y": [1]}), tmp_path / "a.parquet")
    with pytest.raises(TaskDataError, match=expected):
        read(str(tmp_path / "a.parquet"), "parquet")
    with pytest.raises(TaskDataError, match="not JSON Lines"):
        read(write(tmp_path, "b.jsonl", "text,label\nhi,1\n"), "jsonl")


def test_empty_files_count_once(tmp_path):
    pq.write_table(pa.table({"text": pa.array([], pa.string()), "label": pa.array([], pa.int64())}),
                   tmp_path / "e.parquet")
    for path, fmt in [(write(tmp_path, "e.csv", ""), "csv"), (write(tmp_path, "h.csv", "text,label\n"), "csv"),
                      (write(tmp_path, "h.tsv", "text\tlabel\n"), "tsv"), (write(tmp_path, "e.jsonl", ""), "jsonl"),
                      (write(tmp_path, "z.parquet", b""), "parquet"), (str(tmp_path / "e.parquet"), "parquet"),
                      (write(tmp_path, "e.json", b""), "squad"), (write(tmp_path, "e.conll", "-DOCSTART- -X- O\n\n"), "conll")]:
        kind = {"squad": "question-answering", "conll": "token-classification"}.get(fmt, "classification")
        rows, rejects, _, _ = read(path, fmt, kind)
        assert rows == [] and rejects == {"empty_file": 1}, path


# --- multi-label, regression ---

def test_multi_label_from_lists_and_separated_cells(tmp_path):
    rows, rejects, _, _ = read(write(tmp_path, "m.jsonl", jsonl(
        {"text": "a", "label": ["sports", " news", "sports"]}, {"text": "b", "label": []},
        {"text": "c", "label": "[\"x\"]"}, {"text": "d", "label": "x|y"}, {"text": "e", "label": [1, "x"]},
        {"text": "f", "label": [True]})), "jsonl", "multi-label")
    assert [r["label"] for r in rows] == [["sports", "news"], [], ["x"]]
    assert rejects == {"unparseable_label": 2, "mixed_label_types": 1}
    path = write(tmp_path, "m.csv", "text,label\na,sports|news\nb,\nc, x |\n")
    rows, rejects, _, _ = read(path, "csv", "multi-label", Columns(label_separator="|"))
    assert [r["label"] for r in rows] == [["sports", "news"], [], ["x"]] and not rejects
    labels = label_set([r["label"] for r in rows], "multi-label")
    assert labels == ("news", "sports", "x")
    encoded, rejected = encode_labels(rows + [{"text_a": "z", "label": ["other"]}], "multi-label", labels)
    assert [r["label"] for r in encoded] == [[1, 0], [], [2]] and rejected == {"label_not_in_train": 1}
    # classes written as numbers are named as classification names them, in every format: "1.0" and 1.0 are 1
    path = write(tmp_path, "n.csv", "text,label\na,1.0|2\nb,+3\nc,1.5\n")
    rows, _, _, _ = read(path, "csv", "multi-label", Columns(label_separator="|"))
    numbers = jsonl({"text": "a", "label": [1, 2]}, {"text": "b", "label": [3.0]}, {"text": "c", "label": [1.5]})
    lists, rejects, _, _ = read(write(tmp_path, "n.jsonl", numbers), "jsonl", "multi-label")
    assert [r["label"] for r in rows] == [r["label"] for r in lists] == [["1", "2"], ["3"], ["1.5"]]
    assert not rejects


def test_regression_scores(tmp_path):
    rows, rejects, _, _ = read(write(tmp_path, "r.csv", "text,label\na,3.5\nb, 1 \nc,nan\nd,high\ne,inf\n"), "csv",
                               "regression")
    assert [r["label"] for r in rows] == [3.5, 1.0] and rejects == {"unparseable_label": 2, "missing_label": 1}
    rows, rejects, _, _ = read(write(tmp_path, "r.jsonl", jsonl({"text": "a", "label": 2}, {"text": "b", "label": 0.5},
                                                              {"text": "c", "label": "0.7"})), "jsonl", "regression")
    assert [r["label"] for r in rows] == [2.0, 0.5] and rejects == {"mixed_label_types": 1}
    assert encode_labels(rows, "regression", ())[0] == rows


def test_encode_labels_rejects_labels_unseen_in_train():
    rows = [{"label": "neg"}, {"label": "pos"}, {"label": "neutral"}]
    encoded, rejects = encode_labels(rows, "classification", ("neg", "pos"))
    assert [r["label"] for r in encoded] == [0, 1] and rejects == {"label_not_in_train": 1}
    assert rows[0]["label"] == "neg"  # inputs untouched
    sentences = [{"tokens": ["a"], "ner_tags": ["B-PER"]}, {"tokens": ["b"], "ner_tags": ["B-ORG"]}]
    kept, rejects = encode_labels(sentences, "token-classification", ("B-PER", "O"))
    assert kept == sentences[:1] and rejects == {"tag_not_in_train": 1}


# --- Parquet, HF save_to_disk ---

def test_parquet_streams_bounded_batches(tmp_path):
    pq.write_table(pa.table({"text": [f"t{i}" for i in range(5)], "label": [["a"], ["b", "a"], [], ["c"], None],
                             "extra": list(range(5))}), tmp_path / "m.parquet", row_group_size=2)
    rows, rejects, _, sizes = read(str(tmp_path / "m.parquet"), "parquet", "multi-label", batch_rows=2)
    assert sizes == [2, 2, 0] and rejects == {"missing_label": 1}  # a null list: JSON null's rule
    assert [r["label"] for r in rows] == [["a"], ["b", "a"], [], ["c"]]
    with pytest.raises(TaskDataError, match="not a Parquet file"):
        read(write(tmp_path, "bad.parquet", "text,label\n"), "parquet")


HF = Path(__file__).resolve().parents[1] / "data" / "hf"  # made by `datasets` itself: tests/data/make_hf_fixtures.py


def test_hf_save_to_disk_folders(tmp_path):
    shutil.copytree(HF, tmp_path / "hf")
    one = tmp_path / "hf" / "sentiment"
    assert resolve_files(str(one)) == [(str(one), "hf")]
    rows, rejects, _, _ = read(str(one), "hf", columns=Columns(text="sentence"))
    assert [(r["text_a"], r["label"]) for r in rows] == [("bad", "neg"), ("good", "pos")]  # ClassLabel names
    assert rejects == {"missing_label": 1}  # datasets' -1: no label

    dd = tmp_path / "hf" / "ner-dict"  # a DatasetDict: train and validation
    [(path, fmt)] = resolve_files(f"{dd}:validation")
    assert (path, fmt) == (str(dd / "validation"), "hf")
    rows, rejects, _, _ = read(path, fmt, "token-classification", Columns(tags="ner_tags"))
    assert [r["ner_tags"] for r in rows] == [["B-ORG", "O"]] and rejects == {"tags_tokens_length_mismatch": 1}
    with pytest.raises(TaskDataError, match=r"DatasetDict with splits \['train', 'validation'\]"):
        resolve_files(str(dd))
    with pytest.raises(FileNotFoundError, match="no split 'test'"):
        resolve_files(f"{dd}:test")


def test_token_rows_from_jsonl_and_conll(tmp_path):
    rows, rejects, _, _ = read(write(tmp_path, "n.jsonl", jsonl(
        {"tokens": ["Peter", "lives"], "tags": ["B-PER", "O"]}, {"tokens": ["a", "b"], "tags": ["O"]},
        {"tokens": [], "tags": []}, {"tokens": ["a"]}, {"tokens": ["a"], "tags": [0]})), "jsonl", "token-classification")
    assert rows[0] == {"id": rows[0]["id"], "document": rows[0]["id"], "tokens": ["Peter", "lives"],
                       "ner_tags": ["B-PER", "O"]}
    assert rows[1]["ner_tags"] == ["0"]
    assert rejects == {"tags_tokens_length_mismatch": 1, "empty_row": 1, "missing_label": 1}
    conll = (b"-DOCSTART- -X- O\n\nEU NNP B-ORG\nrejects VBZ O\n\nCaf\xe9 NNP B-LOC\n\n-DOCSTART- -X- O\n\n"
             + "Köln NNP B-PLACE\n".encode())  # UTF-8 ("Köln") with a latin-1 byte: no one-byte file
    path = write(tmp_path, "n.txt", conll)
    assert resolve_files(path, "conll") == [(path, "conll")]
    rows, rejects, _, _ = read(path, "conll", "token-classification")
    assert [(r["tokens"], r["ner_tags"]) for r in rows] == [(["EU", "rejects"], ["B-ORG", "O"]), (["Köln"], ["B-PLACE"])]
    assert rows[0]["document"] != rows[1]["document"] and rejects == {"invalid_utf8": 1}


SQUAD = {"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": "Paris is in France.", "qas": [
    {"id": "q1", "question": "Where?", "answers": [{"text": "France", "answer_start": 12}]},
    {"id": "q2", "question": "Bad?", "answers": [{"text": "France", "answer_start": 3}]},
    {"id": "q3", "question": "None?", "answers": [], "is_impossible": True}]}]}]}


def test_qa_rows_from_jsonl(tmp_path):
    context = "Paris is in France."
    rows, rejects, _, _ = read(write(tmp_path, "qa.jsonl", jsonl(
        {"context": context, "question": "Where?", "answers": {"text": ["France", "Fr"], "answer_start": [12, 0]}},
        {"context": context, "question": "Which?", "answers": [{"text": "Paris", "answer_start": 0}], "title": "T"},
        {"context": context, "question": "No?", "answers": {"text": [], "answer_start": []}},
        {"context": context, "question": "Bad?", "answers": [{"text": "Paris", "answer_start": 5}]},
        {"context": "", "question": "Empty?", "answers": []},
        {"context": "  \n ", "question": "Blank?", "answers": []})), "jsonl", "question-answering")
    assert [r["answers"] for r in rows] == [{"text": ["France", "Fr"], "answer_start": [12, -1]},  # "Fr": scored only
                                            {"text": ["Paris"], "answer_start": [0]}, {"text": [], "answer_start": []}]
    assert [r["is_impossible"] for r in rows] == [False, False, True] and rows[1]["title"] == "T"
    assert rows[0]["id"] == "qa.jsonl:0"  # the file's name, not its folder: the digest moves with nothing
    assert set(rows[0]) == {"id", "title", "question", "context", "answers", "is_impossible"}  # load_squad's
    assert rejects == {"no_valid_answer": 1, "missing_field": 2}  # a blank context too; answers off: notes (qa_files)


def test_qa_rows_from_parquet_structs(tmp_path):
    answers = [{"text": ["France"], "answer_start": [12]}, {"text": [], "answer_start": []}]
    pq.write_table(pa.table({"qid": ["a", "b"], "context": ["Paris is in France."] * 2, "question": ["Where?", "No?"],
                             "answers": answers}), tmp_path / "qa.parquet")
    rows, rejects, _, _ = read(str(tmp_path / "qa.parquet"), "parquet", "question-answering", Columns(id="qid"))
    assert [(r["id"], r["answers"], r["is_impossible"]) for r in rows] == [("a", answers[0], False),
                                                                          ("b", answers[1], True)]
    assert not rejects


def test_squad_json_is_detected_and_read_as_load_squad(tmp_path):
    pretty = write(tmp_path, "dev.json", json.dumps(SQUAD, indent=2))
    one_line = write(tmp_path, "dev1.json", json.dumps(SQUAD))
    lines = write(tmp_path, "rows.json", jsonl({"data": "not a list", "text": "x"}, {"text": "y"}))
    assert resolve_files(str(tmp_path / "*.json")) == [(pretty, "squad"), (one_line, "squad"), (lines, "jsonl")]
    # JSON Lines whose first record is longer than the 1 MiB sniffed (a long document): not SQuAD by its first key
    long = write(tmp_path, "long.json", jsonl({"text": "word " * 300_000, "label": "a"}, {"text": "y", "label": "b"}))
    assert resolve_files(long) == [(long, "jsonl")]
    assert [r["label"] for r in read(long, "jsonl")[0]] == ["a", "b"]
    big = write(tmp_path, "big.json", json.dumps({**SQUAD, "version": "v2.0 " + "x" * (1 << 20)}))  # one long line
    assert resolve_files(big) == [(big, "squad")]
    titled = write(tmp_path, "titled.json", '{"title": "dev",\n' + json.dumps(SQUAD, indent=2)[1:])  # over lines
    assert resolve_files(titled) == [(titled, "squad")]
    rows, rejects, _, _ = read(pretty, "squad", "question-answering")
    assert rows == load_squad(pretty).rows and [r["id"] for r in rows] == ["q1", "q3"]
    assert rejects == {"no_valid_answer": 1}  # q2's answer off its start: a note of load_squad's, went with q2
    with pytest.raises(TaskDataError, match="cannot hold question-answering"):
        read(pretty, "csv", "question-answering")


# --- finding files ---

def test_resolve_folders_globs_and_errors(tmp_path):
    for name in ("b.csv", "a.tsv", "c.jsonl", "README.md", "_SUCCESS", ".hidden.csv"):
        write(tmp_path, name, "text,label\nx,1\n")
    (tmp_path / "sub").mkdir()
    assert resolve_files(str(tmp_path)) == [(str(tmp_path / n), f) for n, f in
                                            [("a.tsv", "tsv"), ("b.csv", "csv"), ("c.jsonl", "jsonl")]]
    assert resolve_files(str(tmp_path), "csv") == [(str(tmp_path / "b.csv"), "csv")]
    assert resolve_files(str(tmp_path / "*.?sv")) == [(str(tmp_path / "a.tsv"), "tsv"), (str(tmp_path / "b.csv"), "csv")]
    assert resolve_files(str(tmp_path / "README.md"), "csv") == [(str(tmp_path / "README.md"), "csv")]
    with pytest.raises(TaskDataError, match=r"unknown file type '.md'.*\.csv.*set task.format"):
        resolve_files(str(tmp_path / "README.md"))
    with pytest.raises(FileNotFoundError, match="nope"):
        resolve_files(str(tmp_path / "nope.csv"))
    with pytest.raises(FileNotFoundError, match=r"\*\.xlsx"):
        resolve_files(str(tmp_path / "*.xlsx"))
    with pytest.raises(FileNotFoundError, match="sub"):
        resolve_files(str(tmp_path / "sub"))


def test_memory_urls_resolve_and_read():
    fs = fsspec.filesystem("memory")
    fs.pipe({"/files_task/d/train.tsv": b"text\tlabel\nhi\tpos\n", "/files_task/d/more.jsonl": jsonl(
        {"text": "yo", "label": "neg"}).encode()})
    try:
        pairs = resolve_files("memory://files_task/d")
        assert [(p.rsplit("/", 1)[1], f) for p, f in pairs] == [("more.jsonl", "jsonl"), ("train.tsv", "tsv")]
        assert all(p.startswith("memory://") for p, _ in pairs)
        rows = [r for p, f in pairs for r in read(p, f)[0]]
        assert [(r["text_a"], r["label"]) for r in rows] == [("yo", "neg"), ("hi", "pos")]
        fs.pipe("/files_task/squad.json", json.dumps(SQUAD).encode())
        [(path, fmt)] = resolve_files("memory://files_task/squad.json")
        assert fmt == "squad" and [r["id"] for r in read(path, fmt, "question-answering")[0]] == ["q1", "q3"]
    finally:
        fs.rm("/files_task", recursive=True)


def test_batches_stream_and_count_rejects_per_batch(tmp_path):
    path = write(tmp_path, "big.jsonl", jsonl(*[{"text": f"t{i}", "label": i % 3} for i in range(10)], "oops"))
    batches = list(read_file(path, "jsonl", "classification", Columns(), batch_rows=4))
    assert [len(b.rows) for b in batches] == [4, 4, 2] and batches[-1].rejects == {"bad_json": 1}


# --- metrics ---

def test_file_metrics_against_hand_computed_values():
    # gold 0 0 1 2, predicted 0 1 1 2: accuracy 3/4; F1 per class 2/3, 2/3, 1 -> macro 7/9
    logits = np.eye(3)[[0, 1, 1, 2]] * 5
    m = file_metrics("classification", logits, [0, 0, 1, 2], ("a", "b", "c"))
    assert m == pytest.approx({"accuracy": 0.75, "macro_f1": 7 / 9})
    # threshold 0.5 <=> logit > 0. hits [[1,0],[1,1],[0,0]] vs gold [[1,0],[0,1],[0,1]]
    # label 0: tp 1 fp 1 fn 0 -> F1 2/3; label 1: tp 1 fp 0 fn 1 -> 2/3; micro tp 2 fp 1 fn 1 -> 2/3; exact 1/3
    logits = np.array([[2.0, -1.0], [0.5, 3.0], [-2.0, -0.1]])
    gold = np.array([[1, 0], [0, 1], [0, 1]])
    m = file_metrics("multi-label", logits, gold, ("x", "y"))
    assert m == pytest.approx({"micro_f1": 2 / 3, "macro_f1": 2 / 3, "exact_match": 1 / 3})
    # threshold 0.9: sigmoid(2.0)=0.88 and sigmoid(0.5) no longer hit, only 3.0 (0.95) does: hits [[0,0],[0,1],[0,0]]
    # label 0: F1 0; label 1: tp 1 fn 1 -> 2/3; macro 1/3; micro tp 1 fn 2 -> 1/2; exact rows 2 -> 1/3
    m = file_metrics("multi-label", logits, gold, ("x", "y"), threshold=0.9)
    assert m == pytest.approx({"micro_f1": 0.5, "macro_f1": 1 / 3, "exact_match": 1 / 3})
    m = file_metrics("regression", [[1.0], [2.0], [4.0]], [1.0, 3.0, 2.0], ())
    # pearson: deviations (-4/3,-1/3,5/3), (-1,1,0): 1 / sqrt(42/9 * 2) = 3/sqrt(84); ranks (1,2,3), (1,3,2): 0.5
    assert m == pytest.approx({"pearson": 3 / 84 ** 0.5, "spearman": 0.5, "mse": 5 / 3})
    with pytest.raises(ValueError, match="must both be"):
        file_metrics("multi-label", logits, gold, ("x", "y", "z"))


def test_inputs_to_predict_are_read_without_labels(tmp_path):
    """labeled=False (jobs/predict.py): no label column needed, a label present is not read, plain text is one
    input per line, token classification tags a text column; a bad record is still counted."""
    def rows(path, fmt, kind, columns=Columns()):
        batches = list(read_file(str(path), fmt, kind, columns, labeled=False))
        return [r for b in batches for r in b.rows], sum((b.rejects for b in batches), collections.Counter())

    (tmp_path / "a.csv").write_text("text,label\nfine day,pos\nno label here,\n")
    got, rejects = rows(tmp_path / "a.csv", "csv", "classification")
    assert [(r["text_a"], r["label"]) for r in got] == [("fine day", None), ("no label here", None)] and not rejects
    (tmp_path / "b.txt").write_bytes(b"first line\n\n\xff\xfe bad\nthird\n")
    got, rejects = rows(tmp_path / "b.txt", "text", "classification")
    assert [(r["id"], r["text_a"]) for r in got] == [("b.txt:0", "first line"), ("b.txt:3", "third")]
    assert rejects == {"blank_line": 1, "invalid_utf8": 1}
    got, _ = rows(tmp_path / "b.txt", "text", "token-classification", Columns(tokens=""))
    assert got[0] == {"id": "b.txt:0", "text": "first line"}
    (tmp_path / "c.jsonl").write_text('{"tokens": ["Ada", "Lovelace"]}\n')
    got, _ = rows(tmp_path / "c.jsonl", "jsonl", "token-classification")  # words, no tags
    assert got[0]["tokens"] == ["Ada", "Lovelace"] and got[0]["ner_tags"] is None
    with pytest.raises(TaskDataError, match="expected columns"):
        rows(tmp_path / "a.csv", "csv", "classification", Columns(text="sentence"))
    with pytest.raises(TaskDataError, match="cannot hold"):  # text is for inputs only
        list(read_file(str(tmp_path / "b.txt"), "text", "classification"))


def test_each_reasons_first_reject_keeps_its_place_after_many_of_another(tmp_path):
    """A batch kept the first five rejects of any reason: after six bad labels a missing text had no sample, so the
    job could not say where it was. The first of each reason is kept."""
    path = tmp_path / "t.jsonl"
    path.write_text("".join('{"text": "x", "label": {}}\n' for _ in range(6)) + '{"label": "a"}\n')
    [batch] = read_file(str(path), "jsonl", "classification", Columns())
    assert batch.rejects == {"unparseable_label": 6, "missing_text": 1}
    assert ("missing_text", "line 7") in [(reason, where) for reason, where, _ in batch.samples]
