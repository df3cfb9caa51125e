"""A pretraining release folder names the run that wrote it (jobs/runtime/release.py), and nothing else changes: it
loads in transformers, a model's digest and a sweep's basis are what they were, and a folder without the record is a
plain model folder. The walk from such a fine-tune to the corpus: tests/unit/test_lineage.py."""

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace

from jobs.registry import tracking
from jobs.runtime import resubmit
from jobs.runtime.release import RECORD, fetch_release, written_by


def checkpoint(tmp_path: Path, writer: str | None, model: Path | None = None):
    """A pretraining checkpoint as Ray Train hands it over: its record (naming `writer`) and release/ (`model`'s
    files, or a config alone)."""
    import shutil

    folder = tmp_path / "ray" / "checkpoint_000009"
    if model is not None:
        shutil.copytree(model, folder / "release")
    else:
        (folder / "release").mkdir(parents=True)
        (folder / "release" / "config.json").write_text("{}")
    resubmit.record(folder, writer, 9, {})
    return SimpleNamespace(as_directory=lambda: contextlib.nullcontext(str(folder)))


def tokenizer(tmp_path: Path) -> str:
    (tmp_path / "tok").mkdir(exist_ok=True)
    (tmp_path / "tok" / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    return str(tmp_path / "tok")


def test_the_release_names_the_run_that_registers_it_and_the_checkpoints_step(tmp_path):
    """A two-phase job's last checkpoint is phase 2's run's; the release is registered by the parent run, which the
    job names. Without a name, the checkpoint's own record's run; an unrecorded checkpoint's release names none."""
    fetch_release(checkpoint(tmp_path, "phase-2-run"), tmp_path / "release", tokenizer(tmp_path), 128, "parent-run")
    assert json.loads((tmp_path / "release" / RECORD).read_text()) == {"job": "pretrain", "run_id": "parent-run",
                                                                      "step": 9}
    fetch_release(checkpoint(tmp_path / "one", "the-run"), tmp_path / "one-release", tokenizer(tmp_path), 128)
    assert written_by(tmp_path / "one-release") == "the-run"
    fetch_release(checkpoint(tmp_path / "old", None), tmp_path / "old-release", tokenizer(tmp_path), 128)
    assert not (tmp_path / "old-release" / RECORD).exists() and written_by(tmp_path / "old-release") == ""


def test_a_folder_without_a_readable_record_is_a_plain_model_folder(tmp_path):
    """An HF download, a release from before the record, a record cut short or another job's: no run named, and the
    fine-tune's lineage is what it was (lineage.init alone)."""
    folder = tmp_path / "bert-base-uncased"
    folder.mkdir()
    for record in (None, "{cut sh", json.dumps({"job": "finetune", "run_id": "x"}), json.dumps(["x"])):
        if record is not None:
            (folder / RECORD).write_text(record)
        tags = tracking.lineage_tags("finetune", init=str(folder), tracking_uri=f"sqlite:///{tmp_path}/none.db")
        assert {k for k in tags if k.startswith("lineage.")} == {"lineage.job", "lineage.init"}
    assert not (tmp_path / "none.db").exists()  # a folder init opens no store
    assert written_by("s3://bucket/runs/r/release") == ""


def test_the_record_changes_no_digest_and_the_release_loads_in_transformers(tmp_path):
    """The record is none of the files a model's digest covers (a rerun of predict on a release would be refused),
    and a sweep from a release folder keeps the basis it had before releases carried it (resumed, it was refused as
    another sweep)."""
    from transformers import AutoModelForPreTraining, BertConfig, BertForPreTraining

    from jobs.inference.model_ref import model_files
    from jobs.registry.sweep_parent import basis

    tiny = BertConfig(vocab_size=5, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    BertForPreTraining(tiny).save_pretrained(tmp_path / "saved")
    release = tmp_path / "release"
    fetch_release(checkpoint(tmp_path, "pre", tmp_path / "saved"), release, tokenizer(tmp_path), 128, "pre")
    assert AutoModelForPreTraining.from_pretrained(release).config.hidden_size == 8
    assert (release / RECORD).is_file() and RECORD not in [f.name for f in model_files(release)]
    tags = {"lineage.job": "sweep", "lineage.init": str(release)}
    with_record = {**tags, "lineage.init_run_id": "pre", "lineage.pretrain_run_id": "pre"}
    assert basis({"name": "s"}, with_record) == basis({"name": "s"}, tags)
    by_uri = {"lineage.job": "sweep", "lineage.init": "models:/pre/1"}  # an MLflow init's runs stay in its basis
    assert basis({"name": "s"}, {**by_uri, "lineage.init_run_id": "pre"}) != basis({"name": "s"}, by_uri)


def test_the_record_names_its_store_and_a_fine_tune_on_another_store_names_no_run(tmp_path, monkeypatch):
    """The record travels with the folder (copied to another machine, logged into the registered model and
    downloaded): a fine-tune on another MLflow store was tagged with a run that store never held, and lineage, which
    called such a chain complete at the folder, reported a missing link. The record names its store (redacted); the
    run ids are tagged on that store alone (the same file however the URI spells it; the same server whatever its
    user), and as before for a record that names none."""
    fetch_release(checkpoint(tmp_path, "pre"), tmp_path / "release", tokenizer(tmp_path), 128, "pre",
                  "https://user:s3cret@mlflow.example.com")
    assert json.loads((tmp_path / "release" / RECORD).read_text()) == {
        "job": "pretrain", "run_id": "pre", "step": 9, "tracking_uri": "https://***@mlflow.example.com"}
    ids = {"lineage.init_run_id": "pre", "lineage.pretrain_run_id": "pre"}

    def run_ids(store: str) -> dict:
        tags = tracking.lineage_tags("finetune", init=str(tmp_path / "release"), tracking_uri=store)
        return {k: v for k, v in tags.items() if k in ids}

    assert run_ids("https://other:password@mlflow.example.com") == ids == run_ids("https://mlflow.example.com")
    assert run_ids("https://mlflow.other.example.com") == {} and run_ids(f"sqlite:///{tmp_path}/a.db") == {}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    fetch_release(checkpoint(tmp_path / "one", "pre"), tmp_path / "release", tokenizer(tmp_path), 128, "pre",
                  f"sqlite:///{tmp_path}/sub/../a.db")
    assert run_ids("sqlite:///a.db") == ids and run_ids(f"sqlite:///{tmp_path}/b.db") == {}
    record = json.loads((tmp_path / "release" / RECORD).read_text())
    del record["tracking_uri"]  # written before records named their store
    (tmp_path / "release" / RECORD).write_text(json.dumps(record))
    assert run_ids(f"sqlite:///{tmp_path}/b.db") == ids
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "b.db").exists()  # no store opened


def test_one_server_written_two_ways_is_one_store():
    """The cluster's MLFLOW_TRACKING_URI and a config name one server with a trailing slash, another case or the
    scheme's own port: one store, so a fine-tune from the release keeps its pretraining run; another host or port
    is another store."""
    for recorded, ours in [("http://mlflow:5000", "http://mlflow:5000/"), ("http://MLflow:5000/", "http://mlflow:5000"),
                           ("https://m.example.com:443", "https://m.example.com/"),
                           ("http://user:***@mlflow:5000", "http://mlflow:5000")]:
        assert tracking.same_store(recorded, ours), (recorded, ours)
    for recorded, ours in [("http://mlflow:5000", "http://mlflow:5001"), ("http://mlflow:5000", "http://other:5000"),
                           ("http://mlflow:5000/a", "http://mlflow:5000/b")]:
        assert not tracking.same_store(recorded, ours), (recorded, ours)
