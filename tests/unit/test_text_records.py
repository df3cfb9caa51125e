"""text_records: a text file's bytes as records, on the files real users' tools write (long cells, lone surrogate
escapes, UTF-16 / UTF-32 exports, old Mac line ends)."""

import codecs
import csv
import io
import json

import pytest

from pipelines.tasks.common import TaskDataError
from pipelines.encodings import check_encoding
from pipelines.tasks.text_records import (Reject, as_utf8, csv_records, has_lone_surrogate, json_array, json_object,
                                          refuse_utf16, text_file, text_lines, tsv_records)

LONG = "\n".join(f"paragraph {i}: " + "word " * 40 for i in range(1000))  # ~210,000 characters, 1,000 lines


def written(delimiter: str) -> bytes:
    """id,text rows as pandas' to_csv (QUOTE_MINIMAL, "\\n") / csv.writer write them, a long document in the middle."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerows([["id", "text"], ["1", "short"], ["2", LONG], ["3", 'last, "quoted"']])
    return out.getvalue().encode()


# --- 1. a cell past csv's default field limit (131,072 characters) ---

@pytest.mark.parametrize("reader, delimiter", [(csv_records, ","), (tsv_records, "\t")])
def test_a_long_multiline_cell_is_one_record(reader, delimiter):
    assert len(LONG) > 200_000
    records = list(reader(io.BytesIO(written(delimiter))))
    assert [r[2] for r in records] == [["id", "text"], ["1", "short"], ["2", LONG], ["3", 'last, "quoted"']]
    assert records[2][1] == "lines 3-1002"


@pytest.mark.parametrize("reader, delimiter", [(csv_records, ","), (tsv_records, "\t")])
def test_a_quote_that_never_closes_still_costs_its_line(reader, delimiter):
    """Read to the end of the file (now allowed 16 MiB), it is still unclosed_quote, and the lines after it are
    read again. (A TSV line cut short: one of full length opening a quote is GLUE's quotation, kept as it is.)"""
    data = f'text{delimiter}label\n"never closed\nb{delimiter}1\nc{delimiter}0\n'.encode()
    records = list(reader(io.BytesIO(data)))
    assert [r[2] for r in records] == [["text", "label"], "unclosed_quote", ["b", "1"], ["c", "0"]]
    assert records[1][1] == "line 2, quote not closed by line 4"


@pytest.mark.parametrize("reader, delimiter", [(csv_records, ","), (tsv_records, "\t")])
def test_records_are_numbered_as_records_where_a_cell_holds_a_newline(tmp_path, reader, delimiter):
    """The default ids are "<file>:<n>", n the record's number: a TSV numbered its lines, so the row after pandas'
    cell holding a newline was q.tsv:2 where the same table as CSV is q.csv:1 (and every later row shifted). A
    record's `where` still names its lines."""
    import pandas as pd

    pd.DataFrame({"text": ["line one\nline two", "second", "third"]}).to_csv(tmp_path / "q", sep=delimiter,
                                                                           index=False)
    records = list(reader(io.BytesIO((tmp_path / "q").read_bytes())))
    assert [(n, where) for n, where, _, _ in records] == [(0, "line 1"), (1, "lines 2-3"), (2, "line 4"),
                                                          (3, "line 5")]


# --- 2. a lone surrogate escape ("\ud83d", half an emoji) ---

def lines(data: bytes) -> list:
    return [json_object(text) for _, _, text, _ in text_lines(io.BytesIO(data))]


def test_a_lone_surrogate_escape_is_invalid_utf8():
    data = (b'{"text": "ok \\ud83d\\ude00", "label": 1}\n'  # a whole pair: the emoji
            b'{"text": "cut \\ud83d", "label": 1}\n'
            b'{"text": "tail \\ude00"}\n'
            b'{"tokens": ["a", "\\ud83d"], "tags": ["O", "O"]}\n'  # nested values count
            b'{"answers": {"text": ["\\udfff"]}}\n'
            b'{"\\ud83d": "a key"}\n'
            b'{"text": "\\\\ud83d is how it is escaped"}\n')  # an escaped backslash: text, not an escape
    records = lines(data)
    assert records[0] == {"text": "ok \U0001F600", "label": 1}
    assert records[1:6] == ["invalid_utf8"] * 5 and all(isinstance(r, Reject) for r in records[1:6])
    assert records[6] == {"text": "\\ud83d is how it is escaped"}


def test_has_lone_surrogate():
    assert not has_lone_surrogate({"a": ["\U0001F600", 1, None, {"b": 2.5}]})
    assert has_lone_surrogate({"a": [{"b": "x\ud83d"}]})
    assert has_lone_surrogate("\udc80") and not has_lone_surrogate(3)


def test_json_array_items_with_a_lone_surrogate_are_invalid_utf8():
    data = b'[{"text": "a"}, {"text": "b \\ud83d"}, {"t": ["\\ude00"]}, 3]'
    records = list(json_array("x.jsonl", io.BytesIO(data)))
    assert [r[2] for r in records] == [{"text": "a"}, "invalid_utf8", "invalid_utf8", "bad_json"]
    assert [r[1] for r in records] == ["item 0", "item 1", "item 2", "item 3"] and isinstance(records[3][2], Reject)


def test_a_json_array_is_read_element_by_element():
    """A JSON array of records is read in bounded memory (the corpus reader's pipelines/json_array.py): its first
    record comes before the file is read to its end, as a JSON Lines file's does. Whitespace before the array is
    JSON's (a form feed is not), as the element reader skips."""
    data = json.dumps([{"text": f"row {i}", "label": i % 2} for i in range(200_000)]).encode()
    f = io.BytesIO(b" \r\n" + data)
    records = json_array("big.jsonl", f)
    assert next(records)[:3] == (0, "item 0", {"text": "row 0", "label": 0}) and f.tell() < len(data) // 2
    assert sum(1 for _ in records) == 199_999
    assert json_array("ff.jsonl", io.BytesIO(b"\x0c" + data[:100])) is None  # JSON Lines: one bad line


# --- 3. UTF-16 / UTF-32 (Excel's "Unicode Text") ---

@pytest.mark.parametrize("encoding, name", [("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"),
                                            ("utf-32-le", "UTF-32"), ("utf-32-be", "UTF-32")])
def test_utf16_and_utf32_are_refused_naming_the_fix(encoding, name):
    bom = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE,
           "utf-32-le": codecs.BOM_UTF32_LE, "utf-32-be": codecs.BOM_UTF32_BE}[encoding]
    f = io.BytesIO(bom + "id\ttext\n1\thello\n".encode(encoding))
    with pytest.raises(TaskDataError) as e:
        refuse_utf16("data/train.tsv", f)
    assert str(e.value).startswith(f"data/train.tsv: {name} text") and "UTF-8" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("data", [b"", b"\xff", codecs.BOM_UTF8 + b"id,text\n", b"id,text\n1,a\n", b'{"a": 1}\n'])
def test_utf8_passes_and_the_file_is_not_moved(data):
    f = io.BytesIO(data)
    refuse_utf16("x.csv", f)
    assert f.tell() == 0 and f.read() == data


# --- 4. old Mac line ends (a lone CR) ---

def test_a_lone_cr_ends_a_line_of_plain_text():
    records = list(text_lines(io.BytesIO(codecs.BOM_UTF8 + b"a\rb\r\nc\n\rd\r\re\r\r\nf"), lone_cr=True))
    assert [r[2] for r in records] == ["a", "b", "c", "blank_line", "d", "blank_line", "e", "blank_line", "f"]
    assert [r[1] for r in records] == [f"line {k}" for k in range(1, 10)]
    assert [r[0] for r in records] == list(range(9))


def test_json_lines_end_at_newlines_only():
    """A \r between a JSON record's tokens is whitespace (the JSON Lines spec ends lines at \n): one record, and
    the next line keeps its number."""
    records = list(text_lines(io.BytesIO(b'{"text": "x",\r "label": 1}\r\n{"text": "y"}\n')))
    assert [(r[0], json_object(r[2])) for r in records] == [(0, {"text": "x", "label": 1}), (1, {"text": "y"})]


def test_line_ends_are_not_text():
    records = list(text_lines(io.BytesIO(b"a\r\nb\nc")))
    assert [r[2] for r in records] == ["a", "b", "c"]
    assert [r[2] for r in text_lines(io.BytesIO(b"x\xff\ny\n"))] == ["invalid_utf8", "y"]


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
def test_a_line_past_the_limit_is_one_reject_read_past_not_held(monkeypatch, chunk):
    """A JSON Lines file of one huge line (a JSON document saved as .jsonl), or one whose lines end in a lone \r,
    was read whole into memory and then failed as not JSON Lines: the too-long line is one line_too_long record, its
    bytes read past in chunks, and the lines around it keep their numbers. Lines cut across chunks (a \r\n split
    between two) read as they do whole."""
    import pipelines.tasks.text_records as text_records

    monkeypatch.setattr(text_records, "_LINE_BYTES", 16)
    monkeypatch.setattr(text_records, "_CHUNK", chunk)
    data = b'{"a": 1}\r\n' + b"x" * 40 + b'\n{"b": 2}\n' + b"y" * 40
    records = list(text_lines(io.BytesIO(data)))
    assert [(r[0], r[2]) for r in records] == [(0, '{"a": 1}'), (1, "line_too_long"), (2, '{"b": 2}'),
                                               (3, "line_too_long")]
    assert records[1][3].startswith("x" * 16)
    records = list(text_lines(io.BytesIO(b"a\r\nb\r" + b"z" * 40 + b"\rc"), lone_cr=True))
    assert [r[2] for r in records] == ["a", "b", "line_too_long", "c"]


def test_a_remote_file_is_sniffed_as_a_local_one():
    """fsspec's remote files (s3://, gs://, https://: an AbstractBufferedFile) take no size in readline, which the
    sniff bounds its first line by; text_file gives them one, so a remote JSON array and a remote JSON Lines file are
    told apart as local ones are."""
    from fsspec.spec import AbstractBufferedFile

    class Remote(AbstractBufferedFile):
        def __init__(self, data: bytes):
            self.data = data
            super().__init__(None, "bucket/train.jsonl", "rb", size=len(data))

        def _fetch_range(self, start, end):
            return self.data[start:end]

    with pytest.raises(TypeError):
        Remote(b"{}\n").readline(1)
    array = json.dumps([{"text": "a"}, {"text": "b"}], indent=1).encode()
    path = "s3://bucket/train.jsonl"
    assert [r[2] for r in json_array(path, text_file(path, Remote(array)))] == [{"text": "a"}, {"text": "b"}]
    assert json_array(path, text_file(path, Remote(b'[1]\n{"text": "a"}\n'))) is None


def test_a_json_array_element_nested_past_the_stack_is_one_bad_record():
    deep = b"[" * 100_000 + b"]" * 100_000
    records = list(json_array("deep.jsonl", io.BytesIO(b'[{"text": "a"}, ' + deep + b', {"text": "b"}]')))
    assert [r[2] for r in records] == [{"text": "a"}, "bad_json", {"text": "b"}]



# --- 5. another encoding, named (as_utf8) ---

def test_as_utf8_transcodes_across_its_chunks_and_seeks_to_its_start():
    """Multi-byte characters cut by the transcoder's 64 KiB reads come out whole; a seek to the start (refuse_utf16,
    json_array) reads the file again from its first byte."""
    line = "日本語のテキスト、行\n"
    text = line * 20_000  # ~400 KB of shift_jis
    f = as_utf8(io.BytesIO(text.encode("shift_jis")), check_encoding("shift_jis"))
    assert f.read(5) == line.encode()[:5]
    f.seek(0)
    assert f.read() == text.encode("utf-8")
    f.seek(0)
    assert next(iter(f)) == line.encode() and [*text_lines(f)][0][2] == line[:-1]
    plain = io.BytesIO(b"a\n")
    assert as_utf8(plain, "") is plain and as_utf8(plain, check_encoding("UTF8")) is plain
