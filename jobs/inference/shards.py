"""A prediction job's output folder, and which of its shards are complete: what a rerun skips.

    <output>/manifest.json                           the job's record (model, version, inputs, shards, counts)
    <output>/shards/<shard>/_rows.json               the shard's input: file, first position, rows, rejects (first)
    <output>/shards/<shard>/part-<first>-<n>-<h>.parquet   predictions of n of its rows, from position `first`
    <output>/.lease                                  locked (flock) by the job writing the folder: who, since when

A shard is the k-th run of `shard_rows` consecutive readable rows of one input file (pipelines/tasks/files.py
reads a file the same way every time), named `<file index>-<k>`. A row's position is its place among its file's
readable rows (the shard's `first` = k * shard_rows, and on): sorted by file and position, the output is in input
order. Every file lands whole or not at all (written
beside its name, then renamed), so a killed job leaves complete files only. A shard is complete when its
_rows.json is there and its parts hold that many rows; a rerun removes the parts of every other shard and
predicts it again, so each input row is predicted exactly once in the output. A part's name comes from the rows
it holds: a retried task (an actor that died) writes the same part again, over itself. A job holds the folder's
lease (`lease`) while it writes there: a second start (overlapping cron runs) is refused at once, and a job killed
outright leaves it free, so its rerun goes on at once.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.runtime.files import write_atomic
from jobs.runtime.lease import LEASE, LeaseHeld  # noqa: F401  (predict's names for them)
from jobs.runtime.lease import lease as _lease

MANIFEST = "manifest.json"
ROWS = "_rows.json"
SHARDS = "shards"


def lease(output: Path):
    """Hold `output`'s lease (jobs/runtime/lease.py) while prediction writes there: a second start is refused at once
    (LeaseHeld), and a job killed outright leaves it free."""
    return _lease(output, "predict")


def shard_id(file_index: int, k: int) -> str:
    return f"{file_index:05d}-{k:06d}"


def write_json(path: Path, value) -> None:
    write_atomic(path, json.dumps(value, indent=1, ensure_ascii=False).encode())


def write_rows(output: Path, shard: str, info: dict) -> None:
    """The shard's input record, before any of its rows is predicted: {file, first, rows, rejects, samples}."""
    write_json(output / SHARDS / shard / ROWS, info)


def write_part(output: Path, shard: str, table: pa.Table) -> str:
    """A part of the shard's predictions (`table` has a `position` column: each row's place in its file)."""
    positions = table.column("position").to_pylist()
    digest = hashlib.sha256(json.dumps(positions).encode()).hexdigest()[:12]
    name = f"part-{min(positions):07d}-{len(positions)}-{digest}.parquet"
    buffer = io.BytesIO()
    pq.write_table(table.sort_by("position"), buffer)
    write_atomic(output / SHARDS / shard / name, buffer.getvalue())
    return name


@dataclass
class ShardState:
    rows: int | None = None  # from _rows.json; None: the shard was never read whole
    parts: dict[str, int] = field(default_factory=dict)  # part file -> rows

    @property
    def complete(self) -> bool:
        return self.rows is not None and sum(self.parts.values()) == self.rows


def scan(output: Path) -> dict[str, ShardState]:
    """Every shard folder under `output` and what it holds (from file names and _rows.json alone)."""
    root = output / SHARDS
    if not root.is_dir():
        return {}
    return {folder.name: state(output, folder.name) for folder in sorted(p for p in root.iterdir() if p.is_dir())}


def state(output: Path, shard: str) -> ShardState:
    folder, found = output / SHARDS / shard, ShardState()
    if (folder / ROWS).is_file():
        found.rows = int(json.loads((folder / ROWS).read_text())["rows"])
    for part in folder.glob("part-*.parquet"):
        found.parts[part.name] = int(part.name.split("-")[2])
    return found


def clear_incomplete(output: Path, states: dict[str, ShardState]) -> list[str]:
    """Remove every shard that is not complete (its parts, its _rows.json): a rerun predicts it again. Returns
    the complete shards."""
    for shard, state in states.items():
        if not state.complete:
            shutil.rmtree(output / SHARDS / shard)
    return sorted(s for s, state in states.items() if state.complete)


def verify(output: Path, shard: str, rows: int) -> None:
    """Each of the shard's rows is in its parts exactly once (positions first .. first + rows - 1); raises
    otherwise."""
    folder = output / SHARDS / shard
    first = int(json.loads((folder / ROWS).read_text()).get("first", 0))
    positions = sorted(p for part in sorted(folder.glob("part-*.parquet"))
                       for p in pq.read_table(part, columns=["position"]).column("position").to_pylist())
    if positions != list(range(first, first + rows)):
        raise RuntimeError(f"shard {shard}: its parts hold positions {positions[:5]}... ({len(positions)} rows) for "
                           f"{rows} input rows: not each exactly once")


def record_complete(output: Path, manifest: dict, touched: set, final: bool = False) -> None:
    """Those of the `touched` shards whose parts now hold all their rows, into the manifest (rewritten when one
    completes); `final`: every shard must be complete."""
    changed = False
    for shard in sorted(touched - set(manifest["shards"])):
        now = state(output, shard)
        if not (now.complete or final):
            continue
        if now.rows is None:  # no _rows.json here: the read task that counted its rows ran on another node
            raise RuntimeError(f"shard {shard} was written by a model replica where this machine does not see it: "
                               f"output ({output}) must be a folder every node of the cluster mounts")
        if not now.complete:
            raise RuntimeError(f"shard {shard}: {sum(now.parts.values())} of {now.rows} rows predicted when the "
                               "job's data ended")
        verify(output, shard, now.rows)
        info = json.loads((output / SHARDS / shard / ROWS).read_text())
        manifest["shards"][shard] = {**info, "parts": part_files(output, shard)}
        changed = True
    if changed:
        write_json(output / MANIFEST, manifest)


def part_files(output: Path, shard: str) -> list[str]:
    return sorted(str(p.relative_to(output)) for p in (output / SHARDS / shard).glob("part-*.parquet"))


def part_table(kind: str, predictions: list[dict], files: list[str], positions: list[int], encoded: list[dict]):
    """A shard's part: the rows' predictions, each column of its own Arrow type (OUTPUT_TYPES), so that a part whose
    values are all missing (QA rows with no span: score None) has the type of the others, and the folder reads as
    one table."""
    from jobs.inference.kinds import OUTPUT_COLUMNS, OUTPUT_TYPES

    return pa.table({"id": pa.array([p["id"] for p in predictions], pa.string()), "file": pa.array(files, pa.string()),
                     "position": pa.array(positions, pa.int64()),
                     **{c: pa.array([p[c] for p in predictions], pa.type_for_alias(OUTPUT_TYPES[c]))
                        for c in OUTPUT_COLUMNS[kind]},
                     "truncated": pa.array([bool(e["truncated"]) for e in encoded], pa.bool_()),
                     "windows": pa.array([len(e["windows"]) for e in encoded], pa.int64())})
