"""WordPiece tokenizer: train, save, load, and the special-token facts masking needs.

Everything is built from the `tokenizers` library's own BERT parts (BertNormalizer,
BertPreTokenizer, WordPiece model/trainer/decoder); this module only wires them the way
original BERT does and writes the files `transformers` expects, so a saved directory loads
with `BertTokenizerFast.from_pretrained(dir)` / `AutoTokenizer` and gives the same ids.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from tokenizers.trainers import WordPieceTrainer

from bert_core.config import ConfigError

# Trained vocabularies put these at ids 0..4 in this order. Loaded vocabularies may place them
# anywhere (the original uncased vocab has [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103),
# so code must look ids up through SpecialIds, never assume 0..4.
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, UNK, CLS, SEP, MASK = SPECIAL_TOKENS
CONTINUATION_PREFIX = "##"
MAX_INPUT_CHARS_PER_WORD = 100  # longer "words" become a single [UNK], as in original BERT
# The alphabet a trained vocabulary keeps (every other character becomes [UNK]): by default the most frequent
# characters that cover CHARACTER_COVERAGE of the sample's (SentencePiece's default rule), at least MIN_ALPHABET
# (HF BertWordPieceTokenizer's limit_alphabet; Google's English vocab holds 997) and at most what vocab_size holds
# beside the special tokens: the trainer adds every kept character, and its "##" form where it can continue a word,
# before any merge, so a bigger alphabet alone can outgrow vocab_size. An English corpus's stray symbols stay out; a
# CJK corpus keeps its thousands (Chinese BERT: ~21k of 21128 tokens), one token each, since ideographs take no "##".
MIN_ALPHABET = 1000
CHARACTER_COVERAGE = 0.9995


COUNTED_CHARACTERS = 64 << 20  # enough to rank a script's characters; the sample may be gigabytes of books


def alphabet_budget(vocab_size: int) -> int:
    """The most characters a vocabulary of `vocab_size` tokens always has room for: each with its "##" form,
    beside the special tokens."""
    return (vocab_size - len(SPECIAL_TOKENS)) // 2


def character_counts(texts: Iterable[str], normalizer=None) -> collections.Counter:
    """Each character's occurrences in `texts` as `normalizer` leaves them (whitespace aside), over their first
    COUNTED_CHARACTERS."""
    counts, seen = collections.Counter(), 0
    for text in texts:
        text = normalizer.normalize_str(text) if normalizer else text
        counts.update(text[:COUNTED_CHARACTERS - seen])
        seen += len(text)
        if seen >= COUNTED_CHARACTERS:
            break
    for space in [c for c in counts if c.isspace()]:
        del counts[space]
    return counts


def continues_words(char: str, normalizer=None, pre_tokenizer=None) -> bool:
    """Whether `char` can follow another character inside a word, so the vocabulary holds its "##" form too: not one
    BertPreTokenizer always splits off (punctuation, and a CJK ideograph, which BertNormalizer isolates)."""
    text = normalizer.normalize_str("a" + char) if normalizer else "a" + char
    return len((pre_tokenizer or pre_tokenizers.BertPreTokenizer()).pre_tokenize_str(text)) == 1


def covering_alphabet(texts: list[str], vocab_size: int, normalizer=None,
                      counts: collections.Counter | None = None) -> int:
    """How many of the most frequent characters of `texts` (as `normalizer` leaves them; whitespace aside; the
    first COUNTED_CHARACTERS of them; or `counts`, character_counts of them) cover CHARACTER_COVERAGE of their
    occurrences: at least MIN_ALPHABET, at most as many as fill vocab_size beside the special tokens, two tokens for
    a character that continues words (itself and its "##" form) and one for one that does not (continues_words; with
    no normalizer, nothing isolates ideographs). That cap wins below ~2,000 tokens for a Latin-script corpus (half of
    vocab_size - 5); a Chinese corpus keeps up to vocab_size - 5."""
    counts = character_counts(texts, normalizer) if counts is None else counts
    ranked = sorted(counts, key=lambda c: (-counts[c], c))  # train_wordpiece's order: the cap counts what it keeps
    need, covered, k = CHARACTER_COVERAGE * sum(counts.values()), 0, 0
    for k, c in enumerate(ranked, start=1):
        covered += counts[c]
        if covered >= need:
            break
    k, room, pre_tokenizer = max(MIN_ALPHABET, k), vocab_size - len(SPECIAL_TOKENS), pre_tokenizers.BertPreTokenizer()
    for kept, c in enumerate(ranked[:k]):
        room -= 1 + continues_words(c, normalizer, pre_tokenizer)
        if room < 0:
            return kept
    return k


def _normalizer(lowercase: bool, strip_accents: bool | None = None,
                handle_chinese_chars: bool = True) -> normalizers.BertNormalizer:
    # strip_accents=None means "follow lowercase": uncased BERT strips accents, cased keeps them.
    return normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=handle_chinese_chars,
                                      strip_accents=strip_accents, lowercase=lowercase)


def _finish_pipeline(tok: Tokenizer) -> Tokenizer:
    """Post-processor and decoder; needs the vocab, since [CLS]/[SEP] ids come from it."""
    cls_id, sep_id = tok.token_to_id(CLS), tok.token_to_id(SEP)
    if cls_id is None or sep_id is None:
        raise ValueError(f"tokenizer vocabulary lacks special tokens "
                         f"{[t for t in SPECIAL_TOKENS if tok.token_to_id(t) is None]}")
    tok.post_processor = processors.TemplateProcessing(
        single=f"{CLS}:0 $A:0 {SEP}:0",
        pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
        special_tokens=[(CLS, cls_id), (SEP, sep_id)])
    tok.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    # Registering them as special tokens keeps a literal "[MASK]" in text from being split
    # into "[", "mask", "]" (transformers does the same); ids are the vocab's own.
    tok.add_special_tokens([t for t in SPECIAL_TOKENS if tok.token_to_id(t) is not None])
    return tok


def train_wordpiece(texts: Iterable[str], vocab_size: int, lowercase: bool = True, min_frequency: int = 2,
                    strip_accents: bool | None = None, limit_alphabet: int | None = None) -> Tokenizer:
    """Train a BERT WordPiece vocabulary of at most `vocab_size` tokens on `texts`: the same texts and settings give
    the same vocabulary, token for token and id for id.

    strip_accents=None follows `lowercase` (uncased BERT); False keeps combining marks, which are letters in
    scripts beyond Latin (Japanese voicing marks, Devanagari virama, Thai and Vietnamese marks).
    limit_alphabet: characters kept (the most frequent); None = covering_alphabet of `texts`. One set so high that
    the characters and their "##" forms alone outgrow `vocab_size` is refused as a ConfigError naming
    data.tokenizer.limit_alphabet and the numbers: known only from the sample (a CJK ideograph has no "##" form), it
    is still a setting to change, so a job's command line shows it as one `error:` line, not a traceback.

    Reproducible where `tokenizers`' trainer alone is not (<= 0.23, huggingface/tokenizers#1794): it keeps the
    alphabet's rarest characters in hash-map order where counts tie, and numbers each "##" form as it first meets
    it in hash-map order, and those ids break ties between equally frequent merges, so two runs differed in
    tokens, not only in ids. Here the alphabet is chosen before training (by count, ties by code point) and handed
    to the trainer, and every character's "##" form is in the vocabulary from the start, as in Google's BERT
    vocabularies (each of their 997 characters has one), except those BertPreTokenizer always splits off (punctuation,
    and CJK ideographs, which the normalizer isolates): they never follow another character in a word.
    Ids: the special tokens (0..4), the alphabet, the "##" forms, the merges in the order they were learned.
    """
    normalizer, pre_tokenizer = _normalizer(lowercase, strip_accents), pre_tokenizers.BertPreTokenizer()
    texts = texts if isinstance(texts, list) else list(texts)
    counts = character_counts(texts, normalizer)
    if limit_alphabet is None:
        limit_alphabet = covering_alphabet(texts, vocab_size, normalizer, counts)
    alphabet = sorted(sorted(counts, key=lambda c: (-counts[c], c))[:limit_alphabet])
    continued = [CONTINUATION_PREFIX + c for c in alphabet if continues_words(c, normalizer, pre_tokenizer)]
    # The "##" forms enter as the trainer's special tokens (the only way to give it whole tokens before training);
    # the tokenizer is rebuilt below from the trained vocabulary, so they are ordinary vocabulary entries there.
    trainer = WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                               special_tokens=SPECIAL_TOKENS + continued, limit_alphabet=len(alphabet),
                               initial_alphabet=alphabet, continuing_subword_prefix=CONTINUATION_PREFIX,
                               show_progress=False)
    tok = _bert_tokenizer({}, normalizer, pre_tokenizer)
    tok.train_from_iterator(texts, trainer=trainer)
    trained = tok.get_vocab(with_added_tokens=False)
    if len(trained) > vocab_size:
        raise ConfigError(f"data.tokenizer.limit_alphabet={limit_alphabet} characters, with their '##' forms and "
                          f"the {len(SPECIAL_TOKENS)} special tokens, make {len(trained)} tokens, more than "
                          f"vocab_size={vocab_size}: set limit_alphabet to {alphabet_budget(vocab_size)} or less "
                          f"(or null), or raise vocab_size")
    first = set(SPECIAL_TOKENS) | set(continued)
    chars, merged = [], []
    for token in sorted(trained, key=trained.__getitem__):
        if token not in first:
            (chars if len(token) == 1 else merged).append(token)
    order = SPECIAL_TOKENS + chars + continued + merged
    return _finish_pipeline(_bert_tokenizer({t: i for i, t in enumerate(order)}, normalizer, pre_tokenizer))


def _bert_tokenizer(vocab: dict[str, int], normalizer, pre_tokenizer) -> Tokenizer:
    tok = Tokenizer(WordPiece(vocab, unk_token=UNK, continuing_subword_prefix=CONTINUATION_PREFIX,
                              max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
    tok.normalizer, tok.pre_tokenizer = normalizer, pre_tokenizer
    return tok


def vocab_in_id_order(tok: Tokenizer) -> list[str]:
    """The tokens by id; raises where an id holds no token (vocab.txt has none to write on its line)."""
    vocab = tok.get_vocab(with_added_tokens=True)
    tokens = sorted(vocab, key=vocab.__getitem__)
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        gap = next(i for i, t in enumerate(tokens) if vocab[t] != i)
        raise ValueError(f"tokenizer ids are not contiguous from 0: no token has id {gap} (a vocab.txt that repeats a "
                         f"token leaves its first line's id unused, as transformers reads it: line {gap + 1}); "
                         "cannot write vocab.txt")
    return tokens


def _describe(part: dict | None) -> str:
    """A tokenizer.json normalizer or pre-tokenizer by its types: "none", "Sequence(NFD, Lowercase, StripAccents)"."""
    if not part:
        return "none"
    inner = part.get("normalizers") or part.get("pretokenizers")
    return f"{part['type']}({', '.join(_describe(p) for p in inner)})" if inner else part["type"]


def transformers_differences(tok: Tokenizer) -> list[str]:
    """What transformers changes in `tok` when it loads the folder save_tokenizer writes; empty when its ids are the
    same. Its BertTokenizer (AutoTokenizer's class for that folder) ignores tokenizer.json's pipeline and rebuilds
    BertNormalizer(clean_text=True, ...) from tokenizer_config.json's flags, BertPreTokenizer, and WordPiece with
    [UNK], "##" and 100 characters a word, so anything else is lost."""
    spec = json.loads(tok.to_str())
    norm, pre, model = spec["normalizer"] or {}, spec["pre_tokenizer"] or {}, spec["model"]
    found = []
    if norm.get("type") != "BertNormalizer":
        found.append(f"normalizer {_describe(norm)} becomes BertNormalizer(clean_text=True, handle_chinese_chars=True, "
                     f"strip_accents=None, lowercase=False)")
    elif not norm["clean_text"]:
        found.append("BertNormalizer clean_text=False becomes True (control characters dropped)")
    if pre.get("type") != "BertPreTokenizer":
        found.append(f"pre-tokenizer {_describe(pre)} becomes BertPreTokenizer")
    expected = {"type": "WordPiece", "unk_token": UNK, "continuing_subword_prefix": CONTINUATION_PREFIX,
                "max_input_chars_per_word": MAX_INPUT_CHARS_PER_WORD}
    found += [f"model {k}={model.get(k)!r} becomes {v!r}" for k, v in expected.items() if model.get(k) != v]
    return found


def save_tokenizer(tok: Tokenizer, out_dir: str | os.PathLike, model_max_length: int = 512) -> Path:
    """Write vocab.txt, tokenizer.json, tokenizer_config.json and special_tokens_map.json; tokenizer_config.json's
    flags are what transformers rebuilds the normalizer from. A tokenizer it would rebuild differently
    (transformers_differences) is refused: the folder would give other ids in transformers than here."""
    differences = transformers_differences(tok)
    if differences:
        raise ValueError(f"transformers would tokenize differently once saved: {'; '.join(differences)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_text("".join(t + "\n" for t in vocab_in_id_order(tok)), encoding="utf-8")
    tok.save(str(out / "tokenizer.json"))
    specials = dict(pad_token=PAD, unk_token=UNK, cls_token=CLS, sep_token=SEP, mask_token=MASK)
    norm = json.loads(tok.to_str())["normalizer"]
    config = dict(tokenizer_class="BertTokenizerFast", **normalizer_flags(norm), model_max_length=model_max_length,
                  **specials)
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps(specials, indent=2) + "\n")
    return out


def normalizer_flags(norm: dict) -> dict:
    """tokenizer_config.json's flags for a tokenizer.json's BertNormalizer: what transformers rebuilds it from."""
    return {"do_lower_case": norm["lowercase"], "strip_accents": norm["strip_accents"],
            "tokenize_chinese_chars": norm["handle_chinese_chars"]}


def _vocab_lines(vocab_file: Path) -> list[str]:
    # Same reading as transformers' load_vocab: one token per line, id = line number.
    lines = vocab_file.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _read_vocab(vocab_file: Path) -> dict[str, int]:
    return {token: i for i, token in enumerate(_vocab_lines(vocab_file))}


def stated_settings(path: str | os.PathLike) -> dict:
    """The lowercase and strip_accents a tokenizer folder (or file) states itself: its tokenizer.json's
    BertNormalizer's, else those tokenizer_config.json's do_lower_case / strip_accents make transformers use (its
    defaults, True and None, for the one left out); {} for a bare vocab.txt, which says nothing."""
    path = Path(path)
    spec = path if path.suffix == ".json" else path / "tokenizer.json"
    if spec.is_file():
        norm = json.loads(spec.read_text(encoding="utf-8"))["normalizer"] or {}
        return {k: norm[k] for k in ("lowercase", "strip_accents")} if norm.get("type") == "BertNormalizer" else {}
    config = _tokenizer_config(path if path.is_dir() else path.parent)
    if "do_lower_case" not in config and "strip_accents" not in config:
        return {}
    return {"lowercase": config.get("do_lower_case") is not False, "strip_accents": config.get("strip_accents")}


def _tokenizer_config(folder: Path) -> dict:
    config_file = folder / "tokenizer_config.json"
    return json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}


# Above this share of tokens holding a capital, a vocabulary is cased: Google's cased vocabularies hold ~25%, an uncased
# one a few symbols (bert-base-uncased's and MiniLM's: "ℝ" and "##ℝ" of 30522).
CASED_VOCAB_SHARE = 0.01


def cased_tokens(tokens: Iterable[str]) -> int:
    """How many of `tokens` hold an uppercase letter, bracketed special tokens ("[CLS]", "[unused0]") aside."""
    return sum(not (t.startswith("[") and t.endswith("]")) and any(c.isupper() for c in t) for t in tokens)


def check_tokenizer_folder(path: str | os.PathLike, lowercase: bool | None = None, setting: str | None = None) -> None:
    """Refuse (ConfigError) a given tokenizer that loading, here and in transformers, would read silently otherwise
    than its files say:

    - a vocab.txt that differs from the tokenizer.json beside it (its [unusedN] lines edited into domain words):
      load_tokenizer and transformers both read tokenizer.json, so the edit was ignored, and save_tokenizer wrote the
      prepared copy's vocab.txt back from it;
    - a vocab.txt stating no case (no tokenizer.json, no do_lower_case or strip_accents in a tokenizer_config.json:
      stated_settings) whose tokens hold capitals (Google's cased_L-12_H-768_A-12), with `lowercase` None: read as
      uncased BERT, as transformers reads it, its capitalised quarter could never be produced. `setting`: the config
      field that gives `lowercase` (none: the fix named is a tokenizer_config.json's do_lower_case).

    For a tokenizer as it is first given (prepare's data.tokenizer.path, fine-tuning's init), not for the folders this
    project writes from one (a model fine-tuned from a bare vocab.txt before this check stays loadable). A vocab.txt
    that is no UTF-8, or a tokenizer.json that `tokenizers` cannot read, is a ConfigError naming the file.
    """
    path = Path(path)
    if path.is_dir() and (path / "tokenizer.json").is_file():  # what load_tokenizer reads, and transformers
        if (path / "vocab.txt").is_file():
            _check_same_vocabulary(path)
        return
    vocab_file = path / "vocab.txt" if path.is_dir() else path
    if path.suffix == ".json" or not vocab_file.is_file() or lowercase is not None or stated_settings(path):
        return
    tokens = _given_vocab_lines(vocab_file)
    cased = cased_tokens(tokens)
    if cased <= CASED_VOCAB_SHARE * len(tokens):
        return
    fix = (f"set {setting}=false to keep its case, or {setting}=true to lowercase the text anyway" if setting else
           'write a tokenizer_config.json beside it with "do_lower_case": false (or true, to lowercase the text)')
    raise ConfigError(f"tokenizer at {path}: its vocab.txt states no case (no tokenizer.json, no do_lower_case in a "
                      f"tokenizer_config.json) and {cased} of its {len(tokens)} tokens hold capitals (more than "
                      f"{CASED_VOCAB_SHARE:.0%}: a cased vocabulary, as Google's cased_L-12_H-768_A-12); read as "
                      f"uncased BERT, as transformers reads a bare vocab.txt, the text is lowercased and those tokens "
                      f"are never produced: {fix}")


def _given_vocab_lines(vocab_file: Path) -> list[str]:
    try:
        return _vocab_lines(vocab_file)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"tokenizer at {vocab_file}: not UTF-8, as transformers reads a vocab.txt ({exc})") from None


def _check_same_vocabulary(folder: Path) -> None:
    lines = _given_vocab_lines(folder / "vocab.txt")
    try:
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # tokenizers raises a bare Exception: a missing field, no JSON
        raise ConfigError(f"tokenizer at {folder}: its tokenizer.json does not load ({exc})") from None
    # Read as transformers reads vocab.txt (a repeated line: the later id wins, the earlier one unused), the same map
    # as the model's vocabulary, or as it with tokens added since (tokenizer.add_tokens): transformers 4 wrote vocab.txt
    # without them, save_tokenizer writes them in (vocab_in_id_order)
    read = {token: i for i, token in enumerate(lines)}
    if read in (tok.get_vocab(with_added_tokens=False), tok.get_vocab(with_added_tokens=True)):
        return
    vocab = tok.get_vocab(with_added_tokens=False)
    by_id = {i: t for t, i in vocab.items()}
    for i in range(max(len(lines), max(by_id, default=-1) + 1)):
        line, token = lines[i] if i < len(lines) else None, by_id.get(i)
        if line != token:
            break
    else:
        return
    raise ConfigError(
        f"tokenizer at {folder}: its vocab.txt and tokenizer.json hold different vocabularies, first at vocab.txt "
        f"line {i + 1}: {'no line' if line is None else repr(line)}, where tokenizer.json gives id {i} to "
        f"{'no token' if token is None else repr(token)}; tokenizer.json wins, here and in transformers, so the "
        f"vocab.txt is ignored (an edit of it is lost): delete tokenizer.json to use vocab.txt as it is, or "
        f"regenerate tokenizer.json from the edited vocab.txt (or vocab.txt from tokenizer.json)")


def load_tokenizer(path: str | os.PathLike, lowercase: bool | None = None,
                   strip_accents: bool | None = None) -> Tokenizer:
    """Load from a directory (tokenizer.json preferred, else vocab.txt) or a single file.

    With only vocab.txt the BERT pipeline is rebuilt around it as transformers does: `lowercase` and `strip_accents`
    (None: not given) default to tokenizer_config.json's do_lower_case and strip_accents next to it, else to uncased
    BERT's (True; None, which follows lowercase); its tokenize_chinese_chars is kept. A tokenizer.json is used as
    it is, its BERT special tokens registered as such. Truncation and padding stored in a tokenizer.json are
    switched off: callers decide lengths.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer.json" if (path / "tokenizer.json").exists() else path / "vocab.txt"
    if not path.exists():
        raise FileNotFoundError(f"no tokenizer.json or vocab.txt at {path.parent}")
    if path.suffix == ".json":
        tok = Tokenizer.from_file(str(path))
        tok.no_truncation()
        tok.no_padding()
        # as _finish_pipeline and transformers do: a tokenizer.json whose added_tokens lack them split a literal
        # "[MASK]" into "[", "mask", "]", and transformers (which registers them) gave other ids for the same text
        declared = {t.content for t in tok.get_added_tokens_decoder().values()}  # kept as declared (lstrip, ...)
        tok.add_special_tokens([t for t in SPECIAL_TOKENS if tok.token_to_id(t) is not None and t not in declared])
        return tok
    config = _tokenizer_config(path.parent)
    lowercase = config.get("do_lower_case") is not False if lowercase is None else lowercase
    strip_accents = config.get("strip_accents") if strip_accents is None else strip_accents
    tok = Tokenizer(WordPiece(_read_vocab(path), unk_token=UNK,
                              continuing_subword_prefix=CONTINUATION_PREFIX,
                              max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
    tok.normalizer = _normalizer(lowercase, strip_accents, config.get("tokenize_chinese_chars") is not False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return _finish_pipeline(tok)


@dataclass(frozen=True)
class SpecialIds:
    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    @classmethod
    def from_tokenizer(cls, tok: Tokenizer) -> "SpecialIds":
        ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
        missing = [t for t, i in zip(SPECIAL_TOKENS, ids) if i is None]
        if missing:
            raise ValueError(f"tokenizer vocabulary lacks special tokens {missing}")
        return cls(*ids)

    @property
    def all(self) -> tuple[int, ...]:
        """Every special id: never a random replacement. Targets: never [PAD], [CLS], [SEP] or [MASK]; [UNK] is one
        where the text had it, as in Google's BERT (it stands for text there)."""
        return (self.pad, self.unk, self.cls, self.sep, self.mask)

    @property
    def never_targets(self) -> tuple[int, ...]:
        """The ids never made MLM targets, wherever they stand (a "[MASK]" the text holds too): structure, not text."""
        return (self.pad, self.cls, self.sep, self.mask)


def given_tokenizer(path: str | os.PathLike, lowercase: bool | None = None,
                    strip_accents: bool | None = None) -> Tokenizer:
    """data.tokenizer.path loaded as transformers will read the copy prepare saves (save_tokenizer), or a ConfigError
    naming the folder and what it lacks; no Ray, so a job refuses it before any cluster work. A bare vocab.txt states
    no case, so `lowercase` / `strip_accents` (data.tokenizer's) decide (unset: uncased BERT, as transformers reads
    one, unless its tokens are cased: refused, check_tokenizer_folder); a tokenizer that states its own keeps them,
    and a setting that contradicts them is refused. So is a vocab.txt that differs from the tokenizer.json beside it,
    a folder that is no BERT WordPiece tokenizer (none of its files, a SentencePiece or BPE one, a special token
    missing: pretraining needs all five), and a tokenizer transformers would rebuild differently: pretraining would
    see other ids than fine-tuning."""
    check_tokenizer_folder(path, lowercase, "data.tokenizer.lowercase")
    try:
        tok = load_tokenizer(path, lowercase, strip_accents)
        SpecialIds.from_tokenizer(tok)
    except Exception as e:  # tokenizers raises a bare Exception for a tokenizer.json it cannot read
        raise ConfigError(f"data.tokenizer.path={path}: {e}; give a BERT WordPiece tokenizer (a folder with vocab.txt "
                          f"or tokenizer.json, holding {' '.join(SPECIAL_TOKENS)}), or null to train one") from None
    try:  # a BERT WordPiece tokenizer still: its vocab.txt repeats a line
        vocab_in_id_order(tok)
    except ValueError as e:
        raise ConfigError(f"data.tokenizer.path={path}: {e}; remove the repeated line (each token once)") from None
    stated = stated_settings(path)
    if stated:
        strips = stated["lowercase"] if stated["strip_accents"] is None else stated["strip_accents"]
        for name, setting, theirs in (("lowercase", lowercase, stated["lowercase"]),
                                      ("strip_accents", strip_accents, strips)):
            if setting not in (None, theirs):
                raise ConfigError(
                    f"data.tokenizer.{name}={setting} contradicts the tokenizer at data.tokenizer.path={path}, which "
                    f"states lowercase={stated['lowercase']}, strip_accents={stated['strip_accents']} (None: as "
                    f"lowercase); leave data.tokenizer.{name} unset to use it as it is, or give another")
    differences = transformers_differences(tok)
    if differences:
        raise ConfigError(
            f"data.tokenizer.path={path}: transformers rebuilds a BERT tokenizer from vocab.txt and "
            f"tokenizer_config.json, so fine-tuning and serving would tokenize differently from pretraining: "
            f"{'; '.join(differences)}; give one with a BertNormalizer(clean_text=True), BertPreTokenizer and "
            f"WordPiece model ([UNK], '##'), or train one (data.tokenizer.path: null)")
    return tok


def tokenizer_hash(path: str | os.PathLike | Tokenizer) -> str:
    """sha256 of the vocabulary (as vocab.txt text) and everything else that changes ids.

    Equal hashes mean equal token ids for any text, so prepared data can be named by it.
    Accepts a saved tokenizer's path or an in-memory Tokenizer (same hash once saved).
    """
    tok = path if isinstance(path, Tokenizer) else load_tokenizer(path)
    spec = json.loads(tok.to_str())
    model = {k: v for k, v in spec["model"].items() if k != "vocab"}
    h = hashlib.sha256()
    h.update("".join(t + "\n" for t in vocab_in_id_order(tok)).encode("utf-8"))
    h.update(json.dumps({"normalizer": spec["normalizer"], "pre_tokenizer": spec["pre_tokenizer"],
                         "model": model}, sort_keys=True).encode("utf-8"))
    # tokens added past BERT's five specials (add_tokens, add_special_tokens: "[unused0]" matched whole, before the
    # word pieces) change the ids of text that holds them; hashed only where there are any, so a plain BERT
    # tokenizer's hash (the names of data prepared with it, lineage's records of it) stays what it was
    added = sorted((t["content"], t.get("single_word", False), t.get("lstrip", False), t.get("rstrip", False),
                    t.get("normalized", True)) for t in spec.get("added_tokens") or ()
                   if t["content"] not in SPECIAL_TOKENS)
    if added:
        h.update(json.dumps(added).encode("utf-8"))
    return h.hexdigest()


def continuation_mask(tok: Tokenizer) -> np.ndarray:
    """(V,) bool, True for "##" pieces: the tokens that continue the word before them."""
    vocab = tok.get_vocab(with_added_tokens=True)
    mask = np.zeros(max(vocab.values()) + 1, dtype=bool)
    for token, i in vocab.items():
        if token.startswith(CONTINUATION_PREFIX) and len(token) > len(CONTINUATION_PREFIX):
            mask[i] = True
    return mask
