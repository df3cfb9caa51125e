"""Test-wide environment, set before anything imports ray, deepspeed or transformers.

- Ray started by a test binds loopback only (see jobs/runtime/cluster.py) and keeps token auth on.
- DeepSpeed uses its CPU accelerator; transformers never reaches for a hub.
- Ray Train's controller polls its workers every 0.25 s, not 2 s (a short run's end is seen sooner).
- The summary ends with the seconds each test directory took (TESTING.md keeps the table).
"""

import os
import sys

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Ray Train's controller polls its workers every 2 s: a run's end (and a dead worker) is seen up to 2 s late. The
# suite runs ~150 short Train runs on the clusters it starts (they inherit this), so it polls at 0.25 s.
os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.25")
# Every cluster here is on this one machine, where nothing is preempted: Ray Train's preemption watcher (an actor
# process per worker group, for the drain notices of a cloud's spot nodes) stays off, as in a job that starts its
# own Ray (jobs/runtime/cluster.py); ~1 CPU-second per worker group, of which the suite starts ~200.
os.environ.setdefault("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")

import pytest  # noqa: E402
import torch  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _writes_no_mlruns_here():
    """MLflow keeps the artifacts of an experiment created without an artifact location in ./mlruns (a file store's)
    or ./mlartifacts (a SQLite store's), here the repository: a test that does so fails at its tear-down, named, and
    the folder is removed (one there before the test, a developer's own, is left alone)."""
    import shutil

    strays = [os.path.join(os.getcwd(), name) for name in ("mlruns", "mlartifacts")]
    before = {stray: os.path.exists(stray) and set(os.listdir(stray)) for stray in strays}
    yield
    for stray in strays:
        new = os.path.exists(stray) and set(os.listdir(stray)) - (before[stray] or set())
        if new:
            for name in new if before[stray] is not False else [""]:  # the folder itself, where it was not there
                shutil.rmtree(os.path.join(stray, name), ignore_errors=True)
            pytest.fail(f"this test wrote {stray}/{sorted(new)[0]}: give its MLflow experiment an artifact location "
                        "under tmp_path (tracking.artifact_location)")


def pytest_runtest_setup(item):
    """Outside tests/e2e no test runs with Ray up: the e2e modules' shared cluster (tests/e2e/conftest.py) goes down
    before the first unit or parity test (some assert that a refused config started no Ray)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized() and not item.nodeid.startswith("tests/e2e/"):
        ray.shutdown()


def pytest_terminal_summary(terminalreporter):
    """Seconds per test directory (unit, parity, e2e): set-up, call and tear-down of its tests."""
    import collections

    seconds, tests = collections.Counter(), collections.Counter()
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid, duration = getattr(report, "nodeid", ""), getattr(report, "duration", None)
            if duration is None or not nodeid.startswith("tests/"):
                continue
            part = nodeid.split("/")[1]
            seconds[part] += duration
            tests[part] += getattr(report, "when", "") == "call"
    if seconds:
        terminalreporter.write_sep("=", "seconds per test directory (set-up + call + tear-down)")
        for part, total in seconds.most_common():
            terminalreporter.write_line(f"{part:8s} {total:8.1f} s  {tests[part]:4d} tests")
