"""bert_core.config's BertConfig and presets: the defaults, sizes and config.json reading that a release's
config.json and transformers rely on (the model's behaviour is tested in test_model.py)."""

import dataclasses

import transformers

from bert_core.config import PRESETS, BertConfig, base


def test_defaults_are_transformers_bert_defaults():
    """A field left out of a config.json, or left untouched by a preset, must mean the same number here and in
    transformers: a default that drifted (layer_norm_eps 1e-5, say) trains and exports consistently, so the parity
    tests, which build both sides from one dict, never see it."""
    ours, theirs = BertConfig(), transformers.BertConfig()
    for f in dataclasses.fields(BertConfig):
        assert getattr(ours, f.name) == getattr(theirs, f.name), f.name
    assert dataclasses.asdict(base()) == dataclasses.asdict(ours)


def test_presets_are_googles_miniatures_with_a_4h_ffn():
    """Turc et al.'s BERT miniatures and the original base/large: (L, H) and an FFN of 4H. num_parameters and the
    model follow whatever the preset says, so only a table can catch a drifted size."""
    sizes = {"tiny": (2, 64), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768),
             "large": (24, 1024)}
    assert set(PRESETS) == set(sizes)
    for name, make in PRESETS.items():
        cfg = make()
        assert (cfg.num_hidden_layers, cfg.hidden_size) == sizes[name], name
        assert cfg.intermediate_size == 4 * cfg.hidden_size, name


def test_a_null_pad_token_id_reads_as_berts_pad():
    """Some config.json files write "pad_token_id": null, and transformers loads them; read as BERT's [PAD], 0,
    not refused by validate()."""
    d = transformers.BertConfig(vocab_size=300).to_dict()
    d["pad_token_id"] = None
    assert BertConfig.from_dict(d).validate().pad_token_id == 0
