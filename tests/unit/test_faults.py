"""The sweep's trial kill (jobs/runtime/faults.py) kills a real process once, only where it is asked to."""

import signal
import subprocess
import sys

import pytest

CHILD = """
import sys
from pathlib import Path
from jobs.runtime.faults import FaultsConfig, maybe_kill_trial
faults = FaultsConfig(kill_trial_at_step=3)
for step in range(1, 6):
    maybe_kill_trial(faults, step, {trial!r}, {phase!r}, Path(sys.argv[1]))
print("survived")
"""


def child(marker, phase="search", trial="train_fn_ab12c_00000"):
    return subprocess.run([sys.executable, "-c", CHILD.format(phase=phase, trial=trial), str(marker)],
                          capture_output=True, text=True, timeout=60)


def test_the_first_search_trial_is_killed_once_and_its_restart_goes_on(tmp_path):
    marker = tmp_path / "sweep" / "killed-trial"
    first = child(marker)
    assert first.returncode == -signal.SIGKILL and "survived" not in first.stdout
    assert marker.read_text() == "train_fn_ab12c_00000"  # who was killed, for the test that reads it
    again = child(marker)  # the restarted attempt
    assert again.returncode == 0 and "survived" in again.stdout


@pytest.mark.parametrize("phase, trial", [("seeds", "train_fn_ab12c_00000"), ("search", "train_fn_ab12c_00001")])
def test_other_trials_and_the_seed_phase_are_never_killed(tmp_path, phase, trial):
    marker = tmp_path / "killed-trial"
    done = child(marker, phase, trial)
    assert done.returncode == 0 and "survived" in done.stdout and not marker.exists()
