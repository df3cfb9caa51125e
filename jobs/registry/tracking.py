"""MLflow: the driver opens the run (resolved config, lineage tags), logs and registers the model; rank 0 logs
metrics, buffered through outages.

Tracking and registry calls happen on the driver or rank 0 only. A relative SQLite store is made
absolute on the driver so workers, whose working directory differs, write to the same file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from jobs.runtime import console
from jobs.config.io import flatten
from jobs.inference.serving import PRETRAINING
from jobs.registry.model_logging import log_hf_folder, log_qa_model, log_release_model


def resolve_tracking_uri(uri: str) -> str:
    """`sqlite:///mlflow.db` -> `sqlite:////abs/path/mlflow.db`; servers and absolute paths unchanged."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        return prefix + str(Path(uri[len(prefix):]).resolve())
    return uri


LOCAL_ARTIFACTS = "mlartifacts"  # beside a local store, relative to the working dir


def _artifact_uri(location: str, tracking_uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: `location` as given (a path resolved to a file URI); when
    empty, the tracking server's own artifact store (None: uploads go through the server, which every
    client can reach), or ./mlartifacts beside a local store."""
    if not location:
        if tracking_uri.startswith(("http://", "https://")):
            return None
        location = LOCAL_ARTIFACTS
    return location if "://" in location else Path(location).resolve().as_uri()


class RankZeroLogger:
    """Metric logging from inside a worker; a no-op except on rank 0 with a run to log to.

    A tracking outage must neither stop training nor lose its metrics. A write that fails is counted
    (`failures`, one per failed request) and its points stay buffered; later `log` calls retry the buffer
    first, after a backoff that starts at `backoff_s` and doubles per failure up to `max_backoff_s`, so a
    step never waits on more than one request. MLflow's own HTTP retries (minutes by default) are turned
    down to one quick try in this process: the backoff here replaces them. A replayed point is harmless:
    MLflow keys a metric by (key, step, timestamp, value) and drops exact repeats. `close()` at the end of
    training retries until the buffer is empty or `close_timeout_s` has passed. Beyond `max_buffered`
    points the oldest are dropped and counted (`dropped`).

    System metrics (`system/cpu_utilization_percentage`, memory, disk, network, and `system/gpu_*` where
    NVIDIA's NVML is present) are sampled with MLflow's own monitors every `system_metrics_s` seconds, at a
    `log` call, on the node rank 0 trains on, and go through the same buffer: MLflow's background monitor
    would need the run to stay RUNNING in this process and stops at the first failed request.
    """

    MAX_BATCH = 1000  # MLflow's log_batch limit on metrics per request

    def __init__(self, tracking_uri: str, run_id: str | None, rank: int, backoff_s: float = 1.0,
                 max_backoff_s: float = 60.0, max_buffered: int = 100_000, system_metrics_s: float = 10.0):
        self.client = None
        self.run_id = run_id
        self.failures = 0
        self.dropped = 0
        self.pending: list = []  # mlflow.entities.Metric not yet written, oldest first
        self.backoff_s, self.max_backoff_s, self.max_buffered = backoff_s, max_backoff_s, max_buffered
        self._delay, self._retry_at = backoff_s, 0.0
        if rank == 0 and run_id:
            from mlflow.tracking import MlflowClient

            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
            self.client = MlflowClient(tracking_uri)
        self.monitors = system_monitors() if self.client is not None and system_metrics_s > 0 else []
        self.system_metrics_s, self._next_sample = system_metrics_s, time.monotonic()
        for m in self.monitors:
            m.collect_metrics()  # CPU utilization is measured between two samples: this is the first

    def log(self, metrics: dict, step: int) -> None:
        if self.client is None:
            return
        from mlflow.entities import Metric

        if self.monitors and time.monotonic() >= self._next_sample:
            self._next_sample = time.monotonic() + self.system_metrics_s
            metrics = {**metrics, **self.system_metrics()}
        now = int(time.time() * 1000)
        self.pending += [Metric(k, float(v), now, step) for k, v in metrics.items() if isinstance(v, (int, float))]
        if len(self.pending) > self.max_buffered:
            self.dropped += len(self.pending) - self.max_buffered
            del self.pending[:len(self.pending) - self.max_buffered]
        if time.monotonic() >= self._retry_at:
            self.flush()

    def system_metrics(self) -> dict:
        out = {}
        for m in self.monitors:
            try:
                m.collect_metrics()
                out.update({f"system/{k}": v for k, v in m.aggregate_metrics().items()})
            except Exception:  # a sensor that fails (a GPU gone, a disk unmounted) must not stop training
                pass
            m.clear_metrics()
        return out

    def flush(self) -> bool:
        """Write the buffer, oldest first; on a failure count it, keep the rest and back off. True if empty."""
        while self.pending:
            chunk = self.pending[:self.MAX_BATCH]
            try:
                self.client.log_batch(self.run_id, metrics=chunk)
            except Exception as exc:  # any MLflow or network error: training goes on
                self.failures += 1
                if self.failures == 1:
                    warnings.warn(f"MLflow logging failed, training continues; metrics are buffered and retried "
                                  f"(tracking_failures counts failed writes): {exc}")
                self._retry_at = time.monotonic() + self._delay
                self._delay = min(2 * self._delay, self.max_backoff_s)
                return False
            del self.pending[:len(chunk)]
        self._delay, self._retry_at = self.backoff_s, 0.0
        return True

    def close(self, close_timeout_s: float = 60.0) -> dict:
        """Last flush, retried with backoff for up to `close_timeout_s`; returns the counts the job reports."""
        deadline = time.monotonic() + close_timeout_s
        while self.client is not None and not self.flush() and time.monotonic() < deadline:
            time.sleep(max(0.0, min(self._retry_at, deadline) - time.monotonic()))
        return self.counts()

    def counts(self) -> dict:
        """tracking_failures: failed writes; tracking_undelivered: metric points not in MLflow (dropped or
        still buffered)."""
        return {"tracking_failures": self.failures, "tracking_undelivered": self.dropped + len(self.pending)}


def system_monitors() -> list:
    """MLflow's system-metric monitors for this node: CPU and memory, disk, network, NVIDIA GPUs if NVML loads."""
    from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
    from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
    from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

    monitors = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]
    try:
        import torch

        if torch.cuda.is_available():
            from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor

            monitors.append(GPUMonitor())
    except Exception:  # no pynvml, or NVML cannot start: CPU metrics only
        pass
    return monitors


def outage_line(metrics: dict) -> str:
    """The summary line for the workers' tracking counts (phases summed): failed writes, lost points."""
    def total(name: str) -> int:
        return int(sum(v for k, v in metrics.items() if k.rsplit("/", 1)[-1] == name))

    failures, lost = total("tracking_failures"), total("tracking_undelivered")
    if not failures:
        return "0 failed MLflow writes"
    return (f"{failures} failed MLflow writes, retried: "
            + (f"{lost} metric points NOT delivered" if lost else "every buffered metric delivered"))


REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_ARTIFACT = "config.yaml"


def code_version() -> dict:
    """Tags naming the code a run used: the installed package's version (`code.version`) and, where the code
    runs from a git checkout, its commit and whether the checkout had changes the commit lacks
    (`code.git_dirty`, untracked files included). A Ray job's copy of the working dir has no .git: version only."""
    tags = {}
    try:
        tags["code.version"] = version("bert-foundry")
    except PackageNotFoundError:
        pass
    try:
        tags["code.git_commit"] = _git("rev-parse", "HEAD")
        tags["code.git_dirty"] = str(bool(_git("status", "--porcelain"))).lower()
    except (OSError, subprocess.SubprocessError):  # no git, or not a checkout
        pass
    return tags


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()


def lineage_tags(job: str, *, prepared=None, tokenizer_dir: str | None = None, init: str | None = None,
                 tracking_uri: str | None = None, task_data: tuple[str, str] | None = None) -> dict:
    """What a run was made from, as tags; every job's come from here.

    lineage.job                    "pretrain" or "finetune"
    code.*                         code_version()
    lineage.data_dir, lineage.data_name, lineage.data_manifest_sha256
                                   a prepared set (pipelines.prepare.PreparedData): its folder, its name (a hash
                                   of its inputs and config) and the sha256 of its manifest.json
    lineage.tokenizer_sha256       bert_core.tokenizer.tokenizer_hash of `tokenizer_dir` (equal hash, equal ids)
    lineage.init                   a fine-tune's starting point, as given
    lineage.init_run_id            for an MLflow model (models:/NAME@alias, models:/NAME/version, runs:/ID/...):
                                   the run that logged it
    lineage.pretrain_run_id        the pretraining run behind it: that run, or the one its own tags name
    lineage.task_source, lineage.task_data_sha256
                                   a fine-tune's `task_data` (source, digest): where its rows come from and the
                                   sha256 of the rows it trained and evaluated on (jobs.loops.ft_tasks.rows_digest)

    finish_run copies these tags from the run onto the model version it registers.
    """
    import hashlib

    from bert_core.tokenizer import tokenizer_hash

    tags = {"lineage.job": job, **code_version()}
    if prepared is not None:
        manifest = Path(prepared.path) / "manifest.json"
        tags.update({"lineage.data_dir": str(prepared.path), "lineage.data_name": Path(prepared.path).name,
                     "lineage.data_manifest_sha256": hashlib.sha256(manifest.read_bytes()).hexdigest()})
    if tokenizer_dir is not None:
        tags["lineage.tokenizer_sha256"] = tokenizer_hash(tokenizer_dir)
    if init is not None:
        tags["lineage.init"] = init
        tags.update(_source_run_tags(init, tracking_uri))
    if task_data is not None:
        tags["lineage.task_source"], tags["lineage.task_data_sha256"] = str(Path(task_data[0]).resolve()), task_data[1]
    return tags


def _source_run_tags(init: str, tracking_uri: str | None) -> dict:
    """lineage.init_run_id and lineage.pretrain_run_id for an MLflow model URI; {} for a folder."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    if init.startswith("runs:/"):
        run_id = init[len("runs:/"):].split("/", 1)[0]
    elif init.startswith("models:/"):
        name, _, number = init[len("models:/"):].partition("/")
        name, _, alias = name.partition("@")
        model_version = (client.get_model_version_by_alias(name, alias) if alias
                         else client.get_model_version(name, number.split("/", 1)[0]))
        run_id = model_version.run_id
    else:
        return {}
    if not run_id:
        return {}
    source = client.get_run(run_id).data.tags
    # A run from before lineage tags: a fine-tune has a "task" tag, a pretraining run has none.
    job = source.get("lineage.job", "finetune" if "task" in source else "pretrain")
    pretrain = run_id if job == "pretrain" else source.get("lineage.pretrain_run_id")
    return {"lineage.init_run_id": run_id, **({"lineage.pretrain_run_id": pretrain} if pretrain else {})}


def log_dataset(path: str, digest: str, name: str, context: str = "training") -> None:
    """A prepared set as an input of the active run (MLflow's dataset view): metadata only, pointing at its
    folder, with `digest` naming its content; nothing is read."""
    import mlflow
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset

    with warnings.catch_warnings():  # MLflow registers its local source for both "" and "file" and warns so
        warnings.simplefilter("ignore", UserWarning)
        source = resolve_dataset_source(Path(path).resolve().as_uri())
    mlflow.log_input(MetaDataset(source, name=name, digest=digest), context=context)


# A config field or tag whose name ends in one of these words (`hf_token`, `api_key`, `db_password`; not
# `pad_token_id`) holds a secret; its value is never logged.
SECRET_PARTS = ("token", "password", "passwd", "secret", "key", "apikey", "credential", "credentials")
REDACTED = "***"
_URI_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][\w+.-]*://)[^/@\s]+@")  # scheme://user[:password]@host


def is_secret_name(name: str) -> bool:
    return re.split(r"[_\-]", name.rsplit(".", 1)[-1].lower())[-1] in SECRET_PARTS


def redact(value, name: str = ""):
    """`value` (a config dict, a tag dict or one value named `name`) safe to log: the values of secret-looking
    names (SECRET_PARTS) become REDACTED, and credentials inside URIs (`https://user:pass@host`) are removed."""
    if isinstance(value, dict):
        return {k: redact(v, f"{name}.{k}" if name else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v, name) for v in value)
    if name and is_secret_name(name) and value not in ("", None):
        return REDACTED
    if isinstance(value, str):
        return _URI_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", value)
    return value


def start_run(tracking_uri: str, experiment: str, artifact_location: str, run_name: str, params: dict,
              tags: dict | None = None) -> str:
    """Open a run with `params` (the resolved config, every derived value settled) as flattened params and
    as config.yaml, tagged with `tags` (lineage_tags(...) and the job's own), both redacted (`redact`). Where
    the tags name a prepared set, it is logged as the run's training input. Nothing mutates the config
    afterwards."""
    import mlflow
    import yaml

    params, tags = redact(params), redact(tags or {})  # secrets never reach the store
    mlflow.set_tracking_uri(tracking_uri)
    if mlflow.get_experiment_by_name(experiment) is None:
        mlflow.create_experiment(experiment, artifact_location=_artifact_uri(artifact_location, tracking_uri))
    mlflow.set_experiment(experiment)
    run = mlflow.start_run(run_name=run_name, tags=tags)
    if "lineage.data_dir" in tags:
        log_dataset(tags["lineage.data_dir"], digest=tags["lineage.data_name"], name="pretraining-examples")
    if "lineage.task_source" in tags:
        log_dataset(tags["lineage.task_source"], digest=tags["lineage.task_data_sha256"][:32],
                    name=f"{tags.get('task', 'task')}-rows")
    flat = {k: str(v)[:6000] for k, v in flatten(params).items()}  # MLflow caps a param at 6000 chars
    items = list(flat.items())
    for i in range(0, len(items), 100):  # log_params takes at most 100 params per call
        mlflow.log_params(dict(items[i:i + 100]))
    mlflow.log_text(yaml.safe_dump(params, sort_keys=False), CONFIG_ARTIFACT)
    mlflow.end_run()
    return run.info.run_id


def finish_run(tracking_uri: str, run_id: str, metrics: dict, release_dir: str | None, registered_model: str,
               alias: str, task: str, version_tags: dict | None = None, description: str = "",
               input_example: list[str] | None = None) -> dict:
    """Log final metrics and the model folder for `task` (PRETRAINING: the release checkpoint as is; a pipeline
    task: a transformers model); register it under an alias, with `version_tags` and `description` (the
    version's model card) on the new version. `input_example`: a few inputs of the task, saved with a
    pipeline model, whose signature MLflow infers from running the pipeline on them."""
    import mlflow
    from mlflow.tracking import MlflowClient
    from transformers.pipelines import SUPPORTED_TASKS

    mlflow.set_tracking_uri(tracking_uri)
    info: dict = {"run_id": run_id}
    log_curves(tracking_uri, run_id)
    # the run's own experiment as the active one: MLflow refuses to reopen a run under another (one set earlier
    # in this process, perhaps on another store)
    mlflow.set_experiment(experiment_id=MlflowClient(tracking_uri).get_run(run_id).info.experiment_id)
    with mlflow.start_run(run_id=run_id):
        mlflow.log_metrics({k.replace("/", "."): float(v) for k, v in metrics.items()
                            if isinstance(v, (int, float))})
        settings = json.loads((version_tags or {}).get("task_config", "{}"))  # the fine-tuning task's TaskConfig
        with console.to_log_file("mlflow"):  # MLflow's own lines around a registration, progress bars
            if release_dir and task == "question-answering":  # no pipeline in transformers 5: our pyfunc
                model_info = log_qa_model(release_dir, registered_model or None, input_example, settings)
                info["model_uri"] = model_info.model_uri
                registered = getattr(model_info, "registered_model_version", None)
            elif release_dir and (task == PRETRAINING or task not in SUPPORTED_TASKS):  # no pipeline for it
                info["model_uri"], registered = log_hf_folder(tracking_uri, run_id, release_dir, task,
                                                              registered_model or None)
            elif release_dir:
                model_info = log_release_model(release_dir, registered_model or None, task, input_example,
                                               description, settings)
                info["model_uri"] = model_info.model_uri
                registered = getattr(model_info, "registered_model_version", None)
        if release_dir:
            if registered_model and registered is not None:
                client = MlflowClient(tracking_uri)
                for k, v in {**_lineage_of(client, run_id), **(version_tags or {})}.items():
                    client.set_model_version_tag(registered_model, str(registered), k, str(v)[:5000])
                if description:
                    client.update_model_version(registered_model, str(registered), description=description)
                from jobs.registry.versions import move_alias

                move_alias(client, registered_model, alias, str(registered), f"registered v{registered}", run_id)
                info.update(registered_model=registered_model, version=str(registered), alias=alias)
    return info


def _lineage_of(client, run_id: str) -> dict:
    """A run's lineage_tags, for the model version it registers: its own, over its parent run's when it is
    nested (a sweep's trial run; the sweep's parent holds the lineage)."""
    tags = client.get_run(run_id).data.tags
    parent = client.get_run(tags["mlflow.parentRunId"]).data.tags if "mlflow.parentRunId" in tags else {}
    return {k: v for k, v in {**parent, **tags}.items() if k.startswith(("lineage.", "code."))}


CURVES = "curves.png"


def may_still_run(tracking_uri: str, run_id: str) -> bool:
    """Whether the MLflow run may still be going: RUNNING, or not to be found (a killed job's run stays RUNNING:
    a caller that must not touch a live run's output treats both as live)."""
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient(tracking_uri).get_run(run_id).info.status == "RUNNING"
    except Exception:  # noqa: BLE001 - no such run, no run id, the store unreachable: it may be going
        return True


def end_dead_run(tracking_uri: str, run_id: str) -> None:
    """End as KILLED the run of a job that died without ending it (killed outright: it stays RUNNING)."""
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(tracking_uri).set_terminated(run_id, "KILLED")
    except Exception:  # noqa: BLE001 - no such run, the store unreachable: nothing this job can end
        pass


def input_example(rows: list[dict], n: int = 2) -> list | None:
    """The first `n` evaluation rows as the served model's input: a sentence (classification with one text, or NER's
    tokens joined), a {question, context} record (QA); None for sentence pairs, whose pipeline takes structured
    inputs."""
    if not rows:
        return None
    if "question" in rows[0] and "context" in rows[0]:
        return [{"question": str(r["question"]), "context": str(r["context"])} for r in rows[:n]]
    if "tokens" in rows[0]:
        return [" ".join(map(str, r["tokens"])) for r in rows[:n]]
    if "text_a" in rows[0] and not isinstance(rows[0].get("text_b"), str):
        return [str(r["text_a"]) for r in rows[:n]]
    return None


def log_curves(tracking_uri: str, run_id: str, max_panels: int = 12) -> str | None:
    """Every training and evaluation metric the run logged over steps (train/*, eval/*, dev*/...), one panel
    each, as the run's artifact curves.png; None when it logged none."""
    import math

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    keys = sorted(k for k in client.get_run(run_id).data.metrics
                  if k.split("/", 1)[0] in ("train", "eval") or k.startswith("dev"))
    histories = {k: sorted((m.step, m.value) for m in client.get_metric_history(run_id, k)) for k in keys}
    histories = {k: h for k, h in histories.items() if len(h) > 1}
    if not histories:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = list(histories)[:max_panels]
    cols = min(3, len(shown))
    rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3 * rows), squeeze=False)
    for ax, key in zip(axes.flat, shown):
        steps, values = zip(*histories[key])
        ax.plot(steps, values, marker="." if len(steps) < 50 else None)
        ax.set_title(key, fontsize="small")
        ax.set_xlabel("step", fontsize="small")
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    fig.tight_layout()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / CURVES
        fig.savefig(path, dpi=90)
        plt.close(fig)
        client.log_artifact(run_id, str(path))
    return CURVES
