"""What fine-tuning needs from each task: rows in their three roles, features, the head, and the official metrics.

The readers, featurizers and metrics live in pipelines/tasks; this module only wires them to a task name. Roles
(pipelines/tasks/roles.py): `train` fits, `select` makes every choice (best checkpoint, early stopping, trial, seed,
SQuAD v2's null threshold), the evaluation splits (`dev`; MNLI: `dev_matched` and `dev_mismatched`) judge the chosen
model once, on the driver. Contracts with the worker (jobs/workers/finetune_worker.py):
  * every row gets `row_index` (its position in its split); every feature carries it, plus `window`
    (the feature's number among its row's features: SQuAD windows; 0 elsewhere), so predictions
    gathered in any order sort back to the order `squad_eval_features` produces;
  * `dev_metrics` takes the gathered, sorted arrays and returns the task's official metrics, with
    `main_metric(task)` (on select) the one early stopping and the best checkpoint follow (higher is better).
"""

from __future__ import annotations

import collections
import json

import numpy as np

from bert_core.config import ConfigError
from jobs.config.finetune import TaskConfig
from pipelines.tasks.common import (UNKNOWN_SHARE, batch_rows, count_too_long, load_tokenizer, require_wordpiece,
                                    unknown_share)
from pipelines.tasks.labels import require_varied_scores
from pipelines.tasks.roles import SELECT, TaskRows, assign_roles, numbered

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
TARGETS = {"classification": ("labels",), "multi-label": ("labels",), "regression": ("labels",),
           "token-classification": ("labels",), "question-answering": ("start_positions", "end_positions")}
HF_TASK = {"classification": "text-classification", "multi-label": "text-classification",
           "regression": "text-classification", "token-classification": "token-classification",
           "question-answering": "question-answering"}
SEQUENCE_KINDS = ("classification", "multi-label", "regression")  # one label (or labels, or a score) per row
# whose metrics map word pieces back to the text (answers) or its words (tags): dev_metrics needs the tokenizer
NEEDS_TOKENIZER = ("question-answering", "token-classification")


def head_class(task: TaskConfig, recipe: str = "bert"):
    """The task's head for an encoder of `recipe` ("bert": bert_core/model.py; "modern": bert_core/modern_heads.py)."""
    if recipe == "modern":
        from bert_core import modern_heads as heads

        prefix = "ModernBert"
    else:
        from bert_core import model as heads

        prefix = "Bert"
    name = {**dict.fromkeys(SEQUENCE_KINDS, "ForSequenceClassification"),
            "token-classification": "ForTokenClassification", "question-answering": "ForQuestionAnswering"}[task.kind]
    return getattr(heads, prefix + name)


def recipe_of_checkpoint(model_dir) -> str:
    """"modern" for a ModernBERT folder (config.json's model_type "modernbert", or our variant of it with an
    architecture switch off), else "bert"."""
    from bert_core.modern_config import MODEL_TYPE, VARIANT_MODEL_TYPE, model_type

    return "modern" if model_type(model_dir) in (MODEL_TYPE, VARIANT_MODEL_TYPE) else "bert"


def head_kwargs(task: TaskConfig) -> dict:
    """The head's constructor arguments: its number of outputs, and for multi-label the sigmoid loss."""
    if task.kind == "question-answering":
        return {}
    return {"num_labels": num_labels(task), **({"multi_label": True} if task.kind == "multi-label" else {})}


def id2label(task: TaskConfig) -> dict[int, str] | None:
    """Class names for the exported config (None: QA, regression)."""
    return None if task.kind == "question-answering" or num_labels(task) == 1 else dict(enumerate(task.labels))


def is_regression(task: TaskConfig) -> bool:
    """A score to predict: kind regression, or GLUE's STS-B (a "classification" by name, one output by its spec)."""
    from pipelines.tasks.glue import GLUE_TASKS

    return task.kind == "regression" or (task.name in GLUE_TASKS and GLUE_TASKS[task.name].is_regression)


def num_labels(task: TaskConfig) -> int:
    if is_regression(task):
        return 1
    return len(task.labels) if task.kind != "question-answering" else 2


def eval_splits(task: TaskConfig) -> tuple[str, ...]:
    """The evaluation splits: the benchmark's official dev split(s), never seen by a choice."""
    return ("dev_matched", "dev_mismatched") if task.name == "mnli" else ("dev",)


def metric_name(task: TaskConfig) -> str:
    """The task's main metric: GLUE's score (mean of the task's official metrics), pkgdocs' accuracy, CoNLL's
    entity F1, SQuAD's F1."""
    if task.name == "files":
        from jobs.config.finetune import FILE_METRICS

        return task.metric or FILE_METRICS[task.kind][0]
    if task.name == "pkgdocs":
        return "accuracy"
    return "score" if task.kind == "classification" else "f1"


def main_metric(task: TaskConfig) -> str:
    """The select metric that picks the best checkpoint, trial and seed (higher is better)."""
    return f"{SELECT}/{metric_name(task)}"


def eval_metric(task: TaskConfig) -> str:
    """The evaluation metric the model card, the registered version and the promotion gate report (MNLI: matched)."""
    return f"{eval_splits(task)[0]}/{metric_name(task)}"


# -- rows (on the driver) ----------------------------------------------------------------------------

def load_rows(task: TaskConfig, tokenizer_dir=None) -> TaskRows:
    """The task's rows in their three roles, `row_index` set in each split; caps applied (samples). Your own files
    (task.name=files) are read by Ray Data tasks: their training split stays in the cluster (a StreamedSplit;
    Ray must be up) and `tokenizer_dir` counts its rows too long for task.max_seq_len as they pass. A `tokenizer_dir`
    that is not WordPiece's is refused first, before a row is read (pipelines.tasks.common.require_wordpiece)."""
    from pipelines.tasks import load_conll, load_glue, load_squad
    from pipelines.tasks.conll import CONLL_LABELS, scheme_checked
    from pipelines.tasks.glue import GLUE_TASKS

    if tokenizer_dir is not None:
        require_wordpiece(tokenizer_dir)
    select, rejected, noted = None, {}, {}

    def kept(split, name: str) -> list[dict]:  # a benchmark reader's rows; its rejects and notes under `name`
        rejected[name], noted[name] = collections.Counter(split.rejects), dict(split.notes)
        return split.rows

    if task.name == "files":
        from jobs.loops.ft_files import load_files

        return scheme_checked(load_files(task, tokenizer_dir), task.kind, task.iob_scheme)
    if task.name == "pkgdocs":
        from pipelines.harvest import harvest_installed_docs
        from pipelines.tasks.pkgdocs import load_pkgdocs

        harvest_installed_docs(task.corpus_dir, max_mb=task.harvest_max_mb)  # reused when already there
        splits, labels = load_pkgdocs(task.corpus_dir, num_labels=task.num_classes,
                                      select_fraction=task.selection_fraction, max_per_label={
                                          "train": task.max_train_per_label, "select": task.max_dev_per_label,
                                          "dev": task.max_dev_per_label})
        train, select, evals = splits["train"].rows, splits["select"].rows, {"dev": splits["dev"].rows}
    elif task.name in GLUE_TASKS:
        spec = GLUE_TASKS[task.name]
        train = kept(load_glue(task.name, task.data_dir, "train"), "train")
        evals = {split: kept(load_glue(task.name, task.data_dir, split), split) for split in eval_splits(task)}
        labels = spec.labels or ("score",)
    elif task.name == "squad":
        train, labels = kept(load_squad(task.train_file, version_2=task.version_2), "train"), ()
        evals = {"dev": kept(load_squad(task.dev_file, version_2=task.version_2, scored_only=True), "dev")}
    else:
        labels = tuple(task.labels) or CONLL_LABELS
        train = kept(load_conll(task.train_file, labels), "train")
        evals = {"dev": kept(load_conll(task.dev_file, labels), "dev")}
    rows = assign_roles(train, evals, task.kind, task.selection_fraction, task.selection_max_rows, select,
                        global_ids=task.name == "squad")  # the benchmark's ids: one question each, in every split
    rows.train = numbered(rows.train, task.max_train_examples)
    rows.select = numbered(rows.select, task.max_eval_examples)
    rows.evaluation = {name: numbered(r, task.max_eval_examples) for name, r in rows.evaluation.items()}
    rows.labels = tuple(labels)
    rows.rejected = {split: dict(counts) for split, counts in rejected.items() if counts}
    rows.noted = {split: counts for split, counts in noted.items() if counts}
    if not rows.select:
        raise ConfigError(f"task {task.name}: the select split is empty (every carved row also occurs in train or "
                          f"dev); raise task.selection_fraction (now {task.selection_fraction})")
    if is_regression(task):  # STS-B too (a GLUE "classification"): a split of one score (a small max_eval_examples)
        for name, split in {SELECT: rows.select, **rows.evaluation}.items():  # reads as diverged weights
            require_varied_scores(split, f"task {task.name}'s {name} split", "a larger task.max_eval_examples")
    return scheme_checked(rows, task.kind, task.iob_scheme)


def data_source(task: TaskConfig) -> str:
    """Where the task's rows are read from (a folder or the training file), for lineage."""
    if task.name == "pkgdocs":
        return task.corpus_dir
    return task.data_dir if task.data_dir else task.train_file


def rows_digest(rows: TaskRows, splits: tuple[str, ...] = ()) -> str:
    """sha256 of exactly the rows a run trains, selects and is evaluated on (after caps), or of `splits` only:
    equal digest, equal data."""
    import hashlib

    digest = hashlib.sha256()
    for split, info in rows.summary().items():
        if splits and split not in splits:
            continue
        digest.update(f"[{split}] {info['rows']} {info['sha256']}\n".encode())
    return digest.hexdigest()


def split_tags(rows: TaskRows) -> dict[str, str]:
    """`data.<split>.rows` / `.sha256` of every split, the leaks removed, a sequence task's inputs: run/version tags."""
    tags = {"data.inputs": rows.inputs()} if rows.inputs() else {}  # "text", or "text,text_pair"
    for split, info in rows.summary().items():
        tags[f"data.{split}.rows"], tags[f"data.{split}.sha256"] = str(info["rows"]), info["sha256"]
    tags["data.roles"] = f"train fits, {SELECT} chooses, {'/'.join(rows.evaluation)} evaluates"
    tags.update({f"data.dropped.{k}": str(v) for k, v in rows.dropped.items()})
    tags.update({f"data.rejected.{split}.{reason}": str(n) for split, counts in rows.rejected.items()
                 for reason, n in counts.items()})
    tags.update({f"data.truncated.{split}": str(n) for split, n in rows.truncated.items()})
    tags.update({f"data.noted.{split}.{reason}": str(n) for split, counts in rows.noted.items()
                 for reason, n in counts.items()})  # QA answers off their start, in questions kept
    tags.update({f"data.shared_group.{split}": str(n) for split, n in rows.shared_group.items()})  # none: no tag
    return tags


def rows_line(task: TaskConfig, rows: TaskRows) -> str:
    """One console line: each split's size and the leaks removed."""
    dropped = {k: v for k, v in rows.dropped.items() if v}
    cut = (f"questions cut to {task.max_query_length}" if task.kind == "question-answering"
           else f"cut to {task.max_seq_len}")
    return (f"[data] {task.name}: {len(rows.train):,} train, {len(rows.select):,} {SELECT} (chooses), "
            + ", ".join(f"{len(r):,} {s}" for s, r in rows.evaluation.items()) + " (evaluates)"
            + (f"; {len(rows.labels)} labels {list(rows.labels)}" if rows.labels and not is_regression(task) else "")
            + (f"; removed as leaks: {dropped}" if dropped else "")
            + (f"; rejected: {rows.rejected}" if rows.rejected else "")
            + (f"; answers noted (questions kept): {rows.noted}" if rows.noted else "")
            + (f"; {cut} word pieces: {rows.truncated}" if rows.truncated else "")
            + shared_line(task, rows))


def shared_line(task: TaskConfig, rows: TaskRows) -> str:
    """The [data] line's warning for rows of given files that share a group with an evaluation row (a QA context's
    other questions, a premise's other hypotheses, a document's other sentences): trained or chosen on, they inflate
    the evaluation score, and only a carve keeps a group whole."""
    if not rows.shared_group:
        return ""
    what = ("context" if task.kind == "question-answering" else "document" if task.kind == "token-classification"
            else "first sentence (text_a)")
    counts = ", ".join(f"{n:,} {split}" for split, n in rows.shared_group.items())
    evaluation = "/".join(rows.evaluation)
    given = [split for split in ("dev", SELECT) if getattr(task, f"{split}_file")]
    return (f"; warning: sharing a {what} with {evaluation}: {counts} (given files are not regrouped: a model "
            f"trained or chosen on the rest of a {what} scores higher on its {evaluation} rows than on new text); "
            f"carve {' and '.join(given)} from train (no {', '.join(f'task.{s}_file' for s in given)}) or split "
            f"the files by {what}")


# -- features (Ray Data tasks) -------------------------------------------------------------------

def evaluation_task(task: dict) -> dict:
    """The task as its evaluation splits are featurized: token classification labels a word's first piece alone,
    whatever label_all_subwords trained with, so entities are scored by word (a five-piece word is one entity, not
    five) and every model is judged against the same gold."""
    return {**task, "label_all_subwords": False}


def featurize(batch, task: dict, tokenizer) -> dict[str, np.ndarray]:
    """`map_batches` function: one batch of rows -> its features. Runs as Ray Data tasks in Ray's pooled worker
    processes, which stay up between splits, jobs and trials; an actor pool would start (and import
    transformers in) a process of its own for every split. The fast tokenizer arrives deserialized with the
    task's arguments: no file is read per batch."""
    return Featurizer(task, tokenizer)(batch)


class Featurizer:
    """Rows -> model features for `task` with a loaded fast tokenizer. Keeps only tensor columns the model, the
    objective and the bookkeeping need."""

    def __init__(self, task: dict, tokenizer):
        from pipelines.tasks import conll_features, glue_features, squad_train_features

        self.task = task_config(task)
        self.tokenizer = load_tokenizer(tokenizer)
        t = self.task
        if t.kind == "question-answering":
            self.features = lambda rows: squad_train_features(rows, self.tokenizer, t.max_seq_len, t.doc_stride,
                                                              t.max_query_length)
        elif t.kind == "token-classification":
            self.features = lambda rows: conll_features(rows, self.tokenizer, t.max_seq_len, t.label_all_subwords,
                                                        tuple(t.labels))
        elif t.kind == "multi-label":  # labels: the row's label indices -> a (N, C) 0/1 float target
            def multi_hot(rows):
                out = glue_features([{**_texts(r), "label": 0} for r in rows], self.tokenizer, t.max_seq_len)
                out["labels"] = np.zeros((len(rows), len(t.labels)), dtype=np.float32)
                for i, r in enumerate(rows):
                    out["labels"][i, np.asarray(r["label"], dtype=np.int64)] = 1.0
                return out

            self.features = multi_hot
        else:  # classification (int labels), regression (float scores)
            regression = t.kind == "regression" or num_labels(t) == 1
            self.features = lambda rows: glue_features(
                [{**_texts(r), "label": float(r["label"]) if regression else int(r["label"])} for r in rows],
                self.tokenizer, t.max_seq_len)

    def __call__(self, batch) -> dict[str, np.ndarray]:
        rows = batch_rows(batch)
        if rows and set(rows[0]) == {"row"}:  # your own files' training rows: JSON, one per row (a StreamedSplit)
            rows = [{**json.loads(r["row"]), "row_index": 0} for r in rows]
        out = self.features(rows)
        row_index = np.asarray([int(r["row_index"]) for r in rows], dtype=np.int64)
        source = out.get("example_index", np.arange(len(rows)))  # SQuAD: the window's row in this batch
        window = np.zeros(len(source), dtype=np.int64)
        for i in range(1, len(source)):
            window[i] = window[i - 1] + 1 if source[i] == source[i - 1] else 0
        keep = (*MODEL_INPUTS, *TARGETS[self.task.kind])
        return {**{k: out[k] for k in keep}, "row_index": row_index[source], "window": window}


def _texts(row: dict) -> dict:
    """Arrow hands back numpy strings, and NaN or None for a column of None (single sentences)."""
    return {"text_a": str(row["text_a"]), "text_b": str(row["text_b"]) if isinstance(row.get("text_b"), str) else None}


def task_config(task) -> TaskConfig:
    """A TaskConfig from itself or its dict (as `asdict` or `vars` gives it)."""
    if isinstance(task, TaskConfig):
        return task
    from jobs.config.io import from_dict

    return from_dict(TaskConfig, {k: v if not hasattr(v, "__dataclass_fields__") else vars(v)
                                  for k, v in task.items()})


UNKNOWN_SAMPLE = 2000  # select rows whose [UNK] share note_truncated measures


def note_truncated(task: TaskConfig, rows: TaskRows, tokenizer_dir) -> None:
    """Count, in every split, the rows the features will cut to task.max_seq_len (reported, never silent); and say so
    when the tokenizer turns more than UNKNOWN_SHARE of the select split's word pieces into [UNK]: a vocabulary that
    does not cover the text trains a model on [UNK]s, and nothing fails."""
    tokenizer = load_tokenizer(str(tokenizer_dir))
    rows.truncated.update({split: n for split, r in rows.splits().items()  # a streamed split was counted as it passed
                           if isinstance(r, list) and (n := count_truncated(task, r, tokenizer))})
    share = unknown_share(rows.select[:UNKNOWN_SAMPLE], task.kind, tokenizer)
    if share > UNKNOWN_SHARE:
        print(f"[data] warning: the tokenizer of {tokenizer_dir} turns {share:.0%} of the {SELECT} split's word pieces "
              f"into {tokenizer.unk_token}: its vocabulary does not cover this text (another language or script?)",
              flush=True)


def count_truncated(task: TaskConfig, rows: list[dict], tokenizer) -> int:
    """Rows longer than task.max_seq_len word pieces, which the features cut to fit (QA: long contexts are spread
    over windows instead; questions over task.max_query_length pieces are cut)."""
    tok = load_tokenizer(tokenizer)
    return sum(count_too_long(rows[i:i + 2048], task.kind, tok, task.max_seq_len, task.max_query_length)
               for i in range(0, len(rows), 2048))


# -- metrics (select: rank 0; evaluation: jobs/registry/scorer.py) -----------------------------------------------------

def dev_metrics(task: TaskConfig, split: str, rows: list[dict], arrays: dict[str, np.ndarray],
                tokenizer=None) -> dict[str, float]:
    """The task's official metrics on one split, named `<split>/<metric>` (SQuAD v2: with the null threshold
    chosen on these rows: call it on the select split only; jobs/registry/scorer.py applies the chosen one to dev).

    arrays: the model outputs (logits / start_logits, end_logits) and the features' targets, one row per
    feature, sorted by (row_index, window).
    """
    from pipelines.tasks import glue_metrics, ner_metrics
    from pipelines.tasks.glue import GLUE_TASKS

    if task.name in GLUE_TASKS:
        out = glue_metrics(task.name, arrays["logits"], arrays["labels"])
    elif task.name == "pkgdocs":
        out = {"accuracy": float((arrays["logits"].argmax(-1) == arrays["labels"]).mean())}
    elif task.kind in SEQUENCE_KINDS:  # your own data
        from pipelines.tasks.labels import file_metrics

        logits = arrays["logits"][:, 0] if task.kind == "regression" else arrays["logits"]
        out = file_metrics(task.kind, logits, arrays["labels"], tuple(task.labels), task.multi_label_threshold)
    elif task.kind == "token-classification":
        gold, pred = tagged_words(task, rows, arrays["logits"], arrays["labels"], tokenizer)
        out = ner_metrics(gold, pred, scheme=task.iob_scheme) if is_iob(task.labels) else tag_metrics(gold, pred)
    else:
        out = _squad_metrics(task, rows, arrays, tokenizer)
    return {f"{split}/{k}": float(v) for k, v in out.items()}


def tagged_words(task: TaskConfig, rows: list[dict], logits, labels, tokenizer):
    """(gold, predicted) tags of every word of `rows`, as the metrics read them: a word the features cut off
    (task.max_seq_len) or hold no piece of counts as untagged ("O": no entity, what seqeval reads even where the
    labels lack it, B-W/I-W segmentation; "" for word tags such as part of speech), so its gold entity is a miss.
    `tokenizer`: the model's, to find each word's first piece again (pipelines.tasks.conll)."""
    from pipelines.tasks.conll import word_tags

    if tokenizer is None:
        raise ValueError("token classification's metrics need the model's tokenizer to map pieces back to words")
    return word_tags(rows, tokenizer, task.max_seq_len, logits, labels, tuple(task.labels),
                     unlabeled="O" if "O" in task.labels or is_iob(task.labels) else "")


def is_iob(labels) -> bool:
    """Entity tags (O, B-X, I-X; IOBES's E-, S-, BMES's M-; BILOU's L-, U-): by entity. Other word tags by word."""
    return all(tag == "O" or tag[:2] in ("B-", "I-", "E-", "S-", "M-", "L-", "U-") for tag in labels)


def tag_metrics(gold: list[list[str]], pred: list[list[str]]) -> dict[str, float]:
    """Word tags that are not entities: every word counts; "f1" is the macro F1 over the tags the gold holds (as
    labels.file_metrics' macro_f1: the same tags for every model)."""
    from sklearn.metrics import f1_score

    flat_gold, flat_pred = [g for s in gold for g in s], [q for s in pred for q in s]
    return {"accuracy": float(np.mean([g == q for g, q in zip(flat_gold, flat_pred)])) if flat_gold else 0.0,
            "f1": float(f1_score(flat_gold, flat_pred, labels=sorted(set(flat_gold)) or None, average="macro",
                                 zero_division=0))}


def _squad_metrics(task: TaskConfig, rows: list[dict], arrays: dict, tokenizer) -> dict:
    from pipelines.tasks import squad_eval_features, squad_metrics

    features = squad_eval_features(rows, tokenizer, task.max_seq_len, task.doc_stride, task.max_query_length)
    predictions, threshold = squad_predictions(task, rows, features, arrays["start_logits"], arrays["end_logits"])
    out = squad_metrics(predictions, rows, version_2=task.version_2)  # v1.1's rules for a v1 task
    if task.version_2:
        out["null_threshold"] = threshold  # chosen on the select split: the job writes it into the model's config
    return out


def squad_predictions(task: TaskConfig, rows: list[dict], features: dict, start_logits, end_logits,
                      threshold: float | None = None) -> tuple[dict[str, str], float]:
    """({question id: answer text, "" for no answer}, the null threshold): the n-best spans of every window,
    and for SQuAD v2 the no-answer threshold given, or (None) the one chosen on these rows."""
    from pipelines.tasks import best_null_threshold, best_spans

    if len(features["example_id"]) != len(start_logits):
        raise RuntimeError(f"{len(start_logits)} predicted windows for {len(features['example_id'])} "
                           "eval windows: the eval features and the predictions are out of step")
    spans = best_spans(rows, features, start_logits, end_logits, task.n_best, task.max_answer_length)
    if not task.version_2:
        threshold = float("inf")
    elif threshold is None:  # chosen for the main metric: exact match's best threshold is not F1's
        threshold = best_null_threshold(rows, spans, "exact" if metric_name(task) == "exact" else "f1")
    return {k: "" if null - score > threshold else text for k, (text, score, null, _) in spans.items()}, threshold
