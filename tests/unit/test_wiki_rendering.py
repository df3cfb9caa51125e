"""strip_wikitext keeps what MediaWiki renders as text: apostrophes next to bold/italic markup, the words of inline
templates, and drops what it does not: file links whose captions hold an external link, the end sections of the
largest non-English Wikipedias, interlanguage links of every code shape, and magic words in any case or language."""

import time

import pytest

from pipelines.clean import normalize_text
from pipelines.wiki import strip_wikitext


def strip(text: str) -> str:
    return normalize_text(strip_wikitext(text))


@pytest.mark.parametrize("wikitext, plain", [
    # MediaWiki's Parser::doQuotes: an odd ''' beside odd '' is an apostrophe and italics; '''' is ' and bold
    ("The film ''Titanic'''s success.", "The film Titanic's success."),
    ("It was in ''[[Nature (journal)|Nature]]'''s pages.", "It was in Nature's pages."),
    ("'''Smith''''s house.", "Smith's house."),
    ("Il est l'auteur de l'''Odyssée''.", "Il est l'auteur de l'Odyssée."),
    ("La trama dell'''Inferno'' è famosa.", "La trama dell'Inferno è famosa."),
    ("''''''Six'''''' here.", "'Six' here."),  # past five, the extra apostrophes are text
    # of two odd ''' the one after a one-letter word is the apostrophe, not the first on the line
    ("'''Paris''' is where l'''Odyssée'' was sold.", "Paris is where l'Odyssée was sold."),
    # balanced markup, and lines read one by one (an odd run on one line does not pair with the next line's)
    ("'''Paris''' is ''big'' and '''''very''''' old.", "Paris is big and very old."),
    ("A ''b'''\nthe l'''X'' line.", "A b'\nthe l'X line."),
])
def test_apostrophes_that_mediawiki_shows_stay(wikitext, plain):
    """Every run of 2-5 apostrophes was dropped: "Titanics success", "lOdyssée"."""
    assert strip(wikitext) == plain


@pytest.mark.parametrize("wikitext", [
    "[[File:A.jpg|thumb|Photo: [https://nasa.gov NASA]]]Body.",
    "[[Datei:Berlin.jpg|mini|Blick vom [[Fernsehturm]], Foto: [http://example.org J. Doe]]]\nBody.",
    "[[File:Map.png|thumb|Map, after [https://example.org/map.pdf]]]\nBody.",
])
def test_a_file_link_whose_caption_holds_an_external_link_is_dropped(wikitext):
    """The [[File:..]] stayed as prose, markup and all: internal links were resolved before the caption's external
    link was, and an internal link cannot hold a "[" of its own."""
    assert strip(wikitext) == "Body."


@pytest.mark.parametrize("wikitext, plain", [
    ("A link [https://x.org [[Foo|Bar]] baz] here.", "A link Bar baz here."),
    ("A link [https://x.org Bar [[Baz]]] here.", "A link Bar Baz here."),
    ("[[File:A.jpg|thumb|By [https://x.org [[Ann]]]]]Body [http://y.org ''[[Foo|Bar]]'' baz].", "Body Bar baz."),
])
def test_an_external_links_label_holding_an_internal_link_is_its_text(wikitext, plain):
    """With external links resolved before internal ones (above), a label holding a [[link|text]] ended at the link's
    first "]": "[[Foo|Bar] baz]" stayed, markup and all."""
    assert strip(wikitext) == plain


@pytest.mark.parametrize("wikitext, plain", [
    ("'''Tokyo''' ({{langx|ja|東京}}) is a city.", "Tokyo (東京) is a city."),
    ("'''Munich''' ({{langx|de|München|lit=by the monks}}) is.", "Munich (München) is."),
    ("He is {{convert|6|ft|1|in|m}} tall.", "He is 6 ft 1 in tall."),
    ("It weighed {{convert|5|st|7|lb|kg}}, ran {{cvt|1|mi|200|yd}}.", "It weighed 5 st 7 lb, ran 1 mi 200 yd."),
    ("It is {{convert|5|km|mi|1}} or {{convert|5|-|10|km|mi}}.", "It is 5 km or 5 - 10 km."),
    ("The ''Titanic''{{'s}} success.", "The Titanic's success."),
    ("The ''Titanic''{{'s}} and ''Olympic''{{'s}} fates, ''Rock''{{'}}n''Roll''.",
     "The Titanic's and Olympic's fates, Rock'nRoll."),
    ("Water is H{{sub|2}}O; E = mc{{sup|2}}.", "Water is H2O; E = mc2."),
    ("Carbon dioxide ({{chem2|CO2}}) is a gas.", "Carbon dioxide (CO2) is a gas."),
    ("About {{frac|1|2}} of them, {{frac|3|1|2}} days, {{frac|4}} each.", "About 1/2 of them, 3 1/2 days, 1/4 each."),
])
def test_templates_that_render_the_sentences_words_keep_them(wikitext, plain):
    """{{langx}} (enwiki's merge of the {{lang-xx}} templates) went, a multi-unit {{convert}} kept its first unit
    (a 6 ft 1 in athlete was 6 ft), {{sub}}, {{sup}}, {{chem2}}, {{frac}} and {{'s}} went: "H O", "About of them"."""
    assert strip(wikitext) == plain


@pytest.mark.parametrize("wikitext, plain", [
    # frwiki: dates (the first of a month "1er", a month by its number), links to untranslated pages, units, centuries
    ("'''Marie Curie''', née le {{date de naissance|7|novembre|1867}} et morte le "
     "{{date de décès|4|juillet|1934|7|novembre|1867}}, est une physicienne.",
     "Marie Curie, née le 7 novembre 1867 et morte le 4 juillet 1934, est une physicienne."),
    ("Elle épouse {{Lien|fr=Pierre Curie|lang=en|trad=Pierre Curie (physicist)}} le {{date|1|7|1895}} à "
     "{{unité|5|km}} d'ici.",
     "Elle épouse Pierre Curie le 1er juillet 1895 à 5 km d'ici."),
    ("Au {{s-|XIX}}, au {{XVIe siècle}} et aux {{s2|I|II}}, {{nombre|20|habitants}} vivaient là.",
     "Au XIXe siècle, au XVIe siècle et aux Ier et IIe siècles, 20 habitants vivaient là."),
    # eswiki, jawiki (a link to another wiki's page, a word's reading, a birth date), ruwiki (the same link)
    ("Vivió allí desde el {{fecha|8|4|1961}} durante {{cifra|20}} años.",
     "Vivió allí desde el 8 de abril de 1961 durante 20 años."),
    ("{{仮リンク|ジョン・スミス|en|John Smith}}と共に活動した{{読み仮名|俳優|はいゆう}}、"
     "{{生年月日と年齢|1990|5|1}}生まれ。",
     "ジョン・スミスと共に活動した俳優（はいゆう）、1990年5月1日生まれ。"),
    ("Он работал с {{нп5|Джон Смит|Смитом|en|John Smith}} и {{нп3|Анна Ли||en|Anna Lee}}.",
     "Он работал с Смитом и Анна Ли."),
    # enwiki: a height, an age between two dates (of one date, today's: not known), a visible anchor, a formatted date
    ("She was {{height|m=1.80}} ({{height|ft=5|in=11}}), {{age|1990|5|1|2020|4|30}} at the {{visible anchor|Games}} "
     "on {{date|2020-08-01|dmy}}.", "She was 1.80 m (5 ft 11 in), 29 at the Games on 2020-08-01."),
    ("Now {{age|1990|5|1|||}} years old, {{age|||1|2020|4|30}} then.", "Now years old, then."),  # a blank year
    # language conversion (zhwiki): a variant's text, a hidden rule's none, a plain -{text}- as written
    ("简称-{zh-hans:计算机; zh-hant:電腦;}-。-{A|zh-cn:软件; zh-tw:軟體;}-和-{H|zh-cn:硬件; zh-tw:硬體;}--{程序}-。",
     "简称计算机。软件和程序。"),
])
def test_the_largest_wikis_inline_templates_keep_their_words(wikitext, plain):
    """Every non-English inline template went (a corpus review, session 49): "née le à Varsovie", "desde el
    durante años", "と共に活動した である"; zhwiki's -{...}- conversion markup stayed in the text,
    "简称-{zh-hans:...}-"."""
    assert strip(wikitext) == plain


LIFE = "'''X''' war ein Schriftsteller.\n\n== Leben ==\nX wurde in [[Y]] geboren.\n\n"


@pytest.mark.parametrize("ending", [
    "== Literatur ==\n* H. Nürnberger: ''X.'' Rowohlt 1968, ISBN 3-499-50145-X.\n\n== Weblinks ==\n* [http://x.de A]\n"
    "\n== Einzelnachweise ==\n<references />\n",
    "== Literatur ==\n* H. Nürnberger: ''X.'' Rowohlt 1968, ISBN 3-499-50145-X.\n",
    "== Weblinks ==\n* [http://x.de Archiv ISBN]\n",
    "== Einzelnachweise ==\n<references />ISBN\n",
    "== Annexes ==\n=== Bibliographie ===\n* J.-M. Hovasse, ''X'', ISBN 2.\n=== Articles connexes ===\n* [[ISBN]]\n",
    "== Bibliographie ==\n* J.-M. Hovasse, ''X'', ISBN 2.\n\n== Articles connexes ==\n* [[ISBN]]\n",
    "== Notes et références ==\n{{Références}}ISBN\n== Liens externes ==\n* [http://x.fr ISBN]\n",
    "== Liens externes ==\n* [http://x.fr ISBN]\n",
])
def test_german_and_french_end_sections_are_cut_as_the_english_ones(ending):
    """dewiki's "Literatur" (its Further reading) and frwiki's "Annexes", "Bibliographie", "Articles connexes"
    stayed as article text where "Further reading" and "See also" are cut."""
    assert strip(LIFE + ending) == "X war ein Schriftsteller.\n\nLeben\n\nX wurde in Y geboren."


def test_a_literature_or_bibliography_section_amid_the_article_is_prose():
    """As "Bibliography" is: an article about a literature, or an author's works, goes on after it."""
    wikitext = "Intro.\n== Literatur ==\nDie Literatur blühte.\n== Musik ==\nAuch die Musik.\n== Weblinks ==\n* A"
    assert strip(wikitext).split("\n\n") == ["Intro.", "Literatur", "Die Literatur blühte.", "Musik",
                                             "Auch die Musik."]


@pytest.mark.parametrize("wikitext, plain", [
    ("Paris is a city.\n[[de:Paris]]\n[[simple:Paris]]\n[[zh-min-nan:Pa-lê]]\n[[be-x-old:Парыж]]", "Paris is a city."),
    ("__KEIN_INHALTSVERZEICHNIS__\nBerlin ist eine Stadt.", "Berlin ist eine Stadt."),
    ("__notoc__\n__NoEditSection__Paris is a city.", "Paris is a city."),
    ("__SANSLIENDEMODIF__\n__AUCUNSOMMAIRE__ Paris est une ville.", "Paris est une ville."),
    ("__目次非表示__東京は都市である。", "東京は都市である。"),
    ("__HIDDENCAT__ __INDEX__\n__ArchivedTalk__ Talk.", "Talk."),
    # a Python or C name in prose is no magic word; nor is a lower-case name MediaWiki matches in upper case only
    ("Python calls <code>__init__</code> when <code>__name__</code> is set.",
     "Python calls __init__ when __name__ is set."),
    ("Python's <code>__index__</code> method, <code>__hiddencat__</code>.",
     "Python's __index__ method, __hiddencat__."),
    ("Use <code>__VA_ARGS__</code> in a variadic macro.", "Use __VA_ARGS__ in a variadic macro."),
    ("C99 sets __STDC_VERSION__; GCC has __PRETTY_FUNCTION__, __FILE__ and __LINE__.",
     "C99 sets __STDC_VERSION__; GCC has __PRETTY_FUNCTION__, __FILE__ and __LINE__."),
])
def test_interlanguage_links_and_magic_words_of_every_shape_are_dropped(wikitext, plain):
    """Codes with two hyphens and "simple" stayed ("simple:Paris"), as did dewiki's __KEIN_INHALTSVERZEICHNIS__ (an
    inner "_") and a lower-case __notoc__ (MediaWiki reads some of its magic words in any case); then C's __VA_ARGS__
    and Python's __index__ went with them."""
    assert strip(wikitext) == plain


def test_long_runs_of_apostrophes_and_underscores_strip_fast():
    for page in ["''a'''" * 20000, "x'" * 40000, "__a" * 30000, "__" + "a_" * 30000, "'" * 50000]:
        started = time.perf_counter()
        strip(page)
        assert time.perf_counter() - started < 2, page[:20]
