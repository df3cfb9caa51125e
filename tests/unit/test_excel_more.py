"""Excel workbooks as Excel itself saves them: escaped control characters, encrypted and Strict Open XML files, a
table's Total Row (excel.py)."""

import zipfile

import pytest

from pipelines.tasks import Columns, TaskDataError, read_file
from pipelines.tasks.roles import content_key
from tests.unit.test_files_task import read, write

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_DOC = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PARTS = {
    "[Content_Types].xml": '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
    '<Override PartName="/xl/sharedStrings.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
    "_rels/.rels": f'<Relationships xmlns="{_RELS}"><Relationship Id="rId1" Type="{_DOC}/officeDocument" '
    'Target="xl/workbook.xml"/></Relationships>',
    "xl/workbook.xml": f'<workbook xmlns="{_MAIN}" xmlns:r="{_DOC}"><sheets>'
    '<sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>',
    "xl/_rels/workbook.xml.rels": f'<Relationships xmlns="{_RELS}">'
    f'<Relationship Id="rId1" Type="{_DOC}/worksheet" Target="worksheets/sheet1.xml"/>'
    f'<Relationship Id="rId2" Type="{_DOC}/sharedStrings" Target="sharedStrings.xml"/></Relationships>',
}


def _excel_saved(path, strings, rows):
    """A workbook as Excel saves it (openpyxl writes none of this): text in xl/sharedStrings.xml, a cell holding
    `rows`' index into `strings`, or an inline string (a str), as other writers do."""
    def cell(ref, value):
        if isinstance(value, int):
            return f'<c r="{ref}" t="s"><v>{value}</v></c>'
        return f'<c r="{ref}" t="inlineStr"><is><t xml:space="preserve">{value}</t></is></c>'

    sheet = "".join(f'<row r="{n}">' + "".join(cell(f"{col}{n}", v) for col, v in zip("AB", row)) + "</row>"
                    for n, row in enumerate(rows, 1))
    parts = {**_PARTS, "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{_MAIN}"><sheetData>{sheet}</sheetData>'
             "</worksheet>",
             "xl/sharedStrings.xml": f'<sst xmlns="{_MAIN}">'
             + "".join(f'<si><t xml:space="preserve">{s}</t></si>' for s in strings) + "</sst>"}
    with zipfile.ZipFile(path, "w") as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return str(path)


def test_excel_cells_with_a_carriage_return_read_as_its_csv_export(tmp_path):
    """Excel (and xlsxwriter, pandas' first engine) write a CR in a cell as OOXML's escape `_x000D_` (an XML reader
    would turn a raw CR LF into LF): the sheet's rows are its CSV export's, in training and in prediction alike, so
    content keys (duplicates, leaks across splits) agree too. An inline string's escaped underscore (`_x005F_`) is a
    typed `_x000D_`; a character escaped as two UTF-16 halves is the one character, a lone half U+FFFD."""
    book = _excel_saved(tmp_path / "reviews.xlsx",
                        ["text", "label", "Great product._x000D_\nWould buy again.", "pos", "Terrible._x000D_\nBroke.",
                         "neg"],
                        [(0, 1), (2, 3), (4, 5), ("typed _x005F_x000D_ and _xD83D__xDE00_ _xD83D_", 3)])
    csv = write(tmp_path, "reviews.csv",
                b'text,label\r\n"Great product.\r\nWould buy again.",pos\r\n"Terrible.\r\nBroke.",neg\r\n')
    rows, rejects, _, _ = read(book, "xlsx")
    assert [r["text_a"] for r in rows] == ["Great product.\r\nWould buy again.", "Terrible.\r\nBroke.",
                                           "typed _x000D_ and \U0001F600 \ufffd"] and not rejects
    from_csv = read(csv, "csv")[0]
    assert [content_key(r, "classification") for r in rows[:2]] == [content_key(r, "classification")
                                                                      for r in from_csv]
    inputs = [r["text_a"] for b in read_file(book, "xlsx", "classification", Columns(), labeled=False) for r in b.rows]
    assert inputs[:2] == ["Great product.\r\nWould buy again.", "Terrible.\r\nBroke."]


def test_an_encrypted_workbook_is_named_with_its_fix(tmp_path):
    """Every encrypted .xlsx (a password, a sensitivity label that encrypts) is an OLE2 compound file, as a .xls is:
    not "save a .xls as .xlsx" alone, which cannot help a file that is an .xlsx already."""
    encrypted = write(tmp_path, "locked.xlsx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)
    with pytest.raises(TaskDataError, match=r"locked.xlsx: an encrypted workbook .* or a .xls .*renamed.*save a copy"):
        read(encrypted, "xlsx")


@pytest.mark.filterwarnings("ignore::UserWarning")  # openpyxl's, on the sheet ids it does not find
def test_a_strict_open_xml_workbook_is_named_with_its_fix(tmp_path):
    """Excel's "Strict Open XML Spreadsheet" save option writes the ISO namespaces, which openpyxl reads as a
    workbook of no sheet ("only charts"): named with what to save instead; a copy cut short keeps the plain message."""
    import openpyxl

    book = openpyxl.Workbook()
    book.active.append(["text", "label"])
    book.active.append(["a", "x"])
    book.save(tmp_path / "ok.xlsx")
    iso = {b"http://schemas.openxmlformats.org/spreadsheetml/2006/main": b"http://purl.oclc.org/ooxml/spreadsheetml/main",
           _DOC.encode(): b"http://purl.oclc.org/ooxml/officeDocument/relationships"}
    with zipfile.ZipFile(tmp_path / "ok.xlsx") as src, zipfile.ZipFile(tmp_path / "strict.xlsx", "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            for old, new in iso.items():
                data = data.replace(old, new)
            dst.writestr(item, data)
    with pytest.raises(TaskDataError, match=r"strict.xlsx: a Strict Open XML workbook.*save it as Excel Workbook "
                                            r"\(.xlsx\) or CSV"):
        read(str(tmp_path / "strict.xlsx"), "xlsx")
    cut = write(tmp_path, "cut.xlsx", (tmp_path / "ok.xlsx").read_bytes()[:300])
    with pytest.raises(TaskDataError, match="cut.xlsx: not an Excel workbook that openpyxl can read"):
        read(cut, "xlsx")


def test_an_excel_tables_total_row_is_a_counted_reject_not_a_row(tmp_path):
    """Table Design > Total Row writes "Total" and a SUBTOTAL (a score column's sum) under the table, and marks it
    (totalsRowCount): that row is `totals_row`, in training and in prediction; the Total Row of another table on the
    sheet, beside the read columns, costs the rows it sits beside nothing."""
    import openpyxl
    from openpyxl.worksheet.table import Table

    book = openpyxl.Workbook()
    sheet = book.active
    for row in (["text", "label", None, "region", "n"], ["fine", 3.5, None, "north", 2],
                ["great", 4.5, None, "south", 1], ["awful", 1.0, None, "Total", 3], ["Total", 9.0]):
        sheet.append(row)
    for name, ref in (("Ratings", "A1:B5"), ("Regions", "D1:E4")):
        table = Table(displayName=name, ref=ref)
        table.totalsRowCount = 1
        sheet.add_table(table)
    book.save(tmp_path / "total.xlsx")
    rows, rejects, samples, _ = read(str(tmp_path / "total.xlsx"), "xlsx", "regression")
    assert [(r["text_a"], r["label"]) for r in rows] == [("fine", 3.5), ("great", 4.5), ("awful", 1.0)]
    assert rejects == {"totals_row": 1} and samples[0][1:] == ("row 5", "Total\t9")
    inputs = [r["text_a"] for b in read_file(str(tmp_path / "total.xlsx"), "xlsx", "regression", Columns(),
                                             labeled=False) for r in b.rows]
    assert inputs == ["fine", "great", "awful"]
