"""jobs/inference/shards.py: what a rerun of jobs/predict.py keeps and what it predicts again."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.inference import shards

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def part(positions):
    return pa.table({"id": [f"r{p}" for p in positions], "position": positions})


def test_complete_shards_are_kept_and_the_rest_cleared(tmp_path):
    shards.write_rows(tmp_path, "00000-000000", {"file": "a.csv", "rows": 4})
    shards.write_part(tmp_path, "00000-000000", part([0, 1]))
    shards.write_part(tmp_path, "00000-000000", part([2, 3]))
    shards.write_rows(tmp_path, "00000-000001", {"file": "a.csv", "rows": 4})  # killed after one part
    shards.write_part(tmp_path, "00000-000001", part([0, 1]))
    shards.write_part(tmp_path, "00001-000000", part([0]))  # parts but no _rows.json: never read whole
    shards.write_rows(tmp_path, "00002-000000", {"file": "b.txt", "rows": 0})  # every record rejected
    states = shards.scan(tmp_path)
    assert {s: st.complete for s, st in states.items()} == {
        "00000-000000": True, "00000-000001": False, "00001-000000": False, "00002-000000": True}
    assert shards.clear_incomplete(tmp_path, states) == ["00000-000000", "00002-000000"]
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == ["00000-000000", "00002-000000"]
    shards.verify(tmp_path, "00000-000000", 4)


def test_a_retried_part_lands_on_itself_and_verify_catches_a_double(tmp_path):
    shards.write_rows(tmp_path, "s", {"rows": 3})
    first = shards.write_part(tmp_path, "s", part([2, 0]))
    assert shards.write_part(tmp_path, "s", part([2, 0])) == first  # the same rows: the same file
    assert shards.scan(tmp_path)["s"].parts == {first: 2}
    shards.write_part(tmp_path, "s", part([0]))  # another run's block holding row 0 again: 3 rows, one twice
    assert shards.scan(tmp_path)["s"].complete  # the count alone cannot tell ...
    with pytest.raises(RuntimeError, match="not each exactly once"):
        shards.verify(tmp_path, "s", 3)  # ... the positions can


def test_writes_are_whole_or_absent(tmp_path):
    target = tmp_path / "x" / "manifest.json"
    with pytest.raises(TypeError):
        shards.write_atomic(target, "not bytes")
    assert not target.exists() and list((tmp_path / "x").iterdir()) == []


def test_written_files_get_the_umasks_mode_not_mkstemps_private_one(tmp_path):
    """Predictions and their manifest on shared storage are read by other users: mkstemp's 0600 kept them out."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        shards.write_atomic(tmp_path / "manifest.json", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "manifest.json").stat().st_mode) == 0o644


def test_a_rerun_with_other_settings_starts_over_only_where_nothing_was_completed(tmp_path, capsys):
    """A first run that predicted no shard and was killed (its MLflow run left RUNNING, its lease freed by the
    kernel): a rerun with other settings takes the folder over and ends that run as KILLED. Once a shard is
    complete, another model or input is refused."""
    from mlflow.tracking import MlflowClient

    from bert_core.config import ConfigError
    from jobs.config.predict import PredictConfig
    from jobs.predict import ModelRef, _open_manifest

    out, uri = tmp_path / "out", f"sqlite:///{tmp_path}/mlflow.db"
    cfg = PredictConfig(model="m", input="in.csv", output=str(out))
    model = ModelRef("m", tmp_path, "classification")
    wrong, right = {"columns": {"text": "body", "encoding": ""}}, {"columns": {"text": "review", "encoding": ""}}
    client = MlflowClient(uri)
    first = client.create_run(client.create_experiment("predict")).info.run_id
    with shards.lease(out):
        shards.write_json(out / shards.MANIFEST, {**_open_manifest(out, cfg, model, [], wrong),
                                                  "mlflow": {"tracking_uri": uri, "run_id": first}})
        shards.write_rows(out, "00000-000000", {"file": "in.csv", "rows": 4})  # started, never completed
    with shards.lease(out):  # the rerun
        manifest = _open_manifest(out, cfg, model, [], right)
    assert manifest["basis"] == right and not (out / "shards" / "00000-000000").exists()
    assert client.get_run(first).info.status == "KILLED"
    printed = capsys.readouterr().out
    assert "predicted no row: starting over" in printed and f"(MLflow run {first}) was killed" in printed
    shards.write_json(out / shards.MANIFEST, {**manifest, "mlflow": {"tracking_uri": uri, "run_id": first}})
    shards.write_rows(out, "00000-000000", {"file": "in.csv", "rows": 1})
    shards.write_part(out, "00000-000000", part([0]))
    with pytest.raises(ConfigError, match=r"another model or input \(differs in columns\)"):
        _open_manifest(out, cfg, model, [], wrong)
    assert _open_manifest(out, cfg, model, [], right)["basis"] == right  # the same settings: resumed


@pytest.mark.parametrize("theirs", [{"format": "other-tool", "files": 3}, [1, 2], "not json {"])
def test_a_folder_with_another_tools_manifest_is_refused_and_keeps_its_files(tmp_path, theirs):
    """An output folder holding a manifest.json that jobs/predict.py did not write (a dataset export's, a list, not
    JSON) is refused before the lease, and its shards/ folder, which a rerun of ours would clear as unfinished,
    stays."""
    from bert_core.config import ConfigError
    from jobs.config.predict import PredictConfig
    from jobs.predict import ModelRef, _open_manifest, _refuse_foreign

    out = tmp_path / "export"
    (out / "shards" / "part0").mkdir(parents=True)
    (out / "shards" / "part0" / "data.bin").write_bytes(b"theirs")
    (out / shards.MANIFEST).write_text(theirs if isinstance(theirs, str) else json.dumps(theirs))
    with pytest.raises(ConfigError, match="holds a manifest.json that jobs/predict.py did not write"):
        _refuse_foreign(out)
    with pytest.raises(ConfigError, match="did not write"):
        _open_manifest(out, PredictConfig(model="m", input="in.csv", output=str(out)),
                       ModelRef("m", tmp_path, "classification"), [], {"columns": {}})
    assert (out / "shards" / "part0" / "data.bin").read_bytes() == b"theirs" and not (out / shards.LEASE).exists()


def test_a_basis_key_only_the_earlier_run_wrote_is_named_as_the_difference(tmp_path):
    from bert_core.config import ConfigError
    from jobs.config.predict import PredictConfig
    from jobs.predict import ModelRef, _open_manifest

    out, cfg = tmp_path / "out", PredictConfig(model="m", input="in.csv", output=str(tmp_path / "out"))
    model = ModelRef("m", tmp_path, "classification")
    shards.write_json(out / shards.MANIFEST, {**_open_manifest(out, cfg, model, [], {"format": "csv"}),
                                              "basis": {"format": "csv", "legacy": 1}})
    shards.write_rows(out, "00000-000000", {"file": "in.csv", "rows": 1})
    shards.write_part(out, "00000-000000", part([0]))
    with pytest.raises(ConfigError, match=r"\(differs in legacy\)"):
        _open_manifest(out, cfg, model, [], {"format": "csv"})


def test_the_same_command_started_again_while_the_first_runs_is_refused_leaving_its_shards(tmp_path, monkeypatch):
    """Overlapping cron runs: a second start of the same command must not clear the first job's shard in flight. The
    first job (a real process) holds the folder's lease: the second is refused at once, naming it, before Ray. Once
    the first is killed outright (SIGKILL: no handler runs), the kernel frees its lease and the rerun takes the
    folder over at once, ending the dead job's MLflow run, left RUNNING, as KILLED."""
    import signal
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    from bert_core.config import ConfigError
    from jobs import predict
    from jobs.config.predict import PredictConfig
    from jobs.predict import ModelRef, _basis, _open_manifest
    from jobs.runtime import cluster

    data, out, uri = tmp_path / "in.txt", tmp_path / "out", f"sqlite:///{tmp_path}/mlflow.db"
    data.write_text("a\nb\n")
    files = [(str(data), "text")]
    cfg = PredictConfig(model="m", input=str(data), output=str(out))
    model = ModelRef("m", tmp_path, "classification", digest="d")
    client = MlflowClient(uri)
    first = client.create_run(client.create_experiment("predict")).info.run_id
    shards.write_json(out / shards.MANIFEST, {**_open_manifest(out, cfg, model, files, _basis(cfg, model, files)),
                                              "mlflow": {"tracking_uri": uri, "run_id": first}})
    shards.write_rows(out, "00000-000000", {"file": str(data), "first": 0, "rows": 2})
    shards.write_part(out, "00000-000000", part([0]))  # the first job's shard, half predicted
    job = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                            "from jobs.inference import shards\nwith shards.lease(Path(sys.argv[1])):\n"
                            "    print('held', flush=True); time.sleep(120)", str(out)],
                           stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert job.stdout.readline().strip() == "held"
        monkeypatch.setattr(cluster, "init_ray", lambda: pytest.fail("the job went on to Ray"))
        with pytest.raises(ConfigError, match=rf"another prediction job is writing there \(pid {job.pid} on "):
            predict._run(cfg, model, uri, out, 0.0)
        assert len(shards.state(out, "00000-000000").parts) == 1  # nothing of the first job's touched
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait()
    with shards.lease(out):  # free the moment its holder died
        resumed = _open_manifest(out, cfg, model, files, _basis(cfg, model, files))
    assert resumed["status"] == "running"
    assert client.get_run(first).info.status == "KILLED"  # left RUNNING by a killed job


def test_an_input_file_named_in_another_encoding_is_refused_before_any_work(tmp_path, monkeypatch):
    """A file name that is not UTF-8 ('caf\\xe9.csv' from a Latin-1 system) cannot be recorded in the manifest, the
    shards or the MLflow run: the job refuses it before its manifest, MLflow or Ray, naming it escaped, and asks for
    a rename."""
    import os

    from bert_core.config import ConfigError
    from jobs import predict
    from jobs.config.predict import PredictConfig
    from jobs.runtime import cluster

    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    (folder / "good.csv").write_text("text\na\n")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.csv"), "w") as f:
        f.write("text\nb\n")
    monkeypatch.setattr(cluster, "init_ray", lambda: pytest.fail("the job went on to Ray"))
    cfg = PredictConfig(model="m", input=str(folder), output=str(out))
    model = predict.ModelRef("m", tmp_path, "classification", digest="d")
    with pytest.raises(ConfigError, match=r"input file b'.*/caf\\xe9.csv' has a name that is not UTF-8.*rename it"):
        predict._run(cfg, model, f"sqlite:///{tmp_path}/mlflow.db", out, 0.0)
    assert not out.exists()


def test_parts_are_typed_so_a_part_without_any_span_reads_with_the_others(tmp_path):
    """A QA part whose rows all have no span (score None) is written with score a double, not Arrow's null type:
    the output folder reads as one table."""
    import pyarrow.dataset as ds

    def qa(score):
        return {"id": "q", "answer": "", "answer_start": -1, "score": score, "null_score": 1.5}

    encoded = [{"truncated": False, "windows": [{}]}]
    for name, score in (("a", None), ("b", 2.5)):
        part = shards.part_table("question-answering", [qa(score)], ["f.csv"], [0 if score is None else 1], encoded)
        pq.write_table(part, tmp_path / f"{name}.parquet")
    table = ds.dataset(tmp_path).to_table()
    assert table.num_rows == 2 and sorted(table.column("score").to_pylist(), key=str) == [2.5, None]


def test_a_rerun_over_an_edited_input_file_is_refused_naming_it(tmp_path):
    """Shards of a file's old rows beside predictions of its new ones would duplicate some rows and miss others: a
    rerun keeps complete shards only while every input file is as it was (size and modification time)."""
    import os

    from bert_core.config import ConfigError
    from jobs.config.predict import PredictConfig
    from jobs.predict import ModelRef, _basis, _open_manifest

    data, out = tmp_path / "in.csv", tmp_path / "out"
    data.write_text("text\na\nb\n")
    files = [(str(data), "csv")]
    cfg = PredictConfig(model="m", input=str(data), output=str(out))
    model = ModelRef("m", tmp_path, "classification")

    def basis():
        return _basis(cfg, model, files)

    shards.write_json(out / shards.MANIFEST, {**_open_manifest(out, cfg, model, files, basis()), "status": "complete"})
    shards.write_rows(out, "00000-000000", {"file": str(data), "rows": 1})
    shards.write_part(out, "00000-000000", part([0]))
    assert _open_manifest(out, cfg, model, files, basis())["basis"] == basis()  # untouched: resumed
    current = json.loads((out / shards.MANIFEST).read_text())
    older = json.loads(json.dumps(current))  # an earlier version's folder: its positions were places in their shard
    del older["basis"]["positions"], older["basis"]["columns"]["sheet"]
    shards.write_json(out / shards.MANIFEST, older)
    with pytest.raises(ConfigError, match=r"another model or input \(differs in columns, positions \(an earlier"):
        _open_manifest(out, cfg, model, files, basis())
    shards.write_json(out / shards.MANIFEST, current)
    data.write_text("text\nB\nA\n")  # the same size: only the modification time tells
    os.utime(data, (1_000_000_000, 1_000_000_000))
    with pytest.raises(ConfigError, match=rf"the input files: {data} changed \(size or modification time\)"):
        _open_manifest(out, cfg, model, files, basis())
    old = json.loads((out / shards.MANIFEST).read_text())  # written before file_versions was in the basis
    del old["basis"]["file_versions"]
    shards.write_json(out / shards.MANIFEST, old)
    with pytest.raises(ConfigError, match=r"differs in file_versions"):
        _open_manifest(out, cfg, model, files, basis())


def test_a_folder_whose_earlier_run_predicted_no_row_is_taken_over(tmp_path, capsys):
    """Every record of the first run rejected (its shards complete with 0 rows, its run FAILED): the rerun over the
    corrected file starts over there, every earlier shard removed."""
    from mlflow.tracking import MlflowClient

    from jobs.config.predict import PredictConfig
    from jobs.predict import ModelRef, _basis, _open_manifest

    data, out, uri = tmp_path / "in.csv", tmp_path / "out", f"sqlite:///{tmp_path}/mlflow.db"
    data.write_bytes(b"text\ncaf\xe9\n")
    files = [(str(data), "csv")]
    cfg = PredictConfig(model="m", input=str(data), output=str(out))
    model = ModelRef("m", tmp_path, "classification")
    client = MlflowClient(uri)
    first = client.create_run(client.create_experiment("predict")).info.run_id
    client.set_terminated(first, "FAILED")
    shards.write_json(out / shards.MANIFEST, {**_open_manifest(out, cfg, model, files, _basis(cfg, model, files)),
                                              "mlflow": {"tracking_uri": uri, "run_id": first}})
    shards.write_rows(out, "00000-000000", {"file": str(data), "rows": 0, "rejects": {"invalid_utf8": 1}})
    data.write_text("text\ncafe au lait\n")
    manifest = _open_manifest(out, cfg, model, files, _basis(cfg, model, files))
    assert manifest["basis"] == _basis(cfg, model, files) and not (out / shards.SHARDS).exists()
    assert "predicted no row: starting over" in capsys.readouterr().out


def test_the_rows_of_big_inputs_are_estimated_from_a_sample(tmp_path):
    """The ETA's row count: exact for a file within the sample; from the sample's lines and the file's size past it
    (the driver does not read a whole big input); Parquet's own count."""
    import gzip

    from jobs.inference.inputs import estimate_rows

    small, big = tmp_path / "small.csv", tmp_path / "big.csv"
    small.write_text("text\n" + "a row\n" * 10)
    big.write_text("text\n" + "".join(f"row {i:06d}\n" for i in range(100_000)))  # 11 bytes a row
    pq.write_table(pa.table({"text": ["x"] * 7}), tmp_path / "p.parquet")
    assert estimate_rows([(str(small), "csv")]) == 11
    assert estimate_rows([(str(big), "csv")], sample_bytes=1 << 16) == pytest.approx(100_001, rel=0.01)
    assert estimate_rows([(str(small), "csv"), (str(tmp_path / "p.parquet"), "parquet")]) == 18
    (tmp_path / "big.csv.gz").write_bytes(gzip.compress(big.read_bytes()))
    assert estimate_rows([(str(tmp_path / "big.csv.gz"), "csv")], sample_bytes=1 << 16) == 0  # unknown
    assert estimate_rows([(str(tmp_path / "big.csv.gz"), "csv")]) == 100_001


def test_a_shards_rows_reach_the_replicas_longest_first_each_keeping_its_position(tmp_path):
    """Windows of like lengths pad little, and the job ends on its shortest rows (the replicas finish together):
    10,000 real rows, 58-59 s in file order, 52-54 s longest first (BENCHMARKS.md). The positions are the file's."""
    from jobs.inference.stages import read_rows
    from pipelines.tasks.files import Columns

    long = "a much longer text than the others"
    texts = ["short", long, "a middling text", "tiny", long]
    (tmp_path / "in.csv").write_text("text\n" + "\n".join(texts) + "\n")
    out = list(read_rows({"index": 0, "path": str(tmp_path / "in.csv"), "fmt": "csv"}, "classification",
                         Columns(tokens=""), 10_000, set(), tmp_path / "out"))
    assert [json.loads(r["row"])["text_a"] for r in out] == sorted(texts, key=len, reverse=True)
    assert [r["position"] for r in out] == [1, 4, 2, 0, 3]  # ties in the file's order
    assert {r["shard"] for r in out} == {"00000-000000"}
    assert json.loads((tmp_path / "out" / "shards" / "00000-000000" / "_rows.json").read_text())["rows"] == 5


def test_positions_are_places_in_the_file_so_the_output_sorts_into_input_order(tmp_path):
    """A position is the row's place among its file's readable rows, not in its shard: the whole output folder,
    sorted by file and position, is the input in order (a rejected record takes no position). verify checks a
    shard's positions from its first."""
    from jobs.inference.stages import read_rows
    from pipelines.tasks.files import Columns

    (tmp_path / "in.csv").write_text("text\na\nbb\n\nccc\ndddd\neeeee\n")  # a blank line: rejected
    out = list(read_rows({"index": 0, "path": str(tmp_path / "in.csv"), "fmt": "csv"}, "classification",
                         Columns(tokens=""), 2, set(), tmp_path / "out"))
    assert [(r["shard"], r["position"]) for r in out] == [
        ("00000-000000", 1), ("00000-000000", 0), ("00000-000001", 3), ("00000-000001", 2), ("00000-000002", 4)]
    assert [json.loads(r["row"])["text_a"] for r in sorted(out, key=lambda r: r["position"])] == \
        ["a", "bb", "ccc", "dddd", "eeeee"]
    for shard, positions in (("00000-000001", [3, 2]), ("00000-000002", [4])):
        shards.write_part(tmp_path / "out", shard, part(positions))
        shards.verify(tmp_path / "out", shard, len(positions))
    shards.write_part(tmp_path / "out", "00000-000000", part([0, 1, 2]))  # a position of the next shard
    with pytest.raises(RuntimeError, match="not each exactly once"):
        shards.verify(tmp_path / "out", "00000-000000", 2)


def test_a_folder_predicted_at_another_threshold_is_refused_not_mixed(tmp_path):
    """The threshold in effect (a runs:/ model's trained one now, 0.5 before) is part of what a folder's predictions
    depend on: an earlier run's complete shards at another threshold are not kept beside new ones."""
    from bert_core.config import ConfigError
    from jobs.config.predict import PredictConfig
    from jobs.predict import ModelRef, _basis, _open_manifest

    data, out = tmp_path / "in.txt", tmp_path / "out"
    data.write_text("a\nb\n")
    files, cfg = [(str(data), "text")], PredictConfig(model="m", input=str(data), output=str(out))
    before = ModelRef("m", tmp_path, "multi-label", digest="d")  # no task settings: 0.5
    after = ModelRef("m", tmp_path, "multi-label", digest="d", task={"multi_label_threshold": "0.3"})
    shards.write_json(out / shards.MANIFEST, {**_open_manifest(out, cfg, before, files, _basis(cfg, before, files)),
                                              "status": "complete"})
    shards.write_rows(out, "00000-000000", {"file": str(data), "first": 0, "rows": 1})
    shards.write_part(out, "00000-000000", part([0]))
    with pytest.raises(ConfigError, match=r"another model or input \(differs in threshold\)"):
        _open_manifest(out, cfg, after, files, _basis(cfg, after, files))
    given = PredictConfig(model="m", input=str(data), output=str(out), threshold=0.5)  # the same one, given
    assert _open_manifest(out, given, before, files, _basis(given, before, files))["basis"]["threshold"] == 0.5


CREDENTIALS_URI = "https://alice:s3cret@mlflow.example.com"


def test_the_manifest_and_its_run_artifact_name_the_store_without_its_credentials(tmp_path, monkeypatch, capsys):
    """manifest.json is read by whoever reads the predictions and logged as the run's artifact: the tracking URI in
    it, and the summary, carry no password. A later job on the same store still ends a dead run with its own URI."""
    from jobs import predict
    from jobs.config.predict import PredictConfig
    from jobs.predict import ModelRef
    from jobs.registry import tracking
    from jobs.runtime import cluster

    out = tmp_path / "out"
    out.mkdir()
    logged = {}
    monkeypatch.setattr(cluster, "init_ray", lambda: "")
    monkeypatch.setattr(predict, "_start_run", lambda *a: "run1")
    monkeypatch.setattr(predict, "_predict", lambda *a: None)
    monkeypatch.setattr(predict, "_log_run", lambda uri, run_id, r, output, status: logged.update(
        artifact=(output / shards.MANIFEST).read_text()))
    cfg = PredictConfig(model="m", input="in.txt", output=str(out))
    predict._fill(cfg, ModelRef("m", tmp_path, "classification"), CREDENTIALS_URI, out, 0.0, [],
                  {"status": "running", "shards": {}})
    assert json.loads(logged["artifact"])["mlflow"] == {"tracking_uri": "https://***@mlflow.example.com",
                                                        "run_id": "run1"}
    assert "s3cret" not in logged["artifact"] and "s3cret" not in capsys.readouterr().out

    ended = []
    monkeypatch.setattr(tracking, "may_still_run", lambda uri, run_id: True)
    monkeypatch.setattr(tracking, "end_dead_run", lambda uri, run_id, error="": ended.append(uri) or True)
    cfg.tracking.tracking_uri = CREDENTIALS_URI
    predict._end_dead_run(out, {**json.loads(logged["artifact"]), "status": "running"}, cfg)  # as a killed job left it
    assert ended == [CREDENTIALS_URI]


def test_a_task_config_tag_that_is_not_json_is_named(tmp_path):
    """A version's task_config tag cut short (a 250-label task's, cut at 5,000 characters) is one clear error
    naming the tag, not a JSON traceback."""
    from mlflow.tracking import MlflowClient

    from bert_core.config import ConfigError
    from jobs.predict import resolve_model

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    client.create_registered_model("m")
    run_id = client.create_run(client.create_experiment("e")).info.run_id
    cut = json.dumps({"name": "files", "labels": [f"label_{i:03d}" for i in range(250)]})[:1000]
    client.create_model_version("m", str(tmp_path), run_id, tags={"task_config": cut})
    client.set_registered_model_alias("m", "champion", "1")
    with pytest.raises(ConfigError, match=r"^model 'models:/m@champion': the task_config tag of its registered "
                                          r"version is not valid JSON \(Unterminated string"):
        resolve_model("models:/m@champion", uri, tmp_path / "download")


def test_the_umask_is_read_without_being_set(monkeypatch):
    """os.umask sets the mask to read it: a thread creating a file in that moment got the temporary one."""
    import os

    from bert_core.files import umask

    old = os.umask(0o027)
    try:
        with monkeypatch.context() as m:
            m.setattr(os, "umask", lambda mask: pytest.fail(f"umask() set the process's mask to {mask:o}"))
            assert umask() == 0o027
    finally:
        os.umask(old)


def test_an_input_shipped_in_a_submitted_jobs_copy_is_known_again_in_another_copy(tmp_path, monkeypatch):
    """`ray job submit --working-dir .` runs the job in a copy of that folder named by the Ray session, its files
    timed by their unpacking: resubmitted after a cluster restart, the same relative input was another path and
    time, and the rerun was refused as 'another input'. Such a file is known by its path in the copy and its
    sha256; an edit still tells; a file outside the copy keeps its path and time."""
    from jobs.config.predict import PredictConfig
    from jobs.inference.inputs import basis_paths, file_versions
    from jobs.predict import ModelRef, _basis

    job = {"runtime_env": {"working_dir": "gcs://_ray_pkg_1.zip"}}  # what Ray hands a submitted job's driver
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps(job))
    bases = []
    for session, stamp in (("session_a", 1_000_000_000), ("session_b", 1_500_000_000)):
        copy = tmp_path / session / "_ray_pkg_1"
        (copy / "data").mkdir(parents=True)
        (copy / "data" / "in.csv").write_text("text\na\nb\n")
        os.utime(copy / "data" / "in.csv", (stamp, stamp))
        monkeypatch.chdir(copy)
        files = [(str(copy / "data" / "in.csv"), "csv")]
        assert basis_paths(files) == [os.path.join("data", "in.csv")]
        bases.append(_basis(PredictConfig(model="m", input="data/in.csv", output="/out"),
                            ModelRef("m", tmp_path, "classification"), files))
    assert bases[0] == bases[1] and bases[0]["file_versions"][0].startswith("sha256:")
    (copy / "data" / "in.csv").write_text("text\nB\nA\n")  # edited: another version
    assert file_versions(files) != bases[0]["file_versions"]
    outside = tmp_path / "shared.csv"
    outside.write_text("text\nc\n")
    assert basis_paths([(str(outside), "csv")]) == [str(outside)]
    assert not file_versions([(str(outside), "csv")])[0].startswith("sha256:")
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR")  # not a submitted job: as resolved
    assert basis_paths(files) == [files[0][0]]
    from jobs.inference.stages import read_rows  # the rows' `file`: that name too, not the copy's path
    rows = list(read_rows({"index": 0, "path": files[0][0], "fmt": "csv", "name": "data/in.csv"}, "classification",
                          PredictConfig(model="m", input="i", output="o").columns, 100, set(), tmp_path / "out"))
    assert {r["file"] for r in rows} == {"data/in.csv"}
    assert json.loads(next((tmp_path / "out").rglob("_rows.json")).read_text())["file"] == "data/in.csv"


def test_a_shard_a_replica_wrote_where_the_driver_cannot_see_it_fails_the_job(tmp_path):
    """An output folder on the driver's disk alone: replicas on another node write their shards on theirs. The
    driver's own scan saw nothing missing and the job ended complete with 0 rows; the shards the replicas named are
    checked too."""

    shards.write_rows(tmp_path, "00000-000000", {"file": "a.csv", "rows": 2})
    shards.write_part(tmp_path, "00000-000000", part([0, 1]))
    manifest = {"shards": {}}
    with pytest.raises(RuntimeError, match="every node of the cluster mounts"):
        shards.record_complete(tmp_path, manifest, set(shards.scan(tmp_path)) | {"00001-000000"}, final=True)
    manifest = {"shards": {}}
    shards.record_complete(tmp_path, manifest, set(shards.scan(tmp_path)) | {"00000-000000"}, final=True)
    assert list(manifest["shards"]) == ["00000-000000"]


def test_input_files_of_one_name_in_two_folders_are_named_their_default_ids_repeat():
    """`exports/*/data.csv`: rows without an id column are "data.csv:0", ... in both files; the job says so."""
    from jobs.inference.inputs import shared_names

    files = [("/in/a/data.csv", "csv"), ("/in/b/data.csv", "csv"), ("/in/b/other.csv", "csv"),
             ("/in/c/data.jsonl", "jsonl")]
    assert shared_names(files) == ["/in/a/data.csv", "/in/b/data.csv"]
    assert shared_names(files[1:]) == []
