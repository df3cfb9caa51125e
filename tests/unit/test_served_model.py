"""jobs/inference/served_model.py: the registered model MLflow serves (every fine-tuned kind) answers what batch
prediction (jobs/inference/predictor.py) computes: the same labels and values, the same entities where windows
overlap, every label over the model's trained threshold, no answer from a null question or context; and refuses what
batch prediction rejects, naming the row."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_predictor import LABELS, TAGS, tiny

from jobs.inference.predictor import Predictor
from jobs.inference.served_model import PredictorModel


def served(predictor: Predictor) -> PredictorModel:
    model = PredictorModel()
    model.predictor, model.pairs = predictor, None  # what load_context builds from the artifact and model_config
    return model


def test_an_entity_one_overlapping_window_finds_is_kept_by_batch_and_served_predictions(tmp_path):
    """60 words, a 32-position model: "paris" lies in the overlap of two windows; one tags it B-LOC, the other O. The
    "O" groups must not take part in the windows' merge (the longer "O" stretch would win and drop the entity)."""
    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                  label2id={v: i for i, v in enumerate(TAGS)}, max_position_embeddings=32)
    predictor = Predictor(folder, cpu_kernels="torch")
    paris = predictor.tokenizer.convert_tokens_to_ids("paris")
    for at in range(60):  # a place in the overlap
        words = ["a"] * 60
        words[at] = "paris"
        row = {"id": "r", "text": " ".join(words)}
        encoded = predictor.encode([row])
        hits = [k for k, w in enumerate(encoded[0]["windows"]) if paris in w["input_ids"]]
        if len(hits) == 2:
            break
    start = row["text"].index("paris")
    for tagging in hits:
        logits = []
        for k, w in enumerate(encoded[0]["windows"]):
            lg = np.zeros((len(w["input_ids"]), len(TAGS)), np.float32)
            lg[:, 0] = 5.0  # "O" everywhere ...
            if k == tagging:
                lg[w["input_ids"].index(paris)] = [0, 5, 0, 0, 0]  # ... but this window's B-ORG for "paris"
            logits.append(lg)
        expected = [("ORG", "paris", start, start + 5)]
        (ours,) = predictor.decode([row], encoded, [logits])
        assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in json.loads(ours["entities"])] == expected
        model = served(predictor)
        by_ids = {tuple(w["input_ids"]): lg for w, lg in zip(encoded[0]["windows"], logits)}  # however batched
        model.predictor.forward = lambda enc: [[by_ids[tuple(w["input_ids"])] for w in e["windows"]] for e in enc]
        answer = model.predict(None, pd.DataFrame({"text": [row["text"]]}))
        assert list(answer.columns) == ["entities"]
        assert [(e["entity_group"], e["word"], e["start"], e["end"])
                for e in json.loads(answer["entities"][0])] == expected


def multi_label(tmp_path) -> str:
    """A multi-label classifier answering the probabilities 0.047, 0.119, 0.269 for labels a, b, c, whatever the
    text."""
    import transformers

    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=3, problem_type="multi_label_classification",
                  id2label={0: "a", 1: "b", 2: "c"}, label2id={"a": 0, "b": 1, "c": 2})
    model = transformers.BertForSequenceClassification.from_pretrained(folder)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([-3.0, -2.0, -1.0]))
    model.save_pretrained(folder)
    return folder


def test_a_served_multi_label_model_and_a_runs_uri_use_the_trained_threshold(tmp_path):
    """Logged as the fine-tuning job logs it (with its task_config; its run's config holds
    task.multi_label_threshold), the served model answers batch prediction's labels: each one over the trained
    threshold, not the top one alone; predicting `runs:/ID/model` reads that threshold from the run too (a
    registered version's task_config first; a sweep trial's from its parent's finetune.task.*)."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from jobs.config.predict import PredictConfig
    from jobs.predict import _threshold, resolve_model
    from jobs.registry import tracking
    from jobs.registry.model_logging import log_release_model, task_settings

    folder = multi_label(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = tracking.start_run(uri, "ml", str(tmp_path / "art"), "ml", {"task": {"multi_label_threshold": 0.1}})
    mlflow.set_tracking_uri(uri)  # as tracking.finish_run does before it logs the model
    with mlflow.start_run(run_id=run_id):
        info = log_release_model(folder, None, "text-classification", ["hello", "a fine day"],
                                 settings={"multi_label_threshold": 0.1})  # tracking.finish_run's task_config
    texts = ["hello", "a fine day"]
    answer = mlflow.pyfunc.load_model(info.model_uri).predict(texts)  # a request {"inputs": [...]}, as before
    ours = Predictor(folder, threshold=0.1, cpu_kernels="torch").predict(
        [{"id": str(i), "text_a": t} for i, t in enumerate(texts)])
    assert [json.loads(v) for v in answer["labels"]] == [["b", "c"]] * 2 == [json.loads(p["labels"]) for p in ours]
    assert list(answer["score"]) == pytest.approx([p["score"] for p in ours], abs=1e-6)
    assert json.loads(Predictor(folder, threshold=0.5, cpu_kernels="torch").predict(
        [{"id": "0", "text_a": "hello"}])[0]["labels"]) == []

    model = resolve_model(f"runs:/{run_id}/model", uri, tmp_path / "download")
    assert model.kind == "multi-label" and _threshold(PredictConfig(), model) == pytest.approx(0.1)
    client = MlflowClient(uri)
    experiment = client.get_run(run_id).info.experiment_id
    parent = client.create_run(experiment).info.run_id
    client.log_param(parent, "finetune.task.multi_label_threshold", "0.2")
    trial = client.create_run(experiment, tags={"mlflow.parentRunId": parent}).info.run_id
    client.log_param(trial, "task.doc_stride", "32")
    assert task_settings(client, trial) == {"multi_label_threshold": "0.2", "doc_stride": "32"}
    client.create_registered_model("ml")
    client.create_model_version("ml", info.model_uri, run_id=trial, tags={"task_config": '{"doc_stride": 48}'})
    assert task_settings(client, trial) == {"doc_stride": 48}


def test_a_null_question_or_context_is_answered_as_no_answer_not_from_the_word_none(tmp_path):
    from jobs.inference.kinds import QASettings
    from jobs.inference.qa_model import QuestionAnswering

    folder = tiny(tmp_path, "BertForQuestionAnswering")
    model = QuestionAnswering()
    model.predictor = Predictor(folder, qa=QASettings(max_seq_len=64, doc_stride=16, max_query_length=16),
                                cpu_kernels="torch")
    context = "the river flows past Paris and London"
    table = pd.DataFrame({"question": ["where does it flow", None, "what is it", "  "],  # blank: missing_field in
                          "context": [context, context, float("nan"), context]})  # batch prediction, no answer here
    answer = model.predict(None, table)
    alone = model.predictor.predict([{"id": "0", "question": "where does it flow", "context": context}])[0]
    assert (answer["answer"][0], answer["answer_start"][0]) == (alone["answer"], alone["answer_start"])
    assert list(answer["answer"][1:]) == ["", "", ""] and list(answer["answer_start"][1:]) == [-1, -1, -1]
    assert answer["score"][1:].isna().all()
    with pytest.raises(ValueError, match="row 1 has no text"):
        served(Predictor(multi_label(tmp_path / "m"), cpu_kernels="torch")).predict(
            None, pd.DataFrame({"text": ["fine", None]}))
    # a list cell (a tagger sent its words, a question as a list) is refused naming the row, not a numpy error about
    # an array's truth value, nor its Python repr answered as text
    with pytest.raises(ValueError, match="row 1's text is a list, not text"):
        served(Predictor(multi_label(tmp_path / "m"), cpu_kernels="torch")).predict(
            None, pd.DataFrame({"text": ["fine", ["a", "b"]]}))
    with pytest.raises(ValueError, match="row 0's question is a list, not text"):
        model.predict(None, pd.DataFrame({"question": [["where"]], "context": [context]}))
    # half an emoji (JSON's "\ud83d" alone, in {"inputs": [...]}): named, not pandas' UnicodeEncodeError as a
    # server error
    with pytest.raises(ValueError, match="row 1's text holds a lone surrogate"):
        served(Predictor(multi_label(tmp_path / "m"), cpu_kernels="torch")).predict(None, ["fine", "ok \ud83d cut"])
    records = [{"question": "where", "context": context}]  # a list of records (pyfunc.predict): read as a table
    assert model.predict(None, records).equals(model.predict(None, pd.DataFrame(records)))


def test_a_served_pair_request_refuses_a_row_without_its_pair_naming_it(tmp_path):
    """A request with a text_pair column is one of pairs: a row whose pair is null or blank is refused naming the row
    and the column (batch prediction rejects it as missing_text), never answered as a single sentence beside its
    neighbours' pairs; a request of whole pairs answers what batch prediction does."""
    model = served(Predictor(multi_label(tmp_path), cpu_kernels="torch"))
    for pairs in ([None, "pair"], ["", "pair"], ["pair", "  "]):
        bad = 1 if pairs[0] == "pair" else 0
        with pytest.raises(ValueError, match=f"row {bad} has no text_pair \\(null, blank or a no-value text"):
            model.predict(None, pd.DataFrame({"text": ["hello", "world"], "text_pair": pairs}))
    with pytest.raises(ValueError, match="row 0 and 1 more has no text"):
        model.predict(None, pd.DataFrame({"text": [" ", None], "text_pair": ["a", "b"]}))
    answer = model.predict(None, pd.DataFrame({"text": ["hello", "world"], "text_pair": ["x", "y"]}))
    ours = model.predictor.predict([{"id": "0", "text_a": "hello", "text_b": "x"},
                                    {"id": "1", "text_a": "world", "text_b": "y"}])
    assert list(answer["score"]) == pytest.approx([p["score"] for p in ours], abs=1e-6)


def test_a_pair_trained_model_asks_for_every_rows_pair_not_for_a_request_without_the_column(tmp_path):
    """The advice to send rows without a pair in a request without the text_pair column fits a model logged before it
    recorded what it was fine-tuned on (pairs None); a model of sentence pairs refuses that request too."""
    model = served(Predictor(multi_label(tmp_path), cpu_kernels="torch"))
    model.pairs = True
    with pytest.raises(ValueError, match="row 1 has no text_pair") as refused:
        model.predict(None, pd.DataFrame({"text": ["hello", "world"], "text_pair": ["x", None]}))
    assert "fine-tuned on sentence pairs, every row needs its pair" in str(refused.value)
    assert "without the column" not in str(refused.value)


def test_a_boolean_text_is_refused_naming_its_row_not_read_as_the_word_true(tmp_path):
    """JSON's true in {"inputs": [true]} or a record's text was answered as the text "True"; batch prediction rejects
    it as missing_text (pipelines/tasks/cells.cell_text keeps a boolean as it is)."""
    model = served(Predictor(multi_label(tmp_path), cpu_kernels="torch"))
    with pytest.raises(ValueError, match="multi-label: row 0's text is true, a boolean, not text"):
        model.predict(None, [True])
    with pytest.raises(ValueError, match="row 1's text is false, a boolean, not text"):
        model.predict(None, pd.DataFrame({"text": ["fine", False]}))
    with pytest.raises(ValueError, match="row 0's text_pair is true, a boolean, not text"):
        model.predict(None, pd.DataFrame({"text": ["fine"], "text_pair": [True]}))


def test_a_served_cell_is_the_text_batch_prediction_reads():
    """A served request's cell (a pandas column's value) is the text batch prediction's reader makes of the same value
    in a file (cells.cell_text of what Arrow reads): bytes decoded, an integer's digits, a float32 widened as Arrow
    widens it. The served model's own rule read a float32 0.1 as "0.1", which batch prediction reads as
    0.10000000149011612: one input, two answers."""
    import pyarrow as pa

    from jobs.inference.served_model import as_text
    from pipelines.tasks.cells import cell_text

    frame = pd.DataFrame({"bytes": [b"caf\xc3\xa9 au lait"], "f32": np.array([0.1], np.float32), "f64": [101.0],
                          "int": [7], "text": ["a fine day"]})
    for column, values in frame.items():
        (read,) = pa.Table.from_pandas(frame[[column]]).column(0).to_pylist()
        assert as_text(values[0]) == cell_text(read), column
    assert as_text(frame["f32"][0]) == "0.10000000149011612" and as_text(frame["int"][0]) == "7"


def test_a_pair_trained_classifier_is_served_and_predicted_on_its_pairs(tmp_path):
    """A classifier fine-tuned on sentence pairs (MRPC, NLI, a user's text/text_pair columns): the transformers
    pipeline MLflow would serve it with has a signature of one text column, which drops text_pair from every request,
    and the model would answer from the first sentence alone. It is served by our pyfunc on both columns, answers
    what batch prediction computes for the pair, and refuses a request without pairs; a prediction job of it, and of
    a single-sentence model, refuses the other form of input, from the `data.inputs` tag its version carries."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from bert_core.config import ConfigError
    from jobs.inference.model_ref import check_inputs
    from jobs.predict import resolve_model
    from jobs.registry import tracking
    from jobs.registry.model_logging import log_release_model
    from pipelines.tasks.roles import TaskRows

    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=2, id2label={0: "neg", 1: "pos"},
                  label2id={"neg": 0, "pos": 1})
    pairs = TaskRows(train=[], select=[{"text_a": "a fine day in the park", "text_b": "never again"}],
                     evaluation={"dev": []})
    assert pairs.inputs() == "text,text_pair"
    assert TaskRows([], [], {"dev": [{"text_a": "x", "text_b": None}]}).inputs() == "text"
    example = tracking.input_example(pairs.select)
    assert example == [{"text": "a fine day in the park", "text_pair": "never again"}]
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = tracking.start_run(uri, "pairs", str(tmp_path / "art"), "pairs", {})
    mlflow.set_tracking_uri(uri)
    with mlflow.start_run(run_id=run_id):
        info = log_release_model(folder, "pairs", "text-classification", example)
    served_model = mlflow.pyfunc.load_model(info.model_uri)
    table = pd.DataFrame({"text": ["a fine day in the park", "the river"], "text_pair": ["never again", "a bridge"]})
    answer = served_model.predict(table)
    predictor = Predictor(folder, cpu_kernels="torch")
    ours = predictor.predict([{"id": str(i), "text_a": a, "text_b": b}
                              for i, (a, b) in enumerate(zip(table["text"], table["text_pair"]))])
    alone = predictor.predict([{"id": str(i), "text_a": a, "text_b": None} for i, a in enumerate(table["text"])])
    assert list(answer["score"]) == pytest.approx([p["score"] for p in ours], abs=1e-6)
    assert all(abs(p["score"] - q["score"]) > 1e-7 for p, q in zip(ours, alone))  # the pair changes the answer
    with pytest.raises(ValueError, match="fine-tuned on sentence pairs: send a table of text and text_pair"):
        served_model.predict(pd.DataFrame({"text": ["a fine day"]}))  # the signature's columns are optional: ours

    MlflowClient(uri).set_model_version_tag("pairs", "1", "data.inputs", pairs.inputs())
    model = resolve_model("models:/pairs/1", uri, tmp_path / "download")
    assert model.inputs == "text,text_pair"
    with pytest.raises(ConfigError, match=r"fine-tuned on sentence pairs: name the input's second text with "
                                          r"columns.text_pair=COLUMN"):
        check_inputs(model, "")
    check_inputs(model, "second")
    model.inputs = "text"
    with pytest.raises(ConfigError, match=r"fine-tuned on single sentences: drop columns.text_pair=second"):
        check_inputs(model, "second")
    model.inputs = ""  # a folder, a version registered before the tag: as before
    check_inputs(model, "") or check_inputs(model, "second")


@pytest.mark.slow  # an MLflow model logged and served (~12 s): `make test`, not `make test-fast`
def test_the_scoring_server_answers_a_refused_row_with_our_message(tmp_path):
    """MLflow's scoring server answers any error but its own with a generic 400 ("Encountered an unexpected error
    ..."), the message naming the row only inside a server traceback sent to the client. Our refusal is the
    message. MLflow's own app (its FastAPI routes), no port bound."""
    import mlflow
    from fastapi.testclient import TestClient
    from mlflow.pyfunc import scoring_server

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    with mlflow.start_run(experiment_id=mlflow.create_experiment("served", artifact_location=str(tmp_path / "art"))):
        info = mlflow.pyfunc.log_model(name="model", python_model=PredictorModel(), pip_requirements=[],
                                       artifacts={"model": multi_label(tmp_path / "m")},
                                       model_config={"text_pair": False}, input_example=["fine", "good"])
    client = TestClient(scoring_server.init(mlflow.pyfunc.load_model(info.model_uri)))
    answer = client.post("/invocations", json={"inputs": ["fine", "   "]})
    assert answer.status_code == 400
    body = answer.json()
    assert "multi-label: row 1 has no text (null, blank" in body["message"] and "Traceback" not in str(body)
    assert client.post("/invocations", json={"inputs": ["fine"]}).status_code == 200


def test_a_served_model_of_single_texts_reads_a_table_by_its_column_names(tmp_path):
    """Logged with the signature MLflow inferred from a list of texts (one unnamed column), the scoring server kept
    a table's first column whatever its name: {"id": "r1", "text": ...} was answered from "r1", and a text_pair
    column, which a model of single texts refuses, was dropped unseen; columns sent as {"inputs": {"text": [...]}} or
    {"instances": [...]} were read as their names. Logged as the job logs it, through MLflow's own app (no port
    bound)."""
    import mlflow
    from fastapi.testclient import TestClient
    from mlflow.pyfunc import scoring_server

    from jobs.registry.model_logging import log_release_model

    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=3, problem_type="multi_label_classification",
                  id2label={0: "a", 1: "b", 2: "c"}, label2id={"a": 0, "b": 1, "c": 2})  # scores that vary by text
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    with mlflow.start_run(experiment_id=mlflow.create_experiment("texts", artifact_location=str(tmp_path / "art"))):
        info = log_release_model(folder, None, "text-classification", ["hello", "a fine day"],
                                 settings={"multi_label_threshold": 0.1})
    client = TestClient(scoring_server.init(mlflow.pyfunc.load_model(info.model_uri)))

    def scores(body) -> list:
        answer = client.post("/invocations", json=body)
        assert answer.status_code == 200, answer.text
        return [row["score"] for row in answer.json()["predictions"]]

    text = scores({"inputs": ["a fine day"]})
    assert scores({"dataframe_records": [{"id": "r1", "text": "a fine day"}]}) == text != scores({"inputs": ["r1"]})
    assert scores({"inputs": "a fine day"}) == text  # one text, not a list: as the inferred schema took it
    # columns by name, as MLflow's columnar and row forms send them: were read as their names (one answer, "text")
    two = scores({"inputs": ["a fine day", "hello"]})
    assert scores({"inputs": {"text": ["a fine day", "hello"]}}) == two == scores(
        {"instances": [{"text": "a fine day"}, {"text": "hello"}]}) != scores({"inputs": ["text"]}) * 2
    assert list(mlflow.pyfunc.load_model(info.model_uri).predict("a fine day")["score"]) == text
    refused = client.post("/invocations", json={"dataframe_records": [{"text": "a fine day", "text_pair": "x"}]})
    assert refused.status_code == 400 and "single sentences: send no text_pair column" in refused.json()["message"]


def scoring_app(tmp_path, empty_store, log):
    """MLflow's scoring server (its FastAPI app, no port bound) over the model `log()` logs in a run, in a copy of
    the empty store; and the logged model's info."""
    import mlflow
    from fastapi.testclient import TestClient
    from mlflow.pyfunc import scoring_server

    shutil.copy(empty_store, tmp_path / "mlflow.db")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    with mlflow.start_run(experiment_id=mlflow.create_experiment("served", artifact_location=str(tmp_path / "art"))):
        info = log()
    return TestClient(scoring_server.init(mlflow.pyfunc.load_model(info.model_uri))), info


def agree(served: list[dict], ours: list[dict]) -> None:
    """Served rows are batch prediction's: the same columns, text alike, numbers within 1e-5 (`scores`: JSON)."""
    assert [sorted(s) for s in served] == [sorted(o) for o in ours]
    for s, o in zip(served, ours):
        for k, v in o.items():
            if k == "scores":
                assert json.loads(s[k]) == pytest.approx(json.loads(v), abs=1e-5)
            else:
                assert s[k] == (pytest.approx(v, abs=1e-5) if isinstance(v, float) else v), k


@pytest.mark.parametrize("head", ["classification", "regression", "one logit"])
def test_a_single_text_classifier_or_regressor_is_served_as_batch_prediction_answers(tmp_path, empty_store, head):
    """Logged as a transformers pipeline model, a plain classifier answered a blank text with a label (batch
    prediction: missing_text), a null text or a table with an `id` column with a server error, and dropped a
    text_pair column unseen; a regressor answered {"label": "LABEL_0", "score": 3.6} where batch prediction writes
    {"value": 3.6}. Served as our pyfunc, each answers batch prediction's columns and refuses its rows; its download
    is still a folder a plain transformers pipeline loads, answering the same (a one-logit model without a problem
    type: a label and its sigmoid, as kinds.model_kind reads it)."""
    import mlflow
    import transformers

    from jobs.finetune import find_hf_folder
    from jobs.inference.kinds import OUTPUT_COLUMNS, SERVED_COLUMNS, folder_kind
    from jobs.registry.model_logging import log_release_model

    config = {"classification": {"num_labels": 3, "id2label": dict(enumerate(LABELS)),
                                 "label2id": {v: i for i, v in enumerate(LABELS)}},
              "regression": {"num_labels": 1, "problem_type": "regression"}, "one logit": {"num_labels": 1}}[head]
    folder = tiny(tmp_path, "BertForSequenceClassification", initializer_range=1.0, **config)  # answers that vary
    kind = folder_kind(folder)
    assert kind == ("regression" if head == "regression" else "classification")
    client, info = scoring_app(tmp_path, empty_store, lambda: log_release_model(
        folder, None, "text-classification", ["a fine day in the park", "hello"]))
    texts = ["a fine day in the park", "terrible, never again", "ok"]
    rows = [{"id": str(i), "text_a": t, "text_b": None} for i, t in enumerate(texts)]
    predictor = Predictor(folder)
    ours = [{**{k: p[k] for k in OUTPUT_COLUMNS[kind]}, "truncated": e["truncated"]}
            for p, e in zip(predictor.predict(rows), predictor.encode(rows))]
    assert [sorted(p) for p in ours] == [sorted(SERVED_COLUMNS[kind])] * len(texts)
    assert info.signature.outputs.input_names() == list(SERVED_COLUMNS[kind])  # what the version says it answers
    records = [{"id": f"r{i}", "text": t} for i, t in enumerate(texts)]
    for body in ({"inputs": texts}, {"dataframe_records": records}, {"inputs": records}):
        answer = client.post("/invocations", json=body)
        assert answer.status_code == 200, answer.text
        agree(answer.json()["predictions"], ours)
    for body, refused in (({"inputs": ["a fine day", "   "]}, "row 1 has no text"),
                          ({"dataframe_records": [{"text": "a fine day"}, {"text": None}]}, "row 1 has no text"),
                          ({"dataframe_records": [{"text": "a fine day", "text_pair": "never"}]},
                           "fine-tuned on single sentences: send no text_pair column"),
                          ({"inputs": ["a fine day", {"text": "ok"}]}, "inputs mix records and texts (row 1 is a")):
        answer = client.post("/invocations", json=body)
        assert answer.status_code == 400 and f"{kind}: " in answer.json()["message"], answer.text
        assert refused in answer.json()["message"] and "Traceback" not in answer.text, answer.text

    download = mlflow.artifacts.download_artifacts(info.model_uri, dst_path=str(tmp_path / "download"))
    pipe = transformers.pipeline("text-classification", model=str(find_hf_folder(Path(download))))  # none of ours
    theirs = pipe(texts, truncation=True, max_length=64)  # tiny() keeps MiniLM's tokenizer limit: 512
    assert [p.get("value", p.get("score")) for p in ours] == pytest.approx([t["score"] for t in theirs], abs=1e-5)
    if kind == "classification":
        assert [p["label"] for p in ours] == [t["label"] for t in theirs]


def test_a_served_answer_beside_a_row_without_one_is_json_with_nulls(tmp_path, empty_store):
    """A question-answering request whose rows are answered and not (a null question, a context of a zero-width space
    alone): pandas made the unanswered row's None score NaN, and MLflow wrote a bare NaN, which no JSON parser that
    keeps to the standard reads. The answer is JSON, null where there is no score."""
    from jobs.registry.model_logging import log_qa_model

    folder = tiny(tmp_path, "BertForQuestionAnswering")
    context = "the river flows past Paris and London"
    client, _ = scoring_app(tmp_path, empty_store, lambda: log_qa_model(
        folder, None, [{"question": "where does it flow", "context": context}],
        {"max_seq_len": 64, "doc_stride": 16, "max_query_length": 16}))

    def strict(constant):
        raise ValueError(f"not JSON: {constant}")

    for records in ([{"question": None, "context": context}, {"question": "where", "context": context}],
                    [{"question": "where", "context": "\u200b"}, {"question": "where", "context": context}]):
        answer = client.post("/invocations", json={"dataframe_records": records})
        assert answer.status_code == 200, answer.text
        unanswered, answered = json.loads(answer.content, parse_constant=strict)["predictions"]
        assert (unanswered["answer"], unanswered["answer_start"], unanswered["score"]) == ("", -1, None)  # no span
        assert isinstance(answered["score"], float) and isinstance(answered["null_score"], float)


def test_a_served_tagger_refuses_no_value_texts_a_text_pair_and_records_in_inputs(tmp_path):
    """Batch prediction rejects a text that says it holds no value ("nan", "#N/A": pipelines/tasks/cells.no_value) as
    missing_text; a served tagger tagged it. A text_pair column, which a tagger does not read, was dropped unseen; a
    record among texts in {"inputs": [...]} was refused with a hint about words. Each is refused naming the row and
    what to send (records alone are a table); a classifier refuses a no-value text alike, and a question answering row
    holding one answers no answer."""
    from jobs.inference.kinds import QASettings
    from jobs.inference.qa_model import QuestionAnswering

    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                  label2id={v: i for i, v in enumerate(TAGS)})
    tagger = served(Predictor(folder, cpu_kernels="torch"))
    for texts, bad in ((["Marie Curie", "nan"], "row 1"), ([" #N/A ", "Paris", "NaN"], "row 0 and 1 more")):
        with pytest.raises(ValueError, match=f"token-classification: {bad} has no text"):
            tagger.predict(None, texts)
    with pytest.raises(ValueError, match="token-classification: a tagger reads one text per row: send no text_pair"):
        tagger.predict(None, pd.DataFrame({"text": ["Marie Curie"], "text_pair": ["in Paris"]}))
    with pytest.raises(ValueError, match=r"token-classification: the request's inputs mix records and texts \(row 1 "
                                         r"is a record\): send records alone, read as a table, or texts alone"):
        tagger.predict(None, ["Paris", {"text": "Marie Curie"}])
    assert tagger.predict(None, [{"text": "Marie Curie"}]).equals(tagger.predict(None, ["Marie Curie"]))
    assert list(tagger.predict(None, ["Marie Curie", "none"]).columns) == ["entities"]  # "none": a word
    with pytest.raises(ValueError, match="multi-label: row 0 has no text"):
        served(Predictor(multi_label(tmp_path / "m"), cpu_kernels="torch")).predict(None, ["#DIV/0!"])
    reader = QuestionAnswering()
    reader.predictor = Predictor(tiny(tmp_path / "qa", "BertForQuestionAnswering"), cpu_kernels="torch",
                                 qa=QASettings(max_seq_len=64, doc_stride=16, max_query_length=16))
    answer = reader.predict(None, pd.DataFrame({"question": ["#N/A"], "context": ["the river flows past Paris"]}))
    assert (answer["answer"][0], answer["answer_start"][0]) == ("", -1)


def test_a_served_input_cut_to_the_models_length_says_so_as_batch_prediction_counts_it(tmp_path):
    """Batch prediction writes `truncated` for a text cut to the model's length (a QA question cut to
    max_query_length); the served answer for the same text said nothing. It answers `truncated` too, beside the
    kind's columns, row for row as batch prediction's encoding decides it (a tagger's long text is windowed, never
    cut: no such column)."""
    from jobs.inference.kinds import QASettings
    from jobs.inference.qa_model import QuestionAnswering

    long = " ".join(["the river flows past Paris and London"] * 12)  # ~100 pieces: over 64 positions
    model = served(Predictor(multi_label(tmp_path / "m"), cpu_kernels="torch"))
    answer = model.predict(None, ["a fine day", long, "ok"])
    assert list(answer.columns) == ["labels", "score", "scores", "truncated"]
    assert list(answer["truncated"]) == [False, True, False]
    rows = [{"id": str(i), "text_a": t, "text_b": None} for i, t in enumerate(["a fine day", long, "ok"])]
    assert list(answer["truncated"]) == [e["truncated"] for e in model.predictor.encode(rows)]
    assert list(answer["labels"]) == [p["labels"] for p in model.predictor.predict(rows)]

    reader = QuestionAnswering()
    reader.predictor = Predictor(tiny(tmp_path / "qa", "BertForQuestionAnswering"), cpu_kernels="torch",
                                 qa=QASettings(max_seq_len=64, doc_stride=16, max_query_length=16))
    question = "where does the long river that flows past the old cities of Paris and London flow to in the end"
    answer = reader.predict(None, pd.DataFrame({"question": ["where", question, None],
                                                "context": ["the river flows past Paris"] * 3}))
    assert list(answer["truncated"]) == [False, True, False]  # the question over 16 pieces; no question: no answer
    assert list(answer.columns) == ["answer", "answer_start", "score", "null_score", "truncated"]
