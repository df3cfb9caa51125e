"""MediaWiki dumps: wikitext stripping, streamed page parsing, page filtering, rows out of .xml(.bz2)."""

import bz2
import gzip
import io
import re
import time
import tracemalloc
from xml.sax.saxutils import escape

import pytest

from pipelines.clean import normalize_text
from pipelines.config import DataConfig
from pipelines.sources import iter_documents
from pipelines.wiki import Page, Site, iter_pages, page_reject_reason, strip_wikitext


def strip(text: str) -> str:
    return normalize_text(strip_wikitext(text))


# ----------------------------------------------------------------------------- strip_wikitext

@pytest.mark.parametrize("wikitext, plain", [
    ("The [[capital city|capital]] of [[France]].", "The capital of France."),
    ("'''Paris''' is ''big''.", "Paris is big."),
    ("A{{citation needed|date=May 2020}} claim.", "A claim."),
    ("Nested {{outer|a={{inner|{{deep}}}}|b=c}}done.", "Nested done."),
    ("Fact.<ref name=\"a\">Smith, {{cite book|title=T}}</ref> More.<ref name=b/>", "Fact. More."),
    ("See [http://example.com the site] and [https://x.org].", "See the site and."),
    ("Text<!-- hidden\nnote --> here.", "Text here."),
    ("x<sup>2</sup> and <small>small</small><br/>next", "x2 and small next"),
    ("[[File:P.jpg|thumb|The [[Eiffel Tower]] at night]]Body.", "Body."),
    ("Body.\n[[Category:Capitals]]\n[[de:Paris]]", "Body."),
    ("[[Ali: Fear Eats the Soul]] is a film.", "Ali: Fear Eats the Soul is a film."),
    ("Paris ({{IPA|fr|pa.ʁi}}; {{audio|Paris.ogg}}) is a city.", "Paris is a city."),
    ("Less &lt;b&gt; than &amp; more&nbsp;here.", "Less <b> than & more here."),
    ("__NOTOC__Start.", "Start."),
    ("Euler: <math>e^{i\\pi}+1=0</math> holds.", "Euler: holds."),
    ("It is {{convert|5|km|mi|abbr=on}} long.", "It is 5 km long."),
    ("Called {{lang|fr|la Ville Lumière}} or {{lang-de|Lichtstadt}}.", "Called la Ville Lumière or Lichtstadt."),
    ("A {{nowrap|{{lang|la|terra nova}}}} here.", "A terra nova here."),
    # symbols and the inline templates whose words are the sentence's: they were dropped, gluing or cutting it
    ("No.{{nbsp}}1 in 1999{{ndash}}2000 and {{As of|2020}}, sold {{US$|5 million}}.",
     "No. 1 in 1999\u20132000 and As of 2020, sold US$5 million."),
    ("{{lang|fr|text=bonjour}}, {{convert|5|-|10|km}} from {{ill|Hans Müller|de}} {{circa|1900}}.",
     "bonjour, 5 - 10 km from Hans Müller c. 1900."),
    ("Kyoto{{efn|A note.}}was {{Nihongo|Kyoto|京都|Kyōto}}'s name.", "Kyoto was Kyoto's name."),
    ("Before {{Infobox|x={{{1}}}}} after.", "Before after."),
    ("At {{convert|-40|C|F}}, {{convert|1/2|mi|km}} or {{cvt|5|to|10|m}}.", "At -40 C, 1/2 mi or 5 to 10 m."),
    ("A {{nowrap|a{{!}}b}} c.", "A a b c."),  # {{!}} as "|" would have split its template's arguments
    # a '<' before a word that is no tag MediaWiki knows is text, as it renders it: the prose up to the next '>' went
    ("If x<y and y>z then x<z holds.", "If x<y and y>z then x<z holds."),
    ("Text <pages index=\"M.djvu\" from=5 to=9 /> and <quiz display=simple>{Q}</quiz>.", "Text and {Q}."),
    ("A std::vector<int> or List<T> holds <span style=\"c\">items</span>.",
     "A std::vector<int> or List<T> holds items."),
    # a quotation is prose, a block of its own (its author is not); inline code is a sentence's word; a call keeps
    # its "()", a removed template's "( )" goes even after a word; a template whose argument ends in "}" leaves no brace
    ("He said:{{quote|Ask not.|John F. Kennedy}}They cheered. {{Blockquote| text = Go. |author=X}}{{Quote|1=A=b.}}",
     "He said:\n\nAsk not.\n\nThey cheered.\n\nGo.\n\nA=b."),
    ("Use <code>malloc</code> or call main() first. Einstein({{IPA-de|x}}) was.",
     "Use malloc or call main() first. Einstein was."),
    ("The set {{math|{1, 2}}} has two.", "The set {1, 2} has two."),  # (a formula is words: test_wiki_languages)
])
def test_strip_inline_markup(wikitext, plain):
    assert strip(wikitext) == plain


def test_tables_dropped_headings_become_paragraphs_lists_kept():
    wikitext = """Intro text.
{| class="wikitable"
|-
! Year !! Value
|-
| 2001 || {{n/a}}
|-
| 2002 || {| class="inner"
| nested
|}
|}
== History ==
The city grew.
* First item
# Second [[item]]
=== Modern era ===
Today."""
    assert strip(wikitext).split("\n\n") == [
        "Intro text.", "History", "The city grew.\nFirst item\nSecond item", "Modern era", "Today."]


def test_trailing_reference_sections_cut():
    wikitext = "Body text.\n== See also ==\n* [[Other]]\n== References ==\n{{reflist}}"
    assert strip(wikitext) == "Body text."


def test_a_sources_section_amid_the_article_is_prose_the_trailing_ones_go():
    """A history's "Sources" section (its account of the ancient sources) cut the article there, the rest unread."""
    wikitext = ("Intro.\n== Sources ==\nThe ancient sources disagree.\n== Legacy ==\nLater text.\n"
                "=== Sub ===\nMore.\n== Notes ==\n{{notelist}}\n== References ==\n{{reflist}}\n"
                "=== Works cited ===\n* A book.\n== External links ==\n* [http://x.org X]\n[[Category:Y]]")
    assert strip(wikitext).split("\n\n") == ["Intro.", "Sources", "The ancient sources disagree.", "Legacy",
                                             "Later text.", "Sub", "More."]


def test_references_end_the_article_whatever_follows_them():
    """A level-2 "Works cited" after the references (featured articles have one), or a heading no list names: the
    references and what follows go; a mid-article "Notes" before prose stays."""
    wikitext = ("Intro.\n== History ==\nProse.\n== Notes ==\n{{notelist}}\n== References ==\n* Smith, J. A Book.\n"
                "== Works cited ==\n* Jones, K. Another.\n== Legacy ==\nAfter the references.\n")
    assert strip(wikitext).split("\n\n") == ["Intro.", "History", "Prose."]
    assert strip("Intro.\n== Notes ==\nA note on names.\n== Life ==\nProse.\n").split("\n\n") == [
        "Intro.", "Notes", "A note on names.", "Life", "Prose."]
    author = "Intro.\n== Bibliography ==\n* A novel.\n== Adaptations ==\nFilmed twice.\n== References ==\n* R.\n"
    assert strip(author).split("\n\n") == ["Intro.", "Bibliography", "A novel.", "Adaptations", "Filmed twice."]


def test_unclosed_markup_terminates_and_keeps_prose():
    # A vandalised page: unmatched template and link openers must not hang or eat the article.
    text = "Start {{broken " + "word " * 20000 + "[[also broken. End."
    out = strip(text)
    assert out.startswith("Start {{broken word") and out.endswith("[[also broken. End.")



def test_a_paragraph_starting_with_a_click_letter_stays_and_long_runs_of_lines_strip_fast():
    """The table-debris pattern's "^\\s*" ran over lines: every line starting with "!" went, "!Kung people ..." with
    it, and a page with thousands of category links (20k: ~7 s) tried every blank line they leave against all after
    it; the empty-parentheses and space-before-punctuation patterns were quadratic in a run of whitespace too.
    Table debris outside a closed table still goes: a "! Year !! Team", "!scope=col|Rank" or "| 2001" line."""
    kung = "The !Kung people speak !Kung.\n\n!Kung is a click language of Namibia and Botswana."
    debris = "\n! Year !! Team\n!scope=col|Rank\n| 2001 || A\n|}\n"
    assert strip("Intro.\n\n" + kung + debris + "End.") == "Intro.\n\n" + kung + "\n\nEnd."
    pages = ["Intro text here.\n" + "[[Category:X]]\n" * 20000 + "End.",
             "Results (" + "\n".join("{{flagicon|X}}" for _ in range(20000)) + " see below.",
             "Wide" + " " * 40000 + "gap.", "Blank" + "\n" * 40000 + "lines."]
    for page in pages:
        started = time.perf_counter()
        strip(page)
        assert time.perf_counter() - started < 2, page[:20]


# --------------------------------------------------------------------------- dumps and pages

ARTICLE_1 = ("'''Alpha''' is the first [[letter]] of the [[Greek alphabet]]. It was derived from "
             "the Phoenician letter aleph.{{sfn|Smith|2001}} In the system of Greek numerals it has "
             "a value of one.\n== History ==\nThe letter was used in many ways.")
ARTICLE_2 = ("'''Beta''' is the second letter of the Greek alphabet. In the system of Greek numerals "
             "it has a value of two. It is used in finance as a measure of risk.<ref>Ref.</ref>")


def dump_xml(pages: list[tuple[int, int, str, str, bool]]) -> bytes:
    """A small export in the real schema (namespace, siteinfo, revision with id and text)."""
    out = ['<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">',
           "<siteinfo><sitename>Wikipedia</sitename><namespaces><namespace key=\"0\" case=\"first-letter\" />"
           "<namespace key=\"1\" case=\"first-letter\">Talk</namespace></namespaces></siteinfo>"]
    for page_id, ns, title, text, redirect in pages:
        out.append(f"<page><title>{escape(title)}</title><ns>{ns}</ns><id>{page_id}</id>"
                   + (f'<redirect title="{escape(title)}x" />' if redirect else "")
                   + f"<revision><id>{page_id * 100}</id><timestamp>2024-01-01T00:00:00Z</timestamp>"
                   f'<text bytes="{len(text)}" xml:space="preserve">{escape(text)}</text></revision></page>')
    out.append("</mediawiki>")
    return "\n".join(out).encode()


SAMPLE_PAGES = [
    (12, 0, "Alpha", ARTICLE_1, False),
    (13, 0, "Alfa", "#REDIRECT [[Alpha]]", True),
    (14, 0, "Alpha (disambiguation)", "'''Alpha''' may refer to:\n* [[Alpha]]\n{{disambiguation}}", False),
    (15, 1, "Talk:Alpha", "This article needs more sources, say the editors. " * 5, False),
    (16, 0, "Beta", ARTICLE_2, False),
    (17, 0, "Gamma (band)", "'''Gamma''' may be:\n* A band\n{{Disambig|music}}", False),
]


def test_iter_pages_reads_fields_in_order():
    pages = list(iter_pages(io.BytesIO(dump_xml(SAMPLE_PAGES))))
    assert [(p.id, p.ns, p.title, p.redirect) for p in pages] == [
        (12, 0, "Alpha", False), (13, 0, "Alfa", True), (14, 0, "Alpha (disambiguation)", False),
        (15, 1, "Talk:Alpha", False), (16, 0, "Beta", False), (17, 0, "Gamma (band)", False)]
    assert pages[0].text == ARTICLE_1  # entities decoded, markup untouched


def test_page_reject_reasons():
    reasons = [page_reject_reason(p) for p in iter_pages(io.BytesIO(dump_xml(SAMPLE_PAGES)))]
    assert reasons == ["", "redirect", "disambiguation", "non_article_namespace", "", "disambiguation"]
    # Old dumps mark redirects only in the text.
    assert page_reject_reason(Page(1, 0, "X", False, "#redirect [[Y]]")) == "redirect"
    assert page_reject_reason(Page(2, 0, "X", False, "Text.{{Hospital disambiguation}}")) == "disambiguation"
    # An article tagged for a link to fix is still an article.
    assert page_reject_reason(Page(3, 0, "X", False, "See [[Y]]{{disambiguation needed|date=May 2020}}.")) == ""


GERMAN_SITEINFO = ('<siteinfo><sitename>Wikipedia</sitename><dbname>dewiki</dbname><namespaces>'
                   '<namespace key="-2" case="first-letter">Medium</namespace>'
                   '<namespace key="0" case="first-letter" /><namespace key="6" case="first-letter">Datei</namespace>'
                   '<namespace key="14" case="first-letter">Kategorie</namespace></namespaces></siteinfo>')


def test_a_non_english_dump_drops_its_own_file_and_category_links_and_disambiguation_pages(tmp_path):
    """A German dump links images as [[Datei:...]] and categories as [[Kategorie:...]] (names its <siteinfo>
    gives): with English names only, the caption's options and the category names were article text. Its
    disambiguation pages use {{Begriffsklärung}} (a {{Begriffsklärungshinweis}} hatnote is an article's), its
    reference sections are "Einzelnachweise"."""
    article = ("'''Berlin''' ist die Hauptstadt Deutschlands.[[Datei:Berlin.jpg|mini|hochkant|Das Rote Rathaus]] "
               "Sie hat [[Stadtbezirk|zwölf Bezirke]]. [[Medium:Hymne.ogg|Hymne]]{{Begriffsklärungshinweis}}\n"
               "== Einzelnachweise ==\n<references />\n[[Kategorie:Hauptstadt in Europa]]\n[[en:Berlin]]")
    disambiguation = "'''Mitte''' steht für:\n* [[Berlin-Mitte]]\n* [[Mitte (Film)]]\n{{Begriffsklärung}}"
    data = dump_xml([(1, 0, "Berlin", article, False), (2, 0, "Mitte", disambiguation, False)])
    start, end = data.index(b"<siteinfo>"), data.index(b"</siteinfo>") + len(b"</siteinfo>")
    data = data[:start] + GERMAN_SITEINFO.encode() + data[end:]
    path = tmp_path / "dewiki.xml"
    path.write_bytes(data)
    rows = list(iter_documents(str(path), "de", DataConfig(sources=[str(path)], min_document_chars=20)))
    assert [(r["doc_id"], r["reject_reason"]) for r in rows] == [("de#1", ""), ("de#2", "disambiguation")]
    assert rows[0]["text"] == "Berlin ist die Hauptstadt Deutschlands. Sie hat zwölf Bezirke."
    assert next(iter_pages(io.BytesIO(data))).site.link_namespaces == {"medium", "datei", "kategorie"}
    assert strip("Sie hat [[Kategorie:Hauptstadt]] zwölf.") == "Sie hat Kategorie:Hauptstadt zwölf."  # no siteinfo


@pytest.mark.parametrize("compress", [False, True])
def test_dump_to_rows(tmp_path, compress):
    data = dump_xml(SAMPLE_PAGES)
    path = tmp_path / ("enwiki.xml.bz2" if compress else "enwiki.xml")
    path.write_bytes(bz2.compress(data) if compress else data)
    rows = list(iter_documents(str(path), path.name, DataConfig(sources=[str(path)], min_document_chars=50)))
    assert [(r["doc_id"], r["reject_reason"]) for r in rows] == [
        (f"{path.name}#12", ""), (f"{path.name}#13", "redirect"), (f"{path.name}#14", "disambiguation"),
        (f"{path.name}#15", "non_article_namespace"), (f"{path.name}#16", ""),
        (f"{path.name}#17", "disambiguation")]
    alpha = rows[0]["text"]
    assert alpha.startswith("Alpha is the first letter of the Greek alphabet. It was derived")
    assert "\n\nHistory\n\nThe letter was used" in alpha and "{{" not in alpha and "[[" not in alpha
    assert rows[4]["text"].endswith("as a measure of risk.")
    assert rows[1]["sample"] == "Alfa" and rows[1]["text"] == ""


def test_multistream_bz2_dump_is_read_across_streams(tmp_path):
    data = dump_xml(SAMPLE_PAGES)
    cut = data.index(b"<page><title>Talk:Alpha")  # Wikipedia's multistream dumps cut between pages
    path = tmp_path / "multistream.xml.bz2"
    path.write_bytes(bz2.compress(data[:cut]) + bz2.compress(data[cut:]))
    rows = list(iter_documents(str(path), "m", DataConfig(sources=[str(path)], min_document_chars=50)))
    assert [r["doc_id"] for r in rows if not r["reject_reason"]] == ["m#12", "m#16"]


def test_large_dump_streams_in_bounded_memory(tmp_path):
    """3,000 pages (~2.7 MB of XML) must parse with memory for a page or so, not the dump."""
    pages = [(i, 0, f"Page {i}", ARTICLE_2 * 4, False) for i in range(1, 3001)]
    data = dump_xml(pages)
    path = tmp_path / "big.xml.bz2"
    path.write_bytes(bz2.compress(data))
    tracemalloc.start()
    count = sum(1 for _ in iter_documents(str(path), "big", DataConfig(sources=[str(path)])))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 3000
    assert len(data) > 2.5e6 and peak < 1e6, peak  # ~6 MB if pages were kept


def test_truncated_and_malformed_dumps_keep_pages_before_the_damage(tmp_path):
    data = dump_xml(SAMPLE_PAGES)
    cut = data.index(b"<page><title>Talk:Alpha")
    second = bz2.compress(data[cut:])
    (tmp_path / "cut.xml.bz2").write_bytes(bz2.compress(data[:cut]) + second[: len(second) // 2])
    (tmp_path / "bad.xml").write_bytes(data[:cut] + b"<page><title>Oops</titel></page>")
    config = DataConfig(sources=[str(tmp_path)], min_document_chars=50)
    for name, reason, at in [("cut.xml.bz2", "truncated_bz2", ""), ("bad.xml", "malformed_xml", f"@{cut}")]:
        rows = list(iter_documents(str(tmp_path / name), name, config))  # a broken page is named by its offset
        assert [(r["doc_id"], r["reject_reason"]) for r in rows] == [
            (f"{name}#12", ""), (f"{name}#13", "redirect"), (f"{name}#14", "disambiguation"), (name + at, reason)]


def history_xml(revisions: list[tuple[str, str]]) -> bytes:
    """One page of a history export: its revisions (timestamp, text) in the order given."""
    revs = "".join(f"<revision><id>{n}</id><timestamp>{ts}</timestamp><text>{escape(text)}</text></revision>"
                   for n, (ts, text) in enumerate(revisions))
    return ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/">'
            f"<page><title>P</title><ns>0</ns><id>1</id>{revs}</page></mediawiki>").encode()


def test_history_export_gives_the_latest_revision():
    oldest_first = [("2001-01-01T00:00:00Z", "first draft"), ("2010-05-01T00:00:00Z", "middle"),
                    ("2024-01-01T00:00:00Z", "current text")]
    [page] = iter_pages(io.BytesIO(history_xml(oldest_first)))
    assert page.text == "current text"
    shuffled = [oldest_first[1], oldest_first[2], oldest_first[0], ("2024-01-01T00:00:00Z", "same time, later")]
    [page] = iter_pages(io.BytesIO(history_xml(shuffled)))
    assert page.text == "same time, later"  # the greatest timestamp; on a tie the later one


def test_history_export_streams_in_bounded_memory():
    """300 revisions of 20 KB (6 MB) in one page: memory for a revision or two, not the history."""
    data = history_xml([(f"2020-01-01T00:{i // 60:02d}:{i % 60:02d}Z", f"revision {i} " + "w" * 20000)
                        for i in range(300)])
    tracemalloc.start()
    [page] = iter_pages(io.BytesIO(data))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert page.text.startswith("revision 299 ")
    assert len(data) > 6e6 and peak < 1e6, peak


def test_byte_order_mark_before_the_xml_declaration():
    data = b"\xef\xbb\xbf" + dump_xml(SAMPLE_PAGES)
    assert [p.id for p in iter_pages(io.BytesIO(data))] == [12, 13, 14, 15, 16, 17]


# ----------------------------------------------------------------------------- review fixes

def test_a_link_inside_an_inline_template_keeps_its_label():
    """Templates go before links: an inline template's argument split at the pipe inside a link gave "U.S.]]" and
    "[[Paris" as text."""
    assert strip("He worked in the {{nowrap|[[United States|U.S.]]}} for years.") == "He worked in the U.S. for years."
    assert strip("He said {{lang|fr|[[Paris|la ville]]}} loudly.") == "He said la ville loudly."
    assert strip("It is {{convert|5|km|mi}} from [[Paris]].") == "It is 5 km from Paris."


def test_links_to_media_files_under_a_local_alias_are_dropped():
    """<siteinfo> lists a namespace's one local name: de's "Bild:" (beside "Datei:"), es's "Imagen:", ru's
    "Изображение:" and pl's "Grafika:" are aliases of File, their options and captions were kept as text. A
    prefixed target naming a media file goes whatever the prefix; an article link stays."""
    german = Site(frozenset({"datei", "kategorie", "medium"}))
    assert normalize_text(strip_wikitext("[[Bild:Foo.jpg|mini|Ein Bild]] Berlin ist eine Stadt.", german)) == (
        "Berlin ist eine Stadt.")
    for link in ("[[Imagen:Foo.JPG|thumb|Una imagen]]", "[[Изображение:Карта.svg|200px]]", "[[Grafika:P.png]]",
                 "[[Fichier:Hymne.ogg|Hymne]]", "[[Datoteka:Book scan.djvu|page=3]]"):
        assert strip(f"{link} Prose.") == "Prose.", link
    assert strip("[[JPEG|the .jpg format]] and [[Ali: Fear Eats the Soul]].") == (
        "the .jpg format and Ali: Fear Eats the Soul.")


def wiki_file(tmp_path, name: str, data: bytes) -> list[tuple[str, str]]:
    path = tmp_path / name
    path.write_bytes(data)
    return [(r["doc_id"], r["reject_reason"])
            for r in iter_documents(str(path), name, DataConfig(sources=[str(path)], min_document_chars=50))]


def test_an_xml_file_that_is_no_wiki_dump_is_a_reject_not_nothing(tmp_path):
    """An .xml file with another root, or an export without a page, gave no row at all: lost without a count."""
    assert wiki_file(tmp_path, "feed.xml", b"<rss><item>" + b"hello world " * 100 + b"</item></rss>") == [
        ("feed.xml", "not_a_wiki_dump")]
    empty = dump_xml([])
    assert wiki_file(tmp_path, "empty.xml", empty) == [("empty.xml", "no_wiki_pages")]
    assert wiki_file(tmp_path, "empty.xml.bz2", bz2.compress(empty)) == [("empty.xml.bz2", "no_wiki_pages")]
    pages = dump_xml(SAMPLE_PAGES[:1])  # another root holding <page>s is no dump either
    assert wiki_file(tmp_path, "other.xml", pages.replace(b"mediawiki", b"other")) == [("other.xml", "not_a_wiki_dump")]


@pytest.mark.parametrize("codec", ["", ".gz", ".bz2"])
def test_a_broken_page_costs_that_page_not_the_rest_of_the_dump(tmp_path, codec):
    """One byte that is not UTF-8 or one broken tag in a dump read as one task (.xml, .xml.gz, single-stream
    .xml.bz2) lost every later page, counted as one reject: the parse starts again at the next <page> tag, inside
    the dump's root and with its <siteinfo>, so the broken page is rejected (named by its id where its bytes show
    it, else by its byte offset) and the next is read. A page left open where the next begins is broken too, and a
    first page whose own tag is broken is that page, not the dump's header."""
    data = dump_xml([(i, 0, f"Page {i}", ARTICLE_2 + f" Number {i}.", False) for i in range(1, 41)])
    data = data.replace(b"second letter", b"second l\xe9tter", 1)  # page 1: latin-1, not UTF-8
    data = data.replace(b"<title>Page 7</title>", b"<title>Page 7</titel>")  # page 7: a broken tag
    data = data.replace(b"Number 20.</text></revision></page>", b"Number 20.</text></revision>")  # page 20: open
    data = data.replace(b"<title>Page 30</title><ns>0</ns><id>30</id>", b"<title>Page 30")  # page 30: no id
    name = "wiki.xml" + codec
    rows = wiki_file(tmp_path, name, {"": bytes, ".gz": gzip.compress, ".bz2": bz2.compress}[codec](data))
    broken = [f"{name}#1", f"{name}#7", f"{name}#20", f"{name}@{data.index(b'<page><title>Page 30')}"]
    assert [r for r in rows if r[1]] == [(doc_id, "malformed_xml") for doc_id in broken]
    assert [r[0] for r in rows if not r[1]] == [f"{name}#{i}" for i in range(2, 41) if i not in (7, 20, 30)]
    data = dump_xml([(i, 0, f"Page {i}", ARTICLE_2, False) for i in range(1, 41)]).replace(b"<page>", b"<pag>", 1)
    rows = wiki_file(tmp_path, "first-" + name, {"": bytes, ".gz": gzip.compress, ".bz2": bz2.compress}[codec](data))
    assert rows == [(f"first-{name}#1", "malformed_xml")] + [(f"first-{name}#{i}", "") for i in range(2, 41)]


def test_a_page_after_a_broken_one_is_read_in_the_dumps_own_encoding(tmp_path):
    """The parse that starts again after a broken page started from the root tag alone, without the XML declaration:
    a latin-1 export's every later page with a non-ASCII byte was rejected as malformed_xml."""
    pages = "".join(f"<page><title>{t}</title><ns>0</ns><id>{i}</id><revision><text>Café {t}: {ARTICLE_2}</text>"
                    f"</revision></page>\n" for i, t in enumerate(["A", "B", "C"], 1)).replace("</text></rev", "<b>"
                                                                                           "</text></rev", 1)
    data = f'<?xml version="1.0" encoding="ISO-8859-1"?>\n<mediawiki><siteinfo></siteinfo>\n{pages}</mediawiki>\n'
    assert wiki_file(tmp_path, "latin.xml", data.encode("latin-1")) == [
        ("latin.xml#1", "malformed_xml"), ("latin.xml#2", ""), ("latin.xml#3", "")]


def test_an_export_without_ns_takes_the_namespace_its_title_names(tmp_path):
    """Export schemas 0.3/0.4 have no <ns>: every page was an article, talk and user pages included. The title's
    prefix names the namespace, by the names <siteinfo> gives (a German dump's "Diskussion:") or MediaWiki's
    canonical ones; a title whose prefix names none is an article."""
    siteinfo = ('<siteinfo><sitename>Wikipedia</sitename><namespaces><namespace key="0" />'
                '<namespace key="1">Diskussion</namespace><namespace key="2">Benutzer</namespace>'
                '<namespace key="4">Wikipedia</namespace></namespaces></siteinfo>')
    pages = [(1, 0, "Paris", ARTICLE_1, False), (2, 1, "Diskussion:Paris", ARTICLE_1, False),
             (3, 2, "Benutzer:Jimbo", ARTICLE_2, False), (4, 4, "Wikipedia:Hilfe", ARTICLE_2, False),
             (5, 1, "Talk:Paris", ARTICLE_2, False), (6, 3, "User_talk:Jimbo", ARTICLE_2, False),
             (7, 0, "Ali: Fear Eats the Soul", ARTICLE_2, False)]
    data = dump_xml(pages)
    start, end = data.index(b"<siteinfo>"), data.index(b"</siteinfo>") + len(b"</siteinfo>")
    data = data[:start] + siteinfo.encode() + data[end:]
    old = re.sub(rb"<ns>\d+</ns>", b"", data.replace(b"export-0.11", b"export-0.3"))
    assert [(p.ns, p.title) for p in iter_pages(io.BytesIO(old))] == [(ns, t) for _, ns, t, _, _ in pages]
    assert wiki_file(tmp_path, "old.xml", old) == [
        ("old.xml#1", "")] + [(f"old.xml#{i}", "non_article_namespace") for i in range(2, 7)] + [("old.xml#7", "")]


def test_a_page_without_an_id_is_rejected_not_a_crash(tmp_path):
    """A page with no <id> became document "<name>#-1", which crashed the tokenizing task ("record number out of
    range"): it is "missing_page_id", named by its offset, and the task goes on."""
    from pipelines.rejects import RejectLog
    from pipelines.spill import good_documents

    data = dump_xml([(1, 0, "Alpha", ARTICLE_1, False), (2, 0, "Beta", ARTICLE_2, False)])
    data = data.replace(b"<id>1</id>", b"", 1)
    path = tmp_path / "noid.xml"
    path.write_bytes(data)
    config = DataConfig(sources=[str(path)], min_document_chars=50)
    assert wiki_file(tmp_path, "noid.xml", data) == [(f"noid.xml@{data.index(b'<page>')}", "missing_page_id"),
                                                       ("noid.xml#2", "")]
    rejects = RejectLog()
    part = {"path": str(path), "name": "noid.xml", "rank": 0, "start": 0, "end": -1, "first": 0}
    assert [doc_id for doc_id, _, _ in good_documents(part, config, rejects)] == ["noid.xml#2"]
    assert rejects.summary() == {"missing_page_id": 1}


# ------------------------------------------------------------------ templates that render words, their punctuation

@pytest.mark.parametrize("wikitext, plain", [
    # dates: from their year|month|day (named options ignored), whatever the name's case, underscores and spaces
    ("'''Marie Curie''' ({{birth date|1867|11|7}} – {{death date|1934|7|4}}) was a physicist.",
     "Marie Curie (7 November 1867 – 4 July 1934) was a physicist."),
    ("Smith (born {{ Birth_date_and_age |1950|05|3|df=y}}) died {{death date and age|2020|1|2|1950|5|3}}.",
     "Smith (born 3 May 1950) died 2 January 2020."),
    ("Founded {{start date|1999}}, closed {{End date|2001|3}}, {{dts|2004|10|1}}, {{Film date|2001|11|16|US}}.",
     "Founded 1999, closed March 2001, 1 October 2004, 16 November 2001."),
    ("Born {{birth-date|July 17, 1954}} or {{bda|1954|7|17|mf=y}}; {{birth year and age|1954}}.",
     "Born July 17, 1954 or 17 July 1954; 1954."),
    # numbers, units, abbreviations, names and flags
    ("It weighs {{val|10100|u=tonnes}}; {{val|6.022|e=23|ul=mol-1}} of them.",
     "It weighs 10100 tonnes; 6.022\u00d710^23 mol-1 of them."),
    ("It had {{formatnum:1234567}} users in {{abbr|UK|United Kingdom}}.", "It had 1234567 users in UK."),
    ("The {{sortname|John|Smith}} case and {{flagicon|USA}} {{flag|United States}} team.",
     "The John Smith case and United States team."),
    ("'''Angela Merkel''' ({{IPA-de|ˈaŋɡela ˈmɛʁkl̩|lang}}; {{nee|Kasner}}; born {{birth date and age|1954|7|17}}) "
     "is a German politician.", "Angela Merkel (née Kasner; born 17 July 1954) is a German politician."),
    # what removed templates leave in parentheses: a leading "( ;", a trailing ", )", a "( – )" with its space
    ("'''Obama''' ({{IPAc-en|b|ə}} {{respell|bə|RAHK}}; born August 4, 1961) is.", "Obama (born August 4, 1961) is."),
    ("'''Tokyo''' ({{lang-ja|東京}}, {{IPA-ja|toːkʲoː|IPA}}) is a city.", "Tokyo (東京) is a city."),
    ("Curie ({{IPA|x}} – {{audio|y.ogg}}) was.", "Curie was."),
])
def test_templates_that_render_words_keep_them(wikitext, plain):
    """Every template out of a short list went to " ": "Angela Merkel (;; born ) is", "Marie Curie ( – ) was",
    "weighs.", "founded in and had users.", "The case and team." They render as MediaWiki shows them (a date as
    "17 July 1954", without the "(age 71)" of the day it is read), and the punctuation left between removed templates
    in parentheses goes, as WikiExtractor's cleaning does."""
    assert strip(wikitext) == plain


def test_a_date_of_digits_that_are_not_decimal_is_kept_as_written_not_a_crash():
    """str.isdigit holds for "17²" and int() refuses it: the page's ValueError ended a bz2 range's read."""
    assert strip("Born {{birth date|1954|7|17\u00b2}} in Hamburg.") == "Born July 1954 in Hamburg."
    assert strip("Born {{birth date|\u2460|7}} there.") == "Born \u2460 there."


def test_literal_parentheses_and_punctuation_stay_and_long_runs_clean_fast():
    """The parenthesis cleanup leaves a dash's "(–)", a call's "main()" and a ";)"; it is linear in long runs."""
    text = "The en dash (–) or hyphen (-), a call main() and a wink ;) stay (as written)."
    assert strip(text) == text
    for page in ["(" + " ;" * 20000 + "x", "a" + " ," * 20000 + "b", "( " * 20000, "x(" + " " * 40000 + "y"]:
        started = time.perf_counter()
        strip(page)
        assert time.perf_counter() - started < 2, page[:20]


def test_a_wiki_xml_set_prepared_before_the_template_rendering_is_renamed():
    """A set of MediaWiki XML prepared before holds the old text ("Merkel (;; born ) is"): it is prepared again, not
    reused. Sets of other readers keep their names."""
    import hashlib
    import json

    from pipelines.layout import PIPELINE_VERSION, dataset_name, hashed_config
    from pipelines.shards import FORMAT_VERSION

    cfg, inputs = DataConfig(sources=["/c"]), [{"path": "/c/enwiki.xml.bz2", "bytes": 1, "sha256": "0" * 64}]

    def name(**marker) -> str:
        spec = {"format_version": FORMAT_VERSION, "pipeline_version": PIPELINE_VERSION, "inputs": inputs,
                "config": hashed_config(cfg), "tokenizer_hash": None, **marker}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    assert dataset_name(cfg, inputs, None, formats={"/c/a.jsonl": "jsonl"}) == name()
    assert dataset_name(cfg, inputs, None, formats={"/c/enwiki.xml.bz2": "wiki_xml"}) not in {
        name(), name(wikitext="! lines only as table syntax")}
