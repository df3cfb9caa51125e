"""A local Ray cluster (2 CPUs, loopback, token auth) per test module that asks for `ray_tmp`."""

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
