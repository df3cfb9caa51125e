"""The modern encoder's configuration (bert_core/modern.py's model): a typed dataclass whose fields are
transformers.ModernBertConfig's, and size presets parallel to bert_core/config.py's.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from bert_core.config import ConfigError

# transformers' ACT2FN names, so config.json needs no translation (bert_core/modern.py maps them to modules; this
# module stays free of torch, so a job's config checks import no framework)
ACTIVATIONS = ("gelu", "gelu_pytorch_tanh", "silu", "relu")
GLOBAL, LOCAL = "full_attention", "sliding_attention"  # transformers' layer_types values
ARCHITECTURE = "ModernBertForMaskedLM"  # the transformers class a release folder loads as
VOCAB_MULTIPLE = 64
MODEL_TYPE = "modernbert"  # transformers' model_type
# A config with one of the architecture switches off (pre_norm, glu, rotary: the recipe ladder's rungs) is a model
# transformers does not implement: its config.json says so with a model_type transformers refuses loudly, rather
# than one it would load, with a warning, as the wrong model.
VARIANT_MODEL_TYPE = "bert-foundry-modern-variant"
SWITCHES = ("pre_norm", "glu", "rotary")  # ours, not transformers': each True in ModernBERT
# The fields that make the parameter set (its names and shapes), with SWITCHES: weights saved under other values load
# into no model of this config. The others change only what the same weights compute (activations, norm_eps, rope
# thetas, the local window and global pattern) or belong to the task heads; max_position_embeddings: see weight_fields.
WEIGHT_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "norm_bias", "attention_bias", "mlp_bias", "decoder_bias", "classifier_bias", *SWITCHES)
POOLINGS = ("cls", "mean")  # transformers' classifier_pooling values


def model_type(model_dir) -> str:
    """config.json's model_type: "bert", "modernbert", or VARIANT_MODEL_TYPE. Read as JSON, without torch: the
    prediction job's driver asks it of every model."""
    return json.loads((Path(model_dir) / "config.json").read_text()).get("model_type", "")


def is_variant(model_dir) -> bool:
    """Whether a model folder holds the modern encoder with a switch off (its config.json's model_type says so)."""
    return model_type(model_dir) == VARIANT_MODEL_TYPE


def pad_vocab_size(vocab_size: int, multiple: int = VOCAB_MULTIPLE) -> int:
    """Round a tokenizer's vocab size (`tok.get_vocab_size()`) up to a multiple of `multiple`.

    The extra rows are never produced by the tokenizer; they only make V a tile-friendly width for the
    decoder matmul (ModernBERT's 50368 is one). They still get logits, which training pushes down.
    """
    return -(-vocab_size // multiple) * multiple


# ----------------------------------------------------------------------------- config


@dataclass
class ModernConfig:
    # Field names are those of transformers.ModernBertConfig (the legacy spellings for the two rope
    # thetas and the global-layer period, which HF still reads), so to_hf_dict is nearly the identity.
    vocab_size: int = 30528  # BERT's 30522 WordPiece ids padded to a multiple of 64 (pad_vocab_size)
    hidden_size: int = 768  # H: width of every token representation
    num_hidden_layers: int = 12  # L: encoder blocks
    num_attention_heads: int = 12  # A: heads per block; H/A must be even (RoPE rotates pairs of dims)
    intermediate_size: int = 2048  # I: GLU width; Wi projects H -> 2I (value and gate; glu=false: H -> I), Wo I -> H
    hidden_activation: str = "gelu"  # activation of the GLU's value half: gelu makes it GeGLU
    max_position_embeddings: int = 8192  # longest sequence meant; RoPE has no table (rotary=false: a table, 512)
    local_attention: int = 128  # sliding window: a local layer's token sees keys within local_attention // 2
    global_attn_every_n_layers: int = 3  # blocks 0, n, 2n, ... attend globally, the others locally
    global_rope_theta: float = 160_000.0  # RoPE base of global layers: slow rotations tell far positions apart
    local_rope_theta: float = 10_000.0  # RoPE base of local layers: they only ever see the window
    norm_eps: float = 1e-5  # every LayerNorm (embeddings, blocks, final, head)
    norm_bias: bool = False  # LayerNorms without bias, as ModernBERT
    attention_bias: bool = False  # Wqkv and Wo without bias
    mlp_bias: bool = False  # Wi and Wo without bias
    decoder_bias: bool = True  # the MLM decoder keeps an output bias; its weight is the tied embedding
    classifier_bias: bool = False  # the MLM head's dense layer (HF's name: that head is shared with classifiers)
    classifier_activation: str = "gelu"  # the MLM head's activation
    # The task heads' (bert_core/modern_heads.py), kept in config.json, where transformers' heads read them too
    classifier_pooling: str = "cls"  # a sequence classifier's input: token 0 ("cls"), or its real tokens' mean ("mean")
    classifier_dropout: float = 0.0  # on the task heads' head output, before their classifier
    embedding_dropout: float = 0.0  # ModernBERT pretrains with every dropout off
    attention_dropout: float = 0.0  # on the attention weights and on the attention output (HF's out_drop)
    mlp_dropout: float = 0.0  # on the GLU output, before Wo
    initializer_range: float = 0.02  # std of the truncated-normal init of input-side weights
    initializer_cutoff_factor: float = 2.0  # init is truncated at +-this many std
    pad_token_id: int = 0  # padding id: the embedding lookup sends its row no gradient (padding_idx)
    # Architecture switches, each on in ModernBERT; turned off one by one they lead back to BERT's layout
    # (bench/recipe_ladder.py). Off, the model is ours only: transformers has no class for it.
    pre_norm: bool = True  # False: post-LN blocks, x = norm(x + f(x)), as BERT; no final norm
    glu: bool = True  # False: a plain feed-forward, act(Wi x) -> Wo, Wi H -> I (the preset's I is then 4H)
    rotary: bool = True  # False: a learned position table (max_position_embeddings rows) added to the embeddings

    def validate(self) -> "ModernConfig":
        positive = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                    "max_position_embeddings", "local_attention", "global_attn_every_n_layers")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"model.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            divisors = [n for n in range(1, self.hidden_size + 1) if self.hidden_size % n == 0]
            raise ConfigError(f"model.hidden_size ({self.hidden_size}) must be divisible by model.num_attention_heads "
                              f"({self.num_attention_heads}); allowed heads: {divisors}")
        if self.rotary and self.head_dim % 2:
            raise ConfigError(f"model.hidden_size / model.num_attention_heads (the head dim, {self.head_dim}) "
                              "must be even: RoPE rotates pairs of dimensions")
        if self.local_attention % 2:
            raise ConfigError(f"model.local_attention must be even (the window is +-local_attention/2 around a "
                              f"token), got {self.local_attention}")
        for name in ("hidden_activation", "classifier_activation"):
            if getattr(self, name) not in ACTIVATIONS:
                raise ConfigError(f"model.{name} must be one of {ACTIVATIONS}, got {getattr(self, name)!r}")
        if self.classifier_pooling not in POOLINGS:
            raise ConfigError(f"model.classifier_pooling must be one of {POOLINGS}, got {self.classifier_pooling!r}")
        for name in ("embedding_dropout", "attention_dropout", "mlp_dropout", "classifier_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"model.{name} must be in [0, 1), got {getattr(self, name)!r}")
        for name in ("global_rope_theta", "local_rope_theta", "norm_eps", "initializer_range",
                     "initializer_cutoff_factor"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"model.{name} must be > 0, got {getattr(self, name)!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"model.pad_token_id must be in [0, model.vocab_size={self.vocab_size}), "
                              f"got {self.pad_token_id}")
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def is_transformers(self) -> bool:
        """Every architecture switch on: transformers' ModernBertForMaskedLM is this model."""
        return all(getattr(self, name) for name in SWITCHES)

    @property
    def layer_types(self) -> list[str]:
        """Per block: GLOBAL or LOCAL, transformers' layer_types."""
        return _layer_types(self.num_hidden_layers, self.global_attn_every_n_layers)

    def weight_fields(self) -> tuple[str, ...]:
        """WEIGHT_FIELDS, and max_position_embeddings where it sizes a table (rotary=false): RoPE holds none, so
        the same weights read any length (ModernBERT's own context extension keeps them)."""
        return WEIGHT_FIELDS if self.rotary else (*WEIGHT_FIELDS, "max_position_embeddings")

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Parameter count of ModernBertForMaskedLM (decoder tied), used for 6N FLOPs/token."""
        H, L, I, V = self.hidden_size, self.num_hidden_layers, self.intermediate_size, self.vocab_size
        norm = H * (1 + self.norm_bias)
        attention = 4 * H * H + 4 * H * self.attention_bias
        mlp = (3 if self.glu else 2) * H * I + ((2 if self.glu else 1) * I + H) * self.mlp_bias
        # pre-LN: block 0 has no attention norm of its own, and a final norm follows the blocks
        blocks = L * (attention + mlp + 2 * norm) - (norm if self.pre_norm else 0)
        head = H * H + H * self.classifier_bias + norm + V * self.decoder_bias
        embeddings = V * H + norm + (0 if self.rotary else self.max_position_embeddings * H)
        return blocks + (norm if self.pre_norm else 0) + head + (embeddings if include_embeddings else 0)

    def to_hf_dict(self, architectures: list[str] | None = None) -> dict:
        """transformers.ModernBertConfig fields (config.json), in its current format (layer_types, rope_parameters)."""
        d = dataclasses.asdict(self)
        for legacy in ("global_rope_theta", "local_rope_theta"):  # written as rope_parameters below
            del d[legacy]
        if self.is_transformers:
            for name in SWITCHES:  # not transformers' keys: a ModernBERT config.json stays exactly theirs
                del d[name]
        d.update(model_type=MODEL_TYPE if self.is_transformers else VARIANT_MODEL_TYPE,
                 architectures=architectures or [ARCHITECTURE],
                 layer_types=self.layer_types,
                 rope_parameters={GLOBAL: {"rope_type": "default", "rope_theta": self.global_rope_theta},
                                  LOCAL: {"rope_type": "default", "rope_theta": self.local_rope_theta}},
                 tie_word_embeddings=True, sparse_prediction=False,  # HF then returns dense (B, T, V) logits
                 # Special ids other than padding are the tokenizer's business; HF's defaults (50281...)
                 # would name ids outside a padded 30522 vocabulary.
                 bos_token_id=None, eos_token_id=None, cls_token_id=None, sep_token_id=None)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ModernConfig":
        """Build from our dict or a ModernBERT config.json (current or legacy format); unknown keys are ignored.

        Raises ConfigError for what this model does not implement: a rope type other than "default",
        a global/local pattern other than "every n-th block from block 0", untied decoder weights.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names and v is not None}
        # the legacy format's rope_scaling applies to both layer types, over rope_parameters (transformers'
        # convert_rope_params_to_dict); "type" is its older spelling of rope_type, refused too where it names scaling
        scaling = d.get("rope_scaling") or {}
        for layer_type, field in ((GLOBAL, "global_rope_theta"), (LOCAL, "local_rope_theta")):
            params = (d.get("rope_parameters") or {}).get(layer_type) or {}
            for where, p in ((f"rope_parameters.{layer_type}", params), ("rope_scaling", scaling)):
                rope_type = p.get("rope_type", p.get("type", "default"))
                if rope_type != "default":
                    raise ConfigError(f"model.{where}.rope_type must be 'default' (this model implements plain RoPE "
                                      f"only: without the scaling, positions would read otherwise than they were "
                                      f"trained), got {rope_type!r}")
            params = {**params, **scaling}
            if "rope_theta" in params:
                kw[field] = float(params["rope_theta"])
        if d.get("layer_types") is not None:
            kw["global_attn_every_n_layers"] = _period(list(d["layer_types"]), kw.get("global_attn_every_n_layers"))
        if d.get("tie_word_embeddings") is False:
            raise ConfigError("model.tie_word_embeddings must be true: the MLM decoder is the word embedding")
        return cls(**kw)


def _layer_types(num_layers: int, every_n: int) -> list[str]:
    return [LOCAL if i % every_n else GLOBAL for i in range(num_layers)]  # transformers' own rule


def _period(layer_types: list[str], hint: int | None) -> int:
    """The n for which `layer_types` is "global every n-th block from block 0"; `hint` wins when it fits."""
    later_globals = [i for i, t in enumerate(layer_types) if t == GLOBAL and i > 0]
    for n in (hint, later_globals[0] if later_globals else len(layer_types)):
        if n and _layer_types(len(layer_types), n) == layer_types:
            return n
    raise ConfigError(f"model.layer_types must be global at blocks 0, n, 2n, ... and local elsewhere "
                      f"(values {GLOBAL!r}, {LOCAL!r}), got {layer_types}")


def _preset(sizes: dict, overrides: dict) -> ModernConfig:
    merged = {**sizes, **overrides}  # any field, the sizes included, may be overridden
    # the same feed-forward parameters either way: a GLU of width ~8H/3, or BERT's 4H
    merged.setdefault("intermediate_size", glu_width(merged["hidden_size"]) if merged.get("glu", True)
                      else 4 * merged["hidden_size"])
    if not merged.get("rotary", True):  # a learned table has a row per position: BERT's 512, not RoPE's 8192
        merged.setdefault("max_position_embeddings", 512)
    return ModernConfig(**merged)


def glu_width(hidden_size: int) -> int:
    """The GLU width I with the parameters of BERT's 4H feed-forward: 3*H*I = 8*H^2, I ~ 8H/3 to a multiple of 64."""
    return max(VOCAB_MULTIPLE, round(8 * hidden_size / 3 / VOCAB_MULTIPLE) * VOCAB_MULTIPLE)


# Width, depth and heads are those of bert_core.config's preset of the same name (head dim 64, except tiny's
# 32, kept so the debug preset is BERT tiny's shape), and the GLU width matches BERT's FFN parameter count:
# a modern preset and a BERT preset differ in the recipe only, with non-embedding parameters within 4% of
# each other (I rounds to a multiple of 64; no biases, pooler or NSP head here). ModernBERT itself spends a
# budget deeper and narrower: ModernBERT-base is
# base(num_hidden_layers=22, intermediate_size=1152, vocab_size=50368), -large is
# large(num_hidden_layers=28, intermediate_size=2624, vocab_size=50368).
def tiny(**kw) -> ModernConfig:  # tests and CI: one global and one local block
    return _preset(dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2), kw)  # I = 192


def mini(**kw) -> ModernConfig:
    return _preset(dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4), kw)  # I = 704


def small(**kw) -> ModernConfig:
    return _preset(dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8), kw)  # I = 1344


def medium(**kw) -> ModernConfig:
    return _preset(dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8), kw)  # I = 1344


def base(**kw) -> ModernConfig:  # 109M with the default vocabulary
    return _preset(dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12), kw)  # I = 2048


def large(**kw) -> ModernConfig:  # 336M with the default vocabulary
    return _preset(dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16), kw)  # I = 2752


PRESETS = {f.__name__: f for f in (tiny, mini, small, medium, base, large)}


def preset(name: str, **overrides) -> ModernConfig:
    if name not in PRESETS:
        raise ConfigError(f"model.preset must be one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name](**overrides).validate()
