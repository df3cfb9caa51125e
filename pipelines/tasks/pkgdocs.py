"""pkgdocs: "which package's documentation does this paragraph come from?" -- a real-text task with no download.

Built from the corpus that `make quickstart` harvests (pipelines/harvest.py: one document per README
or per module's docstrings). A document's label is its top-level package (`site:mlflow/store/x.py`
-> mlflow, `stdlib:email/parser.py` -> email, a README -> its distribution); the task keeps the
`num_labels` packages with the most documents (ties by name), and every paragraph of a kept
document is one example (at most `max_paragraphs_per_document`, so one long module cannot
dominate its class).

The splits are BY DOCUMENT: a document's paragraphs are all in train, all in select or all in dev, so
select and dev measure recognising a package from modules never seen, not recalling a paragraph's
neighbours. Which documents go where is fixed by a hash of their source name, so the task is the same
on every machine with the same installed packages. Rows have the GLUE shape (idx, text_a, text_b=None,
label) and go through `glue_features`.
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

from pipelines.tasks.common import TaskDataError, TaskSplit
from pipelines.tasks.roles import unit_hash  # a document's stable place in [0, 1)

METRICS = ("accuracy",)


def package_of(doc: dict) -> str:
    """The label of a harvested document: its distribution (README) or top-level import package."""
    kind, _, path = doc["url"].partition(":")
    if kind == "readme":
        return doc["title"]
    return path.split("/")[0].removesuffix(".py")


def _documents(corpus_dir: str | os.PathLike) -> list[dict]:
    files = sorted(Path(corpus_dir).glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no harvested corpus (*.jsonl) in {corpus_dir}; harvest it first "
                                "(pipelines.harvest.harvest_installed_docs)")
    docs = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines() if line]
    return sorted(docs, key=lambda d: int(d["id"]))


def load_pkgdocs(corpus_dir: str | os.PathLike, num_labels: int = 4, dev_fraction: float = 0.25,
                 select_fraction: float = 0.15, min_documents: int = 4, max_paragraphs_per_document: int = 10,
                 min_words: int = 12, max_per_label: dict | None = None,
                 ) -> tuple[dict[str, TaskSplit], tuple[str, ...]]:
    """({"train", "select", "dev": TaskSplit}, label names in class-index order).

    Three splits BY DOCUMENT (pipelines/tasks/roles.py: select makes the choices, dev judges): a document's
    place in [0, 1) (a hash of its source name) below `dev_fraction` puts it in dev, below `dev_fraction +
    select_fraction` in select, else in train. Each class keeps at least one document in each split.
    max_per_label caps the examples of each class per split ({"train": 120, "select": 40, "dev": 40}; 0 or
    absent = all), keeping the first in document order: quick runs stay balanced and deterministic.
    """
    caps = max_per_label or {}
    docs = _documents(corpus_dir)
    by_label = collections.defaultdict(list)
    for doc in docs:
        by_label[package_of(doc)].append(doc)
    need = max(min_documents, 3)  # a document for each split at least
    eligible = [(len(d), name) for name, d in by_label.items() if len(d) >= need]
    if len(eligible) < num_labels:
        raise TaskDataError(f"{corpus_dir}: only {len(eligible)} packages have >= {need} documents; "
                            f"need {num_labels} (harvest more text, or lower num_labels)")
    labels = tuple(sorted(name for _, name in sorted(eligible, key=lambda x: (-x[0], x[1]))[:num_labels]))
    splits = {name: TaskSplit([], str(corpus_dir)) for name in ("train", "select", "dev")}
    bounds = (("dev", dev_fraction), ("select", dev_fraction + select_fraction))
    for label, name in enumerate(labels):
        group = sorted(by_label[name], key=lambda d: (unit_hash(d["url"]), d["url"]))  # in place order
        role = {d["url"]: next((s for s, bound in bounds if unit_hash(d["url"]) < bound), "train") for d in group}
        for split in ("dev", "select", "train"):  # a class lacking a split takes a document from its largest
            counts = collections.Counter(role.values())
            if not counts[split]:
                donor = max(counts, key=lambda s: (counts[s], s))
                urls = [d["url"] for d in group if role[d["url"]] == donor]
                role[urls[-1] if split == "train" else urls[0]] = split
        kept = collections.Counter()
        for doc in by_label[name]:  # document order
            which = role[doc["url"]]
            split = splits[which]
            paragraphs = [p for p in doc["text"].split("\n\n") if len(p.split()) >= min_words]
            for p in paragraphs[:max_paragraphs_per_document]:
                if caps.get(which) and kept[which] >= caps[which]:
                    break
                kept[which] += 1
                split.rows.append({"idx": len(split.rows), "text_a": p, "text_b": None, "label": label,
                                   "document": doc["url"]})
    return splits, labels
