"""jobs/runtime/cluster.py: which Ray a job gets from its environment, read before ray is imported."""

from jobs.runtime.cluster import starts_local_ray


def test_ray_address_local_is_a_ray_of_the_jobs_own(monkeypatch, tmp_path):
    """RAY_ADDRESS=local is Ray's word for a new local instance: it was taken for joining a cluster, so the job's own
    Ray skipped the loopback switch and listened on the machine's routable address. Any other address joins, and so
    does a job beside `ray start` on this machine, unless RAY_ADDRESS=local says otherwise."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    for address, local in (("local", True), ("auto", False), ("ray://head:10001", False), ("", True)):
        monkeypatch.setenv("RAY_ADDRESS", address)
        assert starts_local_ray() is local, address
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:6379")
    for address, local in (("local", True), ("", False)):
        monkeypatch.setenv("RAY_ADDRESS", address)
        assert starts_local_ray() is local, address
