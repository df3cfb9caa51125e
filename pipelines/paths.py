"""Input paths -> (filesystem, path): a local path is a file name, a URI names its filesystem.

Every input is opened through here (sources.py lists and reads, layout.py fingerprints), so one
rule decides what a string means:
  * "scheme://..." is a URI: fsspec.filesystem(scheme) opens it ("file://" is a local path).
  * Anything else is a local path, taken literally: "Dpkg::Source.txt", "a#1.txt", "why?.txt",
    "*.txt" and non-ASCII names are file names. fsspec.core.url_to_fs would read "::" as URL
    chaining (and, for some filesystems, "#"/"?" as fragment/query), so local paths never go
    through it. Chained URLs ("simplecache::s3://...") are not supported as sources.
Globbing is source_files.py's business: it tries a source as a literal path before as a pattern.
"""

from __future__ import annotations

import io
import os
import re

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractBufferedFile

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def is_uri(path: str) -> bool:
    """True for "scheme://..." other than file://; such paths are kept as URIs end to end."""
    m = _URI.match(path)
    return bool(m) and m.group(1).lower() != "file"


def filesystem(path: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """(filesystem, path within it). Local paths come back absolute and otherwise untouched.

    Raises ValueError / ImportError for an unknown scheme or one whose backend is missing."""
    m = _URI.match(path)
    if m and m.group(1).lower() != "file":
        fs = fsspec.filesystem(m.group(1).lower())
        return fs, fs._strip_protocol(path)
    if m:
        path = path[len(m.group(0)):]
    return LocalFileSystem(), os.path.abspath(path)


def open_binary(path: str):
    """The file at `path`, opened for binary reading (seekable), with a sized readline (sized_readline). OSError if
    it cannot be opened."""
    fs, fpath = filesystem(path)
    return sized_readline(fs.open(fpath, "rb"))


def sized_readline(f):
    """A binary file whose readline takes a size, which the line readers bound every line by: `f`, or a remote
    filesystem's file (fsspec's AbstractBufferedFile: s3, gcs, http), whose readline takes none, in an
    io.BufferedReader."""
    return io.BufferedReader(f) if isinstance(f, AbstractBufferedFile) else f
