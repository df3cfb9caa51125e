"""Configuration of corpus preparation: sources -> documents -> sentence pairs -> parquet shards."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bert_core.config import ConfigError
from pipelines.encodings import check_encoding

FORMATS = ("auto", "text", "jsonl", "wiki_xml", "parquet", "wikiextractor")
TEXT_DOCUMENTS = ("books", "blank_lines")
MASKING = ("dynamic", "static")
MAX_VOCAB = 2**31  # ids 0 .. MAX_VOCAB - 1: the largest pipelines/shards.py's int32 holds (uint16 up to 2**16)


@dataclass
class TokenizerConfig:
    path: str | None = None  # an existing tokenizer dir (vocab.txt / tokenizer.json); None trains one
    vocab_size: int = 8192  # WordPiece vocabulary to train (30522 in original BERT)
    # None = true (uncased BERT) for a trained tokenizer, a given one's own (its tokenizer.json's normalizer or
    # tokenizer_config.json's do_lower_case; true for a bare uncased vocab.txt, as transformers reads one, and a
    # bare vocab.txt over 1% of whose tokens hold capitals is refused unset). Set, a bare vocab.txt (Google's
    # cased_L-12_H-768_A-12) takes it, and a given tokenizer stating otherwise is refused
    lowercase: bool | None = None
    # None = follow lowercase (uncased BERT strips accents), or a given tokenizer's own; false keeps combining marks,
    # letters outside Latin script (Japanese voicing marks, Devanagari virama, Thai and Vietnamese tone marks)
    strip_accents: bool | None = None
    # characters the vocabulary keeps, the most frequent (others are [UNK]); None = those covering 99.95% of the
    # sample's, at least 1000, at most what vocab_size - 5 holds with the "##" form of each that continues words
    # (bert_core.tokenizer.covering_alphabet: a CJK ideograph takes one token); a set limit that cannot fit: refused
    limit_alphabet: int | None = None
    min_frequency: int = 2  # a merge must be seen this often to enter the vocabulary
    sample_documents: int = 20000  # documents the tokenizer is trained on (a uniform sample) ...
    # ... until this many million characters of text: a plain-text book is one document of up to a few MB, and 20,000
    # of them would be the whole corpus, held by the driver (the last document taken is cut to the budget)
    sample_million_chars: float = 200.0

    def validate(self) -> "TokenizerConfig":
        if self.lowercase is not None and not isinstance(self.lowercase, bool):
            raise ConfigError(f"data.tokenizer.lowercase must be null (uncased, or a given tokenizer's own), true or "
                              f"false, got {self.lowercase!r}")
        if self.strip_accents is not None and not isinstance(self.strip_accents, bool):
            raise ConfigError(f"data.tokenizer.strip_accents must be null (follow lowercase), true or false, "
                              f"got {self.strip_accents!r}")
        if isinstance(self.path, str) and not self.path.strip():  # `data.tokenizer.path=`: none given, one trained
            self.path = None  # (as "" it skipped the checks below and was recorded as given)
        if self.path is not None:
            return self
        if self.vocab_size < 128:
            raise ConfigError(f"data.tokenizer.vocab_size must be >= 128, got {self.vocab_size}")
        if self.vocab_size > MAX_VOCAB:
            raise ConfigError(f"data.tokenizer.vocab_size must be <= {MAX_VOCAB} (token ids are int32 in the prepared "
                              f"shards), got {self.vocab_size}")
        if not 0 <= self.min_frequency < 2**64:  # the WordPiece trainer's u64: else its OverflowError, after the sample
            raise ConfigError(f"data.tokenizer.min_frequency must be >= 0 and < 2**64 (0 and 1 both keep every merge), "
                              f"got {self.min_frequency}")
        if not (self.sample_documents >= 1 and self.sample_million_chars > 0):
            raise ConfigError(f"data.tokenizer.sample_documents must be >= 1 and sample_million_chars > 0, got "
                              f"{self.sample_documents} and {self.sample_million_chars}")
        limit = self.limit_alphabet
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or not 1 <= limit <= self.vocab_size):
            raise ConfigError(f"data.tokenizer.limit_alphabet must be null (the characters covering 99.95% of the "
                              f"sample's) or an integer in [1, data.tokenizer.vocab_size={self.vocab_size}], "
                              f"got {limit!r}")
        return self


@dataclass
class DataConfig:
    sources: list[str] = field(default_factory=list)  # paths, globs or filesystem URIs
    format: str = "auto"  # how to read sources; "auto" decides per file by extension
    text_column: str = "text"  # column holding document text in parquet / JSONL sources
    # plain-text sources' encoding: "" = UTF-8; latin-1, cp1252, mac_roman, shift_jis, ...: a Python codec that
    # writes ASCII as ASCII (files are cut at \n bytes); latin-1 is read as windows-1252, as browsers read it (its
    # 0x80-0x9F quotes and dashes). JSON Lines, XML and parquet text are read as UTF-8
    text_encoding: str = ""
    # where a plain-text file's documents end: "books" = a file is a book, cut at the first blank line past every MiB
    # (BookCorpus, Gutenberg); "blank_lines" = at every blank line (Google's create_pretraining_data input: one
    # sentence a line, a blank line between documents)
    text_documents: str = "books"
    output_root: str = "data/prepared"  # prepared sets land in <output_root>/<hash>/
    min_document_chars: int = 200  # shorter documents are dropped (counted as "too_short")
    max_line_bytes: int = 4 << 20  # longer lines are skipped unread, their record counted "line_too_long"
    max_seq_len: int = 128  # tokens per example including [CLS] and both [SEP]s
    short_seq_prob: float = 0.1  # share of examples given a shorter random target length
    nsp_random_prob: float = 0.5  # share of pairs whose B comes from another document
    dupe_factor: int = 1  # passes over the corpus, each with different randomness
    masking: str = "dynamic"  # "static" stores masked positions; "dynamic" masks at batch time
    mask_rate: float = 0.15  # share of tokens selected for prediction (static masking)
    max_predictions: int = 20  # cap of masked positions per example (static masking)
    whole_word_masking: bool = False
    eval_fraction: float = 0.02  # share of documents held out for the eval split
    num_shards: int = 0  # 0 = choose from size (about 8 MiB of token ids, ~4M tokens, per shard)
    # tokenizing tasks at once (work units are sized from it); 0 = the Ray cluster's CPUs when prepare runs
    num_workers: int = 0
    work_unit_bytes: int = 0  # input bytes per tokenizing call: small files grouped, big ones split (0 = auto)
    seed: int = 12345
    debug_doc_ids: bool = False  # keep document and sentence ids in each example (property tests)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)

    def validate(self) -> "DataConfig":
        if not self.sources:
            raise ConfigError("data.sources must name at least one path, glob or URI")
        if self.format not in FORMATS:
            raise ConfigError(f"data.format must be one of {FORMATS}, got {self.format!r}")
        check_text_encoding(self.text_encoding)
        if self.text_documents not in TEXT_DOCUMENTS:
            raise ConfigError(f"data.text_documents must be one of {TEXT_DOCUMENTS}, got {self.text_documents!r}")
        if self.masking not in MASKING:
            raise ConfigError(f"data.masking must be one of {MASKING}, got {self.masking!r}")
        if not 8 <= self.max_seq_len <= 4096:
            raise ConfigError(f"data.max_seq_len must be in [8, 4096], got {self.max_seq_len}")
        for name in ("short_seq_prob", "nsp_random_prob", "mask_rate", "eval_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"data.{name} must be in [0, 1), got {value!r}")
        if self.dupe_factor < 1:
            raise ConfigError(f"data.dupe_factor must be >= 1, got {self.dupe_factor}")
        if self.num_shards < 0:
            raise ConfigError(f"data.num_shards must be >= 0 (0 = from the corpus size), got {self.num_shards}")
        if self.num_workers < 0:
            raise ConfigError(f"data.num_workers must be >= 0 (0 = the Ray cluster's CPUs), got {self.num_workers}")
        if self.work_unit_bytes < 0:
            raise ConfigError(f"data.work_unit_bytes must be >= 0 (0 = auto), got {self.work_unit_bytes}")
        line = self.max_line_bytes
        # -1 read every file as no line (readline(0)): zero rows and zero rejects; null failed comparing with 1
        if isinstance(line, bool) or not isinstance(line, int) or line < 1:
            raise ConfigError(f"data.max_line_bytes must be >= 1 (an integer of bytes; there is no unlimited setting: "
                              f"a longer line rejects its record as line_too_long, so raise the default {4 << 20:,}, "
                              f"4 MiB, to keep longer records), got {line!r}")
        if self.min_document_chars < 0:
            raise ConfigError(f"data.min_document_chars must be >= 0 (0 keeps every non-empty document), "
                              f"got {self.min_document_chars}")
        if self.masking == "static":
            if self.mask_rate == 0:  # refused by every shard task, after the whole read and tokenization pass
                raise ConfigError("data.mask_rate must be in (0, 1) with data.masking=static: 0 masks nothing, and "
                                  "the masked-LM loss would have no target")
            check_max_predictions(self.max_predictions, self.mask_rate, self.max_seq_len)
        self.tokenizer.validate()
        return self


def check_max_predictions(cap: int, rate: float, max_seq_len: int, where: str = "data",
                          length: str = "", rate_name: str = "data.mask_rate") -> None:
    """Refuse a masking cap that keeps a full-length example well under `rate` (BERT's 20 at 512 tokens
    masks 3.9%, not 15%). A cap down to 80% of the rate's count is allowed: examples are often shorter than
    max_seq_len, and 12% instead of 15% is a tuning choice, not a carried-over cap. `length`: the field holding
    `max_seq_len` (default `where`.max_seq_len); `rate_name`: the one holding `rate`."""
    maskable = max_seq_len - 3  # [CLS] and two [SEP]s are never targets
    asked = math.floor(rate * maskable + 0.5)  # bert_core.masking._budget: round half up
    if cap < 0.8 * asked:
        raise ConfigError(f"{where}.max_predictions={cap} masks {cap / maskable:.1%} of a "
                          f"{length or where + '.max_seq_len'}={max_seq_len} example, not the {rate:.1%} of "
                          f"{rate_name}={rate:g}; set it to {asked} or more (BERT's cap is about mask_rate * "
                          f"max_seq_len: 20 at 128 tokens, 80 at 512)")


def check_text_encoding(name: str) -> str:
    """data.text_encoding's canonical name ("" for UTF-8), refused where Python lacks it or it does not keep ASCII
    bytes as they are: a file is cut into lines and ranges at its \\n bytes (UTF-16 and UTF-32 write 2 or 4)."""
    try:
        canonical = check_encoding(name)
    except ValueError as e:
        raise ConfigError(f"data.text_encoding: {e}") from None
    probe = "Ab 1\t\n\r."
    if canonical and probe.encode(canonical, "replace") != probe.encode("ascii"):
        raise ConfigError(f"data.text_encoding={name!r}: its text is not ASCII-compatible ({canonical} does not write "
                          f"\\n as the byte \\n), so its files cannot be cut into lines; convert them to UTF-8 "
                          f"(iconv -f {name} -t UTF-8) and leave data.text_encoding unset")
    return canonical
