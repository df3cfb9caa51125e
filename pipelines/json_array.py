"""A file holding one JSON array, element by element, in bounded memory (json.load would hold the whole file).

Elements are found by their brackets and strings, then each is parsed by the C decoder alone, so memory is a chunk
of the file and an element however big the file is; an element over `limit` characters is skipped in chunks, never
held. pipelines/sources.py turns the elements into documents with the rules of a JSON Lines record.
"""

from __future__ import annotations

import codecs
import json
import lzma
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

CHUNK = 1 << 20  # bytes read at a time ...
PIECE = 1 << 13  # ... in steps of at most this: a decompressor's step that fails loses what it decoded (an xz one)
HEAD_CHARS = 800  # what a bad element keeps of its text
AFTER, ENDED = "after the array: ", "ended inside its JSON array"  # the texts of the two bad ends of a file


@dataclass
class Element:
    value: object = None  # the parsed element, when it is good
    text: str = ""  # its JSON text (the first HEAD_CHARS where it is bad)
    bad: str = ""  # "" or a reject reason: line_too_long, malformed_json, invalid_utf8
    ends: bool = False  # the array's JSON breaks here (text after it, between elements, or none): the last element


_JSON = json.JSONDecoder()
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_IN_STRING = re.compile(r'\\[\s\S]|"')
_OUTSIDE_STRING = re.compile(r'["\[\]{},]')
_AFTER_ELEMENT = frozenset(" \t\n\r,]")
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")  # an invalid UTF-8 byte, as surrogateescape decodes it


class _Chunks:
    """The decoded text of a byte stream, read on demand: `buf[pos:]` is what is not consumed yet.
    A BOM is dropped; invalid UTF-8 becomes surrogate escapes, so an element holding some is rejected alone."""

    def __init__(self, stream: BinaryIO):
        self._read = getattr(stream, "read1", stream.read)
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")("surrogateescape")
        self._error: Exception | None = None
        self.buf, self.pos, self.eof = "", 0, False

    def more(self) -> bool:
        """Drop what is consumed and append the next chunk; False at the end of the stream."""
        if self._error:
            raise self._error
        pieces, size = [], 0
        try:  # read1 steps: a truncated or corrupt stream's error waits until the bytes before it are used
            while size < CHUNK and (piece := self._read(min(CHUNK - size, PIECE))):
                pieces.append(piece)
                size += len(piece)
        except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:  # bz2's errors are OSErrors; zstd is not read
            if not pieces:
                raise
            self._error = e
        chunk = b"".join(pieces)
        self.eof = not chunk
        self.buf, self.pos = self.buf[self.pos:] + self._decoder.decode(chunk, final=self.eof), 0
        return not self.eof

    def peek(self) -> str:
        """The next character that is not JSON whitespace (not consumed); "" at the end."""
        while True:
            self.pos = _JSON_SPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or not self.more():
                return self.buf[self.pos:self.pos + 1]


def elements(stream: BinaryIO, limit: int) -> Iterator[Element]:
    """Each element of the array that opens the stream (the caller has sniffed its "["), in order. Broken JSON
    between elements ends the file with one bad element: there is no next line to resume at."""
    text, after_element = _Chunks(stream), False
    text.peek()
    text.pos += 1
    while c := text.peek():
        if c == "]":
            text.pos += 1
            if text.peek():
                yield Element(bad="malformed_json", text=AFTER + text.buf[text.pos:text.pos + HEAD_CHARS], ends=True)
            return
        if after_element or c == ",":
            if not after_element or c != ",":
                yield Element(bad="malformed_json", text=text.buf[text.pos:text.pos + HEAD_CHARS], ends=True)
                return
            text.pos, after_element = text.pos + 1, False
            continue
        element = _element(text, limit)
        if element is None:
            break
        yield element
        after_element = True
    yield Element(bad="malformed_json", text=ENDED, ends=True)


def _element(text: _Chunks, limit: int) -> Element | None:
    """The element at text.pos, which is consumed; None if the stream ends inside it."""
    start = text.pos
    try:  # the common case: the element is whole in the buffer ("0" of "0.5" cut after "0." is not)
        value, end = _JSON.raw_decode(text.buf, start)
        follows = text.buf[end:end + 1]
        whole = follows in _AFTER_ELEMENT if follows else text.eof
    except (ValueError, RecursionError):
        whole = False
    if whole:
        text.pos = end
    else:
        scanned, head = _element_end(text, limit)
        if scanned < 0:
            return None
        start, text.pos = text.pos, scanned
        if head:
            return Element(bad="line_too_long", text=head)
        try:
            value, end = _JSON.raw_decode(text.buf[:scanned], start)
            whole = not text.buf[end:scanned].strip()
        except (ValueError, RecursionError):
            whole = False
        if not whole:
            return Element(bad="malformed_json", text=text.buf[start:min(scanned, start + HEAD_CHARS)])
    raw = text.buf[start:end]
    if end - start > limit:
        return Element(bad="line_too_long", text=raw[:HEAD_CHARS])
    if _ESCAPED_BYTE.search(raw):
        return Element(bad="invalid_utf8", text=raw[:HEAD_CHARS])
    return Element(value=value, text=raw)


def _element_end(text: _Chunks, limit: int) -> tuple[int, str]:
    """Where the JSON value at text.pos ends, by its brackets and strings alone, reading on as needed:
    (end, "") with the value in text.buf[text.pos:end]; for a value over `limit` characters, consumed in
    bounded chunks, (end, its first characters) with text.pos at its end; (-1, ...) if the stream ends first."""
    i, depth, in_string, head = text.pos, 0, False, ""
    while True:
        m = (_IN_STRING if in_string else _OUTSIDE_STRING).search(text.buf, i)
        if m is None:
            if not head and len(text.buf) - text.pos > limit:
                head = text.buf[text.pos:text.pos + HEAD_CHARS]
            unpaired = in_string and len(text.buf) > i and text.buf.endswith("\\")
            i = len(text.buf) - 1 if unpaired else len(text.buf)  # it escapes the next chunk's first character
            if head:
                text.pos = i
            shift = text.pos
            if not text.more():
                return -1, head
            i -= shift
            continue
        c, i = m.group(), m.end()
        if in_string:
            in_string = c != '"'
            if c == '"' and depth == 0:
                return i, head
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
        elif depth == 0:  # "," or the array's "]": the end of a number or literal
            return m.start(), head
        elif c != ",":
            depth -= 1
            if depth == 0:
                return i, head
