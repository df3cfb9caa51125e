"""Parquet corpus files -> document rows (pipelines/sources.py's reader for format "parquet"): the text column, row
group by row group, a range of row groups at a time (a Span). A value that is not UTF-8 rejects its row alone; a
page pyarrow cannot decode, the rows of its row group from there; an I/O error is raised, not counted."""

from __future__ import annotations

import gzip

from typing import BinaryIO, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.config import DataConfig
from pipelines.source_rows import decode_sample, document_row, reject_row


def read_parquet(stream: BinaryIO, name: str, path: str, cfg: DataConfig, span) -> Iterator[dict]:
    """The rows of the row groups [span.start, span.end) (end -1: to the last), numbered from span.first: a
    sources.Span, not imported here (sources imports this reader)."""
    try:
        reader = pq.ParquetFile(stream)
        schema = reader.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as e:  # OSError: a footer pyarrow cannot deserialize
        if not undecodable(e):
            raise
        yield reject_row(name, path, "malformed_parquet", f"{path}: {e}")
        return
    if cfg.text_column not in schema.names:
        yield reject_row(name, path, "missing_text_column", f"no column {cfg.text_column!r} in {schema.names}")
        return
    column_type = schema.field(schema.get_all_field_indices(cfg.text_column)[0]).type
    if not _is_text_type(column_type):  # as a JSONL record whose text is not a string, but for every row
        yield reject_row(name, path, "missing_text_column",
                      f"column {cfg.text_column!r} is {column_type}, not string or binary")
        return
    row = span.first
    for group in range(span.start, reader.num_row_groups if span.end < 0 else span.end):
        yield from _read_row_group(reader, group, row, name, path, cfg)
        row += reader.metadata.row_group(group).num_rows


def _read_row_group(reader: pq.ParquetFile, group: int, first: int, name: str, path: str,
                    cfg: DataConfig) -> Iterator[dict]:
    """The rows of one row group, numbered from `first`. A page pyarrow cannot decode (corrupt snappy / zstd data,
    a broken page header: OSError or ArrowException) loses the rows from its batch to the end of the group, as one
    "malformed_parquet" row named by the first row lost; the rows before it and the other groups are read."""
    row, last = first, first + reader.metadata.row_group(group).num_rows - 1
    try:
        for batch in reader.iter_batches(row_groups=[group], columns=[cfg.text_column], batch_size=1024):
            # as bytes: a string column holding invalid UTF-8 fails to_pylist for its whole batch, not one row
            for text in batch.column(0).cast(pa.large_binary()).to_pylist():
                yield _parquet_row(f"{name}#{row}", path, text, cfg)
                row += 1
    except (pa.ArrowException, OSError, ValueError) as e:
        if not undecodable(e):
            raise
        yield reject_row(f"{name}#{row}", path, "malformed_parquet", f"rows {row}-{last} (row group {group}): {e}")
        return
    if row <= last:  # a damaged page header can end the group early without an error
        yield reject_row(f"{name}#{row}", path, "malformed_parquet",
                      f"rows {row}-{last} (row group {group}): missing from its pages")


def undecodable(e: Exception) -> bool:
    """Whether a reader failed on the file's bytes (bad data: counted), not on reading them (a network reset, a disk
    error, a timeout: raised, so the job fails or Ray retries, rather than rows counted as malformed). pyarrow and
    bz2 raise a bare OSError without errno for data they cannot decode; an I/O error carries an errno or is one of
    OSError's subclasses (ConnectionError, TimeoutError). Nor are a worker's or pyarrow's limits bad data (out of
    memory, a column past 2 GiB, a nested conversion pyarrow does not implement): raised, not the rest of a good file
    counted as one corrupt record. pipelines/sources.py applies the same rule to its codecs."""
    limits = (MemoryError, NotImplementedError, pa.ArrowCapacityError)  # ArrowMemoryError, ArrowNotImplementedError
    return not isinstance(e, (OSError, *limits)) or (type(e) is OSError and e.errno is None)


def bad_compressed_data(e: Exception) -> bool:
    """Whether a decompressor failed on the file's bytes (cut short or damaged), not on reading them: undecodable's
    rule, plus gzip's BadGzipFile (a bad header or CRC), an OSError subclass that is about the bytes. Where it is
    false (a disk error, a network reset, a timeout) the read raises: counted as corrupt data it would cost the rest
    of the file, and a prepared set would be reused as complete (sources, text_source, layout read by it)."""
    return isinstance(e, gzip.BadGzipFile) or undecodable(e)


def _is_text_type(t: pa.DataType) -> bool:
    """String columns, and binary ones (what some writers give text): decoded as UTF-8 row by row."""
    t = t.value_type if pa.types.is_dictionary(t) else t
    return any(is_type(t) for is_type in (
        pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view, pa.types.is_null,
        pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view, pa.types.is_fixed_size_binary))


def _parquet_row(doc_id: str, path: str, text: bytes | None, cfg: DataConfig) -> dict:
    try:
        decoded = (text or b"").decode("utf-8")
    except UnicodeDecodeError as e:
        return reject_row(doc_id, path, "invalid_utf8", decode_sample(text[max(0, e.start - 100):]))
    return document_row(doc_id, path, decoded, cfg)
