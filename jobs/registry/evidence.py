"""What a promotion may judge two registered versions on (jobs/promote.py): models of one task, and evaluation rows
neither trained on nor was chosen by: the rows each version was registered with (their digest), or rows named on
purpose that are not rows of the task's training file. `cfg` is the promotion's config (PromoteConfig: its task.*
overrides); `task` the candidate's task config as judged."""

from __future__ import annotations

from pipelines.tasks.glue import GLUE_TASKS
from pipelines.tasks.roles import split_digest


def refuse_incomparable(task, other: dict, ours: str, theirs: str) -> None:
    """Refuse to judge the candidate (`task`, its TaskConfig) against a champion of another task, kind or labels
    (`other`: its registered task config), or a question answerer against one of the other SQuAD version: a v1 model
    always answers and a v2 model may say "no answer", so one of them would be judged by rules it was not made for."""
    theirs_is = (other.get("name"), other.get("kind") or task.kind, other.get("labels"))
    if theirs_is != (task.name, task.kind, task.labels):
        raise ValueError(f"v{theirs} (champion) is a {theirs_is[0]} {theirs_is[1]} model with labels "
                         f"{theirs_is[2]}; v{ours} is {task.name} {task.kind} with {task.labels}: not comparable")
    their_v2 = str(other.get("version_2", False)).strip().lower() in ("true", "1")
    if task.kind == "question-answering" and their_v2 != bool(task.version_2):
        raise ValueError(f"v{theirs} (champion) is a SQuAD {'v2' if their_v2 else 'v1'} model (task.version_2="
                         f"{their_v2}), v{ours} a SQuAD {'v2' if task.version_2 else 'v1'} one: a v1 model always "
                         "answers, a v2 model may answer nothing; not comparable")


def names_rows(cfg, task) -> bool:
    """Whether the promotion names its own evaluation rows (task.dev_file, a GLUE task.data_dir) rather than those the
    candidate was registered with: named, not merely given (an empty task.dev_file carves dev from train_file)."""
    return bool(cfg.task.get("dev_file") or cfg.task.get("data_dir") and task.name in GLUE_TASKS)


def refuse_seen_rows(cfg, task, split: str, rows: list[dict], dropped: dict, versions) -> None:
    """Refuse named evaluation rows whose inputs are inputs of the task's training rows (its train or select split):
    the task loader takes those training rows out of train and select as leaks and keeps the evaluation rows, which
    is right for a fine-tune that has not trained yet, but models fine-tuned on other evaluation rows trained on
    train and chose on select, so they would be judged on inputs they fitted or were chosen by. Unless these are the
    rows every version (`versions`: the candidate, the champion or None) was evaluated on when registered (its
    data.<split>.sha256): its fine-tune's loader took them out of train and select the same way. Counted as the
    loader counts them: training rows, over every evaluation split, before task.max_eval_examples. (For a GLUE
    task.data_dir, the training file is the named folder's train.tsv; the champion's own training files, where they
    differ from the candidate's, are not read.)"""
    seen = {k: v for k, v in dropped.items() if k.endswith("_in_evaluation") and v}
    if not seen or not names_rows(cfg, task):
        return
    digest = split_digest(rows)
    if not all(v is None or v.tags.get(f"data.{split}.sha256") == digest for v in versions):
        where = " and ".join(f"{n} {k.split('_')[0]} row{'s' if n > 1 else ''}" for k, n in sorted(seen.items()))
        files = ", ".join(repr(f) for f in (task.train_file or task.data_dir, task.select_file) if f)
        raise ValueError(f"the named evaluation rows share their inputs with {where} of the task's training data "
                         f"({files}): the models trained or were chosen on those inputs; name evaluation rows none of "
                         "whose inputs is in the training data, or remove those from them")


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
            raise ValueError(f"the {len(rows)} {split} rows are not those v{version.version}{role} was evaluated on "
                             f"when it was registered (sha256 {digest[:12]} now, {registered[:12]} then): the task's "
                             f"files or a task.* override changed them, and rows carved otherwise may be rows the "
                             f"models trained on; judge on the registered rows, or name new evaluation rows with "
                             f"task.dev_file=...")
