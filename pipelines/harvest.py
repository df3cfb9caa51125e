"""A corpus of real English prose that needs no download: the documentation installed with Python.

Sources, in a fixed order so the corpus is the same on every machine with the same pinned packages:
the long descriptions in installed packages' METADATA (their READMEs), then docstrings of the
standard library and of installed packages (parsed with `ast`, never imported). Each README or
module becomes one document (paragraphs separated by blank lines), written as WikiExtractor-style
JSONL (id, url, title, text) in a few files, so the ordinary JSONL reader consumes it in a few
Ray tasks rather than one per document.
"""

from __future__ import annotations

import ast
import collections
import errno
import hashlib
import json
import os
import re
import shutil
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from pipelines.layout import build_dir

_CODE_FENCE = re.compile(r"```.*?```", re.S)
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_RST_ROLE = re.compile(r":[a-z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_URL = re.compile(r"https?://\S+")
_MARKUP = re.compile(r"[`*_#|=]{1,}")
_WORD = re.compile(r"[A-Za-z]{2,}")
SUMMARY = ".harvest.json"  # hidden: corpus readers skip it


def _prose_paragraphs(text: str) -> list[str]:
    """Keep paragraphs that read as sentences: 8 words or more, 70% of them alphabetic, ending as a sentence does.
    Doctests, shell, import and def lines, RST directives, fenced code and short table rows go. Parameter sections
    (`Args:`, `Parameters`, `:param x:`) read as sentences and stay (about a fifth of the default harvest's
    characters), and so do licence texts (MIT, BSD, Apache) in READMEs: a known limit, kept because a stricter
    filter would change the corpus and with it every prepared set's name."""
    text = _CODE_FENCE.sub("\n", text)
    out = []
    for para in re.split(r"\n\s*\n", text):
        lines = [ln.strip() for ln in para.splitlines()]
        if any(ln.startswith((">>>", "...", "$ ", "pip ", "import ", "from ", "def ", "..")) for ln in lines):
            continue
        para = " ".join(ln for ln in lines if ln)
        para = _RST_ROLE.sub(r"\1", _MD_LINK.sub(r"\1", para))
        para = _MARKUP.sub(" ", _URL.sub("", para))
        para = re.sub(r"\s+", " ", para).strip()
        words = para.split()
        alpha = len(_WORD.findall(para))
        # Prose: enough words, mostly alphabetic, and ends like a sentence.
        if len(words) >= 8 and alpha >= 0.7 * len(words) and para[-1:] in ".!?:)\"'":
            out.append(para)
    return out


def _docstrings(path: Path) -> list[str] | None:
    """The prose paragraphs of a module's docstrings; None if the file cannot be read or parsed."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None
    docs = []
    for node in _blocks(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                docs.extend(_prose_paragraphs(doc))
    return docs


_BLOCK = (ast.stmt, ast.excepthandler, ast.match_case)


def _blocks(tree: ast.AST) -> Iterator[ast.AST]:
    """The module and its statements (and except/case clauses) in ast.walk's order, without the expressions: no
    docstring lives in one, and they are ~89% of the nodes (ast.walk over them was 14 of the harvest's 20 s). The
    order is ast.walk's because every ancestor of a statement is a statement, a clause or the module."""
    queue = collections.deque([tree])
    while queue:
        node = queue.popleft()
        yield node
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                queue.extend(item for item in value if isinstance(item, _BLOCK))


def _metadata_description(path: Path) -> list[str]:
    text = path.read_text(errors="replace")
    _, _, body = text.partition("\n\n")  # METADATA headers end at the first blank line
    return _prose_paragraphs(body)


_STDLIB = Path(sysconfig.get_paths()["stdlib"])
_PURELIB = Path(sysconfig.get_paths()["purelib"])


def _source_name(kind: str, path: Path) -> str:
    """Machine-independent name of a source file, so the corpus hash does not depend on where Python lives."""
    return f"{kind}:{path.relative_to(_STDLIB if kind == 'stdlib' else _PURELIB).as_posix()}"


def _ours(name: str) -> bool:
    """This project's own install (its METADATA is README.md; an editable install's finder module): left out, so
    editing the README does not change the corpus, the quickstart's pretraining or any result measured on it."""
    return name.startswith(("bert_foundry-", "__editable__.bert_foundry-", "__editable___bert_foundry_"))


def _candidates() -> list[tuple[str, Path]]:
    stdlib, purelib = _STDLIB, _PURELIB
    # READMEs first: the richest prose; then standard-library docstrings, then packages' docstrings.
    items: list[tuple[str, Path]] = [("readme", p) for p in sorted(purelib.glob("*.dist-info/METADATA"))
                                     if not _ours(p.parent.name)]
    for root, kind in ((stdlib, "stdlib"), (purelib, "site")):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "test", "tests", "__pycache__"))
            for name in sorted(filenames):
                if name.endswith(".py") and not _ours(name):
                    items.append((kind, Path(dirpath) / name))
    return items


def harvest_installed_docs(out_dir: str | os.PathLike, max_mb: float = 8.0, min_chars: int = 400,
                           num_files: int = 8) -> dict:
    """Write documents to `out_dir` (idempotent: a complete earlier harvest is reused, and of two harvesting into
    one folder at once the first to finish is kept, the other's copy dropped); return its summary:
    documents, bytes, sha256, and the source files that could not be parsed (`unparsed`, a count, and
    `unparsed_sample`, the first few names): skipped, never silently."""
    out = Path(out_dir)
    asked = {"max_mb": max_mb, "min_chars": min_chars, "num_files": num_files}
    summary = _complete(out, asked)
    if summary is not None:
        return summary
    foreign = sorted(p.name for p in out.iterdir() if not re.fullmatch(r"installed-docs-\d+\.jsonl", p.name)) \
        if out.is_dir() else []
    if SUMMARY in foreign and (summary := _complete(out, asked)) is not None:
        return summary  # another harvest installed its copy between the two looks: reused
    if foreign:  # never replace a folder that holds anything but an interrupted harvest's files
        more = ", ..." if len(foreign) > 3 else ""
        raise ValueError(f"{out} already holds other files ({', '.join(foreign[:3])}{more}) and no complete harvest: "
                         "give an empty or new harvest folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    # this process's own (two harvests into one folder at once share nothing), hidden (sources skip it), and swept
    # by a later harvest into this folder's parent once this process is gone
    tmp = build_dir(out.parent, out.name)
    files = [open(tmp / f"installed-docs-{i:02d}.jsonl", "w", encoding="utf-8") for i in range(num_files)]
    budget, written, docs = int(max_mb * 2**20), 0, 0
    digest, unparsed = hashlib.sha256(), []
    for kind, path in _candidates():
        paragraphs = _metadata_description(path) if kind == "readme" else _docstrings(path)
        if paragraphs is None:
            unparsed.append(_source_name(kind, path))
            continue
        text = "\n\n".join(paragraphs)
        if len(text) < min_chars:
            continue
        title = path.parent.name.split("-")[0] if kind == "readme" else path.stem
        line = json.dumps({"id": str(docs), "url": _source_name(kind, path), "title": title, "text": text}) + "\n"
        files[docs % num_files].write(line)
        digest.update(line.encode())
        written, docs = written + len(text), docs + 1
        if written >= budget:
            break
    for f in files:
        f.close()
    summary = {"documents": docs, "bytes": written, "sha256": digest.hexdigest(), "unparsed": len(unparsed),
               "unparsed_sample": unparsed[:5], **asked}
    (tmp / SUMMARY).write_text(json.dumps(summary, indent=2))
    _install(tmp, out)
    return _complete(out, asked)  # ours, or that of a harvest that finished first (refused if of other settings)


def _complete(out: Path, asked: dict) -> dict | None:
    """The summary of the complete harvest in `out`, if there is one; one of other settings is refused."""
    if not (out / SUMMARY).is_file():
        return None
    summary = json.loads((out / SUMMARY).read_text())
    # a harvest of other settings is not silently reused as this one (summaries from before the record lack it)
    differ = {k: (summary[k], v) for k, v in asked.items() if k in summary and summary[k] != v}
    if differ:
        raise ValueError(f"{out} holds a harvest made with " + ", ".join(
            f"{k}={was} (asked: {now})" for k, (was, now) in differ.items()) + ": give another harvest "
            "folder (corpus.harvest_dir / task.corpus_dir) or the same settings, or delete that folder")
    return summary


def _install(tmp: Path, out: Path) -> None:
    """Rename the finished harvest `tmp` to `out`, or, where another process's complete harvest got there first
    (the same documents: a harvest is deterministic), drop `tmp` and leave that one, which may be being read.
    The rename is atomic and fails onto a folder that is not empty, so of two harvests finishing together one
    wins and the other sees its summary; an interrupted harvest's files in `out` are moved aside (into a build
    folder, which a later harvest here sweeps if this process dies), then removed."""
    while True:
        try:
            tmp.rename(out)
            return
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if (out / SUMMARY).is_file():
            shutil.rmtree(tmp)
            return
        aside = build_dir(out.parent, out.name)  # empty: `out` renames onto it
        try:
            out.rename(aside)
        except FileNotFoundError:  # another process moved them aside meanwhile
            aside.rmdir()
            continue
        if (aside / SUMMARY).is_file():  # a complete harvest landed between the check and the move: put it back
            try:
                aside.rename(out)
                continue
            except OSError:  # a third took the place meanwhile, with the same documents
                pass
        shutil.rmtree(aside)
