"""Each pipeline stage's own layers, as DeepSpeed cuts them: what its optimizer is built from, and what a checkpoint
of it loads back into."""

import pytest
import torch

from bert_core.config import ConfigError, tiny
from jobs.config.pretrain import PretrainConfig
from jobs.engine.ds_config import param_groups


def stage_holders(config, num_stages: int, method: str) -> list[torch.nn.ModuleList]:
    """Every stage's modules as BertPipe holds them, without a process group: DeepSpeed's partitioner over the real
    layer specs (PipelineModule._partition_layers: uniform over the specs, or balanced over their trainable
    parameter counts), and a tied module once per stage, built from its first spec there (PipelineModule._build)."""
    from deepspeed.pipe import TiedLayerSpec
    from deepspeed.runtime import utils as ds_utils

    from jobs.engine import pipeline

    specs = pipeline.layer_specs(config)
    built = [spec.build() for spec in specs]
    counts = [sum(p.numel() for p in m.parameters() if p.requires_grad) for m in built]
    parts = (ds_utils.partition_uniform(num_items=len(specs), num_parts=num_stages) if method == "uniform"
             else ds_utils.partition_balanced(weights=counts, num_parts=num_stages))
    holders = []
    for stage in range(num_stages):
        tied, held = set(), torch.nn.ModuleList()
        for idx in range(parts[stage], parts[stage + 1]):
            if isinstance(specs[idx], TiedLayerSpec):
                if specs[idx].key in tied:
                    continue
                tied.add(specs[idx].key)
            held.append(built[idx])
        holders.append(held)
    return holders


def allowed_cuts(config):
    """(stages, partition method) for every cut validate_pipeline lets through for `config`."""
    for stages in range(2, config.num_hidden_layers + 8):
        for method in ("parameters", "uniform"):
            cfg = PretrainConfig()
            cfg.model = config
            cfg.deepspeed.pipeline_stages, cfg.deepspeed.partition_method, cfg.deepspeed.zero_stage = stages, method, 1
            try:
                cfg.validate_pipeline()
            except ConfigError:
                continue
            yield stages, method


def test_no_stage_of_an_allowed_cut_builds_an_empty_parameter_group():
    """A stage holding only the last stage's tied word embeddings had no no-decay parameter, one holding only the
    MLM output bias no decayed one; DeepSpeed's ZeRO optimizer reads each group's first parameter, and every worker
    failed in deepspeed.initialize with a bare IndexError (tiny: uniform at 4-5 stages, either method at 6)."""
    config = tiny(vocab_size=8192)
    cuts = list(allowed_cuts(config))
    assert (config.num_hidden_layers + 4, "parameters") in cuts  # one layer a stage: the bias on its own
    for stages, method in cuts:
        for stage, holder in enumerate(stage_holders(config, stages, method)):
            groups = param_groups(holder, 0.01)
            assert groups and all(g["params"] for g in groups), (stages, method, stage)
            assert sum(len(g["params"]) for g in groups) == len(list(holder.parameters()))


def test_the_zero1_optimizer_builds_for_a_stage_of_one_kind_of_parameter(deepspeed_world_of_one):
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer

    from jobs.engine import pipeline

    deepspeed_world_of_one.init_distributed(dist_init_required=False)
    config = tiny(vocab_size=512)
    for layer in (pipeline.OutputBiasPipe(config), pipeline.TiedWordEmbeddings(config)):
        holder = torch.nn.ModuleList([layer])
        optimizer = torch.optim.AdamW(param_groups(holder, 0.01), lr=1e-3)
        zero = DeepSpeedZeroOptimizer(optimizer, {p: n for n, p in holder.named_parameters()}, timers=None,
                                      optimizer_params={}, dp_process_group=torch.distributed.group.WORLD,
                                      clip_grad=1.0, partition_grads=False)
        assert len(zero.bit16_groups) == 1


def test_a_resume_of_layers_cut_otherwise_is_refused_naming_both_cuts(deepspeed_world_of_one, tmp_path, caplog):
    """The driver sees the partition method only; a DeepSpeed whose partitioner cuts the same method anew (or a
    checkpoint at a URI the driver does not read) reached DeepSpeed's misleading "parameter-alignment layout does not
    match". Each save records the cut; a resume under another is refused naming both, while weights alone still load
    (from the layer files: a 16-bit hand-off does not take an optimizer state of another cut for its fp32 weights).
    One stage, one rank: a second cut is written into the record as another run's would be."""
    import json

    from jobs.engine.pipeline import PipelineEngine
    from jobs.engine.seam import OPTIMIZER_LAYOUT

    cfg = PretrainConfig()
    cfg.model = tiny(vocab_size=128)
    cfg.deepspeed.precision, cfg.deepspeed.zero_stage, cfg.train.micro_batch_size = "bf16", 1, 2
    engine = PipelineEngine(cfg)
    engine.save(tmp_path, {"step": 0})
    record = tmp_path / OPTIMIZER_LAYOUT
    layout = json.loads(record.read_text())
    last = cfg.model.num_hidden_layers + 4
    assert layout["stage_bounds"] == [0, last]
    engine.load(tmp_path)  # the cut it was saved with: loads
    record.write_text(json.dumps({**layout, "stage_bounds": [0, 2, last]}))
    with pytest.raises(ConfigError, match=rf"cut into stages at \[0, 2, {last}\]; this run cuts them at \[0, {last}\] "
                                          r"\(deepspeed.partition_method='parameters'\)"):
        engine.load(tmp_path)
    with caplog.at_level("WARNING"):
        engine.load(tmp_path, weights_only=True)
    assert "saved in another layout" in caplog.text  # the layer files' weights, not the other cut's fp32 state
