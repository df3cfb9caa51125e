"""MediaWiki XML dumps: stream pages out of (possibly bz2, multistream) exports, strip wikitext.

`iter_pages` walks the dump with `xml.etree.ElementTree.iterparse` and clears the tree after
every page, so memory stays at one page however large the dump. A history export lists a page's
revisions oldest first; only the latest is kept, older ones dropped as they are parsed. Parse errors propagate
(`ET.ParseError`, or `EOFError` from a truncated bz2 stream) after every complete page before
them has been yielded; pipelines/sources.py turns them into "malformed_xml" / "truncated_bz2".

`strip_wikitext` is a regex stripper written here because the options on PyPI do not fit the
hot path: mwparserfromhell builds a full parse tree (about 10x slower, and its strip_code
keeps table and template debris) and WikiExtractor is a script, not a library. It keeps prose
and lists, turns headings into their own paragraphs, drops templates, tables, references,
files, categories and interlanguage links, and cuts the trailing reference sections.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import BinaryIO, Iterator

ARTICLE_NAMESPACE = 0
_LINKED_NAMESPACES = {-2: "media", 6: "file", 14: "category"}  # keys of namespaces whose links are not prose


@dataclass(frozen=True)
class Site:
    """What a dump's <siteinfo> tells the stripper: its own names of the Media, File and Category namespaces
    (lower-case). A German dump links images as [[Datei:...]] and categories as [[Kategorie:...]]: with English
    names only, "mini|hochkant|<caption>" and "Kategorie:Person" were kept as article text."""
    link_namespaces: frozenset = frozenset()


@dataclass
class Page:
    id: int
    ns: int
    title: str
    redirect: bool
    text: str  # raw wikitext of the latest revision
    site: Site = Site()


def iter_pages(stream: BinaryIO) -> Iterator[Page]:
    """Yield every <page> of a MediaWiki export (any export schema version), with the text of its
    latest revision: the greatest <timestamp>, the last one on a tie (ISO 8601 UTC sorts as text)."""
    events = ET.iterparse(stream, events=("start", "end"))
    _, root = next(events)  # no root element at all raises ET.ParseError, never StopIteration
    # Elements are namespaced ("{http://www.mediawiki.org/xml/export-0.11/}page"), version varies.
    p = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    page, latest, depth, page_depth, site = None, None, 0, -1, Site()
    for event, elem in events:
        if event == "start":
            depth += 1
            if elem.tag == p + "page":
                page, latest, page_depth = elem, None, depth
            continue
        depth -= 1
        if elem.tag == p + "siteinfo" and page is None:
            site = _site(elem, p)
        if elem.tag == p + "revision" and page is not None and depth == page_depth:  # a child of the page
            if latest is not None and _timestamp(elem, p) < _timestamp(latest, p):
                page.remove(elem)
                continue
            if latest is not None:
                page.remove(latest)  # a whole history never sits in memory
            latest = elem
        if elem.tag == p + "page":
            page = None
            yield Page(
                id=int(elem.findtext(p + "id") or -1),
                ns=int(elem.findtext(p + "ns") or ARTICLE_NAMESPACE),
                title=elem.findtext(p + "title") or "",
                redirect=elem.find(p + "redirect") is not None,
                text=elem.findtext(f"{p}revision/{p}text") or "",
                site=site,
            )
            root.clear()  # drop the finished page (and anything before it) from the tree


def _timestamp(revision: ET.Element, p: str) -> str:
    return revision.findtext(p + "timestamp") or ""


def _site(siteinfo: ET.Element, p: str) -> Site:
    names = [(ns.get("key", ""), (ns.text or "").strip()) for ns in siteinfo.iter(p + "namespace")]
    return Site(frozenset(name.lower() for key, name in names
                          if key.lstrip("-").isdigit() and int(key) in _LINKED_NAMESPACES and name))


# Disambiguation templates are named "... disambiguation" or by an alias; an inline
# "{{disambiguation needed}}" cleanup tag in an article must not match. The other names are those of the
# largest Wikipedias (de, fr, es, it, pt, nl, pl, ru, sv, ja); a hatnote such as de's {{Begriffsklärungshinweis}}
# does not match (the name must end at "|" or "}}").
_DISAMBIGUATION = re.compile(
    r"\{\{\s*(?:(?:[\w -]*\s)?disambiguation(?: cleanup)?|disambig|dab|disamb|hndis|geodis|numberdis"
    r"|begriffsklärung|homonymie|desambiguación|desambiguacion|disambigua|desambiguação|dp|dpintro"
    r"|ujednoznacznienie|неоднозначность|многозначность|förgrening|aimai|曖昧さ回避)"
    r"\s*(?:\||\}\})", re.I)


def page_reject_reason(page: Page) -> str:
    """"" for an article worth keeping, else why it is skipped (a reason in sources.REJECT_REASONS)."""
    if page.ns != ARTICLE_NAMESPACE:
        return "non_article_namespace"
    if page.redirect or page.text.lstrip()[:9].upper() == "#REDIRECT":
        return "redirect"
    if page.title.endswith("(disambiguation)") or _DISAMBIGUATION.search(page.text):
        return "disambiguation"
    return ""


# Innermost-first patterns: each pass removes one nesting level, so nested templates/tables/links
# resolve in a few C-speed passes. Possessive quantifiers keep unclosed markup linear.
_TEMPLATE = re.compile(r"\{\{(?:[^{}]++|\{(?!\{)|\}(?!\}))*+\}\}")
_TABLE = re.compile(r"\{\|(?:[^{|]++|\{(?!\|)|\|(?!\}))*+\|\}")
_LINK = re.compile(r"\[\[([^\[\]]*+)\]\]")
_EXTERNAL_LINK = re.compile(r"\[(?:https?:|ftp:)?//[^\s\]]*+(?:\s++([^\]]*+))?\]")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_NON_PROSE_ELEMENTS = re.compile(  # content dropped with the tags
    r"<(ref|references|math|chem|ce|gallery|timeline|score|syntaxhighlight|source|code|imagemap|graph"
    r"|mapframe|templatedata|hiero)\b[^>]*?(?:/>|>.*?</\1\s*>)", re.S | re.I)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_BR = re.compile(r"<br\s*/?>", re.I)
_TRAILING_SECTIONS = re.compile(  # English, and the largest Wikipedias' (de, fr, es, it, pt, nl)
    r"^==\s*(?:see also|references|notes|footnotes|notes and references|citations|sources|bibliography"
    r"|further reading|external links"
    r"|siehe auch|einzelnachweise|weblinks|anmerkungen|voir aussi|notes et références|références|liens externes"
    r"|véase también|referencias|enlaces externos|voci correlate|note|collegamenti esterni|ver também"
    r"|referências|ligações externas|zie ook|externe links|bronnen)\s*==\s*$", re.I | re.M)
_HEADING = re.compile(r"^(={1,6})\s*(.+?)\s*\1\s*$", re.M)
_LIST_MARKER = re.compile(r"^[*#:;]+\s*", re.M)
_TABLE_DEBRIS = re.compile(r"^\s*(?:[|!]|\{\||\|\}).*$", re.M)
_EMPHASIS = re.compile(r"'{2,5}")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_EMPTY_PARENS = re.compile(r"\((?:\s|[,;:])*\)")
_SPACE_BEFORE_PUNCT = re.compile(r" +([,.;:])(?=\s|$)")

# Link prefixes whose links are not prose: media, categories, interlanguage ("de:", "zh-yue:").
# Language codes are matched lower-case only, as they are written, so "[[Ali: Fear Eats the Soul]]" stays.
_DROPPED_LINK_PREFIX = re.compile(r"\s*(?:(?i:file|image|media|category)|[a-z]{2,3}(?:-[a-z]+)?)\s*:")


def _template_text(m: re.Match) -> str:
    """Most templates are metadata (infoboxes, citations, maintenance tags) and go; the few that
    render prose inline keep their words: {{lang|fr|Paris}}, {{convert|5|km|mi}} -> "5 km"."""
    name, _, args = m.group(0)[2:-2].partition("|")
    name = name.strip().lower()
    if name in _INLINE_TEMPLATES or name.startswith("lang-"):
        args = [a for a in args.split("|") if "=" not in a]  # positional arguments only
        if name == "lang":
            return args[1] if len(args) > 1 else ""
        if name in ("convert", "cvt"):
            return " ".join(args[:2])
        return args[-1] if args else ""
    return ""


_INLINE_TEMPLATES = frozenset(["lang", "convert", "cvt", "nowrap", "nobr", "small", "big", "transl", "sic"])


def _link_text(m: re.Match, site: Site) -> str:
    inner = m.group(1)
    if _DROPPED_LINK_PREFIX.match(inner) or inner.partition(":")[0].strip().lower() in site.link_namespaces:
        return ""
    target, _, label = inner.partition("|")  # [[target|label]] shows label; [[target]] shows target
    return label if label.strip() else target.strip().lstrip(":")


def _sub_nested(pattern: re.Pattern, repl, text: str) -> str:
    while True:
        text, n = pattern.subn(repl, text)
        if not n:
            return text


def strip_wikitext(text: str, site: Site = Site()) -> str:
    """Plain text of an article's wikitext; headings become their own paragraphs. `site`: the dump's own
    namespace names (iter_pages reads them from <siteinfo>), whose links are dropped as the English ones are."""
    text = _COMMENT.sub("", text)
    cut = _TRAILING_SECTIONS.search(text)
    if cut:
        text = text[: cut.start()]
    text = _NON_PROSE_ELEMENTS.sub("", text)
    text = _sub_nested(_TEMPLATE, _template_text, text)
    text = _sub_nested(_TABLE, "", text)
    text = _sub_nested(_LINK, lambda m: _link_text(m, site), text)
    text = _EXTERNAL_LINK.sub(lambda m: m.group(1) or "", text)
    text = _BR.sub(" ", text)
    text = _TAG.sub("", text)
    text = _MAGIC_WORD.sub("", text)
    text = _EMPHASIS.sub("", text)
    text = _HEADING.sub(lambda m: f"\n\n{m.group(2)}\n\n", text)
    text = _TABLE_DEBRIS.sub("", text)
    text = _LIST_MARKER.sub("", text)
    text = html.unescape(text)  # after tag removal: an escaped "&lt;b&gt;" is literal text
    text = _EMPTY_PARENS.sub("", text)
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text)
