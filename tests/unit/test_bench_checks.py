"""The benches' guards: a side whose outputs disagree, or that failed, stops the bench before any ratio."""

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import model_throughput  # noqa: E402
import pipeline_throughput  # noqa: E402
import predict_vs_pipeline  # noqa: E402
import recipe_ladder  # noqa: E402


def test_model_bench_stops_when_a_runner_computes_another_loss():
    model_throughput.check_losses({"ours": 11.0, "hf": 11.0005}, rtol=1e-4)
    with pytest.raises(SystemExit, match="loss mismatch.*hf 11.010000"):
        model_throughput.check_losses({"ours": 11.0, "hf": 11.01}, rtol=1e-4)


def test_model_bench_stops_when_a_loss_is_not_finite():
    """Every comparison with NaN is False and an inf reference makes the tolerance inf: neither may pass."""
    nan, inf = float("nan"), float("inf")
    for losses in ({"ours": 11.0, "hf": nan}, {"ours": nan, "hf": 11.0}, {"ours": inf, "hf": 11.0},
                   {"ours": 11.0, "hf": -inf}):
        with pytest.raises(SystemExit, match="loss mismatch"):
            model_throughput.check_losses(losses, rtol=1e-4)


def test_trainer_baseline_runs_the_trainers_default_optimizer(tmp_path):
    """The baseline is the Trainer as a user runs it: its own default AdamW kernel (fused for torch >= 2.8), not one
    the bench picked."""
    from transformers import TrainingArguments

    from bench import hf_finetune_reference as ref
    from jobs.config.finetune import FinetuneConfig

    args = ref.training_arguments(FinetuneConfig(), 64, tmp_path, gpu=False)
    assert args.optim == TrainingArguments(output_dir=str(tmp_path)).optim


def test_model_bench_mfu_is_the_jobs_formula():
    from bert_core.config import preset
    from jobs.loops.metrics import flops_per_token

    cfg = preset("base")
    assert model_throughput.flops_per_token is flops_per_token
    ratio = flops_per_token(cfg, 128) / model_throughput.flops_per_token_with_embeddings(cfg, 128)
    assert ratio == pytest.approx(0.788, abs=1e-3)  # BENCHMARKS.md's 40.1% -> 31.6% on base/128


def test_model_bench_hardware_flops_count_what_each_step_computes():
    """HFU's FLOPs: padding and unmasked tokens cost transformers' step, not ours; a batch with neither costs both
    the same, and then equals the MFU formula's model FLOPs plus the decoder on every token."""
    import torch

    from bert_core.config import preset

    cfg = preset("mini")
    batch = model_throughput.make_batches(cfg, 4, 64, n=1)[0]
    ours, padattn, hf = (model_throughput.hardware_flops(cfg, batch, r) for r in ("ours", "ours-padattn", "hf"))
    assert ours < padattn < hf
    assert model_throughput.hardware_flops(cfg, batch, "ours", varlen=False) == padattn  # no varlen kernel: re-padded
    full = dict(batch, attention_mask=torch.ones_like(batch["attention_mask"]), mlm_labels=batch["input_ids"])
    counts = {r: model_throughput.hardware_flops(cfg, full, r) for r in ("ours", "ours-padattn", "hf")}
    assert counts["ours"] == counts["ours-padattn"] == counts["hf"]
    H, L, V, T = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size, 64
    per_token = 6 * (L * (4 * H * H + 2 * H * cfg.intermediate_size) + H * H + H * V) + 12 * L * T * H
    assert counts["hf"] == pytest.approx(4 * T * per_token + 6 * 4 * (H * H + 2 * H))


def test_model_bench_profile_counts_each_kernel_once():
    """The op that launched a kernel and a GPU-side annotation carry its device time too: only the kernel counts."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    def event(key, device, t, annotation=False):
        return SimpleNamespace(key=key, device_type=device, self_device_time_total=t, is_user_annotation=annotation)

    events = [event("aten::mm", DeviceType.CPU, 100.0), event("nvjet_sm90_tst_192x192", DeviceType.CUDA, 100.0),
              event("triton_poi_fused_gelu_6", DeviceType.CPU, 30.0),
              event("triton_poi_fused_gelu_6", DeviceType.CUDA, 30.0),
              event("Optimizer.step#AdamW.step", DeviceType.CUDA, 4.0, annotation=True),
              event("void at::native::multi_tensor_apply_kernel", DeviceType.CUDA, 4.0)]
    assert model_throughput.kernel_time_by_class(events) == {"matmul": 100.0, "fused (triton)": 30.0,
                                                             "optimizer": 4.0}


def test_predict_bench_stops_on_a_lost_row_or_disagreeing_labels():
    ref = ["a"] * 1000
    assert predict_vs_pipeline.check_agreement({"ours bf16": (1.0, ["a"] * 995 + ["b"] * 5)}, ref) == {
        "ours bf16": 0.995}
    with pytest.raises(SystemExit, match="999 labels for 1000 rows"):
        predict_vs_pipeline.check_agreement({"ours fp32": (1.0, ref[:-1])}, ref)
    with pytest.raises(SystemExit, match="ours fp32: labels agree with the pipeline on 0.9980"):
        predict_vs_pipeline.check_agreement({"ours fp32": (1.0, ["a"] * 998 + ["b"] * 2)}, ref)
    with pytest.raises(SystemExit, match="ours bf16"):
        predict_vs_pipeline.check_agreement({"ours bf16": (1.0, ["a"] * 980 + ["b"] * 20)}, ref)


def _run(examples=50, documents_read=100, documents_kept=95, sentences=900, tokens=5000):
    return dict(examples=examples, documents_read=documents_read, documents_kept=documents_kept, sentences=sentences,
                tokens=tokens)


def test_pipeline_bench_names_a_shape_that_processed_other_text():
    lines = {"small": 100, "small-one": 100, "medium": 100, "big": 100}
    runs = {"raw": [{"count": 1}], "small": [_run(), _run()], "small-one": [_run(), _run()], "small-cold": [_run()],
            "medium": [_run(), _run()], "big": [_run(examples=51), _run(examples=51)]}  # 2%: the draws' allowance
    assert pipeline_throughput.count_problems(runs, lines) == []
    runs["big"] = [_run(documents_read=99), _run(examples=51)]
    runs["small-cold"] = [_run(examples=40, documents_kept=94)]
    assert pipeline_throughput.count_problems(runs, lines) == [
        "big run 0: read 99 documents of 100 written", "big: repeats made [50, 51] examples",
        "small-cold documents_kept 94 vs small 95", "small-cold examples 40 vs small 50"]


def test_pipeline_bench_lets_tokens_differ_by_the_draws_but_not_documents_or_sentences():
    """doc_ids carry the file name and line, so one text in two shapes pairs and cuts its documents differently: the
    examples' tokens differ (0.4% at --scale 0.01) while documents and sentences match exactly."""
    lines = {"small": 100, "small-one": 100, "medium": 100, "big": 100}
    runs = {"raw": [{"count": 1}], "small": [_run(tokens=130_677)], "small-one": [_run(tokens=128_456)],
            "small-cold": [_run(tokens=130_677)], "medium": [_run(tokens=1_180_121)], "big": [_run(tokens=1_184_683)]}
    assert pipeline_throughput.count_problems(runs, lines) == []
    runs["big"] = [_run(sentences=899, tokens=1_184_683)]
    runs["small-one"] = [_run(tokens=125_000)]  # 4.3%: beyond the draws' allowance
    assert pipeline_throughput.count_problems(runs, lines) == [
        "big sentences 899 vs medium 900", "small-one tokens 125,000 vs small 130,677"]


def test_pipeline_bench_counts_the_lines_it_wrote(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n' * 7)
    (tmp_path / "b.jsonl").write_text('{"text": "y"}\n' * 3)
    assert pipeline_throughput.count_lines(str(tmp_path)) == 10


def test_ladder_reports_how_full_packing_gets(tmp_path):
    (tmp_path / "train").mkdir()
    pq.write_table(pa.table({"input_ids": [[1] * 120, [1] * 60, [1] * 60, [1] * 10]}), tmp_path / "train/s0.parquet")
    (tmp_path / "manifest.json").write_text(json.dumps({"shards": {"train": [{"file": "train/s0.parquet"}]}}))
    # first fit in one micro-batch: [120], [60, 60], [10] (10 fits neither: 130 > 128)
    assert recipe_ladder.packing_fill(str(tmp_path), 32, 128) == (4 / 3, 0.5)
    assert recipe_ladder.packing_fill(str(tmp_path), 1, 128) == (1.0, 0.0)
