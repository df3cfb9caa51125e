"""Project Gutenberg books: where a book's text lies between its header and its licence.

A book's header (ended by its START line) and its licence (from its END line, ~18 KB, the same in every book) are
no training text: pipelines/text_source.py reads only what lies between (gutenberg_book), and counts its text
offsets from the header's end (header_text_bytes). Both are found from a file's head and tail alone, so every byte
range of the file finds them alike.
"""

from __future__ import annotations

import io
import lzma
import re
import zlib
from typing import BinaryIO, NamedTuple

from pipelines.parquet_source import bad_compressed_data

# Project Gutenberg's markers, at the start of a line: the header ends at a START line (or, in the oldest files, at
# the end of the "small print"); the licence (~18 KB, the same in every book) starts at an END line
_GUTENBERG_START = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t]*(?:\*\*\*[ \t]*START OF TH(?:E|IS) PROJECT GUTENBERG|"
                              rb"\*END\*?[ \t]*THE SMALL PRINT)", re.IGNORECASE | re.MULTILINE)
_GUTENBERG_END = re.compile(rb"^[ \t]*(?:\*+[ \t]*)?END OF (?:TH(?:E|IS) )?PROJECT GUTENBERG",
                            re.IGNORECASE | re.MULTILINE)
GUTENBERG_HEAD = (1 << 16, 600)  # a START line is looked for in the first 64 KiB and 600 lines of a file ...
GUTENBERG_TAIL = 1 << 18  # ... and an END line after it, in the last 256 KiB (the licence is ~18 KB)


class GutenbergBook(NamedTuple):
    header_end: int  # the offset past the START line: the header before it and the line are dropped
    header_text: int  # header_text_bytes: text offsets count from header_end
    start_line: bytes
    licence_start: int | None  # the END line's offset: it and every line after it are dropped; None: no END line
    end_line: bytes


def gutenberg_header(head: bytes) -> tuple[int, bytes] | None:
    """(the offset past its START line, the line) of a file whose first GUTENBERG_HEAD bytes are `head`, or None for
    a file that is no Project Gutenberg book (no START line in its first GUTENBERG_HEAD lines)."""
    start = _GUTENBERG_START.search(head)
    end_of_line = -1 if start is None else head.find(b"\n", start.end())
    if start is None or end_of_line < 0 or head.count(b"\n", 0, start.start()) >= GUTENBERG_HEAD[1]:
        return None
    return end_of_line + 1, head[start.start():end_of_line + 1]


def gutenberg_book(stream: BinaryIO) -> GutenbergBook | None:
    """Where a Project Gutenberg book's text lies between its header and its licence, or None for a file whose head
    holds no START line (an ordinary file that mentions Gutenberg is not cut). Both go into training unchanged
    otherwise: on 10k books, ~180 MB of one licence that exact dedup never removes (it ends the last document), as
    cleaners of BooksCorpus-style corpora (the gutenberg package's strip_headers) keep only the text between. Found
    from the file's own head and tail, read by every range of it alike: a range that starts inside the header or
    the licence drops what the whole file's reader does. Only the tail is searched for the END line, which keeps a
    range's cost small. In a file of concatenated books (`cat pg*.txt`) only the first book's header and the last
    book's licence are dropped; the books between keep theirs, read as before. The END line counts only after the
    tail's last START line: a last book shorter than the tail has an earlier book's END line before its START line,
    and cutting there lost the last book. A compressed file whose head or tail does not decode (truncated or
    damaged) is read uncut: the reader then meets the damage after the documents before it, and reports it; an I/O
    error is raised. The stream is left at 0."""
    stream.seek(0)
    head = _decoded(lambda: stream.read(GUTENBERG_HEAD[0]))
    header = None if head is None else gutenberg_header(head)
    if header is None:
        stream.seek(0)
        return None
    header_end, start_line = header
    licence_start, end_line = None, b""

    def read_tail() -> tuple[int, bytes]:
        start = max(header_end, stream.seek(0, io.SEEK_END) - GUTENBERG_TAIL)
        stream.seek(start - 1)  # from the byte before: where the tail's first whole line starts
        return start, stream.read()

    tail_start, tail = _decoded(read_tail) or (0, b"")
    first_line = tail.find(b"\n") + 1
    if first_line:
        starts = [m for m in _GUTENBERG_START.finditer(tail, first_line) if _later_book(tail, m)]
        end = _GUTENBERG_END.search(tail, starts[-1].end() if starts else first_line)
        if end is not None:
            line_end = tail.find(b"\n", end.start())
            licence_start = tail_start - 1 + end.start()
            end_line = tail[end.start():line_end if line_end >= 0 else None]
    stream.seek(0)
    return GutenbergBook(header_end, header_text_bytes(head), start_line, licence_start, end_line)


def _later_book(tail: bytes, start: re.Match) -> bool:
    """Whether a START line in a file's tail starts a later book (a file of several): a "*** START OF" line does; a
    small print's end ("*END*THE SMALL PRINT!...") when text follows it. The oldest books end their header with it
    (the small print at the top, the book after it, with or without an END line), but 2002-05 books put the small
    print after their END line and end the file with "*END THE SMALL PRINT! FOR PUBLIC DOMAIN EBOOKS*Ver.02/11/02*END*":
    read as a later book's START line, it left no END line after it, and the whole licence stayed text. (Asking for
    an END line after it instead lost an oldest-layout last book that has none: cut at an earlier book's END line.)"""
    if start.group().lstrip(b"\xef\xbb\xbf \t").startswith(b"***"):
        return True
    line_end = tail.find(b"\n", start.end())
    return line_end >= 0 and not tail[line_end:].isspace()


def header_text_bytes(head: bytes) -> int:
    """Where the text offsets of a file whose first GUTENBERG_HEAD bytes are `head` count from: its Gutenberg header's
    length up to the end of its START line (gutenberg_header), less its \r\n pairs; 0 for a file that is no book."""
    header = gutenberg_header(head)
    return 0 if header is None else header[0] - head.count(b"\r\n", 0, header[0])


def _decoded(read):
    """What `read()` returns, or None where a compressed stream's bytes do not decode: cut short (EOFError),
    damaged (zlib.error, lzma.LZMAError, gzip's BadGzipFile, bz2's bare OSError). An I/O error (an OSError with an
    errno, ConnectionError, TimeoutError: parquet_source.bad_compressed_data) is raised."""
    try:
        return read()
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:
        if bad_compressed_data(e):
            return None
        raise


def is_book(stream: BinaryIO) -> bool:
    """Whether the file's head holds a START line (gutenberg_header), the stream left where it was."""
    here = stream.tell()
    stream.seek(0)
    found = gutenberg_header(stream.read(GUTENBERG_HEAD[0])) is not None
    stream.seek(here)
    return found
