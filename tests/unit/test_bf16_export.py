"""A 16-bit run's release holds the optimizer's fp32 weights: on every rank of a ZeRO-3 group (each must join their
gather), and in a sweep trial's export of its best evaluation (the best step's, not the last step's)."""

import json
import os
from datetime import timedelta
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from jobs.config.sections import DeepSpeedConfig, OptimConfig
from jobs.engine.objectives import ClassificationObjective
from tests.ports import free_port
from tests.ranks import exit_rank
from tests.unit.test_engine import LABELS, B, _batch, _engine_model

QUERY = "bert.encoder.layer.0.attention.self.query.weight"


def _export_on_two_ranks(rank: int, port: int, out) -> None:
    """One rank of a two-rank gloo group: a ZeRO-3 bf16 engine takes a step and exports; rank 0 keeps the fp32
    weights the optimizer holds, and each rank what its export returned."""
    os.environ.update(LOCAL_RANK=str(rank), RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    # a rank left behind in a gather fails the test in two minutes, not gloo's default thirty
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(minutes=2))
    try:
        from jobs.engine.data_parallel import Engine, fp32_masters

        engine = Engine(_engine_model(), ClassificationObjective(LABELS), optim=OptimConfig(lr=1e-3, warmup_steps=0),
                        deepspeed=DeepSpeedConfig(zero_stage=3, precision="bf16"), micro_batch_size=B,
                        grad_accum_steps=1, max_steps=10, use_gpu=False)
        engine.step(_batch(rank))
        masters = fp32_masters(engine.module)  # every rank: a gather
        written = engine.export(out / "release", id2label={0: "a", 1: "b", 2: "c"})
        if rank == 0:
            torch.save(masters, out / "masters.pt")
        (out / f"rank{rank}.json").write_text(json.dumps(None if written is None else str(written)))
        dist.barrier()  # neither rank tears gloo down while its peer still talks (SIGABRT at exit otherwise)
        exit_rank()  # and none tears it down at all (tests/ranks.py); it also spares seconds of interpreter teardown
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two fresh processes importing torch and DeepSpeed: ~30 s on an idle 2-core machine
def test_a_zero3_bf16_export_on_two_ranks_writes_the_fp32_weights_on_rank_0(tmp_path):
    """ZeRO-3's consolidated state is None on every rank but 0, and the export merged the fp32 weights into it
    there: rank 1 raised before joining their gather, and rank 0 waited in it. Every rank now gathers, rank 0 writes
    the fp32 weights (not their bf16 rounding), and transformers loads them."""
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    mp.spawn(_export_on_two_ranks, args=(free_port(), tmp_path), nprocs=2, join=True)
    release = tmp_path / "release"
    assert json.loads((tmp_path / "rank0.json").read_text()) == str(release)
    assert json.loads((tmp_path / "rank1.json").read_text()) is None
    masters = torch.load(tmp_path / "masters.pt")
    saved = load_file(str(release / "model.safetensors"))
    assert not torch.equal(masters[QUERY], masters[QUERY].bfloat16().float())  # trained past bf16's values
    for name, master in masters.items():
        assert torch.equal(saved[name], master), name
    hf = AutoModelForSequenceClassification.from_pretrained(release)
    assert hf.config.id2label == {0: "a", 1: "b", 2: "c"}
    assert torch.equal(hf.state_dict()[QUERY], masters[QUERY])


def test_a_bf16_sweep_trial_exports_its_best_evaluations_weights_not_its_last(deepspeed_world_of_one, tmp_path):
    """The trial kept the module's state (bf16 copies) at its best evaluation, and the export put the optimizer's
    fp32 weights of the moment over it: a trial that trained on past its best (patience) released its last step's
    weights as its best. The best step's fp32 weights are written."""
    from safetensors.torch import load_file

    from jobs.config.finetune import FinetuneConfig
    from jobs.engine.data_parallel import fp32_masters
    from jobs.workers.finetune_model import build_engine
    from jobs.workers.sweep_trial import TrialRun

    cfg = FinetuneConfig()
    cfg.train.batch_size, cfg.deepspeed.zero_stage, cfg.deepspeed.precision = B, 1, "bf16"
    engine = build_engine(_engine_model(), cfg, total_steps=10)
    run = SimpleNamespace(engine=engine, data=SimpleNamespace(export=True), best_state=None, init_dir=None, cfg=cfg,
                          loop=SimpleNamespace(best_history=lambda: [{"step": 1}]))
    engine.step(_batch(0))
    best = fp32_masters(engine.module)
    TrialRun._keep_best(run)  # the best evaluation, at step 1
    for seed in (1, 2):
        engine.step(_batch(seed))
    last = fp32_masters(engine.module)
    assert not torch.equal(best[QUERY], last[QUERY])
    TrialRun.export_best(run, tmp_path / "best")
    saved = load_file(str(tmp_path / "best" / "model.safetensors"))
    assert not torch.equal(best[QUERY], best[QUERY].bfloat16().float())  # trained past bf16's values
    for name, master in best.items():
        assert torch.equal(saved[name], master), name
    assert json.loads((tmp_path / "history.json").read_text()) == [{"step": 1}]
