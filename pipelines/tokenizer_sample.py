"""The documents a WordPiece tokenizer is trained on (prepare.py, data.tokenizer.sample_documents): the train
documents with the smallest keys, less duplicates, up to data.tokenizer.sample_million_chars of text (the last one
cut to it), the same on every run however the corpus is cut into work units.
Two light passes over the units (reading and cleaning, no tokenizing): each unit's k smallest keys and its dedup
hashes first, merged on the driver as they arrive; then the texts of the chosen documents alone. The driver holds
k keys, 24 bytes a document and k texts: a unit of a Wikipedia dump holds fewer than k documents, so a pass that
returned each unit's k texts brought the whole corpus to the driver.
"""

from __future__ import annotations

import collections
import heapq
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from pipelines.config import DataConfig
from pipelines.dedup import content_hashes, find_duplicates
from pipelines.examples import document_key
from pipelines.layout import ShardLayout
from pipelines.rejects import RejectLog, nothing_kept_said
from pipelines.source_files import SourceError
from pipelines.spill import book_names, split_key, unit_documents


def sample_keys(batch: pa.Table, cfg: DataConfig, layout: ShardLayout, k: int) -> pa.Table:
    """Per work unit, first sample pass: (key, uid, characters) of its k smallest-key train documents and every good
    document's dedup pair, no text, and its rejects (the error where there is no document says why). Holds k keys
    and 24 bytes a document, however big the unit."""
    rows = []
    for unit in batch.to_pylist():
        uids, hashes, rejects = [], [], RejectLog()

        books = book_names(unit, cfg, layout)

        def train_documents():
            for doc_id, uid, text in unit_documents(unit, cfg, rejects):
                uids.append(uid)
                hashes.append(content_hashes([text])[0])
                if not layout.is_eval(split_key(cfg.seed, doc_id, books)):
                    yield document_key(cfg.seed, doc_id), uid, len(text)

        smallest = heapq.nsmallest(k, train_documents())
        hashes = np.array(hashes, dtype=np.uint64).reshape(-1, 2)
        rows.append({"key": [s[0] for s in smallest], "sample_uid": [s[1] for s in smallest],
                     "sample_chars": [s[2] for s in smallest],
                     "hash_hi": hashes[:, 0].tolist(), "hash_lo": hashes[:, 1].tolist(), "uid": uids,
                     "rejects": rejects.to_json()})
    return pa.Table.from_pylist(rows, schema=pa.schema([
        ("key", pa.list_(pa.uint64())), ("sample_uid", pa.list_(pa.int64())), ("sample_chars", pa.list_(pa.int64())),
        ("hash_hi", pa.list_(pa.uint64())), ("hash_lo", pa.list_(pa.uint64())), ("uid", pa.list_(pa.int64())),
        ("rejects", pa.string())]))


def sample_texts(batch: pa.Table, cfg: DataConfig, uids: dict[int, int]) -> pa.Table:
    """Per work unit, second sample pass: (uid, text) of its documents among `uids`, the chosen sample, each cut to
    its characters there (the last document the budget reaches: part of it)."""
    rows = []
    for unit in batch.to_pylist():
        chosen = [(uid, text[:uids[uid]]) for _, uid, text in unit_documents(unit, cfg, RejectLog()) if uid in uids]
        rows.append({"sample_uid": [c[0] for c in chosen], "text": [c[1] for c in chosen]})
    return pa.Table.from_pylist(rows, schema=pa.schema([("sample_uid", pa.list_(pa.int64())),
                                                        ("text", pa.list_(pa.string()))]))


def over_units(units: list[dict], fn, **kwargs) -> ray.data.Dataset:
    """fn applied to each work unit in its own task (a light pass: reading and cleaning, no tokenizing)."""
    return ray.data.from_items(units, override_num_blocks=len(units)).map_batches(
        fn, batch_size=1, batch_format="pyarrow", fn_kwargs=kwargs)


def flat(table: pa.Table, column: str) -> np.ndarray:
    return pc.list_flatten(table.column(column)).to_numpy()


def dedup_mask(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(uids of every good document, True where it duplicates a smaller uid's text)."""
    uids = flat(table, "uid")
    # uid order is doc_order_key order, so the smallest doc_id of each text stays.
    return uids, find_duplicates(np.stack([flat(table, "hash_hi"), flat(table, "hash_lo")], axis=1), uids)


def tokenizer_sample(units: list[dict], cfg: DataConfig, layout: ShardLayout) -> list[str]:
    """Texts of the `sample_documents` train documents with the smallest keys, less those that
    are duplicates: a uniform sample, the same on every run. Two light passes (no tokenizing): keys
    first, then the texts of the chosen documents alone, so the driver holds k texts, not a unit's k
    each (every unit of a Wikipedia dump has fewer than k documents: that was the whole corpus)."""
    k = cfg.tokenizer.sample_documents
    keys, sample_uids, chars = np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    hash_tables, rejects = [], RejectLog()
    for batch in over_units(units, sample_keys, cfg=cfg, layout=layout, k=k).iter_batches(
            batch_format="pyarrow", batch_size=None):
        # The global k smallest keys are among the units' k smallest however the units are cut; the
        # (key, uid) order is the one samples were always taken in.
        keys = np.concatenate([keys, flat(batch, "key").astype(np.uint64)])
        sample_uids = np.concatenate([sample_uids, flat(batch, "sample_uid").astype(np.int64)])
        chars = np.concatenate([chars, flat(batch, "sample_chars").astype(np.int64)])
        order = np.lexsort((sample_uids, keys))[:k]
        keys, sample_uids, chars = keys[order], sample_uids[order], chars[order]
        hash_tables.append(batch.select(["hash_hi", "hash_lo", "uid"]))
        for log in batch.column("rejects").to_pylist():
            rejects.update(RejectLog.from_json(log))
    uids, dup = dedup_mask(pa.concat_tables(hash_tables))
    if not len(uids):
        raise SourceError(nothing_kept_said(rejects, "train a tokenizer on"))
    # Duplicates leave only after the k are taken (taking k non-duplicates per unit would not keep
    # the sample independent of the cut: a unit's duplicates would decide how deep it reaches).
    kept = ~np.isin(sample_uids, uids[dup])
    sample_uids, chars = sample_uids[kept], chars[kept]
    del hash_tables, uids, dup
    if not len(sample_uids):
        raise ValueError("no training documents to train a tokenizer on: every document is held out for eval (or a "
                         "copy of one that is)")
    # smallest keys first until the text budget: each document that starts under it, the last one cut to it
    budget = int(cfg.tokenizer.sample_million_chars * 1_000_000)
    before = np.cumsum(chars) - chars
    sample_uids, limits = sample_uids[before < budget], np.minimum(chars, budget - before)[before < budget]
    texts = {}
    wanted = dict(zip(sample_uids.tolist(), limits.tolist()))
    for batch in over_units(units, sample_texts, cfg=cfg, uids=wanted).iter_batches(
            batch_format="pyarrow", batch_size=None):
        texts.update(zip(flat(batch, "sample_uid").tolist(), pc.list_flatten(batch.column("text")).to_pylist()))
    if len(texts) < len(sample_uids):
        raise RuntimeError(f"{len(sample_uids) - len(texts)} of the {len(sample_uids)} documents sampled to train "
                           f"the tokenizer were not found when read again: did an input file change during prepare?")
    return [texts[uid] for uid in sample_uids.tolist()]


def stripped_marks(texts: list[str], max_chars: int = 4_000_000) -> tuple[collections.Counter, int]:
    """(script -> combining marks, letters) in the first `max_chars` of `texts`: the marks (Unicode Mn, after NFD)
    that follow a letter of a script beyond Latin, Greek and Cyrillic, which an accent-stripping tokenizer (uncased
    BERT's default) deletes though they are letters there: Devanagari's virama ("नमस्ते" -> "नमसत"), Thai's vowels,
    Japanese voicing marks ("ガス" -> "カス"). Latin, Greek and Cyrillic accents are what uncased BERT means to
    strip, but for the marks of Vietnamese alone (its hook above and horn: "mả" -> "ma", "ư" -> "u"), counted as
    "VIETNAMESE": its six tones of one syllable became one token."""
    marks, letters, seen = collections.Counter(), 0, 0
    for text in texts:
        if seen >= max_chars:
            break
        text = text[:max_chars - seen]
        seen += len(text)
        if text.isascii():
            letters += sum(c.isalpha() for c in text)
            continue
        script = latin = ""
        for c in unicodedata.normalize("NFD", text):
            if unicodedata.category(c) == "Mn":
                if script:
                    marks[script] += 1
                elif latin and c in _VIETNAMESE_MARKS:
                    marks["VIETNAMESE"] += 1
            elif c.isalpha():
                letters += 1
                script = "" if c.isascii() else unicodedata.name(c, "").partition(" ")[0]
                latin = c.isascii() or script == "LATIN"
                script = "" if script in _ACCENTED_SCRIPTS else script
    return marks, letters


_ACCENTED_SCRIPTS = frozenset(["LATIN", "GREEK", "CYRILLIC", ""])
_VIETNAMESE_MARKS = frozenset("\u0309\u031b")  # hook above (ả), horn (ư, ơ): no other language's Latin letters


def unknown_pieces(tokenizer, texts: list[str], max_chars: int = 2_000_000) -> tuple[int, int, int, int]:
    """(pieces, [UNK] pieces, those of words longer than MAX_INPUT_CHARS_PER_WORD, characters read) of the first
    `max_chars` of `texts` as `tokenizer` reads them. WordPiece makes one [UNK] of a word (a run without spaces or
    punctuation) past that length, and of a word holding a character its vocabulary lacks: Thai, Lao, Khmer and
    Burmese write no space between words, and most of their text is such runs."""
    from bert_core.tokenizer import MAX_INPUT_CHARS_PER_WORD, UNK

    unk, taken, seen = tokenizer.token_to_id(UNK), [], 0
    for text in texts:
        if seen >= max_chars:
            break
        taken.append(text[:max_chars - seen])
        seen += len(taken[-1])
    pieces = unknown = long = 0
    for enc in tokenizer.encode_batch(taken, add_special_tokens=False):
        pieces += len(enc.ids)
        spans = [end - start for piece, (start, end) in zip(enc.ids, enc.offsets) if piece == unk]
        unknown += len(spans)
        long += sum(n > MAX_INPUT_CHARS_PER_WORD for n in spans)
    return pieces, unknown, long, seen


def stripped_marks_warning(texts: list[str], t) -> str | None:
    """A line where the tokenizer to train (`t`, data.tokenizer) strips accents (strip_accents true, or unset and
    lowercase: uncased BERT) and the sample's letters hold marks that this deletes as if accents (stripped_marks): a
    Hindi, Thai or Japanese corpus under the defaults trains on mangled words ("नमसत")."""
    if not ((t.lowercase is not False) if t.strip_accents is None else t.strip_accents):
        return None
    marks, letters = stripped_marks(texts)
    if sum(marks.values()) < max(100, letters // 1000):
        return None
    setting = "strip_accents: true" if t.strip_accents else "lowercase with strip_accents unset (uncased BERT)"
    scripts = ", ".join(f"{script.title()} {n:,}" for script, n in marks.most_common(4))
    return (f"warning: data.tokenizer strips accents ({setting}), which deletes {sum(marks.values()):,} combining "
            f"marks that are letters of their script in the sample's first {letters:,} letters ({scripts}): 'नमस्ते' "
            f"becomes 'नमसत', 'ガス' 'カス', 'mả' 'ma'; set data.tokenizer.strip_accents: false to keep them")


def unknown_pieces_warning(tokenizer, texts: list[str], share: float = 0.01) -> str | None:
    """A line where more than `share` of the trained tokenizer's pieces of the sample are [UNK] (unknown_pieces),
    saying why: a Thai corpus trained on "[UNK]" for most of its text, and prepare said nothing."""
    from bert_core.tokenizer import MAX_INPUT_CHARS_PER_WORD

    pieces, unknown, long, chars = unknown_pieces(tokenizer, texts)
    if unknown <= share * pieces:
        return None
    why = (f"{long:,} of them words longer than {MAX_INPUT_CHARS_PER_WORD} characters, which WordPiece never splits: "
           f"a script written without spaces between words (Thai, Lao, Khmer, Burmese) needs a word segmenter "
           f"before prepare (PyThaiNLP's word_tokenize for Thai)" if long * 2 > unknown else
           f"most of them words holding a character the vocabulary lacks: raise data.tokenizer.limit_alphabet")
    return (f"warning: {unknown / pieces:.1%} of the pieces the trained tokenizer makes of the sample's first "
            f"{chars:,} characters are [UNK] ({unknown:,} of {pieces:,}), text the model never sees; {why}")
