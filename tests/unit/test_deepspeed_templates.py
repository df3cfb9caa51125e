"""cluster/deepspeed/: the DeepSpeed templates are what the pretraining job builds for the cluster config at each
ZeRO stage, the RayJob's hyperparameters are the ZeRO-2 template's, and DeepSpeed itself accepts every template."""

import json
import shlex

import pytest

from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig
from jobs.engine.ds_config import deepspeed_config
from tests.unit.test_cluster_templates import CLUSTER, KUBERAY, ROOT, load

# The templates are what the job builds for configs/pretrain/cluster-base.yaml (BERT-base phase 1 on 16 GPUs, bf16,
# LAMB), the config rayjob.yaml and the launcher example run, at each ZeRO stage. ZeRO-Offload steps only DeepSpeed's
# CPU Adam (the config refuses LAMB with it), so its template is the same run with AdamW.
CLUSTER_BASE = ROOT / "configs" / "pretrain" / "cluster-base.yaml"
TEMPLATES = {
    "zero1.json": ["deepspeed.zero_stage=1"],
    "zero2.json": ["deepspeed.zero_stage=2"],
    "zero3.json": ["deepspeed.zero_stage=3"],
    "zero3-offload.json": ["deepspeed.zero_stage=3", "deepspeed.offload_optimizer=true",
                           "deepspeed.offload_params=true", "optim.name=adamw", "optim.lr=5.0e-4", "optim.beta2=0.98"],
}


def pretrain_ds_config(cfg, world_size: int, load_universal: bool = False) -> dict:
    return deepspeed_config(cfg.optim, cfg.deepspeed, micro_batch_size=cfg.train.micro_batch_size,
                            grad_accum_steps=cfg.train.grad_accum_steps, world_size=world_size,
                            use_gpu=cfg.scaling.use_gpu, load_universal=load_universal)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_deepspeed_template_mirrors_engine_config(name):
    cfg = load_config(PretrainConfig, CLUSTER_BASE, TEMPLATES[name])
    produced = pretrain_ds_config(cfg, world_size=16)
    # train_batch_size depends on the world size; DeepSpeed derives it from micro batch x accumulation.
    assert produced.pop("train_batch_size") == 64 * 4 * 16
    assert json.loads((CLUSTER / "deepspeed" / name).read_text()) == produced


def test_rayjob_hyperparameters_match_the_zero2_template():
    job = load(KUBERAY / "rayjob.yaml")["spec"]
    words = shlex.split(job["entrypoint"])
    cfg = load_config(PretrainConfig, ROOT / words[3], words[4:])
    produced = pretrain_ds_config(cfg, world_size=cfg.scaling.num_workers)
    produced.pop("train_batch_size")
    assert cfg.deepspeed.zero_stage == 2
    assert json.loads((CLUSTER / "deepspeed" / "zero2.json").read_text()) == produced


def test_deepspeed_accepts_every_template():
    from deepspeed.runtime.config import DeepSpeedConfig

    for name, overrides in TEMPLATES.items():
        parsed = DeepSpeedConfig(json.loads((CLUSTER / "deepspeed" / name).read_text()))
        assert parsed.zero_optimization_stage == int(overrides[0][-1])
        assert parsed.bfloat16_config.enabled
        assert parsed.train_batch_size == 64 * 4  # world size 1 outside a process group
        assert (parsed.zero_config.offload_optimizer is not None) == ("offload" in name)
