"""jobs/inference/served_model.py under MLflow's scoring server, which runs each request in a thread of its own
(asyncio.to_thread): requests that arrive together answer what each answers alone."""

import pickle
import threading

import pandas as pd
import pytest
from test_predictor import tiny

from jobs.inference.kinds import QASettings
from jobs.inference.predictor import Predictor
from jobs.inference.qa_model import QuestionAnswering
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
