"""Raw corpus -> a prepared pretraining set: tokenizer, parquet example shards, manifest.

    work units --(tasks: tokenize_unit, one unit per call: small files grouped, big ones split)-----
      read, clean, count rejects, content hash, doc key -> split + shard, sentences, WordPiece
      -> spill: one Arrow IPC file per work unit, one record batch per (chunk, shard)
      -> returns per-unit stats: reject counts and samples, (hash, uid, shard) of good documents
    driver: exact dedup on (hash, uid) pairs alone (sources.find_duplicates)
    shards --(tasks: _build_shard, one shard per call)------------------------------------------
      the shard's spill batches minus duplicates, sorted by key -> examples.py -> static masking
      -> parquet; returns per-shard stats
    manifest.json, rejects.jsonl; temp dir renamed to <output_root>/<name>/

Why this shape (it replaced a Ray Data groupby over a materialised document set): every input
byte is read, cleaned and tokenized in ONE pass, in parallel; dedup needs only 24 bytes a
document on the driver, not a shuffle of texts; the shuffle of tokenized documents into shards
goes through local spill files (written once, memory-mapped once), so memory is bounded by one
input chunk per task and one shard's dupe pass per task whatever the corpus size, and nothing but small
stats rows crosses the object store. Duplicates are tokenized before they are known and dropped
at shard building: exact duplicates are a few percent of real corpora.

Scale and determinism: every random choice derives from (seed, doc_id) or (seed, shard, pass),
never from worker count or block layout. A shard is a bucket of documents picked by key, so it
is a uniform random sample of the corpus: documents sorted by key inside it are the global
shuffle, and its documents are the pool that random-next B segments are drawn from (the
standard sharded approximation of drawing from the whole corpus).

Library code: Ray must be initialised by the caller (jobs connect to their cluster first).
The output root must be a path every node can write (local for one node, a shared file
system otherwise): workers write spill files and shards directly, and the final rename is
atomic only within one POSIX file system.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
from ray.data._internal.execution.backpressure_policy import (
    ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, ConcurrencyCapBackpressurePolicy)
from tokenizers import Tokenizer

from bert_core.tokenizer import (SpecialIds, continuation_mask, given_tokenizer, save_tokenizer, tokenizer_hash,
                                 train_wordpiece)
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.dedup import dropped_rows
from pipelines.examples import (PAIR_RULES, Document, bucket_seed, create_examples, cut_long_sentences,
                                mask_static_flat, masking_config, nsp_warning)
from pipelines.shards import (FORMAT_VERSION, MANIFEST, check_shards, example_schema, examples_to_table,
                              histogram_bin_width, length_histogram, read_manifest, shard_name, token_type,
                              write_manifest, write_shard)
from pipelines.rejects import RejectLog, cuts_said, rejected_documents
from pipelines.prepared_sets import corpus_files
from pipelines.set_counts import set_counts, unknown_tokens_warning
from pipelines.sources import TEXT_DOCUMENT_BYTES, named_plain_text, read_as_book, read_format
from pipelines.layout import (FULL_HASH_MAX_BYTES, MIN_HELD_OUT_BOOKS, ShardLayout, build_dir, fingerprint_inputs,
                              heartbeat, prepared_name, text_heads)
from pipelines.spill import RECORD_BITS, read_spill, tokenize_unit
from pipelines.text_source import blank_line_documents, check_line_ends, file_head
from pipelines.tokenizer_sample import (dedup_mask, flat, stripped_marks_warning, tokenizer_sample,
                                       unknown_pieces_warning)
from pipelines.units import check_file_count, plan_units


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
# Tokenizer: given, or trained on a deterministic sample of train documents


def _stats_table(ds: ray.data.Dataset, on_batch=None) -> pa.Table:
    """All rows of a per-file stats dataset as one Arrow table: its list columns hold a number
    per document, kept as Arrow/numpy (8 bytes each) rather than Python ints (~36). `on_batch` sees
    each batch as it arrives (progress)."""
    batches = []
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        batches.append(batch)
        if on_batch is not None:
            on_batch(batch)
    return pa.concat_tables(batches)


class ReadProgress:
    """`[prepare] read: ...` while work units are tokenized, at most every `every` seconds: units and bytes
    done of the total, the rate and an ETA. Quiet on runs shorter than `every`."""

    def __init__(self, units: list[dict], every: float = 15.0):
        self.size = {u["unit"]: u["bytes"] for u in units}
        self.total, self.done, self.count, self.every = sum(self.size.values()), 0, 0, every
        self.t0 = self.last = time.perf_counter()

    def __call__(self, batch: pa.Table) -> None:
        for unit in batch.column("unit").to_pylist():
            self.done, self.count = self.done + self.size[unit], self.count + 1
        now = time.perf_counter()
        if now - self.last >= self.every and self.count < len(self.size):
            self.last, rate = now, self.done / max(now - self.t0, 1e-9)
            _log("read", f"{self.count}/{len(self.size)} work units, {self.done / 2**20:,.1f} of "
                         f"{self.total / 2**20:,.1f} MiB ({rate / 2**20:,.2f} MiB/s), "
                         f"eta {(self.total - self.done) / max(rate, 1e-9):,.0f}s")


def _given_tokenizer(t: TokenizerConfig) -> Tokenizer:
    """data.tokenizer.path as pretraining uses it, refused as a setting where it cannot be (given_tokenizer)."""
    return given_tokenizer(t.path, t.lowercase, t.strip_accents)


def _prepare_tokenizer(units: list[dict], cfg: DataConfig, layout: ShardLayout, out_dir: Path,
                       given: Tokenizer | None) -> Tokenizer:
    """`given` (data.tokenizer.path as _given_tokenizer loaded it), or one trained on the sample; saved to out_dir."""
    t = cfg.tokenizer
    if given is not None:
        tok = given
        norm = json.loads(tok.to_str())["normalizer"]
        _log("tokenizer", f"loaded {t.path} ({tok.get_vocab_size()} tokens, lowercase={norm['lowercase']}, "
                          f"strip_accents={norm['strip_accents']})")
    else:
        t0 = time.perf_counter()
        texts = tokenizer_sample(units, cfg, layout)
        if said := stripped_marks_warning(texts, t):
            _log("tokenizer", said)
        tok = train_wordpiece(texts, t.vocab_size, t.lowercase is not False, t.min_frequency, t.strip_accents,
                              t.limit_alphabet)
        _log("tokenizer", f"trained {tok.get_vocab_size()} tokens on {len(texts)} documents "
                          f"in {time.perf_counter() - t0:.1f}s")
        if said := unknown_pieces_warning(tok, texts):
            _log("tokenizer", said)
    save_tokenizer(tok, out_dir, model_max_length=max(512, cfg.max_seq_len))
    return tok


# ---------------------------------------------------------------------------------------------
# Per-shard work


def _documents_of(group: pa.Table) -> list[Document]:
    ids, offsets = group.column("ids").combine_chunks(), group.column("offsets").combine_chunks()
    values, bounds = ids.values.to_numpy(), ids.offsets.to_numpy()
    sentence_offsets = offsets.values.to_numpy().astype(np.int64)
    sentence_bounds = offsets.offsets.to_numpy()
    return [Document(doc_id, values[bounds[i]:bounds[i + 1]],
                     sentence_offsets[sentence_bounds[i]:sentence_bounds[i + 1]])
            for i, doc_id in enumerate(group.column("doc_id").to_pylist())]


def _with_static_masking(table: pa.Table, cfg: DataConfig, special: SpecialIds, vocab_size: int, seed: int,
                         continuation: np.ndarray | None) -> pa.Table:
    """The shard's examples table with input_ids masked and masked_positions / masked_ids added."""
    ids = table.column("input_ids").combine_chunks()
    values, counts, positions, originals = mask_static_flat(
        ids.values.to_numpy(), ids.offsets.to_numpy(), table.column("num_a_tokens").to_numpy().astype(np.int64),
        masking_config(cfg), special, vocab_size, seed, continuation)
    ids_type = ids.type.value_type
    bounds = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    schema = example_schema(vocab_size, True, cfg.debug_doc_ids)
    columns = {name: table.column(name) for name in table.column_names}
    columns["input_ids"] = pa.ListArray.from_arrays(ids.offsets, pa.array(values.astype(ids_type.to_pandas_dtype())))
    columns["masked_positions"] = pa.ListArray.from_arrays(bounds, pa.array(positions.astype(np.int16)))
    columns["masked_ids"] = pa.ListArray.from_arrays(bounds, pa.array(originals.astype(ids_type.to_pandas_dtype())))
    return pa.table({name: columns[name] for name in schema.names}, schema=schema)


def _pass_tables(docs: list[Document], cfg: DataConfig, layout: ShardLayout, shard: int, special: SpecialIds,
                 vocab_size: int, continuation: np.ndarray | None, skipped: Counter, seen: list):
    """The shard's examples as tables, one dupe pass after another, for write_shard to write as they come: a task
    holds one pass's examples, however many passes (a shard's documents do not shrink with them, ShardLayout.plan).
    Appends each pass's (num_tokens, random-next pairs, [UNK] tokens) to `seen`; example ids run on across passes."""
    split, index = layout.split_of(shard)
    first = np.int64(shard) << 32
    for dupe_pass in range(cfg.dupe_factor):
        rng = random.Random(bucket_seed(cfg.seed, split, index, dupe_pass))
        examples = list(create_examples(docs, cfg, special.cls, special.sep, rng, skipped))
        # Google shuffles all instances before writing; here a pass's, so neighbouring rows are not consecutive
        # chunks of one document. Pass 0 shuffles and masks with the seeds a one-pass set was built with.
        random.Random(bucket_seed(cfg.seed, split, index, -1 - 2 * dupe_pass)).shuffle(examples)
        table = examples_to_table(examples, first + np.arange(len(examples), dtype=np.int64),
                                  example_schema(vocab_size, False, cfg.debug_doc_ids), [d.doc_id for d in docs])
        first += len(examples)
        del examples
        unknown = pc.sum(pc.equal(pc.list_flatten(table.column("input_ids")), special.unk)).as_py() or 0
        if cfg.masking == "static" and table.num_rows:
            table = _with_static_masking(table, cfg, special, vocab_size,
                                         bucket_seed(cfg.seed, split, index, -2 - 2 * dupe_pass), continuation)
        elif cfg.masking == "static":
            table = example_schema(vocab_size, True, cfg.debug_doc_ids).empty_table()
        labels = table.column("next_sentence_label")
        seen.append((table.column("num_tokens").to_numpy(), int(pc.sum(labels).as_py() or 0), unknown))
        yield table


def _build_shard(batch: pa.Table, cfg: DataConfig, layout: ShardLayout, special: SpecialIds, vocab_size: int,
                 continuation: np.ndarray | None, out_dir: str) -> pa.Table:
    """One shard's spilled documents -> its examples, written to out_dir; one row of statistics."""
    t0 = time.perf_counter()
    task = batch.to_pylist()[0]
    shard = task["shard"]
    split, index = layout.split_of(shard)
    group = read_spill(task["spill"], task["batch"], token_type(vocab_size))
    dropped = pa.array(dropped_rows(*(group.column(c).to_numpy() for c in ("uid", "hash_hi", "hash_lo")),
                                    task["drop"]))
    wanted = group.filter(pc.and_(dropped, pc.is_in(group.column("uid"), pa.array(task["sample"], pa.int64()))))
    duplicate_samples = [{"uid": u, "doc_id": d, "sample": s} for u, d, s in zip(
        *(wanted.column(c).to_pylist() for c in ("uid", "doc_id", "sample")))]
    # Sorting by key is the shuffle, and makes the result independent of how rows arrived.
    docs = _documents_of(group.filter(pc.invert(dropped)).sort_by("key"))
    num_empty = sum(d.num_sentences == 0 for d in docs)
    docs = [d for d in docs if d.num_sentences > 0]  # no sentence, no A segment
    num_sentences = sum(d.num_sentences for d in docs)
    cut = [cut_long_sentences(d, cfg.max_seq_len - 3) for d in docs]
    docs, sentences_cut = [d for d, _ in cut], sum(n for _, n in cut)
    skipped, seen = Counter(), []
    entry = write_shard(_pass_tables(docs, cfg, layout, shard, special, vocab_size, continuation, skipped, seen),
                        Path(out_dir) / shard_name(split, index))
    num_tokens = np.concatenate([lengths for lengths, _, _ in seen])
    return pa.Table.from_pylist([{
        "split": split, "index": index, "file": entry["file"], "rows": entry["rows"],
        "bytes": entry["bytes"], "documents": len(docs), "documents_empty": num_empty,
        "sentences": num_sentences, "sentences_cut": sentences_cut, "tokens": int(num_tokens.sum()),
        "random_next": sum(random_next for _, random_next, _ in seen),
        "unknown_tokens": sum(unknown for _, _, unknown in seen),
        "sentences_dropped": sum(skipped.values()),
        "histogram": length_histogram(num_tokens, cfg.max_seq_len),
        "duplicate_samples": json.dumps(duplicate_samples), "seconds": time.perf_counter() - t0,
    }])


# ---------------------------------------------------------------------------------------------
# The orchestration


def _result(path: Path, reused: bool) -> PreparedData:
    manifest = read_manifest(path)
    if reused:
        check_shards(path, manifest)
    files = {split: [str(path / s["file"]) for s in manifest["shards"][split]] for split in ("train", "eval")}
    return PreparedData(str(path), manifest, files["train"], files["eval"], str(path / "tokenizer"), reused)


def prepare(cfg: DataConfig) -> PreparedData:
    """Prepare cfg.sources once; later calls with the same inputs and config return it (reused=True)."""
    cfg.validate()
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    files, skipped = corpus_files(cfg)  # less the prepared sets among them
    if skipped:
        _log("sources", skipped)
    check_file_count(len(files))  # before the long passes over them
    inputs = fingerprint_inputs(files)
    given = _given_tokenizer(cfg.tokenizer) if cfg.tokenizer.path else None
    given_hash = tokenizer_hash(given) if given is not None else None
    formats = {f: read_format(f, cfg) for f in files}  # a file no name places or named text: sniffed once, for below
    texts = [f for f in files if formats[f] == "text"]
    plain = cfg.text_documents != "blank_lines" or len(texts) == len(files)
    heads = text_heads(texts, inputs, cfg)  # what the reader changes that rename a set left in the files' heads
    name = prepared_name(cfg, inputs, given_hash, plain, heads.gutenberg, formats, moved_cuts=heads.moved_cuts,
                         spaced_quotes=heads.spaced_quotes)  # or its older name
    final = Path(cfg.output_root) / name
    if (final / MANIFEST).exists():
        _log("reuse", f"{final} already prepared for these inputs and config")
        return _result(final, reused=True)
    timings["fingerprint"] = time.perf_counter() - t_start

    cfg = _with_tokenizing_tasks(cfg)
    books = [i for f, i in zip(files, inputs)  # read_as_book, from the heads read above
             if cfg.text_documents == "books" and formats[f] == "text"]
    layout = ShardLayout.plan(cfg, sum(i["bytes"] for i in inputs), books=len(books))
    _log("plan", f"{len(files)} input files, {layout.num_train} train + {layout.num_eval} eval shards, "
                 f"{cfg.num_workers} tokenizing tasks at once -> {final}")
    cut = sum(i["bytes"] > TEXT_DOCUMENT_BYTES for i in books)
    if cut and not layout.whole_books and cfg.eval_fraction > 0:
        _log("warning", f"{cut} of the {len(books)} books are cut into ~1 MiB documents, held out one by one: the "
                        f"eval split holds pieces of books train reads (whole books need data.eval_fraction x books "
                        f">= {MIN_HELD_OUT_BOOKS}); its scores are of text the model has seen the rest of")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = build_dir(final.parent, name)
    try:
        with heartbeat(tmp):  # while this runs, a prepare on another host (a KubeRay retry's) leaves tmp alone
            manifest = _prepare_into(tmp, cfg, layout, files, inputs, given, given_hash, timings)
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


def _with_tokenizing_tasks(cfg: DataConfig) -> DataConfig:
    """cfg with data.num_workers=0 made the Ray cluster's CPUs now (an explicit count stays): one tokenizing task
    per CPU, where a fixed default left a 16-CPU cluster running 2. An autoscaling cluster's nodes that have not
    started yet are not counted. Units are sized from it too, and the manifest records it."""
    if cfg.num_workers:
        return cfg
    return dataclasses.replace(cfg, num_workers=max(1, int(ray.cluster_resources().get("CPU", 0))))


def _tokenize_units(units: list[dict], tok: Tokenizer, cfg: DataConfig, layout: ShardLayout,
                    spill_dir: Path) -> pa.Table:
    spill_dir.mkdir()
    pool = ray.data.TaskPoolStrategy(size=min(cfg.num_workers, len(units)))
    return _stats_table(_one_block_each(units).map_batches(
        tokenize_unit, batch_size=1, batch_format="pyarrow", compute=pool,
        fn_args=(tok.to_str(), tok.get_vocab_size(), cfg, layout, str(spill_dir))), ReadProgress(units))


def _one_block_each(items: list[dict]) -> ray.data.Dataset:
    """A dataset of one block per item (a work unit, a shard) for one map operator, without Ray Data's
    per-operator resource reservation and its budget and downstream-capacity backpressure (on this dataset's
    context only). With one operator, inputs already in memory and small stats rows out, these only held the map
    below its CPUs: the reservation until the first task's output size was known (on 2 CPUs the second unit
    started when the first ended), backpressure now and then mid-run. The concurrency-cap policy stays: it is
    what enforces a task pool's size (`data.num_workers` tokenizing tasks at once; without it every free CPU ran
    one, issue 26), and it only caps while Ray Data's dynamic output-queue backpressure is off (the default).
    Ray's CPU accounting bounds the rest."""
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    ds.context.op_resource_reservation_enabled = False
    ds.context.set_config(ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, [ConcurrencyCapBackpressurePolicy])
    return ds


def _shard_tasks(files: pa.Table, layout: ShardLayout, rejects: RejectLog) -> list[dict]:
    """Dedup on the driver, then what each shard task reads (spill batches, in unit order) and
    drops. `files` holds DocumentTokenizer's per-unit rows. Linear in units and documents."""
    num_shards = layout.num_train + layout.num_eval
    uids, dup = dedup_mask(files)
    if dup.any():
        rejects.counts["duplicate"] += int(dup.sum())
    parts = [[] for _ in range(num_shards)]
    meta = files.select(["unit", "spill", "spill_shards"]).to_pylist()
    for f in sorted(meta, key=lambda f: f["unit"]):
        for batch, shard in enumerate(f["spill_shards"]):
            parts[shard].append((f["spill"], batch))
    # a dropped row by (uid, its text's hash): several documents may share a uid (dedup.dropped_rows)
    drop = np.stack([uids, *(flat(files, h).view(np.int64) for h in ("hash_hi", "hash_lo"))], axis=1)[dup]
    drop_shard = flat(files, "doc_shard")[dup]
    order = np.argsort(drop_shard, kind="stable")
    drop, drop_shard = drop[order], drop_shard[order]
    bounds = np.searchsorted(drop_shard, np.arange(num_shards + 1))
    sampled = set(np.sort(drop[:, 0])[:rejects.samples_per_reason].tolist())  # reported in rejects.jsonl
    tasks = []
    for shard in range(num_shards):
        dropped = drop[bounds[shard]:bounds[shard + 1]].tolist()
        tasks.append({"shard": shard, "spill": [p[0] for p in parts[shard]], "batch": [p[1] for p in parts[shard]],
                      "drop": dropped, "sample": [d[0] for d in dropped if d[0] in sampled]})
    return tasks


def _prepare_into(out: Path, cfg: DataConfig, layout: ShardLayout, files: list[str], inputs: list[dict],
                  given: Tokenizer | None, given_hash: str | None, timings: dict[str, float]) -> dict:
    t0 = time.perf_counter()
    units = plan_units(files, inputs, cfg)
    timings["plan"] = time.perf_counter() - t0
    check_line_ends([f for f in files if named_plain_text(f, cfg)])  # before the long part, as the warnings
    warned = [w for w in (_document_warning(cfg, files),) if w]
    for line in warned:
        _log("warning", line)
    _log("plan", f"{len(files)} files -> {len(units)} work units of up to "
                 f"{max(u['bytes'] for u in units) / 2**20:.1f} MiB")
    t0 = time.perf_counter()
    tok = _prepare_tokenizer(units, cfg, layout, out / "tokenizer", given)
    special, vocab_size = SpecialIds.from_tokenizer(tok), tok.get_vocab_size()
    timings["tokenizer"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    spill_dir = out / "_spill"
    per_unit = _tokenize_units(units, tok, cfg, layout, spill_dir)
    rejects = RejectLog()
    for log in per_unit.column("rejects").to_pylist():
        rejects.update(RejectLog.from_json(log))
    tasks = _shard_tasks(per_unit, layout, rejects)
    paths = {part["rank"]: part["path"] for unit in units for part in unit["parts"]}
    del per_unit
    timings["read_tokenize"] = time.perf_counter() - t0
    _log("read", f"{len(files)} files tokenized, {rejected_documents(rejects.counts)} rejected documents "
                 f"{rejects.summary(True)}{cuts_said(rejects.counts)} in {timings['read_tokenize']:.1f}s")

    t0 = time.perf_counter()
    # Biggest shards first: the pool's tail is then the small ones.
    tasks.sort(key=lambda t: -len(t["batch"]))
    stats_ds = _one_block_each(tasks).map_batches(
        _build_shard, batch_size=1, batch_format="pyarrow", fn_kwargs={
            "cfg": cfg, "layout": layout, "special": special, "vocab_size": vocab_size,
            "continuation": continuation_mask(tok) if cfg.whole_word_masking else None, "out_dir": str(out)})
    shards = {"train": [], "eval": []}
    totals = {"documents": 0, "documents_empty": 0, "sentences": 0, "tokens": 0, "random_next": 0,
              "sentences_dropped": 0, "sentences_cut": 0, "unknown_tokens": 0}
    histogram = None
    for row in stats_ds.iter_rows():
        shards[row["split"]].append(row)
        for k in totals:
            totals[k] += row[k]
        histogram = np.add(histogram if histogram is not None else 0, row["histogram"])
        for s in json.loads(row["duplicate_samples"]):
            rejects.samples["duplicate"].append({"path": paths[s["uid"] >> RECORD_BITS], "doc_id": s["doc_id"],
                                                 "reason": "duplicate", "sample": s["sample"]})
        elapsed = time.perf_counter() - t0
        done = sum(s["rows"] for split in shards.values() for s in split)
        finished = sum(map(len, shards.values()))
        eta = f", eta {elapsed / finished * (len(tasks) - finished):,.0f}s" if finished < len(tasks) else ""
        _log("examples", f"{row['file']}: {row['rows']} examples (shard {finished}/{len(tasks)}, {done} in all, "
                         f"{done / elapsed:,.0f}/s{eta})")
    shutil.rmtree(spill_dir)
    rejects.write(str(out / "rejects.jsonl"))
    timings["examples"] = time.perf_counter() - t0

    counts = set_counts(totals, shards, rejects)  # refuses a set of no document: not cached
    for said in (nsp_warning(cfg, counts, shards), unknown_tokens_warning(counts, cfg.tokenizer.path)):
        if said:
            _log("warning", said)
            warned.append(said)
    return {
        "format_version": FORMAT_VERSION,
        "counts": counts,
        "examples": PAIR_RULES,
        "shards": {split: [{k: s[k] for k in ("file", "rows", "bytes", "documents", "tokens")}
                           for s in sorted(rows, key=lambda s: s["index"])] for split, rows in shards.items()},
        "layout": dataclasses.asdict(layout),
        "token_length_histogram": {"bin_width": histogram_bin_width(cfg.max_seq_len),
                                   "counts": [] if histogram is None else histogram.astype(int).tolist()},
        "config": dataclasses.asdict(cfg),
        "tokenizer": {"hash": tokenizer_hash(tok), "vocab_size": vocab_size, "special_ids": dataclasses.asdict(special),
                      "trained": cfg.tokenizer.path is None, "given_hash": given_hash},
        "inputs": {"files": inputs, "full_hash_max_bytes": FULL_HASH_MAX_BYTES},
        "rejects": rejects.summary(),
        "warnings": warned,
    }


def _document_warning(cfg: DataConfig, files: list[str], looked_at: int = 8) -> str | None:
    """A line when plain-text files read as books (data.text_documents=books: ~1 MiB documents) look like Google's
    format, whose blank lines end documents: read as books, a next-sentence pair would cross from one article
    to the next. The first MiB of the first `looked_at` files read as books decides (sources.read_as_book)."""
    if cfg.text_documents != "books":
        return None
    for path in [f for f in files if read_as_book(f, cfg)][:looked_at]:
        why = blank_line_documents(file_head(path, 1 << 20))
        if why:
            return (f"{path} looks like one sentence a line with a blank line between documents ({why}), but "
                    f"data.text_documents=books reads ~1 MiB documents, so a pair's second segment can come from "
                    f"another article: set data.text_documents=blank_lines if its blank lines end documents")
    return None
