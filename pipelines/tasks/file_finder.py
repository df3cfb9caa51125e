"""Where a user's files are: a file, folder, glob or `folder:split` (a datasets save_to_disk DatasetDict), at a local
path or any fsspec URL -> (path, format) pairs for pipelines.tasks.files.read_file. A file's format comes from the
configured one, else its extension (a .json file is sniffed: one SQuAD document or JSON Lines), read under a
compression suffix (.gz, .bz2, .xz: `data.csv.gz` is CSV, decompressed as it is read)."""

from __future__ import annotations

import codecs
import collections
import json
import os
import posixpath
import re

import fsspec
from fsspec.implementations.local import LocalFileSystem

from pipelines.tasks.common import TaskDataError
from pipelines.tasks.files import FORMATS

# .json may be "squad"; .txt is read only as the text format task.format sets (_TEXT_FORMATS)
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
              ".parquet": "parquet", ".pq": "parquet", ".xlsx": "xlsx", ".xlsm": "xlsx", ".conll": "conll"}
INPUT_EXTENSIONS = {**EXTENSIONS, ".txt": "text"}  # inputs to predict (unlabeled): .txt is plain text
_SNIFF_BYTES = 1 << 20  # read of a .json file to tell one SQuAD document from JSON Lines
COMPRESSIONS = (".gz", ".bz2", ".xz")  # files.read_file decompresses them as it reads (fsspec's compression="infer")
# data in a form not read here -> what to do: archives and other codecs (`data.csv.zst`, `export.zip`), other
# spreadsheets and columnar files. A folder holding one is refused (passed over, its rows would be missing from
# training, unsaid), as a file or a glob naming one is (an unknown file type)
_EXTRACT, _DECOMPRESS = "extract it", "decompress it (or compress it as .gz, .bz2 or .xz)"
UNREAD = {**dict.fromkeys((".zip", ".tar", ".tgz", ".7z", ".rar"), _EXTRACT),
          **dict.fromkeys((".zst", ".zstd", ".lz4", ".snappy", ".br", ".lzo"), _DECOMPRESS),
          **dict.fromkeys((".xls", ".xlsb", ".ods"), "save it as .xlsx"),
          **dict.fromkeys((".avro", ".orc", ".feather"), "write it as Parquet")}
_TEXT_FORMATS = ("csv", "tsv", "jsonl", "conll", "squad", "text")  # a .txt file read as the format set, as one named


def extension(path: str) -> str:
    """A file's data extension, lower case, under any compression suffix: "a.CSV.gz" -> ".csv". Parquet compresses
    inside: a compressed Parquet file keeps its outer suffix (an unknown type)."""
    stem, ext = posixpath.splitext(path)
    if ext.lower() in COMPRESSIONS:
        inner = posixpath.splitext(stem)[1].lower()
        return ext.lower() if inner in (".parquet", ".pq") else inner
    return ext.lower()


def _format(fs, path: str, fmt: str, spec: str, extensions: dict = EXTENSIONS) -> str:
    ext = extension(path)
    if fmt:
        return fmt
    if ext not in extensions:
        raise TaskDataError(f"{spec}: unknown file type {ext or path!r}; accepted: {', '.join(extensions)} (also "
                            f"as .gz, .bz2, .xz) and datasets save_to_disk folders; or set task.format, or predict's "
                            f"format (one of {', '.join(FORMATS)})")
    if ext != ".json":
        return extensions[ext]
    with fs.open(path, "rb", compression="infer") as f:  # one SQuAD document ({"data": [...]}) or one object per line?
        head = f.read(_SNIFF_BYTES).removeprefix(codecs.BOM_UTF8).lstrip()  # less a UTF-8 byte-order mark
    lines = head.split(b"\n")
    first = _json_object(lines[0]) if head.startswith(b"{") else {}
    one_line = sum(1 for line in lines if line.strip()) == 1
    # pandas' to_json() by default (orient="columns": {"text": {"0": ...}, "label": {...}}), "index" or "split": one
    # object that holds the table, read as one record without its columns (every row lost as one reject). Its
    # columns share their index (or its rows their columns); a line cut at the sniff's end shows a row index "0"
    if one_line and (re.match(rb'\{\s*"[^"\\]*"\s*:\s*\{\s*"\d+"\s*:', head) if first is None else first and (
            all(isinstance(v, dict) for v in first.values()) and len({tuple(v) for v in first.values()}) == 1
            or {"columns", "data"} <= set(first) and isinstance(first["data"], list))):
        raise TaskDataError(f"{spec}: {posixpath.basename(path)} is one JSON object holding a table (pandas' to_json() "
                            "with its default orient, or 'index' or 'split'), not JSON Lines: write it with "
                            "to_json(orient='records', lines=True)")
    if first is None:  # a document over several lines, a first line past _SNIFF_BYTES, or JSON Lines whose first
        # record is bad (one reject, not a refused file): a SQuAD document's first key is "version" or "data" (or it
        # spans lines: no line after the first is a record)
        key = re.match(rb'\{\s*"([^"\\]*)"', head)
        if key and key.group(1) in (b"data", b"version"):
            return "squad"
        records = any((o := _json_object(line)) is not None and "paragraphs" not in o  # (a SQuAD article on a line)
                      for line in lines[1:6] if line.strip())
        return "jsonl" if records or (len(lines) == 1 and key) else "squad"
    data = first.get("data")  # SQuAD's articles hold paragraphs; a JSON Lines record or pandas' orient="table" a list
    if "schema" in first and isinstance(data, list) and sum(1 for line in lines if line.strip()) == 1:
        raise TaskDataError(f"{spec}: {posixpath.basename(path)} is one JSON table (pandas' to_json(orient='table')), "
                            "not JSON Lines: write it with to_json(orient='records', lines=True)")
    return "squad" if isinstance(data, list) and all(isinstance(a, dict) and "paragraphs" in a for a in data[:3]) \
        else "jsonl"


def _json_object(line: bytes) -> dict | None:
    """A line's JSON object, read as Latin-1 (its structure, whatever the file's encoding), or None."""
    try:
        value = json.loads(line.decode("latin-1"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _data_file(path: str, fmt: str | None, extensions: dict = EXTENSIONS) -> bool:
    """Not hidden (.crc, _SUCCESS, Excel's ~$ lock files); in a folder (fmt not None) also named as data (of `fmt`, if
    set; a .txt file of any text format, as a .txt file named alone is read as the format set: resolve_files keeps
    a folder's .txt files for CSV, TSV, JSON Lines and SQuAD only where the folder has none of the format's own)."""
    ext = extension(path)
    if posixpath.basename(path).startswith((".", "_", "~$")):
        return False
    if fmt is None:
        return True
    if not fmt:
        return ext in extensions
    return extensions.get(ext) == fmt or (ext, fmt) == (".json", "squad") or ext == ".txt" and fmt in _TEXT_FORMATS


# The words that name a split when they lead a file's or folder's name ("dev.csv", "test/", "validation-2023.jsonl",
# the Hub's "test-00000-of-00001.parquet"; not "ab_test_reviews.csv" nor "speed-test.csv")
SPLIT_WORDS = {"train": {"train", "training"}, "dev": {"dev", "valid", "validation", "val", "eval", "evaluation"},
               "test": {"test", "testing", "holdout"}}
# what a split's folder may hold: a held-out split (dev_file, select_file) is often a test set (IMDB and AG News ship
# train and test only); training data never holds one
OWN_SPLIT_WORDS = {"train": SPLIT_WORDS["train"], "dev": SPLIT_WORDS["dev"] | SPLIT_WORDS["test"],
                   "select": SPLIT_WORDS["dev"] | SPLIT_WORDS["test"]}


def _hidden(root: str, path: str) -> bool:
    """Whether `path`, below the folder `root`, or a folder between them is hidden (`.git/`, Spark's `_temporary/`,
    `.ipynb_checkpoints/`: a name starting with '.' or '_'), as a file not named as data is (.crc, _SUCCESS, Excel's
    ~$ lock files)."""
    return any(part.startswith((".", "_", "~$")) for part in posixpath.relpath(path, root).split("/"))


def _files_below(fs, root: str) -> list[str]:
    """Every file below the folder `root`, hidden ones too (see _hidden). A local folder's symlinks to folders are
    followed (a data folder of links to exports elsewhere), each real folder once (a link to a folder above is no
    loop); a link to nothing, a FIFO or a socket is no file."""
    if not isinstance(fs, LocalFileSystem):
        return fs.find(root)
    out, seen = [], set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        out += [path for f in files if os.path.isfile(path := posixpath.join(folder, f))]
    return out


def _other_split(root: str, paths: list[str], split: str, named: frozenset = frozenset()) -> str | None:
    """The first of `paths` (below the folder `root`) whose name, or a folder's between them, leads with another
    split's word than `split`'s (a training folder holding dev.csv or test/), or None. `named`: words the user wrote
    (a glob's `test*.csv` names its test files: they are no stray)."""
    foreign = set().union(*SPLIT_WORDS.values()) - OWN_SPLIT_WORDS[split] - named
    for path in sorted(paths):
        for part in posixpath.relpath(path, root).split("/"):
            if re.match(r"[a-z]*", part.lower())[0] in foreign:  # its leading word: "test-0.csv", not "testimony"
                return posixpath.relpath(path, root)
    return None


def _narrowed(paths: list[str], split: str) -> str:
    """A glob's name part that matches `split`'s files only, for a refusal's remedy: the leading word of the first of
    `paths` named as `split`'s (`dev*` where dev.csv sits beside train.csv), else `<word>*`."""
    for path in sorted(paths):
        word = re.match(r"[a-z]*", posixpath.basename(path).lower())[0]
        if word in OWN_SPLIT_WORDS[split]:
            return f"{word}*"
    return "<word>*"


def _copies(paths: list[str]) -> tuple[str, str] | None:
    """A file the list holds twice, plain and compressed or compressed two ways (train.csv and train.CSV.gz,
    a.jsonl.gz and a.jsonl.xz): every row would be read twice. The names of one such pair (the plain file's first),
    or None."""
    stems = collections.defaultdict(list)
    for p in paths:
        stem, ext = posixpath.splitext(p)
        compressed = ext.lower() in COMPRESSIONS
        stems[(stem if compressed else p).lower()].append((compressed, posixpath.basename(p)))
    # (two plain files whose names differ in case only are two files)
    twice = sorted(sorted(group) for group in stems.values() if len(group) > 1 and any(c for c, _ in group))
    return (twice[0][0][1], twice[0][1][1]) if twice else None


def _refuse_unread(spec: str, root: str, paths: list[str]) -> None:
    """Raise TaskDataError naming the files below the folder `root` that hold data in a form not read here (UNREAD)."""
    unread = sorted(posixpath.relpath(p, root) for p in paths if extension(p) in UNREAD)
    if unread:
        named = "; ".join(f"{p}: {UNREAD[extension(p)]}" for p in unread[:5]) + ("; ..." if len(unread) > 5 else "")
        raise TaskDataError(f"{spec} holds {len(unread)} file(s) of a type not read here, which reading the folder "
                            f"would leave out ({named}), or move them out of the folder")


DELTA_LOG = "_delta_log"  # a Delta Lake table's transaction log, which names the table's live part files
_DELTA_EXPORT = ("export its current version as Parquet and name that (Spark: spark.read.format('delta').load(path)"
                 ".write.parquet(out); the deltalake package: pyarrow.parquet.write_table(DeltaTable(path)"
                 ".to_pyarrow_table(), out))")


def _refuse_delta(spec: str, root: str, tables: list[str], fs=None) -> None:
    """Raise TaskDataError naming the first of `tables` (Delta table folders at or below the folder `root`, or one
    above it, on the filesystem `fs`). A Delta table's rows are those of the part files its _delta_log/ names: the
    files a later version replaced or deleted (an overwrite, update, merge) stay beside them until VACUUM, 7 days by
    default. Read as a folder of Parquet files it would give the stale rows with the live ones, unsaid; reading the
    log is a Delta reader's work, not done here."""
    if tables:
        table = sorted(tables)[0]
        rel = posixpath.relpath(table, root)
        if rel.split("/")[0] == "..":  # a partition folder, a part file, a glob inside the table
            shown = table if fs is None or isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(table)
            what = f"{spec} is inside a Delta table, {shown}"
        else:
            what = f"{spec if rel == '.' else posixpath.join(spec.rstrip('/'), rel)} is a Delta table"
        raise TaskDataError(f"{what} (it holds {DELTA_LOG}/), which is not read here: its rows are the files its log "
                            f"names, not every file in the folder; {_DELTA_EXPORT}")


def _delta_above(fs, path: str) -> list[str]:
    """The nearest folder above `path` that holds a _delta_log/ (in a list; none: []): a named partition folder or
    part file, or a glob's fixed part, inside a table. One lookup a level of the path."""
    folder = path.rstrip("/") or path
    while (parent := posixpath.dirname(folder)) and parent != folder:
        folder = parent
        if fs.isdir(posixpath.join(folder, DELTA_LOG)):
            return [folder]
    return []


def _delta_tables(root: str, paths: list[str]) -> list[str]:
    """The Delta table folders at or below the folder `root` that `paths` (every file below it, hidden ones too) show:
    those holding a _delta_log/, where no folder from `root` to it is hidden (a hidden one is passed over whole)."""
    tables = set()
    for path in paths:
        parts = posixpath.relpath(path, root).split("/")[:-1]
        if DELTA_LOG in parts and not any(p.startswith((".", "_", "~$")) for p in parts[:parts.index(DELTA_LOG)]):
            tables.add(posixpath.join(root, *parts[:parts.index(DELTA_LOG)]))
    return sorted(tables)


def _delta_folders(fs, static: str, paths: list[str]) -> list[str]:
    """The folders from `static` (a glob's fixed part) to each of `paths` (what it matched) that hold a _delta_log/: a
    Delta table's part files are Parquet, so a glob matching none is not looked at. Locally a stat a folder; on an
    object store, where each lookup is a request (400 partitions, 400 of them), one listing of `static`."""
    parquet = [p for p in paths if extension(p) in (".parquet", ".pq")]
    folders = {posixpath.normpath(static)} if parquet else set()
    for path in parquet:
        parts = posixpath.relpath(posixpath.dirname(path), static).split("/")
        folders |= {posixpath.normpath(posixpath.join(static, *parts[:i + 1])) for i in range(len(parts))}
    if not folders or isinstance(fs, LocalFileSystem):
        return sorted(d for d in folders if fs.isdir(posixpath.join(d, DELTA_LOG)))
    log = f"/{DELTA_LOG}/"
    return sorted(folders & {posixpath.normpath(p.split(log)[0]) for p in fs.find(static) if log in p})


def resolve_files(spec: str, fmt: str = "", labeled: bool = True, split: str = "") -> list[tuple[str, str]]:
    """(path, format) pairs for a file, a folder (its data files and its subfolders', sorted; hidden ones passed
    over), a glob, or a datasets save_to_disk folder (`folder:split` for a DatasetDict), at a local path or any
    fsspec URL. `labeled=False`: inputs to predict, where a .txt file is plain text. `split` ("train", "dev",
    "select"): the split a folder is read as, which refuses a folder holding files named as another split's
    (`data/` with train.csv and test.csv, read whole as training: the test rows trained on). A Delta table's folder
    (holding _delta_log/), named, below the folder or the glob's fixed part, or above the Parquet files named (a
    partition folder, a part file), is refused (_refuse_delta)."""
    extensions = EXTENSIONS if labeled else INPUT_EXTENSIONS
    if fmt and fmt not in FORMATS:
        raise ValueError(f"unknown task.format {fmt!r}; expected one of {list(FORMATS)}")
    fs, root = fsspec.core.url_to_fs(spec)
    named = re.fullmatch(r"(.+):([\w.-]+)", root)  # folder:split
    if named and not fs.exists(root) and fs.isfile(posixpath.join(named[1], "dataset_dict.json")):
        root = posixpath.join(named[1], named[2])
        if not fs.isdir(root):
            raise FileNotFoundError(f"no split {named[2]!r} in {named[1]} ({spec})")
    datasets, start = [], root  # start: where the folders above, looked at for a Delta table, begin
    if fs.isdir(root):
        if fs.isfile(posixpath.join(root, "dataset_dict.json")):
            with fs.open(posixpath.join(root, "dataset_dict.json")) as f:
                splits = json.load(f).get("splits")
            raise TaskDataError(f"{spec} is a DatasetDict with splits {splits}; name one as {spec}:<split>")
        if fs.isfile(posixpath.join(root, "state.json")):
            return [(root if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(root), "hf")]
        root = root.rstrip("/") or root
        below = _files_below(fs, root)
        _refuse_delta(spec, root, _delta_tables(root, below))  # before any file is read
        found = [p for p in below if not _hidden(root, p)]
        inner = sorted(posixpath.dirname(p) for p in found if posixpath.basename(p) == "dataset_dict.json")
        if inner:
            rel = posixpath.relpath(inner[0], root)
            raise TaskDataError(f"{spec} holds a DatasetDict, {rel}; name one of its splits as "
                                f"{spec.rstrip('/')}/{rel}:<split>")
        datasets = sorted({posixpath.dirname(p) for p in found if posixpath.basename(p) == "state.json"})
        found = [p for p in found if not any(p.startswith(d + "/") for d in datasets)]
        _refuse_unread(spec, root, found)
        paths = [p for p in found if _data_file(p, fmt, extensions)]
        if fmt not in ("", "conll", "text") and any(extension(p) != ".txt" for p in paths):  # the format's own files:
            paths = [p for p in paths if extension(p) != ".txt"]  # a .txt beside them is a README or a licence
        paths += datasets if fmt in ("", "hf") else []  # a save_to_disk folder inside: one entry
        stray = _other_split(root, paths, split) if split else None
        if stray:
            raise TaskDataError(f"{spec} is read as the {split} split, and holds {stray}, named as another split's: "
                                f"name the {split} files alone (a file, a subfolder or a glob that matches them only, "
                                f"as {posixpath.join(spec.rstrip('/'), _narrowed(paths, split))})")
    elif any(c in root for c in "*?[") and not fs.isfile(root):  # a file named with brackets is that file
        # (train[1].csv read train1.csv as a glob's class, and sales[2024-01].csv matched nothing), as the corpus reader
        paths = [p for p in fs.glob(root) if _data_file(p, None) and fs.isfile(p)]
        # what the glob's wildcards matched is checked as a folder's files are (`data/*.csv`: train.csv, dev.csv);
        # a split's word the pattern itself writes is the user's choice (`data/test*.csv`, `data/train-*.csv`)
        parts = root.split("/")
        fixed = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
        static = "/".join(parts[:fixed]) or ("/" if root.startswith("/") else ".")
        written = frozenset(re.match(r"[a-z]*", part.lower())[0] for part in parts[fixed:])
        said = spec.split("/")  # the glob's fixed part as the user wrote it, naming a table found there
        said = "/".join(said[:next(i for i, part in enumerate(said) if any(c in part for c in "*?["))]) or "."
        _refuse_delta(said, static, _delta_folders(fs, static, paths))  # `table/*.parquet`: every version's files
        start = static
        stray = _other_split(static, paths, split, written) if split else None
        if stray:
            raise TaskDataError(f"{spec} is read as the {split} split, and matches {stray}, named as another "
                                f"split's: narrow the glob to the {split} files (`{_narrowed(paths, split)}` where it "
                                "has `*`), or name them alone (a file or a subfolder)")
    else:
        paths = [root] if fs.isfile(root) else []
    if any(extension(p) in (".parquet", ".pq") for p in paths):  # a Delta table's part files are Parquet
        _refuse_delta(spec, start, _delta_above(fs, start), fs)
    twice = _copies(paths)
    if twice:
        raise TaskDataError(f"{spec} holds {twice[0]} and a compressed copy of it ({twice[1]}): keep one")
    if not paths:
        raise FileNotFoundError(f"no data files match {spec!r} (accepted: {', '.join(extensions)}, or set the format)")
    return [(p if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(p),
             "hf" if p in datasets else _format(fs, p, fmt, spec, extensions)) for p in sorted(paths)]


def in_subfolders(spec: str, files: list[tuple[str, str]]) -> int:
    """How many of `files` (resolve_files(spec)'s) lie in subfolders of the folder `spec` (0 for a file or a glob)."""
    fs, root = fsspec.core.url_to_fs(spec)
    if not fs.isdir(root):
        return 0
    root = root.rstrip("/") + "/"
    return sum("/" in fsspec.core.url_to_fs(p)[1].removeprefix(root) for p, _ in files)
