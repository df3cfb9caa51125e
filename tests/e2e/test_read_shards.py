"""jobs/pretrain.read_shards on the shared cluster: Ray Data lists a parquet read on a pool of footer-reader actors,
32 new processes at every execution unless told otherwise; a prepared set of 3 shards is listed by one. The
environment is as it was after the read."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from ray.util.state import list_actors

from jobs.pretrain import FOOTER_READERS, read_shards


def footer_readers() -> int:
    return len(list_actors(filters=[("class_name", "=", "FooterReader")], limit=10_000, raise_on_missing_output=False))


@pytest.mark.parametrize("user_value", [None, "2"])
def test_a_few_shards_are_listed_by_one_footer_reader_and_the_environment_is_kept(ray_tmp, monkeypatch, user_value):
    files = []
    for i in range(3):
        files.append(str(ray_tmp / f"shard-{user_value}-{i}.parquet"))
        pq.write_table(pa.table({"example_id": list(range(i * 10, i * 10 + 10))}), files[-1])
    if user_value is None:
        monkeypatch.delenv(FOOTER_READERS, raising=False)
    else:
        monkeypatch.setenv(FOOTER_READERS, user_value)
    before = footer_readers()
    ds = read_shards(files)
    assert os.environ.get(FOOTER_READERS) == user_value
    assert sorted(r["example_id"] for r in ds.take_all()) == list(range(30))
    assert footer_readers() - before == (1 if user_value is None else 2)
    if user_value is None:  # an ordinary read in the same process keeps Ray's own default, 32
        before = footer_readers()
        ray.data.read_parquet(files).take_all()
        assert footer_readers() - before == 32
