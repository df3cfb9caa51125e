"""A prediction job's input files, as resolve_files lists them ((path, format) pairs): the columns each is read with,
which version each is (a rerun over edited files must not keep the old rows' shards), what formats they are, about how
many rows they hold."""

from __future__ import annotations

import collections
import hashlib
import os
import posixpath

from bert_core.config import ConfigError


def file_columns(columns, kind: str, fmt: str):
    """The columns one input file is read with: a CoNLL file holds words, which its reader takes whatever the columns
    name, so a tagger reads them even where columns.tokens is "" (it tags a `text` column, prediction's default)."""
    import dataclasses

    if kind == "token-classification" and fmt == "conll" and not columns.tokens:
        return dataclasses.replace(columns, tokens="tokens")
    return columns


def refuse_undecodable_names(files) -> None:
    """Refuse an input file whose name is not UTF-8 (Python lists its bytes as surrogates: 'caf\\udce9.csv'): the
    manifest, the shards' `file` column and the MLflow run record names as UTF-8 text, and could not write it. Refused
    before any work rather than skipped: a skipped file's rows would be missing from an output that says complete."""
    for path, _ in files:
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"input file {os.fsencode(path)!r} has a name that is not UTF-8 (another encoding's "
                              "bytes, shown escaped): rename it to UTF-8 text (e.g. `convmv -f latin1 -t utf-8`) "
                              "and run again") from None


def shared_names(files) -> list[str]:
    """The input files whose name (without folders) another input file has too: rows without an id column are
    named "<name>:<row>", so such files' ids repeat."""
    from pipelines.tasks.files import _name  # the name the default ids carry

    names = collections.Counter(_name(path) for path, _ in files)
    return sorted(path for path, _ in files if names[_name(path)] > 1)


def check_columns(files, kind: str, columns) -> None:
    """pipelines.tasks.files.check_columns on each input file with the columns it is read with (file_columns); a
    tagger's file that lacks the text column but holds a `tokens` one is refused naming the setting that reads its
    lists of words."""
    import dataclasses

    from pipelines.tasks.common import TaskDataError
    from pipelines.tasks.files import check_columns as check

    def reads(path: str, fmt: str, read_with) -> bool:
        try:
            check([(path, fmt)], kind, read_with, labeled=False)
            return True
        except TaskDataError:
            return False

    for path, fmt in files:
        read_with = file_columns(columns, kind, fmt)
        try:
            check([(path, fmt)], kind, read_with, labeled=False)
        except TaskDataError as exc:
            if kind == "token-classification" and not read_with.tokens \
                    and reads(path, fmt, dataclasses.replace(columns, tokens="tokens")):
                raise TaskDataError(f"{path}: no column {columns.text!r} to tag, but a column 'tokens': set "
                                    "columns.tokens=tokens to tag its lists of words") from None
            raise exc


def refused(message: str) -> ConfigError:
    """A reader's refusal of an input file (pipelines.tasks' TaskDataError), as prediction says it: `input: ...`, the
    readers' fine-tuning setting names (task.columns.*) as prediction's (columns.*), a URL without its credentials
    (the readers name the path as given; a local path is said whole, as `recorded` keeps it). One line, where it was
    found: _plan's check before Ray, or a read task's record past the rows that check read (stages.read_rows)."""
    from jobs.registry.redaction import redact

    said = f"input: {message}".replace("task.columns.", "columns.")
    return ConfigError(redact(said) if "://" in said else said)


_STAMPS = ("ETag", "etag", "md5Hash", "generation", "mtime", "LastModified", "last_modified", "updated", "created")


def in_submitted_copy(path: str) -> str | None:
    """`path` relative to the copy of its --working-dir a `ray job submit` job runs in, where it lies there (an input
    shipped with the job's files); else None. That copy's folder is named by the Ray session and its files' times by
    their unpacking: a resubmitted job, after a cluster restart, finds the same file at another path and time."""
    from jobs.config.sections import submitted_working_dir

    if "://" in path or not submitted_working_dir():
        return None
    here, absolute = os.getcwd(), os.path.abspath(path)
    return os.path.relpath(absolute, here) if absolute.startswith(here + os.sep) else None


def recorded(path: str) -> str:
    """An input path or URL as the manifest, _rows.json and the rows' `file` column record it (the basis: unsigned):
    a URL's credentials (`https://user:pass@host`, a presigned URL's `?X-Amz-Signature=`) removed; the reading uses
    the path itself. A local path is kept whole (`token=1/` is a partition's folder, no secret)."""
    from jobs.registry.redaction import redact

    return redact(path) if "://" in path else path


def basis_paths(files) -> list[str]:
    """The input files as a rerun knows them again, and the rows' `file` names them: a path in a submitted job's copy
    relative to it, others as resolved, recorded."""
    return [in_submitted_copy(path) or recorded(path) for path, _ in files]


def unsigned(path: str) -> str:
    """An input path or URL (or basis_paths' name) as an output folder's basis compares it on a rerun: a URL recorded
    and without its query. A presigned URL signed again differs in more than its signature (S3's X-Amz-Date, GCS's
    X-Goog-Date, an Azure SAS's st= and se=): a refreshed one is the same input; whether it now reads other content,
    file_versions (its ETag, size) tells."""
    return recorded(path).split("?", 1)[0] if "://" in path else path


def compared(basis: dict, kind: str) -> dict:
    """An output folder's basis, or a rerun's, as jobs/predict.py compares the two, where the folder's model is of
    `kind`: URLs unsigned (an older folder's basis holds a URL's query, or, older still, its credentials), and no
    threshold but a multi-label model's (an older folder of a classifier stored the one its run was given, and
    ignored)."""
    basis = {k: v for k, v in basis.items() if k != "threshold" or kind == "multi-label"}
    if isinstance(basis.get("input"), str):
        basis["input"] = unsigned(basis["input"])
    if isinstance(basis.get("files"), list):
        basis["files"] = [unsigned(path) for path in basis["files"]]
    return basis


def file_versions(files) -> list[str]:
    """Each input file's size and modification time (an object store's ETag where it has one): a rerun over files
    edited since would keep shards of the old rows beside predictions of the new ones, duplicating some rows and
    missing others. A file shipped in a submitted job's copy: its sha256 (its time is when the copy was unpacked)."""
    import fsspec

    versions = []
    for path, fmt in files:
        if in_submitted_copy(path):
            with open(os.path.join(path, "state.json") if fmt == "hf" else path, "rb") as f:
                versions.append(f"sha256:{hashlib.file_digest(f, 'sha256').hexdigest()}")
            continue
        fs, local = fsspec.core.url_to_fs(path)
        info = fs.info(posixpath.join(local, "state.json") if fmt == "hf" else local)  # a datasets folder: its index
        stamp = next((info[k] for k in _STAMPS if info.get(k)), "")  # none: the size alone tells
        versions.append(f"{info.get('size')}:{stamp}")
    return versions


def formats(files) -> str:
    """How many input files of each format: "2 csv, 1 text" (a README.txt beside the exports shows here)."""
    return ", ".join(f"{n} {fmt}" for fmt, n in sorted(collections.Counter(fmt for _, fmt in files).items()))


def estimate_rows(files, sample_bytes: int = 4 << 20, sheet: str = "") -> int:
    """About how many rows the inputs hold (for the ETA), 0 = unknown: Parquet's and Excel's own count (the `sheet`
    read); for text formats the
    lines of each file's first `sample_bytes`, scaled by its size (the driver does not read a 50 GB input to
    count it; a compressed file longer than the sample is unknown)."""
    import fsspec
    import pyarrow.parquet as pq

    from pipelines.tasks import excel

    total = 0
    for path, fmt in files:
        try:
            if fmt == "parquet":
                with fsspec.open(path, "rb") as f:
                    total += pq.ParquetFile(f).metadata.num_rows
            elif fmt == "xlsx":
                with fsspec.open(path, "rb") as f:
                    total += excel.row_count(path, f, sheet)
            elif fmt in ("csv", "tsv", "jsonl", "text"):
                with fsspec.open(path, "rb", compression="infer") as f:
                    head = f.read(sample_bytes)
                    whole = not f.read(1)
                lines = head.count(b"\n") or head.count(b"\r")  # or a lone CR's (Excel for Mac)
                if whole:
                    total += lines
                elif fsspec.utils.infer_compression(path) is None and head:
                    fs, local = fsspec.core.url_to_fs(path)
                    total += round(lines * fs.size(local) / len(head))
                else:
                    return 0
            else:
                return 0
        except (OSError, ValueError):  # ValueError: Arrow's, a file that is not what its name says
            return 0
    return total
