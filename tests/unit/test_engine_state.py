"""jobs/engine's Engine: what a phase hand-off loads of the saving run's state, and what a ZeRO-3 release gathers (the
engine's other paths: tests/unit/test_engine.py, whose tiny engines these reuse)."""

import pytest
import torch

from bert_core.config import tiny
from bert_core.model import BertForSequenceClassification
from jobs.config.sections import DeepSpeedConfig, OptimConfig
from jobs.engine.objectives import ClassificationObjective
from tests.unit.test_engine import B, LABELS, _batch, _engine, _engine_model


def test_a_hand_off_that_carries_the_optimizer_over_runs_its_own_schedule_from_step_0(deepspeed_world_of_one,
                                                                                     tmp_path):
    """Phase 2 with train.reset_optimizer=false loads phase 1's weights and optimizer (schedule=False, as the worker
    does), not its scheduler: with it, phase 2 went on at phase 1's position (last_epoch 100000 after a real phase 1,
    lr 0 on its decayed-to-zero schedule). Its first step is at its own warmup's rate, its moments phase 1's."""
    from jobs.engine.data_parallel import Engine
    from jobs.engine.ds_config import lr_lambda

    phase1 = _engine(0)  # 10 steps at 1e-3, no warmup
    for i in range(8):
        phase1.step(_batch(i))
    phase1.save(tmp_path, {"step": 8})
    optim = OptimConfig(lr=5e-4, warmup_steps=2)
    phase2 = Engine(_engine_model(), ClassificationObjective(LABELS), optim=optim,
                    deepspeed=DeepSpeedConfig(zero_stage=0), micro_batch_size=B, grad_accum_steps=1, max_steps=20,
                    use_gpu=False)
    phase2.load(tmp_path, weights_only=False, schedule=False)
    phase2.restart_counts()
    own = lr_lambda(optim, 20)
    assert phase2.scheduler.last_epoch == 0 and phase2.lr == pytest.approx(5e-4 * own(0))
    assert phase2.scheduler.base_lrs == [5e-4, 5e-4]
    saved, kept = phase1.optimizer.state_dict()["state"], phase2.optimizer.state_dict()["state"]
    assert saved and all(torch.equal(saved[k]["exp_avg"], kept[k]["exp_avg"]) for k in saved)
    assert phase2.step(_batch(8)).optimizer_stepped
    assert phase2.scheduler.last_epoch == 1 and phase2.lr == pytest.approx(5e-4 * own(1))


def test_a_zero3_release_holds_the_whole_partitioned_weights(deepspeed_world_of_one, tmp_path):
    """ZeRO-3 partitions every tensor above its persistence threshold (1e5 elements): the module then holds none of
    it, and a release written from the module's state_dict held empty tensors. A 2000-word embedding (128,000
    elements) is partitioned here; the release has its whole trained values, and every other tensor's."""
    from deepspeed.runtime.zero import GatheredParameters
    from safetensors.torch import load_file

    from jobs.engine.data_parallel import Engine

    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny(vocab_size=2000, hidden_dropout_prob=0.0,
                                               attention_probs_dropout_prob=0.0), num_labels=LABELS)
    shapes = {name: p.shape for name, p in model.named_parameters()}
    engine = Engine(model, ClassificationObjective(LABELS), optim=OptimConfig(lr=1e-3, warmup_steps=0),
                    deepspeed=DeepSpeedConfig(zero_stage=3), micro_batch_size=B, grad_accum_steps=1, max_steps=10,
                    use_gpu=False)
    assert engine.step(_batch(0)).optimizer_stepped
    params = dict(engine.module.named_parameters())
    embedding = "bert.embeddings.word_embeddings.weight"
    assert params[embedding].numel() == 0 and shapes[embedding] == (2000, 64)  # partitioned away from the module
    with GatheredParameters(list(params.values())):
        trained = {name: p.detach().clone() for name, p in params.items()}
    saved = load_file(str(engine.export(tmp_path / "release") / "model.safetensors"))
    assert trained.keys() <= saved.keys()
    for name, weight in trained.items():
        assert saved[name].shape == shapes[name] and torch.equal(saved[name], weight.float()), name
