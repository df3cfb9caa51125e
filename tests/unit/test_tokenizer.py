"""Training, saving and loading our WordPiece tokenizer; transformers must read what we write."""

import json
import os
import random

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from tokenizers import Tokenizer, normalizers, pre_tokenizers  # noqa: E402
from transformers import AutoTokenizer, BertTokenizerFast  # noqa: E402

from bert_core.tokenizer import (SPECIAL_TOKENS, SpecialIds, character_counts, continuation_mask,  # noqa: E402
                                 load_tokenizer, save_tokenizer, tokenizer_hash, train_wordpiece)

STEMS = ["connect", "predict", "transform", "token", "train", "model", "learn", "encode", "mask",
         "sentence", "paragraph", "document", "pretrain", "attend", "embed", "normal", "Café", "Über"]
SUFFIXES = ["", "s", "ed", "ing", "ion", "ions", "able", "ization", "er", "ers"]
FILLER = ["the", "a", "of", "and", "to", "in", "is", "was", "for", "with", "on", "by", "it", "that"]


def corpus(n: int = 400, seed: int = 0) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rnd.choice(FILLER) if rnd.random() < 0.4 else rnd.choice(STEMS) + rnd.choice(SUFFIXES)
                 for _ in range(rnd.randint(5, 20))]
        out.append(" ".join(words).capitalize() + rnd.choice([".", "!", "?", ", 42."]))
    return out


PROBES = ["Transformations were predictable, and the encoders learned quickly!",
          "CAFÉ über-normalization of 1234 documents?", "unseen zebra xylophone 😀", "",
          "short", "two sentences. Here is the second one."]


@pytest.fixture(scope="module")
def trained():
    return train_wordpiece(corpus(), vocab_size=400)


@pytest.fixture(scope="module")
def saved(trained, tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    save_tokenizer(trained, out, model_max_length=128)
    return out


def test_special_tokens_take_ids_0_to_4(trained):
    assert [trained.id_to_token(i) for i in range(5)] == SPECIAL_TOKENS
    assert SpecialIds.from_tokenizer(trained) == SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)


def test_vocab_size_bounded_and_subwords_learned(trained):
    vocab = trained.get_vocab()
    assert len(vocab) <= 400
    assert any(t.startswith("##") for t in vocab)
    # Lowercased and accent-stripped: no uppercase or accented entries.
    assert "cafe" in vocab and "café" not in vocab and not any(t != t.lower() for t in vocab if t not in SPECIAL_TOKENS)


def test_encodes_with_cls_sep_template(trained):
    enc = trained.encode("train the model", "mask it")
    assert enc.ids[0] == 2 and enc.ids.count(3) == 2 and enc.ids[-1] == 3
    first_sep = enc.ids.index(3)
    assert enc.type_ids == [0] * (first_sep + 1) + [1] * (len(enc.ids) - first_sep - 1)


def test_saved_files(saved, trained):
    assert {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} <= set(os.listdir(saved))
    lines = (saved / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert lines == [trained.id_to_token(i) for i in range(trained.get_vocab_size())]
    config = json.loads((saved / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "BertTokenizerFast"
    assert config["do_lower_case"] is True and config["model_max_length"] == 128


@pytest.mark.parametrize("loader", [BertTokenizerFast.from_pretrained, AutoTokenizer.from_pretrained])
def test_transformers_loads_saved_tokenizer_with_identical_ids(saved, trained, loader):
    hf = loader(str(saved))
    assert hf.model_max_length == 128
    assert (hf.pad_token_id, hf.unk_token_id, hf.cls_token_id, hf.sep_token_id, hf.mask_token_id) == (0, 1, 2, 3, 4)
    for text in PROBES:
        assert hf(text)["input_ids"] == trained.encode(text).ids
    pair = hf("train the model", "mask it")
    enc = trained.encode("train the model", "mask it")
    assert pair["input_ids"] == enc.ids and pair["token_type_ids"] == enc.type_ids


def test_load_round_trip_from_json_and_from_vocab_only(saved, trained, tmp_path):
    from_json = load_tokenizer(saved)
    (tmp_path / "vocab.txt").write_bytes((saved / "vocab.txt").read_bytes())
    from_vocab = load_tokenizer(tmp_path / "vocab.txt")
    for text in PROBES:
        assert from_json.encode(text).ids == from_vocab.encode(text).ids == trained.encode(text).ids
    assert tokenizer_hash(saved) == tokenizer_hash(tmp_path) == tokenizer_hash(trained)


def test_a_tokenizer_json_without_its_specials_registered_reads_a_literal_mask_as_transformers_does(saved, tmp_path):
    """A tokenizer.json whose added_tokens lack [MASK] & co. (an edited or hand-built one) split "[MASK]" into
    "[", "mask", "]", while transformers (which registers them) gave the vocab's id: other ids for one text."""
    spec = json.loads((saved / "tokenizer.json").read_text())
    spec["added_tokens"] = []
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    text = "train [MASK] the [SEP] model"
    assert load_tokenizer(tmp_path).encode(text).ids == load_tokenizer(saved).encode(text).ids
    assert load_tokenizer(saved).encode(text).ids.count(load_tokenizer(saved).token_to_id("[MASK]")) == 1
    spec = json.loads((saved / "tokenizer.json").read_text())  # a declared one keeps its flags (lstrip: its offsets)
    for token in spec["added_tokens"]:
        token["lstrip"] = token["lstrip"] or token["content"] == "[MASK]"
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    as_declared = Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text).offsets
    assert load_tokenizer(tmp_path).encode(text).offsets == as_declared


def test_vocab_only_load_honours_do_lower_case(saved, tmp_path):
    (tmp_path / "vocab.txt").write_bytes((saved / "vocab.txt").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    cased = load_tokenizer(tmp_path)
    uncased = load_tokenizer(saved)
    assert uncased.encode("TRAIN").ids == uncased.encode("train").ids
    assert cased.encode("TRAIN").ids != cased.encode("train").ids
    assert load_tokenizer(tmp_path, lowercase=True).encode("TRAIN").ids == uncased.encode("train").ids


def test_hash_is_stable_and_sensitive(saved, tmp_path):
    h = tokenizer_hash(saved)
    assert h == tokenizer_hash(saved) == tokenizer_hash(load_tokenizer(saved))
    vocab = (saved / "vocab.txt").read_text(encoding="utf-8")
    cased, grown = tmp_path / "cased", tmp_path / "grown"
    for d, text, lower in ((cased, vocab, False), (grown, vocab + "zebra\n", True)):
        d.mkdir()
        (d / "vocab.txt").write_text(text, encoding="utf-8")
        (d / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lower}))
    assert tokenizer_hash(cased) != h  # same vocabulary, different normalizer
    assert tokenizer_hash(grown) != h  # one more token


def test_training_twice_gives_the_same_files(tmp_path):
    """tokenizers' trainer alone numbered "##" forms and kept tied rare characters in hash-map order, and the ids
    broke ties between merges: three trainings on these texts gave three vocabularies (tokens, not only ids). A
    prepared set named by its config held another tokenizer each time it was made."""
    texts = corpus() + ["zq xj vk ~ zq"] * 2  # z, q, x, j, v, k tie at the alphabet's limit
    dirs = []
    for i in range(3):
        dirs.append(save_tokenizer(train_wordpiece(texts, vocab_size=400, limit_alphabet=30), tmp_path / str(i)))
    assert len({tokenizer_hash(d) for d in dirs}) == 1
    assert len({(d / "tokenizer.json").read_bytes() for d in dirs}) == 1


def test_the_order_of_the_texts_does_not_choose_among_equally_rare_characters():
    """Where the alphabet's limit falls among characters of one count, the kept ones are the first by code point,
    not the first met: the same documents read in another order (other shards, other workers) give one vocabulary."""
    texts = corpus() + ["qx zq", "qj zq", "qv zq", "q~ zq"]  # x, j, v and ~ occur once each, in separate texts
    seen = character_counts(texts, normalizers.BertNormalizer()).values()
    limit = sum(n > 1 for n in seen) + 2  # every character met twice or more, and two of the four met once
    forward = train_wordpiece(texts, vocab_size=400, limit_alphabet=limit).get_vocab()
    assert train_wordpiece(texts[::-1], vocab_size=400, limit_alphabet=limit).get_vocab() == forward
    assert {"j", "v"} <= set(forward) and not {"x", "~"} & set(forward)


def test_every_character_that_can_continue_a_word_has_its_hash_form(trained):
    """As in Google's vocabularies: each character of the alphabet has its "##" form (none for punctuation, which
    the pre-tokenizer always splits off); ids are the special tokens, the characters, their "##" forms, then the
    merges in the order learned."""
    vocab = trained.get_vocab()
    tokens = sorted(vocab, key=vocab.__getitem__)
    chars = [t for t in tokens if len(t) == 1]
    assert "e" in chars and "!" in chars and "4" in chars
    continued = [t for t in tokens if t.startswith("##") and len(t) == 3]
    assert continued == [f"##{c}" for c in chars if c.isalnum()]
    n = len(SPECIAL_TOKENS)
    assert tokens[:n] == SPECIAL_TOKENS and tokens[n:n + len(chars)] == chars
    assert tokens[n + len(chars):n + len(chars) + len(continued)] == continued  # "!", "?", "," and "." have none
    assert len(continued) == len(chars) - 4 and len(tokens) > n + len(chars) + len(continued)  # merges learned


def test_continuation_mask_marks_exactly_hash_pieces(trained):
    mask = continuation_mask(trained)
    assert mask.shape == (trained.get_vocab_size(),) and mask.dtype == np.bool_
    for i in range(trained.get_vocab_size()):
        assert mask[i] == trained.id_to_token(i).startswith("##")
    assert not mask[:5].any()


def test_missing_special_token_is_an_error(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        SpecialIds.from_tokenizer(load_tokenizer(tmp_path))


def test_load_missing_path_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path)


def test_alphabet_has_room_for_a_cjk_corpus():
    """3,000 distinct Hanzi: a fixed 1,000-character alphabet made 2/3 of the tokens [UNK]. The default keeps the
    characters covering 99.95% of the sample's; a limit that is set is kept."""
    rnd = random.Random(0)
    chars = [chr(0x4E00 + i) for i in range(3000)]
    texts = ["".join(rnd.choice(chars) for _ in range(200)) for _ in range(2000)]
    tok = train_wordpiece(texts, vocab_size=30522)
    assert sum(tok.token_to_id(c) is not None for c in chars) >= 2990
    tokens = [t for text in texts[:50] for t in tok.encode(text, add_special_tokens=False).tokens]
    assert tokens.count("[UNK]") / len(tokens) < 0.001
    small = train_wordpiece(texts, vocab_size=30522, limit_alphabet=500)
    assert sum(small.token_to_id(c) is not None for c in chars) == 500


def test_the_default_alphabet_covers_the_sample_within_bounds():
    """An English sample's rare symbols stay out (1000, HF's and Google's size); a CJK sample keeps its thousands, one
    token each (no "##" form: the normalizer isolates ideographs), up to what the 5 special tokens leave."""
    from bert_core.tokenizer import MIN_ALPHABET, covering_alphabet

    rnd = random.Random(0)
    english = ["the cat sat on the mat and looked at the dog " * 60 + chr(0x2600 + i) for i in range(3000)]
    assert covering_alphabet(english, 30522) == MIN_ALPHABET
    hanzi = ["".join(chr(0x4E00 + rnd.randrange(6000)) for _ in range(300)) for _ in range(2000)]
    assert 5000 < covering_alphabet(hanzi, 30522) <= 6000
    assert covering_alphabet(hanzi, 8192, normalizers.BertNormalizer()) == covering_alphabet(hanzi, 30522)


NON_LATIN = ["がぎぐ パンダ", "हिन्दी", "tiếng việt", "ภาษาไทย"]


def test_strip_accents_false_keeps_marks_outside_latin(tmp_path):
    """Lowercasing strips accents by default (uncased BERT), which deletes letters of other scripts."""
    texts = [" ".join(NON_LATIN + ["Café"])] * 5
    assert train_wordpiece(texts, 500).normalizer.normalize_str("がぎぐ パンダ") == "かきく ハンタ"
    tok = train_wordpiece(texts, 500, strip_accents=False)
    assert [tok.normalizer.normalize_str(t) for t in NON_LATIN + ["Café"]] == NON_LATIN + ["café"]
    save_tokenizer(tok, tmp_path / "tok")
    (tmp_path / "vocab").mkdir()
    for name in ("vocab.txt", "tokenizer_config.json"):
        (tmp_path / "vocab" / name).write_bytes((tmp_path / "tok" / name).read_bytes())
    hf = BertTokenizerFast.from_pretrained(str(tmp_path / "tok"))
    from_vocab = load_tokenizer(tmp_path / "vocab")
    for text in NON_LATIN:
        ids = tok.encode(text).ids
        assert hf(text)["input_ids"] == ids and from_vocab.encode(text).ids == ids
        assert tok.token_to_id("[UNK]") not in ids


def test_vocab_size_holds_below_the_minimum_alphabet():
    """600 Hanzi with vocab_size=200 made 605 tokens: MIN_ALPHABET (1000) outranked the vocabulary. The default
    alphabet now fits (each character and its "##" form beside the special tokens); a limit set too high is refused,
    naming the numbers, never trained past vocab_size."""
    rnd = random.Random(0)
    hanzi = [chr(0x4E00 + i) for i in range(600)]
    texts = ["".join(rnd.choice(hanzi) for _ in range(100)) for _ in range(200)]
    assert train_wordpiece(texts, vocab_size=200).get_vocab_size() <= 200
    letters = [chr(0x100 + i) for i in range(150)]  # inside words too: each needs "##x" beside "x"
    words = [" ".join("".join(rnd.choice(letters) for _ in range(5)) for _ in range(50)) for _ in range(200)]
    assert train_wordpiece(words, vocab_size=200, lowercase=False).get_vocab_size() <= 200
    with pytest.raises(ValueError, match=r"limit_alphabet=150 .* make 305 tokens, more than vocab_size=200: set "
                                         r"limit_alphabet to 97 or less"):
        train_wordpiece(words, vocab_size=200, lowercase=False, limit_alphabet=150)


def test_an_alphabet_that_outgrows_the_vocabulary_is_a_config_error(capsys):
    """A limit_alphabet the vocabulary cannot hold is a setting to change, known only once the sample's characters are
    (a CJK ideograph needs no "##" form, so no bound holds before): refused as a ConfigError naming the field, which a
    job's command line prints as one `error:` line with exit status 2, not a ValueError traceback after the corpus."""
    from bert_core.config import ConfigError
    from jobs.config.io import cli

    rnd = random.Random(0)
    letters = [chr(0x100 + i) for i in range(150)]
    words = [" ".join("".join(rnd.choice(letters) for _ in range(5)) for _ in range(50)) for _ in range(200)]
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.limit_alphabet=150 "):
        train_wordpiece(words, vocab_size=200, lowercase=False, limit_alphabet=150)
    with pytest.raises(SystemExit) as exited:
        cli(lambda: train_wordpiece(words, vocab_size=200, lowercase=False, limit_alphabet=150))
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith("error: data.tokenizer.limit_alphabet=150 ")


def test_vocab_only_folder_takes_the_settings_given(saved, tmp_path):
    """Google's cased_L-12_H-768_A-12 is a bare vocab.txt: without a setting it is read as uncased (as transformers
    reads it), with one as told; a tokenizer_config.json next to it says tokenize_chinese_chars too."""
    from bert_core.tokenizer import stated_settings

    (tmp_path / "vocab.txt").write_bytes((saved / "vocab.txt").read_bytes())
    assert stated_settings(tmp_path) == {}
    norm = json.loads(load_tokenizer(tmp_path, lowercase=False, strip_accents=False).to_str())["normalizer"]
    assert (norm["lowercase"], norm["strip_accents"]) == (False, False)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False,
                                                                "tokenize_chinese_chars": False}))
    assert stated_settings(tmp_path) == stated_settings(tmp_path / "vocab.txt") == {"lowercase": False,
                                                                                  "strip_accents": None}
    norm = json.loads(load_tokenizer(tmp_path).to_str())["normalizer"]
    assert (norm["lowercase"], norm["handle_chinese_chars"]) == (False, False)
    assert stated_settings(saved) == {"lowercase": True, "strip_accents": None}


def _variant(trained, normalizer):
    tok = Tokenizer.from_str(trained.to_str())
    tok.normalizer = normalizer
    return tok


def test_saved_config_rebuilds_the_same_tokenizer_in_transformers(trained, tmp_path):
    """transformers' BertTokenizer rebuilds the normalizer from tokenizer_config.json's flags: handle_chinese_chars
    is written as it is (it was always true), and a pipeline no flag can say is refused, naming the change."""
    from bert_core.tokenizer import transformers_differences

    no_chinese = _variant(trained, normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                                              strip_accents=None, lowercase=True))
    folder = save_tokenizer(no_chinese, tmp_path / "no_chinese")
    assert json.loads((folder / "tokenizer_config.json").read_text())["tokenize_chinese_chars"] is False
    hf = AutoTokenizer.from_pretrained(str(folder))
    for text in ["北京大学的学生", "Café Zürich ÅNGSTRÖM"] + PROBES:
        assert hf(text)["input_ids"] == no_chinese.encode(text).ids
    sequence = _variant(trained, normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                                       normalizers.StripAccents()]))
    assert transformers_differences(sequence) == [
        "normalizer Sequence(NFD, Lowercase, StripAccents) becomes BertNormalizer(clean_text=True, "
        "handle_chinese_chars=True, strip_accents=None, lowercase=False)"]
    with pytest.raises(ValueError, match=r"transformers would tokenize differently once saved: normalizer Sequence"):
        save_tokenizer(sequence, tmp_path / "sequence")
    assert not (tmp_path / "sequence").exists()
    unclean = _variant(trained, normalizers.BertNormalizer(clean_text=False))
    assert transformers_differences(unclean) == ["BertNormalizer clean_text=False becomes True (control "
                                                 "characters dropped)"]
    split = Tokenizer.from_str(trained.to_str())
    split.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    assert transformers_differences(split) == ["pre-tokenizer WhitespaceSplit becomes BertPreTokenizer"]
    assert transformers_differences(trained) == []
