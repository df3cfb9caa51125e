"""A real `mlflow server` process for tests: SQLite backend, artifacts served through it (a client sends them over
HTTP to its `--artifacts-destination`, as to a team server), bound to 127.0.0.1."""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.ports import free_server_port


class ServerExited(RuntimeError):
    pass


class MlflowServer:
    """A real `mlflow server` subprocess on 127.0.0.1 with a SQLite backend; `stop()` kills it (SIGKILL, its
    whole process group: a crash, not a shutdown) and `start()` brings it back on the same port and store."""

    def __init__(self, root: Path, port: int):
        self.root, self.port = root, port
        self.uri = f"http://127.0.0.1:{port}"
        self.proc = None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port),
                "--workers", "1", "--backend-store-uri", f"sqlite:///{self.root}/server.db",
                "--artifacts-destination", (self.root / "art").as_uri()]  # served: uploads go through it

    def environment(self) -> dict:
        return {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # no job-runner processes

    def start(self, timeout_s: float = 300.0) -> None:
        """Started, and answering GET /health (the model server, tests/e2e/test_serve.py, answers it too)."""
        log = open(self.root / "server.log", "a")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.environment(),
                                     start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerExited(f"mlflow server exited with {self.proc.returncode}: "
                                   + (self.root / "server.log").read_text()[-2000:])
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()  # not left running behind the test
        raise TimeoutError(f"mlflow server not up after {timeout_s:g}s: {(self.root / 'server.log').read_text()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def server(tmp_path, monkeypatch):
    for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):  # the logger sets these
        monkeypatch.delenv(name, raising=False)
    s = start_server(tmp_path)
    try:
        yield s
    finally:
        s.stop()


def start_server(root: Path, kind=None, **kwargs) -> MlflowServer:
    """A started server under `root` (an MlflowServer, or `kind(root, port, **kwargs)`, a subclass); a first start
    that dies (its port taken meanwhile) is retried on another port."""
    for attempt in range(3):
        s = (kind or MlflowServer)(root, free_server_port(), **kwargs)
        try:
            s.start()
            return s
        except ServerExited:
            if attempt == 2:
                raise
