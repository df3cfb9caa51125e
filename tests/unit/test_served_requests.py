"""jobs/inference/served_model.py: requests beyond a list of rows to predict, through MLflow's scoring app (its
FastAPI routes, no port bound) where MLflow's parsing and signature take part: an empty request of every kind, a
table that names a column twice, inputs that are no list, records in inputs, and a multi-label threshold sent as a
param."""

import json

import numpy as np
import pandas as pd
import pytest
from test_predictor import TAGS, tiny
from test_served_model import multi_label, scoring_app, served

from jobs.inference.kinds import SERVED_COLUMNS, QASettings
from jobs.inference.predictor import Predictor
from jobs.inference.served_model import BadRequest

WINDOWS = {"max_seq_len": 64, "doc_stride": 16, "max_query_length": 16}


def posted(client, body) -> tuple[int, dict]:
    answer = client.post("/invocations", json=body)
    return answer.status_code, answer.json()


def test_an_empty_request_is_answered_with_no_predictions_in_every_form(tmp_path, empty_store):
    """{"inputs": []} answered [], {"dataframe_records": []} a 400 ("needs a column text ...; got "): MLflow makes the
    latter a table of no columns, and the served model looked for its text column before seeing it had no row. A
    model of sentence pairs or a QA model answered every empty form with a 400 (its inferred signature's "missing
    inputs ['text', 'text_pair']"): it is logged without an input schema, as a model of single texts, and refuses a
    missing column itself (optional columns in the schema would have made a list of texts a table of neither, answered
    with no row). No row is nothing to refuse: every form of an empty request answers no prediction, for every kind."""
    from jobs.inference.qa_model import QuestionAnswering
    from jobs.registry.model_logging import log_qa_model, log_release_model

    for name in ("texts", "pairs", "qa"):
        (tmp_path / name).mkdir()
    empties = ({"inputs": []}, {"dataframe_records": []}, {"instances": []}, {"dataframe_split": {"columns": [],
                                                                                                   "data": []}})
    texts, _ = scoring_app(tmp_path / "texts", empty_store, lambda: log_release_model(
        multi_label(tmp_path / "m"), None, "text-classification", ["hello", "a fine day"]))
    pairs, _ = scoring_app(tmp_path / "pairs", empty_store, lambda: log_release_model(
        tiny(tmp_path / "p", "BertForSequenceClassification", num_labels=2), None, "text-classification",
        [{"text": "a fine day", "text_pair": "never again"}]))
    reader, _ = scoring_app(tmp_path / "qa", empty_store, lambda: log_qa_model(
        tiny(tmp_path / "q", "BertForQuestionAnswering"), None, [{"question": "where?", "context": "in Paris"}],
        WINDOWS))
    for client in (texts, pairs, reader):
        for body in empties:
            assert posted(client, body) == (200, {"predictions": []}), body
    status, refused = posted(reader, {"dataframe_records": [{"question": "where?"}]})  # a missing column: still a 400
    assert status == 400 and "question answering needs the columns question and context: the request is missing " \
                              "inputs ['context']" in refused["message"], refused
    status, refused = posted(pairs, {"dataframe_records": [{"text": "a fine day"}]})
    assert status == 400 and "fine-tuned on sentence pairs: send a table of text and text_pair" in refused["message"]
    status, refused = posted(pairs, {"dataframe_records": [{"text_pair": "never again"}]})  # not read as the texts
    assert status == 400 and "classification: a text_pair column needs its text column" in refused["message"]
    status, refused = posted(pairs, {"inputs": ["a fine day", "never again"]})
    assert status == 400 and "fine-tuned on sentence pairs" in refused["message"]
    status, refused = posted(reader, {"inputs": ["where?"]})
    assert status == 400 and "missing inputs ['question', 'context']" in refused["message"]
    assert posted(pairs, {"dataframe_records": [{"text": "a", "text_pair": "b"}]})[0] == 200
    assert posted(reader, {"dataframe_records": [{"question": "where?", "context": "in Paris"}]})[0] == 200

    qa = QuestionAnswering()
    qa.predictor = Predictor(tiny(tmp_path / "qa", "BertForQuestionAnswering"), cpu_kernels="torch",
                             qa=QASettings(**WINDOWS))
    tagger = served(Predictor(tiny(tmp_path / "ner", "BertForTokenClassification", num_labels=len(TAGS),
                                   id2label=dict(enumerate(TAGS)), label2id={v: i for i, v in enumerate(TAGS)}),
                              cpu_kernels="torch"))
    for model in (qa, tagger):
        answer = model.predict(None, pd.DataFrame.from_records([]))  # what dataframe_records [] becomes
        assert len(answer) == 0 and list(answer.columns) == list(SERVED_COLUMNS[model.predictor.kind])


def test_a_column_named_twice_is_refused_naming_it(tmp_path):
    """{"dataframe_split": {"columns": ["text", "text"], ...}} (a DataFrame after pd.concat(axis=1)): `table["text"]`
    was a table, whose rows were read as its column names: one row sent, two answers, each for the word "text"."""
    from jobs.inference.qa_model import QuestionAnswering

    model = served(Predictor(tiny(tmp_path, "BertForSequenceClassification", num_labels=2), cpu_kernels="torch"))
    with pytest.raises(BadRequest, match=r"classification: the request names the column text twice; send each once"):
        model.predict(None, pd.DataFrame([["a fine day", "terrible"]], columns=["text", "text"]))
    with pytest.raises(BadRequest, match=r"names the columns text, text_pair twice"):
        model.predict(None, pd.DataFrame([["a", "b", "a", "b"]], columns=["text", "text_pair"] * 2))
    qa = QuestionAnswering()
    qa.predictor, qa.pairs = Predictor(tiny(tmp_path / "qa", "BertForQuestionAnswering"), cpu_kernels="torch"), None
    with pytest.raises(BadRequest, match=r"question-answering: the request names the column context twice"):
        qa.predict(None, pd.DataFrame([["where?", "a", "b"]], columns=["question", "context", "context"]))


def test_inputs_that_are_no_list_are_refused_naming_them(tmp_path):
    """{"inputs": null} (a client's unset list), 5 or true: MLflow makes each a 0-d array, and the served model failed
    on it with a TypeError, answered with MLflow's generic "unexpected error" and a server traceback."""
    model = served(Predictor(tiny(tmp_path, "BertForSequenceClassification", num_labels=2), cpu_kernels="torch"))
    for value, shown in ((np.array(None, dtype=object), "null"), (np.array(5), "5"), (np.array(True), "true"),
                         (2.5, "2.5")):
        with pytest.raises(BadRequest, match=rf"classification: the request's inputs are {shown}, not a list of texts "
                                             r"or a table"):
            model.predict(None, value)
    assert len(model.predict(None, np.array("a fine day"))) == 1  # one text: as before


def test_bytes_cells_are_read_as_their_utf8_text_as_batch_prediction_reads_them(tmp_path):
    """pyfunc.predict(pd.read_parquet(f)) of a binary text column (older Hive / Impala writers): each text was
    answered from its repr "b'a fine day'", batch prediction from the decoded text; bytes that are no UTF-8 are
    refused, naming the row, as batch prediction rejects them (invalid_utf8)."""
    from jobs.inference.qa_model import QuestionAnswering

    predictor = Predictor(tiny(tmp_path, "BertForSequenceClassification", num_labels=2), cpu_kernels="torch")
    model = served(predictor)
    texts = ["a fine day", "terrible, never again"]
    as_bytes = model.predict(None, pd.DataFrame({"text": [t.encode() for t in texts]}))
    assert as_bytes.to_dict("records") == model.predict(None, pd.DataFrame({"text": texts})).to_dict("records")
    pairs = pd.DataFrame({"text": [b"a fine day"], "text_pair": [b"never again"]})
    assert model.predict(None, pairs).to_dict("records") == model.predict(
        None, pd.DataFrame({"text": ["a fine day"], "text_pair": ["never again"]})).to_dict("records")
    with pytest.raises(BadRequest, match=r"classification: row 1's text is bytes that are no UTF-8 text"):
        model.predict(None, pd.DataFrame({"text": [b"fine", b"caf\xe9"]}))
    with pytest.raises(BadRequest, match=r"row 0 has no text"):
        model.predict(None, pd.DataFrame({"text": [b"  "]}))
    qa = QuestionAnswering()
    qa.predictor, qa.pairs = Predictor(tiny(tmp_path / "qa", "BertForQuestionAnswering"), cpu_kernels="torch"), None
    row = {"question": "where is it?", "context": "it is in paris"}
    assert qa.predict(None, pd.DataFrame([{k: v.encode() for k, v in row.items()}])).to_dict("records") == qa.predict(
        None, pd.DataFrame([row])).to_dict("records")


def test_a_served_multi_label_model_takes_a_threshold_param(tmp_path, empty_store):
    """{"params": {"threshold": 0.99}} was dropped by MLflow before the model (a warning in the server's log alone),
    and the answer kept the trained threshold while the client took it for its own. A multi-label model is logged
    with a `threshold` param, defaulting to the trained one, as batch prediction's `threshold=` overrides it; one
    outside (0, 1) is refused naming it. (Any other param is dropped by MLflow, as for every model.)"""
    from jobs.registry.model_logging import log_release_model

    client, info = scoring_app(tmp_path, empty_store, lambda: log_release_model(  # probabilities .047 .119 .269
        multi_label(tmp_path / "m"), None, "text-classification", ["hello", "a fine day"],
        settings={"multi_label_threshold": 0.1}))
    assert info.signature.params.to_dict() == [{"name": "threshold", "type": "double", "default": 0.1, "shape": None}]

    def labels(**params) -> list:
        status, answer = posted(client, {"inputs": ["a fine day", "hello"], **({"params": params} if params else {})})
        assert status == 200, answer
        return [json.loads(p["labels"]) for p in answer["predictions"]]

    assert labels() == labels(threshold=0.1) == [["b", "c"]] * 2
    assert labels(threshold=0.2) == [["c"]] * 2 and labels(threshold=0.99) == [[], []]
    assert labels() == [["b", "c"]] * 2  # the next request: the model's own again
    for bad in (0.0, 1.0, 1.5):
        status, refused = posted(client, {"inputs": ["a fine day"], "params": {"threshold": bad}})
        assert status == 400 and f"multi-label: params.threshold must be in (0, 1) (leave it out for the model's " \
                                 f"own, 0.1), got {bad}" in refused["message"], refused


def test_records_in_inputs_are_read_as_a_table_by_pair_and_qa_models(tmp_path, empty_store):
    """{"inputs": [{"text": ..., "text_pair": ...}]} and {"inputs": [{"question": ..., "context": ...}]}: a pair or
    QA model logged before it had no input schema (model_logging.texts_signature) got an inferred one, whose
    enforcement made such records a table; without it they reached rows() as one column of dicts and were refused
    (a pair model: "row 0's text is a dict"; a QA model: "missing inputs ['question', 'context']", though it held
    both). Records in `inputs`, or a list of dicts given to pyfunc.predict, answer what dataframe_records answers."""
    import mlflow

    from jobs.registry.model_logging import log_qa_model, log_release_model

    pair_records = [{"text": "a fine day", "text_pair": "never again"}, {"text": "b", "text_pair": "c"}]
    qa_records = [{"question": "where?", "context": "in Paris"}, {"question": "who?", "context": None},
                  {"question": "who?", "context": "Marie in Paris"}]
    logs = {"pairs": lambda: log_release_model(
        tiny(tmp_path / "p", "BertForSequenceClassification", num_labels=2), None, "text-classification",
        pair_records[:1]), "qa": lambda: log_qa_model(tiny(tmp_path / "q", "BertForQuestionAnswering"), None,
                                                      qa_records[:1], WINDOWS)}
    for name, records in (("qa", qa_records), ("pairs", pair_records)):
        (tmp_path / name).mkdir()
        client, info = scoring_app(tmp_path / name, empty_store, logs[name])
        status, expected = posted(client, {"dataframe_records": records})
        assert status == 200 and len(expected["predictions"]) == len(records), expected
        assert posted(client, {"inputs": records}) == (200, expected)
        answered = mlflow.pyfunc.load_model(info.model_uri).predict(records)
        assert answered.to_dict(orient="records") == expected["predictions"]
    status, refused = posted(client, {"inputs": [{"text": "a fine day"}, {"text": "b", "text_pair": "c"}]})
    assert status == 400 and "classification: row 0 has no text_pair" in refused["message"], refused
    status, refused = posted(client, {"inputs": ["a fine day", {"text": "b", "text_pair": "c"}]})  # not all records
    assert status == 400 and "inputs mix records and texts (row 1 is a record)" in refused["message"], refused
