"""A cluster as clouds start one: a head with 0 CPUs and a worker type with `min_workers: 0`, run by Ray's own
autoscaler (its fake multi-node provider, which Ray's autoscaler tests use: worker nodes are started on this
machine where a cloud would start VMs). A pretraining job on it asks the autoscaler for its workers' nodes, says
that it waits, and trains once they are there; a node that vanishes mid-run (its raylet and every process on it
killed, as when a cloud reclaims a VM) costs the run the steps since its last checkpoint, not the run; on a fixed
cluster the same shortfall is refused at once."""

import re
import subprocess
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest
import ray
from ray.util.state import list_actors
from ray.autoscaler._private.fake_multi_node.node_provider import FAKE_HEAD_NODE_ID

from jobs.pretrain import run
from tests.e2e.quick import QUICKSTART, quick_config, quick_overrides
from tests.e2e.ray_head import RAY, ray_env, start_head
from tests.e2e.records import assert_epoch_covered_once, effective_ids, finished_epochs, first_steps, train_ids

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

WORKER_TYPE = "cpu2"
# The fake provider as an "external" one: under its own type name Ray merges in a defaults file that its wheel does
# not ship (fake_multi_node/example.yaml), and the autoscaler fails to start
FAKE_PROVIDER = "ray.autoscaler._private.fake_multi_node.node_provider.FakeMultiNodeProvider"
CLUSTER = {  # Ray's cluster-launcher schema with the fake provider; nothing but the node types matters here
    "cluster_name": "bert-foundry-autoscaling-test",
    "max_workers": 2,
    "provider": {"type": "external", "module": FAKE_PROVIDER,
                 "use_node_id_as_ip": True, "disable_node_updaters": True,
                 "disable_launch_config_check": True, "launch_multiple": True, "head_node_id": FAKE_HEAD_NODE_ID},
    "available_node_types": {
        "ray.head.default": {"resources": {"CPU": 0}, "node_config": {}, "max_workers": 0},
        WORKER_TYPE: {"resources": {"CPU": 2}, "node_config": {}, "min_workers": 0, "max_workers": 2},
    },
    "head_node_type": "ray.head.default",
    "upscaling_speed": 1.0,
    "idle_timeout_minutes": 5,
    "auth": {}, "docker": {}, "file_mounts": {}, "cluster_synced_files": [], "file_mounts_sync_continuously": False,
    "rsync_exclude": [], "rsync_filter": [], "initialization_commands": [], "setup_commands": [],
    "head_setup_commands": [], "worker_setup_commands": [], "head_start_ray_commands": [],
    "worker_start_ray_commands": [],
}


@pytest.fixture(scope="module")
def autoscaling_cluster(no_shared_ray):
    head = start_head(num_cpus=0, autoscaling_config=CLUSTER)
    try:
        ray.init(address=head.gcs_address)
        yield head
    finally:
        ray.shutdown()
        head.stop()


def test_a_submitted_pretraining_waits_for_the_autoscaler_and_survives_losing_a_node(autoscaling_cluster, tmp_path,
                                                                                     shared_data):
    """`ray job submit` of jobs/pretrain.py, as cluster/README.md runs it: the driver starts on the head (0 CPUs),
    asks the autoscaler for its workers' nodes, says that it waits, and trains once they are there. Once Ray has
    registered the step-10 checkpoint, the node of a training rank goes away with everything on it (a cloud
    reclaiming a VM): Ray Train restarts the worker group (train.max_failures) on the nodes left and the ones the
    autoscaler brings, and the run resumes from a checkpoint, not from step 1, finishes, and trains on every example
    of each epoch exactly once across the loss."""
    assert ray.cluster_resources().get("CPU", 0) == 0  # only the head: nothing to train on yet
    record = tmp_path / "record"
    record.mkdir()
    job_id = f"bf-autoscaled-{uuid.uuid4().hex[:8]}"
    overrides = quick_overrides(tmp_path, "autoscaled", "train.max_steps=60", "optim.warmup_steps=2",
                                "train.log_every=10", "train.eval_batches=2", "train.checkpoint_every=10",
                                f"faults.record_ids_dir={record}", "scaling.num_workers=2", "scaling.cpus_per_worker=1",
                                "scaling.capacity_timeout_s=300", data_dir=shared_data)
    removed: dict = {}
    remover = threading.Thread(target=remove_a_training_node_once_a_checkpoint_is_registered,
                               args=(tmp_path / "runs" / "autoscaled", removed), daemon=True)
    remover.start()
    # No --working-dir here, unlike cluster/README.md (and test_job_submit.py, which submits with one): the fake
    # provider's nodes are processes sharing the head's session folder, and the job's unpacked copy of the working
    # dir vanished from under its driver as the autoscaler's nodes came up (seen: the driver's cwd gone 20 s in).
    # On a cloud each node has a disk of its own. This environment has the project installed, so absolute paths do.
    submit = subprocess.run(
        [RAY, "job", "submit", "--address", autoscaling_cluster.dashboard_url, "--submission-id", job_id, "--",
         "python", str(REPO / "jobs" / "pretrain.py"), "--config", str(QUICKSTART), *overrides],
        env=ray_env(), capture_output=True, text=True, timeout=900)
    remover.join(timeout=5)
    assert submit.returncode == 0, submit.stdout[-4000:] + submit.stderr[-4000:]
    from ray.job_submission import JobSubmissionClient

    logs = JobSubmissionClient(autoscaling_cluster.dashboard_url).get_job_logs(job_id)
    assert "[cluster] waiting for the autoscaler: CPU 0 of 3" in logs
    assert "[cluster] the autoscaler brought CPU 3" in logs
    assert "step     60/60" in logs

    assert removed, "no training node was removed: the run ended before Ray registered its first checkpoint"
    assert removed["workers"] == 2  # 3 CPUs asked (2 workers + Ray Data): two 2-CPU nodes, before the loss
    assert removed["node"] not in {n["NodeID"] for n in ray.nodes() if n["Alive"]}  # the node really went away
    # the data-position tracker and the rollback ledger live on the driver's node (the head), never a worker's
    assert removed["bookkeeping"] == {"PositionTracker": removed["head"], "RollbackLedger": removed["head"]}
    first, restart = first_steps(record)  # two attempts: the one that lost its node, and the resumed one
    assert first == 1 and restart > 1 and (restart - 1) % 10 == 0, restart  # resumed from a checkpoint
    ids = train_ids(Path(re.search(r"prepared data +(\S+)", logs).group(1)))
    epochs = finished_epochs(record)
    cut = next(int(line.split()[2]) for line in (record / "ids-rank0.txt").read_text().splitlines()
               if int(line.split()[1]) == restart)  # the epoch the resumed attempt began in
    assert epochs > cut, (epochs, cut)  # checked whole below, not left out of the loop
    for epoch in range(epochs):
        assert_epoch_covered_once(effective_ids(record, epoch), ids, workers=2)
    assert max(effective_ids(record, epochs).values()) == 1  # the last epoch, part-trained: none twice either
    from transformers import AutoModelForMaskedLM

    AutoModelForMaskedLM.from_pretrained(tmp_path / "runs" / "autoscaled" / "release")  # the release is readable


def remove_a_training_node_once_a_checkpoint_is_registered(run_dir: Path, removed: dict, timeout: float = 900):
    """Wait until Ray has registered the run's first checkpoint (its snapshot of them is written), then kill the
    raylet of a node that runs a training rank, with every process under it. Never the head: the driver runs
    there, and with it the Train controller and the run's bookkeeping actors (a lost head is a lost cluster).
    `timeout`: the submission's own (the nodes' boot and 10 steps took 77-159 s, more on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while not (run_dir / "checkpoint_manager_snapshot.json").exists():
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)
    head = ray.get_runtime_context().get_node_id()
    workers = sum(1 for n in ray.nodes() if n["Alive"] and n["NodeID"] != head)
    alive = list_actors(filters=[("state", "=", "ALIVE")], limit=10_000)
    bookkeeping = {a.class_name: a.node_id for a in alive if a.class_name in ("PositionTracker", "RollbackLedger")}
    training = [a.node_id for a in alive if a.class_name == "RayTrainWorker" and a.node_id != head]
    # a node with the run's bookkeeping on it, if there is one: losing it is what the run must survive too
    node = next((n for n in training if n in bookkeeping.values()), training[0])
    raylet = next(p for p in psutil.process_iter(["cmdline"]) if f"--node_id={node}" in (p.info["cmdline"] or []))
    for p in [*raylet.children(recursive=True), raylet]:
        p.kill()
    removed.update(node=node, bookkeeping=bookkeeping, head=head, workers=workers)


def test_a_shortfall_the_autoscaler_cannot_fill_fails_with_one_line(autoscaling_cluster, tmp_path, shared_data):
    """Two 2-CPU nodes at most: 6 CPUs never come, and the job says so once its timeout has passed (whether or not
    the nodes of the test before are still up: 4 CPUs at most, whatever the timeout)."""
    cfg = quick_config(tmp_path, "too-big", "scaling.num_workers=5", "scaling.cpus_per_worker=1",
                       "scaling.capacity_timeout_s=6", data_dir=shared_data)
    with pytest.raises(RuntimeError, match=r"the autoscaler did not bring CPU [024] of 6 within "
                                           r"scaling.capacity_timeout_s=6 s"):
        run(cfg)
