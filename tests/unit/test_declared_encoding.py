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


def test_a_latin1_declared_book_keeps_its_windows_1252_punctuation(tmp_path):
    """Gutenberg's "ISO-8859-1" books hold Windows-1252's 0x80-0x9F punctuation: decoded as latin-1 they were C1
    controls, which normalize_text drops ("timesit", "didnt", no quotes), uncounted. Read as browsers read the label
    (WHATWG: windows-1252); a byte windows-1252 leaves undefined (0x81) is latin-1's control still, dropped alone."""
    path = tmp_path / "book.txt"
    path.write_bytes(b"It was the best of times\x97it was the worst of times. She said, \x93Come here.\x94 "
                     b"He didn\x92t answer\x85 The caf\xe9 was closed \x81here.\n")
    for encoding in ("latin-1", "iso-8859-1", "latin1", "l1"):
        [row] = read(path, text_encoding=encoding)
        assert row["reject_reason"] == "" and "timesit" not in row["text"]
        assert row["text"] == ("It was the best of times\u2014it was the worst of times. She said, \u201cCome here."
                               "\u201d He didn\u2019t answer\u2026 The caf\u00e9 was closed here.")


def test_only_a_latin1_declared_set_is_renamed_for_its_windows_1252_bytes():
    """A set prepared when latin-1's 0x80-0x9F were dropped is not reused; every other set keeps its name (pinned:
    the names before 2026-12-02)."""
    from pipelines.layout import dataset_name

    inputs = [{"path": "/corpus/book.txt", "bytes": 1000, "sha256": "0" * 64}]
    names = {e: dataset_name(DataConfig(sources=["/corpus"], text_encoding=e), inputs, None)
             for e in ("", "utf-8", "cp1252", "mac_roman", "iso8859-15", "latin-1", "iso-8859-1")}
    assert names["latin-1"] == names["iso-8859-1"] != "e268780742002ce7"
    assert {e: names[e] for e in ("", "utf-8", "cp1252", "mac_roman", "iso8859-15")} == {
        "": "71f2bf01a16291b2", "utf-8": "71f2bf01a16291b2", "cp1252": "974b9307d3305cc3",
        "mac_roman": "e4d2b3f08866b260", "iso8859-15": "ad1ea419d28c50b3"}
