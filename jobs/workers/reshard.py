"""Resume on a different number of workers: the ZeRO checkpoint, converted to DeepSpeed's universal format.

A ZeRO-1/2/3 checkpoint holds one slice of the optimizer state per data-parallel rank, and DeepSpeed
refuses to load it at another world size. DeepSpeed's own answer is the universal checkpoint
(`deepspeed.checkpoint.ds_to_universal`): every parameter's fp32 weight, Adam moments and step, whole,
which an engine built with `"checkpoint": {"load_universal": true}` re-partitions for its own world
size. Resume checkpoints are saved the normal way; a resume converts only when the worker count
changed (`topology.json`, written next to the data position, says what it was). ZeRO-0 keeps the whole
optimizer state in the model-states file and loads at any world size as it is.

Which ranks convert: each node's local rank 0, into a fresh directory on that node's local disk, from
its own view of the checkpoint (`Checkpoint.as_directory()`, a download where storage is remote);
the other ranks of the node read that copy. A rank never reads another node's disk, so this holds on
any number of nodes, and the conversion (a read of every shard, a write of whole tensors) runs once
per node, not once per rank.
"""

from __future__ import annotations

import argparse
import logging
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch.distributed as dist

from bert_core.config import ConfigError
from jobs.engine.checkpoint_parts import read_topology
from jobs.config.pretrain import PretrainConfig
from jobs.engine.data_parallel import TAG, Engine
from jobs.runtime.scratch import scratch_dir
from jobs.workers.pretrain_engine import build_engine

log = logging.getLogger("bert_foundry.train")


def needs_universal(saved: dict | None, world_size: int, cfg: PretrainConfig) -> bool:
    """Whether resuming a checkpoint saved at `saved` on `world_size` workers must go through a conversion.

    Raises where no correct resume exists at this world size and ZeRO stage, before any engine is built.
    """
    stages, stage = cfg.deepspeed.pipeline_stages, cfg.deepspeed.zero_stage
    same_layout(saved, cfg, "a resume")
    if saved is not None and stages > 1 and saved["world_size"] != world_size:
        raise ConfigError(f"a pipeline run resumes on the {saved['world_size']} workers it was saved with, "
                          f"not {world_size}: DeepSpeed's universal checkpoint covers data parallelism only")
    if saved is not None and saved["zero_stage"] != stage and not (
            {saved["zero_stage"], stage} == {1, 2} and saved["world_size"] == world_size):
        # ZeRO-0 keeps its optimizer state in the model-states file, ZeRO-3 in partitions of its own layout; ZeRO-1
        # and 2 share one optimizer and its partitions, so each loads the other's at the saved world size. The
        # universal checkpoint converts between world sizes, not stages.
        raise ConfigError(f"a resume keeps the ZeRO stage: the checkpoint is ZeRO-{saved['zero_stage']} (saved by "
                          f"{saved['world_size']} workers), deepspeed.zero_stage is {stage}; set "
                          f"deepspeed.zero_stage={saved['zero_stage']} (ZeRO-1 and 2 load each other's checkpoints "
                          "on the saved number of workers; a phase hand-off may instead start a fresh optimizer: "
                          "train.reset_optimizer=true)")
    if saved is None or saved["world_size"] == world_size or saved["zero_stage"] == 0:
        return False
    if cfg.optim.name == "lamb" and stage in (1, 2) and world_size > 1:
        # DeepSpeed 0.19.8's ZeRO-1/2 universal loader (BaseOptimizer.load_hp_checkpoint_state_from_checkpoint_dir)
        # fails with IndexError on a parameter group of which a rank holds no element; LAMB keeps one group
        # per tensor, and the 2-element NSP bias leaves every rank but the first without one.
        raise ConfigError(f"optim.name=lamb under ZeRO-{stage} resumes on {saved['world_size']} workers (as saved) "
                          f"or on 1, not on {world_size}: DeepSpeed's universal checkpoint loader cannot give a "
                          "rank a one-tensor parameter group it holds no element of")
    return True


def same_layout(saved: dict | None, cfg: PretrainConfig, what: str, optimizer: bool = True) -> None:
    """Raise unless the checkpoint was saved in this run's pipeline layout: a pipeline checkpoint keeps its weights in
    per-layer files, a data-parallel one in its model states, and neither loads the other's (weights alone neither).
    With its `optimizer` state, also the same deepspeed.partition_method: each stage's ZeRO state covers the layers
    its cut gave that stage, and under another cut every worker failed to load it, each restart in turn, on DeepSpeed's
    "parameter-alignment layout does not match". Weights alone may be cut anew (layer files are indexed by layer)."""
    d = cfg.deepspeed
    if saved is not None and saved.get("pipeline_stages", 1) != d.pipeline_stages:
        raise ConfigError(f"the checkpoint was saved with deepspeed.pipeline_stages={saved.get('pipeline_stages', 1)}; "
                          f"{what} keeps it (got {d.pipeline_stages})")
    # absent from the topology of a checkpoint saved before it was recorded: unknown, so not refused here
    method = (saved or {}).get("partition_method")
    if optimizer and d.pipeline_stages > 1 and method is not None and method != d.partition_method:
        raise ConfigError(f"the checkpoint was saved with deepspeed.partition_method={method!r}; {what} keeps it "
                          f"(got {d.partition_method!r}): each stage's optimizer state covers the layers that cut gave "
                          "it. Set it back, or hand its weights alone to a new run_name, which may cut its stages "
                          "anew: train.init_checkpoint=<the checkpoint> train.reset_optimizer=true")


def hand_off_layout(saved: dict | None, cfg: PretrainConfig) -> None:
    """Raise unless a checkpoint's weights alone load into this run's engine: its pipeline layout (same_layout), and
    ZeRO-3 on both sides or neither: ZeRO-3 keeps a rank's weights in its partition's files, ZeRO 0-2 in one
    model-states file, and neither finds the other's (DeepSpeed failed on a bare assertion, in every restart)."""
    what = "a hand-off of its weights"
    same_layout(saved, cfg, what, optimizer=False)
    zero = cfg.deepspeed.zero_stage
    if saved is not None and "zero_stage" in saved and (saved["zero_stage"] == 3) != (zero == 3):
        raise ConfigError(f"the checkpoint was saved with deepspeed.zero_stage={saved['zero_stage']}; {what} needs "
                          f"ZeRO-3 on both sides or on neither (got {zero})")


def to_universal(engine_dir: Path, out_dir: Path) -> Path:
    """Convert the ZeRO checkpoint Engine.save wrote to `engine_dir` into its universal form in `out_dir`,
    the directory to hand Engine.load of an engine built with load_universal; returns `out_dir`."""
    from deepspeed.checkpoint import ds_to_universal  # here: DS_ACCELERATOR is set by then

    from jobs.engine.seam import load_checkpoint_file

    for f in sorted((engine_dir / TAG).glob("*.pt")):  # the converter unpickles them freely: check them first
        load_checkpoint_file(f, map_location="cpu")
    ds_to_universal.main(argparse.Namespace(
        input_folder=str(engine_dir / TAG), output_folder=str(out_dir / TAG),  # also writes out_dir/latest_universal
        num_extract_workers=1, num_merge_workers=1,  # no process pool inside a Ray worker
        keep_temp_folder=False, strict=True,
        inject_missing_state=True))  # the version marker Megatron models carry and ours has no need of
    return out_dir


def load_engine(ckpt_dir: Path, cfg: PretrainConfig, world_size: int, local_rank: int, node_rank: int,
                weights_only: bool = False, schedule: bool = True) -> tuple[Engine, dict]:
    """A new Engine with `ckpt_dir`/engine loaded (see Engine.load); returns (engine, client_state).
    Every rank calls. Loads as saved where it can, through the universal form where the world size changed."""
    saved = read_topology(ckpt_dir)
    if weights_only:
        hand_off_layout(saved, cfg)
    if weights_only or not needs_universal(saved, world_size, cfg):
        engine = build_engine(cfg)  # weights alone load from the model-states file at any world size
        return engine, engine.load(ckpt_dir / "engine", weights_only=weights_only, schedule=schedule)
    if dist.is_initialized() and dist.get_rank() == 0:
        log.info(f"[resume] checkpoint saved by {saved['world_size']} workers, resuming on {world_size}: "
                 "converting its ZeRO state to a universal checkpoint")
    with universal_copy(ckpt_dir / "engine", local_rank, node_rank) as load_dir:
        engine = build_engine(cfg, load_universal=True)
        return engine, engine.load(load_dir, schedule=schedule)


@contextmanager
def universal_copy(engine_dir: Path, local_rank: int, node_rank: int) -> Iterator[Path]:
    """The universal form of `engine_dir` on this node's disk, for as long as the block runs (every rank
    must enter). Node-local rank 0 converts; the path reaches the node's other ranks by all-gather."""
    out = scratch_dir("universal") if local_rank == 0 else None
    try:
        if out is not None:
            to_universal(engine_dir, out)
        paths = [(node_rank, str(out) if out else None)]
        if dist.is_initialized():
            paths = [None] * dist.get_world_size()
            dist.all_gather_object(paths, (node_rank, str(out) if out else None))
        yield Path(dict(p for p in paths if p[1] is not None)[node_rank])
        if dist.is_initialized():
            dist.barrier()  # every rank of this node has loaded before the copy goes
    finally:
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
