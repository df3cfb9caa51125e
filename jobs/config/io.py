"""Typed configs from YAML plus dotted command-line overrides, validated before any cluster work.

    cfg = load_config(PretrainConfig, "configs/pretrain/quickstart.yaml", ["train.max_steps=50"])

Every key is checked against the dataclass fields: an unknown key or a value of the wrong type fails
with the dotted name of the field and what it accepts. No `exec`, no import-time side effects.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import sys
import types
import typing
from pathlib import Path
from collections.abc import Hashable
from typing import Any, Callable, TypeVar

import yaml

from bert_core import modern_config
from bert_core.config import BertConfig, ConfigError, preset

RECIPES = ("bert", "modern")  # model.recipe: BERT of 2018 (bert_core/model.py) or the modern encoder (modern.py)

T = TypeVar("T")


class NumbersAsTyped(yaml.SafeLoader):
    """YAML with YAML 1.2's numbers: `010` is 10 and `1:30` is text, not YAML 1.1's octal 8 and sexagesimal 90
    (`train.max_steps=010` trained 8 steps); `1e-4` is a float without its dot. Booleans stay YAML 1.1's. A key
    repeated in one mapping is refused: YAML keeps the last and drops the first block without a word."""

    def construct_mapping(self, node, deep=False):
        lines: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor`: merged keys are meant to be overridden
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, Hashable):
                continue  # PyYAML refuses it itself
            if key in lines:
                raise ConfigError(f"key {key!r} appears twice in one mapping (lines {lines[key]} and {line}); YAML "
                                  f"would keep the second and drop the first: write it once")
            lines[key] = line
        return super().construct_mapping(node, deep)


_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
NumbersAsTyped.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
NumbersAsTyped.add_implicit_resolver(_INT, re.compile(r"^[-+]?(?:[0-9][0-9_]*|0x[0-9a-fA-F_]+|0o[0-7_]+)$"),
                                     list("-+0123456789"))  # 100_000 too, as YAML 1.1 and Python read it
NumbersAsTyped.add_implicit_resolver(
    _FLOAT, re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
                       r"|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))


def _yaml_int(loader, node) -> int:
    text = loader.construct_scalar(node)
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+"))
    base = 16 if digits[:2] in ("0x", "0X") else 8 if digits[:2] == "0o" else 10
    return sign * int((digits[2:] if base != 10 else digits).replace("_", ""), base)


NumbersAsTyped.add_constructor(_INT, _yaml_int)


def yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=NumbersAsTyped)


def yaml_quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar that reads back exactly: every character outside printable ASCII as its
    code point's escape (a JSON string escapes an emoji as two UTF-16 halves, which YAML reads as two lone
    surrogates; a path's undecodable bytes and U+0085 come back as they went in)."""
    body = "".join("\\" + c if c in '"\\' else c if " " <= c <= "~" else f"\\U{ord(c):08x}" for c in text)
    return f'"{body}"'


def parse_overrides(overrides: list[str], cls: type | None = None) -> dict:
    """`["a.b=1", "c=[x, y]"]` -> nested dict; values are parsed as YAML scalars/lists, except where `cls` says the
    field is a string: its text as typed (`run_name=010`, `task.columns.label_separator=-`, a column named `yes`),
    YAML only to unquote ('...') or, for an optional one, to read null; a list of class names: its items as typed."""
    out: dict = {}
    whole: set[str] = set()  # keys given a mapping whole (a later mapping of the key replaces it, as any value)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"override {item!r} must look like dotted.key=value")
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r} conflicts with an earlier override of {part!r}")
        tp = _field_type(cls, key.split("."))
        if tp is str and raw.strip() in YAML_NULLS:  # as YAML's null there is refused, not taken as the word "null"
            raise ConfigError(f"{key} is text, not null: an empty value (`{key}=`) is none; quote the word for the "
                              f"text (`{key}=\"'{raw.strip()}'\"` in a shell)")
        as_typed = tp in (str, str | None) and raw.strip()[:1] not in ("'", '"') and raw.strip() not in YAML_NULLS
        value = raw if as_typed else _text_list(raw) if tp == list[ClassName] else _override_value(raw)
        if (isinstance(node.get(leaf), dict) or (leaf in node and isinstance(value, dict))) and key not in whole:
            # `train.max_steps=5 train={log_every: 1}`: the mapping merged over the keys given dotted before it
            # (replacing them, the result hung on the order given); a mapping and a value of one key contradict
            if not (isinstance(node[leaf], dict) and isinstance(value, dict)):
                raise ConfigError(f"override {item!r} conflicts with an earlier override of {key!r}")
            value = deep_merge(node[leaf], value)
        if isinstance(value, dict):
            whole.add(key)
        node[leaf] = value
    return out


def _field_type(cls: type | None, path: list[str]) -> Any:
    """The declared type of the dotted field `path` of config class `cls`; None where there is none."""
    tp: Any = cls
    for part in path:
        args = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)
        inner = [a for a in args if a is not type(None)]
        if BertConfig in inner or modern_config.ModernConfig in inner:  # a model section: either recipe's fields
            hints = {**typing.get_type_hints(BertConfig), **typing.get_type_hints(modern_config.ModernConfig),
                     "recipe": str, "preset": str}
        elif len(inner) == 1 and dataclasses.is_dataclass(inner[0]):
            hints = typing.get_type_hints(inner[0])
        else:
            return None
        if part not in hints:
            return None
        tp = hints[part]
        if tp is dict and dataclasses.is_dataclass(inner[0]):  # a mapping of another section's fields (promote's
            # `task: dict`, overrides of a TaskConfig): its keys typed as that section's
            tp = next(f for f in dataclasses.fields(inner[0]) if f.name == part).metadata.get("fields", dict)
    return tp


YAML_NULLS = ("null", "Null", "NULL", "~")


def _text_list(raw: str) -> Any:
    """A list override whose items are text (class names): YAML's flow list, every scalar as typed (`[01, yes]`:
    "01", "yes", where YAML would read 1 and true); what is no list is left to the field's check."""
    try:
        return yaml.load(raw, Loader=yaml.BaseLoader)
    except yaml.YAMLError:
        return raw


def _override_value(raw: str) -> Any:
    """A YAML scalar or list; text YAML reads as nothing (`|` and `>` open block scalars, `#` a comment) or cannot
    read at all (a lone `,` or `@`) is the text itself: `task.columns.label_separator=|` means "|", not ""."""
    if raw == "":
        return ""
    try:
        value = yaml_load(raw)
    except yaml.YAMLError:
        return raw
    if (value is None and raw.strip() not in YAML_NULLS) or (value == "" and raw.strip() not in ("''", '""')):
        return raw
    return value


def deep_merge(base: dict, update: dict) -> dict:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_yaml(path: str | Path, merge: Callable[[dict, dict], dict] = deep_merge, _seen: tuple = ()) -> dict:
    """A config file as a dict. A top-level `base: other.yaml` (relative to this file) is read first and
    this file's keys are merged over it (`merge(base, this)`, at every step of a chain of bases): a preset derives
    from a base and changes one thing. A sweep's `finetune_config:` is relative to the file that names it too (a
    base's, inherited, to the base)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    if path.resolve() in _seen:
        raise ConfigError(f"config file {str(path)!r} names itself as a base (through {[str(p) for p in _seen]})")
    try:
        data = yaml_load(path.read_text(encoding="utf-8")) or {}
    except ConfigError as exc:
        raise ConfigError(f"config file {str(path)!r}: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:  # a traceback naming "<unicode string>" said not which file
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at the top level")
    if isinstance(data.get("finetune_config"), str):  # a sweep's: relative to the file that names it, as `base`
        data["finetune_config"] = str(path.parent / data["finetune_config"])
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"base in {str(path)!r} must be a file name, got {base!r}")
    return merge(read_yaml(path.parent / base, merge, (*_seen, path.resolve())), data)


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | None = None) -> T:
    data = read_yaml(path) if path is not None else {}
    data = deep_merge(data, parse_overrides(overrides or [], cls))
    cfg = from_dict(cls, data)
    validate = getattr(cfg, "validate", None)
    return validate() if validate else cfg


def from_dict(cls: type[T], data: Any, where: str = "") -> T:
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'} must be a mapping, got {data!r}")
    if cls in (BertConfig, modern_config.ModernConfig):
        return _model_from_dict(data, where, default_recipe="modern" if cls is modern_config.ModernConfig else "bert")
    defaults = getattr(cls, "recipe_defaults", None)
    if defaults is not None:  # what the chosen recipe changes, under what the config itself says
        data = deep_merge(defaults(data), data)
    data = deep_merge(_section_defaults(cls), data)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - set(fields), key=str)
    if unknown:
        raise _unknown_key(where, unknown[0], sorted(fields))
    kwargs = {name: _coerce(hints[name], value, _join(where, name)) for name, value in data.items()}
    return cls(**kwargs)


def _section_defaults(cls: type) -> dict:
    """What a config's own defaults of its sections change from the sections' defaults (FinetuneConfig's deepspeed
    zero_stage 0, its tracking experiment): a section given in part (tracking.tracking_uri alone) keeps them, where
    the section built from the given keys alone had the section's defaults (ZeRO-2, the pretraining experiment)."""
    out = {}
    for f in dataclasses.fields(cls):
        made = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(made) and not isinstance(made, (type, BertConfig, modern_config.ModernConfig)):
            # (a model section: its preset and recipe decide, _model_from_dict)
            given, plain = dataclasses.asdict(made), dataclasses.asdict(type(made)())
            changed = {k: v for k, v in given.items() if plain.get(k) != v}
            if changed:
                out[f.name] = changed
    return out


def to_dict(cfg: Any) -> dict:
    """A config as plain data that `from_dict` reads back: a modern model section says its recipe."""
    d = dataclasses.asdict(cfg)
    if isinstance(getattr(cfg, "model", None), modern_config.ModernConfig):
        d["model"]["recipe"] = "modern"
    return d


def recipe_of(model: Any) -> str:
    """"modern" for a ModernConfig, "bert" for a BertConfig."""
    return "modern" if isinstance(model, modern_config.ModernConfig) else "bert"


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """Nested dict -> {"a.b": v}: MLflow params and manifest summaries."""
    out = {}
    for key, value in d.items():
        name = _join(prefix, key)
        if isinstance(value, dict):
            out.update(flatten(value, name))
        else:
            out[name] = value
    return out


def _model_from_dict(data: dict, where: str, default_recipe: str = "bert") -> BertConfig | modern_config.ModernConfig:
    # A model section names a recipe (bert: BertConfig, modern: ModernConfig) and a preset, and may override
    # any field of that recipe's config on top of it.
    data = dict(data)
    recipe = data.pop("recipe", default_recipe)
    if recipe not in RECIPES:
        raise ConfigError(f"{_join(where, 'recipe')} must be one of {RECIPES}, got {recipe!r}")
    cls, make = (BertConfig, preset) if recipe == "bert" else (modern_config.ModernConfig, modern_config.preset)
    name = data.pop("preset", "tiny")
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields, key=str)
    if unknown:
        error = _unknown_key(where, unknown[0], ["preset", "recipe", *sorted(fields)])
        modern_only = {f.name for f in dataclasses.fields(modern_config.ModernConfig)} - fields
        if recipe == "bert" and unknown[0] in modern_only:  # e.g. model.glu without model.recipe=modern
            raise ConfigError(f"{error}; {_join(where, str(unknown[0]))} needs {_join(where, 'recipe')}=modern")
        raise error
    hints = typing.get_type_hints(cls)
    overrides = {k: _coerce(hints[k], v, _join(where, k)) for k, v in data.items()}
    return make(name, **overrides)


def _unknown_key(where: str, key: Any, allowed: list[str]) -> ConfigError:
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f"; did you mean {_join(where, close[0])!r}?" if close else ""
    return ConfigError(f"unknown key {_join(where, str(key))!r}; allowed: {allowed}{hint}")


def as_number(value, where: str) -> int | float:
    """An int or float, as YAML gives it; a string like "3e-4" (YAML 1.1 reads no-dot exponents as strings)
    is read as a float. Anything else is refused, naming `where`."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value):  # nan passed every "<= 0" check after it
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    return value


class ClassName(str):
    """The type of a class label a config names (task.labels): text as written, or, in a YAML file, a number as the
    readers read such a label cell (pipelines.tasks.cells.number_class): an integer (`labels: [0, 1]`) or integral
    float (1.0) as the integer's digits ("1"), any other finite float as its shortest text (0.5: "0.5"). On the
    command line the list is read as text (`task.labels=[01, yes, 2]`: "01", "yes", "2"). A plain str in the
    config, so labels a job stored come back as they were."""


def _class_name(value: Any, where: str) -> str:
    if isinstance(value, float) and math.isfinite(value):
        # imported here: every job reads this module, and importing the pipelines.tasks package costs ~0.4 s
        from pipelines.tasks.cells import number_class

        return number_class(value)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigError(f"{where} must be a class name (text or a number), got {value!r}"
                          + ("; quote it (YAML reads yes/no/on/off as true/false)" if isinstance(value, bool) else ""))
    return str(value)


def _coerce(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if BertConfig in inner:  # a model section: its recipe picks the config class
            return _model_from_dict(value, where) if isinstance(value, dict) else from_dict(BertConfig, value, where)
        (inner,) = inner
        return _coerce(inner, value, where)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where} must be a list, got {value!r}")
        (inner,) = typing.get_args(tp) or (Any,)
        return [_coerce(inner, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict or tp is dict:  # else a word's characters were taken as keys (task=x.csv: "task..")
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping ({where}.<key>=... overrides, or a YAML mapping; {{}} for "
                              f"none), got {value!r}")
        return value
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return value
    if tp is float:
        return float(as_number(value, where))
    if tp is ClassName:
        return _class_name(value, where)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, got {value!r}")
        return value
    return value


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def add_check_argument(parser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="validate the config and what this machine must provide, say so, and exit: no Ray work")


def checked(job: str, source: str | None, overrides: list[str]) -> None:
    """What a job prints for --check once its config passed every check a run makes before Ray."""
    n = len(overrides)
    given = f"{source or 'the defaults'}" + (f" + {n} override{'s' if n > 1 else ''}" if n else "")
    print(f"[check] {job}: {given}: valid; nothing was run", flush=True)


def cli(main: Callable[[], object]) -> None:
    """A job's entry point: a config mistake, your own data refused (pipelines.tasks' TaskDataError: a file unusable
    as a whole, task.labels naming none of its labels, no usable rows), or a corpus refused (SourceError: a source
    that matches no files or cannot be read, a .zst file, prepared data given as a corpus, no document kept) ends the
    process with one line on stderr (`error: ...`) and exit status 2, as argparse does for a bad flag, instead of a
    traceback around that line; one raised in a Ray task comes as a RayTaskError holding it (`cause`), whose text is
    that task's traceback: the cause's message is the line. Other errors keep their traceback, and so does an I/O
    error reading a corpus file (SourceReadError: a disk error, a network reset), which is no config mistake."""
    try:
        main()
    except Exception as exc:
        # deferred: the data readers, imported on this path only
        from pipelines.source_files import SourceError, SourceReadError
        from pipelines.tasks.common import TaskDataError

        # the class, not `cause.__cause__`: an exception's __cause__ does not survive Ray pickling it out of a task
        cause = exc.cause if isinstance(getattr(exc, "cause", None), Exception) else exc
        if isinstance(cause, SourceReadError) or not isinstance(cause, (ConfigError, TaskDataError, SourceError)):
            raise
        print(f"error: {cause}", file=sys.stderr, flush=True)
        sys.exit(2)


def refuse_stage(key: str, uri: str) -> None:
    """Refuse models:/NAME/<not a version> naming `key`: a stage (Production, Staging), which MLflow 3 replaced with
    aliases, passed validation, the model even downloaded, and the job failed after its cluster work on MLflow's
    "Parameter 'version' must be an integer" (registry.versions.pin reads VERSION, "latest" or an alias)."""
    if not uri.startswith("models:/"):
        return
    name, _, version = uri[len("models:/"):].partition("/")
    version = version.strip("/")
    if "@" not in name and version and not version.isdigit() and version != "latest":
        raise ConfigError(f"{key}={uri!r}: {version!r} is no version number; MLflow names versions by number or by "
                          f"alias (stages are deprecated): use models:/{name}@ALIAS (@champion), "
                          f"models:/{name}/VERSION or models:/{name}/latest")
