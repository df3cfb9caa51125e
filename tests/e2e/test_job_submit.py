"""`ray job submit` of jobs/pretrain.py to a real head started with `ray start --head` on 127.0.0.1,
with Ray's token auth on; the test stops only the Ray it started."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from jobs.runtime.cluster import PREEMPTION_WATCHER
from tests.readme import readme
from tests.e2e.ray_head import RAY, ray_env, start_head

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def head(no_shared_ray):
    node = start_head(num_cpus=2)
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="module")
def pretraining(head, tmp_path_factory, shared_data):
    """README.md's submitted pretraining: its /shared/ a folder here, its corpus and prepared set the ones every e2e
    module shares (tests/e2e/quick.py; made here if this is the first); then the e2e size. Returns /shared/, the
    submission id and what `ray job submit` printed."""
    shared = tmp_path_factory.mktemp("shared")
    job_id = f"bf-test-{uuid.uuid4().hex[:8]}"
    words = readme("ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/pretrain.py",
                   shared_places(head, shared, shared_data))
    appended = ["run_name=submitted", "corpus.harvest_max_mb=0.5", "data.tokenizer.vocab_size=1000",
                "train.max_steps=20", "optim.warmup_steps=5", "train.log_every=10", "train.eval_batches=2"]
    return shared, job_id, submitted(words, job_id, appended)


def test_submitted_pretrain_job_succeeds_and_writes_its_checkpoint(head, pretraining):
    assert (Path.home() / ".ray" / "auth_token").is_file()  # token auth is on for this cluster
    shared, job_id, submit = pretraining
    assert submit.returncode == 0, submit.stdout[-4000:] + submit.stderr[-4000:]
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(head.dashboard_url)  # authenticates with the cluster's token
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED
    logs = client.get_job_logs(job_id)
    assert "MLM accuracy" in logs and "step     20/20" in logs  # progress and summary reach the job log
    # a quiet console (jobs/runtime/console.py): every line is ours (progress, summary), none from Ray, DeepSpeed or MLflow
    assert foreign_lines(logs) == [], foreign_lines(logs)
    assert re.search(r"Ray logs +/\S+/logs ", logs)  # where the chatter went
    release = shared / "runs" / "submitted" / "release"
    assert (release / "model.safetensors").is_file() and (release / "config.json").is_file()
    assert (release / "vocab.txt").is_file()
    assert list((shared / "runs" / "submitted").glob("checkpoint_*/engine"))


JOIN = """
import os
from jobs.runtime.cluster import PREEMPTION_WATCHER, init_ray
init_ray()
import ray
print(os.environ.get(PREEMPTION_WATCHER))
print(ray.get_runtime_context().gcs_address)
"""


def test_a_job_started_beside_a_running_cluster_says_it_joined_it_and_how_to_stop_it(head):
    """`make quickstart` beside a leftover `ray start` cluster runs on that cluster: the console says so, with its
    address and `ray stop`. The leftover is a plain `ray start --head` whose Ray temp dir is the one every process
    here defaults to (RAY_TMPDIR/ray), where it writes the address file that `ray.init()` joins by."""
    root = tempfile.mkdtemp(prefix="bfj", dir="/tmp")  # short: Ray's unix sockets live under it
    leftover = start_head(num_cpus=1, temp_dir=os.path.join(root, "ray"))
    try:
        env = dict(ray_env(), RAY_TMPDIR=root)
        env.pop(PREEMPTION_WATCHER, None)
        joined = subprocess.run([sys.executable, "-c", JOIN], cwd=REPO, env=env, capture_output=True, text=True,
                                timeout=300)
    finally:
        leftover.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert joined.returncode == 0, joined.stderr[-4000:]
    assert (f"[cluster] joined the Ray cluster already running on this machine ({leftover.gcs_address}, started by "
            "`ray start`); `ray stop` ends it") in joined.stdout, joined.stdout
    assert joined.stdout.strip().splitlines()[-1] == leftover.gcs_address  # and it did run on that cluster
    assert joined.stdout.strip().splitlines()[-2] == "None"  # a cluster it joins keeps Ray Train's preemption watcher


def test_a_submitted_job_that_would_write_into_its_working_copy_is_refused_in_one_line(head):
    """The quickstart config as is (output_dir=runs, relative): under `ray job submit --working-dir` it would write
    into Ray's temporary copy of the folder and lose it; the job fails at once and its log says which field."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    job_id = f"bf-test-{uuid.uuid4().hex[:8]}"
    submit = subprocess.run(
        [RAY, "job", "submit", "--address", head.dashboard_url, "--submission-id", job_id, "--working-dir", str(REPO),
         "--", "python", "jobs/pretrain.py", "--config", "configs/pretrain/quickstart.yaml"],
        env=ray_env(), capture_output=True, text=True, timeout=300)
    assert submit.returncode != 0
    client = JobSubmissionClient(head.dashboard_url)
    assert client.get_job_status(job_id) == JobStatus.FAILED
    logs = client.get_job_logs(job_id).strip().splitlines()
    assert logs[-1].startswith("error: output_dir='runs' is relative, and this job runs in Ray's temporary copy of "
                               "its --working-dir"), logs[-5:]


def test_submitted_finetune_job_registers_its_model_with_a_quiet_console(head, pretraining):
    """README.md's submitted CoNLL NER fine-tuning of the submitted pretraining's release, on files written to
    /shared/ here, then its submitted prediction: each job succeeds with our lines only in its log, the model is
    registered, and every line of the input is predicted."""
    from mlflow.tracking import MlflowClient

    from tests.e2e.test_finetune import write_conll

    shared, _, _ = pretraining
    job_id = f"bf-test-{uuid.uuid4().hex[:8]}"
    (shared / "conll2003").mkdir()
    write_conll(shared / "conll2003" / "train.txt", 64, 0), write_conll(shared / "conll2003" / "valid.txt", 16, 1)
    # README.md's command: the release of the run above, /shared/ here, then the e2e size
    words = readme("ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/finetune.py",
                   {"<run>": "submitted", **shared_places(head, shared)})
    appended = ["run_name=submitted-ner", "task.max_seq_len=32", "train.epochs=1", "optim.lr=1e-4",
                "scaling.num_workers=1", "scaling.cpus_per_worker=1"]
    submit = submitted(words, job_id, appended)
    assert submit.returncode == 0, submit.stdout[-4000:] + submit.stderr[-4000:]
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(head.dashboard_url)
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED
    logs = client.get_job_logs(job_id)
    assert "[eval] step" in logs and "registered model ner v1 (alias @candidate)" in logs
    assert foreign_lines(logs) == [], foreign_lines(logs)
    version = MlflowClient(f"sqlite:///{shared}/mlflow.db").get_model_version_by_alias("ner", "candidate")
    assert version.tags["task"] == "conll" and len(version.tags["lineage.task_data_sha256"]) == 64
    tags = MlflowClient(f"sqlite:///{shared}/mlflow.db").get_run(version.run_id).data.tags
    assert tags["lineage.init"] == str(shared / "runs" / "submitted" / "release")  # the release written above
    assert (shared / "runs" / "submitted-ner" / "best" / "config.json").is_file()

    # README.md's submitted prediction of the registered tagger over a folder of text files, as it is written
    # (@champion: the alias is set here directly; the promotion gate is tests/e2e/test_predict.py's)
    MlflowClient(f"sqlite:///{shared}/mlflow.db").set_registered_model_alias("ner", "champion", version.version)
    (shared / "new").mkdir()
    (shared / "new" / "notes.txt").write_text("Marie Curie worked in Paris\na fine day in the park\n")
    job_id = f"bf-test-{uuid.uuid4().hex[:8]}"
    words = readme("ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/predict.py",
                   {"NAME": "ner", **shared_places(head, shared)})
    submit = submitted(words, job_id, [])
    assert submit.returncode == 0, submit.stdout[-4000:] + submit.stderr[-4000:]
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED
    assert foreign_lines(client.get_job_logs(job_id)) == []
    import pyarrow.parquet as pq

    rows = pq.read_table(shared / "predictions" / "shards").to_pylist()
    assert sorted(r["position"] for r in rows) == [0, 1] and all("entities" in r for r in rows), rows


def shared_places(head, tmp: Path, data: Path | None = None) -> dict[str, str]:
    """README.md's submission commands with their cluster and shared storage here: the head started above, `tmp`
    for /shared/ (`data`, the e2e modules' shared corpus and prepared set, for its corpus and prepared data)."""
    places = {"http://127.0.0.1:8265": head.dashboard_url}
    if data:
        places.update({"/shared/prepared": f"{data}/prepared", "/shared/corpus": f"{data}/corpus-0.5mb"})
    return {**places, "/shared/": f"{tmp}/"}


def submitted(words: list[str], job_id: str, appended: list[str]) -> subprocess.CompletedProcess:
    """`ray job submit` as README.md writes it, with a submission id the test can look up and `appended` after
    the job's command, run from the checkout (README's `--working-dir .`)."""
    from tests.readme import job_argv

    job = job_argv(words, *appended)  # the README's job command, then the test's (none overriding what it sets)
    cmd = [RAY, *words[1:3], "--submission-id", job_id, *words[3:words.index("--") + 1], *job]
    return subprocess.run(cmd, cwd=REPO, env=ray_env(), capture_output=True, text=True, timeout=900)


ANSI = re.compile(r"\x1b\[[0-9;]*m")
WORKER = re.compile(r"^\((\w+) pid=\d+(, ip=[\d.]+)?\) ")  # "(RayTrainWorker pid=42) " before a worker's line


SUBMISSION = re.compile(r"\sjob_manager\.py:\d+ -- |^Running entrypoint for job ")  # Ray Jobs' own framing


def foreign_lines(log: str) -> list[str]:
    """The lines of a job's console that are not ours: not a progress line (console.OURS, from the driver or
    a worker), not in the summary between its ==== rules, not blank, not Ray Jobs' two lines around any job.
    Ray's lines that console.BENIGN names are let through, and only they: the C++ core worker's advice on Ray
    Data's actor arguments, which the driver writes straight to its stderr, where no Python filter reaches, and
    the GCS's log of a kill whose actor had already exited."""
    from jobs.runtime.console import BENIGN, OURS

    foreign, in_summary = [], False
    for raw in log.splitlines():
        line = WORKER.sub("", ANSI.sub("", raw))
        if line.startswith("===="):
            in_summary = not in_summary
        elif (line.strip() and not in_summary and not OURS.match(line) and not SUBMISSION.search(line)
              and not BENIGN.search(line)):
            foreign.append(raw)
    return foreign


def test_submission_without_a_token_is_refused(head):
    env = ray_env()
    env["RAY_AUTH_MODE"] = "disabled"
    env["RAY_AUTH_TOKEN_PATH"] = "/nonexistent/token"
    out = subprocess.run([RAY, "job", "list", "--address", head.dashboard_url], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "Unauthorized" in out.stdout + out.stderr or "authentication" in (out.stdout + out.stderr).lower()


LISTENERS = """
import json, os, psutil
from jobs import pretrain  # the job module, as `python jobs/pretrain.py` imports it
from jobs.runtime.cluster import PREEMPTION_WATCHER
pretrain.prefer_loopback()  # what the job's run() calls before Ray is imported
url = pretrain.init_ray()
import ray
socks = [(p.name(), c.laddr.ip, c.laddr.port) for p in psutil.Process().children(recursive=True)
         for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
print(json.dumps({"url": url, "node_ip": ray.util.get_node_ip_address(), "listening": socks,
                  "preemption_watcher": os.environ.get(PREEMPTION_WATCHER)}))
ray.shutdown()
"""


def test_a_job_that_starts_its_own_ray_listens_on_loopback_only(no_shared_ray):
    """Started with no cluster to join (no RAY_ADDRESS, no `ray start`, none of the tests' loopback switch in
    the environment), the job's Ray (GCS, raylet, dashboard, agents, workers) listens on 127.0.0.1 alone, and its
    Train runs start no preemption watcher (nothing on one machine is preempted)."""
    import json

    env = ray_env()
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")  # the job must set these itself
    env.pop(PREEMPTION_WATCHER, None)
    out = subprocess.run([sys.executable, "-c", LISTENERS], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["url"].startswith("http://127.0.0.1:") and seen["node_ip"] == "127.0.0.1", seen
    names = {name for name, _, _ in seen["listening"]}
    assert {"gcs_server", "raylet"} <= names, seen  # the scan saw Ray's own servers
    assert all(ip in ("127.0.0.1", "::ffff:127.0.0.1") for _, ip, _ in seen["listening"]), seen["listening"]
    assert seen["preemption_watcher"] == "0"  # nothing to preempt on a Ray of one machine (jobs/runtime/cluster.py)


# README.md's cluster block on a machine of its own: Linux namespaces give the commands their own processes (what
# `ray stop` ends), their own loopback (Ray's default ports) and their own /tmp/ray (where `ray start` records the
# cluster that a later `ray.init()` joins); the token in ~/.ray is the machine's, as a user's would be.
OWN_MACHINE = ["unshare", "--pid", "--fork", "--mount-proc", "--net", "--mount", "bash", "-c"]
BLOCK = """
set -u
ip link set lo up
mkdir -p /tmp/ray && mount -t tmpfs tmpfs /tmp/ray
{token} > /tmp/ray/token.log 2>&1 || {{ cat /tmp/ray/token.log; exit 10; }}
{start} > /tmp/ray/start.log 2>&1 || {{ cat /tmp/ray/start.log; exit 11; }}
python -c '
import urllib.request, urllib.error
try:
    urllib.request.urlopen("http://127.0.0.1:8265/api/version", timeout=60)
    print("anonymous: answered")
except urllib.error.HTTPError as e:
    print(f"anonymous: {{e.code}}")
'
ray job list --address http://127.0.0.1:8265 > /tmp/ray/jobs.log 2>&1 && echo "with the token: listed"
{stop} > /tmp/ray/stop.log 2>&1 || {{ cat /tmp/ray/stop.log; exit 12; }}
# every process of this namespace but its shell (PID 1) and the listing's own; the dashboard's forkserver outlives
# `ray stop` by a moment on a busy machine (its pipes closed, it exits)
others() {{ ps -e -o pid=,comm=,args= | awk '$1 != 1 && $2 != "ps" && $2 != "awk" && $2 != "bash"'; }}
for i in $(seq 60); do [ -z "$(others)" ] && break; sleep 0.5; done
[ -z "$(others)" ] && echo "nothing left" || {{ echo "left running"; others; }}
"""


def test_readme_ray_start_and_ray_stop_as_written_on_a_machine_of_their_own():
    """`ray get-auth-token --generate`, `ray start --head --dashboard-host 127.0.0.1` and `ray stop` word for word
    (the README's default ports included): the head's dashboard refuses an anonymous API call (token auth on) and
    lists jobs for a client with the token; `ray stop` ends every Ray process. `ray stop` ends every Ray of a
    machine, so the block runs in namespaces of its own (OWN_MACHINE), not beside this suite's clusters."""
    script = BLOCK.format(token=shlex.join(readme("ray get-auth-token")), start=shlex.join(readme("ray start --head")),
                          stop=shlex.join(readme("ray stop")))
    out = subprocess.run([*OWN_MACHINE, script], env=dict(ray_env(), RAY_USAGE_STATS_ENABLED="0"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.split() == "anonymous: 401 with the token: listed nothing left".split(), out.stdout
