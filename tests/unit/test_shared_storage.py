"""jobs/runtime/shared_storage.py: a training worker whose node does not see the run's storage fails as it starts,
naming its node, the folder and the fix, where Ray's own check failed it at its first checkpoint (for pretraining
by default the last step, after the whole run trained). Ray's real storage contexts write the marker here, on a
tmp folder; the other node's view is the same run's folder without it. No Ray cluster."""

import copy
from types import SimpleNamespace

import pytest

from jobs.config.finetune import FinetuneConfig
from jobs.runtime.shared_storage import require_shared_storage


@pytest.fixture
def driver_storage(tmp_path):
    """The StorageContext a driver's RunConfig(storage_path=...) makes (Ray Train V2's): it writes the marker."""
    from ray.train.v2._internal.execution.storage import StorageContext

    return StorageContext(storage_path=str(tmp_path / "runs"), experiment_dir_name="run")


def elsewhere(storage, folder):
    """`storage` as a node that does not mount the driver's folder sees it: the same context, another folder (as a
    worker's own /tmp/runs), where the marker is not."""
    other = copy.copy(storage)
    other.storage_fs_path = str(folder)
    return other


def test_a_node_that_sees_the_drivers_marker_passes(driver_storage, tmp_path):
    require_shared_storage(driver_storage, node="w1", wait_s=0)
    from ray.train._internal.storage import StorageContext  # Tune's (a sweep's trials): the same marker

    require_shared_storage(StorageContext(str(tmp_path / "tune"), "sweep"), node="w1", wait_s=0)


def test_a_node_that_does_not_fails_naming_the_node_the_folder_and_the_fix(driver_storage, tmp_path):
    other = elsewhere(driver_storage, tmp_path / "worker-local")
    with pytest.raises(RuntimeError) as err:
        require_shared_storage(other, node="ip-10-0-1-7 (10.0.1.7)", wait_s=0)
    line = str(err.value)
    assert f"{tmp_path}/worker-local/run" in line and "ip-10-0-1-7 (10.0.1.7)" in line
    assert "every node of the cluster mounts" in line and "output_dir" in line
    (tmp_path / "worker-local" / "run").mkdir(parents=True)  # the folder there, empty: still not the driver's
    with pytest.raises(RuntimeError, match="not shared with this worker's node"):
        require_shared_storage(other, node="w1", wait_s=0)


def test_a_marker_that_shows_up_within_the_wait_passes(driver_storage, tmp_path, monkeypatch):
    """A shared folder can show another machine's new file a few seconds late (NFS caches lookups)."""
    other = elsewhere(driver_storage, tmp_path / "late")
    (tmp_path / "late" / "run").mkdir(parents=True)
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        if len(sleeps) == 3:
            (tmp_path / "late" / "run" / ".validate_storage_marker").touch()

    monkeypatch.setattr("jobs.runtime.shared_storage.time.sleep", sleep)
    require_shared_storage(other, node="w1", wait_s=60, poll_s=1)
    assert len(sleeps) == 3


@pytest.mark.parametrize("worker", ["pretrain_worker", "finetune_worker"])
def test_each_training_worker_checks_before_it_trains(worker, driver_storage, tmp_path, monkeypatch):
    import importlib

    import ray.train

    mod, built = importlib.import_module(f"jobs.workers.{worker}"), []
    monkeypatch.setattr("jobs.runtime.shared_storage.WAIT_S", 0)
    monkeypatch.setattr(mod, "Worker", lambda config: built.append(config) or SimpleNamespace(run=lambda: None))
    monkeypatch.setattr(ray.train, "get_context", lambda: SimpleNamespace(
        get_storage=lambda: elsewhere(driver_storage, tmp_path / "worker-local")))
    with pytest.raises(RuntimeError, match="not shared with this worker's node"):
        mod.train_loop_per_worker({})
    assert built == []  # refused before the worker (its engine, its data) was built
    monkeypatch.setattr(ray.train, "get_context", lambda: SimpleNamespace(get_storage=lambda: driver_storage))
    mod.train_loop_per_worker({})
    assert built == [{}]


def test_a_sweep_trial_checks_before_its_run_and_its_training(driver_storage, tmp_path, monkeypatch):
    import ray.tune

    from jobs.workers import sweep_trial

    monkeypatch.setattr("jobs.runtime.shared_storage.WAIT_S", 0)
    monkeypatch.setattr(sweep_trial, "TrialRun", lambda *a, **k: pytest.fail("trained without shared storage"))
    monkeypatch.setattr(ray.tune, "get_context", lambda: SimpleNamespace(
        get_trial_id=lambda: "a_00000", get_trial_name=lambda: "a",
        get_storage=lambda: elsewhere(driver_storage, tmp_path / "worker-local")))
    data = SimpleNamespace(base=FinetuneConfig(), tracking_uri=f"sqlite:///{tmp_path}/m.db")
    with pytest.raises(RuntimeError, match="not shared with this worker's node"):
        sweep_trial.trial({"optim.lr": 1e-4}, data)
    assert not (tmp_path / "m.db").exists()  # no trial run was opened in the store either
