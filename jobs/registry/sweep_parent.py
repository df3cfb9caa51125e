"""A sweep's parent MLflow run: reused only by the same sweep resumed, new for any other sweep of the same name.

The parent carries the sweep's config (params), lineage and data tags, which finish_run copies onto the version it
registers (tracking._lineage_of); a resumed sweep's parent names the code running now (code.first_git_commit: the
first attempt's, where another). A sweep run again by name with another init, other data or another config is
another sweep: reusing the first one's parent would register its model with the first sweep's lineage.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bert_core.config import ConfigError

BASIS_TAG = "sweep.basis"  # sha256 of what the sweep's results depend on (basis): equal basis, same sweep
# Where and how fast trials run, not what they compute: a sweep resumed on another cluster is the same sweep
BASIS_FILE = "sweep-basis.json"  # the same digest beside Tune's trials: another experiment or store cannot hide them
RESOURCES = ("max_concurrent", "cpus_per_trial", "gpus_per_trial", "max_trial_failures", "checkpoint_every", "faults")
# finetune.scaling is a Ray Train fine-tune's: a trial trains in one process on cpus_per_trial (num_workers is no
# trial's, SweepConfig.check_environment) and capacity_timeout_s only bounds the wait for nodes; use_gpu stays in
UNREAD_SCALING = ("num_workers", "cpus_per_worker", "placement_strategy", "capacity_timeout_s")
# a folder init's run ids, from its release record (tracking._source_run_tags), are no part of the basis: a sweep
# begun before releases carried the record resumes as itself, its parent given them then (_reopen)
FOLDER_RUN_IDS = ("lineage.init_run_id", "lineage.pretrain_run_id")


def basis(params: dict, tags: dict) -> str:
    """sha256 of the sweep's config as logged (its RESOURCES and UNREAD_SCALING left out) and its lineage and data
    tags: what its trials and model depend on. Secrets are redacted first (a rotated password is the same sweep),
    the code.* tags left out (a resume after a code fix, or a checkout made dirty by the run's own files, is too),
    and so are the tokenizer's hash and a folder init's run ids (functions of the init, which is in; a sweep begun
    before they were tagged resumes as itself)."""
    finetune = params.get("finetune")
    if isinstance(finetune, dict) and isinstance(finetune.get("scaling"), dict):
        scaling = {k: v for k, v in finetune["scaling"].items() if k not in UNREAD_SCALING}
        params = {**params, "finetune": {**finetune, "scaling": scaling}}
    return _digest(params, tags)


def _digest(params: dict, tags: dict) -> str:
    """The digest of `params` and `tags` as given: sweep.basis before UNREAD_SCALING was left out, which a sweep
    begun then holds in its parent's tag and its BASIS_FILE."""
    from jobs.registry.tracking import redact

    folder = not str(tags.get("lineage.init", "")).startswith(("models:/", "runs:/"))
    kept = {k: v for k, v in tags.items() if not k.startswith("code.") and k != "lineage.tokenizer_sha256"
            and not (folder and k in FOLDER_RUN_IDS)}
    params = {k: v for k, v in params.items() if k not in RESOURCES}
    text = json.dumps({"params": redact(params), "tags": redact(kept)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def parent_run(cfg, base, tracking_uri: str, task_data: tuple[str, str], data_tags: dict, restoring: bool,
               tokenizer_dir: str | None = None) -> tuple[str, str]:
    """(run id, experiment id) of the sweep's parent: the one of an earlier attempt with this name and the same
    basis (a resume), else a new one. `restoring`: Tune will restore an experiment of this name, whose trials were
    made by an earlier sweep; if no parent of this name has this sweep's basis, that sweep was another one, and
    mixing its trials into this one is refused: by the basis kept in Tune's folder (BASIS_FILE), whatever experiment
    or store the sweep now tracks to, or, for a folder from before that file, by the parents in this experiment.
    `tokenizer_dir`: the starting model's folder, whose tokenizer's hash the lineage records (as a fine-tune's)."""
    from mlflow.tracking import MlflowClient

    from jobs.registry import tracking

    client = MlflowClient(tracking_uri)
    t = base.tracking
    params = {**cfg.to_dict(), "finetune": base.to_dict()}
    tags = {"sweep": cfg.name, "phase": "parent", "task": base.task.name, "init": base.init,
            **tracking.lineage_tags("sweep", tokenizer_dir=tokenizer_dir, init=base.init, tracking_uri=tracking_uri,
                                    task_data=task_data),
            **data_tags}
    # a sweep begun before UNREAD_SCALING was left out holds that digest: the same config resumes it as itself (and
    # takes this one, under which a later resume may change those fields)
    before = _digest(params, tags)
    tags[BASIS_TAG] = digest = basis(params, tags)
    digests = (digest, before)
    folder = Path(base.output_dir).resolve() / cfg.name  # Tune's experiment: the trials it would restore
    kept = json.loads((folder / BASIS_FILE).read_text()) if (folder / BASIS_FILE).is_file() else {}
    if restoring and kept and kept.get("basis") not in digests:  # whatever the experiment or the store now says
        raise ConfigError(
            f"name {cfg.name!r}: {folder} holds the trials of an earlier sweep of this name (MLflow run "
            f"{kept.get('parent_run_id')} in {kept.get('tracking_uri')}) with another config, init, data or "
            "tracking settings; resuming it would mix them into this one: give another name, or remove that folder")
    run_id, experiment_id = _parent(cfg.name, client, tracking_uri, t, params, tags, digests, folder, restoring)
    if kept.get("basis") != digest:
        from jobs.runtime.files import write_atomic

        write_atomic(folder / BASIS_FILE, json.dumps({"basis": digest, "parent_run_id": run_id,
                                                     "tracking_uri": tracking.redact(tracking_uri)}).encode())
    return run_id, experiment_id


def _parent(name: str, client, tracking_uri: str, t, params: dict, tags: dict, digests: tuple[str, str],
            folder: Path, restoring: bool) -> tuple[str, str]:
    """The parent in the sweep's experiment with this basis (`digests`: now's, then the one before UNREAD_SCALING)
    where Tune restores its trials, a pre-basis one Tune restores, or a new one (the same sweep run again from
    scratch: its trials would nest beside the first run's)."""
    from jobs.registry import tracking

    digest = digests[0]
    experiment = client.get_experiment_by_name(t.experiment)
    if experiment is not None:
        named = f"tags.sweep = '{name}' and tags.phase = 'parent'"
        for each in dict.fromkeys(digests):
            found = client.search_runs([experiment.experiment_id], max_results=1,
                                       filter_string=f"{named} and tags.`{BASIS_TAG}` = '{each}'")
            if found:
                break
        if found and restoring and found[0].info.status == "FINISHED":  # done: run again, it would register its
            # model a second time and move the alias back to it, over any model promoted since
            raise ConfigError(
                f"sweep {name!r} has finished (MLflow run {found[0].info.run_id}): its result stands (run again, "
                f"it would log and register its model a second time); to run it again from scratch, remove {folder} "
                "or give another name")
        if found and restoring:  # the sweep resumed; run again from scratch (its folder removed): a new parent
            if found[0].data.tags.get(BASIS_TAG) != digest:  # begun under the basis before: now's from here on
                client.set_tag(found[0].info.run_id, BASIS_TAG, digest)
            return _reopen(client, found[0], tags), experiment.experiment_id
        other = client.search_runs([experiment.experiment_id], max_results=1, filter_string=named)
        if other and restoring and BASIS_TAG not in other[0].data.tags:  # a sweep begun before bases were kept:
            client.set_tag(other[0].info.run_id, BASIS_TAG, digest)  # the one Tune restores, resumed as before
            return _reopen(client, other[0], tags), experiment.experiment_id
        if other and restoring:
            raise ConfigError(
                f"name {name!r}: {folder} holds the trials of an earlier sweep of this name (MLflow run "
                f"{other[0].info.run_id}) with another config, init or data; resuming it would mix them into this "
                "one: give another name, or remove that folder")
    run_id = tracking.start_run(tracking_uri, t.experiment, t.artifact_location, name, params, tags=tags)
    client.update_run(run_id, status="RUNNING")  # ended when the sweep is
    return run_id, client.get_run(run_id).info.experiment_id


def _reopen(client, run, tags: dict) -> str:
    """An earlier attempt's parent, RUNNING again and tagged with the code running now (`tags`' code.*): the version
    the sweep registers takes its code.* and lineage tags from the parent (its trials carry none), and this attempt's
    code trains the seed runs. The first attempt's commit, where another, stays as code.first_git_commit. A folder
    init's run ids it lacks are added from `tags`."""
    run_id, before = run.info.run_id, run.data.tags
    for key in FOLDER_RUN_IDS:
        if key in tags and key not in before:
            client.set_tag(run_id, key, tags[key])
    now = {k: v for k, v in tags.items() if k.startswith("code.")}
    first = before.get("code.first_git_commit", before.get("code.git_commit"))
    for key in before.keys() - now.keys() - {"code.first_git_commit"}:
        if key.startswith("code."):  # a Ray job's copy has no git: the old commit would stand for this code
            client.delete_tag(run_id, key)
    for key, value in now.items():
        client.set_tag(run_id, key, value)
    if first and first != now.get("code.git_commit"):
        client.set_tag(run_id, "code.first_git_commit", first)
    client.update_run(run_id, status="RUNNING")
    return run_id
