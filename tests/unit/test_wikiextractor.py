"""WikiExtractor's output as pipelines/sources.py reads it: its --json records and its <doc> blocks."""

import json
import os

import pytest

from tests.unit.test_sources import cfg, read


def test_wikiextractor_json_records_have_their_html_escapes_undone(tmp_path):
    """WikiExtractor 3's --html-safe (its default) escapes the text in --json mode too: "AT&amp;T", "x &lt; y"
    were trained on. A record of its keys (id, url ?curid=, title, text, and revid) has & < > unescaped, exactly
    (a "&para=2" stays); Hugging Face's wikimedia/wikipedia rows (the same keys, a /wiki/ url, text unescaped) and
    any other JSON lines file keep their text as written."""
    text = "AT&amp;T is a company. If x &lt; y then y &gt; x, rock &amp; roll, a=1&para=2 and &amp;lt;p&amp;gt;."
    plain = "AT&T is a company. If x < y then y > x, rock & roll, a=1&para=2 and &lt;p&gt;."
    url = "https://en.wikipedia.org/wiki?curid=12"
    lines = [{"id": "12", "revid": "1", "url": url, "title": "AT&T", "text": text},
             {"id": "13", "url": url, "title": "AT&T", "text": text},  # WikiExtractor 2.x: no revid
             {"id": "14", "url": url, "title": "AT&T", "text": text, "source": "my crawl"},
             {"id": "15", "url": "https://en.wikipedia.org/wiki/AT%26T", "title": "AT&T", "text": text},  # HF's
             {"text": text}]
    (tmp_path / "wiki_01").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [r["text"] for r in read(tmp_path / "wiki_01")] == [plain, plain, text, text, text]


def test_a_wikiextractor_title_holding_a_quote_is_still_dropped_from_its_text(tmp_path):
    """WikiExtractor 3.0 writes a title's '"' unescaped: title=""Weird Al" Yankovic" matched as an empty title and the
    title line stayed in the article's text; a later version escapes it in the tag (&quot;) but not in the line."""
    body = "Alfred Matthew Yankovic is an American singer and songwriter, known for parodies of songs."
    data = (f'<doc id="13" revid="5" url="u" title=""Weird Al" Yankovic">\n"Weird Al" Yankovic\n\n{body}\n</doc>\n'
            f'<doc id="14" url="u" title="&quot;Weird Al&quot; Yankovic">\n"Weird Al" Yankovic\n\n{body}\n</doc>\n')
    (tmp_path / "wiki_00").write_text(data)
    assert [r["text"] for r in read(tmp_path / "wiki_00")] == [body, body]


def test_doc_blocks_are_utf8_whatever_data_text_encoding_says_of_the_books_beside_them(tmp_path):
    """data.text_encoding is the plain-text books': WikiExtractor writes UTF-8, and its <doc> files read as cp1252
    beside cp1252 books made every accented article mojibake ("ZÃ¼rich"), rejected nowhere."""
    body = "Zürich is the largest city in Switzerland. Its café culture is famous, and so is its lake."
    (tmp_path / "wiki_01").write_text(f'<doc id="1" url="u" title="Zürich">\nZürich\n\n{body}\n</doc>\n',
                                      encoding="utf-8")
    (tmp_path / "book.txt").write_bytes(f"{body}\n".encode("cp1252"))
    assert [r["text"] for r in read(tmp_path / "wiki_01", text_encoding="cp1252")] == [body]
    assert [r["text"] for r in read(tmp_path / "book.txt", text_encoding="cp1252")] == [body]


def test_a_txt_of_concatenated_doc_files_is_read_as_wikiextractor_whole_and_in_ranges(tmp_path):
    """NVIDIA's BERT recipe concatenates WikiExtractor's output into one .txt (`cat text/*/wiki_* >
    wikicorpus_en.txt`): read as a book by its name, the <doc> lines were training text and hundreds of articles one
    document. Its head says what it is; the ranges a .txt is planned in own the articles whose <doc> starts in them."""
    from pipelines.sources import Span, iter_documents
    from pipelines.units import count_newlines

    docs = "".join(f'<doc id="{i}" url="https://en.wikipedia.org/wiki?curid={i}" title="Article {i}">\nArticle {i}\n\n'
                   + f"Article {i} is about a thing &amp; another, said at length. " * 4 + "\n</doc>\n"
                   for i in range(1, 60))
    (tmp_path / "wiki_00").write_text(docs)
    (tmp_path / "wikicorpus_en.txt").write_text(docs)
    expected = [(r["doc_id"], r["text"]) for r in read(tmp_path / "wiki_00", "w")]
    path = tmp_path / "wikicorpus_en.txt"
    rows = read(path, "w")
    assert [(r["doc_id"], r["text"]) for r in rows] == expected and len(rows) == 59
    assert "<doc" not in "".join(r["text"] for r in rows) and rows[0]["text"].startswith("Article 1 is about")
    size, ranged = path.stat().st_size, []
    for start in range(0, size, 512):  # ranges, as units.py plans a .txt (text by its name)
        span = Span(start, start + 512 if start + 512 < size else -1, count_newlines(str(path), 0, start))
        ranged += iter_documents(str(path), "w", cfg(path), span)
    assert [(r["doc_id"], r["text"]) for r in ranged] == expected


def test_a_doc_block_whose_escape_does_not_unescape_is_rejected_alone(tmp_path):
    """html.unescape raises ValueError on a decimal escape past int()'s 4,300 digits (WikiExtractor's --no-html-safe
    leaves one as written): it ended the read of the whole file, which ended prepare, as it did a wiki page's."""
    body = "The river runs past the old stone market, and the garden lies beyond the winter road. "
    huge = "&#" + "1" * 5000 + ";"
    blocks = [("Alpha", "Alpha", body), ("Beta", "Beta", body + huge), (huge, huge, body), ("Gamma", "Gamma", body)]
    (tmp_path / "wiki_00").write_text("".join(f'<doc id="{i}" url="u" title="{title}">\n{line}\n\n{text}\n</doc>\n'
                                              for i, (title, line, text) in enumerate(blocks)))
    rows = read(tmp_path / "wiki_00", "w")
    assert [(r["doc_id"], r["reject_reason"]) for r in rows] == [
        ("w#0", ""), ("w#5", "malformed_wikitext"), ("w#10", "malformed_wikitext"), ("w#15", "")]
    assert "4300" in rows[1]["sample"] and rows[3]["text"] == body.strip()


class Planned(Exception):
    """Raised where prepare plans its shard layout: the books it counted are all this test needs."""


def test_a_txt_of_doc_files_among_books_is_no_book_its_articles_split_one_by_one(tmp_path, monkeypatch):
    """Books are held out whole (every ~1 MiB piece of one under its file's name) where eval_fraction x books is 5 or
    more; the .txt of WikiExtractor's articles beside them, read an article a document, was counted and held out as
    one book too: every article of wikicorpus_en.txt got one split key, all of Wikipedia in train or in eval. It is
    no book to the books count, spill.book_names or the plain-text readers; each article gets a key of its own."""
    from pipelines import prepare
    from pipelines.layout import ShardLayout
    from pipelines.sources import iter_documents, reads_plain_text
    from pipelines.spill import book_names, split_key

    books = []
    for i in range(10):
        books.append(tmp_path / f"book{i:02}.txt")
        books[-1].write_text(f"Book {i} opens on a quiet morning in a small town by the sea.\n\nIt ends there too.\n")
    wiki = tmp_path / "wikicorpus_en.txt"
    wiki.write_text("".join(f'<doc id="{i}" url="u?curid={i}" title="Article {i}">\nArticle {i}\n\n'
                            f"Article {i} is about a thing and another, said at some length.\n</doc>\n"
                            for i in range(1, 41)))
    paths = [str(p) for p in (*books, wiki)]
    config = cfg(tmp_path, eval_fraction=0.5, num_workers=1, output_root=str(tmp_path / "prepared"))
    assert [reads_plain_text(p, config) for p in paths] == [True] * 10 + [False]

    def plan(cfg, input_bytes, books=0):
        raise Planned(books)

    monkeypatch.setattr(prepare.ShardLayout, "plan", plan)
    with pytest.raises(Planned) as planned:
        prepare.prepare(config)
    assert planned.value.args == (10,)
    layout = ShardLayout(4, 2, 0.5, whole_books=True)
    unit = {"parts": [{"path": p, "name": os.path.basename(p)} for p in paths]}
    assert book_names(unit, config, layout) == frozenset(p.name for p in books)
    ids = [r["doc_id"] for r in iter_documents(str(wiki), wiki.name, config)]
    keys = {split_key(config.seed, doc_id, book_names(unit, config, layout)) for doc_id in ids}
    assert len(ids) == len(keys) == 40
