"""The DeepSpeed engine on CUDA: one rank, ZeRO-2, bf16, DeepSpeed's fused Adam, NCCL; the loops' own collectives
on that NCCL group.

Runs in a child process: DeepSpeed picks its accelerator once per process at import, and the rest
of the suite imports it with DS_ACCELERATOR=cpu. Skipped cleanly without a CUDA device.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, sys
import torch, torch.distributed as dist
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", rank=0, world_size=1)
from bert_core.config import tiny
from bert_core.model import IGNORE_INDEX, host_packing
from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config
from jobs.workers.pretrain_engine import build_engine

cfg = load_config(PretrainConfig, None, ["data.sources=[x]", "train.max_steps=30", "optim.warmup_steps=2",
                                         "optim.lr=2e-3", "deepspeed.zero_stage=2", "deepspeed.precision=bf16",
                                         "scaling.use_gpu=true", "train.micro_batch_size=16"])
cfg.model = tiny(vocab_size=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
engine = build_engine(cfg)
g = torch.Generator().manual_seed(0)
B, T = 16, 64
lengths = torch.randint(T // 2, T + 1, (B,), generator=g)
mask = (torch.arange(T) < lengths[:, None]).long()
ids = torch.randint(5, 512, (B, T), generator=g) * mask
chosen = (torch.rand(B, T, generator=g) < 0.15) & mask.bool()
chosen[:, 1] = True
labels = torch.where(chosen, ids, IGNORE_INDEX)
batch = dict(input_ids=ids, token_type_ids=torch.zeros_like(ids), attention_mask=mask, mlm_labels=labels,
             next_sentence_label=torch.randint(0, 2, (B,), generator=g), **host_packing(mask, labels))
losses = [engine.step(batch).loss for _ in range(30)]
module = engine.engine.module
from jobs.engine.seam import in_lockstep, longest
# the loops' own collectives under NCCL, which takes no CPU tensor
lockstep = [in_lockstep({"x": 1}) is not None, in_lockstep(None) is None, longest(1.5) == 1.5]
print("RESULT " + json.dumps({"lockstep": lockstep,
    "losses": losses, "step": engine.global_step, "device": str(next(module.parameters()).device),
    "dtype": str(next(module.parameters()).dtype), "optimizer": type(engine.engine.optimizer).__name__,
    "inner": type(getattr(engine.engine.optimizer, "optimizer", None)).__name__}))
dist.destroy_process_group()
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_zero2_bf16_step_on_cuda():
    major, minor = torch.cuda.get_device_capability()
    # DeepSpeed 0.19.8's op builder cannot parse arch suffixes ("9.0a" in some images' TORCH_CUDA_ARCH_LIST):
    # build its fused Adam for the GPU at hand.
    env = dict(os.environ, DS_ACCELERATOR="cuda", TORCH_CUDA_ARCH_LIST=f"{major}.{minor}", LOCAL_RANK="0", RANK="0", WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(lines[-1][len("RESULT "):])
    assert r["device"].startswith("cuda") and r["dtype"] == "torch.bfloat16", r
    assert r["step"] == 30, r
    assert r["lockstep"] == [True, True, True], r  # the data loops' all-reduces run on the NCCL group
    assert all(loss == loss for loss in r["losses"]), r["losses"]  # no NaN
    assert r["losses"][-1] < 0.6 * r["losses"][0], r["losses"]  # one fixed batch: it must fit it (0.52 seen on H100)
