"""Set-up's DeepSpeed op build (jobs/warm_deepspeed.py, `make setup`) on a machine without the C++ compiler or the
Python headers it compiles with: one `error:` line naming what to install, not a 40-line traceback whose one
useful line sat inside ninja's log."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a process that imports DeepSpeed (~5 s)
def test_a_missing_compiler_is_one_line(tmp_path):
    """CXX names a compiler that is not there; the extension cache is empty, so the build starts and fails."""
    missing = tmp_path / "no-c++"
    env = {**os.environ, "CXX": str(missing), "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "DS_ACCELERATOR": "cpu"}
    done = subprocess.run([sys.executable, "-m", "jobs.warm_deepspeed"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert str(missing) in lines[0] and "g++" in lines[0], lines[0]


def test_missing_python_headers_are_one_line(tmp_path, monkeypatch):
    from jobs import warm_deepspeed

    monkeypatch.setattr(warm_deepspeed.sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    line = warm_deepspeed.missing_build_tools()
    assert line.startswith("error: ") and "\n" not in line, line
    assert str(tmp_path / "Python.h") in line
    assert f"python{sys.version_info.major}.{sys.version_info.minor}-dev" in line


def test_a_machine_with_both_passes(tmp_path, monkeypatch):
    from jobs import warm_deepspeed

    (tmp_path / "Python.h").write_text("")
    compiler = tmp_path / "g++"
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    monkeypatch.setattr(warm_deepspeed.sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    assert warm_deepspeed.missing_build_tools() == ""
    monkeypatch.delenv("CXX")
    monkeypatch.setenv("PATH", str(tmp_path))  # no CXX: torch's default, `c++`, looked up on PATH
    assert "'c++'" in warm_deepspeed.missing_build_tools()


class _Builder:
    """Stands in for a DeepSpeed op builder: its op loads from the cache, or its build fails."""
    NAME = "fake_op"

    def __init__(self, error=None):
        self.error = error

    def load(self, verbose=True):
        if self.error:
            raise self.error


def _without_compiler(monkeypatch, tmp_path, builder):
    from jobs import warm_deepspeed

    monkeypatch.setenv("CXX", str(tmp_path / "no-c++"))
    monkeypatch.setattr(warm_deepspeed, "before_op_loads", lambda: None)
    for name in ("ShareMemCommBuilder", "FusedAdamBuilder", "CPUAdamBuilder"):
        monkeypatch.setattr(warm_deepspeed, name, lambda: builder)
    return warm_deepspeed


def test_ops_already_built_need_no_compiler(tmp_path, monkeypatch, capsys):
    """An image whose .venv (with its built op cache) was copied to a stage without g++, or a machine where the
    compiler was removed after set-up: the cached ops load without compiling, so set-up passes."""
    warm_deepspeed = _without_compiler(monkeypatch, tmp_path, _Builder())
    warm_deepspeed.main(["--offload"])
    assert capsys.readouterr().out.count("deepspeed op fake_op: ready") == 3


def test_a_failed_build_without_compiler_is_one_line(tmp_path, monkeypatch):
    warm_deepspeed = _without_compiler(monkeypatch, tmp_path, _Builder(RuntimeError("Error building extension")))
    with pytest.raises(SystemExit) as e:
        warm_deepspeed.main([])
    assert str(e.value).startswith("error: ") and str(tmp_path / "no-c++") in str(e.value)
    assert str(e.value).endswith("failed: Error building extension)")  # the build's own line, if another cause
    assert "\n" not in str(e.value)


def test_a_failed_build_with_the_tools_keeps_its_traceback(tmp_path, monkeypatch):
    from jobs import warm_deepspeed

    monkeypatch.setattr(warm_deepspeed, "missing_build_tools", lambda: "")
    monkeypatch.setattr(warm_deepspeed, "before_op_loads", lambda: None)
    monkeypatch.setattr(warm_deepspeed, "ShareMemCommBuilder", lambda: _Builder(RuntimeError("a compile error")))
    with pytest.raises(RuntimeError, match="a compile error"):
        warm_deepspeed.main([])
