"""jobs/pretrain.read_shards on the shared cluster: Ray Data's V2 parquet read lists the files on a pool of
footer-reader actors, 32 new processes at every execution unless told otherwise; a prepared set is read through
V1, which reads the footers once, in the driver, and starts no such process. A user who set
RAY_DATA_USE_DATASOURCE_V2 keeps the reader Ray took from it: V1 for 0, V2 for 1 with its pool sized to the files
(3 shards: one reader) unless the user sized it. Reader setting and environment are as they were after the read."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from ray.util.state import list_actors

from jobs.pretrain import DATASOURCE_V2, FOOTER_READERS, read_shards

pytestmark = pytest.mark.slow  # a real local Ray cluster: `make test`, not `make test-fast`


def footer_readers() -> int:
    return len(list_actors(filters=[("class_name", "=", "FooterReader")], limit=10_000, raise_on_missing_output=False))


@pytest.mark.parametrize("user_v2, user_readers, started", [(None, None, 0), ("0", None, 0), ("1", None, 1),
                                                             ("1", "2", 2)], ids=["default", "v1", "v2", "v2-sized"])
def test_a_few_shards_are_read_with_the_fewest_footer_readers_and_the_environment_is_kept(
        ray_tmp, monkeypatch, user_v2, user_readers, started):
    files = []
    for i in range(3):
        files.append(str(ray_tmp / f"shard-{user_v2}-{user_readers}-{i}.parquet"))
        pq.write_table(pa.table({"example_id": list(range(i * 10, i * 10 + 10))}), files[-1])
    for name, value in ((DATASOURCE_V2, user_v2), (FOOTER_READERS, user_readers)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    context = ray.data.DataContext.get_current()
    if user_v2 is not None:  # Ray reads the variable once, at import: here, as a user's job would have it
        monkeypatch.setattr(context, "use_datasource_v2", user_v2 == "1")
    v2_before = context.use_datasource_v2
    before = footer_readers()
    ds = read_shards(files)
    assert (os.environ.get(DATASOURCE_V2), os.environ.get(FOOTER_READERS)) == (user_v2, user_readers)
    assert context.use_datasource_v2 == v2_before
    for epoch in range(2):  # each execution, as each epoch: every row once
        assert sorted(r["example_id"] for r in ds.take_all()) == list(range(30)), epoch
    assert footer_readers() - before == 2 * started
    if user_v2 is None:  # an ordinary read in the same process keeps Ray's own reader and pool, 32
        assert context.use_datasource_v2
        before = footer_readers()
        ray.data.read_parquet(files).take_all()
        assert footer_readers() - before == 32
