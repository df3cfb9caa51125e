"""Exact resume: across a worker killed while uploading a checkpoint in epoch 2, a resubmitted run and a different
worker count, every example of an epoch is trained on exactly once, and the resumed run's loss matches an
uninterrupted one."""

import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bert_core.config import ConfigError
from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config
from jobs.engine.ds_config import lr_lambda
from jobs.pretrain import run
from tests.e2e.quick import quick_config
from tests.e2e.records import assert_epoch_covered_once, effective_ids, first_steps, train_ids
from tests.ports import free_port
from tests.ranks import exit_rank

pytestmark = pytest.mark.slow
MICRO_BATCH = 16  # twice 8: half the steps (and checkpoints) per epoch, the same properties


def job(tmp: Path, data: Path, name: str, *extra: str):
    return run(config(tmp, data, name, *extra))


def config(tmp: Path, data: Path, name: str, *extra: str) -> PretrainConfig:
    """Run `name` under `tmp` on the corpus and prepared set in `data` (the session's `shared_data`)."""
    (tmp / name).mkdir(exist_ok=True)
    return quick_config(tmp, name, f"train.micro_batch_size={MICRO_BATCH}", "train.log_every=10",
                        "train.eval_batches=4", "train.checkpoint_every=5", f"faults.record_ids_dir={tmp / name}",
                        "optim.warmup_steps=5", *extra, corpus_mb=0.4, data_dir=data)


@pytest.fixture(scope="module")
def epoch_examples(ray_tmp, shared_data) -> int:
    """Train examples in an epoch of the set every run here trains on: harvested and prepared as the job
    does (the jobs then reuse both, named by the same inputs and config)."""
    from pipelines.harvest import harvest_installed_docs
    from pipelines.prepare import prepare  # here: mp.spawn's children import this module and need no Ray

    cfg = config(ray_tmp, shared_data, "probe")
    harvest_installed_docs(cfg.corpus.harvest_dir, max_mb=cfg.corpus.harvest_max_mb)
    return prepare(cfg.data).manifest["counts"]["examples_train"]


def test_worker_killed_uploading_a_checkpoint_in_epoch_2_resumes_exactly(ray_tmp, shared_data, epoch_examples,
                                                                         capsys):
    """Rank 1 is SIGKILLed half-way through copying its part of the step-`kill` checkpoint into the run's folder
    (the report's upload), in the second epoch: Ray registers a checkpoint only once every rank reported, so the
    restarted workers resume from an earlier complete one, and over both epochs every example is trained on once
    per epoch. The partial folder, and any other Ray never registered, is reported as ignored, and counted."""
    per_epoch = -(-(epoch_examples // 2) // MICRO_BATCH)  # steps of one epoch on 2 workers
    steps, kill = 2 * per_epoch, (per_epoch // 5 + 2) * 5  # a checkpoint step (every 5) inside epoch 2
    resumed = job(ray_tmp, shared_data, "killed", f"train.max_steps={steps}", f"faults.fail_at_step={kill}",
                  "faults.fail_in_checkpoint=upload")
    assert (ray_tmp / "runs" / "killed" / "failed-killed").is_file()  # the worker really died (its run's marker)
    first, restart = first_steps(ray_tmp / "killed")
    # Resumed after a complete checkpoint before the half-written one: step kill - 5, or an earlier one when the
    # controller had not yet collected that report (Ray Train gathers reports by polling the workers).
    assert first == 1 and (restart - 1) % 5 == 0 and restart <= kill - 4, (restart, kill)
    ids = train_ids(resumed.data_dir)
    assert len(ids) == epoch_examples and resumed.metrics["epoch"] == 1
    for epoch in (0, 1):
        assert_epoch_covered_once(effective_ids(ray_tmp / "killed", epoch), ids, workers=2)
    assert resumed.metrics["samples_consumed_in_epoch"] >= len(ids) - 1
    # The folders Ray never registered: the partial one, and whole ones whose report it lost (then it resumed
    # before them). Each is printed once, with what it lacks.
    run_dir = ray_tmp / "runs" / "killed"
    snapshot = json.loads((run_dir / "checkpoint_manager_snapshot.json").read_text())
    unregistered = {d.name for d in run_dir.glob("checkpoint_*") if d.is_dir()} - {
        c["checkpoint_dir_name"] for c in snapshot["checkpoint_results"]}
    warnings = [line for line in capsys.readouterr().out.splitlines() if "[train] warning: ignored" in line]
    assert sorted(line.split()[3] for line in warnings) == sorted(unregistered)
    assert resumed.metrics["checkpoints_ignored"] == len(unregistered)
    partial = [line for line in warnings if "(incomplete, missing " in line]
    assert len(partial) == 1, warnings  # the folder rank 1 died uploading into (rank 0's part may be whole)
    assert restart == kill - 4 or len(unregistered) > 1  # else a lost report left its (whole) folder behind

    clean = job(ray_tmp, shared_data, "uninterrupted", f"train.max_steps={steps}")
    assert resumed.metrics["eval_after/mlm_loss"] == pytest.approx(clean.metrics["eval_after/mlm_loss"], rel=0.03)
    assert resumed.metrics["eval_before/mlm_loss"] == pytest.approx(clean.metrics["eval_before/mlm_loss"])


def test_resubmitted_run_resumes_exactly_then_on_a_different_worker_count(ray_tmp, shared_data, epoch_examples):
    """2 workers stop at step 10; the same run resubmitted on 2 workers continues at step 11 and stops at 20;
    resubmitted again on 1 worker, it converts the ZeRO-2 checkpoint to a universal one, continues at step 21
    and takes the rest of the epoch, scoring the held-out examples and masks of before. Each resubmission's MLflow run names the run it continued; one with another
    model shape is refused before any MLflow run starts."""
    n = epoch_examples
    first = job(ray_tmp, shared_data, "rescaled", "train.max_steps=10")
    assert first.metrics["step"] == 10
    again = job(ray_tmp, shared_data, "rescaled", "train.max_steps=20")  # same name: continues at step 10
    assert again.metrics["step"] == 20
    left = n - 20 * 2 * MICRO_BATCH
    target = 20 + -(-left // MICRO_BATCH)  # one worker, MICRO_BATCH examples a step, up to the end of the epoch
    assert target > 30  # step 30's learning rate is checked below
    cfg = config(ray_tmp, shared_data, "rescaled", f"train.max_steps={target}", "scaling.num_workers=1")
    last = run(cfg)
    m = last.metrics
    assert m["step"] == target and m["epoch"] == 0 and m["samples_consumed_in_epoch"] == n
    assert first_steps(ray_tmp / "rescaled") == [1, 11, 21]  # each submission took up where the last stopped
    # Two attempts stopped mid-epoch and the last one ran on a single worker: nothing left out.
    assert_epoch_covered_once(effective_ids(ray_tmp / "rescaled"), train_ids(last.data_dir), workers=1)
    assert m["eval_before/mlm_loss"] == first.metrics["eval_before/mlm_loss"]  # client state came through
    assert m["eval_after/mlm_loss"] < first.metrics["eval_after/mlm_loss"]
    # One worker scored the masked tokens two scored before training: the same held-out set, the same masks.
    assert m["eval_after/mlm_tokens"] == m["eval_before/mlm_tokens"] == first.metrics["eval_after/mlm_tokens"]

    from mlflow.tracking import MlflowClient

    # The schedule came through: step 30 trained at the schedule's 30th rate (position 29), not a fresh one's 10th.
    client = MlflowClient(cfg.tracking.tracking_uri)
    lr = {p.step: p.value for p in client.get_metric_history(last.mlflow["run_id"], "train/lr")}
    assert lr[30] == pytest.approx(cfg.optim.lr * lr_lambda(cfg.optim, cfg.train.max_steps)(29))
    # Each submission's MLflow run names the one it continued, and from which step.
    continued = [(t["continued_from"], t["continued_at_step"]) for t in
                 (client.get_run(r.mlflow["run_id"]).data.tags for r in (again, last))]
    assert continued == [(first.mlflow["run_id"], "10"), (again.mlflow["run_id"], "20")]
    assert "continued_from" not in client.get_run(first.mlflow["run_id"]).data.tags
    # Another model shape under the same run_name: refused before a run starts, naming the change.
    runs = len(client.search_runs([client.get_experiment_by_name(cfg.tracking.experiment).experiment_id]))
    with pytest.raises(ConfigError, match=rf"run_name='rescaled' already holds a checkpoint \(step {target}\) .*"
                                          r"model.num_hidden_layers 2 -> 3"):
        job(ray_tmp, shared_data, "rescaled", f"train.max_steps={target + 5}", "model.num_hidden_layers=3")
    assert len(client.search_runs([client.get_experiment_by_name(cfg.tracking.experiment).experiment_id])) == runs


# -- the engine alone: a universal checkpoint continues exactly where the saved run would have ---------------

GLOBAL_BATCH = 12  # splits evenly over 1, 2 and 3 ranks


def _engine_config(zero_stage: int, recipe: str = "bert") -> PretrainConfig:
    # No dropout: the saved run's continuation and the resumed one must see identical arithmetic (the modern
    # recipe has none by default). Either recipe: a BERT with NSP, or the modern encoder's masked LM.
    model = (["model.hidden_dropout_prob=0", "model.attention_probs_dropout_prob=0"] if recipe == "bert"
             else ["model.recipe=modern"])
    return load_config(PretrainConfig, None, [
        "data.sources=[x]", "model.vocab_size=100", *model, f"deepspeed.zero_stage={zero_stage}",
        "train.max_steps=20", "optim.warmup_steps=2", "optim.lr=1e-2"])


def _batches(n: int, seq: int = 16) -> list[dict]:
    """Two masked tokens in every row, so each rank's mean loss averages to the global batch's mean."""
    gen = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        ids = torch.randint(5, 100, (GLOBAL_BATCH, seq), generator=gen)
        labels = torch.full_like(ids, -100)
        labels[:, [3, 7]] = ids[:, [3, 7]]
        out.append({"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": torch.ones_like(ids),
                    "mlm_labels": labels, "next_sentence_label": torch.randint(0, 2, (GLOBAL_BATCH,), generator=gen)})
    return out


def _engine_worker(rank: int, world: int, port: int, zero_stage: int, ckpt: str, out: str, resume: bool,
                   recipe: str = "bert") -> None:
    """Train 6 steps, saving after 3; or, with `resume`, load that checkpoint on `world` ranks (2 to a node)
    and train the same last 3."""
    from jobs.workers.pretrain_engine import build_engine
    from jobs.engine.checkpoint_parts import write_topology
    from jobs.workers.reshard import load_engine

    torch.set_num_threads(1)
    for key, value in dict(LOCAL_RANK=str(rank % 2), RANK=str(rank), WORLD_SIZE=str(world),
                           MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)).items():
        os.environ[key] = value
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        cfg, batches = _engine_config(zero_stage, recipe), _batches(6)
        cfg.train.micro_batch_size = GLOBAL_BATCH // world
        if resume:
            engine, state = load_engine(Path(ckpt), cfg, world, local_rank=rank % 2, node_rank=rank // 2)
            assert state["step"] == 3
        else:
            engine = build_engine(cfg)
        rows = slice(rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world)
        for step, batch in enumerate(batches):
            if step < 3 and resume:
                continue
            if step == 3 and not resume:
                engine.save(Path(ckpt) / "engine", client_state={"step": 3})
                if rank == 0:
                    write_topology(Path(ckpt), world, zero_stage)
            engine.step({k: v[rows] for k, v in batch.items()})
        weights = {k: v.detach().clone() for k, v in engine.engine.module.state_dict().items()}
        if rank == 0:
            torch.save({"weights": weights, "lr": engine.lr, "step": engine.global_step}, out)
        dist.barrier()  # no rank tears gloo down while a peer still talks
        exit_rank()  # and none tears it down at all: the teardown itself can still abort (tests/ranks.py)
    finally:
        dist.destroy_process_group()


# ZeRO-0 loads as saved. ZeRO-1 and 2 share one loader in DeepSpeed (its shrink to 1 rank is the Ray test
# above); ZeRO-3 has its own, and our fix to it. The modern encoder (model.recipe=modern) through both loaders:
# its decoder is the word embedding itself, which ZeRO-3 partitions once.
@pytest.mark.parametrize("zero_stage, new_world, recipe", [(0, 3, "bert"), (2, 3, "bert"), (3, 1, "bert"),
                                                           (2, 3, "modern"), (3, 1, "modern")])
def test_checkpoint_continues_exactly_on_another_world_size(tmp_path, zero_stage, new_world, recipe):
    """Weights, Adam moments, step count and schedule all come through: 3 steps after a resume on another
    number of ranks land where the saved run's own next 3 steps did (a fresh optimizer and schedule miss by 4e-2)."""
    ckpt = tmp_path / "ckpt"
    mp.spawn(_engine_worker, args=(2, free_port(), zero_stage, str(ckpt), str(tmp_path / "saved.pt"), False, recipe),
             nprocs=2)
    mp.spawn(_engine_worker, args=(new_world, free_port(), zero_stage, str(ckpt), str(tmp_path / "resumed.pt"), True,
                                   recipe), nprocs=new_world)
    saved, resumed = torch.load(tmp_path / "saved.pt"), torch.load(tmp_path / "resumed.pt")
    assert resumed["step"] == saved["step"] == 6
    assert resumed["lr"] == pytest.approx(saved["lr"])
    for name, want in saved["weights"].items():
        torch.testing.assert_close(resumed["weights"][name], want, rtol=0, atol=1e-6, msg=name)
