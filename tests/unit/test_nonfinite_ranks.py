"""A NaN/inf loss on any one rank skips the micro-batch on every rank (jobs/engine/data_parallel.py, the finite flag's
all-reduce): with two gloo ranks, not the one-rank group the other engine tests run in, where any reduction passes."""

import json
import math
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.ports import free_port
from tests.ranks import exit_rank

# each micro-batch's loss on rank 0 and rank 1, and whether the engine takes it (on both ranks alike)
LOSSES = [((0.75, math.nan), False), ((math.inf, 0.5), False), ((math.nan, -math.inf), False), ((0.75, 0.5), True)]


def _finite_on_two_ranks(rank: int, port: int, out) -> None:
    """One rank of a two-rank gloo group: the engine's verdict on each of LOSSES, this rank's loss given."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(minutes=1))  # a rank left waiting fails in a minute, not thirty
    try:
        from jobs.engine.data_parallel import Engine

        engine = Engine.__new__(Engine)  # no DeepSpeed engine built: the verdict needs only the process group
        verdicts = [engine._finite_everywhere(torch.tensor(losses[rank])) for losses, _ in LOSSES]
        (out / f"rank{rank}.json").write_text(json.dumps(verdicts))
        dist.barrier()  # neither rank tears gloo down while its peer still talks
        exit_rank()  # nor at all (tests/ranks.py)
    finally:
        dist.destroy_process_group()


def test_a_nan_on_one_rank_skips_the_micro_batch_on_both(tmp_path):
    """Rank 1's NaN alone (or rank 0's inf) stops both ranks before the backward: a rank that took the micro-batch
    would wait in a gradient all-reduce its peer never joins, or put a NaN into every rank's weights."""
    mp.spawn(_finite_on_two_ranks, args=(free_port(), tmp_path), nprocs=2, join=True)
    expected = [finite for _, finite in LOSSES]
    assert [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)] == [expected, expected]
