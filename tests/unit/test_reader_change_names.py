"""The 2026-12-02 reader changes rename the sets they change and those alone, told from file names and the heads
prepare reads anyway: MediaWiki XML (a page whose wikitext cannot be stripped is one reject, where it ended the read
of its file or bz2 range), a plain-text file whose ~1 MiB cuts moved (they count its text now: bytes less the \\r of
each \\r\\n, from the end of a Gutenberg header) and BookCorpus's tokenized text (a spaced '' after a terminal closes
its sentence). A pure-LF corpus without a Gutenberg header, the quickstart's and the e2e fixtures', keeps its name:
an interrupted pretraining on it can still be resubmitted."""

import gzip
import hashlib
import json

import pytest

from pipelines import prepare
from pipelines.config import DataConfig
from pipelines.layout import PIPELINE_VERSION, dataset_name, hashed_config
from pipelines.shards import FORMAT_VERSION

# the markers of the reader changes before these, as the sets prepared then were named by them
GUTENBERG = "header and licence cut; small print after the END line is licence"
WIKITEXT = ("! lines only as table syntax; date, val, nee, flag, abbr, sortname and formatnum templates rendered, "
            "punctuation-only parentheses dropped")
# the marker of the first 2026-12-02 change, before apostrophes and langx & co (a set prepared with it is renamed)
QUOTES_EARLIER = "; a page that cannot be stripped one malformed_wikitext reject"
START = "*** START OF THE PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE ***\n"
HEADER = "The Project Gutenberg eBook of Pride and Prejudice\n\nTitle: Pride and Prejudice\n\n" + START
SMALL, BIG = 200_000, 1_500_000  # a book under TEXT_DOCUMENT_BYTES is one document, cut nowhere; one over it is cut


def prose(size: int) -> str:
    """Paragraphs of plain sentences, a blank line between them, `size` characters or a few more."""
    paragraph = "The river ran past the stone wall of the garden. It was winter, and the market was shut.\n" * 4
    return (paragraph + "\n") * (size // (len(paragraph) + 1) + 1)


def earlier_name(cfg: DataConfig, inputs: list[dict], plain_text_only: bool = True, **markers) -> str:
    """A set's name before the 2026-12-02 reader changes: the spec with the markers it had then."""
    spec = {"format_version": FORMAT_VERSION, "pipeline_version": PIPELINE_VERSION, "inputs": inputs,
            "config": hashed_config(cfg, plain_text_only), "tokenizer_hash": None, **markers}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


class Named(Exception):
    """Raised where prepare has named its set: what it passed is all these tests need."""


def names(tmp_path, monkeypatch, files: dict[str, bytes], **config) -> tuple[str, str]:
    """(the name prepare gives the set of `files`, the name that set had before the 2026-12-02 reader changes)."""
    passed = []

    def named(*args, **kwargs):
        passed.append((args, kwargs))
        raise Named

    monkeypatch.setattr(prepare, "prepared_name", named)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, data in files.items():
        (corpus / name).write_bytes(data)
    with pytest.raises(Named):
        prepare.prepare(DataConfig(sources=[str(corpus)], output_root=str(tmp_path / "out"), **config))
    args, kwargs = passed.pop()
    cfg, inputs, _, plain_text_only, gutenberg, _ = args
    return dataset_name(*args, **kwargs), earlier_name(cfg, inputs, plain_text_only,
                                                       **({"gutenberg": GUTENBERG} if gutenberg else {}))


BOOKCORPUS = "`` where are you going ? ''\ni looked around .\n`` nowhere . ''\nshe shrugged .\n" * 40


@pytest.mark.parametrize("files,config,renamed", [
    # kept: their documents and sentences are the same as before
    ({"book.txt": prose(BIG).encode()}, {}, False),  # pure LF, cut where it always was
    ({"book.txt": prose(BIG).encode()}, {"text_documents": "blank_lines"}, False),
    ({"a.jsonl": json.dumps({"text": prose(SMALL)}).encode(), "b.txt": prose(SMALL).encode()}, {}, False),
    ({"book.txt": prose(SMALL).replace("\n", "\r\n").encode()}, {}, False),  # under 1 MiB: cut nowhere, as before
    ({"book.txt": prose(BIG).replace("\n", "\r\n").encode()}, {"text_documents": "blank_lines"}, False),  # no split
    ({"pg1342.txt": (HEADER + prose(SMALL)).encode()}, {}, False),  # a Gutenberg book under 1 MiB: one document
    ({"story.txt": b'He left. "Where?" she asked.\n\nShe said "Stop." Then she left.\n' * 50}, {}, False),
    ({"story.txt": b'he said . "\nthen he left .\n' * 50}, {}, False),  # a spaced " opens, as it always did
    # renamed: their ~1 MiB cuts moved
    ({"book.txt": prose(BIG).replace("\n", "\r\n").encode()}, {}, True),
    ({"pg1342.txt": (HEADER + prose(BIG)).encode()}, {}, True),
    ({"book.txt.gz": gzip.compress(prose(SMALL).replace("\n", "\r\n").encode())}, {}, True),  # its text's size unknown
    # renamed: a spaced closing quote after a terminal ends its sentence now
    ({"books_large_p1.txt": BOOKCORPUS.encode()}, {}, True),
    ({"books_large_p1.txt": BOOKCORPUS.encode()}, {"text_documents": "blank_lines"}, True),
    ({"books_large_p1.txt": BOOKCORPUS.replace(" ''", "\t''").encode()}, {}, True),  # cleaning makes it one space
], ids=["lf-book", "lf-book-blank-lines", "jsonl-and-lf", "crlf-small", "crlf-blank-lines", "gutenberg-small",
        "quoted-prose", "spaced-quote-at-line-end", "crlf-big", "gutenberg-big", "crlf-gz", "bookcorpus",
        "bookcorpus-blank-lines", "bookcorpus-tab"])
def test_a_plain_text_set_is_renamed_where_the_reader_changed_its_documents_or_sentences(
        tmp_path, monkeypatch, files, config, renamed):
    name, earlier = names(tmp_path, monkeypatch, files, **config)
    assert (name != earlier) is renamed


def test_a_wiki_xml_set_prepared_before_a_bad_page_was_one_reject_is_renamed():
    """A page whose wikitext raised (a number past int()'s 4300 digits) ended the read of its .bz2: later pages were
    lost from the set. Every set of MediaWiki XML is renamed (the reader cannot tell such a page without reading);
    other readers' keep their names."""
    cfg, inputs = DataConfig(sources=["/c"]), [{"path": "/c/enwiki.xml.bz2", "bytes": 1, "sha256": "0" * 64}]
    assert dataset_name(cfg, inputs, None, formats={"/c/enwiki.xml.bz2": "wiki_xml"}) not in {earlier_name(
        cfg, inputs, wikitext=WIKITEXT), earlier_name(cfg, inputs, wikitext=WIKITEXT + QUOTES_EARLIER)}
    assert dataset_name(cfg, inputs, None, formats={"/c/a.jsonl": "jsonl"}) == earlier_name(cfg, inputs)


def test_the_quickstart_and_an_lf_book_corpus_keep_their_names():
    """Pinned before the 2026-12-02 reader changes: the quickstart's harvest (JSON lines) and pure-LF books, in either
    text_documents mode, named as they were."""
    docs = [{"path": f"/data/corpus-0.5mb/installed-docs-{i:02d}.jsonl", "bytes": 65_536 + i, "sha256": f"{i}" * 64}
            for i in range(8)]
    books = [{"path": "/corpus/book.txt", "bytes": 3 << 20, "sha256": "a" * 64}]
    quick = DataConfig(sources=["/data/corpus-0.5mb"], output_root="/data/prepared")
    assert dataset_name(quick, docs, None, True, False, {d["path"]: "jsonl" for d in docs}) == "90d64e55b7a1ab4d"
    for documents, pinned in (("books", "8d464029ba60f32c"), ("blank_lines", "1f968d2d7853dbaa")):
        cfg = DataConfig(sources=["/corpus"], text_documents=documents)
        assert dataset_name(cfg, books, None, True, False, {"/corpus/book.txt": "text"}) == pinned
