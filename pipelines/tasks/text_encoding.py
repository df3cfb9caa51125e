"""A text file's encoding, for text_records.text_file: the one its byte-order mark names, and a file in an encoding
the user names read as UTF-8 bytes (as_utf8), so the readers there take every file as UTF-8."""

from __future__ import annotations

import codecs
import io

from pipelines.tasks.common import TaskDataError
from pipelines.text_source import latin1_as_windows_1252

_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),  # UTF-32LE's first: FF FE 00 00
         (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),  # starts as UTF-16LE's FF FE
         (codecs.BOM_UTF8, "UTF-8"))


def bom(f) -> str:
    """The encoding a binary file's byte-order mark names ("UTF-8", "UTF-16", "UTF-32"; "" for none). Leaves f at its
    start."""
    head = f.read(4)
    f.seek(0)
    return next((name for mark, name in _BOMS if head.startswith(mark)), "")


def refuse_utf16(path, f) -> None:
    """Raise TaskDataError for a text file opening with a UTF-16 / UTF-32 byte-order mark (Excel's "Unicode Text" is
    UTF-16LE): read as UTF-8 it would be lines of NUL-interleaved text or invalid_utf8. Leaves f at its start."""
    name = bom(f)
    if name in ("UTF-16", "UTF-32"):
        raise TaskDataError(f"{path}: {name} text (its byte-order mark); set task.columns.encoding={name.lower()}, "
                            "or save it as UTF-8 (Excel: 'CSV UTF-8')")


def _invalid_bytes(error: UnicodeDecodeError):
    """A codec error handler: bytes the encoding does not define (cp1252's 0x81, half a UTF-16 surrogate pair, a
    sequence cut at the end of the file) become one byte that is never UTF-8, so their record is rejected alone."""
    return "\udcff", error.end  # encoded with surrogateescape: the byte 0xFF


codecs.register_error("bert_foundry.invalid_bytes", _invalid_bytes)


class _Latin1(codecs.IncrementalDecoder):
    """A declared latin-1 read as windows-1252, as a corpus declared so is (text_source.latin1_as_windows_1252): an
    Excel or CSV export "in latin-1" holds windows-1252's quotes and dashes at 0x80-0x9F, which read as latin-1's C1
    controls the tokenizer drops, joining words ("don\\x92t" became "dont")."""

    def decode(self, data, final: bool = False) -> str:
        return latin1_as_windows_1252(bytes(data))


class _Utf8(io.RawIOBase):
    """A binary file in `encoding`, read as UTF-8 bytes (see as_utf8). Seeks to its start only (what refuse_utf16 and
    json_array do)."""

    def __init__(self, f, encoding: str):
        self.f, self.encoding = f, encoding
        self.read_raw = getattr(f, "read1", f.read)  # read1: what a truncated .gz decompressed is returned first
        self.seek(0)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if (offset, whence) != (0, io.SEEK_SET) and not (whence == io.SEEK_CUR and offset == 0):
            raise io.UnsupportedOperation("a transcoded file seeks to its start only")
        if whence == io.SEEK_CUR:
            return self.pos
        self.f.seek(0)
        self.decode = _Latin1().decode if self.encoding == "iso8859-1" else \
            codecs.getincrementaldecoder(self.encoding)(errors="bert_foundry.invalid_bytes").decode
        self.pending, self.pos, self.started, self.ended = b"", 0, False, False
        return 0

    def readinto(self, buffer) -> int:
        while not self.pending and not self.ended:
            raw = self.read_raw(1 << 16)
            self.ended = not raw
            text = self.decode(raw, final=self.ended)
            if not self.started and text:  # a byte-order mark is never data (utf-16-le named, the file has one)
                text, self.started = text.removeprefix("\ufeff"), True
            self.pending = text.encode("utf-8", "surrogateescape")
        n = min(len(buffer), len(self.pending))
        buffer[:n], self.pending, self.pos = self.pending[:n], self.pending[n:], self.pos + n
        return n


def as_utf8(f, encoding: str):
    """The binary file `f`, in `encoding` (a check_encoding name; "": UTF-8, `f` itself; iso8859-1 is read as
    windows-1252: _Latin1), as UTF-8 bytes: lines, reads and a seek to the start, as text_records' readers use a file.
    Memory: one 64 KiB read at a time."""
    return io.BufferedReader(_Utf8(f, encoding), 1 << 16) if encoding else f
