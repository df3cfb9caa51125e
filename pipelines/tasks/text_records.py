"""A text file's bytes as numbered records for pipelines/tasks/files.py: (0-based n, where, fields or a text or a
Reject, excerpt). Plain lines (a line ends at \\n, \\r\\n or a lone \\r), JSON Lines (at \\n; or one JSON array where
they were expected), CSV (strict: an unclosed quote costs its line) and TSV (GLUE style, quotes as text; lines a CSV
writer made read as CSV), their fields up to 16 Mi characters. A record that is not UTF-8 is a Reject of its own
(invalid_utf8), and so is a JSON record holding a lone surrogate escape; a UTF-8 byte-order mark is never part of the
first one, and a file with a UTF-16 / UTF-32 one is refused whole (refuse_utf16, before it is read) unless its
encoding is named. A file in an encoding the user names (Excel's "CSV" on Windows is cp1252) is read through
`as_utf8`: the same readers, its bytes transcoded on the way."""

from __future__ import annotations

import codecs
import collections
import csv
import io
import itertools
import json
import re

from pipelines.encodings import check_encoding
from pipelines.json_array import AFTER, ENDED, elements
from pipelines.paths import sized_readline
from pipelines.tasks.common import TaskDataError
from pipelines.tasks.file_head import csv_delimiter
from pipelines.tasks.text_encoding import as_utf8, bom, refuse_utf16

_SURROGATE = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of bytes that are not UTF-8
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # what json makes of a "\ud83d" escape without its pair
_SNIFF_BYTES = 1 << 12  # head of a CSV file (its delimiter), a TSV file (its line end), a JSON Lines file's 2nd line
_JSON_SPACE = b" \t\n\r"
_FIELD_LIMIT = 16 << 20  # characters of a CSV / TSV field: a long document pandas wrote to one cell


class Reject(str):
    """A reject reason where a reader yields records: told apart from a line of text by its type."""


def text_file(path, f, encoding: str = ""):
    """A text file as the readers here take it, UTF-8 bytes, transcoded from the encoding named (as_utf8). Refused
    whole where a byte-order mark contradicts it: UTF-16 / UTF-32 where none is named (refuse_utf16: Excel's "Unicode
    Text"), or another than the one named (a UTF-8 file read as cp1252 would start with "ï»¿" and be garbled). A
    remote file comes with a sized readline (pipelines/paths.sized_readline)."""
    f = sized_readline(f)
    name = check_encoding(encoding)
    if not name:
        refuse_utf16(path, f)
        return f
    family = name[:6] if name.startswith(("utf-16", "utf-32")) else name
    found = bom(f)
    if found and found.lower() != family:
        fix = "leave task.columns.encoding unset" if found == "UTF-8" else f"set task.columns.encoding={found.lower()}"
        raise TaskDataError(f"{path}: {found} text (its byte-order mark), not {encoding}: {fix}")
    return as_utf8(f, name)


class TooLong(bytes):
    """A line past _LINE_BYTES: its head, for the excerpt; the rest was read past, never held."""


_LINE_BYTES = 4 * _FIELD_LIMIT  # a line's bytes at most: 16 Mi characters of UTF-8
_CHUNK = 1 << 20
_LONE_CR_ENDS = re.compile(rb"\r\n|\n|\r")


def _line_bytes(f, lone_cr: bool):
    """A binary file's lines without their ends, read in chunks: a line past _LINE_BYTES (a file of one huge line, or
    one whose lines end in a lone \\r where \\n was expected) is a TooLong, its bytes read past, not held."""
    tail, head = b"", None  # head: the first bytes of a line being read past
    # read1 where there is one: a gzip stream cut short raises in read() and loses the chunk it had decompressed
    read = getattr(f, "read1", f.read)
    while chunk := read(_CHUNK):
        data = tail + chunk
        cut = len(data) - 1 if lone_cr and data.endswith(b"\r") else len(data)  # a \r\n across two chunks: one end
        pieces = _LONE_CR_ENDS.split(data[:cut]) if lone_cr else data[:cut].split(b"\n")
        tail = pieces.pop() + data[cut:]
        for piece in pieces:
            piece = piece[:-1] if not lone_cr and piece.endswith(b"\r") else piece  # \r\n: one end
            if head is None and len(piece) > _LINE_BYTES:  # a whole line within one chunk
                head = piece[:1024]
            yield piece if head is None else TooLong(head)
            head = None
        pending = b"\r" if tail.endswith(b"\r") else b""  # a line end, or half of one, once the next chunk comes
        if head is not None:
            tail = pending  # read past
        elif len(tail) - len(pending) > _LINE_BYTES:
            head, tail = tail[:1024], pending
    if head is not None:
        yield TooLong(head)
    elif tail:
        yield tail[:-1] if tail.endswith(b"\r") else tail


def raw_lines(f):
    r"""A binary file's lines as bytes, without their ends: \n (a \r before it is none of the line's text: \r\n, and
    the \r\r\n that Windows' text mode writes for "\r\n"), or a lone \r in a file of such line ends (_line_end:
    old Mac tools); a line past _LINE_BYTES is a TooLong, its head only."""
    return _line_bytes(f, lone_cr=_line_end(f) == "\r")


def text_lines(f, lone_cr: bool = False):
    """A binary file's lines as records. A line ends at \\n (a \\r before it is not text); with `lone_cr` (plain
    text: old Mac Excel ended lines so) a lone \\r ends one too. JSON Lines keeps its spec's \\n: a \\r between a
    record's tokens is JSON whitespace, not a line end. A line past 64 MiB is a line_too_long record (bounded memory:
    a file without a line end is not read whole). A UTF-8 byte-order mark starting a line is no text: the file's, or
    a joined file's (`cat a.jsonl b.jsonl`, b written with one)."""
    for n, line in enumerate(_line_bytes(f, lone_cr)):
        line = line if isinstance(line, TooLong) else line.removeprefix(codecs.BOM_UTF8)
        if isinstance(line, TooLong):
            yield n, f"line {n + 1}", Reject("line_too_long"), bytes(line).decode("utf-8", "replace")
        else:
            yield _line(n, line)


def _line(n: int, line: bytes):
    """One of text_lines' records, from a line's bytes without its end."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return n, f"line {n + 1}", Reject("invalid_utf8"), line.decode("utf-8", "replace")
    return n, f"line {n + 1}", text if text.strip() else Reject("blank_line"), text


def has_lone_surrogate(value) -> bool:
    """Whether a parsed JSON value holds a lone surrogate in any string, nested or a key: a "\\ud83d" escape without
    its pair (an emoji a JavaScript tool cut). No UTF-8 can hold it: Arrow and the tokenizers raise on it."""
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if _LONE_SURROGATE.search(value):
                return True
        elif isinstance(value, dict):
            stack += value
            stack += value.values()
        elif isinstance(value, list):
            stack += value
    return False


def json_item(value, escaped: bool = True):
    """A parsed JSON value as a record: the object, else bad_json, or invalid_utf8 where it holds a lone surrogate
    (as pipelines/sources.py's records). `escaped`: its text has a \\u escape; without one there is no surrogate
    to look for (text that is not UTF-8 is rejected before it is parsed)."""
    if not isinstance(value, dict):
        return value if isinstance(value, Reject) else Reject("bad_json")
    return Reject("invalid_utf8") if escaped and has_lone_surrogate(value) else value


def json_object(text):
    """A JSON Lines line (or a text_lines Reject) as a record, see json_item."""
    try:
        record = text if isinstance(text, Reject) else json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's stack
        record = None
    return json_item(record, "\\u" in text)


def _allow_long_fields() -> None:
    """Raise csv's field limit (process-global, 131,072 characters by default) to 16 Mi characters, never lower it: a
    long document quoted in one cell is read whole; a longer one is one field_too_long record (_Feed.skip_long)."""
    csv.field_size_limit(max(csv.field_size_limit(), _FIELD_LIMIT))


# a \r inside a line: not of its line end (\n, \r\n, Windows' text-mode \r\r\n, a CR-only file's \r)
_LONE_CR = re.compile(r"\r(?!\r*\n|\r*\Z)")
_QUOTED = re.compile(rb'"[^"]*(?:"|\Z)')  # a CSV quoted span (a doubled quote inside: two spans)
_CR_MARK = "\ue000"  # a private-use character: what csv reads in its place, turned back into \r in the fields


class _Feed:
    """A text file's numbered lines as csv.reader pulls them, the current record's kept in `taken`. A quoted field
    that never closes ends its record where csv gives up (at csv.field_size_limit() characters of that field, 16 Mi
    here, or at the end of the file), and `give_back` returns all but that record's first line to be read again: an
    unclosed quote costs one line, not the rest of the file (skip_long tells a field past the limit from a quote that
    never closes). Bytes that are not UTF-8 stay as surrogates, so one bad record is found and counted."""

    def __init__(self, f, newline: str, mark_cr: bool = False):
        self.newline, self.back, self.taken, self.open_to, self.skipped = newline, collections.deque(), [], 0, False
        self._read_from(f, 1)
        self.mark_cr = mark_cr  # csv: a lone \r inside a line reaches csv as _CR_MARK (csv would end the record)
        self.marked = False  # whether the current record's lines had one (only then is a _CR_MARK read back as \r)

    def __iter__(self):
        return self

    def __next__(self) -> str:
        n, line = self.back.popleft() if self.back else next(self.lines)
        self.taken.append((n, line))
        if self.mark_cr and "\r" in line:
            marked = _LONE_CR.sub(_CR_MARK, line)
            self.marked = self.marked or marked != line
            return marked
        return line

    def _read_from(self, f, first: int) -> None:
        """Read the file `f`, at its start, from its line `first` on."""
        self.text = io.TextIOWrapper(f, encoding="utf-8-sig", errors="surrogateescape", newline=self.newline)
        self.lines = itertools.islice(enumerate(self.text, 1), first - 1, None)

    def start(self) -> None:
        self.taken, self.open_to, self.marked, self.skipped = [], 0, False, False

    def where(self) -> str:
        first, last = self.taken[0][0], self.taken[-1][0]
        if self.open_to > first:
            return f"line {first}, quote not closed by line {self.open_to}"
        return f"line {first}" if first == last else f"lines {first}-{last}"

    def give_back(self) -> None:
        """Put back all but the record's first line (where() then says how far the quote was looked for); after
        skip_long, which kept none of them, the file is read again from its start, on from the line after that one."""
        self.open_to = self.taken[-1][0]
        if self.skipped:
            self.back.clear()
            f = self.text.detach()  # detached: the wrapper let go does not close the file
            f.seek(0)
            self._read_from(f, self.taken[0][0] + 1)
        else:
            self.back.extendleft(reversed(self.taken[1:]))
        del self.taken[1:]

    def skip_long(self, delimiter: str, columns: int = 0) -> str:
        """After csv gave up on a field past csv.field_size_limit(): read on to its record's end as csv would (a quoted
        field ends at a quote before a delimiter or the line's end; "" is a quote inside it), holding no line, and
        return the record's reject reason: field_too_long, the reading going on after it; ambiguous_quote where
        `columns` (TSV, see tsv_records) and a line inside it is a whole row of that many tab-separated fields, or
        _AS_TEXT where every line of it is one (GLUE's quotes as text: give_back has them read again, line by line).
        "" where it never ends so (text after a quote, or the file's end: a quote that never closed): give_back then
        has its lines read again, as they were before csv's limit was hit."""
        first = last = self.taken[0]
        lines, inside, row, whole, self.skipped = iter(self.taken), False, False, columns > 1, True
        while (line := next(lines, None) or (self.back.popleft() if self.back else next(self.lines, None))) is not None:
            row = row or columns > 1 and last is not first and _tab_fields(last[1]) == columns
            whole = whole and _tab_fields(line[1]) == columns
            inside, last = _quote_state(line[1], inside, delimiter), line
            if inside is not True:
                break
        self.taken = [first, last] if last is not first else [first]  # where(): its lines, first to last
        return "" if inside is not False else (_AS_TEXT if whole else "ambiguous_quote") if row else "field_too_long"


_AS_TEXT = "as_text"  # skip_long: a TSV run-on quote whose every line is a whole row: no reject, its quotes are text


def _tab_fields(line: str) -> int:
    return line.rstrip("\r\n").count("\t") + 1


_IN_QUOTES = re.compile(r'[^"]*(?:""[^"]*)*')  # a quoted field's text up to the quote that closes it ("": a quote)


def _quote_state(line: str, inside: bool, delimiter: str) -> bool | None:
    """Whether a CSV line starting inside a quoted field (`inside`), or at a record's start, ends inside one (True),
    ends its record (False), or has text after a quote that closes a field (None: csv's strict error)."""
    line, pos = line.rstrip("\r\n"), 0
    while True:
        if not inside and line.startswith('"', pos):
            inside, pos = True, pos + 1
        if inside:
            pos = _IN_QUOTES.match(line, pos).end() + 1  # past the closing quote
            if pos > len(line):
                return True
            inside = False
            if pos < len(line) and line[pos] != delimiter:
                return None
        else:
            pos = line.find(delimiter, pos)
        if pos < 0 or pos >= len(line):
            return False
        pos += 1


def _too_long(e: csv.Error) -> bool:
    return str(e).startswith("field larger than field limit")


def _unclosed(e: csv.Error, feed: _Feed) -> bool:
    """A quote that opened and never closed well: csv's error where its input ended (the file's, or _Feed's cut), or
    any error in a record that ran on over lines (a stray quote, closed by the next line's quote, text after it)."""
    return str(e).startswith("unexpected end of data") or len(feed.taken) > 1


def _fields(n, feed: _Feed, fields: list, sep: str):
    """A record of fields as the readers yield it, or invalid_utf8 / blank_line."""
    text = sep.join(fields)
    if _SURROGATE.search(text):
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        return n, feed.where(), Reject("invalid_utf8"), text
    return n, feed.where(), fields if text.replace(sep, "").strip() else Reject("blank_line"), text


def csv_records(f, delimiter: str = ""):
    """Records of fields (quoted commas and newlines kept), parsed strictly: text after a closing quote is bad_csv,
    a quote that never closes well is unclosed_quote on its own line (the lines after it are read again). Fields
    are split at commas, or at semicolons where they split the header and the first lines alike (Excel's "CSV"
    where the decimal mark is a comma: most of Europe; file_head.csv_delimiter, unless the caller gives it).
    Records end at \n, or at a lone \r in a file of such line ends (old Mac Excel's "CSV"; _line_end, CRs inside
    quotes not counted: a cell's paragraph breaks); elsewhere a lone \r is a character of its field, as in TSV:
    csv ended the record there, and `first,part\rsecond,1` became two rows, one of them labelled "part". The
    \r\r\n that Windows' text mode makes of csv.writer's \r\n is a line end."""
    _allow_long_fields()
    delimiter = delimiter or csv_delimiter(f)
    feed = _Feed(f, newline=_line_end(f, quoted=True), mark_cr=True)
    reader = csv.reader(feed, strict=True, delimiter=delimiter)
    for n in itertools.count():
        feed.start()
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            first = feed.taken[0][1].rstrip("\r\n")
            reason = feed.skip_long(delimiter) if _too_long(e) else ""  # a long cell: its record, read on after it
            if not reason:
                unclosed = _unclosed(e, feed)
                if unclosed:
                    feed.give_back()
                reason = "unclosed_quote" if unclosed else "bad_csv"
            yield n, feed.where(), Reject(reason), f"{e}{_escape_hint(first)}: {first}"
            continue
        yield _fields(n, feed, [f.replace(_CR_MARK, "\r") for f in fields] if feed.marked else fields, delimiter)


def _escape_hint(line: str) -> str:
    """What a line with a backslash before a quote most likely is: an export that escapes quotes with a backslash
    (MySQL's SELECT INTO OUTFILE, pandas' escapechar="\\\\" with doublequote=False), which CSV reads as the quote
    closing its field."""
    return ' (a quote written \\": CSV doubles quotes, "", export without an escape character)' if '\\"' in line else ""


def tsv_records(f):
    """Records of TSV fields. GLUE style: split on tabs, quotes are characters; lines end at \\n, or at a lone \\r in
    a file of such line ends (_line_end). A line a CSV writer made
    (pandas' to_csv(sep="\\t"), csv.writer(delimiter="\\t")) is read as CSV: every line of a file whose header is
    quoted, a line whose quoted fields hold a doubled quote or a tab, and a quoted field that runs on over the next
    lines (an embedded newline) where its line has fewer fields than the header, or where a field opens the quote
    and the record it runs on to has the header's number of fields. A line whose CSV reading breaks an unquoted
    header's number of fields where its tab split keeps it is GLUE style (`"We will fight<TAB>he said ."`: a writer
    would have doubled a quote inside a cell). A run-on quote that never closes is unclosed_quote on its own line,
    and the lines after it are read again. A run-on that would swallow a line holding a whole row of its own (the
    header's number of tab-separated fields), in a file that has shown no CSV writer's quoting before it, is read
    line by line, GLUE style, where every line of it is such a row; else it is ambiguous_quote, one count per line:
    read as one record, a GLUE-style line that opens a quotation (`1<TAB>"Loved it`) would merge the rows after it up
    to a line ending in a quote into its text, under its label; read line by line, a writer's cell holding a newline
    and a tab would become rows of its pieces."""
    _allow_long_fields()
    feed, columns, quoted, writer = _Feed(f, newline=_line_end(f)), 0, False, False
    records = itertools.count()  # records, as csv_records numbers them (the ids' n); where() names the lines
    while True:
        feed.start()
        try:
            line = next(feed)
        except StopIteration:
            return
        text = line.rstrip("\r\n")
        fields = parsed = text.split("\t")
        if '"' in text:
            parsed = _tsv_quoted(feed, line, fields, columns, quoted or not columns, writer)
            if isinstance(parsed, Reject):
                yield from ((next(records), where, parsed, excerpt) for where, excerpt in _lost(feed, parsed, text))
                continue
            writer = writer or parsed != fields  # a writer's quoting, on one line or a cell's several
        record = _fields(next(records), feed, parsed, "\t")
        if not columns and isinstance(record[2], list):  # the header; quoted, it was a CSV writer's (QUOTE_ALL)
            columns, quoted = len(parsed), parsed != fields
            writer = quoted
        yield record


def _lost(feed: _Feed, reason: Reject, text: str):
    """(where, excerpt) of each record a TSV reject costs: its own, and for ambiguous_quote one more per line after
    its first, each a row of its own most likely (one count for a run-on of thousands of rows would hide them)."""
    yield feed.where(), text
    if reason == "ambiguous_quote":
        held = dict(feed.taken)  # after skip_long, its first and last line only
        for n in range(feed.taken[0][0] + 1, feed.taken[-1][0] + 1):
            yield f"line {n}", held.get(n, "").rstrip("\r\n")


def _line_end(f, quoted: bool = False) -> str:
    """How a TSV or CSV file's lines end: "\\r" where its head holds more lone CRs than LFs (Mac Excel's "Tab delimited
    Text" ends lines with a lone CR, and a line break inside a cell with a LF; read at \\n, the whole file would be
    one line), else "\\n" (a \\r before it is not text, and a lone \\r inside a line is a character of its field, as
    GLUE's files have them)."""
    head = f.read(_SNIFF_BYTES)
    f.seek(0)
    if quoted:  # CSV: line breaks inside a quoted cell are the cell's (a quote cut off by the head's end too)
        head = _QUOTED.sub(b"", head)
    return "\r" if head.count(b"\r") - head.count(b"\r\n") > head.count(b"\n") else "\n"


def _tsv_quoted(feed: _Feed, line: str, fields: list, columns: int, quoted: bool, writer: bool = False):
    """A TSV line with quotes -> its fields as CSV where a CSV writer made it (see tsv_records), else `fields`;
    `writer`: the file has shown a CSV writer's quoting before this line."""
    try:
        parsed = next(csv.reader([line], delimiter="\t", strict=True))
    except csv.Error as e:
        short = quoted or len(fields) < columns
        # a field opens a quotation the line does not close: pandas' text cell holding a newline (and a tab before
        # it, which gives its first line the header's number of fields or more), or GLUE's quotes as text
        opens = len(fields) >= columns and any(field.startswith('"') for field in fields)
        if not _unclosed(e, feed) or not (short or opens):
            return fields
        try:  # the quoted field runs on: the record is the lines up to its closing quote
            record = next(csv.reader(itertools.chain([line], feed), delimiter="\t", strict=True))
            if short or len(record) == columns:
                if writer or not _swallows_a_row(feed, columns, len(fields)):
                    return record
                if any(_tab_fields(text) != columns for _, text in feed.taken):
                    return Reject("ambiguous_quote")
                # every line a whole row, no writer seen (so an unquoted header): GLUE's quotes as text, as below
        except csv.Error as e:  # a field past csv's limit: a writer's long cell, or a quote that never closes
            if _too_long(e) and (reason := feed.skip_long("\t", 0 if writer else columns)) and reason != _AS_TEXT:
                return Reject(reason)
        feed.give_back()
        if short:
            return Reject("unclosed_quote")
        feed.open_to = 0  # a whole line with a field that opens a quotation (GLUE's quotes are text): as it is
        return fields
    if not quoted and len(parsed) != columns == len(fields):
        return fields  # a quote opening one field and closing a later one: GLUE's text, no writer's (see tsv_records)
    if not _WRITER_LINE.fullmatch(line.rstrip("\r\n")):
        # a quote inside a field no quote opens: no CSV writer leaves one so, it quotes the field and doubles it.
        # GLUE's text ('"Hello"' beside 'What does "hi" mean?'), read as a writer's, set the file's writer flag, and
        # a later question opening a quote ran on over the rows to the next quote before a tab
        return fields
    return parsed if quoted or any(c in p for p in parsed for c in '"\t\n\r') else fields  # a CSV writer's quoting


# a TSV line as a CSV writer writes it: each field quoted whole (its quotes doubled) or holding no quote
_WRITER_LINE = re.compile(r'(?:"(?:[^"]|"")*"|[^\t"]*)(?:\t(?:"(?:[^"]|"")*"|[^\t"]*))*')


def _swallows_a_row(feed: _Feed, columns: int, first_fields: int) -> bool:
    """Whether a run-on record's later lines hold one that is a whole row by itself: `columns` tab-separated fields
    (its last line too, unless the quote opened in the record's first field: then its last line is the rest of the
    row and has that many fields anyway)."""
    later = [_tab_fields(text) for _, text in feed.taken[1:]]
    return columns > 1 and any(count == columns for count in (later if first_fields > 1 else later[:-1]))


def json_array(path, f):
    """The records of a JSON Lines file that is one JSON array instead (pandas' to_json(orient="records") without
    lines=True, a pretty-printed list), element by element in bounded memory (pipelines/json_array.py, the corpus
    reader's); None for JSON Lines. Read line by line, such a file would keep its one-line objects and reject the
    others as bad_json. A first line that is a JSON value of its own, with records after it, is JSON Lines whose first
    record is an array (a bad one). A bad element is a bad record (bad_json, invalid_utf8, line_too_long past 16 Mi
    characters); an array whose JSON breaks (cut short, text between elements or after it) is refused, naming the
    item, as it was when such a file was parsed whole: read on, it would drop every record after the break. A comma
    before the closing bracket is let pass."""
    line = f.readline(_FIELD_LIMIT).removeprefix(codecs.BOM_UTF8)
    while line and not line.strip(_JSON_SPACE):
        line = f.readline(_FIELD_LIMIT)
    line, more = line.strip(_JSON_SPACE), f.read(_SNIFF_BYTES).strip(_JSON_SPACE)
    f.seek(0)
    if not line.startswith(b"["):
        return None
    if more and line.endswith(b"]"):
        try:
            json.loads(line)
            return None
        except (ValueError, RecursionError):  # a one-line array cut at the sniff, or no JSON
            pass
    return _array_records(path, f)


def _array_records(path, f):
    for n, element in enumerate(elements(f, _FIELD_LIMIT)):
        if not element.bad:
            yield n, f"item {n}", json_item(element.value, "\\u" in element.text), element.text
            continue
        excerpt = element.text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        if element.ends:
            raise TaskDataError(f"{path}: a JSON array (not JSON Lines, one object per line) that is not valid JSON: "
                                f"{_break(n, element.text, excerpt)} (were it JSON Lines, its first line would have "
                                f"to be one whole JSON value)")
        yield n, f"item {n}", Reject("bad_json" if element.bad == "malformed_json" else element.bad), excerpt


def _break(n: int, text: str, excerpt: str) -> str:
    """Where and how an array's JSON breaks, `n` its elements before the break."""
    if text == ENDED:
        return f"the file ends inside it, at item {n}"
    if excerpt.startswith(AFTER):
        return f"text follows its closing bracket: {excerpt.removeprefix(AFTER)[:80]!r}"
    return f"{'at its start' if n == 0 else f'after item {n - 1}'}: {excerpt[:80]!r}"
