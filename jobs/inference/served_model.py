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
            every row); or one unnamed column of texts (what a JSON list of strings becomes). A null or blank text or
            pair, or one that says it holds no value ("nan", "#N/A": pipelines/tasks/cells.no_value), is refused,
            naming its row: batch prediction rejects it as missing_text

The model folder travels as the pyfunc's artifact `model` (jobs/finetune.find_hf_folder finds it in a download, so
`init=models:/NAME@alias` and jobs/predict.py read it as they read any registered model), the task's settings as its
`model_config` (QASettings' fields, multi_label_threshold). The class is pickled by reference: the model loads where
this project is installed, as `mlflow models serve --env-manager local` in its environment does (MLflow's code_paths
would copy the code along, but loading such a model in a process that already imported `jobs` makes MLflow drop and
re-import the package from the copy).
"""

from __future__ import annotations

import threading

import mlflow.exceptions
import mlflow.pyfunc


class BadRequest(mlflow.exceptions.MlflowException, ValueError):
    """A request refused, naming the row and what is wrong: an MlflowException, so the scoring server answers 400 with
    this message (any other error is answered with a generic one, the message buried in a server traceback)."""

    def __init__(self, message: str):
        from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

        super().__init__(message, error_code=INVALID_PARAMETER_VALUE)


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

    from pipelines.tasks.text_records import has_lone_surrogate

    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)):
            raise BadRequest(f"{kind}: row {i}'s {column} is {str(v).lower()}, a boolean, not text")
        if isinstance(v, (list, tuple, dict, set)) or getattr(v, "ndim", 0):
            raise BadRequest(f"{kind}: row {i}'s {column} is a {type(v).__name__}, not text" + (
                " (records, {\"inputs\": [{...}]}, are read as one column: send them as dataframe_records or "
                "instances)" if isinstance(v, dict) else
                " (send a sentence's words joined by spaces)" if kind == "token-classification" else ""))
        if isinstance(v, str) and has_lone_surrogate(v):
            raise BadRequest(f"{kind}: row {i}'s {column} holds a lone surrogate (half of a character: an emoji a "
                             f"tool cut in two), which no UTF-8 text can hold; send it whole or without it")


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
        import pandas as pd

        from jobs.inference.kinds import SERVED_COLUMNS

        columns = list(SERVED_COLUMNS[self.predictor.kind])
        rows, empty = self.rows(model_input)
        asked = [r for r in rows if r is not None]
        # one request at a time: MLflow's scoring server runs each in a thread of its own (asyncio.to_thread), and the
        # fast tokenizer's truncation and padding are state of the tokenizer, which each call sets (encode: truncated,
        # then not, to count the cut; QA windows: padded, then not): overlapping requests tokenized with each other's
        # settings (a long text not truncated, a QA span from misaligned windows)
        with self._lock:
            answered = iter(self.predictor.predict(asked))
        out = [{**empty, "truncated": False} if r is None else next(answered) for r in rows]
        # object columns: pandas would turn a None (a QA row without an answer, beside answered ones) into NaN, which
        # MLflow's scoring server writes as a bare NaN, no JSON a client parses; None is written as null
        return pd.DataFrame([{k: a[k] for k in columns} for a in out], columns=columns, dtype=object)

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
        if isinstance(table, dict):  # {"inputs": {"text": [...]}}, {"instances": [{"text": ...}]}: columns, without
            # an input schema (a list of them would be their names: one answer, for the word "text")
            columns = {k: list(np.atleast_1d(np.asarray(v, dtype=object))) for k, v in table.items()}
            if len({len(v) for v in columns.values()}) > 1:
                raise BadRequest(f"{kind}: the request's columns differ in length: "
                                 + ", ".join(f"{k} {len(v)}" for k, v in columns.items()))
            table = pd.DataFrame(columns)
        if not isinstance(table, pd.DataFrame):  # {"inputs": [...]}: checked before pandas' Arrow strings refuse it
            table = list(table)
            if kind != "question-answering":  # which needs a table of columns: said below
                refuse_non_text(kind, "text", table)
            table = pd.DataFrame({"text": table})
        if not len(table.index):  # {"dataframe_records": []} is a table of no columns: no row to refuse, as [] has
            return [], {}
        if kind == "question-answering":
            absent = {"question", "context"} - set(table.columns)
            if absent:
                raise BadRequest(f"question answering needs the columns question and context; missing: "
                                 f"{', '.join(sorted(absent))}")
            refuse_non_text(kind, "question", table["question"])
            refuse_non_text(kind, "context", table["context"])
            empty = {"answer": "", "answer_start": -1, "score": None, "null_score": None}
            return [None if blank(q) or blank(c) else {"id": str(i), "question": str(q), "context": str(c)}
                    for i, (q, c) in enumerate(zip(table["question"], table["context"]))], empty
        if "text" not in table.columns and len(table.columns) != 1:
            raise BadRequest(f"{kind} needs a column text (or a single column of texts); got "
                             f"{', '.join(map(str, table.columns))}")
        texts = table["text"] if "text" in table.columns else table[table.columns[0]]
        refuse_blank(kind, "text", texts)
        if kind == "token-classification":
            if "text_pair" in table.columns:  # read as single texts, its second text would be dropped unseen
                raise BadRequest(f"{kind}: a tagger reads one text per row: send no text_pair column")
            return [{"id": str(i), "text": str(t)} for i, t in enumerate(texts)], {}
        if self.pairs is not None and self.pairs != ("text_pair" in table.columns):
            raise BadRequest(f"{kind}: this model was fine-tuned on " + (
                "sentence pairs: send a table of text and text_pair" if self.pairs else
                "single sentences: send no text_pair column"))
        if "text_pair" not in table.columns:
            return [{"id": str(i), "text_a": str(t), "text_b": None} for i, t in enumerate(texts)], {}
        # a request of pairs: every row has its pair, as batch prediction with columns.text_pair rejects a row without
        # one (missing_text); a row read as a single sentence among pairs would be answered from half its input
        refuse_blank(kind, "text_pair", table["text_pair"], ": this model was fine-tuned on sentence pairs, every row "
                     "needs its pair" if self.pairs else " (a request with a text_pair column is one of pairs: send "
                     "rows without a pair in a request without the column)")  # None: logged before it said which
        return [{"id": str(i), "text_a": str(t), "text_b": str(p)}
                for i, (t, p) in enumerate(zip(texts, table["text_pair"]))], {}


def blank(value) -> bool:
    """Null, text of whitespace alone, or text that says it holds no value ("nan", "#N/A": what a spreadsheet or
    pandas writes for an empty cell): what batch prediction's reader takes for a missing field."""
    from pipelines.tasks.cells import no_value

    return missing(value) or no_value(value) or not str(value).strip()


def refuse_blank(kind: str, column: str, values, hint: str = "") -> None:
    """Raise naming the first row (and how many more) whose `column` is null or blank (`blank`): what batch
    prediction's reader rejects as missing_text (pipelines/tasks/files.py)."""
    refuse_non_text(kind, column, values)
    bad = [i for i, v in enumerate(values) if blank(v)]
    if bad:
        more = f" and {len(bad) - 1} more" if bad[1:] else ""
        raise BadRequest(f"{kind}: row {bad[0]}{more} has no {column} (null, blank or a no-value text such as "
                         f"\"nan\"){hint}")
