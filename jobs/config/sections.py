"""The sections every job's configuration shares: optimizer, DeepSpeed, scaling, tracking, and the output-folder check.

One home for each: jobs/config/pretrain.py, finetune.py and sweep.py build their trees from these.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bert_core.config import ConfigError
from jobs.config.stores import (BARE_STORES, TRACKING_SCHEMES, check_sqlite_file, check_store_uri,  # noqa: F401
                                default_tracking_uri, from_environment, keeps_artifacts, local_path)  # (sections.*)
from jobs.registry.redaction import redact
from jobs.runtime.cluster import starts_local_ray

OPTIMIZERS = ("adamw", "lamb")
SCHEDULES = ("linear", "poly", "constant")
PRECISIONS = ("fp32", "bf16", "fp16")
PARTITION_METHODS = ("parameters", "uniform")  # how DeepSpeed's PipelineModule cuts layers into stages
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# MLflow's rule for a registry alias (mlflow.utils.validation._validate_model_alias_name and _reserved), which the
# registry applies only when an alias is set, after training: written out here because a config check imports no
# framework (tests/unit/test_config.py holds it to MLflow's own)
ALIAS_RULE = ("letters, digits, '_' and '-', at most 255 characters; not 'latest' (any case) nor v<number> "
              "(MLflow reserves them)")


PROMOTION_ALIASES = ("challenger", "champion")  # jobs/promote.py's own: moved only by a judged promotion


# MLflow's rule for a registered model's name (mlflow.utils.validation._validate_model_name), applied when the model
# is registered, after training: written out as ALIAS_RULE is (tests/unit/test_config.py holds it to MLflow's own)
MODEL_NAME_RULE = "not blank, without '/' or ':', not '.' nor starting with '..' (MLflow stores names as paths)"


def check_alias(name: str, alias: str) -> None:
    """Refuse `alias` (config field `name`) where MLflow would refuse it as a registered model's alias."""
    if (not re.fullmatch(r"[\w\-]{1,255}", alias) or alias.lower() == "latest"
            or re.fullmatch(r"[vV]\d+", alias)):
        raise ConfigError(f"{name} must be a registry alias MLflow accepts ({ALIAS_RULE}), got {alias!r}")


def check_model_name(name: str, model: str) -> None:
    """Refuse `model` (config field `name`) where MLflow's registry would refuse it as a registered model's name."""
    if not model.strip() or "/" in model or ":" in model or model == "." or model.startswith(".."):
        raise ConfigError(f"{name} must be a registered model name MLflow accepts ({MODEL_NAME_RULE}), got {model!r}")


def check_adam(section: str, beta1: float, beta2: float, eps: float) -> None:
    """Adam's moments average the past with betas in [0, 1) (beta1=1 zeroes its bias correction: NaN weights at the
    first step, which DeepSpeed's optimizers do not check); its step divides by sqrt(v) + eps, eps > 0."""
    for name, value in (("beta1", beta1), ("beta2", beta2)):
        if not 0 <= value < 1:
            raise ConfigError(f"{section}.{name} must be in [0, 1), got {value}")
    if eps <= 0:
        raise ConfigError(f"{section}.eps must be > 0, got {eps}")


def check_seed(name: str, seed: int) -> None:
    """A seed NumPy, PyTorch and the search algorithms all take: an integer in [0, 2**32) (NumPy refuses -1 in the
    workers, after the cluster started, and Optuna's TPESampler 2**32 inside the sweep, its parent run failed)."""
    if not 0 <= seed < 2**32:
        raise ConfigError(f"{name} must be >= 0 and < 2**32 (NumPy's seeds), got {seed}")

# what a run's step total, warmup and peak lr are set with, named in the lines that say a resume changed them
# (PretrainConfig.setting_names: a phase 2's are phase2.*)
SETTING_NAMES = {"total": "train.max_steps", "warmup": "optim.warmup_steps", "lr": "optim.lr"}


@dataclass
class OptimConfig:
    name: str = "adamw"  # adamw | lamb (jobs.engine.optim.Lamb, on GPU and CPU)
    lr: float = 1e-3  # peak learning rate after warmup
    weight_decay: float = 0.01  # not applied to biases and LayerNorm weights
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6
    warmup_steps: int = 100  # linear warmup from 0 to lr
    schedule: str = "linear"  # decay after warmup: linear | poly | constant
    poly_power: float = 0.5  # exponent of the poly decay (NVIDIA's BERT uses 0.5)
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping


@dataclass
class DeepSpeedConfig:
    zero_stage: int = 2  # 0 = plain data parallel, 1/2/3 = ZeRO partitioning
    precision: str = "fp32"  # fp32 on CPU; bf16 or fp16 (dynamic loss scaling) on GPU
    offload_optimizer: bool = False  # ZeRO-Offload: optimizer state and step on CPU
    offload_params: bool = False  # ZeRO-3 only: parameters live on CPU
    pipeline_stages: int = 1  # >1: BERT as a DeepSpeed PipelineModule; workers = stages x data-parallel replicas
    partition_method: str = "parameters"  # how layers are cut into stages: parameters | uniform
    compile: bool = False  # torch.compile the model inside the engine (fused element-wise; GPU: see BENCHMARKS.md)

    def validate(self, scaling: "ScalingConfig", optimizer: str) -> "DeepSpeedConfig":
        """What any engine (jobs/engine/data_parallel.py) can run with these scaling and optimizer choices; jobs add their own
        limits (pipelines: validate_pipeline; fine-tuning: no ZeRO-3, one stage)."""
        d = self
        if d.zero_stage not in (0, 1, 2, 3):
            raise ConfigError(f"deepspeed.zero_stage must be one of (0, 1, 2, 3), got {d.zero_stage}")
        if d.precision not in PRECISIONS:
            raise ConfigError(f"deepspeed.precision must be one of {PRECISIONS}, got {d.precision!r}")
        if d.precision != "fp32" and not scaling.use_gpu:
            raise ConfigError(f"deepspeed.precision={d.precision!r} needs scaling.use_gpu=true; use fp32 on CPU")
        if d.offload_params and d.zero_stage != 3:
            raise ConfigError("deepspeed.offload_params needs deepspeed.zero_stage=3")
        if d.compile and (d.zero_stage == 3 or d.pipeline_stages > 1):
            raise ConfigError("deepspeed.compile=true needs deepspeed.zero_stage 0, 1 or 2 and pipeline_stages=1: "
                              "ZeRO-3's parameter hooks and pipeline stages run eager")
        if optimizer == "lamb" and d.offload_optimizer:
            raise ConfigError("optim.name='lamb' is not supported with deepspeed.offload_optimizer "
                              "(ZeRO-Offload steps only DeepSpeed's CPU Adam); allowed: optim.name='adamw'")
        if d.offload_optimizer and d.zero_stage == 0:
            raise ConfigError("deepspeed.offload_optimizer needs deepspeed.zero_stage >= 1")
        return self


@dataclass
class ScalingConfig:
    num_workers: int = 2  # Ray Train workers (data-parallel ranks)
    use_gpu: bool = False
    cpus_per_worker: float = 1.0
    placement_strategy: str = "PACK"  # Ray placement group strategy; SPREAD/STRICT_SPREAD put workers on different nodes
    capacity_timeout_s: float = 900.0  # how long to wait for an autoscaler to bring the workers' nodes

    def validate(self) -> "ScalingConfig":
        if self.num_workers < 1:
            raise ConfigError(f"scaling.num_workers must be >= 1, got {self.num_workers}")
        if self.cpus_per_worker <= 0:
            raise ConfigError(f"scaling.cpus_per_worker must be > 0, got {self.cpus_per_worker}")
        if self.capacity_timeout_s < 0:
            raise ConfigError(f"scaling.capacity_timeout_s must be >= 0, got {self.capacity_timeout_s}")
        if self.placement_strategy not in PLACEMENT_STRATEGIES:
            raise ConfigError(f"scaling.placement_strategy must be one of {', '.join(PLACEMENT_STRATEGIES)}, "
                              f"got {self.placement_strategy!r}")
        return self

    def check_environment(self) -> None:
        """A job that starts its own Ray gets this machine's GPUs and no more: refuse GPU workers it cannot
        place here, instead of a Ray Train run waiting forever for them. Joining a cluster (RAY_ADDRESS or
        `ray start` on this machine), the job checks the cluster once connected, and waits for an autoscaler
        (jobs/runtime/capacity.py)."""
        if not self.use_gpu or not starts_local_ray():
            return
        import torch

        have = torch.cuda.device_count()
        if have < self.num_workers:
            fewer = f", scaling.num_workers <= {have}" if have else ""
            raise ConfigError(f"scaling.use_gpu=true needs {self.num_workers} GPUs (one per worker) and this machine "
                              f"has {have}, with no Ray cluster to join (no RAY_ADDRESS, no `ray start` here); "
                              f"allowed: scaling.use_gpu=false{fewer} or RAY_ADDRESS of a GPU cluster")


def _endpoint(parts: urllib.parse.SplitResult, path: str, query: dict | None = None) -> str:
    """The URL of a tracking server's endpoint `path` (under the server's own path), without the credentials."""
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path.rstrip("/") + path,
                                    urllib.parse.urlencode(query or {}), ""))


def _mlflow_gets_in(uri: str, experiment: str) -> bool:
    """Whether MLflow's own client is let in where the check's plain request was refused: it also reads the
    credentials file (~/.mlflow/credentials), prefers basic auth to a token, signs AWS SigV4 requests and runs header
    plugins. Imported here only, on a refusal: a config check imports no framework in the common case."""
    try:
        from mlflow.tracking import MlflowClient

        MlflowClient(uri).get_experiment_by_name(experiment)
        return True
    except Exception:  # its refusal (401, 403), or anything else: the check's own refusal names the way in
        return False


def _refused(parts: urllib.parse.SplitResult, error: urllib.error.HTTPError) -> ConfigError:
    """A tracking server that answers /health (exempt from both checks) and refuses the API: MLflow >= 3.5 answers
    403 "Invalid Host header" to a host name not in its --allowed-hosts (a head node's DNS name), a server with
    auth 401 (or 403) to a client without credentials it takes. The job's first MLflow call failed the same way,
    after the cluster came up and the corpus was prepared."""
    try:
        body = " ".join(error.read(300).decode(errors="replace").split())
    except OSError:
        body = ""
    shown = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}{parts.path}"  # no credentials
    said = f"{error.code}{f': {body}' if body else ''}"
    if "invalid host header" in body.lower():
        return ConfigError(f"tracking.tracking_uri={shown!r}: the server refuses this host name ({said}); start it "
                           f"with --allowed-hosts (or MLFLOW_SERVER_ALLOWED_HOSTS) naming "
                           f"{parts.netloc.rsplit('@', 1)[-1]!r}, or use a host name it allows")
    return ConfigError(f"tracking.tracking_uri={shown!r} refuses this job's requests ({said}); give it credentials "
                       "the server takes: MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and "
                       "MLFLOW_TRACKING_PASSWORD (a user who may read and write tracking.experiment)")


def refuse_deleted_experiment(found, name: str) -> None:
    """ConfigError where `found` (an MLflow Experiment, or None) is deleted: MLflow refuses every run in it."""
    if found is not None and found.lifecycle_stage == "deleted":
        i = found.experiment_id
        raise ConfigError(f"tracking.experiment={name!r} is deleted in the tracking store (experiment id {i}), and "
                          f"takes no run: restore it (mlflow experiments restore --experiment-id {i}), purge it "
                          f"(mlflow gc --experiment-ids {i}), or name another")


@dataclass
class TrackingConfig:
    # http://host:5000 for a server; unset: MLFLOW_TRACKING_URI, else the embedded sqlite:///mlflow.db (stores.py)
    tracking_uri: str = field(default_factory=default_tracking_uri)
    experiment: str = "bert-foundry-pretrain"
    # for a new experiment: a path or URI; "" = the server's artifact store (uploads through the server) with an
    # http(s) tracking URI, ./mlartifacts with a local store
    artifact_location: str = ""
    registered_model: str = ""  # register the release checkpoint under this name; "" skips it
    alias: str = "candidate"  # registry alias set on the new version
    # at the end of training, how long rank 0 keeps retrying metrics buffered through a tracking outage
    flush_timeout_s: float = 60.0

    def validate(self) -> "TrackingConfig":
        if self.flush_timeout_s < 0:
            raise ConfigError(f"tracking.flush_timeout_s must be >= 0, got {self.flush_timeout_s}")
        check_store_uri(self.tracking_uri)
        if not self.experiment.strip() or len(self.experiment) > 500:  # MLflow's _validate_experiment_name
            raise ConfigError(f"tracking.experiment must name an MLflow experiment (not blank, at most 500 "
                              f"characters), got {self.experiment[:80]!r}")
        if self.registered_model:  # "" skips registering
            check_model_name("tracking.registered_model", self.registered_model)
        if self.alias:
            check_alias("tracking.alias", self.alias)
            if self.alias.lower() in PROMOTION_ALIASES:
                raise ConfigError(f"tracking.alias={self.alias!r} is jobs/promote.py's: a trained model becomes "
                                  f"{self.alias} only by beating the champion on held-out data; allowed: any other "
                                  f"alias (candidate, the default, is what promote judges)")
        elif self.registered_model:
            raise ConfigError("tracking.alias must be set when tracking.registered_model is")
        return self

    def check_reachable(self, timeout_s: float = 10.0) -> None:
        """A tracking server must answer before the job does any cluster work: otherwise a mistyped or unstarted
        server is found by the first MLflow call, after the job has waited for GPU nodes and prepared its corpus.
        Any HTTP answer counts (an auth proxy may refuse /health); no answer (refused, unknown host, timeout) is
        refused here, naming the field. Local stores (sqlite:, a folder where MLflow's file store is allowed) have
        nothing to reach."""
        try:  # urllib reads the port only when asked, and raises on one that is no number (http://mlflow:port)
            parts = urllib.parse.urlsplit(self.tracking_uri)
            if parts.scheme not in ("http", "https"):
                return
            host, port = parts.hostname or "", parts.port
        except ValueError as e:
            raise ConfigError(f"tracking.tracking_uri is not a valid URL ({e}); allowed: a running MLflow server's "
                              "URL, or a local store (sqlite:///...)") from None
        shown = f"{parts.scheme}://{host}{f':{port}' if port else ''}{parts.path}"  # no credentials
        said = f"tracking.tracking_uri={shown!r}{from_environment(self.tracking_uri)}"
        url = _endpoint(parts, "/health")
        try:
            urllib.request.urlopen(url, timeout=timeout_s).close()
        except urllib.error.HTTPError:
            return  # it answered
        except urllib.error.URLError as e:
            if isinstance(e.reason, ssl.SSLError):  # it answered in TLS: whether its certificate is trusted is for
                return  # MLflow to say, with its own settings (MLFLOW_TRACKING_SERVER_CERT_PATH, a CA bundle)
            raise ConfigError(f"{said} does not answer ({e.reason}); "
                              "allowed: a running MLflow server's URL, or a local store (sqlite:///...)") from None
        except (OSError, ValueError) as e:  # a timeout too
            raise ConfigError(f"{said} does not answer ({getattr(e, 'reason', e)}); "
                              "allowed: a running MLflow server's URL, or a local store (sqlite:///...)") from None

    def check_experiment(self, timeout_s: float = 10.0) -> None:
        """tracking.experiment, deleted (in MLflow's UI, to start afresh), takes no run until restored or purged:
        refused here, before any cluster work, naming the way out (else the first run failed after the corpus was
        prepared, naming an experiment id). The artifact store its runs write to (the experiment's own; for a new
        one, tracking.artifact_location) must have its MLflow client library here (check_artifact_backend). Where
        the store or the artifacts are local, this machine must take them (check_sqlite_file, check_output_dir on the
        SQLite file's folder and the artifact folder): an unusable one failed in the first MLflow call, after the
        corpus was prepared and MLflow had retried for minutes. No MLflow call: files and folders only."""
        check_sqlite_file(self.tracking_uri)
        if self.tracking_uri.startswith("sqlite:///"):  # MLflow makes the file and the folders above it
            given = from_environment(self.tracking_uri)
            check_output_dir(f"tracking.tracking_uri={redact(self.tracking_uri)!r}{given} (its SQLite file's folder)",
                             str(Path(local_path(self.tracking_uri) or ".").parent))
        found = self._stored_experiment(timeout_s)
        refuse_deleted_experiment(found, self.experiment)
        kept = getattr(found, "artifact_location", None)  # MLflow keeps an experiment's store: the config's is unused
        if kept:
            check_artifact_backend(f"tracking.experiment={self.experiment!r} keeps its artifacts at ", kept)
        else:
            check_artifact_backend("tracking.artifact_location=", self.artifact_location)
        # a new experiment's: the config's, else ./mlartifacts beside a local store (written_paths)
        folder = local_path(kept or self.written_paths().get("tracking.artifact_location", ""))
        if folder:
            check_output_dir(f"tracking.experiment={self.experiment!r} (the artifact folder MLflow keeps for it)"
                             if kept else "tracking.artifact_location", folder)

    def _stored_experiment(self, timeout_s: float):
        """tracking.experiment as the store holds it (experiment_id, lifecycle_stage, artifact_location), or None.
        Asked without MLflow's client (a config check imports no framework): a SQLite store's experiments table,
        read only (one that does not exist yet holds none, and is not made), or a server's REST API; other stores,
        and a store that cannot be read, give None: start_run reports them (it refuses a deleted experiment too). A
        server that refuses the job's requests (401, 403) is refused here, naming the way in (_refused)."""
        import sqlite3
        import types

        if self.tracking_uri.startswith("sqlite:///"):
            path = Path(self.tracking_uri[len("sqlite:///"):])
            if not path.is_file():
                return None
            try:
                with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
                    row = db.execute("SELECT experiment_id, lifecycle_stage, artifact_location FROM experiments "
                                     "WHERE name = ?", (self.experiment,)).fetchone()
            except sqlite3.Error:  # no MLflow store (yet), locked, another schema
                return None
            return row and types.SimpleNamespace(experiment_id=row[0], lifecycle_stage=row[1],
                                                 artifact_location=row[2])
        if not self.tracking_uri.startswith(("http://", "https://")):
            return None
        parts = urllib.parse.urlsplit(self.tracking_uri)
        request = urllib.request.Request(_endpoint(parts, "/api/2.0/mlflow/experiments/get-by-name",
                                                   {"experiment_name": self.experiment}))
        if os.environ.get("MLFLOW_TRACKING_TOKEN"):
            request.add_header("Authorization", f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}")
        elif parts.username or os.environ.get("MLFLOW_TRACKING_USERNAME"):
            user = parts.username or os.environ["MLFLOW_TRACKING_USERNAME"]
            secret = parts.password or os.environ.get("MLFLOW_TRACKING_PASSWORD", "")
            request.add_header("Authorization", "Basic " + base64.b64encode(
                urllib.parse.unquote(f"{user}:{secret}").encode()).decode())
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                experiment = json.load(answer).get("experiment") or {}
        except urllib.error.HTTPError as e:
            if e.code in (401, 403) and not os.environ.get("MLFLOW_TRACKING_AUTH") \
                    and not _mlflow_gets_in(self.tracking_uri, self.experiment):  # (a plugin's auth: not ours)
                raise _refused(parts, e) from None
            return None  # 404: none of that name yet
        except (OSError, ValueError):  # refused, TLS, not JSON
            return None
        return types.SimpleNamespace(experiment_id=experiment.get("experiment_id"),
                                     lifecycle_stage=experiment.get("lifecycle_stage"),
                                     artifact_location=experiment.get("artifact_location"))

    def written_paths(self) -> dict[str, str]:
        """What the job writes through MLflow: a local store (sqlite, an allowed folder) and, beside one, the artifacts
        (./mlartifacts when artifact_location is empty); a tracking server keeps both itself."""
        paths = {"tracking.tracking_uri": self.tracking_uri}
        if self.artifact_location or not keeps_artifacts(self.tracking_uri):
            paths["tracking.artifact_location"] = self.artifact_location or "./mlartifacts"
        return paths


# the package that gives fsspec a URI scheme: named in the error where it is not installed
_BACKENDS = {"s3": "s3fs (pip install 'bert-foundry[cloud]')", "s3a": "s3fs (pip install 'bert-foundry[cloud]')",
             "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs", "abfs": "adlfs", "abfss": "adlfs", "hdfs": "pyarrow's HDFS"}


def check_uri_backend(name: str, uri: str) -> None:
    """A URI the job reads (s3://, gs://, ...) needs fsspec's filesystem for its scheme, a package of its own: not
    installed, the job would fail in Ray Data's first read, after the cluster (and its GPU nodes) came up. Checked
    on the machine the job starts on; the nodes run the same image or environment. A local path passes."""
    import fsspec

    from pipelines.paths import is_uri

    if not is_uri(uri):
        return
    scheme = uri.split("://", 1)[0].lower()
    try:
        fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"{name} {uri!r}: no filesystem for {scheme}:// here ({exc}); install "
                          f"{_BACKENDS.get(scheme, 'the fsspec package for it')} on every node") from None


# MLflow 3's artifact stores by URI scheme (mlflow.store.artifact.artifact_repository_registry), each with the module
# it imports at its first write and how to install it (None: nothing to install): written out here because a config
# check imports no framework (tests/unit/test_tracking_backends.py holds it to MLflow's own registry)
_BOTO3 = ("boto3", "pip install 'bert-foundry[cloud]'")  # not s3fs's aiobotocore: [cloud] has both
ARTIFACT_BACKENDS = {
    "s3": _BOTO3, "r2": _BOTO3, "b2": _BOTO3,
    "gs": ("google.cloud.storage", "pip install google-cloud-storage"),
    "wasbs": ("azure.storage.blob", "pip install azure-storage-blob azure-identity"),
    "abfss": ("azure.storage.filedatalake", "pip install azure-storage-file-datalake azure-identity"),
    "sftp": ("pysftp", "pip install pysftp"),
    "hdfs": ("pyarrow.fs", "pip install pyarrow"), "viewfs": ("pyarrow.fs", "pip install pyarrow"),
    **dict.fromkeys(("", "file", "http", "https", "mlflow-artifacts", "ftp", "dbfs", "runs", "models")),
}


def _importable(module: str) -> bool:
    """Whether `module` would import here, found without importing it (a parent package that is missing: no)."""
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_artifact_backend(name: str, location: str) -> None:
    """MLflow writes an artifact store that is no folder nor its server (s3://, gs://, wasbs://, ...) with a client
    library of its own, imported at the first write: missing here, the job failed in start_run (No module named
    'boto3'), after the cluster (and its GPU nodes) came up and the corpus was prepared; so did a scheme MLflow has
    no store for (s3a://, az://). Checked on the machine the job starts on; rank 0, which logs too, runs the same
    image or environment. A path passes (start_run makes it a file: URI), and so does a plugin's scheme (the
    mlflow.artifact_repository entry points). `name` is the error's words before the value."""
    from importlib.metadata import entry_points

    if "://" not in location:
        return
    scheme = location.split("://", 1)[0].lower()
    if scheme not in ARTIFACT_BACKENDS:
        if scheme in {ep.name for ep in entry_points(group="mlflow.artifact_repository")}:
            return
        stores = ", ".join(f"{s}://" for s, need in ARTIFACT_BACKENDS.items() if need)
        raise ConfigError(f"{name}{redact(location)!r}: MLflow has no artifact store for {scheme}://; allowed: a "
                          f"path (on a cluster, one every node shares), {stores} or ftp://")
    module, install = ARTIFACT_BACKENDS[scheme] or (None, "")
    if module and not _importable(module):
        raise ConfigError(f"{name}{redact(location)!r}: MLflow writes {scheme}:// artifacts with {module}, which "
                          f"is not installed here; {install} where the job starts and on every node")


def check_run_name(run_name: str) -> None:
    """A run's folder under output_dir: one name, not a path (".." put the checkpoints and release/ in output_dir's
    parent, "." in output_dir itself)."""
    if "/" in run_name or run_name in (".", ".."):
        raise ConfigError(f"run_name must be a plain name without '/', not '.' or '..', got {run_name!r}")


# pipelines.harvest.SUMMARY, which only a finished harvest holds (a test holds the two equal): that module imports Ray
# through pipelines.layout, which --check must not
HARVEST_SUMMARY = ".harvest.json"


def check_harvest_dir(name: str, path: str) -> None:
    """A folder the installed docs are harvested into: writable (check_output_dir), unless it holds a finished
    harvest, which is reused without writing (a shared corpus someone else harvested, a read-only mount)."""
    if not (Path(path) / HARVEST_SUMMARY).is_file():
        check_output_dir(name, path)


def check_output_dir(name: str, path: str) -> None:
    """A job writes checkpoints under `path` on this machine: it, or the nearest folder above it that
    exists, must be a folder this user can write to. Permissions (and read-only mounts) are asked first; a
    folder is then made there and removed, for what they do not show: root passes the permission check on
    every folder, yet /proc and /sys take no new folder from anyone, nor does an NFS export that squashes
    root. Such a job would otherwise fail only after Ray's work began. A URI (s3://, gs://) is refused: checkpoints,
    releases and prepared sets are written with file I/O, and Path() would make `s3:/bucket` a local folder."""
    if path.startswith("~") or re.search(r"\$\{?\w", path):  # ~, $SCRATCH, ${SCRATCH}: what only a shell expands
        what = "starts with '~'" if path.startswith("~") else "holds an environment variable"
        raise ConfigError(f"{name}={path!r} {what}, which only a shell expands (a YAML value or a quoted override "
                          f"keeps it, and the job would write a folder named so here): give the full path")
    if "://" in path:
        raise ConfigError(f"{name} must be a folder path (on a cluster, storage every node mounts: EFS, NFS, a "
                          f"ReadWriteMany volume), got the URI {path!r}: this job writes it with file I/O")
    target = Path(path).resolve()
    existing = next(p for p in (target, *target.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"{name} must be a writable folder, got {path!r} ({str(existing)!r} is a file)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{name} must be a writable folder, got {path!r} ({str(existing)!r} is read-only "
                          "for this user)")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-check-", dir=existing))
    except OSError as e:
        raise ConfigError(f"{name} must be a writable folder, got {path!r} ({str(existing)!r} takes no new "
                          f"folder: {e.strerror or e})") from None


def submitted_working_dir() -> str:
    """The `--working-dir` this process runs in a copy of, as a job of `ray job submit` ("" when it is not one):
    Ray's job supervisor hands the job's runtime environment to the driver in RAY_JOB_CONFIG_JSON_ENV_VAR."""
    try:
        job = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR") or "{}")
    except ValueError:
        return ""
    return str((job.get("runtime_env") or {}).get("working_dir") or "")


def refuse_relative_when_submitted(paths: dict[str, str]) -> None:
    """A job submitted with `--working-dir` runs in Ray's temporary copy of that folder, on whichever node runs the
    driver: a relative output path lands in the copy and is lost with it. Refuse one there, before any Ray work,
    naming the field; inputs (a config file, a task's files in the repository) are read from the copy and stay
    relative."""
    if not submitted_working_dir():
        return
    for name, value in paths.items():
        local = local_path(value)
        if local is not None and not os.path.isabs(local):
            given = from_environment(value) if name == "tracking.tracking_uri" else ""
            raise ConfigError(
                f"{name}={value!r}{given} is relative, and this job runs in Ray's temporary copy of its --working-dir: "
                f"what it writes there is lost when the job ends; allowed: an absolute path on storage every node "
                f"shares (for example /shared/...)" + (", or a URI (s3://, gs://; http:// for a tracking server)"
                                                if name.startswith("tracking.") else ""))
