"""A fine-tuned model folder on a task's evaluation rows, scored per example so two models can be compared
on resamples of the same rows (jobs/promote.py's paired bootstrap), and with every official metric (the
fine-tuning job and the sweep score their chosen model here, once, on the evaluation split: the numbers of the
model card and the registered version).

The model is loaded with transformers' own class for its task (what a user gets from the registry), the
rows are featurized with the model's own tokenizer (two models with different vocabularies are compared
on the same text), and the main metric is the one fine-tuning selects on (jobs/loops/ft_tasks.metric_name), here on
the evaluation split:
  classification   the task's official metric (GLUE score, pkgdocs accuracy) recomputed on each resample
  NER              entity-level micro F1 from per-sentence (true positive, predicted, gold) entity counts
  SQuAD            the mean of per-question F1 (percent); SQuAD v2's null threshold is the one chosen on the select
                   split during fine-tuning (`null_threshold` in the model's config.json), never tuned on these rows

The bootstrap resamples groups, not rows: rows that share a SQuAD context, a sentence pair's first sentence or a
document are correlated (a model that misreads a context misses all its questions), and resampling them one by one
makes the interval too narrow and promotes on noise. The groups are those the carve keeps whole
(pipelines/tasks/roles.group_key, decided on the evaluation rows); where every row is its own group the resamples
are exactly a row bootstrap's for the same seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from jobs.loops import ft_tasks
from jobs.config.finetune import TaskConfig
from pipelines.tasks.roles import group_key


@dataclass
class Scores:
    metric: str  # e.g. "dev/accuracy"; higher is better
    value: float  # on every row
    n: int  # rows (sentences, questions)
    on: Callable[[np.ndarray], float]  # the metric on a resample: row indices, repeats allowed
    metrics: dict = field(default_factory=dict)  # every official metric on every row, "<split>/<name>"
    groups: np.ndarray | None = None  # per row, its group (any labels): resampled whole; None: each row its own
    nonfinite: int = 0  # rows with a NaN or inf among the model's outputs: no evidence (refuse_nonfinite)

    def __post_init__(self):
        labels = np.arange(self.n) if self.groups is None else np.asarray(self.groups)
        if labels.shape != (self.n,):
            raise ValueError(f"groups must label each of the {self.n} rows once, got shape {labels.shape}")
        _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        self.groups = rank[inverse.reshape(-1)]  # numbered by first row: singletons are 0, 1, ..., n - 1 in row order

    @property
    def n_groups(self) -> int:
        """How many groups the bootstrap resamples (n when every row is its own)."""
        return int(self.groups.max()) + 1 if self.n else 0


def evaluate_model(model_dir: Path, task: TaskConfig, evaluation: dict[str, list[dict]], batch_size: int = 64
                   ) -> dict[str, float]:
    """Every official metric of the model in `model_dir` on each evaluation split ({"dev/accuracy": ...})."""
    out: dict[str, float] = {}
    for split, rows in evaluation.items():
        out.update(score(model_dir, task, split, rows, batch_size).metrics)
    return out


def load_model(model_dir: Path, task: TaskConfig):
    import transformers

    from jobs.inference.serving import TASK_MODELS

    model = getattr(transformers, TASK_MODELS[ft_tasks.HF_TASK[task.kind]]).from_pretrained(model_dir)
    return model.to("cuda" if torch.cuda.is_available() else "cpu").eval()  # a GPU driver scores on its GPU


def score(model_dir: Path, task: TaskConfig, split: str, rows: list[dict], batch_size: int = 64) -> Scores:
    """The model in `model_dir` (HF folder with its tokenizer) on `rows` of `split`, each row in its group."""
    from pipelines.tasks.common import load_tokenizer

    model, tokenizer = load_model(model_dir, task), load_tokenizer(str(model_dir))
    metric, groups = f"{split}/{ft_tasks.metric_name(task)}", row_groups(rows, task.kind)
    if task.kind == "question-answering":
        return _squad(model, tokenizer, task, split, rows, batch_size, groups)
    feats = ft_tasks.Featurizer(ft_tasks.evaluation_task(asdict(task)), tokenizer)(rows)
    if not np.array_equal(feats["row_index"], [r["row_index"] for r in rows]):
        raise RuntimeError("features out of step with the evaluation rows (one feature per row expected)")
    outputs = [_forward(model, {k: v[i:i + batch_size] for k, v in feats.items()})
               for i in range(0, len(rows), batch_size)]
    if task.kind == "token-classification":
        s = _ner(task, split, outputs, feats["labels"], batch_size, groups, rows, tokenizer)
        s.nonfinite = int(sum(o["nonfinite"].sum() for o in outputs))  # one feature per sentence
        return s
    logits, labels = np.concatenate([o["logits"] for o in outputs]), feats["labels"]

    def on(idx: np.ndarray) -> float:
        return ft_tasks.dev_metrics(task, split, [], {"logits": logits[idx], "labels": labels[idx]})[metric]

    every = ft_tasks.dev_metrics(task, split, [], {"logits": logits, "labels": labels})
    bad = int(sum(o["nonfinite"].sum() for o in outputs))  # one feature per row
    return Scores(metric, every[metric], len(rows), on, every, groups, bad)


def row_groups(rows: list[dict], kind: str) -> np.ndarray:
    """Each row's group, numbered in order of first appearance: the unit the carve keeps whole (a SQuAD context,
    a pair's shared first sentence, else the row's own input), and a document wherever rows share one: the carve
    needs ten documents to split by them (roles.MIN_DOCUMENT_GROUPS), but the five documents of a carved dev split
    are still five correlated groups, not their sentences. One document (a CoNLL file without -DOCSTART-: every
    sentence in "<file>:doc0") is no grouping at all, and the bootstrap needs two: its rows group as the carve
    groups them, by sentence."""
    docs = [r.get("document") for r in rows]
    if rows and None not in docs and 1 < len({str(d) for d in docs}) < len(docs):
        key = lambda r: f"document:{r['document']}"  # noqa: E731
    else:
        key = group_key(rows, kind)
    ids: dict = {}
    return np.array([ids.setdefault(key(r), len(ids)) for r in rows], dtype=np.int64)


@torch.no_grad()
def _forward(model, batch: dict) -> dict[str, np.ndarray]:
    """One batch, padded only to its longest row (the fine-tuning collator's dynamic padding)."""
    from jobs.loops.finetune import collate

    inputs = {k: v.to(model.device) for k, v in collate({k: batch[k] for k in ft_tasks.MODEL_INPUTS}).items()}
    out = model(**inputs)
    arrays = {k: getattr(out, k).float().cpu().numpy() for k in ("logits", "start_logits", "end_logits")
              if getattr(out, k, None) is not None}
    return {**arrays, "nonfinite": _nonfinite(arrays, inputs["attention_mask"].cpu().numpy().astype(bool))}


def _nonfinite(outputs: dict[str, np.ndarray], mask: np.ndarray) -> np.ndarray:
    """Per feature of a batch, whether an output the metrics read is NaN or inf: any of a row's logits (B, C), or
    at a token of its window (B, T) / (B, T, C), not at its padding."""
    bad = np.zeros(len(mask), dtype=bool)
    for k, v in outputs.items():
        v = ~np.isfinite(v)
        if k != "logits" or v.ndim == 3:  # per token: QA's start/end logits, a tagger's logits
            v = v.reshape(*v.shape[:2], -1).any(-1) & mask[:, :v.shape[1]]
        bad |= v.reshape(len(v), -1).any(1)
    return bad


def _ner(task: TaskConfig, split: str, outputs: list[dict], labels: np.ndarray, batch_size: int,
         groups: np.ndarray, rows: list[dict], tokenizer) -> Scores:
    from pipelines.tasks import ner_metrics

    gold, pred = [], []
    for i, o in enumerate(outputs):  # every word of each sentence: those the features cut off count as untagged
        part = slice(i * batch_size, (i + 1) * batch_size)
        g, p = ft_tasks.tagged_words(task, rows[part], o["logits"], labels[part, :o["logits"].shape[1]], tokenizer)
        gold += g
        pred += p
    metric = f"{split}/{ft_tasks.metric_name(task)}"
    if not ft_tasks.is_iob(task.labels):  # word tags: recomputed on each resample of sentences
        every = {f"{split}/{k}": v for k, v in ft_tasks.tag_metrics(gold, pred).items()}

        def on_tags(idx: np.ndarray) -> float:
            m = ft_tasks.tag_metrics([gold[i] for i in idx], [pred[i] for i in idx])
            return m[metric.split("/", 1)[1]]

        return Scores(metric, every[metric], len(gold), on_tags, every, groups)
    counts = entity_counts(gold, pred, task.iob_scheme)
    words = np.array([(sum(a == b for a, b in zip(g, p)), len(g)) for g, p in zip(gold, pred)],
                     dtype=np.int64).reshape(-1, 2)

    def on(idx: np.ndarray) -> float:  # the task's metric: entity F1, or word accuracy
        if metric.endswith("/accuracy"):
            right, total = words[idx].sum(0)
            return float(right / total) if total else 0.0
        tp, n_pred, n_gold = counts[idx].sum(0)
        return float(2 * tp / (n_pred + n_gold)) if n_pred + n_gold else 0.0

    every = {f"{split}/{k}": float(v) for k, v in ner_metrics(gold, pred, scheme=task.iob_scheme).items()}
    return Scores(metric, on(np.arange(len(gold))), len(gold), on, every, groups)


def entity_counts(gold: list[list[str]], pred: list[list[str]], scheme: str | None) -> np.ndarray:
    """(sentences, 3): exact-match entities, predicted entities, gold entities per sentence, read as
    pipelines.tasks.ner_metrics reads them (seqeval strict mode for IOB2, conlleval's reading otherwise); their sums
    give its micro F1."""
    from pipelines.tasks.conll import as_iobes, strict_scheme

    gold, pred = as_iobes(gold), as_iobes(pred)
    scheme = strict_scheme(scheme, gold, pred)
    if scheme:
        from seqeval import scheme as schemes
        from seqeval.scheme import Entities

        def entities(seqs):
            return [{e.to_tuple()[1:] for e in sent} for sent in Entities(seqs, getattr(schemes, scheme)).entities]
    else:
        from seqeval.metrics.sequence_labeling import get_entities

        def entities(seqs):
            return [set(get_entities(s)) for s in seqs]

    g, p = entities(gold), entities(pred)
    return np.array([(len(a & b), len(b), len(a)) for a, b in zip(g, p)], dtype=np.int64).reshape(-1, 3)


def _squad(model, tokenizer, task: TaskConfig, split: str, rows: list[dict], batch_size: int,
           groups: np.ndarray) -> Scores:
    from pipelines.tasks import squad_eval_features, squad_metrics
    from pipelines.tasks.squad import example_scores

    feats = squad_eval_features(rows, tokenizer, task.max_seq_len, task.doc_stride, task.max_query_length)
    n, width = len(feats["input_ids"]), feats["input_ids"].shape[1]
    starts, ends, bad = [], [], set()
    for i in range(0, n, batch_size):
        out = _forward(model, {k: feats[k][i:i + batch_size] for k in ft_tasks.MODEL_INPUTS})
        bad.update(feats["example_id"][i + j] for j in np.flatnonzero(out["nonfinite"]))  # a question, once
        pad = [(0, 0), (0, width - out["start_logits"].shape[1])]
        starts.append(np.pad(out["start_logits"], pad, constant_values=-1e4))
        ends.append(np.pad(out["end_logits"], pad, constant_values=-1e4))
    # SQuAD v2: the threshold chosen on the select split (written into the model's config by the job); a model
    # without one predicts "no answer" where the null score beats the best span (threshold 0)
    threshold = float(getattr(model.config, "null_threshold", 0.0)) if task.version_2 else None
    predictions, threshold = ft_tasks.squad_predictions(task, rows, feats, np.concatenate(starts),
                                                        np.concatenate(ends), threshold)
    metric = f"{split}/{ft_tasks.metric_name(task)}"
    which = 0 if metric.endswith("/exact") else 1  # example_scores: (exact, f1) of each question
    scores = np.array([example_scores(row, predictions.get(row["id"]), task.version_2)[which] for row in rows]) * 100.0

    def on(idx: np.ndarray) -> float:
        return float(scores[idx].mean())

    every = {f"{split}/{k}": float(v) for k, v in squad_metrics(predictions, rows, task.version_2).items()}
    if task.version_2:
        every[f"{split}/null_threshold"] = threshold
    return Scores(metric, on(np.arange(len(rows))), len(rows), on, every, groups, len(bad))


def resamples(scores: Scores, samples: int, seed: int) -> Iterator[np.ndarray]:
    """`samples` bootstrap resamples of the rows of `scores` (row indices, repeats allowed): each draws as many
    groups as there are, with replacement, and takes every row of each group drawn. Groups are numbered by their
    first row, so where every row is its own group a resample is the row bootstrap's `rng.integers(0, n, n)`.
    Fewer than two groups are refused: every resample would be all the rows, and the bound the point value."""
    if scores.n_groups < 2:
        raise ValueError(f"{scores.metric}: the {scores.n} evaluation rows form {scores.n_groups} group(s) (rows "
                         "sharing a context, a first sentence or a document are one); a bootstrap needs at least 2")
    rng = np.random.default_rng(seed)
    order = np.argsort(scores.groups, kind="stable")  # the rows of group 0, then of group 1, ...
    sizes = np.bincount(scores.groups, minlength=scores.n_groups)
    starts = np.cumsum(sizes) - sizes
    for _ in range(samples):
        drawn = rng.integers(0, scores.n_groups, scores.n_groups)
        counts = sizes[drawn]
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)  # a row's place in its group
        yield order[np.repeat(starts[drawn], counts) + within]


def lower_bound(scores: Scores, samples: int, confidence: float, seed: int) -> float:
    """The one-sided lower confidence bound (level `confidence`) on one model's metric: the (1 - confidence)
    quantile of its value over `samples` resamples of the groups (what a first champion is known to score at
    least)."""
    values = _finite(scores, [scores.on(idx) for idx in resamples(scores, samples, seed)])
    return float(np.quantile(values, 1 - confidence))


def refuse_nonfinite(scores: Scores, model: str, then: str) -> None:
    """Refuse a `model` ("v3 (champion)") with a NaN or inf among its outputs on the evaluation rows (diverged, or
    overflowed in half precision), saying what happens `then`: argmax reads such a row as class 0 (a model with no
    finite output was promoted on the class-0 share of the gold labels) and a correlation over it is NaN (the
    bootstrap would blame the data). Called by promotion's judging (jobs/promote.py), not by `score`: the
    fine-tuning job's metrics stay as computed."""
    if scores.nonfinite:
        raise ValueError(f"{model}: its outputs are not finite (NaN or inf) on {scores.nonfinite} of the {scores.n} "
                         f"evaluation rows, so its {scores.metric} is no evidence (a diverged or overflowed model): "
                         f"{then}")


def _finite(scores: Scores, values: list[float]) -> np.ndarray:
    """`values` of the resamples, refused when any is not a number: a correlation over a resample whose gold scores
    are all equal is undefined, and a NaN bound would keep the champion with NaN as its evidence."""
    values = np.asarray(values, dtype=np.float64)
    bad = int((~np.isfinite(values)).sum())
    if bad:
        raise ValueError(f"{scores.metric}: {bad} of {len(values)} bootstrap resamples of the {scores.n} evaluation "
                         f"rows ({scores.n_groups} groups) have no value (a correlation over rows whose gold scores "
                         "are all equal is undefined): evaluate on more rows")
    return values


def paired_bootstrap(candidate: Scores, champion: Scores, samples: int, confidence: float, seed: int) -> dict:
    """Resample the groups of rows with replacement `samples` times and score both models on the same resample
    (paired: a row both models get right, or both wrong, moves neither side). Returns
      delta        candidate - champion on every row
      lower_bound  the one-sided lower confidence bound on delta at level `confidence`: the (1 - confidence)
                   quantile of the resampled deltas; the gate promotes only when it is above min_delta
      p_better     the share of resamples where the candidate scores higher (reported, not decided on)"""
    if candidate.n != champion.n:
        raise ValueError(f"the models were scored on different rows ({candidate.n} vs {champion.n})")
    if not np.array_equal(candidate.groups, champion.groups):
        raise ValueError(f"the models' rows are grouped differently ({candidate.n_groups} vs {champion.n_groups} "
                         "groups): not the same evaluation rows")
    deltas = _finite(candidate, [candidate.on(idx) - champion.on(idx) for idx in resamples(candidate, samples, seed)])
    return {"delta": candidate.value - champion.value, "lower_bound": float(np.quantile(deltas, 1 - confidence)),
            "p_better": float((deltas > 0).mean())}
