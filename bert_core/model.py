"""BERT (Devlin et al. 2018) in one file: encoder, pretraining heads and fine-tuning heads.

Parameter names are exactly those of `transformers` (bert.embeddings.word_embeddings,
bert.encoder.layer.N.attention.self.query, cls.predictions.transform.dense, ...), so checkpoints
move between the two with no key mapping (see bert_core/checkpoint.py).

Two speed levers over the textbook model, both numerically equal to it:
  * unpadding (MosaicBERT): with an attention_mask, pad tokens are dropped right after the
    embedding lookup and every dense layer runs on the (N_real, H) packed tokens. Attention runs
    on the packed tokens too, through FlashAttention's variable-length kernel, where it can (CUDA,
    bf16/fp16); elsewhere it re-pads to (B, T) so scaled_dot_product_attention applies the mask.
    The packing can be built on the host by the collator (`host_packing`), so that a step never
    waits on the GPU to learn how many real or masked tokens a batch has.
  * sparse MLM (NVIDIA BERT, cramming): the MLM transform and the V-wide decoder run only on the
    masked positions, not on all B*T tokens.

Shapes: B batch, T sequence length, H hidden, A heads, D = H/A head dim, I FFN width, V vocab,
N real (non-pad) tokens in the batch, M masked tokens in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bert_core.config import BertConfig

IGNORE_INDEX = -100  # label value for positions that carry no loss (HF / PyTorch convention)


def masked_lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the masked tokens (M, V) / (M,); 0, not NaN, for a micro-batch with none (whole-word
    masking can leave a short row no target: a batch of such rows made a NaN loss, skipped and counted as a
    divergence, and a NaN in the evaluation's sums)."""
    return labelled_mean_ce(logits, targets)


def labelled_mean_ce(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """F.cross_entropy's mean over the targets not `ignore_index`, but 0 (a zero gradient) where every one is: as the
    masked LM's, a tagging micro-batch of words that tokenize to nothing (a zero-width space, U+FFFD), or of QA windows
    whose answers all lie outside, made 0/0 = NaN, skipped as a divergence (a sweep trial with max_nonfinite_steps=1
    failed)."""
    count = (targets != ignore_index).sum().clamp(min=1)
    return F.cross_entropy(logits.float(), targets, ignore_index=ignore_index, reduction="sum") / count

ACT_FNS = {
    "gelu": nn.GELU,  # exact erf GELU, as the original BERT
    "gelu_new": lambda: nn.GELU(approximate="tanh"),
    "relu": nn.ReLU,
}


def init_weights(module: nn.Module, config: BertConfig) -> None:
    """HF's BERT init: N(0, initializer_range) weights, zero biases, unit LayerNorms, zero pad row."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=config.initializer_range)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=config.initializer_range)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def compile_model(model: nn.Module, **compile_kwargs) -> nn.Module:
    """torch.compile with the one dynamo setting this model needs to stay a single graph.

    Packing and sparse MLM use nonzero(), whose output size depends on the data; dynamo only
    traces it with capture_dynamic_output_shape_ops on (a process-wide flag, hence set here at
    the caller's request, never at import). N and M then stay symbolic: no recompile per batch.
    """
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    return torch.compile(model, **compile_kwargs)


# ----------------------------------------------------------------------------- unpadding


@dataclass
class Packing:
    """Where the N real tokens of a padded (B, T) batch live; built once per forward."""

    indices: torch.Tensor  # (N,) flat positions b*T + t of the real tokens, in order
    cu_seqlens: torch.Tensor  # (B+1,) int32 offsets of each row's real tokens in the packed order
    batch: int  # B
    seqlen: int  # T

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "Packing":
        """On the mask's device; nonzero() makes the host wait for the device to learn N."""
        B, T = attention_mask.shape
        indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()  # (N,)
        return cls(indices, _cu_seqlens(attention_mask), B, T)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) -> (N, ...)"""
        return x.flatten(0, 1).index_select(0, self.indices)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, T, ...), zeros at pad positions."""
        out = x.new_zeros(self.batch * self.seqlen, *x.shape[1:])
        return out.index_copy(0, self.indices, x).view(self.batch, self.seqlen, *x.shape[1:])


def _cu_seqlens(attention_mask: torch.Tensor) -> torch.Tensor:
    counts = attention_mask.sum(1, dtype=torch.int32)  # (B,)
    return F.pad(torch.cumsum(counts, 0, dtype=torch.int32), (1, 0))  # (B+1,)


def host_packing(attention_mask: torch.Tensor, mlm_labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Packing inputs built on the host (CPU) from a padded batch, for the collator: passed to the
    model's forward with the batch, they give every tensor its size before the step reaches the GPU,
    so the step has no host sync (nonzero() on device would wait for the GPU each forward).
    Keys: unpad_indices (N,), cu_seqlens (B+1,), and mlm_positions (M,) when labels are given."""
    out = {"unpad_indices": torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten(),
           "cu_seqlens": _cu_seqlens(attention_mask)}
    if mlm_labels is not None:
        out["mlm_positions"] = torch.nonzero(mlm_labels.flatten() != IGNORE_INDEX, as_tuple=False).flatten()
    return out


def flash_varlen_available(x: torch.Tensor, head_dim: int) -> bool:
    """FlashAttention's variable-length kernel: a CUDA device of compute capability 8.0 or newer (torch's kernel
    refuses older ones: V100, T4), half precision, head dim a multiple of 8 up to 256."""
    return (x.is_cuda and x.dtype in (torch.bfloat16, torch.float16) and head_dim % 8 == 0 and head_dim <= 256
            and _capability(x.device) >= (8, 0))


def _capability(device: torch.device) -> tuple[int, int]:
    """Not lru_cached: torch.compile traces through a cache wrapper with a warning (torch 2.11, every compile)."""
    return torch.cuda.get_device_capability(device)


# ----------------------------------------------------------------------------- encoder


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids, position_ids):
        # Any matching leading shape: (B, T) on the padded path, (N,) on the packed one.
        x = (self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
             + self.token_type_embeddings(token_type_ids))  # (..., H)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        H = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.query = nn.Linear(H, H)
        self.key = nn.Linear(H, H)
        self.value = nn.Linear(H, H)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x, mask, packing: Packing | None):
        # x: (B, T, H), or (N, H) when packed; mask: (B, 1, 1, T) bool, True = attend, or None
        q, k, v = self.query(x), self.key(x), self.value(x)
        dropout_p = self.dropout_p if self.training else 0.0
        if packing is not None and flash_varlen_available(q, q.shape[-1] // self.num_heads):
            N, H = q.shape
            q, k, v = (t.view(N, self.num_heads, H // self.num_heads) for t in (q, k, v))  # (N, A, D)
            # Each row's real tokens attend to each other only: the same set the padding mask allows.
            # T bounds every row's length, so no device value is read back for max_q / max_k.
            y = torch.ops.aten._flash_attention_forward(
                q, k, v, packing.cu_seqlens, packing.cu_seqlens, packing.seqlen, packing.seqlen,
                dropout_p, False, False)[0]  # (N, A, D)
            return y.reshape(N, H)
        if packing is not None:  # attention needs the (B, T) grid back
            q, k, v = packing.unpack(q), packing.unpack(k), packing.unpack(v)  # (B, T, H)
        B, T, H = q.shape
        q, k, v = (t.view(B, T, self.num_heads, H // self.num_heads).transpose(1, 2) for t in (q, k, v))  # (B, A, T, D)
        # Pad keys are masked out; pad queries attend normally and are dropped below (packed)
        # or ignored downstream (padded), exactly as HF.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        y = y.transpose(1, 2).reshape(B, T, H)  # (B, T, H)
        return packing.pack(y) if packing is not None else y


class BertAddNorm(nn.Module):
    """Projection, dropout, residual add, LayerNorm: HF's BertSelfOutput and BertOutput (post-LN)."""

    def __init__(self, in_features: int, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, h, residual):
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)  # the odd name is HF's; it keys the checkpoint
        self.output = BertAddNorm(config.hidden_size, config)

    def forward(self, x, mask, packing):
        return self.output(self.self(x, mask, packing), x)


class BertIntermediate(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACT_FNS[config.hidden_act]()

    def forward(self, x):
        return self.act(self.dense(x))  # (..., I)


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertAddNorm(config.intermediate_size, config)

    def forward(self, x, mask, packing):
        x = self.attention(x, mask, packing)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x, mask, packing):
        for layer in self.layer:
            x = layer(x, mask, packing)
        return x


class BertPooler(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, sequence_output):
        return torch.tanh(self.dense(sequence_output[:, 0]))  # [CLS]: (B, H)


def _left_padded(attention_mask: torch.Tensor, unpad_indices) -> bool:
    """Whether a row starts with a pad. Not asked under torch.compile (a graph break) nor of a device batch packed on
    the host (a host sync per step): the collators pad on the right."""
    if torch.compiler.is_compiling() or (unpad_indices is not None and attention_mask.device.type != "cpu"):
        return False
    return not bool(attention_mask[:, 0].all())


class BertModel(nn.Module):
    """Embeddings -> L post-LN transformer blocks -> pooler.

    forward(input_ids (B, T) long, token_type_ids=None, attention_mask=None (B, T) 1=real 0=pad,
            unpad_indices=None (N,), cu_seqlens=None (B+1,): `host_packing(attention_mask)`, optional)
      -> (sequence_output (B, T, H), pooled_output (B, H) or None without a pooler).
    With an attention_mask and `unpad` on (the default), pad rows of sequence_output are zeros;
    real rows equal the padded computation. Set `unpad = False` for the plain padded reference path.
    A batch padded on the left (a pad at position 0) runs the padded path where a pooler reads position 0, as
    transformers does (unpadded, the pooler read a zero row); compiled, the model takes [CLS] at position 0.
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.unpad = True
        init_weights(self, config)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, unpad_indices=None, cu_seqlens=None):
        B, T = input_ids.shape
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        position_ids = torch.arange(T, device=input_ids.device).expand(B, T)  # (B, T)
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)

        if attention_mask is not None and self.unpad and not (
                self.pooler is not None and _left_padded(attention_mask, unpad_indices)):
            packing = (Packing(unpad_indices, cu_seqlens, B, T) if unpad_indices is not None
                       else Packing.from_mask(attention_mask))
            x = self.embeddings(*(packing.pack(t) for t in (input_ids, token_type_ids, position_ids)))  # (N, H)
            x = packing.unpack(self.encoder(x, mask, packing))  # (B, T, H)
        else:
            x = self.encoder(self.embeddings(input_ids, token_type_ids, position_ids), mask, None)  # (B, T, H)
        return x, (self.pooler(x) if self.pooler is not None else None)


# ----------------------------------------------------------------------------- pretraining


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACT_FNS[config.hidden_act]()
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x):
        return self.LayerNorm(self.act(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        # Weight tied to the word embeddings by the owner; a module of its own (not a bare
        # F.linear on the embedding weight) so ZeRO-3's per-module parameter gathering sees it.
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))  # output-only bias, as HF

    def forward(self, x):
        logits = self.decoder(self.transform(x))  # (..., V)
        return logits + self.bias.to(logits.dtype)  # keep autocast's bf16: V-wide fp32 logits are big


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


@dataclass
class PreTrainingOutput:
    loss: torch.Tensor | None  # mlm_loss + nsp_loss (whichever labels were given), else None
    mlm_loss: torch.Tensor | None
    nsp_loss: torch.Tensor | None
    mlm_logits: torch.Tensor  # (M, V) with mlm_labels (masked positions only), else (B, T, V)
    nsp_logits: torch.Tensor  # (B, 2); class 0 = B follows A, 1 = B is random
    mlm_targets: torch.Tensor | None  # (M,) labels row-aligned with mlm_logits, or None


class BertForPreTraining(nn.Module):
    """Masked LM + next-sentence prediction.

    Contract with the data pipeline: mlm_labels is (B, T), IGNORE_INDEX everywhere except the
    masked positions, where it holds the original token id; only those M positions reach the
    MLM head, so mlm_logits is (M, V) and accuracy is (mlm_logits.argmax(-1) == mlm_targets).
    The MLM loss is the mean over masked tokens, equal to HF's dense CE with ignore_index.
    """

    # Serialised checkpoints omit the tied copy (as HF does); checkpoint.py reads this map.
    tied_weights = {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight"}

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        init_weights(self.cls, config)
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, mlm_labels=None,
                next_sentence_label=None, unpad_indices=None, cu_seqlens=None,
                mlm_positions=None) -> PreTrainingOutput:
        """`unpad_indices`, `cu_seqlens`, `mlm_positions`: optional, from `host_packing` (no host sync)."""
        sequence_output, pooled_output = self.bert(input_ids, token_type_ids, attention_mask,
                                                   unpad_indices, cu_seqlens)  # (B, T, H), (B, H)
        nsp_logits = self.cls.seq_relationship(pooled_output)  # (B, 2)

        mlm_loss = nsp_loss = mlm_targets = None
        if mlm_labels is None:
            mlm_logits = self.cls.predictions(sequence_output)  # (B, T, V)
        else:
            masked = (mlm_positions if mlm_positions is not None
                      else torch.nonzero(mlm_labels.flatten() != IGNORE_INDEX, as_tuple=False).flatten())  # (M,)
            hidden = sequence_output.flatten(0, 1).index_select(0, masked)  # (M, H)
            mlm_targets = mlm_labels.flatten().index_select(0, masked)  # (M,)
            mlm_logits = self.cls.predictions(hidden)  # (M, V)
            mlm_loss = masked_lm_loss(mlm_logits, mlm_targets)
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label.view(-1))

        if mlm_loss is not None and nsp_loss is not None:
            loss = mlm_loss + nsp_loss
        else:
            loss = mlm_loss if mlm_loss is not None else nsp_loss
        return PreTrainingOutput(loss, mlm_loss, nsp_loss, mlm_logits, nsp_logits, mlm_targets)


# ----------------------------------------------------------------------------- fine-tuning heads


@dataclass
class HeadOutput:
    loss: torch.Tensor | None  # None without labels
    logits: torch.Tensor  # sequence: (B, num_labels); token: (B, T, num_labels); QA: (B, T, 2)

    @property
    def start_logits(self) -> torch.Tensor:  # QA only: (B, T)
        return self.logits[..., 0]

    @property
    def end_logits(self) -> torch.Tensor:  # QA only: (B, T)
        return self.logits[..., 1]


class BertForSequenceClassification(nn.Module):
    """Pooled [CLS] -> dropout -> linear. num_labels == 1 is regression (MSE), as HF; `multi_label`: one
    independent yes/no per label (sigmoid, binary cross-entropy over (B, num_labels) 0/1 targets), HF's
    problem_type "multi_label_classification"; `regression`: HF's "regression" with several outputs (MSE over
    (B, num_labels) targets), which a checkpoint states and an argmax would misread."""

    def __init__(self, config: BertConfig, num_labels: int = 2, multi_label: bool = False, regression: bool = False):
        super().__init__()
        if multi_label and regression:
            raise ValueError("a sequence head is multi_label or regression, not both")
        self.config, self.num_labels, self.multi_label, self.regression = config, num_labels, multi_label, regression
        self.bert = BertModel(config)
        self.dropout = nn.Dropout(config.head_dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        init_weights(self.classifier, config)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None, unpad_indices=None,
                cu_seqlens=None) -> HeadOutput:
        _, pooled = self.bert(input_ids, token_type_ids, attention_mask, unpad_indices, cu_seqlens)  # (B, H)
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        loss = None if labels is None else sequence_loss(logits, labels, self.problem_type)
        return HeadOutput(loss, logits)

    @property
    def problem_type(self) -> str:
        return problem_type(self.num_labels, self.multi_label, self.regression)


def problem_type(num_labels: int, multi_label: bool, regression: bool = False) -> str:
    """HF's name for what a sequence head does: its config says it, so HF losses and pipelines do the same."""
    if num_labels == 1 or regression:
        return "regression"
    return "multi_label_classification" if multi_label else "single_label_classification"


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor, kind: str) -> torch.Tensor:
    """A sequence head's loss for its `problem_type`, as HF computes it: MSE, BCE-with-logits over (B, C) 0/1
    targets, or cross-entropy."""
    if kind == "regression":  # (B,) or (B, 1) labels alike: (B,) against (B, 1) broadcast to (B, B)
        return F.mse_loss(logits.reshape(-1).float(), labels.reshape(-1).float())
    if kind == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())
    return F.cross_entropy(logits.float(), labels.view(-1))


class BertForTokenClassification(nn.Module):
    """Per-token linear head (NER, POS); labels IGNORE_INDEX at sub-word continuations and pads."""

    def __init__(self, config: BertConfig, num_labels: int = 2):
        super().__init__()
        self.config, self.num_labels = config, num_labels
        self.bert = BertModel(config, add_pooling_layer=False)  # as HF: no pooler weights
        self.dropout = nn.Dropout(config.head_dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        init_weights(self.classifier, config)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None, unpad_indices=None,
                cu_seqlens=None) -> HeadOutput:
        sequence_output, _ = self.bert(input_ids, token_type_ids, attention_mask, unpad_indices, cu_seqlens)  # (B, T, H)
        logits = self.classifier(self.dropout(sequence_output))  # (B, T, num_labels)
        loss = None
        if labels is not None:
            loss = labelled_mean_ce(logits.flatten(0, 1), labels.flatten())
        return HeadOutput(loss, logits)


class BertForQuestionAnswering(nn.Module):
    """Extractive QA: start/end logits per token; loss is the mean of start and end CE, as HF."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config, self.num_labels = config, 2
        self.bert = BertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        init_weights(self.qa_outputs, config)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, start_positions=None,
                end_positions=None, unpad_indices=None, cu_seqlens=None) -> HeadOutput:
        sequence_output, _ = self.bert(input_ids, token_type_ids, attention_mask, unpad_indices, cu_seqlens)  # (B, T, H)
        logits = self.qa_outputs(sequence_output)  # (B, T, 2)
        return HeadOutput(span_loss(logits, start_positions, end_positions, attention_mask), logits)


def span_loss(logits: torch.Tensor, start_positions, end_positions, attention_mask=None) -> torch.Tensor | None:
    """Extractive QA's loss from (B, T, 2) start/end logits: the mean of start and end cross-entropy, as HF;
    None without positions. Answers truncated out of the window point past the end and are ignored (HF's rule).

    The softmax runs over each window's real tokens only (`attention_mask`): HF's runs over its pads too, whose
    logits are whatever the encoder gives a pad, and an unpadded encoder gives it none (the head's bias alone): a
    window's loss then changed with the longest window batched beside it (3.93 alone, 5.68 beside a 128-token one)."""
    if start_positions is None or end_positions is None:
        return None
    T = logits.shape[1]
    start, end = start_positions.reshape(-1).clamp(0, T), end_positions.reshape(-1).clamp(0, T)  # (B,) or (B, 1)
    logits = logits.float()
    if attention_mask is not None:
        logits = logits.masked_fill(~attention_mask.bool()[..., None], torch.finfo(torch.float32).min)
    return (labelled_mean_ce(logits[..., 0], start, ignore_index=T)
            + labelled_mean_ce(logits[..., 1], end, ignore_index=T)) / 2
