"""A corpus's files less the prepared sets among them: prepare's own output is no corpus.

data.sources=[data] with the default data.output_root (data/prepared) read every earlier set back as corpus: its
shards (missing_text_column), manifest and tokenizer JSON (malformed_json), its vocab.txt as a book. The inputs then
changed on every run, so the set was never reused: a 20 GB corpus prepared again on each submission. Skipped: the
files under a folder holding a prepared set's manifest (data.output_root's sets, another output root's, or a set
copied into the corpus); under data.output_root, a set is found by its manifest even where no source picked that
file (a glob "data/**/*.txt" takes a set's tokenizer/vocab.txt alone). Nothing else under the root is skipped: prepare
writes only <root>/<name>/ sets there (and hidden build folders, which sources skip already), and a root holding the
corpus (output_root=/mnt/shared/data, sources=[/mnt/shared/data/wiki]) is read as before.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import posixpath

from pipelines.config import DataConfig
from pipelines.paths import filesystem, is_uri, open_binary
from pipelines.shards import MANIFEST
from pipelines.source_files import SourceError, resolve_sources


def corpus_files(cfg: DataConfig) -> tuple[list[str], str]:
    """(the files of cfg.sources less prepared sets, a line saying what was skipped and where, "" for nothing).
    SourceError where a source is inside a prepared set, or where nothing else is left."""
    files = resolve_sources(cfg)
    located = functools.cache(_location)  # a folder's, once: thousands of files share a few
    sets = {located(posixpath.dirname(f)) for f in files
            if posixpath.basename(f) == MANIFEST and _is_set_manifest(f)}
    root = _location(cfg.output_root)
    children = {_child(located(posixpath.dirname(f)), root) for f in files} - sets - {None}
    sets = sorted(sets | {c for c in children if _is_set_manifest(posixpath.join(_said(c), MANIFEST))})
    for source in cfg.sources:
        folder = _enclosing(_location(source), sets)
        if folder is not None:
            raise SourceError(f"data.sources: {source!r} is prepared data, in the prepared set {_said(folder)}: give "
                              f"the corpus's own files")
    kept, skipped = [], collections.Counter()
    for f in files:
        folder = _enclosing(located(posixpath.dirname(f)), sets)
        if folder is None:
            kept.append(f)
        else:
            skipped[folder] += 1
    if not skipped:
        return kept, ""
    said = "; ".join(f"{n:,} in the prepared set {_said(folder)}" for folder, n in sorted(skipped.items()))
    if not kept:
        raise SourceError(f"data.sources: every file is prepared data, no corpus: {said}")
    return kept, f"skipped {sum(skipped.values()):,} files of prepared sets, no corpus: {said}"


def _location(path: str) -> tuple[str, str]:
    """(scheme, path) where a path's folder is on its filesystem: a local one absolute with its links resolved."""
    _, where = filesystem(path)
    if not is_uri(path):
        return "", os.path.realpath(where)
    return path.split("://", 1)[0].lower(), where.rstrip("/")


def _child(location: tuple[str, str], root: tuple[str, str]) -> tuple[str, str] | None:
    """The folder of `root` that is `location` or holds it, where a set of that root would be; None outside it."""
    scheme, path = location
    prefix = root[1].rstrip("/") + "/"
    if scheme != root[0] or not path.startswith(prefix):
        return None
    return scheme, prefix + path[len(prefix):].split("/", 1)[0]


def _enclosing(location: tuple[str, str], folders: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The first of `folders` that is `location` or holds it; None for none."""
    scheme, path = location
    for folder in folders:
        if scheme == folder[0] and (path == folder[1] or path.startswith(folder[1].rstrip("/") + "/")):
            return folder
    return None


def _said(folder: tuple[str, str]) -> str:
    return f"{folder[0]}://{folder[1]}" if folder[0] else folder[1]


def _is_set_manifest(path: str) -> bool:
    """Whether `path` is a prepared set's manifest.json (shards.write_manifest), not a corpus file of that name."""
    try:
        with open_binary(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError):  # ValueError: not JSON, or not UTF-8
        return False
    return isinstance(manifest, dict) and {"format_version", "counts", "shards"} <= manifest.keys()
