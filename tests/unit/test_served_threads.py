"""jobs/inference/served_model.py under MLflow's scoring server, which runs each request in a thread of its own
(asyncio.to_thread): requests that arrive together answer what each answers alone."""

import pickle
import threading
import time

import pandas as pd
import pytest
from test_predictor import tiny

from jobs.inference.kinds import QASettings
from jobs.inference.predictor import Predictor
from jobs.inference.qa_model import QuestionAnswering
from jobs.inference import served_model
from jobs.inference.served_model import PredictorModel

CONTEXT = "the river flows past Paris and London. " * 30  # ~240 pieces: cut or windowed by a 64-position model


def model_of(tmp_path, kind: str) -> tuple[PredictorModel, pd.DataFrame]:
    """A served model of `kind` (as load_context builds it) and a request of long and short rows."""
    if kind == "classification":
        model = PredictorModel()
        model.predictor = Predictor(tiny(tmp_path, "BertForSequenceClassification", num_labels=3,
                                         initializer_range=1.0), cpu_kernels="torch")
        table = pd.DataFrame({"text": [CONTEXT, "a fine day", CONTEXT[:100], "hello"]})
    else:
        model = QuestionAnswering()
        model.predictor = Predictor(tiny(tmp_path, "BertForQuestionAnswering", initializer_range=1.0),
                                    qa=QASettings(max_seq_len=64, doc_stride=16, max_query_length=16),
                                    cpu_kernels="torch")
        table = pd.DataFrame({"question": ["where does it flow", "where does it flow", "who"],
                              "context": [CONTEXT, CONTEXT, "Marie Curie worked in Paris"]})
    model.pairs = None
    return model, table


@pytest.mark.parametrize("kind", ["classification", "question-answering"])
def test_requests_at_once_are_answered_one_at_a_time_as_each_alone(tmp_path, monkeypatch, kind):
    """The fast tokenizer's truncation and padding are state of the tokenizer, which each call sets (a text is
    tokenized truncated, then not, to count the cut; QA windows padded, then not): two requests in it at once read each
    other's. A long text went uncut into a 64-position model (a RuntimeError, answered with MLflow's 400 "unexpected
    error"), a question got a span of misaligned windows (a wrong answer, status 200). Deterministically: a second
    request never enters the tokenizer while another is in it; and 8 threads of requests answer what the model does
    alone."""
    model, table = model_of(tmp_path, kind)
    alone = model.predict(None, table).to_json()
    tokenizer = type(model.predictor.tokenizer)
    call = tokenizer.__call__
    both = threading.Barrier(2, timeout=1)
    met = []

    def meeting(self, *args, **kwargs):
        try:
            both.wait()  # passes when two requests are in the tokenizer at once; breaks after 1 s alone in it
            met.append(True)
        except threading.BrokenBarrierError:
            pass
        return call(self, *args, **kwargs)

    monkeypatch.setattr(tokenizer, "__call__", meeting)
    pair = [threading.Thread(target=model.predict, args=(None, table)) for _ in range(2)]
    [t.start() for t in pair]
    [t.join() for t in pair]
    assert not met, "two requests were in the tokenizer at once"
    monkeypatch.undo()

    answers, errors = [], []

    def requests():
        for _ in range(5):
            try:
                answers.append(model.predict(None, table).to_json())
            except Exception as e:  # noqa: BLE001 - what a request would have been answered, counted
                errors.append(f"{type(e).__name__}: {e}"[:200])

    threads = [threading.Thread(target=requests) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == [] and answers == [alone] * 40

    clone = pickle.loads(pickle.dumps(model))  # as MLflow stores and loads it: no weights, a lock of its own
    assert "predictor" not in vars(clone) and clone._lock is not model._lock


def slow_batches(monkeypatch, model, seconds: float) -> list[int]:
    """The model's network takes `seconds` per batch (a large request on CPU); returns the sizes of the batches run."""
    net, run = model.predictor.model, []

    def forward(*args, **kwargs):
        run.append(len(kwargs["input_ids"]))
        time.sleep(seconds)
        return type(net).forward(net, *args, **kwargs)

    monkeypatch.setattr(net, "forward", forward)
    return run


def test_a_request_past_the_servers_timeout_lets_go_of_the_model(tmp_path, monkeypatch):
    """MLflow's scoring server answers 504 at its timeout (`mlflow models serve -t`, MLFLOW_SCORING_SERVER_REQUEST_
    TIMEOUT) but its thread ran on, holding the model's lock: every request behind it waited, got 504 too, and still
    ran after. A request stops between batches at the timeout, naming its rows, and lets go of the model; one that
    waits for the model all its time is answered busy instead of queueing on."""
    from jobs.inference.served_model import OutOfTime

    monkeypatch.setenv("MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT", "2")
    model, _ = model_of(tmp_path, "classification")
    run = slow_batches(monkeypatch, model, 0.1)
    big = [f"text number {i}" for i in range(2000)]  # 63 batches of 32: 6 s
    outcome = {}

    def request(name, texts):
        start = time.monotonic()
        try:
            outcome[name] = (len(model.predict(None, texts)), time.monotonic() - start)
        except OutOfTime as e:
            outcome[name] = (str(e), time.monotonic() - start)

    first = threading.Thread(target=request, args=("big", big))
    first.start()
    time.sleep(1.5)  # its own 2 s end after the big one's
    request("small", ["a fine day"])
    first.join()
    message, took = outcome["big"]
    assert took < 3.5 and "2000 rows" in message and "timeout of 2 s" in message, outcome
    assert outcome["small"][0] == 1, outcome  # answered once the big one let go, not after all its rows
    assert len(run) < 30

    monkeypatch.setenv("MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT", "1")
    with model._lock:  # another request holds the model past this one's time
        start = time.monotonic()
        with pytest.raises(OutOfTime, match=r"busy .* timeout of 1 s") as refused:
            model.predict(None, ["a fine day"])
    assert 0.9 < time.monotonic() - start < 1.5 and refused.value.get_http_status_code() == 503
    monkeypatch.delenv("MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT")  # no server (a notebook's pyfunc): no time limit
    assert len(model.predict(None, big[:100])) == 100


@pytest.mark.parametrize("kind", ["classification", "question-answering", "token-classification"])
def test_a_request_run_batch_by_batch_answers_byte_for_byte_what_the_predictor_does(tmp_path, monkeypatch, kind):
    """A request is run a step at a time, to stop at the timeout: rows tokenized and decoded a few at a time, the model
    run on the batches the predictor runs (its windows sorted by length, the same padding), so each answer is the same
    to the last bit, rows of many windows included (rows cut in chunks, each predicted alone, differ in the last
    digits: other batches, other padding)."""
    monkeypatch.setenv("MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT", "600")
    if kind == "token-classification":
        from test_predictor import TAGS

        model = PredictorModel()
        model.predictor = Predictor(tiny(tmp_path, "BertForTokenClassification", num_labels=len(TAGS),
                                         initializer_range=1.0), cpu_kernels="torch")
        model.pairs = None
        table = pd.DataFrame({"text": [CONTEXT, "Marie Curie worked in Paris", CONTEXT[:150], "hello"] * 3})
    else:
        model, table = model_of(tmp_path, kind)
        table = pd.concat([table] * 4, ignore_index=True)
    model.predictor.batch_size, model.predictor.max_batch_tokens = 3, 120  # many batches, cut by both limits
    monkeypatch.setattr(served_model, "STEP", 5)  # rows tokenized and decoded 5 at a time
    run = slow_batches(monkeypatch, model, 0.0)
    served = model.predict(None, table)
    rows, _ = model.rows(table)
    alone = [{k: p[k] for k in served.columns} for p in model.predictor.predict(rows)]
    assert len(run) > 8 and served.to_dict("records") == alone  # floats compared exactly
