"""Fixtures shared by unit tests that need a real (one-rank) process group."""

import pytest
import torch.distributed as dist

from tests.ports import free_port


@pytest.fixture(scope="session")
def deepspeed_world_of_one():
    """A real gloo process group of one rank, as Ray Train gives each worker; yields deepspeed.
    One per session: DeepSpeed caches the groups it derives from the first process group it sees."""
    import deepspeed  # DS_ACCELERATOR=cpu is set by conftest before this import

    port = free_port()
    with pytest.MonkeyPatch.context() as env:
        # deepspeed.initialize insists on the launcher's variables even with dist_init_required=False.
        for key, value in dict(LOCAL_RANK="0", RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                               MASTER_PORT=str(port)).items():
            env.setenv(key, value)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
        try:
            yield deepspeed
        finally:
            dist.destroy_process_group()


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory):
    """An empty, migrated MLflow SQLite store, made once (seconds): each test starts from a copy of it."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("store") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def reports(monkeypatch, tmp_path):
    """ray.train.report outside Ray: each report's metrics and a copy of its checkpoint folder, for a worker's
    checkpoint and restore paths driven in-process."""
    import shutil

    import ray.train

    kept = []

    def report(metrics, checkpoint=None, **kwargs):
        folder = tmp_path / f"checkpoint-{len(kept)}"
        shutil.copytree(checkpoint.path, folder)
        kept.append((metrics, folder))

    monkeypatch.setattr(ray.train, "report", report)
    return kept
