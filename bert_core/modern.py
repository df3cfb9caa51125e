"""A modern encoder (ModernBERT, Warner et al. 2024): the masked-LM model and its conversion to and from transformers
(its config and presets: bert_core/modern_config.py, re-exported here).

What changes against bert_core/model.py, each a ModernBERT choice:
  * pre-LN blocks with a final LayerNorm, and a LayerNorm on the embeddings that doubles as block 0's
    attention norm (block 0 has none of its own);
  * rotary positions (no position table), with a larger base for global layers than for local ones;
  * attention alternates: every n-th block (0, n, 2n, ...) is global, the others see a sliding window;
  * a GeGLU feed-forward (Wi -> [value | gate], act(value) * gate -> Wo);
  * no biases in attention, feed-forward or LayerNorms; no token types, no pooler, no NSP;
  * the vocabulary is padded to a multiple of 64, so the decoder matmul tiles evenly on a GPU.

Parameter names are exactly those of `transformers.ModernBertForMaskedLM` (model.embeddings.tok_embeddings,
model.layers.N.attn.Wqkv, head.dense, decoder, ...), as bert_core/model.py does for BERT: a state dict moves
between the two unchanged, and conversion is a translation of the config only. The exported release
folder (`save_pretrained`) loads with `transformers.AutoModelForMaskedLM` and no code of ours.

Three of those choices are switches (ModernConfig.pre_norm, .glu, .rotary; with every bias flag, classifier_bias
too, one global block in every 1 and norm_eps 1e-12, the model is BERT's masked LM exactly), for
bench/recipe_ladder.py's rungs. A model with a switch off is ours only: transformers has no class for it, and its
config.json says so (modern_config.VARIANT_MODEL_TYPE).

Attention runs padded, through torch's scaled_dot_product_attention with an explicit boolean mask; the
unpadded FlashAttention path that bert_core/model.py has is left for later. Packed rows (several sequences per
row: bert_core.masking's `packing`) get block-diagonal masks and per-sequence positions, so every sequence's
output is the one it has alone.

Shapes: B batch, T sequence length, H hidden, A heads, D = H/A head dim, I GLU width, V vocab,
M masked tokens in the batch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bert_core.checkpoint import CONFIG_NAME, read_state_dict, save_state_dict, unwrap
from bert_core.config import ConfigError
from bert_core.model import IGNORE_INDEX, masked_lm_loss
from bert_core.modern_config import (  # noqa: F401  (re-exported: the config is part of this module's API)
    ACTIVATIONS, ARCHITECTURE, GLOBAL, LOCAL, PRESETS, SWITCHES, VOCAB_MULTIPLE, ModernConfig, base, glu_width, large,
    medium, mini, pad_vocab_size, preset, small, tiny)

ACT = {  # ACTIVATIONS' names -> modules (tests/unit/test_modern.py: the same names)
    "gelu": nn.GELU,  # exact erf GELU: the GLU is then GeGLU, ModernBERT's choice
    "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
    "silu": nn.SiLU,  # SwiGLU
    "relu": nn.ReLU,
}


# ----------------------------------------------------------------------------- model


def init_weights(model: "ModernBertForMaskedLM") -> None:
    """ModernBERT's init: truncated normals, output projections scaled down by sqrt(2L), unit LayerNorms."""
    cfg = model.config
    std_in, std_out = cfg.initializer_range, cfg.initializer_range / (2.0 * cfg.num_hidden_layers) ** 0.5

    def normal(linear_or_embedding: nn.Module, std: float) -> None:
        c = cfg.initializer_cutoff_factor
        nn.init.trunc_normal_(linear_or_embedding.weight, std=std, a=-c * std, b=c * std)

    normal(model.model.embeddings.tok_embeddings, std_in)  # also the decoder's weight (tied)
    if not cfg.rotary:
        normal(model.model.embeddings.position_embeddings, std_in)
    for layer in model.model.layers:
        normal(layer.attn.Wqkv, std_in)
        normal(layer.mlp.Wi, std_in)
        normal(layer.attn.Wo, std_out)  # the two residual-branch outputs
        normal(layer.mlp.Wo, std_out)
    normal(model.head.dense, std_out)
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.LayerNorm)) and m.bias is not None:
            nn.init.zeros_(m.bias)
        if isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)


def rotary(seq_len: int, head_dim: int, theta: float, device: torch.device,
           position_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (T, D) of RoPE in the half-split layout: dims i and i + D/2 rotate together by angle t * theta^(-2i/D).
    With `position_ids` (B, T) (packed rows: positions restart at each sequence), (B, 1, T, D).

    Computed per forward in float32 rather than held in a buffer, so casting the model to bf16 cannot
    round the frequencies.
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float, device=device) / head_dim))  # (D/2,)
    if position_ids is None:
        freqs = torch.arange(seq_len, device=device).float()[:, None] * inv_freq  # (T, D/2)
    else:
        freqs = (position_ids.float()[..., None] * inv_freq)[:, None]  # (B, 1, T, D/2): broadcast over heads
    angles = torch.cat((freqs, freqs), dim=-1)  # (T, D) or (B, 1, T, D)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, A, T, D) queries or keys; in float32, as transformers does, then back to x's dtype."""
    xf = x.float()
    x1, x2 = xf.chunk(2, dim=-1)
    return (xf * cos + torch.cat((-x2, x1), dim=-1) * sin).to(x.dtype)


def attention_masks(attention_mask: torch.Tensor | None, seq_len: int, window: int, device: torch.device,
                    sequence_ids: torch.Tensor | None = None) -> dict[str, torch.Tensor | None]:
    """Boolean SDPA masks (True = attend) for global and local blocks, built once per forward.

    Global: every real key, (B, 1, 1, T), or None without padding. Local: real keys within `window // 2`
    positions of the query, |i - j| <= window // 2, (B, 1, T, T) (as transformers' bidirectional
    sliding-window mask). Each token may also attend to itself: a pad query far from every real token
    would otherwise have no key at all, a fully masked row, which some SDPA kernels return as NaN (torch
    2.13 on CPU gives zeros), and the next block's attention would spread a NaN (0 * NaN) into real rows.
    Real rows are unchanged by it: they attend to themselves anyway. Pad rows are meaningless either way
    and never reach the loss.

    Packed rows (`sequence_ids` (B, T): 1, 2, ... for the row's sequences, 0 for padding): a token attends only to
    keys of its own sequence, (B, 1, T, T), so each sequence sees exactly what it would alone.
    """
    pos = torch.arange(seq_len, device=device)
    near = (pos[:, None] - pos[None, :]).abs() <= window // 2  # (T, T)
    if sequence_ids is not None:
        itself = torch.eye(seq_len, dtype=torch.bool, device=device)  # (T, T)
        same = (sequence_ids[:, :, None] == sequence_ids[:, None, :]) & (sequence_ids[:, None, :] > 0)  # (B, T, T)
        return {GLOBAL: (same | itself)[:, None], LOCAL: ((same & near) | itself)[:, None]}
    if attention_mask is None:
        return {GLOBAL: None, LOCAL: near}
    real_keys = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
    itself = torch.eye(seq_len, dtype=torch.bool, device=device)  # (T, T)
    return {GLOBAL: real_keys, LOCAL: (real_keys & near) | itself}


class ModernBertEmbeddings(nn.Module):
    def __init__(self, config: ModernConfig):
        super().__init__()
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        if not config.rotary:  # the `rotary` switch off: BERT's learned absolute positions
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.drop = nn.Dropout(config.embedding_dropout)

    def forward(self, input_ids, position_ids=None):
        x = self.tok_embeddings(input_ids)  # (B, T, H)
        if hasattr(self, "position_embeddings"):
            x = x + self.position_embeddings(torch.arange(input_ids.shape[1], device=input_ids.device)
                                             if position_ids is None else position_ids)
        return self.drop(self.norm(x))  # (B, T, H)


class ModernBertAttention(nn.Module):
    def __init__(self, config: ModernConfig):
        super().__init__()
        H = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.Wqkv = nn.Linear(H, 3 * H, bias=config.attention_bias)  # output laid out [q | k | v], each (A, D)
        self.Wo = nn.Linear(H, H, bias=config.attention_bias)
        self.dropout_p = config.attention_dropout
        self.out_drop = nn.Dropout(config.attention_dropout)

    def forward(self, x, mask, cos, sin):
        # x: (B, T, H); mask: bool, broadcastable to (B, A, T, T), True = attend, or None; cos, sin: (T, D),
        # or None with the `rotary` switch off (positions are then in the embeddings)
        B, T, H = x.shape
        q, k, v = self.Wqkv(x).view(B, T, 3, self.num_heads, H // self.num_heads).unbind(2)  # 3 x (B, T, A, D)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, A, T, D)
        if cos is not None:
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout_p if self.training else 0.0)
        return self.out_drop(self.Wo(y.transpose(1, 2).reshape(B, T, H)))  # (B, T, H)


class ModernBertMLP(nn.Module):
    """GLU feed-forward: Wi gives value and gate, act(value) * gate, Wo back to H. With the `glu` switch off,
    BERT's: act(Wi x), Wo back to H."""

    def __init__(self, config: ModernConfig):
        super().__init__()
        self.glu = config.glu
        width = 2 * config.intermediate_size if config.glu else config.intermediate_size
        self.Wi = nn.Linear(config.hidden_size, width, bias=config.mlp_bias)
        self.act = ACT[config.hidden_activation]()
        self.drop = nn.Dropout(config.mlp_dropout)
        self.Wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x):
        if not self.glu:
            return self.Wo(self.drop(self.act(self.Wi(x))))  # (B, T, H)
        value, gate = self.Wi(x).chunk(2, dim=-1)  # (B, T, I) each; the first half is activated
        return self.Wo(self.drop(self.act(value) * gate))  # (B, T, H)


class ModernBertEncoderLayer(nn.Module):
    """Pre-LN block: x + attn(norm(x)), then x + mlp(norm(x)). With the `pre_norm` switch off, BERT's post-LN
    block: norm(x + attn(x)), then norm(x + mlp(x)) (the same two norms, after the residual sums)."""

    def __init__(self, config: ModernConfig, index: int):
        super().__init__()
        self.pre_norm = config.pre_norm
        # Pre-LN: block 0's input is the embedding LayerNorm's output already: a second norm there would be redundant.
        self.attn_norm = (nn.Identity() if index == 0 and config.pre_norm
                          else nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias))
        self.attn = ModernBertAttention(config)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.mlp = ModernBertMLP(config)
        self.attention_type = config.layer_types[index]  # GLOBAL or LOCAL: picks the mask and the rope base

    def forward(self, x, mask, cos, sin):
        if not self.pre_norm:
            x = self.attn_norm(x + self.attn(x, mask, cos, sin))
            return self.mlp_norm(x + self.mlp(x))
        x = x + self.attn(self.attn_norm(x), mask, cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class ModernBertModel(nn.Module):
    """Embeddings (+ LayerNorm) -> L pre-LN blocks, alternating global and local attention -> final LayerNorm.

    forward(input_ids (B, T) long, attention_mask=None (B, T) 1=real 0=pad) -> (B, T, H).
    Pad rows of the output are computed but meaningless (as in transformers).
    Packed rows (several sequences per row, bert_core.masking.pack_rows): `sequence_ids` (B, T) keeps attention
    within each sequence and `position_ids` (B, T) restarts positions at each, so every sequence's output is
    the one it would have alone.
    """

    def __init__(self, config: ModernConfig):
        super().__init__()
        self.config = config
        self.embeddings = ModernBertEmbeddings(config)
        self.layers = nn.ModuleList(ModernBertEncoderLayer(config, i) for i in range(config.num_hidden_layers))
        # post-LN (`pre_norm` off): every block ends normalized already
        self.final_norm = (nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
                           if config.pre_norm else nn.Identity())

    def forward(self, input_ids, attention_mask=None, sequence_ids=None, position_ids=None):
        cfg, T, device = self.config, input_ids.shape[1], input_ids.device
        masks = attention_masks(attention_mask, T, cfg.local_attention, device, sequence_ids)
        rope = {GLOBAL: rotary(T, cfg.head_dim, cfg.global_rope_theta, device, position_ids),
                LOCAL: rotary(T, cfg.head_dim, cfg.local_rope_theta, device, position_ids)} if cfg.rotary else \
            {GLOBAL: (None, None), LOCAL: (None, None)}
        x = self.embeddings(input_ids, position_ids)  # (B, T, H)
        for layer in self.layers:
            x = layer(x, masks[layer.attention_type], *rope[layer.attention_type])
        return self.final_norm(x)  # (B, T, H)


class ModernBertPredictionHead(nn.Module):
    def __init__(self, config: ModernConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.classifier_bias)
        self.act = ACT[config.classifier_activation]()
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)

    def forward(self, x):
        return self.norm(self.act(self.dense(x)))


@dataclass
class MaskedLMOutput:
    loss: torch.Tensor | None  # mean CE over the masked tokens, or None without labels
    logits: torch.Tensor  # (M, V) with labels (masked positions only), else (B, T, V)
    targets: torch.Tensor | None  # (M,) labels row-aligned with logits, or None


class ModernBertForMaskedLM(nn.Module):
    """Masked LM: encoder -> head (dense, act, LayerNorm) -> decoder tied to the word embeddings (+ bias).

    Same contract as BertForPreTraining's MLM half: labels (B, T) are IGNORE_INDEX except at the masked
    positions; only those M positions reach the head, so logits are (M, V) and the loss is their mean CE,
    equal to transformers' dense CE with ignore_index. Without labels, logits are (B, T, V).
    """

    tied_weights = {"decoder.weight": "model.embeddings.tok_embeddings.weight"}  # omitted from release files

    def __init__(self, config: ModernConfig):
        super().__init__()
        self.config = config
        self.model = ModernBertModel(config)
        self.head = ModernBertPredictionHead(config)
        # A module of its own (not F.linear on the embedding) so ZeRO-3 gathers it like any layer.
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=config.decoder_bias)
        self.decoder.weight = self.model.embeddings.tok_embeddings.weight
        init_weights(self)

    def forward(self, input_ids, attention_mask=None, labels=None, mlm_positions=None, sequence_ids=None,
                position_ids=None) -> MaskedLMOutput:
        """`mlm_positions` (M,): flat indices of the masked tokens, optional (bert_core.model.host_packing
        builds them on the host, so the step needs no nonzero() on the device). `sequence_ids`, `position_ids`:
        packed rows (ModernBertModel)."""
        hidden = self.model(input_ids, attention_mask, sequence_ids, position_ids)  # (B, T, H)
        if labels is None:
            return MaskedLMOutput(None, self.decoder(self.head(hidden)), None)  # (B, T, V)
        masked = (mlm_positions if mlm_positions is not None
                  else torch.nonzero(labels.flatten() != IGNORE_INDEX, as_tuple=False).flatten())  # (M,)
        targets = labels.flatten().index_select(0, masked)  # (M,)
        logits = self.decoder(self.head(hidden.flatten(0, 1).index_select(0, masked)))  # (M, V)
        return MaskedLMOutput(masked_lm_loss(logits, targets), logits, targets)


# ----------------------------------------------------------------------------- conversion and release


def to_transformers(model: ModernBertForMaskedLM):
    """-> (transformers.ModernBertConfig, state dict) for `transformers.ModernBertForMaskedLM`.

    The names agree, so the state dict is ours as it is (the tied decoder key included: HF expects it).
    """
    return transformers_config(model.config), {k: v.detach() for k, v in model.state_dict().items()}


def transformers_config(config: ModernConfig):
    """The `transformers.ModernBertConfig` equal to `config`. transformers is imported here (and nowhere else
    in bert_core), so the model itself stays pure PyTorch."""
    import transformers

    if not config.is_transformers:
        off = [name for name in SWITCHES if not getattr(config, name)]
        raise ConfigError(f"model.{off[0]}=false: transformers' ModernBERT has no such switch, so no transformers "
                          f"class is this model (switches off: {off}); it loads with bert_core.modern only")
    d = config.to_hf_dict()
    d.pop("model_type")  # a class attribute of ModernBertConfig, not an argument
    return transformers.ModernBertConfig(**d)


def from_transformers(hf_model) -> ModernBertForMaskedLM:
    """Ours from a `transformers.ModernBertForMaskedLM`, in the same train/eval mode.

    Loaded strictly: a key or shape ours lacks (a feature this model does not implement) raises.
    """
    config = ModernConfig.from_dict(hf_model.config.to_dict()).validate()
    state = {k: v.detach().clone() for k, v in hf_model.state_dict().items()}  # ours shares no memory with theirs
    return from_state_dict(config, state).train(hf_model.training)


def save_pretrained(model: ModernBertForMaskedLM, out_dir: str | os.PathLike,
                    tokenizer_dir: str | os.PathLike | None = None) -> Path:
    """Write a release folder (config.json + model.safetensors [+ tokenizer]) that
    `transformers.AutoModelForMaskedLM.from_pretrained` loads as ModernBertForMaskedLM with no code of ours.

    Written by bert_core.checkpoint.save_state_dict (atomic, safetensors), which asks the config only for
    `to_hf_dict(architectures)`. The tied decoder copy is left out, as transformers does.
    """
    model = unwrap(model)  # torch.compile's wrapper prefixed every key: the tied copy was not found to leave out
    state = {k: v for k, v in model.state_dict().items() if k not in ModernBertForMaskedLM.tied_weights}
    return save_state_dict(state, model.config, out_dir, architectures=[ARCHITECTURE], tokenizer_dir=tokenizer_dir)


def load_pretrained(path: str | os.PathLike) -> ModernBertForMaskedLM:
    """Ours from a ModernBertForMaskedLM folder (ours or transformers'), in eval mode; any missing,
    unexpected or mis-shaped weight raises (only the tied decoder copy may be absent)."""
    path = Path(path)
    config = ModernConfig.from_dict(json.loads((path / CONFIG_NAME).read_text())).validate()
    return from_state_dict(config, read_state_dict(path)).eval()


def from_state_dict(config: ModernConfig, state: dict[str, torch.Tensor]) -> ModernBertForMaskedLM:
    """Ours holding `state`'s tensors (not copies): e.g. weights consolidated from ZeRO on rank 0.

    Built on the meta device and filled by assignment: no time spent on an init that would be overwritten
    (seconds for the large preset) and no second copy in memory. Strict: any missing, unexpected or
    mis-shaped key raises, and so does a decoder that is not the embedding (the tied copy may be absent,
    as in release files). The model has no buffers (RoPE is computed per forward), so nothing stays on meta."""
    state = dict(state)
    embedding = state.get("model.embeddings.tok_embeddings.weight")
    if embedding is not None:
        decoder = state.setdefault("decoder.weight", embedding)
        if decoder is not embedding and not torch.equal(decoder, embedding):
            raise ValueError("decoder.weight differs from model.embeddings.tok_embeddings.weight: ours ties the two")
    with torch.device("meta"):
        model = ModernBertForMaskedLM(config)
    model.load_state_dict(state, strict=True, assign=True)
    model.decoder.weight = model.model.embeddings.tok_embeddings.weight  # assignment replaced the tied Parameter
    return model
