"""A user's own labeled files -> task rows: CSV, TSV, JSON Lines, Parquet, HF `save_to_disk` folders, Excel
workbooks (excel.py), CoNLL column files and SQuAD JSON, for five kinds of task (KINDS), at a path or fsspec URL.

`pipelines.tasks.file_finder.resolve_files` turns a file, folder, glob or `folder:split` into (path, format)
pairs; `read_file` streams one of them as FileBatch-es of at most `batch_rows` rows (bounded memory: only SQuAD JSON,
one JSON document, is read whole; a JSON array where JSON Lines was expected is read element by element);
`label_set` fixes the label names from the train split and `encode_labels` maps every split onto them. Columns are
found by name (`Columns`), never by position.

Rows, by kind (the keys glue_features / conll_features / squad_*_features take):
  * classification, multi-label, regression: {id, text_a, text_b (None without a pair column), label}
    with label a str (JSON 3 -> "3"; a Parquet DECIMAL 3 -> "3"; a float as its CSV cell names it, in every format:
    1.0 or "1.0" -> "1", as pandas writes an int column holding a NaN, 1.5 or a `;` CSV's "1,5" -> "1.5"; a bool, and
    true / false in any case, as Excel's TRUE, pandas' True and JSON's true are one class -> "true" / "false"), a list
    of str (from a JSON / Parquet list, a pandas list cell "['a', 'b']" in a CSV, or a cell split on
    Columns.label_separator; [] = a row with no class, its empty cell too, where null is missing_label:
    label_cells.py), or a float.
  * token-classification: {id, document, tokens, ner_tags} (tags as str; HF ClassLabel ids as names, from a
    save_to_disk folder or a Parquet file datasets wrote: arrow_files.py).
  * question-answering: squad.load_squad's {id, title, question, context, answers, is_impossible}; answers in
    squad.answer_list's shapes, each trimmed of the whitespace around it (squad.gold_answers).
id is the id column's value (an integral float as the integer: 101.0 or a CSV's "101.0" -> "101", cells.py) or
"<file name>:<n>", n the record's 0-based position in the file (unique in a file; files of one split sharing a name
share these ids, which QA's squad_eval_features refuses, naming them).

A file may be compressed (.gz, .bz2, .xz: file_finder.COMPRESSIONS), decompressed as it is read; its text is UTF-8, or
the encoding Columns.encoding names (transcoded as it is read). A bad record is skipped and counted by reason, never
fatal: invalid_utf8 (or a JSON string with a lone surrogate escape; invalid_<encoding>, e.g. invalid_cp1252, a byte the
named encoding does not define), blank_line, bad_json (a line or array element that is not a JSON object), line_too_long
(a line past 64 MiB, an array element past 16 Mi characters), field_too_long (a CSV / TSV field past 16 Mi characters:
its record), bad_csv (text after a closing quote), unclosed_quote (a CSV / TSV quote that never closes: its line, the
lines after it are read again), ambiguous_quote (a TSV quote that would run on over a line that is a whole row by
itself while another of its lines is not: one count per line; where every line is a whole row, they are read GLUE
style, its quotes as text: text_records.tsv_records), wrong_column_count,
repeated_header (a CSV / TSV / sheet row of two
columns or more that is the header again: `cat a.csv b.csv`), totals_row (an Excel Table's Total Row: excel.py),
missing_text and missing_label (absent, empty, JSON null,
NaN, or text that says so: "nan", "<NA>", Excel's #N/A and other error cells, cells.no_value; QA: answers absent or
null, where [] is a question without an answer), unparseable_label (a stray JSON list as a class: label_cells.py; a
bool as a score or in a list, a non-finite score or class, QA answers of no shape squad.answer_list reads),
mixed_label_types (a label of another JSON type than
the file's first valid row's), empty_row, tags_tokens_length_mismatch, missing_field,
duplicate_id, no_valid_answer (QA: answers, none at its start; `scored_only`, none with a text; answers off their start
are FileBatch.notes, as load_squad's), not_a_squad_article (SQuAD JSON: a data item without paragraphs),
unanswerable_needs_version_2 (QA, as load_squad; a question without an answer, read with version_2 false: set
task.version_2=true to train on them), empty_file (0 bytes or a header only; counted once), truncated_<codec> /
corrupt_<codec> (a compressed file cut short or not of its codec: the records before it are kept; corrupt_parquet, a
Parquet page that does not decode, likewise; an I/O error is raised, naming the file). TaskDataError is raised only for
a file unusable as a whole: a required column absent (the message names expected, found and the task.columns.*
to set, or the `name=value` folder a Hive partition holds it in) or named twice in the header, or the header
again in another column order (joined files), a byte-order mark that
contradicts the encoding named (UTF-16 / UTF-32 where none is), a CSV / TSV in a one-byte encoding where none is named
(file_head.py: Excel's cp1252, each accented row would be invalid_utf8), a JSON array whose JSON breaks between its
elements, a Parquet file's datasets metadata that is no JSON, labels that are lists of classes where
task.kind=classification wants one, or list cells read with a label_separator (half its first labels, two or more:
label_cells.ListHead), a multi-label column of 0/1 indicator vectors
(multi-hot: [0, 1, 0, 1] would be read as the classes 0 and 1; a 0/1 list that repeats a value, [1, 1] or [0, 0, 0],
or holds a float, [1.0, 0.0], is read as one, its refusal also naming class ids listed twice), not parseable at all."""

from __future__ import annotations

import collections
import contextlib
import json
import lzma
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import fsspec
import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem

from pipelines.tasks.arrow_files import hf_records, parquet_features, parquet_file, parquet_records
from pipelines.tasks.cells import cell_id, cell_text, no_value
from pipelines.tasks.common import SAMPLE_CHARS, TaskDataError, named_once
from pipelines.tasks.conll import columns_of, conll_sentences, named_documents
from pipelines.tasks.excel import excel_records
from pipelines.tasks.file_head import csv_delimiter, header_again, header_is_data, refuse_one_byte_text
from pipelines.tasks.label_cells import ListHead, class_lists, read_label
from pipelines.tasks.squad import NEEDS_VERSION_2, OFFSET_IN_OTHER_UNITS, OFFSET_MISMATCH, gold_answers, load_squad
from pipelines.encodings import check_encoding, invalid_reason
from pipelines.parquet_source import bad_compressed_data
from pipelines.tasks.text_records import (Reject, csv_records, json_array, json_object, raw_lines, text_file,
                                          text_lines, tsv_records)

KINDS = ("classification", "multi-label", "regression", "token-classification", "question-answering")
FORMATS = ("csv", "tsv", "jsonl", "parquet", "hf", "xlsx", "conll", "squad", "text")  # text: unlabeled only
_SENTENCES = ("text", "text_pair", "label")
_KIND_COLUMNS = {"classification": _SENTENCES, "multi-label": _SENTENCES, "regression": _SENTENCES,
                 "token-classification": ("tokens", "tags"), "question-answering": ("context", "question", "answers")}
_KIND_FORMATS = {"token-classification": ("jsonl", "parquet", "hf", "conll"),
                 "question-answering": ("jsonl", "parquet", "hf", "squad")}  # the others: csv tsv jsonl parquet hf xlsx
_UNLABELED_FORMATS = {"question-answering": ("csv", "tsv", "jsonl", "parquet", "hf", "xlsx", "squad")}  # others: + text
_BATCH_SAMPLES = 5  # rejected-record excerpts kept per batch


def _name(path: str) -> str:
    """A file's name without its folder (nor a URL's ?query: a presigned URL's signature), for the ids of rows without
    one: the same rows give the same digest (and resubmission basis) wherever the file lies."""
    return (path.split("?", 1)[0] if "://" in path else path).rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Columns:
    """Column names in the user's files (task.columns in the fine-tuning config)."""

    text: str = "text"
    text_pair: str = ""  # "" = single sentences
    label: str = "label"  # a class (str/int), a list of classes (multi-label), or a number (regression)
    tokens: str = "tokens"  # token classification: a list of words ...
    tags: str = "tags"  # ... and a list of tags, one per word
    context: str = "context"  # question answering
    question: str = "question"
    answers: str = "answers"  # {"text": [...], "answer_start": [...]} or a list of {"text", "answer_start"}
    id: str = ""  # "" = the record's position "<file name>:<n>"
    label_separator: str = ""  # multi-label cells of CSV/TSV, e.g. "|"; "" = the cell holds a JSON list
    # text files' encoding (CSV, TSV, JSON Lines, plain text, CoNLL, SQuAD JSON): "" = UTF-8; cp1252 (Excel's "CSV" on
    # Windows), latin-1, utf-16, shift_jis, ...: any Python codec name. Its undefined bytes: invalid_<encoding>
    encoding: str = ""
    sheet: str = ""  # Excel workbooks (.xlsx): the sheet to read; "" = the first


@dataclass
class FileBatch:
    rows: list[dict]
    rejects: collections.Counter = field(default_factory=collections.Counter)  # reason -> count
    samples: list[tuple[str, str, str]] = field(default_factory=list)  # (reason, where, excerpt), a few
    label_type: str | None = None  # the file's, once a row fixed it ("int", "str"; a score's "number", "str")
    notes: collections.Counter = field(default_factory=collections.Counter)  # QA answers in questions kept (squad's)

    def reject(self, reason: str, where: str, record) -> None:
        self.rejects[reason] += 1
        if len(self.samples) < _BATCH_SAMPLES or all(r != reason for r, _, _ in self.samples):  # each reason's first
            excerpt = record if isinstance(record, str) else json.dumps(record, default=str)
            self.samples.append((str(reason), where, excerpt[:SAMPLE_CHARS]))


# --- Records: (0-based n, where, column -> value dict or a Reject, excerpt), per format ---


def _needed(kind: str, columns: Columns) -> dict[str, str]:
    """The columns `kind` reads: Columns field -> the name in the user's files."""
    need = {f: getattr(columns, f) for f in (*_KIND_COLUMNS[kind], "id") if getattr(columns, f)}
    if kind == "token-classification" and not columns.tokens:  # unlabeled text to tag
        need["text"] = columns.text
    return need


def _require_columns(path: str, found, kind: str, columns: Columns) -> list[str]:
    """The columns `kind` reads (and the optional title); raises naming the missing ones."""
    need = _needed(kind, columns)
    if missing := [f for f, name in need.items() if name not in found]:
        headless = "; the file seems to have no header row (its first row reads as data): add one naming its " \
            "columns" if header_is_data(found) else ""
        # Spark's partitionBy("label") writes the column as folder names (label=ham/part-0.parquet), not in the files
        folders = path.split("?", 1)[0].split("/")[:-1]
        hive = {f: part for f in missing for part in folders if part.startswith(f"{need[f]}=")}
        settings = [f"task.columns.{f}" for f in missing if f not in hive]
        raise TaskDataError(f"{path}: expected columns {list(need.values())}, found {list(found)}"
                            + ("; set " + " / ".join(settings) if settings else "")
                            + "".join(f"; {need[f]!r} is in the folder names ({part}/, a Hive partition as Spark's "
                                      "partitionBy writes), not in the files: write it into the files (e.g. Spark's "
                                      "write without partitionBy)" for f, part in hive.items()) + headless)
    return [c for c in found if c in {*need.values(), "title"}]


def _header_records(path, lines, kind, columns):
    """Records of CSV / TSV lines of fields, the first non-blank one being the header."""
    header = None
    for n, where, fields, excerpt in lines:
        if header is None and fields != "blank_line":
            if isinstance(fields, Reject):
                raise TaskDataError(f"{path}: unreadable header ({fields}): {excerpt[:SAMPLE_CHARS]!r}")
            header, first = [h.strip() for h in fields], n + 1
            named_once(path, _require_columns(path, header, kind, columns), header)
        elif header is not None:
            if not isinstance(fields, Reject) and header_again(path, where, header, fields):
                fields = Reject("repeated_header")  # files joined by `cat *.csv`: each one's header, not a row
            elif not isinstance(fields, Reject):
                fields = dict(zip(header, fields)) if len(fields) == len(header) else Reject("wrong_column_count")
            yield n - first, where, fields, excerpt


def _records(path, f, fmt, kind, columns, batch_rows, delimiter=","):
    def require(names):
        return named_once(path, _require_columns(path, names, kind, columns), names)

    if fmt == "csv":
        return _header_records(path, csv_records(f, delimiter), kind, columns)
    if fmt == "tsv":
        return _header_records(path, tsv_records(f), kind, columns)
    if fmt == "xlsx":
        return _header_records(path, excel_records(path, f, columns.sheet, _needed(kind, columns)), kind, columns)
    if fmt == "jsonl":
        return json_array(path, f) or ((n, where, json_object(text), excerpt)  # or one JSON array of records
                                       for n, where, text, excerpt in text_lines(f))
    if fmt == "parquet":
        return parquet_records(path, f, batch_rows, (columns.label, columns.tags), require)
    if fmt == "hf":
        return hf_records(path, batch_rows, (columns.label, columns.tags), require)
    if fmt == "text":  # one input per line: its one column, whatever columns.text names it; another named is refused
        try:
            require([columns.text])
        except TaskDataError as e:
            raise TaskDataError(f"{e} (a plain-text file is one text a line and holds no other column: write it as "
                                "CSV or JSON Lines with them, or move it out of the input)") from None
        return ((n, where, text if isinstance(text, Reject) else {columns.text: text}, excerpt)
                for n, where, text, excerpt in text_lines(f, lone_cr=True))
    tagged = bool(columns.tags)  # "": words alone, to tag (predict), where a file may have one column
    return ((n, where, Reject(bad) if bad else  # CoNLL: conll.py's rules, any tag
             {"id": f"{_name(path)}:{n}", "document": document, "tokens": [columns_of(x)[0] for x in lines],
              "ner_tags": [columns_of(x)[-1] for x in lines] if tagged else None}, " | ".join(lines[:5]))
            for n, (document, lines, bad, where)
            in enumerate(named_documents(conll_sentences(raw_lines(f), tagged=tagged, source=path))))


# --- Rows ---

class _Rows:
    """One file's records -> rows of `kind`, collected into FileBatch-es.

    The first valid row fixes the file's label type (JSON int vs str class, number vs str score):
    a file that mixes them follows two conventions, and one of them would map onto the wrong labels.
    """

    def __init__(self, path: str, kind: str, columns: Columns, version_2: bool = True, scored_only: bool = False):
        self.path, self.kind, self.columns, self.version_2 = path, kind, columns, version_2
        self.scored_only = scored_only  # QA, a dev or select file: an answer off its start kept at -1, scored by text
        self.batch, self.seen, self.label_type, self.ids = FileBatch([]), 0, None, set()
        self.decimal_comma = False  # a semicolon CSV's numbers: "0,5" is 0.5
        self.comma_scores = False  # a TSV's scores (German Excel's "Text"): "4,5" is 4.5, "1,000" is no score
        self.lists = ListHead(path, kind, columns.label_separator, labeled=bool(columns.label))

    def put(self, row, where: str, excerpt) -> None:
        """Keep a row, or count a reject reason (a blank line is not a record)."""
        self.seen += row != "blank_line"
        if isinstance(row, str):
            self.batch.reject(str(row), where, excerpt)
        else:
            self.batch.rows.append(row)

    def take(self) -> FileBatch:
        batch, self.batch = self.batch, FileBatch([])
        batch.label_type = self.label_type
        return batch

    def row(self, n: int, record: dict, where: str) -> dict | str:
        """The row, or the reason to reject the record."""
        c = self.columns
        rid = cell_id(record.get(c.id) if c.id else None)
        rid = f"{_name(self.path)}:{n}" if rid is None else rid
        if self.kind == "token-classification" and not c.tokens:  # unlabeled text to tag
            text = cell_text(record.get(c.text))
            if isinstance(text, Reject):
                return str(text)
            return {"id": rid, "text": text} if isinstance(text, str) and text.strip() and not no_value(text) \
                else "missing_text"
        if self.kind == "token-classification":
            return self._tokens(rid, record.get(c.tokens), record.get(c.tags), labeled=bool(c.tags))
        if self.kind == "question-answering":
            return self._qa(rid, record, where)
        texts = [cell_text(record.get(name)) for name in (c.text, c.text_pair) if name]
        if any(isinstance(t, Reject) for t in texts):
            return "invalid_utf8"
        if not all(isinstance(t, str) and t.strip() and not no_value(t) for t in texts):  # #N/A: as a label's
            return "missing_text"
        label = read_label(record.get(c.label), self.kind, self.path, c.label_separator, self.decimal_comma,
                           self.comma_scores) if c.label else (None, None)
        if label != "missing_label":
            self.lists.count(record.get(c.label), where)  # a file whose labels are lists is refused
        if isinstance(label, str):
            return label
        if label[1] is not None and self.label_type not in (None, label[1]):
            return "mixed_label_types"
        self.label_type = self.label_type or label[1]
        return {"id": rid, "text_a": texts[0], "text_b": texts[1] if len(texts) > 1 else None, "label": label[0]}

    @staticmethod
    def _tokens(rid: str, tokens, tags, labeled: bool = True) -> dict | str:
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            return "missing_text"
        if not tokens:
            return "empty_row"
        if not labeled:
            return {"id": rid, "document": rid, "tokens": tokens, "ner_tags": None}
        if tags is None:
            return "missing_label"
        if not isinstance(tags, list) or any(isinstance(t, bool) or not isinstance(t, (int, str)) for t in tags):
            return "unparseable_label"
        if len(tags) != len(tokens):
            return "tags_tokens_length_mismatch"
        return {"id": rid, "document": rid, "tokens": tokens, "ner_tags": [str(t) for t in tags]}

    def _qa(self, rid: str, record: dict, where: str) -> dict | str:
        """As load_squad (squad.gold_answers): answers off their answer_start noted once the question is kept."""
        c = self.columns
        context, question = cell_text(record.get(c.context)), cell_text(record.get(c.question))
        if isinstance(context, Reject) or isinstance(question, Reject):
            return "invalid_utf8"
        if not all(isinstance(t, str) and t.strip() and not no_value(t) for t in (context, question)):
            return "missing_field"
        answers = {"text": [], "answer_start": []}  # inputs to predict (c.answers ""): each answered on its own
        if c.answers:
            if rid in self.ids:
                return "duplicate_id"
            if record.get(c.answers) is None:  # absent or null: unknown; [] (or empty columns) says "no answer"
                return "missing_label"
            notes = []
            answers = gold_answers(context, record[c.answers], lambda a: notes.append(OFFSET_MISMATCH),
                                   lambda a: notes.append(OFFSET_IN_OTHER_UNITS), scored_only=self.scored_only)
            if isinstance(answers, str):
                return answers
            if not answers["text"] and not self.version_2:
                return NEEDS_VERSION_2
            self.ids.add(rid)
            self.batch.notes.update(notes)
        title = record.get("title")
        return {"id": rid, "title": title if isinstance(title, str) else "", "question": question, "context": context,
                "answers": answers, "is_impossible": not answers["text"]}


def _squad_batches(path: str, batch_rows: int, encoding: str = "", **kwargs) -> Iterator[FileBatch]:
    """SQuAD JSON through load_squad (`kwargs`: its labeled, version_2 and scored_only)."""
    fs, p = fsspec.core.url_to_fs(path)
    with tempfile.TemporaryDirectory() as tmp:
        plain = isinstance(fs, LocalFileSystem) and fsspec.utils.infer_compression(p) is None \
            and not check_encoding(encoding)
        local = p if plain else os.path.join(tmp, "squad.json")
        if local != p:  # load_squad reads a local, uncompressed UTF-8 file
            with fsspec.open(path, "rb", compression="infer") as src, open(local, "wb") as dst:
                shutil.copyfileobj(text_file(path, src, encoding), dst, 1 << 20)
        try:
            split = load_squad(local, name=_name(path), **kwargs)
        except TaskDataError as e:
            raise TaskDataError(str(e).replace(local, path)) from None
    if not split.rows and not split.rejects:  # inputs to predict (a labeled file raised): not one question
        split.reject("empty_file", path, "")
    for start in range(0, max(len(split.rows), 1), batch_rows):  # rejects alone are a batch too
        batch = FileBatch(split.rows[start:start + batch_rows])
        if start == 0:
            batch.rejects, batch.notes, batch.samples = split.rejects, split.notes, split.samples[:_BATCH_SAMPLES]
        yield batch


def read_file(path: str, fmt: str, kind: str, columns: Columns = Columns(), batch_rows: int = 2048,
              labeled: bool = True, version_2: bool = True, scored_only: bool = False) -> Iterator[FileBatch]:
    """Stream one file (a resolve_files pair) as FileBatch-es; see the module docstring. `labeled=False`: inputs to
    predict (unlabeled): no label column is read (a row's label is None; QA's answers []), plain text is a
    format (one input per line, the `text` column), and token classification reads a `text` column to tag
    when `columns.tokens` is "" (a row {id, text}). `version_2` (task.version_2): false rejects a labeled QA
    question without an answer (squad.NEEDS_VERSION_2): a v1 model never predicts "no answer"; `scored_only` (QA: a
    dev or select file, no target taken from it): an answer off its answer_start is kept at -1, scored by its text."""
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {list(KINDS)}")
    if not labeled:
        columns = unlabeled(columns)
        allowed = _UNLABELED_FORMATS.get(kind, ("csv", "tsv", "jsonl", "parquet", "hf", "xlsx", "text"))
        if kind == "token-classification" and columns.tokens:
            allowed = _KIND_FORMATS[kind]
    else:
        allowed = _KIND_FORMATS.get(kind, ("csv", "tsv", "jsonl", "parquet", "hf", "xlsx"))
    if fmt not in allowed:
        raise TaskDataError(f"{path}: format {fmt!r} cannot hold {kind} rows; use one of {list(allowed)}")
    rows = _Rows(path, kind, columns, version_2, scored_only)
    fs, fs_path = fsspec.core.url_to_fs(path)
    if fmt != "hf" and fs.size(fs_path) == 0:
        rows.put("empty_file", path, "")
        yield rows.take()
        return
    if fmt == "squad":
        yield from _squad_batches(path, batch_rows, columns.encoding, labeled=labeled, version_2=version_2,
                                  scored_only=scored_only)
        return
    keys = {} if fmt == "jsonl" else None  # JSON Lines has no header: its columns are the first batch's keys
    held = []  # batches read before the file's first labels told it writes no lists (ListHead), else it raises
    codec = None if fmt == "hf" else fsspec.utils.infer_compression(path)
    invalid = invalid_reason(columns.encoding)  # a byte the named encoding does not define: invalid_cp1252
    with contextlib.nullcontext() if fmt == "hf" else fsspec.open(path, "rb", compression="infer") as f:
        try:
            if fmt not in ("hf", "parquet", "xlsx"):
                f = text_file(path, f, columns.encoding)
            if fmt in ("csv", "tsv", "conll", "text") and not columns.encoding:  # cp1252 refused, not half read
                refuse_one_byte_text(path, f)
            delimiter = csv_delimiter(f) if fmt == "csv" else ","
            rows.decimal_comma, rows.comma_scores = delimiter == ";", fmt == "tsv"
            objects = 0
            for n, where, record, excerpt in _records(path, f, fmt, kind, columns, batch_rows, delimiter):
                record = Reject(invalid) if record == "invalid_utf8" else record
                if keys is not None and isinstance(record, dict):
                    keys.update(dict.fromkeys(record))
                    objects += 1
                rows.put(record if isinstance(record, Reject) or fmt == "conll" else rows.row(n, record, where),
                         where, excerpt)
                # the columns are checked on a batch's keys, or on KEYS_SEEN objects' when no row is valid (a misnamed
                # column rejects every record: the file is not read to its end, nor check_columns' first row)
                if keys is not None and (len(rows.batch.rows) >= batch_rows or objects >= KEYS_SEEN):
                    _check_keys(path, keys, rows.batch, kind, columns, objects)
                    keys = None
                if len(rows.batch.rows) >= batch_rows:
                    held.append(rows.take())
                if held and rows.lists.decided:
                    yield from held
                    held.clear()
        except (EOFError, OSError, zlib.error, lzma.LZMAError, pa.ArrowException) as e:
            # counted: a decoder's error on the file's bytes (cut short, not that codec, a Parquet page that does not
            # decode), the records before it kept; raised: an I/O error (disk, network), counted it would lose the rest
            if not bad_compressed_data(e):
                raise OSError(f"error reading {path} after {rows.seen:,} records: {e!r}") from e
            if codec is None and fmt not in ("parquet", "hf"):
                raise
            rows.put(Reject(f"truncated_{codec}" if isinstance(e, EOFError) else f"corrupt_{codec or fmt}"), path,
                     f"after {rows.seen:,} records: {e}")
    if keys is not None:
        _check_keys(path, keys, rows.batch, kind, columns)
    if not rows.seen:
        rows.put("empty_file", path, "")
    rows.lists.decide()  # a file of fewer labels than LIST_HEAD, on all of them
    yield from held
    if rows.batch.rows or rows.batch.rejects:
        yield rows.take()


def check_columns(files: list[tuple[str, str]], kind: str, columns: Columns = Columns(), labeled: bool = True) -> None:
    """Every file read up to its first good record (a header, a first line; a Parquet file's schema), and a labeled
    file to its first label_cells.LIST_HEAD labels (lists where its kind reads none), here: a column the
    mapping names and a file lacks, or a format that cannot hold `kind`, raises TaskDataError before any cluster work
    (a job's Ray tasks would raise it later, as a task's traceback, after other files were read). Each file, not one
    per format: files exported on different days may name their columns differently. SQuAD JSON, fixed fields read
    whole, is left to the job."""
    for path, fmt in files:
        if fmt == "parquet":  # its footer: reading a row would read the file's first row group (hundreds of MB)
            with fsspec.open(path, "rb") as f:
                pf = parquet_file(path, f)
                names = pf.schema_arrow.names
                parquet_features(path, pf)  # datasets' metadata that is no JSON is refused here too
                label = pf.schema_arrow.types[names.index(columns.label)] if columns.label in names else None
            _require_columns(path, names, kind, unlabeled(columns) if not labeled else columns)
            if labeled and kind == "classification" and label is not None and any(
                    is_list(label) for is_list in (pa.types.is_list, pa.types.is_large_list,
                                                   pa.types.is_fixed_size_list, pa.types.is_list_view)):
                raise class_lists(path, f"its label column {columns.label!r} holds lists of classes ({label})")
        elif fmt != "squad":
            next(read_file(path, fmt, kind, columns, batch_rows=1, labeled=labeled), None)


def unlabeled(columns: Columns) -> Columns:
    """`columns` reading no label: what prediction inputs are read with."""
    return replace(columns, label="", tags="", answers="")


KEYS_SEEN = 10_000  # JSON objects whose keys name a JSON Lines file's columns (a writer may leave out a null's key)


def _check_keys(path, keys, batch, kind, columns, objects: int = 0) -> None:
    if keys:
        try:
            _require_columns(path, list(keys), kind, columns)
        except TaskDataError as e:
            seen = f" (the keys of its first {objects:,} JSON objects)" if objects else ""
            raise TaskDataError(f"{e}{seen}") from None
    elif batch.rejects["bad_json"]:
        raise TaskDataError(f"{path}: not JSON Lines, no line is a JSON object (first: {batch.samples[0][2]!r})")
