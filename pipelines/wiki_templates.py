"""The templates of wikitext that render words of the sentence, rendered as MediaWiki shows them (pipelines/wiki.py
strips the rest): dates, units and numbers, names, quotations, language tags and the symbol templates."""

from __future__ import annotations

import re

# A "|" that a link closes after (no "[" between): it parts the link's target from its label, not template arguments.
_ARGUMENT_PIPE = re.compile(r"\|(?![^\[]*\]\])")


def template_text(m: re.Match) -> str:
    """Most templates are metadata (infoboxes, citations, maintenance tags) and go, leaving a space (words either
    side stay two); the few that render prose inline keep their words: {{lang|fr|Paris}}, {{convert|5|km|mi}} ->
    "5 km", {{ill|Hans Müller|de}} -> "Hans Müller", and the symbols: "No.{{nbsp}}1", "1999{{ndash}}2000". Templates
    go before links, so an argument may be a link: {{nowrap|[[United States|U.S.]]}} -> "[[United States|U.S.]]"."""
    name, _, args = m.group(0)[2:-2].partition("|")
    if name.lstrip().lower().startswith("formatnum:"):  # a parser function: its argument follows the colon
        return name.partition(":")[2].strip()
    name = " ".join(name.replace("_", " ").split()).lower()
    if name == "langx":  # {{langx|ja|東京}}: enwiki's merge of {{lang-ja|東京}}, the language code its first argument
        code, _, args = args.partition("|")
        name = "lang-" + code.strip().lower()
    if name in _SYMBOL_TEMPLATES:
        return _SYMBOL_TEMPLATES[name]
    if name not in _INLINE_TEMPLATES and not name.startswith("lang-"):
        return " "
    parts = _ARGUMENT_PIPE.split(args) if args else []
    named = {k.strip(): v.strip() for k, v in (a.split("=", 1) for a in parts if "=" in a)}
    args = [a.strip() for a in parts if "=" not in a]  # positional arguments
    if name in _DATE_TEMPLATES:
        return _date(args)
    if name == "val":  # its number, exponent and unit (u=, or ul= linked); an uncertainty is not read
        number = "".join(args[:1] + [f"\u00d710^{named['e']}" if named.get("e") else ""])
        return " ".join([number, named.get("u") or named.get("ul") or ""]).strip()
    if name in ("nee", "née", "sortname"):  # "née Kasner"; a first and a last name (then a link target, a sort key)
        return " ".join(args[:2] if name == "sortname" else ["née", *args[:1]])
    if name in ("flag", "flagcountry", "flagu", "flagicon", "abbr"):  # a country (an icon: none), an abbreviation
        return "" if name == "flagicon" else named.get("name") or (args[0] if args else "")
    if name == "lang":
        return named.get("text", "").strip() or (args[1] if len(args) > 1 else "")
    if name in ("convert", "cvt"):  # the value (-40, 1/2, or a range: 5|-|10) and its unit, or units: 6|ft|1|in
        end = 1
        while end + 1 < len(args) and args[end] in _RANGE_WORDS:
            end += 2
        while end + 2 < len(args) and _NUMBER.fullmatch(args[end + 1]):  # not 5|km|mi|1: the "1" is a precision
            end += 2
        return " ".join(args[:end + 1])
    if name == "frac":  # 1|2 -> "1/2", 3|1|2 -> "3 1/2", 4 -> "1/4"
        return " ".join(args[:-2] + ["/".join((["1"] + args)[-2:])]) if args else ""
    if name in ("circa", "c."):
        return " ".join(["c.", *args[:1]])
    if name == "as of":
        return " ".join(["As of", *args[:3]])
    if name == "us$":
        return "US$" + (args[0] if args else "")
    if name in ("ill", "interlanguage link", "nihongo"):  # the local name first; the rest: languages, readings
        return args[0] if args else ""
    if name in _QUOTE_TEMPLATES:  # the quotation is prose, a block of its own; its author and source are not
        text = named.get("text") or named.get("quote") or named.get("1") or (args[0] if args else "")
        return f"\n\n{text.strip()}\n\n"
    return args[-1] if args else ""


_QUOTE_TEMPLATES = frozenset(["quote", "blockquote", "cquote", "quotation", "quote box", "poem quote"])
_DATE_TEMPLATES = frozenset([*(f"{e}{s}" for e in ("birth", "death", "start", "end") for s in (
    " date", " date and age", "-date", "-date and age", " year and age")), "dts", "film date", "bda"])
_INLINE_TEMPLATES = frozenset(["lang", "convert", "cvt", "nowrap", "nobr", "small", "big", "transl", "sic", "circa",
                               "c.", "as of", "us$", "ill", "interlanguage link", "nihongo", *_QUOTE_TEMPLATES,
                               *_DATE_TEMPLATES, "val", "nee", "née", "sortname", "flag", "flagcountry", "flagu",
                               "flagicon", "abbr", "sub", "sup", "chem2", "frac"])
_MONTHS = ",January,February,March,April,May,June,July,August,September,October,November,December".split(",")
_SYMBOL_TEMPLATES = {"nbsp": " ", "ndash": "\u2013", "mdash": "\u2014", "snd": " \u2013 ", "spnd": " \u2013 ",
                     "spaced ndash": " \u2013 ", "spaced en dash": " \u2013 ", "dash": " \u2014 ", "-": "\u2013",
                     "middot": "\u00b7", "\\": " / ", "'": "&#39;", "'s": "&#39;s"}
# not {{!}}, {{=}}: a "|" would split its template. An apostrophe is an entity, as MediaWiki's {{'s}} writes it: the
# italics' "''" before it ("''Titanic''{{'s}}") would make it markup (strip_wikitext unescapes after emphasis)
_NUMBER = re.compile(r"[-+\u2212]?[0-9][0-9.,/]*")
_RANGE_WORDS = frozenset(["-", "\u2013", "to", "and", "or", "x", "by", "+", "+/-", "&"])
PARAMETER = re.compile(r"\{\{\{[^{}]*\}\}\}")  # {{{1}}}: a template's own parameter, left in pages by copying


def _date(args: list[str]) -> str:
    """A date template's (first) date: "17 July 1954" of 1954|7|17, "1954" (no "(age 71)": today's), or as written."""
    year, month, day = (args + ["", "", ""])[:3]  # isdecimal, not isdigit: int("17²") raises, and the page
    if not year.isdecimal():  # would be a malformed_wikitext reject (as it is for a month of 4,301 digits)
        return year
    month = (_MONTHS[int(month)] if 0 < int(month) <= 12 else "") if month.isdecimal() else month
    return " ".join(p for p in (str(int(day)) if day.isdecimal() and month else "", month, year) if p)
