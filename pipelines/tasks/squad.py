"""SQuAD v1.1 / v2.0: JSON -> examples -> windowed features -> predicted spans -> official EM / F1.

Contracts between the steps:
  * A context longer than one window is split into overlapping windows by the tokenizer's
    overflow (`stride` = doc_stride tokens shared by consecutive windows, the transformers
    run_qa meaning; original BERT's doc_stride was the step between window starts).
  * The question is cut to max_query_length word pieces before pairing, so every window of an
    example holds the same question and as much context as fits.
  * Training targets are token positions in the window, from the first gold answer, whose answer_start the reader
    checked; a window that does not hold the whole answer, and every window of a v2 impossible question, points
    both at [CLS] (index 0). Answers after it may be at answer_start -1: texts scored (as evaluate-v2.0.py scores
    texts alone), never a target.
  * Eval features keep example_id and an offset mapping that is None outside the context, so
    postprocessing can only ever pick a context span and map it back to characters exactly.
"""

from __future__ import annotations

import collections
import json
import math
import os
import re
import string
import unicodedata
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pipelines.tasks.cells import bool_class
from pipelines.tasks.common import TaskDataError, TaskSplit, load_tokenizer, require_file
from pipelines.tasks.text_records import has_lone_surrogate


NEEDS_VERSION_2 = "unanswerable_needs_version_2"  # reject: a question without an answer where task.version_2 is false
# counted, not dropped: an answer whose answer_start counts UTF-16 units or UTF-8 bytes, kept at its character offset
OFFSET_IN_OTHER_UNITS = "answer_offset_in_other_units"
# counted: an answer that is not the context's text at its answer_start, kept at -1 (scored by its text, no target)
OFFSET_MISMATCH = "answer_offset_mismatch"
NOT_AN_ARTICLE = "not_a_squad_article"  # reject: an item of 'data' without a list of paragraphs (a table's record)


def load_squad(path: str | os.PathLike, *, labeled: bool = True, version_2: bool = True,
               name: str = "", scored_only: bool = False) -> TaskSplit:
    """Examples {id, title, question, context, answers: {text, answer_start}, is_impossible}.

    Rejected records: NOT_AN_ARTICLE (an item of `data` without `paragraphs`: pandas' orient="table" JSON),
    "missing_field" (a question without id/question text, a paragraph without context, either not an object),
    "invalid_utf8" (a lone surrogate escape, "\\ud83d", in the question's record, its context or title: as JSON Lines
    rejects it, text_records.has_lone_surrogate; no UTF-8 holds it, and Arrow and the tokenizer raised naming no
    record), "duplicate_id", "unparseable_label" (answers of no shape answer_list reads), "no_valid_answer"
    (answerable, but no answer a training target can use: none matches the context at its answer_start;
    `scored_only`, a split that is only scored (dev), none with a text), and NEEDS_VERSION_2 (`version_2` false: an
    impossible question, whose [CLS] target a v1 model never predicts). Counted in `notes`, not rejects (the
    question is kept): OFFSET_MISMATCH, answers not at their answer_start (kept for scoring at -1) or blank
    (dropped), and OFFSET_IN_OTHER_UNITS, answers whose start was in UTF-16 units or UTF-8 bytes (_char_start).
    `labeled=False`: inputs to predict: every question with a context is one, its answers not read
    ([], as files.py's rows to predict), an id repeated or absent ("<name>:<n>", n its position) allowed.
    """
    path = require_file(path, "SQuAD file")
    try:
        with open(path, encoding="utf-8-sig") as f:  # -sig: a byte-order mark, as Windows tools write, is no JSON
            data = json.load(f)["data"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise TaskDataError(f"{path}: not a SQuAD JSON file with a 'data' list ({e!r})") from e
    if not isinstance(data, list):
        raise TaskDataError(f"{path}: not a SQuAD JSON file: its 'data' is a {type(data).__name__}, not a list of "
                            "articles")
    out, seen, n = TaskSplit([], path), set(), -1
    for a, article in enumerate(data):
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):  # a table's records
            out.reject(NOT_AN_ARTICLE, f"article {a}", json.dumps(article, default=str)[:200])
            continue
        title = article.get("title", "")
        for p, paragraph in enumerate(article["paragraphs"]):
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("qas", []), list):
                out.reject("missing_field", f"{title!r} paragraph {p}", json.dumps(paragraph, default=str)[:200])
                continue
            context = paragraph.get("context")
            broken = has_lone_surrogate([title, context])
            for qa in paragraph.get("qas", []):
                if not isinstance(qa, dict):
                    out.reject("missing_field", f"{title!r} paragraph {p}", json.dumps(qa, default=str)[:200])
                    continue
                n += 1
                where = f"{title!r} paragraph {p} question {qa.get('id')!r}"
                qid = qa.get("id")  # 0 is an id; a dict or list is none (and unhashable)
                if not labeled and qid in (None, ""):
                    qid = f"{name or os.path.basename(path)}:{n}"
                if not isinstance(context, str) or not isinstance(qid, (str, int)) or isinstance(qid, bool) \
                        or qid == "" or not isinstance(qa.get("question"), str) or not qa["question"].strip() \
                        or not context.strip():  # blank: as files.py's JSONL and parquet rows (an answer to nothing)
                    out.reject("missing_field", where, json.dumps(qa)[:200])
                    continue
                if broken or has_lone_surrogate(qa):  # json.dumps: the excerpt escaped, loggable
                    out.reject("invalid_utf8", where, json.dumps([title, context] if broken else qa)[:200])
                    continue
                qid = str(qid)  # as files.py gives every other id: ids of all files compare, and Arrow gets one type
                if labeled and qid in seen:
                    out.reject("duplicate_id", where, qa["question"])
                    continue
                flag = _flag(qa.get("is_impossible"))
                if flag is None and labeled:
                    out.reject("unparseable_label", where, f"is_impossible {qa.get('is_impossible')!r}")
                    continue
                impossible, notes = bool(flag) or not labeled, []  # notes: counted once the question is kept
                answers = {"text": [], "answer_start": []} if impossible else gold_answers(context, qa.get(
                    "answers", []), lambda a: notes.append((OFFSET_MISMATCH, a)),
                    lambda a: notes.append((OFFSET_IN_OTHER_UNITS, a)), scored_only)
                # an empty answer list says "no answer", is_impossible or not (SQuAD v2 as HF's squad_v2 converts to
                # nested JSON; JSONL and parquet read it so: files.py); no "answers" at all says nothing (unknown), and
                # answers all off their context (to train) or all blank: both no_valid_answer
                impossible = impossible or (isinstance(answers, dict) and not answers["text"]
                                            and qa.get("answers") is not None)
                if isinstance(answers, str) or not (impossible or answers["text"]):
                    out.reject(answers if isinstance(answers, str) else "no_valid_answer", where, qa["question"])
                    continue
                if labeled and impossible and not version_2:
                    out.reject(NEEDS_VERSION_2, where, qa["question"])
                    continue
                seen.add(qid)
                for reason, a in notes:
                    out.note(reason, where, json.dumps(a))
                out.rows.append({"id": qid, "title": title, "question": qa["question"], "context": context,
                                 "answers": answers, "is_impossible": impossible})
    if not out.rows and labeled:
        raise TaskDataError(f"{path}: no usable questions ({dict(out.rejects)})")
    return out.report()


def _flag(value) -> bool | None:
    """is_impossible as written: a bool, absent or null (False), 0/1, or their text from a converter ("false" is no
    True); None for anything else."""
    if value is None or isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
        return bool(value)
    text = bool_class(value) or (value.strip() if isinstance(value, str) else None)
    return {"true": True, "false": False, "1": True, "0": False}.get(text)


def answer_list(answers) -> list[dict] | None:
    """One question's answers as a list of {text, answer_start}, from such a list or from SQuAD / HF columns
    {"text": [...], "answer_start": [...]} (paired up; a text with a start that are no lists is one answer).
    None: another shape (lists of unequal lengths, a list beside a scalar, ...), which no pairing reads."""
    if isinstance(answers, dict):
        text, start = answers.get("text"), answers.get("answer_start")
        if isinstance(text, list) and isinstance(start, list):
            return [{"text": t, "answer_start": s} for t, s in zip(text, start)] if len(text) == len(start) else None
        if isinstance(text, str) and _offset(start) is not None:
            return [{"text": text, "answer_start": start}]
        return None
    return answers if isinstance(answers, list) and all(isinstance(a, dict) for a in answers) else None


def _offset(value) -> int | None:
    """An answer_start as the integer it means: an int, an integral float (pandas writes an int column holding a
    null as floats: 24.0) or a digit string ("24", a CSV's or a stringly JSON export's); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdecimal() and value.strip().isascii():
        return int(value)
    return value if isinstance(value, int) else None


def _trimmed(text: str, start: int) -> tuple[str, int]:
    """An answer less the whitespace around it, its start moved past what went: a target starts and ends on a word
    (" Paris" at 24 -> "Paris" at 25), else its first or last piece would be the neighbouring word."""
    return text.strip(), start + len(text) - len(text.lstrip())


def _char_start(context: str, text: str, start: int) -> tuple[int | None, bool]:
    """(where `text` starts in `context`, whether `start` had to be read as another unit to find it): `start` as a
    character offset, else as a UTF-16 code-unit offset (JavaScript annotation tools count so: every character past
    U+FFFF, an emoji, counts two) or a UTF-8 byte offset (Go, Rust, byte-oriented tools), where the text is exactly
    there; else None. No search for the text elsewhere: a short answer ("the", "1") is at many places."""
    if context[start:start + len(text)] == text:
        return start, False
    for codec, width in (("utf-16-le", 2), ("utf-8", 1)):
        units = context.encode(codec, "surrogatepass")
        head = units[:start * width]
        try:
            char = len(head.decode(codec, "surrogatepass"))
        except UnicodeDecodeError:  # the offset falls inside a character in this unit: not this unit
            continue
        if char != start and context[char:char + len(text)] == text:
            return char, True
    return None, False


def gold_answers(context: str, answers, off: Callable[[dict], None], moved: Callable[[dict], None] = lambda a: None,
                 scored_only: bool = False) -> dict | str:
    """{"text": [...], "answer_start": [...]} of `answers` (answer_list's shapes), trimmed (_trimmed): first those
    that are the context's text at their answer_start (a start in UTF-16 units or UTF-8 bytes is read as characters
    and the answer goes to `moved` too: _char_start), the ones a training target may use; then, at answer_start -1,
    every other one with a text, which goes to `off`: evaluate-v2.0.py scores a prediction against the gold texts
    alone, and dropping one scored a prediction equal to it as wrong. Whitespace alone is no answer (dropped, to `off`
    too). Or a reject reason: "unparseable_label" (a shape answer_list refuses), "no_valid_answer" (answers, none at
    its answer_start; `scored_only`: a split no target is taken from, none with a text)."""
    answers = answer_list(answers)
    if answers is None:
        return "unparseable_label"
    good, texts_only = {"text": [], "answer_start": []}, []
    for a in answers:
        text, start = a.get("text"), _offset(a.get("answer_start"))
        has_text = isinstance(text, str) and bool(text.strip())
        at, converted = (_char_start(context, text, start) if start is not None and start >= 0 and has_text
                         else (None, False))
        if at is not None:
            if converted:
                moved(a)
            text, start = _trimmed(text, at)
            good["text"].append(text)
            good["answer_start"].append(start)
        else:
            off(a)
            texts_only += [text.strip()] if has_text else []
    if answers and not (good["text"] or scored_only and texts_only):
        return "no_valid_answer"
    return {"text": good["text"] + texts_only, "answer_start": good["answer_start"] + [-1] * len(texts_only)}


def _encode(examples, tok, max_seq_len: int, doc_stride: int, max_query_length: int):
    if not 0 < max_query_length < max_seq_len - 3 - doc_stride or doc_stride < 0:
        raise ValueError(f"need 0 < max_query_length ({max_query_length}) and max_query_length + doc_stride "
                         f"({doc_stride}) + 3 special tokens < max_seq_len ({max_seq_len})")
    # Leading whitespace would count toward the question's characters but not its pieces.
    questions = [ex["question"].lstrip() for ex in examples]
    pieces = tok(questions, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    # Cutting the text where piece k+1 starts re-tokenizes to at most the first k pieces (WordPiece is greedy
    # longest-match-first, so a word's prefix keeps its pieces); cut at the end of piece k, a character of several
    # pieces (an uncased tokenizer splits a Hangul syllable into its jamo, all at one offset) kept them all, and the
    # question ran past max_query_length, into the tokenizer's refusal of the stride.
    questions = [q if len(offs) <= max_query_length else q[:offs[max_query_length][0]].rstrip()
                 for q, offs in zip(questions, pieces)]
    enc = tok(questions, [ex["context"] for ex in examples], truncation="only_second", max_length=max_seq_len,
              stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True,
              padding="max_length", return_token_type_ids=True, return_attention_mask=True)
    enc["offset_mapping"] = with_final_marks(enc, [ex["context"] for ex in examples])
    return enc


def with_final_marks(enc, contexts: list[str], sequence: int = 1) -> list[list[tuple[int, int]]]:
    """Each window's offsets, a context piece's end moved past the marks (_is_mark) that follow it and start no piece
    (`sequence`: the context's sequence id in the windows, 1 after a question; 0 for a text alone, as tagging's).
    An accent-stripping (uncased) tokenizer leaves a word-final mark out of every piece: a combining accent of
    decomposed (NFD) text ("cafe\\u0301": `cafe` is (0, 4)), and a vowel sign of Indic or Thai script even in NFC text
    ("\\u0917\\u0941\\u0930\\u0941", guru: its last piece ends before the final \\u0941). The target of an answer
    ending on one ran on to the next word (or, at a window's end, was [CLS]), and the answer predicted was cut
    before it (EM 0). The targets and the evaluation and prediction offsets all come from here; a mark that is a piece
    of its own (a tokenizer that keeps accents) stays its own, in any window of its example (where it opens the next
    window, the last piece of this one does not take it). A context without a mark (most) is passed as it is."""
    sample = enc["overflow_to_sample_mapping"]
    marked = [not c.isascii() and any(map(_is_mark, set(c))) for c in contexts]
    windows = [i for i in range(len(sample)) if marked[sample[i]]]
    sequences = {i: enc.sequence_ids(i) for i in windows}
    starts = collections.defaultdict(set)  # every context piece's start, over all windows of an example
    for i in windows:
        starts[sample[i]].update(o[0] for o, s in zip(enc["offset_mapping"][i], sequences[i]) if s == sequence)
    out = list(enc["offset_mapping"])
    for i in windows:
        context, taken, row = contexts[sample[i]], starts[sample[i]], []
        for (a, b), s in zip(out[i], sequences[i]):
            while s == sequence and b < len(context) and b not in taken and _is_mark(context[b]):
                b += 1
            row.append((a, b))
        out[i] = row
    return out


def _is_mark(c: str) -> bool:
    """A character BERT's accent stripping removes (a non-spacing mark, category Mn: many of combining class 0, as
    Devanagari's \\u0941 \\u0947 \\u0902) or a combining one: no piece of an uncased tokenizer covers it."""
    return unicodedata.category(c) == "Mn" or unicodedata.combining(c) != 0


def _arrays(enc) -> dict[str, np.ndarray]:
    return {k: np.asarray(enc[k], dtype=np.int64) for k in ("input_ids", "token_type_ids", "attention_mask")}


def squad_train_features(examples, tokenizer, max_seq_len: int = 384, doc_stride: int = 128,
                         max_query_length: int = 64) -> dict[str, np.ndarray]:
    """One row per window: input_ids, token_type_ids, attention_mask, start_positions, end_positions,
    example_index (position of the window's example in `examples`). Uses the first gold answer, less the whitespace
    around it (_trimmed; the readers trim theirs)."""
    enc = _encode(examples, load_tokenizer(tokenizer), max_seq_len, doc_stride, max_query_length)
    sample = enc["overflow_to_sample_mapping"]
    starts, ends = np.zeros(len(sample), np.int64), np.zeros(len(sample), np.int64)
    for i, offsets in enumerate(enc["offset_mapping"]):
        ex = examples[sample[i]]
        if ex.get("is_impossible") or len(ex["answers"]["text"]) == 0:
            continue
        text, start_char = _trimmed(ex["answers"]["text"][0], ex["answers"]["answer_start"][0])
        # -1: none of its answers is at its answer_start, a question of a split only scored (load_squad's scored_only),
        # whose windows are featurized so too, their targets unused; a training reader keeps no such question
        if start_char < 0:
            continue
        end_char = start_char + len(text)
        seq = enc.sequence_ids(i)
        if 1 not in seq:  # a context of no pieces (U+FFFD, zero-width and control characters only): target [CLS]
            continue
        first, last = seq.index(1), len(seq) - 1 - seq[::-1].index(1)
        if offsets[first][0] > start_char or offsets[last][1] < end_char:
            continue  # the answer is not wholly inside this window: target [CLS]
        s = first
        while s <= last and offsets[s][0] <= start_char:
            s += 1
        e = last
        while e >= first and offsets[e][1] >= end_char:
            e -= 1
        starts[i], ends[i] = s - 1, e + 1
    return {**_arrays(enc), "start_positions": starts, "end_positions": ends,
            "example_index": np.asarray(sample, dtype=np.int64)}


def require_unique_ids(examples, split: str = "one split") -> None:
    """TaskDataError naming the question ids that occur more than once in `examples`."""
    shared = [i for i, k in collections.Counter(ex["id"] for ex in examples).items() if k > 1]
    if shared:
        raise TaskDataError(f"{len(shared)} question ids occur more than once in {split}, e.g. {shared[:3]}: "
                            "give the files of a split different names, or set task.columns.id to ids unique "
                            "across them")


def squad_eval_features(examples, tokenizer, max_seq_len: int = 384, doc_stride: int = 128,
                        max_query_length: int = 64) -> dict:
    """Windows as in training, plus example_id (list of str) and offset_mapping (list per window of
    (start_char, end_char) for context tokens, None for question, special and padding tokens).

    Ids must be unique: postprocessing pools an id's windows, so two questions sharing one would be answered
    from each other's contexts. Raises naming them (two files of one split with the same name and no id
    column give their rows the same "<file name>:<n>"; ids that restart in each file clash too)."""
    require_unique_ids(examples)
    enc = _encode(examples, load_tokenizer(tokenizer), max_seq_len, doc_stride, max_query_length)
    sample = enc["overflow_to_sample_mapping"]
    offsets = [[tuple(o) if s == 1 else None for o, s in zip(offs, enc.sequence_ids(i))]
               for i, offs in enumerate(enc["offset_mapping"])]
    return {**_arrays(enc), "example_id": [examples[j]["id"] for j in sample], "offset_mapping": offsets}


def postprocess_predictions(examples, features, start_logits, end_logits, n_best: int = 20,
                            max_answer_length: int = 30, version_2: bool = False,
                            null_threshold: float = 0.0) -> dict[str, str]:
    """{example id: answer text} from per-window logits (F, T) over `squad_eval_features` output.

    The best span over all windows of an example maximises start + end logit among the n_best
    starts and ends of each window's context pieces, end >= start, at most max_answer_length
    pieces. v2: answer "" when the null score (smallest [CLS] start + end over the windows, as
    original BERT) beats the best span by more than null_threshold.
    """
    spans = best_spans(examples, features, start_logits, end_logits, n_best, max_answer_length)
    return {ex_id: "" if version_2 and null - score > null_threshold else text
            for ex_id, (text, score, null, _) in spans.items()}


class Span(NamedTuple):
    text: str  # the best span's text ("" when no window has a span)
    score: float  # its start + end logit
    null: float  # the null score: the smallest [CLS] start + end over the windows
    start: int  # its first character in the context (-1 without a span)


def best_spans(examples, features, start_logits, end_logits, n_best: int = 20,
               max_answer_length: int = 30) -> dict[str, Span]:
    """{example id: its best Span}; see postprocess_predictions."""
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    windows = collections.defaultdict(list)
    for i, example_id in enumerate(features["example_id"]):
        windows[example_id].append(i)
    out = {}
    for ex in examples:
        best_score, best_text, best_start, null_score = -math.inf, "", -1, math.inf
        for i in windows[ex["id"]]:
            offsets, s_logit, e_logit = features["offset_mapping"][i], start_logits[i], end_logits[i]
            null_score = min(null_score, float(s_logit[0] + e_logit[0]))
            # the n_best among the context's pieces: a question's, a special or a padding position never takes a
            # place (padded to max_seq_len in evaluation, not in prediction: both pick the same span)
            context = np.asarray([k < len(offsets) and offsets[k] is not None for k in range(len(s_logit))])
            top_starts = np.argsort(np.where(context, s_logit, -np.inf))[::-1][:n_best]
            top_ends = np.argsort(np.where(context, e_logit, -np.inf))[::-1][:n_best]
            for s in top_starts:
                if s >= len(offsets) or offsets[s] is None:
                    continue
                for e in top_ends:
                    if e < s or e - s + 1 > max_answer_length or e >= len(offsets) or offsets[e] is None:
                        continue
                    if s_logit[s] + e_logit[e] > best_score:
                        best_score = float(s_logit[s] + e_logit[e])
                        best_text, best_start = ex["context"][offsets[s][0]:offsets[e][1]], offsets[s][0]
        out[ex["id"]] = Span(best_text, best_score, null_score, best_start)
    return out


def best_null_threshold(examples, spans: dict[str, Span], metric: str = "f1") -> float:
    """The v2 null_threshold that maximises `metric` ("exact" or "f1") on these (dev) examples.

    As the official evaluate-v2.0.py's find_best_thresh: an example answers "" when its
    null - best-span difference exceeds the threshold; lowering the threshold past each difference
    in turn flips one example to "", so one sorted sweep scores every distinct choice.
    """
    which = 0 if metric == "exact" else 1
    rows = []
    for ex in examples:
        text, score, null, _ = spans[ex["id"]]
        rows.append((null - score, example_scores(ex, text)[which], example_scores(ex, "")[which]))
    rows.sort(key=lambda r: -r[0])
    total = sum(r[1] for r in rows)  # threshold above every difference: no example answers ""
    finite = [r[0] for r in rows if math.isfinite(r[0])]
    best_total, best = total, (max(finite) + 1.0 if finite else 0.0)
    for i, (diff, as_span, as_null) in enumerate(rows):
        total += as_null - as_span
        if not math.isfinite(diff) or (i + 1 < len(rows) and rows[i + 1][0] == diff):
            continue  # ties flip together; an infinite difference is not a usable threshold
        if total > best_total:
            below = rows[i + 1][0] if i + 1 < len(rows) and math.isfinite(rows[i + 1][0]) else diff - 2.0
            best_total, best = total, (diff + below) / 2  # midway: both neighbours stay on their side
    return float(best)


# --- The official evaluation (evaluate-v2.0.py; evaluate-v1.1.py's where version_2 is false) ---

_PUNCTUATION = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lowercase, drop punctuation and the articles a/an/the, collapse whitespace."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def _f1(gold: str, pred: str, version_2: bool = True) -> float:
    gold_tokens, pred_tokens = normalize_answer(gold).split(), normalize_answer(pred).split()
    if version_2 and (not gold_tokens or not pred_tokens):
        return float(gold_tokens == pred_tokens)  # v2: an empty answer scores only against empty gold
    same = sum((collections.Counter(gold_tokens) & collections.Counter(pred_tokens)).values())
    if same == 0:  # v1.1: an empty answer too, against an empty gold as well
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def example_scores(ex, pred: str | None, version_2: bool = True) -> tuple[float, float]:
    """(exact, f1) of one prediction, each the max over the gold answers; None (missing) scores 0. v2 drops the
    golds that normalise to "" (a gold "The"), as evaluate-v2.0.py; v1.1 (`version_2` false) keeps every one: a
    prediction "the" matches it exactly (EM 1, F1 0, no token shared)."""
    if pred is None:
        return 0.0, 0.0
    golds = [a for a in ex["answers"]["text"] if normalize_answer(a) or not version_2] or [""]
    return (max(float(normalize_answer(g) == normalize_answer(pred)) for g in golds),
            max(_f1(g, pred, version_2) for g in golds))


def squad_metrics(predictions: dict[str, str], examples, version_2: bool = True) -> dict[str, float]:
    """Official exact match and F1 in percent, max over gold answers; a missing prediction scores 0. `version_2`
    false: SQuAD v1.1's rules (example_scores).

    Adds HasAns_* / NoAns_* breakdowns (as evaluate-v2.0.py) when some question is impossible.
    """
    scores = {"HasAns": [], "NoAns": []}
    for ex in examples:
        scores["NoAns" if ex.get("is_impossible") else "HasAns"].append(
            example_scores(ex, predictions.get(ex["id"]), version_2))

    def summary(pairs, prefix=""):
        n = len(pairs)
        return {f"{prefix}exact": 100.0 * sum(p[0] for p in pairs) / n,
                f"{prefix}f1": 100.0 * sum(p[1] for p in pairs) / n, f"{prefix}total": n}

    everything = scores["HasAns"] + scores["NoAns"]
    if not everything:
        raise ValueError("no examples to score")
    out = summary(everything)
    if scores["NoAns"]:
        for key, pairs in scores.items():
            if pairs:
                out.update(summary(pairs, f"{key}_"))
    return out
