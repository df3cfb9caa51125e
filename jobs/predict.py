"""Batch prediction with a registered model: your files in, parquet shards and a manifest out, through Ray Data.

    python jobs/predict.py models:/NAME@champion --input 'new/*.csv' --output predictions/
    ray job submit --working-dir . -- python jobs/predict.py models:/NAME@champion --input ... --output ...
    python jobs/predict.py models:/NAME/3 --input docs.txt --output out/ columns.text=body batch_size=64

1. The model: a registry alias or version (`latest`: the highest), a run's model, or a folder (its config, weights
   and tokenizer: what transformers loads), downloaded once; its version, run and task settings (multi-label
   threshold, QA windows) come from the registry, or the run (a folder records none: the defaults). A URI that does
   not resolve is one line (jobs/inference/model_ref.py).
2. The plan: the input files (CSV, TSV, JSON Lines, Parquet, Excel, datasets folders, plain text:
   pipelines/tasks/files.py reading without labels) and the output's shards (jobs/inference/shards.py): complete ones
   are skipped, the others cleared. An output folder holds one model's predictions of one input: another is refused.
3. Ray Data (its stages: jobs/inference/stages.py): read (tasks; bad records counted by reason; each shard's rows
   longest first, positions in their file: sorted by file and position, the output is in input order) -> tokenize
   (tasks) -> predict (an actor pool, one model replica per GPU or per `cpus_per_actor` CPUs; windows sorted by
   length; each actor writes its parts) -> a summary per batch to the driver (progress, ETA; the manifest rewritten
   as shards complete).
4. Every shard checked (each input row exactly once), the manifest finished, an MLflow run logged with the model
   version it used (jobs/lineage.py follows a prediction folder back to the model and on to the corpus).

Outputs per kind: jobs/inference/predictor.py. They equal the registered model's pipeline (what `mlflow models
serve` answers), long inputs included.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

if __package__ in (None, ""):  # `python jobs/predict.py` from a checkout: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.runtime.cluster import prefer_loopback  # noqa: E402

prefer_loopback()  # before anything imports ray

from bert_core.config import ConfigError  # noqa: E402
from jobs.config.io import add_check_argument, checked, cli, load_config, yaml_quoted  # noqa: E402
from jobs.config.predict import PredictConfig  # noqa: E402
from jobs.inference import inputs, shards, stages  # noqa: E402
from jobs.inference.kinds import OUTPUT_COLUMNS, QASettings  # noqa: E402
from jobs.inference.model_ref import (ModelRef, check_inputs, files_digest, model_files, model_folder_kind,  # noqa: E402
                                     resolve_model)
from jobs.runtime import console  # noqa: E402

PROGRESS_EVERY_S = 10.0
BLOCK_BYTES = 256 << 10  # a few hundred rows a block: the replicas share a file, each reports per block
TOKENIZERS_PER_CPU_REPLICA = 16  # CPU model replicas one tokenizing process keeps busy
SKIPPED = ("blank_line", "empty_file")  # no record (a nightly export with nothing new): counted apart, not rejected


@dataclass
class PredictResult:
    output: Path
    model: ModelRef
    rows: int  # in the output: predicted by this run and earlier ones (rows_this_run: by this one, its rate's)
    rejected: dict  # reason -> rows
    truncated: int
    skipped_shards: int  # complete before this run
    seconds: float
    run_id: str = ""  # the prediction's MLflow run
    rows_this_run: int = 0
    skipped: dict = field(default_factory=dict)  # SKIPPED reason -> lines or files
    windowed: int = 0  # rows read in more than one window (a tagger's, a reader's long input), none cut


def run(cfg: PredictConfig) -> PredictResult:
    from jobs.registry import tracking

    started = time.time()
    cfg.check_environment()  # the tracking store, before the model's download (resolve_model checks its folder)
    output = Path(cfg.output).resolve()
    uri = tracking.resolve_tracking_uri(cfg.tracking.tracking_uri)
    with tempfile.TemporaryDirectory(prefix="predict-model-") as tmp:  # the replicas get the files from Ray
        model = resolve_model(cfg.model, uri, Path(tmp) / "model")
        return _run(cfg, model, uri, output, started)


def check(cfg: PredictConfig, source: str | None) -> str:
    """--check: the checks a run makes before Ray (_plan), made without a framework (no torch, Ray or MLflow, as
    every job's check): the environment, a model folder's kind, the input files listed and their columns read as
    that kind reads them, the output folder new or an earlier run's of this input and model (_refuse_other); what was
    checked, for the line. A models:/ or runs:/ URI is MLflow's to resolve: the run resolves it, then reads the
    columns its kind needs and compares the model."""
    kind = model_folder_kind(cfg.check_environment().model)
    folder = ModelRef(cfg.model, Path(cfg.model), kind) if kind else None  # task settings: a folder records none
    files = _plan(cfg, folder, output := Path(cfg.output).resolve())
    if (old := _refuse_foreign(output)) is not None and folder is not None:  # its digest as resolve_model makes it
        folder.digest = files_digest(model_files(folder.folder))
    if old is not None:
        _refuse_other(output, old, _basis(cfg, folder, files, old["model"].get("kind", "")), partial=folder is None)
    model = f"{cfg.model} ({kind})" if kind else f"{cfg.model} (resolved when the job runs; its columns checked then)"
    return (f"model {model}, input {inputs.recorded(cfg.input)} ({inputs.formats(files)}), output {cfg.output}"
            + (f", config {source}" if source else ""))


def _plan(cfg: PredictConfig, model: ModelRef | None, output: Path) -> list:
    """The input files, listed and checked before the output's lease and Ray (and by --check): the model's input
    against columns.text_pair, the files' names and columns as the model's kind reads them (model None: a URI --check
    does not resolve, whose kind is unknown), the output folder new or this job's."""
    from pipelines.tasks.common import TaskDataError
    from pipelines.tasks.file_finder import resolve_files

    if model is not None:
        check_inputs(model, cfg.columns.text_pair)  # before the files are read
        if cfg.threshold and model.kind != "multi-label":
            print(f"[predict] threshold={cfg.threshold:g} is ignored: a {model.kind} model has none", flush=True)
    try:
        files = resolve_files(cfg.input, cfg.format, labeled=False)
        inputs.refuse_undecodable_names(files)
        if not cfg.columns.id and (shared := inputs.shared_names(files)):
            print(f"[predict] input files share a name ({', '.join(shared[:3])}{' ...' if len(shared) > 3 else ''}): "
                  f"their rows' default ids (name:row) repeat; join the predictions to the inputs by file and id "
                  f"(its row counts every record; position skips rejected ones), or name an id column (columns.id)",
                  flush=True)
        if model is not None:
            inputs.check_columns(files, model.kind, cfg.columns)  # before the manifest and Ray
    except (FileNotFoundError, TaskDataError) as exc:
        raise inputs.refused(str(exc)) from None
    _refuse_foreign(output)  # before the lease: a folder not ours gets no .lease file either
    return files


def _run(cfg: PredictConfig, model: "ModelRef", uri: str, output: Path, started: float) -> "PredictResult":
    files = _plan(cfg, model, output)
    try:
        with shards.lease(output):  # a second start while this job writes here is refused
            manifest = _open_manifest(output, cfg, model, files, _basis(cfg, model, files))
            return _fill(cfg, model, uri, output, started, files, manifest)
    except shards.LeaseHeld as held:
        raise ConfigError(f"output {output}: another prediction job is writing there ({held}): give a new output "
                          "folder, or wait for it") from None


def _fill(cfg: PredictConfig, model: "ModelRef", uri: str, output: Path, started: float, files,
          manifest: dict) -> "PredictResult":
    """The output folder's incomplete shards predicted (the steps 2-4 of the module docstring), the run logged."""
    from jobs.registry import tracking
    from jobs.runtime.cluster import init_ray

    done = shards.clear_incomplete(output, shards.scan(output))
    manifest["shards"] = {s: v for s, v in manifest.get("shards", {}).items() if s in done}
    if done:
        print(f"[predict] {len(done)} complete shards of an earlier run kept in {output}", flush=True)

    dashboard = init_ray()
    if cfg.gpu_actors:  # an autoscaling cluster's GPU nodes come when asked for: before the run and the manifest
        from jobs.runtime.capacity import Demand, ensure_capacity, worker_bundles

        ensure_capacity(Demand(
            bundles=tuple(worker_bundles(cfg.gpu_actors, 1.0, gpu=True)),
            needed_by=f"gpu_actors={cfg.gpu_actors} (a GPU and a CPU each) plus 1 CPU for Ray Data",
            hint="Lower gpu_actors, or add GPU nodes.", timeout_s=cfg.capacity_timeout_s,
            timeout_field="capacity_timeout_s"))
    run_id = _start_run(uri, cfg, model, output)
    # the manifest is a file anyone reading the predictions reads, and a run artifact: no credentials in it
    manifest["mlflow"] = {"tracking_uri": tracking.redact(uri), "run_id": run_id}
    try:  # an error anywhere up to the run's end (the store refusing the manifest artifact too) ends the run FAILED,
        with tracking.ending(uri, run_id):  # naming it, and the manifest says so: neither stays "running" for good
            shards.write_json(output / shards.MANIFEST, manifest)
            _predict(cfg, model, files, output, set(done), manifest)
            result = _finish(output, manifest, model, done, time.time() - started, run_id)
            # every record rejected (a file in another encoding, the wrong column's values) is not a success; inputs
            # with no record at all (SKIPPED: blank lines, empty files) are
            failed = not result.rows and result.rejected
            if failed:
                sample = next((s for info in manifest["shards"].values() for s in info.get("samples", [])
                               if s[0] not in SKIPPED), None)
                error = (f"input: no row could be predicted, every record was rejected ("
                         + ", ".join(f"{k} {v}" for k, v in sorted(result.rejected.items()))
                         + (f"; first: {sample[0]} at {sample[1]}: {sample[2][:80]!r}" if sample else "") + ")")
                manifest.update(status="failed", error=error)
                shards.write_json(output / shards.MANIFEST, manifest)
            _log_run(uri, run_id, result, output, error if failed else "")
    except BaseException as exc:  # the manifest "failed" (a rerun resumes it as it does "running") with the error
        manifest.update(status="failed", error=tracking.redact(f"{type(exc).__name__}: {exc}")[:5000])
        with contextlib.suppress(Exception):  # a write that fails too (the disk full) never hides the job's error
            shards.write_json(output / shards.MANIFEST, manifest)
        raise
    print(summary(result, dashboard), flush=True)
    if failed:
        raise ConfigError(error)
    return result


# -- 1. the model ------------------------------------------------------------------------------------------------

def _threshold(cfg: PredictConfig, model: ModelRef) -> float:
    return cfg.threshold or float(model.task.get("multi_label_threshold", 0.5))


# -- 2. the plan -------------------------------------------------------------------------------------------------

def _open_manifest(output: Path, cfg: PredictConfig, model: ModelRef, files, basis: dict) -> dict:
    """The output's manifest: an earlier run's, when it predicted the same input with the same model; refused
    when it did not and predicted rows there; a new one for an empty folder, or over an earlier run that predicted
    none (a wrong column, every record rejected, a crash at its start: nothing to keep, and the corrected rerun goes
    where it was asked)."""
    old = _refuse_foreign(output)
    if old is not None:
        _end_dead_run(output, old, cfg)  # this job holds the lease: an earlier one still "running" was killed
        if not (changed := _refuse_other(output, old, basis)):  # resumed (after "running", "failed" or "complete")
            return {**{k: v for k, v in old.items() if k != "error"}, "status": "running"}  # the old error gone
        shutil.rmtree(output / shards.SHARDS, ignore_errors=True)  # nothing predicted there: all of it goes
        print(f"[predict] {output}: an earlier run with another {changed} predicted no row: starting over",
              flush=True)
    output.mkdir(parents=True, exist_ok=True)
    return {"basis": basis, "status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "model": {"uri": model.uri, "name": model.name, "version": model.version, "run_id": model.run_id,
                      "kind": model.kind, "sha256": model.digest, "asked": cfg.model},
            "input": inputs.recorded(cfg.input),
            "files": [{"index": i, "path": name, "format": fmt}  # name: the rows' `file`
                      for i, (name, (_, fmt)) in enumerate(zip(inputs.basis_paths(files), files))],
            "columns": ["id", "file", "position", *OUTPUT_COLUMNS[model.kind], "truncated", "windows"],
            "shards": {}}


def _refuse_other(output: Path, old: dict, basis: dict, partial: bool = False) -> str:
    """What differs between manifest `old`'s basis and `basis` (inputs.compared), named ("": the same, resumed);
    refused where the earlier run completed a shard with rows (else it starts over). `partial`: `basis`'s keys alone."""
    before, basis = (inputs.compared(b, old.get("model", {}).get("kind", "")) for b in (old.get("basis", {}), basis))
    keys = set(basis) if partial else {*basis, *before}
    changed = ", ".join(sorted(k for k in keys if (k in before, before.get(k)) != (k in basis, basis.get(k)))).replace(
        "positions", "positions (an earlier version of jobs/predict.py wrote it)").replace(
        "ids", "ids (an earlier version of jobs/predict.py read a TSV's rows otherwise)").replace(
        "settings", "settings (the QA windows or tagging in effect)")
    if changed == "file_versions" and "file_versions" in before:  # the same files, edited since: name them
        was = dict(zip(before["files"], before["file_versions"]))
        edited = [path for path, version in zip(basis["files"], basis["file_versions"]) if was[path] != version]
        changed = (f"the input files: {', '.join(edited[:3])}{' ...' if len(edited) > 3 else ''} changed (size or "
                   "modification time)")
    if changed and any(state.complete and state.rows for state in shards.scan(output).values()):
        raise ConfigError(f"output {output} holds predictions of another model or input (differs in {changed}): "
                          "give a new output folder, or remove that one")
    return changed


def _refuse_foreign(output: Path) -> dict | None:
    """The manifest of an earlier run of this job in `output` (None: the folder is new or empty); refused when the
    folder holds anything else, a manifest.json another tool wrote among it: a rerun over an earlier run's folder
    removes what it finds unfinished there (its shards/), and must never do that to files it did not write."""
    path = output / shards.MANIFEST
    if path.is_file():
        old = None
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            old = json.loads(path.read_text())
        if isinstance(old, dict) and all(isinstance(old.get(k), dict) for k in ("basis", "shards", "model")):
            return old
        raise ConfigError(f"output {output} holds a {shards.MANIFEST} that jobs/predict.py did not write: give a new "
                          "or empty folder")
    if output.is_dir() and any(p.name != shards.LEASE for p in output.iterdir()):
        raise ConfigError(f"output {output} is not empty and holds no {shards.MANIFEST}: give a new or empty folder")
    return None


def _end_dead_run(output: Path, old: dict, cfg: PredictConfig) -> None:
    """The job of manifest `old`, while this one holds the folder's lease, is not running: if its MLflow run still says
    so, it was killed outright (SIGKILL, a lost node; its manifest "running": its run ends KILLED) or failed while the
    store was down ("failed": FAILED, with the manifest's error), and never ended it; this job takes the folder over."""
    from jobs.registry import tracking

    earlier, ours = old.get("mlflow", {}), tracking.resolve_tracking_uri(cfg.tracking.tracking_uri)
    uri, run_id = earlier.get("tracking_uri", ""), earlier.get("run_id", "")
    # the manifest's is redacted: where it names this job's store (as a release's record is matched), ours has the
    # credentials; another store's run is sought where it was recorded
    uri = ours if tracking.same_store(uri, ours) else uri
    failed = old.get("error", "input: failed") if old.get("status") == "failed" else ""  # its run FAILED, the error
    if old.get("status") in ("running", "failed") and run_id and tracking.may_still_run(uri, run_id) \
            and tracking.end_dead_run(uri, run_id, failed):
        how = "failed without ending it: its run ended as FAILED" if failed else "was killed before it ended: its " \
            "run ended as KILLED"
        print(f"[predict] {output}: the earlier job (MLflow run {run_id}) {how}, this job takes the folder over",
              flush=True)


# which rows a TSV gives and how they are numbered; changed whenever the TSV reader gives other rows (earlier values:
# none, its lines numbered; "records", the reader before 2026-12-02's), so a folder begun under an earlier reader is
# refused, or started over where no shard completed, never finished with rows read another way
_TSV_IDS = "records, as the TSV reader of 2026-12-02 reads them"


def _basis(cfg: PredictConfig, model: ModelRef | None, files, kind: str = "") -> dict:
    """What an output folder's predictions depend on: a rerun keeps its complete shards only where all is equal;
    `settings`, the ones the kind predicts with (the threshold and QA windows in effect, however given; how a
    tagger's windows merge), for the kinds that have them. Model None: the keys it has no part in (--check of a URI),
    a threshold given where the earlier run's model (`kind`) has one. URLs unsigned; a TSV's ids number records."""
    basis = {"input": inputs.unsigned(cfg.input), "files": [inputs.unsigned(p) for p in inputs.basis_paths(files)],
             "file_versions": inputs.file_versions(files), "format": cfg.format, "columns": vars(cfg.columns),
             "shard_rows": cfg.shard_rows, "precision": cfg.precision, "positions": "file",
             **({"ids": _TSV_IDS} if any(fmt == "tsv" for _, fmt in files) else {})}
    if model is None:
        return {**basis, **({"threshold": cfg.threshold} if cfg.threshold and kind == "multi-label" else {})}
    settings = {"question-answering": lambda: asdict(QASettings.from_task(model.task)),
                "token-classification": lambda: {"windows": "merged without their O groups"}}.get(model.kind)
    return {"model_sha256": model.digest, **basis,
            "threshold": _threshold(cfg, model) if model.kind == "multi-label" else 0.0,  # in effect: others none
            **({"settings": settings()} if settings else {})}


# -- 3. Ray Data -------------------------------------------------------------------------------------------------

def _predict(cfg: PredictConfig, model: ModelRef, files, output: Path, done: set, manifest: dict) -> None:
    import ray
    from ray.data import ActorPoolStrategy, TaskPoolStrategy

    loaded = {f.name: f.read_bytes() for f in model.files}
    # refs inside a dict: fetched where they are used (the tokenizing tasks need no weights)
    small = {k: v for k, v in loaded.items() if not k.endswith((".safetensors", ".bin"))}
    shipped = {"files": ray.put(loaded), "tokenizer": ray.put(small), "digest": model.digest}
    gpus = int(ray.cluster_resources().get("GPU", 0))
    actors = cfg.gpu_actors or cfg.num_actors or (gpus if gpus else max(1, int(ray.cluster_resources().get("CPU", 1)
                                                                              // cfg.cpus_per_actor)))
    qa = QASettings.from_task(model.task)
    # small blocks (Ray Data's default is 128 MiB): one file's rows spread over the tokenizing tasks and the model
    # replicas, and each replica's summary reaches the driver as it finishes a block; one block holding a whole
    # file would go to one replica. (A repartition would need a CPU the replicas hold on a CPU-only cluster.)
    ray.data.DataContext.get_current().target_max_block_size = BLOCK_BYTES
    reads = ray.data.from_items([{"index": i, "path": p, "fmt": f, "name": name}  # name: the output's `file`
                                 for i, ((p, f), name) in enumerate(zip(files, inputs.basis_paths(files)))],
                                override_num_blocks=max(1, len(files)))
    # Reading and tokenizing run in tasks (flat_map is never fused into the tokenizing map_batches, and tasks of
    # other resources are never fused into the actors). On GPUs they take a CPU each; on a CPU-only cluster the
    # model replicas take every CPU and these light tasks share them (0 CPUs: they never wait for a free one).
    task_cpus = 1 if gpus else 0
    ds = reads.flat_map(stages.read_rows, num_cpus=task_cpus, fn_kwargs={
        "kind": model.kind, "columns": cfg.columns, "shard_rows": cfg.shard_rows, "skip": done, "output": output})
    # On a CPU-only cluster the tokenizing tasks (0 CPUs) have no bound: each new process paid for transformers and
    # the tokenizer (measured, 10,000 rows on 2 cores: 13 processes and 70 CPU-seconds, against the model's 82). A
    # pool of one per TOKENIZERS_PER_CPU_REPLICA replicas keeps its processes and their tokenizer (stages.ENCODERS): a
    # process tokenizes thousands of rows a second, a CPU replica ~100. With GPUs they take a CPU each, as before.
    tokenizing = None if gpus else TaskPoolStrategy(size=math.ceil(actors / TOKENIZERS_PER_CPU_REPLICA))
    ds = ds.map_batches(stages.tokenize, batch_size=256, num_cpus=task_cpus, compute=tokenizing,
                        fn_kwargs={"model": shipped, "qa": qa})
    ds = ds.map_batches(stages.Predict, batch_size=cfg.window, compute=ActorPoolStrategy(size=actors),
                        num_gpus=1 if gpus else 0, num_cpus=cfg.cpus_per_actor if not gpus else 1,
                        fn_constructor_kwargs={"model": shipped, "qa": qa, "batch_size": cfg.batch_size,
                                               "max_batch_tokens": 0 if gpus else cfg.max_batch_tokens,
                                               "threshold": _threshold(cfg, model), "output": output,
                                               "threads": max(1, int(cfg.cpus_per_actor)), "precision": cfg.precision,
                                               "cpu_kernels": cfg.cpu_kernels,
                                               "kill_after": int(cfg.faults.get("kill_actor_after_batches", 0))})
    expected = inputs.estimate_rows(files, sheet=cfg.columns.sheet)
    before = sum(s["rows"] for s in manifest["shards"].values())
    rows, named = 0, set()
    start = last = time.time()
    print(f"[predict] {model.kind} with {model.uri}{f' (v{model.version})' if model.version else ''}: "
          f"{len(files)} input files ({inputs.formats(files)}), ~{expected:,} rows, {actors} model replicas "
          f"({'GPU' if gpus else f'{cfg.cpus_per_actor:g} CPU'} each)", flush=True)
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        n, touched = _take(batch, output, manifest)
        rows, named = rows + n, named | touched
        if time.time() - last >= PROGRESS_EVERY_S:
            last = time.time()
            rate = rows / max(last - start, 1e-9)
            left = max(expected - before - rows, 0)
            eta = f" | ETA {_duration(left / rate)}" if expected and rate > 0 else ""
            print(f"[predict] {before + rows:,}{f'/~{expected:,}' if expected else ''} rows | {rate:,.0f} rows/s"
                  f"{eta} | {len(manifest['shards'])} shards complete", flush=True)
    # the shards the model replicas wrote, as they said, not only those this machine sees: an output folder on the
    # driver's disk alone (a worker node's replicas wrote theirs on its own disk) is an error, not 0 rows predicted
    shards.record_complete(output, manifest, set(shards.scan(output)) | named, final=True)


def _take(summary, output: Path, manifest: dict) -> tuple[int, set]:
    """A model replica's summary of a batch (stages.Predict's return): its rows and the shards it wrote to, the
    complete ones recorded. A file refused past the rows _plan read ends the job here, one line as _plan's: its
    record names shard "", which the final check would take for a shard written where this machine does not see."""
    if said := stages.refusal(summary):
        raise inputs.refused(said)
    touched = {str(s) for s in summary["shard"]}
    shards.record_complete(output, manifest, touched)
    return int(summary["rows"].sum()), touched


# -- 4. the record -----------------------------------------------------------------------------------------------

def _finish(output: Path, manifest: dict, model: ModelRef, kept: list, seconds: float, run_id: str) -> PredictResult:
    rejected = collections.Counter()
    for info in manifest["shards"].values():
        rejected.update({reason: int(n) for reason, n in info.get("rejects", {}).items()})
    skipped = {reason: rejected.pop(reason) for reason in SKIPPED if reason in rejected}
    rows, truncated, windowed = sum(int(s["rows"]) for s in manifest["shards"].values()), 0, 0
    for part in (part for info in manifest["shards"].values() for part in info["parts"]):
        table = pq.read_table(output / part, columns=["truncated", "windows"])
        truncated += sum(table.column("truncated").to_pylist())
        windowed += sum(n > 1 for n in table.column("windows").to_pylist())
    manifest.update(status="complete", finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"), rows=rows, rejected=rejected,
                    skipped=skipped, truncated=truncated, windowed=windowed)
    shards.write_json(output / shards.MANIFEST, manifest)
    this_run = sum(int(info["rows"]) for shard, info in manifest["shards"].items() if shard not in kept)
    return PredictResult(output, model, rows, rejected, truncated, len(kept), seconds, run_id, this_run, skipped,
                         windowed)


def _start_run(uri: str, cfg: PredictConfig, model: ModelRef, output: Path) -> str:
    from mlflow.tracking import MlflowClient

    from jobs.registry import tracking

    params = {"model": cfg.model, "model_uri": model.uri, "input": cfg.input, "output": str(output),
              "format": cfg.format, "batch_size": cfg.batch_size, "window": cfg.window, "shard_rows": cfg.shard_rows,
              "precision": cfg.precision, "max_batch_tokens": cfg.max_batch_tokens, "cpu_kernels": cfg.cpu_kernels}
    name = cfg.run_name or f"predict-{model.name or Path(model.uri).name}"
    run_id = tracking.start_run(uri, cfg.tracking.experiment, cfg.tracking.artifact_location, name, params)
    client = MlflowClient(uri)
    for k, v in {"job": "predict", "lineage.model_uri": model.uri, "lineage.model_name": model.name,
                 "lineage.model_version": model.version, "lineage.model_run_id": model.run_id,
                 "lineage.model_sha256": model.digest, "prediction.output": str(output),
                 **tracking.code_version()}.items():
        client.set_tag(run_id, k, str(v))
    return run_id


def _log_run(uri: str, run_id: str, r: PredictResult, output: Path, error: str) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    if error:
        client.set_tag(run_id, "error", error)
    # `rows` beside `seconds`: this run's (a rerun's rate is its own); rows_total: the output's, earlier runs' too
    for k, v in {"rows": r.rows_this_run, "rows_total": r.rows, "rejected": sum(r.rejected.values()),
                 "skipped": sum(r.skipped.values()), "truncated": r.truncated, "windowed": r.windowed,
                 "seconds": r.seconds}.items():
        client.log_metric(run_id, k, float(v))
    client.log_artifact(run_id, str(output / shards.MANIFEST))
    client.set_terminated(run_id, "FAILED" if error else "FINISHED")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


# what `truncated` counts, by kind: a tagger's and a reader's long inputs are windowed, not cut (the `windows` column)
TRUNCATED = {"question-answering": "whose question was cut to max_query_length (long contexts are windowed)",
             "token-classification": "(long texts are windowed, not cut: rows with windows > 1 in the output)"}


def summary(r: PredictResult, dashboard: str = "") -> str:
    m = r.model
    rejected = ", ".join(f"{k} {v}" for k, v in sorted(r.rejected.items())) or "none"
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(r.skipped.items()))
    total = f" ({r.rows:,} in the output)" if r.rows != r.rows_this_run else ""
    lines = ["=" * 72, f"predicted {r.rows_this_run:,} rows{total} with {m.uri}"
             + (f" ({m.name} v{m.version})" if m.version else ""),
             f"  output      {r.output} ({len(list((r.output / shards.SHARDS).glob('*')))} shards; "
             f"{r.skipped_shards} complete before this run)",
             f"  rejected    {rejected}", *([f"  skipped     {skipped} (no record)"] if skipped else []),
             f"  truncated   {r.truncated} rows " + TRUNCATED.get(m.kind, "over the model's length limit")
             + (f"; windowed {r.windowed:,}" if r.windowed else ""),
             f"  time        {_duration(r.seconds)} ({r.rows_this_run / max(r.seconds, 1e-9):,.0f} rows/s overall)",
             f"  MLflow run  {r.run_id}"]
    lines += [f"  Ray         {dashboard}"] * bool(dashboard) + [f"  {console.logs_line()}", "=" * 72]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, PredictConfig]:
    """The command line and the config it makes, loaded and validated as a run uses it (no framework imported)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="models:/NAME@alias, models:/NAME/VERSION (or latest), runs:/RUN_ID/model or a "
                        "folder")
    parser.add_argument("--input", help="files to predict: a file, folder, glob or URL")
    parser.add_argument("--output", help="a folder for the predictions (parquet shards + manifest.json)")
    parser.add_argument("--config", help="YAML file with PredictConfig fields")
    console.add_argument(parser)
    add_check_argument(parser)
    parser.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. columns.text=body")
    args = parser.parse_intermixed_args(argv)
    given = {"model": args.model, "input": args.input, "output": args.output}  # as typed: a path may hold emoji
    extra = [f"{k}={yaml_quoted(v)}" for k, v in given.items() if v]
    return args, load_config(PredictConfig, args.config, [*args.overrides, *extra])


def main(argv: list[str] | None = None) -> PredictResult:
    args, cfg = parse(argv)  # fails here, before any Ray work
    console.configure(args.verbose)
    if args.check:
        return checked("predict", check(cfg, args.config), args.overrides)
    return run(cfg)


if __name__ == "__main__":
    cli(main)
