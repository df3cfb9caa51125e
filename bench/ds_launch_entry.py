"""The plain side of bench/ray_overhead.py: what `deepspeed --num_gpus N` starts on each rank.

    deepspeed --num_gpus 2 --no_local_rank bench/ds_launch_entry.py SPEC.json

The launcher sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; this script sets up
the process group the way Ray Train's TorchConfig does (env:// rendezvous, gloo on CPU, NCCL on
GPU) and runs the same `rank_main` as the Ray side. Rank 0 writes the summary to spec["result"].
"""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the launcher runs this file by path

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from bench.ray_overhead import rank_main  # noqa: E402


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    if spec["backend"] == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend=spec["backend"], init_method="env://")
    try:
        out = rank_main(spec)
        if dist.get_rank() == 0:
            Path(spec["result"]).write_text(json.dumps(out))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
