"""Pretrain BERT: corpus -> prepared examples -> Ray Train + DeepSpeed -> release checkpoint -> MLflow.

    python jobs/pretrain.py --config configs/pretrain/quickstart.yaml train.max_steps=200
    RAY_AUTH_MODE=token ray job submit --working-dir . -- python jobs/pretrain.py --config ...

The job joins the cluster it was submitted to (or one started with `ray start` on this machine)
and starts a local Ray otherwise. The whole config is validated before any Ray work.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

if __package__ in (None, ""):  # `python jobs/pretrain.py` from a checkout: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.runtime import console, lease  # noqa: E402
from jobs.runtime.capacity import Demand, ensure_capacity  # noqa: E402
from jobs.runtime.cluster import init_ray, prefer_loopback, refuse_sqlite_across_machines  # noqa: E402
from jobs.runtime.pretrain_summary import (PretrainResult, data_metrics, rejects_line,  # noqa: E402,F401
                                           summary)  # rejects_line: tests
from jobs.runtime.release import fetch_release  # noqa: E402
from bert_core.config import ConfigError  # noqa: E402
from jobs.config.pretrain import PretrainConfig, eval_set_size  # noqa: E402
from jobs.config.io import add_check_argument, checked, cli, load_config  # noqa: E402

DATASOURCE_V2 = "RAY_DATA_USE_DATASOURCE_V2"  # Ray Data's parquet reader (V1 or V2): see read_shards
FOOTER_READERS = "RAY_DATA_PARQUET_FOOTER_NUM_ACTORS"  # V2's parquet listing: see read_shards

# Columns the trainer reads; debug columns stay on disk.
TRAIN_COLUMNS = ["example_id", "input_ids", "num_a_tokens", "next_sentence_label"]
STATIC_COLUMNS = ["masked_positions", "masked_ids"]


def run(cfg: PretrainConfig, finished_ok: bool = False) -> PretrainResult:
    """The whole job; with phase2.max_steps > 0, phase 1 (data.max_seq_len) then phase 2 in one job,
    as a parent MLflow run with one child run per phase. A run that finished, submitted again with no step left,
    is refused (resubmit.refuse_finished) unless `finished_ok` (a resumed quickstart goes on to its sweep)."""
    cfg.check_environment()  # output folder, corpus paths, GPUs: refused here, before any Ray work
    cfg.run_name = cfg.run_name or f"pretrain-{time.strftime('%Y%m%d-%H%M%S')}"
    with lease.run_lease(cfg.output_dir, cfg.run_name, "pretrain"):  # a second job on this run_name: refused here
        return _run(cfg, finished_ok)


def _run(cfg: PretrainConfig, finished_ok: bool) -> PretrainResult:
    prefer_loopback()
    import ray

    from jobs.runtime import resubmit
    from jobs.registry import tracking
    from pipelines.harvest import harvest_installed_docs
    from pipelines.prepare import prepare

    refuse_other_layout(cfg)
    if not finished_ok:
        refuse_finished_before_ray(cfg)
    dashboard = init_ray()
    # waits for an autoscaler's nodes; refuses a fixed cluster's shortfall
    ensure_capacity(Demand.of_scaling(cfg.scaling))
    refuse_sqlite_across_machines(cfg.tracking.tracking_uri)
    ray.data.DataContext.get_current().enable_progress_bars = False  # our own progress lines instead
    if cfg.corpus.harvest_installed_docs:
        print(f"[corpus] harvesting installed documentation into {cfg.corpus.harvest_dir}", flush=True)
        h = harvest_installed_docs(cfg.corpus.harvest_dir, max_mb=cfg.corpus.harvest_max_mb)
        print(f"[corpus] {h['documents']:,} documents, {h['bytes'] / 2**20:.1f} MB", flush=True)
        if h.get("unparsed"):  # harvests from before the count lack it
            print(f"[corpus] warning: {h['unparsed']} source file(s) could not be parsed and were skipped, e.g. "
                  f"{', '.join(h['unparsed_sample'])}", flush=True)
    prepared = prepare(cfg.data)
    corpus_metrics = data_metrics(prepared.manifest)
    cfg.tracking.tracking_uri = tracking.resolve_tracking_uri(cfg.tracking.tracking_uri)
    resolved = resolve_config(cfg, prepared.tokenizer_dir)  # logged as is, never changed after
    t = resolved.tracking
    phase1 = copy.deepcopy(resolved)
    phase1.run_name = f"{cfg.run_name}-phase1" if cfg.phase2.max_steps else cfg.run_name
    resubmit.refuse_phase1_past_hand_off(cfg)  # and no phase-1 step past the weights phase 2 took
    continued = resubmit.tags(_continues(phase1, prepared))  # refused here, before MLflow
    done = _phase1_done(phase1) if cfg.phase2.max_steps else None  # finished by an earlier submission: not rerun
    # the job's run continues the earlier one where it trains on from it itself, or phase 1 is not run again
    run_id = tracking.start_run(t.tracking_uri, t.experiment, t.artifact_location, cfg.run_name,
                                resolved.to_dict(), tags={**_lineage(prepared),
                                                          **(continued if done or not cfg.phase2.max_steps else {})})
    with tracking.ending(t.tracking_uri, run_id):  # a job that raises leaves its runs FAILED, not FINISHED
        if cfg.phase2.max_steps:
            first = done or _fit_phase(phase1, prepared, run_id, phase1.to_dict(),
                                       {**_lineage(prepared), "phase": "1", **continued})
            phase2 = phase2_config(resolved, first.checkpoint.path, prepared.tokenizer_dir)
            prepared = prepare(phase2.data)
            # the same corpus read, but phase 2's examples: what the registered model was last trained on
            phase1_examples = {f"phase1/{k}": v for k, v in corpus_metrics.items() if k == "data/examples_train"}
            corpus_metrics = {**data_metrics(prepared.manifest), **phase1_examples}
            phase2 = resolve_config(phase2, prepared.tokenizer_dir)
            lineage = _lineage(prepared)  # the tokenizer and manifest hashed once, for the parent and the phase
            _tag_phase2_lineage(t.tracking_uri, run_id, lineage)
            continued = resubmit.tags(_continues(phase2, prepared))
            result = _fit_phase(phase2, prepared, run_id, phase2_params(phase2), {**lineage, "phase": "2", **continued})
            metrics = {**{f"phase1/{k}": v for k, v in first.metrics.items()}, **result.metrics}
            metrics["checkpoints_ignored"] = _report_ignored(phase1) + _report_ignored(phase2)
        else:
            result = _fit(resolved, prepared, run_id)
            metrics = {**result.metrics, "checkpoints_ignored": _report_ignored(resolved)}
        metrics.update(corpus_metrics)

        release_dir = Path(cfg.output_dir).resolve() / cfg.run_name / "release"
        fetch_release(result.checkpoint, release_dir, prepared.tokenizer_dir, trained_positions(cfg), run_id,
                      t.tracking_uri)
        info = tracking.finish_run(t.tracking_uri, run_id, metrics, str(release_dir), t.registered_model, t.alias,
                                   task=tracking.PRETRAINING)
    out = PretrainResult(cfg.run_name, metrics, result.checkpoint.path, str(release_dir), prepared.path, info)
    print(summary(out, cfg, dashboard), flush=True)
    return out


class _Phase1(NamedTuple):
    """Phase 1 as an earlier submission left it (_phase1_done): what _run reads of a Ray Result."""
    metrics: dict
    checkpoint: object  # a ray.train.Checkpoint


def _fit_phase(cfg: PretrainConfig, prepared, parent_id: str, params: dict, tags: dict):
    """One phase of a two-phase job, fitted (_fit) under a child run of the job's run, which holds its curves."""
    from jobs.registry import tracking

    t = cfg.tracking
    phase_id = tracking.start_run(t.tracking_uri, t.experiment, t.artifact_location, cfg.run_name, params,
                                  tags={**tags, "mlflow.parentRunId": parent_id})
    with tracking.ending(t.tracking_uri, phase_id, finished=True):
        result = _fit(cfg, prepared, phase_id)
        tracking.log_curves(t.tracking_uri, phase_id)  # its workers logged its steps: the parent has none
    return result


def _phase1_done(phase1: PretrainConfig) -> _Phase1 | None:
    """Phase 1 as an earlier submission of the job finished it (resubmit.finished: its last checkpoint, and the
    metrics Ray Train recorded with it), in place of the Ray Result of fitting it again; None where it has steps left.
    Fitted again, it trained no step but started its workers, evaluated and wrote its last checkpoint (optimizer
    state and release) anew on every resubmission of phase 2, under a new phase-1 run. The job's run is tagged as
    continuing the phase-1 run that trained it instead (resubmit.tags)."""
    from ray.train import Checkpoint

    from jobs.runtime import resubmit

    done = resubmit.finished(Path(phase1.output_dir).resolve() / phase1.run_name, phase1.train.max_steps)
    if done is None:
        return None
    checkpoint, metrics, earlier = done
    print(f"[train] {phase1.run_name} finished in an earlier submission (step {earlier['step']}, MLflow run "
          f"{earlier['run_id'] or 'unrecorded'}): not run again; phase 2 starts from {checkpoint}", flush=True)
    return _Phase1(metrics, Checkpoint(str(checkpoint)))


def _lineage(prepared) -> dict:
    """A pretraining run's tags: data_dir (as before) and the lineage of its prepared set and tokenizer."""
    from jobs.registry.tracking import lineage_tags

    return {"data_dir": prepared.path,
            **lineage_tags("pretrain", prepared=prepared, tokenizer_dir=prepared.tokenizer_dir)}


def _tag_phase2_lineage(tracking_uri: str, run_id: str, lineage: dict) -> None:
    """The parent run (whose tags the registered version takes) names phase 2's prepared set too: the release's
    weights last trained on it, and its lineage named phase 1's alone (jobs/lineage.py checks both manifests).
    `lineage`: _lineage of phase 2's prepared set."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    for key, value in lineage.items():
        if key in ("lineage.data_dir", "lineage.data_name", "lineage.data_manifest_sha256"):
            client.set_tag(run_id, key.replace("lineage.", "lineage.phase2.", 1), value)


def continuation_basis(cfg: PretrainConfig, prepared) -> dict:
    """What a pretraining checkpoint means only together with (jobs/runtime/resubmit.py): the prepared set its data
    position counts examples of (named by a hash of its inputs and config), the model's shape, and the settings its
    optimizer state loads under only (resubmit.PRETRAINING_OPTIMIZER), and where a run started (resubmit.started)."""
    from jobs.runtime import resubmit

    optimizer = {**resubmit.settings(cfg, resubmit.PRETRAINING_OPTIMIZER), **resubmit.started(cfg)}
    if cfg.recipe == "bert":  # its shape, and what the same shapes could compute otherwise (BERT_FUNCTION)
        return {"prepared set": Path(prepared.path).name, **optimizer,
                **{f"model.{k}": getattr(cfg.model, k) for k in (*resubmit.MODEL_SHAPE, *resubmit.BERT_FUNCTION)}}
    # the modern encoder: every field that makes it another model (switches, biases, attention pattern, positions);
    # not the fine-tuning heads' settings (classifier_pooling), which pretraining never reads
    fields = {k: v for k, v in dataclasses.asdict(cfg.model).items()
              if not k.endswith(("dropout", "initializer_range", "initializer_cutoff_factor"))
              and k != "classifier_pooling"}
    return {"prepared set": Path(prepared.path).name, "model.recipe": cfg.recipe, **optimizer,
            **{f"model.{k}": v for k, v in fields.items()}}


def refuse_other_layout(cfg: PretrainConfig) -> None:
    """A run_name switched between one phase and two, refused before any Ray work: a single-phase run keeps its
    checkpoints in <run_name>, a two-phase one in <run_name>-phase1 and -phase2, so the switched job found none and
    trained phase 1 again from step 0 (and wrote over the earlier release)."""
    from jobs.runtime import resubmit

    if not cfg.run_name:
        return
    out = Path(cfg.output_dir).resolve()
    ours = [f"{cfg.run_name}-phase1", f"{cfg.run_name}-phase2"] if cfg.phase2.max_steps else [cfg.run_name]
    other = [cfg.run_name] if cfg.phase2.max_steps else [f"{cfg.run_name}-phase1", f"{cfg.run_name}-phase2"]
    if any(resubmit.latest(out / name) for name in ours):
        return
    found = next((out / name for name in other if resubmit.latest(out / name)), None)
    if found:
        kind, this = (("a single-phase", "two-phase") if cfg.phase2.max_steps else ("a two-phase", "single-phase"))
        raise ConfigError(f"run_name={cfg.run_name}: {found} holds {kind} run's checkpoints (latest "
                          f"{resubmit.latest(found)}), which this {this} job (phase2.max_steps="
                          f"{cfg.phase2.max_steps}) would not continue: it would train from step 0. Choose a new "
                          f"run_name, with train.init_checkpoint=<that checkpoint> to start from its weights (and "
                          f"train.reset_optimizer=true for a fresh optimizer), or remove {found} to start over")


def refuse_finished_before_ray(cfg: PretrainConfig) -> None:
    """A job that finished, submitted again with no step left, refused before any Ray work, whatever else changed:
    on an autoscaling cluster (a RayJob retried, a CI step re-run) it came after the wait for the GPU nodes and
    prepare. A two-phase job is judged by phase 2's run (its record and its parent job run, the last that trained
    phase 2), and has nothing left only where phase 1's checkpoint is at its end too. (Phase 1's record names the job
    that trained phase 1, which a later submission does not fit again (_phase1_done): judged by it, a job that
    failed in phase 2 and was then finished by a resubmission let a third, identical submission register the same
    weights again, and one whose registration failed after a resubmission trained phase 2 on was refused.)"""
    from jobs.registry import tracking
    from jobs.runtime import resubmit

    out, uri = Path(cfg.output_dir).resolve(), tracking.resolve_tracking_uri(cfg.tracking.tracking_uri)
    if not cfg.phase2.max_steps:
        if record := resubmit.latest_record(out / cfg.run_name):
            resubmit.refuse_finished(cfg.run_name, out / cfg.run_name, record, record["step"] >= cfg.train.max_steps,
                                     uri)
        return
    name = f"{cfg.run_name}-phase2"
    if second := resubmit.latest_record(out / name):
        ended = resubmit.at_end(out / f"{cfg.run_name}-phase1", cfg.train.max_steps)
        resubmit.refuse_finished(name, out / name, second, ended and second["step"] >= cfg.phase2.max_steps, uri)


def _continues(cfg: PretrainConfig, prepared) -> dict | None:
    """The record of the checkpoint a run of `cfg` on `prepared` continues from (refused if written on another
    basis, or in a layout the workers could not load), with a line saying so; None for a new run. A finished job
    was refused before (refuse_finished_before_ray)."""
    from jobs.runtime import resubmit

    run_dir = Path(cfg.output_dir).resolve() / cfg.run_name
    resubmit.refuse_unloadable(run_dir, cfg)  # before the basis check: it says what loads instead
    earlier = resubmit.check(run_dir, continuation_basis(cfg, prepared),  # (older records lack these)
                             added=(*(f"model.{k}" for k in resubmit.BERT_FUNCTION), *resubmit.PRETRAINING_OPTIMIZER,
                                    *resubmit.STARTED))
    if earlier:
        print(resubmit.line(cfg.run_name, earlier, cfg.train.max_steps), flush=True)
    elif cfg.train.init_checkpoint:
        resubmit.refuse_unloadable_init(cfg)
    return earlier


def resolve_config(cfg: PretrainConfig, tokenizer_dir: str) -> PretrainConfig:
    """A copy of `cfg` with the values derived from the prepared data settled: the model's vocab size and
    pad id are the tokenizer's (a trained tokenizer has data.tokenizer.vocab_size tokens or fewer, not
    the preset's 30522; the modern recipe pads it to a multiple of 64). This is the config the run uses and logs."""
    from bert_core.tokenizer import SpecialIds, load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    out = copy.deepcopy(cfg)
    out.model.vocab_size, out.model.pad_token_id = model_vocab_size(cfg, tok.get_vocab_size()), \
        SpecialIds.from_tokenizer(tok).pad
    return out.validate()


def model_vocab_size(cfg: PretrainConfig, tokenizer_size: int) -> int:
    """The embedding rows for a tokenizer of `tokenizer_size` ids: as many (BERT), or padded to a multiple of 64
    (the modern recipe: bert_core.modern_config.pad_vocab_size)."""
    from bert_core.modern_config import pad_vocab_size

    return pad_vocab_size(tokenizer_size) if cfg.recipe == "modern" else tokenizer_size


def phase2_params(phase2: PretrainConfig) -> dict:
    """Phase 2's run parameters: its config without the phase2 section, which phase2_run leaves at its defaults (so
    that it runs no phase of its own): logged, they said reset_optimizer=True, lr=0 and max_steps=0 beside a phase
    that ran 45,000 steps at 8.8e-4 on phase 1's moments. What phase 2 ran is in its train, optim and data sections;
    the parent run holds the job's phase2 section as given."""
    params = phase2.to_dict()
    del params["phase2"]
    return params


def phase2_config(cfg: PretrainConfig, phase1_checkpoint: str, tokenizer_dir: str) -> PretrainConfig:
    """Phase 2 = phase 1's config at the longer length, same tokenizer, starting from phase 1's weights
    (PretrainConfig.phase2_run, which validate() runs before any work)."""
    return cfg.phase2_run(phase1_checkpoint, tokenizer_dir)


def _readers(cfg: PretrainConfig, prepared) -> int:
    """The ranks that read training data (first-stage ranks), refused when the training split has fewer examples:
    Ray's equal split, or a pipeline replica's share, would then hand a rank no row in any epoch."""
    readers = cfg.scaling.num_workers // cfg.deepspeed.pipeline_stages
    rows = sum(s["rows"] for s in prepared.manifest["shards"]["train"])
    if rows < readers:
        raise ConfigError(f"the training split of {prepared.path} has {rows} examples, fewer than the {readers} "
                          "data-parallel workers that read it: give a larger corpus or fewer scaling.num_workers")
    return readers


def _fit(cfg: PretrainConfig, prepared, run_id: str):
    """One Ray Train run over a prepared set; returns Ray's Result (raises the run's error)."""
    import numpy as np
    import ray
    from ray.train import CheckpointConfig, DataConfig, FailureConfig, RunConfig
    from ray.train import ScalingConfig as RayScaling
    from ray.train.torch import TorchTrainer

    from bert_core.tokenizer import SpecialIds, continuation_mask, load_tokenizer
    from jobs.loops.data_position import DataPositionTracker, skip_consumed
    from jobs.loops.loss_guard import RollbackLedger
    from jobs.runtime.cluster import on_driver_node
    from jobs.workers.pretrain_worker import train_loop_per_worker

    tok = load_tokenizer(prepared.tokenizer_dir)
    special = SpecialIds.from_tokenizer(tok)
    want = model_vocab_size(cfg, tok.get_vocab_size())
    if (cfg.model.vocab_size, cfg.model.pad_token_id) != (want, special.pad):
        raise ValueError("_fit needs a config from resolve_config: model.vocab_size/pad_token_id "
                         f"{cfg.model.vocab_size}/{cfg.model.pad_token_id} vs {want}/{special.pad} from the "
                         f"tokenizer ({tok.get_vocab_size()} ids)")
    columns = TRAIN_COLUMNS + (STATIC_COLUMNS if cfg.data.masking == "static" else [])
    shard_rows = [s["rows"] for s in prepared.manifest["shards"]["train"]]
    readers = _readers(cfg, prepared)
    tracker = DataPositionTracker.options(**on_driver_node()).remote(sum(shard_rows), readers)  # as long as the driver
    train = read_shards(prepared.train_files).select_columns(columns)
    datasets = {"train": skip_consumed(train, tracker, shard_rows)}
    loop_config = {
        "cfg": cfg.to_worker(),
        "train_shard_rows": shard_rows,
        "data_tracker": tracker,
        "rollback_ledger": RollbackLedger.options(**on_driver_node()).remote(),  # outlives worker restarts
        "special_ids": {k: getattr(special, k) for k in ("pad", "unk", "cls", "sep", "mask")},
        "tokenizer_size": tok.get_vocab_size(),  # random MLM replacements are drawn below it, not a padded vocab
        "continuation": np.asarray(continuation_mask(tok)).tolist() if cfg.train.masking.whole_word else None,
        "mlflow_run_id": run_id,
        "basis": continuation_basis(cfg, prepared),
        "eval_rows": ray.put(_eval_rows(cfg, prepared, columns)),
        "held_out": _held_out_read(cfg),  # recorded with each checkpoint: a resubmission reads as many
    }
    trainer = TorchTrainer(
        train_loop_per_worker, train_loop_config=loop_config, datasets=datasets,
        # Pipelines: only first-stage ranks read, so Ray must not hand the later stages a share.
        dataset_config=DataConfig(datasets_to_split=[] if cfg.deepspeed.pipeline_stages > 1 else "all"),
        scaling_config=RayScaling(num_workers=cfg.scaling.num_workers, use_gpu=cfg.scaling.use_gpu,
                                  resources_per_worker={"CPU": cfg.scaling.cpus_per_worker},
                                  placement_strategy=cfg.scaling.placement_strategy),
        run_config=RunConfig(name=cfg.run_name, storage_path=str(Path(cfg.output_dir).resolve()),
                             logging_config=console.train_logging(),
                             checkpoint_config=CheckpointConfig(num_to_keep=cfg.train.keep_checkpoints),
                             failure_config=FailureConfig(max_failures=cfg.train.max_failures)),
    )
    stages = f"{cfg.deepspeed.pipeline_stages} pipeline stages, " if cfg.deepspeed.pipeline_stages > 1 else ""
    print(f"[train] {cfg.run_name}: {cfg.recipe} recipe, {cfg.scaling.num_workers} workers, {stages}"
          f"ZeRO-{cfg.deepspeed.zero_stage}, "
          f"{cfg.model.num_parameters() / 1e6:.1f}M parameters, {cfg.train.max_steps} steps at "
          f"{cfg.data.max_seq_len} tokens", flush=True)
    result = trainer.fit()
    if result.error:
        raise result.error
    return result


def read_shards(files: list[str]):
    """The prepared set's parquet shards as a Ray Dataset. Ray Data's V2 parquet read (its default) lists the
    files at every execution of the dataset (each epoch; each restart) by reading each footer on a pool of new
    actor processes, 32 unless RAY_DATA_PARQUET_FOOTER_NUM_ACTORS says otherwise; its V1 read reads the footers
    once, here, when the dataset is made, and each epoch runs only the read tasks. A prepared set names its
    files and is read whole, the same way, every epoch, so it is read through V1: no footer-reader process at all,
    where V2, even with its pool sized to the files, started one or two an epoch (measured on 2 cores: ~5
    CPU-seconds of a 40-step job). A user who set RAY_DATA_USE_DATASOURCE_V2 keeps the reader Ray took from it;
    on V2 the footer pool is sized to the files, one reader per 10 (Ray's footer batch), at most Ray's 32, unless
    the user sized it. The setting and the variable are read here, in this process, when read_parquet builds the
    read; both are as they were after it."""
    import ray

    context = ray.data.DataContext.get_current()
    if DATASOURCE_V2 not in os.environ:
        before = context.use_datasource_v2
        context.use_datasource_v2 = False
        try:
            return ray.data.read_parquet(files)
        finally:
            context.use_datasource_v2 = before
    if not context.use_datasource_v2 or FOOTER_READERS in os.environ:  # the user's V1, or the user's pool
        return ray.data.read_parquet(files)

    try:  # Ray's private module (Ray is pinned): if it moves, only the pool's own default changes
        import ray.data._internal.datasource_v2.formats.parquet.footer_file_indexer  # noqa: F401
    except ImportError:
        pass
    os.environ[FOOTER_READERS] = str(min(32, max(1, math.ceil(len(files) / 10))))
    try:
        return ray.data.read_parquet(files)
    finally:
        del os.environ[FOOTER_READERS]


def _report_ignored(cfg: PretrainConfig) -> int:
    """Print each checkpoint folder of the run that Ray Train never registered (a rank died while writing or
    reporting it: no resume read it, and it is not the result); returns how many there are."""
    from jobs.engine.checkpoint_parts import ignored_checkpoints

    ignored = ignored_checkpoints(Path(cfg.output_dir).resolve() / cfg.run_name)
    for name, why in ignored.items():
        print(f"[train] warning: ignored {name} ({why}): never registered, never resumed from", flush=True)
    return len(ignored)


def _eval_rows(cfg: PretrainConfig, prepared, columns: list[str]) -> dict:
    """The fixed held-out set every evaluation scores: the eval split's first eval_batches x micro_batch_size
    examples (fewer when the split is smaller), `eval_set_size` of them, so that a run resubmitted on another worker
    count, and runs of different sizes, score the same examples (masked alike: pretrain_worker.evaluate). Read here
    once, shipped through the object store (a Ray Data stream costs more than an evaluation). A resubmitted run reads
    as many as its checkpoint's did (_held_out_read), said where this run's settings ask another number (its logged
    train.eval_batches would say otherwise); a set of few random-next pairs is said."""
    from pipelines.examples import held_out_nsp_warning
    from pipelines.shards import read_head

    replicas = cfg.scaling.num_workers // cfg.deepspeed.pipeline_stages
    read, asked = _held_out_read(cfg), cfg.train.eval_batches * cfg.train.micro_batch_size
    if read != asked:
        print(f"[eval] {cfg.run_name}: the held-out set stays the eval split's first {read} examples, as its "
              f"checkpoint's (this run's train.eval_batches x train.micro_batch_size asks {asked}), so that "
              f"evaluations before and after the resubmission score the same examples; a new run_name scores {asked}",
              flush=True)
    table = read_head(prepared.eval_files, read, columns)
    keep = eval_set_size(table.num_rows, replicas)
    if not keep:  # scored, no row would give 0 loss and 0 accuracy, logged as a measurement
        raise ConfigError(f"the held-out split of {prepared.path} has {table.num_rows} examples, too few for "
                          f"{replicas} data-parallel replicas to score the same number each: raise "
                          f"data.eval_fraction, or give a larger corpus")
    rows = {c: table.column(c).to_numpy(zero_copy_only=False)[:keep] for c in columns}
    if cfg.train.nsp and (why := held_out_nsp_warning(rows.get("next_sentence_label", ()), cfg.data.nsp_random_prob)):
        print(f"[data] warning: {why}", flush=True)
    return rows


def _held_out_read(cfg: PretrainConfig) -> int:
    """How many of the eval split's first examples the held-out set is cut from (eval_set_size): eval_batches x
    micro_batch_size, or the number a resubmitted run's checkpoint recorded (the request, not the cut: cut again on
    other replicas it would shrink, 95 of 96 rows on 5 replicas becoming 45)."""
    from jobs.runtime import resubmit

    checkpoint = resubmit.latest(Path(cfg.output_dir).resolve() / cfg.run_name)
    recorded = (resubmit.read(checkpoint) or {}).get("held_out") if checkpoint else None
    return recorded or cfg.train.eval_batches * cfg.train.micro_batch_size


def trained_positions(cfg: PretrainConfig) -> int:
    """The longest sequence a run trained (phase 2's when it has one): the position rows past it never learned."""
    return min(cfg.phase2.max_seq_len if cfg.phase2.max_steps else cfg.data.max_seq_len,
               cfg.model.max_position_embeddings)


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, PretrainConfig]:
    """The command line and the config it names, loaded and validated as a run uses it (no framework imported)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML file (see configs/pretrain/)")
    console.add_argument(parser)
    add_check_argument(parser)
    parser.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. train.max_steps=100")
    args = parser.parse_intermixed_args(argv)
    return args, load_config(PretrainConfig, args.config, args.overrides)


def main(argv: list[str] | None = None) -> PretrainResult:
    args, cfg = parse(argv)  # fails here, before any Ray work
    console.configure(args.verbose)
    if args.check:
        cfg.check_environment()
        refuse_other_layout(cfg)
        lease.probe_run_lease(cfg.output_dir, cfg.run_name)  # a job running on this run_name: refused as run() is
        return checked("pretrain", args.config, args.overrides)
    return run(cfg)


if __name__ == "__main__":
    cli(main)
