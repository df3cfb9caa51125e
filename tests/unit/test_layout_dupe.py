"""dupe_factor and the shard layout: a shard is the pool random-next B segments are drawn from, so its documents do
not shrink with the number of passes over them (pipelines/layout.py), and a shard task builds and writes the passes
one after another (pipelines/prepare.py `_pass_tables`), so its memory does not grow with them either."""

from __future__ import annotations

import collections
import hashlib
import json
import random
import weakref

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bert_core.tokenizer import SpecialIds, train_wordpiece
from pipelines import prepare
from pipelines.config import DataConfig
from pipelines.examples import Example, bucket_seed, create_examples, document_key
from pipelines.layout import PIPELINE_VERSION, ShardLayout, dataset_name, hashed_config
from pipelines.rejects import RejectLog
from pipelines.shards import FORMAT_VERSION, write_shard
from pipelines.spill import DocumentTokenizer
from pipelines.units import file_parts, group_units

WORDS = "the of and a in to was is for on as by with he at from his an were are which this".split()


def documents_per_shard(layout: ShardLayout, keys: list[int]) -> list[int]:
    counts = collections.Counter(layout.shard_of(k) for k in keys)
    return [counts[s] for s in range(layout.num_train)]


def test_dupe_factor_does_not_shrink_the_documents_of_a_shard():
    """60 books of ~1 MiB: sized times dupe_factor=10, 38 shards held 1.6 books each, a fifth of them one or none
    (random-next pairs fell from 50% to 39%); the passes are over the same shards' documents."""
    keys = [document_key(12345, f"book-{i}") for i in range(60)]
    input_bytes = 60 << 20
    one, ten = (ShardLayout.plan(DataConfig(sources=["x"], dupe_factor=d, eval_fraction=0.0), input_bytes)
                for d in (1, 10))
    assert one.num_train == 4
    assert documents_per_shard(ten, keys) == documents_per_shard(one, keys)
    assert min(documents_per_shard(ten, keys)) >= 5
    given = DataConfig(sources=["x"], dupe_factor=10, num_shards=7)  # a count the user set stays theirs
    assert ShardLayout.plan(given, input_bytes).num_train == 7


def earlier_name(cfg: DataConfig, inputs: list[dict]) -> str:
    """A set's name before shards stopped growing with dupe_factor (test_prepared_names.earlier_name)."""
    spec = {"format_version": FORMAT_VERSION, "pipeline_version": PIPELINE_VERSION, "inputs": inputs,
            "config": hashed_config(cfg), "tokenizer_hash": None}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def test_only_sets_of_several_dupe_passes_are_renamed():
    """dupe_factor > 1 gives fewer shards (num_shards=0) and rows in another order: an old set of that config is not
    reused. dupe_factor=1 gives the same shards, byte for byte: the same name, so an interrupted pretraining on it can
    be resubmitted (a PIPELINE_VERSION bump would rename every set)."""
    inputs = [{"path": "/corpus/books.txt", "bytes": 1 << 30, "sha256": "0" * 64}]
    for kw, renamed in (({}, False), ({"num_shards": 12}, False), ({"dupe_factor": 5, "num_shards": 12}, True),
                        ({"dupe_factor": 5}, True)):
        cfg = DataConfig(sources=["/corpus"], **kw)
        assert (dataset_name(cfg, inputs, None) != earlier_name(cfg, inputs)) == renamed, kw


@pytest.fixture(scope="module")
def shard_task(tmp_path_factory):
    """One shard's spilled documents (40 JSON Lines documents of 3-12 sentences) and a tokenizer trained on them."""
    root = tmp_path_factory.mktemp("dupe")
    rng, texts = random.Random(0), []
    for _ in range(40):
        texts.append(". ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
                               for _ in range(rng.randint(3, 12))) + ".")
    corpus = root / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    tok = train_wordpiece(texts, 200)
    cfg = DataConfig(sources=[str(corpus)], num_shards=1, eval_fraction=0.0, max_seq_len=32, min_document_chars=10)
    layout = ShardLayout.plan(cfg, 1)
    (root / "spill").mkdir()
    [unit] = group_units(file_parts([str(corpus)], [{"bytes": corpus.stat().st_size}], cfg, 1 << 20), 1 << 20)
    stats = DocumentTokenizer(tok.to_str(), tok.get_vocab_size(), cfg, layout, str(root / "spill"))(
        pa.Table.from_pylist([unit]))
    (task,) = prepare._shard_tasks(stats, layout, RejectLog())
    return task, tok, layout, root


def build(shard_task, out, **overrides) -> dict:
    task, tok, layout, _ = shard_task
    cfg = DataConfig(sources=["x"], num_shards=1, eval_fraction=0.0, max_seq_len=32, **overrides)
    return prepare._build_shard(pa.Table.from_pylist([task]), cfg, layout, SpecialIds.from_tokenizer(tok),
                                tok.get_vocab_size(), None, str(out)).to_pylist()[0]


def test_a_shard_task_holds_one_dupe_pass_of_examples_at_a_time(shard_task, tmp_path, monkeypatch):
    """Its shard no longer shrinks with dupe_factor, so a task holding every pass's Example objects (~0.5 KB each)
    at once would need dupe_factor times the memory: each pass's become columns before the next is built."""
    made: list[weakref.ref[Example]] = []
    alive_at_start = []

    def counted(*args, **kwargs):
        alive_at_start.append(sum(ref() is not None for ref in made))
        for example in create_examples(*args, **kwargs):
            made.append(weakref.ref(example))
            yield example

    monkeypatch.setattr(prepare, "create_examples", counted)
    row = build(shard_task, tmp_path, dupe_factor=4, masking="static")
    assert len(alive_at_start) == 4 and row["rows"] > 100
    assert alive_at_start == [0, 0, 0, 0]


def test_a_shard_holds_its_passes_one_after_another_the_first_as_a_one_pass_shard(shard_task, tmp_path):
    """Pass p's examples, shuffled by the shard's seed for p, follow pass p-1's in the file, example ids in file
    order; the first pass is, byte for byte, the shard a one-pass set writes (whose seeds it keeps)."""
    task, tok, layout, _ = shard_task
    cfg = DataConfig(sources=["x"], num_shards=1, eval_fraction=0.0, max_seq_len=32, debug_doc_ids=True)
    row = build(shard_task, tmp_path / "three", dupe_factor=3, debug_doc_ids=True)
    table = pq.read_table(tmp_path / "three" / row["file"])
    group = prepare.read_spill(task["spill"], task["batch"], pa.uint16())
    docs = [d for d in prepare._documents_of(group.sort_by("key")) if d.num_sentences]
    special, expected = SpecialIds.from_tokenizer(tok), []
    for dupe_pass in range(3):
        rng = random.Random(bucket_seed(cfg.seed, "train", 0, dupe_pass))
        examples = list(create_examples(docs, cfg, special.cls, special.sep, rng))
        random.Random(bucket_seed(cfg.seed, "train", 0, -1 - 2 * dupe_pass)).shuffle(examples)
        expected += examples
    assert table.num_rows == row["rows"] == len(expected) > 300
    assert table.column("example_id").to_pylist() == list(range(len(expected)))
    assert table.column("input_ids").to_pylist() == [e.input_ids.tolist() for e in expected]
    assert table.column("doc_id_b").to_pylist() == [docs[e.doc_b].doc_id for e in expected]
    assert table.column("b_end").to_pylist() == [e.b_end for e in expected]
    assert row["random_next"] == sum(e.is_random_next for e in expected)
    assert row["tokens"] == sum(e.num_tokens for e in expected) and sum(row["histogram"]) == len(expected)

    one = build(shard_task, tmp_path / "one", dupe_factor=1, debug_doc_ids=True)
    first = pq.read_table(tmp_path / "one" / one["file"])
    assert table.slice(0, first.num_rows).equals(first)
    # One table, written as the shard writer wrote it before passes (pq.write_table): the same bytes.
    write_shard(first, tmp_path / "a" / "train" / "x.parquet")
    pq.write_table(first, tmp_path / "b.parquet", compression="zstd", use_dictionary=False, row_group_size=8192)
    assert (tmp_path / "a" / "train" / "x.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
