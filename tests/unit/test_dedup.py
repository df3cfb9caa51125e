"""Exact dedup's content-hash column (pipelines/dedup.py), without Ray."""

import pyarrow as pa

from pipelines.dedup import _add_content_hash, content_hashes, dropped_rows


def test_content_hash_column_keeps_trailing_nul_bytes():
    """blake2b("doc 30") ends in byte 0x00, which a numpy "S16" view strips: a 15-byte value Arrow's binary(16)
    refused, failing drop_duplicates for ~1 document in 256."""
    texts = ["doc 30", "doc 31", ""]
    assert content_hashes(["doc 30"]).tobytes().endswith(b"\x00")
    column = _add_content_hash(pa.table({"text": texts})).column("content_hash")
    assert column.type == pa.binary(16)
    assert column.to_pylist() == [content_hashes([t]).tobytes() for t in texts]
    assert _add_content_hash(pa.table({"text": pa.array([], pa.string())})).column("content_hash").to_pylist() == []


def test_a_uid_two_documents_share_loses_only_the_copies_dedup_chose():
    """A wiki page id twice in one dump gives two documents one uid: dedup drops one copy, and dropping by uid lost
    both (the article gone, one duplicate counted)."""
    import numpy as np

    uid = np.array([5, 7, 7, 8, 9, 7])
    assert dropped_rows(uid, [7, 9]).tolist() == [False, False, False, False, True, True]  # 7's last row only
    assert dropped_rows(uid, [7, 7, 7]).tolist() == [False, True, True, False, False, True]
    assert dropped_rows(uid, []).tolist() == [False] * 6
    texts = ["x", "A", "A", "y", "z", "B"]  # page 7's text A twice and a revision B: the second A goes, B stays
    same = lambda i, j: texts[i] == texts[j]  # noqa: E731
    assert dropped_rows(uid, [7, 9], same).tolist() == [False, False, True, False, True, False]

