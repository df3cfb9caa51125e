"""bert_core.modern on small configs: presets, config validation and translation, MLM contract, padding."""

import re

import pytest
import torch
import torch.nn.functional as F

from bert_core import config as bert_config
from bert_core import modern
from bert_core.config import ConfigError
from bert_core.model import IGNORE_INDEX


def test_vocab_is_padded_to_a_multiple_of_64():
    assert [modern.pad_vocab_size(n) for n in (1, 64, 65, 30522, 50368)] == [64, 64, 128, 30528, 50368]
    assert modern.ModernConfig().vocab_size == modern.pad_vocab_size(30522)


def test_every_activation_a_config_accepts_is_a_module():
    """modern_config names the activations (no torch there); modern.ACT builds them: the same names, each a module."""
    assert set(modern.ACT) == set(modern.ACTIVATIONS)
    for name in modern.ACTIVATIONS:
        assert isinstance(modern.ACT[name](), torch.nn.Module)


@pytest.mark.parametrize("name", list(modern.PRESETS))
def test_presets_parallel_bert_and_count_their_parameters(name):
    cfg, bert = modern.preset(name, vocab_size=512), bert_config.preset(name, vocab_size=512)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (
        bert.hidden_size, bert.num_hidden_layers, bert.num_attention_heads)
    assert cfg.intermediate_size % 64 == 0 and abs(3 * cfg.intermediate_size - 8 * cfg.hidden_size) <= 96
    assert cfg.head_dim == (32 if name == "tiny" else 64)
    # Non-embedding parameters within 4% of BERT's: I rounds to a multiple of 64; no biases, pooler or NSP head.
    assert cfg.num_parameters(False) == pytest.approx(bert.num_parameters(False), rel=0.04)
    if name in ("tiny", "mini"):
        with torch.device("meta"):
            model = modern.ModernBertForMaskedLM(cfg)
        assert cfg.num_parameters() == sum(p.numel() for p in model.parameters())


def test_parameter_count_follows_the_bias_switches():
    cfg = modern.tiny(vocab_size=512, attention_bias=True, mlp_bias=True, norm_bias=True, classifier_bias=True,
                      decoder_bias=False)
    with torch.device("meta"):
        model = modern.ModernBertForMaskedLM(cfg)
    assert cfg.num_parameters() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("change,message", [
    (dict(num_attention_heads=3), "divisible by model.num_attention_heads"),
    (dict(hidden_size=96, num_attention_heads=32), "(the head dim, 3) must be even: RoPE"),
    (dict(local_attention=15), "model.local_attention must be even"),
    (dict(global_attn_every_n_layers=0), "model.global_attn_every_n_layers must be a positive integer"),
    (dict(hidden_activation="gelu_new"), "model.hidden_activation must be one of"),
    (dict(local_rope_theta=0.0), "model.local_rope_theta must be > 0"),
    (dict(mlp_dropout=1.0), "model.mlp_dropout must be in [0, 1)"),
    (dict(pad_token_id=512), "model.pad_token_id must be in [0, model.vocab_size=512)"),
])
def test_invalid_configs_name_the_field(change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        modern.tiny(**{"vocab_size": 512, **change}).validate()
    with pytest.raises(ConfigError, match="model.preset must be one of"):
        modern.preset("huge")


def test_config_round_trips_through_both_config_json_formats():
    cfg = modern.mini(vocab_size=512, global_attn_every_n_layers=2, local_attention=32, global_rope_theta=8e4,
                      norm_eps=1e-6, decoder_bias=False).validate()
    assert modern.ModernConfig.from_dict(cfg.to_hf_dict()) == cfg
    assert modern.ModernConfig.from_dict(modern.transformers_config(cfg).to_dict()) == cfg
    legacy = {k: v for k, v in cfg.to_hf_dict().items() if k not in ("layer_types", "rope_parameters")}
    legacy.update(global_rope_theta=8e4, local_rope_theta=1e4)  # answerdotai/ModernBERT-base's config.json style
    assert modern.ModernConfig.from_dict(legacy) == cfg
    assert modern.ModernConfig.from_dict({**legacy, "rope_scaling": {"rope_type": "default"}}) == cfg


@pytest.mark.parametrize("change,message", [
    ({"layer_types": ["sliding_attention", "full_attention"]}, "model.layer_types must be global at blocks 0, n"),
    ({"rope_parameters": {"full_attention": {"rope_type": "yarn"}}}, "rope_type must be 'default'"),
    # the legacy key, which transformers merges into both layer types' parameters (a context-extended checkpoint)
    ({"rope_scaling": {"rope_type": "linear", "factor": 4.0}}, r"model.rope_scaling.rope_type must be 'default'.*"
                                                               r"got 'linear'"),
    ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, r"rope_scaling.rope_type must be 'default'.*got 'dynamic'"),
    ({"tie_word_embeddings": False}, "model.tie_word_embeddings must be true"),
])
def test_configs_this_model_cannot_run_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        modern.ModernConfig.from_dict({**modern.tiny(vocab_size=512).to_hf_dict(), **change})


def batch(vocab=512, T=24, lengths=(24, 9)):
    g = torch.Generator().manual_seed(0)
    mask = (torch.arange(T) < torch.tensor(lengths)[:, None]).long()
    ids = torch.randint(1, vocab, (len(lengths), T), generator=g) * mask
    labels = torch.full_like(ids, IGNORE_INDEX)
    chosen = (torch.rand(ids.shape, generator=g) < 0.3) & mask.bool()
    chosen[1, 0] = True
    labels[chosen] = ids[chosen]
    return ids, mask, labels


def test_sparse_mlm_equals_dense_cross_entropy_and_pads_do_not_matter():
    torch.manual_seed(0)
    model = modern.ModernBertForMaskedLM(modern.tiny(vocab_size=512, local_attention=8)).eval()
    ids, mask, labels = batch()
    with torch.no_grad():
        dense, sparse = model(ids, mask), model(ids, mask, labels)
        repadded = model(ids.masked_fill(~mask.bool(), 7), mask)  # other tokens at the pad positions
        alone = model(ids[1:, :9], mask[1:, :9])  # the short row without any padding
    masked = labels != IGNORE_INDEX
    assert dense.logits.shape == (2, 24, 512) and dense.loss is None
    assert sparse.logits.shape == (int(masked.sum()), 512) and torch.equal(sparse.targets, labels[masked])
    torch.testing.assert_close(sparse.logits, dense.logits[masked], rtol=0, atol=1e-6)
    torch.testing.assert_close(sparse.loss, F.cross_entropy(dense.logits.flatten(0, 1), labels.flatten()))
    real = mask.bool()
    torch.testing.assert_close(repadded.logits[real], dense.logits[real], rtol=0, atol=1e-6)
    torch.testing.assert_close(alone.logits[0], dense.logits[1, :9], rtol=0, atol=1e-5)
    assert torch.isfinite(dense.logits).all()  # pad rows too: no query is left without a key


def test_a_training_step_reaches_every_weight_and_bf16_autocast_runs():
    torch.manual_seed(0)
    model = modern.ModernBertForMaskedLM(modern.tiny(vocab_size=512, local_attention=8, embedding_dropout=0.1,
                                                     attention_dropout=0.1, mlp_dropout=0.1))
    ids, mask, labels = batch()
    model(ids, mask, labels).loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    assert model.decoder.weight is model.model.embeddings.tok_embeddings.weight
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.isfinite(model(ids, mask, labels).loss)


def test_eval_mode_turns_every_dropout_off():
    """Evaluation and export score a model trained with dropout as the same weights without it: the attention
    weights' dropout (inside SDPA, no nn.Dropout that .eval() reaches) included."""
    torch.manual_seed(0)
    dropouts = dict(embedding_dropout=0.1, attention_dropout=0.1, mlp_dropout=0.1)
    trained = modern.ModernBertForMaskedLM(modern.tiny(vocab_size=512, local_attention=8, **dropouts)).eval()
    plain = modern.ModernBertForMaskedLM(modern.tiny(vocab_size=512, local_attention=8)).eval()
    plain.load_state_dict(trained.state_dict())
    ids, mask, _ = batch()
    with torch.no_grad():
        torch.testing.assert_close(trained(ids, mask).logits, plain(ids, mask).logits, rtol=0, atol=0)


def test_loading_refuses_a_wrong_shape_or_an_untied_decoder(tmp_path):
    torch.manual_seed(0)
    model = modern.ModernBertForMaskedLM(modern.tiny(vocab_size=512))
    modern.save_pretrained(model, tmp_path / "ok")
    assert modern.load_pretrained(tmp_path / "ok").config == model.config
    modern.save_pretrained(torch.compile(model), tmp_path / "compiled")  # the tied copy left out of a wrapped one
    torch.testing.assert_close(modern.load_pretrained(tmp_path / "compiled").state_dict(), model.state_dict())
    wrong = modern.ModernBertForMaskedLM(modern.tiny(vocab_size=512, intermediate_size=128))
    state = {k: v for k, v in wrong.state_dict().items()}
    with pytest.raises(RuntimeError, match="size mismatch"):
        modern.from_state_dict(model.config, state)
    state = dict(model.state_dict(), **{"decoder.weight": torch.zeros(512, 64)})
    with pytest.raises(ValueError, match="ours ties the two"):
        modern.from_state_dict(model.config, state)


def test_the_task_heads_pooling_and_dropout_travel_in_config_json():
    """transformers' classifier_pooling and classifier_dropout (ModernBERT-base's config.json says "mean"): read,
    written, refused when out of range, and what the heads build."""
    from bert_core import modern_heads

    cfg = modern.tiny(vocab_size=512, classifier_pooling="mean", classifier_dropout=0.1).validate()
    hf = cfg.to_hf_dict()
    assert (hf["classifier_pooling"], hf["classifier_dropout"]) == ("mean", 0.1)
    assert modern.ModernConfig.from_dict(hf) == cfg
    assert modern.transformers_config(cfg).classifier_pooling == "mean"
    assert modern.ModernConfig.from_dict({k: v for k, v in hf.items() if not k.startswith("classifier_p")}) \
        .classifier_pooling == "cls"  # transformers' default
    head = modern_heads.ModernBertForSequenceClassification(cfg, 3)
    assert head.config.classifier_pooling == "mean" and head.drop.p == 0.1
    assert modern_heads.ModernBertForQuestionAnswering(cfg).drop.p == 0.1
    # an argument overrides the config in the head's config too: the one its export writes
    assert modern_heads.ModernBertForSequenceClassification(cfg, 3, classifier_pooling="cls").config \
        .classifier_pooling == "cls"
    with pytest.raises(ConfigError, match=re.escape("model.classifier_pooling must be one of ('cls', 'mean')")):
        modern.tiny(vocab_size=512, classifier_pooling="max").validate()
    with pytest.raises(ConfigError, match=re.escape("model.classifier_dropout must be in [0, 1)")):
        modern.ModernConfig.from_dict({**hf, "classifier_dropout": 1.0}).validate()
