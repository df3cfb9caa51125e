"""Project Gutenberg books: the header before the START line and the licence from the END line on are no
document's, whether a file is read whole or in byte ranges; a file without a START line at its head is untouched."""

import gzip
import random

import pytest

from pipelines import text_source
from pipelines.config import DataConfig
from pipelines.sources import Span, iter_documents
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
