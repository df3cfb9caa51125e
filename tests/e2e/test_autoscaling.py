"""A cluster as clouds start one: a head with 0 CPUs and a worker type with `min_workers: 0`, run by Ray's own
autoscaler (its fake multi-node provider, which Ray's autoscaler tests use: worker nodes are started on this
machine where a cloud would start VMs). A pretraining job on it asks the autoscaler for its workers' nodes, says
that it waits, and trains once they are there; on a fixed cluster the same shortfall is refused at once."""

import pytest
import ray
from ray.autoscaler._private.fake_multi_node.node_provider import FAKE_HEAD_NODE_ID

from jobs.pretrain import run
from tests.e2e.quick import quick_config
from tests.e2e.ray_head import start_head

pytestmark = pytest.mark.slow

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


def test_pretraining_waits_for_the_autoscaler_then_trains(autoscaling_cluster, tmp_path, shared_data, capsys):
    assert ray.cluster_resources().get("CPU", 0) == 0  # only the head: nothing to train on yet
    cfg = quick_config(tmp_path, "autoscaled", "train.max_steps=10", "optim.warmup_steps=2", "train.log_every=5",
                       "train.eval_batches=2", "scaling.num_workers=2", "scaling.cpus_per_worker=1",
                       "scaling.capacity_timeout_s=300", data_dir=shared_data)
    result = run(cfg)
    out = capsys.readouterr().out
    assert "[cluster] waiting for the autoscaler: CPU 0 of 3" in out
    assert "[cluster] the autoscaler brought CPU 3" in out
    assert result.metrics["step"] == 10
    workers = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) == 2]
    assert len(workers) == 2  # 3 CPUs asked (2 workers + Ray Data): two 2-CPU nodes

    from transformers import AutoModelForMaskedLM

    AutoModelForMaskedLM.from_pretrained(result.release_dir)  # the release checkpoint is readable


def test_a_shortfall_the_autoscaler_cannot_fill_fails_with_one_line(autoscaling_cluster, tmp_path, shared_data):
    """Two 2-CPU nodes at most: 6 CPUs never come, and the job says so once its timeout has passed."""
    cfg = quick_config(tmp_path, "too-big", "scaling.num_workers=5", "scaling.cpus_per_worker=1",
                       "scaling.capacity_timeout_s=20", data_dir=shared_data)
    with pytest.raises(RuntimeError, match=r"the autoscaler did not bring CPU 4 of 6 within "
                                           r"scaling.capacity_timeout_s=20 s"):
        run(cfg)
