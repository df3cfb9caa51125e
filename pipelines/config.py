"""Configuration of corpus preparation: sources -> documents -> sentence pairs -> parquet shards."""

from __future__ import annotations

from dataclasses import dataclass, field

from bert_core.config import ConfigError
from pipelines.encodings import check_encoding

FORMATS = ("auto", "text", "jsonl", "wiki_xml", "parquet")
MASKING = ("dynamic", "static")


@dataclass
class TokenizerConfig:
    path: str | None = None  # an existing tokenizer dir (vocab.txt / tokenizer.json); None trains one
    vocab_size: int = 8192  # WordPiece vocabulary to train (30522 in original BERT)
    lowercase: bool = True  # uncased BERT
    min_frequency: int = 2  # a merge must be seen this often to enter the vocabulary
    sample_documents: int = 20000  # documents the tokenizer is trained on (a uniform sample)


@dataclass
class DataConfig:
    sources: list[str] = field(default_factory=list)  # paths, globs or filesystem URIs
    format: str = "auto"  # how to read sources; "auto" decides per file by extension
    text_column: str = "text"  # column holding document text in parquet / JSONL sources
    # plain-text sources' encoding: "" = UTF-8; latin-1, cp1252, mac_roman, shift_jis, ...: a Python codec that
    # writes ASCII as ASCII (files are cut at \n bytes). JSON Lines, XML and parquet text are read as UTF-8
    text_encoding: str = ""
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
    num_shards: int = 0  # 0 = choose from size (about 64 MB of tokens per shard)
    num_workers: int = 2  # tokenizing tasks at once (work units are sized from it)
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
        if self.masking not in MASKING:
            raise ConfigError(f"data.masking must be one of {MASKING}, got {self.masking!r}")
        if not 8 <= self.max_seq_len <= 4096:
            raise ConfigError(f"data.max_seq_len must be in [8, 4096], got {self.max_seq_len}")
        for name in ("short_seq_prob", "nsp_random_prob", "mask_rate", "eval_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"data.{name} must be in [0, 1), got {value!r}")
        for name in ("dupe_factor", "num_workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"data.{name} must be >= 1, got {getattr(self, name)}")
        if self.work_unit_bytes < 0:
            raise ConfigError(f"data.work_unit_bytes must be >= 0 (0 = auto), got {self.work_unit_bytes}")
        if self.tokenizer.path is None and self.tokenizer.vocab_size < 128:
            raise ConfigError(f"data.tokenizer.vocab_size must be >= 128, got {self.tokenizer.vocab_size}")
        return self


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
