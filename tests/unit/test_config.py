"""Job configs: YAML + dotted overrides into typed dataclasses, validated with errors naming the field."""

from pathlib import Path

import pytest

from bert_core.config import ConfigError, preset
from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config, parse_overrides

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "configs" / "pretrain" / "quickstart.yaml"


def test_every_shipped_config_loads_and_validates():
    files = sorted((REPO / "configs").rglob("*.yaml"))
    assert QUICKSTART in files
    for f in files:
        if f.parent.name == "pretrain":
            load_config(PretrainConfig, f)


def test_overrides_are_typed_and_nested():
    cfg = load_config(PretrainConfig, QUICKSTART, ["train.max_steps=7", "optim.warmup_steps=3", "optim.lr=3e-4",
                                                  "train.masking.whole_word=true", "model.preset=mini",
                                                  "data.sources=[a, b]"])
    assert cfg.train.max_steps == 7 and cfg.optim.lr == pytest.approx(3e-4)
    assert cfg.train.masking.whole_word is True
    assert cfg.model.hidden_size == preset("mini").hidden_size
    assert cfg.data.sources == ["a", "b"]


def test_model_preset_fields_can_be_overridden():
    cfg = load_config(PretrainConfig, None, ["data.sources=[x]", "model.preset=tiny", "model.hidden_size=128",
                                             "model.num_attention_heads=4"])
    assert (cfg.model.hidden_size, cfg.model.num_attention_heads, cfg.model.num_hidden_layers) == (128, 4, 2)


def test_round_trip_through_worker_dict():
    cfg = load_config(PretrainConfig, QUICKSTART, ["model.preset=small"])
    again = PretrainConfig.from_dict(cfg.to_dict())
    assert again == cfg


@pytest.mark.parametrize("override, names", [
    ("train.max_stepz=3", "train.max_stepz"),
    ("model.preset=huge", "model.preset"),
    ("model.hidden_sise=3", "model.hidden_sise"),
    ("deepspeed.zero_stage=4", "deepspeed.zero_stage"),
    ("train.micro_batch_size=abc", "train.micro_batch_size"),
    ("train.micro_batch_size=0", "train.micro_batch_size"),
    ("optim.schedule=cosine", "optim.schedule"),
    ("deepspeed.precision=bf16", "deepspeed.precision"),
    ("deepspeed.offload_params=true", "deepspeed.offload_params"),
    ("data.masking=sometimes", "data.masking"),
    ("data.max_seq_len=1024", "data.max_seq_len"),
    ("model.num_attention_heads=3", "model.num_attention_heads"),
    ("train.masking.rate=1.5", "rate"),
    ("run_name=a/b", "run_name"),
    ("train.rollback_lr_factor=0", "train.rollback_lr_factor"),
    ("train.rollback_after=-1", "train.rollback_after"),
])
def test_invalid_values_fail_naming_the_field(override, names):
    with pytest.raises(ConfigError, match=names.replace(".", r"\.")):
        load_config(PretrainConfig, QUICKSTART, [override])


@pytest.mark.parametrize("overrides, names", [
    (["deepspeed.pipeline_stages=3"], "must divide scaling.num_workers"),
    (["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=2"], "zero_stage 0 or 1"),
    (["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=0"], "zero_stage=1"),
    (["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1", "optim.name=lamb"], "lamb"),
    (["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1", "deepspeed.offload_optimizer=true"], "offload"),
    (["deepspeed.pipeline_stages=2", "deepspeed.partition_method=profile"], "partition_method"),
    (["deepspeed.pipeline_stages=8", "scaling.num_workers=8"], "exceeds the pipeline's 6 layers"),
])
def test_pipeline_configs_it_cannot_run_are_refused(overrides, names):
    with pytest.raises(ConfigError, match=names):
        load_config(PretrainConfig, QUICKSTART, overrides)
    ok = load_config(PretrainConfig, QUICKSTART, ["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1"])
    assert ok.deepspeed.pipeline_stages == 2


def test_bad_override_syntax_and_missing_file():
    with pytest.raises(ConfigError, match="dotted.key=value"):
        parse_overrides(["max_steps"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(PretrainConfig, "configs/nope.yaml")


@pytest.mark.parametrize("raw, value", [("|", "|"), (">", ">"), ("#", "#"), (",", ","), ("@x", "@x"), ("a|b", "a|b"),
                                        ("''", ""), ('""', ""), ("null", None), ("~", None), ("3", 3),
                                        ("[1, 2]", [1, 2])])
def test_override_text_yaml_reads_as_nothing_or_cannot_read_is_kept(raw, value):
    """`task.columns.label_separator=|` (the documented separator) is "|": YAML alone reads it as an empty block."""
    assert parse_overrides([f"a.b={raw}"]) == {"a": {"b": value}}


def test_a_string_field_takes_its_override_as_typed(tmp_path):
    from jobs.config.finetune import FinetuneConfig

    (tmp_path / "tags.csv").write_text("1,tags\nfirst text,a|b\nsecond text,b\n")
    cfg = load_config(FinetuneConfig, REPO / "configs" / "finetune" / "files.yaml",
                      [f"task.train_file={tmp_path / 'tags.csv'}", "task.kind=multi-label", "init=models:/m@a",
                       "run_name=010", "task.columns.text=1", "task.columns.label=tags",
                       "task.columns.label_separator=-"])
    assert (cfg.run_name, cfg.task.columns.text, cfg.task.columns.label_separator) == ("010", "1", "-")
    typed = parse_overrides(["task.columns.text=yes", "task.columns.label='a b'", "task.columns.id=?",
                             "run_name=2024-01-01", "train.epochs=3"], FinetuneConfig)
    assert typed == {"task": {"columns": {"text": "yes", "label": "a b", "id": "?"}}, "run_name": "2024-01-01",
                     "train": {"epochs": 3}}
    with pytest.raises(ConfigError, match=r"train.max_steps must be an integer, got ','"):
        load_config(PretrainConfig, QUICKSTART, ["train.max_steps=,"])


@pytest.mark.parametrize("overrides", [["deepspeed.compile=true", "deepspeed.zero_stage=3"],
                                       ["deepspeed.compile=true", "deepspeed.pipeline_stages=2",
                                        "deepspeed.zero_stage=1"]])
def test_compile_only_where_it_runs(overrides):
    with pytest.raises(ConfigError, match=r"deepspeed\.compile=true needs deepspeed\.zero_stage 0, 1 or 2"):
        load_config(PretrainConfig, QUICKSTART, overrides)
    assert load_config(PretrainConfig, QUICKSTART, ["deepspeed.compile=true"]).deepspeed.compile


def test_static_masking_refuses_a_cap_that_keeps_it_far_under_the_rate():
    """BERT's 20 targets per 128 tokens, carried to 512, masks 3.9% instead of 15%; the cap must scale with length."""
    with pytest.raises(ConfigError, match=r"data\.max_predictions=20 masks 3\.9% of a data\.max_seq_len=512 example, "
                                          r"not the 15\.0% of data\.mask_rate=0\.15; set it to 76 or more"):
        load_config(PretrainConfig, QUICKSTART, ["data.masking=static", "data.max_seq_len=512"])
    with pytest.raises(ConfigError, match=r"phase2\.max_predictions=20 masks 3\.9% of a phase2\.max_seq_len=512"):
        load_config(PretrainConfig, QUICKSTART, ["data.masking=static", "phase2.max_steps=10",
                                                 "phase2.max_predictions=20"])
    for overrides in (["data.max_seq_len=512", "data.max_predictions=80"], ["phase2.max_steps=10"],
                      ["data.max_seq_len=64", "data.max_predictions=8"]):  # 8 of 61: 13%, a cap that rarely binds
        load_config(PretrainConfig, QUICKSTART, ["data.masking=static", *overrides])
    # Dynamic masking ignores data.max_predictions (train.masking decides at batch time).
    load_config(PretrainConfig, QUICKSTART, ["data.max_seq_len=512"])
    # a rate of 0 passed, and every shard task refused it after the whole read, naming masking.rate
    with pytest.raises(ConfigError, match=r"data\.mask_rate must be in \(0, 1\) with data\.masking=static"):
        load_config(PretrainConfig, QUICKSTART, ["data.masking=static", "data.mask_rate=0"])


def test_the_datas_masking_fields_set_under_dynamic_masking_say_where_they_belong():
    """With dynamic masking (the default) the masks are drawn at batch time by train.masking: a user's
    data.whole_word_masking=true or data.mask_rate=0.3 would mask nothing, and the run would train on 15% single
    pieces without a word. Refused, naming the field that does it; the same under static masking, and set where
    train.masking agrees, is taken."""
    with pytest.raises(ConfigError, match=r"dynamic masking \(the default\) masks whole words with "
                                          r"train.masking.whole_word=true"):
        load_config(PretrainConfig, QUICKSTART, ["data.whole_word_masking=true"])
    with pytest.raises(ConfigError, match=r"data.mask_rate=0.3 applies to masks drawn when examples are prepared "
                                          r"\(data.masking=static\); dynamic masking \(the default\) masks "
                                          r"train.masking.rate=0.15: set that instead"):
        load_config(PretrainConfig, QUICKSTART, ["data.mask_rate=0.3"])
    load_config(PretrainConfig, QUICKSTART, ["data.whole_word_masking=true", "train.masking.whole_word=true",
                                             "data.mask_rate=0.3", "train.masking.rate=0.3"])
    load_config(PretrainConfig, QUICKSTART, ["data.masking=static", "data.whole_word_masking=true",
                                             "data.mask_rate=0.3", "data.max_predictions=38"])


def test_every_shipped_config_validates_with_static_masking():
    for f in sorted((REPO / "configs" / "pretrain").glob("*.yaml")):
        load_config(PretrainConfig, f, ["data.masking=static", "phase2.max_steps=1000"])


@pytest.mark.parametrize("override, message", [
    ("data.tokenizer.limit_alphabet=0", r"data\.tokenizer\.limit_alphabet must be null .* got 0"),
    ("data.tokenizer.limit_alphabet=9000", r"data\.tokenizer\.limit_alphabet must be .*vocab_size=8192\], got 9000"),
    ("data.tokenizer.strip_accents=sometimes", r"data\.tokenizer\.strip_accents must be true or false"),
    ("data.tokenizer.lowercase=sometimes", r"data\.tokenizer\.lowercase must be true or false"),
])
def test_bad_tokenizer_settings_name_the_field(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(PretrainConfig, QUICKSTART, [override])


def test_tokenizer_settings_checked_on_a_config_built_by_hand():
    from pipelines.config import DataConfig, TokenizerConfig

    with pytest.raises(ConfigError, match=r"data\.tokenizer\.strip_accents must be null \(follow lowercase\)"):
        DataConfig(sources=["x"], tokenizer=TokenizerConfig(strip_accents="no")).validate()
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.limit_alphabet"):
        DataConfig(sources=["x"], tokenizer=TokenizerConfig(limit_alphabet=True)).validate()
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.lowercase must be null \(uncased, or a given"):
        DataConfig(sources=["x"], tokenizer=TokenizerConfig(lowercase="no")).validate()
    assert TokenizerConfig().lowercase is None  # unset: a given tokenizer's own, uncased BERT for a trained one
    cfg = load_config(PretrainConfig, QUICKSTART, ["data.tokenizer.strip_accents=false",
                                                  "data.tokenizer.limit_alphabet=5000"])
    assert (cfg.data.tokenizer.strip_accents, cfg.data.tokenizer.limit_alphabet) == (False, 5000)


def test_tokenizer_settings_rename_a_prepared_set_only_where_they_change_the_tokenizer():
    """A trained tokenizer's alphabet rule is in its prepared set's name (a set trained with the old fixed 1000 is
    not reused: on a CJK corpus it was mostly [UNK]); accents that follow lowercase change no name; a given tokenizer
    is named by its own hash, not these settings."""
    from pipelines.config import DataConfig, TokenizerConfig
    from pipelines.layout import dataset_name, hashed_config

    def name(**tok) -> str:
        return dataset_name(DataConfig(sources=["x"], tokenizer=TokenizerConfig(**tok)), [], None)

    hashed = hashed_config(DataConfig(sources=["x"], tokenizer=TokenizerConfig(vocab_size=4000)))["tokenizer"]
    assert hashed["limit_alphabet"] == "coverage 0.9995" and "strip_accents" not in hashed
    assert name(vocab_size=4000, lowercase=True) == name(vocab_size=4000, lowercase=True, strip_accents=True)
    # unset lowercase is uncased for a trained tokenizer: the same name, with accents that follow it or not
    assert name(vocab_size=4000) == name(vocab_size=4000, lowercase=True) == name(vocab_size=4000, strip_accents=True)
    assert name(vocab_size=4000, lowercase=False) == name(vocab_size=4000, lowercase=False, strip_accents=False)
    assert len({name(vocab_size=4000), name(vocab_size=4000, strip_accents=False),
                name(vocab_size=4000, limit_alphabet=1000), name(vocab_size=4000, limit_alphabet=2000)}) == 4
    given = dict(path="/some/tokenizer", vocab_size=30522)  # a given tokenizer: its hash names it, not these
    assert name(**given) == name(**given, strip_accents=False, limit_alphabet=50)


ALIASES = ["candidate", "prod-eu_2", "v2", "V10", "latest", "LATEST", "prod.eu", "a b", "x" * 255, "x" * 256,
           "latest-1", "v2a", "", "é"]


@pytest.mark.parametrize("alias", ALIASES)
def test_a_registry_alias_is_checked_with_mlflows_own_rule(alias):
    """The config refuses an alias exactly where MLflow's registry would, after training, when it sets it."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import _validate_model_alias_name, _validate_model_alias_name_reserved

    from jobs.config.sections import TrackingConfig, check_alias
    from jobs.promote import PromoteConfig

    try:
        _validate_model_alias_name(alias)
        _validate_model_alias_name_reserved(alias)
        mlflow_accepts = True
    except MlflowException:
        mlflow_accepts = False
    try:
        check_alias("tracking.alias", alias)
        accepted = True
    except ConfigError as exc:
        assert str(exc).startswith("tracking.alias must be a registry alias MLflow accepts (letters, digits")
        accepted = False
    assert accepted == mlflow_accepts
    if alias and not accepted:
        with pytest.raises(ConfigError, match="^tracking.alias must be a registry alias"):
            TrackingConfig(alias=alias).validate()
        with pytest.raises(ConfigError, match="^candidate_alias must be a registry alias"):
            PromoteConfig(model="m", candidate_alias=alias).validate()
    with pytest.raises(ConfigError, match="^tracking.alias must be set when tracking.registered_model is"):
        TrackingConfig(alias="", registered_model="m").validate()


def test_phase2_warms_up_again_by_default_when_its_optimizer_is_fresh():
    """Phase 2 starts from phase 1's weights with fresh Adam moments (NVIDIA's recipe): with no re-warmup (the old
    default) its first step moves every weight by about the peak learning rate. The default is NVIDIA's 12.8% of
    phase 2's steps when the optimizer is reset, none when phase 1's moments carry over; a number is taken as is."""
    from jobs.pretrain import phase2_config

    def warmup(*overrides: str) -> int:
        cfg = load_config(PretrainConfig, QUICKSTART, ["phase2.max_steps=1000", *overrides])
        return phase2_config(cfg, "/ckpt", "/tokenizer").optim.warmup_steps

    assert warmup() == 128
    assert warmup("phase2.reset_optimizer=false") == 0
    assert warmup("phase2.warmup_steps=0") == 0 and warmup("phase2.warmup_steps=50") == 50
    with pytest.raises(ConfigError, match=r"phase2.warmup_steps must be >= 0, or -1"):
        load_config(PretrainConfig, QUICKSTART, ["phase2.warmup_steps=-2"])


def test_phase_2s_own_settings_are_refused_before_phase_1_trains():
    """Phase 2's config was validated only after phase 1 had trained: the modern recipe's 8192 positions let
    phase2.max_seq_len=8192 through the first check, and data.max_seq_len's [8, 4096] refused it a whole phase
    later. A dynamic-masking cap went into phase 2 as it was (BERT's 20 at 128 tokens: 3.9% of a 512-token row);
    it takes phase2.max_predictions there, as the static one does, and a cap under the rate is refused."""
    from jobs.pretrain import phase2_config

    with pytest.raises(ConfigError, match=r"^phase 2 \(phase2.max_steps=100\): data.max_seq_len must be in "
                                          r"\[8, 4096\], got 8192"):
        load_config(PretrainConfig, QUICKSTART, ["model.recipe=modern", "phase2.max_steps=100",
                                                 "phase2.max_seq_len=8192"])
    cfg = load_config(PretrainConfig, QUICKSTART, ["train.masking.max_predictions=20", "phase2.max_steps=100"])
    assert phase2_config(cfg, "/ckpt", "/tokenizer").train.masking.max_predictions == 80
    with pytest.raises(ConfigError, match=r"train.masking.max_predictions=20 masks 3.9% of a data.max_seq_len=512 "
                                          r"example, not the 15.0% of train.masking.rate=0.15"):
        load_config(PretrainConfig, QUICKSTART, ["train.masking.max_predictions=20", "data.max_seq_len=512"])
    with pytest.raises(ConfigError, match=r"^phase2.max_predictions=40 masks 7.9% of a phase2.max_seq_len=512 example, "
                                          r"not the 15.0% of train.masking.rate=0.15; set it to 76"):
        load_config(PretrainConfig, QUICKSTART, ["train.masking.max_predictions=20", "phase2.max_steps=100",
                                                 "phase2.max_predictions=40"])


def test_overrides_and_files_read_numbers_as_typed_and_refuse_non_finite_ones(tmp_path):
    """YAML 1.1 reads `010` as octal 8 and `1:30` as sexagesimal 90: `train.max_steps=010` trained 8 steps. Numbers
    are YAML 1.2's now, in overrides and in config files; a NaN or infinite learning rate passed every `<= 0` check."""
    cfg = load_config(PretrainConfig, QUICKSTART, ["train.max_steps=0100", "optim.lr=1e-4", "train.log_every=0x10"])
    assert (cfg.train.max_steps, cfg.optim.lr, cfg.train.log_every) == (100, 1e-4, 16)
    assert load_config(PretrainConfig, QUICKSTART, ["train.max_steps=1_000"]).train.max_steps == 1000
    (tmp_path / "c.yaml").write_text(f"base: {QUICKSTART}\ntrain:\n  max_steps: 0100\n")
    assert load_config(PretrainConfig, tmp_path / "c.yaml").train.max_steps == 100
    with pytest.raises(ConfigError, match=r"train.max_steps must be an integer, got '1:30'"):
        load_config(PretrainConfig, QUICKSTART, ["train.max_steps=1:30"])
    for bad in ("nan", ".inf", "-.inf"):
        with pytest.raises(ConfigError, match=r"optim.lr must be a finite number"):
            load_config(PretrainConfig, QUICKSTART, [f"optim.lr={bad}"])


def test_a_key_repeated_in_a_config_file_is_refused_naming_the_file_and_lines(tmp_path):
    """PyYAML keeps a repeated key's last block: `optim: {lr: 5e-4}` then `optim: {warmup_steps: 10}` trained at the
    base's lr, silently. Merge keys (<<: *anchor) are meant to be overridden and stay allowed."""
    path = tmp_path / "run.yaml"
    path.write_text("data:\n  sources: [x]\noptim:\n  lr: 5.0e-4\ntrain:\n  max_steps: 20\n"
                    "optim:\n  warmup_steps: 10\n")
    with pytest.raises(ConfigError, match=r"run.yaml'?: key 'optim' appears twice in one mapping \(lines 3 and 7\)"):
        load_config(PretrainConfig, path)
    from jobs.config.io import yaml_load

    assert yaml_load("a: &o {lr: 1, warmup: 5}\nb:\n  <<: *o\n  warmup: 10\n")["b"] == {"lr": 1, "warmup": 10}


def test_prediction_paths_and_model_names_reach_the_config_as_typed():
    """`--output /data/out😀`: the emoji went through an ASCII JSON escape that YAML read back as two lone surrogates,
    and the job ended in a UnicodeEncodeError traceback."""
    from jobs import predict, promote

    import os

    undecodable = os.fsdecode(b"/data/bad\xff/out")  # a file name's bytes that are no UTF-8, as Python holds them
    args, cfg = predict.parse(["models:/müller@champion", "--input", "/data/in 😀/*.csv", "--output", undecodable])
    assert (cfg.model, cfg.input, cfg.output) == ("models:/müller@champion", "/data/in 😀/*.csv", undecodable)
    assert predict.parse(["m", "--input", "x", "--output", 'a"b\\c\x85d'])[1].output == 'a"b\\c\x85d'
    import yaml

    from jobs.config.io import yaml_load

    with pytest.raises(yaml.YAMLError, match="unhashable"):  # PyYAML's own error, not a TypeError of the key check
        yaml_load("? [c]\n: 1\n")
    assert promote.parse(["modèle-😀"])[1].model == "modèle-😀"

@pytest.mark.parametrize("override", ["sweep.finetune.init=/models/mine", "sweep.finetune.tracking.tracking_uri=x"])
def test_the_quickstart_refuses_a_sweep_override_it_would_drop(override):
    """The quickstart sets the sweep's starting model (its own release) and tracking store (pretraining's) after
    pretraining: such an override was validated, then dropped unread."""
    from jobs import quickstart

    with pytest.raises(ConfigError, match=rf"override 'sweep\.{override.split('=')[0][6:]}' is the quickstart's own"):
        quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, [override])
    quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, ["sweep.finetune.tracking.experiment=mine"])


def test_a_file_that_is_no_yaml_and_a_url_that_is_none_are_refused_naming_them(tmp_path):
    """A tab in a base file's indentation was a traceback naming "<unicode string>" (which file?), a port that is
    no number a traceback from urllib: one-line errors naming the file, and the field."""
    from jobs.config.sections import TrackingConfig

    (tmp_path / "tab.yaml").write_text("train:\n\tmax_steps: 3\n")
    (tmp_path / "child.yaml").write_text("base: tab.yaml\nrun_name: x\n")
    with pytest.raises(ConfigError, match=r"config file '.*tab\.yaml' is not valid YAML: .*found character"):
        load_config(PretrainConfig, tmp_path / "child.yaml", [])
    (tmp_path / "latin.yaml").write_bytes("run_name: café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin\.yaml' is not valid YAML: 'utf-8' codec"):
        load_config(PretrainConfig, tmp_path / "latin.yaml", [])
    for url in ("http://mlflow:5000:5000", "http://[::1", "http://mlflow:99999"):
        with pytest.raises(ConfigError, match=r"tracking\.tracking_uri is not a valid URL \("):
            TrackingConfig(tracking_uri=url).check_reachable()


def test_a_harvest_of_no_size_is_refused():
    """The fine-tune's task.harvest_max_mb was checked, pretraining's not: -5 harvested one document, after Ray."""
    for size in ("-5", "0"):
        with pytest.raises(ConfigError, match=f"corpus.harvest_max_mb must be > 0, got {size}"):
            load_config(PretrainConfig, QUICKSTART, [f"corpus.harvest_max_mb={size}"])


@pytest.mark.parametrize("uri", ["sqllite:///mlflow.db", "sqlite:mlflow.db", "mlruns", "file:///tmp/mlruns",
                                 "htp://host:5000", "SQLITE:///x.db", " http://h:5000", "http"])
def test_a_tracking_uri_no_mlflow_store_takes_is_refused_before_any_cluster_work(uri, monkeypatch):
    """A mistyped store passed validation and --check; MLflow refused it at the first call, after Ray had started
    and the corpus was prepared."""
    with pytest.raises(ConfigError, match=r"^tracking\.tracking_uri=.* names no MLflow store"):
        load_config(PretrainConfig, QUICKSTART, [f"tracking.tracking_uri={uri}"])
    for good in ("sqlite:////abs/mlflow.db", "http://127.0.0.1:5000", "postgresql+psycopg2://u:p@db/m", "databricks",
                 "databricks://profile", "mssql+pyodbc://u@db/m"):
        assert load_config(PretrainConfig, QUICKSTART, [f"tracking.tracking_uri={good}"]).tracking.tracking_uri == good
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow's file store, allowed: a folder is a store
    assert load_config(PretrainConfig, QUICKSTART, ["tracking.tracking_uri=/abs/mlruns"]).tracking.tracking_uri
    # SQLAlchemy's driver form of SQLite: MLflow opens it, past the guards that read sqlite:/// (a relative file in a
    # submitted job's copy, one file from several machines)
    with pytest.raises(ConfigError, match=r"write a SQLite store as sqlite:///<file> .*not sqlite\+pysqlite://"):
        load_config(PretrainConfig, QUICKSTART, ["tracking.tracking_uri=sqlite+pysqlite:///mlflow.db"])


def test_a_config_json_the_yaml_loader_never_saw_is_checked_as_strictly():
    """load_pretrained reads config.json with Python's json, which takes NaN, and the API takes any value: a NaN
    epsilon made every output NaN, a boolean layer count passed as 1, and `"pad_token_id": null` (as some configs
    write it; transformers takes it) failed with a TypeError naming no field: it is 0, BERT's [PAD]. Another field's
    null is no default (a null activation is refused, not gelu)."""
    from bert_core.config import BertConfig

    for bad, field in (({"layer_norm_eps": float("nan")}, "layer_norm_eps"), ({"num_hidden_layers": True},
                       "num_hidden_layers"), ({"initializer_range": float("inf")}, "initializer_range"),
                       ({"pad_token_id": False}, "pad_token_id"), ({"hidden_act": None}, "hidden_act")):
        with pytest.raises(ConfigError, match=f"model.{field} must be"):
            BertConfig.from_dict(bad).validate()
    assert BertConfig.from_dict({"pad_token_id": None, "classifier_dropout": None}).validate().pad_token_id == 0


def test_overrides_of_one_section_merge_in_any_order_and_settings_that_would_do_nothing_are_refused():
    """`train.max_steps=5 train={log_every: 1}` dropped the max_steps (the mapping replaced the section: the run
    took 600 steps), the reverse order kept both; a mapping and a value of one key are a contradiction. An empty
    `data.tokenizer.path=` skipped the trained tokenizer's checks (a vocabulary of 5 passed, to fail after cluster
    work). Under static masking train.masking masked nothing, accepted unsaid (data.mask_rate under dynamic masking
    is refused already)."""
    for order in (["train.max_steps=80", "train={log_every: 1}"], ["train={log_every: 1}", "train.max_steps=80"]):
        cfg = load_config(PretrainConfig, QUICKSTART, order)
        assert (cfg.train.max_steps, cfg.train.log_every) == (80, 1), order
    with pytest.raises(ConfigError, match=r"override 'train=3' conflicts with an earlier override of 'train'"):
        parse_overrides(["train.max_steps=5", "train=3"], PretrainConfig)
    with pytest.raises(ConfigError, match=r"data.tokenizer.vocab_size must be >= 128, got 5"):
        load_config(PretrainConfig, QUICKSTART, ["data.tokenizer.path=", "data.tokenizer.vocab_size=5"])
    assert load_config(PretrainConfig, QUICKSTART, ["data.tokenizer.path="]).data.tokenizer.path is None
    for override, instead in (("train.masking.rate=0.4", "set data.mask_rate instead"),
                              ("train.masking.whole_word=true", "set data.whole_word_masking instead"),
                              ("train.masking.mask_token_prob=0.5", "80/10/10")):
        with pytest.raises(ConfigError, match=rf"train.masking.{override.split('.')[2].split('=')[0]}=.*data.masking="
                                              rf"static holds the masks drawn when examples are prepared.*{instead}"):
            load_config(PretrainConfig, QUICKSTART, ["data.masking=static", override])
    load_config(PretrainConfig, QUICKSTART, ["data.masking=static", "model.recipe=modern"])  # its 0.3: the recipe's
    # the modern recipe's static cap is the rate the run masks at: the user's (it was 30% of a row whatever the rate)
    for rate, cap in ((0.35, 45), (0.4, 52), (0.2, 39)):  # a lower rate: the 30% cap, its sets named as before
        cfg = load_config(PretrainConfig, QUICKSTART, ["data.masking=static", "model.recipe=modern",
                                                       f"data.mask_rate={rate}"])
        assert (cfg.data.mask_rate, cfg.data.max_predictions) == (rate, cap)


def test_promotes_task_overrides_are_read_and_checked_as_the_task_configs_fields():
    """promote's `task.*` overrides were parsed as YAML (`task.columns.text=yes`: True, then refused as "columns.text
    must be a string" after the registry was read and the rows loaded) and checked for their top keys only
    (`task.max_seq_len=abc`, `task.columns.txt=...` passed --check). Read as TaskConfig's fields, and refused
    before any MLflow call, naming the field."""
    from jobs import promote

    assert promote.parse(["m", "task.columns.text=yes", "task.max_seq_len=64"])[1].task == {
        "columns": {"text": "yes"}, "max_seq_len": 64}
    for override, message in (("task.max_seq_len=abc", r"task.max_seq_len must be an integer, got 'abc'"),
                               ("task.columns.txt=a", r"unknown key 'task.columns.txt'.*did you mean "
                                                      r"'task.columns.text'")):
        with pytest.raises(ConfigError, match=message):
            promote.parse(["m", override])


@pytest.mark.parametrize("job", ["pretrain", "finetune", "sweep", "quickstart"])
def test_a_flag_between_overrides_is_read_as_make_passes_it(job):
    """make puts its fixed overrides before $(ARGS): `make finetune ARGS="--check train.epochs=1"` gives the job
    overrides on both sides of a flag, which argparse's parse_args refuses."""
    import importlib

    from tests.unit.scorer_kit import MINILM

    module = importlib.import_module(f"jobs.{job}")
    first, last = {"pretrain": ("train.max_steps=70", "train.log_every=1"),
                   "finetune": ("train.epochs=2", f"init={MINILM}"),
                   "sweep": ("num_samples=4", f"finetune.init={MINILM}"),
                   "quickstart": ("pretrain.train.max_steps=70", "sweep.num_samples=4")}[job]
    config = {"pretrain": ["--config", "configs/pretrain/quickstart.yaml"],
              "finetune": ["--config", "configs/finetune/pkgdocs.yaml"],
              "sweep": ["--config", "configs/sweep/pkgdocs.yaml"], "quickstart": []}[job]
    args, _ = module.parse([*config, first, "--check", last])
    assert args.check and args.overrides == [first, last]


@pytest.mark.parametrize("nsp", [True, False])
def test_one_token_type_is_refused_for_bert_pretraining(nsp):
    """model.type_vocab_size=1 (RoBERTa's) validated, and every worker failed at the first forward: the collator gives
    sentence B token type 1 (with train.nsp=false too), a lookup past a one-row table."""
    data = {"model": {"preset": "tiny", "type_vocab_size": 1}, "data": {"sources": ["/corpus"]}, "train": {"nsp": nsp}}
    with pytest.raises(ConfigError, match=r"^model\.type_vocab_size=1: .*B segment is token type 1.*allowed: >= 2"):
        PretrainConfig.from_dict(data).validate()
    data["model"]["type_vocab_size"] = 2
    assert PretrainConfig.from_dict(data).validate().model.type_vocab_size == 2


def test_phase_2s_run_logs_what_it_ran_not_the_phase2_sections_defaults():
    """phase2_run leaves the phase-2 config's phase2 section at its defaults (it runs no phase of its own), and the
    phase-2 MLflow run logged them: reset_optimizer=True, lr=0, max_steps=0 beside a phase of 45,000 steps at its
    own rate on phase 1's moments. The section is left out; train, optim and data say what ran."""
    from jobs.pretrain import phase2_config, phase2_params

    cfg = load_config(PretrainConfig, QUICKSTART, ["phase2.max_steps=300", "phase2.lr=5e-4",
                                                   "phase2.reset_optimizer=false", "phase2.micro_batch_size=4"])
    params = phase2_params(phase2_config(cfg, "/ckpt", "/tokenizer"))
    assert "phase2" not in params
    assert (params["train"]["max_steps"], params["optim"]["lr"], params["train"]["reset_optimizer"],
            params["train"]["micro_batch_size"], params["data"]["max_seq_len"]) == (300, 5e-4, False, 4, 512)
