"""Property tests (hypothesis) on random unicode, binary and huge inputs: the readers, the cleaner
and splitter, the example builder, static masking and the collator never crash and never emit
an invalid row, example or batch. Derandomized with no example database, so CI is deterministic."""

from __future__ import annotations

import bz2
import codecs
import gzip
import json
import os
import random
import tempfile

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from bert_core.masking import IGNORE_INDEX, MaskingConfig, PretrainingCollator
from bert_core.tokenizer import SpecialIds
from pipelines.clean import normalize_text, split_sentences
from pipelines.config import DataConfig
from pipelines.examples import Document, create_examples, mask_static, masking_config, special_tokens_mask
from pipelines.sources import (_BINARY_MAGIC, REJECT_REASONS, SAMPLE_CHARS, SNIFF_BYTES, TEXT_DOCUMENT_BYTES,
                               Span, iter_documents)

PROPS = settings(derandomize=True, database=None, deadline=None, print_blob=True)
SPECIAL = SpecialIds(pad=0, unk=100, cls=101, sep=102, mask=103)  # not ids 0..4: "id >= 5" is no test
VOCAB = 300
STRUCTURAL = [SPECIAL.pad, SPECIAL.cls, SPECIAL.sep, SPECIAL.mask]
TEXT_IDS = np.setdiff1d(np.arange(VOCAB), SPECIAL.all)  # ids a document can hold

unicode_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)  # any encodable str
nasty_text = st.text(st.sampled_from("ab Z.!?\n\r\t\x00\x0b\x85\u00a0\u200b\ufeff\u0301\u2028\u2029 \"')"),
                     max_size=200) | unicode_text


def non_ws(text: str) -> str:
    return "".join(text.split())


def read_file(data: bytes, suffix: str, cfg: DataConfig, spans=None) -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "f" + suffix)
        with open(path, "wb") as f:
            f.write(data)
        rows = [row for span in spans or [Span()] for row in iter_documents(path, "f", cfg, span)]
    return [{**row, "source": suffix} for row in rows]  # the temporary folder differs per call


def assert_valid_rows(rows: list[dict], cfg: DataConfig) -> None:
    for row in rows:
        assert row["doc_id"] == "f" or row["doc_id"].startswith("f#")
        if row["reject_reason"]:
            assert row["reject_reason"] in REJECT_REASONS and row["text"] == ""
            assert len(row["sample"]) <= SAMPLE_CHARS
        else:  # a good document is normalised text of at least min_document_chars, and no sample
            assert row["text"] == normalize_text(row["text"]) and len(row["text"]) >= cfg.min_document_chars
            assert row["sample"] == ""


def file_reject(data: bytes) -> str | None:
    """The whole-file verdict the module docstring promises for an uncompressed file."""
    head = data[:SNIFF_BYTES]  # NULs among control bytes (all but \t \n \v \f \r ESC) that make over 1% of it
    controls = sum(b < 0x20 and b not in b"\t\n\v\f\r\x1b" or b == 0x7F for b in head)
    binary = (b"\x00" in head and 100 * controls > len(head)) or data.startswith(_BINARY_MAGIC)
    wide = data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE))  # UTF-16 or UTF-32
    return "empty_file" if not data else "utf16_file" if wide else "binary_file" if binary else None


def split_lines(data: bytes) -> list[bytes]:
    """Lines as readline() returns them: split at b"\\n" only, each keeping it."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def jsonl_verdict(line: bytes, cfg: DataConfig) -> str | None:
    """The reason a JSONL line is rejected, or None for a good document (docstring rules)."""
    if len(line) > cfg.max_line_bytes:
        return "line_too_long"
    line = line.removeprefix(codecs.BOM_UTF8)  # a byte-order mark opening a line is no JSON
    try:
        record = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return "invalid_utf8"
    except (ValueError, RecursionError):  # ValueError: also a number past int's 4300 digits
        return "malformed_json"
    if isinstance(record, dict) and "text" in record and record["text"] is None:  # null: no text
        return "empty_document"
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        return "missing_text_column" if isinstance(record, dict) else "malformed_json"
    text = normalize_text(record["text"])
    return "empty_document" if not text else "too_short" if len(text) < cfg.min_document_chars else None


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | unicode_text,
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(unicode_text, kids, max_size=3),
                           max_leaves=8)
jsonl_line = st.one_of(
    st.builds(lambda t: json.dumps({"text": t}, ensure_ascii=False).encode(), nasty_text),
    st.builds(lambda v: json.dumps(v).encode(), json_values),  # a list, a number, a dict without "text" ...
    st.builds(lambda t: json.dumps({"text": t}).encode()[:-2], unicode_text),  # cut off: malformed
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),  # junk, invalid UTF-8, NUL bytes
    st.sampled_from([b"", b"  \t", b"\r", b"\xff\xfe", b"[" * 3000 + b"]" * 3000, b'{"text": "\xc3\x28"}',
                     b'{"text": "a long enough text", "n": ' + b"1" * 5000 + b"}"]),
    st.integers(0, 3000).map(lambda n: b'{"text": "' + b"x" * n + b'"}'),  # around the line limit
)
max_line_bytes = st.sampled_from([20, 200, 1000, 4 << 20])
jsonl_files = st.tuples(st.lists(jsonl_line, max_size=12), st.sampled_from([b"\n", b"\r\n"]), st.booleans()).map(
    lambda t: t[1].join(t[0]) + (t[1] if t[2] else b""))


@settings(PROPS, max_examples=80)
@given(data=jsonl_files | st.binary(max_size=600), limit=max_line_bytes, min_chars=st.integers(1, 40),
       cuts=st.lists(st.integers(1, 4000), max_size=4))
def test_jsonl_every_nonblank_line_is_one_valid_row_with_the_promised_verdict(data, limit, min_chars, cuts):
    cfg = DataConfig(sources=["x"], max_line_bytes=limit, min_document_chars=min_chars)
    rows = read_file(data, ".jsonl", cfg)
    bounds = sorted({0, *(c for c in cuts if c < len(data))})  # spans cut anywhere read the same rows
    spans = [Span(a, b, data[:a].count(b"\n")) for a, b in zip(bounds, bounds[1:] + [-1])]
    assert read_file(data, ".jsonl", cfg, spans) == rows
    assert_valid_rows(rows, cfg)
    if file_reject(data):
        assert [(r["doc_id"], r["reject_reason"]) for r in rows] == [("f", file_reject(data))]
        return
    lines = split_lines(data)  # the accounting: no record vanishes, none is invented
    expected = [(f"f#{i}", jsonl_verdict(line, cfg) or "") for i, line in enumerate(lines)
                if line.removeprefix(codecs.BOM_UTF8).strip() or len(line) > limit]
    assert [(r["doc_id"], r["reject_reason"]) for r in rows] == expected
    for row in rows:
        if not row["reject_reason"]:
            line = lines[int(row["doc_id"][2:])]
            assert row["text"] == normalize_text(json.loads(line.removeprefix(codecs.BOM_UTF8))["text"])


@settings(PROPS, max_examples=80)
@given(data=st.binary(max_size=600) | nasty_text.map(str.encode) | jsonl_files,
       limit=max_line_bytes, min_chars=st.integers(1, 40))
def test_small_text_file_is_one_document_with_the_promised_verdict(data, limit, min_chars):
    cfg = DataConfig(sources=["x"], max_line_bytes=limit, min_document_chars=min_chars)
    rows = read_file(data, ".txt", cfg)
    assert_valid_rows(rows, cfg)
    if file_reject(data):
        assert [(r["doc_id"], r["reject_reason"]) for r in rows] == [("f", file_reject(data))]
        return
    assert [r["doc_id"] for r in rows] == ["f#0"]  # under TEXT_DOCUMENT_BYTES: one book, one row
    if any(len(line) > limit for line in split_lines(data)):
        assert rows[0]["reject_reason"] == "line_too_long"
        return
    try:
        text = normalize_text(data.decode("utf-8"))
    except UnicodeDecodeError:
        assert rows[0]["reject_reason"] == "invalid_utf8"
        return
    verdict = "empty_document" if not text else "too_short" if len(text) < min_chars else ""
    assert rows[0]["reject_reason"] == verdict and rows[0]["text"] == (text if not verdict else "")


@pytest.mark.slow  # huge generated files (~3 s): `make test`, not `make test-fast`
@settings(PROPS, max_examples=4)
@given(paragraphs=st.lists(nasty_text.map(lambda t: t.replace("\x00", "")), min_size=1, max_size=8))
def test_huge_text_file_cut_into_documents_loses_no_text_and_spans_agree(paragraphs):
    # Lines of a few KiB (a per-line Python loop reads them): 2.5 MiB is a few thousand lines.
    data = "\n\n".join(p.replace("\n", " ") * (4000 // (len(p) + 1)) for p in paragraphs).encode() + b"\n\n"
    data = data if data.strip() else b"word " * 900 + b"\n\n"
    data = data * (int(2.5 * TEXT_DOCUMENT_BYTES) // len(data) + 1)
    cfg = DataConfig(sources=["x"], min_document_chars=1)
    rows = read_file(data, ".txt", cfg)
    if file_reject(data):
        assert [r["reject_reason"] for r in rows] == [file_reject(data)]
        return
    firsts = [int(r["doc_id"][2:]) for r in rows]
    assert firsts[0] == 0 and firsts == sorted(set(firsts)) and len(rows) >= 2  # ~1 MiB documents
    assert_valid_rows(rows, cfg)
    assert {r["reject_reason"] for r in rows} <= {"", "empty_document"}  # all lines short, all UTF-8
    assert non_ws("".join(r["text"] for r in rows)) == non_ws(normalize_text(data.decode()))
    spans = [Span(0, TEXT_DOCUMENT_BYTES), Span(TEXT_DOCUMENT_BYTES, -1, data[:TEXT_DOCUMENT_BYTES].count(b"\n"))]
    assert read_file(data, ".txt", cfg, spans) == rows


@settings(PROPS, max_examples=60)
@given(data=jsonl_files, codec=st.sampled_from([".gz", ".bz2"]), cut=st.floats(0, 1), flip=st.integers(0, 10**6))
def test_compressed_streams_whole_truncated_or_corrupt_never_raise(data, codec, cut, flip):
    cfg = DataConfig(sources=["x"], min_document_chars=1)
    packed = (gzip.compress if codec == ".gz" else bz2.compress)(data)
    plain = read_file(data, ".jsonl", cfg)
    if not file_reject(data):  # the sniff of a compressed file may see less of its head
        assert [{**r, "source": ""} for r in read_file(packed, ".jsonl" + codec, cfg)] == [
            {**r, "source": ""} for r in plain]
    rows = read_file(packed[:int(cut * (len(packed) - 1))], ".jsonl" + codec, cfg)
    assert_valid_rows(rows, cfg)
    if rows and rows[-1]["doc_id"] == "f":  # cut: every complete record before it, then one reject
        assert rows[-1]["reject_reason"].startswith(("empty_file", "truncated_", "corrupt_"))
        assert [r["doc_id"] for r in rows[:-1]] == [r["doc_id"] for r in plain[:len(rows) - 1]]
    broken = bytearray(packed)
    broken[flip % len(broken)] ^= 0x5A
    assert_valid_rows(read_file(bytes(broken), ".jsonl" + codec, cfg), cfg)


@settings(PROPS, max_examples=400)
@given(text=nasty_text)
@example(text="e\u200b\u0301 caf\u200be\u0301.")  # an invisible between a letter and its accent: removed
def test_normalize_is_idempotent_and_sentences_keep_every_character_within_paragraphs(text):
    out = normalize_text(text)
    assert normalize_text(out) == out
    assert "\r" not in out and "\n\n\n" not in out and "  " not in out and out == out.strip("\n ")
    lines = out.replace("\n\n", "\n").split("\n") if out else []  # a paragraph break is the only blank line
    assert all(line and line == line.strip() for line in lines)
    for doc in (text, out):
        sentences = split_sentences(doc)
        assert all(s and s == s.strip() and "\n" not in s for s in sentences)
        assert non_ws("".join(sentences)) == non_ws(doc)
        assert sentences == [s for paragraph in doc.split("\n\n") for s in split_sentences(paragraph)]


@st.composite
def corpora(draw):
    """Documents as prepare.py builds them: >= 1 sentence (empty ones are filtered before), each
    sentence >= 1 token; sentences may be longer than a whole example."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))
    docs = []
    for d in range(draw(st.integers(1, 5))):
        lengths = draw(st.lists(st.integers(1, 90), min_size=1, max_size=10))
        ids = rng.choice(TEXT_IDS, size=sum(lengths)).astype(np.uint16)
        docs.append(Document(f"doc-{d}", ids, np.concatenate([[0], np.cumsum(lengths)])))
    return docs


@settings(PROPS, max_examples=80)
@given(docs=corpora(), max_seq_len=st.integers(8, 64), short=st.floats(0, 0.99), nsp=st.floats(0, 0.99),
       seed=st.integers(0, 2**32), whole_word=st.booleans(), rate=st.floats(0.01, 0.99), cap=st.integers(1, 30))
def test_examples_are_well_formed_and_static_masks_stay_within_budget(docs, max_seq_len, short, nsp, seed,
                                                                      whole_word, rate, cap):
    cfg = DataConfig(sources=["x"], max_seq_len=max_seq_len, short_seq_prob=short, nsp_random_prob=nsp,
                     mask_rate=rate, max_predictions=cap, whole_word_masking=whole_word).validate()
    examples = list(create_examples(docs, cfg, SPECIAL.cls, SPECIAL.sep, random.Random(seed)))
    contiguous = nsp == 0 or len(docs) == 1  # no random B (alone, a document has no other to draw one from)
    if contiguous:  # every document of 2+ tokens gives contiguous pairs (a lone sentence is cut in two)
        assert {ex.doc_a for ex in examples} == {d for d, doc in enumerate(docs) if len(doc.ids) >= 2}
    else:  # every document gives pairs
        assert {ex.doc_a for ex in examples} == set(range(len(docs)))
    originals = []
    for ex in examples:
        ids, n = ex.input_ids, ex.num_tokens
        assert 3 <= ex.num_a_tokens <= n - 2 and n <= max_seq_len  # A and B non-empty, segments valid
        assert ids[0] == SPECIAL.cls and ids[ex.num_a_tokens - 1] == ids[-1] == SPECIAL.sep
        assert np.flatnonzero(np.isin(ids, SPECIAL.all)).tolist() == [0, ex.num_a_tokens - 1, n - 1]
        assert ex.is_random_next == (ex.doc_b != ex.doc_a)  # NSP label 1 exactly when B is elsewhere
        # a document's last sentence alone is cut in two where the coin (or the absence of NSP or of another
        # document) says "next"
        cut = not ex.is_random_next and (ex.b_start, ex.b_end) == (ex.a_start, ex.a_end) == (ex.a_start, ex.chunk_end)
        assert ex.is_random_next or ex.b_start == ex.a_end or cut  # B follows A, or both are one sentence's parts
        assert not (nsp == 0 and ex.is_random_next)
        originals.append(ids.copy())
    continuation = np.random.default_rng(seed).random(VOCAB) < 0.3
    mask_static(examples, masking_config(cfg), SPECIAL, VOCAB, seed, continuation)
    for ex, ids in zip(examples, originals):
        pos = ex.masked_positions
        budget = min(max(int(np.floor((ex.num_tokens - 3) * rate + 0.5)), 1), cap)
        assert len(pos) == budget if not whole_word else len(pos) <= budget
        assert np.all(np.diff(pos) > 0) and not special_tokens_mask(ex)[pos].any()
        assert np.array_equal(ex.masked_ids, ids[pos])
        changed = np.flatnonzero(ex.input_ids != ids)
        assert np.isin(changed, pos).all()  # and changed only to [MASK] or a random non-special id
        assert not np.isin(ex.input_ids[changed], [SPECIAL.pad, SPECIAL.unk, SPECIAL.cls, SPECIAL.sep]).any()


@st.composite
def ragged_batches(draw):
    """Rows "[CLS] A [SEP] B [SEP]" of random lengths (the pipeline's example schema)."""
    max_seq_len = draw(st.integers(5, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))
    rows, num_a = [], []
    for _ in range(draw(st.integers(1, 8))):
        n = draw(st.integers(5, max_seq_len))
        a = draw(st.integers(1, n - 4))
        ids = rng.choice(np.setdiff1d(np.arange(VOCAB), STRUCTURAL), size=n)  # [UNK] may appear: it is text
        ids[[0, a + 1, n - 1]] = SPECIAL.cls, SPECIAL.sep, SPECIAL.sep
        rows.append(ids)
        num_a.append(a + 2)
    ragged = np.array(rows + [None], dtype=object)[:-1]  # 1-D object array even when lengths agree
    batch = {"input_ids": ragged, "num_a_tokens": np.array(num_a),
             "next_sentence_label": rng.integers(0, 2, len(rows))}
    return batch, max_seq_len


@settings(PROPS, max_examples=80)
@given(batch=ragged_batches(), rate=st.floats(0.01, 0.99), whole_word=st.booleans(), multiple=st.sampled_from([1, 8]),
       seed=st.integers(0, 2**32))
def test_collator_pads_masks_and_labels_consistently(batch, rate, whole_word, multiple, seed):
    batch, max_seq_len = batch
    cfg = MaskingConfig(rate=rate, whole_word=whole_word, max_predictions=None)
    continuation = np.random.default_rng(seed).random(VOCAB) < 0.3
    out = PretrainingCollator(SPECIAL, VOCAB, max_seq_len, cfg, seed, continuation, multiple)(batch)
    B, T = out["input_ids"].shape
    lengths = np.array([len(r) for r in batch["input_ids"]])
    assert B == len(lengths) and lengths.max() <= T <= max_seq_len and (T % multiple == 0 or T == max_seq_len)
    assert all(out[key].shape == (B, T) for key in ("token_type_ids", "attention_mask", "mlm_labels"))
    real = np.arange(T)[None, :] < lengths[:, None]
    orig = np.full((B, T), SPECIAL.pad)
    orig[real] = np.concatenate(list(batch["input_ids"]))
    ids, labels = out["input_ids"].numpy(), out["mlm_labels"].numpy()
    target = labels != IGNORE_INDEX
    assert np.array_equal(out["attention_mask"].numpy(), real)
    assert np.array_equal(out["token_type_ids"].numpy(), real & (np.arange(T) >= batch["num_a_tokens"][:, None]))
    assert np.array_equal(labels[target], orig[target]) and not np.isin(orig[target], STRUCTURAL).any()
    assert np.array_equal(ids[~target], orig[~target]) and ((ids >= 0) & (ids < VOCAB)).all()
    replaced = target & (ids != orig) & (ids != SPECIAL.mask)
    assert not np.isin(ids[replaced], SPECIAL.all).any()  # random replacements are never special
    budget = np.maximum(np.floor((lengths - 3) * rate + 0.5), 1)  # real tokens: all but [CLS] and 2 [SEP]
    assert np.array_equal(target.sum(1), budget) if not whole_word else (target.sum(1) <= budget).all()
    assert np.array_equal(out["mlm_positions"].numpy(), np.flatnonzero(target))
    assert np.array_equal(out["unpad_indices"].numpy(), np.flatnonzero(real))
    assert np.array_equal(out["next_sentence_label"].numpy(), batch["next_sentence_label"])

