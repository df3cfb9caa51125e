"""CoNLL-2003 NER: column files -> sentences -> word-piece features; entity-level F1 in ner_scoring.

File format: one token per line, columns "word POS chunk NER" separated by spaces (or by tabs: a file
whose every token line holds one is split at tabs only, so that a word holding a space stays one), sentences
separated by blank lines, documents started by a "-DOCSTART- -X- -X- O" line (skipped). Tags are
kept as the file has them: the original Reuters release uses IOB1 (I- opens an entity, B- only
between two adjacent entities of one type), re-distributions such as the HF hub's use IOB2; the
label set is the same, but the scheme must be named for scoring (ner_metrics' scheme, the job's
task.iob_scheme): strict IOB2 reads no entity from an I- after O, so IOB1 files need IOB1.

Alignment contract with the model: labels are -100 (ignored by the loss) on [CLS], [SEP], padding
and, unless label_all_subwords, on every "##" piece after a word's first; a word's tag sits on its
first piece, and its continuation tag on its later pieces that transformers' token-classification
pipeline reads as words of their own ("U.S." is u . s .: conll_features). `word_tags` reads back
each word's first piece, so gold and predicted tag sequences are the file's words.
"""

from __future__ import annotations

import codecs
import collections
import hashlib
import itertools
import os
import re
from collections.abc import Iterable

import numpy as np

from pipelines.tasks.common import TaskDataError, TaskSplit, load_tokenizer, require_file
from pipelines.tasks.file_head import one_byte_text  # one rule for what a one-byte encoding's text is
# scoring lives in ner_scoring; callers import it from here too
from pipelines.tasks.ner_scoring import as_iobes, iob1_openings, ner_metrics, scheme_checked, strict_scheme  # noqa: F401
from pipelines.tasks.text_records import TooLong, raw_lines

# a file's first lines (some 20 sentences), read before its sentences: its layout (_layout) and its encoding
# (_refuse_one_byte_head) are theirs; fewer lines where they pass _HEAD_BYTES
HEAD_LINES = 256
_HEAD_BYTES = 1 << 20
CONLL_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")  # HF order
IGNORE_INDEX = -100  # torch.nn.CrossEntropyLoss's default ignore_index
# between a line's columns, as conlleval splits: a no-break space is part of a token
_SEPARATOR = re.compile("[ \t\r\n\f\v]+")


def columns_of(line: str) -> list[str]:
    """A token line's columns: its ends stripped of any blank, its inside split on ASCII blanks only (str.split() cut
    "10\u00a0000" in two, and the sentence's column count was wrong)."""
    line = line.strip()
    return _SEPARATOR.split(line) if line else []


# a tab-separated file's column break: a tab, or several, with any blank beside them (a run of blanks, as columns_of)
_TAB = re.compile("[ \r\n\f\v]*\t[ \t\r\n\f\v]*")


def _tab_columns(line: str) -> list[str]:
    """A tab-separated file's token line's columns: a blank inside one is part of its word ("New York"; Vietnamese
    words of several syllables), kept as a no-break space, as a CoNLL-U form's (_conllu_word), so that columns_of
    reads the same columns back from the line that conll_sentences yields. A line without a tab, an odd one in such
    a file, is split as columns_of splits it."""
    line = line.strip()
    return [_SEPARATOR.sub("\u00a0", field) for field in _TAB.split(line)] if "\t" in line else columns_of(line)


DOCSTART = "-DOCSTART-"
# CoNLL-U's comments ("# sent_id = 1", "# text = ...", "#sent_id=1", "# newdoc id = d1", "# newpar")
_COMMENT = re.compile(r"#\s*(newdoc|newpar)(\s|$)|#\s*[\w.-]+(\s+[\w.-]+)?\s*=")
# an entity tag (IOB, IOBES, BILOU): what a '#' token line ends with when no label set says which tags there are
_TAG = re.compile(r"O|[BIESLU]-\S+")
# CoNLL-U (Universal Dependencies): ten tab-separated columns ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC; ID
# is a word's number, a multiword token's range ("1-2": its words follow) or an empty node's decimal ("5.1")
# (an empty node's may be below 1: "0.1"); CoNLL-U Plus appends columns (an NER tag) after the ten
_CONLLU_ID = re.compile(r"[1-9]\d*(-[1-9]\d*)?|(0|[1-9]\d*)\.[1-9]\d*")
CONLLU_COLUMNS = 10


def _conllu(line: str) -> list[str] | None:
    """A CoNLL-U (Plus) token line's columns; None for another layout."""
    fields = line.split("\t")
    return fields if len(fields) >= CONLLU_COLUMNS and _CONLLU_ID.fullmatch(fields[0]) else None


def _conllu_word(fields: list[str]) -> str | None:
    """A CoNLL-U line as "FORM TAG" (the word first, its tag last, as every layout here reads; a space inside a
    form, as UD allows, kept as a no-break space, inside the word): the tag is UPOS, or a CoNLL-U Plus file's last
    column (the one it adds: NER); None for a multiword token's range or an empty node: the words are the syntactic
    words, as UD's taggers score them."""
    if not fields[0].isdigit():
        return None
    return f"{fields[1].replace(' ', chr(0xA0))} {fields[3] if len(fields) == CONLLU_COLUMNS else fields[-1]}"


def conll_sentences(raw_lines: Iterable[bytes], labels: tuple | None = None, tagged: bool = True, source: str = "",
                    utf8_only: bool = False):
    """(document, lines, reject reason or None, where) per sentence of a CoNLL column file's raw lines. `source`: the
    file's name, in a refusal. `utf8_only` (the file is read as UTF-8, no encoding named): a file whose head is in a
    one-byte encoding is refused, naming it (_refuse_one_byte_head). A file whose first column numbers each sentence's
    tokens is refused (_refuse_token_numbers).

    The word is the first column and the NER tag the last; a CoNLL-U file (Universal Dependencies: recognised by its
    first token line's ten tab-separated columns under a word number) gives FORM and UPOS (CoNLL-U Plus, more
    columns: FORM and the last), its lines read as "FORM TAG", multiword ranges and empty nodes passed over (they are
    no word of the sentence; their own columns are checked), every '#' line before a sentence a comment. The
    sentence is the unit of rejection --
    one bad line would shift every label after it: "wrong_column_count" (a line whose column count
    differs from the file's, the most common one among its first HEAD_LINES lines (_layout: its first line may be the
    odd one out), or a single column where tags are wanted: `tagged`),
    "unknown_tag" (NER tag not in `labels`; None accepts any tag), "invalid_utf8", "line_too_long" (a TooLong of
    text_records.raw_lines, whose lines end at \n, \r\n or a lone \r). document counts
    -DOCSTART- lines from 0. A '#' line before a sentence's first token is a comment, skipped, when it
    is CoNLL-U's ("# sent_id = 1"), of another column count than the file's tokens, or ends in no tag it could
    carry (one of `labels`; without labels 'O' or an IOB/IOBES/BILOU tag) and is no lone word of an untagged file --
    before the file's first token line fixes the count ("# exported from tool v2"), or, of that count, where the
    file's tags are entity tags (`labels`, or its head's: MultiCoNER's "# id <uuid>\tdomain=en"); otherwise, and
    inside a sentence, it is a token (a hashtag, the '#' sign: "# O", "#Bonn B-LOC").
    """
    raw_lines = iter(raw_lines)
    head = _head(raw_lines)
    if utf8_only:
        _refuse_one_byte_head(source, head)
    count, tabs, entity_tags = _layout(head)
    _refuse_token_numbers(source, head, count, tabs)
    entity_tags = entity_tags or labels is not None
    lines, bad, start, document, n_columns, n, conllu = [], None, 0, -1, None, -1, None
    for n, raw in enumerate(itertools.chain(head, raw_lines)):
        if isinstance(raw, TooLong):  # past 64 MiB (text_records.raw_lines: its head only); the sentence is lost
            bad = bad or "line_too_long"
            lines.append(raw.decode("utf-8", "replace")[:200])
            continue
        line, broken = _decoded(raw)
        # a '#' opening a sentence: a comment (in CoNLL-U always: a token line starts with its number)
        if (not lines and not bad and line.startswith("#")
                and (conllu or _comment(line, n_columns, labels, tagged, tabs, entity_tags))):
            start = n + 1
            continue
        bad = bad or ("invalid_utf8" if broken else None)
        if not line or line.startswith(DOCSTART):
            if bad or lines:
                yield max(document, 0), lines, bad, f"lines {start + 1}-{n}"
            lines, bad, start = [], None, n + 1
            document += line.startswith(DOCSTART)
            continue
        ud = _conllu(line) if conllu is not False else None
        conllu = ud is not None if conllu is None else conllu  # the file's first token line says
        if conllu:
            if ud is None:
                bad = bad or "wrong_column_count"
            elif (line := _conllu_word(ud)) is None:
                continue
        fields = _tab_columns(line) if tabs else columns_of(line)
        if tabs and len(fields) != len(columns_of(line)):  # a blank inside a word: the line as its columns read
            line = "\t".join(fields)
        n_columns = n_columns or count or len(fields)  # count: None for CoNLL-U, whose lines are "FORM TAG"
        if len(fields) != n_columns or n_columns < (2 if tagged else 1):
            bad = bad or "wrong_column_count"
        elif labels is not None and fields[-1] not in labels:
            bad = bad or "unknown_tag"
        lines.append(line)
    if bad or lines:
        yield max(document, 0), lines, bad, f"lines {start + 1}-{n + 1}"


NAMING_SENTENCES = 64  # a document is named by the content of its first sentences (at most this many: held)


def named_documents(sentences):
    """conll_sentences' stream with each document named by its content (sha256 of its first NAMING_SENTENCES
    sentences' lines, in bounded memory) instead of its number: the carve keeps a document whole by its name, and a
    document added elsewhere in the file, or the file renamed, moves no other between train, select and dev."""
    held, named, current = [], None, None
    for document, lines, bad, where in sentences:
        if document != current:  # a new document: the last one's held sentences are named by what was held
            yield from _named(held, named)
            held, named, current = [], None, document
        if named is not None:
            yield named, lines, bad, where
            continue
        held.append((lines, bad, where))
        if len(held) == NAMING_SENTENCES:
            named = _content_name(held)
            yield from _named(held, named)
            held = []
    yield from _named(held, named)


def _content_name(held: list) -> str:
    return hashlib.sha256("\n\n".join("\n".join(lines) for lines, _, _ in held).encode()).hexdigest()


def _named(held: list, name: str | None):
    """The held sentences under `name`, or under their own content's name (a document shorter than the naming)."""
    name = name or (_content_name(held) if held else None)
    for lines, bad, where in held:
        yield name, lines, bad, where


def _comment(line: str, n_columns: int | None, labels: tuple | None, tagged: bool, tabs: bool,
             entity_tags: bool) -> bool:
    """Whether a '#' line before a sentence's first token is a comment (conll_sentences' rule): a free-text comment
    taken for the first token line would fix the column count and reject every sentence of the file; one of the
    file's count taken for a token (MultiCoNER's per sentence) rejected the sentence, or, with any tag accepted,
    made its last field a class and the task no longer one of entities."""
    fields = _tab_columns(line) if tabs else columns_of(line)
    if _COMMENT.match(line):
        return True
    tag = fields[-1] in labels if labels is not None else _TAG.fullmatch(fields[-1])
    if n_columns:  # where the tags are word tags, any last field may be one (Twitter part of speech: "#blessed #")
        return len(fields) != n_columns or (entity_tags and not tag)
    if len(fields) == 1 and not tagged:  # a words-only file's first word
        return False
    return not tag


def _decoded(raw: bytes) -> tuple[str, bool]:
    """A raw line's text, stripped, and whether it was not UTF-8 (its bad bytes then read as U+FFFD)."""
    # a UTF-8 byte-order mark is no text at any line's start: the file's, or a joined file's (`cat a.conll b.conll`,
    # b saved with one: read as text, its "\ufeff-DOCSTART-" would be a sentence to train on, not b's start)
    raw = raw.removeprefix(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8").strip(), False  # any blank at the ends: a no-break space alone is a blank line
    except UnicodeDecodeError:  # (Word and HTML exports), after a tag it is no part of the tag
        return raw.decode("utf-8", "replace").strip(), True


def _head(raw_lines) -> list:
    """The first HEAD_LINES raw lines (fewer where they pass _HEAD_BYTES), taken from the iterator `raw_lines`."""
    head, size = [], 0
    for raw in raw_lines:
        head.append(raw)
        size += len(raw)
        if len(head) == HEAD_LINES or size > _HEAD_BYTES:
            break
    return head


def _layout(head: list) -> tuple[int | None, bool, bool]:
    """(column count, tab-separated, entity tags) of a column file, from the token lines of its head ('#' lines, which
    may be comments, left out). Tab-separated where every one holds a tab (WNUT's files, most tools' exports; a
    space-separated CoNLL-2003 file holds none, and is split on blanks as before): its columns are then split at tabs
    only, so "New York\\tB-LOC" is one word and its tag, not three columns. The count is the most common one (the
    first line's where counts tie): taken from the first line alone, an odd first line rejected every other sentence
    of the file as wrong_column_count and kept its own. None for CoNLL-U, whose lines are read as "FORM TAG", and
    for a head without a token line (the first token line's count then). Entity tags where every one ends in one
    after its word ('O', an IOB/IOBES/BILOU tag)."""
    lines = [line for line, _ in map(_decoded, (raw for raw in head if not isinstance(raw, TooLong)))
             if line and not line.startswith((DOCSTART, "#"))]
    if not lines or _conllu(lines[0]) is not None:
        return None, False, False
    tabs = all("\t" in line for line in lines)
    fields = [_tab_columns(line) if tabs else columns_of(line) for line in lines]
    counts = collections.Counter(map(len, fields))
    return counts.most_common(1)[0][0], tabs, all(len(f) > 1 and _TAG.fullmatch(f[-1]) for f in fields)


def _refuse_token_numbers(source: str, head: list, count: int | None, tabs: bool) -> None:
    """TaskDataError where the first column of the head's token lines numbers each sentence's tokens 1..n (three
    lines or more, a sentence of two or more): GermEval 2014's "index word tag nested-tag". Read as the word
    first and the tag last, the numbers were the words and the nested entities, nearly all O, the tags. Refused,
    not read from the second column: which column is the tag is the user's choice (GermEval's is its third)."""
    if not count or count < 2:  # CoNLL-U (None) numbers its words, and is read by its own layout
        return
    i = longest = numbered = 0
    for line, _ in map(_decoded, (raw for raw in head if not isinstance(raw, TooLong))):
        if not line or line.startswith(DOCSTART):
            i = 0
        elif not line.startswith("#"):  # a comment (GermEval's source line), or a '#' token: no numbering then
            i += 1
            if (_tab_columns(line) if tabs else columns_of(line))[0] != str(i):
                return
            longest, numbered = max(longest, i), numbered + 1
    if numbered > 2 and longest > 1:
        raise TaskDataError(f"{source or 'a CoNLL file'}: its first column numbers each sentence's tokens 1, 2, 3... "
                            f"(all of its first {numbered} token lines), as GermEval 2014's layout (index, word, "
                            "tag, nested tag) does; read as CoNLL columns those token numbers would be the words and "
                            "the last column the tags. Write each token line with its word as the first column and "
                            "its tag as the last (GermEval's outer entities: cut -f2,3 FILE)")


def _refuse_one_byte_head(source: str, head: list) -> None:
    """TaskDataError, naming `source`, the line and the byte, where the file's `head` (raw lines) reads as a one-byte
    encoding (file_head.one_byte_text, the rule own CSV and TSV files are checked by on their first MiB): CoNLL-2002's
    Spanish and Dutch files are latin-1, and read as UTF-8 every sentence with an accented word would be rejected
    invalid_utf8, the file silently reduced to its unaccented sentences. A UTF-8 file with a corrupt line is read:
    that line's sentence alone is rejected."""
    # its head only, as one text (a TooLong, cut anywhere, is no evidence either way)
    text = "\n".join(raw.decode("utf-8", "surrogateescape") for raw in head if not isinstance(raw, TooLong))
    byte = one_byte_text(text)
    if byte is not None:
        start = text.rfind("\n", 0, byte.start()) + 1
        line = text[start:text.find("\n", byte.start()) % (len(text) + 1)]
        shown = line.encode("utf-8", "surrogateescape").decode("latin-1").strip()[:80]
        n = text.count("\n", 0, start) + 1  # (a TooLong line before it would shift the count: a 64 MiB line, never)
        raise TaskDataError(f"{source}: line {n}: byte 0x{ord(byte.group()) - 0xDC00:02X} is not UTF-8, and the "
                            f"file's first lines hold more such bytes, on several lines, than multi-byte UTF-8 "
                            f"characters: its text is in a one-byte encoding (read as latin-1 the line is {shown!r}), "
                            "and read as UTF-8 every sentence with such a byte would be rejected (invalid_utf8). Name "
                            "its encoding: read it as your own data (task.name=files, task.format=conll) with "
                            "task.columns.encoding=latin-1 (cp1252 for a Windows file; utf-8 for a UTF-8 file with "
                            "corrupt lines, whose sentences are then rejected, counted); task=conll reads UTF-8 only. "
                            "Or convert it to UTF-8: iconv -f latin1 -t utf-8")


def load_conll(path: str | os.PathLike, labels: tuple = CONLL_LABELS) -> TaskSplit:
    """Sentences {id, document, tokens, pos_tags, chunk_tags, ner_tags} (tags as strings).

    POS and chunk tags are filled for the 4-column English layout (None otherwise); the columns
    and reject reasons are conll_sentences', the line ends text_records.raw_lines' (a lone \\r in a file of them).
    The file is UTF-8: one in a one-byte encoding (latin-1) is refused, naming it (_refuse_one_byte_head).
    """
    path = require_file(path, "CoNLL file")
    out = TaskSplit([], path)
    with open(path, "rb") as f:
        for document, lines, bad, where in conll_sentences(raw_lines(f), labels, source=str(path), utf8_only=True):
            if bad:
                out.reject(bad, where, " | ".join(lines[:5]))
                continue
            fields = [columns_of(line) for line in lines]
            four = len(fields[0]) == 4
            out.rows.append({"id": len(out.rows), "document": document, "tokens": [f[0] for f in fields],
                             "pos_tags": [f[1] for f in fields] if four else None,
                             "chunk_tags": [f[2] for f in fields] if four else None,
                             "ner_tags": [f[-1] for f in fields]})
    if not out.rows:
        raise TaskDataError(f"{path}: no usable sentences ({dict(out.rejects)})")
    return out.report()


# a word's later pieces continue its entity: B-X's as I-X; IOBES's S-X (an entity of one word) as E-X, BILOU's U-X as
# L-X (or I-X), so that the pieces group into one entity (jobs/inference/predictor.grouping_tags reads S-/U- as B-:
# "U.S." tagged S-LOC on each of its pieces u . s . was four entities)
CONTINUATIONS = {"B": ("I", "M"), "S": ("E", "I"), "U": ("L", "I")}  # BMES: M- for I-


def _continuation(tag: str, index: dict) -> int:
    """The label of a later piece of a word tagged `tag`: its entity's continuation where the label set has one,
    else `tag` itself (a set read from training data often has B-X but no I-X: HF run_ner's b_to_i_label)."""
    prefix, _, kind = tag.partition("-")
    for p in CONTINUATIONS.get(prefix, ()) if kind else ():
        if f"{p}-{kind}" in index:
            return index[f"{p}-{kind}"]
    return index[tag]


def conll_features(sentences, tokenizer, max_seq_len: int, label_all_subwords: bool = False,
                   labels: tuple = CONLL_LABELS) -> dict[str, np.ndarray]:
    """input_ids, token_type_ids, attention_mask, labels (N, max_seq_len) int64, and truncated (N,)
    bool: the sentence has words without a labeled piece (cut by max_seq_len, or words the
    tokenizer reduces to nothing), so their gold tags are absent from evaluation.

    label_all_subwords labels continuation pieces too, B-X becoming I-X (a word is one entity; IOBES's S-X E-X,
    BILOU's U-X L-X), or staying B-X where I-X is no label. Without it, a word's first piece carries its tag and so
    does every later piece that starts a word of its own for transformers' token-classification pipeline (which
    serves the model, FIRST aggregation): a piece not prefixed "##" (BERT's pre-tokenizer splits "U.S." into u . s .,
    "AT&T" into at & t), or an [UNK]. Those carry the continuation tag (B-X's I-X), so the served pipeline, which tags
    each such word by its own first piece, groups "U.S." into one entity as the word was labeled, instead of reading
    three pieces training never supervised. Scoring still reads each word's first piece (word_tags).
    """
    tok = load_tokenizer(tokenizer)
    index = {tag: i for i, tag in enumerate(labels)}
    continuation = {tag: _continuation(tag, index) for tag in index}
    enc = tok([list(s["tokens"]) for s in sentences], is_split_into_words=True, truncation=True,
              max_length=max_seq_len, padding="max_length", return_token_type_ids=True, return_attention_mask=True)
    prefix, unk = tok.backend_tokenizer.model.continuing_subword_prefix, tok.unk_token  # WordPiece's "##"
    out = np.full((len(sentences), max_seq_len), IGNORE_INDEX, dtype=np.int64)
    truncated = np.zeros(len(sentences), dtype=bool)
    for i, sentence in enumerate(sentences):
        tags, previous, labeled = sentence["ner_tags"], None, set()
        pieces = enc.tokens(i)
        for t, word in enumerate(enc.word_ids(i)):
            if word is not None and word != previous:
                out[i, t] = index[tags[word]]
                labeled.add(word)
            elif word is not None and (label_all_subwords or not pieces[t].startswith(prefix) or pieces[t] == unk):
                out[i, t] = continuation[tags[word]]
            previous = word
        truncated[i] = len(labeled) < len(tags)
    features = {k: np.asarray(enc[k], dtype=np.int64) for k in ("input_ids", "token_type_ids", "attention_mask")}
    return {**features, "labels": out, "truncated": truncated}


def word_tags(sentences, tokenizer, max_seq_len: int, predictions, labels, label_list: tuple,
              unlabeled: str = "O") -> tuple[list[list[str]], list[list[str]]]:
    """(gold, predicted) tags of every word of every sentence, whole: a word the features hold no piece of (cut by
    `max_seq_len`, or a word the tokenizer reduces to nothing) is predicted `unlabeled` ("O": no entity; a tag set
    without "O" passes ""), so its gold entity is missed, not dropped from the score (a long sentence's cut
    entities made F1 look better than the model tags them).

    predictions: logits (N, T, C) or ids (N, T) of the features of `sentences` (conll_features), in order; labels:
    those features' labels (N, T), read to check the two are in step."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if predictions.ndim == 3:
        predictions = predictions.argmax(-1)
    if len(predictions) != len(sentences):
        raise RuntimeError(f"{len(predictions)} predicted rows for {len(sentences)} sentences: out of step")
    enc = load_tokenizer(tokenizer)([list(s["tokens"]) for s in sentences], is_split_into_words=True,
                                    truncation=True, max_length=max_seq_len)
    gold, pred = [], []
    for i, sentence in enumerate(sentences):
        tags, previous = [unlabeled] * len(sentence["ner_tags"]), None
        for t, word in enumerate(enc.word_ids(i)):
            if word is not None and word != previous:
                if t >= labels.shape[1] or labels[i, t] == IGNORE_INDEX:
                    raise RuntimeError(f"sentence {i}: word {word}'s first piece at {t} has no label in the features: "
                                       "the features and the sentences are out of step")
                tags[word] = label_list[predictions[i, t]]
            previous = word
        gold.append(list(sentence["ner_tags"]))
        pred.append(tags)
    return gold, pred
