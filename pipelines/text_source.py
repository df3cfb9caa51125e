"""Plain text -> documents, by cuts any byte range of the file finds the same way.

Text has no record boundaries: a book is one document, a corpus file (BookCorpus's books_large_p1.txt: 2 GB, one
sentence a line, not one blank line) is many. Its documents end at cuts that depend on its text alone:
  * data.text_documents="books" (the default): at the first blank line at or after every TEXT_DOCUMENT_BYTES (a
    book under 1 MiB is one document, "<name>#0"; a big file is ~1 MiB documents, each starting at a paragraph);
    "blank_lines": at every blank line (Google's one-sentence-a-line format; a run of them is one separator);
  * in either, a stretch without blank lines is split before the first line at or after every multiple of
    MAX_TEXT_DOCUMENT_BYTES, unless a blank line starts in the TEXT_DOCUMENT_BYTES before that multiple (a cut
    there ended the document already). No document passes MAX_TEXT_DOCUMENT_BYTES + TEXT_DOCUMENT_BYTES by more
    than a line, and no task holds a whole file. (The split used to come when a document's own size reached the
    bound, which only the reader of the document's start could know: a file without blank lines was one task's.)
Those offsets are text offsets: bytes less the \r of every \r\n, counted from the end of a Project Gutenberg
header (which is no document's: gutenberg_book). Cut at raw byte offsets, a book saved with \r\n (or with a header
of another length) beside its copy started every ~1 MiB piece at another paragraph, and exact dedup, which compares
cleaned pieces, never found the copy. A pure-LF file without a header is cut where it always was.
A document is "<name>#<the line it starts on>". A Span owns the documents after the cuts it owns: a blank line's cut
by the line's offset, a split by the byte where the text reaches its multiple. It reads its last document past its
end, and a span with no cut of its own owns nothing. Spans start at multiples of TEXT_DOCUMENT_BYTES (units.py plans
them, and counts each one's text offset); a span whose text offset is not a multiple of it looks back for the
blank lines before it that decide its first cuts (_last_blank_before).
"""
from __future__ import annotations

import codecs
import functools
import io
import itertools
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from pipelines.clean import normalize_text
from pipelines.config import DataConfig
from pipelines.encodings import check_encoding, invalid_reason
from pipelines.gutenberg import GUTENBERG_HEAD, GUTENBERG_TAIL, gutenberg_book, header_text_bytes, is_book
from pipelines.paths import filesystem
from pipelines.source_rows import SAMPLE_CHARS, decode_sample, document_row, reject_row

TEXT_DOCUMENT_BYTES = 1 << 20  # a text file is cut into documents at the first blank line past every MiB ...
MAX_TEXT_DOCUMENT_BYTES = 8 * TEXT_DOCUMENT_BYTES  # ... and a stretch without one before a line past every 8 MiB
# (a multiple of TEXT_DOCUMENT_BYTES: a range starting at a split's multiple is then a range's start, which looks back)
_NO_END = 1 << 62  # an offset past any file's end


_SENTENCE_END = (".", "!", "?", '"', "'", "\u201d", "\u2019", ")", "\u3002", "\uff01", "\uff1f")


def blank_line_documents(head: bytes, min_blocks: int = 20) -> str | None:
    """Why the head of a plain-text file looks like Google's create_pretraining_data input (one sentence a line, a
    blank line between documents), or None: at least `min_blocks` blank-line-separated blocks, a median block of 2+
    lines, and 70% of its lines ending a sentence. A book wrapped at a width (Gutenberg) ends few lines with a
    sentence, one of a paragraph a line has blocks of one line, and BookCorpus's files have no blank line."""
    whole = head.endswith(b"\n")  # else its last line is cut: left out
    lines = head.decode("utf-8", "replace").splitlines()[:None if whole else -1]
    blocks, run = [], 0
    for line in [*lines, ""] if whole else lines:
        if line.strip():
            run += 1
        elif run:
            blocks.append(run)
            run = 0
    text = [line.rstrip() for line in lines if line.strip()]
    ending = sum(line.endswith(_SENTENCE_END) for line in text) / max(1, len(text))
    if len(blocks) < min_blocks or sorted(blocks)[len(blocks) // 2] < 2 or ending < 0.7:
        return None
    return (f"{len(blocks)} blank-line-separated blocks of {sorted(blocks)[len(blocks) // 2]} lines (median) in its "
            f"first {len(head):,} bytes, {ending:.0%} of its lines ending a sentence")


def file_head(path: str, size: int) -> bytes:
    """The first `size` bytes of `path`, decompressed if its name ends in a codec's extension (.gz, .bz2, .xz: fsspec
    opens them with the gzip, bz2 and lzma classes the readers use). Opened through paths.filesystem, which takes a
    local name literally: fsspec.open reads "::" as URL chaining, so "Dpkg::Source.txt" was a missing "Dpkg"."""
    fs, fpath = filesystem(path)
    with fs.open(fpath, "rb", compression="infer") as f:
        return f.read(size)


def check_line_ends(paths: list[str], looked_at: int = 8) -> None:
    """Refuse plain-text files whose lines end in a bare carriage return (classic Mac OS, some old exports): lines,
    blank lines and byte ranges are cut at "\n", so such a file would be one line, hence one document (NSP pairs
    crossing its articles), or, past data.max_line_bytes, a rejected one. The first 64 KiB of the first `looked_at`
    files decide (a corpus's files come from one export)."""
    for path in paths[:looked_at]:
        head = file_head(path, 1 << 16)
        if b"\r" in head and b"\n" not in head:
            raise ValueError(f"{path} ends its lines with a bare carriage return (\\r, no \\n), which this reader does "
                             f"not cut lines at: convert the corpus's line ends first (`tr '\\r' '\\n'`, or mac2unix)")


@dataclass(frozen=True)
class Span:
    """The part of a file a reader owns (units.py): records that start in [start, end).
    Byte offsets for text and JSONL, row groups for parquet; end -1 = to the end. `first` is
    the number of the first record before `start` (newlines, or rows) so doc_ids stay global.
    `text_start`: plain text's text offset of `start` (text_offset; units.number_lines counts it in the pass that
    counts `first`); None: the reader counts it, a read of the whole file before `start`."""
    start: int = 0
    end: int = -1
    first: int = 0
    text_start: int | None = None

    def owns(self, offset: int) -> bool:
        return self.end < 0 or offset < self.end


WHOLE = Span()


def file_lines(stream: BinaryIO, limit: int) -> Iterator[tuple[bytes | None, bytes, int, bool]]:
    """(line, b"", its length, whether it ends in \r\n) per line; (None, first bytes, length, ...) for a line over
    `limit` bytes, which is consumed in bounded chunks and never held whole."""
    while line := stream.readline(limit + 1):
        if len(line) <= limit:
            yield line, b"", len(line), line.endswith(b"\r\n")
            continue
        head, size, before = line[: SAMPLE_CHARS * 4], len(line), line
        while line and not line.endswith(b"\n"):
            before, line = line, stream.readline(1 << 20)
            size += len(line)
        yield None, head, size, line.endswith(b"\r\n") or (line == b"\n" and before.endswith(b"\r"))


def span_lines(stream: BinaryIO, limit: int, span: Span) -> Iterator[tuple[int, int, bytes | None, bytes]]:
    """(byte offset, line number, line, head) of every line from the first that starts at or
    after span.start to the end of the file (callers stop where their span ends). A line
    that starts before span.start belongs to the span before, which reads it past its end."""
    for offset, number, line, head, _ in _counted_lines(stream, limit, span):
        yield offset, number, line, head


def _counted_lines(stream: BinaryIO, limit: int, span: Span) -> Iterator[tuple[int, int, bytes | None, bytes, int]]:
    """span_lines, each with the \r\n pairs from span.start to the line (line_counts)."""
    offset, number, pairs = span.start, span.first, 0
    if span.start > 0:
        stream.seek(span.start - 1)
        if (part := stream.read(1)) != b"\n":  # span.start is inside a line: skip to the next one
            before = part
            while part := stream.readline(1 << 20):
                pairs += part.count(b"\r\n") + (before.endswith(b"\r") and part.startswith(b"\n"))
                offset += len(part)
                if part.endswith(b"\n"):
                    break
                before = part
            number += 1
    for line, head, size, crlf in file_lines(stream, limit):
        yield offset, number, line, head, pairs
        offset += size
        number += 1
        pairs += crlf


def line_counts(stream: BinaryIO, start: int, end: int, chunk: int = 4 << 20) -> tuple[int, int]:
    """(newlines, \r\n pairs) in bytes [start, end) of `stream`, a pair counted where its \n is (so that the counts of
    a file's ranges add up), read in chunks."""
    newlines = pairs = 0
    stream.seek(max(0, start - 1))
    before = stream.read(1) if start > 0 else b""
    left = end - start
    while left > 0 and (data := stream.read(min(chunk, left))):
        newlines += data.count(b"\n")
        # a second full scan only where a \r is (a pure-LF file has none); a pair across chunks is counted either way
        pairs += (data.count(b"\r\n") if b"\r" in data else 0) + (before == b"\r" and data.startswith(b"\n"))
        before, left = data[-1:], left - len(data)
    return newlines, pairs


def text_offset(stream: BinaryIO, offset: int) -> int:
    """The text offset of byte `offset` of a plain-text file (module docstring), read from the file's start:
    `offset` less the \r\n pairs before it and its Gutenberg header (which makes a header's own offsets negative)."""
    stream.seek(0)
    head = stream.read(GUTENBERG_HEAD[0])
    return offset - line_counts(stream, 0, offset)[1] - header_text_bytes(head)


def blank(line: bytes | None, encoding: str = "") -> bool:
    """A line of no text: ASCII whitespace, or (a short non-ASCII line) what normalize_text makes nothing of: a
    no-break space (web text's &nbsp;), an ideographic space, a zero-width one. Google's create_pretraining_data
    strips decoded lines, and under blank_lines such a line between two articles had merged them into one document
    (NSP's IsNext pairs across them). In a file of another declared encoding (`encoding`: check_encoding's name of
    data.text_encoding) the line is decoded as its document is (declared_or_utf8): cp1252's no-break space is the
    byte 0xA0 alone, which read as UTF-8 was text. A line starting with a printable ASCII byte is text in any encoding
    a text file may be read in (each keeps ASCII's bytes), and is not decoded."""
    if line is None:
        return False
    text = line.strip()
    if not text or len(text) > _BLANK_BYTES or 0x21 <= text[0] <= 0x7E:
        return not text
    if not encoding:
        return text[0] in _BLANK_LEADS and not normalize_text(text.decode("utf-8", "replace")).strip()
    try:
        return not normalize_text(declared_or_utf8(text, encoding)).strip()
    except UnicodeDecodeError:  # a byte the encoding lacks: text its document is rejected for
        return False


_BLANK_BYTES = 64  # the longest non-ASCII line decoded to be tested: whitespace runs of a few characters
# the UTF-8 lead bytes of every non-ASCII space and every character normalize_text drops (U+0080-00AD, U+061C,
# U+1680, U+2000-206F, U+3000, U+FEFF) and of the C0 controls it drops: a CJK line (lead bytes E4-E9) is not decoded
_BLANK_LEADS = frozenset(b"\xc2\xd8\xe1\xe2\xe3\xef" + bytes(range(0x20)) + b"\x7f")


def _text_lines(stream: BinaryIO, limit: int, span: Span, text_start: int) -> Iterator[tuple]:
    """(offset, number, line, head, text offset) of the lines from span.start on; `text_start` is span.start's."""
    for offset, number, line, head, pairs in _counted_lines(stream, limit, span):
        yield offset, number, line, head, text_start + offset - span.start - pairs


def _last_blank_before(stream: BinaryIO, cfg: DataConfig, start: int, text_start: int) -> int:
    """The text offset of the last blank line before `start` that can decide a cut after it, or -_NO_END: in books
    mode, one since the multiple of TEXT_DOCUMENT_BYTES before text_start (the first blank line past that multiple
    is the cut); in either, one in the TEXT_DOCUMENT_BYTES before the first split multiple the span can meet. On a
    pure-LF file only a span that starts at a split's multiple looks (text_start is then its offset): the
    TEXT_DOCUMENT_BYTES before it. The window is read back from `start` until its text holds the bytes wanted (every
    \r\n in it holds a byte more)."""
    step, split = TEXT_DOCUMENT_BYTES, MAX_TEXT_DOCUMENT_BYTES
    books = cfg.text_documents != "blank_lines"
    low = min(text_start // step * step if books else text_start, max(split, -(-text_start // split) * split) - step)
    if low >= text_start:
        return -_NO_END
    window, pairs = start, 0
    while window > 0 and (start - window) - pairs < text_start - low:
        earlier = max(0, window - (text_start - low - (start - window - pairs)))
        stream.seek(max(0, earlier - 1))  # from the byte before: a pair whose \n is at `earlier`
        pairs += stream.read(window - max(0, earlier - 1)).count(b"\r\n")
        window = earlier
    last, encoding = -_NO_END, check_encoding(cfg.text_encoding)
    for offset, _, line, _, text in _text_lines(stream, cfg.max_line_bytes, Span(window),
                                                 text_start - (start - window - pairs)):
        if offset >= start:
            break
        if blank(line, encoding) and text >= low:
            last = text
    return last


def _cut_lines(stream: BinaryIO, cfg: DataConfig, span: Span, text_start: int) -> Iterator[tuple]:
    """(offset, number, line, head, cut) of the lines from span.start on; cut is None, ("blank", the line's offset)
    at a blank line that ends a document, or ("split", the byte where the text reaches the multiple) at a line that
    starts one after a stretch without blank lines, the first line at or after a multiple of MAX_TEXT_DOCUMENT_BYTES
    of text. Both rules go by text offsets (module docstring), `text_start` span.start's."""
    step, split = TEXT_DOCUMENT_BYTES, MAX_TEXT_DOCUMENT_BYTES
    books = cfg.text_documents != "blank_lines"
    last_blank = _last_blank_before(stream, cfg, span.start, text_start) if span.start > 0 else -_NO_END
    # the first blank line at or past it is a cut; under blank_lines every one is
    boundary = max(step, text_start // step * step, (last_blank // step + 1) * step) if books else -_NO_END
    # a split multiple at or past `low` is this span's to find (one before it, a span before's). The byte where the
    # text reaches it is the line's own or one after `anchor`, the line before (span.start for the first line): every
    # byte between is a byte of text but the \n of a \r\n that ends the line before, which no multiple falls on
    anchor, anchor_text, low = span.start, text_start, text_start
    encoding = check_encoding(cfg.text_encoding)
    for offset, number, line, head, text in _text_lines(stream, cfg.max_line_bytes, span, text_start):
        multiple = text // split * split
        cut = None
        if blank(line, encoding):
            if text >= boundary:
                cut = ("blank", offset)
                boundary = (text // step + 1) * step if books else boundary
            last_blank = text
        elif multiple > 0 and multiple >= low and last_blank < multiple - step:
            cut = ("split", offset if multiple == text else anchor + multiple - anchor_text)
        yield offset, number, line, head, cut
        anchor, anchor_text, low = offset, text, text + 1


def read_text(stream: BinaryIO, name: str, path: str, cfg: DataConfig, span: Span) -> Iterator[dict]:
    """The documents of `span` (module docstring). A line over data.max_line_bytes rejects its document
    (line_too_long), which still ends at its cut: the rest of the file is not lost with it. A Project Gutenberg
    book's header and licence are no document's (gutenberg_book): each is one "gutenberg_boilerplate" row,
    "<name>@<its byte offset>", from the range that holds its first byte. A range that neither can reach
    (_may_reach_boilerplate) does not look for them."""
    probed = _may_reach_boilerplate(stream, span)
    book = gutenberg_book(stream) if probed else None
    header, licence = (0, _NO_END) if book is None else (book.header_end, book.licence_start or _NO_END)
    if book is not None and span.start == 0:
        yield reject_row(f"{name}@0", path, "gutenberg_boilerplate", decode_sample(book.start_line))
    if book is not None and book.licence_start is not None and span.start <= licence and span.owns(licence):
        yield reject_row(f"{name}@{licence}", path, "gutenberg_boilerplate", decode_sample(book.end_line))
    if span.start >= licence:
        return
    if span.start == 0:
        text_start = -book.header_text if book else 0
    else:
        text_start = text_offset(stream, span.start) if span.text_start is None else span.text_start
    lines = _cut_lines(stream, cfg, span, text_start)
    first_split = []
    if span.start > 0:  # to the first cut this span owns
        for item in lines:
            offset, cut = item[0], item[4]
            if cut is None and span.owns(offset):
                continue
            if cut is None or not span.owns(cut[1]):  # no cut of its own: the document across it is a span before's
                return
            first_split = [item] if cut[0] == "split" else []
            break
        else:
            return
    # with a cut at every blank line, a run of them is one separator, no document; nor, in a Gutenberg book, are blank
    # lines only (what its cut header or licence leaves). Such a document can also come anywhere (books: a blank line
    # just before a multiple and one at it, after ~1 MiB without one): a range that did not look asks the head then
    skip_blank_only = functools.cache(lambda: cfg.text_documents == "blank_lines" or book is not None or (
        not probed and is_book(stream)))
    chunks, first, too_long, encoding = [], None, None, check_encoding(cfg.text_encoding)

    def document() -> Iterator[dict]:
        if first is not None and not (too_long is None and all(blank(c, encoding) for c in chunks)
                                      and skip_blank_only()):
            yield text_document(f"{name}#{first}", path, chunks, too_long, cfg)

    for offset, number, line, head, cut in itertools.chain(first_split, lines):
        if offset >= licence:  # the licence's lines are no document's: what is read so far is the last one
            break
        if cut is not None and cut[0] == "split":  # (a split line is text: its document is never blank only)
            yield from document()
            if not span.owns(cut[1]):
                return
            chunks, first, too_long = [], None, None
        if offset >= header:  # the cuts are the file's, whatever is dropped: ranges and the whole file agree
            first = number if first is None else first
            if line is None:
                too_long = too_long or head
            elif too_long is None:
                chunks.append(line)
        if cut is not None and cut[0] == "blank":
            yield from document()
            if not span.owns(cut[1]):
                return
            chunks, first, too_long = [], None, None
    yield from document()


def _may_reach_boilerplate(stream: BinaryIO, span: Span) -> bool:
    """Whether a Gutenberg book's header or licence can touch the documents of `span`, so that it must find them
    (gutenberg_book: a 64 KiB head read, and on S3 fsspec's readahead of some MiB, then the 256 KiB tail, once per
    range otherwise). The header ends in the first GUTENBERG_HEAD[0] bytes: only a range starting before can meet
    it (of ranges at multiples of TEXT_DOCUMENT_BYTES, the first). The licence starts in the file's last
    GUTENBERG_TAIL bytes, and a range reads its last document past its end to the first cut it does not own: a
    blank line at or after the end's text offset rounded up to TEXT_DOCUMENT_BYTES, or a split at the first line at
    or after the first multiple of MAX_TEXT_DOCUMENT_BYTES at least TEXT_DOCUMENT_BYTES past that (a blank line in the
    TEXT_DOCUMENT_BYTES before that multiple is such a cut itself, in either text_documents mode): less than
    2 x TEXT_DOCUMENT_BYTES + MAX_TEXT_DOCUMENT_BYTES of text past the end, and so less than twice as many bytes plus
    one (a \r\n's \n is no text, its \r is). Every line it takes starts before, and the line past ends the document
    with or without a licence: a range that ends so far before the tail reads the same either way. The last range
    (end -1) and a compressed file's (read whole) always look."""
    if span.start < GUTENBERG_HEAD[0] or span.end < 0:
        return True
    reach = span.end + 2 * (2 * TEXT_DOCUMENT_BYTES + MAX_TEXT_DOCUMENT_BYTES) + 1
    size = stream.seek(0, io.SEEK_END)  # no read: a local file's size, a remote one's from its listing
    stream.seek(0)
    return reach > size - GUTENBERG_TAIL


def text_document(doc_id: str, path: str, chunks: list[bytes], too_long: bytes | None, cfg: DataConfig,
                  unescape=None, utf8: bool = False) -> dict:
    """The row of a document's lines: rejected if a line was too long or does not decode, else cleaned
    (document_row) after `unescape` (WikiExtractor's HTML escapes). Decoded as data.text_encoding says (but a
    document that is UTF-8 is read so: declared_or_utf8), or as UTF-8 (`utf8`: WikiExtractor's <doc> files, which it
    always writes so, beside cp1252 books)."""
    declared = "" if utf8 else cfg.text_encoding
    encoding = check_encoding(declared) or "utf-8"
    if too_long is not None:
        return reject_row(doc_id, path, "line_too_long", decode_sample(too_long, encoding))
    data = b"".join(chunks)
    try:
        text = declared_or_utf8(data, encoding)
    except UnicodeDecodeError as e:  # invalid_utf8; a byte cp1252 does not define: invalid_cp1252
        reason = invalid_reason(declared)
        return reject_row(doc_id, path, reason, decode_sample(data[max(0, e.start - 100):], encoding))
    return document_row(doc_id, path, unescape(text) if unescape else text, cfg)


def declared_or_utf8(data: bytes, encoding: str) -> str:
    """`data` decoded in `encoding`, or as UTF-8 (a leading byte-order mark dropped) where it holds a byte past ASCII
    and is valid UTF-8. A corpus declared cp1252 or latin-1 (older Gutenberg books) mixes in UTF-8 books: decoded in
    the declared encoding they were mojibake BERT learned from ("cafÃ©", "â€”", a BOM as "ï»¿"), or a whole book
    rejected at the 0x9D of a UTF-8 "”" (undefined in cp1252). Text in a one-byte encoding is practically never
    valid UTF-8 once it holds such a byte (UTF-8's lead bytes are latin-1's accented letters, which prose does not
    follow with the symbols at 0x80-0xBF that UTF-8 wants after them): the usual UTF-8-first rule. Decided per
    document, and a document is whole lines, cut at the \n byte no UTF-8 sequence holds, so a file read whole or in
    ranges decides alike. A document read so is not counted: a good row has no field for it, and rejects count
    rejected rows only."""
    if encoding != "utf-8" and not data.isascii():
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError:
            pass  # not UTF-8: the declared encoding's text, or its reject (invalid_cp1252) at the byte it lacks
    if encoding == "iso8859-1":
        return latin1_as_windows_1252(data)
    return data.decode(encoding)


def latin1_as_windows_1252(data: bytes) -> str:
    """`data`, declared latin-1, read as windows-1252 (_WINDOWS_1252): one character a byte, none refused, no state
    between calls, so a file decodes alike whole or in pieces (task files: tasks/text_encoding.as_utf8)."""
    return codecs.charmap_decode(data, "strict", _WINDOWS_1252)[0]


# A declared latin-1 (iso8859-1, under any of its names) is read as windows-1252, as the WHATWG Encoding Standard and
# every browser read the label: "ISO-8859-1" Gutenberg books hold its 0x80-0x9F punctuation (0x93 0x94 quotes, 0x97
# em dash, 0x92 apostrophe), which latin-1 makes C1 controls that normalize_text drops, joining words ("timesit").
# The five bytes windows-1252 leaves undefined stay latin-1's controls (WHATWG's table too): latin-1 rejects nothing.
_WINDOWS_1252 = "".join(bytes([b]).decode("cp1252", "ignore") or chr(b) for b in range(256))
