"""One local Ray cluster (2 CPUs, loopback, token auth) per pytest process, shared by every module that asks for
`ray_tmp` or `ray_up`, and one folder of corpora and prepared sets that the pretraining modules share
(`shared_data`).

Starting Ray costs seconds, and a new cluster starts every worker process cold; a module that needs a cluster of
its own (other nodes, another address) shuts the shared one down first, and such modules run after all the others
(pytest_collection_modifyitems below), so that the shared cluster starts once. Tests never depend on what another
module left in the cluster: jobs name their runs, folders and MLflow stores under their own tmp dirs.
"""

from pathlib import Path

import pytest
import ray


HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    """The modules on a Ray of their own (they ask for `no_shared_ray`) run after every module on the shared
    cluster, so that it starts once per session instead of again after each of them; otherwise pytest's order."""
    e2e = [i for i, item in enumerate(items) if HERE in Path(item.path).resolve().parents]
    own = {items[i].path for i in e2e if "no_shared_ray" in getattr(items[i], "fixturenames", ())}
    ordered = sorted((items[i] for i in e2e), key=lambda item: item.path in own)  # stable
    for i, item in zip(e2e, ordered):
        items[i] = item


def ensure_ray() -> None:
    """The shared cluster, started here unless this process is already connected to one."""
    if not ray.is_initialized():
        ray.init(num_cpus=2)


@pytest.fixture(scope="session", autouse=True)
def _ray_down_at_the_end():
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_up():
    """Ray up for the module's tests (the shared cluster)."""
    ensure_ray()


@pytest.fixture(scope="module")
def no_shared_ray():
    """For a module whose jobs run on a Ray of another process (a child job, a `ray start` head): the shared one
    goes down first. With two Ray instances on one machine, Ray Train's PlacementGroupCleaner (which finds its
    cluster by address=None) fails with 'Found multiple active Ray instances' and prints its traceback into the
    job's console; users run one Ray per machine, and so do these tests."""
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_tmp(ray_up, tmp_path_factory, request):
    """A tmp dir shared by the module's runs, with the shared Ray up."""
    return tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])


@pytest.fixture(scope="session")
def shared_data(tmp_path_factory):
    """Harvested corpora and prepared sets for every module's jobs (quick_config's `data_dir`): the first job
    that needs one makes it, later ones (any module) reuse it, as a job reuses an earlier job's. Safe to
    share because a corpus is named by its size and a prepared set by a hash of its inputs and config, and
    no job writes to either after it is made."""
    return tmp_path_factory.mktemp("shared-data")
