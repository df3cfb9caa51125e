"""What a promotion refuses in one line before anything is scored: a version that is not there, a champion chosen on
another main metric than the candidate, and registered data that cannot be read here. Real MLflow (SQLite); the
scoring is replaced (promote_kit.promoting) and your own files' rows are never read (no Ray)."""

import json
import shutil
from dataclasses import asdict

import pytest

from jobs import promote
from jobs.config.finetune import TaskConfig
from jobs.loops import ft_tasks
from tests.unit.promote_kit import NAME, judge, promoting, toy_registry


class RowsRead(Exception):
    """Raised by the stand-in for ft_tasks.load_rows: the judgement got past every refusal to reading the rows."""


def files_registry(tmp_path, empty_store, monkeypatch, *tasks: dict):
    """NAME with one version per task config of your own files (`tasks`: TaskConfig fields over a classification of
    files), v1 champion; rows and scores replaced."""
    from mlflow.tracking import MlflowClient

    from jobs.registry.versions import move_alias

    shutil.copy(empty_store, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    client.create_registered_model(NAME)
    run_id = client.create_run(client.create_experiment("toy")).info.run_id
    base = asdict(TaskConfig(name="files", kind="classification", train_file=str(tmp_path / "train.csv"),
                             labels=["common", "rare"]))
    for fields in tasks:
        task = {k: v for k, v in {**base, **fields}.items() if v is not None}  # None: a field the version lacks
        client.create_model_version(NAME, str(tmp_path), run_id, tags={"task_config": json.dumps(task)})
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    monkeypatch.setattr("jobs.runtime.cluster.init_ray", lambda: None)

    def rows_read(task, tokenizer_dir=None):
        raise RowsRead(task.metric)

    monkeypatch.setattr(ft_tasks, "load_rows", rows_read)
    return uri


def _gone(task, tokenizer_dir=None):
    """ft_tasks.load_rows where the files the task names are gone."""
    raise FileNotFoundError(f"no such file: {task.train_file}")

def test_a_champion_chosen_on_another_metric_is_not_judged_on_the_candidates(tmp_path, empty_store, monkeypatch):
    """v1 was fine-tuned (its checkpoint, trial and seed chosen) on macro F1, v2 on accuracy: judged on v2's metric,
    v2 was crowned while worse on the one v1 was chosen for. Refused naming both and the override; with task.metric
    given, both are judged on it. A version registered before task configs recorded a metric is judged on its kind's
    default (accuracy here), as its fine-tune chose on it."""
    uri = files_registry(tmp_path, empty_store, monkeypatch, {"metric": "macro_f1"}, {"metric": "accuracy"},
                         {"metric": None}, {"metric": ""})
    with pytest.raises(ValueError) as refused:
        judge(uri, tmp_path / "art", version=2)
    assert str(refused.value) == (
        "v1 (champion) was chosen on macro_f1, v2 on accuracy: judged on either one's metric, the other would be "
        "judged by a rule it was not made for; pass task.metric=macro_f1 or task.metric=accuracy to judge both on it")
    for metric in ("accuracy", "macro_f1"):
        with pytest.raises(RowsRead, match=f"^{metric}$"):  # past the refusal, to the rows
            judge(uri, tmp_path / "art", version=2, task={"metric": metric})
    from mlflow.tracking import MlflowClient

    from jobs.registry.versions import move_alias

    move_alias(MlflowClient(uri), NAME, "champion", "3", "promoted: a version that recorded no metric")
    with pytest.raises(RowsRead):  # "" and none recorded: the kind's default, both
        judge(uri, tmp_path / "art", version=4)
    with pytest.raises(ValueError, match=r"v3 \(champion\) was chosen on accuracy, v1 on macro_f1"):
        judge(uri, tmp_path / "art", version=1)


def test_a_version_that_does_not_exist_is_one_line(tmp_path, empty_store, capsys):
    """`promote NAME --version 9` of a model with one version (mistyped, or deleted in the registry's UI) ended in
    MLflow's traceback."""
    uri, _ = toy_registry(tmp_path, empty_store, 1)
    with pytest.raises(ValueError, match=r"^sst-toy has no version 9 \(deleted, or never registered\)"):
        judge(uri, tmp_path / "art", version=9)
    with pytest.raises(SystemExit) as ended:
        promote.main([NAME, "--version", "9", f"tracking.tracking_uri={uri}",
                      f"tracking.artifact_location={tmp_path / 'art'}"])
    assert str(ended.value).startswith("error: sst-toy has no version 9")


def test_registered_data_that_is_gone_names_the_override(tmp_path, empty_store, monkeypatch):
    """The candidate's registered rows moved (or were registered on another machine): a FileNotFoundError traceback.
    One line naming the field that says where they are now: a GLUE task's folder, your own files' paths."""
    uri, client = toy_registry(tmp_path, empty_store, 1)
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    shutil.move(tmp_path / "SST-2", tmp_path / "moved")
    with pytest.raises(ValueError) as refused:
        judge(uri, tmp_path / "art", version=1)
    said = str(refused.value)
    assert said.startswith("the data v1 was registered with cannot be read here (FileNotFoundError: GLUE sst2 ")
    assert said.endswith("): moved, or on another machine? name where it is now: task.data_dir=FOLDER")
    # the override the line names works: the rows found there are those the version recorded training on
    task = ft_tasks.task_config({**json.loads(client.get_model_version(NAME, "1").tags["task_config"]),
                                 "data_dir": str(tmp_path / "moved")})
    for split, summary in ft_tasks.load_rows(task).summary().items():
        client.set_model_version_tag(NAME, "1", f"data.{split}.sha256", summary["sha256"])
    assert judge(uri, tmp_path / "art", version=1, task={"data_dir": str(tmp_path / "moved")}).decision == "promoted"

    (tmp_path / "files").mkdir()
    files = files_registry(tmp_path / "files", empty_store, monkeypatch, {}, {"dev_file": "/data/dev.csv"})
    monkeypatch.setattr(ft_tasks, "load_rows", _gone)
    with pytest.raises(ValueError, match=r"\(FileNotFoundError: no such file: .*/files/train.csv\): moved, or on "
                                         r"another machine\? name where it is now: task.train_file=FILE "
                                         r"task.dev_file=FILE$"):
        judge(files, tmp_path / "art", version=2)


def test_data_the_user_named_that_cannot_be_read_is_named_not_the_registration(tmp_path, empty_store, monkeypatch):
    """With task.data_dir (or task.train_file) given and wrong too, the line blamed the data the version was
    registered with and asked for the very override just given. It names the path given; a file still the
    registration's is said to be so."""
    uri, _ = toy_registry(tmp_path, empty_store, 1)
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    with pytest.raises(ValueError) as refused:
        judge(uri, tmp_path / "art", version=1, task={"data_dir": str(tmp_path / "nowhere")})
    said = str(refused.value)
    assert said.startswith(f"the data named by task.data_dir={tmp_path / 'nowhere'} cannot be read (FileNotFoundError: "
                           "GLUE sst2 ") and "registered" not in said and said.endswith(")")

    (tmp_path / "files").mkdir()
    files = files_registry(tmp_path / "files", empty_store, monkeypatch, {}, {"dev_file": "/data/dev.csv"})
    monkeypatch.setattr(ft_tasks, "load_rows", _gone)
    with pytest.raises(ValueError, match=r"^the data named by task.train_file=/new/train.csv, the rest as v2 was "
                                         r"registered with, cannot be read \(FileNotFoundError: no such file: "
                                         r"/new/train.csv\): name where each is: task.train_file=FILE "
                                         r"task.dev_file=FILE$"):
        judge(files, tmp_path / "art", version=2, task={"train_file": "/new/train.csv"})
