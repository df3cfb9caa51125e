"""Work units: ranges of one file read every record exactly once, wherever the cuts fall (no Ray)."""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config import DataConfig
from pipelines.sources import TEXT_DOCUMENT_BYTES, Span, iter_documents
from pipelines.units import count_newlines, file_parts, group_units, target_bytes

WORDS = "river stone light garden winter market letter window mountain story paper engine".split()


def cfg(path, **kw) -> DataConfig:
    kw.setdefault("min_document_chars", 20)
    return DataConfig(sources=[str(path)], **kw)


def prose(rng: random.Random, sentences: int) -> str:
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(8)).capitalize() + "." for _ in range(sentences))


def read_spans(path, cuts: list[int], config: DataConfig) -> list[dict]:
    """The rows of `path` read as byte ranges [cuts[i], cuts[i+1]), each numbered as units.py does."""
    rows, ends = [], cuts[1:] + [-1]
    for start, end in zip(cuts, ends):
        span = Span(start, end, count_newlines(str(path), 0, start))
        rows += iter_documents(str(path), path.name, config, span)
    return rows


def test_jsonl_ranges_read_every_line_once_wherever_the_cuts_fall(tmp_path):
    rng = random.Random(1)
    path = tmp_path / "docs.jsonl"
    lines = [json.dumps({"text": prose(rng, rng.randint(1, 6))}) for _ in range(300)]
    lines[40], lines[41], lines[77] = "", "{broken", json.dumps({"text": "x" * 5000})  # blank, bad, too long
    path.write_text("\n".join(lines) + "\n")
    config = cfg(path, max_line_bytes=4096)
    whole = list(iter_documents(str(path), path.name, config))
    data = path.read_bytes()
    line_starts = [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")][:-1]
    for cuts in ([0, line_starts[10], line_starts[200]],  # exactly at line starts
                 [0, line_starts[10] + 1, line_starts[41] - 1, line_starts[77] + 100, len(data) - 2],  # inside lines
                 [0] + sorted(rng.sample(range(1, len(data)), 25)),
                 list(range(0, len(data), 997))):
        assert read_spans(path, cuts, config) == whole
    assert [r["reject_reason"] for r in whole].count("") == 297
    assert {r["doc_id"]: r["reject_reason"] for r in whole if r["reject_reason"]} == {
        "docs.jsonl#41": "malformed_json", "docs.jsonl#77": "line_too_long"}


def test_text_is_cut_into_documents_at_blank_lines_the_same_way_in_any_ranges(tmp_path):
    rng = random.Random(2)
    paragraphs = [prose(rng, rng.randint(2, 20)) for _ in range(8000)]
    text = "\n\n".join(paragraphs[:2500]) + "\n" + "\n".join(paragraphs[2500:5000]) + "\n\n" + \
        "\n\n".join(paragraphs[5000:]) + "\n"  # a stretch of over 1 MiB with no blank line
    path = tmp_path / "big.txt"
    path.write_text(text)
    size = len(text.encode())
    assert size > 4 * TEXT_DOCUMENT_BYTES
    config = cfg(path)
    whole = list(iter_documents(str(path), path.name, config))
    assert 3 <= len(whole) <= size // TEXT_DOCUMENT_BYTES + 1
    assert all(r["reject_reason"] == "" for r in whole) and whole[0]["doc_id"] == "big.txt#0"
    # Every paragraph is in exactly one document, in order.
    assert " ".join(r["text"] for r in whole).split() == text.split()
    for step in (1, 2, 3):
        cuts = list(range(0, size, step * TEXT_DOCUMENT_BYTES))
        assert read_spans(path, cuts, config) == whole
    small = tmp_path / "book.txt"
    small.write_text("\n\n".join(paragraphs[:50]))
    assert [r["doc_id"] for r in iter_documents(str(small), "book.txt", cfg(small))] == ["book.txt#0"]


def test_a_too_long_line_in_text_without_blank_lines_costs_its_document_not_the_rest(tmp_path, monkeypatch):
    """One sentence a line and no blank line (BookCorpus's files): a line over max_line_bytes rejected the document
    it was in and every line after it, to the end of the file, as one line_too_long. That document ends now where a
    MAX_TEXT_DOCUMENT_BYTES split would (its lines count toward it), whatever the ranges. The split at 64 KiB here
    instead of 8 MiB, for a small file."""
    from pipelines import text_source

    monkeypatch.setattr(text_source, "MAX_TEXT_DOCUMENT_BYTES", 64 << 10)
    rng = random.Random(4)
    lines = [prose(rng, 1) for _ in range(30_000)]
    lines[20_000] = "x" * 5000
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines) + "\n")
    config = cfg(path, max_line_bytes=4096)
    whole = list(iter_documents(str(path), path.name, config))
    assert [r["reject_reason"] for r in whole].count("line_too_long") == 1 and whole[-1]["reject_reason"] == ""
    assert whole[-1]["text"].split()[-8:] == lines[-1].split()  # read to the end of the file
    kept = sum(len(r["text"]) + 1 for r in whole if not r["reject_reason"])
    assert kept >= path.stat().st_size - 5000 - 2 * (64 << 10)  # one document's worth lost, not the rest
    assert path.stat().st_size > TEXT_DOCUMENT_BYTES
    assert read_spans(path, [0, TEXT_DOCUMENT_BYTES], config) == whole


def test_blank_lines_end_documents_in_googles_format_the_same_way_in_any_ranges(tmp_path):
    """Google's create_pretraining_data input: one sentence a line, a blank line between documents. As books, the
    documents were ~1 MiB each, and contiguous "IsNext" pairs crossed unrelated documents; with
    data.text_documents=blank_lines each is its own, and a run of blank lines is one separator."""
    rng = random.Random(5)
    docs = ["\n".join(prose(rng, 1) for _ in range(rng.randint(2, 9))) for _ in range(6000)]
    path = tmp_path / "google.txt"
    path.write_text("\n\n".join(docs[:3000]) + "\n\n\n \n" + "\n\n".join(docs[3000:]) + "\n")
    assert path.stat().st_size > 1.5 * TEXT_DOCUMENT_BYTES
    config = cfg(path, text_documents="blank_lines")
    whole = list(iter_documents(str(path), path.name, config))
    assert [r["text"].split() for r in whole] == [d.split() for d in docs]
    assert all(r["reject_reason"] == "" for r in whole)
    for cuts in ([0, TEXT_DOCUMENT_BYTES], [0] + sorted(rng.sample(range(1, 3 << 19), 7))):
        assert read_spans(path, cuts, config) == whole
    assert len(list(iter_documents(str(path), path.name, cfg(path)))) <= 4  # as books: a few ~1 MiB documents
    from bert_core.config import ConfigError

    with pytest.raises(ConfigError, match=r"data.text_documents must be one of \('books', 'blank_lines'\)"):
        cfg(path, text_documents="paragraphs").validate()


def test_parquet_row_group_ranges(tmp_path):
    rng = random.Random(3)
    texts = [prose(rng, 3) if i % 7 else "short" for i in range(500)]
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"text": texts}), path, row_group_size=60)
    config = cfg(path)
    whole = list(iter_documents(str(path), "docs.parquet", config))
    parts = file_parts([str(path)], [{"bytes": path.stat().st_size}], config, path.stat().st_size // 4)
    assert len(parts) >= 4 and {p["kind"] for p in parts} == {"row_groups"}
    rows = [r for p in parts for r in iter_documents(str(path), "docs.parquet", config,
                                                     Span(p["start"], p["end"], p["first"]))]
    assert rows == whole and len(rows) == 500


def test_binary_file_in_ranges_is_rejected_once(tmp_path):
    path = tmp_path / "blob.jsonl"
    path.write_bytes(b"\x00\x01" * (3 * TEXT_DOCUMENT_BYTES))
    config = cfg(path)
    rows = read_spans(path, [0, TEXT_DOCUMENT_BYTES, 2 * TEXT_DOCUMENT_BYTES], config)
    assert [(r["doc_id"], r["reject_reason"]) for r in rows] == [("blob.jsonl", "binary_file")]


def test_plan_groups_small_files_and_splits_big_ones(tmp_path):
    files, inputs = [], []
    for i in range(10):
        (tmp_path / f"small{i}.jsonl").write_text("{}\n")
        files.append(str(tmp_path / f"small{i}.jsonl"))
        inputs.append({"bytes": 300 << 10})  # planning goes by the fingerprinted size
    for name, text in (("big.jsonl", "{}\n"), ("big.txt.gz", "{}\n"), ("big.xml", "{}\n"), ("lines.json", "{}\n"),
                       ("array.json", ' [{"text": "one"},\n{"text": "two"}]\n')):
        (tmp_path / name).write_text(text)
        files.append(str(tmp_path / name))
        inputs.append({"bytes": 5 << 20})
    config = cfg(tmp_path)
    parts = file_parts(files, inputs, config, 2 << 20)
    kinds = {}
    for p in parts:
        kinds.setdefault(p["name"], []).append((p["kind"], p["start"], p["end"]))
    assert kinds["big.jsonl"] == [("bytes", 0, 2 << 20), ("bytes", 2 << 20, 4 << 20), ("bytes", 4 << 20, -1)]
    assert kinds["big.txt.gz"] == [("whole", 0, -1)] and kinds["big.xml"] == [("whole", 0, -1)]
    assert kinds["lines.json"] == kinds["big.jsonl"]  # JSON lines named .json: ranges
    assert kinds["array.json"] == [("whole", 0, -1)]  # one JSON array: no line a range could start at
    units = group_units(parts, 2 << 20)
    assert sorted(len(u["parts"]) for u in units) == [1] * 9 + [4, 6]  # 10 small files in two units
    assert sum(u["bytes"] for u in units) == sum(i["bytes"] for i in inputs)
    assert sorted(p["name"] for u in units for p in u["parts"]) == sorted(p["name"] for p in parts)


@pytest.mark.parametrize("total,workers,expected", [(1 << 30, 2, 64 << 20), (20 << 20, 2, 2.5 * (1 << 20)),
                                                    (1 << 10, 4, 1 << 20)])
def test_auto_target_size(total, workers, expected):
    assert target_bytes(DataConfig(sources=["x"], num_workers=workers), total) == int(expected)


def test_read_progress_reports_bytes_rate_and_eta_and_stays_quiet_on_short_runs(capsys):
    from pipelines.prepare import ReadProgress

    units = [{"unit": i, "bytes": b} for i, b in enumerate([3 * 2**20, 2**20, 2**20, 3 * 2**20])]
    quiet = ReadProgress(units)  # 15 s between lines: a run this short prints nothing here
    quiet(pa.table({"unit": [0, 1]}))
    assert capsys.readouterr().out == ""
    loud = ReadProgress(units, every=0.0)
    loud(pa.table({"unit": [0]}))
    loud(pa.table({"unit": [2]}))
    loud(pa.table({"unit": [1, 3]}))  # the last: the stage's own summary line follows, no progress line
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("[prepare] read: 1/4 work units, 3.0 of 8.0 MiB (")
    assert lines[1].startswith("[prepare] read: 2/4 work units, 4.0 of 8.0 MiB (") and " MiB/s), eta " in lines[1]
    assert float(lines[1].rsplit("eta ", 1)[1].rstrip("s").replace(",", "")) >= 0


def test_more_input_files_than_a_document_uid_holds_are_refused_before_any_work(tmp_path, monkeypatch):
    """uid = file rank << 40 | record: past 2^23 files (one file an article) the tokenizing tasks failed on "Python
    int too large to convert to C long", after the driver's passes over every file."""
    from pipelines import prepare, units
    from pipelines.source_files import SourceError
    from pipelines.spill import RECORD_BITS

    assert ((1 << 23) - 1) << RECORD_BITS | ((1 << RECORD_BITS) - 1) == 2**63 - 1  # the last rank fits an int64
    units.check_file_count(1 << 23)
    with pytest.raises(SourceError, match=r"8,388,609 input files, more than the 8,388,608 .* concatenate them"):
        units.check_file_count((1 << 23) + 1)
    monkeypatch.setattr(units, "MAX_INPUT_FILES", 1)  # a stand-in for the limit: two files are past it
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for f in files:
        f.write_text("A sentence of some length. " * 20)
    monkeypatch.setattr(prepare, "fingerprint_inputs", lambda files: pytest.fail("every input hashed first"))
    with pytest.raises(SourceError, match="holds 2 input files"):
        prepare.prepare(DataConfig(sources=[str(tmp_path)], output_root=str(tmp_path / "out")))
    with pytest.raises(SourceError, match="holds 2 input files"):
        file_parts([str(f) for f in files], [{"bytes": 540}] * 2, cfg(tmp_path), 1 << 20)


def test_ranges_carry_the_text_offset_their_cuts_count_from(tmp_path, monkeypatch):
    """Text documents are cut at text offsets (no \\r of a \\r\\n, from the end of a Gutenberg header): a range reader
    cannot count the bytes before its start itself without reading them all, so the planning pass that counts its
    first line number counts its text offset too, the same one the reader would."""
    import io

    import numpy as np

    from pipelines import text_source
    from pipelines.units import _count_batch, numbered_parts

    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 1 << 12)
    monkeypatch.setattr(text_source, "MAX_TEXT_DOCUMENT_BYTES", 1 << 14)
    rng = random.Random(4)
    body = "".join(prose(rng, rng.randint(1, 8)) + rng.choice(["\n\n", "\n", "\r\n\r\n", "\r\n"]) for _ in range(3000))
    path = tmp_path / "pg1.txt"
    path.write_bytes(("Title: One\r\n\r\n*** START OF THE PROJECT GUTENBERG EBOOK ONE ***\r\n" + body).encode())
    data, step = path.read_bytes(), 3 << 12
    parts = [{"path": str(path), "name": path.name, "rank": 0, "kind": "bytes", "start": s, "first": 0,
              "end": s + step if s + step < len(data) else -1} for s in range(0, len(data), step)]
    counted = [p for p in parts if p["end"] >= 0]
    batch = _count_batch({k: np.array([p[k] for p in counted]) for k in ("path", "start", "end")})
    counts = {(p["path"], p["start"]): (int(n), int(c), int(h)) for p, n, c, h in zip(counted, *(batch[k] for k in (
        "newlines", "pairs", "header")))}
    parts = numbered_parts(parts, counts)
    assert [p["text_start"] for p in parts] == [text_source.text_offset(io.BytesIO(data), p["start"]) for p in parts]
    assert [p["first"] for p in parts] == [data[:p["start"]].count(b"\n") for p in parts]
    config = cfg(path, min_document_chars=1)
    whole = list(iter_documents(str(path), path.name, config))
    ranged = [r for p in parts for r in iter_documents(str(path), path.name, config, Span(
        p["start"], p["end"], p["first"], p["text_start"]))]
    assert len(whole) > 30 and sorted(ranged, key=str) == sorted(whole, key=str)


def test_line_counts_looks_for_crlf_pairs_only_in_chunks_that_hold_a_cr():
    """Planning counts every byte of a split text file: a second scan per chunk for \\r\\n cost ~2.7x the CPU on a
    pure-LF file, which has none. The pair whose \\r ends the chunk before is still counted."""
    import io

    from pipelines.text_source import line_counts

    scanned = []

    class Chunk(bytes):
        def count(self, sub, *args):
            if sub == b"\r\n":
                scanned.append(bytes(self))
            return super().count(sub, *args)

    class Stream(io.BytesIO):
        def read(self, size=-1):
            return Chunk(super().read(size))

    data = b"one\ntwo\r\nthree\r\nfour\n\r\n\nfive\rsix\n" + b"seven\n" * 4
    for chunk in (1, 2, 3, 5, 64):
        for start in range(len(data)):
            for end in range(start, len(data) + 1):
                pairs = sum(data[i - 1:i + 1] == b"\r\n" for i in range(max(1, start), end))
                assert line_counts(Stream(data), start, end, chunk) == (data[start:end].count(b"\n"), pairs)
    assert scanned and all(b"\r" in chunk for chunk in scanned)
