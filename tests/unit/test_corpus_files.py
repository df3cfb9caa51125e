"""Real corpora's files as they come: Wikipedia's split dump parts, books with no blank line, damaged or unreadable
parquet, folder symlinks, xz and zstd, read by the per-file readers (what each Ray task runs), without Ray."""

import bz2
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.source_files import SourceError, doc_order_key, resolve_sources
from pipelines.sources import Span, file_format, iter_documents
from tests.unit.test_sources import BOOK, cfg, read, reasons


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


@pytest.mark.slow  # every range plan of a large file (~4 s): `make test`, not `make test-fast`
def test_a_file_without_blank_lines_is_cut_into_bounded_documents_the_same_in_any_ranges(tmp_path):
    """One sentence a line and no blank line (BookCorpus's books_large_p1.txt: 2 GB) was one document the size of
    the file, held whole by one task. A document goes on as the next at the first line at or after every multiple of
    MAX_TEXT_DOCUMENT_BYTES; every text byte lands in exactly one document, however the file is split into ranges,
    and trailing blank lines after such a cut are no empty document. The cut depends on where the line is, not on
    how long the document before it is: so the range at 0 reads one document, not the file (the split used to
    come at a document's size, which only the range holding its start could count: one task read every byte)."""
    from pipelines.sources import MAX_TEXT_DOCUMENT_BYTES

    line = "A sentence of the corpus, one to a line, with no blank line anywhere in the file at all.\n"
    data = (line * (3 * MAX_TEXT_DOCUMENT_BYTES // len(line)) + "\n").encode()
    path = tmp_path / "books_large_p1.txt"
    path.write_bytes(data)
    whole = read(path, "books")
    assert len(whole) == 3 and not [r for r in whole if r["reject_reason"]]
    assert all(len(r["text"].encode()) <= MAX_TEXT_DOCUMENT_BYTES + len(line) for r in whole)
    assert "".join(r["text"].replace("\n", " ") + " " for r in whole).split() == data.decode().split()
    lines = [int(r["doc_id"].split("#")[1]) for r in whole]
    assert lines == [0] + [-(-k * MAX_TEXT_DOCUMENT_BYTES // len(line)) for k in (1, 2)]  # first lines past 8k MiB
    cuts = list(range(0, len(data), 1 << 20))
    spans = [Span(a, b, data[:a].count(b"\n")) for a, b in zip(cuts, cuts[1:] + [-1])]
    per_span = [list(iter_documents(str(path), "books", cfg(path), span)) for span in spans]
    assert [r for rows in per_span for r in rows] == whole
    assert [len(rows) for rows in per_span] == [1 if a % MAX_TEXT_DOCUMENT_BYTES == 0 else 0 for a in cuts]


def test_a_stretch_without_blank_lines_is_split_only_where_no_blank_line_just_ended_a_document(tmp_path, monkeypatch):
    """In a file with blank lines, the split at a multiple of MAX_TEXT_DOCUMENT_BYTES is made only if no blank line
    starts in the MiB before it (where a cut ended the document already): paragraphs are not cut in two every 8 MiB.
    A stretch of over 8 MiB without one is split, at the same line in any ranges, and no document passes 9 MiB.
    At a thirty-second of both sizes (the rule is their ratio; lines stay ~85 bytes): 0.9 MB read four ways, not 28."""
    from pipelines import text_source

    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", text_source.TEXT_DOCUMENT_BYTES // 32)
    monkeypatch.setattr(text_source, "MAX_TEXT_DOCUMENT_BYTES", text_source.MAX_TEXT_DOCUMENT_BYTES // 32)
    MAX_TEXT_DOCUMENT_BYTES, TEXT_DOCUMENT_BYTES = text_source.MAX_TEXT_DOCUMENT_BYTES, text_source.TEXT_DOCUMENT_BYTES

    out, size, i = [], 0, 0
    while size < 3.5 * MAX_TEXT_DOCUMENT_BYTES:
        quiet = int(9.5 * TEXT_DOCUMENT_BYTES) <= size < int(18.5 * TEXT_DOCUMENT_BYTES)  # 9 MiB without a blank
        text = f"Sentence {i} of a long book, with enough words in it to read as a line of its prose.\n"
        text += "" if quiet or i % 5 else "\n"
        out.append(text)
        size, i = size + len(text), i + 1
    data = "".join(out).encode()
    path = tmp_path / "book.txt"
    path.write_bytes(data)
    whole = read(path, "book.txt")
    assert not [r for r in whole if r["reject_reason"]]
    line_starts = [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    starts = [line_starts[int(r["doc_id"].split("#")[1])] for r in whole]
    for k in (1, 2, 3):  # the first line at or after each multiple is text, not the blank line that ends a paragraph
        assert data[min(s for s in line_starts if s >= k * MAX_TEXT_DOCUMENT_BYTES):][:1] != b"\n"
    splits = [s for s in starts[1:] if data[s - 2:s] != b"\n\n"]  # documents not after a blank line
    assert splits == [min(s for s in line_starts if s >= 2 * MAX_TEXT_DOCUMENT_BYTES)]  # 16 MiB: not 8, nor 24
    assert max(len(r["text"].encode()) for r in whole) < MAX_TEXT_DOCUMENT_BYTES + TEXT_DOCUMENT_BYTES
    assert " ".join(r["text"] for r in whole).split() == data.decode().split()
    for step in (1, 3, 8):
        cuts = list(range(0, len(data), step * TEXT_DOCUMENT_BYTES))
        spans = [Span(a, b, data[:a].count(b"\n")) for a, b in zip(cuts, cuts[1:] + [-1])]
        assert [r for span in spans for r in iter_documents(str(path), "book.txt", cfg(path), span)] == whole


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

    from pipelines.parquet_source import read_parquet

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
        list(read_parquet(Resetting(data), "d", str(path), cfg(path), Span()))


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


def test_a_folder_reached_through_two_glob_matches_is_read_once(tmp_path):
    """Each match of a glob walked its folder with a fresh record of the folders seen: `corpus/*` matching a folder
    and a symlink to it read its files twice, under two names (two doc_ids for each document)."""
    corpus = tmp_path / "corpus"
    (corpus / "a").mkdir(parents=True)
    (corpus / "a" / "1.txt").write_text(BOOK)
    (corpus / "b").mkdir()
    (corpus / "b" / "linka").symlink_to(corpus / "a")
    (corpus / "c").symlink_to(corpus / "a")
    assert resolve_sources(cfg(corpus / "*")) == [str(corpus / "a" / "1.txt")]
    assert resolve_sources(cfg(corpus)) == [str(corpus / "a" / "1.txt")]  # one walk: as before


def test_a_multistream_dump_index_beside_its_dump_is_not_read_as_text(tmp_path):
    """`...-multistream-index.txt.bz2` (offset:page id:title a line) sits beside the dump it indexes: a folder of
    both read it as a prose document. It is one "multistream_index" row, in whatever ranges it is read."""
    index = "".join(f"{600 + i * 1000}:{i * 12}:Some Article Title {i}\n" for i in range(2000)).encode()
    names = ["enwiki-20240601-pages-articles-multistream-index.txt.bz2",
             "enwiki-20240601-pages-articles-multistream-index1.txt-p1p41242.bz2",
             "enwiki-20240601-pages-articles-multistream-index.txt"]
    for name in names:
        (tmp_path / name).write_bytes(bz2.compress(index) if name.endswith(".bz2") else index)
        assert reasons(read(tmp_path / name, name)) == [(name, "multistream_index")]
    path = str(tmp_path / names[2])
    assert not list(iter_documents(path, "i", cfg(path), Span(1 << 20, -1, 0)))  # counted once, by the range at 0
    assert reasons(read(tmp_path / names[2], "i", format="text")) == [("i", "multistream_index")]
    (tmp_path / "index.txt").write_bytes(index)  # any other name is read as it says
    assert reasons(read(tmp_path / "index.txt", "x")) == [("x#0", "")]


def test_a_stray_nul_costs_its_record_not_the_file_and_binary_files_are_still_refused(tmp_path):
    """One NUL byte in a file's first 8 KiB rejected the whole text or JSONL file as binary_file (a 7 MB JSONL lost,
    counted as one document). Its JSONL record is malformed_json (JSON has no raw NUL) and a text's NUL is dropped;
    a file of random bytes, UTF-16 text (~half NULs) or a PNG is still binary_file."""
    import random

    lines = [json.dumps({"text": f"Record {i}. {BOOK}"}) for i in range(200)]  # ~46 KB
    lines[3] = lines[3].replace("Record 3.", "Record\x00 3.")
    (tmp_path / "web.jsonl").write_text("\n".join(lines) + "\n")
    rows = read(tmp_path / "web.jsonl", "web")
    assert reasons(rows) == [(f"web#{i}", "malformed_json" if i == 3 else "") for i in range(200)]
    (tmp_path / "book.txt").write_bytes(b"A title\x00 line.\n\n" + BOOK.encode() * 100)
    assert [r["text"][:15] for r in read(tmp_path / "book.txt", "book")] == ["A title line.\n\n"]
    (tmp_path / "noise.txt").write_bytes(random.Random(0).randbytes(20000))
    (tmp_path / "utf16.jsonl").write_bytes("\n".join(lines).encode("utf-16-le"))
    (tmp_path / "img.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + BOOK.encode())
    for name in ("noise.txt", "utf16.jsonl", "img.txt"):
        assert reasons(read(tmp_path / name, name)) == [(name, "binary_file")]
