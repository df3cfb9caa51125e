"""Where a prepared set's contents go: its name (a hash of inputs and config) and its shard layout.

Its own module because both prepare.py (the driver) and spill.py (the tokenizing tasks, which route
each document to its shard) need it, and neither should import the other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import lzma
import math
import os
import re
import shutil
import socket
import threading
import time
import uuid
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

from bert_core.files import alive
from bert_core.tokenizer import CHARACTER_COVERAGE
from pipelines.clean import _CLOSERS, _TERMINALS
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.encodings import check_encoding
from pipelines.parquet_source import bad_compressed_data
from pipelines.paths import filesystem
from pipelines.shards import FORMAT_VERSION, MANIFEST
from pipelines.sources import file_format, named_plain_text
from pipelines.gutenberg import GUTENBERG_HEAD, gutenberg_header
from pipelines.text_source import MAX_TEXT_DOCUMENT_BYTES, TEXT_DOCUMENT_BYTES, file_head

FULL_HASH_MAX_BYTES = 64 << 20  # inputs up to this size are named by sha256, larger ones by size + mtime
SHARD_TOKEN_BYTES = 8 << 20  # num_shards=0 aims at this many bytes of its documents' token ids per shard (~4M tokens:
# a random-next pool of thousands of article-sized documents (of two for 8 MiB ones: prepare warns when NSP
# pairs fall short), and enough shards on a 100 MB corpus that shard building spreads over the cores) ...
INPUT_BYTES_PER_TOKEN = 4  # ... estimated from input bytes (English text: ~4-5 bytes per WordPiece)
TOKEN_ID_BYTES = 2  # uint16 ids; the estimate need not follow the rare int32 case
PIPELINE_VERSION = 11  # in the dataset name: bump when the same inputs and config give other examples
# a given tokenizer's training settings (TokenizerConfig.validate says it ignores them): hashed as their defaults
IGNORED_BY_A_GIVEN_TOKENIZER = ("vocab_size", "min_frequency", "sample_documents", "sample_million_chars")
HEARTBEAT = ".heartbeat"  # in a build folder: its mtime is refreshed every HEARTBEAT_EVERY_S while its prepare runs
HEARTBEAT_EVERY_S = 60.0
# A build folder of another host or pid namespace, whose pid no check here reaches (a KubeRay retry runs on a new
# cluster, its head another hostname), is a killed prepare's once its heartbeat is this old: 30 beats, so a shared
# volume stalled for minutes, or hosts' clocks minutes apart (an NFS mtime is the server's time), spare a live build.
STALE_BUILD_S = 30 * 60
# build_dir's names: .<name>.tmp-<host>-<pid>-<uuid>, and .<name>.tmp-<uuid> from before the host tag
_BUILD_NAME = re.compile(r"\..+\.tmp-(?:([0-9a-f]{16})-([0-9]+)-)?[0-9a-f]{8}")
# clean._BOUNDARY's closer since 2026-12-02: a spaced '' after a terminal (BookCorpus's tokenized quote). Before, the
# quote opened the next sentence. (A spaced " is read as it always was: text holding only those keeps its name.)
_SPACED_CLOSE = re.compile(rf"[{_TERMINALS}]+[{_CLOSERS}]*[^\S\n]+''(?:\s|\Z)")  # a tab or two spaces: cleaned to one


# ---------------------------------------------------------------------------------------------
# Naming: the output folder is a function of inputs and config alone


def fingerprint_inputs(files: list[str], threads: int = 16) -> list[dict]:
    """sha256 of each input up to FULL_HASH_MAX_BYTES; size + mtime above it (a 100 GB corpus
    is not re-read just to be named). In file order, `threads` files at a time: a WikiExtractor corpus is ~20,000
    files of 1 MB on shared storage or S3, read one after the other on the driver at every prepare (and phase 2's)
    while the GPU nodes waited (hashlib and the reads release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    if len(files) < 2:
        return [_fingerprint(path) for path in files]
    with ThreadPoolExecutor(max_workers=min(threads, len(files))) as pool:
        return list(pool.map(_fingerprint, files))


def _fingerprint(path: str) -> dict:
    fs, fpath = filesystem(path)
    info = fs.info(fpath)
    entry = {"path": path, "bytes": int(info["size"])}
    if info["size"] <= FULL_HASH_MAX_BYTES:
        h = hashlib.sha256()
        with fs.open(fpath, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        entry["sha256"] = h.hexdigest()
    else:
        mtime = info.get("mtime") or info.get("LastModified") or info.get("updated")
        entry["mtime"] = str(mtime)
    return entry


def hashed_config(cfg: DataConfig, plain_text_only: bool = True, ignored_as_configured: bool = False) -> dict:
    """The config as it affects the output: not where it goes, how many workers or how the
    work is cut into units, or where a given tokenizer lives (its content hash stands in). `plain_text_only`: every
    input is read as plain text (data.text_documents=blank_lines ends sentences at lines in those files alone).
    `ignored_as_configured`: a given tokenizer's training settings hashed as before 2026-12-01 (prepared_name)."""
    d = dataclasses.asdict(cfg)
    for name in ("num_workers", "work_unit_bytes", "output_root"):
        d.pop(name)
    d["text_encoding"] = check_encoding(cfg.text_encoding)  # its canonical name: latin1 and latin-1 are one
    if not d["text_encoding"]:  # UTF-8 (named or not), as before the setting: prepared sets keep their names
        d.pop("text_encoding")
    else:  # a document that is valid UTF-8 past ASCII is read so (text_source.declared_or_utf8): a set prepared when
        # the declared encoding read every document (mojibake) is not reused
        d["text_encoding"] += ", a UTF-8 document as UTF-8"
        # read as windows-1252 since 2026-12-02 (text_source.declared_or_utf8): a set whose 0x80-0x9F punctuation
        # was dropped is not reused; other encodings keep their names
        if d["text_encoding"].startswith("iso8859-1,"):
            d["text_encoding"] += ", 0x80-0x9F as windows-1252"
    if d["text_documents"] == "books":  # as before the setting
        d.pop("text_documents")
    elif not plain_text_only:  # a line ends a sentence in plain-text files alone, it did in every source: a set of
        # JSON lines or parquet records prepared before is not reused (one of text files alone is the same, and kept)
        d["text_documents"] = "blank_lines in plain-text files"
    tok = d["tokenizer"]
    # Tokenizer settings added later are named only where the tokenizer trained differs from before them (a given
    # one is named by its hash): earlier prepared sets keep their names, and one with another alphabet is not reused.
    trained = tok.pop("path") is None
    lowercase = cfg.tokenizer.lowercase is not False  # unset: uncased, for a trained tokenizer
    tok["lowercase"] = lowercase
    if not trained or cfg.tokenizer.strip_accents in (None, lowercase):
        tok.pop("strip_accents")
    if not trained:  # named by its hash, as loaded with the settings; the training settings, which a given tokenizer
        # ignores (TokenizerConfig.validate), as their defaults: a changed one renamed the set (prepared again, and a
        # resubmitted pretraining refused), and one made with the defaults keeps its name
        tok.pop("limit_alphabet")
        tok.pop("lowercase")
        for name in IGNORED_BY_A_GIVEN_TOKENIZER if not ignored_as_configured else ():
            tok[name] = getattr(TokenizerConfig, name)
    elif tok["limit_alphabet"] is None:  # the coverage rule: a set trained before it kept 1000 characters
        tok["limit_alphabet"] = f"coverage {CHARACTER_COVERAGE}"
    return d


def dataset_name(cfg: DataConfig, inputs: list[dict], given_tokenizer_hash: str | None,
                 plain_text_only: bool = True, gutenberg: bool = False, formats: dict | None = None,
                 ignored_as_configured: bool = False, moved_cuts: bool = False, spaced_quotes: bool = False) -> str:
    """`gutenberg`, `moved_cuts`, `spaced_quotes`: what the heads of the plain-text inputs tell (TextHeads);
    `formats`: each input's reader (sources.read_format, from the heads prepare reads). A reader change renames only
    the sets it changes: a PIPELINE_VERSION bump would rename every set, and stop resubmitting a pretraining on any."""
    spec = {"format_version": FORMAT_VERSION, "pipeline_version": PIPELINE_VERSION, "inputs": inputs,
            "config": hashed_config(cfg, plain_text_only, ignored_as_configured),
            "tokenizer_hash": given_tokenizer_hash}
    if gutenberg:  # its header and licence are cut now, and a 2002-05 book's small print after its END line is
        # licence (an oldest-layout book after it keeps its text): a set prepared with either read is not reused
        spec["gutenberg"] = "header and licence cut; small print after the END line is licence"
    formats = formats or {}
    if any(f == "wikiextractor" and named_plain_text(path, cfg) for path, f in formats.items()):
        # a .txt of WikiExtractor's <doc> blocks was read as a book: ~1 MiB documents of articles, the tags as text
        spec["wikiextractor_text"] = "an article a document"
    if "wiki_xml" in formats.values():  # wiki.strip_wikitext deleted a paragraph opening with "!" ("!Kung") as a
        # table row, and blanked date/val/nee templates ("Curie ( – ) was"); a page it raised on (a number past
        # int()'s digits) ended its file's or bz2 range's read, later pages lost: such a set is other now (and wiki
        # XML is told by its name, or the head prepare sniffs; the page that raised, only by reading it). Since
        # 2026-12-02's second change it keeps "Titanic's" and "l'Odyssée" and the words of langx and the like; since
        # 2026-12-03 the words of fr/es/ja/ru inline templates and zh's -{...}- conversions (and German life dates end
        # no sentence: clean.split_sentences, which renames no set of other readers); since 2026-12-04 an {{age}}
        # whose year is blank (today's) renders no number, not "-1989"; and ru/ja/zh/pl/sv end sections are cut,
        # jawiki's and zhwiki's disambiguation pages (and enwiki's by kind) skipped, {{math}} and {{mvar}} rendered,
        # and German, Spanish and Russian abbreviations end no sentence (clean.ABBREVIATIONS)
        spec["wikitext"] = ("! lines only as table syntax; date, val, nee, flag, abbr, sortname and formatnum templates"
                            " rendered, punctuation-only parentheses dropped; a page that cannot be stripped one"
                            " malformed_wikitext reject; apostrophes as MediaWiki's doQuotes; langx, multi-unit"
                            " convert, sub, sup, frac, chem2 and 's rendered; external links of bracket-free labels"
                            " before internal ones; de/fr end sections cut; every interlanguage code shape and"
                            " MediaWiki's magic words dropped, C names kept; fr/es/ja/ru inline templates and"
                            " -{...}- language conversion rendered, de life dates one sentence; an age of a blank"
                            " year blank; ru/ja/zh/pl/sv end sections cut, ja/zh and enwiki-kind disambiguation"
                            " skipped, math and mvar rendered, de/es/ru abbreviations")
    if moved_cuts:  # a plain-text file was cut at byte offsets: a \r\n copy (or one behind a Gutenberg header) is cut
        # into other ~1 MiB documents now (text_source's docstring); a pure-LF file without a header where it was
        spec["text_cuts"] = "~1 MiB cuts at text offsets: less each \\r of a \\r\\n, from a Gutenberg header's end"
    if spaced_quotes:  # its sentences end elsewhere now (clean._BOUNDARY)
        spec["spaced_quotes"] = "a spaced '' after a terminal closes the sentence"
    if cfg.text_documents == "books" and any(f == "text" and not named_plain_text(path, cfg)
                                             for path, f in formats.items()):
        # a file sniffed as plain text (1342.txt.utf-8) is a book since 2026-12-04, held out whole with the others
        spec["sniffed_books"] = "a file sniffed as plain text is a book, held out whole"
    if cfg.dupe_factor > 1:  # shards sized from the corpus alone (ShardLayout.plan), and their passes written one
        # after another (prepare._pass_tables): only sets of several passes have other examples, only they are renamed
        spec["dupe_passes"] = "shards sized without dupe_factor, a pass after another"
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def prepared_name(cfg: DataConfig, *args, **kwargs) -> str:
    """The name in cfg.output_root of the set of these inputs and config (dataset_name's arguments): dataset_name's,
    unless no set holds it and one prepared before 2026-12-01 holds the name it had then (said in one line). Then, a
    given tokenizer's training settings (IGNORED_BY_A_GIVEN_TOKENIZER) were hashed as configured: such a set
    (configs/pretrain/cluster-base.yaml sets vocab_size 30522) is reused, not prepared again (20 GB), and a
    resubmitted pretraining on it is not refused (its continuation basis holds the set's name)."""
    name = dataset_name(cfg, *args, **kwargs)
    if cfg.tokenizer.path is None or (Path(cfg.output_root) / name / MANIFEST).exists():
        return name
    legacy = dataset_name(cfg, *args, **kwargs, ignored_as_configured=True)
    if legacy != name and (Path(cfg.output_root) / legacy / MANIFEST).exists():
        print(f"[prepare] reuse: {Path(cfg.output_root) / legacy} is this set, named before 2026-12-01 (by the "
              f"training settings a given tokenizer ignores: {', '.join(IGNORED_BY_A_GIVEN_TOKENIZER)})", flush=True)
        return legacy
    return name


class TextHeads(NamedTuple):
    """What the heads of a corpus's plain-text files tell of the reader changes that rename its set (dataset_name)."""
    gutenberg: bool  # a Project Gutenberg book: its header and licence are cut
    moved_cuts: bool  # a file whose ~1 MiB documents are cut elsewhere since 2026-12-02 (at text offsets)
    spaced_quotes: bool  # text whose spaced closing quotes end sentences since 2026-12-02 (_SPACED_CLOSE)


def text_heads(text_files: list[str], inputs: list[dict], cfg: DataConfig) -> TextHeads:
    """TextHeads of these plain-text files (`inputs`: their fingerprint_inputs), from their heads (_heads); stops once
    all are found. A file's cuts moved where its head holds \\r\\n or a Gutenberg START line and its text reaches the
    first offset a cut can fall at (books: TEXT_DOCUMENT_BYTES; blank_lines, whose cuts are its blank lines: the
    first split's MAX_TEXT_DOCUMENT_BYTES): by its size, or any compressed file's (its size is not its text's).
    Heads cannot tell a \\r\\n or spaced quote past them, nor a spaced quote in a JSON Lines or parquet record: such
    a set keeps its name."""
    size = {i["path"]: i["bytes"] for i in inputs}
    first_cut = MAX_TEXT_DOCUMENT_BYTES if cfg.text_documents == "blank_lines" else TEXT_DOCUMENT_BYTES
    gutenberg = moved_cuts = spaced_quotes = False
    for path, head in _heads(text_files):
        book = gutenberg_header(head) is not None
        reaches_a_cut = size[path] > first_cut or file_format(path, cfg) in ("bz2", "gzip", "xz")
        gutenberg = gutenberg or book
        moved_cuts = moved_cuts or (reaches_a_cut and (book or b"\r\n" in head))
        spaced_quotes = spaced_quotes or _SPACED_CLOSE.search(head.decode("utf-8", "replace")) is not None
        if gutenberg and moved_cuts and spaced_quotes:
            break
    return TextHeads(gutenberg, moved_cuts, spaced_quotes)


def _heads(text_files: list[str]) -> Iterator[tuple[str, bytes]]:
    """(path, its first GUTENBERG_HEAD bytes, decompressed) of each file. A file the reader rejects whole for its
    bytes (a truncated or corrupt .gz/.bz2/.xz) has none; an I/O error is raised, as it is there."""
    for path in text_files:
        try:
            head = file_head(path, GUTENBERG_HEAD[0])
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as e:
            if bad_compressed_data(e):
                continue
            raise
        yield path, head


def build_dir(parent: Path, name: str) -> Path:
    """A new hidden folder in `parent` to build dataset `name` in, named after this host and process, made. First
    the build folders of killed prepares are removed (`ray job stop` or the OOM killer left their spilled token ids,
    half the corpus's size, and shards, in a folder no later run looked at): this host's whose process no longer
    runs, and any other's whose heartbeat (see `heartbeat`; from before it: newest entry) is STALE_BUILD_S old."""
    host = _process_space()
    for old in parent.glob(".*.tmp-*"):
        match = _BUILD_NAME.fullmatch(old.name)
        if not match or not old.is_dir():
            continue
        if match[1] == host:
            if not alive(int(match[2])):
                _remove(old, "its process on this host no longer runs")
        elif (idle := time.time() - _last_beat(old)) > STALE_BUILD_S:
            _remove(old, f"a build of another host or an earlier cluster, its heartbeat {idle / 60:,.0f} min old")
    tmp = parent / f".{name}.tmp-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


@contextmanager
def heartbeat(folder: Path, every: float = HEARTBEAT_EVERY_S) -> Iterator[None]:
    """While the block runs, a daemon thread refreshes folder/HEARTBEAT's mtime every `every` seconds: a prepare on
    another host tells this running build from a killed one by it (build_dir). The file goes when the block ends,
    before the folder becomes the prepared set."""
    beat, stop = folder / HEARTBEAT, threading.Event()
    beat.touch()

    def refresh() -> None:
        while not stop.wait(every):
            try:
                beat.touch()
            except OSError:  # the shared volume's hiccup: the next beat tries again
                pass

    thread = threading.Thread(target=refresh, name="prepare-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        beat.unlink(missing_ok=True)


def _last_beat(folder: Path) -> float:
    """When the prepare building in `folder` last showed life: its heartbeat's mtime, or where there is none (a folder
    from before heartbeats, or one just made or just finished) its newest entry's. Now, if the folder is gone."""
    try:
        return (folder / HEARTBEAT).stat().st_mtime
    except FileNotFoundError:
        pass
    try:
        newest = folder.stat().st_mtime
    except FileNotFoundError:  # removed or renamed meanwhile
        return time.time()
    for root, dirs, files in os.walk(folder):
        for entry in dirs + files:
            try:
                newest = max(newest, os.stat(os.path.join(root, entry)).st_mtime)
            except FileNotFoundError:
                pass
    return newest


def _remove(folder: Path, why: str) -> None:
    size = 0
    for root, _, files in os.walk(folder):
        for entry in files:
            try:
                size += os.stat(os.path.join(root, entry)).st_size
            except FileNotFoundError:
                pass
    shutil.rmtree(folder, ignore_errors=True)
    print(f"[cleanup] removed {folder} ({size / 2**30:,.2f} GiB), the build folder of a killed prepare or harvest: "
          f"{why}", flush=True)


def _process_space() -> str:
    """Where a pid names one process: this host (its whole name: Kubernetes replicas differ in its tail) and its pid
    namespace (containers on one host number their processes apart)."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:  # no /proc (macOS): the host alone
        namespace = 0
    return hashlib.sha256(f"{socket.gethostname()} {namespace}".encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Shard layout: which shard a document's key selects


MIN_HELD_OUT_BOOKS = 5  # books held out whole only where eval_fraction x books expects at least this many


@dataclass(frozen=True)
class ShardLayout:
    num_train: int
    num_eval: int
    eval_fraction: float
    whole_books: bool = False  # a book's ~1 MiB pieces share their split (pipelines.spill.split_key)

    @classmethod
    def plan(cls, cfg: DataConfig, input_bytes: int, books: int = 0) -> ShardLayout:
        """From the corpus size (and config), never the worker count: the layout decides contents. `books`: the
        plain-text files read as books; held out whole where there are enough of them that the eval split is some
        books, not none (one 1 GB file, or BookCorpus's two, held out by name gave an empty eval split or train)."""
        # A shard is the pool random-next B segments are drawn from: sized by its documents, not by its examples.
        # Sized times dupe_factor, a shard held 1/dupe_factor of the documents (at BERT's 10, ~1 MiB books left
        # many shards one or two, and random-next pairs fell from 50% to 39%); a shard task holds one dupe pass's
        # examples at a time (prepare._pass_tables), so its memory does not grow with dupe_factor either.
        token_bytes = input_bytes / INPUT_BYTES_PER_TOKEN * TOKEN_ID_BYTES
        num_train = cfg.num_shards or max(1, math.ceil(token_bytes / SHARD_TOKEN_BYTES))
        num_eval = max(1, round(num_train * cfg.eval_fraction)) if cfg.eval_fraction > 0 else 0
        whole_books = cfg.text_documents == "books" and books * cfg.eval_fraction >= MIN_HELD_OUT_BOOKS
        return cls(num_train, num_eval, cfg.eval_fraction, whole_books)

    def is_eval(self, key: int) -> bool:
        return key < self.eval_fraction * 2.0**64  # the key's high bits: independent of key % n

    def shard_of(self, key: int, split_key: int | None = None) -> int:
        """Global shard index: train shards 0..num_train-1, eval shards after them. `split_key` (default `key`)
        decides the split: a book's, for every piece of it (pipelines.spill.split_key)."""
        held_out = self.is_eval(key if split_key is None else split_key)
        return self.num_train + key % self.num_eval if held_out else key % self.num_train

    def split_of(self, shard: int) -> tuple[str, int]:
        return ("train", shard) if shard < self.num_train else ("eval", shard - self.num_train)
