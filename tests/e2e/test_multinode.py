"""Two Ray nodes on one machine (`ray start --head` + `ray start --address ...`, each with its own
resources, on loopback addresses 127.0.0.2 and 127.0.0.3): the two training workers land on
different nodes and pretrain across them."""

from pathlib import Path

import pytest
import ray

from jobs.config import PretrainConfig
from jobs.config_io import load_config
from jobs.pretrain import run
from tests.e2e.ray_head import start_head, start_worker

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_nodes():
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
    cfg = load_config(PretrainConfig, REPO / "configs/pretrain/quickstart.yaml", [
        "run_name=two-nodes", f"output_dir={tmp_path}/runs", f"data.output_root={tmp_path}/prepared",
        f"corpus.harvest_dir={tmp_path}/corpus", "corpus.harvest_max_mb=0.5", "data.tokenizer.vocab_size=1000",
        "train.max_steps=30", "train.log_every=10", "train.eval_batches=4", "scaling.cpus_per_worker=1",
        "scaling.placement_strategy=STRICT_SPREAD",
        f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db", f"tracking.artifact_location={tmp_path}/art"])
    result = run(cfg)
    assert result.metrics["step"] == 30
    assert result.metrics["eval_after/mlm_loss"] < result.metrics["eval_before/mlm_loss"]

    from ray.util.state import list_actors

    workers = list_actors(address=two_nodes.dashboard_url, filters=[("class_name", "=", "RayTrainWorker")],
                          detail=True, limit=100)
    assert len({a.node_id for a in workers}) == 2  # one training worker on each node
