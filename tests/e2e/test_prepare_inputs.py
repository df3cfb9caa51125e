"""prepare() on awkward inputs: file names of any characters (issue 8), work units of any size."""

from __future__ import annotations

import json
import os
import random

import pytest

from pipelines.prepare import prepare
from tests.e2e.test_prepare import config, sentence

ODD_NAMES = ["Dpkg::Source.jsonl", "notes#2.jsonl", "why?.jsonl", "star*.jsonl", "with space.jsonl",
             "Grüße aus Köln.jsonl", "日本語.jsonl", "a::b#c?d*e f.jsonl"]


def write_jsonl(path, num_docs: int, rng: random.Random) -> None:
    with open(path, "w") as out:
        for _ in range(num_docs):
            out.write(json.dumps({"text": " ".join(sentence(rng) for _ in range(rng.randint(8, 30)))}) + "\n")


@pytest.mark.slow
def test_file_names_with_any_characters_prepare_with_every_document_read(ray_tmp):
    corpus = ray_tmp / "odd corpus"
    corpus.mkdir()
    rng = random.Random(8)
    for name in ODD_NAMES:
        write_jsonl(corpus / name, 20, rng)
    prepared = prepare(config(str(corpus), ray_tmp / "out", num_workers=2))
    counts = prepared.manifest["counts"]
    assert counts["documents_read"] == counts["documents_kept"] == 20 * len(ODD_NAMES)
    assert prepared.manifest["rejects"] == {}
    assert sorted(os.path.basename(f["path"]) for f in prepared.manifest["inputs"]["files"]) == sorted(ODD_NAMES)
