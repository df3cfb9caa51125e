"""Two Ray nodes on one machine (`ray start --head` + `ray start --address ...`, each with its own
resources, on loopback addresses 127.0.0.2 and 127.0.0.3): the two training workers land on
different nodes and pretrain across them."""

import pytest
import ray

from jobs.pretrain import run
from tests.e2e.quick import quick_config
from tests.e2e.ray_head import start_head, start_worker

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_nodes(no_shared_ray):
    head = start_head(num_cpus=2, resources='{"head_node": 1}', multi_node=True)
    worker = None
    try:
        worker = start_worker(head, num_cpus=2, resources='{"second_node": 1}')
        ray.init(address=head.gcs_address, _node_ip_address=head.ip)
        yield head
    finally:
        ray.shutdown()
        if worker:
            worker.stop()
        head.stop()


def test_pretrain_across_two_nodes(two_nodes, tmp_path):
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert len(nodes) == 2 and {"head_node", "second_node"} <= {r for n in nodes for r in n["Resources"]}
    cfg = quick_config(tmp_path, "two-nodes", "train.max_steps=30", "optim.warmup_steps=5", "train.log_every=10",
                       "train.eval_batches=4", "scaling.cpus_per_worker=1", "scaling.placement_strategy=STRICT_SPREAD")
    result = run(cfg)
    assert result.metrics["step"] == 30
    assert result.metrics["eval_after/mlm_loss"] < result.metrics["eval_before/mlm_loss"]

    from ray.util.state import list_actors

    workers = list_actors(address=two_nodes.dashboard_url, filters=[("class_name", "=", "RayTrainWorker")],
                          detail=True, limit=100)
    assert len({a.node_id for a in workers}) == 2  # one training worker on each node
