"""The learning rate logged at step N (train/lr, the progress line's `lr`) is the rate step N trained at: DeepSpeed
steps the schedule right after the optimizer, so the rate read after a step is the next one's (warmup's peak a step
early, 0 at the last step). Pretraining's loop (a real schedule over a plain torch optimizer, gradient accumulation
included) and the fine-tuning loop (which the Ray Train worker and the sweep trial both run)."""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from jobs.config.sections import OptimConfig
from jobs.engine.ds_config import lr_lambda
from jobs.engine.seam import EngineBase, StepStats

LR, WARMUP, STEPS = 1e-2, 3, 6


class ScheduledEngine(EngineBase):
    """The seam's schedule over a plain torch optimizer, stepped as DeepSpeed's engine.step() does at a boundary:
    the optimizer at the group's rate, then the scheduler. Records the rate each optimizer step trained at."""

    data_parallel = (0, 1)

    def __init__(self, accumulation: int):
        optim = OptimConfig(lr=LR, warmup_steps=WARMUP)
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=LR)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(optim, STEPS))
        ds = SimpleNamespace(device="cpu", skipped_steps=0, get_global_grad_norm=lambda: 1.0)
        objective = SimpleNamespace(metrics=lambda sums: {"mlm_acc": 0.5})
        super().__init__(ds, opt, sched, objective, optim=optim, max_steps=STEPS, zero_stage=0)
        self.accumulation, self.calls, self.trained_at = accumulation, 0, []

    def step(self, batch, inject_nan: bool = False) -> StepStats:
        self.calls += 1
        boundary = self.calls % self.accumulation == 0
        if boundary:
            self.trained_at.append(self.optimizer.param_groups[0]["lr"])
            self.optimizer.step()
            self.scheduler.step()
        return StepStats(loss=2.0, optimizer_stepped=boundary)


def _pretraining_worker(engine: ScheduledEngine, logged: list):
    """A Worker with only what run() reads: the engine, a stream of micro-batches, a logger; no Ray, no evaluation."""
    from jobs.loops.data_position import DataPosition
    from jobs.loops.loss_guard import LossGuard
    from jobs.workers.pretrain_worker import Prepared, Worker

    w = Worker.__new__(Worker)
    w.rank, w.world, w.step, w.before, w.carried, w.pipelined, w.rollbacks = 0, 1, 0, {}, None, False, 0
    w.t = SimpleNamespace(max_steps=STEPS, log_every=1, checkpoint_every=0)
    w.cfg = SimpleNamespace(model=None, data=SimpleNamespace(max_seq_len=8), scaling=SimpleNamespace(use_gpu=False),
                            deepspeed=SimpleNamespace(precision="fp32"), faults=SimpleNamespace(record_ids_dir=None))
    w.engine, w.guard, w.position = engine, LossGuard(3), DataPosition.start(10)
    w.pending_ids, w.step_ids, w.mask_next = [], [], 0
    w.faults = SimpleNamespace(nan_now=lambda step, rollbacks: False, maybe_fail=lambda *a: None)
    w.logger = SimpleNamespace(log=lambda metrics, step: logged.append((step, metrics)))
    w.stream = (Prepared({"example_id": np.arange(2)}, {"attention_mask": torch.ones(2, 8)}, i)
                for i in itertools.count())
    w.restore, w.checkpoint = lambda: None, lambda *a, **kw: None
    w.evaluate = lambda: {"mlm_acc": 0.0, "mlm_loss": 4.0}
    return w


@pytest.mark.parametrize("accumulation", [1, 2])
def test_the_pretraining_loop_logs_the_rate_each_step_trained_at(monkeypatch, accumulation):
    from jobs.workers import pretrain_worker

    monkeypatch.setattr(pretrain_worker, "flops_per_token", lambda *a: 1.0)
    engine, logged = ScheduledEngine(accumulation), []
    _pretraining_worker(engine, logged).run()
    logged = [(step, m) for step, m in logged if "train/lr" in m]
    rates = [m["train/lr"] for _, m in logged]
    assert [step for step, _ in logged] == list(range(1, STEPS + 1))
    assert rates == pytest.approx(engine.trained_at)
    assert rates == pytest.approx([LR * f for f in (1 / 3, 2 / 3, 1, 1, 2 / 3, 1 / 3)])  # the peak at step 3, no 0


def test_the_fine_tuning_loop_logs_the_rate_each_step_trained_at():
    from tests.unit.test_finetune_loop import Run, TinyEngine

    class Scheduled(TinyEngine):  # its SGD stepped, then a linear warmup-and-decay schedule, as DeepSpeed does
        def __init__(self):
            super().__init__()
            self.schedule = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_lambda(OptimConfig(warmup_steps=3), 15))
            self.trained_at = []

        def step(self, batch):
            self.trained_at.append(self.lr)
            stats = super().step(batch)
            self.schedule.step()
            return stats

    run = Run(engine=Scheduled(), log_every=1)  # 3 epochs of 5 batches: 15 steps
    run.loop.run()
    logged = {step: m["train/lr"] for step, m in run.tracked if "train/lr" in m}
    assert list(logged) == list(range(1, 16))
    assert list(logged.values()) == pytest.approx(run.engine.trained_at)
    assert logged[3] == pytest.approx(0.1) and logged[15] > 0  # warmup's peak at its last step; the last rate not 0
