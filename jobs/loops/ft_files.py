"""Your own files' rows in their three roles (task.name=files): the training files streamed through Ray Data
(pipelines/tasks/stream.py), a given dev or select file read on the driver; the label set, rejects, leaks, caps and
shared groups as jobs/loops/ft_tasks.load_rows returns them for the benchmarks."""

from __future__ import annotations

import collections

from jobs.config.finetune import TaskConfig
from pipelines.tasks.common import TaskDataError, load_tokenizer
from pipelines.tasks.labels import require_varied_scores, unknown_label_said
from pipelines.tasks.roles import SELECT, TaskRows, numbered


def load_files(task: TaskConfig, tokenizer_dir=None) -> TaskRows:
    """Your own data (pipelines/tasks/files.py): the training files through Ray Data (pipelines/tasks/stream.py),
    the label set from them in a stable order (or task.labels); select and dev from their files where given (on the
    driver: they judge and choose, and are capped), else carved from train by the stable hash, dev first. A row whose
    label train lacks is rejected and counted; leaks leave train and select as for the benchmarks."""
    from pipelines.rejects import reject_line
    from pipelines.tasks.labels import encode_labels
    from pipelines.tasks.roles import keys_of, without
    from pipelines.tasks.stream import evaluation_groups, in_groups, stream_rows

    kind, classes = task.kind, collections.defaultdict(dict)
    rejected, noted = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter)
    given = {name: _read_files(task, spec, name, rejected[name], noted[name], classes[name])  # classes: with train's
             for name, spec in (("dev", task.dev_file), (SELECT, task.select_file)) if spec}
    tokenizer = load_tokenizer(str(tokenizer_dir)) if tokenizer_dir else None
    streamed = stream_rows(task.train_file, task.format, kind, task.columns, fraction=task.selection_fraction,
                           max_rows=task.selection_max_rows, labels=tuple(task.labels), dev=given.get("dev"),
                           select=given.get(SELECT), max_train=task.max_train_examples, tokenizer=tokenizer,
                           max_seq_len=task.max_seq_len, version_2=task.version_2,
                           max_query_length=task.max_query_length, given_classes=classes)
    for name, counts in streamed.rejected.items():
        rejected.setdefault(name, collections.Counter()).update(counts)
    noted["train"].update(streamed.notes)
    firsts = [(path, reason, where, text) for reason, (path, where, text) in streamed.samples.items()]

    def encoded(name: str, rows: list[dict]) -> list[dict]:  # a carved split was encoded in the cluster
        if name not in given or not streamed.labels:
            return rows
        rows, counts = encode_labels(rows, kind, streamed.labels, found := [])
        rejected[name].update(counts)
        firsts.extend((getattr(task, f"{name}_file"), *first) for first in found)  # a label train lacks
        return rows

    def trained(name: str, rows: list[dict]) -> list[dict]:  # a class no training row holds judges nothing
        if streamed.trained is None:
            return rows
        held = [set(r["label"] if kind == "multi-label" else [r["label"]]) <= streamed.trained for r in rows]
        if not all(held):
            rejected[name]["label_not_in_train"] += held.count(False)
            bad = rows[held.index(False)]
            names = bad["label"] if kind == "multi-label" else [bad["label"]]
            firsts.append((getattr(task, f"{name}_file") or task.train_file, "label_not_in_train",
                           f"id {bad.get('id')}", next(streamed.labels[c] for c in names if c not in streamed.trained)))
        return [r for r, ok in zip(rows, held) if ok]

    # the label set is the training files' (carved rows too): a class whose every row was carved to dev or select
    # has none in train, and its rows there were a term of macro_f1 no model could score (a given dev file's rows of a
    # class train lacks are rejected alike)
    dev, select = (trained(n, encoded(n, rows)) for n, rows in (("dev", streamed.dev), (SELECT, streamed.select)))
    held = streamed.labels if streamed.trained is None else tuple(  # the classes train holds, said with a reject
        name for i, name in enumerate(streamed.labels) if i in streamed.trained)
    for path, reason, where, text in firsts:  # the training files' first rejects, as _read_files says dev's
        print(reject_line(path, reason, where, text, unknown_label_said(reason, text, held)), flush=True)
    if kind == "question-answering":  # evaluation pools a question's windows by id: refused now, not mid-training
        from pipelines.tasks.squad import require_unique_ids

        for name, rows in (("dev", dev), (SELECT, select)):
            require_unique_ids(rows, f"the {name} split")
    dropped = dict(streamed.dropped)
    select, dropped["select_in_evaluation"] = without(select, keys_of(dev, kind), kind)
    capped = {}
    for name, spec, rows in (("dev", task.dev_file, dev), (SELECT, task.select_file, select)):
        if not rows:
            leaks = {k: v for k, v in dropped.items() if k.startswith(name) and v}
            why = {**rejected.get(name, {}), **leaks} or "none carved: raise task.selection_fraction"
            raise TaskDataError(f"task.{name}_file {spec or task.train_file!r}: no usable rows ({why}"
                                + ("; rows whose input is also in another split leave this one" if leaks else "") + ")")
        capped[name] = numbered(rows, task.max_eval_examples)
        if kind == "regression":  # else a NaN metric, taken for divergence; the sample too (a skewed split's)
            where = f"task.{name}_file {spec or task.train_file!r}"
            require_varied_scores(rows, where, "rows whose scores differ" if spec else
                                  "a larger task.selection_fraction")
            require_varied_scores(capped[name], f"{where}, {task.max_eval_examples} of its rows",
                                  "a larger task.max_eval_examples")
    rows = TaskRows(streamed.train, capped[SELECT], {"dev": capped["dev"]}, labels=streamed.labels, dropped=dropped)
    rows.rejected = {split: dict(counts) for split, counts in rejected.items() if counts}
    rows.noted = {split: dict(counts) for split, counts in noted.items() if counts}
    rows.truncated = {"train": streamed.truncated} if streamed.truncated else {}
    if task.dev_file or task.select_file:  # carved, a group never straddles two splits; given files are not regrouped
        groups = evaluation_groups(streamed.dev, kind, streamed.mode)  # the dev rows as read, as stream_rows counts
        shared = {"train": streamed.shared_group, SELECT: in_groups(capped[SELECT], groups, kind, streamed.mode)}
        rows.shared_group = {split: n for split, n in shared.items() if n}
    return rows


def _read_files(task: TaskConfig, spec: str, split: str, rejected: collections.Counter, noted: collections.Counter,
                classes=None) -> list[dict]:
    """Every row of the files `spec` names (a dev or select file: scored only, no training target), in file order;
    rejects counted by reason into `rejected`, QA answer notes into `noted`; how each file writes its classes into
    `classes` (stream.add_classes)."""
    from pipelines.rejects import reject_line
    from pipelines.tasks.file_finder import resolve_files
    from pipelines.tasks.files import read_file
    from pipelines.tasks.stream import add_classes

    rows, said = [], set()
    for path, fmt in resolve_files(spec, task.format, split=split):
        for batch in read_file(path, fmt, task.kind, task.columns, version_2=task.version_2, scored_only=True):
            rows.extend(batch.rows)
            rejected.update(batch.rejects)
            noted.update(batch.notes)
            add_classes(classes if classes is not None else {}, path, batch, task.kind)
            for reason, where, excerpt in batch.samples:
                if reason not in said and rejected[reason] == batch.rejects[reason]:  # its first in this split
                    said.add(reason)
                    print(reject_line(path, reason, where, excerpt), flush=True)
    return rows
