"""Connect to the Ray cluster a job runs on, or start a local one that listens on loopback only."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from bert_core.config import ConfigError

ANSWER_S = 5.0  # a live GCS accepts a connection at once; Ray's own join of a dead one waited 10 minutes and more


def _local_cluster_file() -> Path:
    """Where `ray start` records the cluster it started and `ray.init()` looks for one: Ray's default temp dir
    (RAY_TMPDIR, else TMPDIR on Linux, else /tmp; ray._common.utils.get_ray_address_file), read without importing
    ray."""
    root = os.environ.get("RAY_TMPDIR") or (os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None)
    return Path(root or "/tmp") / "ray" / "ray_current_cluster"


def prefer_loopback() -> None:
    """Call before `import ray`. When this process will start its own Ray, make it bind 127.0.0.1.

    Ray resolves a node's IP to the machine's routable address even for a single-machine cluster;
    this switch (read once, when ray is imported) keeps every Ray port on loopback. It is left alone
    when joining an existing cluster, whose nodes must keep the addresses they registered with.
    """
    if starts_local_ray():
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


PREEMPTION_WATCHER = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"  # Ray Train passes it from the driver to its controller


def starts_local_ray() -> bool:
    """Whether `init_ray` will start a Ray of its own on this machine: no RAY_ADDRESS, no `ray start` here,
    and no Ray already running in this process (read without importing ray)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS", "")
    if address == "local":  # Ray's word for a new instance on this machine, whatever runs beside it
        return True
    return not address and not _local_cluster_file().exists()


def _joins_local_cluster() -> str:
    """The address of the `ray start` cluster on this machine that `ray.init()` is about to join ("" for none):
    a job that silently joined a leftover cluster would run on whatever that cluster has."""
    if os.environ.get("RAY_ADDRESS") or not _local_cluster_file().exists():
        return ""
    return _local_cluster_file().read_text().strip() or "address unknown"


def _require_answer(address: str) -> None:
    """Refuse the `ray start` cluster recorded in the local cluster file when nothing listens at its GCS address, the
    one `ray.init()` joins: a head killed without `ray stop` (OOM, kill -9, a reboot) leaves the file, and Ray then
    retries the address for many minutes, saying so only in C++ warnings. An address we cannot parse is left to Ray."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=ANSWER_S).close()
    except OSError as e:
        raise ConfigError(f"the Ray cluster recorded in {_local_cluster_file()} ({address}) does not answer "
                          f"({e.strerror or e}): a `ray start` that ended without `ray stop` left it there; run "
                          "`ray stop` (which removes the file) or delete it, or set RAY_ADDRESS=local to start a "
                          "Ray for this job alone") from None


def init_ray() -> str:
    """Inside `ray job submit` (RAY_ADDRESS set) or beside `ray start`, connect; else start locally.

    No resources are passed: a job must not redefine the cluster it was submitted to.
    Returns the dashboard URL ("" when the dashboard is not running).
    """
    import ray

    from jobs.runtime import console

    if not ray.is_initialized():
        if starts_local_ray():
            # Ray Train's preemption watcher (an actor per worker group, polling the GCS for the nodes a cloud is
            # about to reclaim) has nothing to watch on a Ray this job starts on one machine; a user's setting wins
            os.environ.setdefault(PREEMPTION_WATCHER, "0")
        joins = _joins_local_cluster()
        if joins:
            _require_answer(joins)
        ray.init(log_to_driver=True, logging_level=console.ray_logging_level())
        console.install_worker_filter()
        if joins:
            print(f"[cluster] joined the Ray cluster already running on this machine ({joins}, started by "
                  "`ray start`); `ray stop` ends it", flush=True)
    console.quiet_ray_data()
    url = ray._private.worker.get_dashboard_url() or ""
    return url if not url or url.startswith("http") else f"http://{url}"


def on_driver_node() -> dict:
    """Actor options that place a run's bookkeeping actor (the data-position tracker, the rollback ledger) on the
    driver's node, as Ray Train places its controller. Left to Ray, it lands on any node, often a worker's, and a
    worker node lost mid-run (a preempted VM) would take it along: the restarted workers could not learn where the
    data stood, and the run would end instead of resuming."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)}


def refuse_sqlite_across_machines(tracking_uri: str, addresses: set[str] | None = None, grows: bool = False) -> None:
    """Refuse a SQLite tracking store when the cluster's nodes are on more than one machine (`addresses`: the
    alive nodes' host names, read from Ray when None: nodes of one machine may listen on several loopback addresses,
    as the e2e tests' two-node clusters do, 127.0.0.1 and 127.0.0.3), or when it `grows` (an autoscaler will add
    machines a job that did not wait for them cannot see yet: a sweep). Rank 0 and sweep trials log from whichever
    node they land on: to a file of that machine (the run's metrics scattered over copies nobody reads) or one file
    over shared storage, whose locks SQLite cannot rely on ("database is locked" hours into a run). Nodes on one
    machine share it."""
    if not tracking_uri.startswith("sqlite:"):
        return
    if grows:
        raise ValueError(f"tracking.tracking_uri={tracking_uri} is a SQLite file, but this Ray cluster's autoscaler "
                         "adds machines, whose trials cannot share it. Track to an MLflow server "
                         "(tracking.tracking_uri=http://HOST:5000, cluster/README.md)")
    if addresses is None:
        import ray

        addresses = {n.get("NodeManagerHostname") or n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")}
    if len(addresses) > 1:
        raise ValueError(f"tracking.tracking_uri={tracking_uri} is a SQLite file, but this Ray cluster's nodes are "
                         f"on {len(addresses)} machines ({', '.join(sorted(addresses))}): runs on other machines "
                         "cannot share it. Track to an MLflow server (tracking.tracking_uri=http://HOST:5000, "
                         "cluster/README.md)")
