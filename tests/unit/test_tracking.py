"""What jobs/tracking.py writes to a real MLflow store (SQLite): the resolved config and the code version."""

import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from bert_core.tokenizer import SpecialIds, load_tokenizer, save_tokenizer, train_wordpiece
from jobs import tracking
from jobs.config import PretrainConfig
from jobs.config_io import load_config
from jobs.pretrain import resolve_config
from tests.e2e.quick import QUICKSTART
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
    run_id = tracking.start_run(uri, "code", str(tmp_path / "art"), "code", {"a": 1})
    tags = MlflowClient(uri).get_run(run_id).data.tags
    head = subprocess.run(["git", "-C", str(tracking.REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert tags["code.git_commit"] == head
    assert tags["code.git_dirty"] in ("true", "false")
    assert tags["code.version"] == version("bert-foundry")

