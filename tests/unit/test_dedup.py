"""Exact dedup's content-hash column (pipelines/dedup.py), without Ray."""

import pyarrow as pa

from pipelines.dedup import _add_content_hash, content_hashes


def test_content_hash_column_keeps_trailing_nul_bytes():
    """blake2b("doc 30") ends in byte 0x00, which a numpy "S16" view strips: a 15-byte value Arrow's binary(16)
    refused, failing drop_duplicates for ~1 document in 256."""
    texts = ["doc 30", "doc 31", ""]
    assert content_hashes(["doc 30"]).tobytes().endswith(b"\x00")
    column = _add_content_hash(pa.table({"text": texts})).column("content_hash")
    assert column.type == pa.binary(16)
    assert column.to_pylist() == [content_hashes([t]).tobytes() for t in texts]
    assert _add_content_hash(pa.table({"text": pa.array([], pa.string())})).column("content_hash").to_pylist() == []
