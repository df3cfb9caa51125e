"""jobs/registry/versions.py on a real MLflow store (SQLite): an alias move's record sorts after every earlier one, even when
an earlier move came from a host whose clock was ahead (a rollback must undo the move before it, not another), and a
tag of another shape under the records' prefix is no move."""

import time

from jobs.registry.versions import _key, alias_history, move_alias


def test_a_move_is_recorded_after_every_earlier_one_whatever_this_clock_says(tmp_path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    client.create_registered_model("m")
    ahead = time.time_ns() + 3600 * 10**9  # a move recorded by a host an hour ahead
    client.set_registered_model_tag("m", _key(ahead), "champion none -> v1 promoted (run r1) later")
    client.set_registered_model_tag("m", "alias_move.note", "added by hand in the UI")  # no move: not read as one
    move_alias(client, "m", "champion", "", "rollback: from a host whose clock is behind", "r2")
    moves = alias_history(client, "m")
    assert len(moves) == 2 and moves[-1].startswith("champion none -> none rollback: from a host") and "(run r2)" in moves[-1]
    assert alias_history(client, "m", "candidate") == []


def test_a_task_config_past_mlflows_tag_limit_is_refused_before_training(tmp_path):
    """MLflow refuses (does not cut) a model-version tag past 100,000 characters: a task of thousands of labels was
    registered, then left without its task_config tag and alias, unpromotable. Refused before any training; and a
    real store does refuse one character more."""
    import pytest
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from bert_core.config import ConfigError
    from jobs.registry.versions import MAX_VERSION_TAG, task_config_tag

    labels = [f"category-{i:05d}-of-the-catalogue" for i in range(4000)]
    with pytest.raises(ConfigError, match=r"task's settings \(1\d\d,\d{3} characters of JSON, 4,000 labels\) exceed"):
        task_config_tag({"name": "files", "labels": labels})
    assert task_config_tag({"name": "files", "labels": labels[:100]}).startswith('{"name": "files"')
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    client.create_registered_model("m")
    version = client.create_model_version("m", str(tmp_path), run_id=None).version
    with pytest.raises(MlflowException):
        client.set_model_version_tag("m", version, "task_config", "x" * (MAX_VERSION_TAG + 1))
