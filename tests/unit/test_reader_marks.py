"""What the corpus readers make of byte-order marks and nulls: a UTF-16 file is one reject that says what to do, a
UTF-8 mark opening any line is no text (files joined with `cat`), and a null text is one reason in every format."""

import codecs
import json

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.sources import Span, iter_documents
from pipelines.units import count_newlines
from tests.unit.test_sources import cfg, read, reasons

BODY = "Document {} is about a river that ran by the stone, said at some length here."


def test_a_utf16_file_is_one_reject_that_says_convert_it_to_utf8(tmp_path):
    """Notepad's "Unicode" is UTF-16LE with a byte-order mark: English text was binary_file (its NULs), naming no
    fix, and CJK text (few NULs) went on as UTF-8, a row of invalid_utf8 after another. UTF-16 without a mark keeps
    binary_file (nothing says what it is)."""
    english = "\n\n".join(BODY.format(i) for i in range(3)) + "\n"
    chinese = "\n\n".join("长江是亚洲最长的河流，流经中国的许多省份。" * 3 for _ in range(3)) + "\n"
    jsonl = "".join(json.dumps({"text": BODY.format(i)}) + "\n" for i in range(3))
    files = {"en.txt": english.encode("utf-16"), "zh.txt": chinese.encode("utf-16"),
             "be.jsonl": codecs.BOM_UTF16_BE + jsonl.encode("utf-16-be"), "notes": english.encode("utf-16"),
             "wide.txt": english.encode("utf-32")}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        rows = read(tmp_path / name, name)
        assert reasons(rows) == [(name, "utf16_file")], name
        utf = "UTF-32" if name == "wide.txt" else "UTF-16"
        assert rows[0]["sample"] == f"{utf} text (its byte-order mark): convert it to UTF-8 (iconv -f {utf} -t UTF-8)"
    (tmp_path / "bare.txt").write_bytes(english.encode("utf-16-le"))
    assert reasons(read(tmp_path / "bare.txt", "bare.txt")) == [("bare.txt", "binary_file")]


def test_jsonl_files_joined_with_their_byte_order_marks_lose_no_record(tmp_path):
    """`cat a.jsonl b.jsonl` of files each saved with a UTF-8 byte-order mark: the first record of every file after the
    first was malformed_json. Read whole or in ranges, every record is a document."""
    def part(numbers, end):
        return codecs.BOM_UTF8 + b"".join(json.dumps({"text": BODY.format(i)}).encode() + end for i in numbers)

    path = tmp_path / "all.jsonl"
    path.write_bytes(part(range(3), b"\n") + part(range(3, 6), b"\r\n") + part(range(6, 9), b"\n"))
    rows = read(path, "all.jsonl")
    assert [(r["doc_id"], r["reject_reason"], r["text"]) for r in rows] == [
        (f"all.jsonl#{i}", "", BODY.format(i)) for i in range(9)]
    size, ranged = path.stat().st_size, []
    for start in range(0, size, 200):
        span = Span(start, start + 200 if start + 200 < size else -1, count_newlines(str(path), 0, start))
        ranged += iter_documents(str(path), "all.jsonl", cfg(path), span)
    assert ranged == rows


def doc(i: int, mark: bytes = b"") -> bytes:
    return mark + f'<doc id="{i}" url="u?curid={i}" title="A{i}">\nA{i}\n\n{BODY.format(i)}\n</doc>\n'.encode()


def test_wikiextractor_files_joined_with_byte_order_marks_keep_every_article(tmp_path):
    """A byte-order mark before a later file's <doc> line hid the line, and the whole article was dropped with no
    reject row."""
    path = tmp_path / "wiki_00"
    path.write_bytes(doc(1, codecs.BOM_UTF8) + doc(2) + doc(3, codecs.BOM_UTF8) + doc(4, codecs.BOM_UTF8))
    assert [(r["doc_id"], r["reject_reason"], r["text"]) for r in read(path, "w")] == [
        (f"w#{line}", "", BODY.format(i)) for i, line in zip(range(1, 5), range(0, 20, 5))]


def test_lines_outside_doc_blocks_are_counted_once_whole_or_in_ranges(tmp_path):
    """Lines outside a <doc> block (a note a tool or a person added, a block whose <doc> line was damaged) are no
    article's; they were dropped silently. Each stretch of them up to the next <doc> is one outside_doc_block row,
    from the range that reads it, whatever the cuts."""
    damaged = doc(3).replace(b"<doc id", b"<dco id")
    data = doc(1) + b"\n" + doc(2) + b"stray note\nmore\n" + damaged + doc(4) + b"trailing words\n"
    path = tmp_path / "wikicorpus_en.txt"  # a .txt opening with <doc: read as WikiExtractor's, planned in ranges
    path.write_bytes(data)
    rows = read(path, "w")
    assert reasons(rows) == [("w#0", ""), ("w#6", ""), ("w#11", "outside_doc_block"), ("w#18", ""),
                             ("w#23", "outside_doc_block")]
    assert rows[2]["sample"] == "stray note" and rows[4]["sample"] == "trailing words"
    size = path.stat().st_size
    for step in (37, 64, 150):
        ranged = []
        for start in range(0, size, step):
            span = Span(start, start + step if start + step < size else -1, count_newlines(str(path), 0, start))
            ranged += iter_documents(str(path), "w", cfg(path), span)
        assert ranged == rows, step
    (tmp_path / "wiki_00").write_bytes(b"A header line a script wrote.\n\n" + doc(1))
    assert reasons(read(tmp_path / "wiki_00", "w", format="wikiextractor")) == [("w#0", "outside_doc_block"),
                                                                                ("w#2", "")]


def test_a_null_text_is_an_empty_document_in_parquet_jsonl_and_a_json_array(tmp_path):
    """A parquet null was empty_document, a JSON null missing_text_column (which says: set data.text_column). A
    record without the field, or with a number there, stays missing_text_column."""
    records = [{"text": BODY.format(0)}, {"text": None}, {"body": BODY.format(2)}, {"text": 7}]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "r.json").write_text(json.dumps(records))
    pq.write_table(pa.table({"text": [BODY.format(0), None]}), tmp_path / "r.parquet")
    expected = [("#0", ""), ("#1", "empty_document"), ("#2", "missing_text_column"), ("#3", "missing_text_column")]
    for name in ("r.jsonl", "r.json"):
        assert reasons(read(tmp_path / name, "")) == expected, name
    assert reasons(read(tmp_path / "r.parquet", "")) == expected[:2]
