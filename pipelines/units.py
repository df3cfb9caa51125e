"""Work units sized by bytes, not by files: what one tokenizing / sampling call reads.

A unit is a list of parts; a part is one input file or a range of it:
    {"path", "name", "rank", "start", "end", "first", "text_start"}
  * text / JSONL: start, end are byte offsets (end -1 = to the end of the file). A part owns
    the records that START in [start, end): a JSONL line, or a text document (text_source.py cuts
    text into documents where its text alone says, at or after multiples of TEXT_DOCUMENT_BYTES of
    its text, and every text range starts at a byte multiple of it). The reader finishes its last record past `end`
    and skips a partial one at `start`, so no record is split or read twice, wherever the
    cuts fall. `first` is the number of newlines before `start`, which keeps doc_ids the
    0-based line a record starts on, and `text_start` the text offset of `start` that text
    documents are cut by (text_source.text_offset: bytes less the \\r of each \\r\\n and a
    Gutenberg header); `number_lines` counts both, in parallel.
  * parquet: start, end are row-group indices; `first` is the number of rows before `start`.
  * multistream bz2 XML dumps (`*.xml.bz2` with more than one stream): start, end are compressed
    offsets where streams start; a range owns the pages whose `<page>` tag its streams hold, and
    reads on to finish its last one (pipelines/multistream.py). Offsets come from one scan of the
    file here, so an index file is not needed.
  * everything else (gzip, single-stream bz2, plain XML, sniffed formats) is read whole: start 0,
    end -1. A gzip or single-stream bz2 stream cannot be entered in the middle, and plain XML has
    no cut a reader could find without parsing from the start.
Small files are grouped into one unit up to the target size (per-task overhead is ~25 ms, a
fixed cost per Ray call), big files split into units of about the target size.

Determinism: doc_ids, record boundaries and text document cuts depend on the file's bytes
alone, never on the target size or the grouping, so any plan gives the same documents; the
target only changes how work is spread (hence not in the dataset name).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow.parquet as pq
import ray

from pipelines import multistream
from pipelines.config import DataConfig
from pipelines.paths import open_binary
from pipelines.source_files import SourceError, relative_names
from pipelines.sources import SNIFF_BYTES, TEXT_DOCUMENT_BYTES, file_format, is_json_array
from pipelines.spill import MAX_INPUT_FILES, RECORD_BITS
from pipelines.gutenberg import GUTENBERG_HEAD, header_text_bytes
from pipelines.text_source import line_counts

MIN_UNIT_BYTES = TEXT_DOCUMENT_BYTES  # text ranges are multiples of this
MAX_AUTO_UNIT_BYTES = 64 << 20  # work_unit_bytes=0: at most this much a call ...
UNITS_PER_WORKER = 4  # ... and at least this many units per worker when the corpus allows
COUNT_CHUNK_BYTES = 4 << 20


def target_bytes(cfg: DataConfig, total_bytes: int) -> int:
    if cfg.work_unit_bytes:
        return max(MIN_UNIT_BYTES, cfg.work_unit_bytes)
    per_worker = total_bytes // (UNITS_PER_WORKER * cfg.num_workers)
    return int(min(MAX_AUTO_UNIT_BYTES, max(MIN_UNIT_BYTES, per_worker)))


def check_file_count(count: int) -> None:
    """Refuses more input files than a document uid holds ranks of (spill.py: rank << RECORD_BITS | record, an int64):
    past it the tokenizing tasks failed on "Python int too large to convert to C long", after the driver's passes."""
    if count > MAX_INPUT_FILES:
        raise SourceError(
            f"data.sources holds {count:,} input files, more than the {MAX_INPUT_FILES:,} a document id holds "
            f"(a file's rank takes the bits above a {RECORD_BITS}-bit record number of a 64-bit id): concatenate them "
            f"into fewer, larger files (JSON Lines shards of ~100 MB, a document a line: one file an article is "
            f"also millions of tiny reads) and give those")


def file_parts(files: list[str], inputs: list[dict], cfg: DataConfig, target: int) -> list[dict]:
    """Each input file as one part, or (text, JSONL, parquet above `target`) as several ranges.
    `first` and `text_start` are still 0 and None for byte ranges: `number_lines` fills them in."""
    check_file_count(len(files))  # a part's rank is a document uid's high bits
    names = relative_names(files)
    rank = {name: r for r, name in enumerate(sorted(names))}  # doc_order_key compares names as strings
    parts = []
    for path, name, info in sorted(zip(files, names, inputs), key=lambda x: rank[x[1]]):
        size, fmt = info["bytes"], file_format(path, cfg)
        whole = {"path": path, "name": name, "rank": rank[name], "start": 0, "end": -1, "first": 0, "bytes": size,
                 "kind": "whole", "text_start": None}  # None: the reader counts it (at 0: from the file's head)
        if size > target and fmt == "bz2" and file_format(path[:-len(".bz2")], cfg) == "wiki_xml":
            parts += _bz2_stream_parts(whole, target)
        elif size <= target or fmt not in ("text", "jsonl", "parquet") or (fmt == "jsonl" and _json_array(path)):
            parts.append(whole)  # a .json file holding one JSON array has no line a range could start at
        elif fmt == "parquet":
            parts += _row_group_parts(whole, target)
        else:
            step = max(MIN_UNIT_BYTES, target // MIN_UNIT_BYTES * MIN_UNIT_BYTES)
            cuts = list(range(0, size, step))
            for start, end in zip(cuts, cuts[1:] + [size]):
                parts.append({**whole, "kind": "bytes", "start": start, "end": -1 if end == size else end,
                              "bytes": end - start})
    return parts


def _json_array(path: str) -> bool:
    with open_binary(path) as f:
        return is_json_array(path, f.read(SNIFF_BYTES))


def _row_group_parts(whole: dict, target: int) -> list[dict]:
    try:
        with open_binary(whole["path"]) as f:
            meta = pq.read_metadata(f)
    except Exception:  # malformed: read whole, and the reader reports it
        return [whole]
    rows = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    n = min(len(rows), math.ceil(whole["bytes"] / target))
    if n <= 1:
        return [whole]
    cuts = [round(i * len(rows) / n) for i in range(n + 1)]
    return [{**whole, "kind": "row_groups", "start": a, "end": b if b < len(rows) else -1, "first": sum(rows[:a]),
             "bytes": whole["bytes"] * (b - a) // len(rows)} for a, b in zip(cuts, cuts[1:])]


def _bz2_stream_parts(whole: dict, target: int) -> list[dict]:
    """A multistream bz2 dump as ranges of whole streams of about `target` compressed bytes."""
    with open_binary(whole["path"]) as f:
        offsets = multistream.stream_offsets(f)
    if len(offsets) < 2 or offsets[0] != 0:  # one stream, or not bz2 at all: read whole, the reader reports it
        return [whole]
    cuts = [0]
    for offset in offsets[1:]:
        if offset - cuts[-1] >= target:
            cuts.append(offset)
    size = whole["bytes"]
    if len(cuts) == 1:
        return [whole]
    return [{**whole, "kind": "bz2_streams", "start": a, "end": -1 if b == size else b, "bytes": b - a}
            for a, b in zip(cuts, cuts[1:] + [size])]


def count_lines(path: str, start: int, end: int) -> tuple[int, int, int]:
    """(newlines, \r\n pairs) in bytes [start, end) of `path` (text_source.line_counts), and the range at 0's
    text_source.header_text_bytes (a Gutenberg header's length: where text offsets count from), else 0."""
    with open_binary(path) as f:
        newlines, pairs = line_counts(f, start, end, COUNT_CHUNK_BYTES)
        if start > 0:
            return newlines, pairs, 0
        f.seek(0)
        return newlines, pairs, header_text_bytes(f.read(GUTENBERG_HEAD[0]))


def count_newlines(path: str, start: int, end: int) -> int:
    """Newlines in bytes [start, end) of `path`."""
    return count_lines(path, start, end)[0]


def _count_batch(batch: dict) -> dict:
    counts = np.array([count_lines(p, s, e) for p, s, e in zip(batch["path"], batch["start"], batch["end"])],
                      dtype=np.int64).reshape(-1, 3)
    return {**batch, "newlines": counts[:, 0], "pairs": counts[:, 1], "header": counts[:, 2]}


def number_lines(parts: list[dict]) -> list[dict]:
    """Fill in `first` (newlines before `start`) and `text_start` of byte ranges: one Ray pass that counts the
    newlines and \r\n pairs of every range but each file's last, in parallel. Needs Ray initialised when any
    file is split; reads those files once more (fast on local disk, a second download on S3)."""
    to_count = [{"path": p["path"], "start": p["start"], "end": p["end"]} for p in parts
                if p["kind"] == "bytes" and p["end"] >= 0]
    if not to_count:
        return parts
    counts = {(r["path"], r["start"]): (int(r["newlines"]), int(r["pairs"]), int(r["header"])) for r in
              ray.data.from_items(to_count, override_num_blocks=len(to_count)).map_batches(
                  _count_batch, batch_size=1).iter_rows()}
    return numbered_parts(parts, counts)


def numbered_parts(parts: list[dict], counts: dict[tuple[str, int], tuple[int, int, int]]) -> list[dict]:
    """`parts` with `first` and `text_start` of their byte ranges, from the count_lines of every range but each
    file's last, by (path, start)."""
    header = {path: count[2] for (path, start), count in counts.items() if start == 0}  # the range at 0 reads it
    out, before = [], {}
    for p in parts:  # in rank, then offset order: a file's ranges come in sequence
        if p["kind"] == "bytes":
            newlines, pairs = before.get(p["path"], (0, 0))
            p = {**p, "first": newlines, "text_start": p["start"] - pairs - header.get(p["path"], 0)}
            if p["end"] >= 0:
                more = counts[(p["path"], p["start"])]
                before[p["path"]] = (newlines + more[0], pairs + more[1])
        out.append(p)
    return out


def group_units(parts: list[dict], target: int) -> list[dict]:
    """Parts -> units of about `target` bytes, in rank order; returned biggest first (the pool's
    tail is then the small ones). Each unit: {"unit": index, "bytes": total, "parts": [...]}."""
    units, current, size = [], [], 0
    for p in parts:
        if current and size + p["bytes"] > target:
            units.append(current)
            current, size = [], 0
        current.append(p)
        size += p["bytes"]
    if current:
        units.append(current)
    out = [{"unit": i, "bytes": sum(p["bytes"] for p in u), "parts": u} for i, u in enumerate(units)]
    return sorted(out, key=lambda u: (-u["bytes"], u["unit"]))


def plan_units(files: list[str], inputs: list[dict], cfg: DataConfig) -> list[dict]:
    """The work units of a prepare run (Ray initialised: `number_lines` runs on the cluster)."""
    target = target_bytes(cfg, sum(i["bytes"] for i in inputs))
    return group_units(number_lines(file_parts(files, inputs, cfg, target)), target)
