"""Corpus sources -> one Ray Dataset of cleaned documents, with every bad input counted.

Each row: doc_id, source, text, reject_reason, sample (see DOCUMENT_COLUMNS). Good documents
have reject_reason "" and sample ""; rejected rows keep text "" (so a 50 MB junk line never
travels further) and carry the first SAMPLE_CHARS of the bad input in `sample`.

doc_id is "<name>#<n>": <name> is the file path relative to the common directory of all
resolved files (stable across runs, machines and worker counts for the same sources; it changes
if sources are added above that directory), <n> the 0-based line (JSONL), element (a .json file
holding one JSON array), row (parquet) or page id (wiki XML). A text file is cut into documents by offsets of its
text (bytes less each \\r of a \\r\\n, from a Gutenberg header's end): at the first blank line at or after every
TEXT_DOCUMENT_BYTES, a stretch with none at the first line past each MAX_TEXT_DOCUMENT_BYTES (text_source); a document's
<n> is the line it starts on (a book under 1 MiB is one document, "<name>#0"). A reject that concerns a whole file
(binary_file, empty_file, truncated_*, corrupt_*, malformed_xml, not_a_wiki_dump, no_wiki_pages,
multistream_index, malformed_parquet, and missing_text_column for parquet) has doc_id "<name>"; a parquet row group
that cannot be decoded past some row is one "malformed_parquet" row at the first row lost; a wiki page with no id
to name it, "<name>@<byte offset of its <page> tag>". Files and their names: pipelines/source_files.py.

Semantics of bad input -- the record is rejected and counted, the read goes on:
  * A source that matches nothing, or a local file that cannot be read (missing, permission denied: found as
    sources are resolved), raises SourceError naming the path: that is a configuration error, not bad data. So does
    a zstd file (.zst, The Pile's): no zstd decoder is installed, and each file would be one reject. An open that
    fails later (a file gone since, an object store's error) raises SourceReadError, an I/O error as below.
  * Files are sniffed first: zero bytes -> "empty_file"; a text or JSONL file opening with a UTF-16 or UTF-32
    byte-order mark -> "utf16_file" (its sample says: convert it to UTF-8); an image/archive magic number, or NUL
    bytes among control bytes that make over 1% of the first 8 KiB of a text or JSONL file -> "binary_file" (one row
    per file; UTF-16 text without a mark lands here too, by its NULs; a stray NUL in text is no binary file).
  * The record is the unit of rejection: a JSONL line, a parquet row, a wiki page, and a whole
    book for .txt. Invalid UTF-8 in a record rejects that record ("invalid_utf8"), and so does a
    JSON string with a lone surrogate escape ("\\ud83d"): text corpora are UTF-8 and guessing
    another encoding produces mojibake BERT would learn from. Plain text in another encoding is read
    in the one cfg.text_encoding names (latin-1, cp1252, ...: an older Project Gutenberg book), a
    byte it does not define rejecting the document ("invalid_cp1252"); a document of it that is valid UTF-8 with
    bytes past ASCII is a UTF-8 book among them, read as UTF-8 (text_source.declared_or_utf8). Latin-1 is read as
    windows-1252, as browsers read the label: its 0x80-0x9F were controls, dropped with the punctuation they stand for.
  * A Project Gutenberg book's header (to its "*** START OF ..." line) and licence (from its "*** END OF ..."
    line) are no document's text: one "gutenberg_boilerplate" row each (gutenberg.gutenberg_book).
  * A line longer than cfg.max_line_bytes is skipped in bounded chunks, never held whole, and
    rejects its record ("line_too_long"); the next JSONL line is read normally.
  * A compressed stream that ends early yields every complete record before the cut, then one
    "truncated_bz2" / "truncated_gzip" / "truncated_xz" row; undecodable compressed data -> "corrupt_<codec>".
    An I/O error partway through (a disk error, a network reset, a timeout) is not bad data: it raises
    SourceReadError naming the file, as in an uncompressed one, so the job fails (with its traceback, exit status 1)
    rather than keep part of the file as if whole.
  * Wiki XML is parsed a <page> at a time (wiki.iter_dump): a page whose XML does not parse (a byte that is not
    UTF-8, a broken tag) is one "malformed_xml" row, "<name>#<page id>" (or "<name>@<byte offset of its <page>
    tag>" if no id can be read) and the next page is read; XML broken before the first page is one "malformed_xml"
    row for the file. An .xml file whose root is not <mediawiki> -> "not_a_wiki_dump"; an export without a page ->
    "no_wiki_pages"; a page without an <id> (or one past int()'s 4300 digits) -> "missing_page_id"; a page whose
    wikitext the stripper cannot read (a number past those digits: "&#0...065;", a date template's month) ->
    "malformed_wikitext", the page alone. A Wikipedia dump's index (`...-multistream-index.txt.bz2`: offset:id:title
    lines) is not read: one "multistream_index" row.
  * Cleaned text that is empty, or null (JSON, parquet) -> "empty_document"; shorter than cfg.min_document_chars ->
    "too_short". Wiki pages: "redirect", "disambiguation", "non_article_namespace" (a page's <ns>, or in an export
    older than <ns> the namespace its title's prefix names).
  * Exact duplicates (same cleaned text) -> "duplicate", keeping the smallest doc_id, so the
    survivor does not depend on scheduling: `find_duplicates` on (content hash, order) pairs,
    which `pipelines.dedup.drop_duplicates` applies to a Dataset and prepare() to its tokenizing pass's stats.

Formats (cfg.format, "auto" = by extension after stripping .bz2/.gz/.xz): .txt/.text/.md -> text; .jsonl/.json/.ndjson
-> jsonl (WikiExtractor --json output and any JSON-lines file with cfg.text_column); .xml and a split dump's
.xml-p<first>p<last> -> wiki_xml; .parquet -> parquet; a file of another extension or none (wiki_00, WikiText's .raw, a
Gutenberg download's 1342.txt.utf-8) is sniffed: JSON lines if it starts with "{" (WikiExtractor's extensionless wiki_00
files with --json), WikiExtractor's default <doc ...> blocks if with "<doc " (wikiextractor: one document an article; so
is a .txt that starts so, its files concatenated: `cat text/*/wiki_* > wikicorpus_en.txt`, NVIDIA's recipe), wiki XML if
with "<mediawiki" (or an XML declaration before one), else text. A table, markup or settings file (_NOT_A_CORPUS: a
metadata.csv beside the books, .html, .tsv) is one "unknown_file_type" row (a "binary_file" one if it looks binary: a
cover .png), whose sample names data.format=text, which reads it as text (and every other source too). WikiExtractor's
--json records (keys id, url, title, text and maybe revid, nothing else) have &amp; &lt; &gt; unescaped, as its <doc>
files (its --html-safe default escapes the text in both). A .json file that starts with "[" is one JSON array whose
elements are the records (same field rules; broken JSON between elements ends the file with one "malformed_json" row),
read whole by the range at byte 0. A UTF-8 byte order mark opening a JSONL or <doc> file's line is not part of its
record (files saved with one, then joined with `cat`). Lines outside WikiExtractor's <doc> blocks are one
"outside_doc_block" row a stretch (pipelines/wikiextractor_source.py). A parquet text column may be string or binary
(decoded as UTF-8 row by row, "invalid_utf8" if it is not: a string column's invalid bytes too); a column of another
type (list, struct, ...) is one "missing_text_column" row naming the type.

Row order is not guaranteed (Ray Data streams blocks as tasks finish): doc_id is the key.
Reading is streaming. `iter_documents` reads a whole file or a Span of one (units.py plans
them): uncompressed text and JSONL split at record boundaries, parquet by row groups. A gzip,
bz2 or xz file, and plain wiki XML, is one task (a multistream .xml.bz2 dump is read in ranges of
its streams: pipelines/multistream.py).
`read_documents` (the Dataset API, not prepare()) still reads one task per file.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import json
import lzma
import posixpath
import re
import xml.etree.ElementTree as ET
import zlib
from typing import BinaryIO, Iterator

import ray

from pipelines import json_array, multistream, wiki
from pipelines.config import DataConfig
from pipelines.parquet_source import bad_compressed_data, read_parquet
from pipelines.paths import open_binary
from pipelines.source_files import SourceReadError, refuse_unread_codec, relative_names, resolve_sources
from pipelines.source_rows import (SAMPLE_CHARS, decode_sample, document_row,  # noqa: F401 (SAMPLE_CHARS: theirs)
                                  reject_row)
from pipelines.text_source import (MAX_TEXT_DOCUMENT_BYTES, TEXT_DOCUMENT_BYTES, WHOLE, Span,  # noqa: F401 (theirs)
                                   read_text, span_lines)
from pipelines.wikiextractor_source import read_wikiextractor

DOCUMENT_COLUMNS = ("doc_id", "source", "text", "reject_reason", "sample")
REJECT_REASONS = (  # and invalid_<encoding> (invalid_cp1252) for plain text in the data.text_encoding named
    "invalid_utf8", "binary_file", "empty_file", "empty_document", "too_short", "line_too_long",
    "truncated_bz2", "truncated_gzip", "truncated_xz", "corrupt_bz2", "corrupt_gzip", "corrupt_xz", "malformed_json",
    "malformed_xml", "malformed_parquet", "missing_text_column", "redirect", "disambiguation",
    "non_article_namespace", "duplicate", "not_a_wiki_dump", "no_wiki_pages", "missing_page_id", "multistream_index",
    "gutenberg_boilerplate", "utf16_file", "outside_doc_block", "malformed_wikitext", "unknown_file_type",
)
SNIFF_BYTES = 8192
_BINARY_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"%PDF", b"PK\x03\x04", b"\x1f\x8b", b"BZh")
# bytes text does not hold: NUL and the C0 controls but tab, line ends (\n \v \f \r) and escape (ANSI colours); DEL
_CONTROL_BYTES = bytes([*range(0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])
_EXTENSIONS = {".txt": "text", ".text": "text", ".md": "text", ".jsonl": "jsonl", ".json": "jsonl",
               ".ndjson": "jsonl", ".xml": "wiki_xml", ".parquet": "parquet"}
# tables, markup and settings beside a corpus (a metadata.csv, an index.html): no corpus format, never sniffed as a
# book; any other extension is (wiki_00, WikiText's .raw, a Gutenberg download's 1342.txt.utf-8, WMT's .shuffled)
_NOT_A_CORPUS = {".csv", ".tsv", ".tab", ".html", ".htm", ".xhtml", ".yaml", ".yml", ".toml", ".ini", ".cfg"}
_WIDE_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)  # UTF-32LE's FF FE 00 00: UTF-16LE's too
_CODECS = {".bz2": "bz2", ".gz": "gzip", ".xz": "xz"}
_SPLIT_DUMP = re.compile(r"\.xml-p\d+p\d+$", re.IGNORECASE)  # a Wikipedia dump part: ...-multistream1.xml-p1p41242
# A multistream dump's index (...-multistream-index.txt.bz2, or a part's ...-multistream-index1.txt-p1p41242.bz2)
_DUMP_INDEX = re.compile(r"multistream-index\d*\.txt(?:-p\d+p\d+)?$", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# Reading


def read_documents(cfg: DataConfig) -> ray.data.Dataset:
    """All documents of cfg.sources, good and rejected, streamed one Ray task per file.

    Ray must already be initialised by the caller. Duplicates are not yet marked: that needs a
    global step, `pipelines.dedup.drop_duplicates`.
    """
    files = resolve_sources(cfg)
    items = [{"path": p, "name": n} for p, n in zip(files, relative_names(files))]
    return (ray.data.from_items(items, override_num_blocks=len(items))
            .flat_map(_parse_file, fn_kwargs={"cfg": cfg}))


def _parse_file(item: dict, cfg: DataConfig) -> Iterator[dict]:
    return iter_documents(item["path"], item["name"], cfg)


def file_format(path: str, cfg: DataConfig) -> str | None:
    """The reader a file gets: cfg.format, else by extension; None = sniff its first bytes.
    Compressed files are "gzip" / "bz2" / "xz" here: read whole, from the start, but for multistream bz2 XML
    (pipelines/units.py splits that at its stream offsets)."""
    stem, codec = _split_codec(path)
    return codec or _named_format(stem, cfg)


def named_plain_text(path: str, cfg: DataConfig) -> bool:
    """Whether `path` is plain text by its name or cfg.format (compressed or not; a sniffed file: no). Under
    format=auto such a file may still open as WikiExtractor's <doc> blocks and be read so: read_format."""
    stem = _split_codec(path)[0]
    return _named_format(stem, cfg) == "text" and not _DUMP_INDEX.search(stem)


def read_format(path: str, cfg: DataConfig) -> str | None:
    """The reader `iter_documents` gives `path` ("text", "wikiextractor", "jsonl", "wiki_xml", "parquet"; "unknown": a
    table, markup or settings file, _NOT_A_CORPUS, one unknown_file_type reject): cfg.format, else its name's, else its
    first bytes' (_sniffed_format); a file named text under format=auto is sniffed too, and one that opens with
    WikiExtractor's "<doc " is its (_read_stream). None: a dump's index, or a file its name does not place that cannot
    be opened or sniffed (no document to ask about); a named text file that cannot be sniffed stays text (its reader
    meets what stopped the sniff, and reports it)."""
    stem, codec = _split_codec(path)
    if _DUMP_INDEX.search(stem):
        return None
    named = _named_format(stem, cfg)
    if named is not None and (named != "text" or cfg.format != "auto"):
        return named
    try:
        with open_binary(path) as raw, _decompressed(raw, codec) as stream:
            sniffed = _sniffed_format(_ShortReads(stream).read(SNIFF_BYTES))
    except (OSError, EOFError, zlib.error, lzma.LZMAError):
        return named
    return sniffed if named is None or sniffed == "wikiextractor" else named


def reads_plain_text(path: str, cfg: DataConfig) -> bool:
    """Whether `iter_documents` reads `path` as plain text (read_format): named so and not opening as WikiExtractor's
    <doc> blocks, or a file its name does not place whose first bytes the reader sniffs as text (an extensionless
    corpus file, WikiText's .raw)."""
    return read_format(path, cfg) == "text"


def read_as_book(path: str, cfg: DataConfig) -> bool:
    """Whether `path` is read as plain text (reads_plain_text), named so or sniffed (a Gutenberg download's
    1342.txt.utf-8, an extensionless file): under data.text_documents=books cut into ~1 MiB documents, pieces of one
    book (spill.book_names holds them out whole, ShardLayout.plan counts them). A sniffed book was no book: its
    pieces were held out one by one, the eval split holding pieces of books train read, with no warning. A .txt of
    WikiExtractor's <doc> blocks (NVIDIA's wikicorpus_en.txt) is an article a document, no book: held out under its
    file's name, all of Wikipedia went to train or to eval as one unit."""
    return reads_plain_text(path, cfg)


def _named_format(stem: str, cfg: DataConfig) -> str | None:
    """cfg.format, else the format an uncompressed file's name gives; None = sniff it; "unknown": a table, markup or
    settings file's extension (_NOT_A_CORPUS; module docstring)."""
    if cfg.format != "auto":
        return cfg.format
    if _SPLIT_DUMP.search(stem):
        return "wiki_xml"
    ext = posixpath.splitext(stem)[1].lower()
    return _EXTENSIONS.get(ext) or ("unknown" if ext in _NOT_A_CORPUS else None)


def iter_documents(path: str, name: str, cfg: DataConfig, span: Span = WHOLE) -> Iterator[dict]:
    """Rows (DOCUMENT_COLUMNS) of one file, or of the records of `span`, lazily; this is what
    each Ray task runs. Whole-file rejects (empty, binary, ...) come from the span at 0 only."""
    stem, codec = _split_codec(path)
    if _DUMP_INDEX.search(stem):  # a list of the dump's pages, no text: it would be one junk document
        if span.start == 0:
            yield reject_row(name, path, "multistream_index", f"{path}: a multistream dump's index "
                             "(offset:page id:title lines), not text; the dump itself is read without it")
        return
    fmt = _named_format(stem, cfg)
    wiki_streams = codec == "bz2" and fmt == "wiki_xml"
    if span != WHOLE and not wiki_streams and (codec or fmt not in ("text", "jsonl", "parquet")):
        raise ValueError(f"{path}: only uncompressed text, JSONL, parquet and multistream bz2 XML are read in ranges")
    try:
        raw = open_binary(path)
    except OSError as e:
        raise SourceReadError(f"cannot read {path}: {e}") from e
    if span != WHOLE and wiki_streams:
        with raw:
            yield from _read_wiki_streams(raw, name, path, cfg, span)
        return
    with raw:
        if not raw.read(1):  # before decompressing: an empty .bz2 is empty, not truncated
            if span.start == 0:
                yield reject_row(name, path, "empty_file", "")
            return
        raw.seek(0)
        if wiki_streams:  # as its ranges read it: BZ2File takes bad data in a later stream for the file's end
            yield from _read_wiki_streams(raw, name, path, cfg, span)
            return
        for row in _read_stream(raw, path, name, fmt, codec, cfg, span):
            if span.start == 0 or row["doc_id"] != name:  # a file's own reject: once per file
                yield row


def _read_stream(raw: BinaryIO, path: str, name: str, fmt: str | None, codec: str | None,
                 cfg: DataConfig, span: Span) -> Iterator[dict]:
    with _decompressed(raw, codec) as stream:
        try:
            head = _ShortReads(stream).read(SNIFF_BYTES)
            if not head:
                yield reject_row(name, path, "empty_file", "")
                return
            stream.seek(0)
            sniffed = _sniffed_format(head)
            if fmt is None or (fmt == "text" and cfg.format == "auto" and sniffed == "wikiextractor"):
                fmt = sniffed  # a .txt of <doc> blocks read as a book: hundreds of articles a document, tags as text
            if fmt in ("text", "jsonl") and head.startswith(_WIDE_BOMS):
                yield reject_row(name, path, "utf16_file", _utf16_said(head))
                return
            if fmt in ("text", "jsonl", "unknown") and _looks_binary(head):
                yield reject_row(name, path, "binary_file", decode_sample(head))
                return
            if fmt == "unknown":
                ext = posixpath.splitext(_split_codec(path)[0])[1]
                yield reject_row(name, path, "unknown_file_type", f"{ext} names no corpus format: set data.format=text "
                                 f"to read such files as plain text, or leave them out of data.sources. It opens: "
                                 f"{decode_sample(head)}")
                return
            if fmt == "jsonl" and is_json_array(path, head):
                if span.start == 0:  # the array is read whole by the part at 0: it has no line to start at
                    yield from _read_json_array(stream, name, path, cfg)
                return
            yield from _READERS[fmt](stream, name, path, cfg, span)
        except EOFError:
            yield reject_row(name, path, f"truncated_{codec}", f"{path} ended before its end-of-stream marker")
        except (OSError, zlib.error, lzma.LZMAError) as e:  # zlib.error: a gzip member with a bad deflate block
            if codec is None or not bad_compressed_data(e):
                raise SourceReadError(f"error reading {path}: {e}") from e
            yield reject_row(name, path, f"corrupt_{codec}", f"{path}: {e}"[:SAMPLE_CHARS])


def _split_codec(path: str) -> tuple[str, str | None]:
    refuse_unread_codec(path)  # every file of such a corpus would be one reject: stop before any is read
    stem, ext = posixpath.splitext(path)
    ext = ext.lower()
    return (stem, _CODECS[ext]) if ext in _CODECS else (path, None)


def _sniffed_format(head: bytes) -> str:
    """The format of a file its name does not give: JSON lines if it starts with "{" (WikiExtractor's wiki_00 with
    --json), WikiExtractor's own <doc> blocks if with "<doc " (its default output), wiki XML if with "<mediawiki"
    or with an XML declaration before one, else text. Other XML stays text: the
    wiki reader would find no <page> in it, and yield nothing to count."""
    start = head.removeprefix(codecs.BOM_UTF8).lstrip()
    if start.startswith(b"{"):
        return "jsonl"
    if start.startswith(b"<doc "):
        return "wikiextractor"
    wiki = start.startswith(b"<mediawiki") or (start.startswith(b"<?xml") and b"<mediawiki" in start)
    return "wiki_xml" if wiki else "text"


def is_json_array(path: str, head: bytes) -> bool:
    """A .json file holding one JSON array, not JSON lines: its first character past JSON whitespace is "["."""
    stem = _split_codec(path)[0]
    return (posixpath.splitext(stem)[1].lower() == ".json"
            and head.removeprefix(codecs.BOM_UTF8).lstrip(b" \t\n\r")[:1] == b"[")


def _decompressed(raw: BinaryIO, codec: str | None) -> BinaryIO:
    if codec == "bz2":
        return bz2.BZ2File(raw)  # handles multistream dumps (pages-articles-multistream.xml.bz2)
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw)
    if codec == "xz":
        return lzma.LZMAFile(raw)
    return raw


def _utf16_said(head: bytes) -> str:
    """A UTF-16 (or UTF-32) file's reject sample: the readers cut lines at \\n bytes, which UTF-16 writes as two
    (data.text_encoding refuses it), and UTF-16 without NULs (CJK text) read as UTF-8 was invalid_utf8 row by row."""
    utf = "UTF-32" if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)) else "UTF-16"
    return f"{utf} text (its byte-order mark): convert it to UTF-8 (iconv -f {utf} -t UTF-8)"


def _looks_binary(head: bytes) -> bool:
    """A magic number, or NUL bytes among control bytes (_CONTROL_BYTES) that make over 1% of the head: random or
    compressed bytes hold ~10% of them, UTF-16 text ~50% NULs. One stray NUL in 8 KiB rejected a whole 7 MB JSONL;
    now its record is malformed_json (JSON allows no raw control character) and a text's NUL is dropped (clean.py)."""
    if head.startswith(_BINARY_MAGIC):
        return True
    return b"\x00" in head and 100 * (len(head) - len(head.translate(None, _CONTROL_BYTES))) > len(head)


def _read_jsonl(stream: BinaryIO, name: str, path: str, cfg: DataConfig, span: Span) -> Iterator[dict]:
    for offset, i, line, head in span_lines(stream, cfg.max_line_bytes, span):
        if not span.owns(offset):
            return
        doc_id = f"{name}#{i}"
        if line is None:
            yield reject_row(doc_id, path, "line_too_long", decode_sample(head))
            continue
        line = line.removeprefix(codecs.BOM_UTF8)  # the file's, or a joined file's: `cat` of files saved with one
        if not line.strip():
            continue  # blank lines separate nothing in JSON lines; not a record
        try:
            record = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            yield reject_row(doc_id, path, "invalid_utf8", decode_sample(line))
            continue
        except (ValueError, RecursionError):  # ValueError: JSONDecodeError, or an int past 4300 digits
            yield reject_row(doc_id, path, "malformed_json", decode_sample(line))
            continue
        yield _record(doc_id, path, record, decode_sample(line), cfg, escaped=b"\\u" in line)


_SURROGATE = re.compile("[\ud800-\udfff]")
_WIKIEXTRACTOR_RECORDS = (frozenset({"id", "url", "title", "text"}), frozenset({"id", "revid", "url", "title", "text"}))


def _record(doc_id: str, path: str, record, sample: str, cfg: DataConfig, escaped: bool = True) -> dict:
    """The row of one parsed JSON record (a JSONL line or a JSON array element); `escaped`: its JSON text holds a
    \\u escape (only an escape can make a lone surrogate: the scan for one is skipped where there is none)."""
    text = record.get(cfg.text_column) if isinstance(record, dict) else None
    if text is None and isinstance(record, dict) and cfg.text_column in record:  # null: no text, as a parquet null
        return reject_row(doc_id, path, "empty_document", sample)
    if not isinstance(text, str):
        reason = "missing_text_column" if isinstance(record, dict) else "malformed_json"
        return reject_row(doc_id, path, reason, sample)
    if escaped and _SURROGATE.search(text):  # a lone "\ud83d" escape (half an emoji): no UTF-8, Arrow refuses it
        return reject_row(doc_id, path, "invalid_utf8", sample)
    if cfg.text_column == "text" and frozenset(record) in _WIKIEXTRACTOR_RECORDS and "curid=" in str(record["url"]):
        # WikiExtractor --json (its url ends ?curid=<id>; Hugging Face's wikimedia/wikipedia rows have these keys and
        # unescaped text): --html-safe, its default, escaped & < > in "text": undone exactly (html.unescape would
        # read "&para=2" in a URL as a pilcrow)
        text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return document_row(doc_id, path, text, cfg, raw=sample)


def _read_json_array(stream: BinaryIO, name: str, path: str, cfg: DataConfig) -> Iterator[dict]:
    """A .json file holding one JSON array (pipelines/json_array.py): each element is a record with the field rules
    of a JSONL line; <n> is its index. Broken JSON between elements ends the file with one "malformed_json" row."""
    for i, element in enumerate(json_array.elements(stream, cfg.max_line_bytes)):
        doc_id = f"{name}#{i}"
        if element.text == json_array.ENDED:
            yield reject_row(doc_id, path, element.bad, f"{path} {json_array.ENDED}")
        elif element.bad:
            yield reject_row(doc_id, path, element.bad, _str_sample(element.text))
        else:
            yield _record(doc_id, path, element.value, _str_sample(element.text), cfg, escaped="\\u" in element.text)


def _str_sample(text: str) -> str:
    return decode_sample(text[: SAMPLE_CHARS * 4].encode("utf-8", "surrogateescape"))


class _ShortReads:
    """read(n) returns what one step of the stream yields (read1) instead of filling n bytes, so a
    truncated bz2 stream's EOFError comes only after iterparse has seen every complete block
    before it (a filling read would drop the blocks it already holds when the error strikes)."""

    def __init__(self, stream: BinaryIO):
        self._read = getattr(stream, "read1", stream.read)

    def read(self, n: int = -1) -> bytes:
        return self._read(n if n > 0 else 1 << 16)


def _read_wiki_xml(stream: BinaryIO, name: str, path: str, cfg: DataConfig, span: Span,
                   reject_as: str = "") -> Iterator[dict]:
    """Every page of a MediaWiki export, a row each (module docstring). `reject_as`: the name of a range's own
    rejects (`<name>@<start>`); a range may own no page, so "no_wiki_pages" is a whole file's reject only."""
    where, pages = reject_as or name, 0
    try:
        for offset, page in wiki.iter_dump(_ShortReads(stream)):
            pages += 1
            if offset is None:  # parsed whole (wiki.iter_dump): no offsets
                at, place = where, "in the file"
            elif reject_as:
                at, place = f"{reject_as}+{offset}", f"at byte {offset} of the range's XML"
            else:
                at, place = f"{name}@{offset}", f"at byte {offset}"
            yield _page_row(page, at if page.id is None else f"{name}#{page.id}", path, place, cfg)
    except ET.ParseError as e:
        yield reject_row(where, path, "malformed_xml", f"{path}: {e}")
    except wiki.NotAWikiDump as e:
        yield reject_row(where, path, "not_a_wiki_dump", f"{path}: {e}")
    else:
        if not pages and not reject_as:
            yield reject_row(name, path, "no_wiki_pages", f"{path}: a MediaWiki export without a <page>")


def _page_row(page: wiki.Page | wiki.BadPage, doc_id: str, path: str, place: str, cfg: DataConfig) -> dict:
    if isinstance(page, wiki.BadPage):
        return reject_row(doc_id, path, "malformed_xml", f"{path}: the <page> {place} ({page.title!r}): {page.error}")
    reason = wiki.page_reject_reason(page)
    if reason:
        return reject_row(doc_id, path, reason, page.title)
    try:
        text = wiki.strip_wikitext(page.text, page.site)
    except (ValueError, RecursionError) as e:  # escaping, it ended the read of the file (or bz2 range) it is in
        return reject_row(doc_id, path, "malformed_wikitext", f"{path}: the page {page.title!r}: {e}")
    return document_row(doc_id, path, text, cfg)


def _read_wiki_streams(raw: BinaryIO, name: str, path: str, cfg: DataConfig, span: Span) -> Iterator[dict]:
    """The pages a range of a bz2 dump owns (pipelines/multistream.py), or (WHOLE) all of them. A range's own
    rejects are named `<name>@<start>` (a page with no id `<name>@<start>+<byte offset in the range's XML>`): each
    range reports what went wrong in its part of the file, and a damaged stream only in the range it starts in, which
    reads on from the next stream as a range starting there (`<name>@<its offset>`) would: a damaged stream in the
    middle of a dump cost every later page of a whole read, and of a range the rest of the range."""
    start, where = span.start, name if span == WHOLE else f"{name}@{span.start}"
    while True:
        try:
            stream = multistream.ChunkStream(multistream.owned_xml(raw, start, span.end))
            yield from _read_wiki_xml(stream, name, path, cfg, WHOLE, reject_as="" if where == name else where)
            return
        except multistream.DamagedStream as e:
            # a stream before this part (the dump's header, read for every part) or past the range's end (read into
            # only to end a page): not this range's to report, nor to read on from
            if e.offset < start or 0 <= span.end <= e.offset:
                return
            reason = "truncated_bz2" if e.truncated else "corrupt_bz2"
            yield reject_row(where, path, reason, f"{path}: the stream at byte {e.offset}: {e}")
            start = multistream.next_stream(raw, e.offset)
            if start is None or 0 <= span.end <= start:
                return
            where = f"{name}@{start}"
        except OSError as e:
            # reading the file failed (a disk error, a network reset, a timeout): bad data in it is a DamagedStream,
            # so this is no corrupt_bz2, which would drop every page after it from a run that succeeds
            raise SourceReadError(f"error reading {path}: {e}") from e
        except ValueError as e:  # no <mediawiki> root in the first stream
            yield reject_row(where, path, "malformed_xml", f"{path}: {e}")
            return


_READERS = {"text": read_text, "jsonl": _read_jsonl, "wiki_xml": _read_wiki_xml, "parquet": read_parquet,
            "wikiextractor": read_wikiextractor}
