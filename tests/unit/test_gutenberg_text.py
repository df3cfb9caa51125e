"""Project Gutenberg books: the header before the START line and the licence from the END line on are no
document's, whether a file is read whole or in byte ranges; a file without a START line at its head is untouched."""

import bz2
import errno
import gzip
import io
import lzma
import random

import pytest

from pipelines import sources, text_source
from pipelines.config import DataConfig
from pipelines.source_files import SourceError
from pipelines.sources import Span, iter_documents
from pipelines.text_source import text_offset
from pipelines.units import count_newlines

HEADER = ("The Project Gutenberg eBook of Pride and Prejudice\n\nThis ebook is for the use of anyone anywhere in the "
          "United States and most other parts of the world at no cost.\n\nTitle: Pride and Prejudice\n"
          "Author: Jane Austen\n\nLanguage: English\n\n")
BOOK = [
    "It is a truth universally acknowledged, that a single man in possession\nof a good fortune, must be in want "
    "of a wife.\n",
    "However little known the feelings or views of such a man may be on his\nfirst entering a neighbourhood, this "
    "truth is so well fixed in the minds\nof the surrounding families.\n",
    "My dear Mr. Bennet, said his lady to him one day, have you heard that\nNetherfield Park is let at last?\n",
]
LICENCE = "".join(f"Section {i}. Use and distribution of Project Gutenberg electronic works is subject to the full "
                  f"terms of the license, paragraph {i}.\n\n" for i in range(60))  # ~7 KB
MARKERS = [  # (START line, END line): today's, an older one, and the oldest files' "small print"
    ("*** START OF THE PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE ***",
     "*** END OF THE PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE ***"),
    ("***START OF THIS PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE***",
     "End of the Project Gutenberg EBook of Pride and Prejudice, by Jane Austen"),
    ("*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*", "END OF THIS PROJECT GUTENBERG EBOOK"),
]


def cfg(path, **kw) -> DataConfig:
    return DataConfig(sources=[str(path)], min_document_chars=1, **kw)


def gutenberg_file(tmp_path, start: str, end: str, name: str = "pg1342.txt"):
    path = tmp_path / name
    path.write_text(HEADER + start + "\n\n\n" + "\n".join(BOOK) + "\n\n\n" + end + "\n\n" + LICENCE)
    return path


def whole_and_ranged(path, config: DataConfig, cuts: list[int]) -> tuple[list[dict], list[dict]]:
    """The rows of `path` read whole, and read as byte ranges [cuts[i], cuts[i+1]) numbered as units.py does."""
    whole = list(iter_documents(str(path), path.name, config))
    ranged = []
    for start, end in zip(cuts, cuts[1:] + [-1]):
        span = Span(start, end, count_newlines(str(path), 0, start))
        ranged += iter_documents(str(path), path.name, config, span)
    return sorted(whole, key=lambda r: r["doc_id"]), sorted(ranged, key=lambda r: r["doc_id"])


def good_text(rows: list[dict]) -> str:
    good = [r for r in rows if not r["reject_reason"]]
    return "\n\n".join(r["text"] for r in sorted(good, key=lambda r: int(r["doc_id"].rpartition("#")[2])))


@pytest.mark.parametrize("start,end", MARKERS)
@pytest.mark.parametrize("documents", ["books", "blank_lines"])
def test_only_the_book_between_the_markers_is_read_whole_and_in_ranges(tmp_path, monkeypatch, start, end, documents):
    """Header and licence went into training unchanged: on a 10k-book corpus ~180 MB of one licence. Ranges that
    start inside the header, the book and the licence (documents of ~256 bytes here) read what the whole file does:
    at multiples of TEXT_DOCUMENT_BYTES, as units.py plans them, and (cut at every blank line) anywhere."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 256)
    path = gutenberg_file(tmp_path, start, end)
    data = path.read_bytes()
    cuts = [list(range(0, len(data), 256))]
    if documents == "blank_lines":
        cuts.append([0] + sorted(random.Random(0).sample(range(1, len(data)), 12)))
    for cut in cuts:
        whole, ranged = whole_and_ranged(path, cfg(path, text_documents=documents), cut)
        assert ranged == whole
    assert good_text(whole) == "\n\n".join(p.strip() for p in BOOK)
    licence = data.index(end.encode())
    assert [(r["doc_id"], r["sample"]) for r in whole if r["reject_reason"]] == [
        (f"{path.name}@0", start), (f"{path.name}@{licence}", end)]
    assert {r["reject_reason"] for r in whole} == {"", "gutenberg_boilerplate"}


def test_a_book_of_one_document_and_its_gzip_copy(tmp_path):
    """With the default ~1 MiB documents a book is one document, "<name>#<its first line after START>"; a .txt.gz
    (read whole, from the start) drops the same lines."""
    path = gutenberg_file(tmp_path, *MARKERS[0])
    (tmp_path / "pg1342.txt.gz").write_bytes(gzip.compress(path.read_bytes()))
    plain = list(iter_documents(str(path), "pg1342", cfg(path)))
    packed = list(iter_documents(str(tmp_path / "pg1342.txt.gz"), "pg1342", cfg(path)))
    first = (HEADER + MARKERS[0][0] + "\n").count("\n")
    assert [(r["doc_id"], r["text"]) for r in plain if not r["reject_reason"]] == [
        (f"pg1342#{first}", "\n\n".join(p.strip() for p in BOOK))]
    assert packed == [{**r, "source": str(tmp_path / "pg1342.txt.gz")} for r in plain]


def test_a_file_without_a_start_line_at_its_head_is_untouched(tmp_path):
    """A file that mentions Project Gutenberg, even with an END-like line, but has no START line near its top (an
    essay about Gutenberg; a START line past its first 600 lines) is read whole, as before."""
    essay = tmp_path / "essay.txt"
    text = ("Project Gutenberg was founded in 1971 by Michael Hart.\n\n" + "\n".join(BOOK)
            + "\nEnd of the Project Gutenberg story, for now.\n" + LICENCE)
    essay.write_text(text)
    late = tmp_path / "late.txt"
    late.write_text("A line of text.\n" * 600 + MARKERS[0][0] + "\n" + "\n".join(BOOK) + MARKERS[0][1] + "\n")
    for path in (essay, late):
        rows = list(iter_documents(str(path), path.name, cfg(path)))
        assert [r["reject_reason"] for r in rows] == [""] and rows[0]["doc_id"] == f"{path.name}#0"
        assert rows[0]["text"] == path.read_text().strip()


def test_a_short_last_book_of_concatenated_books_is_kept(tmp_path, monkeypatch):
    """`cat pg*.txt > corpus.txt`: the END line counted was the first in the file's last 256 KiB, an earlier book's
    when the last book is shorter than that, so the last book was dropped as licence. Only the first book's header
    and the last book's licence are cut; the first book's licence and the second's header stay text."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 256)
    first, second = gutenberg_file(tmp_path, *MARKERS[0], "a.txt"), gutenberg_file(tmp_path, *MARKERS[1], "b.txt")
    path = tmp_path / "corpus.txt"
    path.write_bytes(first.read_bytes() + second.read_bytes())
    data = path.read_bytes()
    whole, ranged = whole_and_ranged(path, cfg(path), list(range(0, len(data), 256)))
    assert ranged == whole
    text = good_text(whole)
    assert text.count(BOOK[0].split("\n")[0]) == 2 and MARKERS[1][0] in text and MARKERS[0][1] in text
    assert text.rstrip().endswith(BOOK[-1].strip())  # the second book's last paragraph, not its licence
    assert [r["doc_id"] for r in whole if r["reject_reason"]] == [
        f"{path.name}@0", f"{path.name}@{data.rindex(MARKERS[1][1].encode())}"]


def hex_book(paragraphs: int) -> bytes:
    """A Gutenberg book of random hex words: it compresses poorly, so damage in the middle of its compressed file
    comes after many documents."""
    rng = random.Random(0)
    body = "".join(" ".join(rng.randbytes(4).hex() for _ in range(12)) + ".\n\n" for _ in range(paragraphs))
    return (HEADER + MARKERS[0][0] + "\n\n" + body + MARKERS[0][1] + "\n\n" + LICENCE).encode()


COMPRESS = {"gzip": (".gz", gzip.compress), "bz2": (".bz2", lambda d: bz2.compress(d, 1)), "xz": (".xz", lzma.compress)}


@pytest.mark.parametrize("codec", COMPRESS)
def test_a_damaged_compressed_book_keeps_the_documents_before_the_damage(tmp_path, monkeypatch, codec):
    """Looking for the END line decompresses to the end: damage there (zlib.error, LZMAError, bz2's bare OSError)
    was raised before any document, and the book was one corrupt_<codec> row. It is read uncut instead, and the
    reader reports the damage after the documents before it, as for any compressed text."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 4096)
    ext, compress = COMPRESS[codec]
    packed = compress(hex_book(4000))  # ~440 kB: several bz2 blocks before the middle
    middle = len(packed) // 2
    path = tmp_path / f"pg1.txt{ext}"
    path.write_bytes(packed[:middle] + bytes(200) + packed[middle + 200:])
    rows = list(iter_documents(str(path), path.name, cfg(path)))
    assert rows[0]["reject_reason"] == "gutenberg_boilerplate" and rows[-1]["reject_reason"] == f"corrupt_{codec}"
    good = rows[1:-1]
    assert len(good) > 20 and all(r["reject_reason"] == "" for r in good)
    (tmp_path / "pg1.txt").write_bytes(hex_book(4000))
    intact = list(iter_documents(str(tmp_path / "pg1.txt"), path.name, cfg(path)))
    # (the first 20, of ~100 kB: inflate may make text of the zeros for a while before it fails)
    assert good[:20] == [{**r, "source": str(path)} for r in intact if not r["reject_reason"]][:20]


def test_an_io_error_looking_for_the_licence_still_fails_the_read(tmp_path, monkeypatch):
    """A disk error or a network reset is no damage of the file's bytes: raised, naming the file, not read uncut."""
    path = tmp_path / "pg1.txt.gz"
    path.write_bytes(gzip.compress(hex_book(4000)))

    class FailsHalfway(io.BytesIO):
        def read(self, n: int = -1) -> bytes:
            if self.tell() >= len(self.getbuffer()) // 2:
                raise OSError(errno.EIO, "Input/output error")
            return super().read(n)

    monkeypatch.setattr(sources, "open_binary", lambda p: FailsHalfway(path.read_bytes()))
    with pytest.raises(SourceError, match="pg1.txt.gz") as raised:
        list(iter_documents(str(path), path.name, cfg(path)))
    assert raised.value.__cause__.errno == errno.EIO


class WatchedReads(io.BytesIO):
    """A file that records where each read starts."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.starts = []

    def read(self, n: int = -1) -> bytes:
        self.starts.append(self.tell())
        return super().read(n)

    def readline(self, n: int = -1) -> bytes:
        self.starts.append(self.tell())
        return super().readline(n)


def long_book(paragraphs: int, straddle: int) -> bytes:
    """A Gutenberg book of wrapped paragraphs in which, from ~100 KiB before `straddle`, lines without a blank one
    end in a blank line at `straddle` - 1 and another at `straddle`: with the first cut past a multiple at the
    first, the second is a document of one blank line (a book's blank-only document: no row). `straddle` is a text
    offset, as the cuts count them: from the end of the START line."""
    lines = [f"Paragraph {i} of the book, one of many alike: it goes on for a line\nand then for another, wrapped."
             for i in range(paragraphs)]
    text = (HEADER + MARKERS[0][0] + "\n\n").encode()
    straddle += len(HEADER + MARKERS[0][0] + "\n")
    for i, paragraph in enumerate(lines):
        text += paragraph.encode() + b"\n\n"
        if straddle - 100_000 < len(text) < straddle:
            break
    while straddle - 1 - len(text) > 200:  # no blank line up to the pair
        text += b"A line of a long stretch without a blank line, as some books have.\n"
    text += b"x" * (straddle - 2 - len(text)) + b"\n\n\n"
    assert text.index(b"\n\n\n") + 1 == straddle - 1
    rest = "\n\n".join(lines[i + 1:]) + "\n\n" + MARKERS[0][1] + "\n\n" + LICENCE
    return text + rest.encode()


@pytest.mark.parametrize("documents", ["books", "blank_lines"])
def test_a_range_that_cannot_reach_the_header_or_the_licence_does_not_look_for_them(tmp_path, monkeypatch,
                                                                                      documents):
    """Every range read the file's head (on S3 a ranged GET of some MiB) and a Gutenberg book's 256 KiB tail. Only the
    first range can start in the header, and only a range whose last document can read into the last 256 KiB can
    meet the licence; the others read nothing before their start (the byte before it) or in the tail, and the ranges
    read what the whole file does (~2.5 MiB here, 64 KiB documents and ranges, splits every 256 KiB)."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 1 << 16)
    monkeypatch.setattr(text_source, "MAX_TEXT_DOCUMENT_BYTES", 1 << 18)
    path = tmp_path / "pg2.txt"
    path.write_bytes(long_book(24000, 10 << 16))  # the range at 9 << 16 meets it
    data = path.read_bytes()
    config = cfg(path, text_documents=documents)
    whole, ranged = whole_and_ranged(path, config, list(range(0, len(data), 1 << 16)))
    assert ranged == whole and len(data) > 5 * text_source.GUTENBERG_TAIL
    assert [r["doc_id"] for r in whole if r["reject_reason"]] == [
        f"{path.name}@0", f"{path.name}@{data.index(MARKERS[0][1].encode())}"]
    stream, start = WatchedReads(data), 17 << 16  # a range in the middle, its text offset counted as units.py does
    span = Span(start, start + (1 << 16), count_newlines(str(path), 0, start), text_offset(io.BytesIO(data), start))
    assert list(text_source.read_text(stream, path.name, str(path), config, span)) == list(
        iter_documents(str(path), path.name, config, span))
    # what it reads before its start is the look back over the text since the multiple of TEXT_DOCUMENT_BYTES
    # before its text offset (books: the first blank line past that multiple is the cut)
    assert min(stream.starts) >= start - text_source.TEXT_DOCUMENT_BYTES + len(HEADER)
    assert min(stream.starts) == start - 1 or documents == "books"
    assert max(stream.starts) < len(data) - text_source.GUTENBERG_TAIL


SMALL_PRINT_2002 = ("*** END OF THE PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE ***\n\nThis file should be named "
                    "1342.txt or 1342.zip\n\nThe Legal Small Print\n\n"
                    "***START**THE SMALL PRINT!**FOR PUBLIC DOMAIN EBOOKS**START***\n" + LICENCE
                    + "*END THE SMALL PRINT! FOR PUBLIC DOMAIN EBOOKS*Ver.02/11/02*END*\n")


def book_of_2002(tmp_path, name: str = "pg1342.txt"):
    """A 2002-05 book: its small print after the END lines, ended by "*END THE SMALL PRINT! ...*END*"."""
    path = tmp_path / name
    path.write_text(HEADER + MARKERS[0][0] + "\n\n\n" + "\n".join(BOOK) + "\n\n\n" + MARKERS[1][1] + "\n\n"
                    + SMALL_PRINT_2002)
    return path


def test_a_small_print_after_the_end_line_is_licence_not_a_later_book(tmp_path, monkeypatch):
    """A 2002-05 book ends its small print with "*END THE SMALL PRINT! ...*END*", the line the oldest books end their
    header with: taken for a later book's START line in the tail, it left no END line after it, and the ~18 KB
    licence stayed in the last document. Whole and in ranges, the licence goes from the first END line on."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 256)
    path = book_of_2002(tmp_path)
    data = path.read_bytes()
    whole, ranged = whole_and_ranged(path, cfg(path), list(range(0, len(data), 256)))
    assert ranged == whole
    assert good_text(whole) == "\n\n".join(p.strip() for p in BOOK)
    assert [r["doc_id"] for r in whole if r["reject_reason"]] == [
        f"{path.name}@0", f"{path.name}@{data.index(MARKERS[1][1].encode())}"]


@pytest.mark.parametrize("last_is_oldest", [True, False])
def test_books_of_both_small_print_layouts_concatenated_keep_the_last_book(tmp_path, monkeypatch, last_is_oldest):
    """The oldest layout's small print ends the header, with the book and its END line after it: as the last book of
    `cat` (shorter than the tail), its "*END*THE SMALL PRINT!" line is still a later book's START line (cutting at
    the earlier book's END line lost the last book); a 2002-05 book's, after its END line, is still licence."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 256)
    oldest, of_2002 = gutenberg_file(tmp_path, *MARKERS[2], "a.txt"), book_of_2002(tmp_path, "b.txt")
    first, last = (of_2002, oldest) if last_is_oldest else (oldest, of_2002)
    path = tmp_path / "corpus.txt"
    path.write_bytes(first.read_bytes() + last.read_bytes())
    data = path.read_bytes()
    whole, ranged = whole_and_ranged(path, cfg(path), list(range(0, len(data), 256)))
    assert ranged == whole
    text = good_text(whole)
    assert text.count(BOOK[0].split("\n")[0]) == 2 and text.rstrip().endswith(BOOK[-1].strip())
    end = (MARKERS[2][1] if last_is_oldest else MARKERS[1][1]).encode()
    assert [r["doc_id"] for r in whole if r["reject_reason"]] == [f"{path.name}@0", f"{path.name}@{data.rindex(end)}"]


def test_an_oldest_layout_last_book_without_an_end_line_is_kept(tmp_path, monkeypatch):
    """`cat a.txt b.txt`: a today's book (END line, licence), b of the oldest layout, its small print at the top
    (opened by "***START**THE SMALL PRINT!" as the real ones are) and its text ending with no END line. Its
    "*END*THE SMALL PRINT!" line, with no END line after it, was taken for a's licence's end: the END line found was
    a's, and book b was cut as gutenberg_boilerplate. Text after the line is a book's: only a's header is cut."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 256)
    first = gutenberg_file(tmp_path, *MARKERS[0], "a.txt")
    small_print = ("***START**THE SMALL PRINT!**FOR PUBLIC DOMAIN ETEXTS**START***\nWhy is this \"Small Print!\" "
                   "statement here? You know: lawyers.\n\n")
    path = tmp_path / "corpus.txt"
    path.write_text(first.read_text() + HEADER + small_print + MARKERS[2][0] + "\n\n\n" + "\n".join(BOOK))
    data = path.read_bytes()
    whole, ranged = whole_and_ranged(path, cfg(path), list(range(0, len(data), 256)))
    assert ranged == whole
    text = good_text(whole)
    assert text.count(BOOK[0].split("\n")[0]) == 2 and text.rstrip().endswith(BOOK[-1].strip())
    assert [r["doc_id"] for r in whole if r["reject_reason"]] == [f"{path.name}@0"]
