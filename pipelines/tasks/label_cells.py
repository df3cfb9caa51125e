"""A label cell of a user's file -> the raw label of its row (files.py's rows of classification, multi-label and
regression), or the reason to reject the record.

A multi-label row's classes are an empty list where it has none (a comment with no toxicity class: the all-zeros
target it trains on), and no row where its label is missing (missing_label). Each format writes the two apart as it
can: the empty set is [] (JSON, Parquet), "[]" (a cell holding a JSON list: pandas' to_csv of an empty list) or,
in a cell of classes joined by task.columns.label_separator, the empty cell or an empty string, the join of no
classes (CSV, TSV, Excel alike: Excel's empty cell is its CSV export's); a missing label is null / NaN, a key or
column absent, a text that says so (cells.no_value: "nan", "#N/A") or, where cells hold JSON lists, the empty cell
(what pandas' to_csv writes for NaN). A file whose cells are joined classes cannot write a missing label as an empty
cell: leave such rows out, or write "nan".

A list where one class is wanted (task.kind=classification), as Doccano's exports write even a single class
(["sports"]), and a list cell read with a label_separator (which would make `["a", "b"]` one class) refuse the file
where lists are how it writes its labels (ListHead: half its first LIST_HEAD labels, two or more), naming the setting:
read row by row they were rejects on every row ("no usable rows", no fix named), or classes named by their brackets.
Fewer are stray rows, read as before the refusal was: a JSON / Parquet list under classification is unparseable_label,
a cell's text its class as written (a bucket "[1, 5]" among plain classes), a list cell beside joined classes
unparseable_label. A one-element list is not read as its class: a row with two classes would then be refused only
where it is met, and [] would be a class of no name.
"""

from __future__ import annotations

import ast
import decimal
import io
import json
import math
import re
import tokenize

from pipelines.tasks.cells import bool_class, cell_text, class_name, decimal_comma, folded_decimal, no_value, \
    number_class
from pipelines.tasks.common import TaskDataError
from pipelines.tasks.text_records import Reject

_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")


CLASS_LIST, LIST_CELL = "class_list", "list_cell"  # list_reason's: the two refusals of list_refusal
LIST_HEAD = 100  # the labels a file is read to before it is known to write them as lists, or not (ListHead)


def read_label(value, kind: str, path: str, separator: str = "", comma_decimals: bool = False,
               comma_scores: bool = False) -> tuple | str:
    """(raw label, its type or None) or a reject reason; a list `kind` cannot read is read as a stray row (the module
    docstring), a file of them being ListHead's to refuse. `separator`: a multi-label cell's (label_separator);
    `comma_decimals`: a semicolon CSV's numbers ("1,5" is 1.5); `comma_scores`: a TSV's scores
    (cells.decimal_comma)."""
    sep = separator if kind == "multi-label" else ""
    if isinstance(value, bytes):  # a Parquet binary column (older Hive / Impala writers), as cell_text reads text
        value = cell_text(value)
        if isinstance(value, Reject):
            return str(value)
    if value is None or (isinstance(value, str) and not value.strip() and not sep) \
            or (isinstance(value, float) and math.isnan(value)) \
            or no_value(value):  # JSON null, pandas' NaN, Excel's #N/A: no label (cells.no_value)
        return "missing_label"
    if isinstance(value, decimal.Decimal):  # Parquet DECIMAL (Spark, BigQuery NUMERIC, Snowflake NUMBER(38,0))
        value = int(value) if value == value.to_integral_value() else float(value)
    if kind == "classification" and bool_class(value):
        # JSON true, Excel's TRUE, pandas' True: one class in every format (a dev CSV beside a train workbook)
        return bool_class(value), "str"
    if isinstance(value, bool):
        return "unparseable_label"
    if kind == "classification" and isinstance(value, float):  # named as its CSV cell (number_class);
        # label type "int": 1, 1.0 and 1.5 in one JSON column are one type, not mixed_label_types
        return (number_class(value), "int") if math.isfinite(value) else "unparseable_label"
    if kind == "classification" and comma_decimals and isinstance(value, str) \
            and _DECIMAL_COMMA.fullmatch(value.strip()):  # "1,0" / "1,5": a semicolon CSV's numbers, "1" / "1.5"
        return number_class(float(value.strip().replace(",", "."))), "str"
    if kind == "classification":
        return (class_name(str(value).strip()), type(value).__name__) if isinstance(value, (int, str)) \
            else "unparseable_label"
    if kind == "regression":
        if isinstance(value, str) and _DECIMAL_COMMA.fullmatch(value.strip()) and (comma_decimals or (
                comma_scores and decimal_comma(value.strip()))):
            value = value.replace(",", ".")
        try:
            score = float(value) if isinstance(value, (int, float, str)) else math.nan
        except ValueError:
            score = math.nan
        return (score, "str" if isinstance(value, str) else "number") if math.isfinite(score) \
            else "unparseable_label"
    if isinstance(value, str) and sep:  # each class named as classification names it ("1.0" is the class 1)
        if _listed(value):
            return "unparseable_label"
        classes = [x for x in dict.fromkeys(class_name(x.strip()) for x in value.split(sep)) if x]
        return classes, "str" if classes else None  # no class: no type, as JSON's []
    return _class_list(value, path)


class ListHead:
    """Whether a file writes its labels as lists its kind cannot read (list_reason), told from its first LIST_HEAD
    labels, not its first one: a stray list on row 1 of a file of classes does not refuse a file that trains, nor
    does a class on row 1 of a Doccano export (rows labeled by hand before it) let a file of lists through. Read
    by the reader and the driver's check_columns alike: a count of labels, not of a batch's rows.

    Every label of the file is also checked for two texts that class_name folds into one class (3.10 and 3.1): a
    decimal's trailing zeros are dropped so that a CSV's 4.50 and another file's number 4.5 are one class, but one
    file that writes both has two classes (versions, codes), which the fold would merge unsaid."""

    def __init__(self, path: str, kind: str, separator: str, labeled: bool = True):
        self.path, self.kind, self.separator = path, kind, separator
        self.decided = not labeled or not (kind == "classification" or kind == "multi-label" and separator)
        self.labels, self.lists, self.first = 0, 0, None  # first: the first list's (reason, where, value)
        # a decimal class -> its first writing and where: only labels that are decimals, so a few per file
        self.decimals = {} if labeled and kind in ("classification", "multi-label") else None

    def count(self, value, where: str) -> None:
        """A label read (missing_label is none), at `where`; the LIST_HEAD-th decides."""
        if self.decimals is not None:
            self._fold_twins(value, where)
        if self.decided:
            return
        self.labels += 1
        if reason := list_reason(value, self.kind, self.separator):
            self.lists += 1
            self.first = self.first or (reason, where, value)
        if self.labels >= LIST_HEAD:
            self.decide()

    def decide(self) -> None:
        """Refuses the file where half its labels counted, two or more, are lists (at LIST_HEAD or its end)."""
        if not self.decided:
            self.decided = True
            if self.lists >= 2 and 2 * self.lists >= self.labels:
                reason, where, value = self.first
                raise list_refusal(reason, f"{self.path}, {where}", value, self.separator,
                                   f"{self.lists} of its first {self.labels} labels are lists")

    def _fold_twins(self, value, where: str) -> None:
        """Refuse a class text that folds into the class of another written otherwise, earlier in the file."""
        value = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        if isinstance(value, str) and self.kind == "multi-label" and self.separator and not _listed(value):
            texts = value.split(self.separator)
        elif isinstance(value, str) and self.kind == "classification":
            texts = [value]
        else:  # a list, or a cell holding one (numbers in it name their class one way: number_class)
            try:
                texts = json.loads(value) if isinstance(value, str) and _listed(value) else value
            except ValueError:
                texts = python_list(value)  # _listed parsed it one of the two ways
            texts = texts if isinstance(texts, list) else []
        for text in texts:
            if not isinstance(text, str) or not (found := folded_decimal(text.strip())):
                continue
            name, written = found
            first, at = self.decimals.setdefault(name, (written, where))
            if written != first:
                raise TaskDataError(
                    f"{self.path}: the labels {first!r} ({at}) and {written!r} ({where}) are one class, {name!r}, "
                    "once a decimal's trailing zeros are dropped (as a CSV's 4.50 is the 4.5 of a number cell, "
                    "in every file): if they are one class, write it one way; if two (versions, codes such as "
                    "ICD-9's 250.10 and 250.1), write them as text that is no decimal number (v3.10) or as ids")


def list_reason(value, kind: str, separator: str) -> str | None:
    """CLASS_LIST / LIST_CELL where `value` is a list `kind` cannot read (read with `separator`), else None."""
    if kind == "classification" and (isinstance(value, list) or isinstance(value, str) and _listed(value)):
        return CLASS_LIST
    return LIST_CELL if kind == "multi-label" and separator and isinstance(value, str) and _listed(value) else None


def list_refusal(reason: str, where: str, value, separator: str, many: str) -> TaskDataError:
    """The refusal of a file whose labels are lists list_reason names (`reason`): the first at `where`, `many` said."""
    if reason == CLASS_LIST:
        return class_lists(where, f"the label {_shown(value)} is a list of classes ({many})")
    return TaskDataError(f"{where}: the label {_shown(value)} is a list of classes (JSON's, or pandas' list cell; "
                         f"{many}), not classes joined by task.columns.label_separator={separator!r}, which would name "
                         "one class by its brackets: leave it unset (a cell holding a list is read as its classes)")


def class_lists(where: str, what: str) -> TaskDataError:
    """The refusal of lists of classes (`what`, at `where`) where task.kind=classification wants one class a row."""
    return TaskDataError(f"{where}: {what}, and task.kind=classification reads one class a row: set "
                         "task.kind=multi-label if a row can have several classes (as Doccano's and Label Studio's "
                         "exports list them; [] is a row with none), else write each row's class without the list "
                         "(sports, not [\"sports\"])")


def _class_list(value, path: str) -> tuple | str:
    """A multi-label value that is no joined text: a JSON / Parquet list, or a cell holding one."""
    try:
        value = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        try:  # a Python list's repr, as pandas' to_csv writes a list cell: "['sports', 'politics']"
            value = python_list(value) if value.lstrip().startswith("[") else None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return "unparseable_label"
    # a 0/1 list that repeats a value ([1, 1], [0, 0, 0]) or holds a float is read as multi-hot: [1, 1] may be the
    # id 1 listed twice (annotators' ids concatenated), but the reader cannot tell, so the refusal names both
    zero_one = isinstance(value, list) and len(value) >= 2 and all(
        not isinstance(x, bool) and isinstance(x, (int, float)) and x in (0, 1) for x in value)
    if zero_one and ((repeats := len(set(value)) < len(value)) or any(isinstance(x, float) for x in value)):
        raise TaskDataError(f"{path}: a label {value[:8]} is a 0/1 indicator vector (multi-hot), not a list "
                            "of classes: write the classes each row has (the indices of its 1s, or their names)"
                            + ("; if these are class ids listed more than once, list each once" if repeats else ""))
    if not isinstance(value, list) or any(isinstance(x, bool) or not isinstance(x, (int, float, str))
                                          or isinstance(x, float) and not math.isfinite(x) for x in value):
        return "unparseable_label"
    types = {"str" if isinstance(x, str) else "int" for x in value}  # [1, 2.5]: numbers, one type
    if len(types) > 1:
        return "mixed_label_types"
    names = (number_class(x) if isinstance(x, float) else class_name(str(x).strip()) for x in value)
    return [x for x in dict.fromkeys(names) if x], (types.pop() if types else None)


def python_list(text: str):
    """A list cell in Python's notation, as pandas' to_csv writes one: a list's repr, ['a', 'b'], or a numpy array's
    str, ['a' 'b'] or [1 2] (a Parquet / Arrow list column read with pandas holds arrays), whose items no comma
    parts: ast.literal_eval read "['toxic' 'insult']" as Python's adjacent strings, the one class "toxicinsult". Raises
    ValueError or SyntaxError where the text is neither."""
    text = text.strip()
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type in _LIST_TOKENS]
    except (tokenize.TokenError, SyntaxError) as exc:  # an unclosed bracket or quote
        raise SyntaxError(str(exc)) from None
    inner = tokens[1:-1]
    if len(inner) >= 2 and tokens[0].string == "[" and tokens[-1].string == "]" and all(
            t.string != "," for t in inner):  # a numpy array's items: signs, numbers and strings, no comma
        items, sign = [], ""
        for t in inner:
            if t.type == tokenize.OP and t.string in "+-" and not sign:
                sign = t.string
            elif t.type in (tokenize.STRING, tokenize.NUMBER):
                items.append(sign + t.string)
                sign = ""
            else:
                raise SyntaxError(f"not a list: {text[:40]!r}")
        text = f"[{', '.join(items)}]"
    return ast.literal_eval(text)


_LIST_TOKENS = frozenset([tokenize.OP, tokenize.STRING, tokenize.NUMBER, tokenize.NAME])


def _listed(text: str) -> bool:
    """Whether a cell's text is a list: JSON's ["a"] or [], or pandas' repr of one, ['a'] (not "[MASK]", "[1, 5)")."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return False
    for parse in (json.loads, python_list):
        try:
            return isinstance(parse(text), list)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    return False


def _shown(value) -> str:
    return (value.strip() if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))[:80]
