"""A prediction input refused past the rows jobs/predict.py's plan checks before Ray (the header again in another
column order at line 52): raised inside a Ray Data read task, it ended the job with Ray Data's two tracebacks (~120
lines) and Ray's retry advice appended to the message. The read task hands it on as a record, through the tokenizing
tasks and a model replica, and the driver says it in one line, exit status 2, as fine-tuning says its own."""

import json

import numpy as np
import pytest
from test_predictor import LABELS, tiny

from bert_core.config import ConfigError
from jobs import predict
from jobs.config.io import cli
from jobs.inference import inputs, shards, stages
from jobs.inference.predictor import Predictor
from pipelines.tasks.files import Columns


def batch_of(records: list[dict]) -> dict:
    """Ray Data's numpy batch of `records` (one array per column)."""
    return {k: np.asarray([r[k] for r in records], dtype=object if k != "position" else np.int64) for k in records[0]}


def test_a_file_refused_mid_read_reaches_the_driver_as_one_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "joined.csv"
    path.write_text("id,text\n" + "".join(f"{i},text number {i}\n" for i in range(50)) + "text,id\nmore,1\n")
    records = list(stages.read_rows({"index": 0, "path": str(path), "fmt": "csv"}, "classification",
                                    Columns(id="id", tokens=""), 20, set(), tmp_path / "out"))
    # the shards read before it (rows 0-39) go on to the model; the rows of the shard it ends are not read
    assert len(records) == 41 and [r["refused"] for r in records[:40]] == [""] * 40
    refusal = records[-1]
    assert (refusal["shard"], refusal["row"]) == ("", "") and "line 52: the header again" in refusal["refused"]

    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=3, id2label=dict(enumerate(LABELS)),
                  label2id={v: i for i, v in enumerate(LABELS)})
    monkeypatch.setattr(stages, "load", lambda model, make, weights=True: make(folder))  # what the object store ships
    monkeypatch.setattr(stages, "ENCODERS", {})
    window = stages.tokenize(batch_of(records[-3:]), {"digest": "d"}, None)  # two rows and the refusal
    assert [bool(e) for e in window["enc"]] == [True, True, False]
    replica = stages.Predict.__new__(stages.Predict)  # what __init__ loads, without the object store
    replica.predictor, replica.output, replica.kill_after, replica.batches = Predictor(folder), tmp_path / "out", 0, 0
    said = replica(window)
    assert list(said["shard"]) == ["00000-000001", ""] and list(said["rows"]) == [2, 0]
    assert stages.refusal(said) == refusal["refused"] and stages.refusal(replica(
        stages.tokenize(batch_of(records[:2]), {"digest": "d"}, None))) == ""

    def main():  # jobs/predict.py's driver, given that summary
        predict._take(said, tmp_path / "out", {"shards": {}})

    capsys.readouterr()  # the tiny model's progress bars
    with pytest.raises(SystemExit) as ended:
        cli(main)
    assert ended.value.code == 2
    assert capsys.readouterr().err == f"error: input: {refusal['refused']}\n" and "\n" not in refusal["refused"]
    assert str(inputs.refused("f.csv: set task.columns.text=body")) == "input: f.csv: set columns.text=body"


def test_a_refused_url_input_is_said_without_its_credentials(tmp_path, monkeypatch):
    """The refusal is a record the manifest and the console show: a URL's user and password are left out, as its
    rejects' samples leave them out."""
    from pipelines.tasks.common import TaskDataError

    def refusing(path, *args, **kwargs):
        raise TaskDataError(f"{path}: the header again in another column order")
        yield

    monkeypatch.setattr("pipelines.tasks.files.read_file", refusing)
    (record,) = stages.read_rows({"index": 0, "path": "https://me:secret@example.com/in.csv", "fmt": "csv"},
                                 "classification", Columns(tokens=""), 20, set(), tmp_path / "out")
    assert json.dumps(record)  # a plain record Ray Data stores as any row
    said = str(inputs.refused(record["refused"]))
    assert "secret" not in said and said.startswith("input: https://***@example.com/in.csv: the header again")


def test_a_url_input_refused_before_ray_is_said_without_its_credentials(tmp_path, monkeypatch):
    """_plan's refusal (the readers name the path as given) and a read task's say a URL alike: without its user and
    password; a local path is said whole (`token=1/` is a partition's folder, no secret)."""
    from pipelines.tasks.common import TaskDataError

    url = "https://me:secret@example.com/in.csv"

    def refusing(given, *args, **kwargs):
        raise TaskDataError(f"{given}, line 52: the header again in another column order")

    monkeypatch.setattr("pipelines.tasks.file_finder.resolve_files", refusing)
    _, cfg = predict.parse(["models:/m@champion", "--input", url, "--output", str(tmp_path / "out")])
    with pytest.raises(ConfigError) as refused:
        predict._plan(cfg, None, tmp_path / "out")
    assert str(refused.value) == ("input: https://***@example.com/in.csv, line 52: the header again in another "
                                  "column order")
    local = "/data/token=1/in;key=2.csv, line 3: the header again"
    assert str(inputs.refused(local)) == f"input: {local}"


def summary(shard: str, rows: int, refused: str = "") -> dict:
    """A model replica's summary of one batch, as Ray Data hands it to the driver (stages.Predict's return)."""
    return {"shard": np.asarray([shard], dtype=object), "rows": np.asarray([rows], dtype=np.int64),
            "truncated": np.asarray([0], dtype=np.int64), "refused": np.asarray([refused], dtype=object)}


def test_the_driver_counts_a_summarys_rows_and_records_the_shards_it_completed(tmp_path):
    import pyarrow as pa

    out, manifest = tmp_path / "out", {"shards": {}}
    shards.write_rows(out, "00000-000000", {"file": "in.csv", "first": 0, "rows": 2})
    shards.write_part(out, "00000-000000", pa.table({"id": ["a", "b"], "position": [0, 1]}))
    assert predict._take(summary("00000-000000", 2), out, manifest) == (2, {"00000-000000"})
    assert list(manifest["shards"]) == ["00000-000000"]
    with pytest.raises(ConfigError, match=r"^input: in\.csv, line 9: the header again$"):
        predict._take(summary("", 0, "in.csv, line 9: the header again"), out, manifest)
