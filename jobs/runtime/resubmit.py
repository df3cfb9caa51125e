"""A resubmitted run: the same `run_name` and `output_dir` submitted again goes on from the latest checkpoint Ray
Train recorded for it (its checkpoint manager restores that one). Right only on the basis the checkpoint was
written on: the same data, and the same model shape or task. Each job's rank 0 records that basis in every
checkpoint (`record`); the driver reads the record of the checkpoint Ray will restore before it starts the run
and refuses a changed basis, naming each change (`check`). The record also names the MLflow run that wrote it,
which tells a resubmission (another run) from a worker restart (this one).
"""

from __future__ import annotations

import json
from pathlib import Path

from bert_core.config import ConfigError

FILE = "continuation.json"
# a BERT checkpoint's basis (jobs/pretrain.continuation_basis): the fields that make its parameter set, and what the
# same shapes compute (gelu weights would train on as relu)
MODEL_SHAPE = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "max_position_embeddings", "type_vocab_size")
BERT_FUNCTION = ("hidden_act", "layer_norm_eps")


def record(folder: Path, run_id: str | None, step: int, basis: dict, held_out: int | None = None) -> None:
    """Rank 0: what a checkpoint being written in `folder` continues on, and which MLflow run wrote it; `held_out`:
    how many of the eval split's first examples its held-out set is cut from (a resubmission reads as many, whatever
    its micro-batch: jobs/pretrain._held_out_read)."""
    extra = {"held_out": held_out} if held_out is not None else {}
    (folder / FILE).write_text(json.dumps({"run_id": run_id, "step": step, "basis": basis, **extra}))


def read(folder: Path) -> dict | None:
    """A checkpoint folder's record; None for one written before records were kept."""
    path = Path(folder) / FILE
    return json.loads(path.read_text()) if path.is_file() else None


def latest(run_dir: Path) -> Path | None:
    """The checkpoint Ray Train restores a run from: the latest its checkpoint manager snapshot names. A snapshot cut
    short (a full disk, a head killed while writing it) is refused naming it: a bare JSONDecodeError named no file,
    and every later submission of the run failed on it."""
    snapshot = run_dir / "checkpoint_manager_snapshot.json"
    try:
        result = json.loads(snapshot.read_text()).get("latest_checkpoint_result") if snapshot.is_file() else None
    except ValueError as exc:
        raise ConfigError(f"{snapshot}, Ray Train's record of the run's checkpoints, is not whole ({exc}): neither "
                          f"Ray nor this job can tell which checkpoint to continue from. Choose a new run_name, or "
                          f"remove {run_dir} to start over") from None
    return run_dir / result["checkpoint_dir_name"] if result else None


def latest_record(run_dir: Path) -> dict | None:
    """The record of the checkpoint Ray Train restores a run from (latest); None for a new run or an unrecorded one."""
    checkpoint = latest(run_dir)
    return read(checkpoint) if checkpoint else None


def check(run_dir: Path, basis: dict, added: tuple[str, ...] = ()) -> dict | None:
    """The record of the checkpoint a submission to `run_dir` continues from, or None for a new run. Raises
    ConfigError, naming each change, when it was written on another basis. A checkpoint without a record (written
    before records were kept) continues unchecked, and so does each key of `added` its record lacks (a key the
    basis gained since that checkpoint was written)."""
    earlier = latest_record(run_dir)
    if earlier is None:
        return None
    before = earlier["basis"]
    changed = [f"{k} {before.get(k)!r} -> {basis.get(k)!r}" for k in sorted(set(before) | set(basis))
               if before.get(k) != basis.get(k) and (k in before or k not in added)]
    if changed:
        raise ConfigError(f"run_name={run_dir.name!r} already holds a checkpoint (step {earlier['step']}) written with "
                          f"other settings: {'; '.join(changed)}. A resubmitted run continues from its checkpoint only "
                          f"on the same basis: choose a new run_name, or remove {run_dir} to start over"
                          + ("" if before.get("prepared set") == basis.get("prepared set") else
                             " (a prepared set is named by its corpus, its data settings and the pipeline's reading: "
                             "with the first two unchanged, a pipeline update renamed it; README, \"How data flows\")"))
    return earlier


# What a saved pretraining optimizer state loads into only: another optimizer, precision or offload keeps another
# state, and train.nsp=false freezes the pooler and NSP head (fewer parameters in the groups). In the basis too.
PRETRAINING_OPTIMIZER = ("optim.name", "train.nsp", "deepspeed.precision", "deepspeed.offload_optimizer")


# Where a pretraining run started: a run_name that holds a checkpoint continues it, and a resubmission naming another
# train.init_checkpoint (or one where the run had none) was taken and its start ignored, the run's lineage tagged with
# a checkpoint its weights never came from. Phase 2 starts from phase 1's last checkpoint, a folder phase 1 names anew
# when it is run again: not in its basis.
STARTED = ("train.init_checkpoint", "train.reset_optimizer")


def started(cfg) -> dict:
    """The STARTED settings of `cfg` (a PretrainConfig) as its basis holds them: none for phase 2; reset_optimizer only
    with an init_checkpoint (alone it does nothing); a local checkpoint as an absolute path."""
    init = cfg.train.init_checkpoint
    if cfg.phase == 2:
        return {}
    init = init if not init or "://" in init else str(Path(init).resolve())
    return {"train.init_checkpoint": init, **({"train.reset_optimizer": cfg.train.reset_optimizer} if init else {})}


def settings(cfg, keys: tuple[str, ...]) -> dict:
    """`cfg`'s value of each dotted key of `keys` ("optim.name": cfg.optim.name)."""
    return {k: getattr(getattr(cfg, section), name) for k in keys for section, name in [k.split(".")]}


def refuse_unloadable(run_dir: Path, cfg) -> None:
    """Refuse here, on the driver, a resubmitted pretraining run (`cfg`: a PretrainConfig) whose checkpoint the
    workers could not load (another ZeRO stage or pipeline layout: jobs/workers/reshard.needs_universal's rules;
    another PRETRAINING_OPTIMIZER): in the workers it would fail each restart in turn, spending train.max_failures
    on one config error."""
    from jobs.engine.checkpoint_parts import read_topology
    from jobs.workers.reshard import needs_universal

    checkpoint = latest(run_dir)
    if checkpoint is not None:
        refuse_other_optimizer(checkpoint, settings(cfg, PRETRAINING_OPTIMIZER),
                               f"run_name={cfg.run_name!r} continues from", "Set them back to go on, choose a new "
                               "run_name to start over, or start a new run_name from its weights with a fresh "
                               f"optimizer: train.init_checkpoint={checkpoint} train.reset_optimizer=true")
        needs_universal(read_topology(checkpoint), cfg.scaling.num_workers, cfg)


def refuse_unloadable_init(cfg) -> None:
    """As refuse_unloadable, for the checkpoint train.init_checkpoint hands over: its weights need the model that saved
    them (refuse_other_model) and, alone, its pipeline layout; with its optimizer (train.reset_optimizer=false), its
    ZeRO stage, world size and PRETRAINING_OPTIMIZER as a resume does; and first, a folder that is no whole resume
    checkpoint (refuse_no_checkpoint). A checkpoint at a URI (cloud storage) is not read here: the workers check it as
    they load it."""
    from jobs.engine.checkpoint_parts import read_topology
    from jobs.workers.reshard import hand_off_layout, needs_universal

    if "://" in cfg.train.init_checkpoint:
        return
    init = Path(cfg.train.init_checkpoint)
    refuse_no_checkpoint(init)
    refuse_other_model(init, cfg)  # first: with another model, no optimizer setting set back would load it
    if cfg.train.reset_optimizer:
        hand_off_layout(read_topology(init), cfg)
    else:
        refuse_other_optimizer(init, settings(cfg, PRETRAINING_OPTIMIZER), "train.init_checkpoint (with "
                               "train.reset_optimizer=false) carries over the optimizer of", "Set them back, or set "
                               "train.reset_optimizer=true to train its weights on with a fresh optimizer")
        needs_universal(read_topology(init), cfg.scaling.num_workers, cfg)


def refuse_no_checkpoint(folder: Path) -> None:
    """Refuse a train.init_checkpoint folder that is no whole resume checkpoint, naming what it is and what to give
    instead: a release (an HF model folder), a run folder, or a checkpoint whose parts its rank listings say are
    missing (one the job reports as ignored). Taken, each failed in every worker, restart after restart, on
    DeepSpeed's bare AssertionError (no model states to load) or on a rank's missing file. A checkpoint is told by
    what its ranks wrote: the part listings (checkpoint_parts), or, from before those, topology.json, or, from before
    that, DeepSpeed's model states."""
    from jobs.engine.checkpoint_parts import RANK_FILES, RAY_SNAPSHOT, TOPOLOGY, missing_parts
    from jobs.engine.seam import TAG

    def latest_of(run_dir: Path) -> str:
        """What to give instead: `run_dir`'s latest registered checkpoint where its snapshot names one but `folder`."""
        try:
            checkpoint = latest(run_dir)
        except ConfigError:  # a snapshot cut short: refused as such when the run is resubmitted, not here
            checkpoint = None
        return (f"its run's latest registered checkpoint, train.init_checkpoint={checkpoint}"
                if checkpoint and checkpoint != folder else "a run's checkpoint_* folder Ray Train registered "
                f"(<output_dir>/<run>/checkpoint_*, the one its {RAY_SNAPSHOT} names last)")

    what = f"train.init_checkpoint={folder}"
    if any(folder.glob(RANK_FILES.format("*"))):
        if missing := missing_parts(folder):
            raise ConfigError(f"{what} is an incomplete checkpoint (missing {', '.join(missing[:3])}"
                              + (f" and {len(missing) - 3} more" if len(missing) > 3 else "") + "): a rank's part "
                              "was not (wholly) written, so Ray Train never resumes from it and the workers could not "
                              f"load it. Give {latest_of(folder.parent)}")
        return
    if (folder / TOPOLOGY).is_file() or any((folder / "engine" / TAG).glob("*model_states.pt")):
        return
    if (folder / "config.json").is_file():
        raise ConfigError(f"{what} is a release (an HF model folder), not a resume checkpoint: train.init_checkpoint "
                          "loads DeepSpeed's engine files, which a release does not hold. Fine-tuning starts from it "
                          f"(jobs/finetune.py init={folder}); to pretrain on, give {latest_of(folder.parent)}")
    if (folder / RAY_SNAPSHOT).is_file():
        checkpoint = latest(folder)
        raise ConfigError(f"{what} is a run folder, " + (
            f"not one of its checkpoints: give its latest registered checkpoint, train.init_checkpoint={checkpoint}"
            if checkpoint else "and Ray Train registered no checkpoint in it: give a run's checkpoint_* folder"))
    raise ConfigError(f"{what} is no resume checkpoint: it holds neither {TOPOLOGY} nor DeepSpeed's model states "
                      f"(engine/{TAG}/*model_states.pt). Give a run's checkpoint_* folder Ray Train registered "
                      f"(<output_dir>/<run>/checkpoint_*, the one its {RAY_SNAPSHOT} names last)")


def refuse_other_model(folder: Path, cfg) -> None:
    """Refuse to hand `folder`'s weights (train.init_checkpoint) to a model (`cfg`: a PretrainConfig) they do not load
    into: another model.recipe, or another value of a field that makes its parameter set (MODEL_SHAPE;
    the modern recipe's ModernConfig.weight_fields). Accepted here, it failed in every worker on torch's missing keys
    or size mismatch, restart after restart. A record without the model (written before the basis held it) passes."""

    before = (read(folder) or {}).get("basis", {})
    if not any(k.startswith("model.") for k in before):
        return
    recipe = before.get("model.recipe", "bert")  # a BERT basis names no recipe: it was the only one
    if recipe != cfg.recipe:  # the fields of one recipe's model say nothing of the other's
        changed = [f"model.recipe {recipe!r} -> {cfg.recipe!r}"]
    else:
        fields = MODEL_SHAPE if cfg.recipe == "bert" else cfg.model.weight_fields()
        changed = [f"model.{k} {before[f'model.{k}']!r} -> {getattr(cfg.model, k)!r}" for k in fields
                   if f"model.{k}" in before and before[f"model.{k}"] != getattr(cfg.model, k)]
    if changed:
        raise ConfigError(f"train.init_checkpoint={folder} holds the weights of another model: {'; '.join(changed)}. "
                          "They load only into a model of the recipe and shape that saved them (the workers would fail "
                          "to load them, each restart in turn, until train.max_failures ran out). Set them back "
                          "(model.recipe and model.preset as the run that saved it had them"
                          + ("; model.vocab_size is its tokenizer's: data.tokenizer.path=<its tokenizer>"
                             if any(c.startswith("model.vocab_size") for c in changed) else "")
                          + ") to train that model on, or leave train.init_checkpoint unset to pretrain this one from "
                          "scratch")


def refuse_other_optimizer(folder: Path, now: dict, what: str, ways: str) -> None:
    """Refuse to load `folder`'s optimizer state into one built on other settings (`now`: dotted key -> this run's
    value, each a key of the basis its record holds): the state of another optimizer, precision or offload, or of
    other trainable parameters, has another layout, and it failed to load in every worker, restart after restart,
    until train.max_failures ran out. `what` leads the message (who would load it), `ways` ends it. A record that
    lacks a key (written before the basis held it) passes that key unchecked."""
    before = (read(folder) or {}).get("basis", {})
    changed = [f"{k} {before[k]!r} -> {v!r}" for k, v in now.items() if k in before and before[k] != v]
    if changed:
        raise ConfigError(f"{what} {folder}, whose optimizer state was saved with other settings: {'; '.join(changed)}"
                          f". It loads only into the optimizer it was saved from (the workers would fail to load it, "
                          f"each restart in turn, until train.max_failures ran out). {ways}")


def at_end(run_dir: Path, total_steps: int) -> bool:
    """Whether the checkpoint a submission to `run_dir` would continue from is at `total_steps` (a record says so)."""
    earlier = latest_record(run_dir)
    return bool(earlier) and earlier["step"] >= total_steps


def finished(run_dir: Path, total_steps: int) -> tuple[Path, dict, dict] | None:
    """(the checkpoint, the metrics Ray Train recorded with it, its record) where the checkpoint a submission to
    `run_dir` would continue from is the run's last: at `total_steps`, holding the release its final evaluation is
    written with; None otherwise. A run resumed from it trains no step and writes it again (pretrain_worker)."""
    checkpoint = latest(run_dir)
    earlier = read(checkpoint) if checkpoint else None
    if not earlier or earlier["step"] < total_steps or not (checkpoint / "release").is_dir():
        return None
    snapshot = json.loads((run_dir / "checkpoint_manager_snapshot.json").read_text())  # latest() read it whole
    return checkpoint, snapshot["latest_checkpoint_result"].get("metrics") or {}, earlier


def refuse_phase1_past_hand_off(cfg) -> None:
    """Refuse a two-phase submission (a PretrainConfig) whose phase 1 has steps left (train.max_steps raised) while
    phase 2 holds a checkpoint already: phase 2 goes on from its own checkpoint, which started from phase 1's earlier
    weights, so phase 1's new steps would reach no model, and the job would register phase 2's old weights again."""
    out, steps = Path(cfg.output_dir).resolve(), cfg.train.max_steps
    first, second = (latest_record(out / f"{cfg.run_name}-phase{n}") for n in (1, 2))
    gone = latest(out / f"{cfg.run_name}-phase1") is None  # removed (as the finished refusal offers): trained anew
    if cfg.phase2.max_steps and second and (gone or first and first["step"] < steps):
        why = ("phase 1's folder was removed: phase 1 would train anew" if gone else
               f"phase 1 given more steps (train.max_steps={steps}) would train on from step {first['step']}")
        raise ConfigError(f"{cfg.run_name}: phase 2 holds a checkpoint (step {second['step']}) it trained from phase "
                          f"1's earlier weights, and {why}, into weights phase 2 never reads: choose a new run_name, "
                          f"or remove {out / f'{cfg.run_name}-phase2'} too to hand phase 1's new weights to a new "
                          "phase 2")


def refuse_finished(run_name: str, run_dir: Path, earlier: dict | None, nothing_left: bool, tracking_uri: str
                    ) -> None:
    """Refuse a submission that has `nothing_left` to train from `earlier` (check's result), where the run that
    wrote its checkpoint ended FINISHED, and so did that run's parent (a pretraining phase's job run, which
    registers): the job would export and register the same weights again as a new version, and move the alias to it
    over any model promoted since. A run that failed or was killed (its registration not done) goes on; so does one
    given more steps."""
    if not earlier or not nothing_left or not earlier.get("run_id"):
        return
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    try:
        run = client.get_run(earlier["run_id"])
        parent = run.data.tags.get("mlflow.parentRunId")
        done = run.info.status == "FINISHED" and (not parent or client.get_run(parent).info.status == "FINISHED")
    except MlflowException:  # a run deleted since, or another store: nothing says it registered
        return
    if done:
        first = run_dir.with_name(run_name.removesuffix("-phase2") + "-phase1")
        ways = (f"Give phase 2 more steps (phase2.max_steps), a new run_name, or remove {first} and {run_dir} to "
                "start over" if run_name.endswith("-phase2") else  # a two-phase job's phase 2
                f"Give more steps to train on, a new run_name, or remove {run_dir} to start over")
        raise ConfigError(f"run_name={run_name!r} has finished: its checkpoint (step {earlier['step']}) has nothing "
                          f"left to train and its MLflow run {earlier['run_id']} ended FINISHED; run again, it would "
                          f"register the same weights a second time. {ways}")


def line(run_name: str, earlier: dict, total_steps: int) -> str:
    """The job's console line for a run that continues `earlier` (check's result) and ends at `total_steps`."""
    return (f"[train] {run_name} continues from its checkpoint at step {earlier['step']} (MLflow run "
            f"{earlier['run_id'] or 'unrecorded'})" + ("; nothing left to train" if earlier["step"] >= total_steps
                                                       else ""))


def tags(earlier: dict | None) -> dict:
    """MLflow tags of a run that continues `earlier` (check's result): the run it continues and from which step."""
    return {"continued_from": earlier["run_id"] or "unrecorded", "continued_at_step": str(earlier["step"])} \
        if earlier else {}
