"""Masking statistics over >1M tokens, whole-word integrity, determinism, and the collator."""

import numpy as np
import pytest
import torch

from bert_core.config import ConfigError
from bert_core.masking import (IGNORE_INDEX, MaskingConfig, PretrainingCollator, mask_example_static,
                               mask_tokens)
from bert_core.tokenizer import SpecialIds

# The original uncased vocab's layout: specials are NOT ids 0..4, so "id >= 5" is no safe test.
V = 30522
SPECIAL = SpecialIds(pad=0, unk=100, cls=101, sep=102, mask=103)
FIRST_PIECE = 20000  # synthetic vocab: ids >= this are "##" continuation pieces
CONTINUATION = np.arange(V) >= FIRST_PIECE


def make_batch(n, T=128, seed=0, vocab=V, low=999):
    """(n, T) ids laid out as [CLS] A [SEP] B [SEP] [PAD]..., with random lengths."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(16, T + 1, n)
    num_a = (lengths * rng.uniform(0.2, 0.8, n)).astype(int)
    ids = rng.integers(low, vocab, (n, T))
    pos = np.arange(T)[None, :]
    ids[:, 0] = SPECIAL.cls
    ids[(pos == num_a[:, None]) | (pos == lengths[:, None] - 1)] = SPECIAL.sep
    ids[pos >= lengths[:, None]] = SPECIAL.pad
    special = np.isin(ids, [SPECIAL.pad, SPECIAL.cls, SPECIAL.sep])
    return ids, special, lengths, num_a


def run_mask(ids, special, cfg, seed=0, vocab=V, continuation=CONTINUATION):
    masked, labels = mask_tokens(torch.from_numpy(ids), torch.from_numpy(special), cfg, SPECIAL.mask, vocab,
                                 torch.Generator().manual_seed(seed),
                                 None if continuation is None else torch.from_numpy(continuation),
                                 special_ids=SPECIAL.all)
    return masked.numpy(), labels.numpy()


@pytest.fixture(scope="module")
def big():
    ids, special, _, _ = make_batch(16384)  # ~1.13M real tokens
    assert (~special).sum() > 1_000_000
    return ids, special


def expected_budget(num_real, rate, cap=None):
    b = np.maximum(np.floor(num_real * rate + 0.5), 1).astype(int)
    return b if cap is None else np.minimum(b, cap)


@pytest.mark.parametrize("whole_word", [False, True])
@pytest.mark.parametrize("rate", [0.15, 0.3])
def test_selected_share_and_80_10_10_split(big, rate, whole_word):
    ids, special = big
    masked, labels = run_mask(ids, special, MaskingConfig(rate=rate, whole_word=whole_word))
    selected = labels != IGNORE_INDEX
    share = selected.sum() / (~special).sum()
    assert abs(share / rate - 1) < 0.005, share
    if not whole_word:  # exact per-sequence budget, not a Bernoulli draw
        np.testing.assert_array_equal(selected.sum(1), expected_budget((~special).sum(1), rate))
    assert not (selected & special).any(), "special or pad position selected"
    np.testing.assert_array_equal(labels[selected], ids[selected])
    np.testing.assert_array_equal(masked[~selected], ids[~selected])
    to_mask = masked[selected] == SPECIAL.mask
    unchanged = masked[selected] == ids[selected]
    assert abs(to_mask.mean() - 0.8) < 0.01
    assert abs(unchanged.mean() - 0.1) < 0.01
    assert abs((~to_mask & ~unchanged).mean() - 0.1) < 0.01


def test_random_replacements_avoid_scattered_special_ids():
    # Tiny vocab so a sampler that ignored the special set would hit one ~8% of the time.
    vocab = 64
    special_ids = SpecialIds(pad=0, unk=7, cls=20, sep=33, mask=63)
    rng = np.random.default_rng(3)
    ids = rng.choice(np.setdiff1d(np.arange(vocab), special_ids.all), size=(4096, 64))
    ids[:, 0], ids[:, -1] = special_ids.cls, special_ids.sep
    special = np.isin(ids, [special_ids.cls, special_ids.sep])
    cfg = MaskingConfig(mask_token_prob=0.0, random_token_prob=1.0)
    masked, labels = mask_tokens(torch.from_numpy(ids), torch.from_numpy(special), cfg, special_ids.mask,
                                 vocab, torch.Generator().manual_seed(0), special_ids=special_ids.all)
    replacements = masked.numpy()[labels.numpy() != IGNORE_INDEX]
    assert replacements.size > 30000
    assert not np.isin(replacements, special_ids.all).any()
    # Every non-special id is reachable, roughly uniformly.
    counts = np.bincount(replacements, minlength=vocab)[np.setdiff1d(np.arange(vocab), special_ids.all)]
    assert counts.min() > 0.7 * counts.mean()


def words_of(row_ids, row_special):
    """Index groups: a non-special token plus the "##" pieces right after it."""
    words, current = [], None
    for i, (tok, spec) in enumerate(zip(row_ids, row_special)):
        if spec:
            current = None
        elif CONTINUATION[tok] and current is not None:
            current.append(i)
        else:
            current = [i]
            words.append(current)
    return words


def test_whole_word_masking_selects_only_whole_words():
    ids, special, _, _ = make_batch(512, seed=5)
    _, labels = run_mask(ids, special, MaskingConfig(whole_word=True, max_predictions=20))
    selected = labels != IGNORE_INDEX
    multi_piece_selected = 0
    for b in range(len(ids)):
        for word in words_of(ids[b], special[b]):
            flags = selected[b, word]
            assert flags.all() or not flags.any(), (b, word, flags)
            multi_piece_selected += len(word) > 1 and flags.all()
    assert multi_piece_selected > 100  # the test exercised multi-piece words
    assert selected.sum(1).max() <= 20


def test_max_predictions_caps_targets(big):
    ids, special = big
    _, labels = run_mask(ids[:2048], special[:2048], MaskingConfig(rate=0.3, max_predictions=12))
    counts = (labels != IGNORE_INDEX).sum(1)
    np.testing.assert_array_equal(counts, expected_budget((~special[:2048]).sum(1), 0.3, cap=12))
    assert counts.max() == 12


def test_same_seed_same_masks_different_seed_different():
    ids, special, _, _ = make_batch(256, seed=2)
    cfg = MaskingConfig(whole_word=True)
    a, b, c = (run_mask(ids, special, cfg, seed=s) for s in (7, 7, 8))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert (a[1] != c[1]).any()
    g = torch.Generator().manual_seed(7)  # the generator advances: consecutive calls differ
    args = (torch.from_numpy(ids), torch.from_numpy(special), cfg, SPECIAL.mask, V, g, torch.from_numpy(CONTINUATION))
    assert not torch.equal(mask_tokens(*args)[1], mask_tokens(*args)[1])


def test_whole_word_without_continuation_mask_is_an_error():
    ids, special, _, _ = make_batch(4)
    with pytest.raises(ValueError, match="continuation"):
        run_mask(ids, special, MaskingConfig(whole_word=True), continuation=None)


def test_static_example_masking():
    ids, special, lengths, _ = make_batch(1, seed=9)
    cfg = MaskingConfig(max_predictions=20)
    masked, positions, originals = mask_example_static(ids[0], special[0], cfg, SPECIAL.mask, V,
                                                       np.random.default_rng(0), special_ids=SPECIAL.all)
    assert len(positions) == expected_budget((~special[0]).sum(), 0.15, cap=20)
    assert np.all(np.diff(positions) > 0) and not special[0, positions].any()
    np.testing.assert_array_equal(originals, ids[0, positions])
    untouched = np.setdiff1d(np.arange(ids.shape[1]), positions)
    np.testing.assert_array_equal(masked[untouched], ids[0, untouched])
    again = mask_example_static(ids[0], special[0], cfg, SPECIAL.mask, V, np.random.default_rng(0),
                                special_ids=SPECIAL.all)
    np.testing.assert_array_equal(again[1], positions)
    np.testing.assert_array_equal(again[0], masked)


@pytest.mark.parametrize("kw,message", [
    (dict(rate=0.0), "rate must be in (0, 1)"), (dict(rate=1.0), "rate must be in (0, 1)"),
    (dict(rate=1.5), "rate must be in (0, 1)"),
    (dict(rate=True), "rate must be a number"), (dict(rate="0.15"), "rate must be a number"),
    (dict(mask_token_prob=-0.1), "mask_token_prob must be in [0, 1]"),
    (dict(mask_token_prob=0.0, random_token_prob=1.5), "random_token_prob must be in [0, 1]"),
    (dict(mask_token_prob=0.9, random_token_prob=0.2),
     "mask_token_prob + {where}.random_token_prob must be <= 1"),
    (dict(max_predictions=0), "max_predictions must be null or an integer >= 1"),
    (dict(max_predictions=True), "max_predictions must be null or an integer >= 1"),
    (dict(max_predictions=2.5), "max_predictions must be null or an integer >= 1")])
def test_config_validation_names_the_field_by_its_place_in_the_config(kw, message):
    for where in ("masking", "train.masking"):  # the default, and the pretraining job's section
        args = () if where == "masking" else (where,)
        with pytest.raises(ConfigError) as err:
            MaskingConfig(**kw).validate(*args)
        assert str(err.value).startswith(f"{where}." + message.format(where=where)), str(err.value)


@pytest.mark.parametrize("kw", [dict(), dict(mask_token_prob=0.0, random_token_prob=0.0),
                                dict(mask_token_prob=1.0, random_token_prob=0.0),
                                dict(mask_token_prob=0.0, random_token_prob=1.0),
                                dict(mask_token_prob=0.5, random_token_prob=0.5), dict(rate=0.999, max_predictions=1)])
def test_config_validation_accepts_the_closed_ends_of_each_range(kw):
    assert MaskingConfig(**kw).validate() == MaskingConfig(**kw)


@pytest.mark.parametrize("whole_word", [False, True])
def test_a_sequence_with_one_real_token_gets_one_target_and_one_with_none_gets_none(whole_word):
    ids, special, _, _ = make_batch(4, T=32, seed=1)
    ids[0, 2:], special[0, 2:] = SPECIAL.pad, True  # [CLS] x [PAD]...: one real token
    ids[1, :], special[1, :] = SPECIAL.pad, True  # padding only
    _, labels = run_mask(ids, special, MaskingConfig(whole_word=whole_word))
    counts = (labels != IGNORE_INDEX).sum(1)
    assert counts[:2].tolist() == [1, 0]
    assert labels[0, 1] == ids[0, 1]
    if not whole_word:
        np.testing.assert_array_equal(counts[2:], expected_budget((~special[2:]).sum(1), 0.15))


def test_whole_word_masking_of_one_word_sequences_takes_the_whole_word():
    """Every row holds a single word of 1-3 pieces; the rate gives a budget that fits it, so it is selected whole."""
    rows = [[SPECIAL.cls, 1000, SPECIAL.sep], [SPECIAL.cls, 1001, FIRST_PIECE, SPECIAL.sep],
            [SPECIAL.cls, 1002, FIRST_PIECE + 1, FIRST_PIECE + 2, SPECIAL.sep]]
    ids = np.full((3, 6), SPECIAL.pad)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    special = np.isin(ids, [SPECIAL.pad, SPECIAL.cls, SPECIAL.sep])
    _, labels = run_mask(ids, special, MaskingConfig(rate=0.9, whole_word=True))
    np.testing.assert_array_equal(labels != IGNORE_INDEX, ~special)


def random_replacements(ids, special, vocab, mask_id, special_ids, seed=0):
    cfg = MaskingConfig(mask_token_prob=0.0, random_token_prob=1.0, rate=0.5)
    masked, labels = mask_tokens(torch.from_numpy(ids), torch.from_numpy(special), cfg, mask_id, vocab,
                                 torch.Generator().manual_seed(seed), special_ids=special_ids)
    return masked.numpy()[labels.numpy() != IGNORE_INDEX]


def test_random_replacements_reach_every_non_special_id_evenly_id_0_included():
    # A vocab of 8 where 5 ids are special: most first draws are rejected and drawn again.
    special_ids = SpecialIds(pad=1, unk=2, cls=3, sep=4, mask=5)
    rng = np.random.default_rng(0)
    ids = rng.choice([0, 6, 7], size=(2048, 16))
    ids[:, 0], ids[:, -1] = special_ids.cls, special_ids.sep
    replacements = random_replacements(ids, np.isin(ids, [3, 4]), 8, special_ids.mask, special_ids.all)
    counts = np.bincount(replacements, minlength=8)
    assert counts[[1, 2, 3, 4, 5]].sum() == 0
    assert counts[[0, 6, 7]].min() > 0.9 * counts[[0, 6, 7]].mean(), counts


def test_without_special_ids_replacements_avoid_the_masked_structure_and_mask_but_span_the_vocab():
    """The fallback when no special ids are given: whatever the special mask covers, plus [MASK], is never a random
    replacement; any other id of the vocabulary is, also ids the batch does not contain."""
    vocab, pad, cls, sep, mask = 32, 0, 20, 21, 22
    rng = np.random.default_rng(1)
    ids = rng.integers(10, 20, size=(1024, 16))  # text uses ids 10..19 only
    ids[:, 0], ids[:, -2], ids[:, -1] = cls, sep, pad
    replacements = random_replacements(ids, np.isin(ids, [pad, cls, sep]), vocab, mask, special_ids=None)
    assert set(replacements.tolist()) == set(range(vocab)) - {pad, cls, sep, mask}


def test_static_example_masking_whole_words_and_special_ids():
    rng = np.random.default_rng(0)
    ids, special, _, _ = make_batch(64, T=48, seed=3)
    for row, flags in zip(ids, special):
        masked, positions, _ = mask_example_static(row, flags, MaskingConfig(whole_word=True, rate=0.3),
                                                   SPECIAL.mask, V, rng, continuation=CONTINUATION,
                                                   special_ids=SPECIAL.all)
        selected = np.zeros(len(row), dtype=bool)
        selected[positions] = True
        for word in words_of(row, flags):
            assert selected[word].all() or not selected[word].any()
    # Random replacements avoid the special ids given ([UNK] too), and without them, the masked structure and [MASK].
    vocab, special_ids = 16, SpecialIds(pad=0, unk=9, cls=10, sep=11, mask=12)
    cfg = MaskingConfig(mask_token_prob=0.0, random_token_prob=1.0, rate=0.5)
    for given, never in ((special_ids.all, {0, 9, 10, 11, 12}), (None, {0, 10, 11, 12})):
        seen = []
        for _ in range(300):
            row = np.concatenate([[10], rng.integers(1, 3, 18), [11, 0]])  # text: ids 1 and 2 only
            masked, positions, _ = mask_example_static(row, np.isin(row, [0, 10, 11]), cfg, 12, vocab, rng,
                                                       special_ids=given)
            seen += masked[positions].tolist()
        assert set(seen) == set(range(vocab)) - never


# ---- collator --------------------------------------------------------------------------------

def ray_batch(n, seed=0, static=False, max_len=60):
    """Rows as Ray Data's iter_batches(batch_format="numpy") gives them: object arrays of 1-D arrays."""
    rng = np.random.default_rng(seed)
    rows, num_a, positions, originals = [], [], [], []
    for _ in range(n):
        a, b = rng.integers(1, max_len // 2 - 1, 2)
        row = np.concatenate([[SPECIAL.cls], rng.integers(999, V, a), [SPECIAL.sep],
                              rng.integers(999, V, b), [SPECIAL.sep]])
        num_a.append(a + 2)
        if static:
            special = np.isin(row, [SPECIAL.cls, SPECIAL.sep])
            row, pos, orig = mask_example_static(row, special, MaskingConfig(), SPECIAL.mask, V, rng,
                                                 special_ids=SPECIAL.all)
            positions.append(pos)
            originals.append(orig)
        rows.append(row)

    def objects(arrays):
        out = np.empty(len(arrays), dtype=object)
        out[:] = arrays
        return out
    batch = {"input_ids": objects(rows), "num_a_tokens": np.array(num_a),
             "next_sentence_label": rng.integers(0, 2, n), "example_id": np.arange(100, 100 + n)}
    if static:
        batch["masked_positions"], batch["masked_ids"] = objects(positions), objects(originals)
    return batch


def make_collator(cfg=MaskingConfig(), seed=0, **kw):
    return PretrainingCollator(SPECIAL, V, max_seq_len=128, cfg=cfg, seed=seed, **kw)


def test_collator_shapes_padding_segments_and_attention():
    batch = ray_batch(16)
    out = make_collator()(batch)
    lengths = np.array([len(r) for r in batch["input_ids"]])
    B, T = out["input_ids"].shape
    assert B == 16 and T % 8 == 0 and T - 8 < lengths.max() <= T
    for key in ("token_type_ids", "attention_mask", "mlm_labels"):
        assert out[key].shape == (B, T) and out[key].dtype == torch.int64
    for i, (row, n_a) in enumerate(zip(batch["input_ids"], batch["num_a_tokens"])):
        n = len(row)
        assert out["attention_mask"][i].tolist() == [1] * n + [0] * (T - n)
        assert out["token_type_ids"][i].tolist() == [0] * n_a + [1] * (n - n_a) + [0] * (T - n)
        assert (out["input_ids"][i, n:] == SPECIAL.pad).all()
        labelled = out["mlm_labels"][i] != IGNORE_INDEX
        # Targets only on real, non-special tokens; labels hold the original ids.
        assert labelled.sum() == expected_budget(n - 3, 0.15)  # [CLS] and two [SEP] excluded
        assert torch.equal(out["mlm_labels"][i][labelled], torch.from_numpy(row)[labelled[:n]])
        kept = ~labelled[:n]
        assert torch.equal(out["input_ids"][i, :n][kept], torch.from_numpy(row)[kept])
        assert not labelled[n:].any() and labelled[[0, n_a - 1, n - 1]].sum() == 0
    assert out["next_sentence_label"].tolist() == batch["next_sentence_label"].tolist()
    assert out["example_id"].tolist() == list(range(100, 116))


def test_collator_length_caps_and_multiple():
    batch = ray_batch(4, max_len=120)
    out = PretrainingCollator(SPECIAL, V, max_seq_len=121, cfg=MaskingConfig(), seed=0, pad_to_multiple_of=64)(batch)
    assert out["input_ids"].shape[1] == 121  # rounded up to 128, capped at max_seq_len
    long = ray_batch(1, max_len=300)
    with pytest.raises(ValueError, match="max_seq_len"):
        make_collator()(long)


def test_collator_static_labels_reproduce_stored_positions():
    batch = ray_batch(32, static=True)
    out = make_collator(cfg=None)(batch)
    for i in range(32):
        labelled = torch.nonzero(out["mlm_labels"][i] != IGNORE_INDEX).flatten().numpy()
        np.testing.assert_array_equal(labelled, batch["masked_positions"][i])
        np.testing.assert_array_equal(out["mlm_labels"][i, labelled].numpy(), batch["masked_ids"][i])
        # Stored ids already carry the replacements; the collator must not mask again.
        n = len(batch["input_ids"][i])
        np.testing.assert_array_equal(out["input_ids"][i, :n].numpy(), batch["input_ids"][i])


def test_collator_without_any_masking_source_raises():
    with pytest.raises(ValueError, match="masked_positions"):
        make_collator(cfg=None)(ray_batch(2))


def test_collator_resume_reproduces_masks():
    batches = [ray_batch(8, seed=s) for s in range(4)]
    first = make_collator(seed=11)
    outs = [first(b) for b in batches]
    fresh = make_collator(seed=11)
    at_0, at_1 = fresh(batches[0]), fresh(batches[0])  # one batch, drawn as the 1st and as the 2nd
    assert torch.equal(at_0["mlm_labels"], outs[0]["mlm_labels"])  # same seed, same index: same masks
    assert not torch.equal(at_1["mlm_labels"], at_0["mlm_labels"])  # the index alone moves them
    state = {"seed": 11, "batches_produced": 2}
    resumed = make_collator(seed=999)
    resumed.load_state_dict(state)
    for b, expected in zip(batches[2:], outs[2:]):
        got = resumed(b)
        assert torch.equal(got["input_ids"], expected["input_ids"])
        assert torch.equal(got["mlm_labels"], expected["mlm_labels"])
    assert resumed.state_dict() == first.state_dict() == {"seed": 11, "batches_produced": 4}
    other_seed = make_collator(seed=12)(batches[0])
    assert not torch.equal(other_seed["mlm_labels"], outs[0]["mlm_labels"])


def test_collator_whole_word_uses_continuation():
    batch = ray_batch(64, seed=4)
    out = make_collator(cfg=MaskingConfig(whole_word=True), continuation=CONTINUATION)(batch)
    labels = out["mlm_labels"].numpy()
    for i, row in enumerate(batch["input_ids"]):
        special = np.isin(row, [SPECIAL.cls, SPECIAL.sep])
        for word in words_of(row, special):
            flags = labels[i, word] != IGNORE_INDEX
            assert flags.all() or not flags.any()
    with pytest.raises(ValueError, match="continuation"):
        make_collator(cfg=MaskingConfig(whole_word=True))


@pytest.mark.parametrize("multiple", [None, 0, 1])
def test_collator_pads_only_to_the_longest_row_when_no_multiple_is_asked(multiple):
    # An odd longest row tells padding to 1 from padding to 2.
    batch = next(b for b in map(ray_batch, [8] * 20, range(20)) if max(len(r) for r in b["input_ids"]) % 2)
    longest = max(len(r) for r in batch["input_ids"])
    out = make_collator(pad_to_multiple_of=multiple)(batch)
    assert out["input_ids"].shape[1] == longest


def shard_batch(n, seed=0):
    """The batch as the shards store it (pipelines/shards.py): uint16 ids, int16 num_a_tokens, int8 NSP labels."""
    batch = ray_batch(n, seed=seed)
    rows = np.empty(n, dtype=object)
    rows[:] = [r.astype(np.uint16) for r in batch["input_ids"]]
    return {**batch, "input_ids": rows, "num_a_tokens": batch["num_a_tokens"].astype(np.int16),
            "next_sentence_label": batch["next_sentence_label"].astype(np.int8)}


def test_collator_gives_the_model_int64_tensors_whatever_the_shard_dtypes():
    batch = shard_batch(8)
    out = make_collator()(batch)
    for key in ("input_ids", "token_type_ids", "attention_mask", "mlm_labels", "next_sentence_label", "example_id"):
        assert isinstance(out[key], torch.Tensor) and out[key].dtype == torch.int64, key
    assert out["next_sentence_label"].tolist() == batch["next_sentence_label"].tolist()
    assert out["example_id"].tolist() == batch["example_id"].tolist()


def test_collator_passes_non_integer_example_ids_through():
    batch = ray_batch(4)
    batch["example_id"] = np.array(["a-0", "a-1", "b-0", "b-1"])
    out = make_collator()(batch)
    assert list(out["example_id"]) == ["a-0", "a-1", "b-0", "b-1"]


@pytest.mark.parametrize("kind", ["dynamic", "whole_word", "static"])
def test_collator_turns_an_empty_batch_into_zero_row_tensors(kind):
    collator = {"dynamic": make_collator(), "whole_word": make_collator(cfg=MaskingConfig(whole_word=True),
                                                                        continuation=CONTINUATION),
                "static": make_collator(cfg=None)}[kind]
    out = collator(ray_batch(0, static=kind == "static"))
    for key in ("input_ids", "token_type_ids", "attention_mask", "mlm_labels"):
        assert out[key].shape[0] == 0 and out[key].dtype == torch.int64
    assert out["next_sentence_label"].shape == (0,) and out["mlm_positions"].numel() == 0


def test_packing_turns_an_empty_batch_into_zero_row_tensors():
    out = make_collator(packing=True)(ray_batch(0))
    for key in ("input_ids", "attention_mask", "mlm_labels", "sequence_ids", "position_ids"):
        assert out[key].shape[0] == 0 and out[key].dtype == torch.int64
    assert out["mlm_positions"].numel() == 0



@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_mask_tokens_returns_its_tensors_on_the_device_of_its_input():
    ids, special, _, _ = make_batch(8, T=32)
    masked, labels = mask_tokens(torch.from_numpy(ids).cuda(), torch.from_numpy(special).cuda(), MaskingConfig(),
                                 SPECIAL.mask, V, torch.Generator().manual_seed(0), special_ids=SPECIAL.all)
    assert masked.device.type == labels.device.type == "cuda"


def test_packing_puts_every_masked_row_once_into_fewer_fuller_rows():
    """train.packing: the same rows, masked exactly as unpacked (same seed, same draws), first-fit into rows of
    max_seq_len; each sequence keeps its tokens and targets in order, with its own sequence id and positions
    from 0; padding only at the end of a row."""
    batch = ray_batch(24)
    plain, packed = make_collator(seed=3)(batch), make_collator(seed=3, packing=True)(batch)
    lengths = [len(r) for r in batch["input_ids"]]
    B, T = packed["input_ids"].shape
    assert B < 24 and T <= 128 and sum(lengths) <= B * 128
    assert {"token_type_ids", "next_sentence_label"}.isdisjoint(packed)  # MLM-only rows
    seen = []
    for row in range(B):
        seq = packed["sequence_ids"][row]
        real = int((seq > 0).sum())
        assert packed["attention_mask"][row].tolist() == [1] * real + [0] * (T - real)
        assert seq[:real].tolist() == sorted(seq[:real].tolist()) and seq[0] == 1
        for k in range(1, int(seq.max()) + 1):
            at = (seq == k).nonzero().flatten()
            assert at.tolist() == list(range(int(at[0]), int(at[-1]) + 1))  # contiguous
            assert packed["position_ids"][row, at].tolist() == list(range(len(at)))
            seen.append((packed["input_ids"][row, at], packed["mlm_labels"][row, at]))
    from bert_core.masking import pack_rows

    order = [i for members in pack_rows(np.array(lengths), 128) for i in members]  # the rows, bin by bin
    assert len(seen) == 24 and sorted(order) == list(range(24))
    for i, (ids, labels) in zip(order, seen):
        n = lengths[i]
        assert torch.equal(ids, plain["input_ids"][i, :n]) and torch.equal(labels, plain["mlm_labels"][i, :n])
    flat = packed["mlm_labels"].flatten()
    assert torch.equal(packed["mlm_positions"], (flat != IGNORE_INDEX).nonzero().flatten())


def test_pack_rows_is_first_fit_and_never_overfills():
    from bert_core.masking import pack_rows

    assert pack_rows(np.array([60, 70, 50, 10, 128, 5]), 128) == [[0, 2, 3, 5], [1], [4]]
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 129, 500)
    bins = pack_rows(lengths, 128)
    assert sorted(i for b in bins for i in b) == list(range(500))
    assert all(lengths[b].sum() <= 128 for b in bins)
