"""MLflow: the driver opens the run (resolved config, lineage tags), logs and registers the model; rank 0 logs
metrics, buffered through outages (jobs/registry/metric_logger.py).

Tracking and registry calls happen on the driver or rank 0 only. A relative SQLite store is made
absolute on the driver so workers, whose working directory differs, write to the same file.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from jobs.runtime import console
from jobs.config.io import flatten
from jobs.config.sections import BARE_STORES, refuse_deleted_experiment
from jobs.config.stores import default_tracking_uri, keeps_artifacts, local_path
from jobs.inference.serving import PRETRAINING
from jobs.registry.metric_logger import metric_key
from jobs.registry.curves import CURVES, curve, curve_keys, log_curves  # noqa: F401 - tracking.* for callers
from jobs.registry.redaction import REDACTED, SECRET_PARTS, is_secret_name, redact  # noqa: F401
from jobs.registry.model_logging import log_hf_folder, log_qa_model, log_release_model


def resolve_tracking_uri(uri: str) -> str:
    """`sqlite:///mlflow.db` -> `sqlite:////abs/path/mlflow.db`, and a relative file store (`mlruns`, `file:mlruns`,
    `file:./mlruns`, where MLFLOW_ALLOW_FILE_STORE lets MLflow take one) -> its absolute path: workers run in
    another working directory, and would log to a store no one reads. Servers and absolute paths unchanged."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        return prefix + str(Path(uri[len(prefix):]).resolve())
    if "://" not in uri and uri not in BARE_STORES and uri:
        path = uri.removeprefix("file:")
        return Path(path).resolve().as_uri() if path != uri else str(Path(path).resolve())
    return uri


LOCAL_ARTIFACTS = "mlartifacts"  # beside a local store, relative to the working dir


def _artifact_uri(location: str, tracking_uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: `location` as given (a path resolved to a file URI); when
    empty, the tracking server's own artifact store (None: uploads go through the server, which every
    client can reach), or ./mlartifacts beside a local store."""
    if not location:
        if keeps_artifacts(tracking_uri):
            return None
        location = LOCAL_ARTIFACTS
    # MLflow's own file:/abs (no "//") is a path, not a relative folder named "file:"
    return location if (path := local_path(location)) is None else Path(path).resolve().as_uri()


PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the folder holding jobs/: a checkout's root, or site-packages
CONFIG_ARTIFACT = "config.yaml"


def code_version() -> dict:
    """Tags naming the code a run used: the installed package's version (`code.version`) and, where the code
    runs from a git checkout of this project, its commit and whether the checkout had changes the commit lacks
    (`code.git_dirty`, untracked files included; the commit of a larger repo holding this project, a monorepo, pins
    it as well). A `ray job submit --working-dir .` copy ships .git (it is tagged alike); with
    cluster/runtime-env.yaml, which excludes it, version only. So is an install inside another repo (a venv in the
    user's own project, untracked there, or tracked without our pyproject.toml): git would name that repo's commit."""
    tags = {}
    try:
        tags["code.version"] = version("bert-foundry")
    except PackageNotFoundError:
        pass
    try:
        # raises unless the repo tracks this file and this project's pyproject.toml (site-packages has none)
        _git("ls-files", "--error-unmatch", str(Path(__file__).resolve()), str(PROJECT_ROOT / "pyproject.toml"))
        tags["code.git_commit"] = _git("rev-parse", "HEAD")
        # this project's files only: a monorepo's other folders say nothing of our code
        tags["code.git_dirty"] = str(bool(_git("status", "--porcelain", "--", str(PROJECT_ROOT)))).lower()
    except (OSError, subprocess.SubprocessError):  # no git, or not a checkout of ours
        pass
    return tags


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, text=True, check=True,
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
    lineage.init                   a fine-tune's starting point: a folder, or an MLflow model URI (jobs pin an alias to
                                   its version first: finetune.pin_alias)
    lineage.init_run_id            for an MLflow model (models:/NAME@alias, models:/NAME/version, runs:/ID/...):
                                   the run that logged it; for a pretraining release folder, the run its record
                                   names (jobs/runtime/release.py) where it names this store (same_store)
    lineage.pretrain_run_id        the pretraining run behind it: that run, or the one its own tags name
    lineage.task_source, lineage.task_data_sha256
                                   a fine-tune's `task_data` (source, digest): where its rows come from and the
                                   sha256 of the rows it trained and evaluated on (jobs.loops.ft_tasks.rows_digest)
    lineage.init_checkpoint, lineage.init_checkpoint_run_id
                                   a pretraining run's train.init_checkpoint and the run that wrote it: start_run
                                   adds them from the config it logs (init_checkpoint_tags)

    finish_run copies these tags from the run onto the model version it registers.
    """
    import hashlib

    from bert_core.tokenizer import tokenizer_hash

    tags = {"lineage.job": job, **code_version()}
    if prepared is not None:
        manifest = Path(prepared.path) / "manifest.json"
        where = prepared.path if "://" in str(prepared.path) else Path(prepared.path).resolve()  # found from any cwd
        tags.update({"lineage.data_dir": str(where), "lineage.data_name": Path(prepared.path).name,
                     "lineage.data_manifest_sha256": hashlib.sha256(manifest.read_bytes()).hexdigest()})
    if tokenizer_dir is not None:
        tags["lineage.tokenizer_sha256"] = tokenizer_hash(tokenizer_dir)
    if init is not None:
        tags["lineage.init"] = init
        tags.update(_source_run_tags(init, tracking_uri))
    if task_data is not None:
        source = str(task_data[0])  # a URL as given (resolved as a path, s3://b/x became /cwd/s3:/b/x)
        tags["lineage.task_source"] = source if "://" in source else str(Path(source).resolve())
        tags["lineage.task_data_sha256"] = task_data[1]
    return tags


def _source_run_tags(init: str, tracking_uri: str | None) -> dict:
    """lineage.init_run_id and lineage.pretrain_run_id for an MLflow model URI, or for a pretraining release folder
    whose record names the run that wrote it in this store (jobs/runtime/release.py); {} for any other folder."""
    from mlflow.tracking import MlflowClient

    if not init.startswith(("runs:/", "models:/")):
        from jobs.runtime.release import record

        written = record(init)
        if not written or not same_store(str(written.get("tracking_uri") or ""), tracking_uri):  # a run not here
            return {}
        return {"lineage.init_run_id": str(written["run_id"]), "lineage.pretrain_run_id": str(written["run_id"])}
    client = MlflowClient(tracking_uri)
    version_tags: dict = {}
    from jobs.registry.versions import logged_model_id, logged_model_run

    if init.startswith("runs:/"):
        run_id = init[len("runs:/"):].split("/", 1)[0]
    elif logged_model_id(init):  # MLflow 3's models:/m-<id>: the run that logged it
        run_id = logged_model_run(init, tracking_uri)
    else:
        from jobs.registry.versions import pinned_version

        version = pinned_version(init, tracking_uri)[1]
        run_id, version_tags = version.run_id, dict(version.tags or {})
    if not run_id:
        return {}
    source = client.get_run(run_id).data.tags
    if "lineage.job" not in source and "mlflow.parentRunId" in source:
        # a sweep trial's run (runs:/<trial>/...): its parent, the sweep's run, holds the lineage (read as the trial's,
        # the trial was taken for the pretraining run behind the model); a parent deleted for good leaves it incomplete
        from mlflow.exceptions import MlflowException

        try:
            source = {**client.get_run(source["mlflow.parentRunId"]).data.tags, **source}
        except MlflowException:
            pass
    if "lineage.job" not in source and "lineage.job" in version_tags:
        # a sweep's version: its run is the seed trial's, which carries no lineage; the version carries the sweep's
        # (read as the trial's, a "pretraining run" without data: lineage.py reported a missing link)
        source = version_tags
    # A run from before lineage tags: a fine-tune has a "task" tag, a pretraining run has none; a sweep trial's (its
    # sweep's run deleted for good) is no pretraining run either: its pretraining is unknown, not the trial.
    untagged = "task" in source or "mlflow.parentRunId" in source
    job = source.get("lineage.job", "finetune" if untagged else "pretrain")
    pretrain = run_id if job == "pretrain" else source.get("lineage.pretrain_run_id")
    return {"lineage.init_run_id": run_id, **({"lineage.pretrain_run_id": pretrain} if pretrain else {})}


def same_store(recorded: str | None, tracking_uri: str | None) -> bool:
    """Whether a store recorded redacted beside a model (a release's record) is `tracking_uri`'s (None: the default):
    equal once both are resolved and redacted, as jobs/predict.py matches its manifest's, whoever the user (its
    credentials are no part of the store), or the same local file however its path is spelled. A record that names
    none (written before records did) is taken as this store's, as it was."""
    import os
    from urllib.parse import urlsplit

    if not recorded:
        return True

    def bare(uri: str) -> str:  # a server however written: its scheme and host in any case, its scheme's own port
        # (:443) or none, a trailing slash or none (a cluster's MLFLOW_TRACKING_URI beside a config's)
        uri = redact(uri).replace(f"://{REDACTED}@", "://")
        u = urlsplit(uri)
        if u.scheme.lower() not in ("http", "https"):
            return uri
        try:
            port = u.port
        except ValueError:  # not a port: compared as written
            return uri
        host = (u.hostname or "") + (f":{port}" if port not in (None, {"http": 80, "https": 443}[u.scheme.lower()])
                                     else "")
        return f"{u.scheme.lower()}://{host}{u.path.rstrip('/')}"

    ours = resolve_tracking_uri(tracking_uri or default_tracking_uri())
    if bare(recorded) == bare(ours):
        return True
    theirs, here = local_path(recorded), local_path(ours)
    return theirs is not None and here is not None and os.path.realpath(theirs) == os.path.realpath(here)


def init_checkpoint_tags(init_checkpoint: str) -> dict:
    """Where a pretraining run's weights came from when not fresh (train.init_checkpoint: continued pretraining, or
    phase 2 from phase 1): lineage.init_checkpoint, and lineage.init_checkpoint_run_id, the run that wrote that
    checkpoint as the checkpoint's record names it (jobs/runtime/resubmit.py), whose corpus the weights learned too.
    Without a record (a checkpoint at a URI, or from no job of ours) jobs/lineage.py cannot follow it and says so."""
    if not init_checkpoint:
        return {}
    from jobs.runtime import resubmit

    try:
        record = None if "://" in init_checkpoint else resubmit.read(Path(init_checkpoint))
    except (OSError, ValueError):  # unreadable or not JSON: no run named
        record = None
    writer = (record or {}).get("run_id")
    return {"lineage.init_checkpoint": init_checkpoint,
            **({"lineage.init_checkpoint_run_id": writer} if writer else {})}


def log_dataset(run_id: str, path: str, digest: str, name: str, context: str = "training",
                client=None) -> None:
    """A prepared set as an input of run `run_id` (MLflow's dataset view): metadata only, pointing at its folder,
    with `digest` naming its content; nothing is read. MLflow keeps one dataset per (experiment, name, digest): the
    same rows read from another place showed the first run's source, so the digest logged is dataset_digest's."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.tracking import MlflowClient
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    from mlflow.exceptions import MlflowException

    uri = path if "://" in str(path) else Path(path).resolve().as_uri()  # a bucket or web address as it is
    with warnings.catch_warnings():  # MLflow registers its local source for both "" and "file" and warns so
        warnings.simplefilter("ignore", UserWarning)
        try:
            source = resolve_dataset_source(uri)
        except MlflowException:  # a scheme MLflow has no dataset source for (hf://): the run's tags name it
            return
    dataset = MetaDataset(source, name=name, digest=dataset_digest(uri, digest))._to_mlflow_entity()
    (client or MlflowClient()).log_inputs(run_id, [DatasetInput(dataset, [InputTag(MLFLOW_DATASET_CONTEXT, context)])])


def dataset_digest(uri: str, digest: str) -> str:
    """The digest MLflow shows for content `digest` read from `uri`: both hashed, cut to MLflow's 32 characters."""
    import hashlib

    return hashlib.sha256(f"{uri}\0{digest}".encode()).hexdigest()[:32]


def start_run(tracking_uri: str, experiment: str, artifact_location: str, run_name: str, params: dict,
              tags: dict | None = None) -> str:
    """Open a run with `params` (the resolved config, every derived value settled) as flattened params and
    as config.yaml, tagged with `tags` (lineage_tags(...) and the job's own), both redacted (`redact`). Where
    the tags name a prepared set, it is logged as the run's training input; a pretraining run's
    train.init_checkpoint is tagged as its lineage too (init_checkpoint_tags). Nothing mutates the config
    afterwards. The run stays RUNNING: the job ends it (finish_run, `ending`)."""
    from mlflow.tracking import MlflowClient
    from mlflow.tracking.context.registry import resolve_tags

    tags = dict(tags or {})
    if tags.get("lineage.job") == "pretrain":  # read now: the checkpoint's own run may rotate it away later
        tags.update(init_checkpoint_tags(str(params.get("train", {}).get("init_checkpoint") or "")))
    params, tags = redact(params), redact(tags)  # secrets never reach the store
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    refuse_deleted_experiment(found, experiment)  # (deleted since the job's check_experiment)
    if found is None:
        from mlflow.exceptions import MlflowException

        try:
            found = client.get_experiment(client.create_experiment(
                experiment, artifact_location=_artifact_uri(artifact_location, tracking_uri)))
        except MlflowException as exc:  # two jobs started together: the other made it first, and it is ours too
            found = client.get_experiment_by_name(experiment) if exc.error_code == "RESOURCE_ALREADY_EXISTS" else None
            if found is None:
                raise
    experiment_id = found.experiment_id
    # RUNNING until the job ends it (finish_run: FINISHED; `ending`: FAILED or KILLED), with the user, source and
    # git commit tags MLflow's own start_run adds
    run_id = client.create_run(experiment_id, run_name=run_name, tags=resolve_tags(tags)).info.run_id
    with ending(tracking_uri, run_id):  # a step below that fails (an artifact store it cannot write) ends the run
        _fill_run(client, run_id, params, tags)  # FAILED, not RUNNING for ever, once per retry of the job
    return run_id


def _fill_run(client, run_id: str, params: dict, tags: dict) -> None:
    import yaml
    from mlflow.entities import Param

    if "lineage.data_dir" in tags:
        log_dataset(run_id, tags["lineage.data_dir"], digest=tags["lineage.data_name"], name="pretraining-examples",
                    client=client)
    if "lineage.task_source" in tags:
        log_dataset(run_id, tags["lineage.task_source"], digest=tags["lineage.task_data_sha256"],
                    name=f"{tags.get('task', 'task')}-rows", client=client)
    flat = {k: str(v)[:6000] for k, v in flatten(params).items()}  # MLflow caps a param at 6000 chars
    items = list(flat.items())
    for i in range(0, len(items), 100):  # log_batch takes at most 100 params per call
        client.log_batch(run_id, params=[Param(k, v) for k, v in items[i:i + 100]])
    client.log_text(run_id, yaml.safe_dump(params, sort_keys=False), CONFIG_ARTIFACT)


@contextlib.contextmanager
def ending(tracking_uri: str, *run_ids: str, finished: bool = False):
    """Runs that end with the block: where it raises, each of `run_ids` gets the error as its `error` tag and, if
    RUNNING or already FINISHED (finish_run ended it, then tagging the version or moving its alias failed), ends
    FAILED (KILLED on Ctrl-C): a crashed job never looks finished or still going (a run MLflow already ended
    FAILED keeps that; one the job ended KILLED, an interrupted sweep's parent, is left as it is). Where the block
    returns, FINISHED if `finished` (else the caller ends them: finish_run). A job killed outright leaves its runs
    RUNNING, as MLflow can know no better (jobs/predict.py ends those it finds dead)."""
    try:
        yield
    except BaseException as exc:
        from mlflow.tracking import MlflowClient

        status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
        try:
            client = MlflowClient(tracking_uri)
            for run_id in run_ids:
                was = client.get_run(run_id).info.status
                if was != "KILLED":  # a sweep interrupted (resumable) ends its parent KILLED itself
                    client.set_tag(run_id, "error", redact(f"{type(exc).__name__}: {exc}")[:5000])
                if was in ("RUNNING", "FINISHED"):
                    client.set_terminated(run_id, status)
        except Exception as mlflow_error:  # noqa: BLE001 - the store down too: the job's own error matters more
            warnings.warn(redact(f"could not mark run(s) {', '.join(run_ids)} {status}: {mlflow_error}"))
        raise
    if finished:
        from mlflow.tracking import MlflowClient

        for run_id in run_ids:
            MlflowClient(tracking_uri).set_terminated(run_id, "FINISHED")


def finish_run(tracking_uri: str, run_id: str, metrics: dict, release_dir: str | None, registered_model: str,
               alias: str, task: str, version_tags: dict | None = None, description: str = "",
               input_example: list[str] | None = None) -> dict:
    """Log final metrics and the model folder for `task` (PRETRAINING: the release checkpoint as is; a fine-tuned
    model: our pyfunc over batch prediction's code, jobs/registry/model_logging.py); register it under an alias, with
    `version_tags` and `description` (the version's model card) on the new version. `input_example`: a few inputs
    of the task, saved with the model (a pair model's as a table; model_logging.texts_signature for every kind)."""
    import mlflow
    from mlflow.tracking import MlflowClient
    from transformers.pipelines import SUPPORTED_TASKS

    mlflow.set_tracking_uri(tracking_uri)
    # the run's params and tags were redacted as it started; the version's tags (task_config: the data's URLs) and
    # its model card (lineage: the same URLs) are written here, so redacted alike
    version_tags = {k: redact(str(v), k) for k, v in (version_tags or {}).items()}
    description = redact(description)
    info: dict = {"run_id": run_id}
    log_curves(tracking_uri, run_id)
    # the run's own experiment as the active one: MLflow refuses to reopen a run under another (one set earlier
    # in this process, perhaps on another store)
    mlflow.set_experiment(experiment_id=MlflowClient(tracking_uri).get_run(run_id).info.experiment_id)
    with _killed_on_ctrl_c(tracking_uri, run_id), mlflow.start_run(run_id=run_id):
        mlflow.log_metrics({metric_key(k).replace("/", "."): float(v) for k, v in metrics.items()
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
                model_info = log_release_model(release_dir, registered_model or None, task, input_example, settings)
                info["model_uri"] = model_info.model_uri
                registered = getattr(model_info, "registered_model_version", None)
        if release_dir:
            if registered_model and registered is not None:
                client = MlflowClient(tracking_uri)
                try:
                    for k, v in {**_lineage_of(client, run_id), **(version_tags or {})}.items():
                        client.set_model_version_tag(registered_model, str(registered), k, str(v))  # whole: JSON
                    if description:
                        client.update_model_version(registered_model, str(registered), description=description)
                    from jobs.registry.versions import move_alias

                    move_alias(client, registered_model, alias, str(registered), f"registered v{registered}", run_id)
                except Exception as exc:  # the version exists without its task, lineage or alias: said on it
                    from jobs.registry.versions import mark_incomplete

                    mark_incomplete(client, registered_model, str(registered), exc)
                    raise
                info.update(registered_model=registered_model, version=str(registered), alias=alias)
    return info


@contextlib.contextmanager
def _killed_on_ctrl_c(tracking_uri: str, run_id: str):
    """Ctrl-C in MLflow's own `with start_run` (a model uploading for minutes) ended the run FAILED, as any exception
    does there, and `ending` keeps a FAILED run as it is: KILLED, with the error tagged, as `ending` ends one."""
    try:
        yield
    except KeyboardInterrupt as exc:
        from mlflow.tracking import MlflowClient

        with contextlib.suppress(Exception):  # the store down too: the interrupt matters more
            MlflowClient(tracking_uri).set_tag(run_id, "error", f"{type(exc).__name__}: {exc}"[:5000])
            MlflowClient(tracking_uri).set_terminated(run_id, "KILLED")
        raise


def _lineage_of(client, run_id: str) -> dict:
    """A run's lineage_tags, for the model version it registers: its own, over its parent run's when it is
    nested (a sweep's trial run; the sweep's parent holds the lineage). A resubmitted run's `continued_from` and
    `continued_at_step` (jobs/runtime/resubmit.tags) as lineage.*: its code.* tags name only the code of the steps
    since then; the earlier run, which trained the first ones, has its own. A two-phase pretraining's parent: the last
    of its phase runs that resumed names the earlier attempt, else its own tags do (a phase 1 that an earlier
    submission finished is not run again: jobs/pretrain._phase1_done)."""
    run = client.get_run(run_id)
    tags = run.data.tags
    parent = client.get_run(tags["mlflow.parentRunId"]).data.tags if "mlflow.parentRunId" in tags else {}
    resumed = {f"lineage.{k}": tags[k] for k in ("continued_from", "continued_at_step") if k in tags}
    if tags.get("lineage.job") == "pretrain" and not parent:
        for phase in client.search_runs([run.info.experiment_id], f"tags.`mlflow.parentRunId` = '{run_id}'",
                                        order_by=["attributes.start_time DESC"]):
            if found := {f"lineage.{k}": phase.data.tags[k] for k in ("continued_from", "continued_at_step")
                         if k in phase.data.tags}:
                resumed = found
                break
    return {**{k: v for k, v in {**parent, **tags}.items() if k.startswith(("lineage.", "code."))}, **resumed}


def may_still_run(tracking_uri: str, run_id: str) -> bool:
    """Whether the MLflow run may still be going: RUNNING, or not to be found (a killed job's run stays RUNNING:
    a caller that must not touch a live run's output treats both as live)."""
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient(tracking_uri).get_run(run_id).info.status == "RUNNING"
    except Exception:  # noqa: BLE001 - no such run, no run id, the store unreachable: it may be going
        return True


def end_dead_run(tracking_uri: str, run_id: str, error: str = "") -> bool:
    """End the run of a job that died without ending it: KILLED (killed outright: it stays RUNNING), or FAILED with
    `error` tagged (it failed while the store was down). Whether it was ended (no such run, the store unreachable:
    nothing this job can end)."""
    from mlflow.tracking import MlflowClient

    try:
        client = MlflowClient(tracking_uri)
        if error:
            client.set_tag(run_id, "error", error)
        client.set_terminated(run_id, "FAILED" if error else "KILLED")
        return True
    except Exception:  # noqa: BLE001
        return False


def input_example(rows: list[dict], n: int = 2) -> list | None:
    """The first `n` rows as the served model's input: a sentence (classification with one text, or NER's tokens
    joined), a {question, context} record (QA), a {text, text_pair} record (sentence pairs; the signature names no
    input: the served model reads a request's columns by name, model_logging.texts_signature)."""
    if not rows:
        return None
    if "question" in rows[0] and "context" in rows[0]:
        return [{"question": str(r["question"]), "context": str(r["context"])} for r in rows[:n]]
    if "tokens" in rows[0]:
        return [" ".join(map(str, r["tokens"])) for r in rows[:n]]
    if "text_a" in rows[0] and not isinstance(rows[0].get("text_b"), str):
        return [str(r["text_a"]) for r in rows[:n]]
    if "text_a" in rows[0]:
        return [{"text": str(r["text_a"]), "text_pair": str(r["text_b"])} for r in rows[:n]]
    return None
