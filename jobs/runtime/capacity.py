"""What a job's workers need from the cluster, and waiting for it when an autoscaler can bring it.

A cloud cluster starts with a head of 0 CPUs and worker types of `min_workers: 0`: nodes come when something asks.
`ensure_capacity` asks the autoscaler for the job's `Demand` (one bundle per Ray Train worker or GPU prediction
replica, plus a CPU for Ray Data) with `ray.autoscaler.sdk.request_resources`, prints where the wait stands, and
fails with one line naming what never arrived once the job's timeout (`scaling.capacity_timeout_s`, prediction's
`capacity_timeout_s`) has passed. A cluster without an autoscaler (a local Ray, `ray start` nodes, with or without
RAY_enable_autoscaler_v2=1) cannot grow: a shortfall is refused at once, naming the fields that asked for it. The
request is withdrawn once the nodes are there (the workers' placement group holds them from then on; a standing
request would keep them up after the job).
The workers are checked as placed, not only summed: each bundle whole on one node (a node type at its cap can bring
the sum and not the bundles), and a strict `scaling.placement_strategy` (STRICT_PACK: all workers on one node;
STRICT_SPREAD: a node each) as it places them. The autoscaler's request knows no strategy, so a strict one's workers
are asked for by a placement group of that strategy, held for the wait; a placement the nodes cannot give is refused
like a shortfall.
Amounts are counted as Ray counts them, in units of 1/10000 (UNIT): summed as floats, 20 workers of 0.1 CPU asked for
3.0000000000000004 CPUs and a 3-CPU cluster that holds them was refused (an autoscaler waited for it in vain).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

POLL_S = 2.0
UNIT = 4  # decimals: Ray's resource amounts are fixed-point in units of 1/10000 (a request of 0.33333 is 0.3333)


@dataclass(frozen=True)
class Demand:
    """What a job asks of the cluster, and the words its refusal and its wait use: the bundles (one per training
    worker or GPU prediction replica, and a CPU for Ray Data), the fields that set them (`needed_by`), what to change
    on a cluster that cannot grow (`hint`; `gpu_hint` where GPUs are short), and how long to wait for an autoscaler
    (`timeout_s`, set by `timeout_field`)."""

    bundles: tuple[dict[str, float], ...]
    needed_by: str
    hint: str
    timeout_s: float
    timeout_field: str
    gpu_hint: str = ""  # what to change where GPUs are short ("": `hint`)
    distinct: int = 0  # the first `distinct` bundles each on a node of its own (placement_strategy STRICT_SPREAD)
    packed: int = 0  # the first `packed` bundles all on one node (placement_strategy STRICT_PACK)

    @classmethod
    def of_scaling(cls, scaling) -> "Demand":
        """A training job's: its `scaling` section (pretraining's and fine-tuning's are the same fields)."""
        return cls(bundles=tuple(bundles(scaling)),
                   needed_by=f"scaling.num_workers x scaling.cpus_per_worker ({scaling.num_workers} x "
                             f"{scaling.cpus_per_worker:g}) plus 1 CPU for Ray Data"
                             + (f", and {scaling.num_workers} GPUs (scaling.use_gpu)" if scaling.use_gpu else ""),
                   hint="Lower scaling.cpus_per_worker (e.g. 0.5) or scaling.num_workers, or add nodes.",
                   gpu_hint="Set scaling.use_gpu=false, lower scaling.num_workers, or add GPU nodes.",
                   timeout_s=scaling.capacity_timeout_s, timeout_field="scaling.capacity_timeout_s",
                   distinct=scaling.num_workers if scaling.placement_strategy == "STRICT_SPREAD" else 0,
                   packed=scaling.num_workers if scaling.placement_strategy == "STRICT_PACK" else 0)

    @classmethod
    def of_trial(cls, sweep) -> "Demand":
        """A sweep's (`sweep`: a SweepConfig): one trial at least must fit, as Tune waits for a trial's resources
        without end, saying so only in its log."""
        trial = {"CPU": float(sweep.cpus_per_trial), **({"GPU": float(sweep.gpus_per_trial)}
                                                        if sweep.gpus_per_trial else {})}
        return cls(bundles=(trial,), needed_by=f"one trial: cpus_per_trial={sweep.cpus_per_trial:g}"
                   + (f", gpus_per_trial={sweep.gpus_per_trial:g}" if sweep.gpus_per_trial else ""),
                   hint="Lower cpus_per_trial, or add nodes.",
                   gpu_hint="Lower gpus_per_trial (trials can share a GPU, e.g. 0.5), train on CPUs (gpus_per_trial=0 "
                            "and finetune.scaling.use_gpu=false), or add GPU nodes.",
                   timeout_s=sweep.finetune.scaling.capacity_timeout_s,
                   timeout_field="finetune.scaling.capacity_timeout_s")

    def total(self) -> dict[str, float]:
        return summed(self.bundles)

    def advice(self, short) -> str:
        """What to change where the resources named in `short` are missing: GPUs have their own hint (a lower
        cpus_per_worker gives no GPU)."""
        return " ".join(dict.fromkeys(self.gpu_hint if k == "GPU" and self.gpu_hint else self.hint for k in short))

    @property
    def strict(self) -> str:
        """The strict placement strategy of the workers' bundles, or "" (PACK and SPREAD place them anywhere)."""
        return "STRICT_SPREAD" if self.distinct else "STRICT_PACK" if self.packed else ""

    def placed(self) -> list[dict[str, float]]:
        """The bundles as nodes must hold them: STRICT_PACK's workers as one bundle of their sum."""
        if not self.packed:
            return [dict(b) for b in self.bundles]
        return [summed(self.bundles[:self.packed])] + [dict(b) for b in self.bundles[self.packed:]]


def summed(bundles) -> dict[str, float]:
    total: dict[str, float] = {}
    for b in bundles:
        for k, v in b.items():
            total[k] = round(total.get(k, 0.0) + v, UNIT)
    return total


def bundles(scaling) -> list[dict[str, float]]:
    """One bundle per training worker (its CPUs, and its GPU), and one CPU for Ray Data's streaming."""
    return worker_bundles(scaling.num_workers, scaling.cpus_per_worker, scaling.use_gpu)


def worker_bundles(workers: int, cpus: float, gpu: bool) -> list[dict[str, float]]:
    """One bundle per worker or replica (`cpus`, and a GPU with `gpu`), and one CPU for Ray Data's streaming."""
    worker = {"CPU": float(cpus), **({"GPU": 1.0} if gpu else {})}
    return [dict(worker) for _ in range(workers)] + [{"CPU": 1.0}]


def shortfall(need: dict[str, float], have: dict) -> dict[str, tuple[float, float]]:
    """resource -> (have, need) for every resource the cluster lacks."""
    return {k: (float(have.get(k, 0)), v) for k, v in need.items() if round(have.get(k, 0), UNIT) < round(v, UNIT)}


def describe_need(resources: dict[str, float], keys=None) -> str:
    return ", ".join(f"{k} {resources.get(k, 0.0):g}" for k in (keys or resources))


def describe(short: dict[str, tuple[float, float]]) -> str:
    return ", ".join(f"{k} {have:g} of {need:g}" for k, (have, need) in short.items())


def refusal(demand: Demand, short: dict[str, tuple[float, float]]) -> str:
    return f"the Ray cluster has {describe(short)} needed by {demand.needed_by}. {demand.advice(short)}"


def has_autoscaler() -> bool:
    """Whether the connected cluster runs Ray's autoscaler v2 (it flags itself in the GCS) with a node provider. Every
    head runs a v1 monitor, a local one too, so v1's published status says nothing about whether nodes can be added:
    on a v1 cluster (`RAY_enable_autoscaler_v2` unset) a shortfall is refused as on a fixed cluster. So it is on a
    head that no provider launched: v2 there runs over a read-only provider that adds no node, and the job waited its
    whole timeout "for the autoscaler"."""
    try:
        from ray.autoscaler.v2.utils import is_autoscaler_v2

        if not is_autoscaler_v2(fetch_from_server=True):
            return False
    except Exception:  # noqa: BLE001 - a Ray without v2's flag: no autoscaler we can ask
        return False
    return head_instance_id() != ""


def head_instance_id() -> str | None:
    """The cloud instance id the head node registered with ("" for none; None where it cannot be read). Each node
    provider starts the head with RAY_CLOUD_INSTANCE_ID, which v2 requires to manage it (`ray up`, KubeRay, Ray's fake
    multi-node provider); a plain `ray start --head` or `ray.init()` sets none, and v2 then runs without an autoscaling
    config, over its read-only provider (ray/autoscaler/v2/monitor.py)."""
    import ray

    try:
        from ray._raylet import GcsClient
        from ray.autoscaler.v2.sdk import get_cluster_resource_state
        from ray.autoscaler.v2.utils import is_head_node

        state = get_cluster_resource_state(GcsClient(address=ray.get_runtime_context().gcs_address))
    except Exception:  # noqa: BLE001 - unknown: the autoscaler is asked, as before
        return None
    return next((n.instance_id for n in state.node_states if is_head_node(n)), None)


def wait_for(need: dict[str, float], resources: Callable[[], dict], timeout_s: float,
             say: Callable[[str], None] = print, poll_s: float = POLL_S,
             clock: Callable[[], float] = time.monotonic, field: str = "scaling.capacity_timeout_s",
             pending: Callable[[], str] = lambda: "") -> None:
    """Until `resources()` covers `need` and `pending()` (what else is awaited, in words) is "", saying where it
    stands every ~10 s; RuntimeError after `timeout_s`."""
    start = next_line = clock()
    while what := ", ".join(w for w in (describe(shortfall(need, resources())), pending()) if w):
        waited = clock() - start
        if waited >= timeout_s:
            raise RuntimeError(f"the autoscaler did not bring {what} within {field}={timeout_s:g} s: check the "
                               "cluster's node types, quotas and `ray status`; a cluster with no node provider (a "
                               "`ray start` head, RAY_enable_autoscaler_v2=1 or not) adds none: ask for what its "
                               "nodes hold")
        if clock() >= next_line:
            say(f"[cluster] waiting for the autoscaler: {what}, {int(waited) // 60}m{int(waited) % 60:02d}s")
            next_line = clock() + 10
        time.sleep(poll_s)


def unplaced(bundles, nodes: list[dict], distinct: int = 0) -> dict[str, float] | None:
    """The first of `bundles` (in left_over's order) that no node's resources left can hold whole, each bundle
    taking from one node as a placement group's does, and each of the first `distinct` from a node none of them took
    (STRICT_SPREAD); None when all fit. A cluster of 3 nodes of 4 CPUs has the 11 CPUs two workers of 5 and Ray
    Data's 1 ask for, and no node for either worker."""
    return next(iter(left_over(bundles, nodes, distinct)), None)


def left_over(bundles, nodes: list[dict], distinct: int = 0) -> list[dict[str, float]]:
    """Every bundle `unplaced` would find no room for, the others placed past it: first fit, the spread bundles first
    (the most constrained: Ray Data's CPU on the node one of them needs refused a cluster they fit), the others
    largest first, or smallest first where that leaves fewer over (10 workers of 0.7 CPU and Ray Data's 1 on nodes
    of 7 and 1 CPUs: largest first put Ray Data's CPU on the 7, and a worker was left over that Ray places)."""
    size = {i: (bundles[i].get("GPU", 0.0), bundles[i].get("CPU", 0.0)) for i in range(len(bundles))}
    spread = sorted(range(distinct), key=size.get, reverse=True)
    rest = sorted(range(distinct, len(bundles)), key=size.get, reverse=True)
    out = _first_fit(bundles, nodes, distinct, spread + rest)
    return out and min(out, _first_fit(bundles, nodes, distinct, spread + rest[::-1]), key=len)


def _first_fit(bundles, nodes: list[dict], distinct: int, order: list[int]) -> list[dict[str, float]]:
    left, taken, out = [dict(node) for node in nodes], set(), []
    for i in order:
        bundle, spread = bundles[i], i < distinct
        home = next((j for j, n in enumerate(left) if not (spread and j in taken) and holds(n, bundle)), None)
        if home is None:
            out.append(bundle)
            continue
        taken |= {home} if spread else set()
        for k, v in bundle.items():
            left[home][k] = round(left[home].get(k, 0.0) - v, UNIT)
    return out


def holds(node: dict, bundle: dict) -> bool:
    """Whether `node`'s resources (left) hold `bundle` whole, counted in Ray's units."""
    return all(round(node.get(k, 0.0), UNIT) >= round(v, UNIT) for k, v in bundle.items())


def how_many(node: dict, bundle: dict) -> int:
    """How many of `bundle` an empty `node` holds, counted in Ray's units (3.0 // 0.1 is 29.0 in floats)."""
    units = [int(round(node.get(k, 0.0) * 10**UNIT)) // int(round(v * 10**UNIT)) for k, v in bundle.items() if v > 0]
    return min(units, default=0)


def held(bundle: dict, demand: Demand, nodes: list[dict]) -> tuple[int, int]:
    """(how many, of how many) of the demand's bundles like `bundle` the nodes hold, the others placed beside them."""
    alike = sum(b == bundle for b in demand.bundles)
    return alike - sum(b == bundle for b in left_over(demand.bundles, nodes)), alike


def alive_nodes() -> list[dict[str, float]]:
    import ray

    return [{k: float(v) for k, v in n["Resources"].items()} for n in ray.nodes() if n.get("Alive")]


def misplaced(demand: Demand, nodes: list[dict]) -> str | None:
    """Why `nodes` cannot hold `demand`, each bundle whole on one node and the workers as their strategy places them
    (one line naming what to change); None when they can."""
    if unplaced(demand.placed(), nodes, demand.distinct) is None:
        return None
    loose = unplaced(demand.bundles, nodes)  # what no node holds, whatever the strategy
    if loose is None and demand.distinct:
        homes = sum(holds(n, demand.bundles[0]) for n in nodes)  # as awaited counts them: not a 0-CPU head
        return (f"scaling.placement_strategy=STRICT_SPREAD puts each of the {demand.distinct} workers on a node of "
                f"its own, and the Ray cluster has {homes} node(s) that hold one: use PACK or SPREAD, fewer "
                f"scaling.num_workers, or add nodes")
    if loose is None and demand.packed:
        pack = demand.placed()[0]
        largest = _largest(nodes)
        return (f"scaling.placement_strategy=STRICT_PACK puts all {demand.packed} workers on one node, which needs "
                f"{describe_need(pack)} (and Ray Data a CPU on some node), and the Ray cluster's largest node has "
                f"{describe_need(largest, pack)}: use PACK or SPREAD, fewer scaling.num_workers, or larger nodes")
    # the GPU hint where no node has the bundle's GPUs; where one has, it lacks the CPUs beside them
    short = [k for k in loose if not any(holds(n, {k: loose[k]}) for n in nodes)] or ["CPU"]
    if unplaced([loose], nodes) is None:  # some fit: too many for the nodes, not too large for any
        best = max(nodes, key=lambda n: (how_many(n, loose), n.get("CPU", 0.0)))
        count, alike = held(loose, demand, nodes)
        if count == 0:  # it fits a node alone, not beside the others (Ray Data's CPU beside the workers)
            return (f"no node of the Ray cluster has room for the bundle of {describe_need(loose)} needed by "
                    f"{demand.needed_by} beside the other bundles (a node holds {how_many(best, loose)} such bundles "
                    f"alone: {describe_need(best, loose)}). {demand.advice(short)}")
        return (f"the Ray cluster's nodes hold {count} of the {alike} {_bundles(alike)} of {describe_need(loose)} "
                f"needed by {demand.needed_by} (a node holds {how_many(best, loose)} at most: "
                f"{describe_need(best, loose)}). {demand.advice(short)}")
    # compared with a node that has the bundle's GPUs where one has: a larger CPU node beside them is no answer
    extra = {k: v for k, v in loose.items() if k != "CPU"}
    largest = max(nodes, key=lambda n: (holds(n, extra), n.get("CPU", 0.0)), default={})
    which = f"largest node with {describe_need(extra)}" if extra and holds(largest, extra) else "largest node"
    return (f"no node of the Ray cluster holds a bundle of {describe_need(loose)} needed by {demand.needed_by} (its "
            f"{which}: {describe_need(largest, loose)}). {demand.advice(short)}")


def _bundles(n: int) -> str:
    return "bundle" if n == 1 else "bundles"


def _largest(nodes: list[dict]) -> dict:
    """The node a STRICT_PACK placement would fit best: most GPUs, then most CPUs."""
    return max(nodes, key=lambda n: (n.get("GPU", 0.0), n.get("CPU", 0.0)), default={})


def awaited(demand: Demand, nodes: list[dict]) -> str:
    """What the workers still wait for as their strategy places them, in words, and what the nodes up now give
    them ("" where PACK's or SPREAD's bundles are all held)."""
    if not demand.strict:
        if (loose := unplaced(demand.bundles, nodes)) is None:
            return ""
        count, alike = held(loose, demand, nodes)
        if count == 0 and unplaced([loose], nodes) is None:  # as misplaced says it: room beside the others
            return f"a node with room for the bundle of {describe_need(loose)} beside the other bundles"
        return f"nodes that hold the {alike} {_bundles(alike)} of {describe_need(loose)} (those up hold {count})"
    if demand.distinct:
        worker = demand.bundles[0]
        homes = sum(holds(n, worker) for n in nodes)
        return (f"a node each for the {demand.distinct} workers of scaling.placement_strategy=STRICT_SPREAD "
                f"({homes} node(s) up that hold one)")
    pack = demand.placed()[0]
    largest = _largest(nodes)
    return (f"one node for all {demand.packed} workers of scaling.placement_strategy=STRICT_PACK "
            f"({describe_need(pack)}; the largest up: {describe_need(largest, pack)})")


def ensure_capacity(demand: Demand, say: Callable[[str], None] = print) -> None:
    """Return once the connected cluster has what `demand` asks for, waiting for the autoscaler if there is one (the
    request is withdrawn once the nodes are there: the workers' placement group then holds them). Without one, each
    bundle must also fit one node, and the workers as their strategy places them: Ray Train waited for a placement
    no node could give, then failed late. With one, the workers are waited for as placed too (PACK's and SPREAD's
    bundles each on a node, a strict strategy's as it places them): Ray Train's placement group otherwise timed out
    and was retried every minute, without end."""
    import ray

    need = demand.total()
    short = shortfall(need, ray.cluster_resources())
    grows = has_autoscaler()
    if not grows:
        if short:
            raise RuntimeError(refusal(demand, short))
        if why := misplaced(demand, alive_nodes()):
            raise RuntimeError(why)
        return
    if not short and not misplaced(demand, alive_nodes()):
        return
    from ray.autoscaler.sdk import request_resources
    from ray.util.placement_group import placement_group, remove_placement_group

    # request_resources packs bundles onto nodes and knows no strategy: a strict one's workers are asked for by a
    # placement group of that strategy (the one Ray Train makes next), held for the wait and removed after it
    workers = demand.distinct or demand.packed
    request_resources(bundles=[dict(b) for b in demand.bundles[workers:]])
    group = placement_group([dict(b) for b in demand.bundles[:workers]], strategy=demand.strict) if workers else None
    placed = group.ready() if group is not None else None

    def pending() -> str:  # what the workers still wait for as placed, in words; "" once they are placed
        if placed is not None:
            return "" if ray.wait([placed], timeout=0)[0] else awaited(demand, alive_nodes())
        # PACK/SPREAD: a node type at its cap can bring the sum and not the bundles, which Ray Train then waited for
        # without end; while the sum is short, its shortfall alone is said
        return "" if shortfall(need, ray.cluster_resources()) else awaited(demand, alive_nodes())

    try:
        wait_for(need, ray.cluster_resources, demand.timeout_s, say, field=demand.timeout_field, pending=pending)
        say(f"[cluster] the autoscaler brought {', '.join(f'{k} {v:g}' for k, v in need.items())}")
    finally:
        request_resources(bundles=[])
        if group is not None:
            remove_placement_group(group)
