"""The modern encoder's architecture switches (pre_norm, glu, rotary; bench/recipe_ladder.py's rungs): with every
switch off, biases on and every block global, it is BERT's masked LM exactly; each switch alone changes the model;
a model with a switch off is ours only, and its release folder says so to transformers."""

import itertools

import numpy as np

import pytest
import torch

from bert_core import modern
from bert_core.config import ConfigError, tiny as bert_tiny
from bert_core.model import BertForPreTraining
from bert_core.modern_config import VARIANT_MODEL_TYPE

VOCAB = 100


def bert_layout(**switches) -> modern.ModernConfig:
    """The modern model in BERT's layout: post-LN, plain GELU feed-forward of 4H, learned positions, biases,
    every block global, BERT's epsilon; `switches` turn parts back on."""
    fields = dict(vocab_size=VOCAB, pre_norm=False, glu=False, rotary=False, attention_bias=True, mlp_bias=True,
                  norm_bias=True, classifier_bias=True, global_attn_every_n_layers=1, max_position_embeddings=512,
                  norm_eps=1e-12)
    return modern.tiny(**{**fields, **switches}).validate()


def from_bert(bert: BertForPreTraining) -> modern.ModernBertForMaskedLM:
    """BERT's weights in the modern model's BERT layout. Segment 0's type embedding is folded into the positions
    (every token here is in segment 0); Q, K and V are stacked into Wqkv."""
    s = {k: v.detach().clone() for k, v in bert.state_dict().items()}
    e = "bert.embeddings."
    out = {"model.embeddings.tok_embeddings.weight": s[e + "word_embeddings.weight"],
           "model.embeddings.position_embeddings.weight": s[e + "position_embeddings.weight"]
           + s[e + "token_type_embeddings.weight"][0],
           "model.embeddings.norm.weight": s[e + "LayerNorm.weight"], "model.embeddings.norm.bias": s[e + "LayerNorm.bias"],
           "head.dense.weight": s["cls.predictions.transform.dense.weight"],
           "head.dense.bias": s["cls.predictions.transform.dense.bias"],
           "head.norm.weight": s["cls.predictions.transform.LayerNorm.weight"],
           "head.norm.bias": s["cls.predictions.transform.LayerNorm.bias"],
           "decoder.bias": s["cls.predictions.bias"]}
    for i in range(bert.config.num_hidden_layers):
        b, m = f"bert.encoder.layer.{i}.", f"model.layers.{i}."
        for kind in ("weight", "bias"):
            out[m + "attn.Wqkv." + kind] = torch.cat([s[b + f"attention.self.{p}.{kind}"]
                                                      for p in ("query", "key", "value")])
            out[m + "attn.Wo." + kind] = s[b + "attention.output.dense." + kind]
            out[m + "attn_norm." + kind] = s[b + "attention.output.LayerNorm." + kind]
            out[m + "mlp.Wi." + kind] = s[b + "intermediate.dense." + kind]
            out[m + "mlp.Wo." + kind] = s[b + "output.dense." + kind]
            out[m + "mlp_norm." + kind] = s[b + "output.LayerNorm." + kind]
    return modern.from_state_dict(bert_layout(), out).eval()


def batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (3, 16), generator=g)
    mask = (torch.arange(16) < torch.tensor([16, 11, 5])[:, None]).long()
    return ids * mask, mask


def test_every_switch_off_is_berts_masked_lm():
    torch.manual_seed(0)
    bert = BertForPreTraining(bert_tiny(vocab_size=VOCAB, hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0)).eval()
    ours = from_bert(bert)
    ids, mask = batch()
    with torch.no_grad():
        want = bert(ids, torch.zeros_like(ids), mask).mlm_logits
        got = ours(ids, mask).logits
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("switch", ["pre_norm", "glu", "rotary"])
def test_each_switch_alone_changes_the_model(switch):
    """Turned on alone over BERT's layout (same seed), a switch changes the logits; the rest stays BERT's."""
    ids, mask = batch()
    outs = {}
    for name, cfg in (("bert", bert_layout()), (switch, bert_layout(**{switch: True}))):
        torch.manual_seed(0)
        model = modern.ModernBertForMaskedLM(cfg).eval()
        with torch.no_grad():
            for p in model.parameters():  # weights of a trained size: at init the residual branches are ~0
                p.normal_(0, 0.3)
            outs[name] = model(ids, mask).logits
    real = mask.bool()
    assert (outs["bert"][real] - outs[switch][real]).abs().max() > 0.1


@pytest.mark.parametrize("pre_norm, glu, rotary", list(itertools.product([True, False], repeat=3)))
def test_parameter_count_of_every_combination(pre_norm, glu, rotary):
    cfg = modern.tiny(vocab_size=VOCAB, pre_norm=pre_norm, glu=glu, rotary=rotary, max_position_embeddings=512)
    model = modern.ModernBertForMaskedLM(cfg)
    assert cfg.num_parameters() == sum(p.numel() for p in model.parameters())
    assert cfg.intermediate_size == (192 if glu else 256)  # the same feed-forward parameters either way
    reference = modern.tiny(vocab_size=VOCAB).num_parameters(include_embeddings=False)
    # the GLU width rounds to a multiple of 64 (tiny: 192 for 8H/3 = 171): within 10% at this size
    assert cfg.num_parameters(include_embeddings=False) == pytest.approx(reference, rel=0.1)


def test_a_variant_is_ours_only_and_its_folder_says_so(tmp_path):
    import transformers

    torch.manual_seed(0)
    model = modern.ModernBertForMaskedLM(modern.tiny(vocab_size=VOCAB, glu=False)).eval()
    folder = modern.save_pretrained(model, tmp_path / "variant")
    config = (folder / "config.json").read_text()
    assert f'"model_type": "{VARIANT_MODEL_TYPE}"' in config and '"glu": false' in config
    back = modern.load_pretrained(folder)
    assert back.config == model.config
    ids, mask = batch()
    with torch.no_grad():
        torch.testing.assert_close(back(ids, mask).logits, model(ids, mask).logits)
    with pytest.raises(ConfigError, match=r"model.glu=false: transformers' ModernBERT has no such switch"):
        modern.to_transformers(model)
    with pytest.raises((ValueError, KeyError)):  # transformers refuses the folder, rather than load the wrong model
        transformers.AutoModelForMaskedLM.from_pretrained(folder)
    # ModernBERT itself still writes exactly transformers' config: no key of ours in it
    plain = modern.tiny(vocab_size=VOCAB).to_hf_dict()
    assert plain["model_type"] == "modernbert" and not {"pre_norm", "glu", "rotary"} & set(plain)


@pytest.mark.parametrize("rotary", [True, False])
def test_a_packed_sequence_sees_only_itself(rotary):
    """Packed rows (train.packing): each sequence's logits equal its logits run alone, global and local blocks
    alike (a window of 4 here, so local masks matter), with rotary or learned positions restarting per sequence."""
    from bert_core.masking import pack_rows

    torch.manual_seed(0)
    cfg = modern.tiny(vocab_size=VOCAB, num_hidden_layers=3, global_attn_every_n_layers=2, local_attention=4,
                      rotary=rotary, max_position_embeddings=64)
    model = modern.ModernBertForMaskedLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(5, VOCAB, (n,), generator=g) for n in (5, 9, 3, 7, 12, 2)]
    bins = pack_rows(np.array([len(s) for s in seqs]), 16)
    assert len(bins) < len(seqs)
    ids, seq_ids, pos = (torch.zeros(len(bins), 16, dtype=torch.long) for _ in range(3))
    for row, members in enumerate(bins):
        at = 0
        for k, i in enumerate(members, start=1):
            n = len(seqs[i])
            ids[row, at:at + n], seq_ids[row, at:at + n], pos[row, at:at + n] = seqs[i], k, torch.arange(n)
            at += n
    with torch.no_grad():
        packed = model(ids, (seq_ids > 0).long(), sequence_ids=seq_ids, position_ids=pos).logits
        for row, members in enumerate(bins):
            for k, i in enumerate(members, start=1):
                alone = model(seqs[i][None]).logits[0]
                torch.testing.assert_close(packed[row][seq_ids[row] == k], alone, atol=1e-5, rtol=1e-5)
