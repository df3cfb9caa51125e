"""jobs/workers/pretrain_worker.py's log windows, checkpoints and rollbacks, on a worker built without Ray: the
optimizer steps a window reports, when a checkpoint is due, a resubmission's rollbacks, the window a checkpoint
carries across a resume, and a phase-2 resume's setting names (the replicas' reads and the held-out set:
tests/unit/test_pretrain_worker.py)."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import ray.train
import torch

from jobs.loops.data_position import DataPosition
from jobs.workers.pretrain_worker import Worker


def test_a_log_window_reports_the_optimizer_steps_deepspeed_skipped():
    """fp16 overflow: DeepSpeed skips the update but counts the step; the count reaches train/skipped_steps."""
    worker = Worker.__new__(Worker)
    worker.engine = SimpleNamespace(lr=2e-4, grad_norm=lambda: 0.5, skipped_steps=3)  # lr: the next step's
    worker.step, worker.step_lr, worker.position, worker.rollbacks = 40, 1e-4, DataPosition.start(4), 0
    worker.guard = SimpleNamespace(skipped=1)
    metrics = worker._position_metrics()
    assert metrics == dict(step=40, epoch=0, lr=1e-4, grad_norm=0.5, nonfinite_total=1, rollbacks=0, skipped_steps=3)


def test_no_checkpoint_is_saved_inside_a_nonfinite_streak():
    """A pipeline step whose update the optimizer dropped (NaN) still counts: a checkpoint due then waits for the
    next finite step, so a rollback never restores weights the streak was giving NaN from. The last step saves."""
    worker = Worker.__new__(Worker)
    worker.t, worker.guard, worker.save_owed = SimpleNamespace(checkpoint_every=4), SimpleNamespace(streak=0), False
    saved = []
    for step, streak in enumerate([0, 0, 0, 1, 2, 0, 0, 0, 0, 1], start=1):  # NaN at steps 4, 5 and 10
        worker.step, worker.guard.streak = step, streak
        if worker._checkpoint_due(last=step == 10):
            saved.append(step)
    assert saved == [6, 8, 10]


def test_a_resubmitted_jobs_rollback_compounds_with_the_earlier_jobs_each_counted_once(monkeypatch):
    """The rollback ledger lives one job: a resubmission's starts empty, and scale_lr sets the rate from optim.lr, so
    the first rollback of job 2 (x0.5) trained at job 1's rate again (0.5 x lr, not 0.25 x). The checkpoint carries
    the rollbacks; a restart within a job finds its own in both, counted once."""
    from jobs.workers import pretrain_worker

    monkeypatch.setattr(pretrain_worker.ray, "get", lambda ref: ref)
    scaled = []

    def worker(saved, ledger):
        w = Worker.__new__(Worker)
        w.rank, w.step, w.saved_rollbacks = 1, 30, saved
        w.ledger = SimpleNamespace(rollbacks=SimpleNamespace(remote=lambda: ledger))
        w.engine = SimpleNamespace(scale_lr=scaled.append)
        w._apply_rollbacks()
        return w

    job1 = {"id": "a", "step": 12, "lr_factor": 0.5}
    job2 = {"id": "b", "step": 25, "lr_factor": 0.5}
    assert worker([job1], [job2]).rollbacks == 2 and scaled == [0.25]  # resubmitted, then rolled back
    assert worker([job1, job2], [job2]).rollbacks == 2 and scaled[-1] == 0.25  # a restart within job 2
    assert worker([job1], []).rollback_log == [job1] and scaled[-1] == 0.5  # resubmitted, no rollback yet
    scaled.clear()
    assert worker([], []).rollbacks == 0 and scaled == []


# -- the log window across a resume -------------------------------------------------------------------------------


class SavingEngine:
    """What checkpoint() and restore() call on an engine; save writes the client state as DeepSpeed does
    (torch.save) and reads it back into `state` the way a resume does (weights_only)."""

    optim, data_parallel = SimpleNamespace(warmup_steps=10, schedule="linear", poly_power=0.5), (0, 1)

    def save(self, path, client_state):
        Path(path).mkdir(parents=True)
        torch.save(client_state, Path(path) / "client_state.pt")
        self.state = torch.load(Path(path) / "client_state.pt", weights_only=True)

    def resumed_plan(self, *args, **kwargs):
        return ""


def _checkpointing_worker(tmp_path: Path) -> Worker:
    w = Worker.__new__(Worker)  # only what checkpoint(), restore() and _run_window() use
    w.rank, w.world, w.step, w.mask_next, w.pending_ids, w.before, w.rollback_log = 0, 1, 0, 0, [], {}, []
    w.t, w.pipelined, w.carried = SimpleNamespace(max_steps=200), False, None
    w.cfg = SimpleNamespace(faults=SimpleNamespace(record_ids_dir=None), output_dir=str(tmp_path), run_name="pretrain",
                            deepspeed=SimpleNamespace(zero_stage=0, pipeline_stages=1, partition_method="parameters"))
    w.config = {"mlflow_run_id": "run-1", "basis": {}}
    w.position, w.index = DataPosition.start(10), lambda ids: ids.astype(np.int64)
    w.guard, w.engine = SimpleNamespace(skipped=0), SavingEngine()
    w.faults = SimpleNamespace(maybe_fail=lambda *a: None, upload_fn=lambda *a: None)
    w.logger = SimpleNamespace(save_counts=lambda d: None, restore_counts=lambda d: None)
    w._start_masks, w._apply_rollbacks = lambda index: None, lambda: None
    return w


def _window(losses: list[float], nonfinite: int = 0):
    """One rank's log window: a micro-batch a step at these losses, 10 masked tokens each."""
    from jobs.loops.metrics import MetricsWindow

    w = MetricsWindow(nonfinite=nonfinite)
    for loss in losses:
        sums = {"mlm_loss_sum": 10 * loss, "mlm_correct": float(int(3 * loss)), "mlm_count": 10.0}
        w.add(SimpleNamespace(micro_batches=1, loss=loss, sums=sums), tokens=128, samples=4, data_wait=0.0)
    return w


def test_a_resumed_pretraining_run_logs_its_first_window_as_an_uninterrupted_one(reports, monkeypatch, tmp_path):
    """Logged every 4 steps, checkpointed at step 6 (a NaN skipped at 5), restarted: the first log, at step 8, averaged
    steps 7-8 alone where an uninterrupted run averages 5-8. The checkpoint keeps the window's loss, the objective's
    sums and the non-finite count, every rank's (two alike here: the all-reduce doubles), and the resumed worker adds
    them after its own all-reduce, once. Tokens and samples stay its own: its rates are of its own steps and seconds.
    A checkpoint from before the window was kept restores with an empty one."""
    from jobs.workers import pretrain_worker

    monkeypatch.setattr(pretrain_worker, "summed", lambda values: [2 * v for v in values])  # a second rank alike
    losses = [4.0, 3.6, 3.1, 2.9, 2.7, 2.2, 2.05, 1.9]
    clean = _checkpointing_worker(tmp_path)._run_window(_window(losses[4:8], nonfinite=1))

    first = _checkpointing_worker(tmp_path)
    first.step = 6
    first.checkpoint({}, last=False, window=_window(losses[4:6], nonfinite=1))
    second = _checkpointing_worker(tmp_path)
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: ray.train.Checkpoint.from_directory(str(reports[0][1])))
    second._load_engine = lambda d, **kw: dict(first.engine.state)
    second.restore()
    resumed = second._run_window(_window(losses[6:8]))
    assert (resumed.micro_steps, resumed.nonfinite) == (clean.micro_steps, clean.nonfinite) == (8, 1)
    assert resumed.loss == pytest.approx(clean.loss) and resumed.sums == pytest.approx(clean.sums)
    assert (resumed.tokens, resumed.samples) == (clean.tokens / 2, clean.samples / 2)  # steps 7-8 only

    older = _checkpointing_worker(tmp_path)
    older._load_engine = lambda d, **kw: {k: v for k, v in first.engine.state.items() if k != "log_window"}
    older.restore()
    alone = older._run_window(_window(losses[6:8]))
    assert (alone.micro_steps, alone.loss, alone.nonfinite) == (4, pytest.approx(2 * (2.05 + 1.9)), 0)


@pytest.mark.parametrize("lr", [1e-3, 2e-3])
def test_a_resubmission_after_a_rollback_says_the_rates_its_steps_train_at(lr, reports, monkeypatch, tmp_path,
                                                                            caplog):
    """Job 1 (lr 1e-3, 20 steps, 2 warmup) rolled back once (x0.5) and saved at step 12; job 2 resubmits with 40 steps
    (at optim.lr `lr`). Its [resume] line priced the checkpoint's plan at the unscaled peak (0.000444 for 0.000222),
    and was built before the rollbacks were applied: at a new optim.lr it named 0.00147 for the next step, trained at
    half that. Both rates are the scaled ones now, the next step's the engine's."""
    from jobs.config.sections import OptimConfig
    from jobs.engine.ds_config import lr_lambda
    from jobs.engine.seam import EngineBase
    from jobs.workers import pretrain_worker

    class PlanEngine(EngineBase):  # the seam's schedule over a plain torch optimizer: no DeepSpeed
        data_parallel = (0, 1)

    optim = OptimConfig(lr=1e-3, warmup_steps=2)

    def engine(max_steps, optim):
        groups = [{"params": [torch.nn.Parameter(torch.zeros(2))], "weight_decay": 0.01},
                  {"params": [torch.nn.Parameter(torch.zeros(1))], "weight_decay": 0.0}]
        opt = torch.optim.SGD(groups, lr=optim.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(optim, max_steps))
        ds = SimpleNamespace(device="cpu", gradient_clipping=lambda: 1.0)
        return PlanEngine(ds, opt, sched, None, optim=optim, max_steps=max_steps, zero_stage=0)

    job1 = engine(20, optim)
    for step in range(12):
        if step == 10:
            job1.scale_lr(0.5)  # the rollback
        job1.optimizer.step()
        job1.scheduler.step()
    first = _checkpointing_worker(tmp_path)
    first.step, first.t.max_steps, first.engine.optim = 12, 20, optim
    first.rollback_log = [{"id": "a", "step": 10, "lr_factor": 0.5}]
    first.checkpoint({}, last=False)

    def load(d, **kw):  # what DeepSpeed's load_checkpoint and Engine.load do with the saved optimizer and schedule
        second.engine = engine(40, OptimConfig(lr=lr, warmup_steps=2))
        built = [{"weight_decay": g["weight_decay"]} for g in second.engine.optimizer.param_groups]
        second.engine.optimizer.load_state_dict(job1.optimizer.state_dict())
        second.engine.scheduler.load_state_dict(job1.scheduler.state_dict())
        second.engine._keep_config(built)
        return dict(first.engine.state)

    second = _checkpointing_worker(tmp_path)
    second.t.max_steps, second._load_engine = 40, load
    del second._apply_rollbacks  # the worker's own: the resubmission's ledger is empty
    second.ledger = SimpleNamespace(rollbacks=SimpleNamespace(remote=lambda: []))
    monkeypatch.setattr(pretrain_worker.ray, "get", lambda ref: ref)
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: ray.train.Checkpoint.from_directory(str(reports[0][1])))
    with caplog.at_level("WARNING", logger="bert_foundry.train"):
        second.restore()
    now, was = 0.5 * lr * lr_lambda(optim, 40)(12), 0.5 * 1e-3 * lr_lambda(optim, 20)(12)
    assert second.engine.lr == pytest.approx(now) and job1.lr == pytest.approx(was)
    assert [r.getMessage() for r in caplog.records if r.name == "bert_foundry.train"] == [
        f"[resume] train.max_steps 20 -> 40: the learning-rate schedule is planned over the new total, so the next "
        f"step trains at lr {now:.3g}, where the checkpoint's plan was at {was:.3g}"]


def test_a_checkpoint_marks_every_ranks_ids_and_gives_each_rank_its_own_mask_count(reports, monkeypatch, tmp_path):
    """Two ranks (the second's gathers faked): the saved position marks the ids both trained since the last
    checkpoint, and each rank resumes its collator at its own count, not rank 0's (nor at 0: its masks would repeat
    the ones it drew from the start)."""
    from bert_core.masking import PretrainingCollator
    from bert_core.tokenizer import SpecialIds
    from jobs.workers import pretrain_worker

    other = {"ids": np.array([2, 9]), "mask_next": np.array(8)}  # rank 1's, as all_gather_object hands them over

    def gather(value):
        if isinstance(value, dict):  # the RNG states: rank 1's alike (test_checkpoint_parts.py restores each)
            return [value, value]
        return [value, other["ids" if value.ndim else "mask_next"]]

    monkeypatch.setattr(pretrain_worker, "_gather", gather)
    first = _checkpointing_worker(tmp_path)
    first.step, first.mask_next, first.pending_ids = 6, 5, [np.array([1, 4]), np.array([7])]
    first.checkpoint({}, last=False)
    saved = Path(reports[0][1])
    assert np.flatnonzero(DataPosition.from_bytes((saved / "data_position.npz").read_bytes()).consumed).tolist() == \
        [1, 2, 4, 7, 9]
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: ray.train.Checkpoint.from_directory(str(saved)))
    for rank, count in ((0, 5), (1, 8)):
        w = _checkpointing_worker(tmp_path)
        w.rank, w._load_engine, w._open_stream = rank, lambda d, **kw: dict(first.engine.state), lambda: None
        del w._start_masks  # the worker's own
        w.collate = PretrainingCollator(SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4), 100, 16, None, seed=rank)
        w.restore()
        assert (w.collate.batches_produced, w.mask_next) == (count, count), rank
        assert np.flatnonzero(w.position.consumed).tolist() == [1, 2, 4, 7, 9]


def test_a_phase_2_resume_names_the_phase2_settings_it_was_changed_with(caplog):
    """A two-phase job resubmitted with more phase 2 steps, another phase 2 warmup or lr said "train.max_steps 20 ->
    40", "optim.warmup_steps", "optim.lr": settings the user had not touched (phase 2's are phase2.*)."""
    from jobs.config.pretrain import PretrainConfig
    from jobs.config.sections import OptimConfig
    from jobs.engine.ds_config import lr_lambda
    from jobs.engine.seam import EngineBase

    class PlanEngine(EngineBase):  # the seam's schedule over a plain torch optimizer: no DeepSpeed
        data_parallel = (0, 1)

    def engine(max_steps, optim):
        opt = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.zeros(2))], "weight_decay": 0.01}], lr=optim.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(optim, max_steps))
        ds = SimpleNamespace(device="cpu", gradient_clipping=lambda: 1.0)
        return PlanEngine(ds, opt, sched, None, optim=optim, max_steps=max_steps, zero_stage=0)

    cfg = PretrainConfig()
    cfg.phase2.max_steps, cfg.data.sources = 40, ["/corpus"]
    assert cfg.setting_names() == {"total": "train.max_steps", "warmup": "optim.warmup_steps", "lr": "optim.lr"}
    saved = engine(20, OptimConfig(lr=1e-3, warmup_steps=1))
    for _ in range(5):
        saved.optimizer.step()
        saved.scheduler.step()
    resumed = engine(40, OptimConfig(lr=2e-3, warmup_steps=2))
    resumed.names = cfg.phase2_run("/runs/pretrain-phase1", "/runs/tokenizer").setting_names()
    resumed.optimizer.load_state_dict(saved.optimizer.state_dict())
    resumed.scheduler.load_state_dict(saved.scheduler.state_dict())
    with caplog.at_level("WARNING"):
        resumed._keep_config([{"weight_decay": 0.01}])
    assert "this run's: phase 2's lr (phase2.lr, or optim.lr where that is 0) 0.001 -> 0.002" in caplog.text
    assert resumed.replanned(20, OptimConfig(lr=1e-3, warmup_steps=1)).startswith(
        "[resume] phase2.max_steps 20 -> 40, phase2.warmup_steps 1 -> 2: the learning-rate schedule is planned over")
    assert engine(40, OptimConfig()).replanned(20).startswith("[resume] train.max_steps 20 -> 40: ")  # phase 1's
