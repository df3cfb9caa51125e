"""Shard schema, writer and manifest (pipelines/shards.py) on examples from the real algorithm."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bert_core.tokenizer import SpecialIds
from pipelines.config import DataConfig
from pipelines.examples import Document, create_examples, mask_static, masking_config
from pipelines.shards import (FORMAT_VERSION, example_schema, examples_to_table, length_histogram,
                              read_head, read_manifest, read_split, shard_files, shard_name, write_manifest, write_shard)

SPECIAL = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)


def make_examples(vocab_size: int, static: bool, num_docs: int = 40):
    rng = np.random.default_rng(0)
    dtype = np.uint16 if vocab_size <= 2**16 else np.int32
    docs = []
    for d in range(num_docs):
        offsets = np.concatenate([[0], np.cumsum(rng.integers(1, 15, size=30))])
        docs.append(Document(f"doc-{d}", rng.integers(5, vocab_size, size=offsets[-1]).astype(dtype), offsets))
    cfg = DataConfig(sources=["synthetic"], masking="static" if static else "dynamic")
    examples = list(create_examples(docs, cfg, SPECIAL.cls, SPECIAL.sep, random.Random(0)))
    if static:
        mask_static(examples, masking_config(cfg), SPECIAL, vocab_size, seed=0)
    return docs, examples


@pytest.mark.parametrize("vocab_size,ids_type", [(30522, pa.uint16()), (2**16, pa.uint16()), (250_002, pa.int32())])
def test_token_type_follows_vocab_size(vocab_size, ids_type):
    schema = example_schema(vocab_size, static_masking=True, debug=False)
    assert schema.field("input_ids").type == pa.list_(ids_type)
    assert schema.field("masked_ids").type == pa.list_(ids_type)
    assert schema.field("masked_positions").type == pa.list_(pa.int16())


@pytest.mark.parametrize("vocab_size", [30522, 250_002])
@pytest.mark.parametrize("static", [False, True])
def test_examples_round_trip_through_a_shard(tmp_path, vocab_size, static):
    docs, examples = make_examples(vocab_size, static)
    schema = example_schema(vocab_size, static_masking=static, debug=True)
    ids = np.arange(len(examples), dtype=np.int64) + 2**32
    entry = write_shard(examples_to_table(examples, ids, schema, [d.doc_id for d in docs]),
                        tmp_path / shard_name("train", 3))
    assert entry["file"] == "train/part-00003.parquet" and entry["rows"] == len(examples)
    assert entry["bytes"] == (tmp_path / entry["file"]).stat().st_size
    table = pq.read_table(tmp_path / entry["file"])
    assert table.schema.equals(schema)  # every shard has exactly this schema, nothing inferred
    rows = table.to_pylist()
    for row, ex, eid in zip(rows, examples, ids):
        assert row["example_id"] == eid
        assert row["input_ids"] == ex.input_ids.tolist()
        assert row["num_tokens"] == len(row["input_ids"]) and row["num_a_tokens"] == ex.num_a_tokens
        assert row["next_sentence_label"] == int(ex.is_random_next)
        assert (row["doc_id_a"], row["doc_id_b"]) == (docs[ex.doc_a].doc_id, docs[ex.doc_b].doc_id)
        assert (row["a_start"], row["a_end"], row["b_start"], row["b_end"]) == \
            (ex.a_start, ex.a_end, ex.b_start, ex.b_end)
        if static:
            assert row["masked_positions"] == ex.masked_positions.tolist()
            assert row["masked_ids"] == ex.masked_ids.tolist()
    assert {r["next_sentence_label"] for r in rows} == {0, 1}


def test_dynamic_schema_has_no_masking_or_debug_columns():
    names = example_schema(30522, static_masking=False, debug=False).names
    assert names == ["example_id", "input_ids", "num_a_tokens", "next_sentence_label", "num_tokens"]


def test_length_histogram_counts_every_example_once():
    lengths = np.array([5, 8, 128, 128, 64, 127])
    hist = length_histogram(lengths, 128)  # bins of 4 tokens, the last one [124, 128]
    assert len(hist) == 32 and sum(hist) == len(lengths)
    assert (hist[1], hist[2], hist[16], hist[-1]) == (1, 1, 1, 3)


def test_manifest_round_trip_and_version_check(tmp_path):
    _, examples = make_examples(30522, static=False)
    schema = example_schema(30522, static_masking=False, debug=False)
    shards = {"train": [], "eval": []}
    for i, split in enumerate(["train", "train", "eval"]):
        part = examples[i * 10:(i + 1) * 10]
        shards[split].append(write_shard(examples_to_table(part, np.arange(10) + 100 * i, schema),
                                         tmp_path / shard_name(split, len(shards[split]))))
    manifest = {"format_version": FORMAT_VERSION, "shards": shards, "tokenizer": {"vocab_size": 30522},
                "config": {"masking": "dynamic", "debug_doc_ids": False}}
    write_manifest(tmp_path, manifest)
    assert read_manifest(tmp_path) == manifest
    assert shard_files(tmp_path, "train") == [str(tmp_path / "train/part-00000.parquet"),
                                              str(tmp_path / "train/part-00001.parquet")]
    assert read_split(tmp_path, "train").column("example_id").to_pylist() == list(range(10)) + list(range(100, 110))
    assert read_split(tmp_path, "eval").num_rows == 10
    write_manifest(tmp_path, {**manifest, "format_version": FORMAT_VERSION + 1})
    with pytest.raises(ValueError, match="format_version"):
        read_manifest(tmp_path)


def test_a_reused_set_whose_shards_changed_after_it_was_written_is_refused(tmp_path):
    """prepare returned an earlier set as reused whenever its manifest.json existed: a shard deleted or truncated
    since (a full disk, a copy cut short) trained on the rest, or failed in the middle of a run."""
    from pipelines.prepare import _result

    import json

    test_manifest_round_trip_and_version_check(tmp_path)  # leaves a manifest of the next format_version
    write_manifest(tmp_path, {**json.loads((tmp_path / "manifest.json").read_text()), "format_version": FORMAT_VERSION})
    assert _result(tmp_path, reused=True).train_files == shard_files(tmp_path, "train")
    shard = tmp_path / "train/part-00001.parquet"
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(ValueError, match=rf"{shard}: 100 bytes, its manifest says [\d,]+ bytes: the prepared set "
                                         rf"was changed after it was written; delete {tmp_path} to prepare it again"):
        _result(tmp_path, reused=True)
    shard.unlink()
    with pytest.raises(ValueError, match=rf"{shard}: missing, its manifest says"):
        _result(tmp_path, reused=True)


def test_read_head_reads_the_first_rows_across_shards_in_order(tmp_path):
    docs, examples = make_examples(30522, static=False)
    schema = example_schema(30522, static_masking=False, debug=False)
    files = []
    for i, part in enumerate((examples[:7], examples[7:20])):
        ids = np.arange(len(part), dtype=np.int64) + (0 if i == 0 else 7)
        write_shard(examples_to_table(part, ids, schema, None), tmp_path / shard_name("eval", i))
        files.append(str(tmp_path / shard_name("eval", i)))
    head = read_head(files, 12, ["example_id", "input_ids"])
    assert head.column_names == ["example_id", "input_ids"] and head["example_id"].to_pylist() == list(range(12))
    assert head["input_ids"].to_pylist() == [e.input_ids.tolist() for e in examples[:12]]
    assert read_head(files, 1000).num_rows == 20  # a smaller split: all of it
    assert read_head(files[:1], 0, ["example_id"]).num_rows == 0
    empty = tmp_path / "empty.parquet"
    pq.write_table(schema.empty_table(), empty)
    assert read_head([str(empty)], 5, ["input_ids"]).schema.names == ["input_ids"]
    with pytest.raises(ValueError, match="empty split"):
        read_head([], 5)
