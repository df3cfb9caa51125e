"""A resumed run whose learning-rate schedule is not its checkpoint's plan says so: another total (more epochs or
steps) or another warmup (a fine-tune's optim.warmup_ratio, outside the continuation basis), with the next step's
rate and the checkpoint's own plan's at that position (its total, its warmup and its peak lr)."""

import dataclasses
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import ray.train
import torch

from bert_core.config import tiny
from bert_core.model import BertForSequenceClassification
from jobs.config.sections import OptimConfig

# real DeepSpeed engines saved and resumed (~12 s here): `make test`, not `make test-fast`
pytestmark = pytest.mark.slow
B, T, VOCAB, LABELS = 4, 16, 100, 3


def _batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (B, T), generator=g)
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": torch.ones_like(ids),
            "labels": torch.randint(0, LABELS, (B,), generator=g)}


def _model():
    torch.manual_seed(0)
    return BertForSequenceClassification(tiny(vocab_size=VOCAB), num_labels=LABELS)


def _engine(lr: float, warmup_steps: int, max_steps: int, **decay):
    from jobs.config.sections import DeepSpeedConfig
    from jobs.engine.data_parallel import Engine
    from jobs.engine.objectives import ClassificationObjective

    return Engine(_model(), ClassificationObjective(LABELS),
                  optim=OptimConfig(lr=lr, warmup_steps=warmup_steps, **decay),
                  deepspeed=DeepSpeedConfig(zero_stage=0), micro_batch_size=B, grad_accum_steps=1,
                  max_steps=max_steps, use_gpu=False)


def _rate(lr: float, warmup_steps: int, total: int, at: int) -> float:
    from jobs.engine.ds_config import lr_lambda

    return lr * lr_lambda(OptimConfig(lr=lr, warmup_steps=warmup_steps), total)(at)


def test_the_line_prices_the_checkpoints_plan_with_its_own_total_warmup_and_lr(deepspeed_world_of_one, tmp_path):
    """Resumed with another warmup alone, the line names it; with another total, warmup and optim.lr too, the
    checkpoint's rate is still its own plan's (it was computed with the new warmup and the new lr)."""
    a = _engine(1e-3, 2, 10)
    for i in range(3):
        a.step(_batch(i))
    a.save(tmp_path, {"step": 3})

    warmer = _engine(1e-3, 6, 10)
    warmer.load(tmp_path)
    was, now = _rate(1e-3, 2, 10, 3), _rate(1e-3, 6, 10, 3)
    assert warmer.lr == pytest.approx(now) and now < 0.8 * was  # back into the warmup: the rate drops
    saved_plan = dataclasses.replace(warmer.optim, warmup_steps=2)
    assert warmer.replanned(10, saved_plan) == (
        f"[resume] optim.warmup_steps 2 -> 6: the learning-rate schedule is planned with the new warmup, so the next "
        f"step trains at lr {now:.3g}, where the checkpoint's plan was at {was:.3g}")

    other = _engine(5e-4, 4, 20)
    other.load(tmp_path)
    was, now = _rate(1e-3, 2, 10, 3), _rate(5e-4, 4, 20, 3)
    assert other.lr == pytest.approx(now)
    assert other.replanned(10, dataclasses.replace(other.optim, warmup_steps=2)) == (
        f"[resume] train.max_steps 10 -> 20, optim.warmup_steps 2 -> 4: the learning-rate schedule is planned over "
        f"the new total and warmup, so the next step trains at lr {now:.3g}, where the checkpoint's plan was at "
        f"{was:.3g}")

    # pretraining's restore: its checkpoint's max_steps and warmup_steps (None: from before it kept them)
    assert warmer.resumed_plan(10, 6) is None and warmer.resumed_plan(10, None) is None
    assert warmer.resumed_plan(10, 2) == warmer.replanned(10, saved_plan)
    assert warmer.resumed_plan(8, None).startswith("[resume] train.max_steps 8 -> 10: the learning-rate schedule is "
                                                   "planned over the new total")


def _finetune_worker(tmp_path: Path, warmup_ratio: float, total: int = 10):
    """A fine-tuning worker with a real engine and what its _report() and restore() use besides."""
    from jobs.config.finetune import FinetuneConfig
    from jobs.workers.finetune_model import build_engine
    from jobs.workers.finetune_worker import Worker

    cfg = FinetuneConfig()
    cfg.train.batch_size, cfg.optim.lr, cfg.optim.warmup_ratio = B, 1e-3, warmup_ratio
    w = Worker.__new__(Worker)
    w.rank, w.resumes, w.cfg, w.config = 0, 0, cfg, {"mlflow_run_id": "run-a", "basis": {}}
    w.engine = build_engine(_model(), cfg, total)
    w.logger = SimpleNamespace(save_counts=lambda d: None, restore_counts=lambda d: None)
    w.best_dir = Path(tempfile.mkdtemp(prefix="best-", dir=tmp_path))  # one per worker (an id() is reused)
    w.loop = SimpleNamespace(step=3, epoch=0, epoch_steps=3, metric="accuracy", best=0.5, best_step=3, total=total,
                             state=lambda: {}, best_history=lambda: [], load_state=lambda state: None)
    return w


def test_a_resubmitted_fine_tune_with_another_warmup_ratio_says_so(deepspeed_world_of_one, reports, tmp_path,
                                                                   caplog):
    """Same run_name, same total, another optim.warmup_ratio: the rebuilt schedule's rate at the checkpoint's step
    differs from its plan's, and a line says so (none did). The same ratio says nothing; a checkpoint from before
    state.json kept warmup_steps resumes, its warmup unknown: no line for it."""
    first = _finetune_worker(tmp_path, warmup_ratio=0.2)  # 2 warmup steps of 10
    for i in range(3):
        first.engine.step(_batch(i))
    first._report({"accuracy": 0.5}, checkpoint=True, final=False)
    saved = reports[0][1]
    assert json.loads((saved / "state.json").read_text()) == {"total_steps": 10, "warmup_steps": 2}

    def resume(warmup_ratio: float, total: int = 10) -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="bert_foundry.finetune"):
            _finetune_worker(tmp_path, warmup_ratio, total).restore(ray.train.Checkpoint.from_directory(str(saved)))
        return [r.getMessage() for r in caplog.records if r.name == "bert_foundry.finetune"]

    assert resume(0.2) == []
    was, now = _rate(1e-3, 2, 10, 3), _rate(1e-3, 6, 10, 3)
    assert resume(0.6) == [
        f"[resume] warmup steps (optim.warmup_ratio x steps planned) 2 -> 6: the learning-rate schedule is planned "
        f"with the new warmup, so the next step trains at lr {now:.3g}, where the checkpoint's plan was at {was:.3g}"]

    (longer,) = resume(0.2, total=15)  # more epochs: 3 warmup steps of 15 (the ratio's), a change named too
    assert longer.startswith("[resume] steps planned (train.epochs, train.max_steps) 10 -> 15, warmup steps")

    (saved / "state.json").write_text(json.dumps({"total_steps": 10}))  # as written before warmup_steps was kept
    assert resume(0.6) == []
    assert resume(0.2, total=15)[0].startswith("[resume] steps planned (train.epochs, train.max_steps) 10 -> 15: ")


def test_a_resume_with_another_decay_says_its_rate_jump(deepspeed_world_of_one, tmp_path):
    """Saved after 6 of 10 linear steps (2 of warmup), resumed under another optim.schedule: the rebuilt schedule's
    rate jumps (constant: back to the peak) and the line names the change, as a changed total or warmup is named.
    Another poly_power is named where the decay is poly; under linear or constant it changes no rate: no line. A
    checkpoint from before the decay was recorded (None) is taken as planned with this run's."""
    a = _engine(1e-2, 2, 10)
    for i in range(6):
        a.step(_batch(i))
    a.save(tmp_path, {"step": 6})
    saved = dict(schedule="linear", poly_power=0.5)

    constant = _engine(1e-2, 2, 10, schedule="constant")
    constant.load(tmp_path)
    was = _rate(1e-2, 2, 10, 6)
    assert (constant.lr, was) == (pytest.approx(1e-2), pytest.approx(5e-3))
    assert constant.resumed_plan(10, 2, **saved) == (
        f"[resume] optim.schedule linear -> constant: the learning-rate schedule is planned with the new decay, so the "
        f"next step trains at lr {1e-2:.3g}, where the checkpoint's plan was at {was:.3g}")
    assert constant.resumed_plan(10, 2, schedule=None, poly_power=None) is None  # an older checkpoint: unknown

    poly = _engine(1e-2, 2, 10, schedule="poly", poly_power=1.0)
    poly.load(tmp_path)
    assert poly.resumed_plan(10, 2, schedule="poly", poly_power=0.5) == (
        f"[resume] optim.poly_power 0.5 -> 1: the learning-rate schedule is planned with the new decay, so the next "
        f"step trains at lr {poly.lr:.3g}, where the checkpoint's plan was at {1e-2 * 0.5 ** 0.5:.3g}")
    assert poly.resumed_plan(10, 2, schedule="poly", poly_power=1.0) is None
    linear = _engine(1e-2, 2, 10, poly_power=1.0)
    linear.load(tmp_path)
    assert linear.resumed_plan(10, 2, **saved) is None  # the power of a decay neither plan uses

    longer = _engine(1e-2, 4, 20, schedule="constant")
    longer.load(tmp_path)
    assert longer.resumed_plan(10, 2, **saved).startswith(
        "[resume] train.max_steps 10 -> 20, optim.warmup_steps 2 -> 4, optim.schedule linear -> constant: the "
        "learning-rate schedule is planned over the new total, warmup and decay, so the next step trains at lr ")


def test_a_pretraining_checkpoint_keeps_its_decay_and_a_resume_under_another_names_it(reports, monkeypatch, tmp_path,
                                                                                      caplog):
    """The worker's round trip: checkpoint() records optim.schedule and poly_power beside max_steps and warmup_steps,
    and restore() hands them to the engine's resumed_plan (no DeepSpeed: the seam's schedule over a torch SGD)."""
    from jobs.engine.ds_config import lr_lambda
    from jobs.engine.seam import EngineBase
    from jobs.workers import pretrain_worker
    from tests.unit.test_pretrain_worker_windows import _checkpointing_worker

    class PlanEngine(EngineBase):
        data_parallel = (0, 1)

    def engine(optim):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=optim.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(optim, 10))
        ds = SimpleNamespace(device="cpu", gradient_clipping=lambda: 1.0)
        return PlanEngine(ds, opt, sched, None, optim=optim, max_steps=10, zero_stage=0)

    linear = OptimConfig(lr=1e-2, warmup_steps=2)
    job1 = engine(linear)
    for _ in range(6):
        job1.optimizer.step()
        job1.scheduler.step()
    first = _checkpointing_worker(tmp_path)
    first.step, first.t.max_steps, first.engine.optim = 6, 10, linear
    first.checkpoint({}, last=False)
    assert {k: first.engine.state[k] for k in ("schedule", "poly_power")} == {"schedule": "linear", "poly_power": 0.5}

    def load(d, **kw):  # what Engine.load does with the saved optimizer and schedule
        second.engine = engine(dataclasses.replace(linear, schedule="constant"))
        second.engine.optimizer.load_state_dict(job1.optimizer.state_dict())
        second.engine.scheduler.load_state_dict(job1.scheduler.state_dict())
        second.engine._keep_config([{}])
        return dict(first.engine.state)

    second = _checkpointing_worker(tmp_path)
    second.t.max_steps, second._load_engine = 10, load
    monkeypatch.setattr(pretrain_worker.ray.train, "get_checkpoint",
                        lambda: ray.train.Checkpoint.from_directory(str(reports[0][1])))
    with caplog.at_level("WARNING", logger="bert_foundry.train"):
        second.restore()
    assert second.engine.lr == pytest.approx(1e-2)
    assert [r.getMessage() for r in caplog.records if r.name == "bert_foundry.train"] == [
        f"[resume] optim.schedule linear -> constant: the learning-rate schedule is planned with the new decay, so the "
        f"next step trains at lr {1e-2:.3g}, where the checkpoint's plan was at {5e-3:.3g}"]


def test_a_phase_2_engine_is_built_naming_phase_2s_settings(deepspeed_world_of_one):
    """The names PretrainConfig.setting_names gives reach the engine a pretraining builds, which its resume lines
    read (test_pretrain_worker_windows's phase 2 test)."""
    from jobs.config.pretrain import PretrainConfig
    from jobs.workers.pretrain_engine import build_engine

    cfg = PretrainConfig()
    cfg.phase2.max_steps, cfg.data.sources = 4, ["/corpus"]
    assert build_engine(cfg).names["total"] == "train.max_steps"
    assert build_engine(cfg.phase2_run("/runs/pretrain-phase1", "/tok")).names["total"] == "phase2.max_steps"
    # ... as the workers rebuild it from what the driver hands them (from_dict alone made it phase 1's)
    handed = PretrainConfig.from_worker(cfg.phase2_run("/runs/pretrain-phase1", "/tok").to_worker())
    assert handed.phase == 2 and build_engine(handed).names["total"] == "phase2.max_steps"
    assert PretrainConfig.from_worker(cfg.to_worker()).phase == 1
