"""prepare() run whole in this process, Ray Data replaced by a local stand-in: which files a set is prepared from, and
a corpus that gives no document refused with its reasons rather than cached as an empty set."""

from __future__ import annotations

import json
import os
import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import ray

from pipelines import prepare
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.rejects import RejectLog
from pipelines.set_counts import set_counts
from pipelines.source_files import SourceError

WORDS = "the of and a in to was is for on as by with he at from his an were are which this river stone".split()
# an uncased vocabulary of its own (a bare vocab.txt): data.tokenizer.path, so no tokenizer is trained
VOCAB = list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, ".", *"abcdefghijklmnopqrstuvwxyz"]))


class LocalDataset:
    """ray.data's from_items -> map_batches -> iter_batches / iter_rows, run here, a block an item."""

    def __init__(self, batches: list[pa.Table]):
        self.batches = batches

    def map_batches(self, fn, batch_size=None, batch_format=None, fn_args=(), fn_kwargs=None, **_):
        return LocalDataset([fn(b, *fn_args, **(fn_kwargs or {})) for b in self.batches])

    def iter_batches(self, batch_format=None, batch_size=None):
        return iter(self.batches)

    def iter_rows(self):
        return (row for b in self.batches for row in b.to_pylist())


def blocks(items, override_num_blocks=None) -> LocalDataset:
    return LocalDataset([pa.Table.from_pylist([item]) for item in items])


@pytest.fixture
def local(monkeypatch, tmp_path):
    """Ray Data in this process, a one-CPU cluster, and tmp_path the working directory (relative paths, as the
    default data.output_root is)."""
    monkeypatch.setattr(ray.data, "from_items", blocks)
    monkeypatch.setattr(prepare, "_one_block_each", blocks)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 1})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    return tmp_path


def paragraphs(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return "\n\n".join(". ".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(5)) + "."
                       for _ in range(n)) + "\n"


def config(*sources: str, **kw) -> DataConfig:
    kw.setdefault("tokenizer", TokenizerConfig(path="vocab", lowercase=True))
    return DataConfig(sources=list(sources), num_workers=1, text_documents="blank_lines", **kw).validate()


def test_a_corpus_folder_holding_the_output_root_is_prepared_once_and_reused(local, capsys):
    """data.sources=[data] with the default data.output_root (data/prepared): every later run read the sets before it
    as corpus (shards, manifest, tokenizer files, rejects.jsonl), so its inputs changed, the set was never reused,
    and the corpus was prepared again on every submission. A set copied elsewhere into the corpus is skipped too,
    by its manifest; a source that is prepared data is refused."""
    (local / "data" / "books").mkdir(parents=True)
    for i in range(3):
        (local / "data" / "books" / f"b{i}.txt").write_text(paragraphs(i, 12))
    (local / "data" / "more.jsonl").write_text("".join(json.dumps({"text": paragraphs(9 + i, 2)}) + "\n"
                                                      for i in range(6)))
    first = prepare.prepare(config("data"))
    assert not first.reused and first.path.startswith("data/prepared/")
    assert len(first.manifest["inputs"]["files"]) == 4 and first.manifest["counts"]["documents_kept"] > 0
    capsys.readouterr()
    again = prepare.prepare(config("data"))
    assert again.reused and again.path == first.path
    out = capsys.readouterr().out
    assert "[prepare] sources: skipped " in out and f"in the prepared set {local / first.path}" in out
    # a set copied into the corpus (another output root's), read with yet another output root
    (local / "data" / "old").mkdir()
    for f in (local / "data" / "prepared").rglob("*"):
        if f.is_file():
            copy = local / "data" / "old" / f.relative_to(local / "data" / "prepared")
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(f.read_bytes())
    elsewhere = prepare.prepare(config("data", output_root="sets"))
    assert [i["path"] for i in elsewhere.manifest["inputs"]["files"]] == [
        i["path"] for i in first.manifest["inputs"]["files"]]
    assert "the prepared set " in capsys.readouterr().out
    for source in (first.path, f"{first.path}/train"):
        with pytest.raises(SourceError, match=r"is prepared data, in the prepared set .*give the corpus's own files"):
            prepare.prepare(config(source))
    for source in ("data/prepared", "data/prepared/*/train/*.parquet"):
        with pytest.raises(SourceError, match=r"every file is prepared data, no corpus: \d+ in the prepared set "):
            prepare.prepare(config(source))
    with pytest.raises(SourceError, match=r"every file is prepared data, no corpus: \d+ in the prepared set "):
        prepare.prepare(config("data/old", output_root="sets"))


def test_a_corpus_whose_every_record_is_rejected_is_refused_with_its_reasons_and_not_cached(local):
    """A parquet export whose column is "content", not "text", and UTF-16 text files: with a given tokenizer prepare
    said "done: 0 examples" and cached the empty set (the pretraining's first error was about its held-out split);
    with one to train, "no training documents" named no reason. Both now say what was rejected and what to set."""
    (local / "hf").mkdir()
    for i in range(3):
        pq.write_table(pa.table({"id": list(range(20)), "content": [paragraphs(i, 3)] * 20}), f"hf/part-{i}.parquet")
    (local / "win").mkdir()
    for i in range(2):
        (local / "win" / f"{i}.txt").write_bytes(paragraphs(i, 4).encode("utf-16"))
    expected = {"hf": r"3 documents rejected: missing_text_column 3: set data.text_column to the field or column "
                      r"that holds the text \(first: .*part-0.parquet: \"no column 'text' in \['id', 'content'\]\"\)",
                "win": r"2 documents rejected: utf16_file 2: convert the files to UTF-8 \(first: .*0.txt: 'UTF-16 "
                       r"text \(its byte-order mark\): convert it to UTF-8"}
    for source, said in expected.items():
        with pytest.raises(SourceError, match=f"no document of data.sources was kept to prepare a set from: {said}"):
            prepare.prepare(config(source))
        assert not list((local / "data" / "prepared").iterdir())  # nothing cached, no build folder left
        with pytest.raises(SourceError, match=f"no document of data.sources was kept to train a tokenizer on: {said}"):
            prepare.prepare(config(source, tokenizer=TokenizerConfig(vocab_size=200)))


def test_documents_read_counts_those_without_a_sentence_and_a_set_of_none_is_refused():
    """documents_read is every document a reader gave: kept, rejected, and those that tokenized to no sentence (text
    the tokenizer drops whole), which counts alone as documents_without_sentences."""
    totals = {"documents": 5, "documents_empty": 2, "sentences": 40, "tokens": 900, "random_next": 3,
              "sentences_dropped": 0, "sentences_cut": 1, "unknown_tokens": 0}
    shards = {"train": [{"rows": 8}, {"rows": 4}], "eval": [{"rows": 2}]}
    rejects = RejectLog()
    rejects.add("too_short", "a.txt#0", "a.txt", "Hi.", count=3)
    rejects.add("gutenberg_boilerplate", "a.txt@0", "a.txt", "*** START")  # text cut from a book, no document
    counts = set_counts(totals, shards, rejects)
    assert counts["documents_read"] == 5 + 2 + 3 and counts["documents_without_sentences"] == 2
    assert (counts["examples_train"], counts["examples_eval"], counts["examples"]) == (12, 2, 14)
    with pytest.raises(SourceError, match=r"kept to prepare a set from: 3 documents rejected: too_short 3: lower "
                                          r"data.min_document_chars .*; and 2 documents tokenized to no sentence$"):
        set_counts({**totals, "documents": 0}, shards, rejects)
    with pytest.raises(SourceError, match=r"kept to prepare a set from: no document was read$"):
        set_counts({**totals, "documents": 0, "documents_empty": 0}, shards, RejectLog())


def test_a_corpus_file_named_manifest_json_is_still_corpus(tmp_path):
    """Only a prepared set's manifest (format_version, counts, shards) marks its folder as no corpus."""
    from pipelines.prepared_sets import corpus_files

    (tmp_path / "crawl").mkdir()
    (tmp_path / "crawl" / "manifest.json").write_text(json.dumps({"text": paragraphs(0, 2), "counts": 3}) + "\n")
    (tmp_path / "crawl" / "pages.jsonl").write_text(json.dumps({"text": paragraphs(1, 2)}) + "\n")
    cfg = DataConfig(sources=[str(tmp_path / "crawl")], output_root=str(tmp_path / "prepared"))
    assert corpus_files(cfg) == ([str(tmp_path / "crawl" / n) for n in ("manifest.json", "pages.jsonl")], "")


def fake_set(folder) -> None:
    """A prepared set's layout as prepare writes it: its manifest, tokenizer files and shards."""
    (folder / "tokenizer").mkdir(parents=True)
    (folder / "train").mkdir()
    (folder / "manifest.json").write_text(json.dumps({"format_version": 3, "counts": {}, "shards": {}}))
    (folder / "tokenizer" / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    (folder / "train" / "shard-00000.parquet").write_bytes(b"PAR1")


def test_a_corpus_inside_the_output_root_is_read_and_only_its_sets_skipped(tmp_path):
    """data.output_root=/mnt/shared/data with data.sources=[/mnt/shared/data/wiki] was refused as prepared data (and
    every file under the root skipped): prepare writes only <root>/<name>/ sets there. A set there is skipped by its
    manifest, also where a glob picks its vocab.txt and not its manifest.json."""
    from pipelines.prepared_sets import corpus_files

    root = tmp_path / "data"
    (root / "wiki").mkdir(parents=True)
    (root / "wiki" / "a.txt").write_text(paragraphs(0, 2))
    (root / "wiki" / "b.txt").write_text(paragraphs(1, 2))
    wiki = [str(root / "wiki" / n) for n in ("a.txt", "b.txt")]
    assert corpus_files(DataConfig(sources=[str(root / "wiki")], output_root=str(root))) == (wiki, "")
    fake_set(root / "abc123")
    for source in (str(root), str(root / "**" / "*.txt")):
        kept, said = corpus_files(DataConfig(sources=[source], output_root=str(root)))
        n = 3 if source == str(root) else 1  # the whole set, or the glob's vocab.txt alone
        assert (kept, said) == (wiki, f"skipped {n} files of prepared sets, no corpus: {n} in the prepared set "
                                      f"{os.path.realpath(root / 'abc123')}")
    with pytest.raises(SourceError, match=r"'.*abc123/train' is prepared data, in the prepared set .*abc123: give"):
        corpus_files(DataConfig(sources=[str(root / "abc123" / "train")], output_root=str(root)))


def test_a_given_vocabulary_that_lacks_the_corpus_words_is_warned_of_with_the_unknown_share(local, capsys):
    """A given tokenizer is not checked on a sample as a trained one is: an English vocabulary on a Greek corpus made
    [UNK] of most words and prepare said nothing. The examples' [UNK] tokens are counted (before masking: static
    masking's counts are dynamic masking's, whose shards hold the tokens unmasked) and warned of past 1%; a corpus of
    the vocabulary's words is not."""
    (local / "en.txt").write_text(paragraphs(0, 40))
    english = prepare.prepare(config("en.txt", masking="static"))
    assert english.manifest["counts"]["unknown_tokens"] == 0 and english.manifest["warnings"] == []
    (local / "el.txt").write_text(paragraphs(1, 40).replace("river", "ποτάμι").replace("stone", "πέτρα"))
    capsys.readouterr()
    mixed = prepare.prepare(config("el.txt", masking="static"))
    counts, out = mixed.manifest["counts"], capsys.readouterr().out
    unmasked = prepare.prepare(config("el.txt"))
    ids = pa.concat_tables(pq.read_table(f) for f in unmasked.train_files + unmasked.eval_files).column("input_ids")
    unknown = pc.sum(pc.equal(pc.list_flatten(ids), VOCAB.index("[UNK]"))).as_py()
    assert counts["unknown_tokens"] == unmasked.manifest["counts"]["unknown_tokens"] == unknown
    assert counts["tokens"] * 0.01 < unknown < counts["tokens"] * 0.2
    (said,) = [w for w in mixed.manifest["warnings"] if "[UNK]" in w]
    assert f"[UNK] ({unknown:,} of {counts['tokens']:,})" in said and "the vocabulary of vocab lacks" in said
    assert said in out
    from jobs.runtime.pretrain_summary import data_metrics  # a pretraining on the set logs both to MLflow

    assert (data_metrics(mixed.manifest)["data/unknown_tokens"], data_metrics(mixed.manifest)["data/tokens"]) == (
        unknown, counts["tokens"])
