"""jobs/predict.py before any Ray work: which registered version `latest` is, which of a model folder's files travel
and make its digest, which columns a tagger's inputs are read with."""

import hashlib
import json
import os
import shutil

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from test_predictor import MINILM

from bert_core.config import ConfigError
from jobs import predict
from jobs.config.predict import PredictConfig
from jobs.inference.model_ref import ModelRef, model_files, resolve_model


def every_file_digest(folder) -> str:
    """The digest over all of a folder's files (what jobs/predict.py hashed before it chose the loaded ones)."""
    digest = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.is_file()):
        digest.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return digest.hexdigest()


def model_folder(folder):
    """A classifier's folder as the driver reads it (config.json, the weights' names, MiniLM's tokenizer files): it
    never loads the weights."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    (folder / "model.safetensors").write_bytes(b"weights")
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        shutil.copy(os.path.join(MINILM, name), folder / name)
    return folder


def test_latest_and_a_bare_name_resolve_to_the_highest_version_pinned_once(tmp_path):
    """models:/NAME/latest and models:/NAME are the highest version number (10, not the string-wise highest 9), pinned
    as models:/NAME/10 for the manifest; a number still means that version (its download ships and hashes all its
    files, as before); a model without versions is named."""
    folder = model_folder(tmp_path / "model")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    client.create_registered_model("m")
    for n in range(1, 11):
        client.create_model_version("m", str(folder), tags={"task_config": json.dumps({"doc_stride": n})})
    for asked in ("models:/m/latest", "models:/m"):
        model = resolve_model(asked, uri, tmp_path / "download")
        assert (model.uri, model.name, model.version, model.task) == ("models:/m/10", "m", "10", {"doc_stride": 10})
    pinned = resolve_model("models:/m/9", uri, tmp_path / "download")
    assert pinned.version == "9"  # a download of loaded files alone: shipped and hashed whole, as before
    assert [f.name for f in pinned.files] == sorted(f.name for f in pinned.folder.iterdir())
    assert pinned.digest == every_file_digest(pinned.folder) == every_file_digest(folder)
    client.create_registered_model("empty")
    with pytest.raises(ConfigError, match=r"^model 'models:/empty/latest' does not resolve: registered model 'empty' "
                                          r"has no versions"):
        resolve_model("models:/empty/latest", uri, tmp_path / "download")
    # a version whose registration failed half-way (no task, lineage or alias) is passed over, and named when alone
    from jobs.registry.versions import mark_incomplete

    mark_incomplete(client, "m", "10", RuntimeError("503 Service Unavailable"))
    assert resolve_model("models:/m/latest", uri, tmp_path / "download").version == "9"
    client.create_model_version("empty", str(folder))
    mark_incomplete(client, "empty", "1", RuntimeError("503"))
    with pytest.raises(ConfigError, match=r"has no versions whose registration finished \(v1: incomplete: Runtime"):
        resolve_model("models:/empty/latest", uri, tmp_path / "download")
    with pytest.raises(ConfigError, match=r"^model 'models:/nope' does not resolve: .*nope"):
        resolve_model("models:/nope", uri, tmp_path / "download")


def test_a_checkpoint_or_hub_snapshot_ships_and_hashes_only_what_transformers_loads(tmp_path):
    """A Trainer checkpoint's optimizer and RNG state, a Hub snapshot's TF, Flax and ONNX weights and pickled copy are
    neither shipped nor hashed: an edit of one leaves the digest (a rerun goes on); an edit of the weights changes it.
    A folder of loaded files alone hashes as before, all its files."""
    clean = model_folder(tmp_path / "model")
    loaded = resolve_model(str(clean), "", tmp_path / "unused")
    folder = tmp_path / "checkpoint-500"
    shutil.copytree(clean, folder)
    extras = ("optimizer.pt", "rng_state.pth", "training_args.bin", "scheduler.pt", "trainer_state.json",
              "tf_model.h5", "flax_model.msgpack", "model.onnx", "pytorch_model.bin", "README.md")
    for name in extras:
        (folder / name).write_bytes(b"not loaded")
    model = resolve_model(str(folder), "", tmp_path / "unused")
    assert [f.name for f in model.files] == [f.name for f in loaded.files] == sorted(
        ["config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
         "vocab.txt"])
    assert model.digest == loaded.digest == every_file_digest(loaded.folder)
    (folder / "optimizer.pt").write_bytes(b"a later step's")
    assert resolve_model(str(folder), "", tmp_path / "unused").digest == model.digest
    (folder / "model.safetensors").write_bytes(b"other weights")
    assert resolve_model(str(folder), "", tmp_path / "unused").digest != model.digest



def test_a_registered_regression_of_several_outputs_is_refused_once_resolved(tmp_path, empty_store):
    """models:/ resolves, downloads, then reads the folder's kind: a regression of three outputs is refused there,
    named by the URI asked (not the download's temporary folder), before any Ray work; it would have been written as
    its first output alone (batch prediction and the served model write one value per row)."""
    folder = model_folder(tmp_path / "model")
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"],
                                                    "problem_type": "regression",
                                                    "id2label": {"0": "fluency", "1": "adequacy", "2": "style"}}))
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    client.create_registered_model("quality")
    client.create_model_version("quality", str(folder), tags={"task_config": "{}"})
    with pytest.raises(ConfigError, match=r"^model 'models:/quality/1': a regression of 3 outputs \(problem_type "
                                          r"regression, num_labels 3: fluency, adequacy, style\); "
                                          r".*num_labels 1\) only"):
        resolve_model("models:/quality/latest", uri, tmp_path / "download")


def test_sharded_weights_travel_with_their_index_and_a_folder_without_weights_is_named(tmp_path):
    """transformers' order: safetensors (whole, or an index and the shards it names) before pytorch_model.bin (whole
    or sharded); a shard the index names and the folder lacks, or no weights at all, is an error naming them."""
    for name in ("config.json", "vocab.txt", "pytorch_model.bin", "tf_model.h5"):
        (tmp_path / name).write_text("{}")
    assert [f.name for f in model_files(tmp_path)] == ["config.json", "pytorch_model.bin", "vocab.txt"]
    bpe = tmp_path / "bpe"  # a RoBERTa-style folder saved without tokenizer.json: its tokenizer's files travel
    bpe.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.json", "merges.txt", "tokenizer_config.json"):
        (bpe / name).write_text("{}")
    assert [f.name for f in model_files(bpe)] == ["config.json", "merges.txt", "model.safetensors",
                                                  "tokenizer_config.json", "vocab.json"]
    index = {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                            "b": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "model-00001-of-00002.safetensors").write_text("")
    with pytest.raises(ValueError, match="names shards the folder lacks: model-00002-of-00002.safetensors"):
        model_files(tmp_path)
    (tmp_path / "model-00002-of-00002.safetensors").write_text("")
    (tmp_path / "model-00003-of-00002.safetensors").write_text("")  # a stale shard the index does not name
    assert [f.name for f in model_files(tmp_path)] == [
        "config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
        "model.safetensors.index.json", "vocab.txt"]
    for name in ("pytorch_model.bin", "model.safetensors.index.json"):
        (tmp_path / name).unlink()
    with pytest.raises(ValueError, match=r"no weights transformers loads in .* \(one of model.safetensors, "):
        model_files(tmp_path)


@pytest.fixture
def no_ray(tmp_path, monkeypatch):
    """predict._run up to its Ray work: the inputs checked, then `_fill` records that the job went on."""
    went_on = []
    monkeypatch.setattr(predict, "_fill", lambda *args: went_on.append(args[5]))
    return went_on


def test_a_tagger_reads_conll_words_without_columns_tokens_and_names_it_for_a_tokens_column(tmp_path, no_ray):
    """Prediction's default columns tag `text`: a CoNLL file's words (its reader takes no column name) are read all
    the same; a JSON Lines or Parquet file with a `tokens` column and no `text` is refused naming columns.tokens=tokens,
    not columns.text; a file with neither names columns.text as before."""
    from jobs.inference.stages import read_rows

    (tmp_path / "d.conll").write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n")
    model = ModelRef("m", tmp_path, "token-classification", digest="d")
    cfg = PredictConfig(model="m", input=str(tmp_path / "d.conll"), output=str(tmp_path / "out"))
    predict._run(cfg, model, f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "out", 0.0)
    assert no_ray == [[(str(tmp_path / "d.conll"), "conll")]]
    rows = read_rows({"index": 0, "path": str(tmp_path / "d.conll"), "fmt": "conll"}, "token-classification",
                     cfg.columns, 100, set(), tmp_path / "out")
    assert sorted(json.loads(r["row"])["tokens"] for r in rows) == [["EU", "rejects"], ["Peter"]]

    (tmp_path / "e.jsonl").write_text('{"tokens": ["EU", "rejects"]}\n')
    pd.DataFrame({"tokens": [["EU", "rejects"]]}).to_parquet(tmp_path / "f.parquet")
    for name in ("e.jsonl", "f.parquet"):
        cfg = PredictConfig(model="m", input=str(tmp_path / name), output=str(tmp_path / "out"))
        with pytest.raises(ConfigError, match=rf"^input: .*{name}: no column 'text' to tag, but a column 'tokens': "
                                              r"set columns.tokens=tokens"):
            predict._run(cfg, model, "", tmp_path / "out", 0.0)
    (tmp_path / "g.jsonl").write_text('{"words": ["EU"]}\n')
    cfg = PredictConfig(model="m", input=str(tmp_path / "g.jsonl"), output=str(tmp_path / "out"))
    with pytest.raises(ConfigError, match=r"expected columns \['text'\], found \['words'\]; set columns.text$"):
        predict._run(cfg, model, "", tmp_path / "out", 0.0)
    assert len(no_ray) == 1


def test_gpu_replicas_are_counted_one_way():
    """gpu_actors is the GPU replicas' count (waited for); num_actors beside it would say another count."""
    from bert_core.config import ConfigError
    from jobs.config.predict import PredictConfig

    cfg = PredictConfig(model="m", input="in", output="/out", gpu_actors=2)
    assert cfg.validate().gpu_actors == 2
    with pytest.raises(ConfigError, match=r"set num_actors \(4\) or gpu_actors \(2\), not both"):
        PredictConfig(model="m", input="in", output="/out", gpu_actors=2, num_actors=4).validate()
    with pytest.raises(ConfigError, match=r"gpu_actors and capacity_timeout_s must be >= 0"):
        PredictConfig(model="m", input="in", output="/out", gpu_actors=-1).validate()


def test_a_logged_models_uri_resolves_to_its_files_and_its_runs_task_settings(tmp_path, empty_store):
    """MLflow 3 shows a logged model as models:/m-<id> (registered or not): it was read as a registered model named
    m-<id> ("not found"). Its files download, its task settings and inputs are its run's, and it pins as itself."""
    from jobs.registry.versions import pin

    shutil.copy(empty_store, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("x", str(tmp_path / "art"))).info.run_id  # no ./mlruns
    client.log_param(run_id, "task.doc_stride", "7")
    client.set_tag(run_id, "data.inputs", "text")
    logged = client.create_logged_model(client.get_run(run_id).info.experiment_id, name="model", source_run_id=run_id)
    client.log_model_artifacts(logged.model_id, str(model_folder(tmp_path / "model")))
    asked = f"models:/{logged.model_id}"
    assert pin(asked, uri) == asked
    model = resolve_model(asked, uri, tmp_path / "download")
    assert (model.uri, model.run_id, model.task, model.inputs) == (asked, run_id, {"doc_stride": "7"}, "text")
    assert model.digest == every_file_digest(tmp_path / "model")
    from jobs.registry.tracking import _source_run_tags  # a fine-tune from it: its lineage starts at that run

    assert _source_run_tags(asked, uri) == {"lineage.init_run_id": run_id, "lineage.pretrain_run_id": run_id}


def test_an_output_folder_inside_the_input_folder_is_refused(tmp_path, monkeypatch):
    """`--input exports/ --output exports/preds`: the first run lists the inputs before it writes, and every rerun (a
    killed job's, tomorrow's) read its own manifest and shards as inputs and failed blaming the input's columns."""
    from bert_core.config import ConfigError
    from jobs.config.predict import PredictConfig

    exports = tmp_path / "exports"
    exports.mkdir()
    (exports / "a.csv").write_text("text\nfine\n")
    (tmp_path / "link").symlink_to(exports)
    for given, out, read in ((exports, exports / "preds", "manifest.json"), (exports, exports, "manifest.json"),
                             (f"{exports}/", tmp_path / "link" / "p", "manifest.json"),
                             (f"{exports}/**/*.parquet", exports / "preds", "part-0000000-1-0123abcd.parquet"),
                             (f"{exports}/*/*", exports / "preds", "manifest.json"),
                             (f"file://{exports}", exports / "preds", "manifest.json")):
        with pytest.raises(ConfigError, match=rf"lies where the input .* reads: a rerun would read its {read} as in"):
            PredictConfig(model="m", input=str(given), output=str(out)).validate()
    # what a rerun would not read: outside, a one-level glob, a file, a hidden folder, another format
    for given, out, fmt in ((exports, tmp_path / "preds", ""), (f"{exports}/*.csv", exports / "preds", ""),
                            (exports / "a.csv", exports / "preds", ""), (exports, tmp_path / "exports-preds", ""),
                            (exports, exports / "_preds", ""), (exports, exports / ".preds", ""),
                            (f"{exports}/**/*.csv", exports / "preds", ""), (exports, exports / "preds", "csv")):
        PredictConfig(model="m", input=str(given), output=str(out), format=fmt).validate()
    # a glob relative to the working folder: `**/*.parquet` reads no sibling folder, `*/*` reads preds/ below it
    # a file named with brackets is that file, and a class no regex reads is its characters: --check crashed on
    # re.error ("bad character range 4-0") for sales[2024-01].csv
    for name in ("sales[2024-01].csv", "reviews[!].csv"):
        (exports / name).write_text("text\nfine\n")
        PredictConfig(model="m", input=str(exports / name), output=str(exports / "preds")).validate()
    with pytest.raises(ConfigError, match=r"a rerun would read its manifest.json as input"):
        PredictConfig(model="m", input=f"{exports}/*[2024-01]*/*", output=str(exports / "p[2024-01]x")).validate()
    monkeypatch.chdir(exports)
    PredictConfig(model="m", input="**/*.parquet", output=str(tmp_path / "exports-preds")).validate()
    with pytest.raises(ConfigError, match=r"a rerun would read its manifest.json as input"):
        PredictConfig(model="m", input="*/*", output="preds").validate()


def test_an_empty_column_name_is_refused_before_any_work():
    """columns.text= crashed reading the first file with an IndexError; columns.question= rejected every row of a QA
    model's input as missing_field after the cluster work. A tagger reading columns.tokens needs no text column."""
    from bert_core.config import ConfigError
    from jobs.config.predict import PredictConfig
    from pipelines.tasks.files import Columns

    for name in ("text", "question", "context"):
        cfg = PredictConfig(model="m", input="in", output="/out", columns=Columns(tokens="", **{name: " "}))
        with pytest.raises(ConfigError, match=rf"columns.{name} must name a column"):
            cfg.validate()
    assert PredictConfig(model="m", input="in", output="/out", columns=Columns(text="", tokens="words")).validate()


def test_the_summary_does_not_call_a_taggers_windowed_rows_untruncated(tmp_path):
    """A tagger windows a long text and never cuts it: its summary said "truncated 0 rows over the model's length
    limit" whatever it windowed, as if every row had fit."""
    from types import SimpleNamespace

    from jobs.predict import PredictResult, summary

    (tmp_path / "shards").mkdir()
    for kind, says in (("token-classification", "truncated   0 rows (long texts are windowed, not cut: rows with "
                                                "windows > 1 in the output)"),
                       ("classification", "truncated   3 rows over the model's length limit"),
                       ("question-answering", "truncated   3 rows whose question was cut to max_query_length")):
        model = SimpleNamespace(uri="models:/m@champion", name="m", version="1", kind=kind)
        result = PredictResult(tmp_path, model, 10, {}, 0 if kind == "token-classification" else 3, 0, 1.0)
        assert says in summary(result)
