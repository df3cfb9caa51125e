"""The prediction job's configuration (jobs/predict.py), validated before any Ray work."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from bert_core.config import ConfigError
from jobs.config.io import refuse_stage
from jobs.config.sections import TrackingConfig, check_output_dir, refuse_relative_when_submitted
from pipelines.tasks.files import FORMATS, Columns
from pipelines.encodings import check_encoding

PRECISIONS = ("fp32", "bf16")  # bf16: autocast, on GPUs and on CPUs with bf16 instructions (avx512_bf16, AMX)
CPU_KERNELS = ("onednn", "torch")  # fp32 linear layers on a CPU: oneDNN's prepacked kernels, or nn.Linear's BLAS
MODEL_URIS = ("models:/", "runs:/")  # what MLflow resolves (jobs/inference/model_ref.py); any other model is a folder


@dataclass
class PredictConfig:
    model: str = ""  # models:/NAME@alias, models:/NAME/VERSION (or latest), runs:/RUN_ID/model, or a model folder
    input: str = ""  # a file, folder, glob or fsspec URL: CSV, TSV, JSON Lines, Parquet, datasets folder, plain text
    output: str = ""  # a folder on this machine (or storage every node mounts): shards + manifest.json
    format: str = ""  # one of pipelines.tasks.files.FORMATS; "" = each file's extension (.txt: plain text)
    # which column holds the text, the pair, the id, (QA) the question and context; token classification tags
    # `text` (set columns.tokens to read lists of words instead; a CoNLL file's words are read without it)
    columns: Columns = field(default_factory=lambda: Columns(tokens=""))
    batch_size: int = 32  # windows per forward pass, sorted by length within `window`
    window: int = 1024  # rows an actor sorts by length at once
    # CPU replicas: padded positions per forward pass at most (long rows in smaller batches); 0 = off. Measured on
    # CPUs only: GPU replicas run batch_size windows whatever their length
    max_batch_tokens: int = 4096
    shard_rows: int = 10_000  # rows per output shard: the unit a rerun skips when complete
    num_actors: int = 0  # model replicas; 0 = one per GPU of the cluster, else one per cpus_per_actor CPUs
    # GPU replicas to wait for, a GPU each: an autoscaling cluster whose GPU nodes start at zero has none when the
    # job counts them (num_actors=0 then ran one CPU replica); waited for up to capacity_timeout_s. 0 = count them
    gpu_actors: int = 0
    capacity_timeout_s: float = 900.0
    cpus_per_actor: float = 1.0  # CPU actors: the threads each replica's torch uses
    precision: str = "fp32"  # fp32: equal to a transformers pipeline's; bf16: autocast (MiniLM on an H200: 3x slower)
    # CPU replicas in fp32: linear layers on oneDNN's prepacked kernels (jobs/inference/onednn.py: 1.15-1.9x rows per
    # thread, by CPU; logits within a few 1e-6 relative), or "torch": nn.Linear as the pipeline runs it
    cpu_kernels: str = "onednn"
    # multi-label: a label is predicted over this sigmoid; 0 = the model's task setting (0.5). Other kinds have none:
    # given, it is ignored (the job says so), and no part of an output folder's basis
    threshold: float = 0.0
    run_name: str = ""  # the MLflow run; "" = predict-<model>
    faults: dict = field(default_factory=dict)  # testing only: {"kill_actor_after_batches": N}
    tracking: TrackingConfig = field(default_factory=lambda: TrackingConfig(experiment="bert-foundry-predictions"))

    def validate(self) -> "PredictConfig":
        if not self.model:
            raise ConfigError("model must name a model: models:/NAME@champion, models:/NAME/3, runs:/ID/model or a "
                              "folder (python jobs/predict.py MODEL --input FILES --output DIR)")
        refuse_stage("model", self.model)
        if not self.input:
            raise ConfigError("input must name the files to predict (--input: a file, folder, glob or URL)")
        if not self.output:
            raise ConfigError("output must name a folder for the predictions (--output)")
        if self.format and self.format not in FORMATS:
            raise ConfigError(f"format must be one of {FORMATS} or '' (from the extension), got {self.format!r}")
        empty = [name for name in ("text", "question", "context") if not getattr(self.columns, name).strip()]
        if empty and empty != ["text"] or empty == ["text"] and not self.columns.tokens:
            raise ConfigError(f"columns.{empty[0]} must name a column of the input (it is empty); the default is "
                              f"{getattr(Columns(), empty[0])!r}")
        try:
            check_encoding(self.columns.encoding)
        except ValueError as e:
            raise ConfigError(f"columns.encoding: {e}") from None
        for name in ("batch_size", "window", "shard_rows"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_batch_tokens < 0:
            raise ConfigError(f"max_batch_tokens must be >= 0 (0 = batch_size alone), got {self.max_batch_tokens}")
        if self.gpu_actors < 0 or self.capacity_timeout_s < 0:
            raise ConfigError(f"gpu_actors and capacity_timeout_s must be >= 0, got {self.gpu_actors} and "
                              f"{self.capacity_timeout_s}")
        if self.gpu_actors and self.num_actors:
            raise ConfigError(f"set num_actors ({self.num_actors}) or gpu_actors ({self.gpu_actors}), not both: "
                              "gpu_actors is the GPU replicas' count")
        if self.num_actors < 0 or self.cpus_per_actor <= 0:
            raise ConfigError(f"num_actors must be >= 0 and cpus_per_actor > 0, got {self.num_actors} and "
                              f"{self.cpus_per_actor}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.cpu_kernels not in CPU_KERNELS:
            raise ConfigError(f"cpu_kernels must be one of {CPU_KERNELS}, got {self.cpu_kernels!r}")
        if not 0 <= self.threshold < 1:
            raise ConfigError(f"threshold must be in [0, 1) (0 = the model's own), got {self.threshold}")
        unknown = sorted(set(self.faults) - {"kill_actor_after_batches"})
        if unknown:
            raise ConfigError(f"faults.{unknown[0]} does not apply to predict; allowed: "
                              "faults.kill_actor_after_batches")
        if "://" not in self.output:
            refuse_relative_when_submitted({"output": self.output, **self.tracking.written_paths()})
            check_output_dir("output", self.output)
            refuse_output_in_input(self.input, self.output, self.format)
        else:
            raise ConfigError(f"output must be a local folder (or one every node mounts), got {self.output!r}")
        self.tracking.validate()
        return self

    def check_environment(self) -> "PredictConfig":
        """What the machine the job starts on must provide, checked before any Ray work (see
        PretrainConfig.check_environment): a tracking server that answers, an experiment that takes runs (the model
        folder: jobs/inference/model_ref.model_folder_kind)."""
        self.tracking.check_reachable()
        self.tracking.check_experiment()
        return self


def refuse_output_in_input(input_: str, output: str, fmt: str = "") -> None:
    """An output folder a rerun of the job would list among its inputs: its manifest.json and prediction shards
    (read as JSON Lines and Parquet) under a folder input, as the folder is read (hidden folders and, with `format`,
    other formats passed over), or matched by a glob. The first run writes it after listing the inputs, and every
    later one (a killed job's rerun, tomorrow's over the same exports) would read its own predictions as inputs."""
    from pipelines.tasks.file_finder import INPUT_EXTENSIONS, _data_file, _hidden

    if "://" in input_ and not input_.startswith("file://"):
        return
    given, out = input_.removeprefix("file://"), os.path.realpath(output)
    written = [os.path.join(out, "manifest.json"),  # and a shard's part, as jobs/inference/shards.py names them
               os.path.join(out, "shards", "00000-000000", "part-0000000-1-0123abcd.parquet")]
    if any(c in given for c in "*?[") and not os.path.exists(given):  # a file named with brackets is that file
        static = os.path.dirname(re.split(r"[*?\[]", given)[0])  # the folder before the first wildcard
        pattern = _glob_regex(os.path.join(os.path.realpath(static or "."), given[len(static):].lstrip("/")))
        read = [w for w in written if pattern.fullmatch(w)]
    else:
        root = os.path.realpath(given)
        read = [w for w in written if os.path.isdir(root) and os.path.commonpath((w, root)) == root
                and not _hidden(root, w) and _data_file(w, fmt, INPUT_EXTENSIONS)]
    if read:
        raise ConfigError(f"output {output!r} lies where the input {input_!r} reads: a rerun would read its "
                          f"{os.path.basename(read[0])} as input; write the predictions outside it (or in a folder "
                          f"named with a leading '_' or '.', which a folder input passes over)")


def _glob_regex(pattern: str) -> re.Pattern:
    """fsspec's glob as a regex over a path: `**` any folders deep, `*` and `?` within one name, `[...]` a class."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] in "*?":
            out, i = out + ("[^/]*" if pattern[i] == "*" else "[^/]"), i + 1
        elif pattern[i] == "[" and "]" in pattern[i + 1:]:
            end = pattern.index("]", i + 1)
            group = "[" + pattern[i + 1:end].replace("!", "^", 1) + "]"
            try:
                re.compile(group)
            except re.error:  # "[2024-01]", "[!]": no class (a range backwards, nothing in it), its characters
                group = re.escape(pattern[i:end + 1])
            out, i = out + group, end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)
