"""Release checkpoints in the `transformers` format: config.json + model.safetensors (+ tokenizer).

What we write loads with `transformers.AutoModel*.from_pretrained(dir)` and no code of ours;
what we read is any BERT directory `transformers` writes: bare BertModel (keys without the
`bert.` prefix, like all-MiniLM-L6-v2), BertForPreTraining, or a fine-tuned head. Our modules
carry HF's parameter names (bert_core/model.py), so the only translation is the `bert.` prefix,
the tied MLM decoder and legacy key spellings.

Writes are atomic: a temp dir in the same parent is filled, fsynced and renamed into place, so
a reader never sees a half-written checkpoint. Weights are read only from safetensors, or from
pytorch_model.bin with `torch.load(weights_only=True)` (no pickled code runs).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from bert_core.config import BertConfig
from bert_core.files import moved_aside, umask
from bert_core.model import BertForPreTraining, BertModel

log = logging.getLogger(__name__)

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
BIN_NAME = "pytorch_model.bin"  # the older format: read with torch.load(weights_only=True), never written
# added_tokens.json: a slow tokenizer's tokens added past vocab.txt ({"[E1]": 30522}), which BertTokenizerFast reads;
# a release without it split "[E1]" into pieces where fine-tuning had trained one id
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json")
LABELLED_HEADS = ("BertForSequenceClassification", "BertForTokenClassification",
                  "ModernBertForSequenceClassification", "ModernBertForTokenClassification")
# Buffers HF once saved and we recompute; dropped on load.
_DERIVED_KEYS = ("embeddings.position_ids", "embeddings.token_type_ids")
_BACKBONE = ("embeddings.", "encoder.", "pooler.")
_WRAPPER_PREFIXES = ("module.", "_orig_mod.")  # DDP/DeepSpeed and torch.compile wrappers


# ----------------------------------------------------------------------------- save


def save_pretrained(model: nn.Module, out_dir: str | os.PathLike, tokenizer_dir: str | os.PathLike | None = None,
                    id2label: dict[int, str] | None = None) -> Path:
    """Write `model` (any class of bert_core.model) as an HF checkpoint directory; returns its path.

    `id2label` names the classes of a classifier head; default: the model's `id2label`
    attribute (set by load_pretrained) or LABEL_i. A wrapped model (torch.compile's, DDP's) is saved as the model
    it wraps: its class names the architecture, its labels and problem type go into the config.
    """
    model = unwrap(model)
    return save_state_dict(model.state_dict(), model.config, out_dir, architectures=[type(model).__name__],
                           tokenizer_dir=tokenizer_dir, id2label=id2label or getattr(model, "id2label", None),
                           problem_type=getattr(model, "problem_type", None),
                           tied_weights=getattr(model, "tied_weights", ()))


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside torch.compile's OptimizedModule (`_orig_mod`) and DDP's or DeepSpeed's wrapper (`module`)."""
    while True:
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if not isinstance(inner, nn.Module):
            return model
        model = inner


def save_state_dict(state_dict: dict[str, torch.Tensor], config: BertConfig, out_dir: str | os.PathLike,
                    architectures: list[str] | None = None, tokenizer_dir: str | os.PathLike | None = None,
                    id2label: dict[int, str] | None = None, problem_type: str | None = None,
                    tied_weights: Iterable[str] = (), max_length: int | None = None) -> Path:
    """Same as save_pretrained from a bare state dict (e.g. ZeRO state consolidated on rank 0). `problem_type`
    (a sequence head's: regression, single- or multi-label classification) goes into the config as HF writes it.
    `max_length` becomes the copied tokenizer's `model_max_length`: a fine-tuned model's sequence length, the one
    it was trained and evaluated at, is then where its pipeline and batch prediction cut or window an input.

    Keys are those of the bert_core.model class named in `architectures`; wrapper prefixes
    (`module.`, `_orig_mod.`) are stripped and the tied decoder copy is dropped, as HF does (BERT's, and
    `tied_weights`: the model's own, e.g. bert_core.modern.ModernBertForMaskedLM.tied_weights).
    """
    architectures = architectures or ["BertForPreTraining"]
    tied = {*BertForPreTraining.tied_weights, *tied_weights}
    tensors = {}
    for key, value in state_dict.items():
        key = _strip_wrappers(key)
        if key in tied:
            continue
        tensors[key] = value.detach().to("cpu").contiguous()

    hf_config = config.to_hf_dict(architectures)
    if architectures[0] in LABELLED_HEADS:
        num_labels = tensors["classifier.weight"].shape[0]
        id2label = id2label or {i: f"LABEL_{i}" for i in range(num_labels)}
        if len(id2label) != num_labels:
            raise ValueError(f"id2label has {len(id2label)} entries but the classifier has {num_labels} outputs")
        hf_config["id2label"] = {str(i): name for i, name in id2label.items()}
        hf_config["label2id"] = {name: int(i) for i, name in id2label.items()}
        if problem_type:
            hf_config["problem_type"] = problem_type

    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        (tmp / CONFIG_NAME).write_text(json.dumps(hf_config, indent=2, sort_keys=True) + "\n")
        save_file(tensors, str(tmp / WEIGHTS_NAME), metadata={"format": "pt"})  # HF requires "format"
        if tokenizer_dir is not None:
            _copy_tokenizer(Path(tokenizer_dir), tmp, max_length, config.max_position_embeddings)
    return out_dir


def _strip_wrappers(key: str) -> str:
    stripped = True
    while stripped:
        stripped = False
        for prefix in _WRAPPER_PREFIXES:
            if key.startswith(prefix):
                key, stripped = key[len(prefix):], True
    return key


def _copy_tokenizer(src: Path, dst: Path, max_length: int | None = None, positions: int | None = None) -> None:
    """The tokenizer's files, its `model_max_length` set to `max_length` (when given) and never above the model's
    `positions`: a tokenizer trained at 512 beside a 128-position model let transformers' truncation keep 512 pieces,
    and the model failed on them."""
    found = [name for name in TOKENIZER_FILES if (src / name).is_file()]
    if not found:
        raise FileNotFoundError(f"no tokenizer files ({', '.join(TOKENIZER_FILES)}) in {src}")
    for name in found:
        shutil.copyfile(src / name, dst / name)
    path = dst / "tokenizer_config.json"
    settings = json.loads(path.read_text()) if path.is_file() else {}
    stated = _normalizer_settings(dst / "tokenizer.json")
    # transformers rebuilds a BERT tokenizer's normalizer from tokenizer_config.json (do_lower_case defaults to true):
    # a tokenizer.json alone, cased, was read lowercased, with other ids
    added = {k: v for k, v in stated.items() if k not in settings}
    # BERT's positions count from the first column: a checkpoint's "padding_side": "left" served each batch with its
    # short rows' tokens at other positions (and their [CLS] not at 0)
    added.update({k: "right" for k in ("padding_side", "truncation_side") if settings.get(k, "right") != "right"})
    current = settings.get("model_max_length")
    want = int(max_length) if max_length is not None else current
    if positions is not None and not (isinstance(want, (int, float)) and want <= positions):
        want = int(positions)  # absent (no limit) or past the position table
    if want != current or added:
        path.write_text(json.dumps({**settings, **added, "model_max_length": want}, indent=2) + "\n")


def _normalizer_settings(spec: Path) -> dict:
    """tokenizer_config.json's flags for a tokenizer.json's BertNormalizer ({} for none)."""
    from bert_core.tokenizer import normalizer_flags

    norm = (json.loads(spec.read_text(encoding="utf-8")).get("normalizer") or {}) if spec.is_file() else {}
    return normalizer_flags(norm) if norm.get("type") == "BertNormalizer" else {}


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)




@contextlib.contextmanager
def atomic_dir(out_dir: Path):
    """Yield a temp dir beside `out_dir`; on success it replaces `out_dir` by rename. The folder and its files get
    the modes a plain mkdir and open would (the umask's): mkdtemp makes 0700 and safetensors writes 0600, so a
    release on shared storage was unreadable to a serving process or a colleague running as another user."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _restore_moved_aside(out_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    old = None  # where the checkpoint it replaces waits while the new one is renamed in
    try:
        yield tmp
        mask = umask()
        for f in tmp.iterdir():
            if f.is_file():
                os.chmod(f, 0o666 & ~mask)
            _fsync(f)
        os.chmod(tmp, 0o777 & ~mask)
        _fsync(tmp)
        # rename(2) cannot replace a non-empty directory: move the old one aside first, so
        # out_dir is either the old or the new checkpoint except for one rename's width.
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
            os.replace(out_dir, old / out_dir.name)
        try:
            os.replace(tmp, out_dir)
        except BaseException:  # the old checkpoint back where it was, not left under .old-*
            if old is not None and not out_dir.exists():
                os.replace(old / out_dir.name, out_dir)
            raise
        _fsync(out_dir.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not (old / out_dir.name).exists():
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:  # the write is done: a copy that will not go away is no error of the write's
        shutil.rmtree(old, ignore_errors=True)


def _restore_moved_aside(out_dir: Path) -> None:
    """Put back the folder a write killed between its two renames left under `.NAME.old-*/` (SIGKILL, the OOM killer,
    a lost node): `out_dir` was then missing, and no later write or read looked there. The old copy is the one known
    whole; the killed write's own folder stays under `.NAME.tmp-*` (it may be partial) for whoever looks."""
    aside = moved_aside(out_dir)
    if aside is not None:
        os.replace(aside, out_dir)
        shutil.rmtree(aside.parent, ignore_errors=True)



# ----------------------------------------------------------------------------- load


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Raw tensors of an HF checkpoint dir: model.safetensors or pytorch_model.bin, sharded or not."""
    path = Path(path)
    if (path / WEIGHTS_NAME).is_file():
        return load_file(str(path / WEIGHTS_NAME))
    for index, read in ((path / f"{WEIGHTS_NAME}.index.json", lambda f: load_file(str(f))),
                        (path / f"{BIN_NAME}.index.json", _load_bin)):  # shards (save_pretrained's max_shard_size)
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            return {k: v for shard in shards for k, v in read(path / shard).items()}
    if (path / BIN_NAME).is_file():
        return _load_bin(path / BIN_NAME)
    raise FileNotFoundError(f"no {WEIGHTS_NAME}, {BIN_NAME} or their sharded forms (*.index.json) in {path}")


def _load_bin(file: Path) -> dict[str, torch.Tensor]:
    try:  # tensors only: a pickled object (code that would run on load) is refused, not executed
        return torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{file} holds pickled objects besides tensors and was refused (loaded with "
                         f"weights_only=True; {first}); allowed: {WEIGHTS_NAME}, or a {BIN_NAME} of plain "
                         f"tensors") from None


def _normalise_keys(raw: dict[str, torch.Tensor], bare_backbone: bool) -> dict[str, torch.Tensor]:
    """Map any HF BERT checkpoint's keys onto ours: `bert.`-prefixed, or bare for BertModel."""
    out = {}
    for key, value in raw.items():
        key = _strip_wrappers(key).replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta",
                                                                                           "LayerNorm.bias")
        if key.startswith(_BACKBONE):
            key = "bert." + key
        if key.endswith(_DERIVED_KEYS) or key in BertForPreTraining.tied_weights:
            continue
        if key == "cls.predictions.decoder.bias":  # HF ties it to cls.predictions.bias
            out.setdefault("cls.predictions.bias", value)
            continue
        out[key] = value
    if bare_backbone:
        out = {(k[len("bert."):] if k.startswith("bert.") else k): v for k, v in out.items()}
    return out


def check_bert_config(path: Path, hf_config: dict) -> BertConfig:
    """A BERT checkpoint's config.json as bert_core runs it, refused (ValueError naming `path`) where it would compute
    otherwise than transformers: another model_type, a causal BERT, relative or ALiBi positions, a setting BertConfig
    refuses. load_pretrained's checks, and the fine-tune driver's before any Ray work (jobs/finetune.check_init): met
    in the workers, they came after the cluster started, the rows were featurized and the MLflow run opened."""
    if (hf_config.get("model_type") or "bert") != "bert":  # a RoBERTa backbone's weights have BERT's names
        raise ValueError(f"{path} holds a {hf_config['model_type']!r} model (config.json's model_type), not BERT: "
                         f"its weights would load into BERT's layout without an error and compute something else")
    config = BertConfig.from_dict(hf_config).validate()
    if hf_config.get("is_decoder") or hf_config.get("add_cross_attention"):
        raise ValueError(f"{path} is a causal BERT (config.json's is_decoder / add_cross_attention): transformers runs "
                         "it with causal attention, bert_core's encoder attends both ways, and would compute something "
                         "else")
    if (hf_config.get("position_embedding_type") or "absolute") != "absolute":
        raise ValueError(f"{path}: position_embedding_type={hf_config['position_embedding_type']!r}; bert_core has "
                         "BERT's absolute position embeddings only, and would drop the checkpoint's relative ones")
    return config


def check_model_config(path: Path, hf_config: dict) -> None:
    """A checkpoint's config.json as bert_core builds its model, of either family: ModernConfig's validate for a
    ModernBERT one, check_bert_config for any other (the fine-tune driver's check, before any Ray work)."""
    from bert_core.modern_config import MODEL_TYPE, VARIANT_MODEL_TYPE, ModernConfig

    if hf_config.get("model_type") in (MODEL_TYPE, VARIANT_MODEL_TYPE):
        ModernConfig.from_dict(hf_config).validate()
    else:
        check_bert_config(path, hf_config)


def load_pretrained(path: str | os.PathLike, cls: type[nn.Module] = BertForPreTraining,
                    output_loading_info: bool = False, **head_kwargs):
    """Build `cls` from an HF BERT checkpoint dir; returns the model in eval mode (as HF does).

    Head weights the checkpoint lacks (a classifier on a pretrained encoder, the MLM head on
    MiniLM) keep their fresh init and are logged; checkpoint weights the model has no place for
    are logged too. A missing encoder/embedding weight or a shape mismatch raises.
    With output_loading_info=True returns (model, {"missing_keys": [...], "unexpected_keys": [...]}).
    head_kwargs go to the constructor (num_labels); num_labels defaults to the checkpoint's.
    """
    path = Path(path)
    hf_config = json.loads((path / CONFIG_NAME).read_text())
    config = check_bert_config(path, hf_config)
    if hf_config.get("tie_word_embeddings") is False and getattr(cls, "tied_weights", None):
        raise ValueError(f"{path}: its MLM decoder is its own matrix (config.json's tie_word_embeddings is false), "
                         f"and {cls.__name__} ties the decoder to the word embeddings: it would predict with those, "
                         "not the checkpoint's decoder")
    if cls.__name__ in LABELLED_HEADS and "num_labels" not in head_kwargs and "id2label" in hf_config:
        head_kwargs["num_labels"] = len(hf_config["id2label"])
    if cls.__name__ == "BertForSequenceClassification" and not {"multi_label", "regression"} & head_kwargs.keys():
        # the checkpoint's problem_type, kept: a 3-output regression read as classification was re-exported as
        # single_label_classification, and its pipeline softmaxed the regression values
        head_kwargs["multi_label"] = hf_config.get("problem_type") == "multi_label_classification"
        head_kwargs["regression"] = hf_config.get("problem_type") == "regression"
    model = cls(config, **head_kwargs)

    state = _normalise_keys(read_state_dict(path), bare_backbone=cls is BertModel)
    expected = {k: v for k, v in model.state_dict().items() if k not in getattr(cls, "tied_weights", {})}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    mismatched = [f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
                  for k in expected.keys() & state.keys() if state[k].shape != expected[k].shape]
    if mismatched:
        raise ValueError(f"shape mismatch loading {path} into {cls.__name__}: " + "; ".join(sorted(mismatched)))
    core_missing = [k for k in missing if k.removeprefix("bert.").startswith(("embeddings.", "encoder."))]
    if core_missing:
        raise ValueError(f"{path} is missing encoder weights for {cls.__name__}: {core_missing[:5]}"
                         f"{' ...' if len(core_missing) > 5 else ''}")
    model.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=False)
    if missing:
        log.warning("%s: freshly initialised (not in %s): %s", cls.__name__, path, missing)
    if unexpected:
        log.info("%s: checkpoint weights not used: %s", cls.__name__, unexpected)
    if cls.__name__ in LABELLED_HEADS and len(hf_config.get("id2label", {})) == model.num_labels:
        model.id2label = {int(i): name for i, name in hf_config["id2label"].items()}
    model.eval()
    if output_loading_info:
        return model, {"missing_keys": missing, "unexpected_keys": unexpected}
    return model
