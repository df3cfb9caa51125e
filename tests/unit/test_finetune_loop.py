"""The fine-tuning loop (jobs/loops/finetune.py) with plain numpy batches, a small real torch model behind a
stand-in engine, and a list as the report: no Ray, no DeepSpeed, no MLflow.

Covered: best and patience (early stop; an equal score is no improvement), the history up to the best, the
evaluation cadence (every epoch, every N steps, the last step always), checkpoint_every, the non-finite policy
(skip and count; raise after train.max_nonfinite_steps in a row; a finite step resets the count; another rank's NaN
is not put on this rank's finite loss; a non-finite select metric raises), and the state round trip (stopped
mid-epoch, restored into a fresh loop and engine, the same batches skipped, NaNs on both sides of the checkpoint: the
run ends, or raises, exactly as an uninterrupted one).
"""

import copy
import logging
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from jobs.config.finetune import FinetuneTrainConfig, TaskConfig
from jobs.loops import ft_tasks
from jobs.loops.finetune import FinetuneLoop, collate, select_metrics
from jobs.loops.train_order import TrainFeatures
from jobs.loops.train_order import epoch_batches as deal

ROWS, BATCH, WIDTH, VOCAB = 20, 4, 6, 32  # 5 batches an epoch
METRIC = "select/accuracy"


@dataclass
class Stats:
    loss: float
    finite: bool = True


class TinyEngine:
    """What the loop sees of jobs/engine/data_parallel.Engine: `step(batch) -> stats`, `lr`; a non-finite loss
    skips the update, as the real engine does. Records the rows of every batch it is handed."""

    def __init__(self, seed: int = 0, nan_at: tuple[int, ...] = (), overflow_at: tuple[int, ...] = (),
                 elsewhere_at: tuple[int, ...] = ()):
        torch.manual_seed(seed)
        self.model = torch.nn.Sequential(torch.nn.EmbeddingBag(VOCAB, 8), torch.nn.Linear(8, 2))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.nan_at, self.calls, self.seen, self.skipped_schedule = set(nan_at), 0, [], 0
        self.elsewhere_at = set(elsewhere_at)  # another rank's loss NaN: this rank's own is finite, all ranks skip
        self.overflow_at, self.skipped_steps = set(overflow_at), 0  # fp16: a finite loss whose update is skipped

    @property
    def lr(self) -> float:
        return self.opt.param_groups[0]["lr"]

    def advance_schedule(self) -> None:
        self.skipped_schedule += 1

    def step(self, batch: dict) -> Stats:
        self.calls += 1
        self.seen.append(batch["input_ids"][:, 0].tolist())  # each row's first token is its row index
        loss = torch.nn.functional.cross_entropy(self.model(batch["input_ids"]), batch["labels"])
        if self.calls in self.nan_at:
            return Stats(float("nan"), finite=False)
        if self.calls in self.elsewhere_at:  # the real engine returns this rank's loss, judged by every rank's
            return Stats(float(loss.detach()), finite=False)
        if self.calls in self.overflow_at:  # DeepSpeed: no update, no schedule step, skipped_steps counts it
            self.skipped_steps += 1
            return Stats(float(loss.detach()))
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return Stats(float(loss.detach()))

    def accuracy(self) -> float:
        x, y = dataset()
        with torch.no_grad():
            return float((self.model(torch.tensor(x)).argmax(-1).numpy() == y).mean())

    def state(self) -> dict:
        return copy.deepcopy({"model": self.model.state_dict(), "opt": self.opt.state_dict()})

    def load(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])


def dataset():
    rng = np.random.default_rng(0)
    labels = np.arange(ROWS) % 2
    ids = rng.integers(2, VOCAB // 2, (ROWS, WIDTH)) + (VOCAB // 2 - 2) * labels[:, None]  # label-shifted tokens
    ids[:, 0] = np.arange(ROWS)  # the row index, for the record
    return ids, labels


def epoch_batches(epoch: int, taken: int):
    """An epoch's numpy batches in its own order, as a one-worker fine-tune deals them, less the `taken`."""
    ids, labels = dataset()
    features = TrainFeatures([{"input_ids": ids, "attention_mask": np.ones_like(ids), "labels": labels,
                               "row_index": np.arange(ROWS)}])
    return deal(features, seed=100, epoch=epoch, rank=0, world=1, batch_size=BATCH, taken=taken)


class Run:
    """A loop over a TinyEngine; its reports, best keeps and checkpoints in lists."""

    def __init__(self, scores=None, engine=None, total=None, checkpoint_every=1, kill_at=0, log=None, **train):
        self.engine = engine or TinyEngine()
        self.train = FinetuneTrainConfig(**{"batch_size": BATCH, "epochs": 3, "patience": 0, "log_every": 2,
                                            **train})
        self.scores = iter(scores) if scores is not None else None
        self.reports, self.kept, self.checkpoints, self.tracked = [], [], [], []
        self.kill_at = kill_at
        self.loop = FinetuneLoop(
            self.engine, self.train, metric=METRIC, total_steps=total or 5 * self.train.epochs, optim_lr=0.1,
            epoch_batches=epoch_batches, select_metrics=self.select, report=self.report,
            keep_best=lambda: self.kept.append(self.loop.step), after_step=self.after_step,
            track=lambda m, step: self.tracked.append((step, m)), log=log, checkpoint_every=checkpoint_every)

    def select(self) -> dict:
        return {METRIC: next(self.scores) if self.scores is not None else self.engine.accuracy()}

    def report(self, record: dict, checkpoint: bool, final: bool) -> None:
        self.reports.append((record, checkpoint, final))
        if checkpoint:
            self.checkpoints.append((self.loop.state(), self.engine.state(), len(self.engine.seen)))

    def after_step(self, step: int) -> None:
        if step == self.kill_at:
            raise KeyboardInterrupt(f"killed after step {step}")  # as a dead worker: the process ends here

    @property
    def eval_steps(self) -> list[int]:
        return [r["step"] for r, _, _ in self.reports]


def test_patience_stops_after_that_many_evaluations_without_a_better_score():
    """Evaluated every step: 0.5, 0.6 (best), 0.6 (equal: no better), 0.55: patience 2 stops at step 4."""
    run = Run(scores=[0.5, 0.6, 0.6, 0.55, 0.9, 0.9], eval_every_steps=1, patience=2)
    run.loop.run()
    loop = run.loop
    assert loop.stopped and loop.step == 4 and run.eval_steps == [1, 2, 3, 4]
    assert (loop.best, loop.best_step, loop.bad_evals) == (0.6, 2, 2)
    assert run.kept == [1, 2]  # the best kept at each improvement, not at an equal score
    assert [h["step"] for h in loop.best_history()] == [1, 2] and len(loop.history) == 4
    assert [final for _, _, final in run.reports] == [False, False, False, True]  # the stop is the final report
    assert run.reports[-1][0] == {METRIC: 0.55, "step": 4, "epoch": 0, "best_step": 2, "best": 0.6}


def test_an_improvement_resets_patience_and_patience_0_never_stops():
    run = Run(scores=[0.5, 0.4, 0.6, 0.5, 0.7, 0.6], eval_every_steps=1, patience=2, total=6)
    run.loop.run()
    assert not run.loop.stopped and run.eval_steps == [1, 2, 3, 4, 5, 6] and run.loop.best_step == 5
    run = Run(scores=[0.9] + [0.1] * 14, eval_every_steps=1, patience=0)
    run.loop.run()
    assert not run.loop.stopped and run.loop.step == 15 and run.loop.best_step == 1
    # patience running out at the last step is no early stop: the run made every step (it was reported as stopped
    # at step 6 of 6)
    run = Run(scores=[0.5, 0.6, 0.7, 0.8, 0.7, 0.6], eval_every_steps=1, patience=2, total=6)
    run.loop.run()
    assert not run.loop.stopped and run.loop.step == 6 and run.loop.bad_evals == 2


@pytest.mark.parametrize("every, total, evals", [
    (0, 15, [5, 10, 15]),  # at every epoch's end
    (0, 12, [5, 10, 12]),  # ... and at the last step, mid-epoch (train.max_steps)
    (4, 15, [4, 8, 12, 15]),  # every 4 steps, and the last
    (5, 15, [5, 10, 15]),  # every 5: the last is one of them, evaluated once
])
def test_evaluation_cadence_and_the_last_step_always(every, total, evals):
    run = Run(eval_every_steps=every, total=total)
    run.loop.run()
    assert run.loop.step == total and run.eval_steps == evals
    assert [final for _, _, final in run.reports] == [False] * (len(evals) - 1) + [True]
    assert [h["epoch"] for h in run.loop.history] == [(s - 1) // 5 for s in evals]
    assert len(run.engine.seen) == total and all(c for _, c, _ in run.reports)  # every evaluation checkpoints


def test_checkpoint_every_and_always_the_last():
    run = Run(eval_every_steps=2, total=9, checkpoint_every=2)
    run.loop.run()
    assert run.eval_steps == [2, 4, 6, 8, 9]
    assert [c for _, c, _ in run.reports] == [False, True, False, True, True]


def test_progress_lines_and_tracked_metrics(caplog):
    log = logging.getLogger("test.finetune_loop")
    with caplog.at_level(logging.INFO, logger=log.name):
        run = Run(scores=[0.5, 0.4, 0.7], log=log)
        run.loop.run()
    lines = caplog.messages
    assert any(m.startswith("step      2/15 | epoch 1/3 | loss ") and "| lr 1.00e-01 |" in m and "samples/s | eta "
               in m for m in lines), lines
    assert "[eval] step 5: select/accuracy 0.5000 (best so far)" in lines
    assert "[eval] step 10: select/accuracy 0.4000 (best 0.5000 at step 5)" in lines
    train = [(step, m) for step, m in run.tracked if "train/loss" in m]
    assert [step for step, _ in train] == [2, 4, 6, 8, 10, 12, 14, 15]  # every log_every steps and the last
    assert {"train/loss", "train/lr", "train/samples_per_s", "train/epoch"} == set(train[0][1])
    assert [step for step, m in run.tracked if METRIC in m] == [5, 10, 15]


def test_train_loss_and_samples_per_s_are_every_ranks_not_this_ranks_share(monkeypatch):
    """With data-parallel ranks, a progress window's loss is the mean over every rank's steps and samples/s counts
    every rank's rows: `summed` stands in for the all-reduce, as if another rank had stepped as often at loss 10."""
    import itertools
    import types

    from jobs.loops import finetune

    clock = itertools.count()  # the same pace in both runs
    monkeypatch.setattr(finetune, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))
    run = Run()
    losses, step = [], run.engine.step
    run.engine.step = lambda batch: losses.append(step(batch).loss) or Stats(losses[-1])
    run.loop.summed = lambda v: [v[0] + 10.0 * v[1], 2 * v[1], 2 * v[2]]
    run.loop.run()
    train = [m for _, m in run.tracked if "train/loss" in m]
    assert train[0]["train/loss"] == pytest.approx((losses[0] + losses[1] + 20.0) / 4)
    clock, alone = itertools.count(), Run()
    alone.loop.run()
    first = [m for _, m in alone.tracked if "train/loss" in m][0]
    assert first["train/loss"] == pytest.approx((losses[0] + losses[1]) / 2)  # the same steps on one rank
    assert train[0]["train/samples_per_s"] == 2 * first["train/samples_per_s"]  # twice the rows


def test_samples_per_s_is_of_training_time_not_of_the_evaluations_and_checkpoints_between(monkeypatch):
    """An evaluation (select scoring, the best model's export, a checkpoint: tens of seconds) between two progress
    windows was charged to the next one's samples/s: ~10x too low in every window after one. A clock that moves one
    second a step and a hundred an evaluation: every window says 4 rows a second."""
    import types

    from jobs.loops import finetune

    now = [0.0]
    monkeypatch.setattr(finetune, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    run = Run(eval_every_steps=2)
    step, select = run.engine.step, run.select
    run.engine.step = lambda batch: (now.__setitem__(0, now[0] + 1.0), step(batch))[1]
    run.loop.select_metrics = lambda: (now.__setitem__(0, now[0] + 100.0), select())[1]
    run.loop.run()
    rates = [m["train/samples_per_s"] for _, m in run.tracked if "train/samples_per_s" in m]
    assert len(rates) == 8 and rates == [pytest.approx(BATCH / 1.0)] * 8, rates


def test_a_nonfinite_loss_is_skipped_and_counted_and_a_finite_step_resets_the_streak():
    """NaN at step 3, then 5 and 6: streaks of 1 and 2 under a limit of 3 (step 4 resets it); the run finishes,
    counting 3, and a progress window's loss is the mean of its finite steps."""
    run = Run(engine=TinyEngine(nan_at=(3, 5, 6)), max_nonfinite_steps=3)
    run.loop.run()
    assert run.loop.step == 15 and (run.loop.nonfinite, run.loop.nonfinite_streak) == (3, 0)
    assert run.engine.skipped_schedule == 3  # the schedule moved on with each skipped step: it ends at 0 on step 15
    losses = [m["train/loss"] for step, m in run.tracked if "train/loss" in m]
    assert np.isfinite(losses[:2]).all() and np.isnan(losses[2])  # steps 3-4: 4's loss; 5-6: none finite


def test_an_fp16_overflow_moves_the_schedule_on_as_a_skipped_step_does():
    """DeepSpeed skips both the update and its schedule step on an fp16 gradient overflow (finite loss): the loop
    counted the step and the schedule fell behind it (not 0 at the end; a PBT restore jumped it ahead)."""
    run = Run(engine=TinyEngine(overflow_at=(2, 7)), max_nonfinite_steps=3)
    run.loop.run()
    assert run.loop.step == 15 and run.loop.nonfinite == 0 and run.engine.skipped_schedule == 2


def test_max_nonfinite_steps_in_a_row_raise_naming_the_step_and_the_learning_rate():
    run = Run(engine=TinyEngine(nan_at=(3, 4, 5)), max_nonfinite_steps=3)
    with pytest.raises(FloatingPointError, match=r"non-finite loss nan at step 5, 3 steps in a row "
                                                 r"\(train\.max_nonfinite_steps=3\).*optim\.lr=0\.1"):
        run.loop.run()
    run = Run(engine=TinyEngine(nan_at=(2,)), max_nonfinite_steps=1)  # 1: the first NaN ends the run
    with pytest.raises(FloatingPointError, match="at step 2"):
        run.loop.run()


def test_a_nonfinite_loss_on_another_rank_is_not_called_this_ranks_finite_one(caplog):
    """Rank 1's loss NaN, this rank's 0.75: every rank skips the batch (right), but this rank warned "non-finite loss
    0.752..., batch skipped" and raised FloatingPointError("non-finite loss 0.7522 at step 4 ..."), a finite number
    called non-finite. The skip is put on another rank, with this rank's own loss beside it."""
    log = logging.getLogger("test.finetune_loop")
    run = Run(engine=TinyEngine(elsewhere_at=(3, 4)), max_nonfinite_steps=2, log=log)
    own, step = [], run.engine.step
    run.engine.step = lambda batch: own.append(step(batch)) or own[-1]
    with caplog.at_level(logging.WARNING, logger=log.name), pytest.raises(FloatingPointError) as raised:
        run.loop.run()
    assert [s.finite for s in own] == [True, True, False, False] and np.isfinite([s.loss for s in own]).all()
    assert str(raised.value).startswith(f"non-finite loss on another rank (this rank's: {own[-1].loss:.4f}) at step "
                                        f"4, 2 steps in a row (train.max_nonfinite_steps=2)")
    assert [m for m in caplog.messages if "batch skipped" in m] == [
        f"step {n}: non-finite loss on another rank (this rank's: {own[n - 1].loss:.4f}), batch skipped ({n - 2} in a "
        f"row of at most 2, {n - 2} in all)" for n in (3, 4)]


def test_a_nonfinite_select_metric_raises():
    run = Run(scores=[0.5, float("nan")])
    with pytest.raises(FloatingPointError, match=r"non-finite select/accuracy nan at step 10"):
        run.loop.run()


def _run_to_the_end(run: Run) -> str | None:
    """Run it; the FloatingPointError's message where it raised (too many non-finite losses in a row)."""
    try:
        run.loop.run()
    except FloatingPointError as e:
        return str(e)
    return None


@pytest.mark.parametrize("every, kill_at, nan_at", [
    (3, 8, ()), (0, 7, ()), (0, 12, ()),
    # checkpointed at step 8 (epoch 1, 3 of its batches taken): a NaN on each side of it; the skipped step 7 is a batch
    # taken (counting only finite steps, the restored run took batch 3 of epoch 1 again and never took its last)
    (4, 10, (7, 9)),
    # a streak of 3 (the limit) across the checkpoint: the restored run raises at step 9, as the uninterrupted one
    # (without the streak in the checkpoint it started a new one and trained on)
    (4, 9, (7, 8, 9)),
])
def test_a_run_stopped_mid_epoch_and_restored_ends_as_an_uninterrupted_one(every, kill_at, nan_at):
    """Killed after `kill_at`; a fresh engine and loop load the last checkpoint (the engine's weights and optimizer,
    the loop's state) and go on: the batches it takes are exactly those the uninterrupted run took after that
    checkpoint (the epoch's first ones skipped), and it ends with the same weights, history and reports, raising
    where the uninterrupted run raised (NaN losses at the steps `nan_at`, at most 3 in a row)."""
    clean = Run(eval_every_steps=every, engine=TinyEngine(nan_at=nan_at), max_nonfinite_steps=3)
    raised = _run_to_the_end(clean)

    killed = Run(eval_every_steps=every, kill_at=kill_at, engine=TinyEngine(nan_at=nan_at), max_nonfinite_steps=3)
    with pytest.raises(KeyboardInterrupt):
        killed.loop.run()
    loop_state, engine_state, seen = killed.checkpoints[-1]
    assert loop_state["step"] < kill_at and loop_state["epoch_steps"] < 5

    after = tuple(s - loop_state["step"] for s in nan_at if s > loop_state["step"])  # the same steps' losses NaN
    resumed = Run(eval_every_steps=every, engine=TinyEngine(seed=1, nan_at=after),  # other initial weights: the
                  max_nonfinite_steps=3)  # checkpoint's win
    resumed.engine.load(engine_state)
    resumed.loop.load_state(loop_state)
    assert _run_to_the_end(resumed) == raised
    assert (raised is None) == (len(nan_at) < 3)
    assert killed.engine.seen[:seen] + resumed.engine.seen == clean.engine.seen
    assert resumed.loop.state() == clean.loop.state() and resumed.loop.history == clean.loop.history
    assert killed.reports[:len(killed.checkpoints)] + resumed.reports == clean.reports
    for a, b in zip(resumed.engine.model.state_dict().values(), clean.engine.model.state_dict().values()):
        assert torch.equal(a, b)


def test_restored_with_no_step_left_evaluates_once_more_and_changes_nothing():
    """A finished run's final checkpoint restored (a resubmission, or PBT cloning a finished donor): no step is
    left; the loop evaluates once more so its caller reports a result of its own, without a history entry or a
    patience count of its own."""
    done = Run(scores=[0.5, 0.7, 0.6], patience=3)
    done.loop.run()
    again = Run(scores=[0.6], patience=3)
    again.loop.load_state(done.loop.state())
    again.loop.run()
    assert again.engine.seen == [] and again.eval_steps == [15] and again.reports[0][1:] == (True, True)
    assert again.loop.history == done.loop.history and again.loop.bad_evals == done.loop.bad_evals == 1


def test_a_stopped_run_restored_stays_stopped():
    """Patience stopped the run at step 4; restoring its final checkpoint (a resubmission, a restart after the final
    report) evaluated step 4 again as the last step and forgot the stop: its report said "not triggered", and a second
    restore trained step 5 on."""
    done = Run(scores=[0.5, 0.6, 0.6, 0.55, 0.9, 0.9], eval_every_steps=1, patience=2)
    done.loop.run()
    once = Run(scores=[0.55], eval_every_steps=1, patience=2)
    once.loop.load_state(done.loop.state())
    once.loop.run()
    assert once.engine.seen == [] and once.loop.stopped and once.loop.state()["stopped"]
    twice = Run(scores=[0.55] + [0.9] * 20, eval_every_steps=1, patience=2)
    twice.loop.load_state(once.loop.state())
    twice.loop.run()
    assert twice.engine.seen == [] and twice.loop.step == 4 and twice.loop.stopped


def test_collate_cuts_per_token_columns_only():
    batch = {"input_ids": np.array([[101, 5, 102, 0], [101, 6, 102, 0]]), "attention_mask": np.array([[1, 1, 1, 0]] * 2),
             "token_type_ids": np.zeros((2, 4), np.int64), "labels": np.array([[0.0, 1.0, 1.0, 0.0, 1.0]] * 2),
             "row_index": np.array([0, 1]), "window": np.array([0, 0])}
    out = collate(batch)
    assert out["input_ids"].shape == (2, 3) and out["labels"].shape == (2, 5)  # a multi-label target keeps its width
    token = collate({**batch, "labels": np.array([[-100, 1, -100, -100]] * 2)})
    assert token["labels"].tolist() == [[-100, 1, -100]] * 2 and "row_index" not in token


def test_select_metrics_sorts_features_back_into_row_order(monkeypatch):
    """Features in any order (as a stream hands them) are scored against their rows: (row_index, window) order."""

    class Predictor:
        def predict(self, batches, pad_to):
            return {"logits": np.concatenate([np.eye(2)[b["input_ids"][:, 1].numpy()] for b in batches])}

    task = TaskConfig(name="pkgdocs", labels=["a", "b"])
    rows = [0, 1, 0, 0, 1]  # each row's label; the prediction is right on rows 0-3, wrong on row 4
    predicted = [0, 1, 0, 0, 0]

    def batch(idx):
        idx = np.array(idx)
        return {"input_ids": np.stack([idx, np.array(predicted)[idx]], 1), "attention_mask": np.ones((len(idx), 2)),
                "labels": np.array(rows)[idx], "row_index": idx, "window": np.zeros(len(idx), np.int64)}

    metrics, classes = select_metrics(Predictor(), task, [batch([4, 1]), batch([3, 0, 2])], [{}] * 5)
    assert metrics == {"select/accuracy": pytest.approx(0.8)} and classes == 2

    seen = {}

    def dev_metrics(task, split, rows, arrays, tokenizer=None):
        seen.update(arrays)
        return {}

    monkeypatch.setattr(ft_tasks, "dev_metrics", dev_metrics)
    select_metrics(Predictor(), task, [batch([4, 1]), batch([3, 0, 2])], [{}] * 5)
    assert seen["row_index"].tolist() == [0, 1, 2, 3, 4]  # the order SQuAD's features and CoNLL's rows are in
    assert seen["logits"].argmax(-1).tolist() == predicted and seen["labels"].tolist() == rows


def _train_losses(run: Run) -> dict[int, float]:
    return {step: m["train/loss"] for step, m in run.tracked if "train/loss" in m}


@pytest.mark.parametrize("ranks", [1, 2])
def test_the_first_train_loss_after_a_restore_averages_the_window_an_uninterrupted_run_logs(monkeypatch, ranks):
    """Logged every 4 steps, evaluated (and checkpointed) every 3, killed after step 7: the checkpoint at step 6 is
    half way through the window of steps 5-8. The restored run logged at step 8 the mean of steps 7-8 alone, under the
    step where an uninterrupted run logs that of 5-8. The checkpoint carries every rank's loss sum and count (with a
    second rank, as the all-reduce adds it, carried once, not once per rank); samples/s stays the restored process's
    own, its samples over its seconds (a clock that moves one second a step: 4 rows a second, not 8)."""
    import types

    from jobs.loops import finetune

    now = [0.0]
    monkeypatch.setattr(finetune, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def run(**kw) -> Run:
        r = Run(eval_every_steps=3, log_every=4, **kw)
        step = r.engine.step
        r.engine.step = lambda batch: (now.__setitem__(0, now[0] + 1.0), step(batch))[1]
        if ranks == 2:  # another rank stepping alongside at loss 10, as the all-reduce would add it
            r.loop.summed = lambda v: [v[0] + 10.0 * v[1], 2 * v[1], 2 * v[2]]
        return r

    clean = run()
    clean.loop.run()
    killed = run(kill_at=7)
    with pytest.raises(KeyboardInterrupt):
        killed.loop.run()
    loop_state, engine_state, _ = killed.checkpoints[-1]
    assert loop_state["step"] == 6
    resumed = run(engine=TinyEngine(seed=1))
    resumed.engine.load(engine_state)
    resumed.loop.load_state(loop_state)
    resumed.loop.run()
    logged, expected = _train_losses(resumed), _train_losses(clean)
    assert sorted(logged) == [8, 12, 15]
    assert logged == {step: pytest.approx(expected[step], rel=1e-12) for step in logged}
    first = next(m for step, m in resumed.tracked if step == 8 and "train/samples_per_s" in m)
    assert first["train/samples_per_s"] == pytest.approx(ranks * BATCH / 1.0)
    assert loop_state["loss_window"]["finite_steps"] == 2 * ranks  # steps 5 and 6, of every rank


def test_a_checkpoint_from_before_the_loss_window_was_kept_still_restores_with_an_empty_window():
    """A state.json without `loss_window` (written before it was kept): the run resumes, and its first train/loss is
    the mean of the steps since the restore, as before."""
    killed = Run(eval_every_steps=3, log_every=4, kill_at=7)
    with pytest.raises(KeyboardInterrupt):
        killed.loop.run()
    loop_state, engine_state, _ = killed.checkpoints[-1]
    loop_state.pop("loss_window", None)
    resumed = Run(eval_every_steps=3, log_every=4, engine=TinyEngine(seed=1))
    resumed.engine.load(engine_state)
    resumed.loop.load_state(loop_state)
    losses, step = [], resumed.engine.step
    resumed.engine.step = lambda batch: losses.append(step(batch).loss) or Stats(losses[-1])
    resumed.loop.run()
    assert resumed.loop.step == 15 and _train_losses(resumed)[8] == pytest.approx((losses[0] + losses[1]) / 2)
