"""cluster/: the launcher YAML, KubeRay manifests, runtime env and DeepSpeed templates parse and keep
their essentials -- Ray's own schema, token auth on every node, GPUs on the workers, versions equal to
the pins, and an entrypoint whose config loads through the same code path as `jobs/pretrain.py`. What the
DeepSpeed templates hold: test_deepspeed_templates.py.
"""

import copy
import json
import re
import shlex
import time
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config
from tests.markdown import commands, flags_in_help

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
LAUNCHER = CLUSTER / "launcher" / "aws-gpu.yaml"
KUBERAY = CLUSTER / "kuberay"
SHARED = "/mnt/shared"  # where every node and pod sees the shared storage


def pinned(package: str) -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (version,) = [m.group(1) for d in deps if (m := re.fullmatch(rf"{package}(?:\[[^\]]*\])?==(\S+)", d))]
    return version


def load(path: Path):
    return yaml.safe_load(path.read_text())


def load_all(path: Path) -> list:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def ray_start(commands: list[str]) -> list[str]:
    """The shell words of the one `ray start` invocation, with its env-var prefix."""
    segments = [s for c in commands for s in c.split(";") if "ray start" in s]
    assert len(segments) == 1, commands
    return shlex.split(segments[0])


def test_every_template_parses():
    files = sorted(p for p in CLUSTER.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    assert {p.relative_to(CLUSTER).as_posix() for p in files} >= {
        "launcher/aws-gpu.yaml", "kuberay/raycluster.yaml", "kuberay/rayjob.yaml", "runtime-env.yaml",
        "deepspeed/zero1.json", "deepspeed/zero2.json", "deepspeed/zero3.json", "deepspeed/zero3-offload.json"}
    for p in files:
        docs = [json.loads(p.read_text())] if p.suffix == ".json" else load_all(p)
        assert docs and all(isinstance(d, dict) and d for d in docs), p


# --- Ray cluster launcher ------------------------------------------------------------------------

def test_launcher_keys_are_rays_schema_and_pass_ray_ups_checks():
    import ray.autoscaler
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = load(LAUNCHER)
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(config, schema)  # additionalProperties: false -> no invented keys
    validate_config(prepare_config(copy.deepcopy(config)))  # what `ray up` runs before launching
    assert config["provider"]["type"] == "aws" and config["provider"]["region"]


def test_launcher_token_auth_on_every_node():
    config = load(LAUNCHER)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        words = ray_start(config[key])
        assert "RAY_AUTH_MODE=token" in words[:words.index("ray")], key
    # The locally generated token lands where `ray start` looks on every node (file_mounts reach all).
    assert config["file_mounts"].get("~/.ray/auth_token") == "~/.ray/auth_token"
    assert "-e RAY_AUTH_MODE=token" in config["docker"]["run_options"]  # clients on the nodes too


def test_launcher_gpu_workers_cap_the_object_store_as_kuberays_do():
    """Without a cap Ray took 95% of the container's /dev/shm (sized by the host's memory: ~190 GB on a p4d) for
    its object store, and NCCL's segments could find no room; the KubeRay workers were capped, the launcher's not."""
    words = ray_start(load(LAUNCHER)["worker_start_ray_commands"])
    caps = {w.split("=", 1)[1] for w in words if w.startswith("--object-store-memory=")}
    kuberay = {g["rayStartParams"]["object-store-memory"] for name in ("raycluster.yaml", "rayjob.yaml")
               for doc in yaml.safe_load_all((KUBERAY / name).read_text()) if doc
               for g in _worker_groups(doc)}
    assert caps == kuberay == {"40000000000"}


def _worker_groups(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    return (spec.get("rayClusterSpec") or spec).get("workerGroupSpecs", [])


def test_every_job_that_may_start_ray_binds_it_to_loopback_first():
    """A Ray a job starts on this machine listens on 127.0.0.1 only if prefer_loopback ran before ray was imported:
    jobs/promote.py's (it reads your files with Ray Data) listened on the machine's routable address."""
    starters = [p for p in sorted((ROOT / "jobs").glob("*.py")) if "init_ray()" in p.read_text()]
    assert {p.name for p in starters} >= {"finetune.py", "predict.py", "pretrain.py", "promote.py", "sweep.py"}
    assert [p.name for p in starters if "prefer_loopback()" not in p.read_text()] == []


def test_launcher_dashboard_only_on_loopback():
    words = ray_start(load(LAUNCHER)["head_start_ray_commands"])
    assert "--head" in words
    hosts = [w.split("=", 1)[1] for w in words if w.startswith("--dashboard-host=")]
    assert hosts == ["127.0.0.1"]


def _keys(node, key: str) -> list:
    """Every value stored under `key` anywhere in a parsed YAML tree."""
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == key] + [x for v in node.values() for x in _keys(v, key)]
    return [x for v in node for x in _keys(v, key)] if isinstance(node, list) else []


def test_mlflow_server_and_dashboard_stay_inside_the_cluster():
    """Inside a cluster MLflow and the dashboard listen on all interfaces of their pod or head node (rank 0
    on a GPU worker logs to MLflow; the submitter reaches the dashboard), so what keeps them private is the
    network around them: no Service but ClusterIP, no Ingress, no host ports or host network, and the
    launcher keeps Ray's own security group (the cluster's nodes and SSH only). Started by hand, the
    server the README shows binds 127.0.0.1."""
    docs = [d for f in sorted(KUBERAY.glob("*.yaml")) for d in load_all(f)]
    assert "Ingress" not in {d["kind"] for d in docs}
    assert [d["spec"].get("type", "ClusterIP") for d in docs if d["kind"] == "Service"] == ["ClusterIP"]
    assert set(_keys(docs, "serviceType")) <= {"ClusterIP"}
    assert not _keys(docs, "hostNetwork") and not _keys(docs, "hostPort")
    launcher = load(LAUNCHER)
    assert "security_group" not in launcher["provider"]
    assert not re.search(r"--dashboard-host=(?!127\.0\.0\.1)", json.dumps(launcher))
    servers = re.findall(r"^mlflow server .*$", (ROOT / "README.md").read_text(), re.M)
    assert servers and all("--host 127.0.0.1" in line for line in servers), servers


def test_launcher_gpu_workers_image_and_install():
    config = load(LAUNCHER)
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    workers = [t for name, t in types.items() if name != config["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0 and head["resources"].get("CPU") == 0
    assert workers and all(t["resources"]["GPU"] > 0 and t["max_workers"] >= 1 for t in workers)
    assert sum(t["max_workers"] for t in workers) <= config["max_workers"]
    assert config["docker"]["image"] == f"rayproject/ray:{pinned('ray')}-py311-gpu"
    # Ray's default AMI (none given) is a CUDA 11.2 DLAMI: the CUDA 12+ image and torch do not run on its driver
    for name, t in types.items():
        image = t["node_config"].get("ImageId", "")
        assert image.startswith("ami-") or image.startswith("resolve:ssm:/aws/service/deeplearning/ami/"), name

    # The repository is mounted and installed editable; the CPU torch pin never reaches a GPU node.
    (code_dir,) = [remote for remote, local in config["file_mounts"].items() if local == "."]
    setup = "\n".join(config["setup_commands"])
    assert f'-e "{code_dir.replace("~", "$HOME", 1)}[cloud]"' in setup  # [cloud]: s3fs, for s3:// data.sources
    assert "grep -v '^torch=='" in setup and "-c /tmp/constraints-gpu.txt" in setup
    assert "+cpu" not in setup and "download.pytorch.org/whl/cpu" not in setup
    assert {"/.venv", "/data", "/runs"} <= set(config["rsync_exclude"])


# --- KubeRay -------------------------------------------------------------------------------------

def cluster_specs() -> dict:
    job = load(KUBERAY / "rayjob.yaml")
    return {"raycluster": load(KUBERAY / "raycluster.yaml")["spec"], "rayjob": job["spec"]["rayClusterSpec"]}


def ray_containers(spec: dict) -> list[dict]:
    pods = [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]
    return [c for pod in pods for c in pod["spec"]["containers"]]


def assert_token_env(container: dict, secret: str):
    env = {e["name"]: e for e in container.get("env", [])}
    assert env["RAY_AUTH_MODE"]["value"] == "token", container["name"]
    ref = env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]  # from the Secret, never a literal value
    assert "value" not in env["RAY_AUTH_TOKEN"] and ref == {"name": secret, "key": "auth_token"}


def test_kuberay_api_kinds_and_versions():
    assert load(KUBERAY / "raycluster.yaml")["apiVersion"] == "ray.io/v1"
    assert load(KUBERAY / "raycluster.yaml")["kind"] == "RayCluster"
    assert load(KUBERAY / "rayjob.yaml")["apiVersion"] == "ray.io/v1"
    assert load(KUBERAY / "rayjob.yaml")["kind"] == "RayJob"
    ray = pinned("ray")
    for spec in cluster_specs().values():
        assert spec["rayVersion"] == ray
        assert all(f"ray{ray}" in c["image"] or f"ray:{ray}" in c["image"] for c in ray_containers(spec))
    assert re.search(rf"^FROM rayproject/ray:{re.escape(ray)}-py311-gpu$",
                     (CLUSTER / "docker" / "Dockerfile").read_text(), re.M)


def test_rayjob_runs_the_same_cluster_as_raycluster_starting_no_gpu_pod():
    """The same cluster, GPU groups starting at none in both: KubeRay submits a RayJob only once every pod is Ready,
    so `replicas: 2` started two 8-GPU pods before the job read its config, and a config refusal (a missing corpus,
    an unreachable MLflow) cost them, on each of backoffLimit's 2 retries. The job asks the autoscaler
    (ensure_capacity); a refusal is no transient failure, retried once at most. (A resubmission on another basis or
    layout is refused after ensure_capacity and prepare: it still waits for the GPU nodes.)"""
    specs = cluster_specs()
    assert [g["replicas"] for g in specs["rayjob"]["workerGroupSpecs"]] == [0]
    assert specs["rayjob"] == specs["raycluster"]
    assert load(KUBERAY / "rayjob.yaml")["spec"]["backoffLimit"] <= 1


@pytest.mark.parametrize("name", ["raycluster", "rayjob"])
def test_kuberay_token_auth_on_head_every_worker_group_and_submitter(name):
    spec = cluster_specs()[name]
    auth = spec["authOptions"]
    assert auth["mode"] == "token"
    assert spec["workerGroupSpecs"]
    for container in ray_containers(spec):
        assert_token_env(container, auth["secretName"])
    assert_token_env(spec["autoscalerOptions"], auth["secretName"])  # its sidecar inherits no container's env
    if name == "rayjob":
        (submitter,) = load(KUBERAY / "rayjob.yaml")["spec"]["submitterPodTemplate"]["spec"]["containers"]
        assert_token_env(submitter, auth["secretName"])


def test_the_mlflow_servers_are_one_sqlite_writer_and_idle_gpus_wait_for_a_preparing_job():
    """The templates' MLflow servers keep their SQLite store on shared (NFS) storage: one process writes it (mlflow
    server starts 4 by default), and no job runner (MLflow 3 with huey starts one and seven huey consumers on a
    database store, its periodic tasks on the same file). KubeRay's autoscaler keeps idle GPU pods as long as the
    launcher does (10 min), so a job's corpus preparation, between the nodes' arrival and its workers' start, does
    not lose them."""
    launcher = "\n".join(load(LAUNCHER)["head_start_ray_commands"])
    (command,) = [c for c in launcher.split("\n") if "mlflow server" in c]
    assert "--workers 1" in command and "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false nohup mlflow server" in command
    container = load_all(KUBERAY / "mlflow.yaml")[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][container["command"].index("--workers") + 1] == "1"
    assert {"name": "MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "value": "false"} in container["env"]
    assert load(LAUNCHER)["idle_timeout_minutes"] >= 10
    for name, spec in cluster_specs().items():
        assert spec["autoscalerOptions"]["idleTimeoutSeconds"] >= 600, name


def test_the_launchers_mlflow_line_starts_the_server_from_the_shell_ray_runs_it_in(tmp_path):
    """Ray runs a head command as `bash -c '<the line>'` (in docker exec, under bash --login): a guard of
    `pgrep -f 'mlflow server'` found that very shell, whose command line holds the words, and never started the
    server; every job was then refused at its tracking check. Run as Ray runs it, with `mlflow` a stand-in that
    records its arguments and nothing answering on the port, the line starts it."""
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 5000)) == 0:
            pytest.skip("something listens on 127.0.0.1:5000 here")
    (command,) = [c for c in load(LAUNCHER)["head_start_ray_commands"] if "mlflow server" in c]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = f"#!/bin/sh\necho \"$MLFLOW_SERVER_ENABLE_JOB_EXECUTION $@\" > {tmp_path}/started\n"  # its env too
    (bin_dir / "mlflow").write_text(stub)
    (bin_dir / "mlflow").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run(["bash", "-c", command.replace("/tmp/mlflow-server.log", f"{tmp_path}/log")], env=env,
                   check=True, timeout=60)
    for _ in range(100):
        if (tmp_path / "started").exists():
            break
        time.sleep(0.1)
    assert (tmp_path / "started").read_text().startswith("false server --host 0.0.0.0 --port 5000 --workers 1")


def test_kuberay_manifests_commit_no_secret():
    for path in KUBERAY.glob("*.yaml"):
        assert all(d.get("kind") != "Secret" for d in load_all(path)), path


def test_kuberay_gpu_workers_shm_and_one_shared_volume():
    claim = load(KUBERAY / "storage.yaml")
    assert "ReadWriteMany" in claim["spec"]["accessModes"]
    mlflow_pod = load_all(KUBERAY / "mlflow.yaml")[0]["spec"]["template"]
    spec = cluster_specs()["raycluster"]
    pods = [spec["headGroupSpec"]["template"], mlflow_pod] + [g["template"] for g in spec["workerGroupSpecs"]]
    for pod in pods:  # the same claim at the same path everywhere: checkpoints and MLflow are shared
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
        assert volumes[mounts[SHARED]]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    for group in spec["workerGroupSpecs"]:
        pod = group["template"]["spec"]
        (container,) = pod["containers"]
        assert int(container["resources"]["limits"]["nvidia.com/gpu"]) > 0
        shm = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}["/dev/shm"]
        assert {v["name"]: v for v in pod["volumes"]}[shm]["emptyDir"]["medium"] == "Memory"
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    image = load_all(KUBERAY / "mlflow.yaml")[0]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(f":v{pinned('mlflow')}")


def test_rayjob_entrypoint_config_loads_and_fits_the_cluster():
    job = load(KUBERAY / "rayjob.yaml")["spec"]
    words = shlex.split(job["entrypoint"])
    assert words[:3] == ["python", "jobs/pretrain.py", "--config"]
    assert (ROOT / words[3]).is_file()
    cfg = load_config(PretrainConfig, ROOT / words[3], words[4:])  # validates, as the job does first

    assert cfg.output_dir.startswith(SHARED) and cfg.data.output_root.startswith(SHARED)
    assert cfg.tracking.artifact_location == ""  # the server's store: read through it from outside the cluster too
    service = load_all(KUBERAY / "mlflow.yaml")[1]
    assert cfg.tracking.tracking_uri == f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    assert cfg.run_name  # a fixed name: a RayJob retry resumes the run instead of starting over
    # MLflow >= 3.5 refuses (403) a Host header it was not told of: the Service name the job calls it by
    from mlflow.server.security_utils import is_allowed_host_header

    command = load_all(KUBERAY / "mlflow.yaml")[0]["spec"]["template"]["spec"]["containers"][0]["command"]
    allowed = command[command.index("--allowed-hosts") + 1].split(",")
    host = cfg.tracking.tracking_uri.split("://", 1)[1]
    for name in (host, "bert-foundry-mlflow.default.svc.cluster.local:5000", "localhost:5000"):
        assert is_allowed_host_header(allowed, name), name
    assert not is_allowed_host_header(allowed, "attacker.example.com:5000")

    workers = job["rayClusterSpec"]["workerGroupSpecs"]  # as many pods as the autoscaler may start
    limits = [(g["maxReplicas"], g["template"]["spec"]["containers"][0]["resources"]["limits"]) for g in workers]
    gpus = sum(n * int(lim["nvidia.com/gpu"]) for n, lim in limits)
    cpus = sum(n * float(lim["cpu"]) for n, lim in limits)
    assert cfg.scaling.use_gpu and cfg.deepspeed.precision == "bf16"
    assert cfg.scaling.num_workers <= gpus  # one Ray Train worker per GPU
    assert cfg.scaling.num_workers % int(limits[0][1]["nvidia.com/gpu"]) == 0  # whole 8-GPU pods
    assert cfg.scaling.num_workers * cfg.scaling.cpus_per_worker + 1 <= cpus  # pretrain._check_capacity
    assert job["shutdownAfterJobFinishes"] is True and job["ttlSecondsAfterFinished"] > 0


# --- runtime env ---------------------------------------------------------------------------------

def test_runtime_env_is_valid_and_matches_the_rayjob():
    from ray.runtime_env import RuntimeEnv

    env = load(CLUSTER / "runtime-env.yaml")
    assert set(env) <= RuntimeEnv.known_fields  # RuntimeEnv accepts unknown keys as plugins; we don't
    RuntimeEnv(**env)  # Ray's own validation (env_vars must be str -> str, ...)
    assert env["working_dir"] == "."
    assert {"/.venv", "/data", "/runs", "/mlflow.db"} <= set(env["excludes"])
    assert env["env_vars"]["HF_HUB_OFFLINE"] == "1" and env["env_vars"]["TOKENIZERS_PARALLELISM"] == "false"
    assert env["env_vars"]["DS_ACCELERATOR"] == "cuda"
    assert any(k.startswith("NCCL_") for k in env["env_vars"])
    job_env = yaml.safe_load(load(KUBERAY / "rayjob.yaml")["spec"]["runtimeEnvYAML"])
    assert set(job_env) <= RuntimeEnv.known_fields
    RuntimeEnv(**{k: v for k, v in job_env.items() if k != "working_dir"})  # that path is in the image
    (workdir,) = re.findall(r"^WORKDIR (\S+)$", (CLUSTER / "docker" / "Dockerfile").read_text(), re.M)
    assert job_env["working_dir"] == workdir  # the code baked into the image every pod runs
    assert job_env["env_vars"] == env["env_vars"]


# --- the commands cluster/README.md shows ---------------------------------------------------------

def submitted_commands(markdown: str) -> list[list[str]]:
    """The job command (after `--`) of every `ray job submit` in the markdown's bash blocks."""
    return [words[words.index("--") + 1:] for words in commands(markdown) if words[:3] == ["ray", "job", "submit"]]


def test_the_launcher_and_kuberay_pretrain_bert_base_from_one_config_with_only_uris_changed(monkeypatch):
    (launcher,) = submitted_commands((CLUSTER / "README.md").read_text())
    rayjob = shlex.split(load(KUBERAY / "rayjob.yaml")["spec"]["entrypoint"])
    configs = []
    for words in (launcher, rayjob):
        assert words[:4] == ["python", "jobs/pretrain.py", "--config", "configs/pretrain/cluster-base.yaml"]
        assert all(w.split("=", 1)[0].endswith("_uri") for w in words[4:]), words  # URIs only
        configs.append(load_config(PretrainConfig, ROOT / words[3], words[4:]))  # validated, as the job does first
    launched, kuberay = (c.to_dict() for c in configs)
    assert launched["tracking"].pop("tracking_uri").startswith("http://")  # the head's MLflow server
    assert kuberay["tracking"].pop("tracking_uri") == "http://bert-foundry-mlflow:5000"
    assert launched == kuberay
    assert launched["model"]["hidden_size"] == 768 and launched["model"]["num_hidden_layers"] == 12  # BERT-base
    assert launched["data"]["tokenizer"]["vocab_size"] == 30522
    assert launched["data"]["sources"] == [f"{SHARED}/corpus"] and not launched["corpus"]["harvest_installed_docs"]

    # as submitted jobs (Ray's copy of the working dir) every path they write is shared: none is refused
    from jobs.config.sections import refuse_relative_when_submitted

    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps({"runtime_env": {"working_dir": "gcs://pkg.zip"}}))
    for cfg in configs:
        assert all(v.startswith((SHARED, "http://")) for v in cfg.written_paths().values()), cfg.written_paths()
        refuse_relative_when_submitted(cfg.written_paths())


CLUSTER_README = [shlex.join(words) for words in commands((CLUSTER / "README.md").read_text())]


@pytest.mark.slow  # each runs a ray command line's parser (~2 s each): `make test`, not `make test-fast`
@pytest.mark.parametrize("command", CLUSTER_README, ids=[c[:60] for c in CLUSTER_README])
def test_every_cluster_readme_command_is_checked_here(command):
    """cluster/README.md's commands need a cloud account or a Kubernetes cluster: each one's flags are in its
    program's help, every file it names exists and is one this module's tests parse and validate, every name it
    uses is the manifests'. The two it shares with README.md are README.md's: the token command runs for real
    (tests/readme.py), the export sets what README.md's commands run under."""
    words = shlex.split(command)
    if words[0] == "export" or words[:2] == ["ray", "get-auth-token"]:
        readme = [shlex.join(w) for w in commands((ROOT / "README.md").read_text())]
        assert command in readme, command
        return
    flags_in_help(words[:words.index("--")] if "--" in words else words)
    if words[:2] in (["ray", "up"], ["ray", "dashboard"], ["ray", "down"]):
        assert ROOT / words[2] == LAUNCHER  # the file test_launcher_keys_are_rays_schema... validates
    elif words[:3] == ["ray", "job", "submit"]:
        # the runtime env test_runtime_env_is_valid_and_matches_the_rayjob checks; the job's config is loaded by
        # test_the_launcher_and_kuberay_pretrain_bert_base_from_one_config_with_only_uris_changed
        assert ROOT / words[words.index("--runtime-env") + 1] == CLUSTER / "runtime-env.yaml"
    elif words[:3] == ["ray", "job", "logs"]:
        submit = next(shlex.split(c) for c in CLUSTER_README if c.startswith("ray job submit"))
        assert words[words.index("--address") + 1] == submit[submit.index("--address") + 1]  # the job's cluster
    elif words[:2] == ["docker", "build"]:
        assert (ROOT / words[words.index("-f") + 1]).is_file() and words[-1] == "."
    elif words[:4] == ["kubectl", "create", "secret", "generic"]:
        for manifest in ("rayjob.yaml", "raycluster.yaml"):  # the secret the manifests read the token from
            assert f"secretName: {words[4]}" in (KUBERAY / manifest).read_text(), manifest
        # without --generate, a machine with no token yet prints nothing to stdout: kubectl stores an empty token
        # (exit 0), and every pod's `ray start` refuses to run
        assert "$(ray get-auth-token --generate)" in command, command
    elif words[:2] == ["kubectl", "apply"]:
        files = [words[i + 1] for i, w in enumerate(words) if w == "-f"]
        assert files and all((ROOT / f).parent == KUBERAY and (ROOT / f).is_file() for f in files), files
        assert all(load_all(ROOT / f) for f in files)  # manifests: test_kuberay_api_kinds_and_versions checks them
    elif words[:2] in (["kubectl", "get"], ["kubectl", "logs"]):
        assert words[-1].split("/")[-1] == load(KUBERAY / "rayjob.yaml")["metadata"]["name"], words
    else:
        pytest.fail(f"cluster/README.md command with no check here: {command}")


def test_the_image_leaves_out_what_git_ignores():
    """`COPY . .` takes what the build context holds: every path .gitignore names (a wheel cache of gigabytes, the
    mutation-testing trees, local runs and data) must be in the Dockerfile's ignore file too, as the launcher's
    rsync_filter leaves it off the nodes; in both ignore files: BuildKit reads the Dockerfile's, the legacy builder,
    kaniko and buildah the context's .dockerignore only (without it they copied .venv, runs and data)."""
    def entries(path):
        return {line.strip().removeprefix("**/").strip("/") for line in (ROOT / path).read_text().splitlines()
                if line.strip() and not line.startswith("#")}

    assert entries(".gitignore") - entries("cluster/docker/Dockerfile.dockerignore") == set()
    assert entries(".dockerignore") == entries("cluster/docker/Dockerfile.dockerignore")


def test_the_head_has_shared_memory_and_the_mlflow_server_probes_and_a_policy():
    """The head's object store needs a /dev/shm larger than a container's 64 MB; the MLflow server is probed on
    /health (exempt from --allowed-hosts, which a kubelet's Host header would fail) and only the Ray pods reach it:
    it has no login, and the registry's aliases decide what serves."""
    spec = cluster_specs()["raycluster"]
    head = spec["headGroupSpec"]["template"]["spec"]
    shm = {m["mountPath"]: m["name"] for m in head["containers"][0]["volumeMounts"]}["/dev/shm"]
    assert {v["name"]: v for v in head["volumes"]}[shm]["emptyDir"]["medium"] == "Memory"
    deployment, service, policy = load_all(KUBERAY / "mlflow.yaml")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    from mlflow.server.security_utils import HEALTH_ENDPOINTS

    assert "/health" in HEALTH_ENDPOINTS
    assert policy["kind"] == "NetworkPolicy" and policy["apiVersion"] == "networking.k8s.io/v1"
    assert policy["spec"]["podSelector"]["matchLabels"] == deployment["spec"]["template"]["metadata"]["labels"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {"matchExpressions": [{"key": "ray.io/cluster", "operator": "Exists"}]}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": service["spec"]["ports"][0]["port"]}]
