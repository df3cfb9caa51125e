"""A tracking server that answers /health and refuses the job's API calls is refused by the job's check.

MLflow >= 3.5 answers 403 "Invalid Host header" to a host name not in its --allowed-hosts (a head node's DNS name,
a team server started without the flag), and a server with auth answers 401 to a client without credentials; both
exempt /health, so the reachability check passed, the experiment lookup took the refusal for "no experiment yet",
`--check` said valid, and the job failed at its first MLflow call after the cluster and the corpus. A stub server
stands in for MLflow's here: what is tested is how the check reads each HTTP answer."""

import contextlib
import http.server
import threading
from pathlib import Path

import pytest

from bert_core.config import ConfigError
from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig
from jobs.config.sections import TrackingConfig

QUICKSTART = str(Path(__file__).resolve().parents[2] / "configs/pretrain/quickstart.yaml")
INVALID_HOST = b"Invalid Host header - possible DNS rebinding attack detected"  # MLflow's security_utils


@contextlib.contextmanager
def tracking_stub(status: int, body: bytes = b"", let_in: tuple[str, bytes] | None = None):
    """An HTTP server on a free loopback port answering /health 200 and everything else `status` with `body`, as
    MLflow's host check and its auth app do (`let_in`: an Authorization header it answers 200 with the bytes given);
    yields its URL and the Authorization headers it was sent."""
    seen = []

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            code, text = (200, b"OK") if self.path == "/health" else (status, body)
            if let_in and self.path != "/health" and self.headers.get("Authorization") == let_in[0]:
                code, text = 200, let_in[1]
            self.send_response(code)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch):
    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
                 "MLFLOW_TRACKING_AUTH"):
        monkeypatch.delenv(name, raising=False)


def test_a_host_the_server_does_not_allow_fails_the_jobs_check_naming_allowed_hosts(tmp_path):
    with tracking_stub(403, INVALID_HOST) as (url, _):
        cfg = load_config(PretrainConfig, QUICKSTART, [f"output_dir={tmp_path}/runs", f"tracking.tracking_uri={url}"])
        cfg.tracking.check_reachable()  # /health is exempt: the server answers
        with pytest.raises(ConfigError, match=rf"^tracking\.tracking_uri='{url}': the server refuses this host name "
                                              r"\(403: Invalid Host header.*\); start it with --allowed-hosts \(or "
                                              rf"MLFLOW_SERVER_ALLOWED_HOSTS\) naming '{url[7:]}'"):
            cfg.check_environment()


def test_a_server_with_auth_and_no_credentials_fails_the_check_naming_them(monkeypatch):
    with tracking_stub(401, b"You are not authenticated.") as (url, _):
        with pytest.raises(ConfigError, match=rf"^tracking\.tracking_uri='{url}' refuses this job's requests \(401: "
                                              r"You are not authenticated\.\); give it credentials the server takes: "
                                              r"MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and "
                                              r"MLFLOW_TRACKING_PASSWORD"):
            TrackingConfig(tracking_uri=url).check_experiment()
    with tracking_stub(403, b"Permission denied") as (url, seen):  # credentials it does not take
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "t0ken")
        with pytest.raises(ConfigError, match=r"refuses this job's requests \(403: Permission denied\)") as e:
            TrackingConfig(tracking_uri=url.replace("://", "://user:s3cret@")).check_experiment()
        assert "s3cret" not in str(e.value) and "t0ken" not in str(e.value) and "Bearer t0ken" in seen


def test_an_experiment_not_there_yet_and_a_plugins_auth_pass(monkeypatch):
    """404: the experiment is made by the job's first run. MLFLOW_TRACKING_AUTH names a plugin's auth provider,
    which this check cannot speak: MLflow's own client reports what it refuses."""
    with tracking_stub(404, b'{"error_code": "RESOURCE_DOES_NOT_EXIST"}') as (url, _):
        TrackingConfig(tracking_uri=url).check_experiment()
    monkeypatch.setenv("MLFLOW_TRACKING_AUTH", "some_plugin_auth")
    with tracking_stub(401) as (url, _):
        TrackingConfig(tracking_uri=url).check_experiment()


def test_credentials_mlflow_reads_from_its_file_are_no_refusal(tmp_path, monkeypatch):
    """MLflow's client also logs in with ~/.mlflow/credentials (and prefers basic auth to a stale token, signs SigV4
    requests, runs header plugins); the check's plain request carried none of those and refused a server MLflow
    itself gets into. A refused request is asked again through MLflow's client before the job is refused."""
    import base64
    import json

    answer = json.dumps({"experiment": {"experiment_id": "1", "name": "bert-foundry", "lifecycle_stage": "active",
                                        "artifact_location": str(tmp_path / "art")}}).encode()
    good = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    with tracking_stub(401, b"You are not authenticated.", (good, answer)) as (url, _):
        monkeypatch.setenv("HOME", str(tmp_path))
        with pytest.raises(ConfigError, match="refuses this job's requests"):  # no credentials anywhere: refused
            TrackingConfig(tracking_uri=url).check_experiment()
        (tmp_path / ".mlflow").mkdir()
        (tmp_path / ".mlflow" / "credentials").write_text(
            "[mlflow]\nmlflow_tracking_username = alice\nmlflow_tracking_password = s3cret\n")
        TrackingConfig(tracking_uri=url).check_experiment()
