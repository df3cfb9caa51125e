"""Raw corpus -> a prepared pretraining set: tokenizer, parquet example shards, manifest.

    documents (sources.read_documents, drop_duplicates)          one row per document
      -> keys: doc key = hash(seed, doc_id) -> split and shard   (_assign_shards, tasks)
      -> tokenizer: given, or trained on the smallest-key train documents
      -> sentences tokenized, once per actor                     (SentenceTokenizer, actor pool)
      -> groupby(shard).map_groups(_build_shard)                 examples.py + shards.py, per shard
      -> manifest.json; temp dir renamed to <output_root>/<name>/

Scale and determinism: every random choice derives from (seed, doc_id) or (seed, shard, pass),
never from worker count or block layout. A shard is a bucket of documents picked by key, so it
is a uniform random sample of the corpus: documents sorted by key inside it are the global
shuffle, and its documents are the pool that random-next B segments are drawn from (the
standard sharded approximation of drawing from the whole corpus). A shard's documents and
examples are the most any worker holds at once, so the corpus itself may exceed memory.

Library code: Ray must be initialised by the caller (jobs connect to their cluster first).
The output root must be a path every node can write (local for one node, a shared file
system otherwise): workers write their shards directly, and the final rename is atomic only
within one POSIX file system.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import time
import uuid
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
from tokenizers import Tokenizer

from bert_core.tokenizer import (SpecialIds, continuation_mask, load_tokenizer, save_tokenizer, tokenizer_hash,
                                 train_wordpiece)
from pipelines.clean import split_sentences
from pipelines.config import DataConfig
from pipelines.examples import (Document, bucket_seed, create_examples, document_key, mask_static,
                                masking_config)
from pipelines.shards import (FORMAT_VERSION, MANIFEST, example_schema, examples_to_table, histogram_bin_width,
                              length_histogram, read_manifest, shard_name, write_manifest, write_shard)
from pipelines.sources import drop_duplicates, read_documents, resolve_sources, summarize_rejects, write_rejects

FULL_HASH_MAX_BYTES = 64 << 20  # inputs up to this size are named by sha256, larger ones by size + mtime
SHARD_TOKEN_BYTES = 64 << 20  # num_shards=0 aims at this many bytes of token ids per shard ...
INPUT_BYTES_PER_TOKEN = 4  # ... estimated from input bytes (English text: ~4-5 bytes per WordPiece)
TOKEN_ID_BYTES = 2  # uint16 ids; the estimate need not follow the rare int32 case
MAX_SHUFFLE_PARTITIONS = 200  # Ray's default; fewer for small sets, where 200 empty partitions cost seconds
TOKENIZE_BATCH_DOCS = 256  # documents per tokenizer call: amortises Python overhead, bounds batch memory


@dataclass
class PreparedData:
    path: str  # <output_root>/<name>: the prepared set
    manifest: dict  # manifest.json's content
    train_files: list[str]  # absolute shard paths, in example_id order
    eval_files: list[str]
    tokenizer_dir: str  # save_tokenizer output: load with bert_core.tokenizer.load_tokenizer
    reused: bool  # True when an identical earlier run's output was returned as is


def _log(stage: str, message: str) -> None:
    print(f"[prepare] {stage}: {message}", flush=True)


# ---------------------------------------------------------------------------------------------
# Naming: the output folder is a function of inputs and config alone


def fingerprint_inputs(files: list[str]) -> list[dict]:
    """sha256 of each input up to FULL_HASH_MAX_BYTES; size + mtime above it (a 100 GB corpus
    is not re-read just to be named)."""
    out = []
    for path in files:
        fs, fpath = fsspec.core.url_to_fs(path)
        info = fs.info(fpath)
        entry = {"path": path, "bytes": int(info["size"])}
        if info["size"] <= FULL_HASH_MAX_BYTES:
            h = hashlib.sha256()
            with fs.open(fpath, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            entry["sha256"] = h.hexdigest()
        else:
            mtime = info.get("mtime") or info.get("LastModified") or info.get("updated")
            entry["mtime"] = str(mtime)
        out.append(entry)
    return out


def hashed_config(cfg: DataConfig) -> dict:
    """The config as it affects the output: not where it goes, how many workers, or where a
    given tokenizer lives (its content hash stands in)."""
    d = dataclasses.asdict(cfg)
    for name in ("num_workers", "output_root"):
        d.pop(name)
    d["tokenizer"].pop("path")
    return d


def dataset_name(cfg: DataConfig, inputs: list[dict], given_tokenizer_hash: str | None) -> str:
    spec = {"format_version": FORMAT_VERSION, "inputs": inputs, "config": hashed_config(cfg),
            "tokenizer_hash": given_tokenizer_hash}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Shard layout: which shard a document's key selects


@dataclass(frozen=True)
class ShardLayout:
    num_train: int
    num_eval: int
    eval_fraction: float

    @classmethod
    def plan(cls, cfg: DataConfig, input_bytes: int) -> "ShardLayout":
        # From the corpus size (and config), never the worker count: the layout decides contents.
        token_bytes = input_bytes / INPUT_BYTES_PER_TOKEN * TOKEN_ID_BYTES * cfg.dupe_factor
        num_train = cfg.num_shards or max(1, math.ceil(token_bytes / SHARD_TOKEN_BYTES))
        num_eval = max(1, round(num_train * cfg.eval_fraction)) if cfg.eval_fraction > 0 else 0
        return cls(num_train, num_eval, cfg.eval_fraction)

    def is_eval(self, key: int) -> bool:
        return key < self.eval_fraction * 2.0**64  # the key's high bits: independent of key % n

    def shard_of(self, key: int) -> int:
        """Global shard index: train shards 0..num_train-1, eval shards after them."""
        return self.num_train + key % self.num_eval if self.is_eval(key) else key % self.num_train

    def split_of(self, shard: int) -> tuple[str, int]:
        return ("train", shard) if shard < self.num_train else ("eval", shard - self.num_train)


def _assign_shards(batch: pa.Table, seed: int, layout: ShardLayout) -> pa.Table:
    keys = [document_key(seed, doc_id) for doc_id in batch.column("doc_id").to_pylist()]
    return (batch.append_column("key", pa.array(keys, pa.uint64()))
            .append_column("shard", pa.array([layout.shard_of(k) for k in keys], pa.int32())))


def _good(batch: pa.Table) -> pa.Table:
    return batch.filter(pc.equal(batch.column("reject_reason"), ""))


# ---------------------------------------------------------------------------------------------
# Tokenizer: given, or trained on a deterministic sample of train documents


def _smallest_train_keys(batch: pa.Table, k: int, num_train: int) -> pa.Table:
    keys = batch.filter(pc.less(batch.column("shard"), num_train)).column("key").to_numpy()
    return pa.table({"key": np.sort(keys)[:k]})


def _sample_rows(batch: pa.Table, threshold: int, num_train: int) -> pa.Table:
    chosen = pc.and_(pc.less(batch.column("shard"), num_train),
                     pc.less_equal(batch.column("key"), pa.scalar(threshold, pa.uint64())))
    return batch.filter(chosen).select(["key", "text"])


def _tokenizer_sample(docs: ray.data.Dataset, cfg: DataConfig, layout: ShardLayout) -> list[str]:
    """Texts of the `sample_documents` train documents with the smallest keys: a uniform sample,
    the same on every run. Two light passes: per-block smallest keys, then those texts."""
    k = cfg.tokenizer.sample_documents
    keys = docs.map_batches(_smallest_train_keys, batch_format="pyarrow",
                            fn_kwargs={"k": k, "num_train": layout.num_train})
    keys = np.sort(np.concatenate([b["key"] for b in keys.iter_batches(batch_format="numpy")] or [[]]))
    if len(keys) == 0:
        raise ValueError("no training documents to train a tokenizer on (all rejected or held out for eval)")
    threshold = int(keys[min(k, len(keys)) - 1])
    sample = docs.map_batches(_sample_rows, batch_format="pyarrow",
                              fn_kwargs={"threshold": threshold, "num_train": layout.num_train})
    rows = sample.take_all()
    return [row["text"] for row in sorted(rows, key=lambda r: r["key"])]


def _prepare_tokenizer(docs, cfg: DataConfig, layout: ShardLayout, out_dir: Path) -> Tokenizer:
    if cfg.tokenizer.path:
        tok = load_tokenizer(cfg.tokenizer.path)
        _log("tokenizer", f"loaded {cfg.tokenizer.path} ({tok.get_vocab_size()} tokens)")
    else:
        t0 = time.perf_counter()
        texts = _tokenizer_sample(docs, cfg, layout)
        tok = train_wordpiece(texts, cfg.tokenizer.vocab_size, cfg.tokenizer.lowercase, cfg.tokenizer.min_frequency)
        _log("tokenizer", f"trained {tok.get_vocab_size()} tokens on {len(texts)} documents "
                          f"in {time.perf_counter() - t0:.1f}s")
    save_tokenizer(tok, out_dir, model_max_length=max(512, cfg.max_seq_len))
    return tok


# ---------------------------------------------------------------------------------------------
# Per-actor and per-shard work


class SentenceTokenizer:
    """Documents -> sentences -> WordPiece ids, one row per document: ids (all sentences back
    to back) and offsets (sentence s = ids[offsets[s]:offsets[s + 1]]). Sentences that give no
    tokens are left out. Loads the tokenizer once per actor."""

    def __init__(self, tokenizer_json: str, vocab_size: int):
        self.tok = Tokenizer.from_str(tokenizer_json)
        self.tok.no_truncation()
        self.tok.no_padding()
        self.ids_type = example_schema(vocab_size, False, False).field("input_ids").type.value_type

    def __call__(self, batch: pa.Table) -> pa.Table:
        per_doc = [split_sentences(text) for text in batch.column("text").to_pylist()]
        encodings = self.tok.encode_batch_fast(list(chain.from_iterable(per_doc)), add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        values = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=self.ids_type.to_pandas_dtype(),
                             count=int(lengths.sum()))
        sentence_doc = np.repeat(np.arange(len(per_doc)), [len(s) for s in per_doc])[lengths > 0]
        starts = np.concatenate([[0], np.cumsum(lengths[lengths > 0])])  # token offset of each kept sentence
        first = np.concatenate([[0], np.cumsum(np.bincount(sentence_doc, minlength=len(per_doc)))])
        offsets = [starts[first[d]:first[d + 1] + 1] - starts[first[d]] for d in range(len(per_doc))]
        return pa.table({
            "doc_id": batch.column("doc_id"),
            "key": batch.column("key"),
            "shard": batch.column("shard"),
            "ids": pa.ListArray.from_arrays(pa.array(starts[first].astype(np.int32)), pa.array(values, self.ids_type)),
            "offsets": pa.array(offsets, pa.list_(pa.int32())),
        })


def _documents_of(group: pa.Table) -> list[Document]:
    ids, offsets = group.column("ids").combine_chunks(), group.column("offsets").combine_chunks()
    values, bounds = ids.values.to_numpy(), ids.offsets.to_numpy()
    sentence_offsets = offsets.values.to_numpy().astype(np.int64)
    sentence_bounds = offsets.offsets.to_numpy()
    return [Document(doc_id, values[bounds[i]:bounds[i + 1]], sentence_offsets[sentence_bounds[i]:sentence_bounds[i + 1]])
            for i, doc_id in enumerate(group.column("doc_id").to_pylist())]


def _build_shard(group: pa.Table, cfg: DataConfig, layout: ShardLayout, special: SpecialIds, vocab_size: int,
                 continuation: np.ndarray | None, out_dir: str) -> pa.Table:
    """One shard's documents -> its examples, written to out_dir; returns one row of statistics."""
    t0 = time.perf_counter()
    shard = int(group.column("shard")[0].as_py())
    split, index = layout.split_of(shard)
    # Sorting by key is the shuffle, and makes the result independent of how rows arrived.
    docs = _documents_of(group.sort_by("key"))
    num_empty = sum(d.num_sentences == 0 for d in docs)
    docs = [d for d in docs if d.num_sentences > 0]  # no sentence, no A segment
    static = cfg.masking == "static"
    mcfg = masking_config(cfg) if static else None
    examples = []
    for dupe_pass in range(cfg.dupe_factor):
        seed = bucket_seed(cfg.seed, split, index, dupe_pass)
        part = list(create_examples(docs, cfg, special.cls, special.sep, random.Random(seed)))
        if static:
            mask_static(part, mcfg, special, vocab_size, seed, continuation)
        examples += part
    # Google shuffles all instances before writing; here all instances of the shard, so
    # neighbouring rows are not consecutive chunks of one document.
    random.Random(bucket_seed(cfg.seed, split, index, -1)).shuffle(examples)
    schema = example_schema(vocab_size, static, cfg.debug_doc_ids)
    example_ids = (np.int64(shard) << 32) + np.arange(len(examples), dtype=np.int64)
    table = examples_to_table(examples, example_ids, schema, [d.doc_id for d in docs])
    entry = write_shard(table, Path(out_dir) / shard_name(split, index))
    num_tokens = table.column("num_tokens").to_numpy()
    return pa.table({
        "split": [split], "index": [index], "file": [entry["file"]], "rows": [entry["rows"]],
        "bytes": [entry["bytes"]], "documents": [len(docs)], "documents_empty": [num_empty],
        "sentences": [sum(d.num_sentences for d in docs)], "tokens": [int(num_tokens.sum())],
        "random_next": [int(pc.sum(table.column("next_sentence_label")).as_py() or 0)],
        "histogram": [length_histogram(num_tokens, cfg.max_seq_len)],
        "seconds": [time.perf_counter() - t0],
    })


# ---------------------------------------------------------------------------------------------
# The orchestration


def _result(path: Path, reused: bool) -> PreparedData:
    manifest = read_manifest(path)
    files = {split: [str(path / s["file"]) for s in manifest["shards"][split]] for split in ("train", "eval")}
    return PreparedData(str(path), manifest, files["train"], files["eval"], str(path / "tokenizer"), reused)


def prepare(cfg: DataConfig) -> PreparedData:
    """Prepare cfg.sources once; later calls with the same inputs and config return it (reused=True)."""
    cfg.validate()
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    files = resolve_sources(cfg)
    inputs = fingerprint_inputs(files)
    given_hash = tokenizer_hash(cfg.tokenizer.path) if cfg.tokenizer.path else None
    name = dataset_name(cfg, inputs, given_hash)
    final = Path(cfg.output_root) / name
    if (final / MANIFEST).exists():
        _log("reuse", f"{final} already prepared for these inputs and config")
        return _result(final, reused=True)
    timings["fingerprint"] = time.perf_counter() - t_start

    layout = ShardLayout.plan(cfg, sum(i["bytes"] for i in inputs))
    _log("plan", f"{len(files)} input files, {layout.num_train} train + {layout.num_eval} eval shards -> {final}")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        manifest = _prepare_into(tmp, cfg, layout, inputs, given_hash, timings)
        timings["total"] = time.perf_counter() - t_start
        manifest["timings_s"] = {k: round(v, 3) for k, v in timings.items()}
        write_manifest(tmp, manifest)
        try:
            os.rename(tmp, final)  # atomic: readers see no set or a complete one
        except OSError:
            if not (final / MANIFEST).exists():
                raise
            shutil.rmtree(tmp)  # a concurrent run with the same name finished first: same content
            return _result(final, reused=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _log("done", f"{manifest['counts']['examples']} examples in {timings['total']:.1f}s -> {final}")
    return _result(final, reused=False)


def _prepare_into(out: Path, cfg: DataConfig, layout: ShardLayout, inputs: list[dict], given_hash: str | None,
                  timings: dict[str, float]) -> dict:
    t0 = time.perf_counter()
    docs = drop_duplicates(read_documents(cfg)).map_batches(
        _assign_shards, batch_format="pyarrow", fn_kwargs={"seed": cfg.seed, "layout": layout})
    rejects = summarize_rejects(docs)
    write_rejects(docs, str(out / "rejects.jsonl"))
    good = docs.map_batches(_good, batch_format="pyarrow")
    timings["read_clean_dedupe"] = time.perf_counter() - t0
    _log("read", f"{sum(rejects.values())} rejected documents {rejects} in {timings['read_clean_dedupe']:.1f}s")

    t0 = time.perf_counter()
    tok = _prepare_tokenizer(good, cfg, layout, out / "tokenizer")
    special, vocab_size = SpecialIds.from_tokenizer(tok), tok.get_vocab_size()
    timings["tokenizer"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    stats_ds = (good.select_columns(["doc_id", "text", "key", "shard"])
                .map_batches(SentenceTokenizer, batch_format="pyarrow", batch_size=TOKENIZE_BATCH_DOCS,
                             compute=ray.data.ActorPoolStrategy(size=cfg.num_workers),
                             fn_constructor_args=(tok.to_str(), vocab_size))
                # Partitions only group the work; contents are fixed by the shard key alone.
                .groupby("shard", num_partitions=min(layout.num_train + layout.num_eval, MAX_SHUFFLE_PARTITIONS))
                .map_groups(_build_shard, batch_format="pyarrow", fn_kwargs={
                    "cfg": cfg, "layout": layout, "special": special, "vocab_size": vocab_size,
                    "continuation": continuation_mask(tok) if cfg.whole_word_masking else None,
                    "out_dir": str(out)}))
    shards = {"train": [], "eval": []}
    totals = {"documents": 0, "documents_empty": 0, "sentences": 0, "tokens": 0, "random_next": 0}
    histogram = None
    for row in stats_ds.iter_rows():
        shards[row["split"]].append(row)
        for k in totals:
            totals[k] += row[k]
        histogram = np.add(histogram if histogram is not None else 0, row["histogram"])
        elapsed = time.perf_counter() - t0
        done = sum(s["rows"] for split in shards.values() for s in split)
        _log("examples", f"{row['file']}: {row['rows']} examples ({done} in all, {done / elapsed:,.0f}/s)")
    timings["examples"] = time.perf_counter() - t0

    counts = {
        "documents_read": totals["documents"] + totals["documents_empty"] + sum(rejects.values()),
        "documents_kept": totals["documents"],
        "documents_without_sentences": totals["documents_empty"],
        "sentences": totals["sentences"],
        "examples_train": sum(s["rows"] for s in shards["train"]),
        "examples_eval": sum(s["rows"] for s in shards["eval"]),
        "tokens": totals["tokens"],
        "random_next": totals["random_next"],
    }
    counts["examples"] = counts["examples_train"] + counts["examples_eval"]
    return {
        "format_version": FORMAT_VERSION,
        "counts": counts,
        "shards": {split: [{k: s[k] for k in ("file", "rows", "bytes", "documents", "tokens")}
                           for s in sorted(rows, key=lambda s: s["index"])] for split, rows in shards.items()},
        "layout": dataclasses.asdict(layout),
        "token_length_histogram": {"bin_width": histogram_bin_width(cfg.max_seq_len),
                                   "counts": [] if histogram is None else histogram.astype(int).tolist()},
        "config": dataclasses.asdict(cfg),
        "tokenizer": {"hash": tokenizer_hash(tok), "vocab_size": vocab_size, "special_ids": dataclasses.asdict(special),
                      "trained": cfg.tokenizer.path is None, "given_hash": given_hash},
        "inputs": {"files": inputs, "full_hash_max_bytes": FULL_HASH_MAX_BYTES},
        "rejects": rejects,
    }
