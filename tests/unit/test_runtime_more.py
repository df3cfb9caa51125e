"""jobs/runtime: an autoscaler that says it cannot grow (capacity.py), pretraining's kill marker (faults.py and the
pretraining worker), the NaN fault's two fields (faults.py), and a `ray start` cluster that is gone (cluster.py)."""

import socket
import time
from types import SimpleNamespace

import pytest

from bert_core.config import ConfigError
from jobs.config.sections import ScalingConfig
from jobs.runtime.capacity import Demand
from jobs.runtime.faults import FaultsConfig


@pytest.fixture
def v2(monkeypatch):
    """A connected Ray of one node of 1 CPU whose GCS flags autoscaler v2 (RAY_enable_autoscaler_v2=1 on the head);
    `head` is the cloud instance id its head registered with (None: the GCS cannot be read)."""
    import ray
    import ray._raylet
    import ray.autoscaler.v2.sdk
    import ray.autoscaler.v2.utils
    from ray.core.generated.autoscaler_pb2 import ClusterResourceState

    state = SimpleNamespace(head="")

    def resource_state(gcs):
        if state.head is None:
            raise ConnectionError("GCS unreachable")
        reply = ClusterResourceState()
        worker = reply.node_states.add(instance_id="w-1")
        worker.total_resources.update({"CPU": 1.0})
        reply.node_states.add(instance_id=state.head).total_resources.update({"node:__internal_head__": 1.0})
        return reply

    monkeypatch.setattr(ray.autoscaler.v2.utils, "is_autoscaler_v2", lambda fetch_from_server: True)
    monkeypatch.setattr(ray, "get_runtime_context", lambda: SimpleNamespace(gcs_address="gcs:6379"))
    monkeypatch.setattr(ray._raylet, "GcsClient", lambda address: address)
    monkeypatch.setattr(ray.autoscaler.v2.sdk, "get_cluster_resource_state", resource_state)
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": {"CPU": 1.0}}])
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 1.0})
    monkeypatch.setattr("jobs.runtime.capacity.time.sleep", lambda s: pytest.fail("waited for the autoscaler"))
    return state


def test_a_v2_head_no_node_provider_launched_is_refused_at_once_as_a_fixed_cluster(v2):
    """A `ray start` head with RAY_enable_autoscaler_v2=1 (the launcher's head command, copied) runs autoscaler v2
    over a read-only provider, which adds no node: a shortfall waited the whole scaling.capacity_timeout_s (900 s by
    default) "for the autoscaler". Refused at once, as on any fixed cluster."""
    from jobs.runtime.capacity import ensure_capacity, has_autoscaler

    assert not has_autoscaler()
    with pytest.raises(RuntimeError, match=r"^the Ray cluster has CPU 1 of 2 needed by scaling.num_workers x "
                                           r"scaling.cpus_per_worker \(1 x 1\) plus 1 CPU for Ray Data\. Lower "):
        ensure_capacity(Demand.of_scaling(ScalingConfig(num_workers=1, cpus_per_worker=1)))


@pytest.mark.parametrize("head", ["i-0abc", None])
def test_a_v2_head_a_node_provider_launched_has_an_autoscaler(v2, head):
    """`ray up`, KubeRay and Ray's fake multi-node provider start the head with its cloud instance id (v2 needs it):
    the autoscaler is asked, as before; so it is where the GCS cannot say."""
    from jobs.runtime.capacity import has_autoscaler

    v2.head = head
    assert has_autoscaler()


def test_pretrainings_kill_marker_is_kept_in_its_run_folder(tmp_path, monkeypatch):
    """faults.fail_at_step's "killed once" marker was in the node's /tmp: a second drill on the run_name killed
    nothing (the marker outlived the deleted run), and rank 1 restarted on another node was killed again until
    train.max_failures was spent. It lives in the run folder on shared storage, as fine-tuning's does."""
    import ray.train

    import jobs.registry.metric_logger
    from jobs.config.pretrain import PretrainConfig
    from jobs.workers import pretrain_worker

    made = []

    class Stop(Exception):
        pass

    def faults(*args, **kwargs):
        made.append(kwargs)
        raise Stop

    cfg = PretrainConfig(run_name="drill", output_dir=str(tmp_path / "runs"))
    monkeypatch.setattr(ray.train, "get_context", lambda: SimpleNamespace(get_world_rank=lambda: 1,
                                                                          get_world_size=lambda: 2))
    monkeypatch.setattr(jobs.registry.metric_logger, "RankZeroLogger", lambda *a: None)
    monkeypatch.setattr(pretrain_worker, "ExampleIndex", lambda rows: None)
    monkeypatch.setattr(pretrain_worker, "Faults", faults)
    with pytest.raises(Stop):
        pretrain_worker.Worker({"cfg": cfg.to_dict(), "train_shard_rows": [], "data_tracker": None,
                                "rollback_ledger": None})
    assert made[0]["marker_dir"] == (tmp_path / "runs").resolve() / "drill"


@pytest.mark.parametrize("fields", [{"nan_at_step": 5}, {"nan_micro_batches": 3}])
def test_the_nan_fault_needs_both_its_fields(fields):
    """faults.nan_at_step alone (the natural way to ask for NaN from a step on) validated and injected nothing: the
    rollback drill ran clean and proved nothing."""
    with pytest.raises(ConfigError, match=r"faults\.nan_at_step and faults\.nan_micro_batches go together"):
        FaultsConfig(**fields).validate("pretrain")
    FaultsConfig(nan_at_step=5, nan_micro_batches=3).validate("pretrain")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_ray_start_cluster_that_is_gone_is_refused_naming_its_file(tmp_path, monkeypatch):
    """A `ray start` head killed without `ray stop` leaves ray_current_cluster behind: ray.init() joined its address
    and waited for minutes (590 s and more) with only Ray's C++ warnings. Refused at once, naming the file and the
    way out."""
    import ray

    from jobs.runtime import cluster

    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{closed_port()}\n")
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "init", lambda *a, **kw: pytest.fail("joined a cluster that is gone"))
    start = time.monotonic()
    with pytest.raises(ConfigError) as err:
        cluster.init_ray()
    said = str(err.value)
    assert time.monotonic() - start < 10
    assert said.startswith(f"the Ray cluster recorded in {tmp_path / 'ray' / 'ray_current_cluster'} (127.0.0.1:")
    assert "`ray stop`" in said and "RAY_ADDRESS=local" in said and "\n" not in said


def test_a_ray_start_cluster_that_answers_is_joined(tmp_path, monkeypatch):
    import ray

    from jobs.runtime import cluster

    joined = []
    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        (tmp_path / "ray").mkdir()
        (tmp_path / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{head.getsockname()[1]}\n")
        monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        monkeypatch.setattr(ray, "is_initialized", lambda: bool(joined))
        monkeypatch.setattr(ray, "init", lambda *a, **kw: joined.append(True))
        monkeypatch.setattr(ray._private.worker, "get_dashboard_url", lambda: "")
        monkeypatch.setattr("jobs.runtime.console.install_worker_filter", lambda: None)
        monkeypatch.setattr("jobs.runtime.console.quiet_ray_data", lambda: None)
        assert cluster.init_ray() == "" and joined == [True]


def test_the_capacity_timeout_names_a_cluster_with_no_node_provider():
    """A `ray start` head with RAY_enable_autoscaler_v2=1 flags autoscaler v2 but has no node provider: where the job
    still waits (the head's instance id unread), its timeout blamed quotas and node types, never that case."""
    from jobs.runtime.capacity import wait_for

    with pytest.raises(RuntimeError, match=r"did not bring CPU 1 of 2 within scaling\.capacity_timeout_s=0 s: .*"
                                           r"no node provider \(a `ray start` head, RAY_enable_autoscaler_v2=1 or "
                                           r"not\) adds none: ask for what its nodes hold$"):
        wait_for({"CPU": 2.0}, lambda: {"CPU": 1.0}, timeout_s=0, say=lambda _: None)
