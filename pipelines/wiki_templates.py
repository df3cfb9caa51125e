"""The templates of wikitext that render words of the sentence, rendered as MediaWiki shows them (pipelines/wiki.py
strips the rest): dates, units and numbers, names, quotations, language tags and the symbol templates, English
Wikipedia's and the commonest of the French, Spanish, Japanese and Russian ones (_LOCAL); and language conversion
markup (converted)."""

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
    if name in ("math", "mvar"):  # a formula or a variable, as written: words of its sentence ("where c is the
        # hypotenuse"), where <math> markup is not; "1=" names the argument of a formula that holds an "=" ({{=}})
        text = args.strip()
        return text[2:].strip() if text.startswith("1=") else text
    if _CENTURY_NAME.fullmatch(name):  # frwiki's {{XIXe siècle}}, {{IIIe millénaire}}
        roman, _, unit = name.partition("e ")
        return f"{roman.upper()}e {unit}"
    if name not in _INLINE_TEMPLATES and name not in _LOCAL and not name.startswith("lang-"):
        return " "
    parts = _ARGUMENT_PIPE.split(args) if args else []
    named = {k.strip(): v.strip() for k, v in (a.split("=", 1) for a in parts if "=" in a)}
    args = [a.strip() for a in parts if "=" not in a]  # positional arguments
    if name in _LOCAL:
        return _LOCAL[name](args, named)
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
    if name == "height":  # {{height|m=1.80}}, {{height|ft=6|in=1}}: each value and its unit, as written
        return " ".join(f"{v} {k}" for k, v in named.items() if k in _HEIGHT_UNITS and v)
    if name == "age":  # the age between two dates; of one date, today's (unknown here: the number goes)
        return _years_between(args[:3], args[3:6]) if len(args) >= 6 else ""
    if name in ("ill", "interlanguage link", "nihongo", "visible anchor"):  # the name shown first (languages, readings)
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
                               "flagicon", "abbr", "sub", "sup", "chem2", "frac", "height", "age",
                               "visible anchor"])
_HEIGHT_UNITS = ("m", "cm", "ft", "in")
_MONTHS = ",January,February,March,April,May,June,July,August,September,October,November,December".split(",")
_SYMBOL_TEMPLATES = {"nbsp": " ", "ndash": "\u2013", "mdash": "\u2014", "snd": " \u2013 ", "spnd": " \u2013 ",
                     "spaced ndash": " \u2013 ", "spaced en dash": " \u2013 ", "dash": " \u2014 ", "-": "\u2013",
                     "middot": "\u00b7", "\\": " / ", "'": "&#39;", "'s": "&#39;s", "=": "="}
# not {{!}}: a "|" would split its template ({{=}} is an "=" in a formula's {{math}}, read whole). An apostrophe is
# an entity, as MediaWiki's {{'s}} writes it: the italics' "''" before it ("''Titanic''{{'s}}") would make it markup
# (strip_wikitext unescapes after emphasis)
_NUMBER = re.compile(r"[-+\u2212]?[0-9][0-9.,/]*")
_RANGE_WORDS = frozenset(["-", "\u2013", "to", "and", "or", "x", "by", "+", "+/-", "&"])
PARAMETER = re.compile(r"\{\{\{[^{}]*\}\}\}")  # {{{1}}}: a template's own parameter, left in pages by copying
# language conversion markup (zh, sr, kk, ... wikis): -{text}-, -{zh-hans:计算机; zh-hant:電腦;}-, -{A|zh-cn:软件}-
CONVERSION = re.compile(r"-\{(?:([A-Za-z;\- ]{1,40})\|)?([^{}]*+)\}-")
_VARIANT = re.compile(r"\s*[a-z]{2,3}(?:-[a-z0-9]+)*\s*:")


def _date(args: list[str]) -> str:
    """A date template's (first) date: "17 July 1954" of 1954|7|17, "1954" (no "(age 71)": today's), or as written."""
    year, month, day = (args + ["", "", ""])[:3]  # isdecimal, not isdigit: int("17²") raises, and the page
    if not year.isdecimal():  # would be a malformed_wikitext reject (as it is for a month of 4,301 digits)
        return year
    month = (_MONTHS[int(month)] if 0 < int(month) <= 12 else "") if month.isdecimal() else month
    return " ".join(p for p in (str(int(day)) if day.isdecimal() and month else "", month, year) if p)


def _years_between(born: list[str], then: list[str]) -> str:
    """{{age|1990|5|1|2020|4|30}} -> "29": whole years from the first date to the second (year|month|day each); a
    blank year (the template's today, {{age|1990|5|1|||}}) is not known here: "" (not year 1, "-1989")."""
    if not (born[:1] and then[:1] and born[0].strip() and then[0].strip()):
        return ""
    try:
        (y0, m0, d0), (y1, m1, d1) = ([int(x or 1) for x in (d + ["1", "1"])[:3]] for d in (born, then))
    except ValueError:
        return ""
    return str(y1 - y0 - ((m1, d1) < (m0, d0)))


# frwiki, eswiki: a date's month by its number ({{fecha|8|4|1961}}, {{date|1|2|2000}})
_MONTHS_FR = ",janvier,février,mars,avril,mai,juin,juillet,août,septembre,octobre,novembre,décembre".split(",")
_MONTHS_ES = ",enero,febrero,marzo,abril,mayo,junio,julio,agosto,septiembre,octubre,noviembre,diciembre".split(",")
_CENTURY_NAME = re.compile(r"[ivxlc]+e (?:siècle|millénaire)")


def _month(month: str, names: list[str]) -> str:
    return (names[int(month)] if 0 < int(month) <= 12 else "") if month.isdecimal() else month


def _date_fr(args: list[str], named: dict) -> str:
    """{{date|26|juillet|1895}} -> "26 juillet 1895", {{date de décès|4|juillet|1934|7|novembre|1867}} -> the first
    date (the second is the birth, for the age), the first of a month "1er"."""
    day, month, year = (args + ["", "", ""])[:3]
    if month in ("dmy", "mdy", "ymd", "iso"):  # enwiki's {{date|2020-01-05|dmy}}: a date and its format
        month = ""
    return " ".join(p for p in ("1er" if day == "1" else day, _month(month, _MONTHS_FR), year) if p)


def _fecha(args: list[str], named: dict) -> str:
    """{{fecha|8|4|1961}} -> "8 de abril de 1961"; {{fecha|1961}} (a year alone) -> "1961"."""
    parts = [p for p in args[:3] if p]
    if len(parts) == 3:
        parts[1] = _month(parts[1], _MONTHS_ES)
    return " de ".join(parts)


def _century_fr(args: list[str], named: dict) -> str:
    """{{s-|XIX}}, {{s|XIX}}, {{siècle|XIX}} -> "XIXe siècle" ("Ier siècle"); {{s2|XIX|XX}} -> "XIXe et XXe
    siècles"."""
    numbers = [a.upper() for a in args[:2] if a]
    marks = [n + ("er" if n == "I" else "e") for n in numbers]
    return f"{' et '.join(marks)} siècle{'s' if len(marks) > 1 else ''}" if marks else ""


def _lien(args: list[str], named: dict) -> str:
    """{{Lien|fr=Pierre Curie|lang=en|trad=Pierre Curie|texte=Curie}}: the text shown, or the French title."""
    return named.get("texte") or named.get("fr") or named.get("1") or (args[0] if args else "")


def _yomigana(args: list[str], named: dict) -> str:
    """{{読み仮名|俳優|はいゆう}} -> "俳優（はいゆう）": the word, its reading in brackets."""
    return f"{args[0]}\uff08{args[1]}\uff09" if len(args) > 1 and args[1] else (args[0] if args else "")


def _birth_ja(args: list[str], named: dict) -> str:
    """{{生年月日と年齢|1990|5|1}} -> "1990年5月1日" (without the age of the day it is read)."""
    return "".join(f"{int(a)}{unit}" if a.isdecimal() else a for a, unit in zip(args[:3], "年月日"))


def _shown_or_title(args: list[str], named: dict) -> str:
    """ruwiki's {{нп5|Title|Text shown|en|Foreign title}}: the text shown, or the title."""
    return (args[1] if len(args) > 1 and args[1] else "") or (args[0] if args else "")


def _joined(args: list[str], named: dict) -> str:
    """{{unité|5|km}} -> "5 km", {{nombre|20|habitants}} -> "20 habitants", {{cifra|20}} -> "20"."""
    return " ".join(a for a in args if a)


def _first(args: list[str], named: dict) -> str:
    return args[0] if args else ""


_LOCAL = {
    **dict.fromkeys(["date", "date-", "date de naissance", "date de naissance-", "date de décès", "date de décès-"],
                    _date_fr),
    **dict.fromkeys(["s", "s-", "siècle", "s2", "s2-"], _century_fr),
    "lien": _lien, "unité": _joined, "nombre": _joined, "fecha": _fecha, "cifra": _joined,
    "仮リンク": _first, "読み仮名": _yomigana, "読み仮名 ruby不使用": _yomigana, "生年月日と年齢": _birth_ja,
    **dict.fromkeys(["нп1", "нп2", "нп3", "нп4", "нп5"], _shown_or_title),
}


def converted(m: re.Match) -> str:
    """The text a language conversion shows: of variants, the first written ("计算机" of "zh-hans:计算机;
    zh-hant:電腦;"; of a one-way rule "x=>zh-cn:y", its source x), else the text as written; a hidden rule (H), the
    title's (T) or a removal (-) shows nothing. Readers of another variant see another script: one is the page's."""
    flags = {f.strip() for f in (m.group(1) or "").split(";")}
    body = m.group(2)
    if flags & {"H", "T", "-"}:
        return ""
    rule = next((v for v in body.split(";") if v.strip()), "")
    source, arrow, target = rule.partition("=>")
    if "R" in flags or not _VARIANT.match(target if arrow else source):
        return body
    return source.strip() if arrow else source.partition(":")[2].strip()
