"""The engine seam's pure parts: DeepSpeed config translation, LR schedule, weight-decay groups, FLOPs."""

import math

import pytest

from bert_core.config import tiny
from bert_core.model import BertForPreTraining
from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config
from jobs.engine.ds_config import deepspeed_config, lr_lambda, param_groups
from jobs.loops.metrics import flops_per_token


def cfg_with(*overrides):
    return load_config(PretrainConfig, None, ["data.sources=[x]", *overrides])


def test_deepspeed_config_follows_ours():
    cfg = cfg_with("train.micro_batch_size=8", "train.grad_accum_steps=4", "deepspeed.zero_stage=3",
                   "deepspeed.offload_optimizer=true", "deepspeed.offload_params=true", "optim.grad_clip=0.5")
    ds = deepspeed_config(cfg.optim, cfg.deepspeed, micro_batch_size=8, grad_accum_steps=4, world_size=2,
                          use_gpu=False)
    assert ds["train_batch_size"] == 8 * 4 * 2
    assert ds["zero_optimization"]["stage"] == 3
    assert ds["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert ds["zero_optimization"]["offload_param"]["device"] == "cpu"
    assert ds["gradient_clipping"] == 0.5
    assert "bf16" not in ds and "fp16" not in ds


def test_bf16_gradients_accumulate_in_fp32_and_zero_0_with_accumulation_is_refused():
    """DeepSpeed accumulates in the model's dtype unless told: bf16 micro-batch gradients summed in bf16 lose ~1% at
    64 of them (Megatron accumulates in fp32). ZeRO 1-3 are told; ZeRO-0 cannot be (DeepSpeed refuses the mix), so a
    bf16 run there that accumulates is refused; one micro-batch a step (fine-tuning's) is left as it is."""
    from bert_core.config import ConfigError

    gpu = ("scaling.use_gpu=true", "deepspeed.precision=bf16", "train.grad_accum_steps=4")
    for stage in (1, 2, 3):
        cfg = cfg_with(*gpu, f"deepspeed.zero_stage={stage}").validate()
        ds = deepspeed_config(cfg.optim, cfg.deepspeed, micro_batch_size=8, grad_accum_steps=4, world_size=2,
                              use_gpu=True)
        assert ds["bf16"] == {"enabled": True} and ds["data_types"] == {"grad_accum_dtype": "fp32"}
    with pytest.raises(ConfigError, match=r"zero_stage=0 sums the gradients of the train.grad_accum_steps=4 "
                                          r"micro-batches in bf16 .*set deepspeed.zero_stage=1"):
        cfg_with(*gpu, "deepspeed.zero_stage=0").validate()
    cfg = cfg_with(*gpu[:2], "deepspeed.zero_stage=0").validate()
    assert "data_types" not in deepspeed_config(cfg.optim, cfg.deepspeed, micro_batch_size=8, grad_accum_steps=1,
                                                world_size=2, use_gpu=True)


def test_bf16_gradients_are_reduced_across_ranks_in_fp32_and_fp16_ones_as_deepspeed_does():
    """DeepSpeed reduces gradients in the model's dtype unless told: the fp32 sum of the micro-batches would be
    rounded to bf16 for the cross-rank all-reduce, which then adds in bf16 (~0.7% off at 64 ranks). Told at every
    stage (ZeRO-0 too: its bf16 gradients are then summed in fp32); fp16's reduce (loss-scaled) is left to DeepSpeed."""
    for stage in (0, 1, 2, 3):
        cfg = cfg_with("scaling.use_gpu=true", "deepspeed.precision=bf16", f"deepspeed.zero_stage={stage}").validate()
        ds = deepspeed_config(cfg.optim, cfg.deepspeed, micro_batch_size=8, grad_accum_steps=1, world_size=2,
                              use_gpu=True)
        assert ds["communication_data_type"] == "fp32", stage
    for precision in ("fp16", "fp32"):
        cfg = cfg_with("scaling.use_gpu=true", f"deepspeed.precision={precision}", "deepspeed.zero_stage=2").validate()
        assert "communication_data_type" not in deepspeed_config(cfg.optim, cfg.deepspeed, micro_batch_size=8,
                                                                 grad_accum_steps=1, world_size=2, use_gpu=True)


@pytest.mark.parametrize("schedule, power", [("linear", 1.0), ("poly", 0.5)])
def test_lr_schedule_warms_up_then_decays_to_zero(schedule, power):
    cfg = cfg_with("train.max_steps=110", "optim.warmup_steps=10", f"optim.schedule={schedule}")
    f = lr_lambda(cfg.optim, cfg.train.max_steps)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.5 ** power)
    assert f(110) == 0.0
    assert all(f(s) >= f(s + 1) for s in range(10, 110))


def test_no_weight_decay_on_biases_and_layernorm():
    model = BertForPreTraining(tiny(vocab_size=100))
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(not names[id(p)].endswith("bias") and "LayerNorm" not in names[id(p)] for p in decay["params"])
    assert all(names[id(p)].endswith("bias") or "LayerNorm" in names[id(p)] for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_parameter_count_matches_the_model_and_flops_formula():
    config = tiny(vocab_size=1000)
    model = BertForPreTraining(config)
    assert config.num_parameters() == sum(p.numel() for p in model.parameters())
    n = config.num_parameters(include_embeddings=False)
    assert flops_per_token(config, 128) == 6 * n + 12 * config.num_hidden_layers * 128 * config.hidden_size


def test_a_modern_local_layer_counts_the_keys_of_its_window_not_the_row():
    """Two in three modern layers attend within local_attention (+-64 tokens at 128): at 1024 tokens they do an
    eighth of a global layer's attention, and counting them at 1024 overstated the modern recipe's MFU."""
    from bert_core.modern_config import ModernConfig

    config = ModernConfig(num_hidden_layers=6, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                          vocab_size=1024, local_attention=128, global_attn_every_n_layers=3)
    n = config.num_parameters(include_embeddings=False)
    assert config.layer_types.count("sliding_attention") == 4
    assert flops_per_token(config, 1024) == 6 * n + 12 * (2 * 1024 + 4 * 129) * 64
    assert flops_per_token(config, 64) == 6 * n + 12 * 6 * 64 * 64  # a row shorter than the window: all of it


def test_a_data_parallel_window_is_every_ranks_not_rank_0s():
    """Each data-parallel rank keeps its own window of loss, MLM/NSP sums, tokens and samples; the logged metrics
    were rank 0's share of the data, with its rates times the replica count. Summed over the ranks (an all-reduce;
    here two ranks' lists added by hand), the loss is the mean over every micro-batch, the accuracies are
    token-weighted over all of them, the rates are counted, and a rank whose micro-batches were all non-finite
    adds no sums. The non-finite count is every rank's own, the same on each (they skip a micro-batch together):
    summed, it was the run's count times the ranks, against its nonfinite_total."""
    from jobs.engine.objectives import PretrainingObjective
    from jobs.loops.metrics import MetricsWindow

    keys = PretrainingObjective.sum_keys
    a = MetricsWindow(start=0.0, micro_steps=2, loss=6.0, tokens=300, samples=4, nonfinite=2,
                      sums={"mlm_loss_sum": 40.0, "mlm_correct": 5.0, "mlm_count": 20.0})
    b = MetricsWindow(start=0.0, micro_steps=2, loss=10.0, tokens=100, samples=4, nonfinite=2,
                      sums={"mlm_loss_sum": 120.0, "mlm_correct": 30.0, "mlm_count": 40.0})
    dead = MetricsWindow(start=0.0, nonfinite=2)
    lists = []

    def add(values):  # what dist.all_reduce gives every rank: the lists of all ranks, added
        lists.append(values)
        return values

    for rank in (a, b, dead):
        rank.summed(add, keys)
    total = [sum(column) for column in zip(*lists)]
    window = a.summed(lambda values: total, keys)
    assert (window.micro_steps, window.loss, window.tokens, window.samples, window.nonfinite) == (4, 16.0, 400, 8, 2)
    assert window.sums == {"mlm_loss_sum": 160.0, "mlm_correct": 35.0, "mlm_count": 60.0}  # no NSP key: none had it
    m = PretrainingObjective(nsp=False).metrics(window.sums)
    assert m["mlm_acc"] == pytest.approx(35 / 60) and m["mlm_loss"] == pytest.approx(160 / 60)
    summary = window.summary(1, 1.0, None, devices=2, metrics=PretrainingObjective(nsp=False).metrics)
    assert summary["loss"] == 4.0 and summary["mlm_acc"] == pytest.approx(35 / 60)
    rank0 = a.summary(2, 1.0, None, devices=2, metrics=PretrainingObjective(nsp=False).metrics)
    assert rank0["mlm_acc"] == 0.25 and rank0["tokens_per_s"] / summary["tokens_per_s"] == pytest.approx(1.5, rel=0.01)
    with pytest.raises(ValueError, match="are not among the keys every rank adds"):
        MetricsWindow(sums={"other": 1.0}).summed(add, keys)
    # a window of non-finite micro-batches only (every rank's): no loss of 0 and no accuracy of 0, NaN, and the count
    empty = dead.summary(1, 1.0, None, devices=2, metrics=PretrainingObjective(nsp=True).metrics)
    assert math.isnan(empty["loss"]) and math.isnan(empty["mlm_acc"]) and math.isnan(empty["nsp_loss"])
    assert (empty["mlm_tokens"], empty["nonfinite_skipped"]) == (0, 2)
