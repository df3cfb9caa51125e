"""The on-disk form of prepared data: example schema, shard writer, manifest, readers.

Contract with the trainer (jobs/pretrain.py, bert_core.masking.PretrainingCollator): every shard
of a prepared set has exactly `example_schema(...)`; rows are "[CLS] A [SEP] B [SEP]" with no
padding, segment ids are 0 for the first `num_a_tokens` positions and 1 after, and
`next_sentence_label` is 1 when B was drawn from another document. Static masking adds
`masked_positions` and `masked_ids` (the ORIGINAL ids there; `input_ids` holds the 80/10/10
replacements). The manifest (manifest.json) says which shards exist and what is in them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.examples import Example

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SPLITS = ("train", "eval")
HISTOGRAM_BINS = 32  # token-length histogram in the manifest: at most this many equal-width bins
ROW_GROUP_ROWS = 8192  # ~1 MB row groups: a streaming reader holds one at a time
DEBUG_COLUMNS = ("doc_id_a", "doc_id_b", "a_start", "a_end", "b_start", "b_end")


def token_type(vocab_size: int) -> pa.DataType:
    return pa.uint16() if vocab_size <= 2**16 else pa.int32()


def example_schema(vocab_size: int, static_masking: bool, debug: bool) -> pa.Schema:
    ids = token_type(vocab_size)
    fields = [
        pa.field("example_id", pa.int64()),  # unique in the set, stable across reruns
        pa.field("input_ids", pa.list_(ids)),
        pa.field("num_a_tokens", pa.int16()),  # length of "[CLS] A [SEP]"
        pa.field("next_sentence_label", pa.int8()),  # 0 = real continuation, 1 = random (HF)
        pa.field("num_tokens", pa.int16()),
    ]
    if static_masking:
        fields += [pa.field("masked_positions", pa.list_(pa.int16())), pa.field("masked_ids", pa.list_(ids))]
    if debug:  # sentence ranges are half-open indices into the source document's sentence list
        fields += [pa.field("doc_id_a", pa.string()), pa.field("doc_id_b", pa.string())]
        fields += [pa.field(name, pa.int32()) for name in ("a_start", "a_end", "b_start", "b_end")]
    return pa.schema(fields)


def _ragged(arrays: Sequence[np.ndarray], value_type: pa.DataType) -> pa.ListArray:
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int32, count=len(arrays))
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = np.concatenate(arrays) if len(arrays) else np.zeros(0)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(value_type.to_pandas_dtype())))


def examples_to_table(examples: Sequence[Example], example_ids: np.ndarray, schema: pa.Schema,
                      doc_ids: Sequence[str] = ()) -> pa.Table:
    """Columns of `schema` from examples; `doc_ids[i]` names Example.doc_a/doc_b == i (debug)."""
    ids_type = schema.field("input_ids").type.value_type
    columns = {
        "example_id": pa.array(example_ids, pa.int64()),
        "input_ids": _ragged([e.input_ids for e in examples], ids_type),
        "num_a_tokens": pa.array([e.num_a_tokens for e in examples], pa.int16()),
        "next_sentence_label": pa.array([int(e.is_random_next) for e in examples], pa.int8()),
        "num_tokens": pa.array([e.num_tokens for e in examples], pa.int16()),
    }
    if "masked_positions" in schema.names:
        columns["masked_positions"] = _ragged([e.masked_positions for e in examples], pa.int16())
        columns["masked_ids"] = _ragged([e.masked_ids for e in examples], ids_type)
    if "doc_id_a" in schema.names:
        columns["doc_id_a"] = pa.array([doc_ids[e.doc_a] for e in examples], pa.string())
        columns["doc_id_b"] = pa.array([doc_ids[e.doc_b] for e in examples], pa.string())
        for name in ("a_start", "a_end", "b_start", "b_end"):
            columns[name] = pa.array([getattr(e, name) for e in examples], pa.int32())
    return pa.table(columns, schema=schema)


def write_shard(tables: pa.Table | Iterable[pa.Table], path: str | os.PathLike) -> dict:
    """Write one shard from a table, or from tables of one schema in turn (a shard's dupe passes, each built as the
    one before is written); returns its manifest entry (file name relative to the set, rows, bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer, rows = None, 0
    try:
        for table in [tables] if isinstance(tables, pa.Table) else tables:
            if writer is None:
                # zstd: token ids compress ~3.5x and decode faster than the trainer consumes them. No
                # dictionary pages: over a 30k vocabulary they cost 3x the write time for 3% of size.
                writer = pq.ParquetWriter(path, table.schema, compression="zstd", use_dictionary=False)
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)  # one table: pq.write_table's bytes
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        raise ValueError(f"{path}: no table to write")
    return {"file": f"{path.parent.name}/{path.name}", "rows": rows, "bytes": path.stat().st_size}


def shard_name(split: str, index: int) -> str:
    return f"{split}/part-{index:05d}.parquet"


def histogram_bin_width(max_seq_len: int) -> int:
    return max(1, -(-max_seq_len // HISTOGRAM_BINS))


def length_histogram(num_tokens: np.ndarray, max_seq_len: int) -> list[int]:
    """Examples per length bin: bin i counts [i * w, (i + 1) * w), the last one up to max_seq_len
    inclusive (w = histogram_bin_width). Lists from different shards add up elementwise."""
    width = histogram_bin_width(max_seq_len)
    num_bins = -(-max_seq_len // width)
    bins = np.minimum(np.asarray(num_tokens, dtype=np.int64) // width, num_bins - 1)
    return np.bincount(bins, minlength=num_bins).tolist()


def write_manifest(directory: str | os.PathLike, manifest: dict) -> None:
    Path(directory, MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def read_manifest(directory: str | os.PathLike) -> dict:
    manifest = json.loads(Path(directory, MANIFEST).read_text())
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{directory}: prepared-data format_version {manifest.get('format_version')!r}, "
                         f"this code reads {FORMAT_VERSION}; prepare the data again")
    return manifest


def check_shards(directory: str | os.PathLike, manifest: dict) -> None:
    """Refuse a prepared set whose shards are not the size its manifest lists (a shard deleted, or truncated by a full
    disk or a copy cut short): reused as it was, a run trained on the rest, or failed in its middle. Sizes only: a
    rewrite of the same size passes (the manifest holds no checksums)."""
    for split in SPLITS:
        for s in manifest["shards"][split]:
            path = Path(directory, s["file"])
            size = path.stat().st_size if path.is_file() else None
            if size != s["bytes"]:
                found = "missing" if size is None else f"{size:,} bytes"
                raise ValueError(f"{path}: {found}, its manifest says {s['bytes']:,} bytes: the prepared set was "
                                 f"changed after it was written; delete {directory} to prepare it again")


def shard_files(directory: str | os.PathLike, split: str, manifest: dict | None = None) -> list[str]:
    """Absolute paths of a split's shards, in manifest (= example_id) order."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    manifest = manifest or read_manifest(directory)
    return [os.path.join(directory, s["file"]) for s in manifest["shards"][split]]


def read_split(directory: str | os.PathLike, split: str, columns: list[str] | None = None) -> pa.Table:
    """A whole split as one table (tests, small sets); the trainer streams shard_files instead."""
    files = shard_files(directory, split)
    if not files:
        return example_schema_of(directory).empty_table()
    return pa.concat_tables(pq.read_table(f, columns=columns) for f in files)


def read_head(files: Sequence[str], rows: int, columns: list[str] | None = None) -> pa.Table:
    """The first `rows` examples of a split's shards, in example_id order (all of them when the split is
    smaller), reading only the row groups they sit in: the trainer's fixed evaluation set."""
    if not files:
        raise ValueError("no shards to read: the prepared set has an empty split")
    batches, need = [], rows
    for f in files:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=max(min(need, 65536), 1), columns=columns):
            batches.append(batch.slice(0, need))
            need -= batches[-1].num_rows
            if need <= 0:
                return pa.Table.from_batches(batches)
    if batches:
        return pa.Table.from_batches(batches)
    schema = pq.read_schema(files[0])
    return (pa.schema([schema.field(c) for c in columns]) if columns else schema).empty_table()


def example_schema_of(directory: str | os.PathLike) -> pa.Schema:
    manifest = read_manifest(directory)
    return example_schema(manifest["tokenizer"]["vocab_size"], manifest["config"]["masking"] == "static",
                          manifest["config"]["debug_doc_ids"])
