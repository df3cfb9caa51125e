"""Text normalisation and sentence splitting: the per-document hot path of corpus preparation.

Contract with the readers (pipelines/sources.py, pipelines/wiki.py) and the example builder
(pipelines/examples.py): a document's text is `normalize_text` output -- no control
characters, single spaces inside lines, no blank-only lines, paragraphs separated by exactly
"\n\n" (a single "\n" inside a paragraph is a soft line break, as in hard-wrapped books).
It is the text the tokenizer reads, so it changes nothing BERT's normalizer (BertNormalizer,
which transformers rebuilds for a released model) would not change alike: no NFC (a word typed
with combining accents stays so, as fine-tuning and serving will see it), and the characters it
drops are those BertNormalizer drops. NFC is for comparing texts only (`dedup_form`, which
dedup.content_hashes applies).
`split_sentences` never returns a sentence spanning a paragraph break, and returns each sentence
on one line (soft line breaks become spaces).

Sentence splitting is a rule-based regex splitter written here rather than a library: blingfire
(the fast option on PyPI) installs, but it splits "Dr. | Who" and misses "said. | Wait", ships
binaries for x86-64 only and was last released in 2021; pysbd and nltk punkt are 10-100x slower.
One compiled regex finds candidate boundaries in C; Python only looks at the few characters
around each candidate, so the splitter runs at tens of MB/s, far ahead of WordPiece tokenizing.
"""

from __future__ import annotations

import re
import unicodedata

# Control characters (C0, DEL, C1) other than \t \n \r (which become spaces and line breaks below), and
# the zero-width/BOM/bidi/soft-hyphen format characters pasted web text is full of: invisible,
# meaningless to BERT, and they split words for the tokenizer. All are dropped, never made spaces, as
# BertNormalizer's clean_text drops them (\v and \f too: a space here would split a word it joins).
# The bidi embeddings and isolates (U+202A-202E, U+2066-2069, the Arabic letter mark U+061C) wrap each
# sentence of much right-to-left web text: kept, "<RLE>first.<PDF> <RLE>second" was one sentence (no
# space after its stop) and no exact duplicate of the text without them. (ZWJ/ZWNJ stay: they join.)
# (A regex beats str.translate 5x.)
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u200b\u200e\u200f\u202a-\u202e"
                        "\u2060\u2066-\u2069\ufeff]")
_LINE_SEPARATORS = re.compile("\r\n?|[\u2028\u2029]")
_SPACES = re.compile(r"[^\S\n]+")  # any whitespace run inside a line (incl. NBSP, em space)
_ODD_SPACE = re.compile(r"[^\S\n ]")  # whitespace a single " " does not already stand for
_LINE_EDGES = re.compile(r" ?\n ?")
_PARAGRAPH_BREAK = re.compile(r"\n{2,}")


def normalize_text(text: str) -> str:
    """Control characters dropped, whitespace collapsed per line, paragraph breaks kept.

    Case and composition are kept: lowercasing, accent stripping (and the NFD it implies) are
    the tokenizer's job, so a cased tokenizer can be trained from the same prepared documents,
    and a document gives the ids transformers gives its raw text.
    """
    # Each substitution runs only when a cheap test (memchr-speed `in`, or a character-class
    # search) shows it would change something: most text is clean already, and _SPACES alone,
    # matching every space, costs more than everything else here put together.
    ascii_only = text.isascii()
    if "\r" in text or not ascii_only:
        text = _LINE_SEPARATORS.sub("\n", text)
    text = _INVISIBLE.sub("", text)
    if "  " in text or _ODD_SPACE.search(text):
        text = _SPACES.sub(" ", text)  # \t included
    if " \n" in text or "\n " in text:
        text = _LINE_EDGES.sub("\n", text)
    if "\n\n\n" in text:
        text = _PARAGRAPH_BREAK.sub("\n\n", text)
    return text.strip("\n ")


def dedup_form(text: str) -> str:
    """`text` NFC-composed: what exact dedup hashes, so a copy typed with combining accents is a duplicate of
    its precomposed original though the tokenizer reads the two as written."""
    return text if text.isascii() or unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


# Words that end in "." without ending the sentence when a capitalised word follows ("Mr. Smith",
# "Dr. Who", "cf. Table"). Compared lower-cased with inner dots removed ("e.g" -> "eg"). English, and the commonest
# of German ("geb. Müller", "bzw. Gemeinde", "vgl. Abschnitt"), Spanish ("EE. UU.", "Sra. García") and Russian
# ("ул. Ленина", "св. Петра", "проф. Иванов") that a capital follows.
# Deliberately absent: "etc", "inc", "no", month names: they end sentences too often (BEFORE_NUMBERS has the last two);
# so do "usw" (German's etc.), "др" and "пр" (Russian's), and "им" (a pronoun that ends sentences, as "имени").
ABBREVIATIONS = frozenset("""
    mr mrs ms messrs dr prof rev hon sr jr st mt ft gen col lt sgt capt cmdr adm gov pres sen rep
    vs eg ie cf al approx ca fig figs eq eqs vol vols pp ch sec op nos
    bzw geb gest vgl ehem sog hl ee uu sra ул пос св акад проф
""".split())
# ... and before a number only: "No. 1 on the chart", "Jan. 5, 1990", "p. 12", "ок. 500" (they end sentences before
# words).
BEFORE_NUMBERS = frozenset("""
    no jan feb mar apr jun jul aug sep sept oct nov dec p art nr bd abs ок
""".split())

# A boundary candidate: terminal punctuation (Latin, the Devanagari danda, the Arabic question mark and full stop,
# Ethiopic, Burmese, Armenian and Tibetan stops), optional closing quotes/brackets (German's \u201c closes, French's
# spaced \u00bb; BookCorpus's tokenized '' always closes, but a spaced " opens: wrapping parts an opening " from its
# word, a closing one never), whitespace; or CJK's ideographic full stop and full-width ! ?, no space after.
_CLOSERS = "\"'\u201d\u2019\u201c\u00bb\u203a)\\]\u300d\u300f\uff09\u3011"
_TERMINALS = ".!?\u2026\u0964\u0965\u061f\u06d4\u1362\u104b\u0589\u0f0d"
# A run of terminals is matched from its start only, and possessively: tried at each of its characters, each try
# consumed the rest of the run and backtracked over it where no whitespace followed ("Loading......" filler, "!!!!!!"
# spam), quadratic (20,000 dots: 13 s). No match needs to give back a terminal or closer: neither is whitespace.
_BOUNDARY = re.compile(rf"(?<![{_TERMINALS}])[{_TERMINALS}]++[{_CLOSERS}]*+"
                       rf"(?: ''(?:\s+|\Z)|(?:[ \u00a0][\u00bb\u203a][{_CLOSERS}]*)?\s+)"
                       rf"|[\u3002\uff01\uff1f]+[{_CLOSERS}]*\s*")
# a script's own terminator (scripts without capitals; Armenian's \u0589 is a stop alone): always an end
_UNCASED_ENDS = frozenset("\u3002\uff01\uff1f\u0964\u0965\u061f\u06d4\u1362\u104b\u0589\u0f0d")
_OPENERS = "\"'\u201c\u201e\u2018\u00ab\u2039([\u00bf\u00a1"
# Russian, Spanish, French dialogue opens with an em dash or a bar (a spaced en dash is mostly a range: "3. – 5. Mai")
_DIALOGUE_DASHES = "\u2014\u2015"
# what goes on after a Japanese quote's stop (「...。」と彼は言った, って, a comma), but for the words that open one
_QUOTATIVE, _OPENS_JA = ("\u3068", "\u3063\u3066", "\u3001", "\uff0c"), ("\u3068\u3053\u308d", "\u3068\u3066\u3082",
                                                                "\u3068\u306b\u304b\u304f", "\u3068\u3082\u304b\u304f")
_INITIALS = re.compile(r"(?:[^\W\d_]\.)*[^\W\d_]")  # "J", "U.S", "e.g" (before the final ".")
_LAST_WORD = re.compile(r"\S*\Z")  # the text after the last whitespace (of any kind: a line end too), maybe ""
# German writes ordinals as a number and a stop ("im 19. Jahrhundert", "am 3. Oktober", "der 2. Weltkrieg"), and its
# nouns take capitals: after a German article or preposition, and before a month or a noun that follows an ordinal,
# such a stop ends no sentence ("He finished 3. August was hot." still does: "finished" is no German word)
_WORD_BEFORE = re.compile(r"(\w+)[ \t]+\Z")  # the word before a number, on its line
_GERMAN_BEFORE_ORDINAL = frozenset("im am vom zum zur bis seit ab beim der die das des dem den ein eine einem einen "
                                   "einer eines zweiten ihr ihre ihrem ihren seinem seinen seiner seine".split())
_MONTHS = r"(?:Januar|Jänner|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember)\b"
_ORDINAL_NOUN = re.compile(
    _MONTHS + r"|(?:Jahrhunderts?|FC"
    r"|Jahrtausends?|Weltkrieg(?:e?s)?|Mal|Platz|Platzes|Klasse|Liga|Bundesliga|Auflage|Armee|Division|Staffel"
    r"|Spieltag|Runde|Etappe|Regiment|Bataillon|Korps|Dynastie|Sinfonie|Symphonie|Geburtstag|Todestag|Jahrestag"
    r"|Legislaturperiode|Wahlperiode|Bundestag|Parteitag|Bezirk|Stock|Grades?)\b")
# ... and a German date needs no such word where a bracket, a life's mark (* born, † died) or a range's dash opens it:
# "(* 14. März 1879 in Ulm; † 18. April 1955)", "(26. Juli – 11. August 2024)"
_MONTH = re.compile(_MONTHS)
_DATE_OPENS = re.compile(r"(?:[(\[*†–—,;]|\s-)[ \t\u00a0]*\Z")


def _ends_sentence(text: str, start: int, end: int, cased: bool = True) -> bool:
    """Decide the candidate text[start:end] (punctuation + whitespace) from its neighbours. A capital (or digit)
    must follow, but not after a script's own terminator, nor at a line end (one sentence a line, as BookCorpus),
    nor before a letter without case (Hebrew, Arabic, CJK), nor in a paragraph without capitals (`cased` false: a
    lowercased corpus); abbreviations and initials hold in all of these."""
    if end >= len(text):
        return True
    if text[start] in _UNCASED_ENDS:  # but a quote's own stop, the sentence going on: 「こんにちは。」と彼は言った。
        return not (text[end - 1] in _CLOSERS and text.startswith(_QUOTATIVE, end)
                    and not text.startswith(_OPENS_JA, end))  # ところで, とても, とにかく, ともかく
    nxt = text[end]
    if nxt in _OPENERS and end + 1 < len(text):
        nxt = text[end + 1]
    elif nxt in _DIALOGUE_DASHES:  # a line of dialogue: "сказал он. — Пойдём.", "dijo. —¿Vamos?" (a capital only)
        after = text[end + 1:end + 4].lstrip(" \u00a0")
        after = (after[1:] if after[:1] in _OPENERS else after)[:1]
        nxt = after if after.isalpha() else nxt
    if not (nxt.isupper() or nxt.isdigit() or not cased or "\n" in text[start:end]
            or (nxt.isalpha() and not nxt.islower())):
        return False  # '"Stop." he said', 'e.g. a latte', 'Wait... what?'
    if text[start] != "." or text.startswith("..", start):
        return True  # "?", "!", and an ellipsis before a capital
    found = _LAST_WORD.search(text, max(0, start - 24), start)
    word = found.group().lstrip(_OPENERS)  # "1703.\nSt": "St"
    if word.isdigit() and len(word) <= 3 and _list_item(text, found.start()):
        return False  # a numbered list's item: "Steps:\n1. Open the box.\n2. Remove it."
    if word.isdigit() and len(word) <= 3 and "\n" not in text[start:end] and _ORDINAL_NOUN.match(text, end):
        before = _WORD_BEFORE.search(text, max(0, found.start() - 24), found.start())
        if before and before[1].lower() in _GERMAN_BEFORE_ORDINAL:
            return False  # a German ordinal: "Im 19. Jahrhundert", "am 3. Oktober 1990" (see _ORDINAL_NOUN)
        at = start - len(word)
        if _MONTH.match(text, end) and _DATE_OPENS.search(text, max(0, at - 8), at):
            return False  # a German date after a bracket, a mark or a dash (see _DATE_OPENS)
    if text.startswith("J.-C.", end):
        return False  # French years: "44 av. J.-C.", "apr. J.-C." (before Christ, after)
    if word != "I" and _INITIALS.fullmatch(word):
        return False  # "J. Smith", "the U.S. Army" (costs a miss on "...in the U.S. The next"); "I. Then" ends
    word = word.replace(".", "").lower()
    return word not in ABBREVIATIONS and not (nxt.isdigit() and word in BEFORE_NUMBERS)


def _list_item(text: str, at: int) -> bool:
    """Whether the number at text[at] opens a list item: it starts a line after one that ended a sentence or
    introduced the list (". ! ? : ;"), not a hard-wrapped line's "...cost him\n100. He paid" (the text's first
    number is no item either: "42. That is the answer."). It looks back over whitespace only: a copy of the text
    before `at` (text[:at].rstrip()) made a document without blank lines quadratic (BookCorpus's 8 MiB: 32 s)."""
    i = at
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    if i == 0 or text[i - 1] != "\n":
        return False
    i -= 1
    while i > 0 and text[i - 1].isspace():
        i -= 1
    return i > 0 and text[i - 1] in ".!?:;"


def split_sentences(text: str, lines: bool = False) -> list[str]:
    """Split normalised text into sentences; a paragraph break always ends a sentence, a soft line break
    (a "\n" inside a paragraph) becomes a space and ends one after terminal punctuation (_ends_sentence).
    `lines`: every line break ends a sentence too (Google's one-sentence-a-line input, data.text_documents=
    blank_lines: a heading line "Early life" is a sentence of its own, not the start of the next line's)."""
    sentences = []
    for paragraph in text.split("\n" if lines else "\n\n"):
        paragraph = paragraph.strip()
        start, cased = 0, paragraph != paragraph.lower()
        for m in _BOUNDARY.finditer(paragraph):
            if _ends_sentence(paragraph, m.start(), m.end(), cased):
                sentence = paragraph[start:m.end()].rstrip()
                if sentence:
                    sentences.append(sentence.replace("\n", " "))
                start = m.end()
        tail = paragraph[start:].rstrip()
        if tail:
            sentences.append(tail.replace("\n", " "))
    return sentences
