"""JSON array files (a .json file holding one array of records): each element is a record, read in bounded memory
by the range at byte zero, and a damaged array keeps the elements before the damage."""

import gzip
import io
import json
import lzma
import tracemalloc

import pyarrow as pa
import pytest

from pipelines import json_array as arrays
from pipelines.sources import Span, iter_documents
from tests.unit.test_sources import BOOK, cfg, read, reasons


def json_array(n: int) -> list:
    return [{"id": i, "text": f"Document number {i} of the array, long enough."} for i in range(n)]


def test_json_array_file_elements_are_records(tmp_path, monkeypatch):
    path = tmp_path / "docs.json"
    path.write_text(json.dumps(json_array(1000)))
    rows = read(path, "d")
    assert reasons(rows) == [(f"d#{i}", "") for i in range(1000)]
    assert rows[999]["text"] == "Document number 999 of the array, long enough."
    elements = [json.dumps({"text": BOOK}).encode(), b'{"text": ""}', b'{"text": "tiny"}', b'{"body": "x"}',
                b'["a list"]', b"42", b'"a string"', b'{"text": "\xff\xfe bad bytes"}', b'{"text": "trailing" "x"}',
                b'{"text": "' + b"z" * 5000 + b'"}', b'{"text": "Escaped \\"quotes\\" and \\\\ all, ok."}']
    path.write_bytes(b"\xef\xbb\xbf [\n  " + b",\n  ".join(elements) + b"\n]\n")
    expected = [("d#0", ""), ("d#1", "empty_document"), ("d#2", "too_short"), ("d#3", "missing_text_column"),
                ("d#4", "malformed_json"), ("d#5", "malformed_json"), ("d#6", "malformed_json"),
                ("d#7", "invalid_utf8"), ("d#8", "malformed_json"), ("d#9", "line_too_long"), ("d#10", "")]
    rows = read(path, "d", max_line_bytes=4096)
    assert reasons(rows) == expected and rows[10]["text"] == 'Escaped "quotes" and \\ all, ok.'
    for chunk in [1, 2, 7, 64]:  # elements, strings, escapes and UTF-8 cut across chunks read the same
        monkeypatch.setattr(arrays, "CHUNK", chunk)
        assert read(path, "d", max_line_bytes=4096) == rows, chunk


def test_lone_surrogate_escape_is_invalid_utf8(tmp_path):
    """Half an emoji escaped in JSON has no UTF-8 form: a row holding it would fail the whole Arrow block."""
    record = b'{"text": "A record cut inside an emoji \\ud83d, long enough to keep."}'
    (tmp_path / "a.jsonl").write_bytes(record + b"\n" + json.dumps({"text": BOOK}).encode())
    (tmp_path / "b.json").write_bytes(b"[" + record + b"]")
    rows = read(tmp_path / "a.jsonl", "a") + read(tmp_path / "b.json", "b")
    assert reasons(rows) == [("a#0", "invalid_utf8"), ("a#1", ""), ("b#0", "invalid_utf8")]
    assert rows[0]["sample"] == record.decode() and pa.Table.from_pylist(rows).num_rows == 3


def test_broken_json_array_keeps_the_elements_before_the_damage(tmp_path):
    data = json.dumps(json_array(5)).encode()
    cases = {"cut.json": data[:-30], "garbage.json": data + b" {}", "nocomma.json": data.replace(b"}, {", b"} {", 1)}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
    got = {n: reasons(read(tmp_path / n, "d")) for n in cases}
    assert got == {"cut.json": [(f"d#{i}", "") for i in range(4)] + [("d#4", "malformed_json")],
                   "garbage.json": [(f"d#{i}", "") for i in range(5)] + [("d#5", "malformed_json")],
                   "nocomma.json": [("d#0", ""), ("d#1", "malformed_json")]}
    (tmp_path / "cut.json.gz").write_bytes(gzip.compress(json.dumps(json_array(200)).encode())[:-40])
    rows = read(tmp_path / "cut.json.gz", "cut")
    assert rows[-1]["doc_id"] == "cut" and rows[-1]["reject_reason"] == "truncated_gzip"
    assert all(r["reject_reason"] == "" for r in rows[:-1]) and len(rows) > 150
    (tmp_path / "lines.jsonl").write_bytes(b'["a list"]\n' + json.dumps({"text": BOOK}).encode())
    assert reasons(read(tmp_path / "lines.jsonl", "l")) == [("l#0", "malformed_json"), ("l#1", "")]  # lines still


def test_json_array_is_read_whole_by_the_range_at_byte_zero(tmp_path):
    """units.py cuts a big .json file into byte ranges as if it were JSON lines: the array is read once."""
    path = tmp_path / "docs.json"
    path.write_text(json.dumps(json_array(300), indent=1))
    data, config = path.read_bytes(), cfg(path)
    cuts = [0, len(data) // 3, 2 * len(data) // 3]
    spans = [Span(a, b, data[:a].count(b"\n")) for a, b in zip(cuts, cuts[1:] + [-1])]
    per_span = [list(iter_documents(str(path), "d", config, span)) for span in spans]
    assert [len(rows) for rows in per_span] == [300, 0, 0]
    assert per_span[0] == read(path, "d")


def test_json_array_streams_in_bounded_memory(tmp_path, monkeypatch):
    """A 2.7 MB array holding a 2 MB element over the limit: memory for a chunk or two, not the file."""
    path = tmp_path / "big.json"
    big = {"text": "x" * 2_000_000}
    path.write_text(json.dumps(json_array(10_000)[:5000] + [big] + json_array(10_000)[5000:]))
    monkeypatch.setattr(arrays, "CHUNK", 1 << 16)
    tracemalloc.start()
    counts = {}
    for row in iter_documents(str(path), "big", cfg(path, max_line_bytes=100_000)):
        counts[row["reject_reason"]] = counts.get(row["reject_reason"], 0) + 1
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert counts == {"": 10_000, "line_too_long": 1}
    assert path.stat().st_size > 2.5e6 and peak < 1e6, peak


def test_a_json_array_keeps_the_elements_read_before_an_xz_error(monkeypatch):
    """An xz stream's error is lzma.LZMAError, no OSError: it was raised at once, dropping the part of the chunk
    read before it, every element in it lost uncounted. It waits, as gzip's and bz2's do, until those are used."""
    data = json.dumps(json_array(400)).encode()
    cut = len(data) // 2

    class CorruptAtCut(io.BytesIO):  # what lzma.LZMAFile does at a damaged block
        def read1(self, n=-1):
            if self.tell() >= cut:
                raise lzma.LZMAError("Corrupt input data")
            return super().read1(min(n, 1000, cut - self.tell()))

    got = []
    with pytest.raises(lzma.LZMAError):
        for element in arrays.elements(CorruptAtCut(data), 10_000):
            got.append(element.value)
    assert got == json_array(400)[:len(got)] and len(json.dumps(got)) >= cut - 200
