"""Excel workbooks (.xlsx, .xlsm) as lines of fields, as csv_records gives a CSV file's: the sheet `Columns.sheet`
names, or the first, read row by row with openpyxl in read-only mode (rows streamed; the workbook's table of shared
strings is held whole; a formula's cell holds the value Excel last computed). Its header is the first row naming the
task's columns (a title above the table is passed over); files.py reads the rows under it as a CSV's. A first sheet
without that row, read because no sheet was named, is refused naming the sheet that has it (a README sheet first).

Cells are read as Excel's own CSV export writes them: a number as its digits (a class 1 or 1.0 is the class 1, a
score parses, a column mixing numbers and numbers stored as text is one type), TRUE / FALSE, a date as ISO text (a
date alone as 2023-01-05), a float to Excel's 15 significant digits. A header cell left empty names no column; cells
right of the header's last name (notes beside a table) are not read. Text is unescaped as OOXML escapes it (Excel
writes a CR in a cell as `_x000D_`), and an Excel Table's Total Row under the columns read is no row (`totals_row`).
"""

from __future__ import annotations

import datetime
import math
import re
import zipfile

from pipelines.tasks.common import TaskDataError
from pipelines.tasks.text_records import Reject


# OOXML's escape of a character XML cannot carry (ST_Xstring, ECMA-376): Excel and xlsxwriter write a cell's CR as
# _x000D_ (an XML reader turns a raw CR LF into LF) and a typed "_x" as _x005F_x; openpyxl undoes neither in cell text
# (its shared strings drop "x005F_" first, so a typed "_x000D_" there reads as a CR: rare, and accepted).
_ESCAPED = re.compile(r"_x([0-9A-Fa-f]{4})_")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _unescaped(text: str) -> str:
    if "_x" not in text:
        return text
    text = _ESCAPED.sub(lambda m: chr(int(m[1], 16)), text)
    # a character past U+FFFF escaped as its two UTF-16 halves is the one character; a lone half, no character
    # (U+FFFD): text with a lone surrogate cannot be encoded as UTF-8 when the rows are written
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace") if _SURROGATE.search(text) \
        else text


def _value(cell) -> str | None:
    if cell is None or isinstance(cell, str):
        return _unescaped(cell).strip() if cell else None
    if isinstance(cell, bool):
        return "TRUE" if cell else "FALSE"
    if isinstance(cell, datetime.datetime) and cell.time() == datetime.time():
        return cell.date().isoformat()  # a date cell (Excel keeps dates as datetimes): 2023-01-05, as Excel shows it
    if isinstance(cell, (datetime.datetime, datetime.date, datetime.time)):
        return cell.isoformat()
    if isinstance(cell, float) and math.isfinite(cell):
        return f"{cell:.15g}"  # Excel's 15 significant digits: =0.1+0.2 is 0.3 there, not 0.30000000000000004
    return str(cell)  # int: the digits a CSV holds


def _open(path: str, f, sheet: str):
    import openpyxl

    try:
        book = openpyxl.load_workbook(f, read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, SyntaxError) as e:  # a .xls renamed, a copy cut
        # short, a part that is no XML (ElementTree's ParseError is a SyntaxError)
        raise TaskDataError(f"{path}: " + (_unreadable(f) or f"not an Excel workbook that openpyxl can read ({e}); "
                                           "save a .xls (Excel 97-2003) file as .xlsx or CSV")) from None
    sheets = {ws.title: ws for ws in book.worksheets}  # chart sheets hold no cells
    if not sheets or (sheet and sheet not in sheets):
        book.close()
        raise TaskDataError(f"{path}: " + (f"no sheet {sheet!r} of cells; its sheets: {list(sheets)} "
                                           "(task.columns.sheet)" if sheets else
                                           _unreadable(f) or "no sheet of cells (only charts)"))
    return book, sheets[sheet] if sheet else book.worksheets[0]


_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # a compound file's first bytes: a .xls, or an encrypted .xlsx's wrapper
_STRICT = b"http://purl.oclc.org/ooxml/"  # the ISO namespaces of Excel's "Strict Open XML Spreadsheet" save option


def _unreadable(f) -> str:
    """What a workbook openpyxl cannot read is, where its bytes tell, and what to save instead ("" where they do
    not): an encrypted workbook (a password, or a sensitivity label that encrypts: Office wraps every such .xlsx in
    an OLE2 compound file, as a .xls is), or a Strict Open XML one (openpyxl finds no sheet in it)."""
    try:
        f.seek(0)
        if f.read(len(_OLE2)) == _OLE2:
            return ("an encrypted workbook (a password or a sensitivity label protects it) or a .xls (Excel 97-2003) "
                    "file renamed, which openpyxl cannot read: open it in Excel and save a copy without the "
                    "protection as Excel Workbook (.xlsx) or CSV")
        f.seek(0)
        with zipfile.ZipFile(f) as z:
            strict = any(_STRICT in z.read(part) for part in ("_rels/.rels", "xl/workbook.xml") if part in z.NameToInfo)
    except (OSError, zipfile.BadZipFile):  # not seekable, or no zip: the bytes tell nothing more
        return ""
    return ("a Strict Open XML workbook (Excel's \"Strict Open XML Spreadsheet\" format), which openpyxl cannot "
            "read: save it as Excel Workbook (.xlsx) or CSV") if strict else ""


def _totals_rows(book, ws, header: int, columns: set[int]) -> set[int]:
    """The 0-based rows of the Total Row of each Excel Table on `ws` that holds a task column of the header (0-based
    row `header`; 1-based `columns`) from its header row down (a table without a header row under it, a second
    table stacked under the first): a row of sums and counts that Table Design > Total Row writes and marks
    (totalsRowCount), not data. A read-only worksheet has no `.tables`: its table parts are read from the workbook's
    zip, as openpyxl's full reader does. A malformed part (which Excel repairs on opening) gives no totals: the
    sheet's rows are read as they were before Total Rows were looked for, not the file refused."""
    from openpyxl.packaging.relationship import get_dependents, get_rels_path
    from openpyxl.utils.cell import range_boundaries
    from openpyxl.xml.constants import REL_NS
    from openpyxl.xml.functions import fromstring

    archive, rels = book._archive, get_rels_path(ws._worksheet_path)
    if rels not in archive.NameToInfo:
        return set()
    totals = set()
    try:
        for part in get_dependents(archive, rels).find(f"{REL_NS}/table"):
            if part.target not in archive.NameToInfo:  # a part its writer left out: no table, as Excel repairs it
                continue
            table = fromstring(archive.read(part.target))
            count = int(table.get("totalsRowCount") or 0)
            if not count or not table.get("ref"):
                continue
            left, top, right, bottom = range_boundaries(table.get("ref"))
            if top - 1 >= header and any(left <= c <= right for c in columns):
                totals.update(range(bottom - count, bottom))
    except (ValueError, SyntaxError, KeyError, TypeError, zipfile.BadZipFile):  # XML's ParseError is a SyntaxError
        return set()
    return totals


def excel_records(path: str, f, sheet: str = "", names: dict[str, str] | None = None):
    """(n, where, fields or Reject("blank_line"), excerpt) per row of the sheet from its header row, n counted from
    the sheet's first row. The header is the first row holding every one of `names` (the columns the task reads,
    Columns field -> name): a title or notes above the table are passed over; without such a row in the
    _HEADER_ROWS rows from the first that is not empty, that first one (whose columns files.py then refuses, naming
    the missing), unless no sheet is named and the workbook has others (_refuse_first_sheet). Its fields are text,
    an empty cell ""; a row of an Excel Table's Total Row is Reject("totals_row") (_totals_rows)."""
    names = dict(names or {})
    book, ws = _open(path, f, sheet)
    try:
        ws.reset_dimensions()  # read every row there is: some writers record a smaller table than they wrote
        start, first = _header_row(ws, set(names.values()))
        if start is None and names and not sheet and len(book.worksheets) > 1:
            _refuse_first_sheet(path, book, ws, first, names)
        start = first if start is None else start
        # the header's width (to its last name); blank rows not yet known to be inside; the Total Rows (_totals_rows)
        width, blank, totals = None, [], set()
        for n, row in enumerate(ws.iter_rows(min_row=start + 1, values_only=True), start):
            values = [_value(c) for c in row]
            if n == start:
                totals = _totals_rows(book, ws, start, {i + 1 for i, v in enumerate(values)
                                                        if v and (v in names.values() or not names)})
            values = values if width is None else values[:width]  # notes right of the table are no row's
            if not any(values):
                blank.append(n)  # counted once a row with values follows: not the formatted empty rows at the end
                continue
            yield from ((b, f"row {b + 1}", Reject("blank_line"), "") for b in blank)
            blank = []
            if n in totals:
                yield n, f"row {n + 1}", Reject("totals_row"), "\t".join(v or "" for v in values).rstrip("\t")
                continue
            width = width or max(i for i, v in enumerate(values) if v) + 1
            # an empty cell is "", as Excel's CSV export writes it: one reading of the sheet and its CSV (a
            # multi-label cell of joined classes that is empty names no class: label_cells.py)
            fields = ["" if v is None else v for v in (values + [None] * width)[:width]]
            yield n, f"row {n + 1}", fields, "\t".join(fields)
    finally:
        book.close()


_HEADER_ROWS = 20  # rows searched for the header, from the first that is not empty


def _header_row(ws, names: set) -> tuple[int | None, int]:
    """The 0-based index of the header row (see excel_records), None where no row names all of `names`; and that of
    the first row that is not empty (0 for an empty sheet)."""
    first = None
    for n, row in enumerate(ws.iter_rows(values_only=True)):
        cells = {v for v in map(_value, row) if v}
        if not cells:
            continue
        first = n if first is None else first
        if names <= cells:
            return n, first
        if n - first >= _HEADER_ROWS:
            break
    return None, first or 0


def _refuse_first_sheet(path: str, book, ws, first: int, names: dict) -> None:
    """Raise TaskDataError for a workbook read on its first sheet (none named) that has no header row naming the
    task's columns, where it has other sheets: a README or cover sheet first and the data on another is the common
    case, and the fix is task.columns.sheet, not the column names. The sheet that has such a row is named (only
    the rows each one's header is looked for in are read), else the sheets are listed."""
    for other in book.worksheets[1:]:
        other.reset_dimensions()
        if _header_row(other, set(names.values()))[0] is not None:
            raise TaskDataError(f"{path}: its first sheet {ws.title!r} has no header row naming the columns "
                                f"{list(names.values())}, its sheet {other.title!r} has one: set "
                                f"task.columns.sheet={other.title}")
    found = [v for v in map(_value, next(ws.iter_rows(min_row=first + 1, max_row=first + 1, values_only=True), ()))
             if v]
    missing = [field for field, name in names.items() if name not in found]
    raise TaskDataError(f"{path}: expected columns {list(names.values())}, found {found} on its first sheet "
                        f"{ws.title!r}, and no other of its sheets {[s.title for s in book.worksheets[1:]]} has a "
                        "header row naming them; set task.columns.sheet, or "
                        + " / ".join(f"task.columns.{field}" for field in missing))


def row_count(path: str, f, sheet: str = "") -> int:
    """About how many rows the sheet holds under its header (the dimension its writer recorded; 0 = unknown)."""
    book, ws = _open(path, f, sheet)
    try:
        return max((ws.max_row or 1) - 1, 0)
    finally:
        book.close()
