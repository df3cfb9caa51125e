"""BERT pretraining examples from tokenized documents: Google's sentence-pair algorithm.

A faithful port of `create_instances_from_document` / `truncate_seq_pair` in Google's
create_pretraining_data.py, restated over flat token arrays so a bucket of documents costs
two numpy arrays each instead of a list of lists. Where this file departs from the reference,
the line says so:

* the short target length is redrawn for every example (Google draws it once per document,
  which makes the realised share of short examples depend on document lengths; Megatron's
  per-sample draw makes `short_seq_prob` mean what DataConfig says: a share of examples);
* the random-next document always differs from the current one (Google gives up after 10
  tries and may pair a document with itself, which makes the NSP label wrong);
* a one-sentence chunk is random-next as the coin says (Google gives every one a random B), its "next"
  B the sentence after it; a document's last sentence alone, with none after it, is cut in two at a
  random token where the coin says "next" (or no random B can be: a one-document bucket,
  nsp_random_prob=0);
* random-next documents come from the same bucket, not the whole corpus (see `prepare.py`:
  buckets are uniform random samples of the corpus, so this is the standard sharded
  approximation of a corpus-wide draw).

Pure Python + numpy: no Ray, so the property tests exercise exactly the code the pipeline runs.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from bert_core.config import MaskingConfig
from bert_core.tokenizer import SpecialIds
from pipelines.config import DataConfig


# How pairs are built where the config does not say, recorded in the manifest ("examples"). A set's name hashes its
# inputs and config alone: one prepared before a rule changed keeps its name, and lacks the key or shows the old rule.
PAIR_RULES = {"lone_sentence": "the coin decides; next: the following sentence, a document's last cut in two",
              "long_sentence_piece": "ceil(max_num_tokens / 4)"}


def document_key(seed: int, doc_id: str) -> int:
    """Stable uniform 64-bit key of a document; every random decision about it starts here.

    Contract with prepare.py: key < eval_fraction * 2**64 puts a document in eval; key % buckets
    picks its bucket; sorting a bucket by key is the global shuffle. None of it depends on how
    many workers run or how blocks are laid out.
    """
    digest = hashlib.blake2b(f"{seed}\x00{doc_id}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def bucket_seed(seed: int, split: str, bucket: int, dupe_pass: int) -> int:
    """Seed of the RNG that builds one bucket's examples in one dupe pass."""
    digest = hashlib.blake2b(f"{seed}\x00{split}\x00{bucket}\x00{dupe_pass}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "little")


@dataclass
class Document:
    """One document's sentences, tokenized: sentence s is ids[offsets[s]:offsets[s + 1]]."""

    doc_id: str
    ids: np.ndarray  # (num_tokens,) token ids of all sentences back to back
    offsets: np.ndarray  # (num_sentences + 1,) int64, offsets[0] == 0, strictly increasing

    @property
    def num_sentences(self) -> int:
        return len(self.offsets) - 1


def cut_long_sentences(doc: Document, max_num_tokens: int) -> tuple[Document, int]:
    """`doc` with every sentence longer than `max_num_tokens` (the most an example holds) cut into pieces of a
    quarter of that, and how many were cut. The sentence splitter ends sentences at . ! ? only: a list, a table or
    verse without them is one "sentence" of hundreds of tokens, of which an example kept one window and the rest was
    lost with no count. Quarters: chunks of several pieces then split into A and B as sentences do, and a piece
    overshoots a segment's target by little (halves lost ~15-30% of the text to truncation, quarters 1-2%)."""
    lengths = np.diff(doc.offsets)
    long = lengths > max_num_tokens
    if not long.any():
        return doc, 0
    piece = max(1, -(-max_num_tokens // 4))  # rounded up: 4 x 31 fell short of 125, and a 5th piece was truncated
    starts = [np.arange(start, end, piece) if cut else np.array([start])
              for start, end, cut in zip(doc.offsets[:-1], doc.offsets[1:], long)]
    offsets = np.concatenate([*starts, doc.offsets[-1:]]).astype(doc.offsets.dtype)
    return Document(doc.doc_id, doc.ids, offsets), int(long.sum())


@dataclass
class Example:
    """[CLS] A [SEP] B [SEP] with where A and B came from (sentence ranges are half-open)."""

    input_ids: np.ndarray  # (num_tokens,) no padding
    num_a_tokens: int  # length of "[CLS] A [SEP]"; segment ids are 0 there and 1 after
    is_random_next: bool  # next_sentence_label 1 (HF convention: 1 = B is not the continuation)
    doc_a: int  # index in the bucket's document list
    a_start: int
    a_end: int
    doc_b: int
    b_start: int
    b_end: int
    chunk_end: int  # the chunk was sentences [a_start, chunk_end) of doc_a; after A, B or returned
    target_length: int  # tokens the chunk aimed for (< max_seq_len - 3 for short examples)
    masked_positions: np.ndarray | None = None  # static masking only (see mask_static)
    masked_ids: np.ndarray | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.input_ids)


def _target_length(max_num_tokens: int, short_seq_prob: float, rng: random.Random) -> int:
    # Mostly fill the sequence (padding wastes compute); sometimes go short so pretraining
    # also sees the short inputs fine-tuning will bring.
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def _truncate_pair(len_a: int, len_b: int, max_num_tokens: int, rng: random.Random) -> tuple[int, int, int, int]:
    """Google's truncate_seq_pair as trim counts: (a_front, a_back, b_front, b_back).

    The reference trims one token at a time from the longer segment (B on ties), front or back
    by one rng.random() < 0.5 each (its guard against always cutting the same side). So the
    first |len_a - len_b| trims hit the longer segment and then they alternate B, A, B, ...:
    the same draws, counted in closed form instead of a Python loop per token.
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0, 0, 0
    front = [rng.random() < 0.5 for _ in range(excess)]
    gap = min(abs(len_a - len_b), excess)
    a_steps, b_steps = front[gap + 1::2], front[gap::2]
    if len_a > len_b:
        a_steps = front[:gap] + a_steps
    else:
        b_steps = front[:gap] + b_steps
    a_front, b_front = sum(a_steps), sum(b_steps)
    return a_front, len(a_steps) - a_front, b_front, len(b_steps) - b_front


def _random_other_document(num_docs: int, index: int, rng: random.Random) -> int:
    j = rng.randint(0, num_docs - 2)  # uniform over every document but `index`
    return j + 1 if j >= index else j


def examples_from_document(docs: Sequence[Document], index: int, cfg: DataConfig, cls_id: int,
                           sep_id: int, rng: random.Random, dropped: Counter | None = None) -> list[Example]:
    """All examples whose A segment comes from docs[index] (Google's create_instances_from_document).
    `dropped` counts sentences no example holds, by reason."""
    doc = docs[index]
    offsets = doc.offsets.tolist()  # Python ints: the loop below indexes per sentence
    n = doc.num_sentences
    max_num_tokens = cfg.max_seq_len - 3  # room for [CLS], [SEP], [SEP]
    target = _target_length(max_num_tokens, cfg.short_seq_prob, rng)
    out: list[Example] = []
    chunk_start = 0  # the chunk is sentences [chunk_start, i]
    i = 0
    while i < n:
        if i == n - 1 or offsets[i + 1] - offsets[chunk_start] >= target:
            chunk_end = i + 1
            num_chunk = chunk_end - chunk_start
            # A gets a random number of the chunk's sentences, at least one.
            a_end = chunk_start + (rng.randint(1, num_chunk - 1) if num_chunk >= 2 else 1)
            len_a = int(offsets[a_end] - offsets[chunk_start])
            a_ids = b_ids = None  # the sentence ranges' tokens, unless a lone sentence is cut in two below
            can_draw = len(docs) > 1 and cfg.nsp_random_prob > 0  # another document to draw B from, and NSP on
            # The coin decides every pair. Google gives every one-sentence chunk a random B whatever the coin: 55-60%
            # of pairs random at 512 tokens, and every pair of a corpus of one-sentence documents (reviews, snippets).
            # A document's last sentence alone of one token cannot be cut in two (below): a random B, if there can be.
            uncuttable = num_chunk == 1 and chunk_end == n and len_a < 2
            random_b = can_draw and (rng.random() < cfg.nsp_random_prob or uncuttable)
            if random_b:
                is_random = True
                doc_b = _random_other_document(len(docs), index, rng)
                other = docs[doc_b].offsets  # not .tolist(): that cost a book-sized B's every sentence per pair
                b_start = rng.randint(0, len(other) - 2)
                target_b = target - len_a
                # B ends at the first sentence end at least target_b past its start, one sentence at least and the
                # document's end at most (offsets strictly increase, so side='left' finds that first end).
                b_end = max(b_start + 1, min(int(np.searchsorted(other, other[b_start] + target_b)), len(other) - 1))
                # The chunk's sentences after A were not used: they start the next chunk.
                i -= chunk_end - a_end
            elif num_chunk > 1 or chunk_end < n:
                # Contiguous: B is the rest of the chunk, or, where one sentence reached the target alone, the sentence
                # after it (truncated as any B): a sentence cut in two made the "next" pairs the only ones whose A ends
                # and whose B starts mid-sentence, a cue to the label.
                if num_chunk == 1:
                    i, chunk_end = chunk_end, chunk_end + 1
                is_random, doc_b, b_start, b_end = False, index, a_end, chunk_end
            else:
                # The document's last sentence alone, "next" (the coin, or no other document to draw B from, or no
                # NSP), has no next sentence: cut in two at a random token, A its start and B the rest. The cue above
                # stays for these pairs alone (a document's last sentence, where it is a chunk by itself), the price of
                # keeping data.nsp_random_prob's share. A one-token sentence cannot be cut: a random B above, or no
                # pair at all.
                lone = doc.ids[offsets[chunk_start]:offsets[chunk_end]]
                if len(lone) < 2:
                    if dropped is not None:
                        dropped["one_token_sentence"] += 1
                    chunk_start, i = i + 1, i + 1
                    continue
                cut = rng.randint(1, len(lone) - 1)
                a_ids, b_ids = lone[:cut], lone[cut:]
                is_random, doc_b, b_start, b_end = False, index, chunk_start, chunk_end
            if a_ids is None:
                b_ids = docs[doc_b].ids[docs[doc_b].offsets[b_start]:docs[doc_b].offsets[b_end]]
                a_ids = doc.ids[offsets[chunk_start]:offsets[a_end]]
            af, ab, bf, bb = _truncate_pair(len(a_ids), len(b_ids), max_num_tokens, rng)
            a_ids = a_ids[af:len(a_ids) - ab]
            b_ids = b_ids[bf:len(b_ids) - bb]
            ids = np.empty(len(a_ids) + len(b_ids) + 3, dtype=doc.ids.dtype)
            ids[0] = cls_id
            ids[1:len(a_ids) + 1] = a_ids
            ids[len(a_ids) + 1] = sep_id
            ids[len(a_ids) + 2:-1] = b_ids
            ids[-1] = sep_id
            out.append(Example(ids, len(a_ids) + 2, is_random, index, chunk_start, a_end,
                               doc_b, b_start, b_end, chunk_end, target))
            chunk_start = i + 1
            target = _target_length(max_num_tokens, cfg.short_seq_prob, rng)
        i += 1
    return out


def create_examples(docs: Sequence[Document], cfg: DataConfig, cls_id: int, sep_id: int,
                    rng: random.Random, dropped: Counter | None = None) -> Iterator[Example]:
    """One pass over `docs` (already in shuffled order) in the reference's order.

    Documents with no sentences must be filtered out before (they cannot give an A segment).
    Callers run this once per dupe pass with a fresh RNG; Google's final shuffle of all
    instances is the caller's too (prepare.py shuffles a bucket's examples before writing).
    """
    for index in range(len(docs)):
        yield from examples_from_document(docs, index, cfg, cls_id, sep_id, rng, dropped)


def special_tokens_mask(example: Example) -> np.ndarray:
    """(num_tokens,) bool: the [CLS] and two [SEP] positions, never masking targets."""
    mask = np.zeros(example.num_tokens, dtype=bool)
    mask[[0, example.num_a_tokens - 1, example.num_tokens - 1]] = True
    return mask


def masking_config(cfg: DataConfig) -> MaskingConfig:
    return MaskingConfig(rate=cfg.mask_rate, whole_word=cfg.whole_word_masking,
                         max_predictions=cfg.max_predictions).validate()


MASK_CHUNK = 2048  # examples per masking call: vectorised, while the padded (B, T) batch stays a few MB


def mask_static_flat(values: np.ndarray, offsets: np.ndarray, num_a_tokens: np.ndarray, mcfg: MaskingConfig,
                     special: SpecialIds, vocab_size: int, seed: int, continuation: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Static masking of examples stored flat: example i is values[offsets[i]:offsets[i + 1]].

    Returns (masked values, same layout; targets per example (B,); target positions (M,),
    ascending within each example; the ORIGINAL ids there (M,)). Selection is
    bert_core.masking.mask_tokens (the dynamic-masking code, so both kinds select targets
    identically); the result is a function of `seed` and the example order. No per-example
    Python: a shard's examples are masked in a few vectorised calls.
    """
    import torch  # see masking_config

    from bert_core.masking import IGNORE_INDEX, mask_tokens

    generator = torch.Generator().manual_seed(seed % 2**63)
    offsets = np.asarray(offsets, dtype=np.int64)
    masked_values = np.array(values, copy=True)
    counts = np.zeros(len(offsets) - 1, dtype=np.int64)
    positions, originals = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for start in range(0, len(offsets) - 1, MASK_CHUNK):
        stop = min(start + MASK_CHUNK, len(offsets) - 1)
        lengths = np.diff(offsets[start:stop + 1])
        rows = np.arange(stop - start)
        real = np.arange(lengths.max()) < lengths[:, None]  # (B, T)
        ids = np.full(real.shape, special.pad, dtype=np.int64)
        span = slice(offsets[start], offsets[stop])
        ids[real] = values[span]  # row-major boolean indexing walks the flat layout in order
        structure = ~real
        structure[rows, 0] = structure[rows, lengths - 1] = True
        structure[rows, num_a_tokens[start:stop] - 1] = True
        structure |= np.isin(ids, special.never_targets)  # "[MASK]" in the text too, as the dynamic collator
        masked, labels = mask_tokens(torch.from_numpy(ids), torch.from_numpy(structure), mcfg, special.mask,
                                     vocab_size, generator, continuation=continuation, special_ids=special.all)
        selected = labels.numpy() != IGNORE_INDEX
        masked_values[span] = masked.numpy()[real]
        r, c = np.nonzero(selected)  # row-major, so each row's positions come out ascending
        counts[start:stop] = selected.sum(1)
        positions.append(c)
        originals.append(ids[r, c])
    return masked_values, counts, np.concatenate(positions), np.concatenate(originals)


def mask_static(examples: Sequence[Example], mcfg: MaskingConfig, special: SpecialIds, vocab_size: int,
                seed: int, continuation: np.ndarray | None = None) -> None:
    """Static masking in place: input_ids get the 80/10/10 replacements, and masked_positions /
    masked_ids (the ORIGINAL ids there) become the labels the collator rebuilds.

    The per-example form of `mask_static_flat` (the pipeline masks a shard's flat columns).
    """
    if not examples:
        return
    lengths = np.fromiter((e.num_tokens for e in examples), dtype=np.int64, count=len(examples))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    num_a = np.fromiter((e.num_a_tokens for e in examples), dtype=np.int64, count=len(examples))
    values, counts, positions, originals = mask_static_flat(
        np.concatenate([e.input_ids for e in examples]), offsets, num_a, mcfg, special, vocab_size, seed,
        continuation)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    for i, e in enumerate(examples):
        e.input_ids = values[offsets[i]:offsets[i + 1]]
        e.masked_positions = positions[bounds[i]:bounds[i + 1]]
        e.masked_ids = originals[bounds[i]:bounds[i + 1]]


NSP_LOW_SHARE = 0.8  # random-next pairs under this share of data.nsp_random_prob are said (both checks below)
NSP_CHANCE = 1e-3  # ... in a held-out set only where fair draws come that short less often than this
ALONE_TRAIN_SHARE = 0.05  # train examples in shards of one document (all "next") that nsp_warning names


def nsp_warning(cfg: DataConfig, counts: dict, shards: dict) -> str | None:
    """A line when random-next pairs fall well below data.nsp_random_prob, in all (`counts`) or in the held-out split
    (its shards' rows): B is drawn from the shard's other documents, and a shard of one document has none
    (BooksCorpus's one-sentence-a-line books are cut into 8 MiB documents, ~2 to a ~4M-token shard), so its pairs are
    all contiguous and NSP sees fewer negatives. The held-out split is ~2% of the documents, often one shard of one
    or two of them: its NSP accuracy then scores the "follows" class alone, which a head that always says so meets.
    Where the share in all passes, train shards of one document are still named when they hold over ALONE_TRAIN_SHARE
    of the train examples (BooksCorpus as two 2.2 GB files: 66 of 268 shards, 9.7%, whose pairs are all "next")."""
    if not cfg.nsp_random_prob or not counts["examples"]:
        return None
    low, share = NSP_LOW_SHARE * cfg.nsp_random_prob, counts["random_next"] / counts["examples"]
    if share < low:
        rows = shards["train"] + shards["eval"]
        alone = sum(s["documents"] == 1 for s in rows)
        return (f"random-next pairs are {share:.1%} of examples ({counts['random_next']} of {counts['examples']}), "
                f"not the {cfg.nsp_random_prob:.0%} of data.nsp_random_prob: {alone} of {len(rows)} shards hold one "
                f"document (no other to draw a random B from), {counts['documents_kept'] / len(rows):.1f} documents "
                f"a shard on average; set data.num_shards lower, or give the corpus smaller documents (blank lines)")
    lines = []
    train = sum(s["rows"] for s in shards["train"])
    alone = [s["rows"] for s in shards["train"] if s["documents"] == 1]
    if train and sum(alone) > ALONE_TRAIN_SHARE * train:
        lines.append(f"{len(alone)} of {len(shards['train'])} train shards hold one document, so all their pairs are "
                     f"'next' (no other document to draw a random B from): {sum(alone) / train:.1%} of the train "
                     f"examples ({sum(alone)} of {train}); the documents are too large for the shards (a text file "
                     f"without blank lines is cut into 8 MiB documents): give the corpus blank lines between documents "
                     f"(data.text_documents=blank_lines where they end one), or set data.num_shards lower")
    held_out = sum(s["rows"] for s in shards["eval"])
    random_next = sum(s["random_next"] for s in shards["eval"])
    if held_out and short_beyond_chance(random_next, held_out, cfg.nsp_random_prob):
        alone = [s["rows"] for s in shards["eval"] if s["documents"] == 1]
        # lone documents are the cause to name where there are some; without, a shard of several documents draws
        # its random Bs at the configured rate, and no cause is claimed
        few = (f"{len(alone)} of them alone in a shard ({sum(alone)} rows, all 'next': no other document to draw a "
               f"random B from)") if alone else "none of them alone in a shard"
        lines.append(f"the held-out split's random-next pairs are {random_next / held_out:.1%} ({random_next} of "
                     f"{held_out}), not the {cfg.nsp_random_prob:.0%} of data.nsp_random_prob: its "
                     f"{len(shards['eval'])} shard(s) hold {sum(s['documents'] for s in shards['eval'])} document(s), "
                     f"{few}, so its NSP accuracy scores mostly the 'follows' class; set data.eval_fraction higher"
                     + (", or give the corpus smaller documents (blank lines)" if alone else ""))
    return "; and ".join(lines) or None


def short_beyond_chance(random_next: int, n: int, p: float) -> bool:
    """Whether `random_next` of `n` pairs is under NSP_LOW_SHARE x p, and further under it than a fair draw at p
    comes but NSP_CHANCE of the time. The share alone said it of small sets by chance: a split of 6 documents, free
    to draw every B, gives ~15 pairs, under 0.8 x 50% random in 27% of seeds. Shards of one document (every pair
    "next") are the usual cause, but the bound judges counts, not shards: a split can fall short with none, so the
    lines name lone documents only where there are some.

    P(X <= k), X ~ Binomial(n, p), is at most its k-th term over (1 - r): going down from k, each term is at most
    r = k (1 - p) / ((n - k + 1) p) times the one above (r < 1 under 0.8 n p). An upper bound, in O(1) for any n:
    the test errs towards silence."""
    if random_next >= NSP_LOW_SHARE * p * n:
        return False
    if p >= 1:  # every pair should be random: a "next" one is never chance
        return True
    k, q = random_next, 1 - p
    log_term = (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                + k * math.log(p) + (n - k) * math.log(q))
    return log_term - math.log1p(-k * q / ((n - k + 1) * p)) < math.log(NSP_CHANCE)


def held_out_nsp_warning(labels, nsp_random_prob: float) -> str | None:
    """A line when the held-out rows pretraining scores (the eval split's first ones: jobs/pretrain._eval_rows) hold
    well under data.nsp_random_prob of random-next pairs, past chance (short_beyond_chance). nsp_warning judges the
    whole eval split, and its first shard can hold one document whose pairs are all "next" while the split passes
    (BooksCorpus: ~2 documents a shard): eval/nsp_acc then scores the "follows" class alone, which a head that always
    says so meets."""
    labels = np.asarray(labels)
    if not nsp_random_prob or not short_beyond_chance(int(labels.sum()), labels.size, nsp_random_prob):
        return None
    return (f"the held-out rows pretraining scores (the eval split's first {labels.size}) are {labels.mean():.1%} "
            f"random-next pairs, not the {nsp_random_prob:.0%} of data.nsp_random_prob: eval/nsp_acc measures "
            "little there; give the corpus smaller documents (blank lines), or raise data.eval_fraction")
