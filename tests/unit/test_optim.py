"""LAMB against hand-computed steps and a plain-loop reference; inside DeepSpeed ZeRO-2 on CPU; across ranks."""

import io
import math
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from jobs.engine.optim import Lamb, build_optimizer, deepspeed_optimizer_config, per_tensor_groups
from tests.ports import free_port
from tests.ranks import exit_rank

BETAS = (0.9, 0.999)


def reference_lamb(groups: list[dict], state: dict) -> None:
    """The paper's algorithm one tensor at a time, written for reading, not speed."""
    for group in groups:
        b1, b2 = group["betas"]
        for p in group["params"]:
            s = state.setdefault(p, {"step": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)})
            s["step"] += 1
            t, g = s["step"], p.grad
            s["m"] = b1 * s["m"] + (1 - b1) * g
            s["v"] = b2 * s["v"] + (1 - b2) * g * g
            m_hat, v_hat = (s["m"] / (1 - b1 ** t), s["v"] / (1 - b2 ** t)) if group["bias_correction"] \
                else (s["m"], s["v"])
            update = m_hat / (v_hat.sqrt() + group["eps"]) + group["weight_decay"] * p
            trust = 1.0
            w, u = p.norm().item(), update.norm().item()
            if group["adapt"] and w > 0 and u > 0:
                trust = w / u
                if group["max_trust"] is not None:
                    trust = min(trust, group["max_trust"])
            with torch.no_grad():
                p -= group["lr"] * trust * update


def test_one_step_matches_the_formula_by_hand():
    decayed = torch.tensor([3.0, 4.0], requires_grad=True)  # ||p|| = 5
    excluded = torch.tensor([1.0, -1.0, 2.0], requires_grad=True)
    opt = Lamb([{"params": [decayed], "weight_decay": 0.5},
                {"params": [excluded], "weight_decay": 0.0, "adapt": False}], lr=0.1, eps=0.0)
    decayed.grad = torch.tensor([1.0, -2.0])
    excluded.grad = torch.tensor([0.5, 0.5, -0.25])
    opt.step()
    # Step 1 with bias correction: m_hat = g, v_hat = g^2, so m_hat / sqrt(v_hat) = sign(g).
    update = torch.tensor([1.0 + 0.5 * 3.0, -1.0 + 0.5 * 4.0])  # (2.5, 1.0)
    trust = 5.0 / math.sqrt(2.5 ** 2 + 1.0 ** 2)
    torch.testing.assert_close(decayed.detach(), torch.tensor([3.0, 4.0]) - 0.1 * trust * update)
    torch.testing.assert_close(excluded.detach(), torch.tensor([0.9, -1.1, 2.1]))  # plain lr * sign(g)


def test_without_bias_correction_the_raw_moments_set_the_step():
    p = torch.tensor([1.0, -1.0], requires_grad=True)
    opt = Lamb([p], lr=0.1, eps=0.0, weight_decay=0.0, adapt=False, bias_correction=False)
    p.grad = torch.tensor([2.0, -3.0])
    opt.step()
    # m = 0.1 g, v = 0.001 g^2: m / sqrt(v) = sign(g) * 0.1 / sqrt(0.001)
    torch.testing.assert_close(p.detach(), torch.tensor([1.0, -1.0]) - 0.1 * (0.1 / math.sqrt(0.001))
                               * torch.tensor([1.0, -1.0]))


def test_trust_ratio_is_one_when_a_norm_is_zero():
    zero_weights = torch.zeros(4, requires_grad=True)
    still = torch.tensor([1.0, 2.0], requires_grad=True)
    opt = Lamb([zero_weights, still], lr=0.1, eps=1e-8, weight_decay=0.0)  # eps > 0: g = 0 is not 0/0
    zero_weights.grad = torch.tensor([1.0, -1.0, 2.0, -2.0])
    still.grad = torch.zeros(2)  # zero update: ||update|| = 0
    opt.step()
    # A ratio of ||p|| / ||u|| = 0 would freeze zero-initialised tensors forever.
    torch.testing.assert_close(zero_weights.detach(), torch.tensor([-0.1, 0.1, -0.1, 0.1]))
    assert torch.equal(still.detach(), torch.tensor([1.0, 2.0]))


def test_a_first_step_without_any_gradient_is_no_step():
    """Zero gradients everywhere before any state (what a mixed-precision wrapper's set-up step gives): no update, no
    state; the first real step is then a first step (bias correction of step 1). Once state exists, zero gradients
    step as usual (weight decay applies)."""
    p = torch.tensor([3.0, 4.0], requires_grad=True)
    opt = Lamb([p], lr=0.1, weight_decay=0.5)
    p.grad = torch.zeros(2)
    opt.step()
    assert torch.equal(p.detach(), torch.tensor([3.0, 4.0])) and not opt.state
    fresh_p = torch.tensor([3.0, 4.0], requires_grad=True)
    fresh = Lamb([fresh_p], lr=0.1, weight_decay=0.5)
    p.grad, fresh_p.grad = torch.tensor([1.0, -2.0]), torch.tensor([1.0, -2.0])
    opt.step()
    fresh.step()
    assert torch.equal(p.detach(), fresh_p.detach()) and opt.state[p]["step"] == 1
    p.grad = torch.zeros(2)
    opt.step()
    assert opt.state[p]["step"] == 2 and not torch.equal(p.detach(), fresh_p.detach())


def test_max_trust_clamps_the_ratio():
    p = torch.full((4,), 10.0, requires_grad=True)  # ||p|| = 20, ||sign(g)|| = 2: ratio 10
    opt = Lamb([p], lr=0.01, eps=0.0, weight_decay=0.0, max_trust=2.0)
    p.grad = torch.ones(4)
    opt.step()
    torch.testing.assert_close(p.detach(), torch.full((4,), 10.0 - 0.01 * 2.0))


def test_matches_plain_loop_reference_over_20_steps():
    gen = torch.Generator().manual_seed(0)
    shapes = [(7, 5), (5,), (3, 4, 2), (6,)]
    options = [dict(weight_decay=0.01, adapt=True, bias_correction=True, max_trust=None),
               dict(weight_decay=0.0, adapt=False, bias_correction=True, max_trust=None),
               dict(weight_decay=0.1, adapt=True, bias_correction=False, max_trust=0.5),
               dict(weight_decay=0.0, adapt=True, bias_correction=True, max_trust=None)]
    ours = [torch.randn(s, generator=gen).requires_grad_() for s in shapes]
    theirs = [p.detach().clone().requires_grad_() for p in ours]
    defaults = dict(lr=0.02, betas=BETAS, eps=1e-6)
    opt = Lamb([{"params": [ours[0], ours[1]], **options[0]}, {"params": [ours[2]], **options[2]},
                {"params": [ours[3]], **options[1]}], **defaults)
    ref_groups = [{"params": [theirs[0], theirs[1]], **defaults, **options[0]},
                  {"params": [theirs[2]], **defaults, **options[2]},
                  {"params": [theirs[3]], **defaults, **options[1]}]
    ref_state: dict = {}
    for _ in range(20):
        for a, b in zip(ours, theirs):
            a.grad = torch.randn(a.shape, generator=gen)
            b.grad = a.grad.clone()
        opt.step()
        reference_lamb(ref_groups, ref_state)
    for a, b in zip(ours, theirs):
        assert not torch.equal(a, b.new_zeros(b.shape))
        torch.testing.assert_close(a.detach(), b.detach(), rtol=0, atol=1e-6)


def _mlp(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.LayerNorm(32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 1))


def _groups(model: torch.nn.Module) -> list[dict]:
    """jobs.engine.data_parallel.param_groups' split: no decay on biases and LayerNorm."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]


def _batch(gen: torch.Generator, n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 8, generator=gen)
    return x, torch.sin(x[:, :1] * x[:, 1:2]) + 0.5 * x[:, 2:3]


def _train(model, opt, gen, steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        x, y = _batch(gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_trains_a_small_mlp():
    model = _mlp(0)
    opt = build_optimizer("lamb", _groups(model), lr=1e-2, betas=BETAS, eps=1e-6, weight_decay=0.01)
    losses = _train(model, opt, torch.Generator().manual_seed(1), 150)
    assert sum(losses[-10:]) < 0.2 * sum(losses[:10])


def test_state_dict_round_trip_resumes_identically():
    gen = torch.Generator().manual_seed(2)
    model = _mlp(0)
    opt = build_optimizer("lamb", _groups(model), lr=1e-2, betas=BETAS, eps=1e-6, weight_decay=0.01)
    _train(model, opt, gen, 5)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, buf)
    data_state = gen.get_state()
    _train(model, opt, gen, 5)

    resumed = _mlp(1)  # different init: everything must come from the checkpoint
    ropt = build_optimizer("lamb", _groups(resumed), lr=1e-2, betas=BETAS, eps=1e-6, weight_decay=0.01)
    buf.seek(0)
    saved = torch.load(buf, weights_only=True)
    resumed.load_state_dict(saved["model"])
    ropt.load_state_dict(saved["optim"])
    _train(resumed, ropt, torch.Generator().set_state(data_state), 5)
    for a, b in zip(model.parameters(), resumed.parameters()):
        assert torch.equal(a, b)
    assert all(s["step"] == 10 for s in ropt.state.values())


def test_optimizer_choice_and_deepspeed_config():
    groups = _groups(_mlp(0))
    args = dict(lr=1e-3, betas=BETAS, eps=1e-6, weight_decay=0.01)
    assert build_optimizer("adamw", groups, **args) is None
    assert deepspeed_optimizer_config("adamw", **args)["optimizer"]["type"] == "AdamW"
    # LAMB is ours on every device: DeepSpeed's FusedLamb takes norms over a rank's ZeRO slice, not the tensor
    assert deepspeed_optimizer_config("lamb", **args) == {"zero_allow_untested_optimizer": True}
    cpu = build_optimizer("lamb", groups, **args, zero_stage=2, world_size=4)
    assert isinstance(cpu, Lamb) and cpu.partitioned
    assert [len(g["params"]) for g in cpu.param_groups] == [1] * 6
    assert [g["adapt"] for g in cpu.param_groups] == [True, True, False, False, False, False]
    assert not build_optimizer("lamb", groups, **args, zero_stage=2, world_size=1).partitioned
    # ZeRO-1 slices the optimizer state (each rank's Lamb sees its slice of a tensor) as ZeRO-2 does; ZeRO-0 none
    assert build_optimizer("lamb", groups, **args, zero_stage=1, world_size=4).partitioned
    assert not build_optimizer("lamb", groups, **args, zero_stage=0, world_size=4).partitioned
    assert per_tensor_groups([{"params": groups[1]["params"], "weight_decay": 0.0, "adapt": True}])[0]["adapt"]
    # no weight decay is still LAMB: the weight matrices keep their trust ratios (apex's rule made it Adam)
    from jobs.engine.ds_config import param_groups

    no_decay = build_optimizer("lamb", param_groups(_mlp(0), 0.0), **{**args, "weight_decay": 0.0})
    assert [g["adapt"] for g in no_decay.param_groups] == [True, True, False, False, False, False]
    with pytest.raises(ValueError, match="lamb"):
        build_optimizer("sgd", groups, **args)


LAMB_ARGS = dict(lr=1e-2, betas=BETAS, eps=1e-6, weight_decay=0.01)


def _zero2_engine(deepspeed, optimizer_for, seed: int = 0, grad_clip: float = 0.0):
    ds_config = {"train_micro_batch_size_per_gpu": 64, "gradient_accumulation_steps": 1, "train_batch_size": 64,
                 "gradient_clipping": grad_clip, "zero_optimization": {"stage": 2}, "steps_per_print": 10**9,
                 **deepspeed_optimizer_config("lamb", **LAMB_ARGS)}
    model = _mlp(seed)
    engine, zero_opt, _, _ = deepspeed.initialize(
        model=model, optimizer=optimizer_for(model), config=ds_config, dist_init_required=False,
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 / (1 + step)))
    assert isinstance(zero_opt.optimizer, Lamb)  # ZeRO wraps ours rather than replacing it
    return engine


def _engine_steps(engine, gen: torch.Generator, steps: int) -> None:
    for _ in range(steps):
        x, y = _batch(gen)
        engine.backward(torch.nn.functional.mse_loss(engine(x), y))
        engine.step()


def _ours(model):
    return build_optimizer("lamb", _groups(model), **LAMB_ARGS, zero_stage=2)


def test_inside_deepspeed_zero2_matches_plain_lamb(deepspeed_world_of_one):
    """ZeRO-2 flattens each group into one tensor; one group per tensor keeps LAMB layer-wise."""
    per_tensor = _zero2_engine(deepspeed_world_of_one, _ours)
    _engine_steps(per_tensor, torch.Generator().manual_seed(3), 6)
    coarse = _zero2_engine(deepspeed_world_of_one,
                           lambda m: Lamb([{**g, "adapt": g["weight_decay"] > 0} for g in _groups(m)], **LAMB_ARGS))
    _engine_steps(coarse, torch.Generator().manual_seed(3), 6)

    reference = _mlp(0)
    ropt = Lamb(per_tensor_groups(_groups(reference)), **LAMB_ARGS)
    sched = torch.optim.lr_scheduler.LambdaLR(ropt, lambda step: 1 / (1 + step))
    gen = torch.Generator().manual_seed(3)
    for _ in range(6):
        _train(reference, ropt, gen, 1)
        sched.step()
    for a, b in zip(per_tensor.module.parameters(), reference.parameters()):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=0, atol=1e-6)
    # Two coarse groups become two flat tensors, each with one trust ratio: no longer LAMB.
    drift = max((a - b).abs().max().item() for a, b in zip(coarse.module.parameters(), reference.parameters()))
    assert drift > 1e-4


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_deepspeeds_mixed_precision_wrapper_takes_no_step_before_training(deepspeed_world_of_one, precision):
    """At ZeRO-0, DeepSpeed's bf16/fp16 wrapper steps the optimizer once with zero gradients to build its state: LAMB's
    update was then wd * p with trust 1 / wd, every decayed matrix scaled by (1 - lr) (0.6% at lr 6e-3) and a step
    counted before training. (GPU runs; the wrapper's code is the same on DeepSpeed's CPU accelerator.)"""
    from deepspeed.accelerator import get_accelerator

    from jobs.engine.ds_config import param_groups

    if precision == "fp16" and not get_accelerator().is_fp16_supported():  # the CPU accelerator: oneDNN's fp16
        pytest.skip("DeepSpeed's accelerator here has no fp16 (a CPU without AVX512-FP16 / AMX-FP16)")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    before = model[0].weight.detach().clone()
    opt = build_optimizer("lamb", param_groups(model, 0.01), 6e-3, BETAS, 1e-6, 0.01, zero_stage=0, world_size=1)
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, precision: {"enabled": True},
              "zero_optimization": {"stage": 0}, "zero_allow_untested_optimizer": True}
    _, wrapped, _, _ = deepspeed_world_of_one.initialize(model=model, optimizer=opt, config=config,
                                                          dist_init_required=False)
    inner = wrapped.optimizer
    assert not inner.state  # no step counted
    masters = [p for g in inner.param_groups for p in g["params"] if p.shape == before.shape]
    torch.testing.assert_close(masters[0].detach().float(), before, rtol=0, atol=1e-2)  # bf16's rounding, no (1 - lr)
    assert (masters[0].detach().float() / before).mean().item() == pytest.approx(1.0, abs=1e-3)


def test_deepspeed_zero2_checkpoint_resumes_identically(deepspeed_world_of_one, tmp_path):
    gen = torch.Generator().manual_seed(5)
    first = _zero2_engine(deepspeed_world_of_one, _ours, grad_clip=1.0)
    _engine_steps(first, gen, 3)
    first.save_checkpoint(str(tmp_path), tag="engine")
    data_state = gen.get_state()
    _engine_steps(first, gen, 3)

    resumed = _zero2_engine(deepspeed_world_of_one, _ours, seed=1, grad_clip=1.0)
    resumed.load_checkpoint(str(tmp_path), tag="engine")
    _engine_steps(resumed, torch.Generator().set_state(data_state), 3)
    for a, b in zip(first.module.parameters(), resumed.module.parameters()):
        assert torch.equal(a, b)
    assert resumed.lr_scheduler.get_last_lr()[0] == first.lr_scheduler.get_last_lr()[0] == pytest.approx(1e-2 / 7)


def _partitioned_worker(rank: int, port: int, full: list[torch.Tensor], grads: list[list[torch.Tensor]],
                        out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        # ZeRO's layout: each tensor flattened, zero-padded to a multiple of the world size, one slice per rank.
        def shard(t: torch.Tensor) -> torch.Tensor:
            flat = torch.cat([t.flatten(), t.new_zeros(t.numel() % 2)])
            return flat.chunk(2)[rank].clone()

        params = [shard(t).requires_grad_() for t in full]
        opt = Lamb([{"params": [p], "adapt": i != 1, "weight_decay": 0.0 if i == 1 else 0.01}
                    for i, p in enumerate(params)], lr=0.05, partitioned=True)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = shard(g)
            opt.step()
        torch.save([p.detach() for p in params], os.path.join(out_dir, f"rank{rank}.pt"))
        dist.barrier()  # neither rank tears gloo down while its peer still talks (SIGABRT at exit otherwise)
        exit_rank()  # and none tears it down at all: the teardown itself can still abort (tests/ranks.py)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two gloo ranks in subprocesses (~4 s): `make test`, not `make test-fast`
def test_partitioned_norms_give_the_whole_tensor_ratio_across_ranks(tmp_path):
    gen = torch.Generator().manual_seed(4)
    full = [torch.randn(5, 3, generator=gen), torch.randn(7, generator=gen), torch.randn(4, 4, generator=gen)]
    grads = [[torch.randn(t.shape, generator=gen) for t in full] for _ in range(4)]
    mp.spawn(_partitioned_worker, args=(free_port(), full, grads, str(tmp_path)), nprocs=2, join=True)
    shards = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]

    expected = [t.clone().requires_grad_() for t in full]
    opt = Lamb([{"params": [p], "adapt": i != 1, "weight_decay": 0.0 if i == 1 else 0.01}
                for i, p in enumerate(expected)], lr=0.05)
    for step_grads in grads:
        for p, g in zip(expected, step_grads):
            p.grad = g.clone()
        opt.step()
    for i, want in enumerate(expected):
        got = torch.cat([shards[0][i], shards[1][i]])[:want.numel()].view_as(want)
        torch.testing.assert_close(got, want.detach(), rtol=0, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_matches_cpu():
    gen = torch.Generator().manual_seed(6)
    cpu = [torch.randn(64, 32, generator=gen).requires_grad_(), torch.randn(32, generator=gen).requires_grad_()]
    gpu = [p.detach().cuda().requires_grad_() for p in cpu]
    opts = [Lamb(per_tensor_groups([{"params": [w], "weight_decay": 0.01}, {"params": [b], "weight_decay": 0.0}]),
                 lr=1e-2) for w, b in (cpu, gpu)]
    for _ in range(10):
        for a, b in zip(cpu, gpu):
            a.grad = torch.randn(a.shape, generator=gen)
            b.grad = a.grad.cuda()
        for opt in opts:
            opt.step()
    for a, b in zip(cpu, gpu):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=0, atol=1e-5)
