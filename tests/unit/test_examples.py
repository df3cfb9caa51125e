"""Property tests of the sentence-pair algorithm on synthetic documents (pipelines/examples.py)."""

from __future__ import annotations

import collections
import random

import numpy as np
import pytest

from bert_core.tokenizer import SpecialIds
from pipelines.config import DataConfig
from pipelines import examples as examples_module
from pipelines.examples import (Document, bucket_seed, create_examples, document_key, mask_static, mask_static_flat,
                                masking_config, special_tokens_mask)

SPECIAL = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)  # a trained vocab's layout
VOCAB = 1000
MAX_SENTENCE = 12


def make_corpus(num_docs: int, seed: int = 0, min_sentences: int = 40, max_sentences: int = 200) -> list[Document]:
    """Documents of 1..12-token sentences with non-special ids, so structure checks are exact."""
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(num_docs):
        lengths = rng.integers(1, MAX_SENTENCE + 1, size=rng.integers(min_sentences, max_sentences + 1))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        ids = rng.integers(5, VOCAB, size=offsets[-1]).astype(np.uint16)
        docs.append(Document(f"doc-{d}", ids, offsets))
    return docs


def build(docs, seed=0, **overrides):
    cfg = DataConfig(sources=["synthetic"], **overrides)
    return cfg, list(create_examples(docs, cfg, SPECIAL.cls, SPECIAL.sep, random.Random(seed)))


def segment(doc: Document, start: int, end: int) -> np.ndarray:
    return doc.ids[doc.offsets[start]:doc.offsets[end]]


def is_slice_of(part: np.ndarray, whole: np.ndarray) -> bool:
    """True when `part` is whole[i:j] for some i, j (truncation only trims ends)."""
    return any(np.array_equal(whole[i:i + len(part)], part) for i in range(len(whole) - len(part) + 1))


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(1000)


@pytest.fixture  # per test (50 ms): mutmut credits a module fixture's calls to the first test that uses it only
def built(corpus):
    return build(corpus)


def test_every_example_is_cls_a_sep_b_sep_within_max_len(corpus, built):
    cfg, examples = built
    assert len(examples) > 5000
    for ex in examples:
        ids, n_a = ex.input_ids, ex.num_a_tokens
        assert ex.num_tokens <= cfg.max_seq_len
        assert 3 <= n_a <= ex.num_tokens - 2  # A and B both non-empty
        assert np.flatnonzero(ids == SPECIAL.cls).tolist() == [0]
        assert np.flatnonzero(ids == SPECIAL.sep).tolist() == [n_a - 1, ex.num_tokens - 1]
        assert ids.dtype == corpus[ex.doc_a].ids.dtype  # the shards' integer type, as the documents hold it
        structure = special_tokens_mask(ex)
        assert structure.dtype == bool and np.flatnonzero(structure).tolist() == [0, n_a - 1, ex.num_tokens - 1]
        # Segment 0 is exactly A's tokens and segment 1 exactly B's: each is a contiguous piece of
        # the sentences its debug range names (front/back trimming keeps contiguity).
        a_src = segment(corpus[ex.doc_a], ex.a_start, ex.a_end)
        b_src = segment(corpus[ex.doc_b], ex.b_start, ex.b_end)
        assert is_slice_of(ids[1:n_a - 1], a_src)
        assert is_slice_of(ids[n_a:-1], b_src)
        # Truncation only happens past the limit, and then fills it exactly (a lone sentence cut in two: its length).
        untruncated = len(a_src) + (0 if cut_in_two(ex) else len(b_src))
        assert ex.num_tokens - 3 == min(untruncated, cfg.max_seq_len - 3)


def cut_in_two(ex) -> bool:
    """A lone sentence whose A and B are its two parts (examples_from_document): a document's last sentence alone in
    its chunk, where no other document (or no NSP) gives a random B."""
    return not ex.is_random_next and (ex.b_start, ex.b_end) == (ex.a_start, ex.a_end)


def one_sentence_chunk(ex, doc: Document) -> bool:
    """A is one sentence that reached the target alone, or its document's last: its chunk held nothing else."""
    return ex.a_end - ex.a_start == 1 and (doc.offsets[ex.a_end] - doc.offsets[ex.a_start] >= ex.target_length
                                           or ex.a_end == doc.num_sentences)


def test_next_sentence_labels(corpus, built):
    """The coin decides every pair, a one-sentence chunk's too (Google's code gives every one a random B, which made
    the random share 55-60%, a sentence-long chunk being common at 512 tokens). Where the coin says "next", B is the
    following sentence: a sentence cut in two gave the "next" pairs alone an A that ends and a B that starts
    mid-sentence, a cue to the label; so an untruncated pair is whole sentences on both sides, whatever its label,
    but a document's last sentence alone, "next", which has no following one and is cut in two."""
    def labels(examples):
        lone = np.array([one_sentence_chunk(ex, corpus[ex.doc_a]) for ex in examples])
        last = np.array([ex.a_end == corpus[ex.doc_a].num_sentences for ex in examples])
        return np.array([ex.is_random_next for ex in examples]), lone & ~last, lone & last

    cfg, examples = built
    random_next, lone, lone_last = labels(examples)
    assert abs(random_next.mean() - cfg.nsp_random_prob) < 0.015
    assert 0.01 < lone_last.mean() < 0.05 and abs(random_next[lone_last].mean() - cfg.nsp_random_prob) < 0.15
    short_random, short_lone, _ = labels(build(corpus[:300], max_seq_len=16, short_seq_prob=0.5)[1])  # many lone
    assert short_lone.sum() > 1000 and abs(short_random[short_lone].mean() - cfg.nsp_random_prob) < 0.05
    for ex in examples:
        a, b = ex.input_ids[1:ex.num_a_tokens - 1], ex.input_ids[ex.num_a_tokens:-1]
        a_src, b_src = segment(corpus[ex.doc_a], ex.a_start, ex.a_end), segment(corpus[ex.doc_b], ex.b_start, ex.b_end)
        if ex.is_random_next:
            assert ex.doc_b != ex.doc_a
        elif ex.b_start == ex.a_start:  # a document's last sentence alone, cut in two
            assert ex.a_end == ex.b_end == ex.chunk_end == corpus[ex.doc_a].num_sentences
            continue
        else:  # B is the very next sentences of the same document: the chunk's rest, or the one after a lone A
            assert ex.doc_b == ex.doc_a and ex.a_end == ex.b_start and ex.b_end == ex.chunk_end
        if len(a_src) + len(b_src) <= cfg.max_seq_len - 3:
            assert np.array_equal(a, a_src) and np.array_equal(b, b_src)


def test_documents_of_one_sentence_keep_the_coins_share_of_random_pairs():
    """Each document's only sentence is its last: given a random B whatever the coin (as Google's code does), a
    corpus of one-sentence documents (reviews, snippets) had every pair random-next, and NSP one class."""
    rng = np.random.default_rng(3)
    docs = []
    for d in range(2000):
        n = int(rng.integers(20, 40))
        docs.append(Document(f"one-{d}", rng.integers(5, VOCAB, size=n).astype(np.uint16), np.array([0, n])))
    cfg, examples = build(docs, max_seq_len=64)
    assert len(examples) == 2000 and abs(np.mean([ex.is_random_next for ex in examples]) - 0.5) < 0.05


def test_without_nsp_every_pair_is_contiguous_text_and_a_lone_last_sentence_is_cut_in_two(corpus):
    """nsp_random_prob=0 (train.nsp=false): no random B at all, not even for a one-sentence chunk (Google's code
    forces one there): its B is the next sentence, and a document's last sentence alone, which has none, is cut at a
    random token into A and B. Every sentence is still used once."""
    cfg, examples = build(corpus[:300], nsp_random_prob=0.0)
    assert not any(ex.is_random_next for ex in examples)
    cut, tiles = [], {}
    for ex in examples:
        assert ex.doc_b == ex.doc_a
        a, b = ex.input_ids[1:ex.num_a_tokens - 1], ex.input_ids[ex.num_a_tokens:-1]
        if ex.chunk_end - ex.a_start == 1:  # a lone last sentence: A and B are its two parts, in order
            assert (ex.b_start, ex.b_end) == (ex.a_start, ex.a_end) and len(a) >= 1 and len(b) >= 1
            assert ex.a_end == corpus[ex.doc_a].num_sentences
            assert np.array_equal(np.concatenate([a, b]), segment(corpus[ex.doc_a], ex.a_start, ex.a_end))
            cut.append(len(a) / (len(a) + len(b)))
            tiles.setdefault(ex.doc_a, []).append((ex.a_start, ex.a_end))
        else:
            assert ex.a_end == ex.b_start
            tiles.setdefault(ex.doc_a, []).extend([(ex.a_start, ex.a_end), (ex.b_start, ex.b_end)])
    assert len(cut) > 10 and len(set(cut)) > 3  # the cut is drawn, not fixed
    for d, ranges in tiles.items():  # one-token lone sentences (no pair possible) are the only ones left out
        gaps = [(prev[1], nxt[0]) for prev, nxt in zip(ranges, ranges[1:]) if prev[1] != nxt[0]]
        assert all(end - start == 1 and len(segment(corpus[d], start, end)) == 1 for start, end in gaps), gaps


def test_random_b_fills_to_the_remaining_target(corpus, built):
    for ex in (e for e in built[1] if e.is_random_next):
        other = corpus[ex.doc_b]
        target_b = ex.target_length - (corpus[ex.doc_a].offsets[ex.a_end] - corpus[ex.doc_a].offsets[ex.a_start])
        filled = other.offsets[ex.b_end] - other.offsets[ex.b_start]
        assert filled >= target_b or ex.b_end == other.num_sentences
        assert ex.b_end - ex.b_start == 1 or other.offsets[ex.b_end - 1] - other.offsets[ex.b_start] < target_b


def test_random_b_ends_where_googles_sentence_loop_stopped():
    """B's end is found by a binary search over its document's sentence ends; Google's loop added one sentence at a
    time until B reached target - len(A) or its document ended. Both must give the same B from the same draws, or a
    re-run of the same config builds another dataset: two-sentence documents, targets past a document's end and A
    longer than the target (nothing left for B: one sentence) included."""
    def google_b_end(offsets, b_start, target_b):
        b_end = b_start + 1
        while b_end < len(offsets) - 1 and offsets[b_end] - offsets[b_start] < target_b:
            b_end += 1
        return b_end

    shapes = [dict(min_sentences=2, max_sentences=2), dict(min_sentences=1, max_sentences=30),
              dict(min_sentences=40, max_sentences=200)]
    checked = 0
    for seed in range(12):
        docs = make_corpus(40, seed=seed, **shapes[seed % 3])
        for overrides in (dict(), dict(max_seq_len=16, short_seq_prob=0.5), dict(max_seq_len=8, short_seq_prob=1.0)):
            _, examples = build(docs, seed=seed, nsp_random_prob=0.7, **overrides)
            for ex in (e for e in examples if e.is_random_next):
                a = docs[ex.doc_a].offsets
                target_b = ex.target_length - int(a[ex.a_end] - a[ex.a_start])
                assert ex.b_end == google_b_end(docs[ex.doc_b].offsets.tolist(), ex.b_start, target_b)
                assert type(ex.b_end) is int
                checked += 1
    assert checked > 2000


def test_a_random_b_from_a_book_sized_document_costs_no_pass_over_its_sentences():
    """Each random B once copied its document's sentence ends to a list and walked them: with one-sentence-a-line
    books (8 MiB documents, ~150k sentences) that was most of the examples stage (74 s where 4 s do)."""
    import time

    docs = make_corpus(1, seed=1, min_sentences=60_000, max_sentences=60_000) + make_corpus(
        1, seed=2, min_sentences=150_000, max_sentences=150_000)
    start = time.process_time()
    _, examples = build(docs)
    elapsed = time.process_time() - start
    assert sum(ex.is_random_next and ex.doc_b == 1 for ex in examples) > 1500
    assert elapsed < 2.0, f"{elapsed:.1f} s of CPU"  # ~0.2 s; a pass over B's sentences per pair took ~12 s


def test_sentences_are_used_once_in_order_and_unused_ones_go_back(corpus, built):
    # Per document, the A ranges plus real-next B ranges tile [0, num_sentences) in order: the
    # sentences a random-next pair left unused start the next chunk instead of being dropped.
    tiles: dict[int, list[tuple[int, int]]] = {}
    for ex in built[1]:
        tiles.setdefault(ex.doc_a, []).append((ex.a_start, ex.a_end))
        if not ex.is_random_next and not cut_in_two(ex):
            tiles[ex.doc_a].append((ex.b_start, ex.b_end))
    assert len(tiles) == len(corpus)
    for d, ranges in tiles.items():
        assert ranges[0][0] == 0 and ranges[-1][1] == corpus[d].num_sentences
        assert all(prev[1] == nxt[0] for prev, nxt in zip(ranges, ranges[1:]))


def test_a_chunk_is_the_shortest_run_of_sentences_reaching_its_target_and_a_gets_a_random_part_of_it(corpus, built):
    """Google's chunking: sentences are added until the chunk holds `target` tokens (or the document ends); A is
    the first 1..k-1 of its k sentences, drawn uniformly."""
    a_share = []
    for ex in built[1]:
        doc = corpus[ex.doc_a]
        start = doc.offsets[ex.a_start]
        end = ex.a_end if one_sentence_chunk(ex, doc) else ex.chunk_end  # a lone A's "next" B is the sentence after
        assert doc.offsets[end] - start >= ex.target_length or end == doc.num_sentences
        assert end - ex.a_start == 1 or doc.offsets[end - 1] - start < ex.target_length
        k = ex.chunk_end - ex.a_start
        if k >= 3:
            assert 1 <= ex.a_end - ex.a_start <= k - 1
            a_share.append((ex.a_end - ex.a_start - 1) / (k - 2))  # 0 .. 1 over the allowed range
    assert len(a_share) > 1000 and abs(np.mean(a_share) - 0.5) < 0.03


def test_short_targets_at_the_configured_rate_and_lengths_follow_targets(corpus):
    cfg, examples = build(corpus, short_seq_prob=0.1)
    max_num = cfg.max_seq_len - 3
    targets = np.array([ex.target_length for ex in examples])
    short = targets < max_num
    assert abs(short.mean() - 0.1) < 0.015
    assert abs(targets[short].mean() - (2 + max_num) / 2) < 4  # uniform on [2, max_num]
    assert targets[short].min() == 2
    lengths = np.array([ex.num_tokens for ex in examples])
    # A chunk closed by its target (not by its document's end) holds target..target+longest
    # sentence tokens, so short targets show up as short examples.
    for ex in examples:
        doc = corpus[ex.doc_a]
        if not ex.is_random_next and ex.b_end < doc.num_sentences and not one_sentence_chunk(ex, doc):
            untruncated = doc.offsets[ex.b_end] - doc.offsets[ex.a_start]
            assert ex.target_length <= untruncated < ex.target_length + MAX_SENTENCE
    clearly_short = lengths < cfg.max_seq_len // 2
    _, long_only = build(corpus, short_seq_prob=0.0)
    baseline = np.mean([ex.num_tokens < cfg.max_seq_len // 2 for ex in long_only])
    assert clearly_short.mean() - baseline > 0.1 * 0.25  # >= a quarter of short targets are < half


def test_same_seed_same_examples_other_seed_different(corpus):
    docs = corpus[:100]
    _, a = build(docs, seed=7)
    _, b = build(docs, seed=7)
    _, c = build(docs, seed=8)
    assert [e.input_ids.tolist() for e in a] == [e.input_ids.tolist() for e in b]
    assert [e.input_ids.tolist() for e in a] != [e.input_ids.tolist() for e in c]


def test_single_document_bucket_has_only_real_next_pairs():
    doc = make_corpus(1, min_sentences=40, max_sentences=40)
    _, examples = build(doc)
    assert examples and not any(ex.is_random_next for ex in examples)


def chunks_tile(examples, doc: Document) -> bool:
    """Each example's chunk starts where the one before ended (no sentence left out), from the first to the last."""
    bounds = [(ex.a_start, ex.chunk_end) for ex in examples]
    return bool(bounds) and bounds[0][0] == 0 and bounds[-1][1] == doc.num_sentences and all(
        prev[1] == nxt[0] for prev, nxt in zip(bounds, bounds[1:]))


def test_single_document_bucket_pairs_a_one_sentence_chunk_with_the_next_and_cuts_only_the_last():
    """Sentences 11 and 31 are each longer than the target, so each is a chunk of its own, and a one-document bucket
    has no other document to draw a B from: sentence 11's B is sentence 12, as without NSP; the last one (31) has no
    next sentence and is cut in two (A its start, B the rest, contiguous). Every sentence is used, in order."""
    lengths = [6] * 11 + [200, 200] + [6] * 17 + [200, 200]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    doc = Document("long-sentences", np.arange(5, 5 + offsets[-1]).astype(np.uint16), offsets)
    _, examples = build([doc], max_seq_len=64, short_seq_prob=0.0)
    assert chunks_tile(examples, doc)
    lone = [ex for ex in examples if ex.a_start in (11, 31)]
    assert [(ex.a_start, ex.a_end, ex.b_start, ex.b_end, ex.is_random_next) for ex in lone] == [
        (11, 12, 12, 13, False), (31, 32, 31, 32, False)]
    a, b = lone[0].input_ids[1:lone[0].num_a_tokens - 1], lone[0].input_ids[lone[0].num_a_tokens:-1]
    assert is_slice_of(a, segment(doc, 11, 12)) and is_slice_of(b, segment(doc, 12, 13))
    a, b = lone[1].input_ids[1:lone[1].num_a_tokens - 1], lone[1].input_ids[lone[1].num_a_tokens:-1]
    sentence = segment(doc, 31, 32)
    assert len(a) and len(b) and is_slice_of(a, sentence) and is_slice_of(b, sentence) and a[0] < b[0]


def test_single_document_bucket_with_nsp_uses_its_sentences_as_without_nsp():
    """A short target once made every following sentence at least that long a chunk of its own with no B, dropped
    without a new target: 1 example from 2,000 sentences where nsp_random_prob=0 gives ~300 (BooksCorpus cut into
    8 MiB documents leaves shards of one document)."""
    rng = np.random.default_rng(0)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(5, 35, 2000))])
    doc = Document("book", rng.integers(5, VOCAB, offsets[-1]).astype(np.uint16), offsets)
    _, with_nsp = build([doc], seed=1)
    _, without = build([doc], seed=1, nsp_random_prob=0.0)
    assert chunks_tile(with_nsp, doc) and not any(ex.is_random_next for ex in with_nsp)
    assert abs(len(with_nsp) - len(without)) <= 0.05 * len(without)


@pytest.mark.parametrize("num_docs, nsp", [(1, 0.5), (2, 0.0)])
def test_a_lone_one_token_last_sentence_is_dropped_and_counted(num_docs, nsp):
    lengths = [13, 13, 1]  # the first 13-token sentence reaches the 13-token target alone, B is the second
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    docs = [Document(f"d{d}", np.arange(5, 5 + offsets[-1]).astype(np.uint16), offsets) for d in range(num_docs)]
    cfg = DataConfig(sources=["synthetic"], max_seq_len=16, short_seq_prob=0.0, nsp_random_prob=nsp)
    dropped = collections.Counter()
    examples = list(create_examples(docs, cfg, SPECIAL.cls, SPECIAL.sep, random.Random(0), dropped))
    assert [(ex.doc_a, ex.a_start, ex.b_start) for ex in examples] == [(d, 0, 1) for d in range(num_docs)]
    assert dropped == {"one_token_sentence": num_docs}


@pytest.mark.parametrize("nsp", [0.0, 0.5])
def test_a_sentence_longer_than_an_example_is_cut_so_its_text_reaches_the_examples(corpus, nsp):
    """A list without . ! ? split as one 422-token sentence: an example held one window of it and the rest was lost
    with no count. Cut into quarters of what an example holds, rounded up, it is there but for the few tokens
    truncation takes (quarters rounded down, 4 x 31 < 125, took a fifth piece a chunk and lost ~18% to truncation)."""
    from pipelines.examples import cut_long_sentences

    rng = np.random.default_rng(7)
    lengths = [3, 422, 3]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    doc = Document("list", rng.integers(5, VOCAB, size=offsets[-1]).astype(np.uint16), offsets)
    cut, n = cut_long_sentences(doc, 125)
    assert n == 1 and cut.offsets.tolist() == [0, *range(3, 425, 32), 425, 428]
    assert cut_long_sentences(cut, 125) == (cut, 0)  # nothing longer than 125 is left

    def kept(d: Document) -> float:  # the document's tokens in the examples that start from it, over 3 seeds
        tokens = 0
        for seed in range(3):
            _, built = build([d, *corpus[:3]], seed=seed, nsp_random_prob=nsp, max_seq_len=128, short_seq_prob=0.0)
            tokens += sum(e.num_a_tokens - 2 + (0 if e.is_random_next else len(e.input_ids) - e.num_a_tokens - 1)
                          for e in built if e.doc_a == 0)
        return tokens / 3

    assert kept(doc) < 0.45 * offsets[-1] and kept(cut) > 0.95 * offsets[-1]  # 0.97-0.98; quarters rounded down: 0.87


def test_document_key_is_stable_and_spread():
    assert document_key(1, "a") == document_key(1, "a") != document_key(2, "a")
    keys = np.array([document_key(0, f"d{i}") for i in range(4000)], dtype=np.float64) / 2.0**64
    assert abs(keys.mean() - 0.5) < 0.02 and abs((keys < 0.1).mean() - 0.1) < 0.02


def test_keys_and_seeds_are_the_ones_prepared_data_was_built_with():
    """The eval split, buckets, shuffles and static masks of a prepared set derive from these: a change would make
    a re-run of the same config produce a different dataset. Values of the code when this test was written."""
    assert document_key(0, "doc-0") == 3752354261563677787
    assert document_key(12345, "wiki/Ada_Lovelace") == 2028611583743093166
    assert bucket_seed(0, "train", 0, 0) == 8037165284253252044
    assert bucket_seed(7, "eval", 3, -2) == 12207192986505638102


def test_bucket_seeds_are_64_bit_and_differ_in_every_argument():
    base = (0, "train", 0, 0)
    variants = [base, (1, "train", 0, 0), (0, "eval", 0, 0), (0, "train", 1, 0), (0, "train", 0, 1),
                (0, "train", 0, -1), (0, "train", 0, -2)]
    seeds = [bucket_seed(*v) for v in variants]
    assert len(set(seeds)) == len(seeds) and bucket_seed(*base) == seeds[0]
    spread = np.array([bucket_seed(0, "train", b, 0) for b in range(2000)], dtype=np.float64) / 2.0**64
    assert spread.max() < 1 and abs(spread.mean() - 0.5) < 0.03


def test_masking_config_carries_every_data_setting():
    cfg = DataConfig(sources=["x"], mask_rate=0.2, whole_word_masking=True, max_predictions=7)
    m = masking_config(cfg)
    assert (m.rate, m.whole_word, m.max_predictions) == (0.2, True, 7)


def test_static_masking_statistics(corpus):
    cfg, examples = build(corpus[:300], max_predictions=15)
    mcfg = masking_config(cfg)
    originals = [ex.input_ids.copy() for ex in examples]
    mask_static(examples, mcfg, SPECIAL, VOCAB, seed=0)
    selected = total = kept_as_mask = 0
    for ex, orig in zip(examples, originals):
        pos = ex.masked_positions
        real = ex.num_tokens - 3
        assert len(pos) == min(15, max(1, int(np.floor(real * 0.15 + 0.5))))
        assert not special_tokens_mask(ex)[pos].any()
        assert np.array_equal(ex.masked_ids, orig[pos])  # labels are the ORIGINAL ids
        assert np.all(np.diff(pos) > 0) and ex.input_ids.dtype == orig.dtype
        unselected = np.ones(ex.num_tokens, dtype=bool)
        unselected[pos] = False
        assert np.array_equal(ex.input_ids[unselected], orig[unselected])
        kept_as_mask += int((ex.input_ids[pos] == SPECIAL.mask).sum())
        selected += len(pos)
        total += real
    assert 0.12 < selected / total < 0.15  # the rate, pulled down a little by the cap
    assert abs(kept_as_mask / selected - 0.8) < 0.03


def test_static_masking_leaves_special_tokens_of_the_text_alone(corpus):
    """A literal "[MASK]" or "[SEP]" in the text is the special id (the tokenizer matches it): as the dynamic
    collator does, static masking never makes it a target nor replaces it."""
    _, examples = build(corpus[:200])
    inside = []
    for i, ex in enumerate(examples):
        p = 1 + i % (ex.num_a_tokens - 2)  # a position of segment A, not its [CLS] nor [SEP]
        ex.input_ids[p] = (SPECIAL.mask, SPECIAL.sep, SPECIAL.cls, SPECIAL.pad)[i % 4]
        inside.append((p, ex.input_ids[p]))
    mask_static(examples, masking_config(DataConfig(sources=["x"])), SPECIAL, VOCAB, seed=0)
    assert all(p not in ex.masked_positions and ex.input_ids[p] == was for ex, (p, was) in zip(examples, inside))


def test_static_masking_is_a_function_of_the_seed(corpus):
    runs = []
    for seed in (3, 3, 4, 6, 2**64 - 1):  # bucket_seed gives 64-bit seeds
        _, examples = build(corpus[:50])
        mask_static(examples, masking_config(DataConfig(sources=["x"])), SPECIAL, VOCAB, seed=seed)
        runs.append([(e.input_ids.tolist(), e.masked_positions.tolist()) for e in examples])
    assert runs[0] == runs[1]
    assert all(runs[i] != runs[j] for i in range(1, 5) for j in range(i + 1, 5))


@pytest.mark.parametrize("n", [8, 9])  # a whole number of chunks, and one example more
def test_static_masking_in_chunks_masks_every_example_and_leaves_its_input_alone(corpus, monkeypatch, n):
    monkeypatch.setattr(examples_module, "MASK_CHUNK", 4)
    examples = build(corpus[:5])[1][:n]
    values = np.concatenate([e.input_ids for e in examples])
    values.flags.writeable = False  # as pyarrow's to_numpy() hands a shard's column over
    offsets = np.concatenate([[0], np.cumsum([e.num_tokens for e in examples])])
    num_a = np.array([e.num_a_tokens for e in examples])
    masked, counts, positions, originals = mask_static_flat(values, offsets, num_a, masking_config(DataConfig(
        sources=["x"])), SPECIAL, VOCAB, seed=0)
    assert np.array_equal(values, np.concatenate([e.input_ids for e in examples]))
    assert counts.shape == (n,) and (counts >= 1).all() and counts.sum() == len(positions) == len(originals)
    assert positions.dtype.kind == originals.dtype.kind == "i"
    starts = np.repeat(offsets[:-1], counts)
    np.testing.assert_array_equal(values[starts + positions], originals)
    assert masked.dtype == values.dtype and len(masked) == len(values)


def test_truncation_matches_googles_token_by_token_loop():
    """_truncate_pair counts trims in closed form; Google's loop (one draw per trimmed token,
    longer side first, B on ties) must give the same trims from the same draws."""
    from pipelines.examples import _truncate_pair

    def google(len_a, len_b, max_num_tokens, rng):
        trim = [0, 0, 0, 0]
        while len_a + len_b > max_num_tokens:
            side = 0 if len_a > len_b else 2
            trim[side + (0 if rng.random() < 0.5 else 1)] += 1
            len_a, len_b = (len_a - 1, len_b) if side == 0 else (len_a, len_b - 1)
        return tuple(trim)

    cases = random.Random(1)
    for _ in range(20000):
        a, b, m, seed = cases.randint(0, 300), cases.randint(0, 300), cases.randint(1, 260), cases.random()
        ours, theirs = random.Random(seed), random.Random(seed)
        assert _truncate_pair(a, b, m, ours) == google(a, b, m, theirs), (a, b, m)
        assert ours.random() == theirs.random()  # the same number of draws
