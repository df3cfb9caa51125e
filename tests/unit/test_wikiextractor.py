"""WikiExtractor's output as pipelines/sources.py reads it: its --json records and its <doc> blocks."""

import json

from tests.unit.test_sources import read


def test_wikiextractor_json_records_have_their_html_escapes_undone(tmp_path):
    """WikiExtractor 3's --html-safe (its default) escapes the text in --json mode too: "AT&amp;T", "x &lt; y"
    were trained on. A record of its keys (id, url, title, text, and revid) is unescaped as its <doc> files are; any
    other JSON lines file keeps its text as written."""
    text = "AT&amp;T is a company. If x &lt; y then y &gt; x, and rock &amp; roll is music."
    plain = "AT&T is a company. If x < y then y > x, and rock & roll is music."
    lines = [{"id": "12", "revid": "1", "url": "u", "title": "AT&T", "text": text},
             {"id": "13", "url": "u", "title": "AT&T", "text": text},  # WikiExtractor 2.x: no revid
             {"id": "14", "url": "u", "title": "AT&T", "text": text, "source": "my crawl"},
             {"text": text}]
    (tmp_path / "wiki_01").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [r["text"] for r in read(tmp_path / "wiki_01")] == [plain, plain, text, text]


def test_a_wikiextractor_title_holding_a_quote_is_still_dropped_from_its_text(tmp_path):
    """WikiExtractor 3.0 writes a title's '"' unescaped: title=""Weird Al" Yankovic" matched as an empty title and the
    title line stayed in the article's text; a later version escapes it in the tag (&quot;) but not in the line."""
    body = "Alfred Matthew Yankovic is an American singer and songwriter, known for parodies of songs."
    data = (f'<doc id="13" revid="5" url="u" title=""Weird Al" Yankovic">\n"Weird Al" Yankovic\n\n{body}\n</doc>\n'
            f'<doc id="14" url="u" title="&quot;Weird Al&quot; Yankovic">\n"Weird Al" Yankovic\n\n{body}\n</doc>\n')
    (tmp_path / "wiki_00").write_text(data)
    assert [r["text"] for r in read(tmp_path / "wiki_00")] == [body, body]
