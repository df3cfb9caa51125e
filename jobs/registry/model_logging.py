"""How a finished run's model folder goes into MLflow (jobs/registry/tracking.finish_run picks one per task):
  log_release_model  a fine-tuned model of any kind as our pyfunc over batch prediction's code
                     (jobs/inference/served_model.py), with its task settings, input example and signature: served,
                     it answers what a prediction job writes, its refusals included (a transformers pipeline model
                     answered a blank text with a label, a table with another column with a server error, and a
                     regression value as a label)
  log_qa_model       question answering, which transformers 5 has no pipeline for: our pyfunc
                     (jobs/inference/qa_model.py) over the folder
  log_hf_folder      the folder as plain artifacts, registered as is (the pretraining release checkpoint)
Each keeps the model folder whole (model/ of the run, or the pyfunc's artifact `model`): `models:/NAME@alias` downloads
a folder that transformers loads with no code of ours (jobs/finetune.find_hf_folder finds it in the download).
"""

from __future__ import annotations

from importlib.metadata import version

from jobs.inference.serving import model_class


def load_check(task: str, model_dir: str) -> None:
    """The load check log_model does: the folder loads with transformers' class for `task`. The modern encoder with
    an architecture switch off has no transformers class (its config.json's model_type says so): it is checked
    with bert_core.modern, the only code that loads it."""
    from bert_core.modern_config import is_variant

    if is_variant(model_dir):
        from bert_core.modern import load_pretrained

        load_pretrained(model_dir)
    else:
        model_class(task, model_dir).from_pretrained(model_dir)


def log_hf_folder(tracking_uri: str, run_id: str, model_dir: str, task: str, registered_model: str | None):
    """A model folder as plain run artifacts (model/), every file as is, registered as a version whose source
    is that folder. Returns (uri, version).

    For what a transformers pipeline model would cut down or cannot hold: the pretraining release checkpoint
    (a fill-mask model keeps only the MLM head, dropping the pooler and the NSP head that fine-tuning
    starts from), and any other task transformers has no pipeline for (question answering has log_qa_model). The folder
    loads with transformers' class for the task, and `models:/NAME@alias` downloads it (jobs/finetune.py
    starts from such a URI).
    """
    import mlflow
    from mlflow.tracking import MlflowClient

    load_check(task, model_dir)
    mlflow.log_artifacts(model_dir, "model")
    mlflow.set_tag("model_task", task)
    if not registered_model:
        return f"runs:/{run_id}/model", None
    client = MlflowClient(tracking_uri)
    try:  # created, or there already: another job may create it between a look and a create
        client.create_registered_model(registered_model)
    except mlflow.exceptions.MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    source = f"{mlflow.get_run(run_id).info.artifact_uri}/model"
    version = client.create_model_version(registered_model, source, run_id=run_id, tags={"task": task})
    return f"models:/{registered_model}/{version.version}", version.version


def pins() -> list[str]:
    """The served model's requirements: the versions this environment runs, without a local label (torch's
    "2.13.0+cpu" is no version PyPI holds: `mlflow models serve`'s virtualenv could not install it; MLflow's own
    pins drop it too)."""
    from packaging.version import Version

    return [f"{pkg}=={Version(version(pkg)).public}" for pkg in ("transformers", "torch", "tokenizers",
                                                                  "safetensors")]


def task_settings(client, run_id: str) -> dict:
    """The fine-tuning task settings (TaskConfig's fields) run `run_id` trained its model with: the `task_config` tag
    of a version registered from it, else its logged config (a fine-tune's params task.*; a sweep trial's: its
    parent's finetune.task.* under its own searched task.*); {} where the run records none. Params are strings:
    readers convert (QASettings.from_task, the multi-label threshold)."""
    import json

    for found in client.search_model_versions(f"run_id = '{run_id}'"):
        if "task_config" in found.tags:
            return json.loads(found.tags["task_config"])
    run = client.get_run(run_id)
    parent = run.data.tags.get("mlflow.parentRunId")
    inherited = _fields(client.get_run(parent).data.params, "finetune.task.") if parent else {}
    return {**inherited, **_fields(run.data.params, "task.")}


def _fields(params: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix) and "." not in k[len(prefix):]}


def served_config(kind: str, task: dict) -> dict:
    """The settings a model served by jobs/inference/served_model.py predicts with (its model_config): the task's
    question-answering windows and spans, or its multi-label threshold."""
    from dataclasses import asdict

    from jobs.inference.kinds import QASettings

    if kind == "question-answering":
        return asdict(QASettings.from_task(task))
    if kind == "multi-label":
        return {"multi_label_threshold": float(task.get("multi_label_threshold", 0.5))}
    return {}


def log_qa_model(release_dir: str, registered_model: str | None, input_example: list[dict] | None, task: dict):
    """A question-answering model folder as an MLflow pyfunc (jobs/inference/qa_model.py), with the fine-tuning
    task's windows and spans (`task`: its TaskConfig as a dict), `input_example` and texts_signature."""
    import pandas as pd
    import transformers

    from jobs.inference.qa_model import QuestionAnswering

    transformers.AutoModelForQuestionAnswering.from_pretrained(release_dir)  # the load check log_model does
    return _log_pyfunc(QuestionAnswering(), release_dir, registered_model, "question-answering",
                       served_config("question-answering", task),
                       pd.DataFrame(input_example) if input_example else None,
                       signature=texts_signature("question-answering"))


def _log_pyfunc(python_model, release_dir: str, registered_model: str | None, task: str, config: dict, example,
                signature=None):
    import mlflow

    return mlflow.pyfunc.log_model(
        name="model", python_model=python_model, artifacts={"model": release_dir}, pip_requirements=pins(),
        model_config=config, input_example=example, registered_model_name=registered_model, metadata={"task": task},
        signature=signature)


def texts_signature(kind: str, threshold: float | None = None):
    """The signature of a served model (of texts, pairs or questions): its outputs, its params, and no input schema:
    PredictorModel.rows reads a request by its column names and refuses what it cannot answer, naming it. Inferred
    from a list of texts, the schema was one unnamed column, and the scoring server kept a table's first column
    whatever its name ({"id": "r1", "text": ...} was answered from the id, a text_pair column dropped unseen);
    inferred from a table of pairs or questions, its columns were required, and an empty request ({"inputs": []})
    was refused for them; made optional, a list of texts became a table of neither and was answered with no row.
    The outputs: every column the model answers, `truncated` too (kinds.SERVED_COLUMNS). The params: a multi-label
    model's `threshold`, its trained one by default, as batch prediction's `threshold=` overrides it; MLflow drops a
    param the signature does not name before the model sees it (a warning in the server's log, none to the client)."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

    from jobs.inference.kinds import OUTPUT_TYPES, SERVED_COLUMNS

    types = {"string": "string", "double": "double", "int64": "long", "bool": "boolean"}  # Arrow's -> MLflow's
    params = ParamSchema([ParamSpec("threshold", "double", threshold)]) \
        if kind == "multi-label" and threshold is not None else None
    return ModelSignature(inputs=None, outputs=Schema([ColSpec(types[OUTPUT_TYPES[c]], c)
                                                       for c in SERVED_COLUMNS[kind]]), params=params)


def log_release_model(release_dir: str, registered_model: str | None, task: str,
                      input_example: list | None = None, settings: dict | None = None):
    """A fine-tuned model folder as our pyfunc (jobs/inference/served_model.PredictorModel; loads in transformers: a
    check too), with the fine-tuning task's `settings` (its TaskConfig as a dict: the threshold) and `input_example`:
    a list of texts, so requests keep the form a list takes ({"inputs": [...]}), with texts_signature; a model of
    sentence pairs (an example of {text, text_pair} records) as that table. A pyfunc keeps no model card: the
    version's description is the card (finish_run sets it)."""
    import pandas as pd

    from jobs.inference.kinds import folder_kind
    from jobs.inference.served_model import PredictorModel

    model_class(task, release_dir).from_pretrained(release_dir)  # the load check log_model does
    kind = folder_kind(release_dir)
    pairs = bool(input_example) and isinstance(input_example[0], dict) and "text_pair" in input_example[0]
    config = served_config(kind, settings or {})
    return _log_pyfunc(PredictorModel(), release_dir, registered_model, task, {**config, "text_pair": pairs},
                       pd.DataFrame(input_example) if pairs else input_example,
                       signature=texts_signature(kind, config.get("multi_label_threshold")))
