"""Acceptance: a corpus with every kind of bad input reads through on a real local Ray cluster,
good documents come out, and every reject is counted under its reason, exactly: by the readers alone, and
on the production path (prepare() inside a pretraining job, counts in the manifest, MLflow and the summary)."""

import bz2
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config import DataConfig
from pipelines.dedup import drop_duplicates
from pipelines.rejects import summarize_rejects, write_rejects
from pipelines.source_files import SourceError
from pipelines.sources import DOCUMENT_COLUMNS, REJECT_REASONS, read_documents

pytestmark = pytest.mark.slow  # a real local Ray cluster and a 50 MB line: ~35 s on 2 shared cores


def prose(topic: str, n: int = 4) -> str:
    return " ".join(f"This is sentence {i} about {topic}, long enough to be a real document." for i in range(n))


def page(page_id: int, title: str, text: str, ns: int = 0, redirect: bool = False) -> str:
    return (f"<page><title>{title}</title><ns>{ns}</ns><id>{page_id}</id>"
            + ('<redirect title="Elsewhere" />' if redirect else "")
            + f'<revision><id>{page_id}0</id><text xml:space="preserve">{text}</text></revision></page>\n')


DUMP_HEAD = '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10">\n'


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    for d in ("books", "jsonl", "wiki", "parquet"):
        (root / d).mkdir()
    # Plain-text books: two good, one exact copy, one with invalid UTF-8, a PNG, an empty file.
    (root / "books/good1.txt").write_text(prose("the sea") + "\n\n" + prose("the shore"))
    (root / "books/good2.txt").write_text(prose("mountains"))
    (root / "books/reprint.txt").write_text(prose("the sea") + "\n\n" + prose("the shore"))  # duplicate
    (root / "books/latin1.txt").write_bytes(prose("caf\xe9s").encode("latin-1"))  # invalid_utf8
    (root / "books/cover.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(512))
    (root / "books/empty.txt").write_bytes(b"")
    # WikiExtractor-style JSONL: good records, empty and short ones, malformed lines, duplicates.
    records = [
        json.dumps({"id": "1", "title": "A", "text": prose("rivers")}),        # 0 good
        json.dumps({"id": "2", "title": "B", "text": ""}),                     # 1 empty_document
        '{"id": "3", "title": "C", "text": "no closing quote}',                # 2 malformed_json
        json.dumps({"id": "4", "title": "D", "text": "  \n\t "}),              # 3 empty_document
        json.dumps({"id": "5", "title": "E", "text": "Too short."}),           # 4 too_short
        "not json at all",                                                     # 5 malformed_json
        json.dumps({"id": "6", "title": "F", "body": prose("lakes")}),         # 6 missing_text_column
        json.dumps({"id": "7", "title": "G", "text": prose("mountains")}),     # 7 duplicate of a book
        json.dumps({"id": "8", "title": "H", "text": prose("forests")}),       # 8 good
        "", "",                                                                # 9, 10 blank: not records
        json.dumps({"id": "9", "title": "I", "text": prose("rivers")}),        # 11 duplicate of #0
    ]
    (root / "jsonl/wiki_00.jsonl").write_text("\n".join(records) + "\n")
    # A single 50 MB line between two good records.
    with open(root / "jsonl/huge_line.jsonl", "wb") as f:
        f.write(json.dumps({"text": prose("deserts")}).encode() + b"\n")
        f.write(b'{"text": "' + b"a" * (50 << 20) + b'"}\n')
        f.write(json.dumps({"text": prose("valleys")}).encode() + b"\n")
    # A multistream bz2 dump whose second stream is cut short: the first stream's pages survive.
    first = DUMP_HEAD + page(10, "Alpha", prose("alpha")) + page(11, "Alfa", "#REDIRECT [[Alpha]]", redirect=True)
    second = page(12, "Beta", prose("beta")) + page(13, "Talk:Beta", prose("talk"), ns=1) + "</mediawiki>\n"
    cut = bz2.compress(second.encode())
    (root / "wiki/truncated.xml.bz2").write_bytes(bz2.compress(first.encode()) + cut[: len(cut) // 2])
    # Plain XML with a broken tag after two pages (one an article, one a disambiguation page).
    broken = (DUMP_HEAD + page(20, "Gamma", prose("gamma"))
              + page(21, "Delta (disambiguation)", "'''Delta''' may be:\n* [[Delta]]\n{{disambiguation}}")
              + "<page><title>Epsilon</titel><ns>0</ns></page>\n</mediawiki>\n")
    (root / "wiki/broken.xml").write_text(broken)
    pq.write_table(pa.table({"text": [prose("stars"), None, prose("planets")]}), root / "parquet/docs.parquet")
    return root


EXPECTED_REJECTS = {
    "binary_file": 1, "disambiguation": 1, "duplicate": 3, "empty_document": 3, "empty_file": 1,
    "invalid_utf8": 1, "line_too_long": 1, "malformed_json": 2, "malformed_xml": 1,
    "missing_text_column": 1, "redirect": 1, "too_short": 1, "truncated_bz2": 1,
}
EXPECTED_GOOD = {
    "books/good1.txt#0", "books/good2.txt#0", "jsonl/wiki_00.jsonl#0", "jsonl/wiki_00.jsonl#8",
    "jsonl/huge_line.jsonl#0", "jsonl/huge_line.jsonl#2", "wiki/truncated.xml.bz2#10", "wiki/broken.xml#20",
    "parquet/docs.parquet#0", "parquet/docs.parquet#2",
}


@pytest.fixture(scope="module")
def documents(ray_up, corpus):
    cfg = DataConfig(sources=[str(corpus)], min_document_chars=50)
    return drop_duplicates(read_documents(cfg))


def test_read_completes_with_good_documents(documents):
    rows = documents.take_all()
    good = {r["doc_id"]: r for r in rows if not r["reject_reason"]}
    assert set(good) == EXPECTED_GOOD
    assert good["books/good1.txt#0"]["text"] == prose("the sea") + "\n\n" + prose("the shore")
    assert good["wiki/truncated.xml.bz2#10"]["text"] == prose("alpha")
    assert all(r["sample"] == "" and r["text"] for r in good.values())
    assert all(r["text"] == "" for r in rows if r["reject_reason"])
    assert list(rows[0]) == list(DOCUMENT_COLUMNS)
    assert len({r["doc_id"] for r in rows}) == len(rows)  # doc_ids are unique


def test_reject_counts_are_exact(documents):
    assert summarize_rejects(documents) == EXPECTED_REJECTS
    assert set(EXPECTED_REJECTS) <= set(REJECT_REASONS)


def test_duplicates_keep_the_smallest_doc_id_whatever_the_blocks(ray_up, corpus, documents):
    def duplicates(ds):
        return sorted(r["doc_id"] for r in ds.take_all() if r["reject_reason"] == "duplicate")

    expected = ["books/reprint.txt#0", "jsonl/wiki_00.jsonl#11", "jsonl/wiki_00.jsonl#7"]
    assert duplicates(documents) == expected
    cfg = DataConfig(sources=[str(corpus / "jsonl"), str(corpus / "books")], min_document_chars=50)
    assert duplicates(drop_duplicates(read_documents(cfg).repartition(1))) == expected


def test_rejects_file(corpus, documents, tmp_path):
    path = tmp_path / "out" / "rejects.jsonl"
    write_rejects(documents, str(path), samples_per_reason=1)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["reason"] for line in lines] == sorted(EXPECTED_REJECTS)  # one per reason
    by_reason = {line["reason"]: line for line in lines}
    assert by_reason["malformed_json"] == {
        "path": str(corpus / "jsonl/wiki_00.jsonl"), "doc_id": "jsonl/wiki_00.jsonl#2",
        "reason": "malformed_json", "sample": '{"id": "3", "title": "C", "text": "no closing quote}'}
    assert by_reason["line_too_long"]["sample"] == '{"text": "' + "a" * 190
    assert by_reason["duplicate"]["doc_id"] == "books/reprint.txt#0"
    assert by_reason["redirect"]["sample"] == "Alfa"
    assert by_reason["truncated_bz2"]["doc_id"] == "wiki/truncated.xml.bz2"


def test_unreadable_sources_raise_source_error(ray_up, corpus, tmp_path):
    with pytest.raises(SourceError, match="no-such-corpus"):
        read_documents(DataConfig(sources=[str(tmp_path / "no-such-corpus")]))
    doomed = tmp_path / "doomed.txt"
    doomed.write_text(prose("doom"))
    ds = read_documents(DataConfig(sources=[str(doomed)]))
    doomed.unlink()  # gone between planning and reading: the worker's error names the file
    with pytest.raises(Exception, match="doomed.txt") as info:
        ds.take_all()
    assert "SourceError" in repr(info.value) or isinstance(info.value, SourceError)


def generated_books(root, n: int, seed: int = 0) -> int:
    """`n` distinct good documents of 12 sentences each, words drawn from the standard library's docstrings
    (real English words; documents no reader rejects), written as plain-text books under `root`."""
    import random
    import re
    import string
    import textwrap

    words = sorted({w.lower() for mod in (os, json, re, string, textwrap, random, bz2, pytest)
                    for w in re.findall(r"[A-Za-z]{3,12}", mod.__doc__ or "")})
    rng = random.Random(seed)
    root.mkdir(parents=True)
    for i in range(n):
        sentences = [" ".join(rng.choices(words, k=rng.randint(8, 16))).capitalize() + "." for _ in range(12)]
        (root / f"book-{i:04d}.txt").write_text(" ".join(sentences[:6]) + "\n\n" + " ".join(sentences[6:]))
    return n


def test_bad_corpus_through_prepare_and_a_short_pretraining_run(ray_up, corpus, tmp_path, capsys):
    """The production path: the whole bad-input corpus, plus a book whose file name is not UTF-8 and enough
    good books to train on, goes through prepare() inside the pretraining job; the run completes, and the
    manifest, the MLflow run and the job summary count every reject under its reason, exactly."""
    import shutil

    from mlflow.tracking import MlflowClient

    from jobs.pretrain import rejects_line, run
    from tests.e2e.quick import quick_config

    root = tmp_path / "corpus"
    shutil.copytree(corpus, root)
    (root / "books" / os.fsdecode(b"caf\xe9-menu.txt")).write_text(prose("the menu"))  # Latin-1 bytes in the name
    good = len(EXPECTED_GOOD) + 1 + generated_books(root / "generated", 150)
    cfg = quick_config(tmp_path, "bad-corpus", f"data.sources=[{root}]", "corpus.harvest_installed_docs=false",
                       "data.min_document_chars=50", "data.eval_fraction=0.1", "train.max_steps=6",
                       "train.micro_batch_size=8", "train.log_every=3", "train.eval_batches=1",
                       "optim.warmup_steps=2")
    result = run(cfg)
    m = result.metrics
    assert m["step"] == 6
    manifest = json.loads((Path(result.data_dir) / "manifest.json").read_text())
    assert manifest["rejects"] == EXPECTED_REJECTS
    assert manifest["counts"]["documents_kept"] == good
    assert manifest["counts"]["documents_read"] == good + sum(EXPECTED_REJECTS.values())
    assert {k.split("/")[-1]: v for k, v in m.items() if k.startswith("data/rejected/")} == EXPECTED_REJECTS
    logged = MlflowClient(cfg.tracking.tracking_uri).get_run(result.mlflow["run_id"]).data.metrics
    # final metrics are logged with "." for "/" (jobs/registry/tracking.finish_run)
    assert {k.split(".")[-1]: v for k, v in logged.items() if k.startswith("data.rejected.")} == EXPECTED_REJECTS
    assert logged["data.documents_rejected"] == sum(EXPECTED_REJECTS.values())
    line = rejects_line(m, result.data_dir)
    assert line.startswith(f"{sum(EXPECTED_REJECTS.values())} of {good + sum(EXPECTED_REJECTS.values())} documents "
                           "rejected (binary_file 1, disambiguation 1, duplicate 3,")
    assert f"corpus           {line}" in capsys.readouterr().out


def test_a_fixed_cluster_too_small_is_refused_at_once(ray_up, tmp_path):
    """No autoscaler (the shared local cluster: 2 CPUs): a job that needs more is refused in one line, without
    waiting out scaling.capacity_timeout_s (jobs/runtime/capacity.py; the autoscaling side is
    test_autoscaling.py)."""
    import time

    from jobs.pretrain import run
    from tests.e2e.quick import quick_config

    cfg = quick_config(tmp_path, "too-big", "scaling.num_workers=3", "scaling.cpus_per_worker=1",
                       "scaling.capacity_timeout_s=600")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^the Ray cluster has CPU 2 of 4 needed by scaling.num_workers x "
                                           r"scaling.cpus_per_worker \(3 x 1\) plus 1 CPU for Ray Data"):
        run(cfg)
    assert time.monotonic() - start < 60
