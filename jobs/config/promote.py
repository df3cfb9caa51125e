"""The promotion job's configuration (jobs/promote.py), validated before the registry is read."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from bert_core.config import ConfigError
from jobs.config.finetune import MAX_POSITIONS, FinetuneConfig, TaskConfig, check_kind_settings
from jobs.config.io import from_dict
from jobs.config.sections import TrackingConfig, check_alias, check_model_name, check_seed

CANDIDATE = "candidate"  # the alias a fine-tuning job sets on the version it registers: what is judged by default
# what judging reads, which a rollback (it judges nothing) must not be given on its command line: there, a mistake
JUDGING = ("version", "candidate_alias", "min_delta", "min_score", "confidence", "bootstrap_samples", "seed",
           "batch_size", "task")
# task.* overrides that name the candidate's data, or a kind only its task may have: fine-tuning's checks of these
# read that task's files, and promotion reads them once the candidate's task is (jobs/promote.py judged_task)
KIND_SETTINGS = {"question-answering": ("doc_stride", "max_query_length", "n_best", "max_answer_length"),
                 "token-classification": ("iob_scheme",), "multi-label": ("multi_label_threshold",)}
TASK_DATA = ("kind", "data_dir", "train_file", "dev_file", "select_file", "format", "columns", "metric", "corpus_dir")


@dataclass
class PromoteConfig:
    model: str = ""  # the registered model's name
    version: int = 0  # the version to judge; 0 = the one under `candidate_alias`
    candidate_alias: str = CANDIDATE
    # the margin: promoted only if the lower bound on (candidate - champion) is above it; in the metric's own units
    # (0-1 for accuracy, F1, correlations; 0-100 points for SQuAD's exact match and F1)
    min_delta: float = 0.0
    # with no champion yet: promoted only if the candidate's one-sided lower bound reaches it (a model at chance is no
    # champion because nothing was there before); None promotes any first candidate. The metric's units, as min_delta
    min_score: float | None = None
    confidence: float = 0.95  # the level of that one-sided bound (paired bootstrap over the evaluation rows)
    bootstrap_samples: int = 1000
    seed: int = 0  # bootstrap resamples
    batch_size: int = 64  # evaluation batch
    # overrides on the candidate's task config (task.dev_file=...), typed and checked as TaskConfig's fields
    task: dict = field(default_factory=dict, metadata={"fields": TaskConfig})
    rollback: bool = False  # move @champion back to the previous champion instead
    tracking: TrackingConfig = field(default_factory=lambda: TrackingConfig(experiment="bert-foundry-promotion"))

    def validate(self) -> "PromoteConfig":
        if not self.model:
            raise ConfigError("model must name a registered model (python jobs/promote.py NAME)")
        check_model_name("model", self.model)
        check_alias("candidate_alias", self.candidate_alias)
        if self.version < 0:
            raise ConfigError(f"version must be a version number (0 = @{self.candidate_alias}), got {self.version}")
        if self.min_delta < 0:
            raise ConfigError(f"min_delta must be >= 0 (a margin the candidate must win by), got {self.min_delta}")
        if not 0.5 <= self.confidence < 1:
            raise ConfigError(f"confidence must be in [0.5, 1), got {self.confidence}")
        if self.bootstrap_samples < 100:
            raise ConfigError(f"bootstrap_samples must be >= 100, got {self.bootstrap_samples}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
        check_seed("seed", self.seed)  # else NumPy refused it in the bootstrap, after both versions were scored
        allowed = {f.name for f in fields(TaskConfig)} - {"name", "labels"}
        unknown = sorted(set(self.task) - allowed)
        if unknown:
            raise ConfigError(f"task.{unknown[0]}: not a task setting that may change for evaluation; "
                              f"allowed: {', '.join(sorted(allowed))}")
        # each override of the type its field takes (task.max_seq_len=abc, a nested task.columns.txt), then in the range
        # fine-tuning allows (its own checks, on its default task with these numbers: task.max_seq_len=0 was a
        # traceback in the scoring), refused here, not after the registry was read and the rows loaded
        given = from_dict(TaskConfig, self.task, "task")
        numbers = {name: getattr(given, name) for name in self.task if name not in TASK_DATA}
        FinetuneConfig(task=TaskConfig(**numbers))._validate_task()
        # whatever the candidate's kind: only the ranges here. A window's fit to its length is judged once its task is
        # read (jobs/promote.py's judged_task): the length and window fields not given are the registered ones, not
        # TaskConfig's defaults, so the window checked here is one that always fits
        fits = {"max_query_length": 1, "doc_stride": 0, **numbers, "max_seq_len": MAX_POSITIONS}
        for kind, names in KIND_SETTINGS.items():
            if set(names) & set(self.task):
                check_kind_settings(TaskConfig(**fits), kind)
        self.tracking.validate()
        return self


def refuse_with_rollback(given: list[str]) -> None:
    """A version to judge, or settings of a judgement (`given`), beside --rollback: it judges nothing, and took them
    without a word. (The judging settings of a config file, shared with scheduled promotions, are let be.)"""
    if given:
        raise ConfigError(f"{given[0]} with --rollback: a rollback judges nothing, it moves @champion back to the "
                          f"champion before the current one (from the alias history); drop {', '.join(given)}, or "
                          "leave out --rollback to judge")
