"""What prepare.py's driver decides and holds, without a Ray cluster: the tokenizer-training sample (what it picks,
and how much text reaches the driver) and the number of tokenizing tasks.

Ray Data is replaced by a local stand-in that runs each work unit's function in this process and keeps what the
functions return: those tables are what would cross the object store to the driver."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest
import ray

from pipelines import prepare
from pipelines.tokenizer_sample import tokenizer_sample
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.dedup import content_hashes
from pipelines.examples import nsp_warning
from pipelines.examples import document_key
from pipelines.layout import ShardLayout, fingerprint_inputs
from pipelines.rejects import RejectLog
from pipelines.spill import unit_documents
from bert_core.config import ConfigError
from pipelines.units import file_parts, group_units, target_bytes

WORDS = "the of and a in to was is for on as by with he at from his an were are which this".split()
K = 10


class LocalDataset:
    """ray.data's from_items -> map_batches -> iter_batches, run here; `returned` gets every mapped table."""

    def __init__(self, batches: list[pa.Table], returned: list[pa.Table]):
        self.batches, self.returned = batches, returned

    def map_batches(self, fn, batch_size, batch_format, fn_args=(), fn_kwargs=None, **_):
        out = [fn(b, *fn_args, **(fn_kwargs or {})) for b in self.batches]
        self.returned.extend(out)
        return LocalDataset(out, self.returned)

    def iter_batches(self, batch_format, batch_size):
        return iter(self.batches)


@pytest.fixture
def corpus(tmp_path):
    """12 JSON Lines files of 30 documents; every 4th document repeats an earlier one's text."""
    rng, texts, files = random.Random(0), [], []
    for f in range(12):
        path = tmp_path / f"part-{f:02d}.jsonl"
        with open(path, "w") as out:
            for d in range(30):
                if texts and d % 4 == 3:
                    text = rng.choice(texts)
                else:
                    text = ". ".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(6)) + "."
                    texts.append(text)
                out.write(json.dumps({"text": text}) + "\n")
        files.append(str(path))
    cfg = DataConfig(sources=files, tokenizer=TokenizerConfig(sample_documents=K)).validate()
    inputs = fingerprint_inputs(files)
    return cfg, files, inputs, ShardLayout.plan(cfg, sum(i["bytes"] for i in inputs))


def smallest_keys_less_duplicates(units: list[dict], cfg: DataConfig, layout: ShardLayout) -> list[str]:
    """The sample's definition, over the whole corpus at once."""
    docs = sorted(d for u in units for d in unit_documents(u, cfg, RejectLog()))
    first = {}
    for _, uid, text in sorted(docs, key=lambda d: d[1]):
        first.setdefault(content_hashes([text])[0].tobytes(), uid)
    train = sorted((document_key(cfg.seed, doc_id), uid, text) for doc_id, uid, text in docs
                   if not layout.is_eval(document_key(cfg.seed, doc_id)))[:K]
    return [text for _, uid, text in train if first[content_hashes([text])[0].tobytes()] == uid]


@pytest.mark.parametrize("target", [1, 1 << 30])  # a unit a file; one unit of all
def test_sample_is_the_k_smallest_keys_less_duplicates_and_only_its_texts_reach_the_driver(corpus, monkeypatch,
                                                                                           target):
    cfg, files, inputs, layout = corpus
    units = group_units(file_parts(files, inputs, cfg, 1 << 30), target)
    returned = []
    monkeypatch.setattr(ray.data, "from_items", lambda items, override_num_blocks: LocalDataset(
        [pa.Table.from_pylist([item]) for item in items], returned))
    expected = smallest_keys_less_duplicates(units, cfg, layout)
    assert 0 < len(expected) < K  # duplicates were among the k smallest keys

    assert tokenizer_sample(units, cfg, layout) == expected
    crossed = [text for table in returned if "text" in table.column_names
               for texts in table.column("text").to_pylist() for text in texts]
    assert len(crossed) <= K
    assert sum(map(len, crossed)) <= sum(map(len, expected))  # ~one sample's bytes, not a unit's k documents each


def test_tokenizing_tasks_default_to_the_clusters_cpus_and_an_explicit_count_stays(monkeypatch):
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 16.0, "memory": 1e11})
    default = prepare._with_tokenizing_tasks(DataConfig(sources=["x"]).validate())
    assert default.num_workers == 16
    assert target_bytes(default, 1 << 30) == (1 << 30) // (4 * 16)  # units sized for 16 tasks, 4 each
    assert prepare._with_tokenizing_tasks(DataConfig(sources=["x"], num_workers=3)).num_workers == 3
    monkeypatch.setattr(ray, "cluster_resources", lambda: {})  # no CPU (yet) on an autoscaling cluster
    assert prepare._with_tokenizing_tasks(DataConfig(sources=["x"])).num_workers == 1
    with pytest.raises(ConfigError, match=r"data\.num_workers must be >= 0"):
        DataConfig(sources=["x"], num_workers=-1).validate()
    with pytest.raises(ConfigError, match=r"data\.num_shards must be >= 0"):  # a bare IndexError, once tokenized
        DataConfig(sources=["x"], num_shards=-3).validate()


def test_a_random_next_share_well_under_nsp_random_prob_is_reported_with_its_numbers():
    """BooksCorpus as two one-sentence-a-line files: 8 MiB documents, 72 of 281 shards with one document."""
    cfg = DataConfig(sources=["x"])
    shards = {"train": [{"documents": 1, "rows": 2}] * 72 + [{"documents": 3, "rows": 30}] * 203,
              "eval": [{"documents": 2, "rows": 10, "random_next": 5}] * 6}
    counts = {"examples": 1000, "random_next": 370, "documents_kept": 693}
    line = nsp_warning(cfg, counts, shards)
    assert line.startswith("random-next pairs are 37.0% of examples (370 of 1000), not the 50% of "
                           "data.nsp_random_prob: 72 of 281 shards hold one document")
    assert "2.5 documents a shard" in line and "data.num_shards" in line
    assert nsp_warning(cfg, {**counts, "random_next": 450}, shards) is None
    assert nsp_warning(DataConfig(sources=["x"], nsp_random_prob=0.0), counts, shards) is None
    # enough in all, but the held-out split (one shard of one ~1 MiB book) has none: its NSP accuracy scores one class
    one_book = {**shards, "eval": [{"documents": 1, "rows": 1364, "random_next": 0}]}
    line = nsp_warning(cfg, {**counts, "random_next": 490}, one_book)
    assert line.startswith("the held-out split's random-next pairs are 0.0% (0 of 1364), not the 50% of "
                           "data.nsp_random_prob: its 1 shard(s) hold 1 document(s)") and "data.eval_fraction" in line


def test_train_shards_of_one_document_are_named_when_they_hold_over_5_percent_of_the_examples():
    """BooksCorpus as two 2.2 GB files without blank lines: 8 MiB documents, 66 of 268 shards with one, 9.7% of the
    train examples and all "next", while the random share in all (45.6%) passed the check above."""
    cfg = DataConfig(sources=["x"])
    counts = {"examples": 1000, "random_next": 456, "documents_kept": 700}
    eval_rows = [{"documents": 2, "rows": 10, "random_next": 5}] * 5
    shards = {"train": [{"documents": 1, "rows": 100}] * 66 + [{"documents": 3, "rows": 300}] * 197, "eval": eval_rows}
    line = nsp_warning(cfg, counts, shards)
    assert line.startswith("66 of 263 train shards hold one document, so all their pairs are 'next'")
    assert "10.0% of the train examples (6600 of 65700)" in line and "data.text_documents=blank_lines" in line
    assert "held-out" not in line
    at_most = {**shards, "train": [{"documents": 1, "rows": 100}] * 5 + [{"documents": 2, "rows": 100}] * 95}
    assert nsp_warning(cfg, counts, at_most) is None  # 5.0%: not over
    both = nsp_warning(cfg, counts, {**shards, "eval": [{"documents": 1, "rows": 1364, "random_next": 0}]})
    assert both.startswith("66 of 263 train shards") and "; and the held-out split's random-next pairs are 0.0%" in both


def test_the_sample_stops_at_its_text_budget_the_last_document_cut_to_it(corpus, monkeypatch):
    """A plain-text book is one document of megabytes: 20,000 of them would be the whole corpus, held by the driver.
    The sample is the same smallest-key documents up to data.tokenizer.sample_million_chars of text, the last one
    cut to the budget; only that much text crosses to the driver."""
    import dataclasses

    cfg, files, inputs, layout = corpus
    units = group_units(file_parts(files, inputs, cfg, 1 << 30), 1)
    returned = []
    monkeypatch.setattr(ray.data, "from_items", lambda items, override_num_blocks: LocalDataset(
        [pa.Table.from_pylist([item]) for item in items], returned))
    whole = smallest_keys_less_duplicates(units, cfg, layout)
    budget = sum(map(len, whole[:5])) + 10  # five documents and 10 characters of the sixth
    small = dataclasses.replace(cfg, tokenizer=dataclasses.replace(cfg.tokenizer,
                                                                   sample_million_chars=budget / 1_000_000))
    sample = tokenizer_sample(units, small, layout)
    assert sample == whole[:5] + [whole[5][:10]]
    crossed = [text for table in returned if "text" in table.column_names
               for texts in table.column("text").to_pylist() for text in texts]
    assert sum(map(len, crossed)) == budget
    with pytest.raises(ConfigError, match="sample_million_chars > 0"):
        TokenizerConfig(sample_million_chars=0).validate()


def test_a_google_format_text_file_read_as_books_is_warned_about_and_books_are_not(tmp_path):
    """Google's create_pretraining_data input (one sentence a line, a blank line between articles) read in the
    default books mode becomes ~1 MiB documents, and a next-sentence pair crosses from one article into the next.
    prepare says so before it starts, naming the file and the setting; a Gutenberg book (lines wrapped at a width,
    blank lines between paragraphs), a book of a paragraph a line, and BookCorpus's one sentence a line without
    blank lines are not warned about, nor is blank_lines mode."""
    rng = random.Random(0)

    def sentence():
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."

    google = tmp_path / "wiki.txt"
    google.write_text("".join("\n".join(sentence() for _ in range(rng.randint(3, 12))) + "\n\n" for _ in range(60)))
    paragraphs = [" ".join(sentence() for _ in range(5)) for _ in range(80)]
    wrapped = tmp_path / "gutenberg.txt"
    wrapped.write_text("\n\n".join("\n".join(p[i:i + 70] for i in range(0, len(p), 70)) for p in paragraphs) + "\n")
    per_line = tmp_path / "novel.txt"
    per_line.write_text("\n\n".join(paragraphs) + "\n")
    bookcorpus = tmp_path / "books_large.txt"
    bookcorpus.write_text("\n".join(sentence() for _ in range(2000)) + "\n")
    books = [str(wrapped), str(per_line), str(bookcorpus)]
    line = prepare._document_warning(DataConfig(sources=["x"]), [*books, str(google)])
    assert line.startswith(f"{google} looks like one sentence a line with a blank line between documents (60 blank-"
                           f"line-separated blocks")
    assert "set data.text_documents=blank_lines if its blank lines end documents" in line
    assert prepare._document_warning(DataConfig(sources=["x"]), books) is None
    assert prepare._document_warning(DataConfig(sources=["x"], text_documents="blank_lines"), [str(google)]) is None


def test_plain_text_with_bare_carriage_return_line_ends_is_refused_before_reading(tmp_path):
    """A classic-Mac file (lines ending in a bare \\r) was read as one line: one document whose NSP pairs crossed its
    articles, or a whole book rejected as line_too_long; \\n and \\r\\n line ends read as before."""
    from pipelines.text_source import check_line_ends

    text = "First article, sentence one.|Sentence two.||Second article starts now.|"
    for name, end in (("unix.txt", "\n"), ("dos.txt", "\r\n"), ("mac.txt", "\r")):
        (tmp_path / name).write_text(text.replace("|", end), newline="")
    check_line_ends([str(tmp_path / "unix.txt"), str(tmp_path / "dos.txt")])
    with pytest.raises(ValueError, match=r"mac.txt ends its lines with a bare carriage return .*convert"):
        check_line_ends([str(tmp_path / "unix.txt"), str(tmp_path / "mac.txt")])


def test_plain_text_named_with_double_colons_is_checked_and_read(tmp_path):
    """Perl and C++ documentation names files "Dpkg::Source.txt": fsspec.open read "::" as URL chaining, so the line-end
    check and the document-format warning raised FileNotFoundError for a "Dpkg" that does not exist before anything
    was read. They open files as the readers do; a gzip'd name with "::" is decompressed as before."""
    import gzip

    from pipelines.sources import iter_documents
    from pipelines.text_source import check_line_ends

    google = "".join(f"Sentence {i} of article {a} ends here.\n" for a in range(30) for i in range(3) if i or a)
    google = google.replace("Sentence 0", "\nSentence 0")  # a blank line before each article's first sentence
    (tmp_path / "Dpkg::Source.txt").write_text(google)
    (tmp_path / "a::b.txt.gz").write_bytes(gzip.compress(b"A gzip'd book, one paragraph long.\n"))
    (tmp_path / "std::vector.txt").write_text("Old Mac export.\rIts lines end in a bare return.\r", newline="")
    ok = [str(tmp_path / "Dpkg::Source.txt"), str(tmp_path / "a::b.txt.gz")]
    check_line_ends(ok)
    with pytest.raises(ValueError, match=r"std::vector.txt ends its lines with a bare carriage return"):
        check_line_ends([*ok, str(tmp_path / "std::vector.txt")])
    cfg = DataConfig(sources=["x"], min_document_chars=1)
    line = prepare._document_warning(cfg, ok)
    assert line.startswith(f"{tmp_path / 'Dpkg::Source.txt'} looks like one sentence a line")
    assert prepare._document_warning(cfg, ok[1:]) is None
    rows = list(iter_documents(ok[1], "a::b.txt.gz", cfg))
    assert [(r["doc_id"], r["text"], r["reject_reason"]) for r in rows] == [
        ("a::b.txt.gz#0", "A gzip'd book, one paragraph long.", "")]


def test_a_killed_prepares_build_folder_is_removed_by_the_next_and_a_live_ones_kept(tmp_path):
    """`ray job stop` or the OOM killer skip the cleanup: the hidden build folder (the corpus's spilled token ids)
    stayed in output_root, and every later run made a new one beside it."""
    import os
    import subprocess
    import sys

    from pipelines.layout import build_dir

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    mine = build_dir(tmp_path, "corpus-a")
    host = mine.name.split(".tmp-", 1)[1].rsplit(f"-{os.getpid()}-", 1)[0]
    left = tmp_path / f".corpus-b.tmp-{host}-{dead.pid}-0f0f0f0f"
    live = tmp_path / f".corpus-c.tmp-{host}-{os.getppid()}-0e0e0e0e"
    other = tmp_path / f".corpus-d.tmp-otherhost-{dead.pid}-0d0d0d0d"  # another machine's: its own to sweep
    for d in (left / "_spill", live, other):  # build_dir made `mine`
        d.mkdir(parents=True)
    again = build_dir(tmp_path, "corpus-a")
    assert not left.exists() and live.exists() and other.exists() and mine.exists() and again != mine


def test_a_killed_prepares_build_folder_of_another_host_goes_once_its_heartbeat_is_old(tmp_path, monkeypatch, capsys):
    """A KubeRay retry (a new cluster, its head another hostname) or a new launcher head looked only at its own host's
    build folders: a killed prepare's spill and shards (~10 GB on a 20 GB corpus) stayed on the shared volume for good.
    Another host's folder goes once its heartbeat (from before heartbeats: its newest entry) is 30 min old; one whose
    heartbeat is fresh is a prepare running there, and stays however old its files."""
    import os
    import socket
    import threading
    import time

    from pipelines import layout

    def age(folder, seconds):  # every entry's mtime `seconds` ago, the folder's last
        then = time.time() - seconds
        for root, dirs, files in os.walk(folder, topdown=False):
            for entry in files + dirs:
                os.utime(os.path.join(root, entry), (then, then))
        os.utime(folder, (then, then))

    monkeypatch.setattr(socket, "gethostname", lambda: "raycluster-a-head-x7k2p")
    killed, running, legacy, recent = (layout.build_dir(tmp_path, f"corpus-{c}") for c in "abcd")
    for folder in (killed, running, legacy, recent):
        (folder / "_spill").mkdir()
        (folder / "_spill" / "00000000.arrow").write_bytes(b"x" * 3000)
    for folder in (killed, running):
        (folder / layout.HEARTBEAT).touch()
        age(folder, 40 * 60)
    age(legacy, 40 * 60)
    age(recent, 40 * 60)
    (recent / "_spill" / "00000001.arrow").write_bytes(b"x")  # a prepare from before heartbeats, writing
    with layout.heartbeat(running, every=0.05):  # refreshed while it runs, though its spill was written 40 min ago
        age(running, 40 * 60)
        time.sleep(0.3)
        assert time.time() - (running / layout.HEARTBEAT).stat().st_mtime < 5
        monkeypatch.setattr(socket, "gethostname", lambda: "raycluster-b-head-m9q4z")  # the retry's new cluster
        mine = layout.build_dir(tmp_path, "corpus-a")
        assert not killed.exists() and not legacy.exists() and running.exists() and recent.exists()
    assert mine.is_dir() and mine.name.startswith(".corpus-a.tmp-") and mine.name != killed.name
    assert not (running / layout.HEARTBEAT).exists() and "prepare-heartbeat" not in {
        t.name for t in threading.enumerate()}  # stopped, its file gone before the folder becomes the set
    out = capsys.readouterr().out
    assert f"removed {killed} (0.00 GiB)" in out and f"removed {legacy}" in out and "40 min old" in out


def test_a_page_id_twice_in_one_dump_keeps_each_text_once(tmp_path):
    """A wiki page id is a document's uid: two copies of page 7 (and a revision of it) shared one, and dropping
    the duplicate by uid dropped every page 7: the article gone, documents_read short."""
    from bert_core.tokenizer import SpecialIds, train_wordpiece
    from pipelines.layout import ShardLayout
    from pipelines.rejects import RejectLog
    from pipelines.spill import DocumentTokenizer

    body = "{} is a thing that exists in the world and has been studied for many years by many people. It is very " \
           "interesting. Researchers agree it is one of the most notable things around today and write about it."
    pages = [(7, "Alpha", 1), (7, "Alpha", 1), (7, "Gamma", 3), (8, "Beta", 1)]  # Gamma's revision: 3 x the text
    dump = tmp_path / "w.xml"
    dump.write_text('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">\n' + "".join(
        f"<page><title>{t}</title><ns>0</ns><id>{i}</id><revision><id>1</id><text>{' '.join([body.format(t)] * n)}"
        "</text></revision></page>\n" for i, t, n in pages) + "</mediawiki>\n")
    cfg = DataConfig(sources=[str(dump)], num_shards=1, eval_fraction=0.0)
    layout = ShardLayout.plan(cfg, 1000)
    tok = train_wordpiece([dump.read_text()] * 3, 200)
    (tmp_path / "_spill").mkdir()
    unit = {"unit": 0, "bytes": 1, "parts": [{"path": str(dump), "name": "w.xml", "rank": 0, "start": 0, "end": -1,
                                              "first": 0, "bytes": 1, "kind": "whole"}]}
    stats = DocumentTokenizer(tok.to_str(), tok.get_vocab_size(), cfg, layout, str(tmp_path / "_spill"))(
        pa.Table.from_pylist([unit]))
    rejects = RejectLog()
    (task,) = prepare._shard_tasks(stats, layout, rejects)
    row = prepare._build_shard(pa.Table.from_pylist([task]), cfg, layout, SpecialIds.from_tokenizer(tok),
                               tok.get_vocab_size(), None, str(tmp_path)).to_pylist()[0]
    assert rejects.counts["duplicate"] == 1 and row["documents"] == 3  # Alpha once, Gamma, Beta
    assert row["sentences"] == 3 + 9 + 3  # Gamma kept: a copy of Alpha goes, not the revision


def jsonl_file(path, texts: list[str]) -> str:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return str(path)


def distinct_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [". ".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(6)) + f". {i}." for i in range(n)]


def test_a_train_document_copying_a_held_out_one_is_not_in_the_tokenizer_sample(tmp_path, monkeypatch):
    """Dedup of the sample is over every good document, held-out ones included: a train document that copies an eval
    document (which has the smaller doc_id) is a duplicate, dropped as the shards drop it, so the tokenizer is not
    trained on text only the eval split holds."""
    from pipelines.spill import book_names, split_key

    texts = distinct_texts(40)
    cfg = DataConfig(sources=["x"], eval_fraction=0.3, tokenizer=TokenizerConfig(sample_documents=1000)).validate()
    path = tmp_path / "part.jsonl"
    inputs = fingerprint_inputs([jsonl_file(path, texts)])
    layout = ShardLayout.plan(cfg, inputs[0]["bytes"])
    units = group_units(file_parts([str(path)], inputs, cfg, 1 << 30), 1 << 30)
    books = book_names(units[0], cfg, layout)
    held_out = [layout.is_eval(split_key(cfg.seed, f"part.jsonl#{i}", books)) for i in range(len(texts))]
    first_eval = held_out.index(True)
    copy = next(i for i in range(first_eval + 1, len(texts)) if not held_out[i])
    texts[copy] = texts[first_eval]
    inputs = fingerprint_inputs([jsonl_file(path, texts)])
    monkeypatch.setattr(ray.data, "from_items", lambda items, override_num_blocks: LocalDataset(
        [pa.Table.from_pylist([item]) for item in items], []))
    sample = tokenizer_sample(group_units(file_parts([str(path)], inputs, cfg, 1 << 30), 1 << 30), cfg, layout)
    assert texts[first_eval] not in sample
    assert sorted(sample) == sorted(t for i, t in enumerate(texts) if not held_out[i] and i != copy)


def test_the_smallest_doc_id_of_a_duplicate_pair_survives_whatever_order_the_units_arrive_in(tmp_path):
    """Stats of the tokenizing tasks reach the driver as tasks finish: dedup keeps the copy with the smallest uid
    (file rank, then record), not the first to arrive, or one set name could hold different contents."""
    from bert_core.tokenizer import train_wordpiece
    from pipelines.spill import RECORD_BITS, DocumentTokenizer

    texts = distinct_texts(6)
    files = [jsonl_file(tmp_path / "a.jsonl", texts[:3]), jsonl_file(tmp_path / "b.jsonl", [texts[1], *texts[3:]])]
    cfg = DataConfig(sources=files, num_shards=1, eval_fraction=0.0).validate()
    inputs = fingerprint_inputs(files)
    layout = ShardLayout.plan(cfg, 1000)
    units = sorted(group_units(file_parts(files, inputs, cfg, 1 << 30), 1), key=lambda u: -u["unit"])  # b's first
    assert [u["parts"][0]["name"] for u in units] == ["b.jsonl", "a.jsonl"]
    tok = train_wordpiece(texts * 3, 200)
    (tmp_path / "_spill").mkdir()
    tokenize = DocumentTokenizer(tok.to_str(), tok.get_vocab_size(), cfg, layout, str(tmp_path / "_spill"))
    stats = pa.concat_tables([tokenize(pa.Table.from_pylist([u])) for u in units])
    rejects = RejectLog()
    (task,) = prepare._shard_tasks(stats, layout, rejects)
    assert rejects.counts["duplicate"] == 1
    assert [(uid >> RECORD_BITS, uid & ((1 << RECORD_BITS) - 1)) for uid, *_ in task["drop"]] == [(1, 0)]  # b#0


class LocalRows:
    """ray.data's from_items -> map_batches (numpy batches of one row) -> iter_rows, run here."""

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def map_batches(self, fn, batch_size, **_):
        import numpy as np

        out = [fn({k: np.array([v]) for k, v in row.items()}) for row in self.rows]
        return LocalRows([{k: v[0] for k, v in batch.items()} for batch in out])

    def iter_rows(self):
        return iter(self.rows)


def test_number_lines_gives_each_range_the_newlines_of_every_range_before_it(tmp_path, monkeypatch):
    """A range's `first` is the line its doc_ids count from: the newlines before its start in its file, summed over
    every range before it (the third range of a file counted only the second's, and its doc_ids collided)."""
    from pipelines.units import MIN_UNIT_BYTES, count_newlines, number_lines

    files = []
    for name, width in (("a.txt", 70), ("b.txt", 130)):
        line = ("x" * (width - 1) + "\n").encode()
        (tmp_path / name).write_bytes(line * (int(3.5 * MIN_UNIT_BYTES) // len(line)))
        files.append(str(tmp_path / name))
    cfg = DataConfig(sources=files, num_workers=1).validate()
    parts = file_parts(files, fingerprint_inputs(files), cfg, MIN_UNIT_BYTES)
    assert [p["kind"] for p in parts] == ["bytes"] * 8
    monkeypatch.setattr(ray.data, "from_items", lambda items, override_num_blocks: LocalRows(items))
    numbered = number_lines(parts)
    assert [p["first"] for p in numbered] == [count_newlines(p["path"], 0, p["start"]) for p in parts]
    for f in files:  # each file's count from 0, rising range by range
        firsts = [p["first"] for p in numbered if p["path"] == f]
        assert firsts[0] == 0 and firsts == sorted(set(firsts)) and len(firsts) == 4
