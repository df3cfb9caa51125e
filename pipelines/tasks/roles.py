"""Three roles of a task's data: *train* fits the weights, *select* makes every choice (the checkpoint, the
trial, the seed, SQuAD v2's no-answer threshold, early stopping), *evaluation* judges the chosen model (the model
card, the registered version's metrics, the promotion gate). A model chosen on a split and then judged on the same
split looks better than it is, so selection never sees an evaluation row.

Benchmarks ship two splits, train and dev: dev becomes the evaluation split and selection is carved from train
by a stable hash of each row's *group*, the unit that must not straddle two splits (a document's paragraphs, a
SQuAD context's questions, a sentence pair's first sentence, a single sentence). The carve depends only on the rows'
content: the same rows in any order, on any machine, give the same split. A change to the evaluation split changes
the other two only where it removes a leak (a train row now also in the evaluation split); otherwise not at all.

A row of train or select whose input text (or, for the SQuAD benchmark, whose question id over the same context)
also occurs in the evaluation split is dropped and counted, as is a select row whose text is in train: benchmarks
have duplicates across their splits.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# what a row of each kind is made of: its model input (the content that must not leak) and its group
INPUT_FIELDS = {"classification": ("text_a", "text_b"), "multi-label": ("text_a", "text_b"),
                "regression": ("text_a", "text_b"), "token-classification": ("tokens",),
                "question-answering": ("question", "context")}
MIN_DOCUMENT_GROUPS = 10  # fewer documents than this (a CoNLL file without -DOCSTART-): carve by sentence


def _normalized(value):
    """Text as the tokenizer sees it: runs of whitespace are one space, none at the ends ("a  film " == "a film")."""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, (list, tuple)):
        return [_normalized(v) for v in value]
    return value


def canonical(text) -> str:
    """A group's text as the carve names it: NFC, runs of whitespace one space, none at the ends. Copies of one SQuAD
    paragraph or first sentence written apart (a trailing newline, CRLF, a double space, accents decomposed) are one
    group; a text already in this form is its own name, so its hash, and where the carve puts it, are as before. Case
    is kept: folded, nearly every group's name (and so every carve) would move."""
    text = str(text)
    return " ".join((text if text.isascii() else unicodedata.normalize("NFC", text)).split())


def _folded(value):
    """Text as an uncased tokenizer (the default) sees it: casefolded, accents dropped (NFKD less its combining
    marks), whitespace collapsed ("Great  MOVIE! Café" == "great movie! cafe"). A cased model's case variants match
    too: the same words, which is leak enough to take out of train."""
    if isinstance(value, str):
        if value.isascii():  # the same key, a tenth of the time (a key per training row, in every streamed pass)
            return " ".join(value.lower().split())
        text = unicodedata.normalize("NFKD", value.casefold())
        return " ".join("".join(c for c in text if not unicodedata.combining(c)).split())
    if isinstance(value, (list, tuple)):
        return [_folded(v) for v in value]
    return value


def _cjk(cp: int) -> bool:
    """The CJK ideograph blocks BERT splits into one word each (BasicTokenizer._is_chinese_char)."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


def _punctuation(c: str) -> bool:
    """BERT's punctuation: ASCII's symbols ($, +, ^, ...) and every Unicode P* character."""
    return (c.isascii() and c.isprintable() and not c.isalnum() and c != " ") or unicodedata.category(c)[0] == "P"


class _BertChars(dict):
    """What BERT's uncased normalizer (tokenizers' BertNormalizer) makes of each character, filled as characters
    are met: control, format, private-use and replacement characters dropped, whitespace one space, accents stripped
    (NFD less its Mn marks), lowercased; a punctuation or CJK character spaced apart, so it splits off as a word
    (BertPreTokenizer). A str.translate table: a row's text maps at C speed."""

    def __missing__(self, cp: int) -> str:
        c = chr(cp)
        if cp in (0, 0xFFFD) or (unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs") and c not in "\t\n\r"):
            out = ""
        elif c.isspace():
            out = " "
        else:
            bare = "".join(x.lower() for x in unicodedata.normalize("NFD", c) if unicodedata.category(x) != "Mn")
            out = "".join(f" {x} " if _punctuation(x) else x for x in bare)
            out = f" {out} " if _cjk(cp) else out
        self[cp] = out
        return out


_BERT_CHARS = _BertChars()
_ASCII_CONTROL = dict.fromkeys([*range(9), 11, 12, *range(14, 32), 127])
_ASCII_WORDS = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")  # after lower(): a word, or one punctuation character


def _basic(value):
    """A field as the words BERT's basic tokenizer (uncased, the default) makes of it, before WordPiece: inputs that
    differ only in where punctuation is spaced ("great movie!" == "great movie !"), in control or zero-width
    characters, or in the spaces around CJK characters give the same ids, so the same model input. A token list
    (CoNLL) is one run of words. Agrees with tokenizers' BertNormalizer + BertPreTokenizer (tests/unit/
    test_leak_keys.py) at a fifth of their time, up to characters whose Unicode class changed between the two's
    Unicode versions."""
    if isinstance(value, str):
        if value.isascii():
            return _ASCII_WORDS.findall(value.lower().translate(_ASCII_CONTROL))
        return value.translate(_BERT_CHARS).split()
    if isinstance(value, (list, tuple)):
        return [w for v in value for w in (_basic(v) if isinstance(v, str) else [v])]
    return value


def _sha(payload) -> str:
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False, default=str).encode()).hexdigest()


def content_key(row: dict, kind: str) -> str:
    """sha256 of the row's model input, whitespace normalized: equal inputs, equal key (labels and positions left
    out)."""
    payload = json.dumps([_normalized(row.get(f)) for f in INPUT_FIELDS[kind]], ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def leak_keys(row: dict, kind: str, global_ids: bool = False) -> set[str]:
    """What identifies a row across splits: its input's content key; its input as an uncased model sees it
    (_folded) and as BERT's basic tokenizer splits it into words (_basic); for a sentence pair, those of the pair
    reversed too (QQP, MRPC and STS-B are symmetric: (b, a) in dev is (a, b) in train); and, where ids are global
    (`global_ids`: the SQuAD benchmark's), a question's id with its context (the same question reworded). A user's ids
    name nothing across files: ids that restart in each file, and the position "<file name>:<n>" of rows without one,
    repeat in other questions of another split, on the same paragraph too (questions split at random, numbered from
    0). The content key stays among the keys, and the carve's groups use it alone: rows without such variants split as
    they did, into splits of the digests stored before."""
    folded = [_folded(row.get(f)) for f in INPUT_FIELDS[kind]]
    words = [_basic(row.get(f)) for f in INPUT_FIELDS[kind]]
    keys = {content_key(row, kind), "folded:" + _sha(folded), "basic:" + _sha(words)}
    if INPUT_FIELDS[kind][0] == "text_a" and isinstance(row.get("text_b"), str):
        keys |= {"folded:" + _sha(folded[::-1]), "basic:" + _sha(words[::-1])}  # the reversed pair's forward keys
    if global_ids and kind == "question-answering" and row.get("id") not in (None, ""):
        payload = json.dumps([row["id"], _normalized(row.get("context"))], ensure_ascii=False, default=str)
        keys.add("id:" + hashlib.sha256(payload.encode()).hexdigest())
    return keys


def group_key(rows: list[dict], kind: str) -> Callable[[dict], str]:
    """The unit the carve keeps whole: a document (pkgdocs, CoNLL with enough -DOCSTART- documents; named by its
    content, so adding a document elsewhere in the file moves no other), a SQuAD context, a sentence pair's first
    sentence (MNLI's premise with its ~3 hypotheses, QQP's reused questions), each as `canonical` writes it, else the
    row's own input."""
    if kind == "question-answering":
        return lambda r: canonical(r["context"])
    if rows and "document" in rows[0] and len({r.get("document") for r in rows}) >= MIN_DOCUMENT_GROUPS:
        if isinstance(rows[0]["document"], str):  # pkgdocs: the document's source name
            return lambda r: f"document:{r['document']}"
        content: dict = collections.defaultdict(hashlib.sha256)  # CoNLL: a numbered document, by its sentences
        for r in rows:
            content[r["document"]].update(content_key(r, kind).encode())
        names = {doc: h.hexdigest() for doc, h in content.items()}
        return lambda r: f"document:{names[r['document']]}"
    if INPUT_FIELDS[kind][0] == "text_a" and rows and any(isinstance(r.get("text_b"), str) for r in rows):
        return lambda r: "text_a:" + json.dumps(canonical(r.get("text_a")), ensure_ascii=False)
    return lambda r: content_key(r, kind)


def oversized_group(key: str, rows: int, max_rows: int) -> None:
    """Refuse a carve whose first group (the lowest hash) holds more than `max_rows` rows: taken whole, it would
    move far more than the fraction out of train (the rows of a templated first sentence, one huge document), and
    to the driver; skipped, the streamed carve could not choose as the list carve does. Names the group."""
    if rows <= max_rows:
        return
    from pipelines.tasks.common import TaskDataError

    what = ("rows sharing one first sentence, " + key[len("text_a:"):][:80] if key.startswith("text_a:") else
            "sentences of one document" if key.startswith("document:") else
            f"questions on one context, {key[:80]!r}" if not _hex(key) else "rows with one identical input")
    raise TaskDataError(f"the carve of the select / dev rows from the training files would take {rows:,} {what}: more "
                        f"than task.selection_max_rows={max_rows:,} in one group that is never split; give the "
                        "evaluation and select rows as files (task.dev_file, task.select_file), or raise "
                        "task.selection_max_rows")


def _hex(key: str) -> bool:
    return len(key) == 64 and all(c in "0123456789abcdef" for c in key)


def unit_hash(key: str) -> float:
    """A stable number in [0, 1) for a group key."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def _cap_hashes(rows: list[dict]) -> list[float]:
    """Each row's rank in a capped sample: the hash of the row as read (its id, input and label; not its place in
    the split) and of how many equal rows came before it. A row is in or out whatever rows are removed before it (a
    leak, a carved group): by position, one row less would redraw the whole sample."""
    seen: collections.Counter = collections.Counter()
    hashes = []
    for row in rows:
        payload = json.dumps({k: v for k, v in row.items() if k != "row_index"}, sort_keys=True, default=str,
                             ensure_ascii=False)
        seen[payload] += 1
        hashes.append(unit_hash(f"cap:{seen[payload]}:{payload}"))
    return hashes


def numbered(rows: list[dict], limit: int = 0) -> list[dict]:
    """The rows with their row_index; `limit`: a stable sample of that many, in their order (task.max_*_examples;
    not the first N: benchmark readers and users' files grouped by label would give one class)."""
    if limit and len(rows) > limit:
        hashes = _cap_hashes(rows)
        keep = sorted(sorted(range(len(rows)), key=lambda i: (hashes[i], i))[:limit])
        rows = [rows[i] for i in keep]
    return [{**row, "row_index": i} for i, row in enumerate(rows)]


def carve(rows: list[dict], group: Callable[[dict], str], fraction: float, max_rows: int
          ) -> tuple[list[dict], list[dict]]:
    """(train, select): the groups whose hash is below `fraction` go to select, lowest hashes first, until
    `max_rows` rows (a group is never cut). Each side keeps at least one group when there are two; a first group of
    more than `max_rows` rows is refused (oversized_group), never taken whole."""
    keys = [group(row) for row in rows]
    by_group: dict[str, list[dict]] = collections.defaultdict(list)
    for key, row in zip(keys, rows):
        by_group[key].append(row)
    ranked = sorted(by_group, key=lambda g: (unit_hash(g), g))
    chosen: set[str] = set()
    taken = 0
    for g in ranked:
        if unit_hash(g) >= fraction or taken + len(by_group[g]) > max_rows:
            break
        chosen.add(g)
        taken += len(by_group[g])
    if not chosen and ranked:
        oversized_group(ranked[0], len(by_group[ranked[0]]), max_rows)
        chosen.add(ranked[0])
    if len(chosen) == len(ranked) > 1:
        chosen.discard(ranked[-1])
    train = [r for k, r in zip(keys, rows) if k not in chosen]
    select = [r for k, r in zip(keys, rows) if k in chosen]
    return train, select


def without(rows: list[dict], forbidden: set[str], kind: str, global_ids: bool = False) -> tuple[list[dict], int]:
    """`rows` less those sharing a leak key with `forbidden`, and how many that was."""
    kept = [r for r in rows if not (leak_keys(r, kind, global_ids) & forbidden)]
    return kept, len(rows) - len(kept)


def keys_of(rows: Iterable[dict], kind: str, global_ids: bool = False) -> set[str]:
    return set().union(*(leak_keys(r, kind, global_ids) for r in rows)) if rows else set()


def split_digest(rows: list[dict]) -> str:
    """sha256 of a split's rows as the job uses them, row by row: equal digest, equal data."""
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(row, sort_keys=True, default=str, ensure_ascii=False).encode() + b"\n")
    return h.hexdigest()


SELECT = "select"  # the split that makes the run's choices (its dev and test only evaluate)


@dataclass
class TaskRows:
    """A task's rows in their three roles, `row_index` set within each split."""

    train: list[dict]
    select: list[dict]
    evaluation: dict[str, list[dict]]  # split name ("dev"; MNLI: "dev_matched", "dev_mismatched") -> rows
    labels: tuple = ()
    dropped: dict[str, int] = field(default_factory=dict)  # leak -> rows removed (train_in_evaluation, ...)
    rejected: dict[str, dict[str, int]] = field(default_factory=dict)  # split -> bad-record reason -> rows
    truncated: dict[str, int] = field(default_factory=dict)  # split -> rows longer than the sequence length (cut)
    # split -> reason -> QA answers converted, dropped or kept without a training target, in questions kept (no reject)
    noted: dict[str, dict[str, int]] = field(default_factory=dict)
    # split -> its rows whose group (a SQuAD context, a first sentence, a document) is an evaluation row's: given dev
    # or select files are not regrouped, so a group may straddle them; counted and said, never dropped (none: empty)
    shared_group: dict[str, int] = field(default_factory=dict)

    def splits(self) -> dict[str, list[dict]]:
        return {"train": self.train, "select": self.select, **self.evaluation}

    def held(self) -> list[dict]:
        """Rows the driver holds (train may stay in the cluster): select's, else the first evaluation split's."""
        return self.select or next((rows for rows in self.evaluation.values() if rows), [])

    def inputs(self) -> str:
        """What one input of a sequence task is: "text,text_pair" (sentence pairs: rows with a second text) or
        "text"; "" for the other kinds. Read from the rows the driver holds: a prediction or a served request must
        give a pair-trained model its pairs, and a single-sentence one single sentences."""
        held = self.held()
        if not held or "text_a" not in held[0]:
            return ""
        return "text,text_pair" if isinstance(held[0].get("text_b"), str) else "text"

    def summary(self) -> dict[str, dict]:
        """{split: {"rows": n, "sha256": digest}} for every split: tagged on runs and versions."""
        return {name: {"rows": len(rows), "sha256": getattr(rows, "sha256", None) or split_digest(rows)}
                for name, rows in self.splits().items()}  # a split left in the cluster brings its own digest


def assign_roles(train: list[dict], evaluation: dict[str, list[dict]], kind: str, fraction: float, max_rows: int,
                 select: list[dict] | None = None, global_ids: bool = False) -> TaskRows:
    """Train and evaluation rows (and select rows, when the task ships them) -> the three roles, leaks removed.
    Select is carved from train when not given. `global_ids`: a question id names one question in every split
    (leak_keys)."""
    forbidden = keys_of((r for rows in evaluation.values() for r in rows), kind, global_ids)
    group = group_key(train, kind)  # named before leaks leave: a CoNLL document less a leaked sentence keeps its name
    train, in_eval = without(train, forbidden, kind, global_ids)
    dropped = {"train_in_evaluation": in_eval}
    if select is None:
        train, select = carve(train, group, fraction, max_rows)
    select, dropped["select_in_evaluation"] = without(select, forbidden, kind, global_ids)
    select, dropped["select_in_train"] = without(select, keys_of(train, kind, global_ids), kind, global_ids)
    return TaskRows(train, select, evaluation, dropped=dropped)
