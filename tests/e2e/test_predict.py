"""Using the champion, end to end (real local Ray, real SQLite MLflow, from the real all-MiniLM-L6-v2): two
fine-tunes of a CSV task registered and promoted through jobs/promote.py, then jobs/predict.py with
models:/NAME@champion over CSV, JSON Lines and plain-text files. Every prediction equals what a plain transformers
pipeline over the registered folder predicts (truncating), and what the served model answers; a prediction actor
killed mid-job and a rerun over a half-finished output each leave every input predicted exactly once; a
promotion and a rollback change the version the next job uses, and the manifest says which."""

import csv
import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bert_core.config import ConfigError
from jobs.config.io import load_config
from jobs.config.predict import PredictConfig
from tests.e2e.test_own_data import TOPICS, config, sentence
from tests.readme import job_config, readme

pytestmark = pytest.mark.slow

NAME = "topics"


def predict(tmp, model: str, inputs, output, *overrides):
    from jobs.predict import run

    return run(load_config(PredictConfig, None, [
        f"model={model}", f"input={inputs}", f"output={output}", f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db",
        f"tracking.artifact_location={tmp}/art", *overrides]))


def readme_predict(tmp, command: list[str], *overrides):
    """README.md's prediction `command` (placeholders given), run against this module's store."""
    from jobs.predict import run

    return run(job_config(command, f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db",
                          f"tracking.artifact_location={tmp}/art", *overrides))


def promote(tmp, command: list[str] | None = None):
    """README.md's promotion `command` (NAME given), or the plain `jobs/promote.py NAME`, on this module's store."""
    from jobs.promote import PromoteConfig, run

    sizes = [f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db", f"tracking.artifact_location={tmp}/art",
             "bootstrap_samples=200"]  # its run's config.yaml under tmp, not the repository's ./mlartifacts
    if command and "--rollback" in command:  # a rollback judges nothing: a judgement's setting is refused beside it
        sizes = sizes[:2]
    if command:
        return run(job_config(command, *sizes))
    return run(load_config(PromoteConfig, None, [f"model={NAME}", *sizes]).validate())


def outputs(folder) -> list[dict]:
    return pq.read_table(folder / "shards").to_pylist()


@pytest.fixture(scope="module")
def registry(ray_tmp):
    """v1 barely trained (lr 1e-7), promoted as the first champion; v2 trained, promoted over it."""
    rng = np.random.default_rng(0)
    path = ray_tmp / "topics.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for i in range(300):
            topic = list(TOPICS)[i % 3]
            w.writerow([sentence(rng, topic), topic])
    common = [f"task.train_file={path}", f"tracking.registered_model={NAME}", "train.epochs=1"]
    from jobs.finetune import run as finetune

    finetune(config(ray_tmp, "weak", *common, "optim.lr=1e-7"))
    assert promote(ray_tmp).decision == "promoted"  # no champion yet
    finetune(config(ray_tmp, "strong", *common, "optim.lr=2e-4", "train.epochs=2"))
    # README.md's stricter gate, naming the version (v2 here)
    decision = promote(ray_tmp, readme("python jobs/promote.py NAME --version", {"NAME": NAME, "--version 7":
                                                                                  "--version 2"}))
    assert decision.decision == "promoted" and decision.candidate == "2", decision.reason
    rng = np.random.default_rng(7)
    inputs = ray_tmp / "inputs"
    inputs.mkdir()
    texts = [sentence(rng, list(TOPICS)[i % 3]) for i in range(90)]
    with open(inputs / "a.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text"])
        w.writerows([[t] for t in texts[:40]])
    long = " ".join(["recipe soup bread"] * 300)  # ~900 pieces: over the 128 it was fine-tuned at (cut there)
    lines = [json.dumps({"text": t}) for t in texts[40:70]] + [json.dumps({"text": long}), "{not json"]
    (inputs / "b.jsonl").write_text("\n".join(lines) + "\n")
    (inputs / "c.txt").write_text("\n".join(texts[70:]) + "\n\n")
    return {"inputs": inputs, "texts": {"a.csv": texts[:40], "b.jsonl": [*texts[40:70], long], "c.txt": texts[70:]}}


def test_champion_predicts_three_formats_as_its_registered_pipeline(ray_tmp, registry):
    import mlflow
    import transformers

    from jobs.finetune import find_hf_folder

    out = ray_tmp / "pred"
    # README.md's command: the champion over a glob of files (every file of the folder here, in three formats)
    command = readme("python jobs/predict.py models:/NAME@champion --input", {
        "NAME": NAME, "new/*.csv": f"{registry['inputs']}/*", "--output predictions/": f"--output {out}"})
    result = readme_predict(ray_tmp, command, "shard_rows=25", "window=16")
    assert result.model.version == "2" and result.model.uri == f"models:/{NAME}/2"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["version"] == "2" and manifest["status"] == "complete"
    assert result.rows == 91 and result.rejected == {"bad_json": 1} and result.truncated == 1
    assert result.skipped == {"blank_line": 1}  # no record: not a reject
    rows = outputs(out)
    assert sorted(r["id"] for r in rows) == sorted({r["id"] for r in rows})  # each input once
    # sorted by file and position, the output is the input in order (ids "<file>:<n>": no record before the last
    # is rejected here, so n is the row's place in its file; a.csv's 40 rows span two shards of 25)
    assert all(int(r["id"].rsplit(":", 1)[1]) == r["position"] for r in rows), rows
    mlflow.set_tracking_uri(f"sqlite:///{ray_tmp}/mlflow.db")
    # the registered folder in a plain transformers pipeline (it loads with no code of ours), and the served model
    download = mlflow.artifacts.download_artifacts(f"models:/{NAME}/2", dst_path=str(ray_tmp / "v2"))
    pipe = transformers.pipeline("text-classification", model=str(find_hf_folder(Path(download))))
    served = mlflow.pyfunc.load_model(f"models:/{NAME}/2")  # what `mlflow models serve` answers with
    for name, texts in registry["texts"].items():
        ours = sorted((r for r in rows if r["file"].endswith(name)), key=lambda r: int(r["id"].rsplit(":", 1)[1]))
        theirs = pipe(texts, truncation=True)  # to the tokenizer's model_max_length: the fine-tuned length
        answered = served.predict(texts)
        assert [r["label"] for r in ours] == [t["label"] for t in theirs] == list(answered["label"]), name
        assert [r["score"] for r in ours] == pytest.approx([t["score"] for t in theirs], abs=1e-4), name
        assert list(answered["score"]) == pytest.approx([t["score"] for t in theirs], abs=1e-4), name
    accuracy = np.mean([r["label"] == list(TOPICS)[int(r["id"].split(":")[1]) % 3] for r in rows
                        if r["file"].endswith("a.csv")])
    assert accuracy > 0.6, accuracy  # the champion learned the topics (chance: 1/3)
    tags = mlflow.MlflowClient().get_run(result.run_id).data.tags
    assert (tags["lineage.model_name"], tags["lineage.model_version"]) == (NAME, "2")
    from jobs.lineage import run as lineage

    chain = lineage(str(out), f"sqlite:///{ray_tmp}/mlflow.db")
    assert [link.kind for link in chain.links][:3] == ["predictions", "prediction run", "model version"]
    assert chain.links[2].name == f"{NAME} v2" and not chain.missing, chain.missing


def test_a_killed_actor_and_a_rerun_leave_every_input_predicted_exactly_once(ray_tmp, registry):
    out = ray_tmp / "killed"
    result = predict(ray_tmp, f"models:/{NAME}/2", registry["inputs"], out, "shard_rows=25", "window=8",
                     "faults.kill_actor_after_batches=2")
    assert (out / ".fault-killed-actor").is_file()  # an actor died mid-job; Ray restarted it, retried its batch
    ids = [r["id"] for r in outputs(out)]
    assert len(ids) == len(set(ids)) == result.rows == 91
    # a job killed before it finished: one shard's last part and its manifest entry never written
    manifest = json.loads((out / "manifest.json").read_text())
    shard = sorted(manifest["shards"])[1]
    os.remove(out / sorted(manifest["shards"][shard]["parts"])[-1])
    del manifest["shards"][shard]
    (out / "manifest.json").write_text(json.dumps(manifest))
    kept = {p: p.stat().st_mtime_ns for s in manifest["shards"] for p in (out / "shards" / s).iterdir()}
    again = predict(ray_tmp, f"models:/{NAME}/2", registry["inputs"], out, "shard_rows=25", "window=8")
    assert again.skipped_shards == len(manifest["shards"])  # only the broken shard was predicted again
    # the kept shards' files as the first run left them: not read and predicted again (their parts rewritten alike)
    assert {p: p.stat().st_mtime_ns for s in manifest["shards"] for p in (out / "shards" / s).iterdir()} == kept
    ids = [r["id"] for r in outputs(out)]
    assert len(ids) == len(set(ids)) == again.rows == 91
    with pytest.raises(ConfigError, match="another model or input"):  # the folder holds v2's predictions
        predict(ray_tmp, f"models:/{NAME}/1", registry["inputs"], out)


def test_promotion_and_rollback_move_what_the_next_job_uses(ray_tmp, registry):
    """README.md's commands in a user's order: predict with a version by number, roll @champion back, predict
    with @champion (the version it moved to); the withdrawn @candidate is not judged again unless named, and named
    (--version), judged on a held-out file: promoted back."""
    one = registry["inputs"] / "c.txt"
    command = readme("python jobs/predict.py models:/NAME/3", {
        "NAME/3": f"{NAME}/2", "--input docs.txt": f"--input {one}", "--output out/": f"--output {ray_tmp}/before"})
    before = readme_predict(ray_tmp, command)
    assert before.model.version == "2" and before.rows == 20  # a text file's lines (its column setting unused)
    rollback = promote(ray_tmp, readme("python jobs/promote.py NAME --rollback", {"NAME": NAME}))
    assert rollback.decision == "rolled back"
    after = predict(ray_tmp, f"models:/{NAME}@champion", one, ray_tmp / "after")
    assert after.model.version == "1"
    assert json.loads((ray_tmp / "after" / "manifest.json").read_text())["model"]["version"] == "1"

    rng = np.random.default_rng(11)
    heldout = ray_tmp / "heldout.json"  # rows neither model trained on nor was chosen with
    heldout.write_text(json.dumps([{"text": sentence(rng, list(TOPICS)[i % 3]), "label": list(TOPICS)[i % 3]}
                                   for i in range(60)]))
    command = readme("python jobs/promote.py NAME task.dev_file=", {"NAME": NAME, "/data/heldout.json": str(heldout)})
    with pytest.raises(ValueError, match=r"v2 \(@candidate\) was withdrawn by a rollback .* --version 2"):
        promote(ray_tmp, command)
    again = promote(ray_tmp, [*command, "--version", "2"])
    assert (again.decision, again.candidate, again.champion) == ("promoted", "2", "1"), again.reason
    assert again.eval_rows == 60, again


def test_a_model_uri_that_does_not_resolve_is_one_line(ray_tmp, registry):
    with pytest.raises(ConfigError, match=f"model 'models:/{NAME}@nobody' does not resolve"):
        predict(ray_tmp, f"models:/{NAME}@nobody", registry["inputs"], ray_tmp / "none")


def test_gpu_replicas_are_waited_for_or_refused_before_any_run(ray_tmp, registry):
    """An autoscaling GPU cluster starts with no GPU node: counted at start, the job ran one CPU replica beside the
    GPUs the autoscaler brought later. gpu_actors asks for them and waits; a cluster that cannot grow (this one) is
    refused in one line, before any MLflow run or prediction."""
    import mlflow

    with pytest.raises(RuntimeError, match=r"^the Ray cluster has (CPU \d+ of 3, )?GPU 0 of 2 needed by gpu_actors=2 "
                                           r"\(a GPU and a CPU each\) plus 1 CPU for Ray Data\. Lower gpu_actors, or "
                                           r"add GPU nodes"):
        predict(ray_tmp, f"models:/{NAME}@champion", registry["inputs"], ray_tmp / "on-gpus", "gpu_actors=2")
    client = mlflow.MlflowClient(f"sqlite:///{ray_tmp}/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string=f"tags.`prediction.output` = '{ray_tmp / 'on-gpus'}'")
    assert runs == [] and not list((ray_tmp / "on-gpus" / "shards").glob("*/*.parquet"))


def test_a_job_that_predicts_no_row_fails_naming_the_rejects(ray_tmp, registry):
    """A spreadsheet's cp1252 export (not UTF-8) is refused before any work, naming the setting that reads it. Every
    record rejected (empty texts) is not a success: one line naming the reasons and the first sample, and the MLflow
    run FAILED."""
    import mlflow

    cp1252 = ray_tmp / "cp1252.csv"
    cp1252.write_bytes("text\ncaf\xe9 au lait\nna\xefve\n".encode("cp1252"))
    with pytest.raises(ConfigError, match=r"cp1252.csv: not UTF-8: byte 0xE9 on line 2.*set columns.encoding=cp1252"):
        predict(ray_tmp, f"models:/{NAME}@champion", cp1252, ray_tmp / "nothing")
    assert not (ray_tmp / "nothing").exists()
    bad = ray_tmp / "empty.csv"
    bad.write_text("id,text\n1,\n2,\n")
    with pytest.raises(ConfigError, match=r"no row could be predicted.*missing_text 2; first: missing_text at line"):
        predict(ray_tmp, f"models:/{NAME}@champion", bad, ray_tmp / "nothing")
    client = mlflow.MlflowClient(f"sqlite:///{ray_tmp}/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string=f"tags.`prediction.output` = '{ray_tmp / 'nothing'}'")
    assert [r.info.status for r in runs] == ["FAILED"]
    assert json.loads((ray_tmp / "nothing" / "manifest.json").read_text())["status"] == "failed"
    bad.write_text("id,text\n1,cafe au lait\n2,naive\n")  # its texts written: the rerun takes the folder over
    assert predict(ray_tmp, f"models:/{NAME}@champion", bad, ray_tmp / "nothing").rows == 2


def test_a_tagger_and_a_reader_from_folders(ray_tmp):
    """Token classification over plain text and QA over JSON Lines through the job, from model folders (no
    registry): each row's output is the predictor's (jobs/inference/predictor.py) for it, a long text windowed."""
    from jobs.inference.predictor import Predictor
    from tests.unit.test_predictor import TAGS, tiny

    tagger = tiny(ray_tmp / "models", "BertForTokenClassification", num_labels=len(TAGS),
                  id2label=dict(enumerate(TAGS)), label2id={v: i for i, v in enumerate(TAGS)})
    texts = ["Marie Curie worked in Paris", " ".join(["the river flows past Paris and London"] * 12)]
    (ray_tmp / "tag.txt").write_text("\n".join(texts) + "\n")
    result = predict(ray_tmp, tagger, ray_tmp / "tag.txt", ray_tmp / "tagged")
    rows = sorted(outputs(ray_tmp / "tagged"), key=lambda r: r["position"])
    assert result.rows == 2 and [r["windows"] for r in rows][1] > 1
    ours = Predictor(tagger).predict([{"id": str(i), "text": t} for i, t in enumerate(texts)])
    assert [json.loads(r["entities"]) for r in rows] == [json.loads(p["entities"]) for p in ours]
    reader = tiny(ray_tmp / "models", "BertForQuestionAnswering")
    questions = [{"id": "q1", "question": "where does it flow", "context": texts[1]},
                 {"id": "q2", "question": "who worked", "context": texts[0]}]
    (ray_tmp / "qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    predict(ray_tmp, reader, ray_tmp / "qa.jsonl", ray_tmp / "read", "columns.id=id")
    rows = {r["id"]: r for r in outputs(ray_tmp / "read")}
    for p in Predictor(reader).predict(questions):
        assert (rows[p["id"]]["answer"], rows[p["id"]]["answer_start"]) == (p["answer"], p["answer_start"])
