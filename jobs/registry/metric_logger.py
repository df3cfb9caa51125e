"""Metrics from inside a training worker to MLflow: rank 0 logs, buffered through outages, with the node's system
metrics; names made acceptable to MLflow (`metric_key`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import numbers
import os
import re
import time
import warnings
from pathlib import Path

from jobs.registry.redaction import redact

_METRIC_CHARACTERS = re.compile(r"[^/\w.\- ]")  # what MLflow accepts in a metric's name on every store


MAX_KEY = 250  # MLflow's limit on a metric name's length
COUNTS_FILE = "tracking_counts.json"  # in a resume checkpoint, rank 0's: the counts a restart goes on from


def quick_request(request, failed: str) -> tuple[bool, object]:
    """`request()` to the store failing fast (_fail_fast), for a job that goes on without its answer: (True, the
    answer), or (False, None) after a warning, `failed` with the error in its {}."""
    try:
        with _fail_fast():
            return True, request()
    except Exception as exc:  # noqa: BLE001 - the store down or refusing: the caller goes on
        warnings.warn(redact(failed.format(f"{type(exc).__name__}: {exc}")))
        return False, None


def metric_key(name: str) -> str:
    """`name` as MLflow accepts it: letters, digits, `_ - . /` and spaces, no empty, `.` or `..` part, no leading
    `..`, at most MAX_KEY characters; any other character becomes `_` (an entity type's F1, `select/f1_ORG(company)`,
    logs as `select/f1_ORG_company_`), a longer name keeps its head and a digest of the whole (two long labels stay
    two metrics). MLflow refuses a whole batch over one such name: a label of the user's data must not cost every
    metric."""
    parts = _METRIC_CHARACTERS.sub("_", str(name)).split("/")
    key = "/".join(p.replace(".", "_") if p in (".", "..") else p for p in parts if p) or "_"
    if key.startswith(".."):  # MLflow reads it as a path out of the run's folder
        key = "_" + key[1:]
    if len(key) > MAX_KEY:
        key = f"{key[:MAX_KEY - 9].rstrip('/')}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
    return key


@contextlib.contextmanager
def _fail_fast():
    """MLflow's HTTP client without its retries and at a 10 s timeout, for this block only: a training step must
    not wait minutes on a store that is down (the logger keeps the points and retries itself). Set for the whole
    process, it left every later MLflow call of the worker (a sweep trial ending its run) without retries."""
    names = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    before = {name: os.environ.get(name) for name in names}
    os.environ.update({name: value for name, value in names.items() if before[name] is None})  # a user's own stays
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)


class RankZeroLogger:
    """Metric logging from inside a worker; a no-op except on rank 0 with a run to log to.

    A tracking outage must neither stop training nor lose its metrics. A write that fails is counted
    (`failures`, one per failed request) and its points stay buffered; later `log` calls retry the buffer
    first, after a backoff that starts at `backoff_s` and doubles per failure up to `max_backoff_s`, so a
    step never waits on more than one request. MLflow's own HTTP retries (minutes by default) are turned
    down to one quick try in this process: the backoff here replaces them. A replayed point is harmless:
    MLflow keys a metric by (key, step, timestamp, value) and drops exact repeats. `close()` at the end of
    training retries until the buffer is empty or `close_timeout_s` has passed. Beyond `max_buffered`
    points the oldest are dropped and counted (`dropped`). A run deleted while it trains refuses every point, for
    good: once the store says so, nothing more is sent to it and every point is counted in `dropped` (`gone`).

    The buffer and the counts live in this process only, and a restarted worker group trains on from its last
    checkpoint, after the steps whose points were buffered: those are never logged again. So each checkpoint
    carries the counts (`save_counts`, the buffer then counted as lost) and a restored logger goes on from them
    (`restore_counts`): the final counts are the run's, over every attempt.

    System metrics (`system/cpu_utilization_percentage`, memory, disk, network, and `system/gpu_*` where
    NVIDIA's NVML is present) are sampled with MLflow's own monitors every `system_metrics_s` seconds, at a
    `log` call, on the node rank 0 trains on, and go through the same buffer: MLflow's background monitor
    would need the run to stay RUNNING in this process and stops at the first failed request.
    """

    MAX_BATCH = 1000  # MLflow's log_batch limit on metrics per request

    def __init__(self, tracking_uri: str, run_id: str | None, rank: int, backoff_s: float = 1.0,
                 max_backoff_s: float = 60.0, max_buffered: int = 100_000, system_metrics_s: float = 10.0):
        self.client = None
        self.run_id = run_id
        self.gone = False  # the run deleted (or purged): its points are counted, not sent
        self.failures = 0
        self.dropped = 0
        self.pending: list = []  # mlflow.entities.Metric not yet written, oldest first
        self.backoff_s, self.max_backoff_s, self.max_buffered = backoff_s, max_backoff_s, max_buffered
        self._delay, self._retry_at = backoff_s, 0.0
        if rank == 0 and run_id:
            from mlflow.tracking import MlflowClient

            self.client = MlflowClient(tracking_uri)
        self.monitors = system_monitors() if self.client is not None and system_metrics_s > 0 else []
        self.system_metrics_s, self._next_sample = system_metrics_s, time.monotonic()
        for m in self.monitors:
            m.collect_metrics()  # CPU utilization is measured between two samples: this is the first

    def log(self, metrics: dict, step: int) -> None:
        if self.client is None:
            return
        from mlflow.entities import Metric

        if self.monitors and time.monotonic() >= self._next_sample:
            self._next_sample = time.monotonic() + self.system_metrics_s
            metrics = {**metrics, **self.system_metrics()}
        now = int(time.time() * 1000)
        self.pending += [Metric(metric_key(k), float(v), now, step) for k, v in metrics.items()
                         if isinstance(v, numbers.Real)]  # numpy's float32 and int64 too
        if len(self.pending) > self.max_buffered:
            self.dropped += len(self.pending) - self.max_buffered
            del self.pending[:len(self.pending) - self.max_buffered]
        if time.monotonic() >= self._retry_at:
            self.flush()

    def system_metrics(self) -> dict:
        out = {}
        for m in self.monitors:
            try:
                m.collect_metrics()
                out.update({f"system/{k}": v for k, v in m.aggregate_metrics().items()})
            except Exception:  # a sensor that fails (a GPU gone, a disk unmounted) must not stop training
                pass
            m.clear_metrics()
        return out

    def flush(self) -> bool:
        """Write the buffer, oldest first; on a failure count it, keep the rest and back off. True if empty."""
        with _fail_fast():
            return self._flush()

    def _flush(self) -> bool:
        while self.pending and not self.gone:
            chunk = self.pending[:self.MAX_BATCH]
            try:
                self.client.log_batch(self.run_id, metrics=chunk)
            except Exception as exc:  # any MLflow or network error: training goes on
                code = getattr(exc, "error_code", "")
                if code in ("INVALID_PARAMETER_VALUE", "RESOURCE_DOES_NOT_EXIST") and self._run_gone(exc):
                    break
                if code == "INVALID_PARAMETER_VALUE":  # refused, not failed: never retried
                    self._one_by_one(chunk, exc)
                    del self.pending[:len(chunk)]
                    continue
                self.failures += 1
                if self.failures == 1:
                    warnings.warn(redact(f"[tracking] MLflow logging failed, training continues; metrics are buffered "
                                         f"and retried (tracking_failures counts failed writes): {exc}"))
                self._retry_at = time.monotonic() + self._delay
                self._delay = min(2 * self._delay, self.max_backoff_s)
                return False
            del self.pending[:len(chunk)]
        if self.gone:
            self.dropped += len(self.pending)
            self.pending.clear()
        self._delay, self._retry_at = self.backoff_s, 0.0
        return True

    def _run_gone(self, exc: Exception) -> bool:
        """Whether the store refused the batch because the run is deleted (in the UI, while it trains) or purged:
        retried point by point, every point was refused again, one request each, at every log() until the end."""
        try:
            self.gone = self.client.get_run(self.run_id).info.lifecycle_stage != "active"
        except Exception as asked:  # noqa: BLE001 - the store failing now: not known gone, retried as before
            self.gone = getattr(asked, "error_code", "") == "RESOURCE_DOES_NOT_EXIST"
        if self.gone:
            warnings.warn(redact(f"[tracking] MLflow run {self.run_id} was deleted, or is not in this store (a store "
                                 f"reset?): no more metrics are sent to it, its points are counted in "
                                 f"tracking_undelivered: {exc}"))
        return self.gone

    def _one_by_one(self, chunk: list, exc: Exception) -> None:
        """A batch the store refused (a malformed point): each point alone, the refused ones counted as dropped."""
        refused = 0
        for point in chunk:
            try:
                self.client.log_batch(self.run_id, metrics=[point])
            except Exception as one:  # noqa: BLE001 - refused again, or the store gone: not retried either way
                refused += 1
                exc = one
        if refused:
            self.dropped += refused
            warnings.warn(redact(f"[tracking] MLflow refused {refused} metric point(s), counted in "
                                 f"tracking_undelivered: {exc}"))

    def close(self, close_timeout_s: float = 60.0) -> dict:
        """Last flush, retried with backoff for up to `close_timeout_s`; returns the counts the job reports."""
        deadline = time.monotonic() + close_timeout_s
        while self.client is not None and not self.flush() and time.monotonic() < deadline:
            time.sleep(max(0.0, min(self._retry_at, deadline) - time.monotonic()))
        return self.counts()

    def ask(self, request):
        """`request(client)`: one call to the store beside the buffered points (a tag, a metric's history), failing
        fast as a write does: its answer, or None where there is no store or it failed (counted in
        tracking_failures). A trial restarted while the store is down trains on, as a logging step does."""
        if self.client is None:
            return None
        made, answer = quick_request(lambda: request(self.client), "MLflow request failed, training continues: {}")
        self.failures += not made
        return answer

    def save_counts(self, folder: Path) -> None:
        """Before a resume checkpoint is written in `folder`: one try to write the buffer, then the counts a
        restart from this checkpoint goes on from, with what is still buffered counted as undelivered (a restart
        resumes after those steps and never logs them again; if this process delivers them later, the count
        overstates). One try, not close()'s retries: during an outage a checkpoint waits on one failed request
        at most (MLflow's timeout, 10 s under _fail_fast), and the next `log` calls keep retrying as before."""
        if self.client is None:
            return
        if self.pending:
            self.flush()
        (Path(folder) / COUNTS_FILE).write_text(json.dumps({"run_id": self.run_id, **self.counts()}))

    def restore_counts(self, folder: Path) -> None:
        """Go on from the counts of the checkpoint in `folder` that this worker restores (added to this logger's).
        Only a checkpoint of this MLflow run's: a resubmitted job logs to a new run, and an earlier run's failures
        and lost points were that run's. A checkpoint from before the counts were kept restores none."""
        path = Path(folder) / COUNTS_FILE
        if self.client is None or not path.is_file():
            return
        saved = json.loads(path.read_text())
        if saved.get("run_id") == self.run_id:
            self.failures += int(saved.get("tracking_failures", 0))
            self.dropped += int(saved.get("tracking_undelivered", 0))

    def counts(self) -> dict:
        """tracking_failures: failed writes; tracking_undelivered: metric points not in MLflow (dropped or
        still buffered)."""
        return {"tracking_failures": self.failures, "tracking_undelivered": self.dropped + len(self.pending)}


def system_monitors() -> list:
    """MLflow's system-metric monitors for this node: CPU and memory, disk, network, NVIDIA GPUs if NVML loads."""
    from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
    from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
    from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

    monitors = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]
    try:
        import torch

        if torch.cuda.is_available():
            from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor

            monitors.append(GPUMonitor())
    except Exception:  # no pynvml, or NVML cannot start: CPU metrics only
        pass
    return monitors


def outage_line(metrics: dict) -> str:
    """The summary line for the workers' tracking counts (phases summed): failed writes, lost points."""
    def total(name: str) -> int:
        return int(sum(v for k, v in metrics.items() if k.rsplit("/", 1)[-1] == name))

    failures, lost = total("tracking_failures"), total("tracking_undelivered")
    if not failures:  # points the store refused (a run deleted in the UI, a stricter server's names) are lost too
        return f"0 failed MLflow writes, but {lost} metric points refused, NOT delivered" if lost \
            else "0 failed MLflow writes"
    return (f"{failures} failed MLflow writes, retried: "
            + (f"{lost} metric points NOT delivered" if lost else "every buffered metric delivered"))
