"""A train row whose input the model sees as an evaluation row's leaves train (pipelines/tasks/roles.leak_keys): the
same text in other case or accents (an uncased tokenizer, the default, reads them alike), a sentence pair reversed
(QQP, MRPC and STS-B are symmetric), the same words as BERT's basic tokenizer splits them (punctuation spaced
apart, zero-width or control characters, spaces around CJK characters), and exact duplicates as before; the carve's
groups and digests are unchanged."""

import random

from tokenizers import normalizers, pre_tokenizers

from pipelines.tasks.roles import _basic, assign_roles, carve, group_key, leak_keys, split_digest


def rows():
    """A fixed input: single sentences and pairs (the pairs decide the groups: a pair's first sentence)."""
    return [{"id": str(i), "text_a": f"Review {i}: a film about {i % 7} people",
             "text_b": f"Question {i % 11}?" if i % 2 else None, "label": str(i % 2)} for i in range(80)]


def test_case_and_accent_variants_and_reversed_pairs_leave_train_as_exact_duplicates_do():
    train = [*rows(), {"id": "c", "text_a": "great MOVIE!   cafe", "text_b": None, "label": "1"},
             {"id": "p", "text_a": "Is it raining?", "text_b": "Will it rain today?", "label": "1"},
             {"id": "x", "text_a": "an exact  copy", "text_b": None, "label": "0"}]
    dev = [{"id": "d1", "text_a": "Great movie! Café", "text_b": None, "label": "1"},
           {"id": "d2", "text_a": "Will it rain today?", "text_b": "Is it raining?", "label": "1"},
           {"id": "d3", "text_a": "an exact copy", "text_b": None, "label": "0"}]
    split = assign_roles(train, {"dev": dev}, "classification", 0.2, 20)
    assert split.dropped["train_in_evaluation"] == 3
    kept = {r["id"] for r in split.train + split.select}
    assert not kept & {"c", "p", "x"} and len(kept) == 80
    # keys are added, never replaced: a pair's forward key differs from its reversal's; a single sentence has no other
    assert len(leak_keys(train[-2], "classification")) == 5 and len(leak_keys(train[-1], "classification")) == 3
    assert not leak_keys({"tokens": ["Paris", "is", "big"]}, "token-classification") & leak_keys(
        {"tokens": ["big", "is", "Paris"]}, "token-classification")  # words reversed are another sentence
    assert leak_keys({"tokens": ["PARIS", "is"]}, "token-classification") & leak_keys(
        {"tokens": ["Päris", "is"]}, "token-classification")


def test_the_carve_and_its_digests_are_those_of_the_content_keys_alone():
    """The same fixed input carves to the digests it gave before leak_keys took more keys (HEAD 8a294e4): the carve's
    groups, resubmission checks and the digests stored with earlier runs' versions stay valid."""
    data = rows()
    train, select = carve(data, group_key(data, "classification"), 0.2, 20)
    assert (len(train), len(select)) == (69, 11)
    assert split_digest(train) == "8b14dbc4667ea32fb7d068f6bab269ce9e4ff48cece8131bf2853228e2a00f57"
    assert split_digest(select) == "f3a08878bd79f47eff342d0a9ea66adfeab8d5accf98488b166c29c38b3954ca"
    dev = {"dev": [{"id": "d0", "text_a": "Review 3: a film about 3 people", "text_b": "Question 3?", "label": "1"}]}
    split = assign_roles(data, dev, "classification", 0.2, 20)
    assert split.dropped == {"train_in_evaluation": 1, "select_in_evaluation": 0, "select_in_train": 0}
    assert split_digest(split.train) == "b0c25ecfbed9557984226f93f757c3f84347361456d2f1bfcd8df1519bfff46c"
    assert split_digest(split.select) == "f3a08878bd79f47eff342d0a9ea66adfeab8d5accf98488b166c29c38b3954ca"


def test_texts_the_bert_tokenizer_splits_into_the_same_words_leave_train():
    """Rows a user's export wrote apart (punctuation spaced out by a tokenizing script, a zero-width space or a soft
    hyphen from a web page, CJK with and without spaces, a dash spaced apart, a stray control character) are one model
    input: BERT's tokenizer gives them the same ids. The content and folded keys miss every one."""
    pairs = [("Great movie!It's fun.", "great movie ! it 's fun ."),
             ("zero\u200bwidth soft\u00adhyphen", "zerowidth softhyphen"), ("我爱北京", "我 爱 北 京"),
             ("naïve café—ok", "naive cafe — ok"), ("bell\x07 rings", "bell rings"), ("「東京」へ", "「 東 京 」 へ")]
    train = [*rows(), *({"id": f"t{i}", "text_a": a, "text_b": None, "label": "1"} for i, (a, _) in enumerate(pairs)),
             {"id": "p", "text_a": "Is it raining?", "text_b": "Will it rain today?", "label": "1"}]
    dev = [*({"id": f"d{i}", "text_a": b, "text_b": None, "label": "1"} for i, (_, b) in enumerate(pairs)),
           {"id": "dp", "text_a": "will it rain today ?", "text_b": "is it raining ?", "label": "1"}]
    split = assign_roles(train, {"dev": dev}, "classification", 0.2, 20)
    assert split.dropped["train_in_evaluation"] == len(pairs) + 1
    assert {r["id"] for r in split.train + split.select} == {str(i) for i in range(80)}
    assert leak_keys({"tokens": ["Paris,", "France"]}, "token-classification") & leak_keys(
        {"tokens": ["paris", ",", "france"]}, "token-classification")  # CoNLL: the same words, tokenized apart
    assert not leak_keys({"text_a": "a big deal", "text_b": None}, "classification") & leak_keys(
        {"text_a": "a bigdeal", "text_b": None}, "classification")  # words joined are another input


def test_the_basic_words_are_those_of_the_tokenizers_library():
    """_basic is a fast copy of tokenizers' BertNormalizer (uncased) + BertPreTokenizer; on random text from every
    rule's characters (ASCII, controls, Latin, combining marks, Greek, Cyrillic, Arabic, Devanagari, general and CJK
    punctuation, kana, CJK and compatibility ideographs, Hangul, private use, fullwidth forms, beyond the BMP) the two
    give the same words."""
    bert = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)
    words = pre_tokenizers.BertPreTokenizer()
    ranges = [(0, 0x250), (0x300, 0x3FF), (0x400, 0x460), (0x600, 0x61D), (0x61E, 0x660), (0x900, 0x970),
              (0x2000, 0x2070), (0x3000, 0x3100), (0x4E00, 0x4E80), (0xAC00, 0xAC80), (0xE000, 0xE010),
              (0xF900, 0xF980), (0xFF00, 0xFFEF), (0x20000, 0x20010)]  # U+061D: Po only since Unicode 14
    pool = [chr(c) for a, b in ranges for c in range(a, b)] + ["\ufeff", "\ufffd"]
    rng = random.Random(0)
    for n in range(4000):
        text = "".join(rng.choice(pool if n % 2 else pool[:128]) for _ in range(rng.randrange(30)))
        assert _basic(text) == [w for w, _ in words.pre_tokenize_str(bert.normalize_str(text))], repr(text)
