"""Corpus sources -> the files they name, and each file's stable name (the part of a doc_id before "#").

`resolve_sources` expands paths, globs ("**" recurses), directories and fsspec URIs into a sorted file list;
`relative_names` names each file relative to their common directory, so a document's id is the same across runs,
machines and worker counts; `doc_order_key` orders doc_ids numerically. pipelines/sources.py reads the files.
"""

from __future__ import annotations

import os
import posixpath

import fsspec

from pipelines.config import DataConfig
from pipelines.paths import filesystem, is_uri


class SourceError(RuntimeError):
    """A configured source matches no files or cannot be read at all; the message names it."""


class SourceReadError(SourceError):
    """Reading a corpus file failed (a disk error, a network reset, a timeout): no config mistake, so jobs keep its
    traceback (jobs.config.io.cli); the message names the file. It takes the message alone, so it pickles out of a
    Ray task whole."""


# Codecs with no decoder installed here. Every file of such a corpus would be one reject, so it is a configuration
# error: refused before any file is read (pipelines/sources.py) and by `--check` (PretrainConfig.check_environment).
UNREAD_CODECS = {".zst": "zstd", ".zstd": "zstd"}


def refuse_unread_codec(path: str) -> None:
    """Raise SourceError naming `path` if its extension is a codec nothing here decodes."""
    ext = posixpath.splitext(path)[1].lower()
    if codec := UNREAD_CODECS.get(ext):
        raise SourceError(f"{path}: {codec}-compressed ({ext}) files cannot be read here (no {codec} decoder is "
                          f"installed); decompress them first or leave them out of data.sources")


def resolve_sources(cfg: DataConfig) -> list[str]:
    """Expand paths, globs ("**" recurses), directories (recursively; a local one's folder symlinks followed) and
    fsspec URIs into a sorted, de-duplicated file list. Hidden files and folders inside a directory are skipped.

    Local paths are file names whatever their characters (paths.py); a source that exists is
    taken literally, and only one that names nothing is tried as a glob."""
    files = set()
    for source in cfg.sources:
        files.update(_expand(source))
    return sorted(files)


def _expand(source: str) -> list[str]:
    """The files of one source; a local folder reached through two of its glob matches (a symlink to it) is read
    once, under the first."""
    try:
        fs, path = filesystem(source)
    except (ImportError, ValueError) as e:  # unknown protocol, or its fsspec backend missing
        raise SourceError(f"data.sources: cannot open a filesystem for {source!r}: {e}") from e
    local = not is_uri(source)
    try:
        # A path that exists is that file or folder whatever characters its name holds ("*", "?",
        # "[" included); only a source that names nothing is tried as a glob pattern.
        if fs.exists(path) or not fsspec.core.has_magic(path):
            matches = [path] if fs.exists(path) else []
        else:
            base = _glob_base(path)
            matches = [m for m in fs.glob(path) if not _hidden(posixpath.relpath(m, base))]
        files, seen = [], set()
        for m in sorted(matches):
            if local and os.path.isdir(m):
                files += _local_files(m, seen)
            elif fs.isdir(m):
                files += [f for f in fs.find(m) if not _hidden(posixpath.relpath(f, m))]
            else:
                files.append(m)
    except OSError as e:
        raise SourceError(f"data.sources: cannot list {source!r}: {e}") from e
    if not files:
        raise SourceError(f"data.sources: {source!r} matches no files")
    if local:
        for f in files:
            if not os.access(f, os.R_OK) or not os.path.isfile(f):
                raise SourceError(f"data.sources: {f} (from {source!r}) cannot be read")
        return files
    return [fs.unstrip_protocol(f) for f in files]


def _local_files(root: str, seen: set) -> list[str]:
    """Files under a local folder, less hidden ones, following folder symlinks as `find -L` does (fsspec's find
    lists such a link as a file). Each real folder is walked once, the first path to it in sorted order winning:
    a link to an ancestor does not recurse, and a folder linked twice is not read twice. `seen`: the (device,
    inode) of the folders walked already, this walk's added."""
    files = []

    def fail(e: OSError):  # os.walk skips a folder it cannot list unless told
        raise e

    for folder, dirs, names in os.walk(root, onerror=fail, followlinks=True):
        st = os.stat(folder)
        if (st.st_dev, st.st_ino) in seen:
            dirs.clear()
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files += [os.path.join(folder, n) for n in names if not n.startswith(".")]
    return files


def _glob_base(pattern: str) -> str:
    parts = pattern.split("/")
    static = next(i for i, part in enumerate(parts) if fsspec.core.has_magic(part))
    return "/".join(parts[:static]) or "/"


def _hidden(relpath: str) -> bool:
    return any(part.startswith(".") for part in relpath.split("/"))


def relative_names(files: list[str]) -> list[str]:
    """Names of files relative to their common directory: the stable part of doc_ids. Always valid UTF-8: a
    local name whose bytes are not (Python holds them as surrogate escapes) shows them as `\\xNN`. Files on more
    than one filesystem (local paths and s3://, say) are named under their scheme: "s3:/bucket/x.txt"."""
    schemes = {f.split("://", 1)[0] if is_uri(f) else "" for f in files}
    paths = [_path(f, len(schemes) > 1) for f in files]  # one scheme's paths are relative, another's absolute
    if len(paths) == 1:
        return [_printable(posixpath.basename(paths[0]))]
    base = posixpath.commonpath([posixpath.dirname(p) for p in paths])
    return [_printable(posixpath.relpath(p, base)) for p in paths]


def _path(file: str, scheme: bool) -> str:
    if not is_uri(file):
        return file
    name, path = file.split("://", 1)
    return f"/{name}:/{path.lstrip('/')}" if scheme else path


def _printable(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def doc_order_key(doc_id: str) -> tuple[str, int]:
    """Sort key for doc_ids: file name, then record number as a number ("#10" after "#9")."""
    name, _, n = doc_id.rpartition("#")
    return (name, int(n)) if name and n.lstrip("-").isdigit() else (doc_id, -1)
