"""Wikipedias past English, German and French, as their dumps write them: ru/ja/zh/pl/sv end sections cut, the
disambiguation templates of jawiki and zhwiki and enwiki's by kind, enwiki's inline {{math}} and {{mvar}} read as
words of their sentence, and the German, Spanish and Russian abbreviations that end no sentence."""

import pytest

from pipelines.clean import normalize_text, split_sentences
from pipelines.wiki import Page, Site, page_reject_reason, strip_wikitext


def strip(text: str, site: Site = Site()) -> str:
    return normalize_text(strip_wikitext(text, site))


@pytest.mark.parametrize("lead, ending", [
    ("'''Москва''' — столица [[Россия|России]].",
     "== См. также ==\n* [[Список улиц Москвы]]\n\n== Примечания ==\n{{примечания}}\n\n== Литература ==\n"
     "* Забелин И. Е. История города Москвы. — М., 1905.\n\n== Ссылки ==\n* [http://www.mos.ru Официальный сайт]"),
    ("'''東京都'''は、[[日本]]の首都である。",
     "== 脚注 ==\n{{Reflist}}\n\n== 関連項目 ==\n* [[東京23区]]\n\n== 外部リンク ==\n* [https://x.jp 東京都公式]"),
    ("'''北京市'''是[[中华人民共和国]]的首都。",
     "== 参见 ==\n* [[北京历史]]\n\n== 外部链接 ==\n* [http://x.cn 北京市人民政府网站]"),
    ("'''Kraków''' – miasto w Polsce.", "== Zobacz też ==\n* [[Wawel]]\n\n== Przypisy ==\n<references />"),
    ("'''Stockholm''' är Sveriges huvudstad.",
     "== Se även ==\n* [[Gamla stan]]\n\n== Externa länkar ==\n* [http://x.se A]"),
])
def test_the_end_sections_of_the_largest_wikipedias_are_cut(lead, ending):
    """ru, ja, zh, pl and sv articles kept their See also links, their empty Notes heading, their bibliography lines
    and their external links' labels as prose: only English, German, French, Spanish, Italian, Portuguese and Dutch
    headings were known."""
    assert strip(lead + "\n\n" + ending) == normalize_text(strip_wikitext(lead))


def test_a_literature_or_notes_section_amid_a_russian_or_japanese_article_is_prose():
    """As "Literatur" and "Notes" are: a history of a literature goes on after its heading."""
    wikitext = "Вступление.\n== Литература ==\nЛитература процветала.\n== Музыка ==\nИ музыка.\n== Ссылки ==\n* A"
    assert strip(wikitext).split("\n\n") == ["Вступление.", "Литература", "Литература процветала.", "Музыка",
                                             "И музыка."]
    assert strip("序文。\n== 出典 ==\n史料は多い。\n== 音楽 ==\n音楽も。\n== 外部リンク ==\n* A").split("\n\n")[:3] == [
        "序文。", "出典", "史料は多い。"]


@pytest.mark.parametrize("template", ["{{人名の曖昧さ回避}}", "{{地名の曖昧さ回避}}", "{{山の曖昧さ回避}}",
                                      "{{消歧义}}",
                                      "{{消歧義}}", "{{Letter–NumberCombDisambig}}", "{{Mathdab}}", "{{Schooldis}}",
                                      "{{Roaddis}}", "{{Hndis-cleanup}}", "{{Geodis-cleanup}}"])
def test_disambiguation_pages_of_jawiki_zhwiki_and_enwikis_kinds_are_skipped(template):
    page = Page(id=1, ns=0, title="T", redirect=False,
                text="'''T''' may refer to:\n* [[T (band)]]\n* [[T (film)]]\n" + template)
    assert page_reject_reason(page) == "disambiguation"
    inline = Page(id=2, ns=0, title="U", redirect=False, text="'''U''' is a town.{{disambiguation needed}}")
    assert page_reject_reason(inline) == ""


def test_inline_formulas_and_variables_are_words_of_their_sentence():
    """{{math}} and {{mvar}} went as metadata templates do: "where is the hypotenuse and and are the legs"."""
    wikitext = ("The theorem states that {{math|''a''<sup>2</sup> + ''b''<sup>2</sup> {{=}} ''c''<sup>2</sup>}}, "
                "where {{mvar|c}} is the hypotenuse and {{mvar|a}} and {{mvar|b}} are the legs. Also "
                "{{math|1=''x'' = 1}}.")
    assert strip(wikitext) == ("The theorem states that a2 + b2 = c2, where c is the hypotenuse and a and b are the "
                               "legs. Also x = 1.")


@pytest.mark.parametrize("text, sentences", [
    ("Los EE. UU. declararon la guerra en 1917. Ganaron.", 2),
    ("La Sra. García llegó. Se fue.", 2),
    ("Sie heiratete 1920 Anna (geb. Müller). Sie hatten Kinder.", 2),
    ("Die Stadt bzw. Gemeinde liegt am Rhein. Sie ist alt.", 2),
    ("Das Werk (vgl. Abschnitt 2) ist bekannt. Es ist gut.", 2),
    ("Er lebt in der ehem. Hauptstadt. Sie ist alt.", 2),
    ("Дом стоит на ул. Тверской. Он старый.", 2),
    ("Храм св. Петра стоит здесь. Он старый.", 2),
    ("Население ок. 500 человек. Село старое.", 2),
    ("Мы сказали им. Они ушли.", 2),  # "им" a pronoun: an end (not taken for "имени")
])
def test_german_spanish_and_russian_abbreviations_end_no_sentence(text, sentences):
    assert len(split_sentences(text)) == sentences, split_sentences(text)
