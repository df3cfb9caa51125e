"""Fine-tune a pretrained BERT on a task: rows -> Ray Data features -> Ray Train + DeepSpeed -> best HF model -> MLflow.

The task's rows play three roles (pipelines/tasks/roles.py): the workers train on `train` and choose the best
checkpoint (and stop early) on `select`, carved from train; the chosen model is then scored once, here, on the
evaluation split (the benchmark's dev), which no choice saw: those are the numbers the run, the model card and
the registered version carry.

    python jobs/finetune.py --config configs/finetune/pkgdocs.yaml init=/path/to/hf-bert-folder
    python jobs/finetune.py --config configs/finetune/sst2.yaml init=models:/bert-foundry-tiny@candidate

Starting points: any HF BERT folder, a release folder of jobs/pretrain.py, or an MLflow model
(`models:/NAME@alias`, `runs:/RUN_ID/model`). The whole config is validated before any Ray work.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # `python jobs/finetune.py` from a checkout: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bert_core.config import ConfigError  # noqa: E402
from jobs.runtime import console, lease, resubmit  # noqa: E402
from jobs.runtime.capacity import Demand, ensure_capacity  # noqa: E402
from jobs.runtime.cluster import init_ray, prefer_loopback, refuse_sqlite_across_machines  # noqa: E402
from jobs.config.io import add_check_argument, checked, cli, load_config  # noqa: E402
from jobs.config.finetune import MLFLOW_SCHEMES, FinetuneConfig  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
# The workers' process group's timeout for one collective (Ray's TorchConfig default: 30 min). Rank 0 scores the whole
# select split alone while the other ranks wait in a broadcast (jobs/workers/finetune_worker.py): a select pass over
# 30 min (CPU workers, a large model, a large select_file, long rows) ended the group at the first evaluation, and Ray
# Train's restarts (train.max_failures) repeated it. A hung rank is found this much later; a dead one is Ray's to see.
GROUP_TIMEOUT_S = 4 * 3600


@dataclass
class FinetuneResult:
    run_name: str
    task: str
    main_metric: str  # the select metric that chose the checkpoint, e.g. "select/accuracy"; higher is better
    best: float  # its best value on select
    best_step: int
    metrics: dict  # every select metric at the best step
    history: list  # every evaluation on select up to the best one: {"step", "epoch", metrics...}
    export_dir: str  # the best model in HF format with tokenizer (loads in transformers.AutoModelFor*)
    init_dir: str  # the local folder the run started from
    labels: list  # class names in index order ([] for QA)
    # run_id, model_uri, registered_model, version, alias, tracking_*, continued_from/_at_step (a resubmitted run)
    mlflow: dict = field(default_factory=dict)
    eval_metric: str = ""  # the main metric on the evaluation split, e.g. "dev/accuracy"
    evaluation: dict = field(default_factory=dict)  # the chosen model on the evaluation split(s), scored once
    data: dict = field(default_factory=dict)  # {split: {"rows", "sha256"}} for train, select and evaluation


def run(cfg: FinetuneConfig) -> FinetuneResult:
    cfg.validate()  # idempotent; a config built by hand is refused here, before any Ray work
    cfg.check_environment()  # output folder, GPUs: what this machine must provide, also before Ray
    run_name = cfg.run_name or f"finetune-{cfg.task.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    with lease.run_lease(cfg.output_dir, run_name, "finetune"):  # a second job on this run_name: refused here
        return _run(cfg, run_name)


def _run(cfg: FinetuneConfig, run_name: str) -> FinetuneResult:
    prefer_loopback()
    import ray

    from jobs.loops import ft_tasks
    from jobs.registry import versions
    from jobs.registry import tracking

    tracking_uri = tracking.resolve_tracking_uri(cfg.tracking.tracking_uri)
    init = pin_alias(cfg.init, tracking_uri)  # the alias read once: the weights, the lineage, the basis agree
    init_dir = resolve_init(init, tracking_uri, Path(cfg.output_dir) / run_name / "init")
    check_init(cfg.task.max_seq_len, init, init_dir)
    dashboard = ""
    if cfg.task.name == "files":  # your files are read by Ray Data tasks, which wait for nodes as the run does:
        dashboard = init_ray()  # on an empty autoscaling cluster the wait is said and bounded here, not silent
        ensure_capacity(Demand.of_scaling(cfg.scaling))
    rows = ft_tasks.load_rows(cfg.task, init_dir)
    resolved = copy.deepcopy(cfg)  # the config this run uses, derived values settled; not changed after logging
    resolved.run_name, resolved.tracking.tracking_uri = run_name, tracking_uri
    resolved.task.with_labels(rows.labels)
    ft_tasks.note_truncated(resolved.task, rows, init_dir)
    print(ft_tasks.rows_line(cfg.task, rows), flush=True)
    task_data = (ft_tasks.data_source(cfg.task), ft_tasks.rows_digest(rows))
    init_id = init_name(init, init_dir)
    # a checkpoint means something together with the rows that trained and chose it; the evaluation split may change
    # (where it takes in rows of train, they leave train as leaks, and the basis changes with them)
    basis = continuation_basis(resolved, ft_tasks.rows_digest(rows, ("train", ft_tasks.SELECT)), init_id, init_dir)
    earlier = resubmit.check(Path(cfg.output_dir).resolve() / run_name, basis,  # refused if the basis changed
                             added=ADDED_TO_BASIS)

    dashboard = dashboard or init_ray()
    # waits for an autoscaler's nodes; refuses a fixed cluster's shortfall
    ensure_capacity(Demand.of_scaling(resolved.scaling))
    refuse_sqlite_across_machines(tracking_uri)
    ray.data.DataContext.get_current().enable_progress_bars = False
    # the workers get train and select only: no evaluation row reaches a choice
    train = _features(resolved, rows.train, init_dir)
    n_train, train_blocks = train.count(), numpy_blocks(train)  # the workers deal them out (jobs/loops/train_order)
    del train  # its Arrow blocks: the workers read the numpy ones
    datasets = {ft_tasks.SELECT: _features(resolved, rows.select, init_dir, evaluation=True)}
    if n_train < resolved.scaling.num_workers:  # each worker's share of an epoch is n_train // num_workers
        raise ConfigError(f"scaling.num_workers={resolved.scaling.num_workers}: {cfg.task.name} has {n_train} training "
                          f"features, so a worker would train on nothing; use at most {n_train} workers")
    steps_per_epoch, total = resolved.train.steps(n_train // resolved.scaling.num_workers)
    _refuse_finished(run_name, Path(cfg.output_dir).resolve() / run_name, earlier, total, tracking_uri)
    t = resolved.tracking
    lineage = tracking.lineage_tags("finetune", tokenizer_dir=str(init_dir), init=init_id, tracking_uri=tracking_uri,
                                    task_data=task_data)
    continued = resubmit.tags(earlier)
    data_tags = ft_tasks.split_tags(rows)
    # model logging reads the task from it, registered or not; past MLflow's limit for a registered version's tag it
    # is refused here, not at the registration
    task = asdict(resolved.task)
    task_config = versions.task_config_tag(task) if t.registered_model else json.dumps(task)
    run_id = tracking.start_run(tracking_uri, t.experiment, t.artifact_location, run_name, resolved.to_dict(),
                                tags={"task": cfg.task.name, "init": init_id, "init_requested": cfg.init, **lineage,
                                      **continued, **data_tags})
    workers = resolved.scaling.num_workers
    left = n_train % workers  # each worker trains on n_train // workers features an epoch
    print(f"[train] {run_name}: {workers} worker{'s' if workers > 1 else ''}, {n_train:,} train features"
          + (f" ({left} left out each epoch, others each time, to give every worker as many)" if left else "")
          + f", {total} steps ({steps_per_epoch}/epoch), main metric {ft_tasks.main_metric(resolved.task)}", flush=True)
    if unreached := resolved.train.unreached_cap(total):
        print(unreached, flush=True)
    if earlier:
        print(resubmit.line(run_name, earlier, total), flush=True)
    with tracking.ending(tracking_uri, run_id):  # a job that raises leaves its run FAILED, not FINISHED
        result = _fit(resolved, train_blocks, datasets, init_dir, rows.select, run_id, steps_per_epoch, total, basis)

        export_dir = Path(cfg.output_dir).resolve() / run_name / "best"
        history = _fetch_best(result.checkpoint, export_dir)
        best = history[-1]
        main = ft_tasks.main_metric(resolved.task)
        chosen = {k: v for k, v in best.items() if k not in ("step", "epoch")}
        evaluation = judge_chosen(export_dir, resolved.task, chosen, rows, resolved.train.eval_batch_size)
        counts = {k: result.metrics.get(k, 0) for k in ("tracking_failures", "tracking_undelivered",
                                                          "nonfinite_skipped", "resumes", "stopped_at_step")}
        card = versions.model_card(f"{ft_tasks.HF_TASK[resolved.task.kind]}: {cfg.task.name}, from {init_id}",
                                   evaluation, lineage, chosen_on=f"{main} {best[main]:.4f} at step {best['step']}",
                                   data=rows.summary())
        version_tags = {"task_config": task_config, "task": cfg.task.name, **data_tags,
                        **{f"eval.{k}": f"{v:.6f}" for k, v in evaluation.items()}}
        info = tracking.finish_run(tracking_uri, run_id, {**{f"best/{k}": v for k, v in chosen.items()}, **evaluation,
                                                          **counts}, str(export_dir), t.registered_model, t.alias,
                                   task=ft_tasks.HF_TASK[resolved.task.kind], version_tags=version_tags,
                                   description=card, input_example=tracking.input_example(rows.held()))
    info.update(counts, **continued)
    out = FinetuneResult(run_name, cfg.task.name, main, best[main], best["step"], chosen, history, str(export_dir),
                         str(init_dir), resolved.task.labels, info, eval_metric=ft_tasks.eval_metric(resolved.task),
                         evaluation=evaluation, data=rows.summary())
    print(summary(out, resolved, dashboard), flush=True)
    return out


def judge_chosen(export_dir: Path, task, chosen: dict, rows, batch_size: int) -> dict[str, float]:
    """The chosen model (in `export_dir`) on the evaluation split(s), once. SQuAD v2's null threshold chosen on
    select goes into the model's config.json first: the evaluation, the registry's copy and serving all use it."""
    from jobs.loops import collapse, ft_tasks
    from jobs.registry import scorer
    from jobs.runtime.files import write_atomic

    threshold = chosen.get(f"{ft_tasks.SELECT}/null_threshold")
    if threshold is not None:
        config = json.loads((export_dir / "config.json").read_text())
        config["null_threshold"] = threshold
        write_atomic(export_dir / "config.json", json.dumps(config, indent=2, sort_keys=True).encode())
    evaluation = scorer.evaluate_model(export_dir, task, rows.evaluation, batch_size)
    main = ft_tasks.eval_metric(task)
    print(f"[evaluate] the chosen model on {', '.join(f'{len(r):,} {s}' for s, r in rows.evaluation.items())} rows "
          f"(no choice saw them): {main} {evaluation[main]:.4f}", flush=True)
    split = ft_tasks.eval_splits(task)[0]
    majority = collapse.majority_baseline(task, rows.evaluation[split], split)
    if evaluation[main] <= majority + 1e-9:  # collapsed: say so before anyone promotes it
        print(f"[evaluate] warning: {main} {evaluation[main]:.4f} is no better than {collapse.collapsed_as(task)} "
              f"({majority:.4f}): more steps, another learning rate or more data", flush=True)
    return evaluation


def pin_alias(init: str, tracking_uri: str) -> str:
    """`models:/NAME@ALIAS` (or `/latest`, or a bare name) as the version it names now (`models:/NAME/7`); any other
    `init` as given (jobs/registry/versions.pin). Read once: a promotion that moves the alias while the job runs (or
    before a resubmission) must not make the weights downloaded, the lineage recorded (the version's run) and the
    resubmission basis three different versions."""
    from mlflow.exceptions import MlflowException

    from jobs.config.stores import refuse_absent_store
    from jobs.registry.versions import pin

    if init.startswith(MLFLOW_SCHEMES):  # opened, MLflow made an empty store (./mlflow.db) with nothing to download
        refuse_absent_store(tracking_uri, f"init {init!r}")
    try:
        return pin(init, tracking_uri)
    except MlflowException as exc:
        raise ConfigError(f"init {init!r} does not resolve: {exc.message.splitlines()[0]}") from None


def resolve_init(init: str, tracking_uri: str, download_dir: Path) -> Path:
    """A local HF folder for `init`: the folder itself, or an MLflow model downloaded into download_dir. A model
    transformers has no class for (the modern encoder with an architecture switch off: a recipe-ladder rung) is
    refused before any training: the job judges, registers and serves its model with transformers. So is a tokenizer
    that is not WordPiece (a BPE one, ModernBERT-base's, would be read as [UNK]s): every job that reads a model
    folder (fine-tuning, sweeps, prediction, promotion) refuses it here, before any Ray work."""
    from bert_core.modern_config import MODEL_TYPE, is_variant, model_type
    from pipelines.tasks.common import require_wordpiece

    folder = Path(init).resolve() if not init.startswith(MLFLOW_SCHEMES) else _download(init, tracking_uri,
                                                                                        download_dir)
    kind = model_type(folder) if (folder / "config.json").is_file() else ""
    if kind not in ("", "bert", MODEL_TYPE) and not is_variant(folder):  # a RoBERTa's weights fit BERT's names
        raise ConfigError(f"init {init!r} is a {kind!r} model (its config.json's model_type); this job trains BERT "
                          f"(bert) and ModernBERT (modernbert): another architecture's weights would load into "
                          f"BERT's layout without an error and compute something else")
    if kind and is_variant(folder):
        raise ConfigError(f"init {init!r} is the modern encoder with an architecture switch off (model.pre_norm, "
                          f"model.glu or model.rotary false), which no transformers class loads, and this job judges, "
                          f"registers and serves its model with transformers; fine-tune it in process as "
                          f"bench/recipe_ladder.py does, or start from a bert or modern release")
    require_wordpiece(folder)
    return folder


def check_init(max_seq_len: int, init: str, folder: Path) -> None:
    """The starting model as fine-tuning reads it, refused before any Ray work: task.max_seq_len within its position
    embeddings (a longer row fails in the workers' embedding lookup, after the cluster started) and within its
    tokenizer's model_max_length (our pretraining release sets it to the longest sequence trained: a 384-token SQuAD
    run from a 128-token release used position rows that never learned, and its export recorded 384), and its
    tokenizer as given (bert_core.tokenizer.check_tokenizer_folder: a bare cased vocab.txt that transformers reads
    uncased, a vocab.txt its tokenizer.json overrides). Not in resolve_init: prediction and promotion load models this
    project fine-tuned, as they were trained."""
    from bert_core.modern_config import MODEL_TYPE, VARIANT_MODEL_TYPE
    from bert_core.tokenizer import check_tokenizer_folder

    from bert_core.checkpoint import check_model_config

    check_tokenizer_folder(folder)
    config = json.loads((folder / "config.json").read_text())
    try:  # the model as the workers build it: an ALiBi, relative-position or causal BERT failed in every one
        check_model_config(folder, config)
    except ValueError as exc:  # ConfigError too: one line naming the init
        raise ConfigError(f"init {init!r}: {str(exc).removeprefix(f'{folder}: ')}") from None
    rows = config.get("vocab_size")
    if isinstance(rows, int) and (ids := _token_ids(folder)) > rows:
        # tokens added to a tokenizer without resizing the model's embeddings, or another model's tokenizer: the
        # first row holding such an id failed in a worker's embedding lookup (a bare IndexError), after Ray started
        raise ConfigError(f"init {init!r}: its tokenizer has {ids} token ids and its model {rows} embedding rows "
                          "(config.json's vocab_size): give the tokenizer the model was trained with, or resize the "
                          "model's embeddings to the tokenizer (transformers' resize_token_embeddings, then "
                          "save_pretrained)")
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and max_seq_len > positions:
        raise ConfigError(f"task.max_seq_len={max_seq_len} exceeds the {positions} positions of init {init!r} "
                          f"(its config.json's max_position_embeddings); allowed: task.max_seq_len <= {positions}")
    settings = folder / "tokenizer_config.json"
    trained = json.loads(settings.read_text()).get("model_max_length") if settings.is_file() else None
    # transformers writes int(1e30) (or 1e30) for "no limit": not a length anything was trained at
    if isinstance(trained, (int, float)) and not isinstance(trained, bool) and trained < 1e18 and max_seq_len > trained:
        said = (f"task.max_seq_len={max_seq_len} exceeds the length {int(trained)} of init {init!r} (its "
                f"tokenizer_config.json's model_max_length")
        if not any(a.endswith(("ForPreTraining", "ForMaskedLM")) for a in config.get("architectures") or []):
            # a fine-tuned model's (or an encoder export's, sentence-transformers') is the length it was tuned at
            print(f"[init] warning: {said}: the length it was last trained at; positions past it are its "
                  "pretraining's, if that was longer)", flush=True)
            return
        # ModernBERT has no position table: its rotary attention never saw a distance past the length trained
        rotary = config.get("model_type") in (MODEL_TYPE, VARIANT_MODEL_TYPE) and config.get("rotary", True)
        unlearned = (f"its rotary positions were trained only up to {int(trained)} tokens" if rotary
                     else f"position rows {int(trained)}..{max_seq_len - 1} never learned")
        raise ConfigError(f"{said}; a pretraining checkpoint's is the longest sequence it trained, as this project's "
                          f"releases write it): {unlearned}; allowed: task.max_seq_len <= "
                          f"{int(trained)}, or an init pretrained that long (a longer phase, e.g. "
                          f"phase2.max_seq_len=512 with phase2.max_steps > 0)")


def _token_ids(folder: Path) -> int:
    """How many token ids the fine-tuning featurizer's tokenizer (pipelines.tasks.common) gives, added tokens in."""
    from pipelines.tasks.common import load_tokenizer

    return len(load_tokenizer(folder))


def _download(init: str, tracking_uri: str, download_dir: Path) -> Path:
    """An MLflow model URI's files, downloaded into download_dir: the folder holding its config and weights."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    if download_dir.exists():
        shutil.rmtree(download_dir)
    download_dir.mkdir(parents=True)
    root = Path(mlflow.artifacts.download_artifacts(artifact_uri=init, dst_path=str(download_dir)))
    return find_hf_folder(root)


def find_hf_folder(root: Path) -> Path:
    """The folder holding an HF BERT config + weights under `root` (an MLflow transformers model keeps them
    in model/ and the tokenizer in components/tokenizer/; the tokenizer files are copied beside them)."""
    configs = sorted(p.parent for p in root.rglob("config.json")  # weights whole or sharded (an index beside them)
                     if any(p.parent.glob("*.safetensors")) or (p.parent / "pytorch_model.bin").is_file()
                     or (p.parent / "pytorch_model.bin.index.json").is_file())
    if not configs:
        raise FileNotFoundError(f"no HF checkpoint (config.json + weights) under {root}")
    folder = configs[0]
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        tokenizers = sorted(p.parent for name in TOKENIZER_FILES for p in root.rglob(name))
        if not tokenizers:
            raise FileNotFoundError(f"no tokenizer ({', '.join(TOKENIZER_FILES)}) under {root}")
        for f in tokenizers[0].iterdir():
            if f.is_file() and not (folder / f.name).exists():
                shutil.copy2(f, folder / f.name)
    return folder


# where rows live; the rows' digest says what
PATH_FIELDS = ("data_dir", "train_file", "dev_file", "select_file", "corpus_dir")


def init_name(init: str, init_dir: Path) -> str:
    """What a run records as its starting point: a model URI as pinned (pin_alias), a folder as resolved (found again
    from any working directory)."""
    return init if init.startswith(MLFLOW_SCHEMES) else str(init_dir)


def _refuse_finished(run_name: str, run_dir: Path, earlier: dict | None, total: int, tracking_uri: str) -> None:
    """resubmit.refuse_finished, for a fine-tune: nothing is left where its checkpoint is at `total` steps or its
    loop stopped early (patience ran out)."""
    latest = resubmit.latest(run_dir) if earlier else None
    state = latest / "state.json" if latest else None
    stopped = bool(state and state.is_file() and json.loads(state.read_text()).get("stopped"))
    resubmit.refuse_finished(run_name, run_dir, earlier, bool(earlier) and (earlier["step"] >= total or stopped),
                             tracking_uri)


def continuation_basis(cfg: FinetuneConfig, rows_sha256: str, init: str, init_dir: Path | None = None) -> dict:
    """What a fine-tune's checkpoint means only together with (jobs/runtime/resubmit.py): the task (its settings, not
    its paths), the rows it trains and chooses on (train and select: a new evaluation split leaves a checkpoint
    valid, unless it holds rows of train, which then leave train as leaks), where it started (`init`: a model URI or
    the resolved folder), the batch size, the worker count and the seed (a resumed epoch skips the batches it took
    in the seed's order, and its step counts the batches of that many workers: on another count the epochs and the
    schedule would not add up), and the engine's checkpoint layout (the ZeRO stage, precision and optimizer offload:
    a checkpoint of another one failed to load in every worker, retried until train.max_failures ran out). A folder
    `init` (`init_dir`) by what it holds too: the pretraining run its release record names and its tokenizer's hash
    (a registered version's files never change). A release folder written again by a pretraining started over on
    another corpus passed by its path: the resubmission went on from weights of the first, read through the second's
    vocabulary, and its lineage named the second."""
    from bert_core.tokenizer import tokenizer_hash
    from jobs.runtime.release import written_by

    task = {f"task.{k}": v for k, v in asdict(cfg.task).items() if k not in PATH_FIELDS}
    d = cfg.deepspeed
    folder = {} if init_dir is None or init.startswith(MLFLOW_SCHEMES) else {
        "init written by": written_by(init_dir) or "no release record", "init tokenizer": tokenizer_hash(init_dir)}
    return {**task, "task rows sha256": rows_sha256, "init": init, **folder, "train.batch_size": cfg.train.batch_size,
            "scaling.num_workers": cfg.scaling.num_workers, "train.seed": cfg.train.seed,
            "deepspeed.zero_stage": d.zero_stage, "deepspeed.precision": d.precision,
            "deepspeed.offload_optimizer": d.offload_optimizer}


# the keys the basis gained after runs had checkpoints: a checkpoint whose record lacks them continues unchecked on them
ADDED_TO_BASIS = ("deepspeed.zero_stage", "deepspeed.precision", "deepspeed.offload_optimizer", "init written by",
                  "init tokenizer")


def _features(cfg: FinetuneConfig, rows: list[dict], init_dir: Path, evaluation: bool = False):
    """Rows -> model features as Ray Data tasks (jobs.loops.ft_tasks.featurize), materialized, in the rows' order;
    an `evaluation` split's as ft_tasks.evaluation_task says. The workers train on the training features in a new
    order every epoch, seeded by train.seed (jobs/loops/train_order.py): row numbers index this order."""
    import ray

    from jobs.loops.ft_tasks import evaluation_task, featurize
    from pipelines.tasks.common import load_tokenizer

    tokenizer = load_tokenizer(str(init_dir))  # a fast tokenizer pickles: tasks need no path of ours
    task = {k: v for k, v in vars(cfg.task).items()}
    task = evaluation_task(task) if evaluation else task
    source = rows.dataset if hasattr(rows, "dataset") else ray.data.from_items(rows)  # your files: in the cluster
    features = source.map_batches(featurize, fn_args=(task, tokenizer), batch_size=cfg.features.batch_size,
                                  batch_format="numpy")
    # blocks in their input's order, not as their tasks finished: else row numbers meant other rows from run to run,
    # and a resubmitted run skipping the batches its epoch took would skip other rows than it trained on
    features.context.execution_options.preserve_order = True
    return features.materialize()


def numpy_blocks(features) -> list:
    """Materialized training features as numpy blocks in the object store (refs, in the rows' order), every one made
    before this returns: the workers and trials that read them hold the CPUs a pending conversion task would wait
    for, and would wait for it for ever on a cluster they fill."""
    import ray

    refs = features.to_numpy_refs()
    ray.wait(refs, num_returns=len(refs), fetch_local=False)
    return refs


def _fit(cfg: FinetuneConfig, train_blocks: list, datasets: dict, init_dir: Path, select_rows: list[dict], run_id: str,
         steps_per_epoch: int, total: int, basis: dict):
    import ray
    from ray.train import CheckpointConfig, DataConfig, FailureConfig, RunConfig
    from ray.train import ScalingConfig as RayScaling
    from ray.train.torch import TorchConfig, TorchTrainer

    from jobs.loops.loss_guard import Verdict
    from jobs.runtime.cluster import on_driver_node
    from jobs.workers.finetune_worker import train_loop_per_worker

    files = {f.name: f.read_bytes() for f in init_dir.iterdir() if f.is_file()}
    verdict = Verdict.options(**on_driver_node()).remote()
    loop_config = {"cfg": cfg, "init_files": ray.put(files), "train_blocks": train_blocks,
                   "select_rows": ray.put(select_rows),
                   "steps_per_epoch": steps_per_epoch, "total_steps": total, "mlflow_run_id": run_id,
                   "basis": basis, "verdict": verdict}
    s = cfg.scaling
    trainer = TorchTrainer(
        train_loop_per_worker, train_loop_config=loop_config, datasets=datasets,
        torch_config=TorchConfig(timeout_s=GROUP_TIMEOUT_S),  # rank 0's select pass, the others waiting
        dataset_config=DataConfig(datasets_to_split=[]),  # select: whole, on rank 0
        scaling_config=RayScaling(num_workers=s.num_workers, use_gpu=s.use_gpu,
                                  resources_per_worker={"CPU": s.cpus_per_worker},
                                  placement_strategy=s.placement_strategy),
        run_config=RunConfig(name=cfg.run_name, storage_path=str(Path(cfg.output_dir).resolve()),
                             logging_config=console.train_logging(),
                             checkpoint_config=CheckpointConfig(num_to_keep=1),  # the latest holds the best model
                             failure_config=FailureConfig(max_failures=cfg.train.max_failures)),
    )
    result = trainer.fit()
    if result.error:
        raise result.error
    if why := ray.get(verdict.get.remote()):  # diverged: ended at once, not retried train.max_failures times
        raise FloatingPointError(why)
    return result


def _fetch_best(checkpoint, export_dir: Path) -> list:
    """Copy the best model out of Ray storage (atomic replace: a stop at any point leaves the earlier model or this
    one, never neither); returns the evaluation history up to it."""
    import json

    from bert_core.checkpoint import atomic_dir

    with checkpoint.as_directory() as d, atomic_dir(export_dir) as tmp:
        shutil.copytree(Path(d) / "model", tmp, dirs_exist_ok=True)
        history = json.loads((Path(d) / "history.json").read_text())
    return history


def summary(r: FinetuneResult, cfg: FinetuneConfig, dashboard: str) -> str:
    from jobs.registry.metric_logger import outage_line
    from jobs.registry.tracking import redact

    sizes = ", ".join(f"{split} {info['rows']:,}" for split, info in r.data.items())
    lines = ["", "=" * 72,
             f"run              {r.run_name} ({r.task}, from {cfg.init})",
             f"chosen           step {r.best_step}: {r.main_metric} {r.best:.4f} "
             f"({len(r.history)} evaluations on select up to it)",
             f"evaluation       {r.eval_metric} {r.evaluation[r.eval_metric]:.4f} "
             f"({sizes} rows)",
             f"best model (HF)  {r.export_dir}",
             f"early stopping   " + (f"stopped at step {r.mlflow['stopped_at_step']}: {cfg.train.patience} evaluations "
                                     f"without a better {r.main_metric}" if r.mlflow.get("stopped_at_step")
                                     else f"not triggered (patience {cfg.train.patience or 'off'})"),
             f"worker failures  {r.mlflow.get('resumes', 0)} survived (each resumed from the last evaluation)",
             *([f"continued        from step {r.mlflow['continued_at_step']} of MLflow run {r.mlflow['continued_from']}"
                f" (an earlier submission of {r.run_name})"] if r.mlflow.get("continued_from") else []),
             f"MLflow run       {r.mlflow.get('run_id')} in {redact(cfg.tracking.tracking_uri)}",
             f"tracking         {outage_line(r.mlflow)}"]
    if r.mlflow.get("version"):
        lines.append(f"registered model {r.mlflow['registered_model']} v{r.mlflow['version']} "
                     f"(alias @{r.mlflow['alias']}): models:/{r.mlflow['registered_model']}@{r.mlflow['alias']}")
    lines += [f"Ray dashboard    {dashboard or 'not running'}",
              console.logs_line(),
              "=" * 72]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, FinetuneConfig]:
    """The command line and the config it names, loaded and validated as a run uses it (no framework imported)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML file (see configs/finetune/)")
    console.add_argument(parser)
    add_check_argument(parser)
    parser.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. train.epochs=2")
    args = parser.parse_intermixed_args(argv)
    return args, load_config(FinetuneConfig, args.config, args.overrides)


def main(argv: list[str] | None = None) -> FinetuneResult:
    args, cfg = parse(argv)  # fails here, before any Ray work
    console.configure(args.verbose)
    if args.check:
        cfg.check_environment()  # your own files' columns too, as run() checks them before Ray
        lease.probe_run_lease(cfg.output_dir, cfg.run_name)  # a job running on this run_name: refused as run() is
        return checked("finetune", args.config, args.overrides)
    return run(cfg)


if __name__ == "__main__":
    cli(main)
