"""The default alphabet's cap by what each character costs the vocabulary, and a given tokenizer folder that is no BERT
WordPiece tokenizer refused as a setting, before any Ray work."""

import random

import pytest
from tokenizers import normalizers

from bert_core.config import ConfigError
from bert_core.tokenizer import covering_alphabet, given_tokenizer, train_wordpiece

HANZI = [chr(0x4E00 + i) for i in range(6000)]


@pytest.fixture(scope="module")
def hanzi_texts():
    rnd = random.Random(0)
    return ["".join(rnd.choice(HANZI) for _ in range(300)) for _ in range(2000)]


def test_a_cjk_corpus_fills_the_default_vocabulary_with_its_ideographs(hanzi_texts):
    """A CJK ideograph is always a word of its own (the normalizer isolates it), so it takes no "##" form: the default
    alphabet was cut at half of vocab_size - 5 as if it did, which left 8192 - 4098 tokens unused and every third
    ideograph [UNK]."""
    tok = train_wordpiece(hanzi_texts, vocab_size=8192)
    vocab = tok.get_vocab()
    assert 5900 < tok.get_vocab_size() <= 8192
    assert not [t for t in vocab if t.startswith("##")]  # what the cap now charges one slot for
    rnd = random.Random(1)
    held_out = ["".join(rnd.choice(HANZI) for _ in range(300)) for _ in range(100)]
    ids = [i for text in held_out for i in tok.encode(text, add_special_tokens=False).ids]
    assert ids.count(tok.token_to_id("[UNK]")) / len(ids) < 0.005


def test_the_cap_charges_a_character_for_its_continuation_form_only_where_it_has_one(hanzi_texts):
    """Below the coverage, the alphabet stops where the characters (and the "##" forms of those that can continue a
    word) fill vocab_size - 5: ideographs one slot each, letters two, punctuation one."""
    bert = normalizers.BertNormalizer()
    assert covering_alphabet(hanzi_texts, 3000, bert) == 3000 - 5
    tok = train_wordpiece(hanzi_texts, vocab_size=3000)
    assert tok.get_vocab_size() == 3000  # the alphabet alone fills it: no merge among isolated ideographs
    rnd = random.Random(0)
    letters = [chr(0x100 + i) for i in range(150)]  # each continues words: "x" and "##x"
    marks = [chr(0x2010 + i) for i in range(8)]  # general punctuation, split off: no "##" form
    words = [" ".join("".join(rnd.choice(letters) for _ in range(5)) + rnd.choice(marks) for _ in range(50))
             for _ in range(200)]
    # 8 marks + 150 letters over 200 - 5 slots: the marks (each more frequent than any letter) take 8, and 93
    # letters the 187 left; charged 2 each, the marks had left room for 89 letters
    assert covering_alphabet(words, 200, normalizers.BertNormalizer(lowercase=False)) == 8 + 93
    assert train_wordpiece(words, vocab_size=200, lowercase=False).get_vocab_size() <= 200


def test_a_latin_corpus_keeps_the_half_cap():
    """Letters all continue words: below ~2,000 tokens a letters-only alphabet is still capped at half of what the
    special tokens leave, as before; at 8192 and above an English corpus's ~1,000 characters never meet the cap."""
    rnd = random.Random(0)
    letters = [chr(0x100 + i) for i in range(150)]
    words = [" ".join("".join(rnd.choice(letters) for _ in range(5)) for _ in range(50)) for _ in range(200)]
    assert covering_alphabet(words, 200, normalizers.BertNormalizer(lowercase=False)) == (200 - 5) // 2


@pytest.mark.parametrize("files, missing", [
    ({}, r"no tokenizer\.json or vocab\.txt"),
    ({"spiece.model": "\x00sentencepiece"}, r"no tokenizer\.json or vocab\.txt"),
    ({"vocab.json": "{}", "merges.txt": "#version: 0.2\n"}, r"no tokenizer\.json or vocab\.txt"),
    ({"tokenizer.json": "{not json"}, r"line 1"),  # the exception tokenizers raises, on its own a traceback
    ({"vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n"}, r"lacks special tokens \['\[MASK\]'\]"),
    ({"vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n<mask>\nhello\n"}, r"lacks special tokens \['\[MASK\]'\]"),
    ({"vocab.txt": "<pad>\n<unk>\n<s>\n</s>\n<mask>\nhello\n"},
     r"lacks special tokens \['\[PAD\]', '\[UNK\]', '\[CLS\]', '\[SEP\]', '\[MASK\]'\]"),
])
def test_a_folder_that_is_no_bert_wordpiece_tokenizer_is_a_config_error(tmp_path, files, missing):
    """An empty folder, a SentencePiece or byte-level BPE one, a tokenizer.json that does not load, a vocabulary without
    one of BERT's five special tokens: a bare FileNotFoundError, ValueError or Exception (a traceback, not the CLI's
    one `error:` line), the missing [MASK] only once a Ray pass had read the corpus again."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=rf"data\.tokenizer\.path={tmp_path}: .*{missing}.* give a BERT WordPiece"):
        given_tokenizer(str(tmp_path))


def test_the_prepare_check_is_the_same(tmp_path):
    from pipelines.config import TokenizerConfig
    from pipelines.prepare import _given_tokenizer

    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n<mask>\nhello\n")
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.path=.*lacks special tokens \['\[MASK\]'\]"):
        _given_tokenizer(TokenizerConfig(path=str(tmp_path)))
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    assert _given_tokenizer(TokenizerConfig(path=str(tmp_path))).token_to_id("[MASK]") == 4
