"""WikiExtractor's default output -> document rows (pipelines/sources.py's reader for format "wikiextractor"): articles
as <doc id=.. url=.. title=..> ... </doc> blocks, each one document "<name>#<the line of its <doc>>"."""

from __future__ import annotations

import codecs
import html
import re
from typing import BinaryIO, Iterator

from pipelines.config import DataConfig
from pipelines.source_rows import decode_sample, reject_row
from pipelines.text_source import Span, span_lines, text_document

_DOC_START = re.compile(rb'^<doc\b[^>]*>\s*$')
_DOC_TITLE = re.compile(rb'\btitle="(.*)">\s*$')  # up to the tag's end: WikiExtractor 3.0 leaves a '"' in it


def read_wikiextractor(stream: BinaryIO, name: str, path: str, cfg: DataConfig, span: Span) -> Iterator[dict]:
    """WikiExtractor's default output (wiki_00, ...): each block one document, its first line (the title, which --json
    leaves out of "text") dropped, &amp; &lt; &gt; &quot; unescaped (its --html-safe default). Read as text, a ~1 MB
    file was one document of hundreds of articles: "IsNext" pairs across unrelated articles, and the tags in the text.
    A UTF-8 byte-order mark opening a line is no text: the file's, or a joined file's (`cat` of files saved with one),
    whose <doc> line it hid, and the article was lost. A block the file ends inside is kept. Lines outside a block
    are text of no article (WikiExtractor writes none): each stretch of them up to the next <doc> is one
    "outside_doc_block" row, "<name>#<its first line>", so what is not read is counted. A range (a .txt of them is
    planned in byte ranges) owns the blocks whose <doc> line starts in it, read past its end, and a stretch after one
    of its blocks; the lines before its first <doc> are the range before's (its last block's, or a stretch after it).
    A block whose escapes do not unescape (a decimal one past int()'s 4,300 digits, as --no-html-safe can leave) is one
    "malformed_wikitext" row, as a wiki page that cannot be stripped is."""
    doc, title, lines, too_long = None, b"", [], None
    outside, stray = span.start == 0, None  # whether a line out of a block is this range's; its stretch's first
    for offset, number, line, head in span_lines(stream, cfg.max_line_bytes, span):
        if line is None:
            too_long = too_long or head
            if doc is None and outside and stray is None:
                stray = (number, head)
            continue
        line = line.removeprefix(codecs.BOM_UTF8)
        if doc is None:
            if _DOC_START.match(line):
                if stray is not None:
                    yield reject_row(f"{name}#{stray[0]}", path, "outside_doc_block", decode_sample(stray[1]))
                if not span.owns(offset):
                    return
                m = _DOC_TITLE.search(line)
                doc, title, lines, too_long, stray = number, m.group(1) if m else b"", [], None, None
            elif outside and stray is None and line.strip():
                stray = (number, line)
            continue
        if line.strip() == b"</doc>":
            yield _wikiextractor_document(f"{name}#{doc}", path, lines, title, too_long, cfg)
            doc, outside = None, True
            continue
        lines.append(line)
    if doc is not None:
        yield _wikiextractor_document(f"{name}#{doc}", path, lines, title, too_long, cfg)
    elif stray is not None:
        yield reject_row(f"{name}#{stray[0]}", path, "outside_doc_block", decode_sample(stray[1]))


def _wikiextractor_document(doc_id: str, path: str, lines: list[bytes], title: bytes, too_long,
                            cfg: DataConfig) -> dict:
    def plain(text: bytes) -> str:  # a later WikiExtractor escapes '"' in the attribute, not in the title line
        return html.unescape(text.strip().decode("utf-8", "replace"))

    try:
        if lines and plain(lines[0]) == plain(title):
            lines = lines[1:]
        return text_document(doc_id, path, lines, too_long, cfg, html.unescape, utf8=True)
    except ValueError as e:  # html.unescape's int() of a decimal escape past 4,300 digits: escaping, it ended the file
        name = title[:200].decode("utf-8", "replace")
        return reject_row(doc_id, path, "malformed_wikitext", f"{path}: the <doc> {name!r}: {e}")
