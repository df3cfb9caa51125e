"""A given tokenizer (data.tokenizer.path) as prepare saves it (pipelines/prepare._prepare_tokenizer): the folder
must load in transformers as the tokenizer pretraining used, whatever the folder held and the config says."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer, normalizers
from transformers import AutoTokenizer

from bert_core.config import ConfigError
from bert_core.tokenizer import check_tokenizer_folder, load_tokenizer, save_tokenizer, tokenizer_hash
from pipelines.config import DataConfig, TokenizerConfig
from pipelines.prepare import _given_tokenizer, _prepare_tokenizer

# Google's cased_L-12_H-768_A-12 in small: a bare vocab.txt, its special tokens where BERT's are.
VOCAB = (["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
         + ["Paris", "paris", "is", "The", "the", "capital", ".", "##s", "P", "p", "北", "京", "Café", "cafe"])


def prepared(tmp_path, **tokenizer) -> tuple[Tokenizer, AutoTokenizer]:
    """The tokenizer prepare uses and the one transformers loads from the folder it saves."""
    out = tmp_path / "prepared"
    cfg = DataConfig(sources=["x"], tokenizer=TokenizerConfig(**tokenizer))
    tok = _prepare_tokenizer([], cfg, None, out, _given_tokenizer(cfg.tokenizer))  # as prepare() hands it on
    return tok, AutoTokenizer.from_pretrained(str(out))


@pytest.fixture
def bare(tmp_path):
    folder = tmp_path / "cased_L-12"
    folder.mkdir()
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    return folder


def _with_normalizer(bare, tmp_path, name: str, normalizer) -> str:
    """A folder holding only a tokenizer.json: the vocabulary with `normalizer`."""
    tok = load_tokenizer(bare, lowercase=True)
    tok.normalizer = normalizer
    folder = tmp_path / name
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    return str(folder)


def test_a_bare_vocab_takes_the_configs_case(bare, tmp_path):
    """data.tokenizer.lowercase was not passed for a bare vocab.txt: Google's cased vocabulary was lowercased, its
    capitalised words [UNK] or split. Set, it is used (unset: test_a_cased_bare_vocab_with_no_case_set_is_refused).
    The prepared folder says so, and the two settings name two prepared sets."""
    tok, hf = prepared(tmp_path, path=str(bare), lowercase=False)
    assert tok.encode("The Paris", add_special_tokens=False).tokens == hf.tokenize("The Paris") == ["The", "Paris"]
    assert json.loads((tmp_path / "prepared" / "tokenizer_config.json").read_text())["do_lower_case"] is False
    for text in ["The capital is Paris.", "Café cafe\u0301 北京", "PARIS"]:
        assert tok.encode(text).ids == hf(text)["input_ids"]
    uncased = _given_tokenizer(TokenizerConfig(path=str(bare), lowercase=True))
    assert uncased.encode("The Paris", add_special_tokens=False).tokens == ["the", "paris"]
    assert tokenizer_hash(uncased) != tokenizer_hash(tok)
    kept = _given_tokenizer(TokenizerConfig(path=str(bare), lowercase=True, strip_accents=False))
    assert kept.encode("Café").ids != uncased.encode("Café").ids  # accents kept: [UNK], not "cafe"


def test_a_cased_bare_vocab_with_no_case_set_is_refused(bare, tmp_path):
    """A bare vocab.txt with data.tokenizer.lowercase unset is read as uncased BERT (as transformers reads it): a cased
    one (Google's cased_L-12_H-768_A-12, ~25% of its tokens capitalised) lost the text's case and accents and never
    produced those tokens, silently. It is refused, naming the count; an uncased one with a stray capital symbol
    (bert-base-uncased's "ℝ") is read as before, and so is a cased one whose tokenizer_config.json states its case."""
    with pytest.raises(ConfigError, match=r"tokenizer at .*cased_L-12: its vocab\.txt states no case .* 4 of its 118 "
                                          r"tokens hold capitals .*: set data\.tokenizer\.lowercase=false to keep its "
                                          r"case, or data\.tokenizer\.lowercase=true"):
        _given_tokenizer(TokenizerConfig(path=str(bare)))
    with pytest.raises(ConfigError, match=r"4 of its 118 tokens"):  # named as a file too
        _given_tokenizer(TokenizerConfig(path=str(bare / "vocab.txt")))
    with pytest.raises(ConfigError, match=r'write a tokenizer_config\.json beside it with "do_lower_case": false'):
        check_tokenizer_folder(bare)  # the fine-tuning loader's call: no data.tokenizer setting there
    uncased = tmp_path / "uncased"
    uncased.mkdir()
    (uncased / "vocab.txt").write_text("".join(t + "\n" for t in dict.fromkeys(t if t.startswith("[") else t.lower()
                                                                          for t in VOCAB + ["ℝ"])))
    assert _given_tokenizer(TokenizerConfig(path=str(uncased))).encode("The Paris").tokens == [
        "[CLS]", "the", "paris", "[SEP]"]
    (bare / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert _given_tokenizer(TokenizerConfig(path=str(bare))).encode("The Paris", add_special_tokens=False).tokens == [
        "The", "Paris"]


def test_a_vocab_txt_that_differs_from_its_tokenizer_json_is_refused_naming_the_line(bare, tmp_path):
    """tokenizer.json wins over the vocab.txt beside it, here and in transformers: a vocab.txt whose [unusedN] lines
    were edited into domain words was silently ignored, and the prepared copy's vocab.txt written back from
    tokenizer.json. The first differing line is named, and how to fix it."""
    folder = tmp_path / "edited"
    save_tokenizer(load_tokenizer(bare, lowercase=False), folder)
    _given_tokenizer(TokenizerConfig(path=str(folder)))  # as saved: the same vocabulary
    lines = (folder / "vocab.txt").read_text().split("\n")
    lines[2] = "covidxyz"  # [unused1]
    (folder / "vocab.txt").write_text("\n".join(lines))
    assert 2 not in AutoTokenizer.from_pretrained(str(folder))("covidxyz")["input_ids"]  # transformers ignores it too
    with pytest.raises(ConfigError, match=r"tokenizer at .*edited: its vocab\.txt and tokenizer\.json hold different "
                                          r"vocabularies, first at vocab\.txt line 3: 'covidxyz', where "
                                          r"tokenizer\.json gives id 2 to '\[unused1\]'; tokenizer\.json wins, here "
                                          r"and in transformers.*: delete tokenizer\.json to use vocab\.txt"):
        _given_tokenizer(TokenizerConfig(path=str(folder)))
    (folder / "vocab.txt").write_text("\n".join(lines[:2] + ["[unused1]"] + lines[3:]).rstrip("\n") + "\nextra\n")
    with pytest.raises(ConfigError, match=r"line 119: 'extra', where tokenizer\.json gives id 118 to no token"):
        check_tokenizer_folder(folder)
    (folder / "tokenizer.json").unlink()  # the fix named: the edited vocab.txt is used
    assert _given_tokenizer(TokenizerConfig(path=str(folder))).token_to_id("extra") == 118


def test_tokens_added_to_a_tokenizer_are_no_difference_from_its_vocab_txt(bare, tmp_path):
    """tokenizer.add_tokens, saved: the added tokens are in tokenizer.json alone (its added_tokens), never in the
    vocab.txt transformers 4 wrote beside it from the model's vocabulary; such a folder is the same vocabulary."""
    folder = tmp_path / "added"
    folder.mkdir()
    tok = load_tokenizer(bare, lowercase=False)
    tok.add_tokens(["covidxyz", "mrna"])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    check_tokenizer_folder(folder)
    assert _given_tokenizer(TokenizerConfig(path=str(folder))).token_to_id("covidxyz") == len(VOCAB)


def test_a_setting_that_contradicts_the_tokenizer_is_refused_naming_both(bare, tmp_path):
    """A tokenizer that states its case (tokenizer_config.json next to vocab.txt, tokenizer.json's normalizer) keeps
    it; a data.tokenizer setting that says otherwise is refused rather than silently dropped or applied."""
    (bare / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.lowercase=True contradicts the tokenizer at "
                                          r"data\.tokenizer\.path=.*cased_L-12, which states lowercase=False, "
                                          r"strip_accents=None"):
        _given_tokenizer(TokenizerConfig(path=str(bare), lowercase=True))
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.strip_accents=True contradicts"):
        _given_tokenizer(TokenizerConfig(path=str(bare), strip_accents=True))
    tok, hf = prepared(tmp_path, path=str(bare), lowercase=False, strip_accents=False)  # agreeing: fine
    assert tok.encode("The Paris").ids == hf("The Paris")["input_ids"]
    uncased = _with_normalizer(bare, tmp_path, "uncased", normalizers.BertNormalizer(lowercase=True))
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.lowercase=False contradicts .*uncased, which states "
                                          r"lowercase=True"):
        _given_tokenizer(TokenizerConfig(path=uncased, lowercase=False))


def test_a_normalizer_transformers_would_rebuild_differently_is_refused_or_kept_faithfully(bare, tmp_path):
    """transformers rebuilds a BertNormalizer from tokenizer_config.json, whose tokenize_chinese_chars was always
    written true: a tokenizer.json without Chinese-character splitting is now saved as it is; one whose normalizer no
    flag can say (NFD, Lowercase, StripAccents: no clean_text, no CJK splitting) is refused, naming the change."""
    no_chinese = _with_normalizer(bare, tmp_path, "no_chinese", normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=False, strip_accents=None, lowercase=True))
    tok, hf = prepared(tmp_path, path=no_chinese)
    assert json.loads((tmp_path / "prepared" / "tokenizer_config.json").read_text())["tokenize_chinese_chars"] is False
    for text in ["北京 is the capital", "北京", "Café Zürich ÅNGSTRÖM"]:
        assert tok.encode(text).ids == hf(text)["input_ids"]
    sequence = _with_normalizer(bare, tmp_path, "sequence", normalizers.Sequence(
        [normalizers.NFD(), normalizers.Lowercase(), normalizers.StripAccents()]))
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.path=.*sequence: transformers rebuilds .* normalizer "
                                          r"Sequence\(NFD, Lowercase, StripAccents\) becomes BertNormalizer"):
        _prepare_tokenizer([], DataConfig(sources=["x"]), None, tmp_path / "refused",
                           _given_tokenizer(TokenizerConfig(path=sequence)))
    assert not (tmp_path / "refused").exists()


def test_a_vocab_that_repeats_a_token_is_refused_before_the_corpus_is_read(tmp_path):
    """A repeated vocab.txt line leaves its first id unused (transformers reads the later line); the prepared copy
    cannot be written, and it was refused there, after the whole corpus was read, without saying why."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "hello", "##s"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.path=.*: tokenizer ids are not contiguous from 0: no "
                                          r"token has id 5 .*line 6"):
        _given_tokenizer(TokenizerConfig(path=str(tmp_path)))


def test_a_folder_this_project_writes_from_a_given_tokenizer_is_read_as_it_was_trained(bare, tmp_path):
    """The checks are for a tokenizer as first given (prepare, fine-tuning's init: check_init), read as transformers
    reads it: save_tokenizer writes tokens added to a tokenizer.json into vocab.txt (vocab_in_id_order), and a
    vocab.txt that repeats a line leaves its first id unused in both files; neither is a different vocabulary (each
    was refused, and a release or fine-tuned model of such a tokenizer with it, as 'an edit of it is lost'). A model
    fine-tuned from a bare cased vocab.txt (before the refusal) still loads for prediction, read uncased as trained."""
    from jobs.finetune import check_init
    from pipelines.tasks.common import load_tokenizer as load_task_tokenizer

    added = load_tokenizer(bare, lowercase=False)
    added.add_tokens(["covidxyz"])
    save_tokenizer(added, tmp_path / "added")
    assert (tmp_path / "added" / "vocab.txt").read_text().split("\n")[-2] == "covidxyz"
    check_tokenizer_folder(tmp_path / "added")
    repeated = tmp_path / "repeated"
    repeated.mkdir()
    (repeated / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB + ["Paris"]))  # "Paris" twice
    load_tokenizer(repeated, lowercase=False).save(str(repeated / "tokenizer.json"))
    check_tokenizer_folder(repeated)
    (repeated / "vocab.txt").write_bytes(b"[PAD]\n\xe9t\xe9\n")
    with pytest.raises(ConfigError, match=r"repeated/vocab\.txt: not UTF-8"):
        check_tokenizer_folder(repeated)
    (repeated / "vocab.txt").write_text("[PAD]\n")
    (repeated / "tokenizer.json").write_text('{"model": {"type": "WordPiece"}}')
    with pytest.raises(ConfigError, match=r"its tokenizer\.json does not load"):
        check_tokenizer_folder(repeated)
    assert load_task_tokenizer(str(bare))("The Paris")["input_ids"]  # a fine-tuned model's folder: loads, uncased
    (bare / "config.json").write_text(json.dumps({"max_position_embeddings": 512}))
    with pytest.raises(ConfigError, match=r"its vocab\.txt states no case"):  # as fine-tuning's init: refused
        check_init(128, str(bare), bare)


# Hindi, Thai and Japanese whose marks are letters; Vietnamese, French, Greek and Russian whose accents uncased BERT
# strips (their letters decompose to an ASCII letter and a mark, but Greek's and Cyrillic's: "ά", "й")
MARKED = ["नमस्ते दुनिया, हिन्दी भाषा बोली जाती है।", "ประเทศไทยมีชื่ออย่างเป็นทางการ", "ガスとカス、バスとハス、パンとハン"]
ACCENTED = ["Tiếng Việt có dấu rất nhiều.", "Élève, café, façade et naïveté à côté.", "Ελληνικά: άέήίόύώ.",
            "Йошкар-Ола, йогурт, май.", "Ǿresund, Ǿre."]  # the last a letter beyond ASCII: Ø with a mark


def test_marks_that_stripping_accents_deletes_are_counted_by_script_not_latin_accents():
    from pipelines.tokenizer_sample import stripped_marks
    marks, letters = stripped_marks(MARKED + ACCENTED)
    assert set(marks) == {"DEVANAGARI", "THAI", "KATAKANA"} and marks["KATAKANA"] == 3  # ガ, バ, パ
    assert stripped_marks(ACCENTED * 100)[0] == {}
    assert stripped_marks(MARKED, max_chars=len(MARKED[0]))[0].keys() == {"DEVANAGARI"}  # the first chars only
    assert stripped_marks(["नमस्ते" * 9], max_chars=3) == ({}, 3)  # "नमस", before the virama


VIETNAMESE = ["Hà Nội là thủ đô của nước Cộng hòa Xã hội chủ nghĩa Việt Nam.", "Người ta nói: ma, má, mà, mả, mã, mạ."]


def test_vietnamese_tone_marks_are_counted_though_its_letters_are_latin():
    """Uncased BERT's stripping made one token of ma, má, mà, mả, mã, mạ (six words) and said nothing: Latin letters'
    accents are what it means to strip. Vietnamese alone writes a hook above (ả) or a horn (ư, ơ) on them."""
    from pipelines.tokenizer_sample import stripped_marks, stripped_marks_warning

    marks, _ = stripped_marks(VIETNAMESE)
    assert set(marks) == {"VIETNAMESE"} and marks["VIETNAMESE"] == 8  # thủ, của, chủ, nước (2), Người (2), mả
    assert "Vietnamese" in stripped_marks_warning(VIETNAMESE * 50, TokenizerConfig())
    assert stripped_marks_warning(VIETNAMESE * 50, TokenizerConfig(strip_accents=False)) is None


@pytest.mark.parametrize("settings, warned", [
    ({}, True), ({"strip_accents": True, "lowercase": False}, True),  # uncased BERT's default; stripping as set
    ({"strip_accents": False}, False), ({"lowercase": False}, False),  # marks kept: nothing to say
])
def test_a_tokenizer_to_train_that_would_delete_a_scripts_marks_is_warned_of(settings, warned):
    """An uncased tokenizer trained on Hindi learned "नमसत" for "नमस्ते" and said nothing (a corpus review)."""
    from pipelines.tokenizer_sample import stripped_marks_warning
    said = stripped_marks_warning(MARKED * 20, TokenizerConfig(**settings)) or ""
    assert ("strip_accents: false" in said and "Devanagari" in said) is warned
    assert not stripped_marks_warning(ACCENTED * 500 + MARKED, TokenizerConfig())  # a few marks in much Latin text


# Thai writes a space between clauses, none between words: runs past WordPiece's 100 characters
THAI = ["กรุงเทพมหานครเป็นเมืองหลวงและนครที่มีประชากรมากที่สุดของประเทศไทยเป็นศูนย์กลางการปกครองการศึกษาการคมนาคม"
        "ขนส่งการเงินการธนาคาร", "ตั้งอยู่บนสามเหลี่ยมปากแม่น้ำเจ้าพระยา", "อาหารไทยมีชื่อเสียงไปทั่วโลก"]


def test_a_sample_whose_pieces_are_mostly_unknown_is_warned_of_naming_the_long_words():
    """A Thai corpus trained a tokenizer that made one [UNK] of every clause past 100 characters, 42% of its pieces,
    and prepare said nothing (a corpus review); English text under the same check is not warned of."""
    import random

    from bert_core.tokenizer import train_wordpiece
    from pipelines.tokenizer_sample import unknown_pieces, unknown_pieces_warning

    rng = random.Random(0)
    thai = [" ".join(rng.choice(THAI) for _ in range(30)) for _ in range(100)]
    tok = train_wordpiece(thai, 1000, lowercase=False, strip_accents=False)
    pieces, unknown, long, chars = unknown_pieces(tok, thai)
    assert unknown == long > 0.2 * pieces and chars == sum(map(len, thai))
    assert unknown_pieces(tok, thai, max_chars=len(THAI[1]))[1:3] == (0, 0)  # the first characters only
    assert "word segmenter" in unknown_pieces_warning(tok, thai)
    english = [" ".join(rng.choice(ACCENTED[1:2] + ["A plain sentence of words."]) for _ in range(30))] * 50
    assert unknown_pieces_warning(train_wordpiece(english, 500), english) is None
