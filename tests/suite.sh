#!/usr/bin/env bash
# `make test`: the whole suite as two pytest runs (TESTING.md, forty-third session, has the measurements):
# - tests/e2e in one process: its modules share one local Ray cluster (tests/e2e/conftest.py), and a second process's
#   jobs would only queue on the same cores (two xdist workers over the e2e tests were measured and dropped twice);
# - then tests/unit and tests/parity over $TEST_WORKERS processes (pytest-xdist, from the Makefile's test tools) of one
#   torch thread each: one process alone keeps under one of the 2 cores busy (Python between small tensors).
# Both runs happen even when the first fails, and the status is the first failure's; Ctrl-C stops both. Pytest
# arguments go to both; a run they select no test of (pytest's status 5: `-k parity` in tests/e2e) is not a failure
# while the other ran tests. Arguments naming test paths (`make test ARGS=tests/unit/test_model.py`), and options that
# mean one process (--lf, --pdb, --junitxml: the second run would overwrite the first's file), run in one process.
set -uo pipefail
# pytest exits 2 on Ctrl-C: without these the second run would start
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
# xdist loaded in both runs (it does nothing without -n), so `-n0` is accepted by either
export PYTHONPATH="${TEST_TOOLS:-.venv/test-tools}${PYTHONPATH:+:$PYTHONPATH}"

value=0  # the word after an option that takes one (`-k cluster`: an expression, not the folder cluster/)
for arg in "$@"; do
    if (( value )); then
        value=0
        continue
    fi
    case $arg in
        --lf | --last-failed | --ff | --failed-first | --pdb | --trace | --junitxml* | --junit-xml*)
            exec "$PY" -m pytest "$@" ;;
        -k | -m | -p | -n | -o | -c | -r | -W | --rootdir | --basetemp | --durations | --durations-min | --timeout | \
            --maxfail | --deselect | --ignore | --ignore-glob | --confcutdir | --tb | --dist | --log-level | \
            --log-cli-level | --import-mode | --capture | --override-ini | --numprocesses | --maxprocesses)
            value=1 ;;
        -*) ;;
        *) if [[ -e ${arg%%::*} ]]; then exec "$PY" -m pytest "$@"; fi ;;
    esac
done

# -n0 last: a -n in the arguments is the unit run's (each e2e worker would start a Ray of its own)
"$PY" -m pytest tests/e2e "$@" -n0
e2e=$?
OMP_NUM_THREADS=1 "$PY" -m pytest -n "${TEST_WORKERS:-2}" tests/unit tests/parity "$@"
rest=$?

if (( e2e == 5 && rest == 5 )); then
    exit 5
fi
(( e2e == 5 )) && e2e=0
(( rest == 5 )) && rest=0
exit $(( e2e != 0 ? e2e : rest ))
