"""Rows that are text cut out of a document (a Project Gutenberg book's header and licence: pipelines.rejects.
NOT_DOCUMENTS) are no rejected document: 10,000 clean books printed "20,000 of 30,000 documents rejected
(gutenberg_boilerplate 20000)", which hid the real rejects and counted the cuts as documents read. They stay in
rejects.jsonl and the manifest's counts per reason, and are said apart."""

import json
import random
import types

import pyarrow as pa
import ray

from jobs.pretrain import data_metrics, rejects_line
from pipelines import prepare
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.layout import ShardLayout, fingerprint_inputs
from pipelines.rejects import RejectLog, cuts_said, rejected_documents

WORDS = "the of and a in to was is for on as by with he at from his an were are which this".split()


def test_cuts_are_said_apart_from_rejected_documents():
    counts = {"gutenberg_boilerplate": 20000, "too_short": 3}
    assert rejected_documents(counts) == 3 and rejected_documents({"gutenberg_boilerplate": 2}) == 0
    assert cuts_said(counts) == ", 20,000 Project Gutenberg headers and licences cut" and cuts_said({"x": 1}) == ""
    log = RejectLog()
    log.counts.update(counts)
    assert log.summary(True) == {"too_short": 3} and log.summary() == {"gutenberg_boilerplate": 20000, "too_short": 3}


def test_the_run_summary_and_metrics_count_rejected_documents_alone():
    manifest = {"counts": {"documents_read": 10003, "documents_kept": 10000, "examples_train": 50},
                "rejects": {"gutenberg_boilerplate": 20000, "too_short": 3}}
    metrics = data_metrics(manifest)
    assert metrics == {"data/documents_read": 10003, "data/documents_kept": 10000, "data/documents_rejected": 3,
                       "data/cut/gutenberg_boilerplate": 20000, "data/rejected/too_short": 3,
                       "data/examples_train": 50}
    assert rejects_line(metrics, "/sets/x") == ("3 of 10,003 documents rejected (too_short 3), 20,000 Project "
                                                "Gutenberg headers and licences cut: /sets/x/rejects.jsonl")
    clean = data_metrics({**manifest, "rejects": {"gutenberg_boilerplate": 20000}})
    assert clean["data/documents_rejected"] == 0 and not any(k.startswith("data/rejected/") for k in clean)
    assert rejects_line(clean, "/sets/x") == ("0 of 10,003 documents rejected, 20,000 Project Gutenberg headers "
                                              "and licences cut")
    plain = data_metrics({**manifest, "rejects": {"too_short": 3, "duplicate": 2}})
    assert rejects_line(plain, "/d") == "5 of 10,003 documents rejected (duplicate 2, too_short 3): /d/rejects.jsonl"
    assert rejects_line(data_metrics({**manifest, "rejects": {}}), "/d") == "0 of 10,003 documents rejected"


class LocalDataset:
    """ray.data's from_items -> map_batches -> iter_batches / iter_rows, run in this process."""

    def __init__(self, batches: list[pa.Table]):
        self.batches = batches
        self.context = types.SimpleNamespace(set_config=lambda *_: None)

    def map_batches(self, fn, batch_size, batch_format, fn_args=(), fn_kwargs=None, **_):
        return LocalDataset([fn(b, *fn_args, **(fn_kwargs or {})) for b in self.batches])

    def iter_batches(self, batch_format, batch_size):
        return iter(self.batches)

    def iter_rows(self):
        return (row for b in self.batches for row in b.to_pylist())


def test_prepare_counts_two_books_cuts_apart_from_documents_read(tmp_path, monkeypatch, capsys):
    """Two Gutenberg books (a header and a licence cut from each) and a file too short: documents_read is the three
    documents, the read line says one rejected and the four cuts apart, the manifest keeps every reason's rows."""
    monkeypatch.setattr(ray.data, "from_items", lambda items, override_num_blocks: LocalDataset(
        [pa.Table.from_pylist([item]) for item in items]))
    rng, files = random.Random(0), []
    for name in ("pg1.txt", "pg2.txt"):
        text = "\n\n".join(". ".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(5)) + "."
                           for _ in range(40))
        path = tmp_path / name
        path.write_text(f"The Project Gutenberg eBook of {name}\n\n*** START OF THE PROJECT GUTENBERG EBOOK ***\n\n"
                        f"{text}\n\n*** END OF THE PROJECT GUTENBERG EBOOK ***\n\nThe licence.\n")
        files.append(str(path))
    (tmp_path / "short.txt").write_text("Too short.\n")
    files.append(str(tmp_path / "short.txt"))
    cfg = DataConfig(sources=files, num_workers=1, max_seq_len=64, eval_fraction=0.0,
                     tokenizer=TokenizerConfig(vocab_size=200)).validate()
    inputs = fingerprint_inputs(files)
    out = tmp_path / "set"
    out.mkdir()
    manifest = prepare._prepare_into(out, cfg, ShardLayout.plan(cfg, sum(i["bytes"] for i in inputs)), files,
                                     inputs, None, None, {})
    assert manifest["rejects"] == {"gutenberg_boilerplate": 4, "too_short": 1}
    assert manifest["counts"]["documents_read"] == manifest["counts"]["documents_kept"] + 1 == 3
    assert ("3 files tokenized, 1 rejected documents {'too_short': 1}, 4 Project Gutenberg headers and licences cut"
            in capsys.readouterr().out)
    rows = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert sorted(r["reason"] for r in rows) == ["gutenberg_boilerplate"] * 4 + ["too_short"]
