"""A model's lineage, from the registry back to the raw corpus files, each link checked.

    python jobs/lineage.py models:/bert-foundry-tiny-pkgdocs@champion
    python jobs/lineage.py models:/NAME/3 --tracking-uri sqlite:///mlflow.db
    python jobs/lineage.py runs:/RUN_ID
    python jobs/lineage.py predictions/      # a jobs/predict.py output folder: its run, then the model's chain

Without --tracking-uri a prediction folder is read in the store its manifest names (the one its job logged to, from
any working directory); every other URI in MLFLOW_TRACKING_URI's store where it is set, else sqlite:///mlflow.db. A
SQLite store that does not exist is a missing link, never created (MLflow makes one on opening it). `--check` reads
nothing: it checks the URI's form and the store as the walk would open it (its URI, and a server's that it answers).

The chain: model version -> the run that logged it (a sweep trial also names its sweep's parent run) ->
its start (`lineage.init`, `lineage.init_run_id`, `lineage.pretrain_run_id`, from the run, its sweep or the
version) -> the pretraining run -> its prepared data (manifest.json, its sha256 against the run's tag) ->
the tokenizer -> the raw corpus files the manifest lists (path, bytes, sha256), each re-hashed now. A resubmitted
run names each earlier run it continued (`continued_from`: it trained the first steps, with its own code); a
pretraining run started from another's checkpoint (`lineage.init_checkpoint`) goes on to the run that wrote it
(`lineage.init_checkpoint_run_id`) and that run's corpus, whose text the weights learned first.

A fine-tune whose `lineage.init` is a plain model folder (an HF checkpoint, no MLflow run behind it) ends
there: that is a complete chain, and the output says so. A pretraining release folder is no plain folder: its
record names the run that wrote it (jobs/runtime/release.py), which the fine-tune tags as from a registered one.
A missing link is a tag that should be there and is not, a run or version a tag names that does not exist (or
was deleted), an init checkpoint no run is recorded as writing (from outside the tracking store: its corpus is
unknown), a manifest that is gone or whose sha256 differs from the tag, or a raw corpus file that vanished,
changed since preparation or cannot be read here (a URI whose filesystem is not installed, or not reachable); each
such file is also printed as a warning line. With any missing link the command exits with status 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # `python jobs/lineage.py` from a checkout: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bert_core.config import ConfigError  # noqa: E402
from jobs.config.io import add_check_argument, checked, cli  # noqa: E402
from jobs.config.sections import TrackingConfig, refuse_relative_when_submitted  # noqa: E402
from jobs.config.stores import absent_store, check_store_uri, default_tracking_uri  # noqa: E402
from jobs.runtime import console  # noqa: E402
from jobs.registry.tracking import resolve_tracking_uri  # noqa: E402
from jobs.registry.redaction import REDACTED, redact  # noqa: E402
from jobs.registry.versions import ABSENT  # noqa: E402

CODE_TAGS = ("code.version", "code.git_commit", "code.git_dirty", "code.first_git_commit")


@dataclass
class Link:
    kind: str  # "model version", "sweep trial run", "sweep", "fine-tune run", "init", "pretraining run", ...
    name: str  # what identifies it: a version, a run id, a folder, a file path, or the tag that names it
    found: bool = True
    details: list[str] = field(default_factory=list)
    why: str = ""  # for a link not found: why


@dataclass
class LineageResult:
    uri: str
    links: list[Link] = field(default_factory=list)

    @property
    def missing(self) -> list[str]:
        """`<what> (<why>)` for each link not found; empty for a complete chain."""
        return [f"{link.kind} {link.name} ({link.why})" for link in self.links if not link.found]


def _default_store(uri: str) -> str:
    """Where `uri`'s lineage is read without --tracking-uri: a prediction folder's own store (its manifest names the
    one its run was logged to, made absolute by jobs/predict.py), any other URI's TrackingConfig's default."""
    manifest = Path(uri) / "manifest.json"
    if "://" not in uri and manifest.is_file():
        return json.loads(manifest.read_text()).get("mlflow", {}).get("tracking_uri") or default_tracking_uri()
    return default_tracking_uri()


# what the walk reads: a run (and a path in it), a registered model by alias, version, `latest` or bare name (as every
# job reads them: versions.pin), or MLflow 3's logged model models:/m-<id>
WALKED = re.compile(r"runs:/[^/]+(/.*)?|models:/[^/@]+(@[^/@]+|/\d+|/latest)?/?")


def check_uri(uri: str) -> None:
    """ValueError for a URI the walk cannot read (a misspelled scheme, no name, a folder without manifest.json)."""
    if "://" not in uri and (Path(uri) / "manifest.json").is_file() or WALKED.fullmatch(uri):
        return
    why = " (a folder without manifest.json)" if Path(uri).is_dir() else ""
    raise ValueError(f"lineage of {uri!r}{why}: give models:/NAME@alias, models:/NAME/VERSION, runs:/RUN_ID or a "
                     "jobs/predict.py output folder (its manifest.json)")


def _client(store: str, named_by: str, links: list[Link]):
    """An MlflowClient on `store`, or None with a missing link where it is a SQLite file that does not exist: MLflow
    would create it (an empty ./mlflow.db wherever lineage ran), and it holds nothing to read."""
    from mlflow.tracking import MlflowClient

    if absent_store(store) is not None:
        links.append(Link("tracking store", store, False, why=f"{named_by}, and it does not exist (lineage reads a "
                          "store, it makes none)"))
        return None
    return MlflowClient(store)


def run(uri: str, tracking_uri: str | None = None) -> LineageResult:
    """Walk `uri` (models:/NAME@alias, models:/NAME/VERSION, runs:/RUN_ID[/path] or a prediction folder) back to its
    corpus files, in `tracking_uri`'s store (None: `_default_store(uri)`)."""
    from mlflow.exceptions import MlflowException

    result = LineageResult(uri)
    links = result.links
    if (Path(uri) / "manifest.json").is_file() and "://" not in uri:  # a prediction folder (jobs/predict.py)
        uri, client = _walk_predictions(Path(uri), tracking_uri, links)
        if not uri:
            return result
    else:
        named_by = "--tracking-uri names it" if tracking_uri else "the default store (no --tracking-uri)"
        client = _client(resolve_tracking_uri(tracking_uri or default_tracking_uri()), named_by, links)
        if client is None:
            return result
    tracking_uri = client.tracking_uri
    from jobs.registry.versions import logged_model_id, logged_model_run

    if logged_model_id(uri):  # MLflow 3's models:/m-<id>: the run that logged it
        try:
            run_id = logged_model_run(uri, tracking_uri)
        except MlflowException as exc:
            if exc.error_code not in ABSENT:
                raise
            run_id, why = "", f"not in the store: {exc.message.splitlines()[0]}"
        else:
            why = "the logged model names no run"
        if not run_id:
            links.append(Link("logged model", uri, False, why=why))
            return result
        uri = f"runs:/{run_id}"
    if uri.startswith("runs:/") and uri[len("runs:/"):].split("/")[0]:
        _walk_run(client, uri[len("runs:/"):].split("/")[0], "the URI", {}, links, set())
        return result
    if not uri.startswith("models:/"):
        raise ValueError(f"lineage of {uri!r}: give models:/NAME@alias, models:/NAME/VERSION or runs:/RUN_ID")
    from jobs.registry.versions import pinned_version

    try:  # @alias, /VERSION, /latest or a bare name, as every job reads them
        version = pinned_version(uri, tracking_uri)[1]
    except MlflowException as exc:
        if exc.error_code not in ABSENT:  # the store down or refusing: not "not in the registry"
            raise
        links.append(Link("model version", uri, False, why=f"not in the registry: {exc.message.splitlines()[0]}"))
        return result
    tags = sorted(version.tags.items())
    details = [f"aliases: {', '.join(version.aliases) or '-'}", *(f"{k} = {v}" for k, v in tags)]
    links.append(Link("model version", f"{version.name} v{version.version}", details=details))
    if not version.run_id:
        links.append(Link("run", "of the version", False, why="the version names no run"))
    else:
        _walk_run(client, version.run_id, f"model version {version.version}", version.tags, links, set())
    return result


def _walk_predictions(folder: Path, tracking_uri: str | None, links: list[Link]):
    """A prediction folder's manifest -> its MLflow run -> the model it used: the URI to walk on from ("" when
    the chain ends here: a plain model folder, or a missing link) and a client on the store read (`tracking_uri`,
    else the manifest's: credentials in it were redacted when it was written, and it cannot be read then)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    model = manifest.get("model", {})
    links.append(Link("predictions", str(folder.resolve()), details=[
        f"status {manifest.get('status')}, {manifest.get('rows', '?')} rows, {len(manifest.get('shards', {}))} shards",
        f"input {manifest.get('input')}", f"model {model.get('uri')} (sha256 {model.get('sha256')})"]))
    run_id, named = manifest.get("mlflow", {}).get("run_id", ""), manifest.get("mlflow", {}).get("tracking_uri")
    if not tracking_uri and named and REDACTED in named:
        links.append(Link("prediction run", run_id, False, why=f"the manifest names it in {named}, whose credentials "
                          "were redacted when it was written: give --tracking-uri, that store with its credentials"))
        return "", None
    named_by = "--tracking-uri names it" if tracking_uri else \
        f"the manifest names it for prediction run {run_id}" if named else "the default store (no --tracking-uri)"
    client = _client(resolve_tracking_uri(tracking_uri or named or default_tracking_uri()), named_by, links)
    if client is None:
        return "", None
    found = _get_run(client, run_id, "prediction run", "the manifest", links) if run_id else None
    if run_id and found is None:
        return "", client
    if found is not None:
        tags = found.data.tags
        links.append(Link("prediction run", run_id, details=_describe(found)))
        if tags.get("lineage.model_sha256") != model.get("sha256"):
            links.append(Link("model", model.get("uri", ""), False, why="the run's lineage.model_sha256 is not the "
                              "manifest's model sha256"))
            return "", client
    if model.get("name") and model.get("version"):
        return f"models:/{model['name']}/{model['version']}", client
    if model.get("run_id"):
        return f"runs:/{model['run_id']}", client
    links.append(Link("init", model.get("uri", ""), details=["a plain model folder (no MLflow run behind it)"]))
    return "", client


def _get_run(client, run_id: str, kind: str, named_by: str, links: list[Link]):
    """The run, or None with a missing link saying why (absent or deleted)."""
    from mlflow.exceptions import MlflowException

    try:
        found = client.get_run(run_id)
    except MlflowException as exc:  # only "no such run" is a missing link: an outage or a 403 is no answer at all
        if exc.error_code not in ABSENT:  # a malformed id (a hand-edited tag): INVALID_PARAMETER_VALUE
            raise
        found = None
    if found is None or found.info.lifecycle_stage == "deleted":
        gone = "was deleted" if found else "does not exist"
        where = redact(client.tracking_uri)
        links.append(Link(kind, run_id, False, why=f"{named_by} names it, but it {gone} in the store {where}"))
        return None
    return found


def _describe(r) -> list[str]:
    tags = r.data.tags
    keys = (*CODE_TAGS, "lineage.tokenizer_sha256", "lineage.task_source", "lineage.task_data_sha256")
    splits = [k[len("data."):-len(".rows")] for k in tags if k.startswith("data.") and k.endswith(".rows")]
    roles = [f"data {s} ({'fits' if s == 'train' else 'chooses' if s == 'select' else 'evaluates'}): "
             f"{tags[f'data.{s}.rows']} rows, sha256 {tags.get(f'data.{s}.sha256', '?')}"
             for s in sorted(splits, key=lambda s: (s != "train", s != "select", s))]
    return [f"name {r.info.run_name}", *(f"{k} = {tags[k]}" for k in keys if k in tags), *roles]


def _walk_run(client, run_id: str, named_by: str, outer_tags: dict, links: list[Link], seen: set) -> None:
    """A run that logged a model: a pretraining run, a sweep trial (and its sweep) or a fine-tune; then its start.
    Lineage tags are taken from the run first, then its sweep's parent run, then `outer_tags` (the version's)."""
    if run_id in seen:
        links.append(Link("run", run_id, False, why="the chain loops back to it"))
        return
    seen.add(run_id)
    r = _get_run(client, run_id, "run", named_by, links)
    if r is None:
        return
    tags = r.data.tags
    if tags.get("lineage.job") == "pretrain":
        return _walk_pretraining(client, r, links, seen)
    sources = [tags]
    parent_id = tags.get("mlflow.parentRunId")
    if parent_id and "sweep" in tags:
        links.append(Link("sweep trial run", run_id, details=_describe(r) + [f"trial {tags.get('trial_id', '?')}"]))
        parent = _get_run(client, parent_id, "sweep", f"tag mlflow.parentRunId of run {run_id}", links)
        if parent is None:
            return
        links.append(Link("sweep", parent_id, details=_describe(parent) + [f"sweep {tags['sweep']}"]))
        sources.append(parent.data.tags)
    else:
        kind = "sweep" if tags.get("lineage.job") == "sweep" else "fine-tune run"  # runs:/ of a sweep's parent
        links.append(Link(kind, run_id, details=_describe(r)))
        _walk_resumes(client, r, links, seen)
    merged = {k: v for src in reversed([*sources, outer_tags]) for k, v in src.items() if k.startswith("lineage.")}
    _walk_start(client, merged, run_id, links, seen)


def _walk_start(client, tags: dict, run_id: str, links: list[Link], seen: set) -> None:
    """From a fine-tune's lineage tags to the pretraining run, an earlier MLflow model's run, or a plain folder."""
    init = tags.get("lineage.init")
    if tags.get("lineage.pretrain_run_id"):
        pretrain_id, init_run = tags["lineage.pretrain_run_id"], tags.get("lineage.init_run_id")
        links.append(Link("init", init or "(not tagged)", details=[f"lineage.pretrain_run_id = {pretrain_id}"]))
        if init_run and init_run != pretrain_id:  # a fine-tune from a fine-tune: walked whole (its data, its code, its
            # own start), down to the pretraining; described alone, the generations before it were never named, and
            # one deleted left the chain "complete"
            before = len(links)
            _walk_run(client, init_run, f"lineage.init_run_id of run {run_id}", {}, links, seen)
            if pretrain_id in seen:
                return
            if all(link.found for link in links[before:]):  # reached another start: the chain contradicts the tag
                links.append(Link("pretraining run", pretrain_id, False, why=f"run {run_id}'s lineage.pretrain_run_id "
                                  f"names it, but the chain through its init run {init_run} does not reach it"))
                return
            # the init run's chain is broken (said): the pretraining run the tag names, walked from here
        r = _get_run(client, pretrain_id, "pretraining run", f"lineage.pretrain_run_id of run {run_id}", links)
        if r is not None:
            _walk_pretraining(client, r, links, seen)
    elif tags.get("lineage.init_run_id"):  # an MLflow model that was not pretrained here: walk its own run
        init_run = tags["lineage.init_run_id"]
        links.append(Link("init", init or "(not tagged)", details=[f"lineage.init_run_id = {init_run}"]))
        _walk_run(client, init_run, f"lineage.init_run_id of run {run_id}", {}, links, seen)
    elif init and not init.startswith(("models:/", "runs:/")):
        links.append(Link("init", init, details=["a model folder with no MLflow pretraining run behind it: "
                                                 "the chain ends here, as the run says (lineage.init)"]))
    else:
        what = "lineage.init_run_id" if init else "lineage.init / lineage.pretrain_run_id"
        links.append(Link("init", f"tag {what}", False, why=f"absent on run {run_id}, its sweep and the version"))


def _walk_resumes(client, r, links: list[Link], seen: set):
    """The runs that trained `r`'s checkpoints before it (a resubmission's `continued_from`, that run's own, ...),
    each a link with its code tags, each one that must exist; the earliest reached."""
    while "continued_from" in r.data.tags:
        earlier, at = r.data.tags["continued_from"], r.data.tags.get("continued_at_step", "?")
        said = f"{r.info.run_name} ({r.info.run_id}) continued its checkpoint at step {at}"
        if earlier == "unrecorded" or earlier in seen:
            why = "the checkpoint names no run" if earlier == "unrecorded" else "the chain loops back to it"
            links.append(Link("continued from", earlier, False, why=f"{said}: {why}"))
            return r
        seen.add(earlier)
        found = _get_run(client, earlier, "continued from", f"tag continued_from of run {r.info.run_id}", links)
        if found is None:
            return r
        links.append(Link("continued from", earlier, details=_describe(found) + [said]))
        r = found
    return r


def _walk_pretraining(client, r, links: list[Link], seen: set) -> None:
    """The pretraining run (and the runs it continued) -> its prepared data (manifest sha256 checked) -> tokenizer
    -> raw corpus files; then the checkpoint it started from, if any, and on to that one's run and corpus."""
    tags, run_id = r.data.tags, r.info.run_id
    seen.add(run_id)
    links.append(Link("pretraining run", run_id, details=_describe(r)))
    first = _walk_resumes(client, r, links, seen)
    if "lineage.phase2.data_dir" in tags:  # a two-phase job's run: its phases' runs are the ones resubmitted
        phases = client.search_runs([r.info.experiment_id], f"tags.mlflow.parentRunId = '{run_id}'")
        for phase in sorted(phases, key=lambda p: p.data.tags.get("phase", "")):
            _walk_resumes(client, phase, links, seen)
    _walk_prepared(tags, run_id, links)
    _walk_init_checkpoint(client, first, links, seen)


def _walk_init_checkpoint(client, r, links: list[Link], seen: set) -> None:
    """A pretraining run's train.init_checkpoint (tagged lineage.init_checkpoint; a run from before that tag: its
    param, and the record in the checkpoint now) -> the run that wrote it, walked as any pretraining run."""
    from jobs.registry.tracking import init_checkpoint_tags

    tags, run_id = r.data.tags, r.info.run_id
    init = {k: v for k, v in tags.items() if k.startswith("lineage.init_checkpoint")} or \
        init_checkpoint_tags(r.data.params.get("train.init_checkpoint", ""))
    if not init:
        return
    checkpoint, writer = init["lineage.init_checkpoint"], init.get("lineage.init_checkpoint_run_id")
    if not writer:
        where = ("at a URI, whose record (continuation.json) is not read" if "://" in checkpoint else
                 "from outside the tracking store?")
        links.append(Link("init checkpoint", checkpoint, False, why=f"run {run_id} started from it, but no run is "
                          f"recorded as writing it ({where}): its corpus is unknown"))
        return
    links.append(Link("init checkpoint", checkpoint, details=[f"run {run_id} started from it; run {writer} wrote it"]))
    _walk_run(client, writer, f"lineage.init_checkpoint_run_id of run {run_id}", {}, links, seen)


def _walk_prepared(tags: dict, run_id: str, links: list[Link]) -> None:
    """A pretraining run's prepared set(s), tokenizer and raw corpus files."""
    needed = ("lineage.data_dir", "lineage.data_manifest_sha256", "lineage.tokenizer_sha256")
    absent = [k for k in needed if k not in tags]
    if absent:
        why = f"absent on pretraining run {run_id}"
        links.append(Link("prepared data", "tag " + ", ".join(absent), False, why=why))
        return
    data_dir = tags["lineage.data_dir"]
    manifest = _manifest(links, "prepared data", data_dir, tags["lineage.data_manifest_sha256"])
    if manifest is None:
        return
    if "lineage.phase2.data_dir" in tags:  # two phases: the release's weights last trained on phase 2's set
        if "lineage.phase2.data_manifest_sha256" not in tags:
            links.append(Link("phase-2 prepared data", "tag lineage.phase2.data_manifest_sha256", False,
                              why=f"absent on pretraining run {run_id}"))
            return
        if _manifest(links, "phase-2 prepared data", tags["lineage.phase2.data_dir"],
                     tags["lineage.phase2.data_manifest_sha256"]) is None:
            return
    links.append(_tokenizer(Path(data_dir) / "tokenizer", tags["lineage.tokenizer_sha256"]))
    inputs = json.loads(manifest.read_text()).get("inputs", {}).get("files", [])
    if not inputs:
        links.append(Link("corpus files", str(manifest), False, why="the manifest lists no input files"))
    links.extend(_corpus_file(entry) for entry in inputs)


def _manifest(links: list[Link], name: str, data_dir: str, want: str) -> Path | None:
    """A prepared set's manifest.json, its sha256 checked against the run's tag, as a link; None where it is not."""
    manifest = Path(data_dir) / "manifest.json"
    if not manifest.is_file():
        links.append(Link(name, str(manifest), False, why="not found"))
        return None
    got = hashlib.sha256(manifest.read_bytes()).hexdigest()
    if got != want:
        links.append(Link(name, str(manifest), False, why=f"sha256 {got}, the run's tag says {want}"))
        return None
    links.append(Link(name, data_dir, details=[f"manifest.json sha256 {got} (equals the run's tag)"]))
    return manifest


def _tokenizer(folder: Path, want: str) -> Link:
    if not folder.is_dir():
        return Link("tokenizer", str(folder), False, why=f"not found (the run's tag says sha256 {want}): the "
                    "prepared set's tokenizer cannot be re-hashed")
    from bert_core.tokenizer import tokenizer_hash

    got = tokenizer_hash(folder)
    if got != want:
        return Link("tokenizer", str(folder), False, why=f"sha256 {got}, the run's tag says {want}")
    return Link("tokenizer", f"sha256 {want}", details=[f"{folder} (re-hashed, equal)"])


def _corpus_file(entry: dict) -> Link:
    """One raw input as the manifest lists it, fingerprinted again the same way (sha256, or size + mtime)."""
    from pipelines.layout import fingerprint_inputs

    path = entry["path"]
    mark = f"sha256 {entry['sha256']}" if "sha256" in entry else f"mtime {entry.get('mtime')}"
    recorded = f"{entry['bytes']} bytes, {mark}"
    try:
        (now,) = fingerprint_inputs([path])
    except FileNotFoundError as exc:
        return Link("corpus file", path, False, details=[recorded], why=f"vanished: {type(exc).__name__}")
    except Exception as exc:  # noqa: BLE001 - a URI's filesystem not installed here (ImportError), not reachable
        # (an OSError, or a client's own network error), refused: not re-hashed either, and the walk goes on
        said = (redact(str(exc)).splitlines() or [""])[0][:200]
        return Link("corpus file", path, False, details=[recorded], why=f"cannot be read here: {type(exc).__name__}: "
                    f"{said}")
    changed = [f"{k} now {now.get(k)}" for k in ("bytes", "sha256", "mtime") if k in entry and now.get(k) != entry[k]]
    if changed:
        why = "changed since preparation: " + ", ".join(changed)
        return Link("corpus file", path, False, details=[recorded], why=why)
    return Link("corpus file", path, details=[recorded + " (unchanged)"])


def format(result: LineageResult) -> str:  # noqa: A001 - the name the job's API gives it
    lines = [f"lineage of {result.uri}"]
    for link in result.links:
        lines.append(f"  {link.kind:<16} {link.name}" + ("" if link.found else "   MISSING"))
        lines += [f"  {'':<16}   {d}" for d in link.details]
    lines += [f"warning: corpus file {link.name} {link.why}" for link in result.links
              if link.kind == "corpus file" and not link.found]
    if result.missing:
        lines += [f"missing link: {m}" for m in result.missing]
    else:
        end = result.links[-1] if result.links else None
        lines.append("complete: " + ("ends at a plain model folder (no pretraining run behind it)"
                                     if end and end.kind == "init" else "reaches the raw corpus files"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> LineageResult:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("uri", help="models:/NAME@alias, models:/NAME/VERSION, runs:/RUN_ID or a prediction folder")
    parser.add_argument("--tracking-uri", help="the store to read (default: a prediction folder's own, as its "
                        "manifest names it; else MLFLOW_TRACKING_URI, or sqlite:///mlflow.db where it is unset)")
    console.add_argument(parser)
    add_check_argument(parser)
    args = parser.parse_args(argv)
    console.configure(args.verbose)
    store = args.tracking_uri or _default_store(args.uri)
    refuse_relative_when_submitted({"--tracking-uri": store})  # in the job's copy: a new, empty store
    try:
        check_uri(args.uri)
    except ValueError as exc:
        parser.error(str(exc))
    named = not args.tracking_uri and store != default_tracking_uri()  # the store a prediction folder's manifest names
    if REDACTED not in store:  # a manifest's store, redacted: the walk says it cannot be read, naming --tracking-uri
        check_store_uri(store, "--tracking-uri" if args.tracking_uri else
                        f"the store the manifest of {args.uri} names" if named else "the default store")
        try:
            TrackingConfig(tracking_uri=store).check_reachable()  # a server that does not answer: one line
        except ConfigError:
            if not named:
                raise
            raise ConfigError(f"the manifest of {args.uri} names {redact(store)}, which does not answer; give "
                              "--tracking-uri") from None
    if args.check:  # a store that does not exist (yet) is the walk's missing link, not a check's refusal
        checked("lineage", args.uri, [])
        return LineageResult(args.uri)
    try:
        result = run(args.uri, args.tracking_uri)
    except ValueError as exc:
        parser.error(str(exc))
    print(format(result), flush=True)
    return result


if __name__ == "__main__":
    cli(lambda: sys.exit(1 if main().missing else 0))
