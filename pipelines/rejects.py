"""Bad-record accounting: counts per reason and a few samples of each, for the manifest and
rejects.jsonl. Reasons and the row layout are those of pipelines.sources (DOCUMENT_COLUMNS)."""

from __future__ import annotations

import collections
import json
import posixpath
from typing import Mapping

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import ray

from pipelines.source_files import doc_order_key

# Reasons whose rows are text cut out of a document, not a document rejected (how each is said, by count): kept in
# rejects.jsonl and the manifest's counts per reason, but not counted as rejected documents nor as documents read.
# 10,000 clean books were "20,000 of 30,000 documents rejected", which hid the real rejects among them.
NOT_DOCUMENTS = {"gutenberg_boilerplate": "Project Gutenberg headers and licences cut"}


def rejected_documents(counts: Mapping[str, int]) -> int:
    """The documents rejected, of rows counted per reason: all but those of NOT_DOCUMENTS."""
    return sum(n for reason, n in counts.items() if reason not in NOT_DOCUMENTS)


def cuts_said(counts: Mapping[str, int]) -> str:
    """", 20,000 Project Gutenberg headers and licences cut" for the NOT_DOCUMENTS rows among `counts`; "" for none."""
    return "".join(f", {counts[reason]:,} {said}" for reason, said in NOT_DOCUMENTS.items() if counts.get(reason))


def rejects_said(read: int, counts: Mapping[str, int], where: str) -> str:
    """The corpus's line in a run's summary: documents rejected of `read`, by reason, what was cut from documents,
    and `where` their samples are (rejects.jsonl)."""
    total = rejected_documents(counts)
    if not total:
        return f"0 of {read:,} documents rejected{cuts_said(counts)}"
    reasons = ", ".join(f"{reason} {n}" for reason, n in counts.items() if n and reason not in NOT_DOCUMENTS)
    return f"{total:,} of {read:,} documents rejected ({reasons}){cuts_said(counts)}: {where}"


def reject_line(path: str, reason: str, where: str, excerpt: str, why: str = "") -> str:
    """The console line of a split's first reject of `reason` in a user's fine-tuning files (README "Bad input": the
    first of each reason with its file and where in it): `why` adds what is known past the excerpt (a label train
    lacks: train's labels)."""
    return f"[data] {path}: rejected ({reason}) {where}: {excerpt[:120]!r}" + (f" ({why})" if why else "")


# What to change where a reason rejected a corpus's every document: a setting, or the files given
REJECT_FIXES = {
    "missing_text_column": "set data.text_column to the field or column that holds the text",
    "utf16_file": "convert the files to UTF-8",
    "binary_file": "not text: give the corpus's text files in data.sources",
    "invalid_utf8": "for plain text in another encoding set data.text_encoding (cp1252, latin-1, ...)",
    "too_short": "lower data.min_document_chars",
    "line_too_long": "raise data.max_line_bytes",
    "malformed_json": "set data.format if these files are not JSON lines",
    "unknown_file_type": "set data.format=text to read these files as plain text, or leave them out of data.sources",
}


def nothing_kept_said(log: "RejectLog", what: str, without_sentences: int = 0, reasons: int = 3) -> str:
    """Why a corpus gave no document to `what`: its rejects by reason, most first (up to `reasons`), each with what
    to change (REJECT_FIXES) and its first sample, and the documents that tokenized to no sentence. A set of none was
    cached, and the first error came later, about its held-out split; the tokenizer's error named no reason."""
    counts = {r: n for r, n in log.counts.items() if n and r not in NOT_DOCUMENTS}
    said = []
    for reason in sorted(counts, key=lambda r: (-counts[r], r))[:reasons]:
        log._trim(reason)
        first = log.samples[reason][:1]
        fix = f": {REJECT_FIXES[reason]}" if reason in REJECT_FIXES else ""
        example = f" (first: {first[0]['path']}: {first[0]['sample'][:100]!r})" if first else ""
        said.append(f"{reason} {counts[reason]:,}{fix}{example}")
    why = [f"{sum(counts.values()):,} documents rejected: {'; '.join(said)}"] if said else []
    if without_sentences:
        why.append(f"{without_sentences:,} documents tokenized to no sentence")
    return f"no document of data.sources was kept to {what}: {'; and '.join(why) or 'no document was read'}"


class RejectLog:
    """Reject counts per reason and the `samples_per_reason` smallest-doc_id rejects of each:
    what the manifest and rejects.jsonl report. Logs of separate files merge (`update`), and
    the result does not depend on merge order, so per-file logs can be built in parallel."""

    def __init__(self, samples_per_reason: int = 20):
        self.samples_per_reason = samples_per_reason
        self.counts: collections.Counter = collections.Counter()
        self.samples: dict[str, list[dict]] = collections.defaultdict(list)

    def add(self, reason: str, doc_id: str, path: str, sample: str, count: int = 1) -> None:
        self.counts[reason] += count
        kept = self.samples[reason]
        kept.append({"path": path, "doc_id": doc_id, "reason": reason, "sample": sample})
        if len(kept) > 2 * self.samples_per_reason:  # trim now and then: bounded, amortised
            self._trim(reason)

    def add_row(self, row: dict) -> None:
        self.add(row["reject_reason"], row["doc_id"], row["source"], row["sample"])

    def _trim(self, reason: str) -> None:
        kept = sorted(self.samples[reason], key=lambda r: doc_order_key(r["doc_id"]))
        self.samples[reason] = kept[:self.samples_per_reason]

    def update(self, other: "RejectLog") -> None:
        self.counts.update(other.counts)
        for reason, rows in other.samples.items():
            self.samples[reason] += rows
            self._trim(reason)

    def to_json(self) -> str:
        for reason in list(self.samples):
            self._trim(reason)
        return json.dumps({"counts": self.counts, "samples": self.samples, "n": self.samples_per_reason})

    @classmethod
    def from_json(cls, text: str) -> "RejectLog":
        d = json.loads(text)
        log = cls(d["n"])
        log.counts.update(d["counts"])
        log.samples.update(d["samples"])
        return log

    def summary(self, documents_only: bool = False) -> dict[str, int]:
        """Rows per reason; `documents_only`: of rejected documents alone (less NOT_DOCUMENTS)."""
        return {k: n for k, n in sorted(self.counts.items()) if not (documents_only and k in NOT_DOCUMENTS)}

    def write(self, path: str) -> None:
        """JSONL, one {"path", "doc_id", "reason", "sample"} per line, by reason then doc_id."""
        fs, fpath = fsspec.core.url_to_fs(path)
        fs.makedirs(posixpath.dirname(fpath) or ".", exist_ok=True)
        with fs.open(fpath, "w") as f:
            for reason in sorted(self.samples):
                self._trim(reason)
                for row in self.samples[reason]:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")


def summarize_rejects(ds: ray.data.Dataset) -> dict[str, int]:
    """Rejected rows per reason, e.g. {"too_short": 812, "redirect": 40}; good rows not counted."""
    counts = collections.Counter()
    per_block = ds.select_columns(["reject_reason"]).map_batches(_count_reasons, batch_format="pyarrow")
    for row in per_block.iter_rows():
        counts[row["reason"]] += row["count"]
    return dict(sorted(counts.items()))


def _count_reasons(batch: pa.Table) -> pa.Table:
    counts = pc.value_counts(batch.column("reject_reason")).to_pylist()
    counts = [c for c in counts if c["values"]]
    return pa.table({"reason": pa.array([c["values"] for c in counts], pa.string()),
                     "count": pa.array([c["counts"] for c in counts], pa.int64())})


def write_rejects(ds: ray.data.Dataset, path: str, samples_per_reason: int = 20) -> None:
    """Write a JSONL file of up to `samples_per_reason` rejects per reason (smallest doc_ids,
    so the file is the same on every run): {"path", "doc_id", "reason", "sample"} per line."""
    log = RejectLog(samples_per_reason)
    cols = ["source", "doc_id", "reject_reason", "sample"]
    for row in (ds.select_columns(cols)
                .map_batches(_first_rejects, batch_format="pyarrow", fn_kwargs={"n": samples_per_reason})
                .iter_rows()):
        log.add_row(row)
    log.write(path)


def _first_rejects(batch: pa.Table, n: int) -> pa.Table:
    """Per block, the n smallest doc_ids of each reason: a tiny table for the driver to merge."""
    rows = batch.filter(pc.not_equal(batch.column("reject_reason"), "")).to_pylist()
    rows.sort(key=lambda r: (r["reject_reason"], doc_order_key(r["doc_id"])))
    kept, seen = [], collections.Counter()
    for r in rows:
        if seen[r["reject_reason"]] < n:
            seen[r["reject_reason"]] += 1
            kept.append(r)
    return pa.Table.from_pylist(kept, schema=batch.schema)
