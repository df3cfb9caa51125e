"""Multistream bz2 XML dumps read in ranges, so that one big dump is prepared by every worker of the cluster.

A multistream bz2 file is bz2 streams laid end to end: Wikipedia's `pages-articles-multistream.xml.bz2`
(100 pages a stream, its index file lists the offsets), and what pbzip2 / lbzip2 write (one stream per
block, cut anywhere, pages included). Each stream starts on a byte with `BZh<level>` and the block magic
`1AY&SY` (`stream_offsets` finds them; a false match inside compressed data has odds of 2^-76 a byte).

A range is the streams that start in compressed bytes [start, end). It owns the pages whose `<page>` tag
starts in what its streams decompress to, wherever the streams cut the XML:
  * it skips what comes before its first `<page>` (the end of a page an earlier range owns; for the
    first range, nothing: it keeps the dump's header);
  * past its last stream, it reads on into the next streams only to finish its last page (up to the next
    `<page>` tag, which the next range owns);
  * what it hands the XML parser is wrapped in the dump's own root tag and <siteinfo> (read from the first
    stream) and closed with `</mediawiki>`, so each range parses as a small dump of its pages.
So every page is read once, by exactly one range, and doc_ids (`<name>#<page id>`) do not depend on the
ranges. MediaWiki escapes `<` in page text, so `<page>` in the decompressed bytes is always a tag.

A stream that ends early or holds invalid data raises `DamagedStream` naming its offset, after the range has handed
on every byte before it: the range owning that stream reports it and reads on from the next stream (`next_stream`)
as a range starting there would, and one that read into it past its own end only to finish its last page (or for
the dump's header) does not. So a damaged stream costs the same pages (its own, and one it shares with its
neighbour), and is counted once, however the dump is cut into ranges, or read whole. Bytes after a complete stream
that do not begin a bz2 stream, with no stream after them (zero padding, junk appended to the dump), are not a stream:
the dump ends there, as bz2.open reads it (CPython's DecompressReader ignores such trailing data too).
"""

from __future__ import annotations

import bz2
import re
from typing import BinaryIO, Iterator

STREAM_MAGIC = re.compile(rb"BZh[1-9]1AY&SY")
STREAM_HEADER = re.compile(rb"BZh[1-9]")  # any stream's first bytes, an empty one's (no block) included
SCAN_BYTES = 16 << 20
READ_BYTES = 1 << 16
OUTPUT_BYTES = 1 << 16  # decompressed at a time: memory for a step whatever the compression ratio
PAGE = b"<page>"
END = b"</mediawiki>\n"
SITEINFO_END = b"</siteinfo>"
ROOT_SEARCH_BYTES = 1 << 20  # the root tag must come within the dump's first MiB


class DamagedStream(Exception):
    """A bz2 stream of the dump ends before its end-of-stream marker (`truncated`) or holds invalid data; `offset`:
    the compressed offset where it starts, which says the range that owns (and reports) it."""

    def __init__(self, offset: int, truncated: bool, message: str):
        super().__init__(message)
        self.offset, self.truncated = offset, truncated


def stream_offsets(f: BinaryIO) -> list[int]:
    """Compressed offsets where bz2 streams start, in order (one scan of the file)."""
    offsets: list[int] = []
    pos, carry = 0, b""
    f.seek(0)
    while chunk := f.read(SCAN_BYTES):
        data, base = carry + chunk, pos - len(carry)
        found = [base + m.start() for m in STREAM_MAGIC.finditer(data)]
        offsets += [o for o in found if not offsets or o > offsets[-1]]
        carry, pos = data[-9:], pos + len(chunk)  # a magic cut by the chunk edge is found in the next scan
    return offsets


def next_stream(f: BinaryIO, after: int) -> int | None:
    """The compressed offset of the first stream that starts after byte `after`, or None."""
    pos, carry = after + 1, b""
    f.seek(pos)
    while chunk := f.read(SCAN_BYTES):
        data = carry + chunk
        if m := STREAM_MAGIC.search(data):
            return pos - len(carry) + m.start()
        carry, pos = data[-9:], pos + len(chunk)
    return None


def dump_header(f: BinaryIO) -> bytes:
    """The dump's `<mediawiki ...>` start tag and its `<siteinfo>` (the wiki's own namespace names, which the
    stripper needs in every range), from the start of the file (the first streams), with what comes before the root:
    the XML declaration, whose encoding every range is read in."""
    head = b""
    for data, _ in _decompressed(f, 0, -1):
        head += data
        i = head.find(b"<mediawiki")
        if i >= 0 and (j := head.find(b">", i)) >= 0:
            page, info = head.find(PAGE, j), head.find(SITEINFO_END, j)
            if 0 <= info and (page < 0 or info < page):
                return head[:info + len(SITEINFO_END)]
            if page >= 0 or len(head) >= ROOT_SEARCH_BYTES:  # no siteinfo before the pages: the root alone
                return head[:j + 1]
        if len(head) >= ROOT_SEARCH_BYTES:
            break
    raise ValueError("no <mediawiki> root tag at the start of the dump")


def _decompressed(f: BinaryIO, start: int, end: int) -> Iterator[tuple[bytes, bool]]:
    """(bytes, past_end) from the streams starting at `start`, OUTPUT_BYTES at most at a time; past_end once a
    stream starts at or after `end` (end -1: never). DamagedStream if the file ends inside a stream or a stream holds
    invalid data; trailing data after the last stream (`_trailing`) ends the streams as the file's end does."""
    f.seek(start)
    pos = stream_start = start  # pos: the offset of the next byte to read
    d, raw = bz2.BZ2Decompressor(), b""
    while True:
        if d.eof:
            stream_start, raw, d = pos - len(d.unused_data), d.unused_data, bz2.BZ2Decompressor()
        if d.needs_input and not raw:
            raw = f.read(READ_BYTES)
            if not raw:
                break
            pos += len(raw)
        try:
            out = d.decompress(raw, OUTPUT_BYTES)
        except OSError as e:  # "Invalid data stream"
            if stream_start > start and _trailing(f, stream_start):
                return
            raise DamagedStream(stream_start, False, str(e)) from e
        raw = b""
        if out:
            yield out, 0 <= end <= stream_start
    if stream_start != pos:
        raise DamagedStream(stream_start, True, "compressed file ended before the end-of-stream marker was reached")


def _trailing(f: BinaryIO, offset: int) -> bool:
    """Whether the invalid bytes from `offset`, just past a complete stream, are data after the dump rather than a
    damaged stream: they do not begin with a stream header and no stream starts after them. A stream damaged past its
    header, or bad data with streams after it, is damage, reported and read past (module docstring)."""
    f.seek(offset)
    return not STREAM_HEADER.match(f.read(4)) and next_stream(f, offset) is None


def owned_xml(f: BinaryIO, start: int, end: int) -> Iterator[bytes]:
    """The XML a range [start, end) of stream offsets owns (module docstring), as one parseable document."""
    skipping = start > 0
    if skipping:
        yield dump_header(f)
    buf, total, boundary = b"", 0, None  # total: decompressed bytes so far; buf ends there
    try:
        for data, past_end in _decompressed(f, start, end):
            if past_end and boundary is None:
                boundary = total  # decompressed offset where the range's own streams end
            buf, total = buf + data, total + len(data)
            base = total - len(buf)  # decompressed offset of buf[0]
            if skipping:
                i = buf.find(PAGE)
                if i < 0:
                    buf = buf[-(len(PAGE) - 1):]
                    continue
                buf, base, skipping = buf[i:], base + i, False
            if boundary is not None:
                j = buf.find(PAGE, max(0, boundary - base))  # the first page the range does not own
                if j >= 0:
                    yield buf[:j]
                    yield END
                    return
            keep = max(0, len(buf) - (len(PAGE) - 1))  # a tag may straddle the next chunk
            if boundary is not None:
                keep = max(keep, min(len(buf), boundary - base))
            yield buf[:keep]
            buf = buf[keep:]
    except DamagedStream:
        if not skipping:  # the bytes held back for a straddling tag may end the range's last page ("age>\n")
            yield buf
        raise
    # the end of the file: the dump's own closing tag is in buf, unless the range owned no page at all
    yield END if skipping else buf


class ChunkStream:
    """A read()-able view of an iterator of byte chunks, for the XML parser."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks, self._buf = chunks, b""

    def read(self, n: int = -1) -> bytes:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return b""
        if n < 0 or n >= len(self._buf):
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out
