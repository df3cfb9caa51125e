"""An MLflow artifact store the job cannot write is refused before any cluster work: MLflow imports the client of an
s3://, gs://, wasbs:// or abfss:// store at its first write, and a job given one without it passed `--check`, then
failed in start_run (No module named 'boto3') after its GPU nodes came up and its corpus was prepared."""

import re
import sys
import types
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest

from bert_core.config import ConfigError
from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig
from jobs.config.sections import TrackingConfig

QUICKSTART = str(Path(__file__).resolve().parents[2] / "configs/pretrain/quickstart.yaml")


def missing(monkeypatch, *modules):
    """Make `modules` not importable here, as on a machine without their packages (None in sys.modules)."""
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def installed(monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, types.SimpleNamespace(__spec__=ModuleSpec(module, None)))


def test_an_s3_artifact_store_without_boto3_fails_the_jobs_check_naming_the_field_and_the_install(tmp_path,
                                                                                                  monkeypatch):
    """What the job's `--check` and run() call first: s3fs ([cloud], for data.sources) brings aiobotocore, and
    MLflow's S3 store needs boto3."""
    missing(monkeypatch, "boto3")
    cfg = load_config(PretrainConfig, QUICKSTART, [f"output_dir={tmp_path}/runs",
                                                   f"tracking.tracking_uri=sqlite:///{tmp_path}/m.db",
                                                   "tracking.artifact_location=s3://bucket/mlart"])
    with pytest.raises(ConfigError, match=r"^tracking.artifact_location='s3://bucket/mlart': MLflow writes s3:// "
                                          r"artifacts with boto3, which is not installed here; pip install "
                                          r"'bert-foundry\[cloud\]'"):
        cfg.check_environment()
    assert not (tmp_path / "m.db").exists()  # the check made no store


@pytest.mark.parametrize("location, module, install", [
    ("gs://bucket/mlart", "google.cloud.storage", "pip install google-cloud-storage"),
    ("wasbs://art@account.blob.core.windows.net/mlart", "azure.storage.blob", "pip install azure-storage-blob"),
    ("abfss://art@account.dfs.core.windows.net/mlart", "azure.storage.filedatalake",
     "pip install azure-storage-file-datalake"),
    ("R2://bucket/mlart", "boto3", "pip install 'bert-foundry[cloud]'"),  # schemes are read as MLflow reads them
    ("sftp://user@host/mlart", "pysftp", "pip install pysftp"),
])
def test_each_stores_client_is_named_with_its_install(tmp_path, monkeypatch, location, module, install):
    missing(monkeypatch, module)
    with pytest.raises(ConfigError, match=rf"with {module}, which is not installed here; {re.escape(install)}"):
        TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/m.db", artifact_location=location).check_experiment()


def test_a_store_with_its_client_a_path_and_a_server_pass(tmp_path, monkeypatch):
    installed(monkeypatch, "boto3")
    for location in ("s3://bucket/mlart", "", str(tmp_path / "art"), "art", f"file://{tmp_path}/art",
                     "ftp://host/mlart", "mlflow-artifacts://host/mlart", "https://host/mlart"):
        TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/m.db", artifact_location=location).check_experiment()
    missing(monkeypatch, "boto3")
    TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/m.db", artifact_location="s3:/bucket").check_experiment()  # a
    # folder named s3: (start_run makes a path without :// a file URI), which is check_output_dir's business if any


def test_a_scheme_mlflow_has_no_store_for_is_refused_unless_a_plugin_registers_it(tmp_path, monkeypatch):
    """fsspec takes s3a:// and az:// (data.sources), MLflow's artifact stores do not."""
    import importlib.metadata

    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/m.db", artifact_location="s3a://bucket/mlart")
    with pytest.raises(ConfigError, match=r"^tracking.artifact_location='s3a://bucket/mlart': MLflow has no artifact "
                                          r"store for s3a://; allowed: a path .*s3://.*gs://.*wasbs://"):
        cfg.check_experiment()
    plugin = importlib.metadata.EntryPoint("s3a", "some_plugin:Repo", "mlflow.artifact_repository")
    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: (
        [plugin] if kw.get("group") == "mlflow.artifact_repository" else real(**kw)))
    cfg.check_experiment()


def test_an_existing_experiment_is_checked_by_its_own_store_not_the_configs(tmp_path, monkeypatch):
    """MLflow keeps the artifact location an experiment was made with: tracking.artifact_location applies only to a
    new one, so an experiment made on S3 needs boto3 whatever the config says, and one made on a folder does not."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/m.db"
    client = MlflowClient(uri)
    client.create_experiment("on-s3", artifact_location="s3://bucket/old")
    client.create_experiment("on-disk", artifact_location=(tmp_path / "art").as_uri())
    missing(monkeypatch, "boto3")
    with pytest.raises(ConfigError, match=r"^tracking.experiment='on-s3' keeps its artifacts at 's3://bucket/old': "
                                          r"MLflow writes s3:// artifacts with boto3"):
        TrackingConfig(tracking_uri=uri, experiment="on-s3", artifact_location=str(tmp_path / "art")).check_experiment()
    TrackingConfig(tracking_uri=uri, experiment="on-disk", artifact_location="s3://bucket/new").check_experiment()


def test_the_table_is_mlflows_registry_and_its_s3_store_fails_as_refused(tmp_path, monkeypatch):
    """ARTIFACT_BACKENDS is written out (a config check imports no framework): held here to MLflow's own schemes,
    and to what its S3 store does without boto3 (the failure the check stands in for)."""
    from mlflow.store.artifact.artifact_repository_registry import get_registered_artifact_repositories
    from mlflow.store.artifact.s3_artifact_repo import S3ArtifactRepository

    from jobs.config.sections import ARTIFACT_BACKENDS

    assert set(ARTIFACT_BACKENDS) == set(get_registered_artifact_repositories())
    missing(monkeypatch, "boto3")
    (tmp_path / "config.yaml").write_text("a: 1\n")
    with pytest.raises(ImportError, match="boto3"):
        S3ArtifactRepository("s3://bucket/mlart").log_artifact(str(tmp_path / "config.yaml"))


@pytest.mark.parametrize("check", [True, False])
def test_promote_checks_its_artifact_store_before_any_work(tmp_path, monkeypatch, check):
    """jobs/promote.py has no cluster, but its run loaded the evaluation rows (Ray Data for your files) and scored
    both models before start_run failed on boto3 with a traceback; its --check said valid."""
    from jobs import promote

    missing(monkeypatch, "boto3")
    monkeypatch.setattr(promote, "run", lambda cfg: pytest.fail("promote ran with a store it cannot write"))
    with pytest.raises(ConfigError, match=r"^tracking.artifact_location='s3://bucket/p': MLflow writes s3:// "
                                          r"artifacts with boto3"):
        promote.main(["some-model", f"tracking.tracking_uri=sqlite:///{tmp_path}/m.db",
                      "tracking.artifact_location=s3://bucket/p", *(["--check"] if check else [])])
