"""The training engines: DeepSpeed data parallel (ZeRO 0-3) and pipeline x data parallel, their shared seam,
DeepSpeed config, optimizers, objectives and checkpoint parts. They know no job."""
