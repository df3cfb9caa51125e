"""jobs/registry/versions.py on a real MLflow store (SQLite): an alias move's record sorts after every earlier one, even when
an earlier move came from a host whose clock was ahead (a rollback must undo the move before it, not another)."""

import time

from jobs.registry.versions import _key, alias_history, move_alias


def test_a_move_is_recorded_after_every_earlier_one_whatever_this_clock_says(tmp_path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    client.create_registered_model("m")
    ahead = time.time_ns() + 3600 * 10**9  # a move recorded by a host an hour ahead
    client.set_registered_model_tag("m", _key(ahead), "champion none -> v1 promoted (run r1) later")
    move_alias(client, "m", "champion", "", "rollback: from a host whose clock is behind", "r2")
    moves = alias_history(client, "m")
    assert len(moves) == 2 and moves[-1].startswith("champion none -> none rollback: from a host") and "(run r2)" in moves[-1]
    assert alias_history(client, "m", "candidate") == []
