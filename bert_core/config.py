"""BERT model configuration: one typed dataclass and named presets; and the masking's configuration.

Field names are exactly those of `transformers.BertConfig`, so `config.json` written from
`to_hf_dict()` loads in `transformers` with no translation table. Nothing here imports torch: a job's config
checks read this module and no framework.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

ACTIVATIONS = ("gelu", "gelu_new", "relu")


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field and what is allowed."""


@dataclass
class BertConfig:
    vocab_size: int = 30522  # rows of the word-embedding table (and MLM decoder outputs)
    hidden_size: int = 768  # H: width of every token representation
    num_hidden_layers: int = 12  # L: encoder blocks
    num_attention_heads: int = 12  # A: heads per block; H must divide by A
    intermediate_size: int = 3072  # FFN inner width, 4H in the original BERT
    hidden_act: str = "gelu"  # FFN activation (exact erf GELU, as original BERT)
    hidden_dropout_prob: float = 0.1  # dropout on embeddings and every residual branch
    attention_probs_dropout_prob: float = 0.1  # dropout on attention weights
    max_position_embeddings: int = 512  # longest sequence the learned positions cover
    type_vocab_size: int = 2  # segment ids: sentence A = 0, sentence B = 1
    layer_norm_eps: float = 1e-12  # original BERT's epsilon; parity with checkpoints needs it
    initializer_range: float = 0.02  # std of the normal weight init (untruncated, as HF BERT)
    pad_token_id: int = 0  # padding id: its embedding row starts at zero
    classifier_dropout: float | None = None  # dropout before a task head's classifier; None: hidden_dropout_prob (HF)

    def validate(self) -> "BertConfig":
        positive = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"model.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            divisors = [n for n in range(1, self.hidden_size + 1) if self.hidden_size % n == 0]
            raise ConfigError(
                f"model.hidden_size ({self.hidden_size}) must be divisible by "
                f"model.num_attention_heads ({self.num_attention_heads}); allowed heads: {divisors}")
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"model.hidden_act must be one of {ACTIVATIONS}, got {self.hidden_act!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"model.{name} must be in [0, 1), got {value!r}")
        if self.classifier_dropout is not None and not 0.0 <= self.classifier_dropout < 1.0:
            raise ConfigError(f"model.classifier_dropout must be in [0, 1) or null, got {self.classifier_dropout!r}")
        if not isinstance(self.pad_token_id, int) or isinstance(self.pad_token_id, bool) \
                or not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"model.pad_token_id must be in [0, model.vocab_size={self.vocab_size}), "
                              f"got {self.pad_token_id}")
        for name in ("layer_norm_eps", "initializer_range"):  # (a config.json may say NaN: Python's json reads it)
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"model.{name} must be a finite number > 0, got {value!r}")
        return self

    @property
    def head_dropout(self) -> float:
        """The dropout before a sequence or token classifier: classifier_dropout, else hidden_dropout_prob."""
        return self.hidden_dropout_prob if self.classifier_dropout is None else self.classifier_dropout

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Parameter count of BertForPreTraining (decoder tied), used for 6N FLOPs/token."""
        H, L, I, V = self.hidden_size, self.num_hidden_layers, self.intermediate_size, self.vocab_size
        per_layer = 4 * H * H + 4 * H + 2 * H * I + I + H + 4 * H  # attention, FFN, two LayerNorms
        encoder = L * per_layer + H * H + H  # + pooler
        heads = H * H + H + 2 * H + V + 2 * H + 2  # MLM transform + LN + output bias, NSP
        embeddings = (V + self.max_position_embeddings + self.type_vocab_size) * H + 2 * H
        return encoder + heads + (embeddings if include_embeddings else 0)

    def to_hf_dict(self, architectures: list[str] | None = None) -> dict:
        d = dataclasses.asdict(self)
        d.update(model_type="bert", position_embedding_type="absolute",
                 architectures=architectures or ["BertForPreTraining"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "BertConfig":
        """Build from our dict or an HF config.json; unknown HF keys are ignored. `"pad_token_id": null` (as some
        configs write it; transformers takes it) is the default, 0: BERT's [PAD]."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names and not (k == "pad_token_id" and v is None)})


def _preset(sizes: dict, overrides: dict) -> BertConfig:
    merged = {**sizes, **overrides}  # any field, the sizes included, may be overridden
    merged.setdefault("intermediate_size", 4 * merged["hidden_size"])
    return BertConfig(**merged)


# Sizes follow Google's BERT miniatures (Turc et al. 2019) and the original base/large.
def tiny(**kw) -> BertConfig:  # tests and CI: seconds per step on a laptop CPU
    return _preset(dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2), kw)


def mini(**kw) -> BertConfig:
    return _preset(dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4), kw)


def small(**kw) -> BertConfig:
    return _preset(dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8), kw)


def medium(**kw) -> BertConfig:
    return _preset(dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8), kw)


def base(**kw) -> BertConfig:  # 110M
    return _preset(dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12), kw)


def large(**kw) -> BertConfig:  # 340M
    return _preset(dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16), kw)


PRESETS = {f.__name__: f for f in (tiny, mini, small, medium, base, large)}


def preset(name: str, **overrides) -> BertConfig:
    if name not in PRESETS:
        raise ConfigError(f"model.preset must be one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name](**overrides).validate()


@dataclass
class MaskingConfig:
    rate: float = 0.15  # share of real (non-special) tokens selected as MLM targets
    mask_token_prob: float = 0.8  # of those, replaced by [MASK]
    random_token_prob: float = 0.1  # of those, replaced by a random non-special token; rest unchanged
    whole_word: bool = False  # select whole words ("##" pieces go with their head), as BERT-wwm
    max_predictions: int | None = None  # cap on targets per sequence (20 for seq 128 in BERT)

    def validate(self, where: str = "masking") -> "MaskingConfig":
        """`where` is the section's dotted name in the caller's config (the pretraining job: train.masking)."""
        for name in ("rate", "mask_token_prob", "random_token_prob"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{where}.{name} must be a number, got {value!r}")
        if not 0.0 < self.rate < 1.0:
            raise ConfigError(f"{where}.rate must be in (0, 1), got {self.rate!r}")
        for name in ("mask_token_prob", "random_token_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{where}.{name} must be in [0, 1], got {value!r}")
        if self.mask_token_prob + self.random_token_prob > 1.0:
            raise ConfigError(
                f"{where}.mask_token_prob + {where}.random_token_prob must be <= 1, got "
                f"{self.mask_token_prob} + {self.random_token_prob}")
        if self.max_predictions is not None and (
                isinstance(self.max_predictions, bool) or not isinstance(self.max_predictions, int)
                or self.max_predictions < 1):
            raise ConfigError(f"{where}.max_predictions must be null or an integer >= 1, "
                              f"got {self.max_predictions!r}")
        return self
