"""A question-answering model as MLflow serves it: transformers 5 has no question-answering pipeline, so
`mlflow.transformers` cannot log one; jobs/inference/served_model.PredictorModel answers with the predictor
jobs/predict.py runs.

    input   a table with `question` and `context` columns (one question per row); a row whose question or context is
            null answers no answer (its text is not the word "None")
    output  answer ("" for no answer), answer_start (-1 for none), score (start + end logit), null_score, truncated
            (the question cut to max_query_length)
"""

from __future__ import annotations

from jobs.inference.served_model import PredictorModel


class QuestionAnswering(PredictorModel):
    """The class question-answering models are logged as (pickled by reference: registered versions load it by
    this name)."""
