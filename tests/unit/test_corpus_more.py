"""Corpus reading past the per-reader tests: a file no corpus format names is counted, not trained on as a book; the
data.* integers that would make every reader see nothing are refused at the config."""

import json

import pytest

from bert_core.config import ConfigError
from pipelines.config import DataConfig
from pipelines.sources import REJECT_REASONS, iter_documents, read_as_book, read_format, reads_plain_text

BOOK = "It was a bright cold day in April, and the clocks were striking thirteen.\n\nWinston went home.\n"
METADATA = ("id,title,author,authoryearofbirth,language,downloads,subjects\n"
            + "".join(f'PG{i},"The Book of Things {i}","Author, Some",18{i:02d},[\'en\'],{1000 + i},"{{\'Fiction\'}}"\n'
                      for i in range(40)))


def cfg(path, **kw) -> DataConfig:
    return DataConfig(sources=[str(path)], min_document_chars=1, **kw)


def read(path, **kw) -> list[tuple[str, str]]:
    return [(r["doc_id"], r["reject_reason"]) for r in iter_documents(str(path), path.name, cfg(path, **kw))]


def test_a_csv_beside_the_books_is_counted_not_read_as_a_book(tmp_path):
    """The Standardized Project Gutenberg Corpus keeps metadata.csv beside its books: sniffed ("else text"), its ids
    and author lists were pretraining documents, a held-out "book", with no reject, warning or log line. A file of an
    extension no corpus format names is one unknown_file_type reject whose sample names data.format; data.format=text
    reads it as before."""
    (tmp_path / "metadata.csv").write_text(METADATA)
    (tmp_path / "page.html").write_text("<html><body><p>" + BOOK + "</p></body></html>\n")
    (tmp_path / "export.tsv").write_text('{"text": "a tsv whose first cell opens like JSON"}\tx\n')
    for name in ("metadata.csv", "page.html", "export.tsv"):
        path = tmp_path / name
        rows = list(iter_documents(str(path), name, cfg(path)))
        assert [(r["doc_id"], r["reject_reason"], r["text"]) for r in rows] == [(name, "unknown_file_type", "")]
        assert "data.format" in rows[0]["sample"] and name.split(".")[-1] in rows[0]["sample"]
        assert not reads_plain_text(str(path), cfg(path)) and not read_as_book(str(path), cfg(path))
        [row] = iter_documents(str(path), name, cfg(path, format="text"))
        assert row["reject_reason"] == "" and row["text"]
    csv = tmp_path / "metadata.csv"
    assert read_format(str(csv), cfg(csv)) == "unknown" and read_format(str(csv), cfg(csv, format="text")) == "text"
    assert "unknown_file_type" in REJECT_REASONS


def test_extensionless_and_wikitext_files_are_still_sniffed_and_binaries_still_binary(tmp_path):
    """What sniffing is for stays read: WikiExtractor's extensionless wiki_00 (<doc> blocks, or --json lines, .bz2
    with -c), WikiText's .raw and .tokens, an extensionless book, a Gutenberg or WMT download's own extension; a
    cover image beside the books is binary_file, as it was (a corpus folder's .png, .pdf, .zip: saying they are no
    text is more use than naming their extension)."""
    import bz2

    doc = '<doc id="1" url="https://en.wikipedia.org/wiki?curid=1" title="April">\nApril\n\n' + BOOK + "</doc>\n"
    (tmp_path / "wiki_00").write_text(doc)
    (tmp_path / "wiki_01.bz2").write_bytes(bz2.compress(doc.encode()))
    (tmp_path / "wiki_02").write_text(json.dumps({"id": "2", "text": BOOK}) + "\n")
    (tmp_path / "wiki.train.raw").write_text(" = April = \n\n" + BOOK)
    (tmp_path / "wiki.train.tokens").write_text(" = April = \n\n" + BOOK.replace("April", "<unk>"))
    (tmp_path / "pg1342").write_text(BOOK)
    (tmp_path / "1342.txt.utf-8").write_text(BOOK)  # a Gutenberg download as wget names it
    (tmp_path / "news.2010.en.shuffled").write_text(BOOK)  # WMT's monolingual news
    (tmp_path / "cover.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    got = {p.name: read(p) for p in sorted(tmp_path.iterdir())}
    assert got == {"wiki_00": [("wiki_00#0", "")], "wiki_01.bz2": [("wiki_01.bz2#0", "")],
                   "wiki_02": [("wiki_02#0", "")], "wiki.train.raw": [("wiki.train.raw#0", "")],
                   "wiki.train.tokens": [("wiki.train.tokens#0", "")], "pg1342": [("pg1342#0", "")],
                   "1342.txt.utf-8": [("1342.txt.utf-8#0", "")],
                   "news.2010.en.shuffled": [("news.2010.en.shuffled#0", "")],
                   "cover.png": [("cover.png", "binary_file")]}
    assert [read_format(str(tmp_path / n), cfg(tmp_path)) for n in ("wiki_00", "wiki_02", "wiki.train.raw")] == [
        "wikiextractor", "jsonl", "text"]


@pytest.mark.parametrize("field, value", [("max_line_bytes", -1), ("max_line_bytes", 0),
                                          ("min_document_chars", -1)])
def test_a_setting_that_makes_the_readers_see_nothing_is_refused_naming_it(field, value):
    """max_line_bytes=-1, the usual "no limit", passed and read every file as no line (readline(0) is b""): zero
    rows, zero rejects, and a refusal naming no cause after the whole read; 0 rejected every record as too long."""
    with pytest.raises(ConfigError, match=rf"data\.{field} must be >= {1 if field == 'max_line_bytes' else 0}"):
        DataConfig(sources=["x"], **{field: value}).validate()
    DataConfig(sources=["x"], max_line_bytes=1, min_document_chars=0).validate()
