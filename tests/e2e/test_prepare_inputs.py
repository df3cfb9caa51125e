"""prepare() on awkward inputs: file names of any characters (issue 8), work units of any size."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from pipelines.config import TokenizerConfig
from pipelines.layout import ShardLayout, fingerprint_inputs
from pipelines.prepare import prepare
from pipelines.tokenizer_sample import tokenizer_sample
from pipelines.source_files import resolve_sources
from pipelines.sources import iter_documents
from pipelines.units import plan_units
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


def write_multistream_dump(path, n_pages: int, rng: random.Random) -> int:
    """A MediaWiki dump of `n_pages` articles of made-up words (little redundancy: about 1.6x smaller in bz2),
    compressed as pbzip2 does: one bz2 stream per 256 KiB of XML, cut wherever that falls."""
    import bz2
    import string

    def word():
        return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))

    pages = ['<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">\n']
    for i in range(1, n_pages + 1):
        text = " ".join(" ".join(word() for _ in range(12)).capitalize() + "." for _ in range(80))
        pages.append(f"<page><title>P{i}</title><ns>0</ns><id>{i}</id><revision><id>{i}0</id>"
                     f'<text xml:space="preserve">{text}</text></revision></page>\n')
    xml = ("".join(pages) + "</mediawiki>\n").encode()
    path.write_bytes(b"".join(bz2.compress(xml[i:i + (256 << 10)]) for i in range(0, len(xml), 256 << 10)))
    return n_pages


@pytest.mark.slow
def test_work_unit_size_does_not_change_the_prepared_set(ray_tmp):
    """Files grouped, and big JSONL / text files and a multistream bz2 dump (cut as pbzip2 cuts, through
    pages) split into 1 MiB ranges, give the same shards and manifest as one unit for everything: the work
    units only spread the work. The tokenizer is trained here: its sample, and so its files, are the same too."""
    corpus = ray_tmp / "mixed"
    corpus.mkdir()
    rng = random.Random(9)
    for i in range(30):
        write_jsonl(corpus / f"small-{i:02d}.jsonl", 5, rng)
    write_jsonl(corpus / "big.jsonl", 2200, rng)
    with open(corpus / "big.jsonl", "a") as out:  # duplicates of a small file's documents
        out.write((corpus / "small-03.jsonl").read_text())
    with open(corpus / "big.txt", "w") as out:
        for _ in range(5000):
            out.write("\n".join(sentence(rng) for _ in range(rng.randint(3, 12))) + "\n\n")
    pages = write_multistream_dump(corpus / "wiki.xml.bz2", 700, rng)
    sizes = {p.name: p.stat().st_size for p in corpus.iterdir()}
    assert sizes["big.jsonl"] > 2 << 20 and sizes["big.txt"] > 2 << 20 and sizes["wiki.xml.bz2"] > 2 << 20
    sizes = (1 << 20, 1 << 30)
    trained = TokenizerConfig(sample_documents=300)  # trained on a sample: the same whatever the units, and so is it
    one, two = [prepare(config(str(corpus), ray_tmp / f"units-{size}", work_unit_bytes=size, dupe_factor=1,
                               tokenizer=trained)) for size in sizes]
    samples = []
    for size in sizes:
        cfg = config(str(corpus), ray_tmp, work_unit_bytes=size, tokenizer=TokenizerConfig(sample_documents=300))
        files = resolve_sources(cfg)
        inputs = fingerprint_inputs(files)
        units = plan_units(files, inputs, cfg)
        samples.append(tokenizer_sample(units, cfg, ShardLayout.plan(cfg, sum(i["bytes"] for i in inputs))))
    assert len(samples[0]) > 250 and samples[0] == samples[1]
    strip = lambda m: {k: v for k, v in m.items() if k not in ("timings_s", "config")}  # noqa: E731
    assert strip(one.manifest) == strip(two.manifest)
    assert os.path.basename(one.path) == os.path.basename(two.path)
    for name in ("tokenizer.json", "vocab.txt"):
        assert (Path(one.tokenizer_dir) / name).read_bytes() == (Path(two.tokenizer_dir) / name).read_bytes()
    for a, b in zip(one.train_files + one.eval_files, two.train_files + two.eval_files):
        assert open(a, "rb").read() == open(b, "rb").read()
    cfg = config(str(corpus), ray_tmp)
    text_documents = len(list(iter_documents(str(corpus / "big.txt"), "big.txt", cfg)))
    assert text_documents >= 2  # over 2 MiB of text: cut into ~1 MiB documents
    assert one.manifest["counts"]["documents_read"] == 30 * 5 + 2200 + 5 + text_documents + pages
    assert one.manifest["rejects"]["duplicate"] == 5
