"""The Makefile's set-up on a machine or a .venv it cannot use as is: each is made good or refused in one line whose
advice loses nothing. Real `make` in a copy of the project's set-up files under tmp, with pip kept offline and
empty-handed, so nothing is downloaded or installed."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def project_copy(tmp_path: Path) -> Path:
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def make(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    (cwd / "no-wheels").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS", "PIP_"))}
    # no config (this machine's find-links and local indexes), no index, an empty find-links: every install fails
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(cwd / "no-wheels"))
    return subprocess.run(["make", "--no-print-directory", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow  # makes a venv with pip (~7 s)
def test_a_venv_without_pip_is_made_again(tmp_path):
    """Debian's `python3 -m venv` without python3.11-venv fails in ensurepip and leaves .venv/bin/python without pip;
    once the user installs what Debian asks for, `make` went on with that .venv: "No module named pip"."""
    pytest.importorskip("ensurepip", reason="this Python cannot make a venv with pip either")
    cwd = project_copy(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(cwd / ".venv")], check=True)
    done = make(cwd, ".venv/.installed", f"PYTHON={sys.executable}")
    assert "No module named pip" not in done.stdout + done.stderr, done.stderr[-2000:]
    assert subprocess.run([cwd / ".venv/bin/python", "-m", "pip", "--version"], capture_output=True).returncode == 0
    assert done.returncode != 0  # it went on to install pip==26.3, which this offline pip cannot find


def test_the_wrong_python_advice_keeps_the_runs(tmp_path):
    """A .venv of Python 3.12 beside the user's runs and SQLite registry: the advice was `make clean`, which deletes
    runs/, mlflow.db and mlartifacts/ too. The command it names is run here as the user would."""
    cwd = project_copy(tmp_path)
    python = cwd / ".venv/bin/python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\ncase "$1" in -V) echo "Python 3.12.1";; -m) exit 0;; *) exit 1;; esac\n')
    python.chmod(0o755)
    (cwd / "runs/pretrain-1").mkdir(parents=True)
    (cwd / "mlflow.db").write_text("registry")
    done = make(cwd, ".venv/.installed", "PYTHON=python3.12")
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-2]  # make's own "*** Error 1" line comes last
    prefix = ".venv is Python 3.12.1, the project needs Python 3.11: "
    assert line.startswith(prefix) and line.endswith(", then pass PYTHON=python3.11"), done.stderr
    advice = line.removeprefix(prefix).removesuffix(", then pass PYTHON=python3.11")
    subprocess.run(shlex.split(advice), cwd=cwd, env={**os.environ, "MAKEFLAGS": ""}, check=True, timeout=60)
    assert not (cwd / ".venv").exists()
    assert (cwd / "mlflow.db").is_file() and (cwd / "runs/pretrain-1").is_dir()
