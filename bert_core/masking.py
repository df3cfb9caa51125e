"""Masked-LM target selection (BERT's 80/10/10 rule) and the pretraining batch collator.

One numpy core, `_mask_batch`, does the work for all three entry points: `mask_tokens` (torch,
batch time), `mask_example_static` (one sequence, preprocessing time, as NVIDIA's HDF5 files
store it) and `PretrainingCollator` (Ray Data numpy batches -> model tensors).

Selection follows Google's create_pretraining_data.py rather than HF's i.i.d. Bernoulli draw:
each sequence gets exactly round(rate * maskable tokens) targets (at least 1, at most
max_predictions), so the masked share is p on average with no per-batch noise, and the MLM
head never sees a sequence with wildly many targets, nor one with none, except under whole-word
masking: a short row whose every word has more pieces than its budget gets none (as in Google's
and HF's whole-word selection). Maskable tokens are the real ones less [CLS] and [SEP]: HF's draw
has that expectation; Google's count includes the three, one target more on some rows (~4% more
targets over rows of 8-128 tokens: an 18-token row gets 2 here, 3 there).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import torch

from bert_core.config import MaskingConfig  # its home is the light config module; importable from here as before
from bert_core.model import IGNORE_INDEX, host_packing  # IGNORE_INDEX: labels at unselected positions
from bert_core.tokenizer import SpecialIds


def _budget(num_real: np.ndarray, cfg: MaskingConfig) -> np.ndarray:
    # Round half up (not numpy's half-to-even) to match Python 2's round() in the original.
    budget = np.floor(num_real * cfg.rate + 0.5).astype(np.int64)
    budget = np.where(num_real > 0, np.maximum(budget, 1), 0)
    if cfg.max_predictions is not None:
        budget = np.minimum(budget, cfg.max_predictions)
    return budget


def _rank_within_rows(scores: np.ndarray) -> np.ndarray:
    """rank[b, i] = position of scores[b, i] in ascending order of its row."""
    order = np.argsort(scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(scores.shape[1])[None, :], axis=1)
    return ranks


def _select_tokens(candidate: np.ndarray, budget: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    # A uniformly random subset of exactly `budget` candidates per row: the first `budget`
    # candidates in a random order (non-candidates sort last).
    scores = np.where(candidate, rng.random(candidate.shape), 2.0)
    return candidate & (_rank_within_rows(scores) < budget[:, None])


def _select_words(candidate: np.ndarray, is_piece: np.ndarray, budget: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """Whole-word selection: shuffle words, take each that still fits the budget.

    The greedy skip-and-continue of create_pretraining_data.py (a word that would overshoot
    is skipped, later shorter words may still fit), vectorised over the batch.
    """
    B, T = candidate.shape
    prev_candidate = np.zeros_like(candidate)
    prev_candidate[:, 1:] = candidate[:, :-1]
    # A "##" piece right after [CLS]/[SEP] (a truncated word) starts a word of its own.
    starts = candidate & ~(is_piece & prev_candidate)
    word = np.cumsum(starts, axis=1) - 1  # (B, T) word index within the row, at candidates
    num_words = starts.sum(1)
    W = max(int(num_words.max(initial=0)), 1)
    rows = np.broadcast_to(np.arange(B)[:, None], (B, T))
    word_len = np.bincount((rows * W + word)[candidate], minlength=B * W).reshape(B, W)
    valid = np.arange(W)[None, :] < num_words[:, None]
    order = np.argsort(np.where(valid, rng.random((B, W)), 2.0), axis=1, kind="stable")
    len_in_order = np.take_along_axis(word_len, order, axis=1)
    taken_in_order = np.zeros((B, W), dtype=bool)
    total = np.zeros(B, dtype=np.int64)
    for k in range(W):  # W <= T sequential steps, each vectorised over the batch
        fits = (len_in_order[:, k] > 0) & (total + len_in_order[:, k] <= budget)
        taken_in_order[:, k] = fits
        total += np.where(fits, len_in_order[:, k], 0)
    taken = np.zeros((B, W), dtype=bool)
    np.put_along_axis(taken, order, taken_in_order, axis=1)
    return candidate & np.take_along_axis(taken, np.where(candidate, word, 0), axis=1)


def _random_ids(n: int, vocab_size: int, special_ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    # Sample and reject: special ids are a handful out of tens of thousands, so one redraw
    # round almost always suffices, and no (V,) table is built per call.
    out = rng.integers(0, vocab_size, size=n)
    bad = np.isin(out, special_ids)
    while bad.any():
        out[bad] = rng.integers(0, vocab_size, size=int(bad.sum()))
        bad = np.isin(out, special_ids)
    return out


def _mask_batch(ids: np.ndarray, special_mask: np.ndarray, cfg: MaskingConfig, mask_id: int,
                vocab_size: int, rng: np.random.Generator, continuation: np.ndarray | None,
                special_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B, T) ids -> (masked ids, bool selected). The shared core of every entry point."""
    candidate = ~special_mask
    budget = _budget(candidate.sum(1), cfg)
    if cfg.whole_word:
        if continuation is None:
            raise ValueError("whole-word masking needs the continuation mask (tokenizer.continuation_mask)")
        selected = _select_words(candidate, continuation[ids], budget, rng)
    else:
        selected = _select_tokens(candidate, budget, rng)
    # 80/10/10 is decided per token, also under whole-word masking (as the original does).
    u = rng.random(ids.shape)
    to_mask = selected & (u < cfg.mask_token_prob)
    to_random = selected & ~to_mask & (u < cfg.mask_token_prob + cfg.random_token_prob)
    masked = np.where(to_mask, mask_id, ids)
    masked[to_random] = _random_ids(int(to_random.sum()), vocab_size, special_ids, rng)
    return masked, selected


def _special_ids(ids: np.ndarray, special_mask: np.ndarray, mask_id: int,
                 special_ids: Iterable[int] | None) -> np.ndarray:
    if special_ids is not None:
        return np.unique(np.asarray(list(special_ids), dtype=np.int64))
    # Fallback: whatever sits under special_mask ([CLS], [SEP], [PAD]) plus [MASK]. Pass
    # special_ids=SpecialIds.all to also keep [UNK] out of random replacements.
    return np.unique(np.append(ids[special_mask], mask_id))


def _as_numpy_bool(mask) -> np.ndarray | None:
    if mask is None:
        return None
    if isinstance(mask, torch.Tensor):
        return mask.detach().cpu().numpy().astype(bool)
    return np.asarray(mask, dtype=bool)


def mask_tokens(input_ids: torch.Tensor, special_mask: torch.Tensor, cfg: MaskingConfig, mask_id: int,
                vocab_size: int, generator: torch.Generator, continuation: torch.Tensor | None = None,
                special_ids: Iterable[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids -> (masked ids, labels); labels are the original id at targets, -100 elsewhere.

    special_mask is True at [CLS]/[SEP]/pad positions, which are never selected. Deterministic
    from `generator`, which advances by one draw per call.
    """
    ids = input_ids.detach().cpu().numpy().astype(np.int64)
    special = special_mask.detach().cpu().numpy().astype(bool)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    masked, selected = _mask_batch(ids, special, cfg, mask_id, vocab_size, np.random.default_rng(seed),
                                   _as_numpy_bool(continuation), _special_ids(ids, special, mask_id, special_ids))
    labels = np.where(selected, ids, IGNORE_INDEX)
    device = input_ids.device
    return torch.from_numpy(masked).to(device), torch.from_numpy(labels).to(device)


def mask_example_static(ids: np.ndarray, special_mask: np.ndarray, cfg: MaskingConfig, mask_id: int,
                        vocab_size: int, rng: np.random.Generator, continuation: np.ndarray | None = None,
                        special_ids: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One (T,) sequence -> (masked ids, target positions ascending, original ids there).

    The stored form of static masking: the collator turns (positions, original ids) back into labels.
    """
    ids = np.asarray(ids, dtype=np.int64)[None, :]
    special = np.asarray(special_mask, dtype=bool)[None, :]
    masked, selected = _mask_batch(ids, special, cfg, mask_id, vocab_size, rng, _as_numpy_bool(continuation),
                                   _special_ids(ids, special, mask_id, special_ids))
    positions = np.flatnonzero(selected[0])
    return masked[0], positions, ids[0, positions]


def _stack_ragged(column) -> tuple[np.ndarray, np.ndarray]:
    """Object array of 1-D arrays (or a 2-D array) -> (concatenated values, lengths)."""
    rows = [np.asarray(r, dtype=np.int64).reshape(-1) for r in column]
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    values = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    return values, lengths


def masked_once(rows: dict[str, np.ndarray], collator: PretrainingCollator, chunk: int = 32) -> dict[str, np.ndarray]:
    """Dynamic-masked `rows` with masks drawn once by `collator`, `chunk` rows at a time from its first batch
    index, in the static form (PretrainingCollator.static): a held-out set whose masks do not depend on how it is
    later split over workers or cut into micro-batches."""
    collator.load_state_dict({"seed": collator.seed, "batches_produced": 0})
    parts = [collator.static({k: v[i:i + chunk] for k, v in rows.items()})
             for i in range(0, len(next(iter(rows.values()), ())), chunk)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else dict(rows)


def _ragged(rows: list[np.ndarray]) -> np.ndarray:
    """A 1-D object array of the 1-D `rows` (a list column as Ray Data's numpy batches hold it)."""
    out = np.empty(len(rows), dtype=object)
    out[:] = rows
    return out


def pack_rows(lengths: np.ndarray, capacity: int) -> list[list[int]]:
    """First fit, in the given order: row i goes into the first bin with room for lengths[i] more tokens.
    Returns the bins' row indices; every row is in exactly one bin, none over `capacity`."""
    bins: list[list[int]] = []
    fill: list[int] = []
    for i, n in enumerate(lengths.tolist()):
        for b, used in enumerate(fill):
            if used + n <= capacity:
                bins[b].append(i)
                fill[b] += n
                break
        else:
            bins.append([i])
            fill.append(n)
    return bins


class PretrainingCollator:
    """Ray Data numpy batch of examples -> padded model tensors with MLM and NSP labels.

    Input rows are "[CLS] A [SEP] B [SEP]" without padding (pipelines' example schema);
    output keys match BertForPreTraining's forward: input_ids, token_type_ids, attention_mask,
    mlm_labels (-100 except at targets), next_sentence_label, the host-built packing
    (unpad_indices, cu_seqlens, mlm_positions: `bert_core.model.host_packing`), and example_id when given.
    With `packing` (the modern recipe), rows packed several to a row instead: input_ids, attention_mask,
    mlm_labels, sequence_ids, position_ids and the host-built packing; no segments, NSP labels or example ids.

    Dynamic masks come from a generator seeded by (seed, batch index), so a collator restored
    with load_state_dict() reproduces exactly the masks the interrupted run would have drawn.
    Give each data-parallel worker its own seed (e.g. seed + rank). vocab_size is the
    tokenizer's, not a padded embedding size: random replacements are drawn below it.
    """

    def __init__(self, special: SpecialIds, vocab_size: int, max_seq_len: int,
                 cfg: MaskingConfig | None, seed: int, continuation=None, pad_to_multiple_of: int = 8,
                 packing: bool = False):
        self.special = special
        self.vocab_size = vocab_size
        self.max_seq_len = max_seq_len
        self.cfg = cfg.validate() if cfg is not None else None
        if self.cfg is not None and self.cfg.whole_word and continuation is None:
            raise ValueError("whole-word masking needs the continuation mask (tokenizer.continuation_mask)")
        self.seed = seed
        self.packing = packing
        self.continuation = _as_numpy_bool(continuation)
        self.pad_to_multiple_of = max(int(pad_to_multiple_of or 1), 1)
        self.batches_produced = 0
        self._special_ids = np.array(sorted(set(special.all)), dtype=np.int64)
        # Positions holding these are structure, not text: never MLM targets.
        self._structural_ids = np.array(special.never_targets, dtype=np.int64)

    def _packed(self, ids: np.ndarray, labels: np.ndarray, lengths: np.ndarray) -> dict[str, torch.Tensor]:
        """The masked rows packed several to a row of max_seq_len (the modern recipe's `train.packing`): the same
        tokens and targets in fewer, fuller rows, with `sequence_ids` (1, 2, ... per row; 0 = padding) and
        `position_ids` (restarting at each sequence) that keep every sequence's attention and positions its own
        (bert_core.modern). No segments or NSP labels: packing is for MLM-only training."""
        bins = pack_rows(lengths, self.max_seq_len)
        fill = max((int(lengths[b].sum()) for b in bins), default=0)
        m = self.pad_to_multiple_of
        T = min(-(-fill // m) * m, self.max_seq_len)
        shape = (len(bins), T)
        out_ids = np.full(shape, self.special.pad, dtype=np.int64)
        out_labels = np.full(shape, IGNORE_INDEX, dtype=np.int64)
        sequence_ids, position_ids = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
        for row, members in enumerate(bins):
            at = 0
            for k, i in enumerate(members, start=1):
                n = int(lengths[i])
                out_ids[row, at:at + n], out_labels[row, at:at + n] = ids[i, :n], labels[i, :n]
                sequence_ids[row, at:at + n], position_ids[row, at:at + n] = k, np.arange(n)
                at += n
        out = {"input_ids": torch.from_numpy(out_ids), "attention_mask": torch.from_numpy((sequence_ids > 0)
                                                                                           .astype(np.int64)),
               "mlm_labels": torch.from_numpy(out_labels), "sequence_ids": torch.from_numpy(sequence_ids),
               "position_ids": torch.from_numpy(position_ids)}
        out.update(host_packing(out["attention_mask"], out["mlm_labels"]))
        return out

    def state_dict(self) -> dict:
        return {"seed": self.seed, "batches_produced": self.batches_produced}

    def load_state_dict(self, state: dict) -> None:
        self.seed = int(state["seed"])
        self.batches_produced = int(state["batches_produced"])

    def _masked(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The batch's ids padded to (B, T), masked, with their MLM labels, and the row lengths; draws the
        collator's next masks (dynamic masking) or rebuilds the prepared ones (static)."""
        values, lengths = _stack_ragged(batch["input_ids"])
        B = len(lengths)
        if lengths.max(initial=0) > self.max_seq_len:
            raise ValueError(f"example of {lengths.max()} tokens exceeds max_seq_len={self.max_seq_len}; "
                             "examples must be built to fit (truncating here would drop the final [SEP])")
        m = self.pad_to_multiple_of
        T = min(-(-int(lengths.max(initial=1)) // m) * m, self.max_seq_len)
        real = np.arange(T)[None, :] < lengths[:, None]  # (B, T)
        ids = np.full((B, T), self.special.pad, dtype=np.int64)
        ids[real] = values  # row-major fill matches concatenation order

        labels = np.full((B, T), IGNORE_INDEX, dtype=np.int64)
        if "masked_positions" in batch:
            positions, counts = _stack_ragged(batch["masked_positions"])
            originals, _ = _stack_ragged(batch["masked_ids"])
            labels[np.repeat(np.arange(B), counts), positions] = originals
        elif self.cfg is not None:
            rng = np.random.default_rng([self.seed, self.batches_produced])
            special_mask = ~real | np.isin(ids, self._structural_ids)
            masked, selected = _mask_batch(ids, special_mask, self.cfg, self.special.mask, self.vocab_size,
                                           rng, self.continuation, self._special_ids)
            labels = np.where(selected, ids, IGNORE_INDEX)
            ids = masked
        else:
            raise ValueError("batch has no masked_positions (static masking) and the collator has no "
                             "MaskingConfig (dynamic masking): there would be no MLM targets")
        self.batches_produced += 1
        return ids, labels, lengths

    def static(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`batch` with the collator's next masks drawn into it in the static form (input_ids masked,
        masked_positions / masked_ids the originals there): rows that keep their masks however they are split or
        batched later, as a held-out set scored by any number of workers must."""
        ids, labels, lengths = self._masked(batch)
        rows = range(len(lengths))
        targets = [np.flatnonzero(labels[i, :lengths[i]] != IGNORE_INDEX) for i in rows]
        return {**batch, "input_ids": _ragged([ids[i, :lengths[i]] for i in rows]),
                "masked_positions": _ragged(targets), "masked_ids": _ragged([labels[i, t] for i, t in zip(rows, targets)])}

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        ids, labels, lengths = self._masked(batch)
        if self.packing:
            return self._packed(ids, labels, lengths)
        B, T = ids.shape
        real = np.arange(T)[None, :] < lengths[:, None]
        num_a = np.asarray(batch["num_a_tokens"], dtype=np.int64).reshape(B)
        token_type = real & (np.arange(T)[None, :] >= num_a[:, None])

        out = {
            "input_ids": torch.from_numpy(ids),
            "token_type_ids": torch.from_numpy(token_type.astype(np.int64)),
            "attention_mask": torch.from_numpy(real.astype(np.int64)),
            "mlm_labels": torch.from_numpy(labels),
            "next_sentence_label": torch.from_numpy(
                np.asarray(batch["next_sentence_label"], dtype=np.int64).reshape(B)),
        }
        # Packing built here, on the host, so the device step never waits to learn N or M.
        out.update(host_packing(out["attention_mask"], out["mlm_labels"]))
        if "example_id" in batch:
            example_id = np.asarray(batch["example_id"])
            out["example_id"] = torch.from_numpy(example_id.astype(np.int64)) \
                if np.issubdtype(example_id.dtype, np.integer) else example_id
        return out
