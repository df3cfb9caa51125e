"""The stages jobs/predict.py's Ray Data pipeline runs in its tasks and actors, on whichever node Ray places them:
read one input file into rows (`read_rows`), tokenize a batch (`tokenize`, the encoder kept per process), predict
a window and write its shard's parts (`Predict`, one model replica). The model travels as its files' bytes in the
object store (a dict of refs: "files", "tokenizer" (no weights), and its "digest") and is written to a scratch
folder only while it loads."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from jobs.inference import shards
from jobs.runtime.scratch import scratch_dir


def read_rows(item: dict, kind: str, columns, shard_rows: int, skip: set, output: Path):
    """One input file -> its rows (JSON) with their shard and place in it; each shard's _rows.json first. A shard's
    rows go out longest first: the replicas' windows hold rows of like length (little padding in a batch), and the
    last windows of the job are its shortest, quickest rows, so the replicas finish together instead of one working
    through a long window alone. Each row keeps its position in the file: the parts are written in its order, and
    its file's `name` (inputs.basis_paths: a file shipped with a submitted job by its path in the job's copy, which a
    resubmission unpacks at another path) or its path: a URL's without credentials (inputs.recorded), nor its
    rejects' samples. A file the reader refuses past the rows _plan's check read (the header again in another order,
    a byte no encoding reads) ends in one record whose `refused` says why (REFUSAL), not in a raise."""
    from jobs.inference.inputs import file_columns, recorded
    from jobs.registry.redaction import redact
    from pipelines.tasks.common import TaskDataError
    from pipelines.tasks.files import read_file

    path, fmt = str(item["path"]), str(item["fmt"])
    name = str(item.get("name") or recorded(path))
    columns = file_columns(columns, kind, fmt)
    read = 0  # the file's readable rows before this shard: its rows are the file's `read`, `read` + 1, ...
    try:
        for k, part in enumerate(read_file(path, fmt, kind, columns, batch_rows=shard_rows, labeled=False)):
            shard, first, read = shards.shard_id(int(item["index"]), k), read, read + len(part.rows)
            if shard in skip:
                continue
            samples = [list(s) for s in part.samples]  # a URL's: its where (an empty file's is its path), its errors
            shards.write_rows(output, shard, {"file": name, "first": first, "rows": len(part.rows),
                                              "rejects": dict(part.rejects),
                                              "samples": redact(samples) if "://" in path else samples})
            rows = [json.dumps(row, ensure_ascii=False) for row in part.rows]
            for i in sorted(range(len(rows)), key=lambda i: -len(rows[i])):  # stable: ties in the file's order
                yield {"row": rows[i], "shard": shard, "position": first + i, "file": name, "refused": ""}
    except TaskDataError as e:
        yield {**REFUSAL, "file": name, "refused": str(e)}  # the driver's inputs.refused removes a URL's credentials


# A read task's refusal of its file, carried as a record through the tokenizing tasks and a model replica to the
# driver, which raises it as one line (inputs.refused). Raised in the task, it reached the driver as Ray Data's two
# tracebacks (~120 lines) with Ray's retry advice appended to the message; fine-tuning's reader does the same
# (pipelines/tasks/stream.py's _read). No shard: nothing is written for it. The driver stops at the first
# it meets: rows still in other tasks or files, the rest of its own file's, are not predicted.
REFUSAL = {"row": "", "shard": "", "position": -1}


def refusal(batch) -> str:
    """The first refusal a batch of rows (or of a model replica's summaries) carries; "" for none."""
    return next((str(r) for r in batch.get("refused", ()) if r), "")


ENCODERS: dict[tuple, object] = {}  # per worker process: (model digest, QA settings) -> its Encoder


def load(model: dict, make, weights: bool = True):
    """`make(folder)` over the shipped model's files (with its weights, or only its config and tokenizer), written to a
    temporary folder that is removed once it has loaded: workers may be killed without running any cleanup."""
    import ray

    folder = scratch_dir("predict-model")  # a killed worker's is removed by the next one on its host
    try:
        for name, data in ray.get(model["files" if weights else "tokenizer"]).items():
            (folder / name).write_bytes(data)
        return make(str(folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def tokenize(batch, model: dict, qa):
    from jobs.inference.predictor import Encoder

    key = (model["digest"], repr(qa))  # a second job of one driver with other windows: another Encoder
    if key not in ENCODERS:
        ENCODERS[key] = load(model, lambda folder: Encoder(folder, qa), weights=False)
    keep = _rows(batch)
    enc = np.full(len(batch["row"]), "", dtype=object)
    for i, e in zip(keep, ENCODERS[key].encode([json.loads(batch["row"][i]) for i in keep])):
        enc[i] = json.dumps(e)
    batch["enc"] = enc
    return batch


def _rows(batch) -> list[int]:
    """The indices of a batch's rows, less a read task's refusal record (REFUSAL)."""
    refused = batch.get("refused")
    return [i for i in range(len(batch["row"])) if refused is None or not refused[i]]


class Predict:
    """One model replica: windows -> predictions -> the shard's parts, written here; returns what it wrote."""

    def __init__(self, model: dict, qa, batch_size: int, threshold: float, output: Path, threads: int,
                 precision: str = "fp32", kill_after: int = 0, max_batch_tokens: int = 0, cpu_kernels: str = "onednn"):
        import torch

        from jobs.inference.predictor import Predictor

        torch.set_num_threads(threads)
        self.predictor = load(model, lambda folder: Predictor(folder, qa, batch_size=batch_size, threshold=threshold,
                                                              precision=precision, cpu_kernels=cpu_kernels,
                                                              max_batch_tokens=max_batch_tokens))
        self.output, self.kill_after, self.batches = output, kill_after, 0

    def __call__(self, batch):
        keep = _rows(batch)  # a read task's refusal is handed on as a summary of its own, no shard
        rows = [json.loads(batch["row"][i]) for i in keep]
        encoded = [json.loads(batch["enc"][i]) for i in keep]
        predictions = self.predictor.decode(rows, encoded, self.predictor.forward(encoded)) if keep else []
        out = {"shard": [], "rows": [], "truncated": [], "refused": []}
        shard_of = [batch["shard"][i] for i in keep]
        for shard in dict.fromkeys(shard_of):
            take = [j for j, s in enumerate(shard_of) if s == shard]  # into rows, encoded and predictions
            table = shards.part_table(self.predictor.kind, [predictions[j] for j in take],
                                      [batch["file"][keep[j]] for j in take],
                                      [int(batch["position"][keep[j]]) for j in take], [encoded[j] for j in take])
            shards.write_part(self.output, str(shard), table)
            out["shard"].append(str(shard))
            out["rows"].append(len(take))
            out["truncated"].append(sum(bool(encoded[j]["truncated"]) for j in take))
            out["refused"].append("")
        if said := refusal(batch):
            for k, v in {"shard": "", "rows": 0, "truncated": 0, "refused": said}.items():
                out[k].append(v)
        self.batches += 1
        self._maybe_die()
        return {k: np.asarray(v, dtype=object if k in ("shard", "refused") else np.int64) for k, v in out.items()}

    def _maybe_die(self) -> None:
        """Testing only (faults.kill_actor_after_batches): this replica's process is killed after that many
        batches, once per output folder: Ray restarts the actor and retries its batch."""
        marker = self.output / ".fault-killed-actor"
        if self.kill_after and self.batches >= self.kill_after and not marker.exists():
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), 9)
