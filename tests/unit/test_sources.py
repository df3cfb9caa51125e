"""Source resolution and the per-file readers (what each Ray task runs), without Ray."""

import gzip
import json
import os

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config import DataConfig
from pipelines.source_files import SourceError, doc_order_key, relative_names, resolve_sources
from pipelines.sources import Span, iter_documents

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


def test_wikiextractor_default_output_is_one_document_an_article(tmp_path):
    """WikiExtractor without --json writes <doc ...> blocks (its default, NVIDIA's recipe's input): read as text, a
    wiki_00 file was one document of its hundreds of articles, with the tags as sentences. Each block is one
    document, its title line dropped (as --json leaves it out of "text"), HTML-safe escapes undone."""
    body = "Anarchism is a political philosophy &amp; movement. It rejects hierarchy and &lt;unjust&gt; rule."
    data = (f'<doc id="12" url="https://en.wikipedia.org/wiki?curid=12" title="Anarchism">\nAnarchism\n\n{body}\n'
            f'</doc>\n<doc id="25" url="https://en.wikipedia.org/wiki?curid=25" title="Autism">\nAutism\n\n'
            f"Autism is a developmental condition. It shows in early childhood.\n</doc>\n"
            f'<doc id="39" url="u" title="Albedo">\nAlbedo\n\n</doc>\n'
            f'<doc id="40" url="u" title="Cut">\nCut\n\nA file that ends inside an article keeps what it has.\n')
    (tmp_path / "wiki_00").write_text(data)
    rows = read(tmp_path / "wiki_00", "AA/wiki_00")
    assert reasons(rows) == [("AA/wiki_00#0", ""), ("AA/wiki_00#5", ""), ("AA/wiki_00#10", "empty_document"),
                             ("AA/wiki_00#14", "")]
    assert rows[0]["text"] == body.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    assert rows[1]["text"].startswith("Autism is a developmental") and "doc" not in " ".join(r["text"] for r in rows)
    assert rows[3]["text"] == "A file that ends inside an article keeps what it has."


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


def test_inputs_are_fingerprinted_in_file_order_by_several_threads_as_one_would(tmp_path, monkeypatch):
    """A WikiExtractor corpus's ~20,000 small files were hashed one after the other on the driver: now by threads,
    each file's entry in its place, as the sequential reading gave it (and a file over FULL_HASH_MAX_BYTES by size
    and mtime)."""
    import hashlib

    from pipelines import layout

    files = []
    for i in range(40):
        (tmp_path / f"wiki_{i:02d}").write_bytes(os.urandom(1000 + 97 * i))
        files.append(str(tmp_path / f"wiki_{i:02d}"))
    monkeypatch.setattr(layout, "FULL_HASH_MAX_BYTES", 3000)
    entries = layout.fingerprint_inputs(files, threads=8)
    assert [e["path"] for e in entries] == files
    for entry, path in zip(entries, files):
        data = open(path, "rb").read()
        assert entry == ({"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                         if len(data) <= 3000 else {"path": path, "bytes": len(data), "mtime": entry["mtime"]})
    assert sum("mtime" in e for e in entries) == sum(1000 + 97 * i > 3000 for i in range(40))


# ---------------------------------------------------------------------------- review fixes

def test_relative_names_of_local_files_and_bucket_objects():
    """Local paths and s3:// objects in one corpus raised a bare "Can't mix absolute and relative paths" from
    commonpath: files of several filesystems are named under their scheme."""
    assert relative_names(["/data/x.txt", "s3://bucket/corpus/y.txt"]) == ["data/x.txt", "s3:/bucket/corpus/y.txt"]
    assert relative_names(["s3://b/x.txt", "gs://b/x.txt"]) == ["s3:/b/x.txt", "gs:/b/x.txt"]  # no one name for two
    assert relative_names(["s3://b/c/x.txt", "s3://b/c/d/y.txt"]) == ["x.txt", "d/y.txt"]  # one scheme: as before
