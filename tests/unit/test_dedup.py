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
    both (the article gone, one duplicate counted), or -- where the uid's first document repeated an earlier page and
    its second was unique -- the unique one, keeping the duplicate. A row goes by its uid and text."""
    import numpy as np

    from pipelines.dedup import find_duplicates

    uid = np.array([5, 7, 7, 8, 9, 7, 3, 11, 11])
    texts = ["x", "A", "A", "y", "z", "B", "shared", "shared", "unique"]  # 7: A twice and a revision B
    hashes = content_hashes(texts).view(np.int64)
    dup = find_duplicates(content_hashes(texts), uid)
    drop = np.stack([uid, hashes[:, 0], hashes[:, 1]], axis=1)[dup].tolist()
    mask = dropped_rows(uid, hashes[:, 0], hashes[:, 1], drop)
    assert [t for t, m in zip(texts, mask) if not m] == ["x", "A", "y", "z", "B", "shared", "unique"]
    assert mask.sum() == dup.sum() == 2  # of two rows of one uid and text, either (they are the same)
    assert not dropped_rows(uid, hashes[:, 0], hashes[:, 1], []).any()


class Blocks:
    """What drop_duplicates calls of a ray.data.Dataset, over in-memory pyarrow tables (a block each): its driver
    steps run without a Ray cluster (tests/e2e/test_bad_input.py runs it on Ray)."""

    def __init__(self, blocks: list[pa.Table]):
        self.blocks = blocks

    def map_batches(self, fn, batch_format: str, fn_kwargs: dict | None = None) -> "Blocks":
        assert batch_format == "pyarrow"
        return Blocks([fn(block, **(fn_kwargs or {})) for block in self.blocks])

    def materialize(self) -> "Blocks":
        return self

    def select_columns(self, columns: list[str]) -> "Blocks":
        return Blocks([block.select(columns) for block in self.blocks])

    def iter_batches(self, batch_format: str):
        return iter(self.blocks)


def test_a_doc_id_twice_with_one_text_keeps_one_copy_in_any_blocks():
    """A page exported twice (overlapping Special:Export queries) is two rows of one doc_id and text: the duplicate
    doc_ids were a set, marked in every row, so the copy dedup keeps went too and the article was lost. One copy
    stays, whichever block it is in; a later doc_id with the same text is still a duplicate, a reject untouched."""
    from pipelines.dedup import drop_duplicates
    from pipelines.sources import DOCUMENT_COLUMNS

    def row(doc_id: str, text: str, reason: str = "") -> dict:
        return dict(zip(DOCUMENT_COLUMNS, [doc_id, "twice.xml", text, reason, ""]))

    paris, lyon = "Paris is the capital of France.", "Lyon is a city in France."
    rows = [row("twice.xml#5", paris), row("twice.xml#6", lyon), row("twice.xml#5", paris),
            row("twice.xml#9", lyon), row("twice.xml#7", "", "redirect")]
    for blocks in ([rows], [rows[:2], rows[2:]], [[r] for r in rows]):
        out = drop_duplicates(Blocks([pa.Table.from_pylist(b) for b in blocks]))
        got = sorted((r["doc_id"], r["reject_reason"], r["text"]) for b in out.blocks for r in b.to_pylist())
        assert got == [("twice.xml#5", "", paris), ("twice.xml#5", "duplicate", ""), ("twice.xml#6", "", lyon),
                       ("twice.xml#7", "redirect", ""), ("twice.xml#9", "duplicate", "")]
        assert all(b.column_names == list(DOCUMENT_COLUMNS) for b in out.blocks)
