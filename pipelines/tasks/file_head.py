"""What the head of a user's CSV / TSV file says about the whole, read before its records (pipelines/tasks/files.py):
the encoding it is in where none is named, the delimiter of a CSV, and whether its first line was a header at all.
Each is a guess from the first bytes, so each errs towards today's reading: a file refused here is one that would
otherwise lose rows silently or be refused with a message that points at the wrong setting."""

from __future__ import annotations

import codecs
import collections
import csv
import io
import itertools
import lzma
import re
import zlib

from pipelines.parquet_source import bad_compressed_data
from pipelines.tasks.common import TaskDataError

_HEAD_BYTES = 1 << 20  # looked at for the encoding: an Excel export's accents show up long before
_DELIMITER_BYTES = 1 << 16  # looked at for the delimiter: the header and a few data lines, even of long reviews
_DELIMITER_ROWS = 5  # data lines whose field count must match the header's
# bytes that are not UTF-8, as surrogateescape decodes them; 0xFE / 0xFF left out: they are þ / ÿ in cp1252, seldom
# text, and the usual stray bytes of a corrupt row (or half a UTF-16 byte-order mark)
FOREIGN_BYTE = re.compile("[\udc80-\udcfd]")
_LINE_END = re.compile("[\r\n]")
UTF8_CHAR = re.compile("[^\x00-\x7f\udc80-\udcff]")  # a character past ASCII that was valid UTF-8
_NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)?")
_SENTENCE_WORDS = 5  # a column "name" of this many words is a row's text


def _head(f, size: int) -> bytes:
    """Up to `size` bytes from the file's start, leaving it there. A compressed file cut short gives what came before
    the cut: the record readers count the cut where they reach it, keeping the records before it. An I/O error (a
    disk's, a network's, a permission's) is raised: read as a short head it would pass a one-byte encoding and guess
    the delimiter from nothing (files.read_file raises it naming the file, as its record readers' errors)."""
    read, chunks, got = getattr(f, "read1", f.read), [], 0
    try:
        while got < size and (chunk := read(size - got)):
            chunks.append(chunk)
            got += len(chunk)
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:
        if not bad_compressed_data(e):
            raise
    f.seek(0)
    return b"".join(chunks)


def refuse_one_byte_text(path: str, f) -> None:
    """Raise TaskDataError for a text file whose head (its first MiB) reads as a one-byte encoding (one_byte_text),
    such as the cp1252 of Excel's "CSV" on Windows. Read as UTF-8, each row with an accent or a curly quote would be
    an invalid_utf8 reject, and the run would train on the rows without them, a subset chosen by content. For a file
    whose encoding is not named. Leaves f at its start."""
    # incremental: a sequence cut at the head's end is held back, not taken for a byte that is not UTF-8
    text = codecs.getincrementaldecoder("utf-8")("surrogateescape").decode(_head(f, _HEAD_BYTES))
    foreign = one_byte_text(text)
    if not foreign:
        return
    end = "\n" if "\n" in text else "\r"  # old Mac Excel ends lines with a lone CR
    start, stop = text.rfind(end, 0, foreign.start()) + 1, text.find(end, foreign.start())
    line = text[start:stop if stop >= 0 else None].rstrip("\r\n")
    shown = line.encode("utf-8", "surrogateescape").decode("cp1252", "replace")[:80]
    raise TaskDataError(
        f"{path}: not UTF-8: byte 0x{ord(foreign.group()) - 0xDC00:02X} on line {text.count(end, 0, start) + 1} "
        f"({shown!r} read as cp1252), and its first MiB holds more such bytes, on several lines, than UTF-8 "
        "characters past ASCII: text in a one-byte encoding (Excel's \"CSV\" on Windows writes cp1252), whose rows "
        "with an accent would all be rejected as invalid_utf8; set task.columns.encoding=cp1252 (or latin-1), or save "
        "it as UTF-8 (Excel: 'CSV UTF-8'). If it is UTF-8 with corrupt rows, set task.columns.encoding=utf-8: they "
        "are rejected, counted")


def one_byte_text(text: str):
    """The first byte that is not UTF-8 in `text` (decoded with surrogateescape), where the text reads as a one-byte
    encoding: such bytes on two lines or more, and more of them than UTF-8 characters past ASCII; else None. A UTF-8
    file with a corrupt row has one such line, or valid characters in plenty; cp1252 prose makes a valid UTF-8
    sequence only by accident ("Spaß“" is DF 93), so one does not make it UTF-8."""
    foreign = FOREIGN_BYTE.findall(text)
    if not foreign or text.startswith("\ufeff") or len(foreign) <= len(UTF8_CHAR.findall(text)):  # a BOM: UTF-8
        return None
    first = FOREIGN_BYTE.search(text)
    end = _LINE_END.search(text, first.start())
    return first if end and FOREIGN_BYTE.search(text, end.end()) else None


def csv_delimiter(f) -> str:
    """The delimiter of a CSV file: "," or ";" (Excel's "CSV" where the decimal mark is a comma: most of Europe).
    The one whose split (quotes respected: `id;"text, raw";label` is three fields) gives the header and the first
    data lines one field count, more than one; where both or neither do, ";" where the header alone parses into more
    fields at semicolons than at commas, else ",". The header alone misleads where a column name holds a comma:
    `Kommentar;Note (1,0-5,0);Klasse` is three fields at commas as well, and its data lines are not."""
    head = _head(f, _DELIMITER_BYTES)
    text = head.removeprefix(codecs.BOM_UTF8).decode("utf-8", "surrogateescape")
    counts = {d: _field_counts(text, d, cut=len(head) == _DELIMITER_BYTES) for d in ",;"}
    steady = [d for d, n in counts.items() if len(n) > 1 and n[0] > 1 and len(set(n)) == 1]
    if len(steady) == 1:
        return steady[0]
    header = next((line for line in text.splitlines() if line.strip()), "")
    fields = {d: len(next(csv.reader([header], delimiter=d), [])) for d in ",;"}
    return ";" if fields[";"] > fields[","] else ","


def _field_counts(text: str, delimiter: str, cut: bool) -> list[int]:
    """The field counts of the header and up to _DELIMITER_ROWS data records of `text` (blank lines passed over);
    `cut`: the text stops short of the file's end, so its last record may be part of one and is not counted."""
    records = (len(r) for r in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if "".join(r).strip())
    try:
        counts = list(itertools.islice(records, _DELIMITER_ROWS + 2))
    except csv.Error:  # a NUL byte, a field past csv's limit: no count to go by
        return []
    return (counts[:-1] if cut and len(counts) < _DELIMITER_ROWS + 2 else counts)[:_DELIMITER_ROWS + 1]


def header_is_data(names) -> bool:
    """Whether a header's names look like a row of data: half of them numbers or sentences, or more. A file written
    without a header row (AG News', Yelp's and sentiment140's CSVs) has its first record taken for one; a survey's
    questions or a table's years as column names are a few of its names."""
    data = [isinstance(name, str) and bool(_NUMBER.fullmatch(name.strip()) or len(name.split()) >= _SENTENCE_WORDS)
            for name in names]
    return bool(data) and 2 * sum(data) >= len(data)


def header_again(path: str, where: str, header: list[str], fields: list) -> bool:
    """Whether a record of two fields or more is the header again (`cat a.csv b.csv`: b's header, no row). The header's
    names in another order raise TaskDataError: b's rows, read under a's header, would each have their columns
    swapped (its text read as the label), none rejected."""
    if len(header) < 2 or len(fields) != len(header) or not isinstance(fields[0], str) \
            or fields[0].strip().removeprefix("\ufeff") not in header:
        return False
    cells = [h.strip().removeprefix("\ufeff") if isinstance(h, str) else h for h in fields]
    if cells != header and collections.Counter(cells) == collections.Counter(header):
        raise TaskDataError(f"{path}, {where}: the header again in another column order ({cells}; the file's header: "
                            f"{header}): files joined with cat? Read them as a folder or a glob, each with its header")
    return cells == header
