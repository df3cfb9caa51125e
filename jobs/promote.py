"""Move a registered model's @champion alias only on evidence, and keep every move auditable.

    python jobs/promote.py bert-foundry-tiny-pkgdocs                  # the @candidate version vs @champion
    python jobs/promote.py NAME --version 7 min_delta=0.01 confidence=0.99
    python jobs/promote.py NAME task.dev_file=/data/heldout.json      # evaluate on other rows of the task
    python jobs/promote.py NAME --rollback                            # @champion back to the one before it

The candidate and the current champion are scored on the same evaluation rows: the candidate's task (the
`task_config` tag its registration wrote, with any `task.*` override), read afresh, each model with its own
tokenizer (jobs/registry/scorer.py). The candidate becomes champion when there is no champion, or when the one-sided
lower confidence bound (level `confidence`) of a paired bootstrap of candidate minus champion over the
evaluation rows is above `min_delta`: the improvement is shown to clear the margin, not merely estimated to.
A tie, or anything less, keeps the champion, and the one-line reason says why. While it is judged the
candidate holds @challenger; a candidate that lost keeps it. With @champion unset (a version deleted, the alias
removed by hand) while its history names a registered champion, nothing is judged; `--rollback` restores the one due.
A version a rollback withdrew is not judged again through @candidate (which still points at it): name it, --version N.

The evaluation rows are the task's evaluation split (its official dev; pipelines/tasks/roles.py): the split no
choice of either model saw (checkpoints, trials and seeds are chosen on the select split, carved from train).

Evidence: a run in the promotion experiment (params, both scores, the point delta, the bound the decision used,
P(better), the rows' sha256) and `promotion.*` tags on the candidate version (the same, with the level and the
number of resamples). Every alias move (@candidate at registration, @challenger, @champion, a rollback) is a
registered-model tag `alias_move.<time>` ("champion v3 -> v5 promoted: <reason> (run <id>) <time>", made by
jobs/registry/versions.py), so the history of each alias can be read back and `--rollback` restores the previous
champion.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # `python jobs/promote.py` from a checkout: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bert_core.config import ConfigError  # noqa: E402
from jobs.config.io import deep_merge  # noqa: E402
from jobs.runtime import console  # noqa: E402
from jobs.config.sections import PROMOTION_ALIASES, TrackingConfig, refuse_relative_when_submitted  # noqa: E402,F401
from jobs.config.io import add_check_argument, checked, cli, load_config, yaml_quoted  # noqa: E402
from jobs.config.promote import CANDIDATE, JUDGING, PromoteConfig, refuse_with_rollback  # noqa: E402,F401
from jobs.registry.gate import EVIDENCE, decide, decide_first, tag_version  # noqa: E402,F401
from jobs.config.stores import refuse_absent_store  # noqa: E402
from jobs.registry.versions import (REGISTRATION, alias_history, move_alias, registered_version,  # noqa: E402
                                    version_by_alias, version_exists)
from jobs.registry.evidence import refuse_incomparable, refuse_seen_rows, same_data  # noqa: E402
from pipelines.tasks.glue import GLUE_TASKS  # noqa: E402
from pipelines.tasks.roles import split_digest  # noqa: E402
from jobs.runtime.cluster import prefer_loopback  # noqa: E402

prefer_loopback()  # before anything imports ray: a Ray this job starts (your files' rows) binds 127.0.0.1

CHALLENGER, CHAMPION = PROMOTION_ALIASES


@dataclass
class PromoteResult:
    model: str
    decision: str  # "promoted", "kept", "rolled back", or "refused" (@champion moved while judged: raised, recorded)
    reason: str  # one line
    candidate: str = ""  # version numbers
    champion: str = ""  # the champion before the decision ("" if none)
    metric: str = ""
    evidence: dict = field(default_factory=dict)  # of EVIDENCE: those the judgement had
    eval_sha256: str = ""
    eval_rows: int = 0
    run_id: str = ""  # the promotion run


def run(cfg: PromoteConfig) -> PromoteResult:
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from jobs.registry import tracking

    cfg.validate()
    uri = tracking.resolve_tracking_uri(cfg.tracking.tracking_uri)
    refuse_absent_store(uri, f"registered model {cfg.model!r}")  # opened, MLflow made an empty store there
    client = MlflowClient(uri)
    try:
        client.get_registered_model(cfg.model)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":  # the store down or refusing: MLflow's own error
            raise
        raise ValueError(f"{cfg.model} is no registered model in the tracking store {tracking.redact(uri)}") from None
    result = rollback(cfg, client) if cfg.rollback else judge(cfg, client, uri)
    print(f"[promote] {result.model}: {result.decision}: {result.reason}", flush=True)
    return result


def judge(cfg: PromoteConfig, client, uri: str) -> PromoteResult:
    from jobs.loops import ft_tasks
    from jobs.registry import tracking

    candidate = registered_version(client, cfg.model, str(cfg.version)) if cfg.version else version_by_alias(
        client, cfg.model, cfg.candidate_alias)
    if candidate is None:
        raise ValueError(f"{cfg.model} has no version {cfg.version} (deleted, or never registered)" if cfg.version
                         else f"{cfg.model} has no version under @{cfg.candidate_alias}; pass --version N")
    if candidate.tags.get(REGISTRATION, "").startswith("incomplete"):  # its tags (the rows, the task) are partial
        raise ValueError(f"{cfg.model} v{candidate.version}: its registration did not finish "
                         f"({candidate.tags[REGISTRATION][:200]}): register the model again, then judge that version")
    champion = version_by_alias(client, cfg.model, CHAMPION)
    if champion is None and (live := champions(client, cfg.model)):  # judged with no champion, any candidate would win
        if champions(client, cfg.model, deleted=True)[-1] == live[-1]:  # its alias removed by hand: withdrawn
            back = f"--rollback restores v{live[-2]}, the one before it" if live[1:] else "no champion came before it"
            raise ValueError(f"{cfg.model}: @{CHAMPION} is unset, its last champion v{live[-1]} still registered (the "
                             f"alias removed by hand): {back}; or put @{CHAMPION} back on v{live[-1]}; then judge")
        raise ValueError(f"{cfg.model}: @{CHAMPION} is unset, its champion's version deleted, but the one before it, "
                         f"v{live[-1]}, is still registered: judged with no champion, any candidate would win; "
                         f"restore v{live[-1]} with --rollback, then judge")
    ours, theirs = str(candidate.version), str(champion.version) if champion is not None else ""  # int or str
    if theirs == ours:
        return PromoteResult(cfg.model, "kept", f"v{ours} is already the champion", ours, theirs)
    if not cfg.version and "promotion.rolled_back" in candidate.tags:
        _refuse_withdrawn(cfg, client, candidate)
    task = their_task = _judged_as(f"v{ours} (candidate)", _task_of(candidate), cfg.task)
    if champion is not None:
        other = _task_of(champion)  # without it, nothing says the two are models of one task
        refuse_incomparable(task, other, ours, theirs, cfg.task)
        # the data is the candidate's task's; how each model reads and decides is its own, as it serves
        own = {k: other[k] for k in MODEL_SETTINGS if k in other and k not in cfg.task}
        their_task = _judged_as(f"v{theirs} (champion)", {**_task_of(candidate), **own}, cfg.task)
    split = ft_tasks.eval_splits(task)[0]
    if task.name == "files":  # your files are read by Ray Data tasks
        from jobs.runtime.cluster import init_ray

        init_ray()
    loaded = _rows(task, ours, cfg.task)
    rows = loaded.evaluation[split]  # the evaluation split: no choice of either model saw it
    refuse_seen_rows(cfg, task, split, loaded, (candidate, champion))  # named rows: each one's training rows
    same_data(cfg, candidate, champion, task, split, rows, loaded.labels)
    from jobs.registry.scorer import row_groups

    if len(rows) and row_groups(rows, task.kind).max() < 1:  # before any alias moves or model is scored
        raise ValueError(f"the {len(rows)} rows of {task.name}'s {split} split form one group (one SQuAD context, "
                         "one document): a bootstrap needs at least two; evaluate on more")
    run_id = _start_record(cfg, uri, ours, theirs, task)
    # any error ends the run FAILED with it named (no decision came, or its aliases did not move); the challenger's
    # move stays recorded
    with tracking.ending(uri, run_id):
        move_alias(client, cfg.model, CHALLENGER, ours,
                   f"judged against champion v{theirs}" if theirs else "judged with no champion yet", run_id)
        decision, reason, mine, evidence = _judge(cfg, uri, (task, their_task), split, rows, ours, theirs,
                                                  champion is not None)
        now = version_by_alias(client, cfg.model, CHAMPION)  # scoring took minutes: another promotion may have moved it
        current = str(now.version) if now is not None else ""
        if decision == "promoted" and current not in (theirs, ours):
            decision, reason = "refused", _moved(ours, theirs, current)
        # the evaluation rows' sha256 as the fine-tuning job tagged them (data.<split>.sha256): same rows, same digest
        result = PromoteResult(cfg.model, decision, reason, ours, theirs, mine.metric, evidence, split_digest(rows),
                               mine.n, run_id)
        if current == ours:  # crowned by another promotion of it meanwhile (a CI retry, a double submit)
            _promoted_elsewhere(result)
        _record(cfg, client, result, version_tags=current != ours)  # that promotion's evidence stays the version's
        if result.decision == "promoted":  # only from the champion it was judged against (or none)
            try:
                current = move_alias(client, cfg.model, CHAMPION, ours, f"promoted: {reason}", run_id,
                                     only_from=theirs)
            except Exception as exc:  # the version's tags said promoted: they say what happened (the run: `ending`)
                try:  # where @champion points now: a move whose record failed and could not be moved back is ours
                    now = version_by_alias(client, cfg.model, CHAMPION)
                    held = now is not None and str(now.version) == ours
                    decided = "promoted" if held else "failed"
                    why = tracking.redact((f"promoted: @{CHAMPION} points at it, but its move is not in the alias "
                                           "history: " if held else f"promoted, but @{CHAMPION} could not be moved: ")
                                          + f"{type(exc).__name__}: {exc}")[:5000]
                    for k, v in {"decision": decided, "reason": why}.items():  # the run's tags, as the version's
                        client.set_model_version_tag(cfg.model, ours, f"promotion.{k}", v)
                        client.set_tag(run_id, k, v)
                except Exception:  # noqa: BLE001 - the registry down for these too: the move's error is the one
                    pass
                raise
            if current == ours:  # another promotion of it moved @champion after the check: the version keeps this
                _promoted_elsewhere(result)  # run's evidence (promoted against the same champion); the run says so
                for k in ("decision", "reason"):
                    client.set_tag(run_id, k, getattr(result, k)[:5000])
            elif current != theirs:  # moved while the decision was recorded: nothing moved
                _refuse_recorded(cfg, client, result, _moved(ours, theirs, current))
            elif "promotion.rolled_back" in candidate.tags:  # withdrawn once, champion again: the history keeps it
                client.delete_model_version_tag(cfg.model, ours, "promotion.rolled_back")
        if current == ours or result.decision == "promoted":  # it is champion: @challenger cleared, only if still
            # ours (a concurrent promotion of another version may hold it by now)
            move_alias(client, cfg.model, CHALLENGER, "", f"v{ours} became champion", run_id, only_from=ours)
    if result.decision == "refused":  # recorded on the run and the version: the evidence, and why it was not used
        raise ValueError(f"{cfg.model}: {result.reason} (run {run_id})")
    return result


def _rows(task, ours: str, given: dict):
    """The judged task's rows; data that is not where the candidate's registration says (moved since, or registered on
    another machine) refused in one line naming the override that says where it is now (evidence.py checks the rows
    found there against the digests the versions recorded). Where the overrides `given` (cfg.task) named it, the line
    names that path: the registration is not what failed."""
    from jobs.loops import ft_tasks

    try:
        return ft_tasks.load_rows(task)
    except OSError as exc:
        from jobs.registry.redaction import redact

        if task.name in GLUE_TASKS:
            fields, what = ["data_dir"], "FOLDER"
        elif task.name == "pkgdocs":
            fields, what = ["corpus_dir"], "FOLDER"
        else:  # your own files, SQuAD, CoNLL: each file it named
            fields = [f for f in ("train_file", "dev_file", "select_file") if getattr(task, f)] or ["train_file"]
            what = "FILE"
        where = " ".join(f"task.{f}={what}" for f in fields)
        error = f"({type(exc).__name__}: {redact(str(exc))[:300]})"
        named = [f for f in fields if given.get(f)]
        if not named:
            raise ValueError(f"the data v{ours} was registered with cannot be read here {error}: moved, or on another "
                             f"machine? name where it is now: {where}") from None
        said = " ".join(f"task.{f}={redact(str(given[f]))}" for f in named)
        rest = f", the rest as v{ours} was registered with," if len(named) < len(fields) else ""
        raise ValueError(f"the data named by {said}{rest} cannot be read {error}"
                         + (f": name where each is: {where}" if rest else "")) from None


def _refuse_withdrawn(cfg: PromoteConfig, client, version) -> None:
    """A version a rollback withdrew, reached through @candidate (still pointing at it): judged again, the next
    scheduled `promote NAME` crowned it again, undoing the rollback unasked. Named with --version N, it is judged."""
    v = str(version.version)
    back = [m.split(" rollback:")[0] for m in alias_history(client, cfg.model, CHAMPION) if f"rollback: v{v} " in m]
    raise ValueError(f"{cfg.model} v{v} (@{cfg.candidate_alias}) was withdrawn by a rollback at "
                     f"{version.tags['promotion.rolled_back']}{f' ({back[-1]})' if back else ''}: not judged again "
                     f"unless named: --version {v}")


def _promoted_elsewhere(r: PromoteResult) -> None:
    """@champion moved to the very version judged: the other promotion of it crowned it; nothing is refused."""
    r.decision, r.reason = "kept", (f"v{r.candidate} is already the champion: another promotion of it moved @champion "
                                    f"from {_side(r.champion)} while this one judged it, nothing moved here (this "
                                    f"judgement: {r.decision}: {r.reason})")


def _moved(ours: str, theirs: str, current: str) -> str:
    return (f"@champion moved from {_side(theirs)} to {_side(current)} while v{ours} was judged against "
            f"{_side(theirs)}: v{ours} was never compared with {_side(current)}, nothing moved; judge it again")


def _refuse_recorded(cfg: PromoteConfig, client, r: PromoteResult, reason: str) -> None:
    """A decision recorded as promoted, refused at the last check: the run's and the version's tags say so."""
    r.decision, r.reason = "refused", reason
    for k, v in {"decision": r.decision, "reason": r.reason[:5000]}.items():
        client.set_tag(r.run_id, k, v)
        client.set_model_version_tag(cfg.model, r.candidate, f"promotion.{k}", v)


def _side(version: str) -> str:
    return f"v{version}" if version else "no champion"


def _judge(cfg: PromoteConfig, uri: str, tasks, split: str, rows: list[dict], ours: str, theirs: str,
           has_champion: bool):
    """Both models scored on `rows`, each with its task settings (`tasks`: the candidate's, the champion's), the
    decision and its evidence: (decision, reason, the candidate's Scores, evidence)."""
    from jobs.registry import scorer

    task, their_task = tasks
    with tempfile.TemporaryDirectory(prefix="promote-") as tmp:  # both models, downloaded from the registry
        mine = scorer.score(_download(uri, cfg.model, ours, Path(tmp)), task, split, rows, cfg.batch_size)
        scorer.refuse_nonfinite(mine, f"v{ours} (candidate)", "it is not promoted")
        evidence = {"candidate": mine.value, "groups": mine.n_groups}  # what the bootstrap resamples (scorer)
        if not has_champion:  # nothing to compare with: the bound says what the first champion scores at least
            evidence["lower_bound"] = scorer.lower_bound(mine, cfg.bootstrap_samples, cfg.confidence, cfg.seed)
            decision, reason = decide_first(cfg, evidence, mine.metric, ours, mine.n)
        else:
            best = scorer.score(_download(uri, cfg.model, theirs, Path(tmp)), their_task, split, rows, cfg.batch_size)
            scorer.refuse_nonfinite(best, f"v{theirs} (champion)", _past_a_broken_champion(cfg.model, uri, theirs))
            evidence.update(champion=best.value, **scorer.paired_bootstrap(
                mine, best, cfg.bootstrap_samples, cfg.confidence, cfg.seed))
            decision, reason = decide(cfg, evidence, mine.metric, ours, theirs, mine.n)
            differ = [f"{k} {getattr(task, k)} vs {getattr(their_task, k)}" for k in MODEL_SETTINGS
                      if getattr(task, k) != getattr(their_task, k)]
            reason += f"; each with its own {', '.join(differ)}" if differ else ""
    return decision, reason, mine, evidence


# A model's own settings (how it reads its input and decides, as it serves: its sequence length, multi-label
# threshold, QA windows), not the data's: the champion is scored with those it was registered with, not the
# candidate's (a champion trained at 256 cut to the candidate's 128, or judged at another threshold, loses on a
# setting, not on its weights).
def judged_task(registered: dict, overrides: dict):
    """The task a model is judged with: its registered task config with promote's `task.*` overrides, a nested one
    (task.columns.text=...) changing that key alone: merged one level deep, it replaced the whole columns mapping
    with defaults (the label column, separator and encoding the model was trained with gone)."""
    from jobs.config.finetune import check_kind_settings, check_metric, unread_file
    from jobs.loops import ft_tasks
    from jobs.registry.redaction import REDACTED

    task = ft_tasks.task_config(deep_merge(registered, overrides))
    if {*MODEL_SETTINGS, "iob_scheme"} & set(overrides):  # an override meets the registered settings here (a stride
        check_kind_settings(task, task.kind)  # against the model's own max_seq_len); the rest fine-tuning checked
    if "metric" in overrides:  # one the kind lacks was a KeyError when the candidate's scores came back
        check_metric(task)
    hidden = [f for f in ("train_file", "dev_file", "select_file", "data_dir", "corpus_dir")
              if REDACTED in str(getattr(task, f)) and f not in overrides]
    if hidden:  # what looked like a URL's credentials never reaches the registry: the data is named again
        raise ValueError(f"task.{hidden[0]} was registered redacted ({getattr(task, hidden[0])}: its credentials, or "
                         f"what looked like them, are not kept): name it again, task.{hidden[0]}=URL")
    if unread := unread_file(task):  # judged on other rows than the ones named, the same-rows check off
        raise ValueError(unread + (": name other evaluation rows with task.data_dir (a GLUE folder)"
                                   if task.name in GLUE_TASKS else ""))
    return task


def _judged_as(role: str, registered: dict, overrides: dict):
    """judged_task for the model `role` names: a window that does not fit may be either model's own max_seq_len."""
    try:
        return judged_task(registered, overrides)
    except ConfigError as exc:
        raise ConfigError(f"{role}: {exc}") from None


MODEL_SETTINGS = ("max_seq_len", "multi_label_threshold", "doc_stride", "max_query_length", "n_best",
                  "max_answer_length")


def _past_a_broken_champion(name: str, uri: str, theirs: str) -> str:
    """The way on from a champion that cannot be scored: the rollback, or, for a first champion (--rollback refuses
    it, and @champion removed by hand is refused as withdrawn), deleting its version, which leaves no champion."""
    from mlflow.tracking import MlflowClient

    stack = champions(MlflowClient(uri), name)
    if not stack or stack[-1] != theirs:  # moved there by hand: rollback() reads it as a reign of its own
        _reign(stack, theirs)
    return "no candidate can be judged against it" + (
        f": roll it back (jobs/promote.py {name} --rollback restores v{stack[-2]})" if stack[1:] else
        f", and no champion came before it to roll back to: delete v{theirs} from the registry (MlflowClient()."
        f"delete_model_version({name!r}, {theirs})), then judge again: the candidate is judged as the first champion")


def _task_of(version, required: bool = True) -> dict:
    raw = version.tags.get("task_config")
    if raw is None and required:
        raise ValueError(f"v{version.version} has no task_config tag (registered by an older job), so the data "
                         "that evaluates it is unknown; register it again with jobs/finetune.py or jobs/sweep.py")
    try:
        return json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:  # a tag cut short, or edited by hand
        raise ValueError(f"v{version.version}'s task_config tag is not valid JSON ({exc}; {len(raw)} characters), so "
                         "the data that evaluates it is unknown; register it again") from None


def _download(uri: str, name: str, version: str, root: Path) -> Path:
    from jobs.finetune import resolve_init

    return resolve_init(f"models:/{name}/{version}", uri, root / f"v{version}")


def _start_record(cfg: PromoteConfig, uri: str, ours: str, theirs: str, task) -> str:
    """The promotion's MLflow run, opened before anything moves: every alias move names it."""
    from jobs.registry import tracking

    params = {"model": cfg.model, "candidate_version": ours, "champion_version": theirs or "none",
              "min_delta": cfg.min_delta, "min_score": "none" if cfg.min_score is None else cfg.min_score,
              "confidence": cfg.confidence, "bootstrap_samples": cfg.bootstrap_samples,
              "seed": cfg.seed, "task": asdict(task) if task is not None else "none"}
    t = cfg.tracking
    name = f"rollback-{cfg.model}" if cfg.rollback else f"promote-{cfg.model}-v{ours}"
    return tracking.start_run(uri, t.experiment, t.artifact_location, name, params, tags=tracking.code_version())


def _record(cfg: PromoteConfig, client, r: PromoteResult, version_tags: bool = True) -> None:
    """The evidence and decision on the promotion run, and (`version_tags`) the candidate version's promotion.* tags."""
    from mlflow.entities import Metric, RunTag

    run_id = r.run_id
    tags = {"decision": r.decision, "reason": r.reason[:5000], "metric": r.metric, "eval_sha256": r.eval_sha256,
            "eval_rows": str(r.eval_rows)}
    now = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[Metric(k, float(v), now, 0) for k, v in r.evidence.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])
    client.set_terminated(run_id, "FINISHED")
    if r.decision == "rolled back" or not version_tags:  # the versions keep the evidence of their own promotions
        return
    version_tags = {"promotion.decision": r.decision, "promotion.reason": r.reason[:5000],
                    "promotion.metric": r.metric, "promotion.champion_version": r.champion or "none",
                    "promotion.eval_sha256": r.eval_sha256, "promotion.eval_rows": str(r.eval_rows),
                    "promotion.level": str(cfg.confidence), "promotion.bootstrap_samples": str(cfg.bootstrap_samples),
                    "promotion.min_delta": str(cfg.min_delta), "promotion.min_score": str(cfg.min_score).lower(),
                    "promotion.run_id": run_id, **{f"promotion.{k}": f"{v:.6f}" for k, v in r.evidence.items()}}
    tag_version(client, cfg.model, r.candidate, version_tags, run_id)


history = alias_history  # every recorded alias move of a model, oldest first (versions.move_alias writes them)


def champions(client, name: str, deleted: bool = False) -> list[str]:
    """The champion versions in order, rolled-back and (unless `deleted`) deleted ones removed: the last is the current
    champion. A rollback withdraws every champion above the one it restored (and deleted ones it skipped)."""
    stack: list[str] = []
    for move in alias_history(client, name, CHAMPION):
        alias, old, _, new, why = move.split(" ", 4)
        if why.startswith("rollback") and new[1:] in stack:
            _reign(stack, new[1:])
        elif new != "none":
            if old != "none" and old[1:] != (stack[-1] if stack else None):  # moved there unrecorded (by hand in
                _reign(stack, old[1:])  # MLflow's UI, or a move whose record failed), as rollback() reads such a move
            stack.append(new[1:])
    return stack if deleted else [v for v in stack if version_exists(client, name, v)]


def _reign(stack: list[str], version: str) -> None:
    """`version` champion again: back to its latest reign, those after it withdrawn; if it never reigned, a new one."""
    if version in stack:
        del stack[len(stack) - stack[::-1].index(version):]
    else:
        stack.append(version)


def rollback(cfg: PromoteConfig, client) -> PromoteResult:
    current = version_by_alias(client, cfg.model, CHAMPION)
    stack = champions(client, cfg.model)
    now = str(current.version) if current is not None else ""
    # @champion unset with its last champion registered: its alias removed by hand, that champion is the one withdrawn
    # (else its version was deleted, and the last live champion is restored)
    by_hand = not now and bool(stack) and champions(client, cfg.model, deleted=True)[-1] == stack[-1]
    if now and stack and stack[-1] != now:  # moved there by hand since (back to an earlier reign: a rollback by hand)
        _reign(stack, now)
    out = now or (stack[-1] if by_hand else "")  # the champion withdrawn
    if len(stack) < (2 if out else 1):
        raise ValueError(f"{cfg.model}: no previous champion to roll back to (champion history: "
                         f"{' -> '.join(f'v{v}' for v in stack) or 'none'}; @champion is {now and f'v{now}' or 'unset'}"
                         f"{f', its alias removed from v{out} by hand' if by_hand else ''})")
    previous = stack[-2] if out else stack[-1]
    from jobs.registry import tracking

    uri = tracking.resolve_tracking_uri(cfg.tracking.tracking_uri)
    run_id = _start_record(cfg, uri, previous, now, None)
    with tracking.ending(uri, run_id):  # a move that fails ends the run FAILED, with the error named
        withdrawn = f"v{out} withdrawn" if out else "@champion unset"
        moved = move_alias(client, cfg.model, CHAMPION, previous, f"rollback: {withdrawn}, v{previous} restored",
                           run_id, only_from=now)
        if moved != now:  # another rollback or promotion moved it meanwhile: two rollbacks would pop the stack twice
            raise ValueError(f"{cfg.model}: @champion moved from {_side(now)} to {_side(moved)} while rolling back; "
                             "nothing moved: run the rollback again if it is still wanted")
        if out:
            client.set_model_version_tag(cfg.model, out, "promotion.rolled_back",
                                         time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        if "promotion.rolled_back" in client.get_model_version(cfg.model, previous).tags:  # champion again
            client.delete_model_version_tag(cfg.model, previous, "promotion.rolled_back")
        result = PromoteResult(cfg.model, "rolled back", f"@champion {f'v{now}' if now else 'unset'} -> v{previous}",
                               candidate=previous, champion=now, run_id=run_id)
        _record(cfg, client, result)
    return result


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, PromoteConfig]:
    """The command line and the config it makes, loaded and validated as a run uses it (no framework imported)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="registered model name")
    parser.add_argument("--version", type=int, default=0, help="version to judge (default: the @candidate one)")
    parser.add_argument("--rollback", action="store_true", help="move @champion back to the previous champion")
    parser.add_argument("--config", help="YAML file with PromoteConfig fields")
    console.add_argument(parser)
    add_check_argument(parser)
    parser.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. min_delta=0.01")
    args = parser.parse_intermixed_args(argv)  # NAME --rollback key=value: flags between the positionals
    extra = [f"model={yaml_quoted(args.model)}", *([f"version={args.version}"] if args.version else []),
             *(["rollback=true"] if args.rollback else [])]
    cfg = load_config(PromoteConfig, args.config, [*args.overrides, *extra]).validate()
    if cfg.rollback:  # what only a judgement reads, given here beside --rollback (a config file's: let be)
        given = [k for o in args.overrides if (k := o.partition("=")[0].strip()).split(".")[0] in JUDGING]
        refuse_with_rollback([*([f"--version {args.version}"] if args.version else []), *given])
    return args, cfg


def main(argv: list[str] | None = None) -> PromoteResult:
    args, cfg = parse(argv)
    console.configure(args.verbose)  # our [promote] line; no download or weight-loading progress bars
    refuse_relative_when_submitted(cfg.tracking.written_paths())  # a store in the job's copy is a new, empty one
    cfg.tracking.check_experiment()  # deleted, or its artifact store without its client here: before any work
    if args.check:
        return checked("promote", args.config, args.overrides)
    try:
        return run(cfg)
    except ConfigError:  # a setting refused once the registry was read (a QA window): exit 2 in cli, as every job's
        raise
    except ValueError as exc:  # no candidate, models not comparable, no champion to roll back to: one line
        sys.exit(f"error: {exc}")  # exit status 1, the line on stderr, as argparse's exit(1, ...) wrote it


if __name__ == "__main__":
    cli(main)
