"""What a job prints: by default our progress lines, warnings that matter, and errors; `--verbose` brings back
everything Ray, Ray Data, Ray Train, DeepSpeed, MLflow and transformers say.

Nothing is lost in quiet mode, only kept off the console: Ray writes every worker's and actor's output to its
session's log folder (the job summaries print `logs_dir()`), Ray Train writes its own logs there too, and
Python loggers keep their warnings on the console.

Worker output reaches the driver through Ray's log streaming (`log_to_driver`); quiet mode puts a filter in
front of Ray's printer that passes our lines (`[prepare] ...`, `[eval] ...`, `step   10/100 | ...`), error
reports (a batch holding a traceback or an error) and Ray Train's controller, which quiet mode sets to
warnings only (its "worker group failed, restarting" is a warning users must see). What the raylet pushes
to the driver (a worker died, memory pressure, too many worker processes) is printed as before, and so is
what Ray's C++ core writes straight to the driver's stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
import warnings

_quiet = False

# jobs' and workers' progress lines, and our warnings.warn lines (its "file:line: UserWarning: [tracking] ...")
OURS = re.compile(r"^\s*(\[[a-z][a-z0-9 _-]*\]|step\s+\d+)|^\S+:\d+: \w*Warning: \[[a-z][a-z0-9 _-]*\] ")
TROUBLE = re.compile(r"Traceback \(most recent call last\)|\b\w*(Error|Exception)\b|\bERROR\b"
                     r"|(?i:\b(died|killed|out of memory)\b)"  # a dead worker is news, whoever reports it
                     # a failed JIT build's cause (the compiler's and ninja's lines), a collective that timed out
                     r"|(?i:\berror:|fatal error)|ninja: build stopped|Watchdog caught collective operation timeout")
# A native crash: Python's fault handler, abseil's and the C++ runtime's last words. News from an actor (a training
# worker, a trial, a prediction replica); not from Ray's pooled task processes, which abort at exit now and then
# in jobs that succeed (abseil's "Mutex corrupt" check in Ray Data's _fetch_parquet_file_info, seen in
# tests/e2e/test_job_submit.py): a task that really failed reaches the driver as a RayTaskError, printed.
CRASH = re.compile(r"Fatal Python error|\*\*\* SIG[A-Z]+ received|terminate called|(?i:segmentation fault|core dumped)")
# Ray's advice on actor arguments; and the GCS's error log of a KillActor whose actor exited before it replied,
# which is how a kill succeeds (Ray's maintainers, ray-project/ray#53412 and #58544, which drops the log)
BENIGN = re.compile(r"has constructor arguments in the object store and max_restarts > 0"
                    r"|KillActor RPC failed for actor \w+: RpcError: .*Socket closed")
# Ray ending an actor on purpose (a trial Tune stopped or no longer needs) with SIGTERM: when the signal lands
# in a weakref callback, Python reports the SystemExit of Ray's handler as "Exception ignored in ..."
ENDED_BY_RAY = re.compile(r"ray/_private/worker\.py\", line \d+, in sigterm_handler")
# what the raylet pushes to every driver on a small machine (fractional-CPU workers and actors outnumber
# the cores); its other messages (a worker killed for memory, ...) are printed
RAYLET_BENIGN = re.compile(r"PYTHON worker processes have been started on node")
# Ray Data's listing of files ends its thread pool while the thread that signals completion is still telling
# the pool's workers to stop (ray/data/_internal/dynamic_work_queue.py, _signal_completion does not catch the
# InterruptedError that pool.shutdown causes): a traceback after every file was listed, from a thread
# named pool-N/completion-signaler and ending in a bare InterruptedError. Only that exact shape is dropped.
SIGNALER = re.compile(r"^Exception in thread pool-\d+/completion-signaler:$")
# what comes before a traceback and names it: an exception Python could only report, one that ended a thread
HEADER = re.compile(r"^(Exception ignored in|Exception in thread )")
HOLD_S = 2.0  # how long a batch's unfinished traceback waits for the next batch to finish it (WorkerStreams)
LOUD_ACTORS = ("TrainController",)  # kept whole: quiet mode sets Ray Train's console to warnings (train_logging)
LIBRARIES = ("mlflow", "alembic", "ray.tune", "ray.train", "transformers", "deepspeed", "urllib3", "filelock",
             "huggingface_hub")
# loggers whose handlers write to sys.stderr as it is at the time (MLflow's MlflowLoggingStream), and that do not
# propagate: to_log_file's redirect caught their warnings too
STDERR_AT_THE_TIME = ("mlflow",)
# the warnings of those loggers that say the model just logged is broken: on the console in quiet mode too
ECHOED = re.compile(r"Failed to validate serving input example")


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", action="store_true",
                        help="print Ray, DeepSpeed and MLflow internals too (by default they go to the log files)")


def configure(verbose: bool) -> None:
    """Call once in a job's main(), before Ray starts (and before `import ray`: see cluster.prefer_loopback).
    Quiet: library loggers keep only warnings and Python's deprecation notices are dropped; init_ray then
    quiets Ray Data's console and filters what workers stream back (install_worker_filter)."""
    global _quiet
    _quiet = not verbose
    if verbose:
        return
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # mlflow sets its level from this on import
    # Tune's "experiment state snapshotting ... may become a bottleneck": every few trial checkpoints on a
    # small sweep; what a user acts on is in the sweep's own table
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Tune's new output engine prints its experiment header and "View detailed results here" at any
    # verbosity; the legacy one at verbose=0 (jobs/sweep.py in quiet mode) prints nothing
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # "Downloading artifacts: 8%|..."
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("ray.tune.execution.experiment_state").addFilter(snapshot_race_dropped)
    # "Token authentication is enabled for this Ray cluster" on every start: the state we require, not news
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    for category in (DeprecationWarning, FutureWarning, PendingDeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    # Ray Data, when an actor pool gets fewer blocks than actors (a small input to predict): not the user's to fix
    warnings.filterwarnings("ignore", message="The minimum number of concurrent actors")
    # "Loading weights: 100%" on every registration: huggingface_hub reads this when it is first imported (here, in
    # Ray's workers and in child processes), and transformers asks it on its own import; either one imported
    # already is told directly
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def snapshot_race_dropped(record: logging.LogRecord) -> bool:
    """False for Tune's error log of one race (seen in a clean run on this 2-core machine, under load): its experiment
    state is copied to storage while the searcher rewrites its state file through a temporary one, and the copy
    finds the temporary file gone (a FileNotFoundError naming a "-tmp-" file). The next snapshot copies the renamed
    file; any other failure of a snapshot is printed."""
    exc = record.exc_info[1] if record.exc_info else None
    return not (record.getMessage().startswith("Saving experiment state to storage")
                and isinstance(exc, FileNotFoundError) and "-tmp-" in str(exc))


def quiet() -> bool:
    return _quiet


def ray_logging_level() -> int:
    """ray.init's logging_level: the driver's own Ray lines ("Started a local Ray instance ...")."""
    return logging.WARNING if _quiet else logging.INFO


def train_logging():
    """Ray Train's LoggingConfig for a RunConfig: warnings only on the console in quiet mode (all levels
    still go to Ray Train's system log files)."""
    from ray.train import LoggingConfig

    return LoggingConfig(log_level="WARNING" if _quiet else "INFO")


def quiet_ray_data() -> None:
    """Ray Data's console on the driver: errors only in quiet mode ("Starting execution of Dataset ...", its
    execution plans, and warnings about its own progress bars). Its log file (ray-data.log in the session's
    logs) keeps every level. Call after ray.data is imported: importing it configures its loggers."""
    if not _quiet:
        return
    import ray.data  # noqa: F401  (configures the "ray.data" logger)

    for handler in logging.getLogger("ray.data").handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.ERROR)


def keep_lines(data: dict) -> list[str]:
    """The lines of one batch of a worker's streamed output that quiet mode prints. `data` is Ray's batch:
    "lines", "pid", "actor_name" or "task_name", "is_err"."""
    lines = data.get("lines") or []
    lines = _drop_sigterm_exit(_drop_signaler_race([line for line in lines if not BENIGN.search(line)]))
    trouble = any(TROUBLE.search(line) or data.get("actor_name") and CRASH.search(line) for line in lines)
    if (data.get("actor_name") or "").startswith(LOUD_ACTORS) or trouble:
        return lines
    return [line for line in lines if OURS.match(line)]


def _drop_sigterm_exit(lines: list[str]) -> list[str]:
    """`lines` less each traceback that runs through Ray's sigterm_handler and ends in its SystemExit (ENDED_BY_RAY),
    with the "Exception ignored in" line before it; every other line, another traceback of the batch too, is kept
    (one such line anywhere made the whole batch no trouble)."""
    kept, i = [], 0
    while i < len(lines):
        if _bare(lines[i]).startswith("Traceback (most recent call last)"):
            end = next((j for j in range(i + 1, len(lines)) if not _in_traceback(lines[j])), None)
            if (end is not None and _bare(lines[end]).startswith("SystemExit")
                    and any(ENDED_BY_RAY.search(line) for line in lines[i:end])):
                if kept and _bare(kept[-1]).startswith("Exception ignored in"):
                    kept.pop()
                i = end + 1
                continue
        kept.append(lines[i])
        i += 1
    return kept


def _drop_signaler_race(lines: list[str]) -> list[str]:
    """`lines` less each SIGNALER traceback that runs through dynamic_work_queue's _signal_completion and ends
    in a bare InterruptedError; any other traceback, and any line after that one, is kept."""
    kept, i = [], 0
    while i < len(lines):
        if SIGNALER.match(_bare(lines[i])):
            inside = (" ", "Traceback")
            end = next((j for j in range(i + 1, len(lines)) if not _bare(lines[j]).startswith(inside)), None)
            block = lines[i:end + 1] if end is not None else []
            if (end is not None and _bare(lines[end]) == "InterruptedError"
                    and any("in _signal_completion" in line for line in block)):
                i = end + 1
                continue
        kept.append(lines[i])
        i += 1
    return kept


class WorkerStreams:
    """Quiet mode's printer of streamed worker output: `emit` gets each batch cut to keep_lines.

    Ray's log monitor publishes what a worker has written so far, and Python writes a traceback a line at a time:
    a batch can end inside one and the next batch bring its end. Judged apart, the first piece of a traceback that
    keep_lines drops whole (a trial Ray ended with SIGTERM, seen in a clean run's quickstart console) was an error
    and printed. So a batch's unfinished traceback waits for the next batch of the same worker stream, and the
    whole is judged at once; one that nothing finishes within `hold_s` is judged as it stands (printed: it is a
    traceback), and the frames and exception line that come later are printed after it, so nothing is lost."""

    def __init__(self, emit, hold_s: float = HOLD_S):
        self.emit, self.hold_s = emit, hold_s
        self.held: dict[tuple, tuple] = {}  # (ip, pid, is_err) -> its unfinished traceback's batch, and its timer
        self.printed_open: dict[tuple, list] = {}  # stream -> its unfinished traceback, printed as it stood
        self.lock = threading.Lock()

    def __call__(self, data: dict) -> None:
        key = (data.get("ip"), data.get("pid"), data.get("is_err"))  # pids repeat across nodes (a pod's numbering)
        with self.lock:  # Ray's printer is not thread-safe (its deduplicator): every print holds the lock
            before, timer = self.held.pop(key, ({"lines": []}, None))
            if timer:
                timer.cancel()
            lines = before["lines"] + list(data.get("lines") or [])
            rest_of_printed, opened = [], self.printed_open.pop(key, None)
            if opened is not None:  # its frames up to the exception line follow what was printed
                end = traceback_end(opened + lines)
                split = len(lines) if end is None else end + 1 - len(opened)
                rest_of_printed, lines = lines[:split], lines[split:]
                if end is None:
                    self.printed_open[key] = opened + rest_of_printed
            # at exit (Ray's shutdown drains the streams from atexit) no timer would run: judged as it stands
            cut = unfinished_traceback(lines) if threading.main_thread().is_alive() else len(lines)
            if cut < len(lines):
                waiting = {**data, "lines": lines[cut:]}
                timer = threading.Timer(self.hold_s, self._give_up, (key, waiting))  # not a daemon: printed at exit
                self.held[key] = waiting, timer
                timer.start()
            if rest_of_printed:
                self.emit({**data, "lines": rest_of_printed})
            self._print({**data, "lines": lines[:cut]})

    def _give_up(self, key: tuple, waiting: dict) -> None:
        with self.lock:
            if self.held.get(key, (None,))[0] is not waiting:
                return  # the next batch took it
            del self.held[key]
            self.printed_open[key] = waiting["lines"]
            self._print(waiting)

    def _print(self, data: dict) -> None:
        lines = keep_lines(data)
        if lines:
            self.emit({**data, "lines": lines})


def unfinished_traceback(lines: list[str]) -> int:
    """The index where `lines` end inside a traceback: its "Traceback (most recent call last):" line (or the
    HEADER line before it) when only frames follow, no exception line yet, or a HEADER line that is the last line;
    len(lines) when they do not end inside one."""
    start = len(lines)
    while start and _in_traceback(lines[start - 1]):
        start -= 1
    if start and _bare(lines[start - 1]).startswith("Traceback (most recent call last)"):
        start -= 1
    elif start < len(lines) or not lines:
        return len(lines)  # indented lines of something else, or nothing
    if start and HEADER.match(_bare(lines[start - 1])):
        start -= 1
    return start


def traceback_end(lines: list[str]) -> int | None:
    """In `lines` that begin with an unfinished traceback (see unfinished_traceback): the index of its exception
    line, None when they end before it."""
    i = 1 if lines and HEADER.match(_bare(lines[0])) else 0
    i += i < len(lines) and _bare(lines[i]).startswith("Traceback (most recent call last)")
    while i < len(lines) and _in_traceback(lines[i]):
        i += 1
    return i if i < len(lines) else None


def _in_traceback(line: str) -> bool:
    """Whether `line` can be inside a traceback, between its "Traceback" line and its exception line: a frame, its
    source, or Python 3.11's marker line under it, which is blank where the marked span is the whole source line (a
    traceback seen in a clean run's quickstart console, blank there, was taken as ended and printed)."""
    bare = _bare(line)
    return not bare or bare.startswith(" ")


def _bare(line: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip()


def install_worker_filter() -> None:
    """In quiet mode, replace Ray's printer of streamed worker output (ray.init(log_to_driver=True)) with one
    that prints only keep_lines. Ray's printer is private API (pinned Ray): when it is not where this
    expects it, everything is printed as before."""
    if not _quiet:
        return
    try:
        from ray._private import worker as ray_worker
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:
        return
    names = [name for name, _ in dispatcher.handlers]
    if "ray_print_logs" not in names:
        return
    ignore_prefix = ray_worker._should_ignore_worker_log_prefix(ray_worker.global_worker)
    streams = WorkerStreams(lambda data: ray_worker.print_to_stdstream(data, ignore_prefix=ignore_prefix))
    dispatcher.remove_handler("ray_print_logs")
    dispatcher.add_handler("ray_print_logs", streams)
    _filter_raylet_messages(ray_worker)


def _filter_raylet_messages(ray_worker) -> None:
    """The raylet's pushed messages reach the driver's printer directly (not through the dispatcher): drop
    RAYLET_BENIGN ones there, once per process."""
    printer = ray_worker.print_to_stdstream
    if getattr(printer, "bert_foundry_filter", False):
        return

    def print_to_stdstream(data: dict, ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            data = {**data, "lines": [line for line in data.get("lines") or [] if not RAYLET_BENIGN.search(line)]}
            if not data["lines"]:
                return
        printer(data, ignore_prefix=ignore_prefix)

    print_to_stdstream.bert_foundry_filter = True
    ray_worker.print_to_stdstream = print_to_stdstream


def logs_line(what: str = "workers, Ray Train, Ray Data") -> str:
    """The job summaries' line saying where quiet mode left the internals."""
    return f"Ray logs         {logs_dir() or 'on the cluster'} ({what}; --verbose prints them)"


def logs_dir() -> str:
    """This Ray session's log folder on the driver's node ("" when Ray is not running here)."""
    try:
        import ray

        node = ray._private.worker._global_node
        return node.get_logs_dir_path() if ray.is_initialized() and node is not None else ""
    except Exception:  # private API: a summary line is not worth a failed job
        return ""


@contextlib.contextmanager
def to_log_file(name: str):
    """In quiet mode, what libraries print straight to stdout and stderr while the block runs (MLflow's
    "Successfully registered model ..." lines, progress bars of a model being written) goes to
    `bert-foundry-<name>.log` in Ray's log folder (the temp folder when Ray is not running here), and so do
    the records of loggers whose handlers write to the current sys.stderr (MLflow's). MLflow's errors, and its warning
    that a model fails on its own input example (ECHOED), stay on the console too: that warning went to the file
    alone, and such a model was registered without a word. Its other warnings (the CloudPickle notice on every pyfunc
    model) stay in the file with the rest."""
    if not _quiet:
        yield
        return
    path = os.path.join(logs_dir() or tempfile.gettempdir(), f"bert-foundry-{name}.log")
    echo = logging.StreamHandler(sys.stderr)  # the console's stderr, taken before the block redirects it
    echo.setLevel(logging.WARNING)
    echo.addFilter(lambda r: r.levelno >= logging.ERROR or ECHOED.search(r.getMessage()) is not None)
    echo.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(n) for n in STDERR_AT_THE_TIME]
    for logger in loggers:
        logger.addHandler(echo)
    try:
        with open(path, "a", encoding="utf-8") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            yield
    finally:
        for logger in loggers:
            logger.removeHandler(echo)
