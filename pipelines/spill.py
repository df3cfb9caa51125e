"""The one pass over the inputs: work units -> tokenized documents, spilled by shard, + per-unit stats.

Contract with prepare.py: `DocumentTokenizer` (in a Ray Data task, one work unit per call: files grouped
or a range of one, units.py) writes one Arrow IPC spill file per unit -- one record batch per
(chunk, shard), rows of `spill_schema` -- and returns one `UNIT_STATS_SCHEMA` row: the shard of
each spill batch, the unit's RejectLog as JSON, and (hash_hi, hash_lo, uid, doc_shard) of every good document, which
is all the driver needs to find exact duplicates (sources.find_duplicates). A document's uid is
file rank << RECORD_BITS | record number, so uid order is source_files.doc_order_key order and the
smallest doc_id of a duplicate group is its smallest uid.

Memory: a task holds one chunk (SPILL_CHUNK_BYTES of text and its tokens) at a time, however
big the file; shard tasks memory-map only their own batches (`read_spill`).
"""

from __future__ import annotations

import os
import socket
from itertools import chain
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tokenizers import AddedToken, Tokenizer

from pipelines.clean import split_sentences
from pipelines.config import DataConfig
from pipelines.examples import document_key
from pipelines.layout import ShardLayout
from pipelines.shards import token_type
from pipelines.rejects import RejectLog
from pipelines.dedup import content_hashes
from pipelines.sources import SAMPLE_CHARS, Span, iter_documents, read_as_book, reads_plain_text

TOKENIZE_BATCH_DOCS = 256  # documents per tokenizer call: amortises Python overhead, bounds batch memory
SPILL_CHUNK_BYTES = 16 << 20  # text a task gathers before writing spill batches: few, large batches
RECORD_BITS = 40  # uid = file rank << 40 | record number ...
MAX_INPUT_FILES = 1 << (63 - RECORD_BITS)  # ... an int64: ranks up to 2^23 - 1 (units.check_file_count)
# Joins a document's sentences so the tokenizer runs once per document (per-sentence calls cost
# ~2x in per-call overhead); normalize_text strips it from every text, so it only marks joins.
SENTENCE_MARK = "\x1f"


def good_documents(part: dict, cfg: DataConfig, rejects: RejectLog) -> Iterator[tuple[str, int, str]]:
    """(doc_id, uid, text) of the good documents of one part of a work unit (units.py); its
    rejects go to `rejects`."""
    span = Span(part["start"], part["end"], part["first"], part.get("text_start"))  # units.number_lines counts both
    for row in iter_documents(part["path"], part["name"], cfg, span):
        if row["reject_reason"]:
            rejects.add_row(row)
            continue
        record = int(row["doc_id"].rpartition("#")[2])  # good documents are always "<name>#<n>"
        if not 0 <= record < 1 << RECORD_BITS:
            raise ValueError(f"{row['doc_id']}: record number out of range for a document uid")
        yield row["doc_id"], part["rank"] << RECORD_BITS | record, row["text"]


def unit_documents(unit: dict, cfg: DataConfig, rejects: RejectLog) -> Iterator[tuple[str, int, str]]:
    return chain.from_iterable(good_documents(part, cfg, rejects) for part in unit["parts"])


def lined_documents(unit: dict, cfg: DataConfig, rejects: RejectLog) -> Iterator[tuple[str, int, str, bool]]:
    """unit_documents, each with whether every line break in it ends a sentence (split_sentences' `lines`): under
    data.text_documents=blank_lines, in the documents of plain-text files only. The setting describes such a file
    (Google's format: a sentence a line, a blank line between documents); a line break inside a JSON lines or parquet
    record of the same corpus (a hard-wrapped Gutenberg book's) is a soft wrap, read as in books mode: ended at
    every line, its sentences were cut at the wraps, and so were the A/B boundaries of its pairs."""
    for part in unit["parts"]:
        lines = cfg.text_documents == "blank_lines" and reads_plain_text(part["path"], cfg)
        yield from ((*doc, lines) for doc in good_documents(part, cfg, rejects))


def book_names(unit: dict, cfg: DataConfig, layout: ShardLayout) -> frozenset[str]:
    """The names of the unit's files that are books held out whole: plain text read as data.text_documents=books,
    where a long file is cut into ~1 MiB documents, pieces of one book (sources.read_as_book: not a .txt of
    WikiExtractor's articles, each its own document); none where the corpus has too few books to hold some out whole
    (ShardLayout.whole_books: its pieces are held out one by one then)."""
    if not layout.whole_books:
        return frozenset()
    return frozenset(part["name"] for part in unit["parts"] if read_as_book(part["path"], cfg))


def split_key(seed: int, doc_id: str, books: frozenset[str]) -> int:
    """The key that puts a document in the train or the eval split: a book's name for every piece of it, so that a
    book is held out whole or not at all (by piece, the eval split held pieces of the books train read: its MLM and
    NSP scores were those of text the model had seen the rest of); a document's own id otherwise."""
    name = doc_id.rpartition("#")[0]
    return document_key(seed, name if name in books else doc_id)


def _chunks(docs: Iterator[tuple], max_bytes: int) -> Iterator[list[tuple]]:
    chunk, size = [], 0
    for doc in docs:
        chunk.append(doc)
        size += len(doc[2])
        if size >= max_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _dedup_columns(hashes: np.ndarray, uids: np.ndarray, shards: np.ndarray) -> dict:
    return {"hash_hi": hashes[:, 0], "hash_lo": hashes[:, 1], "uid": uids, "doc_shard": shards}


def spill_schema(ids_type: pa.DataType) -> pa.Schema:
    return pa.schema([("uid", pa.int64()), ("key", pa.uint64()), ("doc_id", pa.string()), ("sample", pa.string()),
                      ("ids", pa.list_(ids_type)), ("offsets", pa.list_(pa.int32())),
                      ("hash_hi", pa.int64()), ("hash_lo", pa.int64())])  # the content hash, as dedup names a row


UNIT_STATS_SCHEMA = pa.schema([
    ("unit", pa.int64()), ("spill", pa.string()),
    ("spill_shards", pa.list_(pa.int32())), ("rejects", pa.string()), ("hash_hi", pa.list_(pa.uint64())),
    ("hash_lo", pa.list_(pa.uint64())), ("uid", pa.list_(pa.int64())), ("doc_shard", pa.list_(pa.int32()))])


class DocumentTokenizer:
    """Work units -> spill batches of tokenized documents + one stats row per unit.

    Spill rows: uid, key, doc_id, sample (first SAMPLE_CHARS: reported if it proves a
    duplicate), ids (all sentences back to back) and offsets (sentence s is
    ids[offsets[s]:offsets[s + 1]]; sentences that give no tokens are left out). Loads the
    tokenizer once (prepare runs it per worker process through `tokenize_unit`).
    """

    def __init__(self, tokenizer_json: str, vocab_size: int, cfg: DataConfig, layout: ShardLayout,
                 spill_dir: str):
        self.tok = Tokenizer.from_str(tokenizer_json)
        self.tok.no_truncation()
        self.tok.no_padding()
        self.tok.add_special_tokens([AddedToken(SENTENCE_MARK, special=True, normalized=False)])
        self.mark = self.tok.token_to_id(SENTENCE_MARK)
        # "[SEP]", "[MASK]", "[PAD]" written in a document are its text, not the tokens (the tokenizer would match
        # them): a space after the "[" leaves BERT's pre-tokenizer the pieces it makes of "[SEP]" as text
        self.literal = [t.content for t in self.tok.get_added_tokens_decoder().values()
                        if t.special and t.content != SENTENCE_MARK and len(t.content) > 1]
        self.ids_type = token_type(vocab_size)
        self.cfg, self.layout, self.spill_dir = cfg, layout, spill_dir
        if not os.path.isdir(spill_dir):  # prepare made it on the driver's node; Arrow would say only "No such file"
            raise FileNotFoundError(
                f"the spill folder {spill_dir} is not on node {socket.gethostname()}, where this task runs: "
                f"data.output_root={cfg.output_root} must be storage every node of the cluster mounts at that path "
                f"(a shared file system), not a disk of the driver's node")

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([self._unit(unit) for unit in batch.to_pylist()], schema=UNIT_STATS_SCHEMA)

    def _unit(self, unit: dict) -> dict:
        rejects, dedup, spill_shards = RejectLog(), [], []
        path = os.path.join(self.spill_dir, f"{unit['unit']:08d}.arrow")
        writer = None
        books = book_names(unit, self.cfg, self.layout)
        for chunk in _chunks(lined_documents(unit, self.cfg, rejects), SPILL_CHUNK_BYTES):
            hashes = content_hashes([d[2] for d in chunk])
            table, shards = self._tokenize(chunk, books, hashes)
            dedup.append(_dedup_columns(hashes, table.column("uid").to_numpy(), shards))
            order = np.argsort(shards, kind="stable")
            table, shards = table.take(order).combine_chunks(), shards[order]
            bounds = np.flatnonzero(np.diff(shards)) + 1
            writer = writer or pa.ipc.new_file(path, table.schema)
            for start, stop in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(shards)]])):
                writer.write_batch(table.slice(start, stop - start).to_batches()[0])
                spill_shards.append(int(shards[start]))
        if writer:
            writer.close()
        cols = {k: np.concatenate([d[k] for d in dedup]) if dedup else np.zeros(0, np.int64)
                for k in ("hash_hi", "hash_lo", "uid", "doc_shard")}
        return {"unit": unit["unit"], "spill": path if writer else "", "spill_shards": spill_shards,
                "rejects": rejects.to_json(), **{k: v.tolist() for k, v in cols.items()}}

    def _tokenize(self, chunk: list[tuple[str, int, str, bool]], books: frozenset[str], hashes: np.ndarray
                  ) -> tuple[pa.Table, np.ndarray]:
        doc_ids, uids, texts, lines = zip(*chunk)
        keys = np.array([document_key(self.cfg.seed, d) for d in doc_ids], dtype=np.uint64)
        shards = np.array([self.layout.shard_of(int(k), split_key(self.cfg.seed, d, books))
                           for k, d in zip(keys, doc_ids)], dtype=np.int32)
        flat, lengths = [], []
        for start in range(0, len(texts), TOKENIZE_BATCH_DOCS):
            batch = slice(start, start + TOKENIZE_BATCH_DOCS)
            joined = [SENTENCE_MARK.join(split_sentences(self._as_text(t), lines=by_line))
                      for t, by_line in zip(texts[batch], lines[batch])]
            encodings = self.tok.encode_batch_fast(joined, add_special_tokens=False)
            n = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
            flat.append(np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=int(n.sum())))
            lengths.append(n)
        ids, offsets = sentence_ids(np.concatenate(flat), np.concatenate(lengths), self.mark)
        table = pa.table({
            "uid": pa.array(uids, pa.int64()),
            "key": pa.array(keys, pa.uint64()),
            "doc_id": pa.array(doc_ids, pa.string()),
            "sample": pc.utf8_slice_codeunits(pa.array(texts, pa.string()), 0, SAMPLE_CHARS),
            "ids": pa.ListArray.from_arrays(ids[0], pa.array(ids[1].astype(self.ids_type.to_pandas_dtype()))),
            "offsets": pa.ListArray.from_arrays(offsets[0], pa.array(offsets[1])),
            "hash_hi": pa.array(hashes[:, 0].view(np.int64)), "hash_lo": pa.array(hashes[:, 1].view(np.int64)),
        }, schema=spill_schema(self.ids_type))
        return table, shards

    def _as_text(self, text: str) -> str:
        """`text` with the special tokens' strings in it broken up, so they are tokenized as the text they are."""
        for special in self.literal:
            if special in text:
                text = text.replace(special, f"{special[0]} {special[1:]}")
        return text


_WORKERS: dict[str, DocumentTokenizer] = {}  # per worker process: the current run's, by its spill folder


def tokenize_unit(batch: pa.Table, tokenizer_json: str, vocab_size: int, cfg: DataConfig, layout: ShardLayout,
                  spill_dir: str) -> pa.Table:
    """`map_batches` function (Ray Data tasks): DocumentTokenizer on one unit. Tasks run in Ray's pooled worker
    processes, which the next stage's tasks reuse; an actor pool would start processes of its own. The
    tokenizer is built once per process and run (the spill folder names the run)."""
    worker = _WORKERS.get(spill_dir)
    if worker is None:
        _WORKERS.clear()
        worker = _WORKERS[spill_dir] = DocumentTokenizer(tokenizer_json, vocab_size, cfg, layout, spill_dir)
    return worker(batch)


def sentence_ids(flat: np.ndarray, lengths: np.ndarray, mark: int) -> tuple[tuple, tuple]:
    """Token ids of documents whose sentences are joined by `mark` -> ((list offsets, ids),
    (list offsets, sentence offsets)) per document, marks and empty sentences gone."""
    num_docs = len(lengths)
    doc_of = np.repeat(np.arange(num_docs), lengths)
    is_mark = flat == mark
    # A sentence starts at a document's first token and after every mark.
    starts = np.zeros(len(flat), dtype=bool)
    starts[np.cumsum(lengths)[:-1][lengths[1:] > 0]] = True
    starts[:1] = True
    starts[1:] |= is_mark[:-1]
    sentence = np.cumsum(starts)
    keep = ~is_mark
    ids, sentence, doc_of = flat[keep], sentence[keep], doc_of[keep]
    first = np.flatnonzero(np.diff(sentence, prepend=-1) != 0)  # first kept token of each non-empty sentence
    doc_bounds = np.zeros(num_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(doc_of, minlength=num_docs), out=doc_bounds[1:])
    # Per document: its sentences' starts, then its end (so a document without sentences is [0]).
    sentence_doc = doc_of[first]
    entries_doc = np.concatenate([sentence_doc, np.arange(num_docs)])
    entries_pos = np.concatenate([first, doc_bounds[1:]]) - doc_bounds[entries_doc]
    order = np.lexsort((entries_pos, entries_doc))
    list_bounds = np.zeros(num_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(sentence_doc, minlength=num_docs) + 1, out=list_bounds[1:])
    return ((pa.array(doc_bounds.astype(np.int32)), ids),
            (pa.array(list_bounds.astype(np.int32)), entries_pos[order].astype(np.int32)))


def read_spill(paths: list[str], batches: list[int], ids_type: pa.DataType) -> pa.Table:
    tables = [spill_schema(ids_type).empty_table()]
    for path, index in zip(paths, batches):
        with pa.ipc.open_file(pa.memory_map(path)) as reader:
            tables.append(pa.Table.from_batches([reader.get_batch(index)]))
    return pa.concat_tables(tables)
