"""Fine-tuning heads on the modern encoder (bert_core/modern.py): sequence classification, token classification,
extractive QA, with the call contract of bert_core/model.py's BERT heads, so the fine-tuning loop runs either.

Parameter names are exactly those of transformers' classes of the same names (model.*, head.dense, head.norm,
classifier), so a state dict moves between the two unchanged. Unlike BERT's heads, all three put the MLM
head's dense -> act -> LayerNorm (`head`, ModernBertPredictionHead) between the encoder and the classifier,
and QA's start/end layer is `classifier` (two outputs), not BERT's `qa_outputs`.

Pooling and dropout come from the config (`classifier_pooling`, `classifier_dropout`: transformers' keys, read from
and written to config.json), so a fine-tune keeps its checkpoint's and its export loads in transformers as the same
head. An argument given here overrides the config's value in `self.config` too, which the export writes.

ModernBERT has no segment embeddings: every forward accepts `token_type_ids` and ignores it, and ignores
`unpad_indices` / `cu_seqlens` too (the encoder runs padded; see bert_core/modern.py).

Shapes: B batch, T sequence length, H hidden, C num_labels.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from bert_core.model import HeadOutput, labelled_mean_ce, problem_type, sequence_loss, span_loss
from bert_core.modern import ModernBertModel, ModernBertPredictionHead, ModernConfig, init_weights


class _ModernBertClassifierHead(nn.Module):
    """encoder -> head (dense, act, LayerNorm) -> dropout -> classifier; the three heads differ in what they pool
    and in the loss."""

    def __init__(self, config: ModernConfig, num_labels: int, **overrides):
        super().__init__()
        given = {k: v for k, v in overrides.items() if v is not None}  # None: the config's
        config = dataclasses.replace(config, **given).validate() if given else config
        self.config, self.num_labels = config, num_labels
        self.model = ModernBertModel(config)
        self.head = ModernBertPredictionHead(config)
        self.drop = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        # modern.init_weights reads only .config, .model, .head and the module tree, all of which this has;
        # it also zeroes the classifier's bias. The classifier's weight then gets transformers' "final_out" std.
        init_weights(self)
        std, c = config.hidden_size ** -0.5, config.initializer_cutoff_factor
        nn.init.trunc_normal_(self.classifier.weight, std=std, a=-c * std, b=c * std)

    def classify(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.drop(self.head(hidden)))  # (..., H) -> (..., C)


class ModernBertForSequenceClassification(_ModernBertClassifierHead):
    """Pooled hidden state -> head -> dropout -> linear. Pooling per the config's `classifier_pooling` (transformers'):
    "cls" takes token 0, "mean" averages the real tokens. Losses as BertForSequenceClassification: num_labels == 1 is
    regression (MSE), `multi_label` is BCE-with-logits over (B, C) 0/1 targets, otherwise cross-entropy."""

    def __init__(self, config: ModernConfig, num_labels: int = 2, multi_label: bool = False, *,
                 classifier_pooling: str | None = None, classifier_dropout: float | None = None):
        super().__init__(config, num_labels, classifier_pooling=classifier_pooling,
                         classifier_dropout=classifier_dropout)
        self.multi_label = multi_label

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None, unpad_indices=None,
                cu_seqlens=None) -> HeadOutput:
        hidden = self.model(input_ids, attention_mask)  # (B, T, H)
        if self.config.classifier_pooling == "cls":
            pooled = hidden[:, 0]  # (B, H)
        else:
            mask = torch.ones(hidden.shape[:2], device=hidden.device) if attention_mask is None else attention_mask
            pooled = (hidden * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)  # (B, H), as HF
        logits = self.classify(pooled)  # (B, C)
        loss = None if labels is None else sequence_loss(logits, labels, self.problem_type)
        return HeadOutput(loss, logits)

    @property
    def problem_type(self) -> str:
        return problem_type(self.num_labels, self.multi_label)


class ModernBertForTokenClassification(_ModernBertClassifierHead):
    """Per-token head (NER, POS); labels IGNORE_INDEX at sub-word continuations and pads."""

    def __init__(self, config: ModernConfig, num_labels: int = 2, *, classifier_dropout: float | None = None):
        super().__init__(config, num_labels, classifier_dropout=classifier_dropout)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None, unpad_indices=None,
                cu_seqlens=None) -> HeadOutput:
        logits = self.classify(self.model(input_ids, attention_mask))  # (B, T, C)
        loss = None
        if labels is not None:
            loss = labelled_mean_ce(logits.flatten(0, 1), labels.flatten())
        return HeadOutput(loss, logits)


class ModernBertForQuestionAnswering(_ModernBertClassifierHead):
    """Extractive QA: start/end logits per token; loss is the mean of start and end CE, as HF."""

    def __init__(self, config: ModernConfig, *, classifier_dropout: float | None = None):
        # two outputs: transformers sizes it by config.num_labels, 2 by default
        super().__init__(config, 2, classifier_dropout=classifier_dropout)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, start_positions=None,
                end_positions=None, unpad_indices=None, cu_seqlens=None) -> HeadOutput:
        logits = self.classify(self.model(input_ids, attention_mask))  # (B, T, 2)
        return HeadOutput(span_loss(logits, start_positions, end_positions, attention_mask), logits)
