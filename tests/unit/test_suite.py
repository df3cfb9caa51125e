"""tests/suite.sh, `make test`'s two pytest runs: run with a stand-in for pytest that records each call and exits
with the status the test gives it, so what the script runs and what it returns are seen without running the suite."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STAND_IN = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[3:]  # after `-m pytest`
with open(os.environ["CALLS"], "a") as f:
    f.write(json.dumps({"args": args, "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                        "OMP": os.environ.get("OMP_NUM_THREADS", "")}) + "\\n")
if os.environ.get("WAIT"):  # a run long enough to be interrupted; pytest exits 2 on Ctrl-C
    import time
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        sys.exit(2)
sys.exit(int(os.environ["E2E_STATUS" if "tests/e2e" in args else "REST_STATUS"]))
"""


def environment(tmp_path, e2e=0, rest=0) -> dict:
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    env = dict(os.environ, PY=str(python), CALLS=str(tmp_path / "calls.jsonl"), E2E_STATUS=str(e2e),
               REST_STATUS=str(rest), TEST_TOOLS="/tools", TEST_WORKERS="2")
    for key in ("PYTHONPATH", "OMP_NUM_THREADS", "WAIT"):  # as make test-fast and the suite's second run set them
        env.pop(key, None)
    return env


def calls(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def suite(tmp_path, *args, e2e=0, rest=0) -> tuple[int, list[dict]]:
    env = environment(tmp_path, e2e, rest)
    status = subprocess.run([str(ROOT / "tests" / "suite.sh"), *args], env=env, timeout=60).returncode
    return status, calls(tmp_path)


def test_the_e2e_tests_run_in_one_process_then_unit_and_parity_over_workers_of_one_thread(tmp_path):
    status, (e2e, rest) = suite(tmp_path, "-k", "parity")
    assert status == 0
    assert e2e["args"] == ["tests/e2e", "-k", "parity", "-n0"] and e2e["OMP"] == ""
    assert rest["args"] == ["-n", "2", "tests/unit", "tests/parity", "-k", "parity"] and rest["OMP"] == "1"
    # xdist from the test tools in both runs: `-n0` (for --pdb under make test-fast) is an option either knows
    assert e2e["PYTHONPATH"] == rest["PYTHONPATH"] == "/tools"


@pytest.mark.parametrize("e2e, rest, expected", [(1, 0, 1), (0, 1, 1), (2, 1, 2), (5, 0, 0), (0, 5, 0), (5, 1, 1),
                                                 (5, 5, 5)])
def test_both_runs_happen_and_the_first_failure_is_the_status(tmp_path, e2e, rest, expected):
    """A failing e2e run does not hide the unit tests' results; a run the arguments select nothing of (status 5) is
    no failure while the other ran tests."""
    status, calls = suite(tmp_path, e2e=e2e, rest=rest)
    assert (status, len(calls)) == (expected, 2)


@pytest.mark.parametrize("args", [["-x", "tests/unit/test_model.py::test_x"], [str(ROOT / "tests/unit/test_model.py")],
                                  ["tests"], ["--lf"], ["--junitxml=out.xml"], ["--junitxml", "out.xml"], ["--pdb"]])
def test_arguments_naming_tests_or_meaning_one_process_run_in_one(tmp_path, args):
    """Test paths (relative, absolute, a folder) run alone; --lf reran the whole e2e directory before a failed unit
    test, the second run's --junitxml overwrote the first's, --pdb is refused by xdist."""
    status, ran = suite(tmp_path, *args, rest=1)
    assert status == 1 and [c["args"] for c in ran] == [args]


@pytest.mark.parametrize("args", [["-k", "cluster"], ["-k", "tests"], ["--basetemp", "tests"], ["-m", "not slow"],
                                  ["-n", "4"]])
def test_an_options_value_that_names_a_folder_keeps_both_runs(tmp_path, args):
    """`-k cluster` selects tests by expression; the folder cluster/ of that name made it one process; a user's -n
    is the unit run's, the e2e run stays in one process (-n0 after it: two Ray clusters on one machine fail)."""
    status, (e2e, rest) = suite(tmp_path, *args)
    assert status == 0 and e2e["args"] == ["tests/e2e", *args, "-n0"]
    assert rest["args"] == ["-n", "2", "tests/unit", "tests/parity", *args]


@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_one_ctrl_c_stops_both_runs(tmp_path, signal_name, status):
    """pytest exits 2 on Ctrl-C, not by the signal: the script went on to start the unit and parity run. A TERM
    (a CI runner's cancel) ends it with TERM's status."""
    import signal
    import time

    env = dict(environment(tmp_path), WAIT="1")
    # a terminal's shell starts make with Ctrl-C's default action; an xdist worker ignores it, and an ignored signal
    # is inherited and cannot be trapped by a shell it starts: the default given back, as at a terminal
    proc = subprocess.Popen([str(ROOT / "tests" / "suite.sh")], env=env, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 30
    while not (tmp_path / "calls.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the stand-in is in its sleep
    os.killpg(proc.pid, getattr(signal, signal_name))  # as a terminal's Ctrl-C reaches the whole foreground group
    assert proc.wait(timeout=30) == status
    assert [c["args"] for c in calls(tmp_path)] == [["tests/e2e", "-n0"]]


def test_the_two_runs_cover_every_test_directory():
    """A new tests/ directory would be left out of `make test` by suite.sh's two runs: named here first."""
    holding = {p.parent.relative_to(ROOT / "tests").parts[0] for p in (ROOT / "tests").rglob("test_*.py")}
    assert holding == {"e2e", "unit", "parity"}
    script = (ROOT / "tests" / "suite.sh").read_text()
    assert '-m pytest tests/e2e "$@"' in script and 'tests/unit tests/parity "$@"' in script
