"""What jobs/registry/tracking.py writes to real MLflow stores (SQLite; a real `mlflow server` for outages): the resolved
config, the code version, and metrics logged while the server was down."""

import json
import os
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from bert_core.tokenizer import SpecialIds, load_tokenizer, save_tokenizer, train_wordpiece
from jobs.registry import metric_logger, tracking
from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config
from jobs.pretrain import resolve_config
from tests.e2e.quick import QUICKSTART
from tests.mlflow_server import server  # noqa: F401  (a real mlflow server per test)

ROOT = Path(__file__).resolve().parents[2]
from tests.unit.test_tokenizer import corpus


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tok")
    save_tokenizer(train_wordpiece(corpus(), vocab_size=300), out)
    return out


def test_logged_params_are_the_resolved_config(tokenizer_dir, tmp_path):
    from mlflow.tracking import MlflowClient

    cfg = load_config(PretrainConfig, QUICKSTART, ["run_name=resolved", f"corpus.harvest_dir={tmp_path}/corpus"])
    assert cfg.model.vocab_size == 30522  # the preset's, before the tokenizer is known
    resolved = resolve_config(cfg, str(tokenizer_dir))
    tok = load_tokenizer(tokenizer_dir)
    assert cfg.model.vocab_size == 30522  # the caller's config is not changed
    assert resolved.model.vocab_size == tok.get_vocab_size() <= 300

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = tracking.start_run(uri, "resolved", str(tmp_path / "art"), "resolved", resolved.to_dict())
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.data.params["model.vocab_size"] == str(tok.get_vocab_size())
    assert run.data.params["model.pad_token_id"] == str(SpecialIds.from_tokenizer(tok).pad)
    logged = yaml.safe_load(Path(client.download_artifacts(run_id, tracking.CONFIG_ARTIFACT, str(tmp_path)))
                            .read_text())
    assert logged == resolved.to_dict()
    assert PretrainConfig.from_dict(logged).model == resolved.model


def test_runs_are_tagged_with_the_code_version(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = tracking.start_run(uri, "code", str(tmp_path / "art"), "code", {"a": 1},
                                tags=tracking.lineage_tags("pretrain"))
    tags = MlflowClient(uri).get_run(run_id).data.tags
    head = subprocess.run(["git", "-C", str(tracking.PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert tags["code.git_commit"] == head
    assert tags["code.git_dirty"] in ("true", "false")
    assert tags["code.version"] == version("bert-foundry")


@pytest.mark.slow  # a real `mlflow server` (~7 s to start): `make test`, not `make test-fast`
def test_artifacts_go_through_a_server_unless_a_location_is_given(server, tmp_path, monkeypatch):
    """With no artifact location a run on a server stores its artifacts in the server's store (served over HTTP,
    reachable from every machine), not on the disk of the process that happened to create the experiment; a
    local store keeps them in ./mlartifacts; a location given is used as is."""
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    on_server = tracking.start_run(server.uri, "served", "", "a", {"a": 1})
    assert MlflowClient(server.uri).get_run(on_server).info.artifact_uri.startswith("mlflow-artifacts:")
    assert (server.root / "art").is_dir() and not (tmp_path / "mlartifacts").exists()
    local = f"sqlite:///{tmp_path}/mlflow.db"
    here = MlflowClient(local).get_run(tracking.start_run(local, "local", "", "b", {"a": 1})).info.artifact_uri
    assert here.startswith((tmp_path / "mlartifacts").as_uri())
    given = tracking.start_run(server.uri, "given", str(tmp_path / "mine"), "c", {"a": 1})
    assert MlflowClient(server.uri).get_run(given).info.artifact_uri.startswith((tmp_path / "mine").as_uri())
    # a deleted experiment is refused by the job's check, asked over the server's REST API (no MLflow client)
    from bert_core.config import ConfigError
    from jobs.config.sections import TrackingConfig

    MlflowClient(server.uri).delete_experiment(MlflowClient(server.uri).get_experiment_by_name("given").experiment_id)
    with pytest.raises(ConfigError, match="tracking.experiment='given' is deleted"):
        TrackingConfig(tracking_uri=server.uri, experiment="given").check_experiment()
    for name in ("served", "never-made"):
        TrackingConfig(tracking_uri=server.uri, experiment=name).check_experiment()


@pytest.mark.slow  # a real `mlflow server` (~7 s to start): `make test`, not `make test-fast`
def test_metrics_logged_while_the_server_is_down_arrive_after_it_restarts(server):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(server.uri)
    run_id = client.create_run(client.create_experiment("outage")).info.run_id
    logger = metric_logger.RankZeroLogger(server.uri, run_id, rank=0, backoff_s=0.2, max_backoff_s=1.0,
                                          system_metrics_s=0)  # only the points this test logs
    for step in range(5):
        logger.log({"train/loss": 10.0 - step}, step=step)
    assert logger.counts() == {"tracking_failures": 0, "tracking_undelivered": 0}

    server.stop()  # mid-logging
    with pytest.warns(UserWarning, match="MLflow logging failed"):
        for step in range(5, 15):
            logger.log({"train/loss": 10.0 - step}, step=step)
            time.sleep(0.2)  # a few steps' time: the backoff lets some writes be retried, each one fails
    assert logger.failures >= 2  # the first failure and at least one retry
    assert len(logger.pending) == 10

    server.start()
    counts = logger.close(close_timeout_s=30)
    assert counts == {"tracking_failures": logger.failures, "tracking_undelivered": 0}
    history = MlflowClient(server.uri).get_metric_history(run_id, "train/loss")
    assert sorted((m.step, m.value) for m in history) == [(s, 10.0 - s) for s in range(15)]  # once each
    assert f"{logger.failures} failed MLflow writes, retried: every buffered metric delivered" \
        == metric_logger.outage_line(counts)
    # the logger fails fast only while it writes: the process's other MLflow calls (a sweep trial ending its run
    # through a brief outage) keep MLflow's own retries
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ and "MLFLOW_HTTP_REQUEST_TIMEOUT" not in os.environ


@pytest.mark.slow  # MLflow's system-metrics sampler over seconds (~5 s): `make test`, not `make test-fast`
def test_system_metrics_are_sampled_on_the_logging_rank_and_reach_the_run(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("system", (tmp_path / "art").as_uri())).info.run_id
    logger = metric_logger.RankZeroLogger(uri, run_id, rank=0, system_metrics_s=0.3)
    for step in range(6):
        logger.log({"train/loss": 6.0 - step, "dev/accuracy": step / 6}, step=step)
        time.sleep(0.2)
    assert logger.close() == {"tracking_failures": 0, "tracking_undelivered": 0}
    cpu = client.get_metric_history(run_id, "system/cpu_utilization_percentage")
    memory = client.get_metric_history(run_id, "system/system_memory_usage_megabytes")
    assert 2 <= len(cpu) <= 4 and all(0 <= m.value <= 100 for m in cpu)  # every 0.3 s, at a log call
    assert memory and all(m.value > 0 for m in memory)
    assert not metric_logger.RankZeroLogger(uri, run_id, rank=1).monitors  # other ranks sample nothing
    # finishing the run plots every train/eval/dev curve it logged (system metrics are not training curves)
    tracking.finish_run(uri, run_id, {"final": 1.0}, None, "", "candidate", task="text-classification")
    assert [a.path for a in client.list_artifacts(run_id)] == [tracking.CURVES]
    assert (tmp_path / "art" / run_id / "artifacts" / tracking.CURVES).stat().st_size > 5000


def test_outage_line_sums_phases_and_names_lost_points():
    assert metric_logger.outage_line({"loss": 1.0}) == "0 failed MLflow writes"
    assert metric_logger.outage_line({"phase1/tracking_failures": 2, "tracking_failures": 1,
                                      "tracking_undelivered": 7, "phase1/tracking_undelivered": 0}) \
        == "3 failed MLflow writes, retried: 7 metric points NOT delivered"
    # points the store refused (a run deleted in the UI): no failed write, and all of them lost
    assert metric_logger.outage_line({"tracking_failures": 0, "tracking_undelivered": 200}) \
        == "0 failed MLflow writes, but 200 metric points refused, NOT delivered"


def test_registered_pretrained_model_is_the_whole_release_checkpoint(tokenizer_dir, tmp_path):
    """Every tensor of the release (pooler and NSP head included) is in the registered version, and a fine-tune
    from models:/NAME@alias starts from the pretrained pooler, not a fresh one."""
    import torch

    from bert_core.checkpoint import read_state_dict, save_pretrained
    from bert_core.config import tiny
    from bert_core.model import BertForPreTraining
    from jobs.finetune import resolve_init
    from jobs.config.finetune import FinetuneConfig
    from jobs.workers.finetune_model import build_model

    torch.manual_seed(0)
    model = BertForPreTraining(tiny(vocab_size=load_tokenizer(tokenizer_dir).get_vocab_size()).validate())
    release = save_pretrained(model, tmp_path / "release", tokenizer_dir=tokenizer_dir)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = tracking.start_run(uri, "registry", str(tmp_path / "art"), "pretrain", {"a": 1})
    info = tracking.finish_run(uri, run_id, {"eval_after/mlm_acc": 0.5}, str(release), "tiny-bert", "candidate",
                               task=tracking.PRETRAINING)
    assert (info["registered_model"], info["version"], info["alias"]) == ("tiny-bert", "1", "candidate")

    init = "models:/tiny-bert@candidate"
    init_dir = resolve_init(init, uri, tmp_path / "download")
    released, registered = read_state_dict(release), read_state_dict(init_dir)
    assert {"bert.pooler.dense.weight", "cls.seq_relationship.weight"} <= released.keys()
    assert registered.keys() == released.keys()
    assert all(torch.equal(registered[k], released[k]) for k in released)

    cfg = load_config(FinetuneConfig, ROOT / "configs/finetune/pkgdocs.yaml", [f"init={init}"])
    cfg.task.labels = ["a", "b"]  # as the job settles them from the task's data
    finetune_model, loading = build_model(cfg, init_dir)
    assert {"bert.pooler.dense.weight", "bert.pooler.dense.bias"} <= set(loading["loaded"])
    assert not any(k.startswith("bert.") for k in loading["fresh"])  # only the classifier head is new
    assert torch.equal(finetune_model.bert.pooler.dense.weight, released["bert.pooler.dense.weight"])


def test_lineage_tags_name_data_tokenizer_and_the_pretraining_run_behind_a_fine_tune(tokenizer_dir, tmp_path):
    """A pretraining run names its prepared set (tags and a dataset input) and tokenizer; a fine-tune from its
    registered model names that run, and so does a fine-tune from that fine-tune."""
    import hashlib
    import json

    import torch
    from mlflow.tracking import MlflowClient

    from bert_core.checkpoint import save_pretrained
    from bert_core.config import tiny
    from bert_core.model import BertForPreTraining
    from bert_core.tokenizer import tokenizer_hash
    from pipelines.prepare import PreparedData

    data = tmp_path / "prepared" / "0123456789abcdef"  # a prepared set's folder is named by a hash of its inputs
    data.mkdir(parents=True)
    (data / "manifest.json").write_text(json.dumps({"counts": {"examples": 3}}))
    prepared = PreparedData(str(data), {}, [], [], str(tokenizer_dir), reused=False)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)

    tags = tracking.lineage_tags("pretrain", prepared=prepared, tokenizer_dir=str(tokenizer_dir))
    assert tags["lineage.data_name"] == "0123456789abcdef"
    assert tags["lineage.data_manifest_sha256"] == hashlib.sha256((data / "manifest.json").read_bytes()).hexdigest()
    assert tags["lineage.tokenizer_sha256"] == tokenizer_hash(tokenizer_dir)
    pretrain_id = tracking.start_run(uri, "lineage", str(tmp_path / "art"), "pretrain", {"a": 1}, tags=tags)
    run = client.get_run(pretrain_id)
    assert tags.items() <= run.data.tags.items()
    (dataset_input,) = run.inputs.dataset_inputs
    assert (dataset_input.dataset.name, dataset_input.dataset.digest) == (
        "pretraining-examples", tracking.dataset_digest(data.as_uri(), "0123456789abcdef"))
    assert json.loads(dataset_input.dataset.source)["uri"] == data.as_uri()

    torch.manual_seed(0)
    model = BertForPreTraining(tiny(vocab_size=load_tokenizer(tokenizer_dir).get_vocab_size()).validate())
    release = save_pretrained(model, tmp_path / "release", tokenizer_dir=tokenizer_dir)
    tracking.finish_run(uri, pretrain_id, {}, str(release), "lineage-bert", "candidate", task=tracking.PRETRAINING)
    version = client.get_model_version_by_alias("lineage-bert", "candidate")
    assert tags.items() <= version.tags.items()  # the run's lineage, on the registered version too

    from jobs.loops import ft_tasks

    from pipelines.tasks.roles import TaskRows

    def rows(dev_label):
        return TaskRows([{"text_a": "a", "label": 0}], [{"text_a": "c", "label": 0}],
                        {"dev": [{"text_a": "b", "label": dev_label}]})

    digest = ft_tasks.rows_digest(rows(1))
    assert digest != ft_tasks.rows_digest(rows(0))  # one evaluation label changed
    finetune = tracking.lineage_tags("finetune", tokenizer_dir=str(release), init="models:/lineage-bert@candidate",
                                     tracking_uri=uri, task_data=(str(tmp_path / "task"), digest))
    assert (finetune["lineage.task_source"], finetune["lineage.task_data_sha256"]) == (str(tmp_path / "task"), digest)
    assert finetune["lineage.init_run_id"] == finetune["lineage.pretrain_run_id"] == pretrain_id
    by_number = tracking.lineage_tags("finetune", init="models:/lineage-bert/1", tracking_uri=uri)
    assert by_number["lineage.init_run_id"] == by_number["lineage.pretrain_run_id"] == pretrain_id
    assert finetune["lineage.tokenizer_sha256"] == tags["lineage.tokenizer_sha256"]
    finetune_id = tracking.start_run(uri, "lineage", str(tmp_path / "art"), "finetune", {"a": 1},
                                     tags={"task": "toy", **finetune})
    (task_input,) = client.get_run(finetune_id).inputs.dataset_inputs  # the task's rows in MLflow's dataset view
    assert (task_input.dataset.name, task_input.dataset.digest) == (
        "toy-rows", tracking.dataset_digest((tmp_path / "task").as_uri(), digest))
    again = tracking.lineage_tags("finetune", init=f"runs:/{finetune_id}/model", tracking_uri=uri)
    assert (again["lineage.init_run_id"], again["lineage.pretrain_run_id"]) == (finetune_id, pretrain_id)
    assert "lineage.init_run_id" not in tracking.lineage_tags("finetune", init=str(release))  # a folder: no run
    # a sweep's version: its run is a seed trial's, tagged with no lineage; the version carries the sweep's
    trial_id = tracking.start_run(uri, "lineage", str(tmp_path / "art"), "trial", {"a": 1},
                                  tags={"trial_id": "t0", "sweep": "s"})
    client.create_registered_model("swept")
    client.create_model_version("swept", str(release), run_id=trial_id, tags={
        "lineage.job": "sweep", "lineage.init_run_id": pretrain_id, "lineage.pretrain_run_id": pretrain_id})
    swept = tracking.lineage_tags("finetune", init="models:/swept/1", tracking_uri=uri)
    assert (swept["lineage.init_run_id"], swept["lineage.pretrain_run_id"]) == (trial_id, pretrain_id)
    # a trial's own model (runs:/<trial>/...): the trial is nested in the sweep's run, which holds the lineage
    sweep_id = tracking.start_run(uri, "lineage", str(tmp_path / "art"), "sweep", {"a": 1}, tags={
        "lineage.job": "sweep", "lineage.init_run_id": pretrain_id, "lineage.pretrain_run_id": pretrain_id})
    nested = tracking.start_run(uri, "lineage", str(tmp_path / "art"), "trial", {"a": 1},
                                tags={"trial_id": "t1", "mlflow.parentRunId": sweep_id})
    from_trial = tracking.lineage_tags("finetune", init=f"runs:/{nested}/model", tracking_uri=uri)
    assert (from_trial["lineage.init_run_id"], from_trial["lineage.pretrain_run_id"]) == (nested, pretrain_id)
    # ... and one whose sweep's run is gone for good: its pretraining is unknown (the trial was named as its own)
    orphan = tracking.start_run(uri, "lineage", str(tmp_path / "art"), "trial", {"a": 1},
                                tags={"trial_id": "t2", "mlflow.parentRunId": "0" * 32})
    from_orphan = tracking.lineage_tags("finetune", init=f"runs:/{orphan}/model", tracking_uri=uri)
    assert from_orphan["lineage.init_run_id"] == orphan and "lineage.pretrain_run_id" not in from_orphan
    # task rows from a web address: kept as given (not a path under the cwd), its password never stored
    web = tracking.lineage_tags("finetune", task_data=("https://bob:hunter2@data.example.com/task.csv", digest))
    assert web["lineage.task_source"] == "https://bob:hunter2@data.example.com/task.csv"
    web_id = tracking.start_run(uri, "lineage", str(tmp_path / "art"), "web", {"a": 1}, tags={"task": "web", **web})
    web_run = client.get_run(web_id)
    assert web_run.data.tags["lineage.task_source"] == "https://***@data.example.com/task.csv"
    (web_input,) = web_run.inputs.dataset_inputs
    assert json.loads(web_input.dataset.source) == {"url": "https://***@data.example.com/task.csv"}


def test_secrets_in_params_tags_and_uris_never_reach_the_store(tmp_path):
    from mlflow.tracking import MlflowClient

    from jobs.config.finetune import FinetuneConfig
    from jobs.config.sweep import SweepConfig

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    params = {"tracking": {"tracking_uri": "postgresql://bob:hunter2@db:5432/mlflow", "api_key": "sk-live-1",
                           "password": ""},
              "init": "https://ghp_tok3n@git.example.com/models/bert", "storage": {"aws_secret_access_key": "AKIAX"},
              "model": {"pad_token_id": 0}, "data": {"tokenizer": {"vocab_size": 8192}, "sources": ["s3://id:pw@bucket/corpus", "/data/a.txt"]}}
    run_id = tracking.start_run(uri, "secrets", str(tmp_path / "art"), "secrets", params,
                                tags={"init": "https://ghp_tok3n@git.example.com/x", "hf_token": "hf_abc"})
    run = MlflowClient(uri).get_run(run_id)
    logged = {**run.data.params, **run.data.tags}
    config_yaml = (Path(MlflowClient(uri).download_artifacts(run_id, tracking.CONFIG_ARTIFACT, str(tmp_path))).read_text())
    for secret in ("hunter2", "sk-live-1", "ghp_tok3n", "AKIAX", "hf_abc", "id:pw"):
        assert not any(secret in str(v) for v in logged.values()) and secret not in config_yaml, secret
    assert logged["tracking.tracking_uri"] == "postgresql://***@db:5432/mlflow"
    assert logged["tracking.api_key"] == "***" and logged["hf_token"] == "***"
    assert logged["tracking.password"] == ""  # an empty secret says it is unset
    assert logged["data.tokenizer.vocab_size"] == "8192" and logged["model.pad_token_id"] == "0"  # not secrets
    assert yaml.safe_load(config_yaml)["data"]["sources"] == ["s3://***@bucket/corpus", "/data/a.txt"]

    # no field of the shipped configs looks like a secret: redaction changes none of their values
    for cfg in (PretrainConfig(), FinetuneConfig(), SweepConfig()):
        assert tracking.redact(cfg.to_dict()) == cfg.to_dict(), type(cfg).__name__


def test_presigned_urls_error_messages_and_a_run_that_fails_filling_keep_no_secret(tmp_path):
    """A presigned URL's signature and session token, an Azure SAS and ?token=, in a value or a message (MLflow's
    errors quote the request URL, user:password included); a run whose filling fails ends FAILED, its error
    redacted, not RUNNING for ever."""
    from mlflow.tracking import MlflowClient

    url = ("https://b.s3.amazonaws.com/c.jsonl?X-Amz-Credential=AKIAQ%2F1&X-Amz-Security-Token=IQo9&"
           "X-Amz-Signature=5ab1&X-Amz-Expires=3600")
    assert tracking.redact(url) == ("https://b.s3.amazonaws.com/c.jsonl?X-Amz-Credential=***&"
                                    "X-Amz-Security-Token=***&X-Amz-Signature=***&X-Amz-Expires=3600")
    assert tracking.redact("https://a.blob.core.windows.net/c/f.csv?sv=2022&sig=Zm9v%3D") == \
        "https://a.blob.core.windows.net/c/f.csv?sv=2022&sig=***"
    message = "API request to http://alice:s3cr3t@127.0.0.1:9/api/2.0/mlflow/runs/get?token=hf_abc failed"
    assert tracking.redact(message) == "API request to http://***@127.0.0.1:9/api/2.0/mlflow/runs/get?token=*** failed"
    # a database password holding '/' or '@' (SQLAlchemy reads both unencoded), an Azure connection string's key
    assert tracking.redact("postgresql://mlflow:s3cr/et@db:5432/mlflow") == "postgresql://***@db:5432/mlflow"
    assert tracking.redact("mysql+pymysql://mlflow:p@ssw0rd@db/mlflow") == "mysql+pymysql://***@db/mlflow"
    assert tracking.redact("see 'postgresql://u:pa'ss@db/x' and mysql://root:Pa\"s@db/y") == \
        "see 'postgresql://***@db/x' and mysql://***@db/y"
    assert tracking.redact("Protocol=https;AccountName=a;AccountKey=YWJj/ZA==;Suffix=core.windows.net") == \
        "Protocol=https;AccountName=a;AccountKey=***;Suffix=core.windows.net"
    untouched = "https://host/users/a@b and models:/m@champion"
    assert tracking.redact(untouched) == untouched
    assert tracking.redact("http://[::1]:5000/x@y") == "http://[::1]:5000/x@y"  # an IPv6 host is no user
    for secret in ("postgresql://u:1234@db/x", "postgresql://u:1234/abc@db/m"):  # digits (and '/'): a password, no port
        assert tracking.redact(secret).startswith("postgresql://***@db/")
    # a metric's value is no secret, whatever entity type a PII tagger scores; a config's api_key still is
    assert tracking.redact({"eval.dev/f1_PASSWORD": "0.91", "task.api_key": "k1"}) == \
        {"eval.dev/f1_PASSWORD": "0.91", "task.api_key": tracking.REDACTED}
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with pytest.raises(OSError):  # an artifact store it cannot write: config.yaml fails after the run exists
        tracking.start_run(uri, "broken", "/proc/no-artifacts-here", "broken", {"a": 1})
    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("broken").experiment_id])
    assert run.info.status == "FAILED" and run.data.tags["error"].startswith(("FileNotFoundError", "PermissionError",
                                                                             "OSError"))


def test_a_served_models_pins_name_versions_an_index_holds():
    """torch's "2.13.0+cpu" (a local label) is on no index `mlflow models serve` installs from."""
    from importlib.metadata import version

    from jobs.registry.model_logging import pins

    assert "torch==" + version("torch").split("+")[0] in pins() and not any("+" in pin for pin in pins())


def test_curves_draw_the_select_split_that_fine_tuning_logs():
    """Fine-tuning logs its curve as select/*: curves.png held train/loss alone."""
    logged = ["select/accuracy", "select/f1", "train/loss", "eval/mlm_acc", "dev/accuracy", "hp/lr", "best.select.f1"]
    assert tracking.curve_keys(logged) == ["dev/accuracy", "eval/mlm_acc", "select/accuracy", "select/f1",
                                           "train/loss"]


def test_a_curve_draws_the_last_point_logged_at_each_step():
    """Steps 3-4 logged again by a run restarted from its step-2 checkpoint (later timestamps): one point each."""
    from mlflow.entities import Metric

    logged = [Metric("train/loss", v, t, step) for v, t, step in
              ((4.0, 1, 1), (3.0, 2, 2), (2.5, 3, 3), (2.0, 4, 4), (2.6, 9, 3), (2.1, 10, 4), (1.5, 11, 5))]
    assert tracking.curve(reversed(logged)) == [(1, 4.0), (2, 3.0), (3, 2.6), (4, 2.1), (5, 1.5)]


def test_a_versions_tags_and_model_card_keep_no_secret_of_the_datas_urls(tokenizer_dir, tmp_path):
    """The run's params were redacted as it started, but the version's task_config (train_file as given) and its
    model card (lineage.task_source) were written raw: anyone reading the registry saw the password."""
    import torch
    from mlflow.tracking import MlflowClient

    from bert_core.checkpoint import save_pretrained
    from bert_core.config import tiny
    from bert_core.model import BertForPreTraining

    torch.manual_seed(0)
    model = BertForPreTraining(tiny(vocab_size=load_tokenizer(tokenizer_dir).get_vocab_size()).validate())
    release = save_pretrained(model, tmp_path / "release", tokenizer_dir=tokenizer_dir)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    url = "https://alice:S3CRETPW@data.example.com/train.csv?X-Amz-Signature=abc123"
    run_id = tracking.start_run(uri, "registry", str(tmp_path / "art"), "pretrain", {"a": 1})
    info = tracking.finish_run(uri, run_id, {}, str(release), "tiny-bert", "candidate", task=tracking.PRETRAINING,
                               version_tags={"task_config": json.dumps({"train_file": url})},
                               description=f"Lineage: lineage.task_source={url}")
    version = MlflowClient(uri).get_model_version("tiny-bert", info["version"])
    for secret in ("S3CRETPW", "abc123"):
        assert secret not in version.tags["task_config"] and secret not in version.description
    assert json.loads(version.tags["task_config"])["train_file"].startswith("https://***@data.example.com/")


def test_two_jobs_starting_a_new_experiment_together_both_run(tmp_path, monkeypatch):
    """Both looked the experiment up, found none, and created it: the second create raised
    RESOURCE_ALREADY_EXISTS and that job failed before training."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    # the other job's, made between the lookup and the create (its artifacts under tmp_path, not ./mlruns)
    MlflowClient(uri).create_experiment("together", artifact_location=(tmp_path / "art").as_uri())
    looked = []
    real = MlflowClient.get_experiment_by_name

    def first_finds_none(self, name):
        looked.append(name)
        return None if len(looked) == 1 else real(self, name)

    monkeypatch.setattr(MlflowClient, "get_experiment_by_name", first_finds_none)
    run_id = tracking.start_run(uri, "together", str(tmp_path / "art"), "second", {"a": 1})
    assert MlflowClient(uri).get_run(run_id).info.experiment_id == real(MlflowClient(uri), "together").experiment_id


def test_a_registration_that_fails_half_way_says_so_on_its_version(tokenizer_dir, tmp_path, monkeypatch):
    """The version is created first, its tags, model card and alias after, one request each: one of those failing
    left a version without its task or lineage that models:/NAME/latest resolved to, and nothing said so."""
    import torch
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from bert_core.checkpoint import save_pretrained
    from bert_core.config import tiny
    from bert_core.model import BertForPreTraining
    from jobs.registry.versions import pin

    torch.manual_seed(0)
    model = BertForPreTraining(tiny(vocab_size=load_tokenizer(tokenizer_dir).get_vocab_size()).validate())
    release = save_pretrained(model, tmp_path / "release", tokenizer_dir=tokenizer_dir)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = tracking.start_run(uri, "registry", str(tmp_path / "art"), "pretrain", {"a": 1})

    def unavailable(self, *args, **kwargs):
        raise MlflowException("API request failed: 503 Service Unavailable")

    monkeypatch.setattr(MlflowClient, "update_model_version", unavailable)
    with pytest.raises(MlflowException, match="503"):
        tracking.finish_run(uri, run_id, {}, str(release), "half", "candidate", task=tracking.PRETRAINING,
                            version_tags={"task_config": "{}"}, description="a card")
    (version,) = MlflowClient(uri).search_model_versions("name = 'half'")
    assert version.tags["registration"].startswith("incomplete: MlflowException: API request failed: 503")
    assert not version.aliases
    with pytest.raises(MlflowException, match="no versions whose registration finished"):
        pin("models:/half/latest", uri)


def test_a_continued_pretraining_and_a_resubmission_are_in_the_versions_lineage(tmp_path, empty_store):
    """A pretraining run from another run's checkpoint (train.init_checkpoint, a logged param only) is tagged with
    it and with the run the checkpoint's record names, which jobs/lineage.py follows to that run's corpus; a
    resubmitted run's continued_from reaches the version it registers (its code.* tags name only the later steps')."""
    import shutil

    from mlflow.tracking import MlflowClient

    from jobs.runtime import resubmit

    shutil.copy(empty_store, tmp_path / "mlflow.db")
    uri, art = f"sqlite:///{tmp_path}/mlflow.db", str(tmp_path / "art")
    first = tracking.start_run(uri, "pre", art, "a", {"train": {"init_checkpoint": ""}},
                               tags={"lineage.job": "pretrain"})
    checkpoint = tmp_path / "runs" / "a" / "checkpoint_000010"
    checkpoint.mkdir(parents=True)
    resubmit.record(checkpoint, first, 10, {})
    second = tracking.start_run(uri, "pre", art, "b", {"train": {"init_checkpoint": str(checkpoint)}},
                                tags={"lineage.job": "pretrain", **resubmit.tags({"run_id": "0123abcd", "step": 5})})
    client = MlflowClient(uri)
    assert not any(k.startswith("lineage.init") for k in client.get_run(first).data.tags)
    version = tracking._lineage_of(client, second)
    assert (version["lineage.init_checkpoint"], version["lineage.init_checkpoint_run_id"]) == (str(checkpoint), first)
    assert (version["lineage.continued_from"], version["lineage.continued_at_step"]) == ("0123abcd", "5")
    # a two-phase job: its parent registers the release, its phase runs (children) are what resumed
    two = tracking.start_run(uri, "pre", art, "two", {"train": {}}, tags={"lineage.job": "pretrain"})
    assert "lineage.continued_from" not in tracking._lineage_of(client, two)
    for name, earlier, step in (("phase1", "1111aaaa", 1000), ("phase2", "4567cdef", 300)):  # killed in phase 2
        tracking.start_run(uri, "pre", art, name, {"train": {}}, tags={
            "lineage.job": "pretrain", "mlflow.parentRunId": two, **resubmit.tags({"run_id": earlier, "step": step})})
        time.sleep(0.01)  # started in order
    resumed = tracking._lineage_of(client, two)
    assert (resumed["lineage.continued_from"], resumed["lineage.continued_at_step"]) == ("4567cdef", "300")
    # phase 1 finished by an earlier submission is not run again (jobs/pretrain._phase1_done): the parent holds its
    # continuation, which a phase-2 run that resumed too overrides
    again = tracking.start_run(uri, "pre", art, "again", {"train": {}}, tags={
        "lineage.job": "pretrain", **resubmit.tags({"run_id": "1111aaaa", "step": 1000})})
    tracking.start_run(uri, "pre", art, "phase2", {"train": {}}, tags={"lineage.job": "pretrain",
                                                                      "mlflow.parentRunId": again})
    resumed = tracking._lineage_of(client, again)
    assert (resumed["lineage.continued_from"], resumed["lineage.continued_at_step"]) == ("1111aaaa", "1000")
    time.sleep(0.01)
    tracking.start_run(uri, "pre", art, "phase2", {"train": {}}, tags={
        "lineage.job": "pretrain", "mlflow.parentRunId": again, **resubmit.tags({"run_id": "89abef01", "step": 40})})
    resumed = tracking._lineage_of(client, again)
    assert (resumed["lineage.continued_from"], resumed["lineage.continued_at_step"]) == ("89abef01", "40")
