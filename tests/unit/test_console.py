"""Quiet console (jobs/runtime/console.py): worker output that reaches the driver keeps our progress and every error,
and drops Ray, DeepSpeed and library chatter. The lines are real ones, from a quickstart pretraining run."""

import logging
import os
import subprocess
import sys

import pytest

from jobs.runtime import console

NOISE = [
    ("RayTrainWorker", "DeepSpeed deepspeed.ops.comm.deepspeed_shm_comm_op built successfully"),
    ("RayTrainWorker", "Setting up process group for: env:// [rank=0, world_size=2]"),
    ("RayTrainWorker", "Checkpoint successfully created at: Checkpoint(filesystem=local, path=/tmp/l1/checkpoint_1)"),
    ("SplitCoordinator", "Starting execution of Dataset train_0352wCfp04awVGOqisiCRh_0. Full logs are in /tmp/ray/s"),
    ("SplitCoordinator", "Progress bars disabled. To enable, set `ray.data.DataContext.get_current()."
                         "enable_progress_bars = True`."),
    ("DatasetManager", "  self.exclude_resources = exclude_resources"),
    ("RayTrainWorker", "/x/torch/distributed/c10d_logger.py:83: FutureWarning: `torch.distributed.reduce_op` is "
                       "deprecated"),
    ("", "WARNING: 8 PYTHON worker processes have been started on node: 66573b2a with address: 127.0.0.1"),
]
OURS = [
    "[eval] before training: mlm_acc 0.0008 nsp_acc 0.4722 mlm_loss 6.9278",
    "step     10/20 | loss 7.4082 | mlm_acc 0.018 | nsp_acc 0.547 | lr 1.33e-03 | 5,122 tok/s",
    "[init] 101 tensors from /models/minilm; fresh: ['classifier.weight']; unused: []",
    "[resume] step 40, epoch 1, 1,280 examples of the epoch already consumed",
    "step 7: non-finite loss nan, batch skipped (2 so far)",
]


def batch(actor, *lines, is_err=False):
    return {"lines": list(lines), "pid": 4242, "actor_name": actor, "is_err": is_err}


@pytest.mark.parametrize("actor, line", NOISE)
def test_library_chatter_is_dropped(actor, line):
    assert console.keep_lines(batch(actor, line)) == []


def test_our_progress_lines_are_kept_and_chatter_between_them_dropped():
    lines = [OURS[0], NOISE[0][1], OURS[1], NOISE[2][1], *OURS[2:]]
    assert console.keep_lines(batch("RayTrainWorker", *lines)) == OURS


def test_an_error_keeps_its_whole_batch():
    trace = ["Error in training function:", "Traceback (most recent call last):",
             '  File "/repo/jobs/workers/pretrain_worker.py", line 300, in train_loop_per_worker', "    Worker(config).run()",
             "jobs.loops.loss_guard.NonFiniteLossError: 3 non-finite steps in a row"]
    assert console.keep_lines(batch("RayTrainWorker", *trace, is_err=True)) == trace
    for news in ("A worker died or was killed while executing a task by an unexpected system error.",
                 "ray.exceptions.RayTaskError(OutOfMemoryError): Task was killed due to the node running low on "
                 "memory."):
        assert console.keep_lines(batch("", news)) == [news]  # the raylet's word on a dead worker
    # a JIT build's cause (only "RuntimeError: Error building extension" reached the console), a collective's timeout
    build = ["[1/3] c++ -MMD -MF cpu_adam.o.d -c cpu_adam.cpp", "cpu_adam.cpp:2:10: fatal error: x.h: No such file",
             "ninja: build stopped: subcommand failed."]
    watchdog = ["[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7) ran "
                "for 600000 milliseconds before timing out."]
    for lines in (build, watchdog, ["ld: error: undefined symbol: cpu_adam_step"]):
        assert console.keep_lines(batch("RayTrainWorker", *lines, is_err=True)) == lines


def test_our_warnings_are_kept_and_other_warnings_dropped():
    """A worker's warnings.warn of ours names its tag (an expired token's 403 says no Error; the refused points'
    warning said nothing else), so quiet mode keeps it as it keeps our progress lines; a library's warning it drops,
    and the source line Python prints under each warning with it."""
    from jobs.registry import metric_logger

    ours = ("/repo/jobs/registry/metric_logger.py:155: UserWarning: [tracking] MLflow logging failed, training "
            "continues; metrics are buffered and retried (tracking_failures counts failed writes): PERMISSION_DENIED")
    theirs = "/venv/lib/python3.11/site-packages/torch/utils/data.py:80: UserWarning: a library's [note] of no news"
    source = '  warnings.warn(redact(f"[tracking] MLflow logging failed, training continues; metrics are buffered "'
    assert console.keep_lines(batch("RayTrainWorker", ours, source, theirs, is_err=True)) == [ours]
    assert "[tracking] MLflow refused" in open(metric_logger.__file__).read()  # the refused points' warning too


def test_ray_trains_controller_is_kept_whole():
    """Quiet mode sets Ray Train's console to warnings (console.train_logging): what still comes, matters."""
    line = "Worker group failed: restarting (1/3) from the latest checkpoint"
    assert console.keep_lines(batch("TrainController", line)) == [line]


def test_rays_advice_on_actor_arguments_is_dropped_even_from_the_controller():
    line = ("[2026-11-24 04:01:10,075 E 18622 18736] core_worker.cc:2465: Actor with class name: 'PreemptionWatcher' "
            "and ID: '869f' has constructor arguments in the object store and max_restarts > 0. If the arguments")
    assert console.keep_lines(batch("TrainController", line)) == []


def test_the_gcs_log_of_a_kill_whose_actor_already_exited_is_dropped_and_its_other_errors_kept():
    """Seen in a submitted pretraining job's console (CI, 2026-11-25): the GCS logs a KillActor RPC that failed
    because the actor exited before replying, which is how a kill succeeds."""
    kill = ("[2026-11-25 22:21:08,175 E 4458 4458] (gcs_server) gcs_actor_scheduler.cc:538: Failed to kill actor "
            "d2567755f3d6b0786aafa7f702000000, return status: Invalid: KillActor RPC failed for actor "
            "d2567755f3d6b0786aafa7f702000000: RpcError: RPC error: Socket closed rpc_code: 14")
    other = ("[2026-11-25 22:21:09,001 E 4458 4458] (gcs_server) gcs_actor_manager.cc:1120: Actor 94ae died: its "
             "worker process exited unexpectedly (RpcError: RPC error: Socket closed)")
    assert console.keep_lines({"lines": [kill], "pid": "gcs_server"}) == []
    assert console.keep_lines({"lines": [kill, other], "pid": "gcs_server"}) == [other]


def test_the_raylets_worker_count_warning_is_dropped_and_its_other_messages_kept():
    """The raylet's pushed messages go straight to Ray's printer (ray._private.worker.print_to_stdstream)."""
    import types

    printed = []
    fake = types.SimpleNamespace(print_to_stdstream=lambda data, ignore_prefix: printed.append(data["lines"]))
    console._filter_raylet_messages(fake)
    console._filter_raylet_messages(fake)  # a second init_ray in the process: wrapped once
    count = ("WARNING: 10 PYTHON worker processes have been started on node: ba19 with address: 127.0.0.1, which "
             "is 5x the maximum expected startup concurrency (2).")
    oom = "Task was killed due to the node running low on memory."
    fake.print_to_stdstream({"lines": [count], "pid": "raylet"}, ignore_prefix=False)
    fake.print_to_stdstream({"lines": [count, oom], "pid": "raylet"}, ignore_prefix=False)
    fake.print_to_stdstream({"lines": [count], "pid": 4242}, ignore_prefix=False)  # not the raylet's: as is
    assert printed == [[oom], [count]]


def test_an_actor_ray_ended_with_sigterm_is_not_an_error():
    """A trial Tune stopped gets SIGTERM; caught inside a weakref callback, Python prints the SystemExit of
    Ray's handler as an ignored exception (seen in test_quickstart's console). An error is still kept."""
    ended = ["Exception ignored in: <function WeakSet.__init__.<locals>._remove at 0x7fa7c6bba3e0>",
             "Traceback (most recent call last):",
             '  File "/usr/lib/python3.11/_weakrefset.py", line 39, in _remove',
             '  File "/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 1063, in sigterm_handler',
             "    raise_sys_exit_with_custom_error_message(",
             "SystemExit: 1"]
    assert console.keep_lines(batch("", *ended, is_err=True)) == []
    assert console.keep_lines(batch("", *ended[:3], "ValueError: bad", is_err=True)) == [*ended[:3], "ValueError: bad"]
    # in one batch with another error: that error is kept (the sigterm line made the whole batch quiet)
    error = ["Traceback (most recent call last):", '  File "/app/jobs/x.py", line 3, in f', "RuntimeError: lost"]
    assert console.keep_lines(batch("", *ended, *error, is_err=True)) == error


ENDED = ["Exception ignored in: <function WeakSet.__init__.<locals>._remove at 0x7f5482dfe5c0>",
         "Traceback (most recent call last):",
         '  File "/usr/lib/python3.11/_weakrefset.py", line 39, in _remove',
         "    def _remove(item, selfref=ref(self)):",
         '  File "/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 1063, in sigterm_handler',
         "    raise_sys_exit_with_custom_error_message(",
         '  File "python/ray/_raylet.pyx", line 712, in ray._raylet.raise_sys_exit_with_custom_error_message',
         "SystemExit: 1"]


@pytest.mark.parametrize("blank", ["    ", ""])
def test_a_sigterm_traceback_with_a_blank_marker_line_is_dropped_whole(blank):
    """The lines of the quickstart console the thirty-fourth stop's CI and this session's clean run failed on: Python
    3.11 put a blank marker line under a frame's source, the traceback was taken as ended there, and all of it was
    printed. Whole or in two batches, it is dropped now."""
    lines = [*ENDED[:4], blank, *ENDED[4:]]
    assert console.keep_lines(batch("trial", *lines, is_err=True)) == []
    for cut in range(1, len(lines)):
        printed = []
        streams = console.WorkerStreams(lambda data: printed.append(data["lines"]), hold_s=30)
        streams(batch("trial", *lines[:cut], is_err=True))
        streams(batch("trial", *lines[cut:], OURS[0], is_err=True))
        assert printed == [[OURS[0]]], cut


@pytest.mark.parametrize("cut", range(1, len(ENDED)))
def test_a_traceback_that_reaches_the_driver_in_two_batches_is_judged_whole(cut):
    """Ray's log monitor publishes what a worker wrote so far: a trial's sigterm traceback came in pieces, and its
    first piece, judged alone, was printed (a clean run's quickstart console, and a real local Ray with a pause
    between the lines). Held for the next batch of its stream, it is dropped whole; another stream's batch between
    the pieces is printed as it comes, and a real error split the same way is printed whole, once."""
    printed = []
    streams = console.WorkerStreams(lambda data: printed.append((data["pid"], data["lines"])), hold_s=30)
    streams({**batch("trial", OURS[0], *ENDED[:cut], is_err=True), "pid": 1})
    streams({**batch("RayTrainWorker", OURS[1], is_err=True), "pid": 2})
    streams({**batch("trial", *ENDED[cut:], OURS[2], is_err=True), "pid": 1})
    assert printed == [(1, [OURS[0]]), (2, [OURS[1]]), (1, [OURS[2]])]
    printed.clear()
    error = [*ENDED[1:4], "ValueError: bad"]
    streams({**batch("trial", *error[:min(cut, 3)]), "pid": 1})
    streams({**batch("trial", *error[min(cut, 3):]), "pid": 1})
    assert printed == [(1, error)] and not streams.held


def test_an_unfinished_traceback_that_nothing_finishes_is_printed_and_its_late_end_after_it():
    """Nothing is lost: a held traceback whose end does not come within hold_s is printed as it stands, and the
    frames and exception line that arrive later are printed after it, however they are cut."""
    import time

    printed = []
    streams = console.WorkerStreams(lambda data: printed.append(data["lines"]), hold_s=0.05)
    streams(batch("trial", OURS[0], *ENDED[:2]))
    assert printed == [[OURS[0]]]
    time.sleep(0.5)
    assert printed == [[OURS[0]], ENDED[:2]]
    streams(batch("trial", *ENDED[2:4]))
    streams(batch("trial", *ENDED[4:], NOISE[0][1], OURS[1]))
    assert printed == [[OURS[0]], ENDED[:2], ENDED[2:4], ENDED[4:], [OURS[1]]]
    assert console.unfinished_traceback([OURS[0], "  indented, no traceback"]) == 2  # nothing to wait for


def test_held_tracebacks_are_per_node_and_every_print_holds_the_lock():
    """Two nodes' workers may share a pid (each pod numbers its processes alike): one node's held traceback joined the
    other's next batch and printed under its prefix. And Ray's printer (its deduplicator) is not thread-safe: the
    give-up timer printed beside the dispatcher's thread; every print now holds the streams' lock."""
    import time

    printed = []
    streams = console.WorkerStreams(lambda data: printed.append((data["ip"], data["lines"], streams.lock.locked())),
                                    hold_s=0.05)
    error = [*ENDED[1:4], "RuntimeError: NCCL timeout"]
    streams({**batch("RayTrainWorker", *error[:2]), "ip": "10.0.0.1"})
    streams({**batch("RayTrainWorker", OURS[1]), "ip": "10.0.0.2"})
    streams({**batch("RayTrainWorker", *error[2:]), "ip": "10.0.0.1"})
    assert printed == [("10.0.0.2", [OURS[1]], True), ("10.0.0.1", error, True)]
    printed.clear()
    streams({**batch("RayTrainWorker", *error[:2]), "ip": "10.0.0.1"})
    time.sleep(0.5)  # given up: printed by the timer's thread, under the lock too
    assert printed == [("10.0.0.1", error[:2], True)]


def test_an_unfinished_traceback_that_arrives_at_exit_is_printed_not_held():
    """Ray's shutdown drains the workers' streams from atexit, after Python stopped waiting for threads: a traceback
    held there for a timer was never printed."""
    code = ("import atexit\nfrom jobs.runtime import console\n"
            "streams = console.WorkerStreams(lambda data: print('EMIT', data['lines'], flush=True), hold_s=5)\n"
            "atexit.register(lambda: streams({'lines': ['Traceback (most recent call last):', '  File \"x.py\"'], "
            "'pid': 1, 'actor_name': 'trial', 'is_err': True}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0 and "EMIT ['Traceback (most recent call last):'" in out.stdout, out.stderr[-2000:]


@pytest.mark.parametrize("crash", [
    ["Fatal Python error: Segmentation fault", "", "Current thread 0x00007f (most recent call first):"],
    ["*** SIGSEGV received at time=1764400000 on cpu 1 ***", "PC: @ 0x7f12 (unknown) at::native::foo()"],
    ["terminate called after throwing an instance of 'c10::Error'", "  what():  CUDA error: an illegal memory access"],
])
def test_a_native_crash_in_an_actor_reaches_the_quiet_console_a_pooled_tasks_does_not(crash):
    """A segfault, abseil's signal report or a C++ abort of a training worker were dropped whole in quiet mode: no
    line said why it died. Ray's pooled task processes abort at exit now and then in jobs that succeed (Ray Data's
    footer reader, seen in a submitted job's log): their reports stay in the log files."""
    assert console.keep_lines(batch("RayTrainWorker", *crash, is_err=True)) == crash
    at_exit = ["[mutex.cc : 1954] RAW: Check (v & (kMuWriter | kMuReader)) != (kMuWriter | kMuReader) failed: Lock: "
               "Mutex corrupt: both reader and writer lock held: 0x736e656b",
               "*** SIGABRT received at time=1764446301 on cpu 0 ***",
               "[2026-11-29 19:58:21,548 E 10541 11023] logging.cc:474:     @     0x5602e1663110  (unknown)  (unknown)"]
    assert console.keep_lines({**batch("", *at_exit, is_err=True), "task_name": "_fetch_parquet_file_info"}) == []


def test_configure_quiet_then_verbose():
    mlflow_level = os.environ.get("MLFLOW_LOGGING_LEVEL")
    saved = {k: os.environ.get(k) for k in ("RAY_AIR_NEW_OUTPUT", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR",
                                            "HF_HUB_DISABLE_PROGRESS_BARS")}
    try:
        console.configure(verbose=False)
        assert console.quiet() and console.ray_logging_level() == logging.WARNING
        assert console.train_logging().log_level == "WARNING"
        assert logging.getLogger("mlflow").level == logging.WARNING
        # Tune's legacy output (silent at verbose=0), no MLflow download bars
        assert (os.environ["RAY_AIR_NEW_OUTPUT"], os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"]) == ("0", "false")
        import ray.data  # noqa: F401

        console.quiet_ray_data()
        consoles = [h for h in logging.getLogger("ray.data").handlers if type(h).__name__ == "PlainRayHandler"]
        assert consoles and all(h.level == logging.ERROR for h in consoles)
        assert logging.getLogger("ray.data").level == logging.DEBUG  # its log file still gets everything
        console.configure(verbose=True)
        assert not console.quiet() and console.train_logging().log_level == "INFO"
    finally:
        console._quiet = False
        if mlflow_level is None:
            os.environ.pop("MLFLOW_LOGGING_LEVEL", None)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
        for name in console.LIBRARIES:
            logging.getLogger(name).setLevel(logging.NOTSET)
        for h in logging.getLogger("ray.data").handlers:
            if type(h).__name__ == "PlainRayHandler":
                h.setLevel(logging.INFO)


@pytest.mark.parametrize("before", ["", "import huggingface_hub.utils.tqdm", "import transformers"],
                         ids=["nothing", "huggingface_hub", "transformers"])
def test_quiet_mode_turns_transformers_progress_bars_off_whatever_was_imported_first(before):
    """configure() imports no transformers (a job's config check imports no framework), yet its "Loading weights"
    bars stay off when transformers comes later, also after huggingface_hub read its environment first, and when
    transformers was imported before."""
    code = (f"{before}\nfrom jobs.runtime import console\nconsole.configure(verbose=False)\n"
            f"import sys\nassert ('transformers' in sys.modules) == {'transformers' in before}\n"
            "from transformers.utils import logging\nprint(logging.is_progress_bar_enabled())")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr[-2000:]


def test_what_libraries_print_goes_to_a_log_file_in_quiet_mode_only(tmp_path, monkeypatch, capsys):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # Ray is not running here: the temp folder
    monkeypatch.setattr(console, "_quiet", True)
    with console.to_log_file("mlflow"):
        print("Successfully registered model 'm'.", file=sys.stderr)
        print("Writing model shards: 100%")
    assert capsys.readouterr() == ("", "")
    assert (tmp_path / "bert-foundry-mlflow.log").read_text().splitlines() == [
        "Successfully registered model 'm'.", "Writing model shards: 100%"]
    monkeypatch.setattr(console, "_quiet", False)
    with console.to_log_file("mlflow"):
        print("Created version '1' of model 'm'.", file=sys.stderr)
    assert capsys.readouterr().err == "Created version '1' of model 'm'.\n"


def test_a_loggers_warning_inside_to_log_file_stays_on_the_console(tmp_path, monkeypatch, capsys):
    """MLflow's "Failed to validate serving input example" warning went to bert-foundry-mlflow.log alone in quiet mode:
    a model that fails on its own input example was registered and aliased without a word on the console. That
    warning and MLflow's errors stay on the console; its INFO lines and other warnings (the CloudPickle notice on
    every pyfunc model, which made the quiet console of every fine-tune say more) do not; the log file keeps all."""
    import tempfile

    import mlflow  # noqa: F401  (its logger's handler writes to sys.stderr as it is at the time)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(console, "_quiet", True)
    logger = logging.getLogger("mlflow.models.utils")
    monkeypatch.setattr(logging.getLogger("mlflow"), "level", logging.INFO)
    handlers = list(logging.getLogger("mlflow").handlers)
    with console.to_log_file("mlflow"):
        logger.warning("Failed to validate serving input example {'text': 'a'}. Got error: cannot read it")
        logger.info("Successfully registered model 'm'.")
        logging.getLogger("mlflow.pyfunc").warning("Passing a Python object as `python_model` causes it to be "
                                                   "serialized using CloudPickle")
        logging.getLogger("mlflow.store").error("the store refused the write")
    err = capsys.readouterr().err
    assert "Failed to validate serving input example" in err and "the store refused the write" in err
    assert "Successfully registered" not in err and "CloudPickle" not in err
    logged = (tmp_path / "bert-foundry-mlflow.log").read_text()
    assert "Failed to validate serving input example" in logged and "Successfully registered model 'm'." in logged
    assert "CloudPickle" in logged
    assert logging.getLogger("mlflow").handlers == handlers


def test_a_systemexit_traceback_ray_did_not_cause_is_kept():
    """Only a SystemExit raised by Ray's sigterm_handler is dropped: a worker's own sys.exit traceback (a trial that
    ended itself, a library calling exit) is news."""
    own = ["Traceback (most recent call last):", '  File "/app/jobs/workers/sweep_trial.py", line 90, in trial',
           "    sys.exit(3)", "SystemExit: 3"]
    assert console.keep_lines(batch("trial", *own, is_err=True)) == own
    ignored = ["Exception ignored in: <function WeakSet.__init__.<locals>._remove at 0x7f5482dfe5c0>", *own]
    assert console.keep_lines(batch("trial", *ignored, is_err=True)) == ignored


SIGNALER_RACE = [
    "Exception in thread pool-3/completion-signaler:",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner',
    "    self.run()",
    '  File "/venv/lib/python3.11/site-packages/ray/data/_internal/dynamic_work_queue.py", line 180, in '
    "_signal_completion",
    "    pool.work_queue.put(SENTINEL)",
    '  File "/venv/lib/python3.11/site-packages/ray/data/_internal/util.py", line 1082, in put',
    "    raise InterruptedError()",
    "InterruptedError",
]


def test_ray_datas_listing_race_is_dropped_and_nothing_else():
    """Ray Data's file listing shuts its thread pool while its completion signaler still posts stop markers
    (seen in a CI run's pretraining job log, from a ListFiles actor): that traceback alone is dropped."""
    assert console.keep_lines(batch("ListFiles", *SIGNALER_RACE, is_err=True)) == []
    other = ["ValueError: bad"]
    assert console.keep_lines(batch("ListFiles", *SIGNALER_RACE, *other, is_err=True)) == other
    # the same thread failing some other way is an error, printed whole
    failed = [*SIGNALER_RACE[:-1], "OSError: disk full"]
    assert console.keep_lines(batch("ListFiles", *failed, is_err=True)) == failed
    # an InterruptedError from elsewhere in another thread is kept
    elsewhere = [SIGNALER_RACE[0], SIGNALER_RACE[1], '  File "x.py", line 1, in f', "InterruptedError"]
    assert console.keep_lines(batch("ListFiles", *elsewhere, is_err=True)) == elsewhere


def test_tunes_snapshot_race_is_dropped_and_its_other_failures_kept(capsys):
    """Tune copies its experiment state to storage while its searcher rewrites a state file through a temporary
    one: the copy's FileNotFoundError on the "-tmp-" file was printed as an ERROR with its traceback in a clean run
    of the quickstart (the next snapshot copies the renamed file). That exact shape is dropped, nothing else."""
    logger = logging.getLogger("ray.tune.execution.experiment_state")
    before = list(logger.filters)
    console.configure(verbose=False)
    stream = logging.StreamHandler(sys.stderr)
    logger.addHandler(stream)
    try:
        for exc in (FileNotFoundError("[Errno 2] Failed to open local file '/tmp/ray/x/driver_artifacts/"
                                      ".0057-tmp-basic-variant-state-2026.json'"), OSError("disk full")):
            try:
                raise exc
            except OSError:
                logger.error("Saving experiment state to storage at '/runs/sw' failed with exception: ",
                             exc_info=True)
    finally:
        logger.removeHandler(stream)
        logger.filters[:] = before
    err = capsys.readouterr().err
    assert "disk full" in err and "-tmp-basic-variant-state" not in err and err.count("Saving experiment state") == 1
