"""MediaWiki XML dumps: stream pages out of (possibly bz2, multistream) exports, strip wikitext.

`iter_pages` walks the dump with `xml.etree.ElementTree.iterparse` and clears the tree after
every page, so memory stays at one page however large the dump. A history export lists a page's
revisions oldest first; only the latest is kept, older ones dropped as they are parsed. Parse errors propagate
(`ET.ParseError`, or `EOFError` from a truncated bz2 stream) after every complete page before
them has been yielded. `iter_dump` is what the readers use: it parses one <page> at a time, so broken XML costs
its page alone (a `BadPage`), and a file whose root is not <mediawiki> raises `NotAWikiDump`; pipelines/sources.py
turns these into "malformed_xml" / "not_a_wiki_dump" / "truncated_bz2".

`strip_wikitext` is a regex stripper written here because the options on PyPI do not fit the
hot path: mwparserfromhell builds a full parse tree (about 10x slower, and its strip_code
keeps table and template debris) and WikiExtractor is a script, not a library. It keeps prose
and lists, turns headings into their own paragraphs, drops tables, references, files, categories, interlanguage
links and the templates that are metadata (rendering those whose words are the sentence's: dates, units, names;
pipelines/wiki_templates.py), and cuts the trailing reference sections.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from pipelines.multistream import PAGE, SITEINFO_END, ChunkStream
from pipelines.wiki_templates import CONVERSION, PARAMETER, converted, template_text

ARTICLE_NAMESPACE = 0
_LINKED_NAMESPACES = {-2: "media", 6: "file", 14: "category"}  # keys of namespaces whose links are not prose
# MediaWiki's canonical namespace names, which every wiki accepts whatever its language (<siteinfo> adds its own)
_CANONICAL_NAMESPACES = {
    "media": -2, "special": -1, "talk": 1, "user": 2, "user talk": 3, "project": 4, "project talk": 5, "file": 6,
    "file talk": 7, "image": 6, "image talk": 7, "mediawiki": 8, "mediawiki talk": 9, "template": 10,
    "template talk": 11, "help": 12, "help talk": 13, "category": 14, "category talk": 15}


@dataclass(frozen=True)
class Site:
    """What a dump's <siteinfo> tells the stripper: its own names of the Media, File and Category namespaces
    (lower-case). A German dump links images as [[Datei:...]] and categories as [[Kategorie:...]]: with English
    names only, "mini|hochkant|<caption>" and "Kategorie:Person" were kept as article text. `namespaces`: every
    (lower-case name, key) it lists, which give a page its namespace in an export older than <ns> (schema 0.3/0.4)."""
    link_namespaces: frozenset = frozenset()
    namespaces: tuple = ()

    def namespace_of(self, title: str) -> int:
        """The namespace a title's prefix names ("Talk:Paris" -> 1; "Ali: Fear Eats the Soul" -> 0)."""
        prefix, colon, _ = title.partition(":")
        if not colon:
            return ARTICLE_NAMESPACE
        name = " ".join(prefix.replace("_", " ").split()).lower()
        return dict(self.namespaces).get(name, _CANONICAL_NAMESPACES.get(name, ARTICLE_NAMESPACE))


@dataclass
class Page:
    id: int | None  # None: no <id> (or not a number): rejected, it could not name its document
    ns: int
    title: str
    redirect: bool
    text: str  # raw wikitext of the latest revision
    site: Site = Site()


@dataclass
class BadPage:
    """A <page> whose XML does not parse (a byte that is not UTF-8, a tag cut short): rejected alone."""
    id: int | None  # its <id>, where its first bytes show one
    title: str
    error: str


class NotAWikiDump(Exception):
    """The XML's root element is not <mediawiki>: no MediaWiki export."""


def iter_pages(stream: BinaryIO) -> Iterator[Page]:
    """Yield every <page> of a MediaWiki export (any export schema version), with the text of its
    latest revision: the greatest <timestamp>, the last one on a tie (ISO 8601 UTC sorts as text)."""
    yield from _Pages(Site()).of(ET.iterparse(stream, events=("start", "end")))


class _Pages:
    """Pages out of one XML parser's start and end events, the tree cleared after every page (memory for one)."""

    def __init__(self, site: Site):
        self.site, self.root, self.p = site, None, ""
        self.depth = 0  # of the element being parsed: 1 is the root's
        self.page, self.latest, self.page_depth = None, None, -1

    def of(self, events) -> Iterator[Page]:
        p = self.p
        for event, elem in events:
            if event == "start":
                self.depth += 1
                if self.root is None:
                    # Elements are namespaced ("{http://www.mediawiki.org/xml/export-0.11/}page"), version varies.
                    self.root, self.p = elem, _prefix(elem)
                    p = self.p
                elif elem.tag == p + "page":
                    self.page, self.latest, self.page_depth = elem, None, self.depth
                continue
            self.depth -= 1
            if elem.tag == p + "siteinfo" and self.page is None:
                self.site = _site(elem, p)
            if elem.tag == p + "revision" and self.page is not None and self.depth == self.page_depth:
                if self.latest is not None and _timestamp(elem, p) < _timestamp(self.latest, p):
                    self.page.remove(elem)  # a child of the page older than the latest so far
                    continue
                if self.latest is not None:
                    self.page.remove(self.latest)  # a whole history never sits in memory
                self.latest = elem
            if elem.tag == p + "page":
                self.page = None
                yield self._page(elem, p)
                self.root.clear()  # drop the finished page (and anything before it) from the tree

    def _page(self, elem: ET.Element, p: str) -> Page:
        title, ns = elem.findtext(p + "title") or "", _number(elem.findtext(p + "ns"))
        page_id = _number(elem.findtext(p + "id"))
        return Page(
            id=page_id if page_id is not None and page_id >= 0 else None,
            ns=self.site.namespace_of(title) if ns is None else ns,  # no <ns> before export schema 0.5
            title=title,
            redirect=elem.find(p + "redirect") is not None,
            text=elem.findtext(f"{p}revision/{p}text") or "",
            site=self.site,
        )


def _prefix(root: ET.Element) -> str:
    """The export's XML namespace in ElementTree's "{uri}" form; NotAWikiDump if the root is not <mediawiki>."""
    p = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    if root.tag[len(p):] != "mediawiki":
        raise NotAWikiDump(f"its root element is <{root.tag[len(p):]}>, not <mediawiki>: not a MediaWiki export")
    return p


_INTEGER = re.compile(r"\s*-?[0-9]+\s*")


def _number(text: str | None) -> int | None:
    """The number an <id>, <ns> or namespace key holds; None if it holds none (an id then names no document)."""
    try:
        return int(text) if text and _INTEGER.fullmatch(text) else None
    except ValueError:  # past int()'s 4300 digits: raised here, in the parse, it ended the file's or range's read
        return None


def _timestamp(revision: ET.Element, p: str) -> str:
    return revision.findtext(p + "timestamp") or ""


def _site(siteinfo: ET.Element, p: str) -> Site:
    names = [(int(key), (ns.text or "").strip().lower()) for ns in siteinfo.iter(p + "namespace")
             if (key := _number(ns.get("key"))) is not None]
    return Site(frozenset(name for key, name in names if key in _LINKED_NAMESPACES and name),
                tuple((" ".join(name.replace("_", " ").split()), key) for key, name in names if name))


# ----------------------------------------------------------------------- one page at a time

HEADER_BYTES = 1 << 20  # the root tag and <siteinfo> before the first <page>: well under this in any dump
_READ_BYTES = 1 << 16
_HEAD_BYTES = 4096  # what a broken page keeps of its first bytes, to find its <id> and <title>
_ROOT_TAG = re.compile(rb"<mediawiki\b[^>]*>")
_PAGE_ID = re.compile(rb"<id>\s*([0-9]+)\s*</id>")
_PAGE_TITLE = re.compile(rb"<title>([^<]*)</title>")


def iter_dump(stream: BinaryIO) -> Iterator[tuple[int | None, Page | BadPage]]:
    """(offset of its <page> tag in the stream, page) for every page of an export, as iter_pages gives them, with
    broken XML costing its page alone: a byte that is not UTF-8 or a broken tag makes that page a BadPage, and the
    parse starts again at the next <page> tag, inside the dump's root tag (one parse of the file lost every page
    after the damage). The bytes are fed to the parser cut before every `<page>` tag (MediaWiki escapes "<" in
    text, so they are always one), and a page that has not ended where the next starts is broken too. With no
    <page> in the first HEADER_BYTES the stream is parsed whole, as iter_pages does (offset None): no dump, or
    an export without pages. NotAWikiDump if the root is not <mediawiki>; read errors of the stream propagate,
    after every page before them."""
    cuts = _PageCuts(stream)
    head = cuts.header()
    if head is None:
        for page in iter_pages(ChunkStream(cuts.rest())):
            yield None, page
        return
    root_tag = _ROOT_TAG.search(head)
    prolog = head[:root_tag.end()] if root_tag else head  # the XML declaration's encoding, a DOCTYPE's entities
    parser, pages = _parser(head), _Pages(Site())
    for _ in pages.of(parser.read_events()):  # the root and <siteinfo>; NotAWikiDump if no <mediawiki>
        pass
    while cuts.more():
        if parser is None or pages.depth == 0:  # after a broken page, or a root closed early: parse afresh
            parser, pages = _parser(prolog), _Pages(pages.site)
        offset, pieces, yielded = cuts.offset, cuts.page(), False
        try:
            for piece in pieces:
                parser.feed(piece)
                for page in pages.of(parser.read_events()):
                    yielded = True
                    yield offset, page
            if pages.depth > 1:
                raise ET.ParseError("the page does not end before " + ("the next <page>" if cuts.more() else
                                                                       "the end of the XML"))
        except ET.ParseError as e:
            yield offset, _bad_page(b"" if yielded else cuts.head, str(e))  # after its page: junk between pages
            parser = None
            for _ in pieces:  # the rest of the broken page
                pass


def _parser(data: bytes) -> ET.XMLPullParser:
    parser = ET.XMLPullParser(events=("start", "end"))
    parser.feed(data)
    return parser


def _bad_page(head: bytes, error: str) -> BadPage:
    head = head.split(b"<revision", 1)[0]  # a revision's <id> is not the page's
    page_id, title = _PAGE_ID.search(head), _PAGE_TITLE.search(head)
    return BadPage(id=_number(page_id.group(1).decode()) if page_id else None,
                   title=html.unescape(title.group(1).decode("utf-8", "replace")) if title else "", error=error)


class _PageCuts:
    """A dump's bytes, read on demand and handed out page by page: buf[i:] is read and not handed out yet, `offset`
    the stream offset of buf[i]; between pages, buf[i:] starts with a <page> tag (or is empty at the end)."""

    def __init__(self, stream: BinaryIO):
        self._read, self.buf, self.i, self.offset, self.eof, self.head = stream.read, b"", 0, 0, False, b""

    def _fill(self) -> bool:
        if not self.eof:
            data = self._read(_READ_BYTES)
            self.buf, self.i, self.eof = self.buf[self.i:] + data, 0, not data
        return not self.eof

    def _take(self, n: int) -> bytes:
        out, self.i, self.offset = self.buf[self.i:self.i + n], self.i + n, self.offset + n
        if len(self.head) < _HEAD_BYTES:
            self.head += out[:_HEAD_BYTES - len(self.head)]
        return out

    def _left(self) -> int:
        return len(self.buf) - self.i

    def header(self) -> bytes | None:
        """The root start tag and <siteinfo> before the first <page> tag, and what precedes them. What follows them
        is read as a page: a first page whose own tag is broken is one broken page, not a broken header. None
        (nothing consumed) if no <page> tag comes in HEADER_BYTES, or no root tag before it."""
        while (j := self.buf.find(PAGE)) < 0 and len(self.buf) < HEADER_BYTES and self._fill():
            pass
        root = _ROOT_TAG.search(self.buf, 0, j) if j >= 0 else None
        if root is None:
            return None
        info = self.buf.rfind(SITEINFO_END, root.end(), j)
        return self._take(info + len(SITEINFO_END) if info >= 0 else root.end())

    def rest(self) -> Iterator[bytes]:
        while self._left() or self._fill():
            yield self._take(self._left())

    def more(self) -> bool:
        return self._left() > 0 or self._fill()

    def page(self) -> Iterator[bytes]:
        """The page at buf[i] (after the header, what precedes the first <page> tag), in pieces, up to the next <page>
        tag or the end of the stream. If a read fails, the bytes held back for a tag cut by the read go out first:
        the page may end in them."""
        self.head, start = b"", 1
        while True:
            j = self.buf.find(PAGE, self.i + start)
            if j >= 0:
                yield self._take(j - self.i)
                return
            keep = len(PAGE) - 1  # a tag may straddle the next read
            if self._left() > keep:
                start = 0
                yield self._take(self._left() - keep)
            try:
                more = self._fill()
            except Exception:
                yield self._take(self._left())
                raise
            if not more:
                yield self._take(self._left())
                return


# Disambiguation templates are named "... disambiguation" or by an alias; an inline
# "{{disambiguation needed}}" cleanup tag in an article must not match. The other names are those of the
# largest Wikipedias (de, fr, es, it, pt, nl, pl, ru, sv, ja, zh), enwiki's by kind (a name's, a school's, a road's,
# a letter-number combination's, a maths term's) and jawiki's (人名の曖昧さ回避: a person's name); a hatnote such as
# de's {{Begriffsklärungshinweis}} does not match (the name must end at "|" or "}}").
_DISAMBIGUATION = re.compile(
    r"\{\{\s*(?:(?:[\w -]*\s)?disambiguation(?: cleanup)?|disambig|dab|disamb|hndis|geodis|numberdis"
    r"|(?:hndis|geodis|disambig)-cleanup|letter[-\u2013]numbercombdisambig|mathdab|schooldis|roaddis|callsigndis"
    r"|hospitaldis|begriffsklärung|homonymie|desambiguación|desambiguacion|disambigua|desambiguação|dp|dpintro"
    r"|ujednoznacznienie|неоднозначность|многозначность|förgrening|aimai|[^{}|]*曖昧さ回避|消歧[义義])"
    r"\s*(?:\||\}\})", re.I)


def page_reject_reason(page: Page) -> str:
    """"" for an article worth keeping, else why it is skipped (a reason in sources.REJECT_REASONS)."""
    if page.id is None:  # its document would have no id (doc_ids are "<file>#<page id>")
        return "missing_page_id"
    if page.ns != ARTICLE_NAMESPACE:
        return "non_article_namespace"
    if page.redirect or page.text.lstrip()[:9].upper() == "#REDIRECT":
        return "redirect"
    if page.title.endswith("(disambiguation)") or _DISAMBIGUATION.search(page.text):
        return "disambiguation"
    return ""


# Innermost-first patterns: each pass removes one nesting level, so nested templates/tables/links
# resolve in a few C-speed passes. Possessive quantifiers keep unclosed markup linear.
# (a "}" before a closing "}}" and no more is the argument's: {{math|{1, 2}}} closes at its last two)
_TEMPLATE = re.compile(r"\{\{(?:[^{}]++|\{(?!\{)|\}(?!\})|\}(?=\}\}(?!\})))*+\}\}")
_TABLE = re.compile(r"\{\|(?:[^{|]++|\{(?!\|)|\|(?!\}))*+\|\}")
_LINK = re.compile(r"\[\[([^\[\]]*+)\]\]")
_EXTERNAL_LINK = re.compile(r"\[(?:https?:|ftp:)?//[^\s\]]*+(?:\s++([^\]]*+))?\]")
_BARE_EXTERNAL_LINK = re.compile(r"\[(?:https?:|ftp:)?//[^\s\[\]]*+(?:\s++([^\[\]]*+))?\]")  # its label holds no "["
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_NON_PROSE_ELEMENTS = re.compile(  # content dropped with the tags
    r"<(ref|references|math|chem|ce|gallery|timeline|score|syntaxhighlight|source|imagemap|graph"
    r"|mapframe|templatedata|hiero)\b[^>]*?(?:/>|>.*?</\1\s*>)", re.S | re.I)
# the HTML and extension tags MediaWiki renders as markup (its Sanitizer's list, the extensions of the largest wikis);
# any other "<word" is text it shows as written: "x<y and y>z", "std::vector<int>", "List<T>" (and no '<' inside a tag:
# a stray "<span" ends at the next '<', not after a paragraph of prose)
_TAG = re.compile(
    r"</?(?:b|bdi|bdo|big|blockquote|br|caption|center|cite|code|data|dd|del|dfn|div|dl|dt|em|font|h[1-6]|hr|i|ins"
    r"|kbd|li|mark|meta|link|ol|p|pre|q|rb|rp|rt|rtc|ruby|s|samp|small|span|strike|strong|sub|sup|table|td|th|time"
    r"|tr|tt|u|ul|var|wbr|abbr|nowiki|poem|includeonly|noinclude|onlyinclude|section|templatestyles|indicator"
    r"|categorytree|charinsert|inputbox|maplink|langconvert|translate|tvar|languages|ref|references|math|gallery"
    r"|pages|pagelist|pagequality|quiz|phonos|dynamicpagelist|chart|rss)"
    r"\b[^<>]*>", re.I)
_BR = re.compile(r"<br\s*/?>", re.I)
_TRAILING_SECTIONS = re.compile(  # English, and the largest Wikipedias' (de, fr, es, it, pt, nl, ru, ja, zh, pl, sv)
    r"^==\s*(?:see also|references|notes|footnotes|notes and references|references and notes|citations|sources"
    r"|works cited|cited works|sources cited|general references|bibliography|further reading|external links"
    r"|siehe auch|einzelnachweise|weblinks|anmerkungen|literatur|voir aussi|notes et références|références"
    r"|liens externes|annexes|articles connexes|bibliographie|bibliografía|bibliografia|literatuur"
    r"|véase también|referencias|enlaces externos|voci correlate|note|collegamenti esterni|ver também"
    r"|referências|ligações externas|zie ook|externe links|bronnen|см\. также|примечания|литература|источники"
    r"|ссылки|сноски|脚注|出典|注釈|参考文献|関連項目|外部リンク|参见|參見|参考资料|參考資料|參考文獻|外部链接|外部連結|注释"
    r"|註釋|przypisy|zobacz też|linki zewnętrzne|se även|referenser|källor|noter|externa länkar)\s*==\s*$",
    re.I | re.M)
_HEADING = re.compile(r"^(={1,6})\s*(.+?)\s*\1\s*$", re.M)
_LIST_MARKER = re.compile(r"^[*#:;]+\s*", re.M)
# what is left of a table (a row outside a closed {| |}): a line starting "|" or "{|", or "!" as a header cell does
# ("! Year", "!Team !! Wins", "!scope=col|Rank"), not as the click letter of "!Kung people ...". Its leading space
# stays on its line: "^\s*" ran on over blank lines, each trying every line after it (40k newlines: 23 s a page)
_TABLE_DEBRIS = re.compile(r"^[^\S\n]*+(?:\{?\||!(?=\s|$|[^\n]*?(?:!!|\|))).*$", re.M)
_APOSTROPHES = re.compile(r"('{2,})")
# __NOTOC__ and its kind. Each wiki has its own names, too many to list: a name without a lower-case letter goes
# (__KEIN_INHALTSVERZEICHNIS__, __目次非表示__), except the C, PHP and Perl names a programming article writes
# (__VA_ARGS__, __STDC_VERSION__, __FILE__: no wiki's). MediaWiki reads only some in any case (MessagesEn's flag 0:
# __notoc__ goes, __index__ and __hiddencat__ only as written): those English ones go in any case; a localized one in
# lower case stays (rare, and no list of ours covers them). Another lower-case name stays, as MediaWiki shows it:
# Python's __index__
_MAGIC_WORD = re.compile(r"__([^\W\d_]++(?:_[^\W\d_]++)*+)__")
_ANY_CASE_MAGIC_WORDS = frozenset(
    "notoc nogallery forcetoc toc noeditsection notitleconvert notc nocontentconvert nocc archivedtalk notalk".split())
_CODE_NAMES = frozenset(
    "FILE LINE DATE TIME TIMESTAMP COUNTER FUNCTION PRETTY_FUNCTION FUNCSIG FUNCDNAME VA_ARGS VA_OPT BASE_FILE"
    " FILE_NAME INCLUDE_LEVEL STDC GNUC GNUG OPTIMIZE STRICT_ANSI CLASS METHOD DIR NAMESPACE TRAIT PACKAGE SUB END DATA"
    .split())
_CODE_PREFIXES = ("STDC_", "GNUC_", "SIZEOF_")  # __STDC_NO_VLA__, __GNUC_MINOR__, __SIZEOF_POINTER__
# a removed template's "( )" ("Einstein({{IPA-de|x}})") or "( – )" between two, with the space before it (not "main()",
# "(–)"); a leading "( ;" and trailing ", )" ("(; born 1954, )", not ";)"). Linear in a run of spaces: "(?:\s|[,;:])*"
# tried every split of one after a "(" (20k removed templates: seconds a page), " +" started at each of its spaces
_PUNCT_PARENS = re.compile(r"( ?)(\w?)\(([\s,;:\u2013\u2014-]*+)\)")
_PARENS_EDGE = re.compile(r"(\()[ \t,;]++|(?<![ \t,;])[ \t,;]++(?<=[ \t])(\))")
_SPACE_BEFORE_PUNCT = re.compile(r"(?<! ) ++([,.;:])(?=\s|$)")

# Link prefixes whose links are not prose: media, categories, interlanguage ("de:", "zh-yue:", "zh-min-nan:",
# "simple:"). Language codes are matched lower-case only, as they are written, so "[[Ali: Fear Eats the Soul]]" stays.
_DROPPED_LINK_PREFIX = re.compile(r"\s*(?:(?i:file|image|media|category)|[a-z]{2,3}(?:-[a-z]+)*|simple)\s*:")

# A prefixed target naming a media file: [[Bild:X.jpg|mini|...]] in a German dump, Imagen: (es), Изображение: (ru),
# Grafika: (pl) are aliases of the File namespace, which <siteinfo> does not list (it gives a namespace one name).
_MEDIA_FILE = re.compile(
    r"[^|:]*:[^|]*\.(?:jpe?g|png|svg|gif|tiff?|webp|og[gva]|webm|mp3|wav|flac|pdf|djvu)\s*(?:\||$)", re.I)


def _link_text(m: re.Match, site: Site) -> str:
    inner = m.group(1)
    if (_DROPPED_LINK_PREFIX.match(inner) or inner.partition(":")[0].strip().lower() in site.link_namespaces
            or _MEDIA_FILE.match(inner)):
        return ""
    target, _, label = inner.partition("|")  # [[target|label]] shows label; [[target]] shows target
    return label if label.strip() else target.strip().lstrip(":")


def _sub_nested(pattern: re.Pattern, repl, text: str) -> str:
    while True:
        text, n = pattern.subn(repl, text)
        if not n:
            return text


def _trailing_start(text: str) -> int:
    """Where the article's trailing sections (See also, References, External links ...) start: at the first heading
    that only ends articles (References, External links, See also ...), or else at the final run of trailing-section
    headings, each with the trailing headings right before it ("Notes" before "References"). A "Sources" or "Notes"
    section amid the article (a history's account of its sources) is prose; the end of the text if none."""
    heads = list(_LEVEL_2.finditer(text))
    trailing = [bool(_TRAILING_SECTIONS.fullmatch(h.group())) for h in heads]
    k = next((i for i, h in enumerate(heads) if trailing[i] and not _AMID_ARTICLE.search(h.group())), len(heads))
    while k > 0 and trailing[k - 1]:
        k -= 1
    return heads[k].start() if k < len(heads) else len(text)


# also a section's name: a history's account of its sources, an author's list of works
_AMID_ARTICLE = re.compile(r"^==\s*(?:sources|notes|note|bibliography|anmerkungen|bronnen|literatur|literatuur"
                           r"|bibliographie|bibliografía|bibliografia|примечания|литература|источники|出典|注釈"
                           r"|参考文献|參考文獻|注释|註釋|källor|noter)\s*==", re.I)
_LEVEL_2 = re.compile(r"^==(?!=).*?[^=]==\s*$", re.M)


def strip_wikitext(text: str, site: Site = Site()) -> str:
    """Plain text of an article's wikitext; headings become their own paragraphs. `site`: the dump's own
    namespace names (iter_pages reads them from <siteinfo>), whose links are dropped as the English ones are."""
    text = _COMMENT.sub("", text)
    text = text[:_trailing_start(text)]
    text = _NON_PROSE_ELEMENTS.sub("", text)
    text = PARAMETER.sub("", text)
    if "-{" in text:
        text = CONVERSION.sub(converted, text)
    text = _sub_nested(_TEMPLATE, template_text, text)
    text = _sub_nested(_TABLE, "", text)
    # links from the inside out, as far as a file link's caption holding an external link ("Photo:
    # [https://nasa.gov NASA]") whose label holds an internal one ("[https://x.org [[Foo|Bar]] baz]"); a link holding
    # a "[" matches neither pattern. Four passes, not a loop to a fixed point (20 s on 10,000 levels of both kinds)
    # nor a label pattern allowing [[...]] (65 s on 240 KB of unclosed "[http://a b ", against 2.5 s)
    text = _BARE_EXTERNAL_LINK.sub(lambda m: m.group(1) or "", text)
    text = _sub_nested(_LINK, lambda m: _link_text(m, site), text)
    text = _EXTERNAL_LINK.sub(lambda m: m.group(1) or "", text)  # its label held an internal link, or a lone "["
    text = _sub_nested(_LINK, lambda m: _link_text(m, site), text)  # its caption held such an external link
    text = _BR.sub(" ", text)
    text = _TAG.sub("", text)
    text = _MAGIC_WORD.sub(_magic_word, text)
    text = "\n".join(_without_emphasis(line) if "''" in line else line for line in text.split("\n"))
    text = _HEADING.sub(lambda m: f"\n\n{m.group(2)}\n\n", text)
    text = _TABLE_DEBRIS.sub("", text)
    text = _LIST_MARKER.sub("", text)
    text = html.unescape(text)  # after tag removal: an escaped "&lt;b&gt;" is literal text
    text = _PUNCT_PARENS.sub(_punct_parens, text)
    text = _PARENS_EDGE.sub(r"\1\2", text)
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text)


def _punct_parens(m: re.Match) -> str:
    space, word, inner = m.groups()
    if (word and not inner) or (not any(c.isspace() for c in inner) and any(c in "\u2013\u2014-" for c in inner)):
        return m.group()  # a call's "main()", a dash's "(–)"
    return space + word if word else ""


def _magic_word(m: re.Match) -> str:
    name = m.group(1)
    if name == name.upper():
        return m.group() if name in _CODE_NAMES or name.startswith(_CODE_PREFIXES) else ""
    return "" if name.lower() in _ANY_CASE_MAGIC_WORDS else m.group()


def _without_emphasis(line: str) -> str:
    """A line without its bold and italic markup, its apostrophes read as MediaWiki's Parser::doQuotes reads them (a
    line at a time): some are text. Dropping every run lost the possessive of "''Titanic'''s" and the elision of
    "l'''Odyssée''"."""
    parts = _APOSTROPHES.split(line)  # text, run, text, ..., run, text
    markup = [0] * len(parts)  # of each run: 2 italic, 3 bold, 5 both
    for i in range(1, len(parts), 2):
        n = len(parts[i])
        markup[i] = 3 if n == 4 else min(n, 5)  # '''' is "'" and bold; past five, the extra ones are text
        parts[i - 1] += "'" * (n - markup[i])
    if sum(n in (2, 5) for n in markup) % 2 and sum(n in (3, 5) for n in markup) % 2:
        # an odd italic and an odd bold: one ''' is "'" and italics, the first after a one-letter word ("l'''"),
        # else the first after a longer word ("Titanic'''s"), else the first after a space
        def rank(i: int) -> int:
            before = parts[i - 1]
            return 2 if before[-1:] == " " else 0 if before[-2:-1] == " " else 1
        bolds = [i for i in range(1, len(parts), 2) if markup[i] == 3]
        if bolds:
            parts[min(bolds, key=lambda i: (rank(i), i)) - 1] += "'"
    return "".join(parts[::2])
