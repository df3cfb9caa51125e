"""jobs/lineage.py on a small chain written with real MlflowClient calls to a SQLite store: a pretraining run
tagged as jobs/pretrain.py tags it (its prepared set's manifest listing two raw files), a fine-tune run tagged
as jobs/finetune.py tags one started from the registered pretrained model, and a registered fine-tuned version."""

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import lineage
from pipelines.layout import fingerprint_inputs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def chain(tmp_path, empty_store):
    from mlflow.tracking import MlflowClient

    shutil.copy(empty_store, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    exp = client.create_experiment("lineage", artifact_location=(tmp_path / "art").as_uri())
    corpus = [tmp_path / "corpus" / "a.txt", tmp_path / "corpus" / "b.txt"]
    corpus[0].parent.mkdir()
    for i, f in enumerate(corpus):
        f.write_text(f"raw text {i}\n" * 10)
    data = tmp_path / "prepared" / "0123abcd"
    data.mkdir(parents=True)
    (data / "manifest.json").write_text(json.dumps({"inputs": {"files": fingerprint_inputs([str(f) for f in corpus])}}))
    from bert_core.tokenizer import save_tokenizer, tokenizer_hash, train_wordpiece

    save_tokenizer(train_wordpiece(["raw text"] * 10, vocab_size=100, min_frequency=1), data / "tokenizer")
    manifest_sha = hashlib.sha256((data / "manifest.json").read_bytes()).hexdigest()
    pre = client.create_run(exp, run_name="pre", tags={
        "lineage.job": "pretrain", "data_dir": str(data), "lineage.data_dir": str(data), "lineage.data_name": data.name,
        "lineage.data_manifest_sha256": manifest_sha, "lineage.tokenizer_sha256": tokenizer_hash(data / "tokenizer"),
        "code.version": "0.1.0", "code.git_commit": "abc123", "code.git_dirty": "false"}).info.run_id
    ft = client.create_run(exp, run_name="ft", tags={
        "lineage.job": "finetune", "task": "pkgdocs", "lineage.init": "models:/pre@candidate",
        "lineage.init_run_id": pre, "lineage.pretrain_run_id": pre, "code.git_commit": "abc123"}).info.run_id
    _register(client, "ft-model", ft)
    return client, uri, pre, ft, corpus


def _register(client, name: str, run_id: str) -> None:
    client.create_registered_model(name)
    source = f"{client.get_run(run_id).info.artifact_uri}/model"
    version = client.create_model_version(name, source, run_id=run_id, tags={"task": "text-classification"})
    client.set_registered_model_alias(name, "candidate", version.version)


def test_full_chain_reaches_the_raw_corpus_hashes(chain, capsys):
    _, uri, pre, ft, corpus = chain
    result = lineage.main(["models:/ft-model@candidate", "--tracking-uri", uri])
    assert result.missing == []
    kinds = [link.kind for link in result.links]
    assert kinds == ["model version", "fine-tune run", "init", "pretraining run", "prepared data", "tokenizer",
                     "corpus file", "corpus file"]
    out = capsys.readouterr().out
    assert pre in out and ft in out and "code.git_commit = abc123" in out
    for f in corpus:
        assert f"{f}" in out and hashlib.sha256(f.read_bytes()).hexdigest() in out
    assert "missing link" not in out and "complete: reaches the raw corpus files" in out


@pytest.mark.slow  # the lineage job as a subprocess (~5 s): `make test`, not `make test-fast`
def test_a_vanished_corpus_file_is_a_missing_link_and_exits_1(chain):
    _, uri, _, _, corpus = chain
    corpus[1].unlink()
    result = lineage.run("models:/ft-model/1", uri)
    assert result.missing == [f"corpus file {corpus[1]} (vanished: FileNotFoundError)"]
    proc = subprocess.run([sys.executable, str(REPO / "jobs/lineage.py"), "models:/ft-model@candidate",
                           "--tracking-uri", uri], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    assert f"warning: corpus file {corpus[1]} vanished" in proc.stdout
    assert f"missing link: corpus file {corpus[1]}" in proc.stdout


def test_a_prepared_set_without_its_tokenizer_is_a_missing_link(chain):
    """The tokenizer's hash could not be checked: the chain is not complete (it was reported so)."""
    client, uri, pre, _, _ = chain
    tokenizer = Path(client.get_run(pre).data.tags["data_dir"]) / "tokenizer"
    shutil.rmtree(tokenizer)
    (missing,) = lineage.run("models:/ft-model/1", uri).missing
    assert missing.startswith(f"tokenizer {tokenizer} (not found (the run's tag says sha256 ")


def test_a_changed_corpus_file_is_a_missing_link(chain):
    _, uri, _, _, corpus = chain
    corpus[0].write_text("edited after preparation\n")
    (missing,) = lineage.run("models:/ft-model@candidate", uri).missing
    assert missing.startswith(f"corpus file {corpus[0]} (changed since preparation: bytes now")


def test_a_deleted_pretraining_run_is_named(chain):
    client, uri, pre, _, _ = chain
    client.delete_run(pre)
    result = lineage.run("models:/ft-model@candidate", uri)
    (missing,) = result.missing
    assert missing.startswith(f"pretraining run {pre} (") and "was deleted" in missing
    assert "corpus file" not in [link.kind for link in result.links]


def test_a_manifest_that_differs_from_its_tag_is_a_missing_link(chain):
    client, uri, pre, _, _ = chain
    client.set_tag(pre, "lineage.data_manifest_sha256", "0" * 64)
    (missing,) = lineage.run(f"runs:/{pre}", uri).missing
    assert missing.startswith("prepared data ") and "the run's tag says 000" in missing


def test_a_fine_tune_from_a_plain_folder_ends_there_complete(chain, capsys):
    client, uri, _, _, _ = chain
    run_id = client.create_run(client.get_experiment_by_name("lineage").experiment_id, tags={
        "lineage.job": "finetune", "lineage.init": "/models/all-MiniLM-L6-v2"}).info.run_id
    _register(client, "minilm-ft", run_id)
    result = lineage.main(["models:/minilm-ft@candidate", "--tracking-uri", uri])
    assert result.missing == [] and result.links[-1].kind == "init"
    assert "no MLflow pretraining run behind it" in capsys.readouterr().out


def test_a_fine_tune_with_no_lineage_tags_is_a_missing_link(chain):
    client, uri, _, _, _ = chain
    run_id = client.create_run(client.get_experiment_by_name("lineage").experiment_id).info.run_id
    (missing,) = lineage.run(f"runs:/{run_id}/model", uri).missing
    assert "lineage.init / lineage.pretrain_run_id" in missing


def test_an_unknown_alias_and_a_bad_uri(chain):
    _, uri, _, _, _ = chain
    (missing,) = lineage.run("models:/ft-model@champion", uri).missing
    assert missing.startswith("model version models:/ft-model@champion (not in the registry")
    with pytest.raises(SystemExit):
        lineage.main(["/some/folder", "--tracking-uri", uri])


def test_a_sweep_trial_takes_its_lineage_from_the_sweep(chain):
    """The quickstart's registered version: logged by a seed trial nested under the sweep's parent run, which
    (like the version) carries lineage.pretrain_run_id; the trial itself has no lineage tags."""
    client, uri, pre, _, _ = chain
    exp = client.get_experiment_by_name("lineage").experiment_id
    parent = client.create_run(exp, tags={"sweep": "sw", "phase": "parent", "lineage.job": "sweep",
                                          "lineage.init": "/runs/qs/release", "lineage.pretrain_run_id": pre})
    trial = client.create_run(exp, tags={"mlflow.parentRunId": parent.info.run_id, "sweep": "sw", "trial_id": "t1"})
    _register(client, "swept", trial.info.run_id)
    result = lineage.run("models:/swept@candidate", uri)
    assert result.missing == []
    assert [link.kind for link in result.links][1:5] == ["sweep trial run", "sweep", "init", "pretraining run"]
    client.delete_run(parent.info.run_id)
    (missing,) = lineage.run("models:/swept@candidate", uri).missing
    assert missing.startswith(f"sweep {parent.info.run_id} (tag mlflow.parentRunId of run {trial.info.run_id}")


def test_a_fine_tune_of_a_deleted_fine_tune_is_a_missing_link(chain):
    """A model fine-tuned from the fine-tune `ft` (lineage.init_run_id ft, lineage.pretrain_run_id pre): the run in
    between is walked whole (its data and code, its own start), so its deletion is named, not a chain reported
    complete around it. Described alone, a third generation's chain named the second and skipped the first."""
    client, uri, pre, ft, _ = chain
    exp = client.get_experiment_by_name("lineage").experiment_id
    second = client.create_run(exp, tags={"lineage.job": "finetune", "lineage.init": "models:/ft-model/1",
                                          "lineage.init_run_id": ft, "lineage.pretrain_run_id": pre}).info.run_id
    _register(client, "ft-of-ft", second)
    result = lineage.run("models:/ft-of-ft/latest", uri)  # latest, as every job reads a registered model
    kinds = [(link.kind, link.name) for link in result.links]
    assert result.missing == [] and kinds.index(("fine-tune run", ft)) < kinds.index(("pretraining run", pre))
    assert lineage.run("models:/ft-of-ft", uri).missing == []
    third = client.create_run(exp, tags={"lineage.job": "finetune", "lineage.init": "models:/ft-of-ft/1",
                                         "lineage.init_run_id": second, "lineage.pretrain_run_id": pre}).info.run_id
    _register(client, "third", third)
    walked = [link.name for link in lineage.run("models:/third/1", uri).links if link.kind == "fine-tune run"]
    assert walked == [third, second, ft]  # every generation, the first too
    client.delete_run(ft)
    (missing,) = lineage.run("models:/ft-of-ft/1", uri).missing
    assert missing.startswith(f"run {ft} (lineage.init_run_id of run {second}") and "was deleted" in missing


def test_a_two_phase_pretrainings_phase_2_set_is_checked_too(chain):
    """The release's weights last trained on phase 2's prepared set: the lineage checks its manifest as well, and a
    changed one is a missing link."""
    client, uri, pre, _, _ = chain
    data = Path(client.get_run(pre).data.tags["lineage.data_dir"]).parent / "4567ef01"
    data.mkdir()
    (data / "manifest.json").write_text(json.dumps({"inputs": {"files": []}, "max_seq_len": 512}))
    sha = hashlib.sha256((data / "manifest.json").read_bytes()).hexdigest()
    client.set_tag(pre, "lineage.phase2.data_dir", str(data))
    client.set_tag(pre, "lineage.phase2.data_manifest_sha256", sha)
    result = lineage.main(["models:/ft-model@candidate", "--tracking-uri", uri])
    assert result.missing == [] and [link.kind for link in result.links][4:6] == ["prepared data",
                                                                                  "phase-2 prepared data"]
    (data / "manifest.json").write_text(json.dumps({"inputs": {"files": []}, "max_seq_len": 384}))
    (missing,) = lineage.run("models:/ft-model@candidate", uri).missing
    assert missing.startswith(f"phase-2 prepared data {data / 'manifest.json'} (sha256 ")


def test_the_quickstarts_champion_check_counts_classes_and_leaves_other_kinds_alone(capsys):
    """--sweep-config takes any sweep: its last step read every task as single-sentence classes, and a regression
    task crashed on its float labels after the whole pretraining, sweep and promotion. Other kinds are left to
    jobs/predict.py, said once."""
    from types import SimpleNamespace

    from jobs.config.finetune import TaskConfig
    from jobs.quickstart import predict_champion

    for task in (TaskConfig(name="files", kind="regression"), TaskConfig(name="stsb")):  # STS-B: GLUE's scores
        sweep = SimpleNamespace(finetune=SimpleNamespace(task=task, tracking=None))
        assert predict_champion(sweep, None) is None
        assert "a regression task's champion predicts with jobs/predict.py" in capsys.readouterr().out


def test_a_store_that_does_not_answer_is_said_so_not_read_as_missing_runs(chain, monkeypatch):
    """A tracking server down (or refusing with 403) made every run 'MISSING ... does not exist' and exit 1, read as
    deleted runs. Only MLflow's 'no such run' is a missing link."""
    import socket

    from bert_core.config import ConfigError

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match="tracking"):
        lineage.main(["runs:/0123456789abcdef", "--tracking-uri", f"http://127.0.0.1:{port}"])
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # the store going down mid-walk
    with pytest.raises(Exception, match="127.0.0.1") as gone:
        lineage.run("runs:/0123456789abcdef", f"http://127.0.0.1:{port}")
    assert "does not exist" not in str(gone.value)
    _, uri, _, _, _ = chain
    for run_id in ("0123456789abcdef", "not a run id"):  # unknown, and malformed (INVALID_PARAMETER_VALUE)
        (missing,) = lineage.run(f"runs:/{run_id}", uri).missing
        assert "does not exist" in missing  # a run the store does not know is still a missing link


def test_a_logged_models_uri_walks_from_the_run_that_logged_it(chain):
    """MLflow 3's models:/m-<id>: its lineage is its logging run's; one that names no run, or no such model, is a
    missing link (a traceback, or "give models:/NAME..." for the URI as given, before)."""
    client, uri, pre, ft, _ = chain
    exp = client.get_run(ft).info.experiment_id
    logged = client.create_logged_model(exp, name="model", source_run_id=ft)
    result = lineage.run(f"models:/{logged.model_id}", uri)
    assert not result.missing and pre in {link.name for link in result.links}
    orphan = client.create_logged_model(exp, name="model")
    assert lineage.run(f"models:/{orphan.model_id}", uri).missing == [
        f"logged model models:/{orphan.model_id} (the logged model names no run)"]
    (missing,) = lineage.run("models:/m-" + "0" * 32, uri).missing
    assert missing.startswith("logged model models:/m-000") and "(not in the store: " in missing


def _pretraining_tags(root: Path, name: str, text: str) -> dict:
    """A prepared set in root/prepared/name whose manifest lists one raw file, as a pretraining run's lineage tags."""
    from bert_core.tokenizer import save_tokenizer, tokenizer_hash, train_wordpiece

    raw = root / "corpus" / f"{name}.txt"
    raw.write_text(text * 10)
    data = root / "prepared" / name
    data.mkdir(parents=True)
    (data / "manifest.json").write_text(json.dumps({"inputs": {"files": fingerprint_inputs([str(raw)])}}))
    save_tokenizer(train_wordpiece(["raw text"] * 10, vocab_size=100, min_frequency=1), data / "tokenizer")
    return {"lineage.job": "pretrain", "lineage.data_dir": str(data), "lineage.data_name": name,
            "lineage.data_manifest_sha256": hashlib.sha256((data / "manifest.json").read_bytes()).hexdigest(),
            "lineage.tokenizer_sha256": tokenizer_hash(data / "tokenizer")}


def test_a_continued_pretraining_reaches_the_corpus_of_the_run_it_started_from(chain, capsys):
    """train.init_checkpoint=<run pre's checkpoint>, then pretraining on a domain corpus: the weights learned both
    corpora. The chain said "complete" naming the domain corpus alone; it goes on to `pre` and its files, and a
    checkpoint no run is recorded as writing (from outside the store) leaves it incomplete, named."""
    from jobs.runtime import resubmit

    client, uri, pre, _, corpus = chain
    root = corpus[0].parent.parent
    exp = client.get_experiment_by_name("lineage").experiment_id
    checkpoint = root / "runs" / "pre" / "checkpoint_000010"
    tags = {**_pretraining_tags(root, "domain", "domain text\n"), "lineage.init_checkpoint": str(checkpoint),
            "lineage.init_checkpoint_run_id": pre}
    _register(client, "continued", client.create_run(exp, run_name="domain", tags=tags).info.run_id)
    result = lineage.main(["models:/continued@candidate", "--tracking-uri", uri])
    assert result.missing == []
    kinds = [link.kind for link in result.links]
    assert kinds[kinds.index("init checkpoint") + 1] == "pretraining run" and kinds.count("pretraining run") == 2
    files = {link.name for link in result.links if link.kind == "corpus file"}
    assert files == {str(root / "corpus" / "domain.txt"), *map(str, corpus)}
    assert f"run {pre} wrote it" in capsys.readouterr().out

    outside = {k: v for k, v in tags.items() if k != "lineage.init_checkpoint_run_id"}
    _register(client, "outside", client.create_run(exp, tags=outside).info.run_id)
    (missing,) = lineage.run("models:/outside@candidate", uri).missing
    assert missing.startswith(f"init checkpoint {checkpoint} (") and "no run is recorded as writing it" in missing

    # a run from before lineage.init_checkpoint: its param, and the record its checkpoint keeps, are followed
    checkpoint.mkdir(parents=True)
    resubmit.record(checkpoint, pre, 10, {})
    before = client.create_run(exp, tags=_pretraining_tags(root, "older", "older text\n")).info.run_id
    client.log_param(before, "train.init_checkpoint", str(checkpoint))
    result = lineage.run(f"runs:/{before}", uri)
    assert result.missing == [] and pre in {link.name for link in result.links}


def test_a_resubmitted_runs_earlier_runs_are_links_with_their_own_code(chain, capsys):
    """A resubmitted pretraining run (continued_from, jobs/runtime/resubmit.py) names only its own commit though the
    earlier run trained the first steps: each earlier run is a link, with its code, and must exist; a two-phase job's
    phases are the runs resubmitted."""
    client, uri, pre, _, _ = chain
    exp = client.get_experiment_by_name("lineage").experiment_id
    resumed = {**{k: v for k, v in client.get_run(pre).data.tags.items() if not k.startswith("mlflow.")},
               "code.git_commit": "def456", "continued_from": pre, "continued_at_step": "500"}
    run_id = client.create_run(exp, run_name="resumed", tags=resumed).info.run_id
    _register(client, "resumed", run_id)
    result = lineage.main(["models:/resumed@candidate", "--tracking-uri", uri])
    assert result.missing == [] and [link.kind for link in result.links][1:3] == ["pretraining run", "continued from"]
    out = capsys.readouterr().out
    assert "code.git_commit = abc123" in out and f"resumed ({run_id}) continued its checkpoint at step 500" in out

    phase2 = {"lineage.phase2.data_dir": resumed["lineage.data_dir"],
              "lineage.phase2.data_manifest_sha256": resumed["lineage.data_manifest_sha256"]}
    phases = client.create_run(exp, tags={**resumed, **phase2, "continued_from": "unrecorded"})
    client.create_run(exp, tags={"mlflow.parentRunId": phases.info.run_id, "phase": "1", "continued_from": pre})
    result = lineage.run(f"runs:/{phases.info.run_id}", uri)
    assert [link.name for link in result.links if link.kind == "continued from"] == ["unrecorded", pre]
    assert result.missing[0].startswith("continued from unrecorded (") and "names no run" in result.missing[0]

    client.delete_run(pre)
    (missing, *_) = lineage.run("models:/resumed@candidate", uri).missing
    assert missing.startswith(f"continued from {pre} (tag continued_from of run {run_id}") and "was deleted" in missing


def _predictions(client, folder: Path, store: str) -> str:
    """A jobs/predict.py output folder: its manifest naming the model version and the store its run was logged to."""
    run_id = client.create_run(client.get_experiment_by_name("lineage").experiment_id, tags={
        "lineage.model_sha256": "f" * 64}).info.run_id
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"status": "complete", "rows": 3, "shards": {}, "input": "x.csv",
        "model": {"uri": "models:/ft-model@candidate", "name": "ft-model", "version": "1", "sha256": "f" * 64},
        "mlflow": {"tracking_uri": store, "run_id": run_id}}))
    return run_id


def test_a_prediction_folder_is_read_in_the_store_its_manifest_names_from_any_folder(chain, tmp_path, monkeypatch):
    """Without --tracking-uri, lineage looked the prediction run up in ./mlflow.db: run from any other folder it said
    'prediction run ... does not exist', exited 1, and left an empty mlflow.db there."""
    client, uri, _, _, _ = chain
    run_id = _predictions(client, tmp_path / "predictions", uri)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = lineage.main([str(tmp_path / "predictions")])
    assert result.missing == [] and [link.kind for link in result.links][:3] == ["predictions", "prediction run",
                                                                                 "model version"]
    assert result.links[1].name == run_id and not (elsewhere / "mlflow.db").exists()
    # --tracking-uri, given, is the store read: a run it does not hold is missing, naming the store looked in
    other = tmp_path / "other.db"
    shutil.copy(tmp_path / "mlflow.db", other)
    type(client)(f"sqlite:///{other}").delete_run(run_id)
    (missing,) = lineage.run(str(tmp_path / "predictions"), f"sqlite:///{other}").missing
    assert missing == f"prediction run {run_id} (the manifest names it, but it was deleted in the store " \
                      f"sqlite:///{other})"


def test_a_store_that_does_not_exist_is_a_missing_link_and_is_not_made(chain, tmp_path, monkeypatch):
    """A read-only command makes no store (MLflow creates a SQLite one on opening it); a redacted store in the
    manifest (credentials removed when it was written) cannot be read, and is said so."""
    client, uri, _, _, _ = chain
    gone = tmp_path / "moved" / "mlflow.db"
    run_id = _predictions(client, tmp_path / "predictions", f"sqlite:///{gone}")
    (missing,) = lineage.run(str(tmp_path / "predictions")).missing
    assert missing == f"tracking store sqlite:///{gone} (the manifest names it for prediction run {run_id}, and it " \
                      "does not exist (lineage reads a store, it makes none))"
    assert not gone.parent.exists()
    monkeypatch.chdir(tmp_path / "predictions")  # models:/ and runs:/ still read ./mlflow.db by default
    (missing,) = lineage.run("models:/ft-model@candidate").missing
    assert missing.startswith(f"tracking store sqlite:///{tmp_path}/predictions/mlflow.db (the default store")
    assert not (tmp_path / "predictions" / "mlflow.db").exists()
    manifest = json.loads((tmp_path / "predictions" / "manifest.json").read_text())
    manifest["mlflow"]["tracking_uri"] = "https://***@mlflow.example.com"
    (tmp_path / "predictions" / "manifest.json").write_text(json.dumps(manifest))
    (missing,) = lineage.run(str(tmp_path / "predictions")).missing
    assert missing.startswith(f"prediction run {run_id} (the manifest names it in https://***@mlflow.example.com, "
                              "whose credentials were redacted") and "give --tracking-uri" in missing
    assert lineage.run(str(tmp_path / "predictions"), uri).missing == []  # the store given, with its credentials


def test_main_checks_no_redacted_store_and_names_the_manifest_for_one_that_does_not_answer(chain, tmp_path,
                                                                                          monkeypatch):
    """Without --tracking-uri, main checked the manifest's store was reachable even when redacted (it asked
    https://***@host), and one that did not answer exited naming `tracking.tracking_uri`, no field of lineage's."""
    import socket
    import urllib.request

    from bert_core.config import ConfigError

    client, _, _, _, _ = chain
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tmp_path / "predictions"
    _predictions(client, folder, f"http://127.0.0.1:{port}")
    with pytest.raises(ConfigError) as down:
        lineage.main([str(folder)])
    assert str(down.value) == f"the manifest of {folder} names http://127.0.0.1:{port}, which does not answer; " \
                              "give --tracking-uri"
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["mlflow"]["tracking_uri"] = "https://***@mlflow.example.com"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail(f"asked a redacted store: {a}"))
    (missing,) = lineage.main([str(folder)]).missing  # the walk's own line, naming --tracking-uri
    assert "whose credentials were redacted" in missing and "give --tracking-uri" in missing


def _release(tmp_path: Path, writer: str, tokenizer: Path) -> Path:
    """A pretraining run's release folder as jobs/pretrain.py fetches it from its last checkpoint, whose record
    (jobs/runtime/resubmit.py) names `writer`."""
    import contextlib
    from types import SimpleNamespace

    from jobs.runtime import resubmit
    from jobs.runtime.release import fetch_release

    checkpoint = tmp_path / "ray" / "checkpoint_000009"
    (checkpoint / "release").mkdir(parents=True)
    (checkpoint / "release" / "config.json").write_text("{}")
    resubmit.record(checkpoint, writer, 9, {})
    release = tmp_path / "runs" / "base" / "release"
    fetch_release(SimpleNamespace(as_directory=lambda: contextlib.nullcontext(str(checkpoint))), release,
                  str(tokenizer), 128)
    return release


def test_a_fine_tune_from_a_pretraining_release_folder_walks_on_to_its_run(chain, tmp_path):
    """README's cluster route, init=<output_dir>/<run>/release: the fine-tune named no run, and lineage called the
    chain complete at "a model folder with no MLflow pretraining run behind it". The release names the run that
    wrote it: the fine-tune's tags name that run, and the walk goes on to its corpus."""
    from jobs.registry import tracking

    client, uri, pre, _, corpus = chain
    release = _release(tmp_path, pre, Path(client.get_run(pre).data.tags["data_dir"]) / "tokenizer")
    tags = tracking.lineage_tags("finetune", init=str(release), tracking_uri=uri)
    assert (tags["lineage.init"], tags["lineage.init_run_id"], tags["lineage.pretrain_run_id"]) == (
        str(release), pre, pre)
    exp = client.get_experiment_by_name("lineage").experiment_id
    _register(client, "release-ft", client.create_run(exp, tags={**tags, "task": "conll"}).info.run_id)
    result = lineage.run("models:/release-ft@candidate", uri)
    assert result.missing == []
    assert [link.kind for link in result.links][2:4] == ["init", "pretraining run"]
    assert [link.name for link in result.links][-2:] == [str(f) for f in corpus]


def test_a_corpus_file_this_machine_cannot_read_is_a_missing_link_not_a_traceback(monkeypatch):
    """A corpus at a URI whose filesystem is not installed here (s3:// without s3fs: ImportError) or not reachable
    (hf:// offline: httpx's ConnectError, no OSError) ended the walk in a traceback, printing no chain at all."""
    import pipelines.layout

    recorded = {"path": "s3://bucket/wiki/a.txt", "bytes": 10, "sha256": "0" * 64}
    link = lineage._corpus_file(recorded)  # the unit venv has no s3fs
    assert not link.found and link.why.startswith("cannot be read here: ImportError: ") and "s3fs" in link.why

    class ConnectError(Exception):  # as httpx's: no OSError
        pass

    def offline(files):
        raise ConnectError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(pipelines.layout, "fingerprint_inputs", offline)
    link = lineage._corpus_file({**recorded, "path": "hf://datasets/x/y/a.txt"})
    assert not link.found and link.why == ("cannot be read here: ConnectError: [Errno -3] Temporary failure in "
                                           "name resolution")
    monkeypatch.setattr(pipelines.layout, "fingerprint_inputs", lambda files: open("/", "rb"))  # there, unreadable
    assert lineage._corpus_file(recorded).why.startswith("cannot be read here: IsADirectoryError: ")
