"""The fine-tuning loop: step, evaluate on select, keep the best, stop early. Plain Python: no Ray in here.

A fine-tune runs two ways, and both run this loop: the Ray Train worker (jobs/workers/finetune_worker.py) and the
Tune trial (jobs/workers/sweep_trial.py). They supply what differs (the batches of an epoch, the select
metrics, the report with its checkpoint, the best model's keeping); the policies live here once:

  * evaluation: every `train.eval_every_steps` steps, else at the end of every epoch; the run's last step always.
  * best and patience: the main select metric, higher is better; `train.patience` evaluations in a row without
    a better one stop the run (0 = never). The history up to the best is what a run exports with its model.
  * non-finite loss: the engine skips the update (no backward, no optimizer step; on every rank) and the loop
    counts it. `train.max_nonfinite_steps` in a row raise FloatingPointError, naming the step and optim.lr: the
    weights have diverged and skipping cannot help, so a diverged sweep trial fails at once (Tune marks it
    errored) and a fine-tune does not train on for hours on NaNs. A non-finite select metric raises too.
  * data position: `epoch` and `epoch_steps` (the batches of it already taken) are part of `state()`, so a run
    restored from a checkpoint asks `epoch_batches` for the rest of the epoch and trains on as if never stopped
    (row for row: jobs/loops/train_order.py).
  * train/loss: the loss sum and finite-step count since the last progress line are part of `state()` too (every
    rank's, kept at each evaluation), so the first line after a restore averages the same steps an uninterrupted
    run's does. samples/s is wall-clock: a restored run measures it over its own steps and time only.

The engine (jobs/engine/data_parallel.py) is used only through `step(batch) -> StepStats` (`.loss`, `.finite`),
`.lr` (read before each step: the rate it trains at) and, in `select_metrics`, `predict`.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable, Iterable

import numpy as np
import torch

from jobs.config.finetune import FinetuneTrainConfig, TaskConfig
from jobs.loops import ft_tasks
from jobs.loops.metrics import format_duration

BOOKKEEPING = ("row_index", "window")  # which row and doc-stride window a feature is: not model input


def _per_token(name: str, v: np.ndarray) -> bool:
    """(B, T) columns: the model inputs and integer token labels. A float (B, C) target (multi-label) is per row."""
    return v.ndim == 2 and (name in ft_tasks.MODEL_INPUTS or np.issubdtype(v.dtype, np.integer))


def collate(batch: dict) -> dict:
    """numpy batch -> the model's tensors (inputs and labels), per-token columns cut to the batch's longest row
    (dynamic padding); the bookkeeping columns stay in the numpy batch."""
    length = int(batch["attention_mask"].sum(1).max())
    out = {}
    for k, v in batch.items():
        if k in BOOKKEEPING:
            continue
        t = torch.tensor(v)  # a copy: Ray hands out read-only arrays
        out[k] = t[:, :length] if _per_token(k, np.asarray(v)) else t
    return out


def select_metrics(engine, task: TaskConfig, batches: list[dict], rows: list[dict], tokenizer=None
                   ) -> tuple[dict[str, float], int]:
    """The task's official metrics (`select/<name>`) of `engine`'s model on the select split's feature `batches`
    (numpy, every feature once, any order) and `rows`; and how many classes it predicted (1 = collapsed to one
    class; 0 where that does not apply). QA needs the `tokenizer` to map answers back to text."""
    arrays = engine.predict([collate(b) for b in batches], pad_to=task.max_seq_len)
    for k in ("row_index", "window", *ft_tasks.TARGETS[task.kind]):
        parts = [np.asarray(b[k]) for b in batches]
        if _per_token(k, parts[0]) and task.kind == "token-classification":  # pad back to full width
            parts = [np.pad(p, [(0, 0), (0, task.max_seq_len - p.shape[1])], constant_values=-100) for p in parts]
        arrays[k] = np.concatenate(parts)
    order = np.lexsort((arrays["window"], arrays["row_index"]))  # the order the task's metrics expect
    arrays = {k: v[order] for k, v in arrays.items()}
    pred_classes = 0
    if task.kind == "classification" and arrays["logits"].shape[-1] > 1:
        pred_classes = len(np.unique(arrays["logits"].argmax(-1)))
    return ft_tasks.dev_metrics(task, ft_tasks.SELECT, rows, arrays, tokenizer), pred_classes


class FinetuneLoop:
    """One fine-tune's training state and its loop. What the caller supplies:

    epoch_batches(epoch, skip) -> the numpy batches of `epoch`, less the first `skip` (taken before a restore)
    select_metrics() -> {"select/<name>": value}: the select split's metrics of the current weights
    report(record, checkpoint, final): after every evaluation; `record` is the metrics with step, epoch, best and
        best_step; `checkpoint` asks for the whole state (every `checkpoint_every`-th evaluation and the final
        one); `final`: the run ends after it (last step, last epoch or early stop)
    keep_best(): called when an evaluation is the best so far (export it, or keep a copy of the weights)
    after_step(step): called after every step (fault injection)
    track(metrics, step): metrics to the tracking server (train/* every `train.log_every` steps, and each evaluation)
    log: progress lines ("step ... | ...", "[eval] ..."), or None for none
    summed: a list of floats added over the data-parallel ranks (every rank calls it at the same steps: they step
        in lockstep), so that train/loss and samples/s are every rank's, not this rank's share; the identity for one
    """

    STATE = ("step", "epoch", "epoch_steps", "best", "best_step", "history", "bad_evals", "nonfinite",
             "nonfinite_streak", "stopped", "loss_window")

    def __init__(self, engine, train: FinetuneTrainConfig, *, metric: str, total_steps: int, optim_lr: float,
                 epoch_batches: Callable[[int, int], Iterable[dict]], select_metrics: Callable[[], dict],
                 report: Callable[[dict, bool, bool], None], keep_best: Callable[[], None] = lambda: None,
                 after_step: Callable[[int], None] = lambda step: None,
                 track: Callable[[dict, int], None] = lambda metrics, step: None,
                 log: logging.Logger | None = None, summed: Callable[[list[float]], list[float]] = list,
                 checkpoint_every: int = 1):
        self.engine, self.train, self.metric, self.total, self.optim_lr = engine, train, metric, total_steps, optim_lr
        self.epoch_batches, self.select_metrics, self.report = epoch_batches, select_metrics, report
        self.keep_best, self.after_step, self.track, self.log = keep_best, after_step, track, log
        self.summed, self.checkpoint_every = summed, checkpoint_every
        # the training state a checkpoint holds (state()): where the loop is and what it has seen
        self.step, self.epoch, self.epoch_steps = 0, 0, 0  # epoch_steps: the batches of `epoch` already taken
        self.best, self.best_step, self.history, self.bad_evals = -math.inf, 0, [], 0
        self.nonfinite, self.nonfinite_streak, self.stopped = 0, 0, False
        # every rank's train/loss sums since the last progress line, as of the last evaluation (_Window.pending); a
        # checkpoint from before they were kept lacks them and starts an empty window
        self.loss_window = dict(_Window.EMPTY)
        self.evals = 0  # evaluations in this process (checkpoint_every counts from a restore)
        self.step_lr = math.nan  # the rate the last step trained at (_step), logged as train/lr

    # -- state ------------------------------------------------------------------------------------
    def state(self) -> dict:
        """What a checkpoint keeps to go on exactly: JSON-able."""
        return copy.deepcopy({k: getattr(self, k) for k in self.STATE})

    def load_state(self, state: dict) -> None:
        """Go on from `state()` of an earlier run (a key it lacks keeps its start value)."""
        for k in self.STATE:
            if k in state:
                setattr(self, k, copy.deepcopy(state[k]))

    def best_history(self) -> list[dict]:
        """The evaluations up to the best one: what the chosen model's record carries."""
        return [h for h in self.history if h["step"] <= self.best_step]

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> None:
        """Train until the last step, the last epoch or an early stop, evaluating as the config says. Restored at
        the end (no step left), it evaluates once more, so that its caller reports a result of its own."""
        t = self.train
        taken, self._window = 0, _Window(self.step, carried=self.loss_window)
        while not self.stopped and self.step < self.total and self.epoch < t.epochs:
            epoch = self.epoch
            batches = iter(self.epoch_batches(epoch, self.epoch_steps))
            upcoming = next(batches, None)
            while upcoming is not None:
                self._step(upcoming)
                taken += 1
                # a look ahead: whether this step ends the epoch (every rank has as many batches: all at once)
                more = self.step < self.total
                upcoming = next(batches, None) if more else None
                ends_epoch = more and upcoming is None
                ends_run = not more or (ends_epoch and epoch + 1 >= t.epochs)
                self._maybe_log(epoch, ends_run)
                if ends_epoch:
                    self.epoch, self.epoch_steps = epoch + 1, 0  # before the evaluation: its checkpoint resumes there
                due = self.step % t.eval_every_steps == 0 if t.eval_every_steps else ends_epoch
                if due or ends_run:  # the last steps are always evaluated
                    began = time.perf_counter()
                    self.evaluate(epoch, final=ends_run)
                    self._window.since += time.perf_counter() - began  # samples/s: of training (the eta keeps it)
                if self.stopped or ends_run:
                    return
            self.epoch, self.epoch_steps = epoch + 1, 0  # an epoch with no batch left (restored at its end)
        if taken == 0 or not self.history or self.history[-1]["step"] != self.step:
            again = bool(self.history) and self.history[-1]["step"] == self.step
            self.evaluate(self.history[-1]["epoch"] if again else max(0, min(self.epoch, t.epochs - 1)), final=True)

    def _step(self, batch: dict) -> None:
        overflows = self.engine.skipped_steps
        self.step_lr = self.engine.lr  # read before: DeepSpeed steps the schedule right after the update
        stats = self.engine.step(collate(batch))
        self.step, self.epoch_steps = self.step + 1, self.epoch_steps + 1
        self.after_step(self.step)
        self._window.add(stats, len(batch["attention_mask"]))
        if stats.finite:
            self.nonfinite_streak = 0
            if self.engine.skipped_steps > overflows:  # fp16: an overflow skipped the update and DeepSpeed's schedule
                self.engine.advance_schedule()  # step; the run's schedule counts it, as a non-finite loss's below
            return
        # the engine skipped it on every rank: no update from a NaN/inf loss; the schedule moves on with the step count
        self.engine.advance_schedule()
        self.nonfinite, self.nonfinite_streak = self.nonfinite + 1, self.nonfinite_streak + 1
        limit = self.train.max_nonfinite_steps
        # stats.loss is this rank's own: where it is finite, another rank's NaN/inf skipped the batch everywhere
        what = (f"non-finite loss {stats.loss}" if not math.isfinite(stats.loss)
                else f"non-finite loss on another rank (this rank's: {stats.loss:.4f})")
        if self.log:
            self.log.warning(f"step {self.step}: {what}, batch skipped ({self.nonfinite_streak} "
                             f"in a row of at most {limit}, {self.nonfinite} in all)")
        if self.nonfinite_streak >= limit:
            raise FloatingPointError(
                f"{what} at step {self.step}, {self.nonfinite_streak} steps in a row "
                f"(train.max_nonfinite_steps={limit}): the weights diverged; optim.lr={self.optim_lr:g}")

    def _maybe_log(self, epoch: int, ends_run: bool) -> None:
        t = self.train
        if self.step % t.log_every and not ends_run:
            return
        metrics = {**self._window.take(self.summed), "lr": self.step_lr, "epoch": epoch}
        w = self._window
        eta = (time.perf_counter() - w.start) / max(self.step - w.first, 1) * (self.total - self.step)
        if self.log:
            self.log.info(f"step {self.step:>6}/{self.total} | epoch {epoch + 1}/{t.epochs} | loss "
                          f"{metrics['loss']:.4f} | lr {metrics['lr']:.2e} | {metrics['samples_per_s']:,.1f} "
                          f"samples/s | eta {format_duration(eta)}")
        self.track({f"train/{k}": v for k, v in metrics.items()}, self.step)

    def evaluate(self, epoch: int, final: bool = False) -> None:
        """Score select, update best and patience, report (with a checkpoint when due). Evaluating the step the
        history already ends at (a restore with no step left) changes neither the history nor the patience."""
        step = self.step
        metrics = self.select_metrics()
        value = metrics[self.metric]
        if not math.isfinite(value):
            raise FloatingPointError(f"non-finite {self.metric} {value} at step {step}: the weights diverged; "
                                     f"optim.lr={self.optim_lr:g}")
        again = bool(self.history) and self.history[-1]["step"] == step
        improved = value > self.best
        if improved:
            self.best, self.best_step, self.bad_evals = value, step, 0
            self.keep_best()
        elif not again:
            self.bad_evals += 1
        if not again:
            self.history.append({"step": step, "epoch": epoch, **metrics})
        # patience ran out before the run's last step (at it, the run ends anyway: it ran every step, not stopped); a
        # restore that evaluates that step again (final) keeps it stopped: it said "not triggered" and trained on
        self.stopped = (self.stopped and again) or (
            bool(self.train.patience and self.bad_evals >= self.train.patience) and not final)
        final = final or self.stopped
        if self.log:
            self.log.info(f"[eval] step {step}: " + " ".join(f"{k} {v:.4f}" for k, v in metrics.items())
                          + (" (best so far)" if improved else f" (best {self.best:.4f} at step {self.best_step})"))
        self.track(metrics, step)
        self.evals += 1
        self.loss_window = self._window.pending(self.summed)  # every rank evaluates at this step: all call it
        record = {**metrics, "step": step, "epoch": epoch, "best_step": self.best_step, "best": self.best}
        self.report(record, final or self.evals % self.checkpoint_every == 0, final)


class _Window:
    """Training metrics since the last progress line: the mean finite loss and samples/s, over every rank.

    `carried`: every rank's loss sum and finite steps of the window's steps before a restore (`pending()` of the
    run that saved the checkpoint). They are added after the all-reduce, since every rank restores the same ones.
    samples/s carries nothing: the samples and the seconds are both this process's, a restored count over fresh
    time would overstate it."""

    EMPTY = {"loss_sum": 0.0, "finite_steps": 0}

    def __init__(self, step: int, carried: dict):
        self.first, self.start = step, time.perf_counter()  # where and when this process began (the eta)
        self.loss, self.n, self.samples, self.since = 0.0, 0, 0, self.start
        self.carried = dict(carried)

    def add(self, stats, samples: int) -> None:
        if stats.finite:
            self.loss, self.n = self.loss + stats.loss, self.n + 1
        self.samples += samples

    def take(self, summed: Callable[[list[float]], list[float]] = list) -> dict:
        loss, n, samples = summed([self.loss, self.n, self.samples])  # every rank's
        loss, n = loss + self.carried["loss_sum"], n + self.carried["finite_steps"]
        now = time.perf_counter()
        out = {"loss": loss / n if n else math.nan, "samples_per_s": samples / max(now - self.since, 1e-9)}
        self.loss, self.n, self.samples, self.since, self.carried = 0.0, 0, 0, now, dict(self.EMPTY)
        return out

    def pending(self, summed: Callable[[list[float]], list[float]] = list) -> dict:
        """Every rank's loss sum and finite steps since the last progress line (every rank calls it: an
        all-reduce), what a checkpoint keeps for the next process's first line."""
        loss, n, _ = summed([self.loss, self.n, self.samples])  # the list take() adds, one all-reduce shape
        return {"loss_sum": loss + self.carried["loss_sum"], "finite_steps": int(n) + self.carried["finite_steps"]}

