"""What a registered version says about itself (its model card) and the registry's alias history: every move of a
registered model's aliases (@candidate at registration, @challenger while judged, @champion, a rollback) is a
registered-model tag naming what moved, why and the run that moved it, so the history of each alias can be read back
(jobs/promote.py's `--rollback` follows @champion's)."""

from __future__ import annotations

import calendar
import re
import time

MOVE_TAG = "alias_move."  # registered-model tags alias_move.<UTC time to the nanosecond>, one per move, in order
_MOVE_KEY = re.compile(r"alias_move\.\d{8}T\d{6}\.\d{9}Z")


def _move_keys(tags: dict) -> list[str]:
    """The keys of `tags` that record alias moves, oldest first; a tag of another shape under the prefix (one added
    by hand in MLflow's UI) is none: read as a move, it failed every later move, a registration's too."""
    return sorted(k for k in tags if _MOVE_KEY.fullmatch(k))


def _key(ns: int) -> str:
    return f"{MOVE_TAG}{time.strftime('%Y%m%dT%H%M%S', time.gmtime(ns // 10**9))}.{ns % 10**9:09d}Z"


def _ns(key: str) -> int:
    stamp, frac = key[len(MOVE_TAG):].rstrip("Z").split(".")
    return calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%S")) * 10**9 + int(frac)


ABSENT = ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE")  # MLflow's codes for a missing alias or version


def version_by_alias(client, name: str, alias: str):
    """The model version `alias` points at; None when it points at none. Any other registry error (a server that
    failed the request) raises: read as "no champion", it would promote a model judged against nothing."""
    return _unless_absent(client.get_model_version_by_alias, name, alias)


def registered_version(client, name: str, version: str):
    """The model version; None when the registry has no such version (deleted, or never registered)."""
    return _unless_absent(client.get_model_version, name, version)


def version_exists(client, name: str, version: str) -> bool:
    return registered_version(client, name, version) is not None


def _unless_absent(request, *args):
    """`request(*args)`, or None where MLflow answers that the alias or version is not there."""
    from mlflow.exceptions import MlflowException

    try:
        return request(*args)
    except MlflowException as exc:
        if exc.error_code in ABSENT:
            return None
        raise


def move_alias(client, name: str, alias: str, new: str, why: str, run_id: str = "",
               only_from: str | None = None) -> str:
    """Point `alias` of registered model `name` at version `new` ("" removes it) and record the move as a tag:
    "<alias> v<old> -> v<new> <why> (run <run id>) <UTC time>", `none` for a missing side. The tag's key sorts after
    every earlier move's, even from a host whose clock is behind. `only_from`: move only while the alias still points
    at that version ("": while it points at none; another job may have moved it since; MLflow has no
    compare-and-set, so this narrows the race to one request), else nothing moves or is recorded. Returns the old
    version."""
    current = version_by_alias(client, name, alias)
    old = str(current.version) if current is not None else ""
    if only_from is not None and old != only_from:
        return old
    _point(client, name, alias, new, old)
    try:
        earlier = [_ns(k) for k in _move_keys(client.get_registered_model(name).tags)]
        ns = max([time.time_ns(), *(t + 1 for t in earlier)])
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns // 10**9))

        def side(v: str) -> str:
            return f"v{v}" if v else "none"

        client.set_registered_model_tag(name, _key(ns), f"{alias} {side(old)} -> {side(new)} {why} "
                                                        f"(run {run_id or 'none'}) {stamp}")
    except Exception:
        # a move without its record: the history (rollback's source) would skip it; moved back where it was, if the
        # registry lets us (else the caller reads where the alias points)
        try:
            _point(client, name, alias, old, new)
        except Exception:  # noqa: BLE001 - the registry's first error is the one raised
            pass
        raise
    return old


def _point(client, name: str, alias: str, to: str, was: str) -> None:
    if to:
        client.set_registered_model_alias(name, alias, to)
    elif was:
        client.delete_registered_model_alias(name, alias)


MAX_VERSION_TAG = 100_000  # MLflow's limit on a model-version tag's value: past it, the tag is refused (not cut)


def task_config_tag(task: dict) -> str:
    """A registered version's `task_config` tag (promote and predict read the task from it), refused before any
    training when MLflow would refuse it at registration (a label set of thousands of classes): the version would be
    left half-tagged, unpromotable."""
    import json

    from bert_core.config import ConfigError

    text = json.dumps(task)
    if len(text) > MAX_VERSION_TAG:
        raise ConfigError(f"the task's settings ({len(text):,} characters of JSON, {len(task.get('labels') or ()):,} "
                          f"labels) exceed MLflow's {MAX_VERSION_TAG:,} for a registered version's task_config tag: "
                          "leave tracking.registered_model empty (the model is still logged and exported), or use "
                          "shorter label names")
    return text


def alias_history(client, name: str, alias: str = "") -> list[str]:
    """Every recorded alias move of `name` (only `alias`'s, if given), oldest first."""
    tags = client.get_registered_model(name).tags
    moves = [tags[k] for k in _move_keys(tags)]
    return [m for m in moves if not alias or m.split(" ", 1)[0] == alias]


def model_card(task: str, metrics: dict, tags: dict, spread: str = "", chosen_on: str = "",
               data: dict | None = None) -> str:
    """A registered version's description: what it does, how well (`metrics`: on the evaluation split, which no
    choice saw), how it was chosen, what data played which role, and what it was made from."""
    lines = [f"**{task}**", "", "| metric (evaluation split) | value |", "|---|---|"]
    lines += [f"| {k} | {v:.4f} |" for k, v in metrics.items() if isinstance(v, (int, float))]
    if chosen_on:
        lines += ["", f"Chosen on the select split: {chosen_on}."]
    if spread:
        lines += ["", f"Seed spread (select split): {spread}"]
    if data:
        lines += ["", "| split | role | rows | sha256 |", "|---|---|---|---|"]
        role = {"train": "fits", "select": "chooses"}
        lines += [f"| {s} | {role.get(s, 'evaluates')} | {d['rows']:,} | {d['sha256'][:16]} |" for s, d in data.items()]
    lineage = {k: v for k, v in tags.items() if k.startswith(("lineage.", "code."))}
    if lineage:
        lines += ["", "Lineage: " + ", ".join(f"{k}={v}" for k, v in sorted(lineage.items()))]
    return "\n".join(lines)


LOGGED_MODEL = re.compile(r"m-[0-9a-f]{32}")  # MLflow 3's id of a model as logged: models:/m-<id>, its UI's model URI


def logged_model_id(uri: str) -> str:
    """The id in `models:/m-<id>` (a logged model, registered or not: it names one model, never re-pointed), else ""."""
    rest = uri[len("models:/"):].strip("/") if uri.startswith("models:/") else ""
    return rest if LOGGED_MODEL.fullmatch(rest) else ""


def logged_model_run(uri: str, tracking_uri: str) -> str:
    """The run that logged the model `models:/m-<id>` ("" when the store records none)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri).get_logged_model(logged_model_id(uri)).source_run_id or ""


def pin(uri: str, tracking_uri: str) -> str:
    """`models:/NAME@ALIAS`, `models:/NAME/latest` or a bare `models:/NAME` as the version it names now
    (`models:/NAME/7`); any other URI as given (`models:/m-<id>` names one logged model already). Read once by every
    job that starts from a registered model, so a promotion (or a new version) while it runs cannot make its weights,
    its lineage and a resubmission's basis name different versions. Raises MLflow's error when the name or alias
    does not resolve."""
    if not uri.startswith("models:/") or logged_model_id(uri):
        return uri
    from mlflow.tracking import MlflowClient

    name, _, rest = uri[len("models:/"):].partition("/")
    name, _, alias = name.partition("@")
    client = MlflowClient(tracking_uri)
    if alias:
        return f"models:/{name}/{client.get_model_version_by_alias(name, alias.rstrip('/')).version}"
    if rest.strip("/") in ("", "latest"):
        return f"models:/{name}/{latest_version(client, name).version}"
    return uri


def pinned_version(uri: str, tracking_uri: str):
    """(`models:/NAME/<N>`, its ModelVersion) for a models:/ URI in any form `pin` takes."""
    from mlflow.tracking import MlflowClient

    pinned = pin(uri, tracking_uri)
    name, _, number = pinned[len("models:/"):].partition("/")
    return pinned, MlflowClient(tracking_uri).get_model_version(name, number.strip("/"))


def latest_version(client, name: str):
    """The registered model's highest version whose registration finished (mark_incomplete): what
    models:/NAME/latest (and a bare models:/NAME) means to MLflow without stages (its get_latest_versions is
    deprecated with them)."""
    from mlflow.exceptions import MlflowException

    quoted = f'"{name}"' if "'" in name else f"'{name}'"
    found = client.search_model_versions(f"name = {quoted}", max_results=50, order_by=["version_number DESC"])
    complete = [v for v in found if not v.tags.get(REGISTRATION, "").startswith("incomplete")]
    if not complete:
        client.get_registered_model(name)  # no such model: MLflow's error says so
        raise MlflowException(f"registered model {name!r} has no versions" + (
            f" whose registration finished (v{found[0].version}: {found[0].tags[REGISTRATION]})" if found else ""))
    return complete[0]


REGISTRATION = "registration"  # a version tag: "incomplete: <error>" where the job failed after creating it


def mark_incomplete(client, name: str, version: str, exc: BaseException) -> None:
    """Say on a version that its registration did not finish (its task, lineage, model card or alias may be
    missing): models:/NAME/latest passes over it, and a reader of the registry sees why. Best effort: the store
    that failed the registration may fail this too, and the job's own error is the one to raise."""
    from jobs.registry.redaction import redact

    try:
        client.set_model_version_tag(name, version, REGISTRATION,
                                     redact(f"incomplete: {type(exc).__name__}: {exc}")[:5000])
    except Exception:  # noqa: BLE001 - the store down: nothing more to say on it
        pass
