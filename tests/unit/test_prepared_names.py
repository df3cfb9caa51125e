"""A prepared set's name after corpus reading changed (a Gutenberg book's header and licence cut; under a declared
cp1252, a UTF-8 document read as UTF-8): the sets whose examples changed are renamed, every other keeps its name, so
an interrupted pretraining on one can still be resubmitted (a PIPELINE_VERSION bump would rename them all)."""

import dataclasses
import gzip
import hashlib
import json
import os

import pytest

from pipelines import prepare
from pipelines.config import DataConfig
from pipelines.encodings import check_encoding
from pipelines.layout import PIPELINE_VERSION, dataset_name, hashed_config, text_heads
from pipelines.shards import FORMAT_VERSION

INPUTS = [{"path": "/corpus/book.txt", "bytes": 1000, "sha256": "0" * 64}]
START = "*** START OF THE PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE ***"
BOOK = "It is a truth universally acknowledged, that a single man in possession of a good fortune.\n\n" * 20
HEADER = "The Project Gutenberg eBook of Pride and Prejudice\n\nTitle: Pride and Prejudice\n\n"


def earlier_name(cfg: DataConfig, plain_text_only: bool = True, **config) -> str:
    """The name before these changes: the spec with no marker of them (`config`: hashed as it was then)."""
    spec = {"format_version": FORMAT_VERSION, "pipeline_version": PIPELINE_VERSION, "inputs": INPUTS,
            "config": {**hashed_config(cfg, plain_text_only), **config}, "tokenizer_hash": None}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def test_only_a_cp1252_or_gutenberg_corpus_is_renamed():
    """UTF-8 corpora (named or not) keep their names, in either text_documents mode; a declared cp1252 or latin-1
    corpus and one holding a Gutenberg book get new ones (the old set held mojibake, or the licences)."""
    utf8 = [DataConfig(sources=["/corpus"], **kw) for kw in
            ({}, {"text_encoding": "utf-8"}, {"text_encoding": "UTF8"}, {"text_documents": "blank_lines"})]
    for cfg in utf8:
        assert dataset_name(cfg, INPUTS, None) == earlier_name(cfg)
        assert dataset_name(cfg, INPUTS, None, gutenberg=True) != earlier_name(cfg)
    blank = DataConfig(sources=["/corpus"], text_documents="blank_lines")
    assert dataset_name(blank, INPUTS, None, False) == earlier_name(blank, False)
    for encoding in ("cp1252", "latin-1"):
        cfg = DataConfig(sources=["/corpus"], text_encoding=encoding)
        assert dataset_name(cfg, INPUTS, None) != earlier_name(cfg, text_encoding=check_encoding(encoding))
    names = {e: dataset_name(DataConfig(sources=["/corpus"], text_encoding=e), INPUTS, None)
             for e in ("", "cp1252", "latin1", "latin-1")}
    assert names[""] != names["cp1252"] != names["latin1"] == names["latin-1"]


def test_a_gutenberg_book_is_told_from_its_head_compressed_or_not(tmp_path):
    """A START line in a file's first GUTENBERG_HEAD bytes, as the reader finds it; an essay about Gutenberg, a START
    line past the head's 600 lines, an empty file and a truncated .gz (rejected whole by the reader) are none."""
    book = tmp_path / "pg1342.txt"
    book.write_text(HEADER + START + "\n\n" + BOOK)
    packed = tmp_path / "pg1342.txt.gz"
    packed.write_bytes(gzip.compress(book.read_bytes()))
    essay = tmp_path / "essay.txt"
    essay.write_text("Project Gutenberg was founded in 1971 by Michael Hart.\n\n" + BOOK)
    late = tmp_path / "late.txt"
    late.write_text("A line of text.\n" * 600 + START + "\n" + BOOK)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    truncated = tmp_path / "cut.txt.gz"
    truncated.write_bytes(gzip.compress((HEADER + START + "\n" + BOOK * 40).encode())[:300])

    def gutenberg(*files):  # what prepare's text_heads tells of these files
        inputs = [{"path": str(f), "bytes": f.stat().st_size} for f in files]
        return text_heads([str(f) for f in files], inputs, DataConfig(sources=["/corpus"])).gutenberg

    assert gutenberg(essay, late, empty, truncated, book)
    assert gutenberg(packed)
    assert not gutenberg(essay, late, empty, truncated)
    assert not gutenberg()


class Named(Exception):
    """Raised where prepare has named its set: what it passed is all this test needs."""


@pytest.mark.parametrize("documents", ["books", "blank_lines"])
def test_prepare_names_a_corpus_with_a_gutenberg_book_apart(tmp_path, monkeypatch, documents):
    """The driver looks for a book among the files read as plain text: named .txt, and a file no name places that is
    sniffed as text (an extensionless pg1342); a START line inside a JSON Lines record is no book's."""
    passed = []

    def named(*args, **_):  # the heads beyond a Gutenberg book: tests/unit/test_reader_change_names.py
        passed.append(args)
        raise Named

    monkeypatch.setattr(prepare, "prepared_name", named)
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"text": START + "\n" + BOOK}) + "\n")
    plain = tmp_path / "plain.txt"
    plain.write_text(BOOK)
    unnamed = tmp_path / "pg1342"
    unnamed.write_text(HEADER + START + "\n\n" + BOOK)
    for sources, gutenberg in (([records, plain], False), ([records, plain, unnamed], True), ([unnamed], True)):
        cfg = DataConfig(sources=[str(s) for s in sources], text_documents=documents, output_root=str(tmp_path / "o"))
        with pytest.raises(Named):
            prepare.prepare(cfg)
        *_, plain_text_only, found, _formats = passed.pop()
        assert found is gutenberg
        assert plain_text_only is (documents == "books" or records not in sources)


def test_only_the_sets_a_reader_change_reads_otherwise_are_renamed():
    """The 2026-12-01 reader changes rename the sets they change and those alone: one holding a Gutenberg book (a
    2002-05 small print after the END line is licence now), one with a .txt of WikiExtractor's <doc> blocks (read as
    a book before) and one of MediaWiki XML (a paragraph opening with "!" was deleted as a table row). Plain books,
    JSON lines, parquet and WikiExtractor files read so before (extensionless, or data.format=wikiextractor) keep
    their names."""
    cfg = DataConfig(sources=["/corpus"])
    spec = {"format_version": FORMAT_VERSION, "pipeline_version": PIPELINE_VERSION, "inputs": INPUTS,
            "config": hashed_config(cfg), "tokenizer_hash": None, "gutenberg": "header and licence cut"}
    assert dataset_name(cfg, INPUTS, None, gutenberg=True) != hashlib.sha256(
        json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    kept = [{"/c/book.txt": "text"}, {"/c/a.jsonl": "jsonl", "/c/b.parquet": "parquet", "/c/book.txt.gz": "text"},
            {"/c/wiki_00": "wikiextractor", "/c/wiki_01.bz2": "wikiextractor"}]
    for formats in kept:
        assert dataset_name(cfg, INPUTS, None, formats=formats) == earlier_name(cfg)
    named = DataConfig(sources=["/corpus"], format="wikiextractor")
    assert dataset_name(named, INPUTS, None, formats={"/c/w.txt": "wikiextractor"}) == earlier_name(named)
    renamed = [{"/c/book.txt": "text", "/c/wikicorpus_en.txt": "wikiextractor"},
               {"/c/enwiki-pages-articles-multistream.xml.bz2": "wiki_xml"},
               {"/c/wiki_00": "wikiextractor", "/c/dump": "wiki_xml"}]
    assert earlier_name(cfg) not in {dataset_name(cfg, INPUTS, None, formats=f) for f in renamed}


def test_prepare_names_its_set_with_the_reader_of_each_file(tmp_path, monkeypatch):
    """prepare hands dataset_name each file's reader as the reader will pick it: by name, by its head where its name
    does not say (an extensionless wiki_00, a MediaWiki dump), and a .txt opening with "<doc " as WikiExtractor's."""
    passed = []

    def named(*args, **_):  # the heads beyond a Gutenberg book: tests/unit/test_reader_change_names.py
        passed.append(args)
        raise Named

    monkeypatch.setattr(prepare, "prepared_name", named)
    doc = '<doc id="1" url="u?curid=1" title="A">\nA\n\nA is a thing, said at some length here.\n</doc>\n'
    dump = "<mediawiki><page><title>A</title><id>1</id><revision><text>A.</text></revision></page></mediawiki>"
    files = {"book.txt": BOOK, "wikicorpus_en.txt": doc, "wiki_00": doc, "records.jsonl": json.dumps({"text": "A."}),
             "dump": dump}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(Named):
        prepare.prepare(DataConfig(sources=[str(tmp_path)], output_root=str(tmp_path / "o")))
    assert {os.path.basename(p): f for p, f in passed.pop()[-1].items()} == {
        "book.txt": "text", "wikicorpus_en.txt": "wikiextractor", "wiki_00": "wikiextractor", "records.jsonl": "jsonl",
        "dump": "wiki_xml"}


def test_a_given_tokenizers_ignored_training_settings_do_not_rename_its_set():
    """With data.tokenizer.path, vocab_size, min_frequency and the sample sizes are ignored (TokenizerConfig.validate)
    but were hashed: changing one renamed the set, prepared again (20 GB) and a resubmitted pretraining refused. A set
    made with their defaults keeps its name; for a trained tokenizer each still renames it."""
    from pipelines.config import TokenizerConfig

    def name(**tok) -> str:
        return dataset_name(DataConfig(sources=["/corpus"], tokenizer=TokenizerConfig(**tok)), INPUTS, "f" * 64)

    changes = [{"vocab_size": 30522}, {"min_frequency": 5}, {"sample_documents": 10}, {"sample_million_chars": 1.0}]
    given = TokenizerConfig(path="/models/bert-base-uncased")
    tok = {k: v for k, v in dataclasses.asdict(given).items()  # hashed as before: the settings a given one takes out
           if k not in ("path", "limit_alphabet", "lowercase", "strip_accents")}
    spec = {"format_version": FORMAT_VERSION, "pipeline_version": PIPELINE_VERSION, "inputs": INPUTS,
            "config": {**hashed_config(DataConfig(sources=["/corpus"], tokenizer=given)), "tokenizer": tok},
            "tokenizer_hash": "f" * 64}
    assert {name(path=given.path, **c) for c in changes} == {name(path=given.path)} == {
        hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]}
    assert len({name(**c) for c in changes} | {name()}) == len(changes) + 1


def test_a_set_named_by_a_given_tokenizers_settings_before_is_found_and_reused(tmp_path, monkeypatch, capsys):
    """A set prepared before the settings a given tokenizer ignores stopped being hashed, with one of them not its
    default (configs/pretrain/cluster-base.yaml: vocab_size 30522), got a new name after the upgrade: the corpus was
    prepared again and a resubmitted pretraining refused (its basis holds the set's name). It is found by its old
    name, and reused, said in one line; a set under the new name, or none under the old, is the new name's."""
    from pipelines.config import TokenizerConfig
    from pipelines.layout import prepared_name
    from pipelines.shards import MANIFEST

    (corpus := tmp_path / "corpus.txt").write_text(BOOK)
    root, inputs = tmp_path / "prepared", prepare.fingerprint_inputs([str(corpus)])
    given = TokenizerConfig(path=str(tmp_path / "bert-base-uncased"), vocab_size=30522)
    cfg = DataConfig(sources=[str(corpus)], tokenizer=given, output_root=str(root))
    tok = {k: v for k, v in dataclasses.asdict(given).items()  # hashed before: as configured
           if k not in ("path", "limit_alphabet", "lowercase", "strip_accents")}
    spec = {"format_version": FORMAT_VERSION, "pipeline_version": PIPELINE_VERSION, "inputs": inputs,
            "config": {**hashed_config(cfg), "tokenizer": tok}, "tokenizer_hash": "f" * 64}
    legacy = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    args = (cfg, inputs, "f" * 64, True, False, {str(corpus): "text"})
    new = dataset_name(*args)
    assert new != legacy and prepared_name(*args) == new  # nothing prepared yet: the new name
    (root / legacy).mkdir(parents=True)
    assert prepared_name(*args) == new  # a build that never finished (no manifest) is no set
    (root / legacy / MANIFEST).write_text("{}")
    assert prepared_name(*args) == legacy
    assert f"[prepare] reuse: {root / legacy} is this set, named before 2026-12-01" in capsys.readouterr().out
    at_defaults = (DataConfig(sources=[str(corpus)], tokenizer=TokenizerConfig(path=given.path),
                              output_root=str(root)), *args[1:])
    assert prepared_name(*at_defaults) == new  # the same name then and now: nothing else looked for

    # prepare() itself: reused under the old name, nothing prepared (stubs for the tokenizer it would load)
    monkeypatch.setattr(prepare, "_given_tokenizer", lambda t: object())
    monkeypatch.setattr(prepare, "tokenizer_hash", lambda t: "f" * 64)
    monkeypatch.setattr(prepare, "_result", lambda path, reused: (path, reused))
    monkeypatch.setattr(prepare, "build_dir", lambda *a: pytest.fail("prepared again"))
    assert prepare.prepare(cfg) == (root / legacy, True)
    (root / new).mkdir()
    (root / new / MANIFEST).write_text("{}")  # a set under the new name comes first
    assert prepare.prepare(cfg) == (root / new, True)
