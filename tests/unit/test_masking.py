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


@pytest.mark.parametrize("field,kw", [("rate", dict(rate=0.0)), ("rate", dict(rate=1.5)),
                                      ("mask_token_prob", dict(mask_token_prob=-0.1)),
                                      ("random_token_prob", dict(mask_token_prob=0.9, random_token_prob=0.2)),
                                      ("max_predictions", dict(max_predictions=0))])
def test_config_validation_names_the_field(field, kw):
    with pytest.raises(ConfigError, match=field):
        MaskingConfig(**kw).validate()
    assert MaskingConfig().validate() == MaskingConfig()


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
    assert not torch.equal(outs[0]["mlm_labels"], make_collator(seed=11)(batches[1])["mlm_labels"])
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
