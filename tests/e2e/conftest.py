"""A local Ray cluster (2 CPUs, loopback, token auth) per test module that asks for `ray_tmp`, and one
folder of corpora and prepared sets that the pretraining modules share (`shared_data`)."""

import pytest
import ray


@pytest.fixture(scope="module")
def ray_tmp(tmp_path_factory, request):
    """A tmp dir shared by the module's runs, with Ray up for as long as the module runs."""
    ray.init(num_cpus=2)
    try:
        yield tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def shared_data(tmp_path_factory):
    """Harvested corpora and prepared sets for every module's jobs (quick_config's `data_dir`): the first job
    that needs one makes it, later ones (any module) reuse it, as a job reuses an earlier job's. Safe to
    share because a corpus is named by its size and a prepared set by a hash of its inputs and config, and
    no job writes to either after it is made."""
    return tmp_path_factory.mktemp("shared-data")
