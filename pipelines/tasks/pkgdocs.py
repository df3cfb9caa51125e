"""pkgdocs: "which package's documentation does this paragraph come from?" -- a real-text task with no download.

Built from the corpus that `make quickstart` harvests (pipelines/harvest.py: one document per README
or per module's docstrings). A document's label is its top-level package (`site:mlflow/store/x.py`
-> mlflow, `stdlib:email/parser.py` -> email, a README -> its distribution); the task keeps the
`num_labels` packages with the most documents (ties by name), and every paragraph of a kept
document is one example (at most `max_paragraphs_per_document`, so one long module cannot
dominate its class).

The split is BY DOCUMENT: a document's paragraphs are all in train or all in dev, so dev measures
recognising a package from modules never seen, not recalling a paragraph's neighbours. Which
documents go to dev is fixed by a hash of their source name, so the task is the same on every
machine with the same installed packages. Rows have the GLUE shape (idx, text_a, text_b=None,
label) and go through `glue_features`.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
from pathlib import Path

from pipelines.tasks.common import TaskDataError, TaskSplit

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


def _is_dev(url: str, dev_fraction: float) -> bool:
    h = int.from_bytes(hashlib.sha256(url.encode()).digest()[:8], "big")
    return h / 2**64 < dev_fraction


def load_pkgdocs(corpus_dir: str | os.PathLike, num_labels: int = 4, dev_fraction: float = 0.25,
                 min_documents: int = 4, max_paragraphs_per_document: int = 10,
                 min_words: int = 12, max_per_label: dict | None = None,
                 ) -> tuple[dict[str, TaskSplit], tuple[str, ...]]:
    """({"train": TaskSplit, "dev": TaskSplit}, label names in class-index order).

    max_per_label caps the examples of each class per split ({"train": 120, "dev": 40}; 0 or absent =
    all), keeping the first in document order: quick runs stay balanced and deterministic.
    """
    caps = max_per_label or {}
    docs = _documents(corpus_dir)
    by_label = collections.defaultdict(list)
    for doc in docs:
        by_label[package_of(doc)].append(doc)
    eligible = [(len(d), name) for name, d in by_label.items() if len(d) >= min_documents]
    if len(eligible) < num_labels:
        raise TaskDataError(f"{corpus_dir}: only {len(eligible)} packages have >= {min_documents} documents; "
                            f"need {num_labels} (harvest more text, or lower num_labels)")
    labels = tuple(sorted(name for _, name in sorted(eligible, key=lambda x: (-x[0], x[1]))[:num_labels]))
    splits = {"train": TaskSplit([], str(corpus_dir)), "dev": TaskSplit([], str(corpus_dir))}
    for label, name in enumerate(labels):
        group = by_label[name]
        dev = {d["url"] for d in group if _is_dev(d["url"], dev_fraction)}
        if not dev or len(dev) == len(group):  # each class needs documents on both sides
            ranked = sorted(group, key=lambda d: hashlib.sha256(d["url"].encode()).hexdigest())
            dev = {d["url"] for d in ranked[:max(1, round(dev_fraction * len(group)))]}
        kept = collections.Counter()
        for doc in group:
            which = "dev" if doc["url"] in dev else "train"
            split = splits[which]
            paragraphs = [p for p in doc["text"].split("\n\n") if len(p.split()) >= min_words]
            for p in paragraphs[:max_paragraphs_per_document]:
                if caps.get(which) and kept[which] >= caps[which]:
                    break
                kept[which] += 1
                split.rows.append({"idx": len(split.rows), "text_a": p, "text_b": None, "label": label,
                                   "document": doc["url"]})
    return splits, labels
