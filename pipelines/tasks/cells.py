"""A cell of a user's file as a row's value, whatever wrote the file: ids and class names written as integral
floats (pandas writes an int column holding a NaN as floats: 101.0 in Parquet and JSON, "101.0" in CSV) are the
integers meant; text stored as bytes or as a number is the text a CSV would hold; a cell whose text says it holds
no value (`no_value`) is no label and no text alike."""

from __future__ import annotations

import math
import re

from pipelines.tasks.text_records import Reject

_INTEGRAL = re.compile(r"-?\d+\.0+")  # "101.0", "-3.00"
_SIGNED = re.compile(r"([+-]?)(\d+)(\.0+)?")  # "+1" (+1 / -1 classes), "+1.0", "-3.00"
# a decimal as a number's writer writes it, no leading zero ("4.50", Excel's CSV export of a cell formatted 0.00);
# "01.10" is a code (a chapter and a section), as "007" is a name
_DECIMAL = re.compile(r"([+-]?)(0|[1-9]\d*)\.(\d*[1-9])0*")
# a cell that says "no value" as text: pandas' astype(str) of NaN / NA, JSON's null as text, Excel's error cells
# (openpyxl reads an error cell as its code: a formula whose lookup failed is #N/A, in a label or a text column);
# not "null" / "None" (a class of its own in some data, a no-relation or no-intent label) nor "NA" (a word, a code)
_NO_VALUE = frozenset({"nan", "NaN", "<NA>", "#N/A", "#N/A N/A", "#NA", "#VALUE!", "#REF!", "#DIV/0!", "#NUM!",
                       "#NAME?", "#NULL!", "#GETTING_DATA", "#SPILL!", "#CALC!"})


def integral(text: str) -> str:
    """A text cell holding an integral float as the integer ("101.0" -> "101"); any other text as it is (an id
    "+441234567" is not the id "441234567")."""
    return text.split(".", 1)[0] if _INTEGRAL.fullmatch(text) else text


def class_name(text: str) -> str:
    """A class written as an integer or an integral float, named as a JSON 1 or a CSV's 1 names it ("+1", "+1.0",
    "1.0" -> "1"); leading zeros kept ("007" is a name); a decimal by its shortest text, as number_class names the
    float and a `;` CSV's "4,50" ("4.50", "+4.5" -> "4.5"; exactly, past float's 17 digits too); any other text as it
    is."""
    if found := _SIGNED.fullmatch(text):
        return ("-" if found[1] == "-" else "") + found[2]
    if found := _DECIMAL.fullmatch(text):
        return f"{'-' if found[1] == '-' else ''}{found[2]}.{found[3]}"
    return text


def folded_decimal(text: str) -> tuple[str, str] | None:
    """A decimal's text as class_name names it and as written, its sign + aside ("3.10" -> ("3.1", "3.10")); None for
    any other text. Two texts of one file with one name and two writings are two classes the fold would merge
    (label_cells.ListHead refuses them): a version or a code, 3.10 beside 3.1, is not a number written twice."""
    found = _DECIMAL.fullmatch(text)
    return (class_name(text), text.removeprefix("+")) if found else None


def bool_class(value) -> str | None:
    """A class that says true or false, one name in every format: a bool (JSON, Parquet) or its text in any case
    (Excel's TRUE, pandas' True) -> "true" / "false"; None for anything else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value.strip().lower() if isinstance(value, str) else ""
    return text if text in ("true", "false") else None


def cell_id(value) -> str | None:
    """A record's id as text, None where it has none (absent, "", null, NaN); an integral float is the integer; a
    Parquet binary column's bytes decoded (their str() was "b'a1'"), bytes UTF-8 cannot read escaped."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(int(value)) if isinstance(value, float) and value.is_integer() else integral(str(value))


def cell_text(value):
    """A text cell as text: a Parquet binary column's bytes decoded (older Hive / Impala writers), a number as the
    text a CSV would hold (an integer's digits; a float as Python and pandas' to_csv write a float64: 3.5, 101.0,
    where a column of numeric codes with a gap became floats; a float32 column's values widened first); anything
    else as it is (null, a non-finite float and other non-str: missing_text)."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return Reject("invalid_utf8")
    if isinstance(value, float):
        return repr(float(value)) if math.isfinite(value) else None  # float(): numpy 2's repr names its type
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def no_value(value) -> bool:
    """Whether a cell is text that says it holds no value (_NO_VALUE, its ends' blanks aside). One rule for every
    column and every format, so text and label agree: a text column that is a formula whose lookup failed is
    missing_text, as such a label is missing_label, not the input "#N/A" trained on and scored."""
    return isinstance(value, str) and value.strip() in _NO_VALUE


def decimal_comma(score: str) -> bool:
    """Whether a TSV's score "d,d" has a decimal comma (German Excel's "Text": 4,5): not three digits after it behind a
    whole part (1,000 may be a thousand; 0,125 is not)."""
    whole, fraction = score.lstrip("+-").split(",")
    return len(fraction) != 3 or whole.strip("0") == ""


def number_class(value: float) -> str:
    """A finite float class named as a CSV cell holding it is: an integral float as the integer (pandas writes an int
    column holding a NaN as floats: 1.0 is the class "1"), any other as its shortest text (a half-star rating 1.5 is
    "1.5", what to_csv writes), so a JSON, Parquet, Excel or CSV file of the same classes gives one label set."""
    return str(int(value)) if value.is_integer() else repr(float(value))  # float(): numpy 2's repr names its type
