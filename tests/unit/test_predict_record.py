"""jobs/predict.py's record of a job (its manifest, its MLflow run, its summary) once the run started: a job that
failed left its manifest "running" for good (only the Ray work ended the run FAILED); one whose last steps failed
(the store refusing the manifest artifact) left a manifest saying "complete" and its run RUNNING; a rerun's rate and
`rows` metric counted the rows of the shards it kept."""

import json
import time

import pyarrow as pa
import pytest
from mlflow.tracking import MlflowClient

from bert_core.config import ConfigError
from jobs import predict
from jobs.config.predict import PredictConfig
from jobs.inference import shards
from jobs.inference.model_ref import ModelRef
from jobs.runtime import cluster


def shard(out, name: str, rows: int, windows: list | None = None, **info) -> None:
    """A shard of `rows` rows, all predicted (what a replica writes), none truncated, in one window each unless
    `windows` says; `info`: more of its _rows.json (rejects, samples)."""
    shards.write_rows(out, name, {"file": "in.txt", "first": 0, "rows": rows, **info})
    if rows:  # a shard of no row (every record rejected, an empty file): its _rows.json alone
        shards.write_part(out, name, pa.table({"id": [f"in.txt:{i}" for i in range(rows)],
                                               "position": list(range(rows)), "truncated": [False] * rows,
                                               "windows": windows or [1] * rows}))


@pytest.fixture
def job(tmp_path, monkeypatch):
    """_fill over out/ with an MLflow run in a SQLite store (no Ray: `_predict` is the test's); the run's id."""
    uri = f"sqlite:///{tmp_path}/m.db"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("predict", str(tmp_path / "artifacts"))).info.run_id
    monkeypatch.setattr(cluster, "init_ray", lambda: "")
    monkeypatch.setattr(predict, "_start_run", lambda *a: run_id)
    (tmp_path / "out").mkdir()

    def fill(manifest=None, started=None):
        cfg = PredictConfig(model="m", input="in.txt", output=str(tmp_path / "out"))
        return predict._fill(cfg, ModelRef("m", tmp_path, "classification"), uri, tmp_path / "out",
                             started or time.time(), [], manifest or {"status": "running", "shards": {}})

    return fill, client, run_id


def failing(*args):
    raise RuntimeError("shard 00000-000000: 3 of 4 rows predicted when the job's data ended")


def refusing(self, run_id, path, artifact_path=None):
    raise OSError("the artifact store refused manifest.json")


@pytest.mark.parametrize("where", ["predict", "log_artifact"])
def test_a_job_that_fails_once_its_run_started_leaves_a_failed_manifest_and_run(tmp_path, monkeypatch, job, where):
    """A Ray Data task's error, or a check of its shards; or the store failing at the end: the manifest says
    "failed" with the error (not "running", not "complete"), and the run is FAILED (not RUNNING) with it."""
    fill, client, run_id = job
    if where == "predict":
        monkeypatch.setattr(predict, "_predict", failing)
        error = RuntimeError
    else:
        monkeypatch.setattr(predict, "_predict", lambda cfg, model, files, output, done, manifest: shard(
            output, "00000-000000", 2) or shards.record_complete(output, manifest, {"00000-000000"}))
        monkeypatch.setattr(MlflowClient, "log_artifact", refusing)
        error = OSError
    with pytest.raises(error):
        fill()
    manifest = json.loads((tmp_path / "out" / shards.MANIFEST).read_text())
    says = "3 of 4 rows predicted" if where == "predict" else "the artifact store refused manifest.json"
    assert manifest["status"] == "failed" and says in manifest["error"], manifest
    run = client.get_run(run_id)
    assert run.info.status == "FAILED" and says in run.data.tags["error"]


def test_a_failed_manifest_that_cannot_be_written_never_hides_the_jobs_error(tmp_path, monkeypatch, job):
    fill, _, _ = job
    write = shards.write_json

    def full_disk(path, value):
        if value.get("status") == "failed":
            raise OSError("No space left on device")
        write(path, value)

    monkeypatch.setattr(predict, "_predict", failing)
    monkeypatch.setattr(shards, "write_json", full_disk)
    with pytest.raises(RuntimeError, match="rows predicted when the job's data ended"):
        fill()


def test_a_rerun_over_a_failed_jobs_folder_resumes_it_and_ends_a_run_left_running(tmp_path, capsys):
    """A failed job's folder resumes as a killed one's does: its complete shards kept, its error dropped; where the
    store was down when it failed (its run left RUNNING), the rerun ends that run."""
    out, uri = tmp_path / "out", f"sqlite:///{tmp_path}/m.db"
    client = MlflowClient(uri)
    first = client.create_run(client.create_experiment("predict", str(tmp_path / "artifacts"))).info.run_id
    cfg = PredictConfig(model="m", input="in.txt", output=str(out))
    cfg.tracking.tracking_uri = uri
    model, basis = ModelRef("m", tmp_path, "classification"), {"format": "text"}
    shards.write_json(out / shards.MANIFEST, {**predict._open_manifest(out, cfg, model, [], basis), "status": "failed",
                                              "error": "OSError: store down", "mlflow": {"tracking_uri": uri,
                                                                                         "run_id": first}})
    shard(out, "00000-000000", 2)
    shards.write_rows(out, "00000-000001", {"file": "in.txt", "first": 2, "rows": 2})  # in flight: cleared
    manifest = predict._open_manifest(out, cfg, model, [], basis)
    assert manifest["status"] == "running" and "error" not in manifest
    assert shards.clear_incomplete(out, shards.scan(out)) == ["00000-000000"]
    ended = client.get_run(first)
    assert (ended.info.status, ended.data.tags.get("error")) == ("FAILED", "OSError: store down")  # the job's error
    assert f"(MLflow run {first}) failed without ending it: its run ended as FAILED" in capsys.readouterr().out
    gone = {**predict._open_manifest(out, cfg, model, [], basis), "status": "running",
            "mlflow": {"tracking_uri": uri, "run_id": "0" * 32}}
    predict._end_dead_run(out, gone, cfg)  # a run the store does not hold: nothing ended, nothing said
    assert "ended as" not in capsys.readouterr().out


def test_a_reruns_rate_and_rows_metric_count_the_rows_it_predicted(tmp_path, monkeypatch, job, capsys):
    """A rerun over a folder 90 of whose 100 rows an earlier job predicted: its rate is of its own 10 rows (it was
    of 100: 10x too high); the `rows` metric is its own beside its `seconds`, `rows_total` the output's."""
    fill, client, run_id = job
    out = tmp_path / "out"
    shard(out, "00000-000000", 90)
    kept = {"status": "running", "shards": {}}
    shards.record_complete(out, kept, {"00000-000000"})
    monkeypatch.setattr(predict, "_predict", lambda cfg, model, files, output, done, manifest: shard(
        output, "00000-000001", 10) or shards.record_complete(output, manifest, {"00000-000001"}))
    result = fill(kept, started=time.time() - 2)
    assert (result.rows, result.rows_this_run, result.skipped_shards) == (100, 10, 1)
    metrics = client.get_run(run_id).data.metrics
    assert (metrics["rows"], metrics["rows_total"]) == (10, 100)
    printed = capsys.readouterr().out
    assert "predicted 10 rows (100 in the output) with m" in printed
    assert f"({10 / result.seconds:,.0f} rows/s overall)" in printed
    assert json.loads((out / shards.MANIFEST).read_text())["rows"] == 100  # the manifest counts the folder's rows


def test_blank_lines_and_empty_files_are_skipped_not_rejected_and_windowed_rows_are_counted(tmp_path, monkeypatch,
                                                                                         job, capsys):
    """Blank lines and empty files hold no record: the summary and the `rejected` metric counted them as rejects,
    though a job of nothing else does not fail. They are `skipped` now, apart. A tagger's or reader's rows read in
    more than one window were counted nowhere (the README said "windowed ... and counted"): `windowed`."""
    fill, client, run_id = job
    monkeypatch.setattr(predict, "_predict", lambda cfg, model, files, output, done, manifest: shard(
        output, "00000-000000", 3, windows=[1, 3, 2], rejects={"blank_line": 2, "bad_json": 1},
        samples=[["blank_line", "line 2", ""], ["bad_json", "line 4", "{"]]) or shard(
        output, "00001-000000", 0, rejects={"empty_file": 1}) or shards.record_complete(
        output, manifest, {"00000-000000", "00001-000000"}))
    result = fill()
    skipped = {"blank_line": 2, "empty_file": 1}
    assert (result.rejected, result.skipped, result.windowed) == ({"bad_json": 1}, skipped, 2)
    manifest = json.loads((tmp_path / "out" / shards.MANIFEST).read_text())
    assert (manifest["rejected"], manifest["skipped"], manifest["windowed"]) == ({"bad_json": 1}, skipped, 2)
    metrics = client.get_run(run_id).data.metrics
    assert (metrics["rejected"], metrics["skipped"], metrics["windowed"]) == (1, 3, 2)
    printed = capsys.readouterr().out
    assert "  rejected    bad_json 1\n  skipped     blank_line 2, empty_file 1 (no record)\n" in printed
    assert "; windowed 2\n" in printed


@pytest.mark.parametrize("rejected", [True, False])
def test_a_job_whose_records_are_all_rejected_names_a_rejected_one_not_a_blank_line(monkeypatch, job, rejected):
    """A job that predicted no row fails only where records were rejected (blank lines alone: a success), and its
    error names those reasons and a rejected record, not the blank line before it."""
    fill, _, _ = job
    rejects = {"blank_line": 1, **({"invalid_utf8": 2} if rejected else {})}
    monkeypatch.setattr(predict, "_predict", lambda cfg, model, files, output, done, manifest: shard(
        output, "00000-000000", 0, rejects=rejects, samples=[["blank_line", "line 1", ""],
                                                             ["invalid_utf8", "line 2", "caf\ufffd"]][:len(rejects)])
        or shards.record_complete(output, manifest, {"00000-000000"}))
    if not rejected:
        assert fill().skipped == {"blank_line": 1}  # nothing to predict, no failure
        return
    with pytest.raises(ConfigError, match=r"^input: no row could be predicted, every record was rejected "
                                          r"\(invalid_utf8 2; first: invalid_utf8 at line 2: 'caf\ufffd'\)$"):
        fill()


@pytest.mark.parametrize("recorded, ended_with", [
    ("HTTP://Host:80/", "http://user:pw@host"),  # this job's server however written: ended with its credentials
    ("http://other:5000", "http://other:5000"),  # another server: ended there as recorded, never with ours
])
def test_a_dead_runs_store_is_this_jobs_by_the_rule_a_release_record_is(tmp_path, monkeypatch, recorded, ended_with):
    """The manifest's store is this job's where tracking.same_store says so (scheme and host in any case, the
    scheme's own port, a trailing slash, whoever the user): it was compared as written, and the dead run on this very
    server was sought without credentials, which the server refuses (the run left RUNNING)."""
    from jobs.registry import tracking

    ended = []
    monkeypatch.setattr(tracking, "may_still_run", lambda uri, run_id: True)
    monkeypatch.setattr(tracking, "end_dead_run", lambda uri, run_id, error="": ended.append(uri) or True)
    cfg = PredictConfig(model="m", input="in.txt", output=str(tmp_path / "out"))
    cfg.tracking.tracking_uri = "http://user:pw@host"
    predict._end_dead_run(tmp_path / "out", {"status": "running",
                                             "mlflow": {"tracking_uri": recorded, "run_id": "run1"}}, cfg)
    assert ended == [ended_with]
