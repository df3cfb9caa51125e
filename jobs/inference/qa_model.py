"""A question-answering model as MLflow serves it. transformers 5 has no question-answering pipeline, so
`mlflow.transformers` cannot log one; this pyfunc answers with jobs/inference/predictor.Predictor, which is
what jobs/predict.py runs, so a POST to `mlflow models serve`'s /invocations and a prediction job answer alike.

    input   a table with `question` and `context` columns (one question per row)
    output  answer ("" for no answer), answer_start (-1 for none), score (start + end logit), null_score

The model folder travels as the pyfunc's artifact `model` (jobs/finetune.find_hf_folder finds it in a download,
so `init=models:/NAME@alias` and jobs/predict.py read it as they read any registered model), its windows and spans
as the fine-tuning task's (`model_config`: QASettings' fields). The class is pickled by reference: the model loads
where this project is installed, as `mlflow models serve --env-manager local` in its environment does (MLflow's
code_paths would copy the code along, but loading such a model in a process that already imported `jobs` makes
MLflow drop and re-import the package from the copy).
"""

from __future__ import annotations

import mlflow.pyfunc

ANSWER_COLUMNS = ("answer", "answer_start", "score", "null_score")


class QuestionAnswering(mlflow.pyfunc.PythonModel):
    def load_context(self, context) -> None:
        from jobs.inference.kinds import QASettings
        from jobs.inference.predictor import Predictor

        self.predictor = Predictor(context.artifacts["model"], qa=QASettings.from_task(context.model_config or {}))

    def __getstate__(self):
        """Pickled without a loaded model: MLflow runs the input example through the instance before it pickles it,
        and the weights would be stored a second time beside the artifact; load_context loads them."""
        return {k: v for k, v in self.__dict__.items() if k != "predictor"}

    def predict(self, context, model_input, params=None):
        import pandas as pd

        missing = {"question", "context"} - set(model_input.columns)
        if missing:
            raise ValueError(f"question answering needs the columns question and context; missing: "
                             f"{', '.join(sorted(missing))}")
        rows = [{"id": str(i), "question": str(q), "context": str(c)}
                for i, (q, c) in enumerate(zip(model_input["question"], model_input["context"]))]
        answers = self.predictor.predict(rows)
        return pd.DataFrame([{k: a[k] for k in ANSWER_COLUMNS} for a in answers], columns=list(ANSWER_COLUMNS))
