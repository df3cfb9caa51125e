"""jobs/registry/metric_logger.py's outage counts across a worker-group restart, with fake MLflow clients: a
restarted group trains on from its last checkpoint, so what the dead one had buffered is lost, and the counts the
job reports must be the run's, not the last attempt's (a real server outage: tests/unit/test_tracking.py)."""

import json
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import ray.train

from jobs.config.sections import OptimConfig
from jobs.registry.metric_logger import COUNTS_FILE, RankZeroLogger, outage_line

RUN = "run-1"


class Store:
    """A fake MLflow client: down (every write fails) or up (every write lands, counted per point)."""

    def __init__(self, up: bool):
        self.up, self.requests, self.points = up, 0, []

    def log_batch(self, run_id, metrics):
        self.requests += 1
        if not self.up:
            raise ConnectionError("store down")
        self.points += [(m.key, m.step) for m in metrics]


def _logger(store: Store, run_id: str = RUN) -> RankZeroLogger:
    logger = RankZeroLogger("http://tracking.invalid", run_id, 0, system_metrics_s=0)  # only the points logged here
    logger.client = store
    return logger


def _log(logger: RankZeroLogger, steps: range, retry: bool = True) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the outage's one warning
        for step in steps:
            logger.log({"train/loss": 1.0 / step}, step=step)
            if retry:
                logger._retry_at = 0.0  # every step tries the store: no backoff to wait through


def test_points_buffered_at_a_checkpoint_are_counted_lost_after_a_restart(tmp_path):
    """An outage: attempt 1 buffers steps 1-120 through an outage, checkpoints at step 100 and dies;
    attempt 2 resumes after step 100 with the store back. Steps 1-100 are never logged, and the report says so."""
    down = Store(up=False)
    first = _logger(down)
    _log(first, range(1, 101))
    first.save_counts(tmp_path)  # the checkpoint at step 100
    at_checkpoint = down.requests  # the checkpoint's flush is one more failed request, counted
    _log(first, range(101, 121))  # then the worker group dies: its buffer is gone

    up = Store(up=True)
    second = _logger(up)
    second.restore_counts(tmp_path)
    _log(second, range(101, 201))
    counts = second.close(0)
    assert counts == {"tracking_failures": at_checkpoint, "tracking_undelivered": 100}
    assert len(up.points) + counts["tracking_undelivered"] == 200  # every step is either in MLflow or counted
    assert outage_line(counts) == f"{at_checkpoint} failed MLflow writes, retried: 100 metric points NOT delivered"


def test_a_checkpoint_tries_the_store_once_even_in_backoff_and_counts_what_it_delivered(tmp_path):
    """The buffer is written before the checkpoint when the store is back, though the backoff has not run out; when
    it is still down the checkpoint waits on one request, not close()'s retries."""
    store = Store(up=False)
    logger = _logger(store)
    _log(logger, range(1, 11), retry=False)  # one failed request, then a backoff of a second
    assert store.requests == 1 and len(logger.pending) == 10

    logger.save_counts(tmp_path)  # still down: one request more, the ten points counted as lost
    assert store.requests == 2
    assert json.loads((tmp_path / COUNTS_FILE).read_text()) == {
        "run_id": RUN, "tracking_failures": 2, "tracking_undelivered": 10}

    store.up = True
    logger.save_counts(tmp_path)  # back: the buffer goes out before the checkpoint is written
    assert store.points == [("train/loss", s) for s in range(1, 11)] and not logger.pending
    assert json.loads((tmp_path / COUNTS_FILE).read_text())["tracking_undelivered"] == 0


def test_a_resubmitted_jobs_counts_start_anew_and_other_ranks_keep_none(tmp_path):
    """A resubmitted job logs to another MLflow run: the earlier run's failures are not this one's. A checkpoint
    from before the counts were kept restores none; ranks other than 0 log nothing and write no counts."""
    first = _logger(Store(up=False))
    _log(first, range(1, 6))
    first.save_counts(tmp_path)

    resubmitted = _logger(Store(up=True), run_id="run-2")
    resubmitted.restore_counts(tmp_path)
    assert resubmitted.counts() == {"tracking_failures": 0, "tracking_undelivered": 0}

    older = _logger(Store(up=True))
    older.restore_counts(tmp_path / "no-such-checkpoint")
    assert older.counts() == {"tracking_failures": 0, "tracking_undelivered": 0}

    other_rank = RankZeroLogger("http://tracking.invalid", RUN, 1, system_metrics_s=0)
    (tmp_path / "rank1").mkdir()
    other_rank.save_counts(tmp_path / "rank1")
    other_rank.restore_counts(tmp_path)
    assert not (tmp_path / "rank1" / COUNTS_FILE).exists() and other_rank.counts()["tracking_failures"] == 0


# -- the workers: the counts travel in their checkpoints -------------------------------------------------------


class Engine:
    """What the workers' checkpoint and restore paths call on an engine, doing nothing."""

    data_parallel = (0, 1)
    optim = OptimConfig(warmup_steps=10)  # what the fine-tuning worker's checkpoint records of its schedule

    def __init__(self):
        self.replans = []  # the planned totals resumes compared with

    def resumed_plan(self, planned, saved_warmup, guess=None, **labels):
        self.replans.append(planned)  # the plan a resume compares with this run's (the real one says if they differ)
        return ""

    def save(self, path, client_state):
        Path(path).mkdir(parents=True)

    def load(self, path):
        pass

    def export(self, path, *args, **kwargs):
        Path(path).mkdir(parents=True)


def _pretrain_worker(store: Store, tmp_path: Path):
    from jobs.loops.data_position import DataPosition
    from jobs.workers.pretrain_worker import Worker

    w = Worker.__new__(Worker)  # only what checkpoint() and restore() use
    w.rank, w.world, w.step, w.mask_next, w.pending_ids, w.before, w.rollback_log = 0, 1, 0, 0, [], {}, []
    w.t, w.pipelined = SimpleNamespace(max_steps=200), False
    w.cfg = SimpleNamespace(faults=SimpleNamespace(record_ids_dir=None), tracking=SimpleNamespace(flush_timeout_s=0),
                            deepspeed=SimpleNamespace(zero_stage=0, pipeline_stages=1, partition_method="parameters"),
                            output_dir=str(tmp_path), run_name="pretrain")
    w.config = {"mlflow_run_id": RUN, "basis": {}}
    w.position, w.index = DataPosition.start(10), lambda ids: ids.astype(np.int64)
    w.guard, w.engine = SimpleNamespace(skipped=0), Engine()
    w.faults = SimpleNamespace(maybe_fail=lambda *a: None, upload_fn=lambda *a: None)
    w.evaluate = lambda: {"mlm_acc": 0.5, "mlm_loss": 2.0}
    w.logger = _logger(store)
    return w


def test_a_restarted_pretraining_worker_reports_the_runs_outage_counts(reports, monkeypatch, tmp_path):
    """Attempt 1 buffers steps 1-100 through an outage, checkpoints and dies (a rollback, a lost node); attempt 2
    restores that checkpoint with the store back and finishes: its final report counts the 100 points lost."""
    down = Store(up=False)
    first = _pretrain_worker(down, tmp_path)
    _log(first.logger, range(1, 101))
    first.step = 100
    first.checkpoint({}, last=False)
    failures = down.requests
    _log(first.logger, range(101, 121))  # then the group dies

    second = _pretrain_worker(Store(up=True), tmp_path)
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: ray.train.Checkpoint.from_directory(str(reports[0][1])))
    second._load_engine = lambda d, **kw: {"step": 100, "micro_batches": 0, "max_steps": 200}
    second._start_masks = lambda index: None
    second._apply_rollbacks = lambda: None
    second.restore()
    assert second.step == 100
    _log(second.logger, range(101, 201))
    second.step = 200
    second.checkpoint({}, last=True)
    final = reports[-1][0]
    assert (final["tracking_failures"], final["tracking_undelivered"]) == (failures, 100)


def test_a_restarted_finetuning_worker_reports_the_runs_outage_counts(reports, tmp_path):
    """The same for fine-tuning: attempt 1's evaluation checkpoint carries the points it could not deliver."""
    from jobs.workers.finetune_worker import Worker

    def worker(store: Store, total: int = 100) -> Worker:
        w = Worker.__new__(Worker)  # only what _report() and restore() use
        w.rank, w.resumes, w.engine, w.logger = 0, 0, Engine(), _logger(store)
        w.cfg = SimpleNamespace(tracking=SimpleNamespace(flush_timeout_s=0),
                                optim=SimpleNamespace(engine_optim=lambda total: None))
        w.config = {"mlflow_run_id": RUN, "basis": {}}
        w.best_dir = Path(tempfile.mkdtemp(prefix="best-", dir=tmp_path))  # one per worker (an id() is reused)
        w.loop = SimpleNamespace(step=0, epoch=0, epoch_steps=0, metric="accuracy", best=0.5, best_step=0, total=total,
                                 nonfinite=0, stopped=False, state=lambda: {}, best_history=lambda: [],
                                 load_state=lambda state: None)
        return w

    down = Store(up=False)
    first = worker(down)
    _log(first.logger, range(1, 51))
    first._report({"accuracy": 0.5}, checkpoint=True, final=False)
    failures = down.requests
    _log(first.logger, range(51, 61))  # then a worker dies

    second = worker(Store(up=True))
    second.restore(ray.train.Checkpoint.from_directory(str(reports[0][1])))
    _log(second.logger, range(51, 101))
    second._report({"accuracy": 0.6}, checkpoint=True, final=True)
    final = reports[-1][0]
    assert (final["tracking_failures"], final["tracking_undelivered"]) == (failures, 50)
    # a resume compares the checkpoint's planned total with this run's (test_resume_schedule: the line it makes)
    assert second.engine.replans == [100]


def test_a_request_beside_the_buffer_fails_fast_and_counted_when_the_store_is_down():
    """A trial restarted (or exploiting a PBT donor) while the store is down asked MLflow for its metric history and
    set a tag with MLflow's own retries, and failed: the request now fails fast, is counted, and gives None."""

    class History(Store):
        def get_metric_history(self, run_id, key):
            self.requests += 1
            if not self.up:
                raise ConnectionError("store down")
            return [SimpleNamespace(step=5, value=0.7)]

    down = _logger(History(up=False))
    with pytest.warns(UserWarning, match="MLflow request failed, training continues: ConnectionError: store down"):
        assert down.ask(lambda client: client.get_metric_history(RUN, "accuracy")) is None
    assert down.counts()["tracking_failures"] == 1
    up = _logger(History(up=True))
    assert up.ask(lambda client: client.get_metric_history(RUN, "accuracy"))[0].value == 0.7
    assert up.counts()["tracking_failures"] == 0
    assert RankZeroLogger("", None, 0).ask(lambda client: 1 / 0) is None  # no store: nothing asked


def test_a_trials_last_requests_to_a_store_that_is_down_warn_and_keep_its_result():
    """A trial that trained to its end raised when MLflow, down, refused its run's FINISHED (Tune then counted it
    failed, never a champion), and a failed trial's own error was replaced by the store's: the driver ends every
    trial's run with Tune's verdict anyway (settle_runs)."""
    from jobs.workers.sweep_trial import _at_the_end

    def down():
        raise ConnectionError("store down")

    with pytest.warns(UserWarning, match=r"MLflow request as the trial ended failed \(ConnectionError: store down\)"):
        _at_the_end(down)
    done = []
    _at_the_end(lambda: done.append(1))
    assert done == [1]
    with pytest.raises(FloatingPointError, match="diverged"), pytest.warns(UserWarning):
        try:
            raise FloatingPointError("diverged")
        except FloatingPointError:
            _at_the_end(down)
            raise


def test_a_trial_restarting_while_the_store_is_down_trains_on_with_the_run_its_checkpoint_names(tmp_path):
    """A trial's restart (its process died, the sweep resumed) looked its run up in MLflow with the client's retries
    and failed with the store down, spending a trial failure: its own checkpoint names the run, and it trains on.
    A PBT donor's checkpoint names the donor's run, not this trial's; a new trial still needs the store."""
    from ray import tune

    from jobs.workers.sweep_trial import TRIAL_FILE, own_run, trial_run

    (tmp_path / TRIAL_FILE).write_text(json.dumps({"trial_id": "t1", "run_id": "run-9"}))
    checkpoint = tune.Checkpoint.from_directory(str(tmp_path))
    assert (own_run(checkpoint, "t1"), own_run(checkpoint, "t2"), own_run(None, "t1")) == ("run-9", "", "")

    class Down:
        def search_runs(self, *args, **kwargs):
            raise ConnectionError("store down")

    data = SimpleNamespace(parent_run_id="parent", experiment_id="1")
    with pytest.warns(UserWarning, match=r"MLflow unreachable as trial t1 restarts .*its run run-9 when the store"):
        assert trial_run(Down(), data, "t1", "trial_1", {}, own_run="run-9") == "run-9"
    with pytest.raises(ConnectionError, match="store down"):
        trial_run(Down(), data, "t1", "trial_1", {})


def test_a_full_buffer_drops_its_oldest_points_and_counts_them():
    """Through a long outage, beyond max_buffered points the oldest go, counted, and the newest are the ones
    delivered when the store is back."""
    store = Store(up=False)
    logger = RankZeroLogger("http://tracking.invalid", RUN, 0, max_buffered=5, system_metrics_s=0)
    logger.client = store
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the outage's one warning
        for step in range(8):
            logger.log({"train/loss": 1.0 / (step + 1)}, step=step)
    assert [m.step for m in logger.pending] == [3, 4, 5, 6, 7]  # the newest, oldest first
    assert logger.dropped == 3
    assert logger.counts()["tracking_undelivered"] == 8  # 3 dropped + 5 still buffered: none is in MLflow
    store.up = True
    assert logger.close(0)["tracking_undelivered"] == 3
    assert store.points == [("train/loss", step) for step in range(3, 8)]
