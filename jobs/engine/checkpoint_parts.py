"""What a resume checkpoint holds, part by part, so that a half-written one is recognised and reported.

Every rank writes its part of a checkpoint into its own folder and reports it; Ray Train uploads the parts
into one `checkpoint_<time>` folder of the run and registers the checkpoint once every rank has reported.
Two kinds of folder are never registered, so Ray never resumes from them and deletes neither:
- a partial one: a rank died while Ray uploaded its part (a rank killed before it reports leaves no folder:
  the ranks agree on the folder before any of them uploads);
- a whole one whose report the controller never collected: it polls the workers, and a worker group that
  dies can take the last reports with it (the run then resumes from an earlier checkpoint).
Nothing else would say they are there: the job reports them (pretrain.py, `checkpoints_ignored`).

- `topology.json` (rank 0): the world size, ZeRO stage and pipeline layout the checkpoint was saved at
  (jobs/workers/reshard.py).
- `rank-<r>.files.json` (every rank, the last file it adds): each file of its part, with its size.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TOPOLOGY = "topology.json"
RANK_FILES = "rank-{}.files.json"
RAY_SNAPSHOT = "checkpoint_manager_snapshot.json"  # Ray Train's list of the checkpoints it registered


def write_topology(ckpt_dir: Path, world_size: int, zero_stage: int, pipeline_stages: int = 1,
                   partition_method: str | None = None) -> None:
    """`partition_method`: how a pipeline's layers were cut into stages (each stage's optimizer state is over its own
    layers), recorded for pipeline runs only; a data-parallel run has no cut."""
    topology = {"world_size": world_size, "zero_stage": zero_stage, "pipeline_stages": pipeline_stages}
    if pipeline_stages > 1 and partition_method is not None:
        topology["partition_method"] = partition_method
    (ckpt_dir / TOPOLOGY).write_text(json.dumps(topology))


def read_topology(ckpt_dir: Path) -> dict | None:
    """The world size, ZeRO stage and pipeline layout a checkpoint was saved at; None for checkpoints older than this
    file (and no `partition_method` in a pipeline's from before it was recorded)."""
    path = ckpt_dir / TOPOLOGY
    return json.loads(path.read_text()) if path.is_file() else None


def write_rank_files(ckpt_dir: Path, rank: int) -> None:
    """List every file of this rank's part, with its size: the last thing a rank writes before reporting."""
    files = {p.relative_to(ckpt_dir).as_posix(): p.stat().st_size for p in sorted(ckpt_dir.rglob("*")) if p.is_file()}
    (ckpt_dir / RANK_FILES.format(rank)).write_text(json.dumps(files, indent=0))


def missing_parts(ckpt_dir: Path) -> list[str]:
    """What a checkpoint folder lacks to be whole ([] = nothing): a rank's part never written, or a file
    absent or shorter than its rank listed. A listing cut short (the folders asked about are those an upload may
    have left half-written) is a part missing, not an error."""
    try:
        topology = read_topology(ckpt_dir)
        world_size = int(topology["world_size"]) if topology is not None else 0
    except (OSError, ValueError, KeyError, TypeError):
        return [f"{TOPOLOGY} (rank 0's part, unreadable)"]
    if topology is None:
        return [f"{TOPOLOGY} (rank 0's part)"]
    missing = []
    for rank in range(world_size):
        listing = ckpt_dir / RANK_FILES.format(rank)
        try:
            listed = json.loads(listing.read_text()) if listing.is_file() else None
        except (OSError, ValueError):
            listed = None
        if not isinstance(listed, dict):
            missing.append(f"rank {rank}'s part" + (" (its listing unreadable)" if listing.is_file() else ""))
            continue
        for name, size in listed.items():
            path = ckpt_dir / name
            if not path.is_file() or path.stat().st_size != size:
                missing.append(f"{name} (rank {rank})")
    return missing


def registered_checkpoints(run_dir: Path) -> set[str] | None:
    """The checkpoint folder names Ray Train's registry in `run_dir` lists; None where there is no readable
    registry (a run that never checkpointed, another Ray version, the file being rewritten)."""
    try:
        snapshot = json.loads((run_dir / RAY_SNAPSHOT).read_text())
        return {c["checkpoint_dir_name"] for c in snapshot["checkpoint_results"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def checkpoint_folders(run_dir: Path) -> list[Path]:
    return [folder for folder in sorted(run_dir.glob("checkpoint_*")) if folder.is_dir()]


def ignored_checkpoints(run_dir: Path) -> dict[str, str]:
    """Checkpoint folders of a run that Ray Train never registered, so no resume reads them: {name: why}."""
    registered = registered_checkpoints(run_dir)
    if registered is None:
        return {}  # no registry to compare with: nothing claimed
    ignored = {}
    for folder in checkpoint_folders(run_dir):
        if folder.name not in registered:
            missing = missing_parts(folder)
            ignored[folder.name] = (f"incomplete, missing {', '.join(missing[:3])}"
                                    + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
                                    if missing else "whole, but its report never reached Ray Train")
    return ignored


def rng_states() -> dict[str, np.ndarray]:
    """This rank's torch generator states: the CPU one, and the current CUDA device's where there is one (dropout on
    a GPU draws from it, and build_engine's torch.manual_seed re-seeds both)."""
    import torch  # here: the drivers read checkpoint parts without torch

    states = {"cpu": torch.get_rng_state().numpy()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state().numpy()
    return states


def rng_arrays(per_rank: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """rng.npz's arrays for every rank's rng_states(): `rank{r}` (the CPU state, the name checkpoints had before
    the CUDA state was saved too) and `cuda_rank{r}`."""
    arrays = {}
    for rank, states in enumerate(per_rank):
        arrays[f"rank{rank}"] = states["cpu"]
        if "cuda" in states:
            arrays[f"cuda_rank{rank}"] = states["cuda"]
    return arrays


def restore_rng(saved: dict[str, np.ndarray], rank: int) -> None:
    """Put this rank's generators back as rng.npz holds them. Call once the engine is built: its seeding resets them.
    A rank the checkpoint holds no state for (more workers than before) keeps its fresh seed; a CUDA state saved on
    a GPU run is left unused by a CPU resume."""
    import torch

    if f"rank{rank}" in saved:
        torch.set_rng_state(torch.from_numpy(saved[f"rank{rank}"]))
    if f"cuda_rank{rank}" in saved and torch.cuda.is_available():
        torch.cuda.set_rng_state(torch.from_numpy(saved[f"cuda_rank{rank}"]))
