"""Named evaluation rows (a GLUE task.data_dir, a task.dev_file) are checked against the rows each judged version was
fine-tuned on: its REGISTERED task's train and select rows, not the named folder's train.tsv (jobs/registry/evidence.py
refuse_seen_rows). Real MLflow (SQLite) and a toy SST-2 registry; the scoring is replaced (promote_kit.promoting)."""

import json
import shutil
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from jobs import promote
from jobs.config.finetune import TaskConfig
from jobs.loops import ft_tasks
from jobs.promote import PromoteConfig
from jobs.registry.evidence import refuse_seen_rows
from jobs.registry.versions import move_alias
from pipelines.tasks.roles import TaskRows, split_digest
from tests.unit.promote_kit import NAME, judge, promoting, sentences, toy_registry


def tsv(folder, **splits) -> str:
    folder.mkdir(exist_ok=True)
    for split, rows in splits.items():
        (folder / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    return str(folder)


def registered_task(client, version: str) -> dict:
    return json.loads(client.get_model_version(NAME, version).tags["task_config"])


def test_named_evaluation_rows_that_are_training_rows_are_refused(tmp_path):
    """Rows named for a promotion that are also rows of the registered task's training file: the loader takes them
    out of train as leaks and keeps them for evaluation, right for a fine-tune that has not trained yet; both models
    here already trained on them, so they would be judged on rows they fitted."""
    data = tmp_path / "SST-2"
    data.mkdir()
    train = [f"a sentence of the training file number {i}\t{i % 2}\n" for i in range(60)]
    new = [f"a held-out sentence number {i}\t{i % 2}\n" for i in range(10)]
    (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(train))
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(new + train[:3]))
    task = TaskConfig(name="sst2", data_dir=str(data), labels=["0", "1"])
    loaded = ft_tasks.load_rows(task)
    rows = loaded.evaluation["dev"]
    assert len(rows) == 13 and loaded.dropped["train_in_evaluation"] == 3
    named = PromoteConfig(model=NAME, task={"data_dir": str(data)}).validate()
    config = json.dumps(asdict(task))
    other = SimpleNamespace(version="2", tags={"data.dev.sha256": "0" * 64, "task_config": config})  # others
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with 3 train rows v2 was "
                                         r"fine-tuned on \('\S+SST-2': its registered training data\): it trained"):
        refuse_seen_rows(named, task, "dev", loaded, (other, None))
    refuse_seen_rows(PromoteConfig(model=NAME).validate(), task, "dev", loaded, (other, None))  # carved
    # the rows both versions were evaluated on: their fine-tunes' loaders took the 3 out of train as this one does
    these = SimpleNamespace(version="1", tags={"data.dev.sha256": split_digest(rows), "task_config": config})
    refuse_seen_rows(named, task, "dev", loaded, (these, these))
    with pytest.raises(ValueError, match=r"^the named evaluation rows share .* v2 \(champion\) was fine-tuned on"):
        refuse_seen_rows(named, task, "dev", loaded, (these, other))
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(new))
    refuse_seen_rows(named, task, "dev", ft_tasks.load_rows(task), (other, other))  # new rows: judged


def test_select_rows_alone_seen_are_refused():
    """No named row is a train row, two are select rows (the rows that chose the checkpoint): refused, naming
    them; a select row whose input is in train is no evaluation row and is not named."""
    task = TaskConfig(name="files", kind="classification", labels=["a", "b"], train_file="train.csv")
    rows = [{"text_a": "x", "label": 0, "row_index": 0}]
    loaded = TaskRows([], [], {"dev": rows},
                      dropped={"train_in_evaluation": 0, "select_in_evaluation": 2, "select_in_train": 5})
    version = SimpleNamespace(version="4", tags={"task_config": json.dumps(asdict(task))})
    named = PromoteConfig(model=NAME, task={"dev_file": "heldout.csv"}).validate()
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with 2 select rows v4 was "
                                         r"fine-tuned on \('train.csv': its registered training data\)"):
        refuse_seen_rows(named, task, "dev", loaded, (version, None))


def test_a_held_out_folder_is_checked_against_the_registered_training_rows(tmp_path, empty_store, monkeypatch):
    """`task.data_dir=HELD-OUT`: its train.tsv is no model's training data (here a placeholder), its dev.tsv holds 8
    rows both versions trained on. Checked against that train.tsv, the rows passed and the candidate was promoted on
    rows it fitted; checked against each version's registered training rows, refused. Rows none trained on: judged."""
    uri, client = toy_registry(tmp_path, empty_store, 2)
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    placeholder = sentences(20, 99)
    seen = tsv(tmp_path / "SST-2-heldout", train=placeholder, dev=sentences(20, 0)[:8] + sentences(10, 77))
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with \d+ train rows (and "
                                         r"\d select rows? )?v2 was fine-tuned on \('\S+/SST-2': its registered"):
        judge(uri, tmp_path / "art", version=2, task={"data_dir": seen})
    clean = tsv(tmp_path / "SST-2-new", train=placeholder, dev=sentences(10, 77))
    assert judge(uri, tmp_path / "art", version=2, task={"data_dir": clean}).decision == "promoted"


def test_named_rows_only_the_champion_trained_on_are_refused(tmp_path, empty_store, monkeypatch):
    """The champion was fine-tuned on other files than the candidate (the data updated between versions); the named
    rows hold 3 of the champion's training rows, none of the candidate's: judged on them, the champion is scored on
    rows it fitted (its score inflated, a better candidate kept). Refused, naming the champion and its files."""
    uri, client = toy_registry(tmp_path, empty_store, 2)
    theirs = sentences(20, 5)
    older = tsv(tmp_path / "SST-2-v1", train=theirs, dev=sentences(20, 1))
    client.set_model_version_tag(NAME, "1", "task_config", json.dumps({**registered_task(client, "1"),
                                                                        "data_dir": older}))
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    named = tsv(tmp_path / "SST-2-heldout", train=sentences(20, 99), dev=theirs[:3] + sentences(10, 77))
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with 2 train rows and 1 "
                                         r"select row v1 \(champion\) was fine-tuned on \('\S+/SST-2-v1'"):
        judge(uri, tmp_path / "art", version=2, task={"data_dir": named})
    assert client.get_model_version(NAME, "2").tags.get("promotion.decision") is None  # refused before any record


def test_training_rows_that_cannot_be_read_as_registered_are_refused_unless_moved_unchanged(tmp_path, empty_store,
                                                                                           monkeypatch):
    """A version whose registered training files are gone, or hold other rows than its recorded digests: nothing
    shows the named rows are not rows it trained on, so the named rows are refused, saying why. Files moved and
    named again unchanged (the train and select rows left beside the named rows are its recorded ones): judged."""
    uri, client = toy_registry(tmp_path, empty_store, 1)
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    task = registered_task(client, "1")
    then = ft_tasks.load_rows(ft_tasks.task_config(task)).summary()
    client.set_model_version_tag(NAME, "1", "data.train.sha256", "0" * 64)  # the files edited since
    heldout = tsv(tmp_path / "SST-2-heldout", train=sentences(20, 99), dev=sentences(10, 77))
    with pytest.raises(ValueError, match=r"^the named evaluation rows cannot be checked against the rows v1 was "
                                         r"fine-tuned on: its registered training data \('\S+/SST-2'\) holds other "
                                         r"train rows now than it was fine-tuned on \(sha256 \w{12} now, 000000000000"):
        judge(uri, tmp_path / "art", version=1, task={"data_dir": heldout})
    for split in ("train", "select"):
        client.set_model_version_tag(NAME, "1", f"data.{split}.sha256", then[split]["sha256"])
    moved = tmp_path / "moved"
    shutil.move(task["data_dir"], moved)  # its folder elsewhere now; named again with other evaluation rows
    with pytest.raises(ValueError, match=r"v1 was fine-tuned on: its registered training data \('\S+/SST-2'\) "
                                         r"cannot be read \(.*; put those files back as they were registered, or "
                                         r"judge on the rows it was registered with \(no task.data_dir=...\)"):
        judge(uri, tmp_path / "art", version=1, task={"data_dir": heldout})
    (moved / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in sentences(10, 77)))
    assert judge(uri, tmp_path / "art", version=1, task={"data_dir": str(moved)}).decision == "promoted"
