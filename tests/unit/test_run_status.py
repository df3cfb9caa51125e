"""A job's MLflow runs say where the job is (RUNNING while it trains, FAILED with its error when it raises,
FINISHED when it is done), and what it logs reaches them whatever the user's labels are called: real SQLite stores."""

import json
import warnings

import numpy as np
import pytest

from jobs.registry import metric_logger, tracking


@pytest.fixture
def store(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    return uri, MlflowClient(uri)


def test_a_run_is_running_until_the_job_ends_it_and_failed_with_its_error_when_it_raises(store, tmp_path):
    uri, client = store
    run_id = tracking.start_run(uri, "status", str(tmp_path / "art"), "train", {"a": 1}, tags={"task": "x"})
    run = client.get_run(run_id)
    assert (run.info.status, run.info.end_time) == ("RUNNING", None)  # training: not FINISHED at its first step
    assert run.data.tags["task"] == "x" and "mlflow.user" in run.data.tags and run.data.params == {"a": "1"}
    with pytest.raises(ValueError, match="out of memory"):
        with tracking.ending(uri, run_id):
            raise ValueError("out of memory")
    run = client.get_run(run_id)
    assert run.info.status == "FAILED" and run.info.end_time
    assert run.data.tags["error"] == "ValueError: out of memory"

    phase = tracking.start_run(uri, "status", "", "phase1", {"a": 1})
    with tracking.ending(uri, phase, finished=True):
        pass
    assert client.get_run(phase).info.status == "FINISHED"
    done = tracking.start_run(uri, "status", "", "done", {"a": 1})
    client.set_terminated(done, "FINISHED")  # finish_run ended it, then moving the alias failed: the job failed
    with pytest.raises(RuntimeError):
        with tracking.ending(uri, done):
            raise RuntimeError("alias move refused")
    assert client.get_run(done).info.status == "FAILED"
    assert client.get_run(done).data.tags["error"] == "RuntimeError: alias move refused"
    logging = tracking.start_run(uri, "status", "", "logging", {"a": 1})
    client.set_terminated(logging, "FAILED")  # MLflow's own run context ended it FAILED: the error still named
    with pytest.raises(OSError):
        with tracking.ending(uri, logging):
            raise OSError("disk full")
    assert client.get_run(logging).data.tags["error"] == "OSError: disk full"
    stopped = tracking.start_run(uri, "status", "", "stopped", {"a": 1})
    with pytest.raises(KeyboardInterrupt):
        with tracking.ending(uri, stopped):
            raise KeyboardInterrupt
    assert client.get_run(stopped).info.status == "KILLED"


@pytest.mark.parametrize("name, key", [("select/f1_ORG(company)", "select/f1_ORG_company_"),
                                       ("dev/f1_LOC&GPE", "dev/f1_LOC_GPE"), ("dev/f1_人名", "dev/f1_人名"),
                                       ("dev/f1_a//b/", "dev/f1_a/b"), ("dev/../x", "dev/__/x"), ("/", "_"),
                                       ("..x/y", "_.x/y"), ("train/loss", "train/loss")])
def test_metric_keys_are_what_mlflow_accepts(name, key):
    from mlflow.utils.validation import _validate_metric_name

    assert metric_logger.metric_key(name) == key
    _validate_metric_name(key)  # raises where MLflow would refuse the batch


def test_a_name_longer_than_mlflow_takes_keeps_its_head_and_stays_apart_from_its_neighbours():
    from mlflow.utils.validation import _validate_metric_name

    names = [f"select/f1_{'very long entity type ' * 12}{i}" for i in range(2)]
    keys = [metric_logger.metric_key(n) for n in names]
    assert len(set(keys)) == 2 and all(len(k) == 250 and k.startswith("select/f1_very long entity") for k in keys)
    for k in keys:
        _validate_metric_name(k)


def test_an_entity_type_mlflow_refuses_as_a_name_costs_no_metric(store, tmp_path):
    """A user's NER labels `B-ORG(company)`, `B-C++`: their per-type F1 is logged under a cleaned name, and every
    other point of the batch and of later steps arrives; the run's final metrics log too."""
    uri, client = store
    run_id = client.create_run(client.create_experiment("names", (tmp_path / "art").as_uri())).info.run_id
    logger = metric_logger.RankZeroLogger(uri, run_id, rank=0, system_metrics_s=0)
    logger.log({"select/f1_ORG(company)": 0.5, "select/f1_C++": 0.25, "select/n": np.int64(7),
                "select/f32": np.float32(0.75)}, step=20)  # numpy's numbers are numbers too
    for step in range(21, 25):
        logger.log({"train/loss": float(step)}, step=step)
    assert logger.close() == {"tracking_failures": 0, "tracking_undelivered": 0}
    assert [m.step for m in client.get_metric_history(run_id, "train/loss")] == [21, 22, 23, 24]
    assert client.get_metric_history(run_id, "select/f1_ORG_company_")[0].value == 0.5
    assert [client.get_metric_history(run_id, k)[0].value for k in ("select/n", "select/f32")] == [7, 0.75]
    tracking.finish_run(uri, run_id, {"best/select/f1_ORG(company)": 0.5}, None, "", "candidate",
                        task="token-classification")
    assert client.get_run(run_id).data.metrics["best.select.f1_ORG_company_"] == 0.5


def test_a_batch_the_store_refuses_is_counted_and_never_blocks_the_points_after_it(store, tmp_path):
    """Refused (400: a malformed point) is not failed: retrying it forever would hold back every later metric."""
    from mlflow.entities import Metric

    uri, client = store
    run_id = client.create_run(client.create_experiment("refused", (tmp_path / "art").as_uri())).info.run_id
    logger = metric_logger.RankZeroLogger(uri, run_id, rank=0, system_metrics_s=0)
    logger.pending.append(Metric("bad(name)", 1.0, 0, 1))  # as a logger without metric_key would have queued it
    with pytest.warns(UserWarning, match="MLflow refused 1 metric point"):
        logger.log({"train/loss": 2.0}, step=2)
    logger.log({"train/loss": 3.0}, step=3)
    assert logger.close() == {"tracking_failures": 0, "tracking_undelivered": 1}
    assert [m.step for m in client.get_metric_history(run_id, "train/loss")] == [2, 3]


def test_a_long_task_config_is_registered_whole(store, tmp_path):
    """250 labels make a task_config of ~7,000 characters: the version's tag keeps valid JSON (promotion and
    prediction parse it), not its first 5,000 characters."""
    import torch

    from bert_core.checkpoint import save_pretrained
    from bert_core.config import tiny
    from bert_core.model import BertForSequenceClassification

    uri, client = store
    labels = [f"intent_category_{i:03d}" for i in range(250)]
    model = BertForSequenceClassification(tiny(vocab_size=300).validate(), num_labels=2)
    torch.manual_seed(0)
    folder = save_pretrained(model, tmp_path / "model")
    run_id = tracking.start_run(uri, "long", str(tmp_path / "art"), "ft", {"a": 1})
    task_config = json.dumps({"name": "files", "labels": labels})
    assert len(task_config) > 5000
    info = tracking.finish_run(uri, run_id, {}, str(folder), "long-labels", "candidate", task=tracking.PRETRAINING,
                               version_tags={"task_config": task_config})
    tag = client.get_model_version("long-labels", info["version"]).tags["task_config"]
    assert json.loads(tag)["labels"] == labels


def test_a_fine_tune_reads_its_init_alias_once_as_a_version(store, tmp_path):
    """init=models:/X@champion (or /latest) is pinned to the version it names when the job starts: the download,
    the lineage and a resubmission's basis all name it, though a promotion moves @champion meanwhile."""
    from bert_core.config import ConfigError
    from jobs.finetune import pin_alias

    uri, client = store
    client.create_registered_model("bert")
    for _ in range(2):
        client.create_model_version("bert", str(tmp_path))
    client.set_registered_model_alias("bert", "champion", "1")
    pinned = pin_alias("models:/bert@champion", uri)
    client.set_registered_model_alias("bert", "champion", "2")  # promoted while the job runs
    assert pinned == "models:/bert/1" and pin_alias("models:/bert@champion", uri) == "models:/bert/2"
    for given in ("models:/bert/1", "runs:/abc/model", str(tmp_path)):
        assert pin_alias(given, uri) == given
    with pytest.raises(ConfigError, match="init 'models:/bert@nobody' does not resolve"):
        pin_alias("models:/bert@nobody", uri)
    # `latest` and a bare name: the highest version, pinned as one (the basis and lineage hold a version, not 'latest')
    assert pin_alias("models:/bert/latest", uri) == pin_alias("models:/bert", uri) == "models:/bert/2"
    client.create_model_version("bert", str(tmp_path))
    assert pin_alias("models:/bert/latest", uri) == "models:/bert/3"


def test_lineage_names_a_relative_prepared_set_by_its_absolute_path(tmp_path, monkeypatch):
    """configs/pretrain/quickstart.yaml prepares into data/prepared/<hash>: jobs/lineage.py, run from any folder,
    must find it by the tag."""
    from pipelines.prepare import PreparedData

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "prepared" / "0123abcd").mkdir(parents=True)
    (tmp_path / "data" / "prepared" / "0123abcd" / "manifest.json").write_text("{}")
    prepared = PreparedData("data/prepared/0123abcd", {}, [], [], None, reused=False)
    tags = tracking.lineage_tags("pretrain", prepared=prepared)
    assert tags["lineage.data_dir"] == str(tmp_path / "data" / "prepared" / "0123abcd")
    assert tags["lineage.data_name"] == "0123abcd"


def test_a_deleted_experiment_is_refused_before_any_run_naming_the_way_out(store, tmp_path, monkeypatch):
    """An experiment deleted in MLflow's UI takes no run: the job failed after preparing its data, on an error naming
    an experiment id. Refused by the job's environment check (and by start_run), naming tracking.experiment and how
    to restore or purge it; a store that does not exist yet is not made by the check."""
    from bert_core.config import ConfigError
    from jobs.config.sections import TrackingConfig

    uri, client = store
    client.delete_experiment(client.create_experiment("afresh"))
    with pytest.raises(ConfigError, match=r"tracking.experiment='afresh' is deleted .*mlflow experiments restore "
                                          r"--experiment-id \d+.*mlflow gc"):
        TrackingConfig(tracking_uri=uri, experiment="afresh").check_experiment()
    with pytest.raises(ConfigError, match="tracking.experiment='afresh' is deleted"):
        tracking.start_run(uri, "afresh", str(tmp_path / "art"), "train", {"a": 1})
    TrackingConfig(tracking_uri=uri, experiment="another").check_experiment()
    TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/none.db", experiment="afresh").check_experiment()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.chdir(tmp_path)
    for store in (f"{tmp_path}/no-store", f"file://{tmp_path}/no-store", "file:no-store", "no-store"):
        TrackingConfig(tracking_uri=store, experiment="afresh").check_experiment()
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "no-store").exists()


def test_a_relative_store_is_made_absolute_so_workers_log_where_the_driver_reads(tmp_path, monkeypatch):
    """Workers run in another working directory: a relative store (SQLite's, or a file store where
    MLFLOW_ALLOW_FILE_STORE lets MLflow take one) would be another store there, one no one reads."""
    monkeypatch.chdir(tmp_path)
    assert tracking.resolve_tracking_uri("sqlite:///mlflow.db") == f"sqlite:///{tmp_path}/mlflow.db"
    for uri in ("mlruns", "./mlruns"):
        assert tracking.resolve_tracking_uri(uri) == f"{tmp_path}/mlruns"
    for uri in ("file:mlruns", "file:./mlruns"):
        assert tracking.resolve_tracking_uri(uri) == f"file://{tmp_path}/mlruns"
    for uri in ("http://mlflow:5000", "file:///abs/mlruns", "/abs/mlruns", "databricks", "postgresql://u@db/m"):
        assert tracking.resolve_tracking_uri(uri) == uri


def test_ctrl_c_while_the_model_uploads_ends_the_run_killed(store, tmp_path, monkeypatch):
    """MLflow's own `with start_run` in finish_run ended the run FAILED on Ctrl-C, as on any exception, and `ending`
    keeps FAILED: a job stopped on purpose looked crashed. A sweep's seed run, registered outside any `ending`, too."""
    uri, client = store

    def interrupted(*args, **kwargs):  # Ctrl-C while the release checkpoint uploads (minutes for a large model)
        raise KeyboardInterrupt

    monkeypatch.setattr(tracking, "log_hf_folder", interrupted)
    job, trial = (tracking.start_run(uri, "ctrl-c", str(tmp_path / "art"), name, {"a": 1}) for name in ("job", "trial"))
    with pytest.raises(KeyboardInterrupt):
        with tracking.ending(uri, job):
            tracking.finish_run(uri, job, {"x": 1.0}, str(tmp_path / "release"), "", "", task=tracking.PRETRAINING)
    with pytest.raises(KeyboardInterrupt):
        tracking.finish_run(uri, trial, {"x": 1.0}, str(tmp_path / "release"), "", "", task=tracking.PRETRAINING)
    for run_id in (job, trial):
        run = client.get_run(run_id)
        assert (run.info.status, run.data.tags["error"]) == ("KILLED", "KeyboardInterrupt: ")


def test_a_run_deleted_while_it_trains_is_sent_nothing_more_and_its_points_counted(store, tmp_path):
    """Each batch to a deleted run was refused, then retried point by point, at every log() to the end: 10 steps
    of 20 metrics cost 210 requests. Now one refused batch, one look at the run, and nothing sent after."""
    uri, client = store
    run_id = client.create_run(client.create_experiment("deleted", (tmp_path / "art").as_uri())).info.run_id
    logger = metric_logger.RankZeroLogger(uri, run_id, rank=0, system_metrics_s=0)
    sent, log_batch = [], logger.client.log_batch
    logger.client.log_batch = lambda *a, **k: (sent.append(1), log_batch(*a, **k))[1]
    logger.log({f"train/m{i}": 1.0 for i in range(20)}, step=1)
    client.delete_run(run_id)  # in the UI, while it trains
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for step in range(2, 12):
            logger.log({f"train/m{i}": 1.0 for i in range(20)}, step=step)
    assert len(sent) == 2  # step 1's batch, then the one refused
    assert [f"run {run_id} was deleted" in str(w.message) for w in said] == [True]  # said once
    assert logger.close() == {"tracking_failures": 0, "tracking_undelivered": 200}
