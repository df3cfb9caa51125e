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


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mlflow_strays() -> set[str]:
    """./mlruns and ./mlartifacts of the repository, each experiment folder in them and each run folder in those."""
    found = set()
    for top in ("mlruns", "mlartifacts"):
        root = os.path.join(ROOT, top)
        if os.path.isdir(root):
            found.add(root)
            for name in os.listdir(root):
                found.add(path := os.path.join(root, name))
                if os.path.isdir(path):
                    found.update(os.path.join(path, run) for run in os.listdir(path))
    return found


@pytest.fixture(scope="session", autouse=True)
def _mlflow_strays_before() -> set[str]:
    """What ./mlruns and ./mlartifacts held when the session started (a developer's own), before any fixture ran."""
    return _mlflow_strays()


@pytest.fixture(autouse=True)
def _writes_no_mlruns_here(_mlflow_strays_before):
    """MLflow keeps the artifacts of an experiment created without an artifact location in ./mlruns (a file store's)
    or ./mlartifacts (a SQLite store's), here the repository: what is new there since the session began, down to a
    run's folder (a run under an experiment folder a developer already had too), fails the test at whose tear-down it
    is first seen, named (a module fixture's, its module's first test). Left on disk: a developer's own job, run
    from the repository while the tests run, writes there too, and its files are not the suite's to delete."""
    yield
    new = _mlflow_strays() - _mlflow_strays_before
    if new:
        _mlflow_strays_before.update(new)  # said once
        pytest.fail(f"this test (or a fixture of its module) wrote {min(new, key=len)}, left there (unless a job run "
                    "from the repository meanwhile wrote it): give the test's MLflow experiment an artifact location "
                    "under tmp_path (tracking.artifact_location)")


@pytest.fixture(autouse=True)
def _no_mlflow_tracking_uri():
    """Each test starts and ends without MLFLOW_TRACKING_URI, which every job takes as its default store (jobs/config/
    stores.py): mlflow.set_tracking_uri sets it in this process for good (tracking.finish_run and tests call it), so a
    test that relies on ./mlflow.db, or a job it starts, read an earlier test's store; a developer's own is not the
    suite's either. Removed after the test too (monkeypatch would put back a value it found): a module-scoped fixture
    set up before the next test would read it."""
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    yield
    os.environ.pop("MLFLOW_TRACKING_URI", None)


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
