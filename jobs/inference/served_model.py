"""A fine-tuned model of any kind as MLflow serves it: a pyfunc over jobs/inference/predictor.Predictor, the code
jobs/predict.py runs, so a POST to `mlflow models serve`'s /invocations answers what a prediction job writes (its
output columns and `truncated`: jobs/inference/kinds.SERVED_COLUMNS), and refuses what it rejects. The transformers
pipeline MLflow would serve otherwise answers otherwise:

    classification        a blank text got a label (batch: missing_text), a table with an `id` column or a null
                          text a server error, a `text_pair` column was dropped unseen (the pipeline's signature is
                          one text column: a model of sentence pairs answered from the first sentence alone)
    regression            the pipeline answers {"label": "LABEL_0", "score": 3.6}; batch prediction {"value": 3.6}
    multi-label           the pipeline answers the top label only and knows no threshold; this answers every label
                          over the model's trained `multi_label_threshold`
    token-classification  the pipeline must answer the "O" groups to be served (MLflow fails a request on an input
                          that answers nothing), and those take part in the merge of overlapping windows, where the
                          longer "O" stretch drops an entity one window found; this answers the entities alone
    question-answering    transformers 5 has no pipeline for it (jobs/inference/qa_model.py)

    input   a table: `question` and `context` (QA); `text` and, for a classifier, an optional `text_pair` (then in
            every row); a list of records, read as that table; or one unnamed column of texts (what a JSON list of
            strings becomes). A null or blank text or pair, or one that says it holds no value ("nan", "#N/A":
            pipelines/tasks/cells.no_value), is refused, naming its row: batch prediction rejects it as missing_text
    params  a multi-label model's `threshold` (its trained one by default: jobs/registry/model_logging.texts_signature)
    time    a request runs no longer than the scoring server's timeout (`mlflow models serve -t`), which answers its
            client 504 but leaves it running: past it, it stops between batches and lets go of the model

The model folder travels as the pyfunc's artifact `model` (jobs/finetune.find_hf_folder finds it in a download, so
`init=models:/NAME@alias` and jobs/predict.py read it as they read any registered model), the task's settings as its
`model_config` (QASettings' fields, multi_label_threshold). The class is pickled by reference: the model loads where
this project is installed, as `mlflow models serve --env-manager local` in its environment does (MLflow's code_paths
would copy the code along, but loading such a model in a process that already imported `jobs` makes MLflow drop and
re-import the package from the copy).
"""

from __future__ import annotations

import logging
import threading
import time

import mlflow.exceptions
import mlflow.pyfunc


class BadRequest(mlflow.exceptions.MlflowException, ValueError):
    """A request refused, naming the row and what is wrong: an MlflowException, so the scoring server answers 400 with
    this message (any other error is answered with a generic one, the message buried in a server traceback)."""

    def __init__(self, message: str):
        from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

        super().__init__(message, error_code=INVALID_PARAMETER_VALUE)


class OutOfTime(mlflow.exceptions.MlflowException, TimeoutError):
    """A request the scoring server's timeout ran out on, waiting for the model (busy: 503) or running its own rows
    (504). Either way the server has answered its client 504 by then: the code and message are for its log."""

    def __init__(self, message: str, busy: bool):
        from mlflow.protos.databricks_pb2 import DEADLINE_EXCEEDED, TEMPORARILY_UNAVAILABLE

        super().__init__(message, error_code=TEMPORARILY_UNAVAILABLE if busy else DEADLINE_EXCEEDED)


def request_timeout() -> int | None:
    """The seconds MLflow's scoring server gives a request (`mlflow models serve -t`, 60 by default), or None outside
    one: `mlflow models serve` (and build-docker's image) always sets MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT for its
    uvicorn, where the app reads it once to answer 504 past it. A pyfunc loaded in a notebook, or `mlflow models
    predict`, has no one waiting on a timeout: its large inputs run to the end."""
    from mlflow.environment_variables import MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT

    return MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT.get() if MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT.defined else None


def missing(value) -> bool:
    """A null cell: None, NaN or pandas' NA (what a JSON null becomes in a request's table)."""
    import pandas as pd

    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def refuse_non_text(kind: str, column: str, values) -> None:
    """Raise naming the first row whose `column` is a list, mapping or array (a tagger sent its words as a list):
    read as text it would be its Python repr, and `missing` would ask pandas whether an array is null; a boolean
    (JSON's true), which would be answered as the text "True" (batch prediction rejects it as missing_text); or text
    with a lone surrogate (JSON's "\\ud83d" without its pair), which the tokenizer cannot encode (batch prediction
    rejects it as invalid_utf8)."""
    import numpy as np

    from pipelines.tasks.cells import cell_text
    from pipelines.tasks.text_records import Reject, has_lone_surrogate

    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)):
            raise BadRequest(f"{kind}: row {i}'s {column} is {str(v).lower()}, a boolean, not text")
        if isinstance(v, (list, tuple, dict, set)) or getattr(v, "ndim", 0):
            raise BadRequest(f"{kind}: row {i}'s {column} is a {type(v).__name__}, not text" + (
                " (send a sentence's words joined by spaces)" if kind == "token-classification" else ""))
        if isinstance(v, bytes) and isinstance(cell_text(v), Reject):
            raise BadRequest(f"{kind}: row {i}'s {column} is bytes that are no UTF-8 text (batch prediction rejects "
                             f"them as invalid_utf8); decode them before sending")
        if isinstance(v, str) and has_lone_surrogate(v):
            raise BadRequest(f"{kind}: row {i}'s {column} holds a lone surrogate (half of a character: an emoji a "
                             f"tool cut in two), which no UTF-8 text can hold; send it whole or without it")


STEP = 512  # rows tokenized or decoded between two looks at the clock (40,000 rows took 10 s to tokenize on 2 CPUs)


class PredictorModel(mlflow.pyfunc.PythonModel):
    def __init__(self):
        self._lock = threading.Lock()

    def load_context(self, context) -> None:
        from jobs.inference.kinds import QASettings
        from jobs.inference.predictor import Predictor

        config = context.model_config or {}
        self.predictor = Predictor(context.artifacts["model"], qa=QASettings.from_task(config),
                                   threshold=float(config.get("multi_label_threshold", 0.5)))
        self.pairs = config.get("text_pair")  # fine-tuned on sentence pairs (True), single sentences (False); None:
        # logged before the model recorded it

    def __getstate__(self):
        """Pickled without a loaded model: MLflow runs the input example through the instance before it pickles it,
        and the weights would be stored a second time beside the model's artifact; load_context loads them."""
        return {k: v for k, v in self.__dict__.items() if k not in ("predictor", "_lock")}  # a lock is no pickle

    def __setstate__(self, state):
        """Unpickled (how MLflow loads a logged model, before load_context) with a lock of its own."""
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def predict(self, context, model_input, params=None):
        import copy

        import pandas as pd

        from jobs.inference.kinds import SERVED_COLUMNS

        # the server's clock started when the request arrived, before MLflow parsed it: this one starts later, so a
        # request stops its parsing time and one step (a batch, or STEP rows) after its client got the 504
        timeout = request_timeout()
        deadline = None if timeout is None else time.monotonic() + timeout
        predictor = self.predictor
        threshold = (params or {}).get("threshold")  # logged as a param of multi-label models alone (model_logging)
        if threshold is not None and threshold != predictor.threshold:
            if not 0 < threshold < 1:
                raise BadRequest(f"{predictor.kind}: params.threshold must be in (0, 1) (leave it out for the "
                                 f"model's own, {predictor.threshold:g}), got {threshold}")
            predictor = copy.copy(predictor)  # this request's: the next one answers at the model's own again
            predictor.threshold = threshold
        columns = list(SERVED_COLUMNS[predictor.kind])
        rows, empty = self.rows(model_input)
        asked = [r for r in rows if r is not None]
        # one request at a time: MLflow's scoring server runs each in a thread of its own (asyncio.to_thread), and the
        # fast tokenizer's truncation and padding are state of the tokenizer, which each call sets (encode: truncated,
        # then not, to count the cut; QA windows: padded, then not): overlapping requests tokenized with each other's
        # settings (a long text not truncated, a QA span from misaligned windows). The server answers 504 at its
        # timeout but leaves the thread running: a request waits for the model and runs no longer than its time, or
        # every request behind a large one would wait on it, time out too, and still run after
        if not self._lock.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
            raise self.late(f"the model was busy with another request for all of this one's time: its {len(asked)} "
                            f"rows did not start", timeout, busy=True)
        try:
            answered = iter(self.predict_by_batch(predictor, asked, deadline, timeout))
        finally:
            self._lock.release()
        out = [{**empty, "truncated": False} if r is None else next(answered) for r in rows]
        # object columns: pandas would turn a None (a QA row without an answer, beside answered ones) into NaN, which
        # MLflow's scoring server writes as a bare NaN, no JSON a client parses; None is written as null
        return pd.DataFrame([{k: a[k] for k in columns} for a in out], columns=columns, dtype=object)

    def predict_by_batch(self, predictor, rows: list[dict], deadline: float | None, timeout: int | None) -> list[dict]:
        """`predictor.predict(rows)`, to the bit, stopping at `deadline` between steps: rows tokenized and decoded
        STEP at a time (each row's own: the same with any others), the model run one batch at a time. Each batch goes
        to `forward` as rows of one window each, in the order `forward` sorts the request's windows: it batches and
        pads them as it would have among all of them."""

        def on_time(where: str) -> None:
            if deadline is not None and time.monotonic() > deadline:
                raise self.late(f"a request of {len(rows)} rows was stopped {where}", timeout, busy=False)

        encoded = []
        for a in range(0, len(rows), STEP):
            on_time(f"while tokenizing ({a} rows done)")
            encoded += predictor.encode(rows[a:a + STEP])
        windows = [(i, k, w) for i, e in enumerate(encoded) for k, w in enumerate(e["windows"])]
        logits: list[list] = [[None] * len(e["windows"]) for e in encoded]
        done = 0
        for batch in predictor.batches([len(w["input_ids"]) for _, _, w in windows]):
            on_time(f"while running the model ({done} of {len(windows)} windows done)")
            for j, (lg,) in zip(batch, predictor.forward([{"windows": [windows[j][2]]} for j in batch])):
                i, k, _ = windows[j]
                logits[i][k] = lg
            done += len(batch)
        out = []
        for a in range(0, len(rows), STEP):
            on_time(f"while decoding ({a} rows done)")
            out += predictor.decode(rows[a:a + STEP], encoded[a:a + STEP], logits[a:a + STEP])
        return [{**p, "truncated": bool(e["truncated"])} for p, e in zip(out, encoded)]

    def late(self, what: str, timeout: int | None, busy: bool) -> OutOfTime:
        message = (f"{self.predictor.kind}: {what}, at the scoring server's request timeout of {timeout} s "
                   f"(`mlflow models serve -t`): send fewer rows per request (a large input: jobs/predict.py)")
        logging.getLogger(__name__).warning(message)  # its client was answered 504 by the server: said here alone
        return OutOfTime(message, busy)

    def rows(self, table) -> tuple[list[dict | None], dict]:
        """The predictor's rows of `table` (None for a question-answering row without a question or a context: it
        answers `empty`, no answer); raises on a missing column, or a null or blank text or pair, naming it."""
        import pandas as pd

        import numpy as np

        kind = self.predictor.kind
        if isinstance(table, np.ndarray) and table.ndim == 0:  # {"inputs": "one text"}, without an input schema
            table = table.item()
        if isinstance(table, str):  # one text, not its characters
            table = [table]
        if table is None or np.isscalar(table):  # {"inputs": null}, 5, true: a client's unset list, say
            import json

            shown = json.dumps(table.item() if isinstance(table, np.generic) else table, default=str)
            raise BadRequest(f"{kind}: the request's inputs are {shown}, not a list of texts or a table")
        if isinstance(table, dict):  # {"inputs": {"text": [...]}}, {"instances": [{"text": ...}]}: columns, without
            # an input schema (a list of them would be their names: one answer, for the word "text")
            columns = {k: list(np.atleast_1d(np.asarray(v, dtype=object))) for k, v in table.items()}
            if len({len(v) for v in columns.values()}) > 1:
                raise BadRequest(f"{kind}: the request's columns differ in length: "
                                 + ", ".join(f"{k} {len(v)}" for k, v in columns.items()))
            table = pd.DataFrame(columns)
        if not isinstance(table, pd.DataFrame) and len(table) and all(isinstance(r, dict) for r in table):
            # {"inputs": [{"text": ..., "text_pair": ...}]}, pyfunc.predict([{...}]): records, read as dataframe_records
            # are. The input schema a pair or QA model was once logged with made them a table; without one, MLflow
            # hands them over as they came (each value a 0-d array from the scoring server's JSON)
            table = pd.DataFrame([{k: v.item() if getattr(v, "ndim", None) == 0 else v for k, v in r.items()}
                                  for r in table])
        if not isinstance(table, pd.DataFrame):  # {"inputs": [...]}: checked before pandas' Arrow strings refuse it
            table = list(table)
            record = next((i for i, r in enumerate(table) if isinstance(r, dict)), None)
            if record is not None:  # read as one column, its records would be refused as texts, or answer nothing
                raise BadRequest(f"{kind}: the request's inputs mix records and texts (row {record} is a record): "
                                 f"send records alone, read as a table, or texts alone")
            if kind != "question-answering":  # which needs a table of columns: said below
                refuse_non_text(kind, "text", table)
            table = pd.DataFrame({"text": table})
        twice = sorted(set(map(str, table.columns[table.columns.duplicated()])))
        if twice:  # dataframe_split of a pd.concat(axis=1): table["text"] would be a table, read as its column names
            raise BadRequest(f"{kind}: the request names the column{'s' * (len(twice) > 1)} {', '.join(twice)} twice; "
                             f"send each once")
        if not len(table.index):  # {"dataframe_records": []} is a table of no columns: no row to refuse, as [] has
            return [], {}
        if kind == "question-answering":
            # the signature has no input schema (model_logging.texts_signature), so nothing refused a missing column
            # before this: said here in the words MLflow's schema check used
            absent = [c for c in ("question", "context") if c not in table.columns]
            if absent:
                raise BadRequest(f"question answering needs the columns question and context: the request is missing "
                                 f"inputs {absent}")
            refuse_non_text(kind, "question", table["question"])
            refuse_non_text(kind, "context", table["context"])
            empty = {"answer": "", "answer_start": -1, "score": None, "null_score": None}
            return [None if blank(q) or blank(c) else {"id": str(i), "question": as_text(q), "context": as_text(c)}
                    for i, (q, c) in enumerate(zip(table["question"], table["context"]))], empty
        if "text_pair" in table.columns and "text" not in table.columns:  # not a single column of texts
            raise BadRequest(f"{kind}: a text_pair column needs its text column; got "
                             f"{', '.join(map(str, table.columns))}")
        if "text" not in table.columns and len(table.columns) != 1:
            raise BadRequest(f"{kind} needs a column text (or a single column of texts); got "
                             f"{', '.join(map(str, table.columns))}")
        texts = table["text"] if "text" in table.columns else table[table.columns[0]]
        refuse_blank(kind, "text", texts)
        if kind == "token-classification":
            if "text_pair" in table.columns:  # read as single texts, its second text would be dropped unseen
                raise BadRequest(f"{kind}: a tagger reads one text per row: send no text_pair column")
            return [{"id": str(i), "text": as_text(t)} for i, t in enumerate(texts)], {}
        if self.pairs is not None and self.pairs != ("text_pair" in table.columns):
            raise BadRequest(f"{kind}: this model was fine-tuned on " + (
                "sentence pairs: send a table of text and text_pair" if self.pairs else
                "single sentences: send no text_pair column"))
        if "text_pair" not in table.columns:
            return [{"id": str(i), "text_a": as_text(t), "text_b": None} for i, t in enumerate(texts)], {}
        # a request of pairs: every row has its pair, as batch prediction with columns.text_pair rejects a row without
        # one (missing_text); a row read as a single sentence among pairs would be answered from half its input
        refuse_blank(kind, "text_pair", table["text_pair"], ": this model was fine-tuned on sentence pairs, every row "
                     "needs its pair" if self.pairs else " (a request with a text_pair column is one of pairs: send "
                     "rows without a pair in a request without the column)")  # None: logged before it said which
        return [{"id": str(i), "text_a": as_text(t), "text_b": as_text(p)}
                for i, (t, p) in enumerate(zip(texts, table["text_pair"]))], {}


def blank(value) -> bool:
    """Null, text of whitespace alone, or text that says it holds no value ("nan", "#N/A": what a spreadsheet or
    pandas writes for an empty cell): what batch prediction's reader takes for a missing field."""
    from pipelines.tasks.cells import no_value

    value = as_text(value) if isinstance(value, bytes) else value
    return missing(value) or no_value(value) or not str(value).strip()


def as_text(value) -> str:
    """A cell as the text the model reads, as batch prediction's reader makes it (cells.cell_text): bytes (a Parquet
    binary column of older Hive / Impala writers, read with pandas) decoded, not answered from their repr
    "b'a fine day'" (refuse_non_text refused any that are not UTF-8); a number as a CSV would hold it, a numpy
    scalar (a pandas column's) first as the Python value Arrow reads from its file (a float32 0.1 is
    0.10000000149011612 there: its own str() "0.1" was another input than the batch's)."""
    import numpy as np

    from pipelines.tasks.cells import cell_text

    text = cell_text(value.item() if isinstance(value, np.generic) else value)
    return text if isinstance(text, str) else str(value)


def refuse_blank(kind: str, column: str, values, hint: str = "") -> None:
    """Raise naming the first row (and how many more) whose `column` is null or blank (`blank`): what batch
    prediction's reader rejects as missing_text (pipelines/tasks/files.py)."""
    refuse_non_text(kind, column, values)
    bad = [i for i, v in enumerate(values) if blank(v)]
    if bad:
        more = f" and {len(bad) - 1} more" if bad[1:] else ""
        raise BadRequest(f"{kind}: row {bad[0]}{more} has no {column} (null, blank or a no-value text such as "
                         f"\"nan\"){hint}")
