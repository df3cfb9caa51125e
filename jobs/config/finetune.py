"""The fine-tuning job's configuration: one typed tree, loaded from configs/finetune/*.yaml.

Presets derive from configs/finetune/base.yaml (`base: base.yaml`) and change one thing. The whole
tree is validated before any Ray work, with errors naming the field and the allowed values.
Everything a Ray Train worker needs travels inside this config (the dataclass itself) plus the payloads the
driver puts in the object store (the starting checkpoint's files, the task's select rows; evaluation rows stay on the
driver).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from bert_core.config import ConfigError
from bert_core.modern_config import ModernConfig
from jobs.config.sections import (DeepSpeedConfig, OptimConfig, ScalingConfig, TrackingConfig, check_adam,
                                  check_harvest_dir, check_output_dir, check_run_name, check_seed, check_uri_backend,
                                  refuse_relative_when_submitted)
from jobs.config.io import ClassName, from_dict, refuse_stage, to_dict
from jobs.runtime.faults import FaultsConfig
from pipelines.tasks.cells import bool_class, class_name
from pipelines.tasks.conll import CONLL_LABELS
from pipelines.tasks.files import KINDS as FILE_KINDS
from pipelines.tasks.files import FORMATS, Columns
from pipelines.tasks.glue import GLUE_TASKS

KINDS = {"pkgdocs": "classification", "squad": "question-answering", "conll": "token-classification",
         **{name: "classification" for name in GLUE_TASKS}}
TASK_NAMES = (*KINDS, "files")  # files: the user's own data (pipelines/tasks/files.py), of any kind in FILE_KINDS
# the main metric (select: picks checkpoint, trial, seed; dev: the model card and the gate) each kind allows,
# default first
FILE_METRICS = {"classification": ("accuracy", "macro_f1"), "multi-label": ("micro_f1", "macro_f1", "exact_match"),
                "regression": ("pearson", "spearman"), "token-classification": ("f1", "accuracy"),
                "question-answering": ("f1", "exact")}
IOB_SCHEMES = ("IOB1", "IOB2")  # CoNLL-2003's Reuters release is IOB1; the HF hub's copy is IOB2
MLFLOW_SCHEMES = ("models:/", "runs:/")
MAX_POSITIONS = ModernConfig.max_position_embeddings  # the longest any model this project builds holds


def unread_file(k: "TaskConfig") -> str:
    """Why a file the task names is not read ("" when every one is): GLUE's splits are its folder's, pkgdocs' its
    corpus's, a benchmark's select is carved from train."""
    ignored = [n for n in ("train_file", "dev_file", "select_file") if getattr(k, n) and k.name != "files"
               and (n == "select_file" or k.name in GLUE_TASKS or k.name == "pkgdocs")]
    if not ignored:
        return ""
    where = ("its splits are task.data_dir's files" if k.name in GLUE_TASKS else "its splits come from "
             "task.corpus_dir" if k.name == "pkgdocs" else "select is carved from task.train_file")
    return f"task.{ignored[0]} is not read for task {k.name!r} ({where}); got {getattr(k, ignored[0])!r}"


@dataclass
class TaskConfig:
    name: str = "pkgdocs"  # files (your own data) | pkgdocs | squad | conll | one of the nine GLUE tasks (cola, ...)
    # files: classification | multi-label | regression | token-classification | question-answering ("" =
    # classification); the benchmarks' kind is their own
    kind: str = ""
    max_seq_len: int = 128  # features are cut to this many word pieces (batches pad to their longest)
    labels: list[ClassName] = field(default_factory=list)  # class names; [] = the task's own (set by the job)
    max_train_examples: int = 0  # quick runs: keep N training rows, a stable sample over all of them; 0 = all
    max_eval_examples: int = 0  # quick runs: keep N select and N dev rows, likewise; 0 = all
    # Three roles (pipelines/tasks/roles.py): train fits, select chooses (checkpoint, trial, seed, threshold),
    # dev judges (model card, registered metrics, promotion). Select is carved from train by a stable hash of
    # each row's group: this share of it, at most this many rows (pkgdocs: a share of its documents).
    selection_fraction: float = 0.1
    selection_max_rows: int = 5000
    # GLUE: the download root (glue_data/) or the task's folder; dev is dev.tsv (MNLI: matched + mismatched)
    data_dir: str = ""
    # files, SQuAD (JSON) and CoNLL (column files). files: each a file, folder, glob or fsspec URL; an HF `datasets`
    # save_to_disk folder (`folder:split` for a DatasetDict); dev_file and select_file are optional: what is missing
    # is carved from train by the stable hash (dev first, then select)
    train_file: str = ""
    dev_file: str = ""
    select_file: str = ""  # files only
    # files: csv | tsv | jsonl | parquet | hf | xlsx | conll | squad | text (unlabeled, prediction); "" = from each
    # file's extension
    format: str = ""
    columns: Columns = field(default_factory=Columns)  # files: which column holds the text, the pair, the label...
    metric: str = ""  # files: the main metric (FILE_METRICS); "" = the kind's first
    multi_label_threshold: float = 0.5  # files, multi-label: a label is predicted where its sigmoid is above this
    version_2: bool = False  # SQuAD v2.0: unanswerable questions; the null threshold is chosen on select
    doc_stride: int = 128  # SQuAD: tokens shared by consecutive windows of a long context
    max_query_length: int = 64  # SQuAD: questions are cut to this many pieces
    n_best: int = 20  # SQuAD: start/end candidates per window
    max_answer_length: int = 30  # SQuAD: longest answer, in pieces
    # token classification (conll; files): the entity tags' scheme, for seqeval's strict entity matching; IOB1 for
    # the original Reuters CoNLL-2003 files (an entity may open with I-), IOB2 for the HF hub's copy
    iob_scheme: str = "IOB2"
    label_all_subwords: bool = False  # token classification: label continuation pieces too (default: first only)
    # pkgdocs: built from the corpus `make quickstart` harvests (harvested here if absent)
    corpus_dir: str = "data/corpus/installed-docs"
    harvest_max_mb: float = 8.0  # size of that harvest; a different size is a different task
    num_classes: int = 4  # pkgdocs: the packages with the most documents
    max_train_per_label: int = 0  # pkgdocs: cap per class (balanced quick runs); 0 = all
    max_dev_per_label: int = 0

    def __post_init__(self):
        if not self.kind:
            self.kind = KINDS.get(self.name, "classification")

    def check_files(self) -> "TaskConfig":
        """Your own files' columns and formats (task.name=files), checked on this process before any Ray work:
        ConfigError naming the file and what it lacks (read by Ray Data tasks, the training files would fail there,
        as a task's traceback). No Ray, torch or pandas imported, so `--check` does it too."""
        from pipelines.tasks.common import TaskDataError
        from pipelines.tasks.file_finder import in_subfolders, resolve_files
        from pipelines.tasks.files import check_columns

        for role in ("train", "dev", "select"):
            if spec := getattr(self, f"{role}_file"):
                try:
                    files = resolve_files(spec, self.format, split=role)
                    check_columns(files, self.kind, self.columns)
                except TaskDataError as exc:
                    raise ConfigError(f"task.{role}_file: {exc}") from None
                if below := in_subfolders(spec, files):  # a folder read at its top level only before: said once
                    print(f"[data] task.{role}_file {spec}: {len(files)} files, {below} of them in subfolders",
                          flush=True)
        return self

    def with_labels(self, labels) -> "TaskConfig":
        """This task with the label set its training rows gave (none for QA). A classification or multi-label task with
        one label would build a one-output head, which is a regression head (scored 1.0 on select rows of that label,
        or MSE on 0/1 read through a sigmoid): refused.
        GLUE's STS-B is a classification by name and a regression by its spec: its one "label" is the score."""
        self.labels = list(labels) if self.kind != "question-answering" else []
        scored = self.name in GLUE_TASKS and GLUE_TASKS[self.name].is_regression
        if self.kind == "classification" and not scored and len(self.labels) < 2:
            raise ConfigError(f"task {self.name}: classification needs at least two labels in the training rows, got "
                              f"{self.labels}; check task.columns.label, or use task.kind=regression for a score")
        if self.kind == "multi-label" and len(self.labels) < 2:  # one output is the regression head (MSE on 0/1)
            raise ConfigError(f"task {self.name}: multi-label needs at least two labels in the training rows, got "
                              f"{self.labels}; one label a row has or lacks is a classification of two classes: "
                              "task.kind=classification with a label per row")
        return self


@dataclass
class FinetuneTrainConfig:
    batch_size: int = 32  # examples per worker per step
    eval_batch_size: int = 64
    epochs: int = 3
    # a cap on the optimizer steps the epochs give, not transformers' max_steps (which overrides them): set epochs
    # high enough to reach it; 0 = no cap
    max_steps: int = 0
    eval_every_steps: int = 0  # evaluate every N steps; 0 = at the end of every epoch
    patience: int = 2  # stop after this many evaluations without improving the main metric; 0 = never
    log_every: int = 10  # steps per progress line and MLflow train metrics
    seed: int = 0  # head init and data order
    max_failures: int = 2  # worker failures survived; each resumes from the last evaluation's checkpoint
    # a non-finite loss skips its batch (no update) and is counted; this many in a row end the run with
    # FloatingPointError: the weights have diverged and skipping cannot help (jobs/loops/finetune.py)
    max_nonfinite_steps: int = 10

    def steps(self, rows: int) -> tuple[int, int]:
        """(steps per epoch, total steps) for a worker that trains on `rows` features: batch_size a step, `epochs`
        epochs, cut at max_steps (the fine-tuning job, a sweep's trials and ASHA's budget count them alike)."""
        per_epoch = max(1, math.ceil(rows / self.batch_size))
        total = per_epoch * self.epochs
        return per_epoch, min(total, self.max_steps) if self.max_steps else total

    def unreached_cap(self, total: int) -> str:
        """The job's line when max_steps is past the `total` steps the epochs give: transformers' max_steps overrides
        the epochs, and a user who set only max_steps=1000 trained 120 steps, warmup and decay planned over 120."""
        if self.max_steps <= total:
            return ""
        return (f"[train] train.max_steps={self.max_steps} is a cap, not a length: train.epochs={self.epochs} give "
                f"{total} steps, and the run and its schedule end there; raise train.epochs to train longer")


@dataclass
class FinetuneOptimConfig:
    """AdamW, linear warmup then linear decay to 0 (BERT's fine-tuning recipe)."""

    lr: float = 2e-5  # peak learning rate after warmup
    weight_decay: float = 0.01  # not applied to biases and LayerNorm weights
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    warmup_ratio: float = 0.1  # share of all steps spent warming up
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping

    def warmup_steps(self, total_steps: int) -> int:
        """Rounded up as transformers' TrainingArguments.get_warmup_steps, so a run under 1 / warmup_ratio steps still
        warms up; rounded to 9 places first, so float noise (0.1 x 30 = 3.0000000000000004) is not a step more."""
        return math.ceil(round(self.warmup_ratio * total_steps, 9))

    def engine_optim(self, total_steps: int) -> OptimConfig:
        """The engine's optimizer section for a run of `total_steps` (jobs/engine/data_parallel.py speaks
        OptimConfig)."""
        return OptimConfig(name="adamw", lr=self.lr, weight_decay=self.weight_decay, beta1=self.beta1,
                           beta2=self.beta2, eps=self.eps, warmup_steps=self.warmup_steps(total_steps),
                           schedule="linear", grad_clip=self.grad_clip)


@dataclass
class FeaturesConfig:
    batch_size: int = 256  # rows per featurizing task (Ray Data map_batches, in Ray's pooled worker processes)


def check_metric(k: "TaskConfig") -> None:
    """task.metric: '' for a benchmark (its official metric chooses), one of FILE_METRICS for your own files' kind
    (fine-tuning's config, and promotion's task.metric override)."""
    if k.metric and k.name != "files":
        raise ConfigError(f"task.metric must be '' for task {k.name!r} (its official metric chooses), got "
                          f"{k.metric!r}; only task.name=files reads task.metric")
    allowed = FILE_METRICS.get(k.kind, ())
    if k.metric and k.metric not in allowed:
        raise ConfigError(f"task.metric must be one of {allowed} for task.kind={k.kind}, got {k.metric!r}")


def check_kind_settings(k: "TaskConfig", kind: str) -> None:
    """The settings one kind of task reads, in their range: fine-tuning checks its task's kind; promotion checks the
    kind of every such override given (task.n_best=0 was a traceback in the scoring) and the candidate's merged task."""
    if kind == "question-answering":  # SQuAD and your own QA files
        if k.doc_stride < 0:
            raise ConfigError(f"task.doc_stride must be >= 0, got {k.doc_stride}")
        for name in ("max_query_length", "n_best", "max_answer_length"):
            if getattr(k, name) < 1:
                raise ConfigError(f"task.{name} must be >= 1, got {getattr(k, name)}")
        if k.max_query_length + k.doc_stride + 3 >= k.max_seq_len:
            # [CLS] question [SEP] context [SEP]: a window must have room for more context than the stride
            raise ConfigError(f"task.max_query_length ({k.max_query_length}) + task.doc_stride ({k.doc_stride}) "
                              f"+ 3 must be < task.max_seq_len ({k.max_seq_len}); allowed: task.max_seq_len >= "
                              f"{k.max_query_length + k.doc_stride + 4} or a smaller task.doc_stride")
    if kind == "token-classification" and k.iob_scheme not in IOB_SCHEMES:  # conll, and files of that kind
        raise ConfigError(f"task.iob_scheme must be one of {IOB_SCHEMES}, got {k.iob_scheme!r}")
    if kind == "multi-label" and not 0 < k.multi_label_threshold < 1:
        raise ConfigError(f"task.multi_label_threshold must be in (0, 1), got {k.multi_label_threshold}")


@dataclass
class FinetuneConfig:
    run_name: str = ""  # Ray Train + MLflow run name; "" = finetune-<task>-<timestamp>
    output_dir: str = "runs"  # Ray Train storage; the best model is exported to <output_dir>/<run_name>/best
    init: str = ""  # starting point: an HF BERT folder, our release folder, models:/NAME@alias or runs:/ID/path
    task: TaskConfig = field(default_factory=TaskConfig)
    train: FinetuneTrainConfig = field(default_factory=FinetuneTrainConfig)
    optim: FinetuneOptimConfig = field(default_factory=FinetuneOptimConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    # The engine pretraining uses (jobs/engine/data_parallel.py); plain data parallel by default: a BERT-base fine-tune
    # fits one device, and ZeRO-1/2 (optimizer state, gradients sharded) or bf16 are for large models on GPUs.
    deepspeed: DeepSpeedConfig = field(default_factory=lambda: DeepSpeedConfig(zero_stage=0))
    scaling: ScalingConfig = field(default_factory=ScalingConfig)
    tracking: TrackingConfig = field(default_factory=lambda: TrackingConfig(experiment="bert-foundry-finetune"))
    faults: FaultsConfig = field(default_factory=FaultsConfig)  # testing only: injected faults (all off)

    def validate(self) -> "FinetuneConfig":
        self._validate_task()
        t, o, s = self.train, self.optim, self.scaling
        for name in ("batch_size", "eval_batch_size", "epochs", "log_every", "max_nonfinite_steps"):
            if getattr(t, name) < 1:
                raise ConfigError(f"train.{name} must be >= 1, got {getattr(t, name)}")
        for name in ("max_steps", "eval_every_steps", "patience", "max_failures"):
            if getattr(t, name) < 0:
                raise ConfigError(f"train.{name} must be >= 0, got {getattr(t, name)}")
        if o.lr <= 0:
            raise ConfigError(f"optim.lr must be > 0, got {o.lr}")
        check_adam("optim", o.beta1, o.beta2, o.eps)
        check_seed("train.seed", t.seed)
        for name in ("weight_decay", "grad_clip"):
            if getattr(o, name) < 0:
                raise ConfigError(f"optim.{name} must be >= 0, got {getattr(o, name)}")
        if not 0 <= o.warmup_ratio < 1:
            raise ConfigError(f"optim.warmup_ratio must be in [0, 1), got {o.warmup_ratio}")
        if self.features.batch_size < 1:
            raise ConfigError(f"features.batch_size must be >= 1, got {self.features.batch_size}")
        s.validate()
        self._validate_deepspeed()
        self.tracking.validate()  # an alias MLflow accepts, and one wherever a model is registered
        check_run_name(self.run_name)
        self._validate_init()
        self.faults.validate("finetune")
        return self

    def _validate_task(self) -> None:
        k = self.task
        if k.name not in TASK_NAMES:
            raise ConfigError(f"task.name must be one of {TASK_NAMES}, got {k.name!r}")
        if k.name == "files":
            self._validate_files()
        elif k.kind != KINDS[k.name]:
            raise ConfigError(f"task.kind of task {k.name!r} is {KINDS[k.name]!r}, got {k.kind!r}; task.kind is set "
                              "for task.name=files only")
        # The init's own limit (its position rows, the length it was pretrained at) is check_init's, once it is read:
        # a modern release pretrained at 1024 tokens fine-tunes at 1024, a BERT release at most at 512
        if not 16 <= k.max_seq_len <= MAX_POSITIONS:
            raise ConfigError(f"task.max_seq_len must be in [16, {MAX_POSITIONS}] ({MAX_POSITIONS}: the modern "
                              f"encoder's positions; the init's own limit is checked when the job reads it), got "
                              f"{k.max_seq_len}")
        for name in ("max_train_examples", "max_eval_examples"):
            if getattr(k, name) < 0:
                raise ConfigError(f"task.{name} must be >= 0, got {getattr(k, name)}")
        if not 0 < k.selection_fraction < 1:
            raise ConfigError(f"task.selection_fraction must be in (0, 1) (the share of train carved out to make the "
                              f"run's choices), got {k.selection_fraction}")
        if k.selection_max_rows < 1:
            raise ConfigError(f"task.selection_max_rows must be >= 1, got {k.selection_max_rows}")
        if k.labels and k.name not in ("conll", "files"):
            raise ConfigError(f"task.labels must be [] for task {k.name!r} (the job takes the task's own labels), "
                              f"got {k.labels}; only conll and files read task.labels")
        if len(set(k.labels)) != len(k.labels):
            raise ConfigError(f"task.labels must be distinct, got {k.labels}")
        if k.name in GLUE_TASKS and not (k.data_dir and Path(k.data_dir).is_dir()):
            raise ConfigError(f"task.data_dir must be a GLUE folder for task {k.name!r}, got {k.data_dir!r}")
        if unread := unread_file(k):  # else ignored: trained or judged on other rows than the ones named
            raise ConfigError(unread)
        if k.name in ("squad", "conll"):
            for name in ("train_file", "dev_file"):
                if not Path(getattr(k, name)).is_file():
                    raise ConfigError(f"task.{name} must be an existing file for task {k.name!r}, "
                                      f"got {getattr(k, name)!r}")
        if k.name != "files":  # your own files' metric after their kind (_validate_files)
            check_metric(k)
        check_kind_settings(k, k.kind)
        if k.name == "conll":
            bad = [tag for tag in (k.labels or CONLL_LABELS) if tag != "O" and tag[:2] not in ("B-", "I-")]
            if bad:
                raise ConfigError(f"task.labels must be 'O' or B-/I- tags for CoNLL, got {bad}")
        if k.name == "pkgdocs":
            if k.num_classes < 2:
                raise ConfigError(f"task.num_classes must be >= 2, got {k.num_classes}")
            for name in ("max_train_per_label", "max_dev_per_label"):
                if getattr(k, name) < 0:
                    raise ConfigError(f"task.{name} must be >= 0, got {getattr(k, name)}")
            if k.harvest_max_mb <= 0:
                raise ConfigError(f"task.harvest_max_mb must be > 0, got {k.harvest_max_mb}")

    def _validate_files(self) -> None:
        """Your own data: a kind, a format, files that exist, a metric the kind has; checked before any Ray work."""
        from pipelines.tasks.file_finder import resolve_files
        from pipelines.encodings import check_encoding

        k = self.task
        if k.kind not in FILE_KINDS:
            raise ConfigError(f"task.kind must be one of {FILE_KINDS} for task.name=files, got {k.kind!r}")
        if k.kind in ("classification", "multi-label"):  # named as the files' reader names a class cell (true and
            # false, cells.bool_class; "+1" and "1.0" are "1", cells.class_name): else the rows of such a label match
            # none of these and are rejected, and its head output is never trained
            written = list(k.labels)
            k.labels = [(k.kind == "classification" and bool_class(x)) or class_name(x.strip()) for x in k.labels]
            first = {}  # a class -> its first writing
            if twins := next(((first[n], x) for x, n in zip(written, k.labels)
                              if first.setdefault(n, x) != x), None):
                raise ConfigError(f"task.labels must be distinct, got {k.labels} from {written} as written: "
                                  f"{twins[0]!r} and {twins[1]!r} are one class, as the files' reader names a class "
                                  "cell (a decimal's trailing zeros and a sign + dropped, 1.0 is 1, TRUE is true); "
                                  "name each class once")
        if k.format and k.format not in FORMATS:
            raise ConfigError(f"task.format must be one of {FORMATS} or '' (from the extension), got {k.format!r}")
        try:
            check_encoding(k.columns.encoding)
        except ValueError as e:
            raise ConfigError(f"task.columns.encoding: {e}") from None
        if not k.train_file:
            raise ConfigError("task.train_file must name your training data (a file, folder, glob or URL) for "
                              "task.name=files")
        for name in ("train_file", "dev_file", "select_file"):
            if getattr(k, name):
                check_uri_backend(f"task.{name}", getattr(k, name))  # else resolve_files' ImportError, a traceback
                try:
                    resolve_files(getattr(k, name), k.format, split=name.removesuffix("_file"))
                except (FileNotFoundError, ValueError) as e:
                    raise ConfigError(f"task.{name}: {e}") from None
        check_metric(k)

    def _validate_deepspeed(self) -> None:
        d = self.deepspeed.validate(self.scaling, "adamw")
        if d.zero_stage == 3:
            # selection evaluation runs on rank 0 alone (exact metrics over the whole select split); ZeRO-3's forward
            # needs every rank to gather the parameters
            raise ConfigError("deepspeed.zero_stage must be 0, 1 or 2 for fine-tuning, got 3 (rank 0 evaluates "
                              "alone and ZeRO-3 needs every rank in each forward)")
        if d.pipeline_stages != 1:
            raise ConfigError(f"deepspeed.pipeline_stages must be 1 for fine-tuning, got {d.pipeline_stages}")

    def _validate_init(self) -> None:
        if not self.init:
            raise ConfigError("init must name a starting checkpoint: an HF BERT folder, a release folder, "
                              "models:/NAME@alias or runs:/RUN_ID/path")
        if self.init.startswith(MLFLOW_SCHEMES):  # resolved through MLflow by the job, once it names something
            scheme, rest = self.init.split(":/", 1)
            if not rest.split("/", 1)[0].split("@", 1)[0].strip():
                raise ConfigError(f"init={self.init!r} names no {'model' if scheme == 'models' else 'run'}; allowed: "
                                  "models:/NAME@alias, models:/NAME/VERSION or runs:/RUN_ID/path")
            refuse_stage("init", self.init)
            return
        if "://" in self.init:
            raise ConfigError(f"init must be a local folder or start with one of {MLFLOW_SCHEMES}, got {self.init!r}")
        if not (Path(self.init) / "config.json").is_file():
            from bert_core.files import moved_aside_said

            found = "" if Path(self.init).is_dir() else f" (no such folder{moved_aside_said(self.init)})"
            raise ConfigError(f"init folder {self.init!r} has no config.json{found}; allowed: an HF BERT or "
                              f"release folder with config.json, models:/NAME@alias or runs:/RUN_ID/path")

    def check_environment(self) -> "FinetuneConfig":
        """What the machine the job starts on must provide, checked before any Ray work (see
        PretrainConfig.check_environment); `init` is checked by `validate`, which needs its config.json; your own
        files' columns (TaskConfig.check_files), which Ray Data tasks would otherwise refuse as a traceback."""
        written = {"output_dir": self.output_dir, **self.tracking.written_paths()}
        if self.task.name == "pkgdocs":  # the task harvests its corpus there first
            written["task.corpus_dir"] = self.task.corpus_dir
        refuse_relative_when_submitted(written)
        check_output_dir("output_dir", self.output_dir)
        if self.task.name == "pkgdocs":
            check_harvest_dir("task.corpus_dir", self.task.corpus_dir)
        self.tracking.check_reachable()
        self.tracking.check_experiment()
        self.scaling.check_environment()
        if self.task.name == "files":
            self.task.check_files()
        return self

    def to_dict(self) -> dict:
        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "FinetuneConfig":
        return from_dict(cls, d)
