"""Source resolution and the per-file readers (what each Ray task runs), without Ray."""

import bz2
import gzip
import json
import os
import tracemalloc

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import json_array as arrays
from pipelines.config import DataConfig
from pipelines.source_files import SourceError, doc_order_key, relative_names, resolve_sources
from pipelines.sources import Span, file_format, iter_documents

BOOK = "It was a bright cold day in April, and the clocks were striking thirteen.\n" * 3


def cfg(*sources, **kw) -> DataConfig:
    kw.setdefault("min_document_chars", 20)
    return DataConfig(sources=[str(s) for s in sources], **kw)


def read(path, name="f", **kw) -> list[dict]:
    return list(iter_documents(str(path), name, cfg(path, **kw)))


def reasons(rows) -> list[tuple[str, str]]:
    return [(r["doc_id"], r["reject_reason"]) for r in rows]


def make_tree(root):
    for rel in ["a.txt", "sub/b.jsonl", "sub/deeper/c.txt", "sub/.hidden.txt", ".git/config", "d.parquet"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")


# ---------------------------------------------------------------------------- resolve_sources

def test_directories_expand_recursively_sorted_without_hidden(tmp_path):
    make_tree(tmp_path)
    assert resolve_sources(cfg(tmp_path)) == [
        str(tmp_path / p) for p in ["a.txt", "d.parquet", "sub/b.jsonl", "sub/deeper/c.txt"]]


def test_globs_and_overlapping_sources(tmp_path):
    make_tree(tmp_path)
    assert resolve_sources(cfg(tmp_path / "*.txt")) == [str(tmp_path / "a.txt")]  # "*" stays in one folder
    assert resolve_sources(cfg(tmp_path / "**" / "*.txt", tmp_path / "a.txt")) == [
        str(tmp_path / "a.txt"), str(tmp_path / "sub/deeper/c.txt")]


def test_file_uri_and_fsspec_filesystem(tmp_path):
    make_tree(tmp_path)
    assert resolve_sources(cfg(f"file://{tmp_path}/sub/b.jsonl")) == [str(tmp_path / "sub/b.jsonl")]
    fs = fsspec.filesystem("memory")
    fs.pipe("/corpus/x/one.txt", BOOK.encode())
    fs.pipe("/corpus/two.jsonl", json.dumps({"text": BOOK}).encode())
    files = resolve_sources(cfg("memory://corpus"))
    assert files == ["memory:///corpus/two.jsonl", "memory:///corpus/x/one.txt"]
    rows = [r for f, n in zip(files, relative_names(files)) for r in iter_documents(f, n, cfg(f))]
    assert reasons(rows) == [("two.jsonl#0", ""), ("x/one.txt#0", "")]


def test_a_remote_corpus_reads_as_a_local_one(tmp_path):
    """A remote filesystem's file (s3, gcs, http: fsspec's AbstractBufferedFile) takes no size in readline, which
    the text and JSON Lines readers bound each line by: a corpus on one reads as the same files do locally, whole
    and in byte ranges."""
    from fsspec.implementations.memory import MemoryFileSystem
    from fsspec.spec import AbstractBufferedFile

    class RemoteFile(AbstractBufferedFile):
        def _fetch_range(self, start, end):
            return self.fs.cat_file(self.path)[start:end]

    class RemoteFS(MemoryFileSystem):  # memory's listing, a remote store's files
        protocol = "remotetest"

        @classmethod
        def _strip_protocol(cls, path):
            return MemoryFileSystem._strip_protocol(path.replace("remotetest://", "memory://", 1))

        def _open(self, path, mode="rb", **kwargs):
            return RemoteFile(self, path, mode, size=self.size(path)) if mode == "rb" else super()._open(
                path, mode, **kwargs)

    fsspec.register_implementation("remotetest", RemoteFS, clobber=True)
    fs = fsspec.filesystem("remotetest")
    fs.pipe("/remote-corpus/probe", b"x\n")
    with pytest.raises(TypeError), fs.open("/remote-corpus/probe") as f:  # what the readers met
        f.readline(1)
    fs.rm("/remote-corpus/probe")
    books = {"a.txt": (BOOK * 40).encode(), "b.jsonl": b"".join(json.dumps({"text": BOOK + str(i)}).encode() + b"\n"
                                                                  for i in range(30))}
    for name, data in books.items():
        fs.pipe(f"/remote-corpus/{name}", data)
        (tmp_path / name).write_bytes(data)
        remote = read(f"remotetest:///remote-corpus/{name}", name)
        local = read(tmp_path / name, name)
        assert remote and [{**r, "source": ""} for r in remote] == [{**r, "source": ""} for r in local]
        spans = (Span(0, len(data) // 2), Span(len(data) // 2, -1))  # as two tasks read a big file
        ranges = [[r["text"] for span in spans for r in iter_documents(path, name, cfg(path), span)]
                  for path in (f"remotetest:///remote-corpus/{name}", str(tmp_path / name))]
        assert ranges[0] == ranges[1] == [r["text"] for r in local]


def test_missing_or_unreadable_sources_raise_naming_the_path(tmp_path):
    with pytest.raises(SourceError, match="nothing-here"):
        resolve_sources(cfg(tmp_path / "nothing-here"))
    with pytest.raises(SourceError, match=r"\*\.xml"):
        resolve_sources(cfg(tmp_path / "*.xml"))
    (tmp_path / "empty-dir").mkdir()
    with pytest.raises(SourceError, match="empty-dir"):
        resolve_sources(cfg(tmp_path / "empty-dir"))
    with pytest.raises(SourceError, match="nosuchproto"):
        resolve_sources(cfg("nosuchproto://bucket/x"))


def test_broken_symlink_is_reported(tmp_path):
    (tmp_path / "dangling.txt").symlink_to(tmp_path / "gone.txt")
    with pytest.raises(SourceError, match="dangling.txt"):
        resolve_sources(cfg(tmp_path / "dangling.txt"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_permission_denied_raises(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text(BOOK)
    path.chmod(0)
    with pytest.raises(SourceError, match="secret.txt"):
        resolve_sources(cfg(tmp_path))


def test_file_vanishing_after_resolution_raises_naming_it(tmp_path):
    with pytest.raises(SourceError, match="vanished.txt"):
        list(iter_documents(str(tmp_path / "vanished.txt"), "vanished.txt", cfg(tmp_path)))


def test_relative_names_and_doc_order():
    assert relative_names(["/data/corpus/a.txt", "/data/corpus/x/b.txt"]) == ["a.txt", "x/b.txt"]
    assert relative_names(["s3://b/corpus/a.txt"]) == ["a.txt"]
    # a file name that is not UTF-8 (os.listdir gives its bytes as surrogate escapes): an id Arrow, JSON and
    # hashing take, showing the bytes
    latin1 = "/data/corpus/" + os.fsdecode(b"caf\xe9.txt")
    assert relative_names([latin1, "/data/corpus/b.txt"]) == ["caf\\xe9.txt", "b.txt"]
    ids = ["b#0", "a#10", "a#9", "a", "a#-1"]
    assert sorted(ids, key=doc_order_key) == ["a", "a#-1", "a#9", "a#10", "b#0"]


# ------------------------------------------------------------------------------------ readers

def test_text_book_is_one_document_with_paragraphs(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("  Chapter  1\r\n\r\n" + BOOK + "\n\n\n\nThe end of it all, at last.\n")
    [row] = read(path, "book.txt")
    assert row["doc_id"] == "book.txt#0" and row["reject_reason"] == "" and row["sample"] == ""
    assert row["source"] == str(path)
    assert row["text"].split("\n\n") == ["Chapter 1", BOOK.strip(), "The end of it all, at last."]


def test_text_rejects(tmp_path):
    (tmp_path / "short.txt").write_text("Too short.")
    (tmp_path / "blank.txt").write_text(" \n\t\n")
    (tmp_path / "latin1.txt").write_bytes(BOOK.encode() + "caf\xe9".encode("latin-1"))
    (tmp_path / "long.txt").write_bytes(BOOK.encode() + b"y" * 5000 + b"\n" + BOOK.encode())
    got = {p.name: read(p, p.name, max_line_bytes=4096) for p in tmp_path.iterdir()}
    assert {n: reasons(r) for n, r in got.items()} == {
        "short.txt": [("short.txt#0", "too_short")], "blank.txt": [("blank.txt#0", "empty_document")],
        "latin1.txt": [("latin1.txt#0", "invalid_utf8")], "long.txt": [("long.txt#0", "line_too_long")]}
    assert got["short.txt"][0]["sample"] == "Too short."
    assert got["latin1.txt"][0]["sample"].endswith("caf\ufffd") and got["long.txt"][0]["sample"] == "y" * 200
    assert all(r["text"] == "" for rows in got.values() for r in rows)


def test_plain_text_in_the_encoding_named(tmp_path):
    """An older Project Gutenberg book is latin-1 or cp1252: read as UTF-8 it is rejected whole (invalid_utf8); with
    data.text_encoding named, each is its text; a byte the encoding does not define rejects
    its document (invalid_cp1252), its sample decoded in that encoding. An encoding whose \\n is not the byte \\n
    (UTF-16) or that Python lacks is refused by the config; UTF-8 corpora keep their prepared sets' names."""
    from bert_core.config import ConfigError
    from pipelines.layout import dataset_name, hashed_config

    book = "Le café du coin était fermé.\n" * 4
    (tmp_path / "gutenberg.txt").write_bytes(book.encode("latin-1"))
    assert reasons(read(tmp_path / "gutenberg.txt", "g")) == [("g#0", "invalid_utf8")]
    [row] = read(tmp_path / "gutenberg.txt", "g", text_encoding="latin-1")
    assert row["text"].startswith("Le café du coin était fermé.") and row["reject_reason"] == ""
    quotes = "“Quoted” – and so on, at length.\n" * 3
    (tmp_path / "quotes.txt").write_bytes(quotes.encode("cp1252") + b"\n" + b"bad \x81 byte " * 3 + b"\n")
    path = tmp_path / "quotes.txt"
    whole = list(iter_documents(str(path), "q", cfg(path, text_encoding="cp1252")))
    assert [r["reject_reason"] for r in whole] == ["invalid_cp1252"] and "“Quoted”" in whole[0]["sample"]
    for name, message in (("utf-16", "not ASCII-compatible"), ("cp-1252", "not a text encoding Python knows")):
        with pytest.raises(ConfigError, match=message):
            cfg(tmp_path, text_encoding=name).validate()
    assert "text_encoding" not in hashed_config(cfg(tmp_path))  # a UTF-8 corpus hashes as before the setting
    assert "text_encoding" not in hashed_config(cfg(tmp_path, text_encoding="UTF8"))  # named or not
    name = {e: dataset_name(cfg(tmp_path, text_encoding=e), [], None) for e in ("", "cp1252", "latin1", "latin-1")}
    assert name[""] != name["cp1252"] != name["latin1"] == name["latin-1"]


def test_jsonl_records_and_their_rejects(tmp_path):
    path = tmp_path / "wiki_00.jsonl"
    lines = [json.dumps({"id": "1", "url": "u", "title": "T", "text": BOOK}).encode(),
             b"",  # blank lines are not records
             b'{"id": "2", "text": ""}',
             b'{"id": "3", "text": "tiny"}',
             b'{"id": "4", "text": "unterminated',
             b'{"id": "5", "body": "wrong column"}',
             b'["a list"]',
             b'{"id": "6", "text": "\xff\xfe bad bytes"}',
             b'{"id": "7", "text": "' + b"z" * 10000 + b'"}',
             json.dumps({"id": "8", "text": "Second good one. " * 3}).encode()]
    path.write_bytes(b"\n".join(lines))
    rows = read(path, "w", max_line_bytes=4096)
    assert reasons(rows) == [("w#0", ""), ("w#2", "empty_document"), ("w#3", "too_short"),
                             ("w#4", "malformed_json"), ("w#5", "missing_text_column"),
                             ("w#6", "malformed_json"), ("w#7", "invalid_utf8"), ("w#8", "line_too_long"),
                             ("w#9", "")]
    assert rows[0]["text"] == BOOK.strip() and rows[-1]["text"] == ("Second good one. " * 3).strip()
    assert rows[3]["sample"] == '{"id": "4", "text": "unterminated'
    assert len(rows[7]["sample"]) == 200


def test_text_column_and_format_override(tmp_path):
    path = tmp_path / "docs.data"  # unknown extension: read as the configured format
    path.write_text(json.dumps({"body": BOOK}) + "\n")
    [row] = read(path, "d", format="jsonl", text_column="body")
    assert row["reject_reason"] == "" and row["text"] == BOOK.strip()
    [row] = read(path, "d", format="text")
    assert row["text"].startswith('{"body"')


def test_extensionless_wikiextractor_files_are_sniffed(tmp_path):
    (tmp_path / "wiki_00").write_text(json.dumps({"id": "9", "text": BOOK}) + "\n")
    (tmp_path / "README").write_text(BOOK)
    assert reasons(read(tmp_path / "wiki_00", "wiki_00")) == [("wiki_00#0", "")]
    assert read(tmp_path / "README", "README")[0]["text"] == BOOK.strip()


def test_gzip_and_truncated_gzip(tmp_path):
    data = "\n".join(json.dumps({"text": f"Document number {i}. " * 5}) for i in range(200)).encode()
    (tmp_path / "ok.jsonl.gz").write_bytes(gzip.compress(data))
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(data)[:-40])
    assert [r["reject_reason"] for r in read(tmp_path / "ok.jsonl.gz")] == [""] * 200
    rows = read(tmp_path / "cut.jsonl.gz", "cut")
    assert rows[-1]["doc_id"] == "cut" and rows[-1]["reject_reason"] == "truncated_gzip"
    assert all(r["reject_reason"] == "" for r in rows[:-1]) and len(rows) > 150


def test_binary_and_empty_files(tmp_path):
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (tmp_path / "nul.txt").write_bytes(BOOK.encode() + b"\x00\x01\x02")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "empty.txt.bz2").write_bytes(b"")
    got = {p.name: reasons(read(p, p.name)) for p in tmp_path.iterdir()}
    assert got == {"img.png": [("img.png", "binary_file")], "nul.txt": [("nul.txt", "binary_file")],
                   "empty.jsonl": [("empty.jsonl", "empty_file")],
                   "empty.txt.bz2": [("empty.txt.bz2", "empty_file")]}


def test_parquet(tmp_path):
    pq.write_table(pa.table({"text": [BOOK, None, "short", "Another fine document here."],
                             "id": [1, 2, 3, 4]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"body": [BOOK]}), tmp_path / "b.parquet")
    (tmp_path / "c.parquet").write_bytes(b"PAR1 not really parquet PAR1")
    assert reasons(read(tmp_path / "a.parquet", "a")) == [
        ("a#0", ""), ("a#1", "empty_document"), ("a#2", "too_short"), ("a#3", "")]
    assert reasons(read(tmp_path / "b.parquet", "b")) == [("b", "missing_text_column")]
    assert reasons(read(tmp_path / "c.parquet", "c")) == [("c", "malformed_parquet")]


def test_parquet_binary_text_is_decoded_and_other_column_types_are_named(tmp_path):
    for kind in [pa.binary(), pa.large_binary()]:
        values = pa.array([BOOK.encode(), None, b"caf\xe9 " * 10, "Another fine document here.".encode()], kind)
        pq.write_table(pa.table({"text": values}), tmp_path / "bin.parquet")
        rows = read(tmp_path / "bin.parquet", "b")
        assert reasons(rows) == [("b#0", ""), ("b#1", "empty_document"), ("b#2", "invalid_utf8"), ("b#3", "")]
        assert rows[0]["text"] == BOOK.strip() and rows[2]["sample"].startswith("caf\ufffd")
    pq.write_table(pa.table({"text": [["a", "list"]] * 5}), tmp_path / "list.parquet")
    pq.write_table(pa.table({"text": [{"body": BOOK}] * 5}), tmp_path / "struct.parquet")
    for name, kind in [("list", "list<element: string>"), ("struct", "struct<body: string>")]:
        [row] = read(tmp_path / f"{name}.parquet", name)
        assert (row["doc_id"], row["reject_reason"]) == (name, "missing_text_column")
        assert row["sample"] == f"column 'text' is {kind}, not string or binary"


def test_a_byte_order_mark_is_not_part_of_the_first_record(tmp_path):
    bom, record = b"\xef\xbb\xbf", json.dumps({"text": BOOK}).encode()
    (tmp_path / "a.jsonl").write_bytes(bom + record + b"\n" + record.replace(b"April", b"May"))
    (tmp_path / "wiki_00").write_bytes(bom + record + b"\n")  # sniffed as JSON lines, not trained on as text
    (tmp_path / "book.txt").write_bytes(bom + BOOK.encode())
    (tmp_path / "array.json").write_bytes(bom + b"[" + record + b"]")
    got = {p.name: read(p, p.name) for p in tmp_path.iterdir()}
    assert {n: reasons(r) for n, r in got.items()} == {
        "a.jsonl": [("a.jsonl#0", ""), ("a.jsonl#1", "")], "wiki_00": [("wiki_00#0", "")],
        "book.txt": [("book.txt#0", "")], "array.json": [("array.json#0", "")]}
    assert {r["text"] for r in [got["a.jsonl"][0], got["wiki_00"][0], got["book.txt"][0]]} == {BOOK.strip()}


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


def test_corrupt_compressed_files(tmp_path):
    (tmp_path / "junk.txt.bz2").write_bytes(b"BZh9" + bytes(range(200)))
    (tmp_path / "junk.jsonl.gz").write_bytes(b"not gzip at all")
    (tmp_path / "blank.xml").write_bytes(b"  \n")
    got = {p.name: reasons(read(p, p.name)) for p in tmp_path.iterdir()}
    assert got == {"junk.txt.bz2": [("junk.txt.bz2", "corrupt_bz2")],
                   "junk.jsonl.gz": [("junk.jsonl.gz", "corrupt_gzip")],
                   "blank.xml": [("blank.xml", "malformed_xml")]}


# ---------------------------------------------------------------------------- dedup and reject log

def test_find_duplicates_keeps_the_first_in_order_of_each_hash():
    from pipelines.dedup import content_hashes, find_duplicates

    texts = ["a", "b", "a", "c", "b", "a"]
    order = [5, 1, 0, 3, 4, 2]  # the "a" with order 0 (index 2) and the "b" with order 1 (index 1) stay
    dup = find_duplicates(content_hashes(texts), np.array(order))
    assert dup.tolist() == [True, False, False, False, True, True]
    assert content_hashes(["x"]).shape == (1, 2) and not find_duplicates(content_hashes([]), order[:0]).any()


def test_reject_log_merges_to_the_same_result_in_any_order(tmp_path):
    from pipelines.rejects import RejectLog

    def log(ids):
        out = RejectLog(samples_per_reason=3)
        for i in ids:
            out.add("too_short" if i % 2 else "malformed_json", f"f#{i}", "/data/f", f"sample {i}")
        return out

    one, two = log(range(10, 0, -1)), log(range(1, 11))
    merged_a, merged_b = RejectLog(3), RejectLog(3)
    merged_a.update(RejectLog.from_json(one.to_json()))
    merged_a.update(log([11, 12]))
    merged_b.update(log([12, 11]))
    merged_b.update(two)
    assert merged_a.summary() == merged_b.summary() == {"malformed_json": 6, "too_short": 6}
    merged_a.write(str(tmp_path / "a.jsonl"))
    merged_b.write(str(tmp_path / "b.jsonl"))
    lines = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    # Three per reason, smallest doc_ids as numbers ("f#10" after "f#9").
    assert [r["doc_id"] for r in lines] == ["f#2", "f#4", "f#6", "f#1", "f#3", "f#5"]
    assert lines[0] == {"path": "/data/f", "doc_id": "f#2", "reason": "malformed_json", "sample": "sample 2"}


# ---------------------------------------------------------------------------- any file name

ODD_NAMES = ["Dpkg::Source.txt", "notes#2.txt", "why?.jsonl", "star*.txt", "with space.txt", "Привет мир.txt",
             "a::b#c?d*e.jsonl"]


def test_local_paths_with_any_characters_read_as_those_files(tmp_path):
    for name in ODD_NAMES:
        path = tmp_path / name
        path.write_text(json.dumps({"text": BOOK}) + "\n" if name.endswith(".jsonl") else BOOK)
    files = resolve_sources(cfg(tmp_path))
    assert files == sorted(str(tmp_path / n) for n in ODD_NAMES)
    for name in ODD_NAMES:  # each named on its own, literally, even where it looks like a glob
        assert resolve_sources(cfg(tmp_path / name)) == [str(tmp_path / name)]
    rows = [r for f, n in zip(files, relative_names(files)) for r in iter_documents(f, n, cfg(f))]
    assert sorted(reasons(rows)) == sorted((f"{n}#0", "") for n in ODD_NAMES)
    assert resolve_sources(cfg(f"file://{tmp_path}/Dpkg::Source.txt")) == [str(tmp_path / "Dpkg::Source.txt")]
    assert resolve_sources(cfg(tmp_path / "*::*")) == [str(tmp_path / n) for n in sorted(ODD_NAMES) if "::" in n]
    from pipelines.layout import fingerprint_inputs
    assert [i["bytes"] for i in fingerprint_inputs(files)] == [os.path.getsize(f) for f in files]


# ---------------------------------------------------------------------------- review fixes

WIKI = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">\n'
        "  <siteinfo><sitename>Wikipedia</sitename></siteinfo>\n")


def wiki_page(page_id: int, title: str, ns: int = 0) -> str:
    return (f"  <page><title>{title}</title><ns>{ns}</ns><id>{page_id}</id><revision><id>{page_id}0</id>"
            f"<text xml:space=\"preserve\">'''{title}''' is a [[thing]]. {BOOK}</text></revision></page>\n")


def test_split_wikipedia_dump_parts_and_sniffed_xml_are_wiki_xml(tmp_path):
    """dumps.wikimedia.org names its parts `...-multistream1.xml-p1p41242.bz2`: wiki XML by name, split at its
    streams as a `.xml.bz2` dump is; a file whose name says nothing is wiki XML by its head."""
    from pipelines.units import file_parts

    pages = [wiki_page(1, "Talk:Foo", ns=1)] + [wiki_page(i, f"Page {i}") for i in range(2, 12)]
    name = "enwiki-20240601-pages-articles-multistream1.xml-p1p41242.bz2"
    path = tmp_path / name
    path.write_bytes(bz2.compress(WIKI.encode()) + b"".join(bz2.compress("".join(pages[i:i + 3]).encode())
                                                            for i in range(0, len(pages), 3))
                     + bz2.compress(b"</mediawiki>\n"))
    expected = [(f"{name}#1", "non_article_namespace")] + [(f"{name}#{i}", "") for i in range(2, 12)]
    rows = read(path, name)
    assert reasons(rows) == expected and rows[1]["text"].startswith("Page 2 is a thing.")
    assert file_format(str(path)[:-len(".bz2")], cfg(path)) == "wiki_xml"
    parts = file_parts([str(path)], [{"bytes": path.stat().st_size}], cfg(path), 200)
    assert len(parts) > 2 and {p["kind"] for p in parts} == {"bz2_streams"}
    assert sorted(reasons(r for p in parts for r in iter_documents(
        str(path), name, cfg(path), Span(p["start"], p["end"])))) == sorted(expected)
    xml = (WIKI + wiki_page(5, "Foo") + "</mediawiki>\n").encode()
    for head in (b'<?xml version="1.0" encoding="utf-8"?>\n', b"\xef\xbb\xbf \n", b""):
        (tmp_path / "dump").write_bytes(head + xml)
        assert reasons(read(tmp_path / "dump", "dump")) == [("dump#5", "")]
    (tmp_path / "feed").write_bytes(b'<?xml version="1.0"?>\n<rss><item>' + BOOK.encode() + b"</item></rss>\n")
    assert reasons(read(tmp_path / "feed", "feed")) == [("feed#0", "")]  # not a dump: text, as before


def blank_line_gap_text() -> bytes:
    """3.5 MiB of paragraphs between blank lines, but for 0.9-2.4 MiB: lines with no blank line between."""
    out, size, i = [], 0, 0
    while size < int(3.5 * (1 << 20)):
        gap = int(0.9 * (1 << 20)) <= size < int(2.4 * (1 << 20))
        line = f"Sentence {i} of the book, long enough to read as a line of prose in it.\n" + ("" if gap else "\n")
        out.append(line)
        size, i = size + len(line), i + 1
    return "".join(out).encode()


def test_text_ranges_read_the_whole_files_documents_once(tmp_path):
    """A range with no cut (blank line) inside it owns nothing: the document across it starts in a range before."""
    path = tmp_path / "book.txt"
    data = blank_line_gap_text()
    path.write_bytes(data)
    whole = read(path, "book.txt")
    cuts = list(range(0, len(data), 1 << 20))
    spans = [Span(a, b, data[:a].count(b"\n")) for a, b in zip(cuts, cuts[1:] + [-1])]
    split = [r for span in spans for r in iter_documents(str(path), "book.txt", cfg(path), span)]
    assert len(whole) == 3 and split == whole


def test_a_file_without_blank_lines_is_cut_into_bounded_documents_the_same_in_any_ranges(tmp_path):
    """One sentence a line and no blank line (BookCorpus's books_large_p1.txt: 2 GB) was one document the size of
    the file, held whole by one task. A document goes on as the next at its next line once it reaches
    MAX_TEXT_DOCUMENT_BYTES; every text byte lands in exactly one document, however the file is split into ranges,
    and trailing blank lines after such a cut are no empty document."""
    from pipelines.sources import MAX_TEXT_DOCUMENT_BYTES

    line = "A sentence of the corpus, one to a line, with no blank line anywhere in the file at all.\n"
    per_document = -(-MAX_TEXT_DOCUMENT_BYTES // len(line))  # lines: the third document's cut is the file's end
    data = (line * 3 * per_document + "\n").encode()
    path = tmp_path / "books_large_p1.txt"
    path.write_bytes(data)
    whole = read(path, "books")
    assert len(whole) == 3 and not [r for r in whole if r["reject_reason"]]
    assert all(len(r["text"].encode()) <= MAX_TEXT_DOCUMENT_BYTES + len(line) for r in whole)
    assert "".join(r["text"].replace("\n", " ") + " " for r in whole).split() == data.decode().split()
    lines = [int(r["doc_id"].split("#")[1]) for r in whole]
    assert lines == [0, per_document, 2 * per_document]
    cuts = list(range(0, len(data), 1 << 20))
    spans = [Span(a, b, data[:a].count(b"\n")) for a, b in zip(cuts, cuts[1:] + [-1])]
    assert [r for span in spans for r in iter_documents(str(path), "books", cfg(path), span)] == whole


def test_parquet_invalid_utf8_in_a_string_column_rejects_that_row_only(tmp_path):
    """A string column holding one latin-1 value: that row is invalid_utf8 (to_pylist of the batch would fail it
    whole), the others are read, and a range reads its own rejects."""
    texts = [f"Document number {i} of the table. ".encode() * 2 for i in range(3000)]
    texts[2500] = "Un caf\xe9 au coin de la rue. ".encode("latin-1") * 2
    values = pa.array(texts, pa.binary())
    pq.write_table(pa.table({"text": pa.Array.from_buffers(pa.string(), len(values), values.buffers())}),
                   tmp_path / "t.parquet", row_group_size=1000)
    path = str(tmp_path / "t.parquet")
    whole = read(path, "t")
    assert len(whole) == 3000 and [r for r in reasons(whole) if r[1]] == [("t#2500", "invalid_utf8")]
    assert whole[2500]["sample"].startswith("Un caf\ufffd")
    split = [r for span in (Span(0, 2, 0), Span(2, -1, 2000)) for r in iter_documents(path, "t", cfg(path), span)]
    assert split == whole


def corrupt_row_group(path, group: int, how: str) -> None:
    column = pq.read_metadata(path).row_group(group).column(0)
    data = bytearray(path.read_bytes())
    if how == "data":  # bytes inside the compressed page
        end = column.data_page_offset + column.total_compressed_size
        data[end - 30:end - 10] = bytes(b ^ 0x5A for b in data[end - 30:end - 10])
    else:  # the data page header's type (its first field) made one pyarrow skips without a word
        data[column.data_page_offset + 1] = 77
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("compression,how", [("snappy", "data"), ("zstd", "data"), ("none", "page_type")])
def test_a_damaged_parquet_row_group_is_counted_and_the_rest_read(tmp_path, compression, how):
    """pyarrow raises a plain OSError for a corrupt snappy / zstd page (not an ArrowException), and reads no rows of
    a page whose header it does not know: either is one malformed_parquet row, counted by the range reading it."""
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": [f"Document number {i} of the table." for i in range(40)]}), path,
                   row_group_size=10, compression=compression, use_dictionary=False)
    corrupt_row_group(path, 2, how)
    good = [(f"d#{i}", "") for i in range(40) if not 20 <= i < 30]
    whole = read(path, "d")
    in_order = sorted(reasons(whole), key=lambda r: doc_order_key(r[0]))
    assert in_order == good[:20] + [("d#20", "malformed_parquet")] + good[20:]
    assert whole[20]["sample"].startswith("rows 20-29 (row group 2)")
    split = [r for span in (Span(0, 2, 0), Span(2, -1, 20)) for r in iter_documents(str(path), "d", cfg(path), span)]
    assert split == whole


def test_a_parquet_read_that_fails_on_io_is_raised_not_counted_as_bad_rows(tmp_path):
    """A network reset mid-file (an s3 or gcs read) is no malformed row group: counted as one, its rows were lost
    without a retry. An I/O error (an errno or an OSError subclass) is raised; pyarrow's own bare OSError for bytes it
    cannot decode (the test above) is counted."""
    import io

    from pipelines.sources import _read_parquet

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": [f"Document number {i} of the table." for i in range(40)]}), path,
                   row_group_size=10, use_dictionary=False)
    data, cut = path.read_bytes(), pq.read_metadata(path).row_group(2).column(0).data_page_offset

    class Resetting(io.BytesIO):
        def read(self, n=-1):
            if self.tell() <= cut < self.tell() + (len(data) if n is None or n < 0 else n):
                raise ConnectionResetError(104, "Connection reset by peer")
            return super().read(n)

    with pytest.raises(ConnectionResetError):
        list(_read_parquet(Resetting(data), "d", str(path), cfg(path), Span()))


def test_symlinked_folders_are_followed_once(tmp_path):
    """A folder symlink inside a source folder is walked as `find -L` does; a link to an ancestor or a second link
    to one folder reads nothing twice and does not recurse."""
    corpus, other = tmp_path / "corp", tmp_path / "other"
    (other / "deep").mkdir(parents=True)
    corpus.mkdir()
    for path in (corpus / "a.txt", other / "x.txt", other / "deep" / "y.txt"):
        path.write_text(BOOK)
    (corpus / "linked").symlink_to(other)
    (corpus / "linked2").symlink_to(other)  # the same folder again: its files once, under the first name
    (other / "loop").symlink_to(tmp_path)  # an ancestor of the corpus
    assert resolve_sources(cfg(corpus)) == [str(corpus / p) for p in ["a.txt", "linked/deep/y.txt", "linked/x.txt"]]


def test_xz_corpora_read_as_gzip_ones_and_zstd_ones_are_refused(tmp_path):
    """.xz is read as .gz is (whole, truncated and corrupt counted); .zst (The Pile's) has no decoder here: a
    SourceError naming the file and codec, not a corpus of binary_file rejects."""
    import lzma

    data = "\n".join(json.dumps({"text": f"Document number {i}. " * 5}) for i in range(200)).encode()
    (tmp_path / "ok.jsonl.xz").write_bytes(lzma.compress(data))
    (tmp_path / "cut.jsonl.xz").write_bytes(lzma.compress(data)[:-40])
    (tmp_path / "junk.txt.xz").write_bytes(b"\xfd7zXZ\x00" + bytes(range(200)))
    assert reasons(read(tmp_path / "ok.jsonl.xz", "ok")) == [(f"ok#{i}", "") for i in range(200)]
    rows = read(tmp_path / "cut.jsonl.xz", "cut")
    assert rows[-1]["doc_id"] == "cut" and rows[-1]["reject_reason"] == "truncated_xz" and len(rows) > 150
    assert reasons(read(tmp_path / "junk.txt.xz", "junk")) == [("junk", "corrupt_xz")]
    (tmp_path / "pile.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd" + bytes(100))
    with pytest.raises(SourceError, match=r"pile\.jsonl\.zst: zstd-compressed"):
        read(tmp_path / "pile.jsonl.zst", "pile")
    with pytest.raises(SourceError, match="zstd"):  # as prepare() plans its work, before any file is read
        file_format(str(tmp_path / "pile.jsonl.zst"), cfg(tmp_path))
