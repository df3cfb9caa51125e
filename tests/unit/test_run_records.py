"""What a run records about where it came from: the code's commit only from a checkout of this project, and its data
as a record of MLflow's dataset view that names where the rows were read. Real SQLite stores and git repos."""

import importlib.util
import json
import shutil
import subprocess

import pytest

from jobs.registry import tracking


@pytest.mark.parametrize("installed_in", [".venv/lib/python3.12/site-packages", ""])
def test_code_installed_inside_the_users_own_repo_is_tagged_with_no_commit_of_it(tmp_path, installed_in):
    """git -C <the installed jobs/> walked up to any repo around it: a package installed into a venv inside the
    user's project tagged every run, and registered version, with the user's commit as ours. The repo must track the
    code and this project's pyproject.toml beside jobs/ (here the venv's copy is even committed, and site-packages
    holds none; or the copy sits at the user's root, untracked)."""
    user = tmp_path / "user"
    user.mkdir()

    def git(*args):
        subprocess.run(["git", "-C", str(user), "-c", "user.email=u@example.com", "-c", "user.name=u", *args],
                       check=True, capture_output=True)

    git("init", "-q")
    installed = user / installed_in / "jobs" / "registry" / "tracking.py"
    installed.parent.mkdir(parents=True)
    shutil.copy(tracking.__file__, installed)
    (user / "app.py").write_text("x = 1\n")
    git("add", "app.py", *([str(installed)] if installed_in else []))
    git("commit", "-qm", "the user's own project")
    spec = importlib.util.spec_from_file_location("installed_tracking", installed)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tags = module.code_version()
    assert "code.git_commit" not in tags and "code.git_dirty" not in tags


def test_this_project_committed_inside_a_larger_repo_is_tagged_with_its_commit(tmp_path):
    """A monorepo holding the project (mono/ml/bert-foundry/): its commit pins our code, and was tagged until the
    guard above asked the repo's root to be ours."""
    mono = tmp_path / "mono"
    project = mono / "ml" / "bert-foundry"
    (project / "jobs" / "registry").mkdir(parents=True)
    shutil.copy(tracking.__file__, project / "jobs" / "registry" / "tracking.py")
    (project / "pyproject.toml").write_text("[project]\nname = 'bert-foundry'\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "the monorepo"]):
        subprocess.run(["git", "-C", str(mono), "-c", "user.email=u@example.com", "-c", "user.name=u", *args],
                       check=True, capture_output=True)
    (mono / "notebook.ipynb").write_text("{}")  # another folder's work in progress: not our code's
    head = subprocess.run(["git", "-C", str(mono), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    spec = importlib.util.spec_from_file_location("mono_tracking", project / "jobs" / "registry" / "tracking.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (module.code_version()["code.git_commit"], module.code_version()["code.git_dirty"]) == (head, "false")


def test_the_same_rows_read_from_another_place_are_another_dataset(tmp_path):
    """MLflow keeps one dataset record per (experiment, name, digest): the same rows read later from a bucket showed,
    on the second run, the first run's laptop path as their source. The lineage tags stay as they were."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    digest = "ab" * 32  # jobs.loops.ft_tasks.rows_digest of the same rows
    laptop, bucket = str(tmp_path / "laptop" / "reviews.csv"), "s3://team-bucket/reviews.csv"
    inputs = []
    for source in (laptop, bucket):
        run_id = tracking.start_run(uri, "moved", str(tmp_path / "art"), "ft", {"a": 1}, tags={
            "task": "files", "lineage.task_source": source, "lineage.task_data_sha256": digest})
        run = client.get_run(run_id)
        assert (run.data.tags["lineage.task_source"], run.data.tags["lineage.task_data_sha256"]) == (source, digest)
        inputs += [d.dataset for d in run.inputs.dataset_inputs]
    sources = [json.loads(dataset.source)["uri"] for dataset in inputs]
    assert sources == [(tmp_path / "laptop" / "reviews.csv").as_uri(), bucket]
    assert [dataset.digest for dataset in inputs] == [tracking.dataset_digest(s, digest) for s in sources]
