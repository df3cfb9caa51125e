"""A task or prediction file with columns.encoding=latin-1 is read as windows-1252, as a corpus declared latin-1 is
(pipelines/text_source.declared_or_utf8): its 0x80-0x9F bytes are the curly quotes, dashes and euro sign of a
Western-European export, not the C1 controls BERT's tokenizer drops (joining "don" and "t")."""

import io

from pipelines.encodings import check_encoding
from pipelines.tasks import Columns
from pipelines.tasks.roles import split_digest
from pipelines.tasks.text_encoding import as_utf8
from pipelines.text_source import declared_or_utf8
from tests.unit.test_files_task import read, write


def test_a_latin1_file_reads_its_windows_1252_punctuation_as_the_corpus_reader_does(tmp_path):
    """b"I don\\x92t know \\x93this\\x94" was read "I don\\x92t know \\x93this\\x94" (controls); the five bytes
    windows-1252 leaves undefined (0x81 0x8D 0x8F 0x90 0x9D) stay latin-1's controls, no record rejected. Read in 64
    KiB pieces, a long file decodes as it does whole."""
    raw = b"text,label\nI don\x92t know \x93this\x94,1\n\x80 5 \x96 fair,0\nodd \x81\x8d\x8f\x90\x9d bytes,1\n"
    for name in ("latin-1", "iso-8859-1", "l1"):  # every name of it is iso8859-1 (pipelines/encodings.check_encoding)
        rows, rejects, _, _ = read(write(tmp_path, "a.csv", raw), "csv", columns=Columns(encoding=name))
        assert [r["text_a"] for r in rows] == ["I don’t know “this”", "€ 5 – fair", "odd \x81\x8d\x8f\x90\x9d bytes"]
        assert not rejects, name
    long = bytes(range(256)) * 1000  # 256,000 bytes: four reads of as_utf8
    assert as_utf8(io.BytesIO(long), "iso8859-1").read().decode() == declared_or_utf8(long, "iso8859-1")


def test_only_a_latin1_file_with_bytes_in_0x80_0x9f_reads_other_rows(tmp_path):
    """What a resubmitted fine-tune compares (its "task rows sha256", jobs/finetune.continuation_basis): a latin-1
    file whose bytes past ASCII are all 0xA0-0xFF (accented letters) reads the rows its UTF-8 copy reads, as before,
    and a file in any other encoding reads what Python's codec reads; a latin-1 file holding 0x80-0x9F bytes reads
    other rows than before (they were C1 controls), so its checkpoint is not continued on them."""
    text = "text,label\nCafé crème brûlée,1\nNaïve « quoted »,0\n"
    (tmp_path / "l").mkdir(), (tmp_path / "u").mkdir()
    latin1, _, _, _ = read(write(tmp_path / "l", "a.csv", text.encode("latin-1")), "csv",
                           columns=Columns(encoding="latin-1"))
    utf8, _, _, _ = read(write(tmp_path / "u", "a.csv", text.encode("utf-8")), "csv")
    assert split_digest(latin1) == split_digest(utf8) and len(utf8) == 2
    for encoding in ("cp1252", "utf-16", "iso8859-15", "cp850"):
        raw = (text + "don’t\n" if encoding == "cp1252" else text).encode(encoding)
        got = as_utf8(io.BytesIO(raw), check_encoding(encoding)).read().decode()
        assert got == raw.decode(encoding).lstrip("\ufeff"), encoding
    c1 = "I don\x92t know".encode("latin-1")
    assert as_utf8(io.BytesIO(c1), "iso8859-1").read().decode() == "I don’t know" != c1.decode("latin-1")
