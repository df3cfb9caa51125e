"""Where a plain-text file is cut into ~1 MiB documents: at offsets of its cleaned text (no \\r of a \\r\\n, from the
end of a Gutenberg header), so the same book saved with other line ends or another header is cut alike and exact
dedup finds its copy; a pure-LF file is cut where it always was; byte ranges read what the whole file does."""

import hashlib
import random

import numpy as np
import pytest

from pipelines import text_source
from pipelines.config import DataConfig
from pipelines.dedup import content_hashes, find_duplicates
from pipelines.sources import Span, iter_documents
from pipelines.units import count_lines, count_newlines, numbered_parts

WORDS = "river stone light garden winter market letter window mountain story paper engine".split()
START = "*** START OF THE PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE ***\n"
END = "*** END OF THE PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE ***\n"


@pytest.fixture
def small_documents(monkeypatch):
    """~4 KiB documents, a split every 8 KiB: a few hundred KB of text holds every kind of cut."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 4096)
    monkeypatch.setattr(text_source, "MAX_TEXT_DOCUMENT_BYTES", 8192)


def book(seed: int, paragraphs: int) -> str:
    """Paragraphs of 1-6 lines; a blank line (some of spaces, some doubled) between most, none in every 80th to
    120th of each 200, so that stretches without one pass MAX_TEXT_DOCUMENT_BYTES."""
    rng = random.Random(seed)
    out = []
    for i in range(paragraphs):
        out += [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))).capitalize() + ".\n"
                for _ in range(rng.randint(1, 6))]
        if not 80 <= i % 200 < 120:
            out.append(rng.choice(["\n", "\n", "\n", "  \n", "\n\n"]))
    return "".join(out)


def cfg(path, **kw) -> DataConfig:
    return DataConfig(sources=[str(path)], min_document_chars=1, **kw)


def read_whole(path, **kw) -> list[dict]:
    return list(iter_documents(str(path), path.name, cfg(path, **kw)))


def read_ranged(path, step: int, **kw) -> list[dict]:
    """The rows of `path` read as byte ranges of `step` bytes, numbered as units.py does (Span carries no text
    offset: the reader counts it)."""
    size, rows = path.stat().st_size, []
    cuts = list(range(0, size, step))
    for start, end in zip(cuts, cuts[1:] + [size]):
        span = Span(start, -1 if end == size else end, count_newlines(str(path), 0, start))
        rows += iter_documents(str(path), path.name, cfg(path, **kw), span)
    return rows


def fingerprint(rows: list[dict]) -> tuple[int, str, str]:
    return (len(rows), hashlib.sha256(" ".join(r["doc_id"] for r in rows).encode()).hexdigest()[:16],
            hashlib.sha256("\x00".join(r["text"] for r in rows).encode()).hexdigest()[:16])


@pytest.mark.parametrize("documents,expected", [
    ("books", (144, "100164e154d1aa4f", "4f83df7c467ba736")),
    ("blank_lines", (2408, "1834efd9d056f3cc", "1faf6c42ecf52b9c")),
])
def test_a_pure_lf_file_is_cut_where_it_always_was(tmp_path, small_documents, documents, expected):
    """Pinned before cuts were counted in cleaned text: a file without \\r and without a Gutenberg header is the
    same documents (ids and texts), whole and in ranges."""
    path = tmp_path / "lf.txt"
    path.write_text(book(7, 3000))
    whole = read_whole(path, text_documents=documents)
    assert fingerprint(whole) == expected
    assert read_ranged(path, 4096, text_documents=documents) == whole


def duplicates(*copies: list[dict]) -> np.ndarray:
    texts = [r["text"] for rows in copies for r in rows]
    return find_duplicates(content_hashes(texts), np.arange(len(texts)))


@pytest.mark.parametrize("documents", ["books", "blank_lines"])
def test_a_book_saved_with_crlf_and_lf_is_one_document_set(tmp_path, small_documents, documents):
    """A Windows mirror's CRLF copy beside the LF one: cut at raw byte offsets, every piece of the CRLF copy started
    at another paragraph, so none was found a duplicate and both were trained on (and whole-book hold-out, which
    goes by file name, could put one in eval and the other in train)."""
    text = book(3, 2000)
    lf, crlf = tmp_path / "book.txt", tmp_path / "book-crlf.txt"
    lf.write_bytes(text.encode())
    crlf.write_bytes(text.replace("\n", "\r\n").encode())
    lf_rows, crlf_rows = read_whole(lf, text_documents=documents), read_whole(crlf, text_documents=documents)
    assert len(lf_rows) > 20
    assert duplicates(lf_rows, crlf_rows).tolist() == [False] * len(lf_rows) + [True] * len(crlf_rows)
    assert [r["doc_id"].rpartition("#")[2] for r in crlf_rows] == [r["doc_id"].rpartition("#")[2] for r in lf_rows]
    for step in (4096, 3 * 4096):
        assert read_ranged(crlf, step, text_documents=documents) == crlf_rows


def test_two_gutenberg_copies_with_headers_of_other_lengths_are_one_document_set(tmp_path, small_documents):
    """PG's 1342-0.txt and pg1342.txt: the same text after headers of other lengths (one with \\r\\n too)."""
    text = book(5, 1500)
    short = tmp_path / "1342-0.txt"
    short.write_bytes(("Title: Pride and Prejudice\n\n" + START + "\n" + text + END + "licence\n").encode())
    long = tmp_path / "pg1342.txt"
    header = "The Project Gutenberg eBook of Pride and Prejudice\n\n" + "Release date: June 1, 1998\n" * 40 + "\n"
    long.write_bytes((header + START + "\n" + text + END + "licence\n" * 50).replace("\n", "\r\n").encode())
    short_rows = [r for r in read_whole(short) if not r["reject_reason"]]
    long_rows = [r for r in read_whole(long) if not r["reject_reason"]]
    assert len(short_rows) > 20
    assert duplicates(short_rows, long_rows).tolist() == [False] * len(short_rows) + [True] * len(long_rows)
    for path in (short, long):  # (the licence's row comes from the range that holds it: last)
        assert sorted(read_ranged(path, 4096), key=str) == sorted(read_whole(path), key=str)


@pytest.mark.parametrize("documents", ["books", "blank_lines"])
def test_ranges_of_a_crlf_file_at_every_256_bytes_read_what_the_whole_file_does(tmp_path, monkeypatch, documents):
    """With \\r\\n the text reaches a split's multiple mid-line, so a range can start between that byte and the next
    line (ranges at the split's multiples, as above, never do), or inside a \\r\\n. Ranges every 256 bytes, numbered
    as units.py numbers them, find each document once."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 256)
    monkeypatch.setattr(text_source, "MAX_TEXT_DOCUMENT_BYTES", 1024)
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12))) + ".\r\n" for _ in range(4000)]
    path = tmp_path / "book.txt"  # 150 lines with a blank line every 7th, then 150 without (splits), and so on
    path.write_bytes("".join(line if i // 150 % 2 or i % 7 else "\r\n" for i, line in enumerate(lines)).encode())
    size, name = path.stat().st_size, str(path)
    parts = [{"path": name, "kind": "bytes", "start": s, "end": s + 256 if s + 256 < size else -1}
             for s in range(0, size, 256)]
    parts = numbered_parts(parts, {(name, p["start"]): count_lines(name, p["start"], p["end"])
                                   for p in parts if p["end"] >= 0})
    whole = read_whole(path, text_documents=documents)
    ranged = [row for p in parts for row in iter_documents(name, path.name, cfg(path, text_documents=documents),
                                                             Span(p["start"], p["end"], p["first"], p["text_start"]))]
    assert len(whole) > 20
    assert ranged == whole


@pytest.mark.parametrize("step", [0, 7, 64])
def test_a_line_of_unicode_spaces_ends_a_document_under_blank_lines(tmp_path, step):
    """Web text's &nbsp; line, CJK's ideographic space, a zero-width space between two articles: blank lines, as
    Google's reader (which strips decoded lines) has them; read whole or in ranges alike. A short line of one
    non-ASCII letter is text."""
    docs = ["Alpha one.\nAlpha two.", "Beta one.\nBeta two.", "Gamma one.\nGamma two.", "Delta one.\nÉ\nEpsilon."]
    path = tmp_path / "google.txt"
    path.write_text(docs[0] + "\n\u00a0\n" + docs[1] + "\n\u3000 \u3000\n" + docs[2] + "\n\u200b\n" + docs[3] + "\n",
                    encoding="utf-8")
    rows = read_ranged(path, step, text_documents="blank_lines") if step else read_whole(
        path, text_documents="blank_lines")
    assert [r["text"] for r in rows] == docs
    # a separator of blank lines around the &nbsp; one is one separator: no empty document rejected at each
    path.write_text("\n\n\u00a0\n\n".join(docs) + "\n", encoding="utf-8")
    rows = read_ranged(path, step, text_documents="blank_lines") if step else read_whole(
        path, text_documents="blank_lines")
    assert [r["text"] for r in rows] == docs, rows


@pytest.mark.parametrize("step", [0, 7, 64])
@pytest.mark.parametrize("encoding", ["cp1252", "latin-1"])
def test_a_line_of_no_break_spaces_is_blank_in_a_one_byte_encoding(tmp_path, step, encoding):
    """cp1252's (and latin-1's) no-break space is the byte 0xA0 alone: read as UTF-8 it was text, and a separator of
    them merged two articles into one document; read whole or in ranges alike. A line of one accented letter is
    text."""
    docs = ["Café one.\nCafé two.", "Beta one.\nBeta two.", "Gamma one.\nGamma two.", "Delta one.\nÉ\nEpsilon."]
    path = tmp_path / "google.txt"
    path.write_bytes(("\n\u00a0\n".join(docs[:2]) + "\n \u00a0 \u00a0\n" + "\n\n\u00a0\n\n".join(docs[2:]) + "\n"
                      ).encode("cp1252"))
    rows = read_ranged(path, step, text_documents="blank_lines", text_encoding=encoding) if step else read_whole(
        path, text_documents="blank_lines", text_encoding=encoding)
    assert [r["text"] for r in rows] == docs, rows
