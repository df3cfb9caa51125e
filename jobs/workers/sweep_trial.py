"""One sweep trial: fine-tune in-process inside a Ray Tune function trainable (one worker, no Ray Train).

Contract with the driver (jobs/sweep.py), through `tune.with_parameters(trial, data=...)`: `data` holds
the resolved fine-tuning config as a dict (`base`), the features as numpy arrays (`train`, `select`, made
once on the driver), the select split's rows (`select_rows`), the starting checkpoint's files
(`init_files`), and the MLflow ids (`tracking_uri`, `experiment_id`, `parent_run_id`). The trial's
sampled hyperparameters arrive as Tune's `config` ({"optim.lr": ..., ...}) and win over `base`.

Every evaluation reports the select split's metrics (`score` = the task's main metric; a trial never sees the
evaluation split), every `checkpoint_every`-th
and the last with a Tune checkpoint of the whole training state (the engine's DeepSpeed checkpoint: weights,
optimizer moments, step), which PBT exploits and a resumed sweep continues from; ASHA needs only the metrics.
Training runs on the engine pretraining and fine-tuning use (jobs/engine/data_parallel.py), in a one-rank process group. On a
restore the weights, the optimizer moments and the step come from the checkpoint, while the learning
rate, weight decay and schedule come from this trial's (possibly mutated) config (ray#36660: a
restored optimizer state would otherwise bring the donor's hyperparameters back).

Each trial is its own MLflow run under the sweep's parent run (tag `mlflow.parentRunId`), found again by
its Tune trial id after a restart; nothing is read from MLFLOW_RUN_ID (mlflow#15713).
"""

from __future__ import annotations

import copy
import math
import tempfile
from pathlib import Path

import numpy as np
import torch

from jobs.loops import ft_tasks
from jobs.runtime.faults import maybe_kill_trial
from jobs.config.finetune import FinetuneConfig, FinetuneOptimConfig
from jobs.workers.finetune_worker import build_engine, build_model, collate, materialize_files, single_process_group
from jobs.config.sweep import SEARCHABLE, apply


def trial(config: dict, data: dict) -> None:
    """The Tune function trainable."""
    from mlflow.tracking import MlflowClient
    from ray import tune

    params = {k: v for k, v in config.items() if k in SEARCHABLE}
    cfg = FinetuneConfig.from_dict(apply(data["base"], params))
    ctx = tune.get_context()
    client = MlflowClient(data["tracking_uri"])
    run_id = trial_run(client, data, ctx.get_trial_id(), ctx.get_trial_name(), params)
    torch.set_num_threads(max(1, int(data.get("threads", 1))))
    run = None
    try:
        run = TrialRun(cfg, data, params, run_id, ctx.get_trial_id())
        run.run()
    except SystemExit:
        # Tune ends a trial's thread this way (tune.report raises it) when a scheduler stops or pauses the
        # trial or the sweep is interrupted; which one it was only the driver knows, so it settles the status.
        raise
    except BaseException as exc:
        client.set_tag(run_id, "error", f"{type(exc).__name__}: {exc}"[:5000])
        client.set_terminated(run_id, "FAILED")
        raise
    finally:
        if run is not None:
            run.close(client)
    client.set_terminated(run_id, "FINISHED")


def trial_run(client, data: dict, trial_id: str, trial_name: str, params: dict) -> str:
    """This trial's MLflow run: the one already made for this trial id (a restart), else a new nested run."""
    from mlflow.entities import Param

    parent = data["parent_run_id"]
    found = client.search_runs([data["experiment_id"]], filter_string=(
        f"tags.`mlflow.parentRunId` = '{parent}' and tags.trial_id = '{trial_id}'"), max_results=1)
    if found:  # a restart: the trial's process died or the sweep was interrupted; counted on the run
        run = found[0]
        client.set_tag(run.info.run_id, "restarts", str(int(run.data.tags.get("restarts", "0")) + 1))
        client.update_run(run.info.run_id, status="RUNNING")
        return run.info.run_id
    run = client.create_run(data["experiment_id"], run_name=trial_name, tags={
        "mlflow.parentRunId": parent, "trial_id": trial_id, "sweep": data["sweep"], "phase": data["phase"]})
    client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
    return run.info.run_id


def retune(engine, optim: FinetuneOptimConfig, step: int) -> None:
    """Put `optim`'s peak learning rate and weight decay on a restored engine, at schedule position `step`: a
    loaded optimizer state carries the saving trial's values (the decay-free group keeps none)."""
    sched = engine.scheduler
    for group, decay in zip(engine.optimizer.param_groups, (optim.weight_decay, 0.0)):
        group["weight_decay"], group["initial_lr"] = decay, optim.lr
    sched.base_lrs = [optim.lr] * len(sched.base_lrs)
    sched.last_epoch = step
    lrs = [optim.lr * f(step) for f in sched.lr_lambdas]
    for group, lr in zip(engine.optimizer.param_groups, lrs):
        group["lr"] = lr
    sched._last_lr = lrs


class TrialRun:
    def __init__(self, cfg: FinetuneConfig, data: dict, params: dict, run_id: str, trial_id: str):
        from jobs.registry.tracking import RankZeroLogger

        self.cfg, self.data, self.params, self.trial_id = cfg, data, params, trial_id
        torch.manual_seed(cfg.train.seed)
        self.init_dir = materialize_files(data["init_files"], self)
        model, _ = build_model(cfg, self.init_dir)
        t = cfg.train
        self.n_train = len(data["train"]["input_ids"])
        self.steps_per_epoch = max(1, math.ceil(self.n_train / t.batch_size))
        total = self.steps_per_epoch * t.epochs
        self.total = min(total, t.max_steps) if t.max_steps else total
        single_process_group()
        self.engine = build_engine(model, cfg, self.total)
        self.logger = RankZeroLogger(data["tracking_uri"], run_id, 0)
        self.metric = ft_tasks.main_metric(cfg.task)
        self.step, self.best, self.best_step, self.history, self.bad_evals, self.evals = 0, -math.inf, 0, [], 0, 0
        self.best_state, self.restored_from = None, ""
        self.id2label = None if cfg.task.kind == "question-answering" or ft_tasks.num_labels(cfg.task) == 1 \
            else dict(enumerate(cfg.task.labels))
        from ray import tune

        checkpoint = tune.get_checkpoint()
        if checkpoint is not None:
            self.restore(checkpoint)

    def restore(self, checkpoint) -> None:
        with checkpoint.as_directory() as d:
            # weights and moments; the optimizer state brings the old lr and decay too, the schedule stays this trial's
            state = self.engine.load(d, schedule=False)
        self.step, self.history = state["step"], state["history"]
        self.best, self.best_step = state["best"], state["best_step"]
        self.best_state = state.get("best_state")
        if state["trial_id"] != self.trial_id:  # PBT exploit: another trial's weights, this trial's hyperparameters
            self.restored_from = state["trial_id"]
            if self.logger.client is not None:
                self.logger.client.set_tag(self.logger.run_id, "pbt.restored_from", self.restored_from)
        retune(self.engine, self.cfg.optim, self.step)  # this config's hyperparameters win (ray#36660)

    def close(self, client) -> None:
        """Flush the metrics still buffered (a tracking server that was down) and record on the trial's run how
        many writes failed or never arrived, as the fine-tuning job's summary does."""
        counts = self.logger.close(self.cfg.tracking.flush_timeout_s)
        if any(counts.values()):
            try:
                client.set_tag(self.logger.run_id, "tracking", " ".join(f"{k}={v}" for k, v in counts.items()))
            except Exception:  # still unreachable: Tune's own result files hold the metrics
                pass

    def run(self) -> None:
        t = self.cfg.train
        every = t.eval_every_steps or self.steps_per_epoch
        while self.step < self.total:
            epoch, offset = divmod(self.step, self.steps_per_epoch)
            order = np.random.default_rng(t.seed + 7919 * epoch).permutation(self.n_train)
            start = offset * t.batch_size
            idx = order[start:start + t.batch_size]
            stats = self.engine.step(collate({k: v[idx] for k, v in self.data["train"].items()}))
            self.step += 1
            if not stats.finite:
                raise FloatingPointError(f"non-finite loss {stats.loss} at step {self.step} "
                                         f"(optim.lr={self.cfg.optim.lr:g})")
            maybe_kill_trial(self.data, self.step, self.trial_id)
            if self.step % t.log_every == 0:
                self.logger.log({"train/loss": stats.loss, "train/lr": self.engine.lr}, step=self.step)
            if self.step % every == 0 or self.step == self.total:
                if self.evaluate(epoch):
                    break
        if self.evals == 0:
            # Restored at the last step (PBT cloned a donor's final checkpoint while the donor was still running):
            # no step is left, but this trial's result must be its own (restored_from, its hyperparameters), not
            # the donor's metrics that Tune copied with the checkpoint.
            self.evaluate((self.step - 1) // self.steps_per_epoch)

    def evaluate(self, epoch: int) -> bool:
        from ray import tune

        metrics, pred_classes = self.dev_metrics()
        value = metrics[self.metric]
        if not math.isfinite(value):
            raise FloatingPointError(f"non-finite {self.metric} at step {self.step}")
        improved = value > self.best
        if improved:
            self.best, self.best_step, self.bad_evals = value, self.step, 0
            if self.data.get("export"):
                self.best_state = copy.deepcopy(self.engine.module.state_dict())
        else:
            self.bad_evals += 1
        if not self.history or self.history[-1]["step"] != self.step:
            self.history.append({"step": self.step, "epoch": epoch, **metrics})
        stop = bool(self.cfg.train.patience and self.bad_evals >= self.cfg.train.patience)
        final = stop or self.step >= self.total
        hp = {f"hp/{k}": float(getattr(getattr(self.cfg, k.split('.')[0]), k.split('.')[1])) for k in self.params}
        self.logger.log({**metrics, **hp}, step=self.step)
        report = {**metrics, "score": value, "best": self.best, "best_step": self.best_step, "step": self.step,
                  "total_steps": self.total, "epoch": epoch, "pred_classes": pred_classes, "restored_from": self.restored_from,
                  "seed": self.cfg.train.seed,
                  # the peak lr and decay the optimizer trains with; after a PBT exploit, this trial's mutated
                  # values (a restored optimizer state carries the donor's)
                  "optimizer_lr": self.engine.optimizer.param_groups[0]["initial_lr"],
                  "optimizer_weight_decay": self.engine.optimizer.param_groups[0]["weight_decay"]}
        self.evals += 1
        if not (final or self.evals % self.data.get("checkpoint_every", 1) == 0):
            tune.report(report)  # ASHA and the table need only the metrics; a checkpoint is the whole state
            return stop
        with tempfile.TemporaryDirectory() as tmp:
            self.engine.save(tmp, {"step": self.step, "history": self.history, "best": self.best,
                                   "best_step": self.best_step, "best_state": self.best_state, "trial_id": self.trial_id})
            if final and self.data.get("export"):
                self.export_best(Path(tmp) / "best")
            tune.report(report, checkpoint=tune.Checkpoint.from_directory(tmp))
        return stop

    def export_best(self, out: Path) -> None:
        """The best evaluation's weights in HF format (the last checkpoint carries them)."""
        import json

        if self.best_state is not None:
            self.engine.module.load_state_dict(self.best_state)
        self.engine.export(out, self.init_dir, self.id2label)
        (out.parent / "history.json").write_text(json.dumps(
            [h for h in self.history if h["step"] <= self.best_step], indent=1))

    @torch.no_grad()
    def dev_metrics(self) -> tuple[dict, int]:
        """The task's official metrics on the select split (as the fine-tuning worker's), and how many classes
        were predicted (1 = collapsed to one class; 0 where that does not apply)."""
        from pipelines.tasks.common import load_tokenizer

        task, pred_classes = self.cfg.task, 0
        tokenizer = load_tokenizer(str(self.init_dir)) if task.kind == "question-answering" else None
        size, feats = self.cfg.train.eval_batch_size, self.data["select"]
        n = len(feats["input_ids"])
        batches = [collate({k: v[i:i + size] for k, v in feats.items()}) for i in range(0, n, size)]
        arrays = self.engine.predict(batches, pad_to=task.max_seq_len)
        for k in ("row_index", "window", *ft_tasks.TARGETS[task.kind]):
            arrays[k] = feats[k]
        order = np.lexsort((arrays["window"], arrays["row_index"]))
        arrays = {k: v[order] for k, v in arrays.items()}
        if task.kind == "classification" and arrays["logits"].shape[-1] > 1:
            pred_classes = len(np.unique(arrays["logits"].argmax(-1)))
        return ft_tasks.dev_metrics(task, ft_tasks.SELECT, self.data["select_rows"], arrays, tokenizer), pred_classes
