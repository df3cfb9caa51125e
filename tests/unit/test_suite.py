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
sys.exit(int(os.environ["E2E_STATUS" if "tests/e2e" in args else "REST_STATUS"]))
"""


def suite(tmp_path, *args, e2e=0, rest=0) -> tuple[int, list[dict]]:
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    calls = tmp_path / "calls.jsonl"
    env = dict(os.environ, PY=str(python), CALLS=str(calls), E2E_STATUS=str(e2e), REST_STATUS=str(rest),
               TEST_TOOLS="/tools", TEST_WORKERS="2")
    env.pop("PYTHONPATH", None)
    status = subprocess.run([str(ROOT / "tests" / "suite.sh"), *args], env=env, timeout=60).returncode
    return status, [json.loads(line) for line in calls.read_text().splitlines()]


def test_the_e2e_tests_run_in_one_process_then_unit_and_parity_over_workers_of_one_thread(tmp_path):
    status, (e2e, rest) = suite(tmp_path, "-k", "parity")
    assert status == 0
    assert e2e["args"] == ["tests/e2e", "-k", "parity"] and "-n" not in e2e["args"] and e2e["OMP"] == ""
    assert rest["args"] == ["-n", "2", "tests/unit", "tests/parity", "-k", "parity"]
    assert rest["PYTHONPATH"] == "/tools" and rest["OMP"] == "1"  # xdist from the test tools, one torch thread


@pytest.mark.parametrize("e2e, rest, expected", [(1, 0, 1), (0, 1, 1), (2, 1, 2), (5, 0, 0), (0, 5, 0), (5, 1, 1),
                                                 (5, 5, 5)])
def test_both_runs_happen_and_the_first_failure_is_the_status(tmp_path, e2e, rest, expected):
    """A failing e2e run does not hide the unit tests' results; a run the arguments select nothing of (status 5) is
    no failure while the other ran tests."""
    status, calls = suite(tmp_path, e2e=e2e, rest=rest)
    assert (status, len(calls)) == (expected, 2)


def test_arguments_naming_tests_run_those_alone_in_one_process(tmp_path):
    status, calls = suite(tmp_path, "-x", "tests/unit/test_model.py::test_x", rest=1)
    assert status == 1 and [c["args"] for c in calls] == [["-x", "tests/unit/test_model.py::test_x"]]


def test_the_two_runs_cover_every_test_directory():
    """A new tests/ directory would be left out of `make test` by suite.sh's two runs: named here first."""
    holding = {p.parent.relative_to(ROOT / "tests").parts[0] for p in (ROOT / "tests").rglob("test_*.py")}
    assert holding == {"e2e", "unit", "parity"}
    script = (ROOT / "tests" / "suite.sh").read_text()
    assert '-m pytest tests/e2e "$@"' in script and 'tests/unit tests/parity "$@"' in script
