"""The model a prediction job runs: a registry alias or version (`latest`: the highest), a run's model, or a folder,
resolved once to a local folder with what the registry says of it (version, run, the fine-tuning task's
settings), and the files of that folder the model loads from, which are what travels to the replicas and what
names the model to a rerun (its digest)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from bert_core.config import ConfigError


@dataclass
class ModelRef:
    uri: str
    folder: Path
    kind: str
    name: str = ""  # registered model ("" for a folder or a run's model)
    version: str = ""
    run_id: str = ""  # the run that logged it
    task: dict = field(default_factory=dict)  # the version's task_config tag
    digest: str = ""  # sha256 over its files: what "the same model" means to a rerun
    files: list = field(default_factory=list)  # the folder's files the model loads from (model_files): shipped
    inputs: str = ""  # a sequence model's input as its fine-tuning data had it: "text" or "text,text_pair"; "" unknown


def resolve_model(uri: str, tracking_uri: str, download_dir: Path) -> ModelRef:
    """The model behind `uri`, as a local folder, with what the registry says of it."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from jobs.config.predict import MODEL_URIS
    from jobs.config.stores import refuse_absent_store
    from jobs.finetune import resolve_init
    from jobs.inference.kinds import folder_kind
    from jobs.registry.versions import logged_model_id, logged_model_run

    if uri.startswith(MODEL_URIS):  # opened, MLflow made an empty store (./mlflow.db) holding no model
        refuse_absent_store(tracking_uri, f"model {uri!r}")
    name = version = run_id = inputs = ""
    task: dict = {}
    try:
        if logged_model_id(uri):  # a logged model (MLflow 3's models:/m-<id>): its run's settings, as runs:/ gives
            from jobs.registry.model_logging import task_settings

            run_id = logged_model_run(uri, tracking_uri)
            task = task_settings(MlflowClient(tracking_uri), run_id) if run_id else {}
            inputs = run_inputs(MlflowClient(tracking_uri), run_id) if run_id else ""
        elif uri.startswith("models:/"):
            from jobs.registry.versions import pinned_version

            pinned, found = pinned_version(uri, tracking_uri)  # an alias or `latest` resolved once: the whole job
            name, version, run_id = found.name, str(found.version), found.run_id or ""  # uses this version
            task = json.loads(found.tags.get("task_config", "{}"))  # a bad tag: the JSONDecodeError below
            inputs, uri = found.tags.get("data.inputs", ""), pinned
        elif uri.startswith("runs:/"):  # the run's task settings: its registered version's, or its logged config
            from jobs.registry.model_logging import task_settings

            run_id = uri[len("runs:/"):].split("/")[0]
            task = task_settings(MlflowClient(tracking_uri), run_id)
            inputs = run_inputs(MlflowClient(tracking_uri), run_id)
        elif not Path(uri).is_dir():
            from bert_core.files import moved_aside_said

            raise FileNotFoundError(f"no such folder {uri}{moved_aside_said(uri)}")
        folder = resolve_init(uri, tracking_uri, download_dir)
    except (MlflowException, FileNotFoundError, OSError) as exc:
        message = getattr(exc, "message", None) or str(exc)
        raise ConfigError(f"model {uri!r} does not resolve: {message.splitlines()[0]}") from None
    except json.JSONDecodeError as exc:  # a tag cut short, or edited by hand
        raise ConfigError(f"model {uri!r}: the task_config tag of its registered version is not valid JSON ({exc}), "
                          "so its task settings are unknown; register the model again") from None
    try:
        kind = folder_kind(folder)  # config.json as JSON: the driver never imports torch or transformers
        files = model_files(folder)
    except ValueError as exc:
        raise ConfigError(f"model {uri!r}: {exc}") from None
    if not task and kind in ("multi-label", "question-answering"):  # a folder: the fine-tune's export keeps none
        print(f"[predict] {uri} records no fine-tuning task settings: the "
              + ("multi-label threshold is 0.5 (or `threshold=`)" if kind == "multi-label" else
                 "question-answering windows are the defaults") + "; predict a models:/ or runs:/ URI for the "
              "trained ones", flush=True)
    return ModelRef(uri, folder, kind, name, version, run_id, task, files_digest(files), files, inputs)


def files_digest(files: list[Path]) -> str:
    """sha256 over a model's files (model_files), names and contents: what "the same model" means to a rerun."""
    digest = hashlib.sha256()
    for f in files:
        with f.open("rb") as data:
            digest.update(f.name.encode() + b"\0" + hashlib.file_digest(data, "sha256").digest())
    return digest.hexdigest()


def run_inputs(client, run_id: str) -> str:
    """The `data.inputs` tag of run `run_id`, or of its parent (a sweep's trial: the sweep's run read the data)."""
    tags = client.get_run(run_id).data.tags
    parent = tags.get("mlflow.parentRunId")
    return tags.get("data.inputs") or (client.get_run(parent).data.tags.get("data.inputs", "") if parent else "")


def check_inputs(model: ModelRef, text_pair: str) -> None:
    """Refuse to read sentence pairs for a model fine-tuned on single sentences, or single sentences for one
    fine-tuned on pairs: each row would be encoded otherwise than the model learned, and predicted without a
    word of warning. A model that records nothing (a folder, a version registered before the tag) is let be."""
    if model.inputs == "text,text_pair" and not text_pair:
        raise ConfigError(f"model {model.uri!r} was fine-tuned on sentence pairs: name the input's second text with "
                          "columns.text_pair=COLUMN (and its first with columns.text=COLUMN)")
    if model.inputs == "text" and text_pair:
        raise ConfigError(f"model {model.uri!r} was fine-tuned on single sentences: drop columns.text_pair="
                          f"{text_pair}")


# the files transformers loads a model and its tokenizer from; the weights it picks, in its order: safetensors, whole
# or sharded (an index naming the shards), before PyTorch's pickles
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json",
                   "added_tokens.json", "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")  # the last five: a BPE or SentencePiece tokenizer saved without tokenizer.json


def model_files(folder: Path) -> list[Path]:
    """What of `folder` the model loads from, sorted: config.json, the weights from_pretrained picks (WEIGHTS), the
    tokenizer's files. A Trainer checkpoint's optimizer and RNG state, or a Hub snapshot's TF, Flax and ONNX
    weights, are neither shipped to every replica nor part of the digest (an edit of one would refuse a rerun); a
    folder of these files alone (a release export, an MLflow model's download) hashes as all of them."""
    weights = next((name for name in WEIGHTS if (folder / name).is_file()), None)
    if weights is None:
        raise ValueError(f"no weights transformers loads in {folder} (one of {', '.join(WEIGHTS)})")
    names = {"config.json", weights, *(name for name in TOKENIZER_FILES if (folder / name).is_file())}
    if weights.endswith(".index.json"):
        try:
            parts = set(json.loads((folder / weights).read_text(encoding="utf-8"))["weight_map"].values())
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{folder / weights} is not a weights index ({type(exc).__name__}: {exc})") from None
        absent = sorted(part for part in parts if not (folder / part).is_file())
        if absent:
            raise ValueError(f"{folder / weights} names shards the folder lacks: {', '.join(absent[:3])}")
        names |= parts
    return [folder / name for name in sorted(names)]


def model_folder_kind(model: str) -> str:
    """The kind of the model folder `model` (jobs/inference/kinds.py), refused as the run refuses it: no such folder,
    no WordPiece tokenizer (none, or another kind that would read words as [UNK]), no config transformers reads, no
    weights it loads. Read as JSON and file names, so a check imports no framework. "" for a models:/ or runs:/ URI:
    MLflow resolves it (and downloads its files) when the job runs."""
    from jobs.config.predict import MODEL_URIS
    from jobs.inference.kinds import folder_kind
    from pipelines.tasks.common import require_wordpiece

    if model.startswith(MODEL_URIS):
        return ""
    if not Path(model).is_dir():
        from bert_core.files import moved_aside_said

        raise ConfigError(f"model {model!r} does not resolve: no such folder {model}{moved_aside_said(model)}")
    try:  # in the run's order: its tokenizer (jobs/finetune.resolve_init), its config, then its weights
        require_wordpiece(Path(model).resolve())  # ConfigError for another kind, as the run raises it
    except FileNotFoundError as exc:
        raise ConfigError(f"model {model!r} does not resolve: {exc}") from None
    except ConfigError:
        raise
    except ValueError as exc:  # a tokenizer.json cut short: no JSON
        raise ConfigError(f"model {model!r}: its tokenizer.json is not JSON ({exc})") from None
    try:
        kind = folder_kind(Path(model))
        model_files(Path(model))
        return kind
    except ValueError as exc:
        raise ConfigError(f"model {model!r}: {exc}") from None
