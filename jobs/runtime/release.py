"""A pretraining run's release folder (HF format: loads in transformers with no code of ours) and its record of the
run that wrote it.

A fine-tune started from the folder itself (init=<output_dir>/<run>/release, README's cluster route) has no MLflow
URI to follow back; the record, a small JSON file beside the model files, names the pretraining run and its MLflow
store, so a fine-tune tracking to that store tags the run (jobs/registry/tracking.lineage_tags) and jobs/lineage.py
walks on to its corpus. On another store (the folder copied, or downloaded from the registered model) the run is none
of that store's, and the folder is a plain one there. transformers reads none of it, and nothing hashes it: a model's
digest is over the files it loads (jobs/inference/model_ref.model_files) and a tokenizer's over its vocabulary and
rules. A folder without one (an HF download, a release from before the record) is a plain model folder, as it always
was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

RECORD = "written_by.json"  # {"job": "pretrain", "run_id": ..., "step": ..., "tracking_uri": <redacted>}


def fetch_release(checkpoint, release_dir: Path, tokenizer_dir: str, max_positions: int,
                  run_id: str | None = None, tracking_uri: str | None = None) -> None:
    """Copy the release checkpoint out of Ray storage, add the tokenizer and the record naming `run_id` (default: the
    run the checkpoint's own record names; a two-phase job passes its parent run, the one that registers the release),
    its store `tracking_uri` (redacted: the folder is copied and uploaded) and the checkpoint's step; atomic replace
    (the old release stays until the new one is whole). The tokenizer's model_max_length (the prepared set's: at least
    512) is cut to `max_positions`, the longest sequence trained: past it, transformers' truncation would keep tokens
    whose position rows were never trained (a 128-token run of a 512-position model), or that the table has no row
    for."""
    from bert_core.checkpoint import atomic_dir
    from jobs.registry.redaction import redact
    from jobs.runtime import resubmit

    with atomic_dir(release_dir) as tmp, checkpoint.as_directory() as d:
        shutil.copytree(Path(d) / "release", tmp, dirs_exist_ok=True)
        for f in Path(tokenizer_dir).iterdir():
            if f.is_file():
                shutil.copy2(f, tmp / f.name)
        settings_file = tmp / "tokenizer_config.json"
        settings = json.loads(settings_file.read_text()) if settings_file.is_file() else {}
        if int(settings.get("model_max_length", max_positions)) > max_positions:
            settings_file.write_text(json.dumps({**settings, "model_max_length": max_positions}, indent=2) + "\n")
        written = resubmit.read(Path(d)) or {}
        if writer := run_id or written.get("run_id"):  # an unrecorded checkpoint's release names no run
            store = {"tracking_uri": redact(tracking_uri)} if tracking_uri else {}
            (tmp / RECORD).write_text(json.dumps({"job": "pretrain", "run_id": writer, "step": written.get("step"),
                                                  **store}))


def record(folder: str | Path) -> dict:
    """A release folder's record, {} for a folder without a readable one (a plain model folder), or at a URI (not
    read here). A record from before stores were kept has no "tracking_uri"."""
    if "://" in str(folder):
        return {}
    try:
        found = json.loads((Path(folder) / RECORD).read_text())
    except (OSError, ValueError):  # none, unreadable, or not JSON: no run named
        return {}
    return found if isinstance(found, dict) and found.get("job") == "pretrain" and found.get("run_id") else {}


def written_by(folder: str | Path) -> str:
    """The pretraining run a release folder's record names; "" for none (`record`)."""
    return str(record(folder).get("run_id") or "")
