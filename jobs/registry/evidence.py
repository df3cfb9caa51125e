"""What a promotion may judge two registered versions on (jobs/promote.py): models of one task, and evaluation rows
neither trained on nor was chosen by: the rows each version was registered with (their digest), or rows named on
purpose that are none of the rows either version was fine-tuned on (its registered task's train and select). `cfg` is
the promotion's config (PromoteConfig: its task.* overrides); `task` the candidate's task config as judged."""

from __future__ import annotations

from pipelines.tasks.glue import GLUE_TASKS
from pipelines.tasks.roles import split_digest


def refuse_incomparable(task, other: dict, ours: str, theirs: str, overrides: dict | None = None) -> None:
    """Refuse to judge the candidate (`task`, its TaskConfig) against a champion of another task, kind or labels
    (`other`: its registered task config), or a question answerer against one of the other SQuAD version: a v1 model
    always answers and a v2 model may say "no answer", so one of them would be judged by rules it was not made for.
    So would a champion chosen (its checkpoint, trial and seed) on another main metric than the candidate (your own
    files' task.metric; one registered without it, on its kind's default), unless the promotion's task.* `overrides`
    name the metric both are judged on."""
    theirs_is = (other.get("name"), other.get("kind") or task.kind, other.get("labels"))
    if theirs_is != (task.name, task.kind, task.labels):
        raise ValueError(f"v{theirs} (champion) is a {theirs_is[0]} {theirs_is[1]} model with labels "
                         f"{theirs_is[2]}; v{ours} is {task.name} {task.kind} with {task.labels}: not comparable")
    their_v2 = str(other.get("version_2", False)).strip().lower() in ("true", "1")
    if task.kind == "question-answering" and their_v2 != bool(task.version_2):
        raise ValueError(f"v{theirs} (champion) is a SQuAD {'v2' if their_v2 else 'v1'} model (task.version_2="
                         f"{their_v2}), v{ours} a SQuAD {'v2' if task.version_2 else 'v1'} one: a v1 model always "
                         "answers, a v2 model may answer nothing; not comparable")
    if "metric" in (overrides or {}):
        return
    from dataclasses import replace

    from jobs.loops.ft_tasks import metric_name

    mine, their = metric_name(task), metric_name(replace(task, metric=str(other.get("metric") or "")))
    if mine != their:
        raise ValueError(f"v{theirs} (champion) was chosen on {their}, v{ours} on {mine}: judged on either one's "
                         f"metric, the other would be judged by a rule it was not made for; pass task.metric={their} "
                         f"or task.metric={mine} to judge both on it")


def names_rows(cfg, task) -> bool:
    """Whether the promotion names its own evaluation rows (task.dev_file, a GLUE task.data_dir) rather than those the
    candidate was registered with: named, not merely given (an empty task.dev_file carves dev from train_file)."""
    return bool(cfg.task.get("dev_file") or cfg.task.get("data_dir") and task.name in GLUE_TASKS)


# where a task reads its training and select rows from, and how it reads them: a version trained on the rows its
# registered task's values of these give
TRAINED_FROM = ("data_dir", "corpus_dir", "train_file", "select_file", "format", "columns", "version_2")
# what the task loader does not read (how a model reads and scores the rows): tasks that differ in these alone give
# the same rows, read once in a judgement
NOT_READ = ("max_seq_len", "max_query_length", "metric", "multi_label_threshold", "doc_stride", "n_best",
            "max_answer_length", "label_all_subwords")


def refuse_seen_rows(cfg, task, split: str, loaded, versions) -> None:
    """Refuse named evaluation rows whose inputs are inputs of rows a judged version (`versions`: the candidate, the
    champion or None) trained or was chosen on: the train and select rows of its registered task, not of the task as
    judged (`task`; `loaded` its rows): a GLUE task.data_dir's train.tsv, or a task.train_file override, may be rows no
    model trained on. The task loader takes training rows out of train and select as leaks and keeps the evaluation
    rows, right for a fine-tune that has not trained yet, not for models that did. A version passes unread when these
    are the rows it was evaluated on when registered (data.<split>.sha256: its loader took them out of train and select
    the same way), or when the train and select rows left beside them are exactly its own (data.train.sha256,
    data.select.sha256). Otherwise its registered task is read again as registered (your own files' dev carved as it
    was then), checked against those digests, and the judged rows' inputs counted in its train and select rows: the
    same path read again gives other rows where rows moved out of its training file into the named ones. A version
    that recorded no such digests (registered before versions did) and reads the judged task's files is checked by the
    loader's counts. Training rows that cannot be read as registered (moved, deleted, redacted, edited since) are
    refused: nothing shows the named rows are not theirs. Each task's rows are read once here (`loaded` is the judged
    task's): a candidate and a champion fine-tuned on one folder share the read."""
    if not names_rows(cfg, task):
        return
    rows, have = loaded.evaluation[split], loaded.summary()
    digest = split_digest(rows)
    reads = {_read_as(task): loaded}
    for version, role in zip(versions, ("", " (champion)")):
        if version is None or version.tags.get(f"data.{split}.sha256") == digest:
            continue
        recorded = {s: version.tags.get(f"data.{s}.sha256") for s in ("train", "select")}
        if all(recorded[s] == have[s]["sha256"] for s in recorded):
            continue
        try:
            trained = _registered(version, task)
        except ValueError as exc:  # a field an older job wrote that TaskConfig no longer has
            raise ValueError(f"v{version.version}{role}'s registered task cannot be read ({exc}): the named evaluation "
                             "rows cannot be checked against the rows it was fine-tuned on") from None
        if not any(recorded.values()) and all(getattr(trained, f) == getattr(task, f) for f in TRAINED_FROM):
            counts = loaded.dropped  # nothing recorded to check its files against: they are the judged task's
        else:
            counts = _trained_on(cfg, trained, task, rows, version, role, reads)
        seen = {k: v for k, v in counts.items() if k.endswith("_in_evaluation") and v}
        if seen:
            where = " and ".join(f"{n} {k.split('_')[0]} row{'s' if n > 1 else ''}"  # train rows first
                                 for k, n in sorted(seen.items(), reverse=True))
            raise ValueError(f"the named evaluation rows share their inputs with {where} v{version.version}{role} was "
                             f"fine-tuned on ({_files(trained)}: its registered training data): it trained or was "
                             "chosen on those inputs; name evaluation rows none of whose inputs is in a judged "
                             "version's training data, or remove those from them")


def _read_as(task) -> str:
    """The settings the task loader reads `task`'s rows by: equal, the same rows."""
    import json
    from dataclasses import asdict

    return json.dumps({k: v for k, v in asdict(task).items() if k not in NOT_READ}, sort_keys=True, default=str)


def _registered(version, task):
    """The task `version` was fine-tuned with (its task_config tag), no task.* override: a field registered redacted
    (a URL's credentials) takes the judged task's value where that is the same URL, named again."""
    import json

    from jobs.loops import ft_tasks
    from jobs.registry.redaction import REDACTED, redact

    raw = json.loads(version.tags["task_config"])
    named = {f: getattr(task, f) for f in TRAINED_FROM
             if REDACTED in str(raw.get(f, "")) and redact(str(getattr(task, f))) == raw[f]}
    return ft_tasks.task_config({**raw, **named})


def _trained_on(cfg, trained, task, rows: list[dict], version, role: str, reads: dict) -> dict:
    """How many of the train and select rows `version` was fine-tuned on (its registered task, `trained`, read as
    registered and checked against the digests it recorded) share an input with the judged `rows`. `reads`: the
    rows already read, by _read_as; this read is added."""
    from jobs.loops import ft_tasks
    from jobs.registry.redaction import redact
    from pipelines.tasks.roles import keys_of

    def unchecked(why: str) -> ValueError:
        named = "dev_file" if cfg.task.get("dev_file") else "data_dir"
        return ValueError(f"the named evaluation rows cannot be checked against the rows v{version.version}{role} was "
                          f"fine-tuned on: its registered data ({_files(trained, dev=True)}: what it read to train, "
                          f"its dev file too, which took its overlaps out of train) {why}; put those files back as "
                          f"they were registered, or judge on the rows it was registered with (no task.{named}=...)")
    if (key := _read_as(trained)) not in reads:
        try:
            reads[key] = ft_tasks.load_rows(trained)
        except (OSError, ValueError) as exc:  # moved, deleted, a redacted URL: a TaskDataError, a ConfigError too
            raise unchecked(f"cannot be read ({type(exc).__name__}: {redact(str(exc))[:300]})") from None
    then = reads[key]
    now = then.summary()
    for s in ("train", "select"):
        if (registered := version.tags.get(f"data.{s}.sha256")) and registered != now[s]["sha256"]:
            raise unchecked(f"gives other {s} rows now than it recorded when registered (sha256 "
                            f"{now[s]['sha256'][:12]} now, {registered[:12]} then: its files edited since, or read by "
                            "other rules)")
    global_ids = trained.name == "squad"  # the benchmark's question ids, as its loader keys them (roles.leak_keys)
    keys = keys_of(rows, task.kind, global_ids)
    return {f"{s}_in_evaluation": _shared(r, keys, task.kind, global_ids)
            for s, r in (("train", then.train), ("select", then.select))}


def _shared(split, keys: set[str], kind: str, global_ids: bool) -> int:
    """How many of a split's rows share a leak key with `keys`: rows on the driver, or your own files' training split
    left in the cluster (a stream.StreamedSplit: Ray Data tasks count its blocks there, one number each back)."""
    from pipelines.tasks.roles import without

    if isinstance(split, list):
        return without(split, keys, kind, global_ids)[1]
    counted = split.dataset.map_batches(_count_shared, batch_size=None, batch_format="numpy",
                                        fn_kwargs={"kind": kind, "keys": keys})
    return sum(int(rec["shared"]) for rec in counted.take_all())


def _count_shared(batch, kind: str, keys: set[str]) -> dict:
    """A block of a StreamedSplit (column `row`: JSON rows) -> how many of its rows share a leak key with `keys`. Your
    own files' ids name nothing across files (no global_ids)."""
    import json

    from pipelines.tasks.roles import leak_keys

    return {"shared": [sum(bool(leak_keys(json.loads(r), kind) & keys) for r in batch["row"] if r)]}


def _files(task, dev: bool = False) -> str:
    from jobs.registry.redaction import redact

    return ", ".join(repr(redact(str(f))) for f in (task.train_file or task.data_dir or task.corpus_dir,
                                                    task.select_file, task.dev_file if dev else "") if f)


def same_data(cfg, candidate, champion, task, split: str, rows: list[dict], labels) -> None:
    """Refuse to judge on rows other than those the candidate and the champion were registered with (each version's
    data.<split>.sha256), unless new evaluation rows are named (task.dev_file, a GLUE task.data_dir): the task's
    files edited since, or a task.* override of the carve (task.selection_max_rows=...), would give a dev split of
    other rows, which may hold rows either model trained on (the champion's, when the files changed between the two
    registrations: its score inflated); and refuse labels other than the model's (a harvested corpus that changed
    under pkgdocs), which would score both heads against gold labels of other indices."""
    if task.labels and labels and [str(x) for x in labels] != [str(x) for x in task.labels]:
        raise ValueError(f"the task's data gives labels {list(labels)[:10]}; v{candidate.version} was trained with "
                         f"{list(task.labels)[:10]}: its head's indices would be scored against other labels")
    if names_rows(cfg, task):
        return
    digest = split_digest(rows)
    for version, role in ((candidate, ""), (champion, " (champion)")):
        if version is None:
            continue
        registered = version.tags.get(f"data.{split}.sha256")
        if not registered:  # registered before versions recorded their rows, or by hand: said, not checked
            print(f"[promote] warning: v{version.version}{role} records no {split} rows it was evaluated on (no tag "
                  f"data.{split}.sha256): nothing checks that the {len(rows)} rows carved now are not rows it trained "
                  f"on; task.dev_file=... names rows neither model trained on", flush=True)
        elif registered != digest:
            if carved := _carved_apart(candidate, champion):  # no override gives both their rows: not the files
                raise ValueError(f"the {len(rows)} {split} rows are not those v{version.version}{role} was evaluated "
                                 f"on when it was registered (sha256 {digest[:12]} now, {registered[:12]} then): "
                                 f"{carved}, which carve the {split} split: the two were evaluated on other rows, and "
                                 f"either's may be rows the other trained on; no task.* override gives both theirs: "
                                 f"name evaluation rows neither trained on with task.dev_file=...")
            raise ValueError(f"the {len(rows)} {split} rows are not those v{version.version}{role} was evaluated on "
                             f"when it was registered (sha256 {digest[:12]} now, {registered[:12]} then): the task's "
                             f"files or a task.* override changed them, and rows carved otherwise may be rows the "
                             f"models trained on; judge on the registered rows, or name new evaluation rows with "
                             f"task.dev_file=...")


# what decides which rows a task's evaluation split holds: its files, its caps, the classes a row may hold (task.labels
# rejects others; a set, in any order), SQuAD 2.0's unanswerable questions, the pkgdocs harvest's size, and for your
# own files' dev carved from train (no task.dev_file) the carve's share and size, which the select carve uses too
# (DEV_CARVE); every other TaskConfig field is named in tests/unit/test_evidence_carve_names.py as shaping no row
CARVED_BY = ("train_file", "dev_file", "select_file", "data_dir", "corpus_dir", "format", "columns",
             "selection_fraction", "selection_max_rows", "max_eval_examples", "max_dev_per_label", "num_classes",
             "labels", "version_2", "harvest_max_mb")
DEV_CARVE = ("selection_fraction", "selection_max_rows")  # a benchmark's dev, or a given dev file: not carved


def _carved_apart(candidate, champion) -> str:
    """The CARVED_BY settings in which the candidate's and the champion's registered task configs (their task_config
    tags) differ, said as "vN was registered with task.X=a, vM (champion) with task.X=b"; "" when they agree, or
    either recorded none (a setting it did not record: TaskConfig's default)."""
    import dataclasses
    import json

    from jobs.config.finetune import TaskConfig
    from jobs.registry.redaction import redact

    if champion is None or not candidate.tags.get("task_config") or not champion.tags.get("task_config"):
        return ""
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(TaskConfig) if f.name in CARVED_BY}

    def said(value) -> str:  # a tag's JSON value, or a default (a Columns dataclass)
        value = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
        return redact(value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str))[:120]

    raw = [json.loads(v.tags["task_config"]) for v in (candidate, champion)]
    carved = all(r.get("name") == "files" for r in raw) and not all(r.get("dev_file") for r in raw)
    ours, theirs = ({f: said(sorted(map(str, v)) if f == "labels" else v) for f in CARVED_BY
                     for v in [r.get(f, defaults[f])]} for r in raw)
    apart = [f for f in CARVED_BY if ours[f] != theirs[f] and (carved or f not in DEV_CARVE)]
    if not apart:
        return ""
    return (f"v{candidate.version} was registered with " + ", ".join(f"task.{f}={ours[f]}" for f in apart)
            + f", v{champion.version} (champion) with " + ", ".join(f"task.{f}={theirs[f]}" for f in apart))
