"""jobs/engine/data_parallel.Engine over a fine-tuning head: one real DeepSpeed step, evaluate, predict, export."""

import json
import os

import numpy as np
import pytest
import torch

from bert_core.checkpoint import load_pretrained
from bert_core.config import tiny
from bert_core.model import BertForSequenceClassification
from jobs.config.sections import DeepSpeedConfig, OptimConfig
from jobs.engine.objectives import ClassificationObjective
from tests.ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B, T, VOCAB, LABELS = 4, 16, 100, 3


def _batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (B, T), generator=g)
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": torch.ones_like(ids),
            "labels": torch.randint(0, LABELS, (B,), generator=g), "example_id": torch.arange(B) + 10 * seed}


def _engine_model():
    torch.manual_seed(0)
    return BertForSequenceClassification(tiny(vocab_size=VOCAB, hidden_dropout_prob=0.0,
                                              attention_probs_dropout_prob=0.0), num_labels=LABELS)


def _engine(zero_stage: int):
    from jobs.engine.data_parallel import Engine

    model = _engine_model()
    return Engine(model, ClassificationObjective(LABELS), optim=OptimConfig(lr=1e-3, warmup_steps=0),
                  deepspeed=DeepSpeedConfig(zero_stage=zero_stage), micro_batch_size=B, grad_accum_steps=1,
                  max_steps=10, use_gpu=False)


@pytest.mark.parametrize("zero_stage", [0, 3])
def test_classification_engine_steps_evaluates_predicts_and_exports(deepspeed_world_of_one, zero_stage, tmp_path):
    engine = _engine(zero_stage)
    stats = engine.step(_batch(0))
    assert stats.optimizer_stepped and stats.finite and engine.global_step == 1
    assert stats.sums["count"] == B and 0 <= stats.sums["correct"] <= B
    assert stats.sums["loss_sum"] == pytest.approx(stats.loss * B)
    reference = _engine_model()  # the step's gradient norm, as plain torch computes it (ZeRO-0's was NaN)
    reference(**{k: v for k, v in _batch(0).items() if k != "example_id"}).loss.backward()
    expected = torch.nn.utils.get_total_norm([p.grad for p in reference.parameters() if p.grad is not None])
    assert engine.grad_norm() == pytest.approx(float(expected), rel=1e-4)

    metrics = engine.evaluate([_batch(1), _batch(2)])
    assert set(metrics) == {"loss", "accuracy", "count"} and metrics["count"] == 2 * B

    preds = engine.predict([_batch(1), _batch(2)])
    assert preds["logits"].shape == (2 * B, LABELS) and preds["logits"].dtype == np.float32
    assert preds["example_id"].tolist() == [10, 11, 12, 13, 20, 21, 22, 23]
    right = (preds["logits"].argmax(-1) == np.concatenate([_batch(1)["labels"], _batch(2)["labels"]])).sum()
    assert metrics["accuracy"] == pytest.approx(right / (2 * B))
    padded = engine.predict([_batch(1)], pad_to=T + 8)  # per-sequence logits are not per-token: never padded
    assert np.array_equal(padded["logits"], preds["logits"][:B])

    out = engine.export(tmp_path / "release", id2label={0: "a", 1: "b", 2: "c"})
    hf = json.loads((out / "config.json").read_text())
    assert hf["architectures"] == ["BertForSequenceClassification"] and hf["id2label"]["2"] == "c"
    reloaded = load_pretrained(out, BertForSequenceClassification)
    with torch.no_grad():
        again = reloaded(**{k: v for k, v in _batch(1).items() if k not in ("labels", "example_id")}).logits
    assert np.allclose(again.numpy(), preds["logits"][:B], atol=1e-5)


@pytest.mark.parametrize("zero_stage", [1, 3])
def test_a_bf16_release_holds_the_fp32_weights_the_optimizer_trained(deepspeed_world_of_one, zero_stage, tmp_path,
                                                                      capfd):
    """In bf16 the module's weights are the optimizer's fp32 weights rounded to ~3 digits: the release was written
    from them, not from the model that trained (the resume checkpoint kept the fp32 ones). The bf16 optimizer's
    forced memory reports (a full gc.collect each: seconds per engine in a big process) stay off."""
    from deepspeed.utils import safe_get_full_fp32_param
    from safetensors.torch import load_file

    from jobs.engine.data_parallel import Engine

    engine = Engine(_engine_model(), ClassificationObjective(LABELS), optim=OptimConfig(lr=1e-3, warmup_steps=0),
                    deepspeed=DeepSpeedConfig(zero_stage=zero_stage, precision="bf16"), micro_batch_size=B,
                    grad_accum_steps=1, max_steps=10, use_gpu=False)
    assert "bf16_optimizer" not in capfd.readouterr().out
    for seed in range(2):
        engine.step(_batch(seed))
    masters = {name: safe_get_full_fp32_param(p) for name, p in engine.engine.module.named_parameters()}
    saved = load_file(str(engine.export(tmp_path / "release") / "model.safetensors"))
    name = "bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(masters[name], masters[name].bfloat16().float())  # trained past bf16's values
    for name, master in masters.items():
        assert torch.equal(saved[name], master.float()), name


@pytest.mark.slow  # four engines per stage (~12 s each): `make test`, not `make test-fast`
@pytest.mark.parametrize("zero_stage", [1, 2, 3])
def test_a_bf16_phase_hand_off_starts_from_the_fp32_weights_with_a_fresh_optimizer(deepspeed_world_of_one, zero_stage,
                                                                                   tmp_path):
    """A weights-only load (phase 2 from phase 1, train.reset_optimizer) took the module's bf16 weights, and DeepSpeed
    made its fp32 weights from them: phase 2 began from phase 1's model rounded to ~3 digits (ZeRO-3's gather too).
    The saved optimizer's fp32 weights are loaded, its moments and step counts dropped."""
    from jobs.engine.data_parallel import Engine, fp32_masters

    def bf16(**optim):
        return Engine(_engine_model(), ClassificationObjective(LABELS),
                      optim=OptimConfig(lr=1e-3, warmup_steps=0, **optim),
                      deepspeed=DeepSpeedConfig(zero_stage=zero_stage, precision="bf16"), micro_batch_size=B,
                      grad_accum_steps=1, max_steps=10, use_gpu=False)

    a = bf16()
    for seed in range(3):
        a.step(_batch(seed))
    trained = fp32_masters(a.module)
    a.save(tmp_path / "ckpt", {"step": 3})
    b = bf16()
    b.load(tmp_path / "ckpt", weights_only=True, schedule=False)
    handed = fp32_masters(b.module)
    assert not all(torch.equal(t, t.bfloat16().float()) for t in trained.values())  # trained past bf16's values
    assert all(torch.equal(trained[k], handed[k]) for k in trained)
    base = b.optimizer.optimizer
    assert not base.state and b.global_step == 0 and b.lr == pytest.approx(1e-3)  # fresh: no moments, no steps
    assert b.step(_batch(0)).optimizer_stepped and b.global_step == 1
    # phase 2's own gradient clipping, not the saved optimizer's; another optimizer (LAMB's groups: a state of
    # another layout, which DeepSpeed cannot load) takes the module's weights, as before, and trains
    clipped = bf16(grad_clip=0.25)
    clipped.load(tmp_path / "ckpt", weights_only=True, schedule=False)
    assert getattr(clipped.optimizer, "clip_grad", 0.25) == 0.25
    lamb = bf16(name="lamb")
    lamb.load(tmp_path / "ckpt", weights_only=True, schedule=False)
    assert lamb.step(_batch(0)).optimizer_stepped


def test_nan_step_is_skipped(deepspeed_world_of_one):
    engine = _engine(0)
    skipped = engine.step(_batch(0), inject_nan=True)
    assert not skipped.finite and not skipped.optimizer_stepped and engine.global_step == 0


def _pretraining_engine(compile_model: bool):
    from bert_core.model import BertForPreTraining
    from jobs.engine.data_parallel import Engine
    from jobs.engine.objectives import PretrainingObjective

    torch.manual_seed(0)
    model = BertForPreTraining(tiny(vocab_size=VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    return Engine(model, PretrainingObjective(), optim=OptimConfig(lr=1e-3, warmup_steps=0),
                  deepspeed=DeepSpeedConfig(zero_stage=2, compile=compile_model), micro_batch_size=B,
                  grad_accum_steps=1, max_steps=10, use_gpu=False)


def _pretraining_batch(seed: int) -> dict[str, torch.Tensor]:
    from bert_core.model import IGNORE_INDEX, host_packing

    g = torch.Generator().manual_seed(seed)
    mask = (torch.arange(T) < torch.randint(T // 2, T + 1, (B,), generator=g)[:, None]).long()
    ids = torch.randint(5, VOCAB, (B, T), generator=g) * mask
    chosen = (torch.rand(B, T, generator=g) < 0.2) & mask.bool()
    chosen[:, 1] = True
    labels = torch.where(chosen, ids, IGNORE_INDEX)
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask, "mlm_labels": labels,
            "next_sentence_label": torch.randint(0, 2, (B,), generator=g), **host_packing(mask, labels)}


@pytest.mark.slow
def test_compiled_engine_trains_like_eager(deepspeed_world_of_one):
    """deepspeed.compile: the same ZeRO-2 steps, with the batch sizes varying, give the same losses."""
    losses = {}
    for compiled in (False, True):
        engine = _pretraining_engine(compiled)
        losses[compiled] = [engine.step(_pretraining_batch(i)).loss for i in range(4)]
        torch._dynamo.reset()
    assert losses[True] == pytest.approx(losses[False], rel=1e-4, abs=1e-5)
    assert losses[True][-1] < losses[True][0]


def test_a_restored_sweep_trial_has_the_checkpoints_state_and_its_own_hyperparameters(deepspeed_world_of_one, tmp_path):
    """PBT's exploit through the engine: trial B loads trial A's DeepSpeed checkpoint (weights, Adam moments,
    step) and then trains with B's own learning rate and weight decay (jobs/workers/sweep_trial.retune)."""
    from jobs.engine.ds_config import lr_lambda
    from jobs.config.finetune import FinetuneConfig
    from jobs.workers.finetune_model import build_engine
    from jobs.workers.sweep_trial import retune

    def trial(lr: float, decay: float, seed: int):
        cfg = FinetuneConfig()
        cfg.train.batch_size, cfg.optim.lr, cfg.optim.weight_decay, cfg.optim.warmup_ratio = B, lr, decay, 0.2
        torch.manual_seed(seed)
        model = BertForSequenceClassification(tiny(vocab_size=VOCAB), num_labels=LABELS)
        return cfg, build_engine(model, cfg, total_steps=10)

    cfg_a, a = trial(1e-3, 0.01, seed=0)
    for i in range(3):
        assert a.step(_batch(i)).optimizer_stepped
    rng = torch.get_rng_state()
    a.save(tmp_path, {"step": 3, "trial_id": "a", "torch_rng": rng})  # as a trial saves its dropout's generator
    cfg_b, b = trial(5e-4, 0.1, seed=1)
    state = b.load(tmp_path, schedule=False)
    retune(b, cfg_b.optim, state["step"])

    assert (state["step"], state["trial_id"], b.global_step) == (3, "a", 3)
    assert torch.equal(state["torch_rng"], rng)  # through the weights-only loader
    for (name, p), q in zip(a.module.state_dict().items(), b.module.state_dict().values()):
        assert torch.equal(p, q), name
    moments_a, moments_b = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    assert moments_a and moments_a.keys() == moments_b.keys()
    for k in moments_a:
        for key, v in moments_a[k].items():
            assert torch.equal(torch.as_tensor(v), torch.as_tensor(moments_b[k][key])), (k, key)
    factor = lr_lambda(cfg_b.optim.engine_optim(10), 10)
    assert b.lr == pytest.approx(5e-4 * factor(3))
    assert [g["weight_decay"] for g in b.optimizer.param_groups] == [0.1, 0.0]
    assert b.step(_batch(3)).finite and b.lr == pytest.approx(5e-4 * factor(4))


def test_a_pbt_trials_segments_and_best_survive_a_retry_and_its_own_restart(deepspeed_world_of_one, tmp_path):
    """A trial that exploited donor b's step-1 checkpoint and died before its own next checkpoint is retried from b's
    again: it rejoins the same segment (a drawn one left the lost attempt's reports beside the retry's). Restarted
    from its own checkpoint after the exploit, it keeps the segment, the donor it names and its own best (its earlier
    evaluations at steps past the donor's were filtered out). Its next exploit of the same checkpoint (its config
    counts its exploits) starts a segment of its own."""
    from types import SimpleNamespace

    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    from ray import tune

    from jobs.config.finetune import FinetuneConfig
    from jobs.registry.metric_logger import RankZeroLogger
    from jobs.workers.finetune_model import build_engine
    from jobs.workers.sweep_trial import TrialRun

    cfg = FinetuneConfig()
    cfg.train.batch_size = B
    engine = build_engine(_engine_model(), cfg, total_steps=10)
    engine.step(_batch(0))
    engine.save(tmp_path / "donor", {"step": 1, "epoch": 0, "epoch_steps": 1, "trial_id": "b"})
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    run_id = client.create_run(client.create_experiment("pbt")).info.run_id
    client.log_batch(run_id, metrics=[Metric("select/accuracy", v, 0, step) for step, v in ((1, 0.7), (2, 0.95))])
    run = SimpleNamespace(engine=engine, loop=SimpleNamespace(load_state=lambda state: None, step=1, bad_evals=0,
                                                               stopped=False, metric="select/accuracy"),
                          steps_per_epoch=10, trial_id="a", cfg=cfg, best_state=None, own_best=-1.0,
                          logger=RankZeroLogger(client.tracking_uri, run_id, 0, system_metrics_s=0), segment="",
                          restored_from="", exploit=1)
    segments = []
    for _ in range(2):  # the exploit, then its retry from the same checkpoint
        TrialRun.restore(run, tune.Checkpoint.from_directory(str(tmp_path / "donor")))
        segments.append(run.segment)
    assert segments == ["b@1#1", "b@1#1"] and run.restored_from == "b" and run.own_best == 0.95
    engine.save(tmp_path / "own", {"step": 1, "epoch": 0, "epoch_steps": 1, "trial_id": "a", "segment": "b@1#1",
                                   "restored_from": "b", "own_best": 0.95})
    run.segment, run.restored_from, run.own_best = "", "", -1.0  # a new process
    TrialRun.restore(run, tune.Checkpoint.from_directory(str(tmp_path / "own")))
    assert (run.segment, run.restored_from, run.own_best) == ("b@1#1", "b", 0.95)
    run.exploit = 2  # PBT clones b's checkpoint into it once more (b has not perturbed since)
    TrialRun.restore(run, tune.Checkpoint.from_directory(str(tmp_path / "donor")))
    assert run.segment == "b@1#2"


@pytest.mark.parametrize("zero_stage, planted, weights_only", [
    (1, "mp_rank_00_model_states.pt", False), (1, "zero_pp_rank_0_mp_rank_00_optim_states.pt", False),
    (3, "zero_pp_rank_0_mp_rank_00_optim_states.pt", True)],
    ids=["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero3-weights-only"])
def test_a_pickle_planted_in_a_resume_checkpoint_is_refused_and_never_runs(deepspeed_world_of_one, tmp_path,
                                                                          zero_stage, planted, weights_only):
    """DeepSpeed unpickles its checkpoint files with weights_only=False; Engine.load reads them with
    weights_only=True and DeepSpeed's own classes alone, so a planted object is refused before it runs, and an
    untouched checkpoint (ZeRO-1: loss scaler and ZeRO stage objects in the optimizer file) still loads. A ZeRO-3
    weights-only load (a phase hand-off, train.init_checkpoint with a fresh optimizer) gathers the weights with
    DeepSpeed's zero_to_fp32, which unpickled the optimizer files past the checkpoint engine: the payload ran."""
    from tests.unit.test_checkpoint import _Payload

    a = _engine(zero_stage)
    a.step(_batch(0))
    a.save(tmp_path / "ckpt", {"step": 1})
    b = _engine(zero_stage)
    assert b.load(tmp_path / "ckpt", weights_only=weights_only)["step"] == 1
    assert b.global_step == (0 if weights_only else 1)
    weights = [e.engine._zero3_consolidated_16bit_state_dict() if zero_stage == 3 else e.engine.module.state_dict()
               for e in (a, b)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])

    path, marker = tmp_path / "ckpt" / "engine" / planted, tmp_path / "payload-ran"
    state = torch.load(path, weights_only=False)  # the test's own file: trusted
    torch.save({**state, "extra": _Payload(marker)}, path)
    refused = rf"{planted}: refused to load a checkpoint file .*\(io\.open\); unpickling it could run code"
    with pytest.raises(ValueError, match=refused):
        _engine(zero_stage).load(tmp_path / "ckpt", weights_only=weights_only)
    assert not marker.exists()


@pytest.mark.slow  # a subprocess importing torch and DeepSpeed (~7 s): `make test`, not `make test-fast`
def test_a_zero_engine_steps_without_loading_inductor_and_muons_kernels_still_compile(tmp_path):
    """DeepSpeed's ZeRO imports its Muon module at the engine build and first reduction whatever the optimizer, and
    that module's torch.compile decorators loaded Inductor's compiler (~1.5 CPU-seconds per worker): with
    compile_muon_at_first_call a ZeRO-2 engine (AdamW) builds and steps in a fresh process without loading it, and
    a Muon kernel goes through torch.compile at its first call (a recording torch.compile here: Inductor's C++ build
    of it would take a minute), computing what it computes uncompiled."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import inspect, os, sys
        os.environ.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT="{free_port()}")
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", rank=0, world_size=1)
        from tests.unit.test_engine import _batch, _engine
        engine = _engine(2)
        assert engine.step(_batch(0)).finite
        print("inductor loaded:", "torch._inductor.compile_fx" in sys.modules)
        from deepspeed.runtime.zero.muon import original_muon  # imported by DeepSpeed already
        compiled = []
        torch.compile = lambda fn: compiled.append(fn) or fn
        kernel = original_muon.zeropower_via_newtonschulz5
        eager = inspect.unwrap(kernel)
        g = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
        assert not compiled and torch.equal(kernel(g, 2), eager(g, 2)) and compiled == [eager]
        kernel(g, 2)
        assert len(compiled) == 1  # compiled once
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert "inductor loaded: False" in done.stdout, done.stdout + done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-3000:]


def _tuned_engine(zero_stage: int, lr: float, weight_decay: float, beta2: float, grad_clip: float = 1.0):
    from jobs.engine.data_parallel import Engine

    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny(vocab_size=VOCAB), num_labels=LABELS)
    optim = OptimConfig(lr=lr, weight_decay=weight_decay, beta2=beta2, warmup_steps=2, grad_clip=grad_clip)
    return Engine(model, ClassificationObjective(LABELS), optim=optim, deepspeed=DeepSpeedConfig(zero_stage=zero_stage),
                  micro_batch_size=B, grad_accum_steps=1, max_steps=10, use_gpu=False)


@pytest.mark.parametrize("zero_stage", [0, 2])
def test_a_resume_trains_on_with_its_own_optimizer_settings_and_says_which_changed(deepspeed_world_of_one, zero_stage,
                                                                                  tmp_path, caplog):
    """A resubmission with a new optim.lr / weight_decay / beta2 / grad_clip loads the checkpoint's optimizer and
    scheduler state, which carry the old ones (ZeRO-2's clip_grad too, which clipped the rest of the run at the old
    norm): Engine.load puts the new run's back (at the loaded schedule position) and warns, naming old -> new. A
    resume on the same settings changes nothing and says nothing."""
    from jobs.engine.ds_config import lr_lambda

    a = _tuned_engine(zero_stage, 1e-3, 0.01, 0.999)
    for i in range(3):
        a.step(_batch(i))
    a.save(tmp_path, {"step": 3})
    same = _tuned_engine(zero_stage, 1e-3, 0.01, 0.999)
    with caplog.at_level("WARNING", logger="bert_foundry.engine"):
        same.load(tmp_path)
    assert same.lr == pytest.approx(a.lr) and not caplog.records

    b = _tuned_engine(zero_stage, 5e-4, 0.1, 0.98, grad_clip=0.5)
    with caplog.at_level("WARNING", logger="bert_foundry.engine"):
        b.load(tmp_path)
    assert getattr(b.optimizer, "clip_grad", 0.5) == 0.5 == b.engine.gradient_clipping()
    factor = lr_lambda(b.optim, 10)
    assert b.global_step == 3 and b.lr == pytest.approx(5e-4 * factor(3))
    assert b.scheduler.base_lrs == [5e-4, 5e-4]
    assert [g["weight_decay"] for g in b.optimizer.param_groups] == [0.1, 0.0]
    assert all(tuple(g["betas"]) == (0.9, 0.98) for g in b.optimizer.param_groups)
    said = caplog.text
    assert "optim.lr 0.001 -> 0.0005" in said and "weight_decay 0.01 -> 0.1" in said
    assert "betas (0.9, 0.999) -> (0.9, 0.98)" in said
    assert ("optim.grad_clip 1.0 -> 0.5" in said) == (zero_stage == 2)  # ZeRO-0 fp32 clips at the config's, kept none
    assert b.step(_batch(3)).optimizer_stepped and b.lr == pytest.approx(5e-4 * factor(4))


@pytest.mark.parametrize("saved_stage, stage", [(1, 2), (2, 1)])
def test_zero1_and_zero2_resume_from_each_others_checkpoints(deepspeed_world_of_one, saved_stage, stage, tmp_path):
    """What jobs/workers/reshard.needs_universal lets through on the saved world size: the same losses on."""
    a = _engine(saved_stage)
    for i in range(2):
        a.step(_batch(i))
    a.save(tmp_path, {"step": 2})
    same, other = _engine(saved_stage), _engine(stage)
    same.load(tmp_path)
    other.load(tmp_path)
    assert other.global_step == 2
    assert [other.step(_batch(i)).loss for i in (2, 3)] == pytest.approx([same.step(_batch(i)).loss for i in (2, 3)])


def test_the_optimizer_steps_deepspeed_skipped_are_counted_across_a_resume(deepspeed_world_of_one, tmp_path):
    """Engine.skipped_steps: DeepSpeed's count of updates dropped on an overflow (fp16 loss scaling; no fp16 on CPU,
    so the count is set here as DeepSpeed would), kept in its checkpoint."""
    a = _engine(0)
    assert a.step(_batch(0)).optimizer_stepped and a.skipped_steps == 0
    a.engine.skipped_steps = 2
    a.save(tmp_path, {"step": 1})
    b = _engine(0)
    b.load(tmp_path)
    assert b.skipped_steps == 2


def test_a_resume_over_more_steps_names_its_rate_jump_and_a_hand_off_counts_anew(deepspeed_world_of_one, tmp_path):
    """A run given more steps resumes on the new total's schedule, whose rate at its position can be far above the
    checkpoint's plan's (no line said so): the line names both. A hand-off that carries the optimizer over counts its
    own steps and skipped steps from 0 (train/skipped_steps began at the saving run's), the moments the saved ones."""
    from jobs.engine.data_parallel import Engine
    from jobs.engine.ds_config import lr_lambda

    a = _engine(0)  # planned over 10 steps
    for i in range(8):
        a.step(_batch(i))
    a.engine.skipped_steps = 2
    a.save(tmp_path, {"step": 8})
    optim = OptimConfig(lr=1e-3, warmup_steps=0)
    longer = Engine(_engine_model(), ClassificationObjective(LABELS), optim=optim,
                    deepspeed=DeepSpeedConfig(zero_stage=0), micro_batch_size=B, grad_accum_steps=1, max_steps=20,
                    use_gpu=False)
    longer.load(tmp_path)
    was, now = (1e-3 * lr_lambda(optim, total)(8) for total in (10, 20))
    assert longer.lr == pytest.approx(now) and now > 2 * was
    assert longer.replanned(10) == (f"[resume] train.max_steps 10 -> 20: the learning-rate schedule is planned over "
                                    f"the new total, so the next step trains at lr {now:.3g}, where the checkpoint's "
                                    f"plan was at {was:.3g}")
    hand_off = _engine(0)
    hand_off.load(tmp_path, schedule=False)
    assert (hand_off.global_step, hand_off.skipped_steps) == (8, 2)  # what PBT's exploit keeps
    hand_off.restart_counts()
    assert (hand_off.global_step, hand_off.skipped_steps, hand_off.engine.global_samples) == (0, 0, 0)
    saved, kept = a.optimizer.state_dict()["state"], hand_off.optimizer.state_dict()["state"]
    assert saved and all(torch.equal(saved[k]["exp_avg"], kept[k]["exp_avg"]) for k in saved)


def test_the_loops_collectives_run_on_the_process_groups_device(deepspeed_world_of_one):
    """in_lockstep and the data-wait maximum all-reduce tensors of collective_device(): the CPU under gloo (here), the
    rank's CUDA device under NCCL (tests/unit/test_engine_gpu.py runs them there)."""
    from jobs.engine.seam import collective_device, in_lockstep, longest

    assert collective_device() == torch.device("cpu")
    assert in_lockstep({"x": 1}) == {"x": 1} and in_lockstep(None) is None and longest(2.5) == 2.5


def test_a_one_rank_group_of_the_other_backend_is_refused(deepspeed_world_of_one):
    """single_process_group keeps a process's group for its life (a reused trial actor); a GPU engine asked for in a
    process that holds a gloo group would fail inside DeepSpeed's first CUDA collective: refused, naming both."""
    from jobs.workers.finetune_model import single_process_group

    single_process_group(False)  # the group there is gloo: kept
    with pytest.raises(RuntimeError, match="already holds a gloo process group.*needs nccl"):
        single_process_group(True)


def test_a_bf16_pipeline_release_holds_the_fp32_weights_the_optimizer_trained(deepspeed_world_of_one, tmp_path):
    """The data-parallel engine's bf16 release was written from the optimizer's fp32 weights, a pipeline's from the
    stages' bf16 modules: their rounding, not the model that trained. Each stage's parameters come from its
    optimizer now (one stage, one rank: the same code a stage of many runs)."""
    from deepspeed.utils import safe_get_full_fp32_param
    from safetensors.torch import load_file

    from jobs.config.pretrain import PretrainConfig
    from jobs.engine import pipeline
    from jobs.engine.data_parallel import fp32_masters

    cfg = PretrainConfig()
    cfg.model = tiny(vocab_size=VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    cfg.deepspeed.precision, cfg.deepspeed.zero_stage, cfg.train.micro_batch_size = "bf16", 1, 2
    engine, _, _ = pipeline.build_pipeline_engine(cfg, 1)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (2, T), generator=g)
    labels = torch.full((2, T), -100)
    labels[:, 3] = ids[:, 3]
    batch = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": torch.ones_like(ids),
             "mlm_labels": labels, "next_sentence_label": torch.zeros(2, dtype=torch.long)}
    for _ in range(3):
        pipeline.train_step(engine, [batch])
    masters = fp32_masters(engine.module)
    assert masters and not all(torch.equal(m, m.bfloat16().float()) for m in masters.values())
    saved = load_file(str(pipeline.export(engine, cfg.model, tmp_path / "release") / "model.safetensors"))
    exported = pipeline.to_layer_states(saved, cfg.model)
    checked = 0
    for idx, module in engine.module.local_layers():
        for name, param in module.named_parameters():
            assert torch.equal(exported[idx][name], safe_get_full_fp32_param(param).float()), (idx, name)
            checked += 1
    assert checked >= len(masters)
