"""Your own training files through Ray Data: read, checked, labelled and given their roles in tasks, so the driver
never holds the training rows and its memory stays flat as the data grows.

The driver gets what is small: the counts, the rejects by reason, the label set, the carved `select` and `dev`
rows (at most `max_rows` each) and the training split's size and digest. The training rows stay in Ray's object
store as a Dataset of JSON-encoded rows (one column, `row`: files of any kind and schema share one block layout),
ready for the featurizing tasks. The roles are those of pipelines/tasks/roles.py, computed per row: a row's group
(its document, its SQuAD context, a pair's first sentence, else its own input) hashes to where it goes, the
evaluation carve first with a salted hash, then the select carve from what is left, each capped at `max_rows` by
taking the lowest hashes (a group is never cut). A row whose input also occurs in the evaluation split leaves
train, and a select row whose input is in train leaves select, as for the benchmarks.

Passes over the read rows (materialized once; each pass is Ray Data tasks returning one small summary per block):
  1. read: files -> JSON rows (+ one reject-count record per file batch; a file refused: why, raised by the driver)
  2. survey: rows, rejects, label names, whether documents or pairs decide the groups, refusals
  3. candidates, once per carve: the groups whose hash falls under the fraction, at most max_rows rows a block
  4. roles: the carved rows to the driver; train less leaks, labels encoded, stays in the cluster
  5. train survey: its size, digest (order-free: a sum of row hashes), the select rows it also holds, truncation
"""

from __future__ import annotations

import collections
import hashlib
import heapq
import json
import math
import re
from dataclasses import dataclass, field

import numpy as np

from pipelines.tasks.common import TaskDataError, count_too_long
from pipelines.tasks.file_finder import resolve_files
from pipelines.tasks.files import Columns, read_file
from pipelines.tasks.labels import encode_labels, label_set, require_held_labels
from pipelines.tasks.roles import INPUT_FIELDS, canonical, content_key, leak_keys, oversized_group, unit_hash

EVALUATION_SALT = "evaluation|"  # the evaluation carve's hash is not the select carve's
MAX_LABELS = 100_000  # more distinct labels than this: the label column is not a label


@dataclass
class StreamedSplit:
    """The training split, left in the cluster: `dataset` has one column `row` (a JSON row, labels encoded)."""

    dataset: object  # ray.data.Dataset
    rows: int
    sha256: str

    def __len__(self) -> int:
        return self.rows


@dataclass
class StreamedRows:
    train: StreamedSplit
    select: list[dict] | None  # carved here (None: the caller read a select file)
    dev: list[dict] | None  # carved here (None: the caller read a dev file)
    labels: tuple
    rejected: dict[str, collections.Counter] = field(default_factory=dict)  # split -> reason -> rows
    samples: dict[str, list] = field(default_factory=dict)  # the training files' reason -> [path, where, excerpt]
    dropped: dict[str, int] = field(default_factory=dict)  # leak -> rows
    truncated: int = 0  # training rows longer than max_seq_len word pieces
    notes: collections.Counter = field(default_factory=collections.Counter)  # the training files' QA answer notes
    mode: str = "content"  # what a group is here (_group): "document", "pair" or "content" (QA: its context)
    shared_group: int = 0  # training rows whose group is a given dev file row's (given files are not regrouped)
    trained: frozenset | None = None  # the classes (indices) the training rows hold: classification, multi-label


# -- pass 1: read ---------------------------------------------------------------------------------------------

def _read(batch, kind: str, columns: Columns, version_2: bool = True):
    """Files -> batches of JSON rows; each file batch's rejects ride along as one record with `row` empty, with
    where the first of each reason was (`samples`: reason -> [path, where, excerpt]), how the file writes its
    classes (`classes`: path -> [label type, whether a class is a name, not a number]) and, where read_file refused
    the file, why (`refused`)."""
    for path, fmt in zip(batch["path"], batch["fmt"]):
        try:
            for part in read_file(str(path), str(fmt), kind, columns, version_2=version_2):
                rows = [json.dumps(r, ensure_ascii=False) for r in part.rows]
                samples = {}
                for reason, where, excerpt in part.samples:
                    samples.setdefault(reason, [str(path), where, excerpt])
                classes = add_classes({}, str(path), part, kind)
                yield _tail(rows, rejects=json.dumps(dict(part.rejects)), classes=json.dumps(classes),
                            samples=json.dumps(samples, ensure_ascii=False), notes=json.dumps(dict(part.notes)))
        except TaskDataError as e:  # a file unusable as a whole, found past the rows check_columns read: raised by
            # stream_rows on the driver, one line, not here, where Ray would print it inside ~190 lines of its own
            yield _tail([], refused=str(e))


def _tail(rows: list[str], **last: str) -> dict:
    """A block of `rows` and one more record, its `row` empty, holding `last` (_read's per-file-batch fields)."""
    last = {name: last.get(name, "") for name in ("rejects", "samples", "classes", "notes", "refused")}
    return {"row": np.asarray([*rows, ""], dtype=object),
            **{name: np.asarray([""] * len(rows) + [value], dtype=object) for name, value in last.items()}}


_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def _number(name: str) -> bool:
    """Whether a class is written as a number: an id ("0", JSON's 0) or a rating ("4", "1.5"), not a name."""
    return bool(_NUMBER.fullmatch(name))


def add_classes(into: dict[str, list], path: str, part, kind: str) -> dict[str, list]:
    """Merge how a FileBatch `part` of the file `path` writes its classes into `into` (path -> [label type, a class
    is a name, not a number]), for _mixed_classes; `into` returned. Classes and tags: scores are not checked. The
    reader gives tags as text, whatever their JSON type: a file whose tags are all integers is a file of ids (a
    `datasets` to_json of a ClassLabel sequence), beside one of names ("B-PER", "O") the same two ways of writing."""
    if kind in ("classification", "multi-label") and part.label_type:
        labels = [r["label"] for r in part.rows]
        names = labels if kind == "classification" else [n for row in labels for n in row]
        if names:  # rows with no class (a shard of negatives only) say nothing of how classes are written
            _merge_classes(into, {path: [part.label_type, any(not _number(n) for n in names)]})
    elif kind == "token-classification" and (tags := [t for r in part.rows for t in r["ner_tags"] or ()]):
        has_names = any(not _number(t) for t in tags)
        _merge_classes(into, {path: ["str" if has_names else "int", has_names]})
    return into


def _merge_classes(into: dict[str, list], found: dict[str, list]) -> None:
    """Merge `found` (path -> [label type, a class is a name], as _read's JSON `classes` records) into `into`."""
    for path, (label_type, has_names) in found.items():
        seen = into.setdefault(path, [label_type, has_names])
        seen[1] = seen[1] or has_names


def _mixed_classes(classes: dict[str, list], spec: str, labels: tuple, given: dict[str, dict] | None = None) -> None:
    """Refuse files that write their classes two ways: one as numbers only (ids: a `datasets` export's ClassLabel
    column, as JSON / Parquet integers or as CSV / TSV / Excel text "0" / "1") and another as names ("neg", "pos").
    Read together, the ids and the names would be four classes where the data has two, with no reject (one file
    that mixes them keeps them: digits beside names in one file are its classes). CSV's "0" beside JSON's 0 is the
    same class: no mix. A file `datasets` wrote with ClassLabel names (label type "classlabel",
    arrow_files.classlabel) holds names even where they are digits, and is refused beside any file of ids: its
    exports write the ids as either. With task.labels set, only one way can be kept (the other's rows are rejected
    and counted), unless names are digits; labels that name both ways are refused, except beside text ids without
    a ClassLabel file: a text file's "0" may be a class of its own beside "other" (a JSON integer is an id).
    `classes`: the training files' (path -> [label type, a class is a name]); `given`: the dev and select files'
    (role -> path -> the same), which are encoded with train's labels and would be misread the same way."""
    files = {**classes, **{f"task.{role}_file {path}": c for role, found in (given or {}).items()
                           for path, c in found.items()}}
    classlabel = {path for path, (label_type, _) in files.items() if label_type == "classlabel"}
    digits = any(not has_names for path, (_, has_names) in files.items() if path in classlabel)
    ids = sorted(path for path, (_, has_names) in files.items() if not has_names and path not in classlabel)
    named = sorted(path for path, (_, has_names) in files.items() if has_names or path in classlabel)
    if not (ids and named):
        return
    text_ids = not classlabel and all(files[path][0] == "str" for path in ids)
    one_way = all(_number(str(n)) for n in labels) or not any(_number(str(n)) for n in labels)
    if labels and not digits and (one_way or text_ids):
        return
    what = "its datasets ClassLabel names" if named[0] in classlabel else "names"
    raise TaskDataError(f"task.train_file {spec!r}: {ids[0]} writes its classes as integers (ids) and {named[0]} "
                        f"as {what}: read together they would be different classes; write the same labels in "
                        "both (one file's classes the other's way)" + (
                            "; or, where the digits are classes of their own beside the names, name every class "
                            "in task.labels" if text_ids else ""))


def _rows(batch) -> list[dict]:
    return [json.loads(r) for r in batch["row"] if r]


# -- groups (roles.group_key, decided once for the whole file set) ----------------------------------------------

def _group(row: dict, kind: str, mode: str) -> str:
    if kind == "question-answering":
        return canonical(row["context"])
    if mode == "document":
        return f"document:{row['document']}"
    if mode == "pair":
        return "text_a:" + json.dumps(canonical(row.get("text_a")), ensure_ascii=False)
    return content_key(row, kind)


def evaluation_groups(rows: list[dict], kind: str, mode: str) -> set[str]:
    """The groups of `rows` named as the carve names train's (`mode`: StreamedRows.mode): rows of train or select in
    one of them share a SQuAD context, a first sentence or a document with those rows."""
    return {_group(row, kind, mode) for row in rows}


def in_groups(rows: list[dict], groups: set[str], kind: str, mode: str) -> int:
    """How many of `rows` belong to one of `groups` (evaluation_groups')."""
    return sum(_group(row, kind, mode) in groups for row in rows) if groups else 0


def _survey(batch, kind: str) -> dict:
    """Pass 2, one record per block: rows, rejects, raw label names, documents, pairs, a file's refusal."""
    rows, rejects, names, documents, samples, classes = _rows(batch), collections.Counter(), set(), set(), {}, {}
    notes = collections.Counter()  # QA answers noted in questions kept (files.FileBatch.notes)
    for r, found, noted in zip(batch["rejects"], batch["samples"], batch["notes"]):
        if r:
            rejects.update(json.loads(r)), notes.update(json.loads(noted))
            for reason, sample in json.loads(found).items():
                samples.setdefault(reason, sample)
    for found in batch["classes"]:
        _merge_classes(classes, json.loads(found) if found else {})
    for row in rows:
        if kind == "classification":
            names.add(str(row["label"]))
        elif kind == "multi-label":
            names.update(map(str, row["label"]))
        elif kind == "token-classification":
            names.update(map(str, row["ner_tags"]))
            documents.add(str(row.get("document")))
        if len(names) > MAX_LABELS:
            break
    return {"n": [len(rows)], "rejects": [json.dumps(rejects)], "notes": [json.dumps(notes)],
            "refused": [next((r for r in batch["refused"] if r), "")],
            "samples": [json.dumps(samples, ensure_ascii=False)],
            "names": [json.dumps(sorted(names))], "classes": [json.dumps(classes)],
            "documents": [json.dumps(sorted(documents)[:MIN_DOCS])], "docs_shared": [len(documents) < len(rows)],
            "pairs": [any(isinstance(r.get("text_b"), str) for r in rows)]}


MIN_DOCS = 10  # roles.MIN_DOCUMENT_GROUPS: fewer documents than this, and sentences are the groups


def _lowest(counts: dict, max_rows: int) -> dict:
    """The entries of {(hash, group): rows} that a carve of at most `max_rows` rows could take: lowest hashes first,
    up to and including the first that would pass `max_rows` (whatever follows it can never be taken)."""
    kept, taken = {}, 0
    for key in sorted(counts):
        kept[key] = counts[key]
        taken += counts[key]
        if taken > max_rows:
            break
    return kept


def _candidates(batch, kind: str, mode: str, fraction: float, max_rows: int, carve: str, exclude: set) -> dict:
    """Pass 3 (once per carve): (hash, group, rows) of the groups under the fraction that the carve could take,
    groups in `exclude` (the evaluation carve's, for select) left out; and the lowest. A block sends at most
    `max_rows` rows' worth: the driver's share stays flat."""
    found, lowest, lowest_rows = collections.Counter(), None, 0
    for row in _rows(batch):
        g = _group(row, kind, mode)
        if g in exclude:
            continue
        h = unit_hash(EVALUATION_SALT + g if carve == "dev" else g)
        if h < fraction:
            found[(h, g)] += 1
        if lowest is None or (h, g) < lowest:
            lowest, lowest_rows = (h, g), 0
        lowest_rows += (h, g) == lowest
    return {"found": [json.dumps([[h, g, n] for (h, g), n in _lowest(found, max_rows).items()])],
            "lowest": [json.dumps([*lowest, lowest_rows] if lowest else None)]}


def _chosen(records, max_rows: int) -> set[str]:
    """roles.carve's rule over the candidates (an iterator of pass 3's records): lowest hashes first until
    `max_rows` rows, a group never cut; at least one group, refused when it holds more than `max_rows` rows.
    Merged record by record, pruned as it goes."""
    counts: collections.Counter = collections.Counter()
    lowest = []
    for rec in records:
        for h, g, n in json.loads(rec["found"]):
            counts[(h, g)] += n
        counts = collections.Counter(_lowest(counts, max_rows))
        low = json.loads(rec["lowest"])  # [hash, group, its rows in the block]: the lowest group is its block's
        if low and (not lowest or low[:2] < lowest[:2]):  # lowest in every block that holds it, so its rows add up
            lowest = low
        elif low and low[:2] == lowest[:2]:
            lowest = [*lowest[:2], lowest[2] + low[2]]
    chosen, taken = set(), 0
    for h, g in sorted(counts):
        if taken + counts[(h, g)] > max_rows:
            break
        chosen.add(g)
        taken += counts[(h, g)]
    if not chosen and lowest:
        oversized_group(lowest[1], lowest[2], max_rows)
        chosen.add(lowest[1])
    return chosen


# -- pass 4: roles --------------------------------------------------------------------------------------------

def _cap_hash(row: dict) -> float:
    return unit_hash(f"cap:{row['id']}")


def _lowest_hashes(batch, n: int, **roles) -> dict:
    """A block's training rows' n lowest _cap_hash values (task.max_train_examples' sample)."""
    rows = (json.loads(r) for r in _roles(batch, **roles)["row"])
    return {"hashes": [json.dumps(heapq.nsmallest(n, map(_cap_hash, rows)))]}


def _roles(batch, kind: str, mode: str, dev_groups: set, select_groups: set, labels: tuple, forbidden: set,
           want: str, counts_only: bool = False, keep_below: float = 1.0):
    """`want` = "train": the training rows (labels encoded, leaks out) as JSON, or (`counts_only`) what was left
    out of them; else the carved rows of `want` and the counts, for the driver. `keep_below` < 1: train keeps the rows
    whose id hashes below it (a stable sample spread over every file, for task.max_train_examples)."""
    out, rejects, leaks, firsts = [], collections.Counter(), 0, []  # firsts: encode_labels' first rejects
    for row in _rows(batch):
        if keep_below < 1 and _cap_hash(row) >= keep_below:
            continue
        g = _group(row, kind, mode)
        role = "dev" if g in dev_groups else "select" if g in select_groups else "train"
        if role != want:
            continue
        if role == "train" and leak_keys(row, kind) & forbidden:
            leaks += 1
            continue
        if labels:
            kept, counts = encode_labels([row], kind, labels, firsts)
            rejects.update(counts)
            if not kept:
                continue
            row = kept[0]
        out.append(json.dumps(row, ensure_ascii=False) if want == "train" else row)
    if want == "train" and not counts_only:
        return {"row": np.asarray(out, dtype=object)}
    return {"rows": [json.dumps([] if counts_only else out, ensure_ascii=False)], "rejects": [json.dumps(rejects)],
            "leaks": [leaks], "samples": [json.dumps(firsts, ensure_ascii=False)]}


def _train_survey(batch, kind: str, select_keys: set, tokenizer, max_seq_len: int, max_query_length: int,
                  mode: str = "content", dev_groups: set = frozenset()) -> dict:
    """Pass 5: rows, the digest's sum of row hashes, rejects and leaks, select keys found here, rows too long, rows
    in one of `dev_groups` (a given dev file's), and the classes (their indices) the rows hold."""
    rows = [json.loads(r) for r in batch["row"]]
    classes = sorted({c for r in rows for c in (r["label"] if kind == "multi-label" else [r["label"]])}
                     if kind in ("classification", "multi-label") else ())
    shared = in_groups(rows, dev_groups, kind, mode)
    total = sum(int.from_bytes(hashlib.sha256(json.dumps(r, sort_keys=True, ensure_ascii=False).encode()).digest(),
                               "big") for r in rows)
    in_select = sorted(set().union(*(leak_keys(r, kind) for r in rows)) & select_keys) if select_keys else []
    return {"n": [len(rows)], "hash_sum": [str(total)], "in_select": [json.dumps(in_select)],
            "truncated": [count_too_long(rows, kind, tokenizer, max_seq_len, max_query_length) if tokenizer else 0],
            "shared_group": [shared], "classes": [json.dumps(classes)]}


# -- the whole -----------------------------------------------------------------------------------------------

def stream_rows(spec: str, fmt: str, kind: str, columns: Columns, *, fraction: float, max_rows: int,
                labels: tuple = (), dev: list[dict] | None = None, select: list[dict] | None = None,
                max_train: int = 0, tokenizer=None, max_seq_len: int = 128, version_2: bool = True,
                max_query_length: int = 64, given_classes: dict[str, dict] | None = None) -> StreamedRows:
    """The training files `spec` through Ray Data (see the module docstring). `dev` / `select`: rows the caller
    read from their own files (None: carved here), and `given_classes` how those files write their classes (role ->
    add_classes' record), checked with train's. `labels`: fixed by the user, else taken from train.
    `version_2`: read_file's (QA: false rejects questions without an answer)."""
    import ray

    files = resolve_files(spec, fmt, split="train")
    source = ray.data.from_items([{"path": p, "fmt": f} for p, f in files], override_num_blocks=len(files))
    # Every dataset below shares this context: its blocks come in their files' order, not as their tasks finished,
    # so the carved rows' order (select's digest, which a resubmission checks, and its max_eval_examples cap) and the
    # training rows' order (which train.seed's shuffle permutes) are the same in every run
    source.context.execution_options.preserve_order = True
    read = source.map_batches(_read, batch_size=1, batch_format="numpy",
                     fn_kwargs={"kind": kind, "columns": columns, "version_2": version_2}) \
        .materialize()

    survey = read.map_batches(_survey, batch_size=None, batch_format="numpy", fn_kwargs={"kind": kind}).take_all()
    if refused := next((rec["refused"] for rec in survey if rec["refused"]), ""):  # the first file's, in file order
        raise TaskDataError(refused)
    rejected = {"train": collections.Counter()}
    names, documents, samples, classes, notes = set(), set(), {}, {}, collections.Counter()
    for rec in survey:
        _merge_classes(classes, json.loads(rec["classes"]))
        rejected["train"].update(json.loads(rec["rejects"]))
        notes.update(json.loads(rec["notes"]))
        for reason, sample in json.loads(rec["samples"]).items():
            samples.setdefault(reason, sample)
        names.update(json.loads(rec["names"]))
        documents.update(json.loads(rec["documents"]))
    _mixed_classes(classes, spec, labels, given_classes)
    if not sum(rec["n"] for rec in survey):
        one = min(samples.items(), key=lambda s: (s[1][0], s[0]), default=None)  # a file and line to look at
        raise TaskDataError(f"task.train_file {spec!r}: no usable rows ({dict(rejected['train']) or 'empty'})"
                            + (f"; e.g. {one[0]} at {one[1][0]} {one[1][1]}: {one[1][2][:80]!r}" if one else ""))
    if len(names) > MAX_LABELS:
        raise TaskDataError(f"task.train_file {spec!r}: more than {MAX_LABELS:,} distinct labels; is the label column "
                            f"({columns.label!r}) a label?")
    if kind in ("classification", "multi-label", "token-classification") and labels:
        require_held_labels(labels, names, kind, spec)
    if kind in ("classification", "multi-label", "token-classification") and not labels:
        labels = label_set(names, "classification")
    elif kind == "regression":
        labels = ()
    mode = ("document" if kind == "token-classification" and any(rec["docs_shared"] for rec in survey)
            and len(documents) >= MIN_DOCS else
            "pair" if INPUT_FIELDS[kind][0] == "text_a" and any(rec["pairs"] for rec in survey) else "content")

    def chosen(carve: str, exclude: set) -> set[str]:
        return _chosen(read.map_batches(_candidates, batch_size=None, batch_format="numpy", fn_kwargs=dict(
            kind=kind, mode=mode, fraction=fraction, max_rows=max_rows, carve=carve, exclude=exclude)).iter_rows(),
            max_rows)

    dev_groups = chosen("dev", set()) if dev is None else set()
    # a given dev file is not regrouped: its groups may hold training rows too, counted (not dropped) in pass 5; a
    # row's own input as its group is a leak key's, and those rows leave train (no hash per training row for them)
    regrouped = dev is not None and (mode != "content" or kind == "question-answering")
    given_groups = evaluation_groups(dev, kind, mode) if regrouped else set()
    select_groups = chosen("select", dev_groups) if select is None else set()

    def carved(want: str, forbidden: set = frozenset(), counts_only: bool = False):
        recs = read.map_batches(_roles, batch_size=None, batch_format="numpy", fn_kwargs=dict(
            kind=kind, mode=mode, dev_groups=dev_groups, select_groups=select_groups, labels=labels,
            forbidden=forbidden, want=want, counts_only=counts_only)).take_all()
        rows, counts, leaks = [], collections.Counter(), 0
        for rec in recs:
            rows.extend(json.loads(rec["rows"]))
            counts.update(json.loads(rec["rejects"]))
            leaks += int(rec["leaks"])
            for reason, where, label in json.loads(rec["samples"]):  # a label task.labels lacks: said with the
                samples.setdefault(reason, [spec, where, label])  # training files' other first rejects
        return rows, counts, leaks

    if dev is None:
        dev, rejected["dev"], _ = carved("dev")
    if select is None:
        select, rejected["select"], _ = carved("select")
    forbidden = set().union(*(leak_keys(r, kind) for r in dev)) if dev else set()
    _, train_rejects, train_leaks = carved("train", forbidden, counts_only=True)
    rejected["train"].update(train_rejects)
    roles = dict(kind=kind, mode=mode, dev_groups=dev_groups, select_groups=select_groups, labels=labels,
                 forbidden=forbidden, want="train")
    keep_below = 1.0
    if max_train:  # task.max_train_examples: the N rows whose ids hash lowest, from every file (the first N rows of
        # files grouped by label would be one class): each block's N lowest, then the N-th lowest of all
        lows = read.map_batches(_lowest_hashes, batch_size=None, batch_format="numpy",
                                fn_kwargs={"n": max_train, **roles}).take_all()
        hashes = sorted(h for rec in lows for h in json.loads(rec["hashes"]))[:max_train]
        keep_below = math.nextafter(hashes[-1], 2.0) if len(hashes) == max_train else 1.0
    train = read.map_batches(_roles, batch_size=None, batch_format="numpy", fn_kwargs={**roles,
                                                                                       "keep_below": keep_below})
    if max_train:
        train = train.limit(max_train)
    train = train.materialize()
    select_keys = set().union(*(leak_keys(r, kind) for r in select)) if select else set()
    stats = train.map_batches(_train_survey, batch_size=None, batch_format="numpy", fn_kwargs=dict(
        kind=kind, select_keys=select_keys, tokenizer=tokenizer, max_seq_len=max_seq_len,
        max_query_length=max_query_length, mode=mode, dev_groups=given_groups)).take_all()
    n_train = sum(rec["n"] for rec in stats)
    if not n_train:
        left_out = dict(rejected["train"]) or "none rejected"
        raise TaskDataError(f"task.train_file {spec!r}: no training rows are left ({left_out}; {train_leaks} also in "
                            f"dev; {len(dev)} carved to dev, {len(select)} to select): too few distinct inputs to "
                            "carve from; give task.dev_file and task.select_file")
    digest = hashlib.sha256(f"{n_train} {sum(int(rec['hash_sum']) for rec in stats) % 2**256:064x}".encode())
    in_select = set().union(*(json.loads(rec["in_select"]) for rec in stats)) if stats else set()
    kept_select = [r for r in select if not (leak_keys(r, kind) & in_select)]
    out = StreamedRows(StreamedSplit(train, n_train, digest.hexdigest()), kept_select, dev, tuple(labels),
                       rejected=rejected, samples=samples, truncated=sum(rec["truncated"] for rec in stats),
                       notes=notes, mode=mode, shared_group=sum(int(rec["shared_group"]) for rec in stats),
                       trained=frozenset().union(*(json.loads(rec["classes"]) for rec in stats))
                       if kind in ("classification", "multi-label") else None)
    out.dropped = {"train_in_evaluation": train_leaks, "select_in_train": len(select) - len(kept_select)}
    return out
