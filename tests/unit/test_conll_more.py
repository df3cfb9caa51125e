"""CoNLL files of other benchmarks' layouts (MultiCoNER's per-sentence comments, GermEval's token numbers) and IOE
tag sets: read, scored, or refused as what they are."""

import pytest

from pipelines.tasks import Columns, TaskDataError, read_file
from pipelines.tasks.conll import load_conll, ner_metrics

# MultiCoNER (SemEval-2022 Task 11): every sentence opens with "# id <uuid>\tdomain=en", 4 fields as its token lines
MULTICONER = ("# id bb81b9a7-4ba5-4b97-9cc1-b6a4cf6bfc3f\tdomain=en\nthe _ _ O\noriginal _ _ O\n"
              "soundtrack _ _ O\n\n"
              "# id 4f1e7a3e-9d36-4a39-8b1c-0a5e2d8c1f11\tdomain=en\npeter _ _ B-PER\nblackburn _ _ I-PER\n"
              "won _ _ O\n\n"
              "# id 7c2d9e0a-1b3f-4c5d-8e6f-9a0b1c2d3e4f\tdomain=en\nin _ _ O\nparis _ _ B-LOC\n\n")
WORDS = [["the", "original", "soundtrack"], ["peter", "blackburn", "won"], ["in", "paris"]]
# GermEval 2014: a '#' source line, then "index word outer-tag inner-tag(nested)" per token
GERMEVAL = ("#\thttp://de.wikipedia.org/wiki/Manfred_Korfmann [2009-10-17]\n1\tAuch\tO\tO\n2\tRonaldo\tB-PER\tO\n"
            "3\tlässt\tO\tO\n4\tFC\tB-ORG\tO\n5\tKickers\tI-ORG\tO\n6\tDarmstadt\tI-ORG\tB-LOC\n7\t.\tO\tO\n\n"
            "#\thttp://de.wikipedia.org/wiki/Bonn [2009-10-18]\n1\tBonn\tB-LOC\tO\n2\tliegt\tO\tO\n\n")


def write(tmp_path, text, name):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def rows_of(path, **kwargs):
    return [r for b in read_file(path, "conll", "token-classification", Columns(), **kwargs) for r in b.rows]


def test_a_per_sentence_comment_of_the_files_column_count_is_skipped(tmp_path):
    """MultiCoNER's "# id <uuid>\\tdomain=en" has its token lines' 4 fields: taken for a token once the first token
    line fixed the count, it rejected every sentence but the first (task=conll), or (own data) added a word '#' tagged
    'domain=en', a class that switched scoring from entity F1 to word accuracy. A '#' line opening a sentence of an
    entity-tagged file is a token only if it ends in a tag; '# O' and '#Bonn B-LOC' are."""
    path = write(tmp_path, MULTICONER, "en_train.conll")
    split = load_conll(path, ("O", "B-PER", "I-PER", "B-LOC", "I-LOC"))
    assert [r["tokens"] for r in split] == WORDS and not split.rejects
    rows = rows_of(path)
    assert [r["tokens"] for r in rows] == WORDS
    assert {t for r in rows for t in r["ner_tags"]} == {"O", "B-PER", "I-PER", "B-LOC"}
    assert [r["tokens"] for r in rows_of(path, labeled=False)] == WORDS  # words to tag: no '#' either
    signs = write(tmp_path, "EU _ _ B-ORG\n\n# _ _ O\nrose _ _ O\n\n#Bonn _ _ B-LOC\n", "signs.conll")
    assert [r["tokens"] for r in rows_of(signs)] == [["EU"], ["#", "rose"], ["#Bonn"]]
    # word tags that are no entity tags (part of speech: Twitter's '#' tag for a hashtag): no tag tells a comment
    pos = write(tmp_path, "I PRP\nrun VBP\n\n#blessed #\nday NN\n", "pos.conll")
    assert [r["tokens"] for r in rows_of(pos)] == [["I", "run"], ["#blessed", "day"]]


def test_ioe_tags_are_scored_as_ioe():
    """I- inside, E- at an entity's end (IOE1/IOE2), no B-/S-: read as strict IOBES, where an entity opens with B-
    or S-, not one entity was read, and a perfect model scored F1 0 (under IOB2 the rows were refused, advising
    IOB1). IOB2's strict reading is IOE2's; IOB1's and none, conlleval's, which reads IOE1's and IOE2's ends alike;
    IOE1 rows (entities closed by I-) under IOB2 are refused, naming IOE1 and the setting.
    The promotion gate's counts read them as the reported F1 does."""
    from bert_core.config import ConfigError
    from jobs.registry.scorer import entity_counts
    from pipelines.tasks.conll import scheme_checked
    from pipelines.tasks.roles import TaskRows

    gold = [["I-PER", "E-PER", "O", "E-LOC"], ["O", "I-ORG", "I-ORG", "E-ORG"]]
    half = [["I-PER", "E-PER", "O", "O"], ["O", "O", "I-ORG", "E-ORG"]]  # one right, one missed, one cut short
    for scheme in ("IOB1", "IOB2", None):
        assert ner_metrics(gold, gold, scheme)["f1"] == 1.0, scheme
        assert ner_metrics(gold, half, scheme)["f1"] == pytest.approx(0.4), scheme
        assert entity_counts(gold, half, scheme).sum(0).tolist() == [1, 2, 3], scheme
    adjacent = [["I-PER", "E-PER", "E-PER", "O"]]  # IOE2: two persons side by side
    assert entity_counts(adjacent, adjacent, "IOB2").sum(0).tolist() == [2, 2, 2]
    rows = TaskRows(train=[], select=[{"ner_tags": gold[0]}], evaluation={"dev": [{"ner_tags": gold[1]}]})
    assert scheme_checked(rows, "token-classification", "IOB2") is rows  # every entity opens with I-: IOE's way
    ioe1 = [["I-PER", "I-PER", "O", "I-LOC"], ["I-PER", "E-PER", "I-PER"]]  # E- only between two of one type
    rows = TaskRows(train=[], select=[{"ner_tags": ioe1[0]}], evaluation={"dev": [{"ner_tags": ioe1[1]}]})
    with pytest.raises(ConfigError, match=r"3 of the 4 entities .* close with I- .* IOE1 tags.* task.iob_scheme=IOB1"):
        scheme_checked(rows, "token-classification", "IOB2")
    assert ner_metrics(ioe1, ioe1, "IOB1")["f1"] == 1.0 and entity_counts(ioe1, ioe1, "IOB1").sum(0)[0] == 4


def test_a_token_number_column_is_not_read_as_the_words(tmp_path):
    """GermEval 2014 (index, word, outer tag, nested tag) was read with "1 2 3 ..." as the words and the nested
    entities, nearly all O, as the tags, without a word. A first column numbering every sentence's tokens 1..n is
    refused, naming the layout and the fix; numbers that are words (years, counts) are read."""
    for reader in (load_conll, rows_of):
        for text in (GERMEVAL, GERMEVAL.split("\n\n")[0]):  # its first sentence alone, too
            with pytest.raises(TaskDataError, match=r"NER-de-train\.tsv: .*token numbers.*word.* first column"):
                reader(write(tmp_path, text, "NER-de-train.tsv"))
    years = write(tmp_path, "1 O\n2 O\n\n1996 O\nwas O\n\nin O\n1 O\n", "years.conll")
    assert [r["tokens"] for r in rows_of(years)] == [["1", "2"], ["1996", "was"], ["in", "1"]]
    assert [r["tokens"] for r in load_conll(years)] == [["1", "2"], ["1996", "was"], ["in", "1"]]
