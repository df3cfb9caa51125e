"""data.text_encoding names the encoding of a corpus's one-byte-encoded books (cp1252, latin-1: older Project
Gutenberg downloads); the UTF-8 books beside them in the same folder are still read as UTF-8."""

import codecs

from pipelines import text_source
from pipelines.config import DataConfig
from pipelines.sources import Span, iter_documents
from pipelines.units import count_newlines

CP1252_BOOK = "Le café “du coin” était fermé, et l’hiver venait.\n\nIl neigeait sur la place du marché.\n"
UTF8_BOOK = "Le café — “fermé” ce soir — et la crème brûlée aussi.\n\nÀ demain, dit-il, à l’aube.\n"
ASCII_BOOK = "It was a bright cold day in April, and the clocks were striking thirteen.\n"


def cfg(path, **kw) -> DataConfig:
    return DataConfig(sources=[str(path)], min_document_chars=1, **kw)


def read(path, **kw) -> list[dict]:
    return list(iter_documents(str(path), path.name, cfg(path, **kw)))


def test_a_utf8_book_beside_cp1252_books_is_read_as_utf8(tmp_path):
    """Decoded as cp1252, a UTF-8 book was mojibake ("cafÃ©", "â€”", its BOM as "ï»¿") or, at the 0x9D of its "”",
    rejected whole as invalid_cp1252; the cp1252 book and a pure-ASCII one read as before."""
    (tmp_path / "old.txt").write_bytes(CP1252_BOOK.encode("cp1252"))
    (tmp_path / "new.txt").write_bytes(codecs.BOM_UTF8 + UTF8_BOOK.encode("utf-8"))
    (tmp_path / "plain.txt").write_bytes(ASCII_BOOK.encode("ascii"))
    assert b"\xe9" in (tmp_path / "old.txt").read_bytes() and b"\x93" in (tmp_path / "old.txt").read_bytes()
    assert b"\xe2\x80\x9d" in (tmp_path / "new.txt").read_bytes()
    for encoding in ("cp1252", "latin-1"):
        got = {p.name: read(p, text_encoding=encoding) for p in sorted(tmp_path.iterdir())}
        assert {n: [r["reject_reason"] for r in rows] for n, rows in got.items()} == {
            "new.txt": [""], "old.txt": [""], "plain.txt": [""]}
        assert got["new.txt"][0]["text"] == UTF8_BOOK.strip()
        assert got["plain.txt"][0]["text"] == ASCII_BOOK.strip()
    assert read(tmp_path / "old.txt", text_encoding="cp1252")[0]["text"] == CP1252_BOOK.strip()
    assert "était fermé" in read(tmp_path / "old.txt", text_encoding="latin-1")[0]["text"]  # (0x93: a C1 control)


def test_a_cp1252_book_with_a_byte_it_lacks_is_still_rejected(tmp_path):
    """Not UTF-8 and not cp1252 (0x81 is undefined there): rejected as before, its sample in cp1252."""
    path = tmp_path / "bad.txt"
    path.write_bytes(CP1252_BOOK.encode("cp1252") + b"bad \x81 byte\n")
    [row] = read(path, text_encoding="cp1252")
    assert row["reject_reason"] == "invalid_cp1252" and "“du coin”" in row["sample"]


def test_the_choice_is_the_same_for_a_file_read_whole_and_in_ranges(tmp_path, monkeypatch):
    """Each document decides for itself, and documents are whole lines: the ranges of a big UTF-8 book (here
    documents of ~256 bytes) read the same documents, each as UTF-8, as the whole file does."""
    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 256)
    path = tmp_path / "big.txt"
    paragraphs = [f"Chapitre {i}. " + UTF8_BOOK.replace("\n\n", " ") for i in range(40)]
    path.write_bytes(codecs.BOM_UTF8 + "\n\n".join(paragraphs).encode("utf-8") + b"\n")
    config = cfg(path, text_encoding="cp1252")
    whole = list(iter_documents(str(path), path.name, config))
    size = path.stat().st_size
    cuts = list(range(0, size, 256))
    ranged = []
    for start, end in zip(cuts, cuts[1:] + [-1]):
        ranged += iter_documents(str(path), path.name, config, Span(start, end, count_newlines(str(path), 0, start)))
    assert len(whole) > 10 and ranged == whole
    assert all(r["reject_reason"] == "" and "Ã" not in r["text"] and "café — “fermé”" in r["text"] for r in whole)
