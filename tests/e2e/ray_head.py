"""Start a real Ray head (or worker node) with `ray start`, on loopback, and stop only what we started.

`ray stop` would end every Ray on the machine; instead we end the processes whose command line names
our private --temp-dir, with all their descendants (workers, agents, dashboard modules).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.readme import readme

RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports: all held open while they are chosen. Chosen one at a time (each socket closed before
    the next bind), the kernel can hand the same port out twice, and `ray start` fails on a port given two flags
    (seen: --dashboard-port and --metrics-export-port both 51925)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def ray_env() -> dict:
    env = dict(os.environ)
    env.update(RAY_AUTH_MODE="token", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    env.pop("RAY_ADDRESS", None)
    return env


@dataclass
class Node:
    temp_dir: str  # short, private: unix socket paths must stay under 108 bytes
    gcs_address: str
    dashboard_url: str | None
    ip: str = "127.0.0.1"  # this node's address; a driver joins with ray.init(..., _node_ip_address=ip)

    def stop(self) -> None:
        ours = [p for p in psutil.process_iter(["cmdline"])
                if self.temp_dir in " ".join(p.info["cmdline"] or [])]
        tree = {p.pid: p for p in ours}
        for p in ours:
            try:
                tree.update((c.pid, c) for c in p.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
        for p in tree.values():
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        # most go at once; the GCS and a few agents linger 10-15 s on SIGTERM (measured), and nothing of a test's
        # cluster needs a graceful end
        _, alive = psutil.wait_procs(list(tree.values()), timeout=2)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=15)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


PORT_FLAGS = ("--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
              "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port")


def _ports(ports: list[int]) -> list[str]:
    return [arg for flag, port in zip(PORT_FLAGS, ports, strict=True) for arg in (flag, str(port))]


def start_head(num_cpus: int = 2, resources: str | None = None, multi_node: bool = False,
               autoscaling_config: dict | None = None, temp_dir: str | None = None) -> Node:
    """A head on 127.0.0.1; with `multi_node`, on 127.0.0.2 so that other nodes can join (below). With
    `autoscaling_config` (a cluster config of Ray's fake multi-node provider), the head runs Ray's autoscaler, which
    starts worker nodes on this machine as a cloud provider would start VMs (Ray's own autoscaler tests do this)."""
    # `ray start` with token auth refuses to run without a token; `ray.init()` makes one, `ray start` does not,
    # so on a fresh machine (a clean CI runner) the head makes it first, as the cluster README tells users to
    # (README.md's two commands, run as written; `ray start` then gets the ports and folder that keep this head
    # apart from every other Ray on the machine)
    token = readme("ray get-auth-token --generate")
    subprocess.run([RAY, *token[1:]], env=ray_env(), check=True, capture_output=True, timeout=60)
    temp_dir = temp_dir or tempfile.mkdtemp(prefix="bf", dir="/tmp")  # where `ray start` writes its address file
    gcs, dash, client, *rest = free_ports(3 + len(PORT_FLAGS))  # distinct: one port for two flags fails
    ip = "127.0.0.2" if multi_node else "127.0.0.1"
    cmd = [RAY, *readme("ray start --head")[1:], "--node-ip-address", ip, "--port", str(gcs),
           "--dashboard-port", str(dash), "--include-dashboard", "true",
           "--ray-client-server-port", str(client), "--num-cpus", str(num_cpus), "--temp-dir", temp_dir,
           "--disable-usage-stats", *_ports(rest)]
    if resources:
        cmd += ["--resources", resources]
    env = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"} if multi_node else {}
    if autoscaling_config is not None:
        config = Path(temp_dir) / "autoscaling.json"
        provider = {**autoscaling_config["provider"], "gcs_address": f"{ip}:{gcs}"}  # where new nodes join
        config.write_text(json.dumps({**autoscaling_config, "provider": provider}))
        cmd += [f"--autoscaling-config={config}"]
        from ray.autoscaler._private.fake_multi_node.node_provider import FAKE_HEAD_NODE_ID

        env.update(RAY_FAKE_CLUSTER="1", AUTOSCALER_UPDATE_INTERVAL_S="1", RAY_enable_autoscaler_v2="1",
                   RAY_CLOUD_INSTANCE_ID=FAKE_HEAD_NODE_ID, RAY_OVERRIDE_NODE_ID_FOR_TESTING=FAKE_HEAD_NODE_ID)
    return _start(cmd, Node(temp_dir, f"{ip}:{gcs}", f"http://127.0.0.1:{dash}", ip), **env)


def start_worker(head: Node, num_cpus: int = 2, resources: str | None = None) -> Node:
    """A second node of a `multi_node` head's cluster on this machine, with its own resources.

    Nodes take loopback addresses other than 127.0.0.1 (head 127.0.0.2, this one 127.0.0.3):
    `ray start --address` refuses to join while the loopback switch is on, and with it off Ray
    rewrites 127.0.0.1 (but not the rest of 127/8) to the machine's routable address. Ray then
    listens on all interfaces, but every connection goes between loopback addresses.
    """
    temp_dir = tempfile.mkdtemp(prefix="bfw", dir="/tmp")
    cmd = [RAY, "start", "--address", head.gcs_address, "--node-ip-address", "127.0.0.3",
           "--num-cpus", str(num_cpus), "--temp-dir", temp_dir, "--disable-usage-stats",
           *_ports(free_ports(len(PORT_FLAGS)))]
    if resources:
        cmd += ["--resources", resources]
    return _start(cmd, Node(temp_dir, head.gcs_address, None, "127.0.0.3"), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1")


def _start(cmd: list[str], node: Node, **env) -> Node:
    try:
        subprocess.run(cmd, env={**ray_env(), **env}, check=True, capture_output=True, text=True, timeout=120)
    except BaseException:
        node.stop()  # a half-started node must not outlive the test
        raise
    return node
