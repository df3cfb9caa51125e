"""A registered model served over HTTP as users serve it: `mlflow models serve -m models:/NAME@champion --env-manager
local` on 127.0.0.1, a real subprocess. Its answers equal what batch prediction writes (jobs/inference/predictor.py)
for the same inputs, inputs far longer than the model's 64 positions included (truncated for classification,
windowed for token classification, the task's windows for question answering: every kind is served by our pyfunc
over the predictor, jobs/inference/served_model.py), and it keeps answering after them."""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from jobs.inference.predictor import Predictor, QASettings
from jobs.registry import tracking
from tests.mlflow_server import MlflowServer, start_server
from tests.readme import readme
from tests.unit.test_predictor import LABELS, TAGS, tiny

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent  # `mlflow` and the `uvicorn` that `mlflow models serve` runs
MLFLOW = str(BIN / "mlflow")
LONG = " ".join(["the river flows past Paris and London"] * 43)  # 301 words: far over 64 positions
LONGER = " ".join(["Marie Curie worked with Pierre Curie at the Sorbonne in Paris"] * 30)  # 330 words
SHORT = ["a fine day in the park", "terrible, never again", "Marie Curie worked in Paris with Pierre Curie", "ok"]


class ModelServer(MlflowServer):
    """`mlflow models serve` of `model_uri` from the registry at `tracking_uri`: MlflowServer's start (waits for
    GET /health, which the scoring server answers once the model is loaded) and stop (SIGKILL to its group)."""

    def __init__(self, root: Path, port: int, model_uri: str, tracking_uri: str):
        super().__init__(root, port)
        self.model_uri, self.tracking_uri = model_uri, tracking_uri

    def command(self) -> list[str]:
        """README.md's command, its model and port the ones given here."""
        name = self.model_uri.removeprefix("models:/").removesuffix("@champion")
        words = readme("mlflow models serve", {"NAME": name, "-p 5001": f"-p {self.port}"})
        assert words[words.index("-m") + 1] == self.model_uri, words
        return [MLFLOW, *words[1:]]

    def environment(self) -> dict:
        return {**os.environ, "MLFLOW_TRACKING_URI": self.tracking_uri, "HF_HUB_OFFLINE": "1",
                "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    def invoke(self, payload: dict) -> tuple[int, dict]:
        request = urllib.request.Request(f"{self.uri}/invocations", data=json.dumps(payload).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:  # 4xx/5xx: the scoring server's error JSON
            return e.code, json.loads(e.read() or b"{}")

    @staticmethod
    def error(body: dict) -> str:
        """A failed request's message and the end of the traceback the scoring server sends with it."""
        return f"{body.get('message', body)}\n{body.get('stack_trace', '')[-800:]}"

    def listening(self) -> list[tuple[str, int]]:
        """(address, port) of every listening socket of the server's process tree."""
        root = psutil.Process(self.proc.pid)
        return [(c.laddr.ip, c.laddr.port) for p in [root, *root.children(recursive=True)]
                for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]


def champion(root: Path, folder: str, name: str, task: str, input_example: list | None = None,
             version_tags: dict | None = None) -> ModelServer:
    """`folder` registered as NAME@champion (start_run + finish_run, as the fine-tuning job does) in a SQLite store
    under `root`, and served."""
    uri = f"sqlite:///{root}/mlflow.db"
    run_id = tracking.start_run(uri, "serve", str(root / "art"), name, {"task": task})
    info = tracking.finish_run(uri, run_id, {}, folder, name, "champion", task=task, version_tags=version_tags,
                               input_example=input_example or ["a fine day", "Marie Curie in Paris"])
    assert (info["registered_model"], info["alias"]) == (name, "champion")
    return start_server(root, ModelServer, model_uri=f"models:/{name}@champion", tracking_uri=uri)


@pytest.fixture(scope="module", params=["BertForSequenceClassification", "ModernBertForSequenceClassification"])
def classifier(tmp_path_factory, request):
    """Either recipe's classifier (the modern recipe's fine-tunes are ModernBertForSequenceClassification)."""
    root = tmp_path_factory.mktemp("serve-cls")
    # initializer_range 1.0: a random head whose labels differ between inputs (at 0.02 every input is ~1/3 "pos")
    folder = tiny(root, request.param, num_labels=3, id2label=dict(enumerate(LABELS)),
                  label2id={v: i for i, v in enumerate(LABELS)}, initializer_range=1.0)
    server = champion(root, folder, "serve-cls", "text-classification")
    try:
        yield server, Predictor(folder)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-ner")
    folder = tiny(root, "BertForTokenClassification", num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                  label2id={v: i for i, v in enumerate(TAGS)})
    server = champion(root, folder, "serve-ner", "token-classification")
    try:
        yield server, Predictor(folder)
    finally:
        server.stop()


def test_served_classifier_answers_as_batch_prediction_long_inputs_truncated(classifier):
    server, predictor = classifier
    assert {ip for ip, _ in server.listening()} == {"127.0.0.1"} and server.port in {p for _, p in server.listening()}
    for texts in ([SHORT[0], LONG, *SHORT[1:]], [LONGER, "ok"]):  # a second request, after a long input
        rows = [{"id": str(i), "text_a": t} for i, t in enumerate(texts)]
        assert any(e["truncated"] for e in predictor.encode(rows))  # over 64 positions: the pipeline must cut it
        status, body = server.invoke({"inputs": texts})
        assert status == 200, server.error(body)
        ours = predictor.predict(rows)
        served = body["predictions"]
        assert [p["label"] for p in served] == [p["label"] for p in ours]
        assert [p["score"] for p in served] == pytest.approx([p["score"] for p in ours], abs=1e-4)
        assert [p["truncated"] for p in served] == [e["truncated"] for e in predictor.encode(rows)]  # as batch counts
    assert len({p["label"] for p in predictor.predict([{"id": t, "text_a": t} for t in [*SHORT, LONG]])}) > 1


def test_served_tagger_answers_as_batch_prediction_long_inputs_windowed(tagger):
    """The served answer per input is batch prediction's: its entities (JSON) from the same predictor, windows
    merged after each window's "O" groups are left out (an "O" stretch would drop an entity one window found)."""
    server, predictor = tagger
    assert {ip for ip, _ in server.listening()} == {"127.0.0.1"} and server.port in {p for _, p in server.listening()}
    for texts in ([SHORT[2], LONG, *SHORT[:2]], [LONGER, "ok"]):  # a second request, after a long input
        rows = [{"id": str(i), "text": t} for i, t in enumerate(texts)]
        windows = [len(e["windows"]) for e in predictor.encode(rows)]
        assert max(windows) > 1  # over 64 positions: tagged in overlapping windows
        status, body = server.invoke({"inputs": texts})
        assert status == 200, server.error(body)
        entities = [json.loads(p["entities"]) for p in predictor.predict(rows)]
        assert all(entities), "every input has an entity (see the test below for one without)"
        assert [served(p) for p in body["predictions"]] == entities
        long = windows.index(max(windows))  # its entities reach past the first window's 64 pieces
        first_window = predictor.tokenizer(texts[long], truncation=True, return_offsets_mapping=True)
        assert max(e["end"] for e in entities[long]) > max(end for _, end in first_window["offset_mapping"])

    # README.md's request as written (curl, its JSON body), to this server's port
    words = readme("curl -s http://127.0.0.1:5001/invocations", {"127.0.0.1:5001": f"127.0.0.1:{server.port}"})
    asked = subprocess.run(words, capture_output=True, text=True, timeout=120, check=True)
    texts = json.loads(words[words.index("-d") + 1])["inputs"]
    entities = [json.loads(p["entities"]) for p in predictor.predict([{"id": t, "text": t} for t in texts])]
    assert [served(p) for p in json.loads(asked.stdout)["predictions"]] == entities


def served(answer: dict) -> list[dict]:
    """A served tagger's entities for one input (its `entities` column, JSON as batch prediction writes it)."""
    return json.loads(answer["entities"])


@pytest.fixture(scope="module")
def quiet_tagger(tmp_path_factory):
    """A tagger whose head leans to "O" (its bias raised), so some inputs hold no entity and some do."""
    import torch
    import transformers

    root = tmp_path_factory.mktemp("serve-ner-quiet")
    folder = tiny(root, "BertForTokenClassification", num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                  label2id={v: i for i, v in enumerate(TAGS)})
    model = transformers.BertForTokenClassification.from_pretrained(folder)
    with torch.no_grad():
        model.classifier.bias[0] += 0.2  # about half of these one- to three-word inputs tag nothing
    model.save_pretrained(folder)
    server = champion(root, folder, "serve-ner-quiet", "token-classification")
    try:
        yield server, Predictor(folder)
    finally:
        server.stop()


def test_served_tagger_answers_a_sentence_without_entities(quiet_tagger):
    """MLflow 3.17's served transformers tagger fails a whole request (400, IndexError in its
    _parse_tokenizer_output, which reads [0] of each input's list) when an input answers nothing. Ours answers []
    for a sentence without entities, as batch prediction does, and the request succeeds."""
    server, predictor = quiet_tagger
    words = "river city paris table apple music night green house water stone light road cloud field".split()
    rows = [{"id": str(i), "text": " ".join(words[i:i + n])} for n in (1, 2, 3) for i in range(len(words))]
    entities = [json.loads(p["entities"]) for p in predictor.predict(rows)]
    empty = next(r["text"] for r, ents in zip(rows, entities) if not ents)
    tagged = next(r["text"] for r, ents in zip(rows, entities) if ents)
    texts = [empty, tagged]
    status, body = server.invoke({"inputs": texts})
    assert status == 200, server.error(body)
    assert served(body["predictions"][0]) == []
    ours = [json.loads(p["entities"]) for p in predictor.predict([{"id": t, "text": t} for t in texts])]
    assert [served(p) for p in body["predictions"]] == ours


QA = {"max_seq_len": 64, "doc_stride": 16, "max_query_length": 16}  # the fine-tuning task's windows, as registered


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    """A question-answering model registered as the fine-tuning job registers one: with its task config."""
    root = tmp_path_factory.mktemp("serve-qa")
    folder = tiny(root, "BertForQuestionAnswering", initializer_range=1.0)  # spans that differ between inputs
    example = [{"question": "Where did Marie Curie work?", "context": SHORT[2]}]
    server = champion(root, folder, "serve-qa", "question-answering", input_example=example,
                      version_tags={"task_config": json.dumps({"name": "squad", **QA})})
    try:
        yield server, Predictor(folder, qa=QASettings(**QA))
    finally:
        server.stop()


def test_served_reader_answers_as_batch_prediction_long_contexts_windowed(reader):
    """POST /invocations with question and context records: the same answers, starts and scores as batch
    prediction with the registered task's windows, a context of 330 words (many windows of 64) included."""
    server, predictor = reader
    assert {ip for ip, _ in server.listening()} == {"127.0.0.1"} and server.port in {p for _, p in server.listening()}
    questions = ["Where did Marie Curie work?", "Who worked with her?", "What flows past Paris?"]
    for contexts in ([SHORT[2], LONGER, LONG], [SHORT[0], LONGER, SHORT[3]]):  # a second request, after long ones
        records = [{"question": q, "context": c} for q, c in zip(questions, contexts)]
        rows = [{"id": str(i), **r} for i, r in enumerate(records)]
        assert max(len(e["windows"]) for e in predictor.encode(rows)) > 1  # the long context: several windows
        status, body = server.invoke({"dataframe_records": records})
        assert status == 200, server.error(body)
        ours = predictor.predict(rows)
        served = body["predictions"]
        assert [p["answer"] for p in served] == [p["answer"] for p in ours]
        assert [p["answer_start"] for p in served] == [p["answer_start"] for p in ours]
        assert [p["score"] for p in served] == pytest.approx([p["score"] for p in ours], abs=1e-4)
        assert all(p["answer"] == c[p["answer_start"]:p["answer_start"] + len(p["answer"])]
                   for p, c in zip(served, contexts) if p["answer_start"] >= 0)  # spans of the context
    status, body = server.invoke({"dataframe_records": [{"question": "Where?"}]})  # the model refuses it
    assert status == 400 and "missing inputs ['context']" in server.error(body)
