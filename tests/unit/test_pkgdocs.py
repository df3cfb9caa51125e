"""pkgdocs: labels are the packages with the most documents; the split is by document and deterministic."""

import json

import pytest

from pipelines.tasks import TaskDataError
from pipelines.tasks.pkgdocs import load_pkgdocs, package_of

SENTENCE = "This paragraph explains how the {} package handles one more thing for its users, in detail."


def write_corpus(path, counts):
    docs = []
    for package, n in counts.items():
        for i in range(n):
            text = "\n\n".join(SENTENCE.format(package) + f" Part {j}." for j in range(3))
            docs.append({"id": str(len(docs)), "url": f"site:{package}/module_{i}.py", "title": f"module_{i}",
                         "text": text})
    docs.append({"id": str(len(docs)), "url": "readme:solo-1.0.dist-info/METADATA", "title": "solo",
                 "text": SENTENCE.format("solo")})
    path.mkdir()
    with open(path / "installed-docs-00.jsonl", "w") as f:
        f.writelines(json.dumps(d) + "\n" for d in docs)
    return path


def test_labels_split_three_ways_by_document_and_deterministic(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"alpha": 12, "beta": 9, "gamma": 8, "delta": 3})
    splits, labels = load_pkgdocs(corpus, num_labels=3, min_documents=4)
    assert labels == ("alpha", "beta", "gamma")  # delta has too few documents; class order is by name
    docs = {s: {r["document"] for r in splits[s]} for s in ("train", "select", "dev")}
    assert all(docs.values())
    assert not docs["train"] & docs["dev"] and not docs["train"] & docs["select"] and not docs["select"] & docs["dev"]
    for label in range(3):  # every class is in every split
        assert all(any(r["label"] == label for r in splits[s]) for s in ("train", "select", "dev"))
    assert all(len([r for r in splits[s] if r["document"] == d]) == 3 for s in splits for d in {r["document"] for r in splits[s]})
    again, _ = load_pkgdocs(corpus, num_labels=3, min_documents=4)
    assert all(again[s].rows == splits[s].rows for s in splits)
    capped, _ = load_pkgdocs(corpus, num_labels=3, min_documents=4,
                             max_per_label={"train": 5, "select": 1, "dev": 2})
    for label in range(3):
        assert sum(r["label"] == label for r in capped["train"]) == 5
        assert sum(r["label"] == label for r in capped["select"]) == 1
        assert sum(r["label"] == label for r in capped["dev"]) <= 2


def test_package_names_and_errors(tmp_path):
    assert package_of({"url": "site:mlflow/store/db.py", "title": "db"}) == "mlflow"
    assert package_of({"url": "stdlib:turtle.py", "title": "turtle"}) == "turtle"
    assert package_of({"url": "readme:ray-2.60.dist-info/METADATA", "title": "ray"}) == "ray"
    corpus = write_corpus(tmp_path / "corpus", {"alpha": 5})
    with pytest.raises(TaskDataError, match="only 1 packages have >= 4 documents; need 2"):
        load_pkgdocs(corpus, num_labels=2)
    with pytest.raises(FileNotFoundError, match="no harvested corpus"):
        load_pkgdocs(tmp_path)


def test_short_paragraphs_are_dropped_and_a_long_document_is_capped(tmp_path):
    """A module of 40 documented paragraphs would outweigh its package's others; "See also x." is no example."""
    docs, long = [], [SENTENCE.format("alpha") + f" Part {j}." for j in range(7)]
    for package in ("alpha", "beta"):
        for i in range(6):
            text = "\n\n".join(["See the parser.", "Returns the number of items."] + long)  # 3 and 5 words first
            docs.append({"id": str(len(docs)), "url": f"site:{package}/m{i}.py", "title": f"m{i}", "text": text})
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "installed-docs-00.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    splits, _ = load_pkgdocs(tmp_path / "c", num_labels=2, max_paragraphs_per_document=4, min_words=12)
    rows = [r for s in splits.values() for r in s.rows]
    assert {r["text_a"] for r in rows} == set(long[:4])  # the first four long ones; no short one
    assert all(sum(r["document"] == d["url"] for r in rows) == 4 for d in docs)
