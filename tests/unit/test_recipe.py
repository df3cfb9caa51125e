"""model.recipe and the objective switches (issue 31): what each recipe sets, what is refused before any cluster
work, the MLM-only objectives, and a modern release taken by fine-tuning as transformers takes it."""

import json
import math
from pathlib import Path

import pytest
import torch

from bert_core.config import BertConfig, ConfigError
from bert_core.model import IGNORE_INDEX
from bert_core.modern import ModernBertForMaskedLM, save_pretrained
from bert_core.modern_config import ModernConfig, tiny as modern_tiny
from jobs.config.finetune import FinetuneConfig
from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig
from jobs.engine.objectives import MaskedLMObjective, PretrainingObjective, objective_for
from tests.unit.test_objectives import B, VOCAB, pretraining_batch

ROOT = Path(__file__).resolve().parents[2]


def pretrain(*overrides: str) -> PretrainConfig:
    return load_config(PretrainConfig, ROOT / "configs/pretrain/quickstart.yaml", list(overrides))


# -- the config ------------------------------------------------------------------------------------

def test_bert_stays_the_default_with_nsp_and_fifteen_percent():
    cfg = pretrain()
    assert type(cfg.model) is BertConfig and cfg.recipe == "bert"
    assert (cfg.train.nsp, cfg.train.masking.rate, cfg.data.nsp_random_prob) == (True, 0.15, 0.5)


def test_modern_recipe_turns_nsp_off_masks_thirty_percent_and_pairs_contiguous_text():
    cfg = pretrain("model.recipe=modern")
    assert type(cfg.model) is ModernConfig and cfg.recipe == "modern" and cfg.model == modern_tiny()
    assert (cfg.train.nsp, cfg.train.masking.rate, cfg.data.nsp_random_prob) == (False, 0.3, 0.0)
    assert cfg.train.packing and not pretrain().train.packing and not pretrain("train.nsp=false").train.packing
    assert pretrain("model.recipe=modern", "model.preset=mini").model == modern_tiny(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=704)


def test_what_the_config_says_wins_over_the_recipe():
    cfg = pretrain("model.recipe=modern", "train.masking.rate=0.2", "data.nsp_random_prob=0.25",
                   "model.global_attn_every_n_layers=1")
    assert (cfg.train.masking.rate, cfg.data.nsp_random_prob, cfg.model.global_attn_every_n_layers) == (0.2, 0.25, 1)
    static = pretrain("model.recipe=modern", "data.masking=static")
    assert static.data.mask_rate == 0.3  # masks drawn when the examples are prepared follow the recipe too


def test_nsp_off_on_bert_alone_only_changes_the_pairs_and_the_loss():
    cfg = pretrain("train.nsp=false")
    assert type(cfg.model) is BertConfig and (cfg.train.nsp, cfg.data.nsp_random_prob) == (False, 0.0)
    assert cfg.train.masking.rate == 0.15


def test_nsp_on_with_no_random_pairs_is_refused():
    """Every NSP label 'follows': a head that always says so scores 1.0, and its loss and accuracy tell nothing."""
    with pytest.raises(ConfigError, match=r"data.nsp_random_prob=0 with train.nsp=true.*set train.nsp=false"):
        pretrain("data.nsp_random_prob=0")
    assert pretrain("data.nsp_random_prob=0", "train.nsp=false").data.nsp_random_prob == 0


def test_the_recipe_survives_the_trip_to_the_workers():
    for cfg in (pretrain("model.recipe=modern", "model.num_hidden_layers=3"), pretrain("train.nsp=false")):
        back = PretrainConfig.from_dict(cfg.to_dict())
        assert back == cfg and type(back.model) is type(cfg.model)


@pytest.mark.parametrize("overrides, match", [
    (["model.recipe=roberta"], r"model.recipe must be one of \('bert', 'modern'\), got 'roberta'"),
    (["model.recipe=modern", "train.nsp=true"], r"train.nsp must be false with model.recipe=modern"),
    (["model.recipe=modern", "model.type_vocab_size=2"], r"unknown key 'model.type_vocab_size'"),
    (["model.hidden_activation=gelu"], r"unknown key 'model.hidden_activation'"),  # a modern field on BERT
    (["model.recipe=modern", "model.num_attention_heads=3"], r"model.hidden_size \(64\) must be divisible"),
    (["model.recipe=modern", "deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1"],
     r"deepspeed.pipeline_stages > 1 needs model.recipe=bert and train.nsp=true"),
    (["train.nsp=false", "deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1"],
     r"deepspeed.pipeline_stages > 1 needs model.recipe=bert and train.nsp=true"),
    (["train.nsp=false", "train.packing=true"], r"train.packing=true needs model.recipe=modern"),
])
def test_a_recipe_it_cannot_run_is_refused_naming_the_field(overrides, match):
    with pytest.raises(ConfigError, match=match):
        pretrain(*overrides)


def test_a_bert_checkpoint_is_not_continued_with_another_activation_or_norm_epsilon(tmp_path):
    """gelu-trained weights loaded into relu's same shapes and trained on, the release saying relu: the BERT basis
    holds what the shapes compute too; a checkpoint recorded before it held them continues unchanged."""
    from types import SimpleNamespace

    from jobs.pretrain import continuation_basis
    from jobs.runtime import resubmit

    prepared = SimpleNamespace(path="/data/prepared/abc")
    bert = continuation_basis(pretrain(), prepared)
    assert continuation_basis(pretrain("model.hidden_act=relu"), prepared) != bert
    assert continuation_basis(pretrain("model.layer_norm_eps=1e-5"), prepared) != bert
    older = {k: v for k, v in bert.items() if k not in ("model.hidden_act", "model.layer_norm_eps")}
    resubmit.record(tmp_path, "run-a", 10, older)
    (tmp_path.parent / "snap").mkdir()
    run = tmp_path.parent / "snap"
    tmp_path.rename(run / "checkpoint_1")
    (run / "checkpoint_manager_snapshot.json").write_text(
        '{"latest_checkpoint_result": {"version": 0, "checkpoint_dir_name": "checkpoint_1", "metrics": {}}}')
    added = tuple(f"model.{k}" for k in ("hidden_act", "layer_norm_eps"))
    assert resubmit.check(run, bert, added=added)["step"] == 10


def test_a_modern_checkpoint_is_not_continued_as_a_bert():
    from types import SimpleNamespace

    from jobs.pretrain import continuation_basis

    prepared = SimpleNamespace(path="/data/prepared/abc")
    bert = continuation_basis(pretrain(), prepared)
    modern = continuation_basis(pretrain("model.recipe=modern"), prepared)
    assert "model.recipe" not in bert and "model.type_vocab_size" in bert  # BERT's basis as before recipes existed
    assert modern["model.recipe"] == "modern" and "model.type_vocab_size" not in modern
    assert continuation_basis(pretrain("model.recipe=modern", "model.embedding_dropout=0.1"), prepared) == modern
    # the fine-tuning heads' pooling is no part of a pretraining checkpoint (and older records lack the field)
    assert "model.classifier_pooling" not in modern
    assert continuation_basis(pretrain("model.recipe=modern", "model.classifier_pooling=mean"), prepared) == modern


@pytest.mark.parametrize("change", ids=lambda change: change[0], argvalues=[
    ("model.glu=false", "tracking.registered_model="),  # a switch (a variant is not registered)
    ("model.local_attention=64",), ("model.global_attn_every_n_layers=2",),  # the attention pattern
    ("model.global_rope_theta=10000.0",), ("model.local_rope_theta=160000.0",),  # the positions
])
def test_a_modern_checkpoint_is_not_continued_as_another_modern_model(change):
    """Each of these computes something else with the same weights: a run of it never continues the other's
    checkpoint (its basis differs)."""
    from types import SimpleNamespace

    from jobs.pretrain import continuation_basis

    prepared = SimpleNamespace(path="/data/prepared/abc")
    modern = continuation_basis(pretrain("model.recipe=modern"), prepared)
    assert continuation_basis(pretrain("model.recipe=modern", *change), prepared) != modern


def test_the_modern_vocabulary_is_padded_to_a_multiple_of_64():
    from jobs.pretrain import model_vocab_size

    assert model_vocab_size(pretrain("model.recipe=modern"), 1000) == 1024
    assert model_vocab_size(pretrain("model.recipe=modern"), 1024) == 1024
    assert model_vocab_size(pretrain(), 1000) == 1000


# -- the objectives --------------------------------------------------------------------------------

def test_without_nsp_the_loss_is_mlm_alone_and_the_nsp_head_is_frozen_not_decayed():
    """train.nsp=false on BERT: the pooler and NSP head stay (the release has them), frozen: out of the optimizer's
    groups (weight decay would wear them down with no loss to hold them), while every trainable parameter gets a
    gradient from the MLM loss alone."""
    from jobs.engine.ds_config import param_groups
    from jobs.workers.pretrain_engine import pretraining_model

    torch.manual_seed(0)
    cfg = pretrain("train.nsp=false", f"model.vocab_size={VOCAB}", "model.hidden_dropout_prob=0",
                   "model.attention_probs_dropout_prob=0")
    model, objective = pretraining_model(cfg)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen == {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "cls.seq_relationship.weight",
                      "cls.seq_relationship.bias"}
    grouped = {id(p) for g in param_groups(model, 0.01) for p in g["params"]}
    assert grouped == {id(p) for n, p in model.named_parameters() if n not in frozen}
    batch = pretraining_batch()
    loss, sums = objective(model, batch)
    with torch.no_grad():
        out = model(**{k: v for k, v in batch.items() if k != "next_sentence_label"})
    assert torch.allclose(loss, out.mlm_loss)
    loss.backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if n not in frozen)
    metrics = objective.metrics({k: float(v) for k, v in sums.items()})
    assert set(metrics) == {"mlm_loss", "mlm_acc", "mlm_tokens"}
    assert metrics["mlm_tokens"] == int((batch["mlm_labels"] != IGNORE_INDEX).sum())
    with_nsp, _ = PretrainingObjective()(model, batch)
    assert float(with_nsp) > float(loss)  # NSP's cross-entropy is in the default objective's loss
    assert not any(not p.requires_grad for p in pretraining_model(pretrain())[0].parameters())  # BERT with NSP


def test_masked_lm_objective_takes_the_pretraining_batch_as_the_collator_builds_it():
    from bert_core.model import host_packing

    torch.manual_seed(0)
    model = ModernBertForMaskedLM(modern_tiny(vocab_size=VOCAB)).eval()
    batch = pretraining_batch()  # BERT's keys: segments and NSP labels are not the modern model's
    batch.update(host_packing(batch["attention_mask"], batch["mlm_labels"]))
    objective = objective_for(model)
    assert isinstance(objective, MaskedLMObjective)
    loss, sums = objective(model, batch)
    want = model(batch["input_ids"], batch["attention_mask"], labels=batch["mlm_labels"])
    assert torch.allclose(loss, want.loss)
    halves = [objective(model, {k: v[rows] for k, v in pretraining_batch().items()})[1]
              for rows in (slice(0, 2), slice(2, B))]
    for k, v in sums.items():
        assert float(halves[0][k] + halves[1][k]) == pytest.approx(float(v), rel=1e-5), k
    metrics = objective.metrics({k: float(v) for k, v in sums.items()})
    assert metrics["mlm_loss"] == pytest.approx(float(want.loss)) and set(metrics) == {"mlm_loss", "mlm_acc",
                                                                                       "mlm_tokens"}
    assert all(math.isfinite(v) for v in metrics.values())
    assert objective.outputs(model, batch)["mlm_logits"].shape == (*batch["input_ids"].shape, VOCAB)


# -- fine-tuning a modern release ------------------------------------------------------------------

def test_fine_tuning_starts_from_a_modern_release_as_transformers_does(tmp_path):
    """build_model on a ModernBertForMaskedLM release: the encoder and the MLM head's dense/norm load (the layer
    transformers' from_pretrained also starts a classifier from), the classifier is fresh; with its weights
    copied over, transformers' ModernBertForSequenceClassification on the same folder gives the same logits."""
    from transformers import AutoModelForSequenceClassification

    from bert_core import modern_heads
    from jobs.inference.serving import PRETRAINING, model_class
    from jobs.workers.finetune_model import build_model

    torch.manual_seed(0)
    release = save_pretrained(ModernBertForMaskedLM(modern_tiny(vocab_size=VOCAB)), tmp_path / "release")
    assert model_class(PRETRAINING, release).__name__ == "ModernBertForMaskedLM"
    cfg = load_config(FinetuneConfig, ROOT / "configs/finetune/pkgdocs.yaml", [f"init={release}"])
    cfg.task.labels = ["deepspeed", "ray", "torch", "transformers"]  # the job sets them once the rows are read
    model, info = build_model(cfg, release)
    assert isinstance(model, modern_heads.ModernBertForSequenceClassification) and model.num_labels == 4
    assert info["fresh"] == ["classifier.bias", "classifier.weight"]
    assert info["unused"] == ["decoder.bias"] and "head.dense.weight" in info["loaded"]
    hf = AutoModelForSequenceClassification.from_pretrained(release, num_labels=4).eval()
    hf.classifier.load_state_dict(model.classifier.state_dict())
    ids = torch.randint(5, VOCAB, (3, 10))
    mask = (torch.arange(10) < torch.tensor([10, 6, 3])[:, None]).long()
    with torch.no_grad():
        ours = model.eval()(ids, attention_mask=mask).logits
        theirs = hf(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_a_modern_checkpoint_without_its_encoder_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    from jobs.workers.finetune_model import build_model

    release = save_pretrained(ModernBertForMaskedLM(modern_tiny(vocab_size=VOCAB)), tmp_path / "release")
    weights = load_file(release / "model.safetensors")
    del weights["model.layers.1.mlp.Wo.weight"]
    save_file(weights, release / "model.safetensors", metadata={"format": "pt"})
    cfg = load_config(FinetuneConfig, ROOT / "configs/finetune/pkgdocs.yaml", [f"init={release}"])
    with pytest.raises(ValueError, match=r"without 1 of its encoder's weights .*model.layers.1.mlp.Wo.weight"):
        build_model(cfg, release)
    assert json.loads((release / "config.json").read_text())["model_type"] == "modernbert"


def test_a_variant_is_a_bench_model_the_jobs_refuse_before_any_work(tmp_path):
    """The modern encoder with a switch off (a ladder rung): the fine-tuning jobs refuse it as init before any
    training (they judge, register and serve with transformers, which has no class for it); pretraining one
    refuses to register it; its release passes the load check by the one loader that knows it, and fine-tunes
    in process (build_model, as bench/recipe_ladder.py runs it)."""
    from jobs.finetune import resolve_init
    from jobs.registry.model_logging import load_check
    from jobs.inference.serving import PRETRAINING
    from jobs.workers.finetune_model import build_model

    release = save_pretrained(ModernBertForMaskedLM(modern_tiny(vocab_size=VOCAB, rotary=False)), tmp_path / "rung")
    with pytest.raises(ConfigError, match=r"architecture switch off \(model.pre_norm, model.glu or model.rotary "
                                          r"false\), which no transformers class loads"):
        resolve_init(str(release), "sqlite:///unused.db", tmp_path / "dl")
    load_check(PRETRAINING, str(release))
    with pytest.raises(ConfigError, match=r"tracking.registered_model must be '' with model.rotary=false"):
        pretrain("model.recipe=modern", "model.rotary=false")
    assert pretrain("model.recipe=modern", "model.rotary=false", "tracking.registered_model=").model.rotary is False
    cfg = load_config(FinetuneConfig, ROOT / "configs/finetune/pkgdocs.yaml", [f"init={release}"])
    cfg.task.labels = ["a", "b"]
    model, info = build_model(cfg, release)
    assert "model.embeddings.position_embeddings.weight" in info["loaded"] and not model.config.rotary


def test_static_masking_in_the_modern_recipe_masks_thirty_percent_with_room_to():
    """Masks drawn when the examples are prepared follow the recipe, and their per-example cap makes room for
    30% (BERT's 20 per 128 tokens would stop it at 16%), in both phases; the config's own values still win."""
    cfg = pretrain("model.recipe=modern", "data.masking=static")
    assert (cfg.data.mask_rate, cfg.data.max_predictions, cfg.phase2.max_predictions) == (0.3, 39, 154)
    cfg = pretrain("model.recipe=modern", "data.masking=static", "data.max_seq_len=64", "data.max_predictions=25")
    assert (cfg.data.mask_rate, cfg.data.max_predictions) == (0.3, 25)
    assert (pretrain().data.max_predictions, pretrain().phase2.max_predictions) == (20, 80)


def test_a_modern_field_on_a_bert_model_says_what_it_needs():
    with pytest.raises(ConfigError, match=r"unknown key 'model.glu'.*; model.glu needs model.recipe=modern"):
        pretrain("model.glu=false")
    from jobs.config.io import from_dict

    assert from_dict(ModernConfig, {"preset": "mini"}) == modern_tiny(hidden_size=256, num_hidden_layers=4,
                                                                     num_attention_heads=4, intermediate_size=704)
