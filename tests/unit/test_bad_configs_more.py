"""Bad configs that used to pass validation and fail later (after the registry read, Ray, or the tokenizer sample),
or end in a traceback: each is one ConfigError naming the field, as in test_bad_configs.py."""

import subprocess
import sys
from pathlib import Path

import pytest

from bert_core.config import ConfigError
from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig
from jobs.config.promote import PromoteConfig
from jobs.config.sweep import load_sweep_config

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "configs/pretrain/quickstart.yaml")
SWEEP = str(ROOT / "configs/sweep/pkgdocs.yaml")


@pytest.mark.parametrize("override, message", [
    # the bootstrap's NumPy generator refused it after the scoring
    ("seed=-1", r"^seed must be >= 0 and < 2\*\*32 \(NumPy's seeds\), got -1"),
    ("task.max_seq_len=0", r"^task\.max_seq_len must be in \[16, 8192\]"),
    ("task.max_seq_len=-5", r"^task\.max_seq_len must be in \[16, 8192\]"),  # an OverflowError's traceback
    ("task.max_seq_len=100000", r"^task\.max_seq_len must be in \[16, 8192\]"),
    ("task.max_eval_examples=-1", r"^task\.max_eval_examples must be >= 0"),
    ("task.selection_fraction=1.5", r"^task\.selection_fraction must be in \(0, 1\)"),
    ("task.num_classes=1", r"^task\.num_classes must be >= 2"),
    # a question-answering, tagging or multi-label setting, whatever kind the candidate turns out to be (they were
    # taken and failed in the scoring: n_best=0 found no answer, doc_stride=-1 a traceback)
    ("task.n_best=0", r"^task\.n_best must be >= 1"),
    ("task.doc_stride=-1", r"^task\.doc_stride must be >= 0"),
    ("task.max_answer_length=0", r"^task\.max_answer_length must be >= 1"),
    ("task.iob_scheme=BIO", r"^task\.iob_scheme must be one of"),
    ("task.multi_label_threshold=1.5", r"^task\.multi_label_threshold must be in \(0, 1\)"),
])
def test_promote_refuses_a_bad_seed_or_task_override_before_the_registry_is_read(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(PromoteConfig, None, ["model=m", override]).validate()


@pytest.mark.parametrize("overrides", [
    ["task.dev_file=/data/heldout.csv"],  # the override promotion is for: the candidate's task is not pkgdocs's
    ["task.select_file=/data/select.csv"],
    ["task.data_dir=/data/glue/SST-2", "task.max_seq_len=256"],
    ["task.kind=multi-label", "task.metric=macro_f1", "task.columns.text=body"],
    ["task.doc_stride=64", "task.max_query_length=32", "task.n_best=5", "task.iob_scheme=IOB1"],
])
def test_promote_task_overrides_in_range_are_taken_whatever_the_candidates_task(overrides):
    cfg = load_config(PromoteConfig, None, ["model=m", *overrides]).validate()
    assert set(cfg.task) == {o.partition("=")[0].split(".")[1] for o in overrides}


def test_promote_judges_a_window_override_against_the_candidates_own_length():
    """A doc_stride in range alone, too long for the registered QA model's max_seq_len once merged with it: refused,
    naming both, before any row is read."""
    from jobs.promote import judged_task

    registered = {"name": "files", "kind": "question-answering", "train_file": __file__, "max_seq_len": 128}
    with pytest.raises(ConfigError, match=r"task\.doc_stride \(100\) \+ 3 must be < task\.max_seq_len \(128\)"):
        judged_task(registered, {"doc_stride": 100})
    assert judged_task(registered, {"doc_stride": 32}).doc_stride == 32


def test_promote_judges_a_metric_override_against_the_candidates_own_kind():
    """task.metric=f1 for a classification model of your own files passed every check, moved @challenger and
    scored the candidate, then ended in a KeyError traceback ('dev/f1'): refused, naming the kind's metrics."""
    from jobs.promote import judged_task

    registered = {"name": "files", "kind": "classification", "train_file": __file__}
    with pytest.raises(ConfigError, match=r"task\.metric must be one of \('accuracy', 'macro_f1'\) for "
                                          r"task\.kind=classification, got 'f1'"):
        judged_task(registered, {"metric": "f1"})
    assert judged_task(registered, {"metric": "macro_f1"}).metric == "macro_f1"
    with pytest.raises(ConfigError, match="only task.name=files reads task.metric"):  # a benchmark's is official
        judged_task({"name": "sst2", "data_dir": str(ROOT)}, {"metric": "accuracy"})


def test_promote_check_refuses_a_bad_task_override_in_one_line():
    """`--check` says so before any registry read: one `error:` line naming the field, exit status 2."""
    out = subprocess.run([sys.executable, "jobs/promote.py", "any-model", "task.max_seq_len=0", "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().startswith("error: task.max_seq_len must be in [16, 8192]"), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_sweep_search_space_null_on_the_command_line_is_the_files_clear_error():
    """As `search_space: null` in a sweep file: an empty space, refused by name (was an AttributeError)."""
    with pytest.raises(ConfigError, match="search_space must name at least one"):
        load_sweep_config(SWEEP, ["finetune.init=models:/m@a", "search_space=null"])


@pytest.mark.parametrize("override, message", [
    ("data.tokenizer.min_frequency=-1", r"^data\.tokenizer\.min_frequency must be >= 0"),
    ("data.tokenizer.min_frequency=18446744073709551616", r"^data\.tokenizer\.min_frequency must be >= 0 and <"),
    ("data.tokenizer.vocab_size=18446744073709551616", r"^data\.tokenizer\.vocab_size must be <= 2147483648"),
    ("data.tokenizer.vocab_size=2147483649", r"^data\.tokenizer\.vocab_size must be <= 2147483648"),  # id 2**31
])
def test_tokenizer_settings_the_trainer_would_refuse_are_refused_by_name(override, message):
    """The WordPiece trainer refused these with an OverflowError's traceback, after Ray and the sample read."""
    with pytest.raises(ConfigError, match=message):
        load_config(PretrainConfig, QUICKSTART, [override])


def test_tokenizer_min_frequency_zero_and_a_given_tokenizers_unused_settings_are_taken():
    largest = load_config(PretrainConfig, QUICKSTART, ["data.tokenizer.vocab_size=2147483648"])  # its ids fit int32
    assert largest.data.tokenizer.vocab_size == 2**31
    assert load_config(PretrainConfig, QUICKSTART, ["data.tokenizer.min_frequency=0"]).data.tokenizer.min_frequency == 0
    # with a tokenizer given, the training settings are not read (and not checked), as before
    cfg = PretrainConfig.from_dict({"data": {"sources": ["x"], "tokenizer": {"path": "tok", "min_frequency": -1}}})
    cfg.data.validate()


@pytest.mark.parametrize("uri", ["models:/clf/Production", "models:/clf/Staging/", "models:/clf/champion"])
def test_a_registry_stage_is_refused_before_any_cluster_work_naming_the_alias_form(uri):
    """models:/NAME/Production passed validation, the model even downloaded, and the fine-tune failed after its
    cluster work on MLflow's "Parameter 'version' must be an integer"; a prediction job alike. Versions, latest and
    aliases pass."""
    from jobs.config.finetune import FinetuneConfig
    from jobs.config.predict import PredictConfig

    with pytest.raises(ConfigError, match=r"init='models:/clf/.*is no version number.*use models:/clf@ALIAS"):
        load_config(FinetuneConfig, None, [f"init={uri}"])
    with pytest.raises(ConfigError, match=r"model='models:/clf/.*is no version number"):
        PredictConfig(model=uri, input="in.csv", output="out").validate()
    for fine in ("models:/clf/3", "models:/clf/latest", "models:/clf@champion", "models:/clf"):
        load_config(FinetuneConfig, None, [f"init={fine}"])
