"""Exact deduplication: a 128-bit hash per cleaned text, duplicates found from (hash, order) pairs alone, so a
driver holds some 40 bytes a document (with a row key to mark it by) instead of the texts and no shuffle is needed."""

from __future__ import annotations

import collections
import hashlib
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from pipelines.clean import dedup_form
from pipelines.source_files import doc_order_key
from pipelines.sources import SAMPLE_CHARS


def content_hashes(texts: list[str]) -> np.ndarray:
    """(N, 2) uint64: a 128-bit blake2b of each text NFC-composed (clean.dedup_form), the identity exact dedup
    compares: a copy typed with combining accents is a duplicate of its precomposed original."""
    digests = b"".join(hashlib.blake2b(dedup_form(t).encode(), digest_size=16).digest() for t in texts)
    return np.frombuffer(digests, dtype=np.uint64).reshape(-1, 2)


def find_duplicates(hashes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(N,) bool: True where an earlier document in `order` (smaller first) has the same hash.

    Vectorised on (hash, order) pairs alone -- 24 bytes a document, so a driver holds those of
    tens of millions of documents without the texts (which is why no shuffle is needed).
    """
    idx = np.lexsort((order, hashes[:, 1], hashes[:, 0]))
    h = hashes[idx]
    same = (h[1:] == h[:-1]).all(axis=1)
    dup = np.zeros(len(order), dtype=bool)
    dup[idx[1:][same]] = True
    return dup


def drop_duplicates(ds: ray.data.Dataset) -> ray.data.Dataset:
    """Mark exact duplicates (same cleaned text) as "duplicate", keeping the smallest doc_id.

    Materialises the documents once (Ray spills to disk past the object store): the duplicate
    table needs a full pass, and callers consume documents several times anyway. Only
    (hash, doc_id, row key) of good documents come to the driver (`find_duplicates`). Rows are marked by their
    row key (_add_content_hash), not their doc_id: two rows may share one (a page twice in one dump, an export of
    overlapping queries), and marking every row of a duplicate's doc_id dropped the copy meant to stay too.
    prepare() does not use this: it dedupes the same way from pairs its tokenizing pass returns (dropped_rows).
    """
    ds = ds.map_batches(_add_content_hash, batch_format="pyarrow").materialize()
    hashes, ids, keys = [], [], []
    columns = ["content_hash", "row_key", "doc_id", "reject_reason"]
    for batch in ds.select_columns(columns).iter_batches(batch_format="pyarrow"):
        good = batch.filter(pc.equal(batch.column("reject_reason"), ""))
        hashes.append(np.frombuffer(b"".join(good.column("content_hash").to_pylist()), np.uint64).reshape(-1, 2))
        keys.append(b"".join(good.column("row_key").to_pylist()))
        ids += good.column("doc_id").to_pylist()
    if not ids:
        return ds.map_batches(_mark_duplicates, batch_format="pyarrow", fn_kwargs={"duplicates": set()})
    order = np.empty(len(ids), dtype=np.int64)
    order[sorted(range(len(ids)), key=lambda i: doc_order_key(ids[i]))] = np.arange(len(ids))
    dup = find_duplicates(np.concatenate(hashes), order)
    row_keys = b"".join(keys)
    duplicates = {row_keys[16 * i:16 * i + 16] for i in np.flatnonzero(dup)}
    return ds.map_batches(_mark_duplicates, batch_format="pyarrow", fn_kwargs={"duplicates": duplicates})


def _add_content_hash(batch: pa.Table) -> pa.Table:
    """The batch with its texts' content hashes and a random 128-bit key a row (what _mark_duplicates marks by: a
    Ray task knows no row's place in the dataset, and rows that share a doc_id and a text are alike in all else;
    drawn once, as drop_duplicates materialises the dataset right after)."""
    hashes = content_hashes(batch.column("text").to_pylist())
    # from the bytes themselves: numpy's "S16" strips a hash's trailing NUL bytes (~1 text in 256)
    column = pa.Array.from_buffers(pa.binary(16), len(hashes), [None, pa.py_buffer(hashes.tobytes())])
    keys = pa.Array.from_buffers(pa.binary(16), len(hashes), [None, pa.py_buffer(os.urandom(16 * len(hashes)))])
    return batch.append_column("content_hash", column).append_column("row_key", keys)


def _mark_duplicates(batch: pa.Table, duplicates: set[bytes]) -> pa.Table:
    dup = pa.array([k in duplicates for k in batch.column("row_key").to_pylist()], pa.bool_())
    text = batch.column("text")
    return pa.table({
        "doc_id": batch.column("doc_id"),
        "source": batch.column("source"),
        "text": pc.if_else(dup, "", text),
        "reject_reason": pc.if_else(dup, "duplicate", batch.column("reject_reason")),
        "sample": pc.if_else(dup, pc.utf8_slice_codeunits(text, 0, SAMPLE_CHARS), batch.column("sample")),
    })


def dropped_rows(uid: np.ndarray, hash_hi: np.ndarray, hash_lo: np.ndarray, drop) -> np.ndarray:
    """The rows dedup drops, `drop` naming each by its (uid, hash_hi, hash_lo), the hash's halves as int64. A uid is
    one document's, but several may share one (a wiki page id twice in one dump, an export of overlapping queries):
    by uid alone, the wrong one went (the copy dedup kept, or a unique text beside the duplicate). Where rows share
    a uid and a text, as many go as `drop` names."""
    mask = np.zeros(len(uid), dtype=bool)
    if len(drop) == 0:
        return mask
    wanted = collections.Counter((int(u), int(hi), int(lo)) for u, hi, lo in drop)
    for r in np.flatnonzero(np.isin(uid, np.array([u for u, _, _ in wanted], np.int64))):
        key = (int(uid[r]), int(hash_hi[r]), int(hash_lo[r]))
        if wanted[key] > 0:
            wanted[key] -= 1
            mask[r] = True
    return mask
