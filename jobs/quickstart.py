"""The whole path in one job: pretrain a tiny BERT, sweep its fine-tuning on pkgdocs, register the winner,
decide whether it becomes @champion (jobs/promote.py: the paired-bootstrap gate against the champion), and predict
the task's evaluation rows with @champion through jobs/predict.py, counting how many it gets right.

    python jobs/quickstart.py                                   # what `make quickstart` runs
    python jobs/quickstart.py pretrain.train.max_steps=200 sweep.num_samples=8

Both configs (configs/pretrain/quickstart.yaml, configs/sweep/quickstart.yaml, or --pretrain-config /
--sweep-config) are read and validated before any Ray work; overrides go to one of them by their
first key (`pretrain.` or `sweep.`). The sweep starts from the release checkpoint this run just wrote,
and shares the pretraining's MLflow store; the sweep's parent run and the registered fine-tuned version
are tagged with the pretraining run behind them (the release names it: jobs/runtime/release.py). The
promotion decision is printed with its evidence.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

if __package__ in (None, ""):  # `python jobs/quickstart.py` from a checkout: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.runtime import console  # noqa: E402
from jobs.config.sections import ConfigError  # noqa: E402
from jobs.config.pretrain import PretrainConfig
from jobs.config.io import add_check_argument, checked, cli, flatten, load_config, parse_overrides  # noqa: E402
from jobs.config.sweep import SweepConfig, check_name, load_sweep_config  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PRETRAIN = REPO / "configs/pretrain/quickstart.yaml"
SWEEP = REPO / "configs/sweep/quickstart.yaml"


# sweep settings the quickstart sets after pretraining: not to be overridden
QUICKSTART_SETS = {"finetune.init": "the sweep fine-tunes the release this run's pretraining writes",
                   "finetune.tracking.tracking_uri": "the sweep logs where pretraining does: set "
                                                     "pretrain.tracking.tracking_uri"}


def load(pretrain_path: str | Path, sweep_path: str | Path, overrides: list[str]) -> tuple[PretrainConfig, SweepConfig]:
    """Both configs, overrides routed by prefix, both validated. The sweep's `finetune.init` is not known
    until pretraining has run: it is validated here as the pretrained model's registry URI and set to the
    release folder once it exists."""
    routed: dict[str, list[str]] = {"pretrain": [], "sweep": []}
    for o in overrides:
        head, _, rest = o.partition(".")
        if head not in routed or not rest:
            raise ConfigError(f"override {o!r}: start it with 'pretrain.' or 'sweep.' "
                              "(e.g. pretrain.train.max_steps=100)")
        routed[head].append(rest)
    for rest in routed["sweep"]:  # set by the quickstart after pretraining: an override would be dropped unread
        given = rest.partition("=")[0].strip()
        try:  # dotted, or inside a mapping (sweep.finetune={init: ...}, sweep.finetune.tracking={tracking_uri: ...})
            keys = flatten(parse_overrides([rest]))
        except ConfigError:
            keys = {}  # not an override at all: the sweep's load names it
        for key in QUICKSTART_SETS.keys() & keys.keys():
            sets = f" sets sweep.{key}, which" if key != given else ""
            raise ConfigError(f"override 'sweep.{given}'{sets} is the quickstart's own: {QUICKSTART_SETS[key]}")
    try:
        pretrain = load_config(PretrainConfig, pretrain_path, routed["pretrain"])
    except ConfigError as e:
        raise scoped("pretrain", PretrainConfig, e, routed["pretrain"]) from None
    t = pretrain.tracking
    placeholder = f"models:/{t.registered_model}@{t.alias}" if t.registered_model else "models:/pretrained@candidate"
    # one tracking store for the whole quickstart: the sweep (and the promotion after it) log where pretraining does
    store = [f"finetune.tracking.tracking_uri={t.tracking_uri}"]
    store += [f"finetune.tracking.artifact_location={t.artifact_location}"] if t.artifact_location else []
    given = [f"finetune.init={placeholder}", *store]
    try:
        sweep = load_sweep_config(sweep_path, [*given, *routed["sweep"]])
        harvest = other_harvest(pretrain, sweep)
        if harvest:  # the size pretraining harvests, under the sweep's own overrides (one is refused below)
            sweep = load_sweep_config(sweep_path, [*given, harvest, *routed["sweep"]])
    except ConfigError as e:
        raise scoped("sweep", SweepConfig, e, routed["sweep"]) from None
    if harvest and other_harvest(pretrain, sweep):
        raise ConfigError(f"sweep.finetune.task.harvest_max_mb={sweep.finetune.task.harvest_max_mb} and "
                          f"pretrain.corpus.harvest_max_mb={pretrain.corpus.harvest_max_mb} name one folder "
                          f"({pretrain.corpus.harvest_dir!r}), which holds one harvest: give both one size, or the "
                          f"sweep another sweep.finetune.task.corpus_dir")
    check_length(pretrain, sweep)
    if pretrain.run_name:  # the sweep is named after the pretraining (run): refused here, not once it has pretrained
        check_name("pretrain.run_name (the sweep's name is <run_name>-<sweep.name>)",
                   f"{pretrain.run_name}-{sweep.name}")
    return pretrain, sweep


def check_length(pretrain: PretrainConfig, sweep: SweepConfig) -> None:
    """The sweep fine-tunes the release this pretraining writes, whose length is the longest sequence it trains
    (jobs.pretrain.trained_positions): a longer task.max_seq_len was refused by the sweep's check_init, after the
    whole pretraining."""
    from jobs.pretrain import trained_positions

    trained, wanted = trained_positions(pretrain), sweep.finetune.task.max_seq_len
    if wanted > trained:
        field = "phase2.max_seq_len" if pretrain.phase2.max_steps else "data.max_seq_len"
        raise ConfigError(f"sweep.finetune.task.max_seq_len={wanted} exceeds the {trained} tokens the pretraining "
                          f"trains (pretrain.{field}={trained}), the length of the release the sweep fine-tunes: "
                          "positions past it never learn, and the sweep would refuse it after the whole pretraining; "
                          f"allowed: sweep.finetune.task.max_seq_len <= {trained}, or a pretraining that long "
                          "(pretrain.data.max_seq_len, or pretrain.phase2.max_seq_len with pretrain.phase2.max_steps "
                          "> 0; at most pretrain.model.max_position_embeddings="
                          f"{pretrain.model.max_position_embeddings})")


def other_harvest(pretrain: PretrainConfig, sweep: SweepConfig) -> str:
    """The sweep override that gives its pkgdocs task the size of pretraining's harvest, where it reads the folder
    pretraining harvests into with another size ("" otherwise): one folder holds one harvest, and the task refused
    the other size (pipelines/harvest.py) only after the whole pretraining."""
    task, corpus = sweep.finetune.task, pretrain.corpus
    if (corpus.harvest_installed_docs and task.name == "pkgdocs" and task.harvest_max_mb != corpus.harvest_max_mb
            and Path(task.corpus_dir).resolve() == Path(corpus.harvest_dir).resolve()):
        return f"finetune.task.harvest_max_mb={corpus.harvest_max_mb}"
    return ""


def scoped(section: str, cls: type, error: ConfigError, overrides: list[str]) -> ConfigError:
    """`error` of the `section` config (pretrain, sweep) with its fields named as the quickstart's overrides name them:
    `unknown key 'train.max_step'; ... did you mean 'train.max_steps'?` suggested a key the quickstart refused
    without its prefix. Named: the field an error starts with; a dotted name whose section has that field, or that an
    override gave (a dotted value, got 'train.txt', is left as it is); an unknown top-level key's quoted names; a
    top-level field in backticks before its "=" (`run_name=`: an override the error advises)."""
    import typing

    text, sections = str(error), typing.get_type_hints(cls)
    typed, top = {o.partition("=")[0].strip() for o in overrides}, re.match(r"unknown key '\w+'", text) is not None

    def named(m: re.Match) -> str:
        name = m.group(0)
        head, _, rest = name.partition(".")
        kind = sections.get(head)
        fields = {f.name for f in dataclasses.fields(kind)} if dataclasses.is_dataclass(kind) else None
        if m.lastgroup == "ticked":
            return f"{section}.{name}" if name in sections else name
        field = top if m.lastgroup == "quoted" else kind is not None and (
            m.lastgroup == "start" or fields is None or name in typed or rest.split(".")[0] in fields)
        return f"{section}.{name}" if field else name

    return ConfigError(re.sub(r"(?P<start>^\w+(?:\.\w+)*)|(?<=')(?P<quoted>\w+)(?=')|(?<=`)(?P<ticked>\w+)(?==)|"
                              r"(?<![\w./:-])(?P<dotted>\w+(?:\.\w+)+)", named, text))


def run(pretrain_cfg: PretrainConfig, sweep_cfg: SweepConfig):
    from jobs import pretrain, sweep

    pretrained = pretrain.run(pretrain_cfg, finished_ok=True)  # a resumed quickstart: on to its own sweep
    sweep_cfg.finetune.init = pretrained.release_dir  # exactly the weights this run wrote
    # One sweep per pretraining: a new quickstart must not "resume" the sweep of an earlier model, and the
    # same pretraining run name again (a resumed quickstart) resumes its own sweep.
    sweep_cfg.name = f"{pretrained.run_name}-{sweep_cfg.name}"
    sweep_cfg.finetune.tracking.tracking_uri = pretrain_cfg.tracking.tracking_uri  # resolved by the run
    swept = sweep.run(sweep_cfg.validate())
    promoted = None
    if swept.mlflow.get("version"):
        from jobs import promote

        t, judge = sweep_cfg.finetune.tracking, promote.PromoteConfig(
            model=swept.mlflow["registered_model"], version=int(swept.mlflow["version"]))
        judge.tracking.tracking_uri, judge.tracking.artifact_location = t.tracking_uri, t.artifact_location
        promoted = promote.run(judge)
    predicted = predict_champion(sweep_cfg, swept) if promoted is not None else None
    print(summary(pretrained, swept, promoted, predicted), flush=True)
    return pretrained, swept, promoted, predicted


def predict_champion(sweep_cfg: SweepConfig, swept) -> dict | None:
    """The task's evaluation rows as a user's file, predicted by jobs/predict.py with models:/NAME@champion (whichever
    version the promotion left there): {"uri", "version", "rows", "right", "output"}. A classification task's (of
    single sentences or pairs): "right" counts labels; other kinds are left to jobs/predict.py (None)."""
    import json

    from jobs import predict
    from jobs.config.predict import PredictConfig
    from jobs.loops import ft_tasks
    from pipelines.tasks.files import Columns

    task, t = sweep_cfg.finetune.task, sweep_cfg.finetune.tracking
    kind = "regression" if ft_tasks.num_labels(task) == 1 else task.kind  # STS-B is a GLUE "classification"
    if kind != "classification":  # its rows hold no class to count right (scores, tags, answers)
        print(f"[quickstart] the champion's check over the evaluation rows counts classes; a {kind} task's "
              "champion predicts with jobs/predict.py", flush=True)
        return None
    loaded = ft_tasks.load_rows(task)
    rows, labels = loaded.evaluation[ft_tasks.eval_splits(task)[0]], loaded.labels
    folder = Path(sweep_cfg.finetune.output_dir).resolve() / f"{sweep_cfg.name}-predictions"
    folder.mkdir(parents=True, exist_ok=True)
    inputs = folder / "evaluation.jsonl"
    pairs = any(r.get("text_b") is not None for r in rows)  # a model of pairs is asked with both texts
    text = "".join(json.dumps({"id": str(i), "text": r["text_a"], **({"text_pair": r["text_b"]} if pairs else {})})
                   + "\n" for i, r in enumerate(rows))
    if not inputs.is_file() or inputs.read_text() != text:  # a rerun's predict resumes: its input must stay the file
        inputs.write_text(text)  # it was (predict's basis holds its size and time)
    uri = f"models:/{swept.mlflow['registered_model']}@champion"
    cfg = PredictConfig(model=uri, input=str(inputs), output=str(folder / "predicted"), run_name="quickstart-predict",
                        columns=Columns(id="id", tokens="", text_pair="text_pair" if pairs else ""))
    cfg.tracking.tracking_uri, cfg.tracking.artifact_location = t.tracking_uri, t.artifact_location
    result = predict.run(cfg.validate())
    import pyarrow.parquet as pq

    gold = {str(i): labels[r["label"]] for i, r in enumerate(rows)}
    predicted = pq.read_table(folder / "predicted" / "shards", columns=["id", "label"]).to_pylist()
    right = sum(p["label"] == gold[p["id"]] for p in predicted)
    return {"uri": uri, "version": result.model.version, "rows": len(predicted), "right": right,
            "output": str(folder / "predicted")}


def summary(pretrained, swept, promoted=None, predicted: dict | None = None) -> str:
    from jobs.search.outcome import std_text

    # the job's start and end (a two-phase job's start is phase 1's: PretrainResult.mlm_acc_before)
    lines = ["", "=" * 72, "quickstart: corpus -> pretraining -> fine-tuning sweep -> registry -> promotion",
             f"pretrained       {pretrained.run_name}: MLM accuracy {pretrained.mlm_acc_before:.4f} -> "
             f"{pretrained.mlm_acc_after:.4f}; release {pretrained.release_dir}",
             f"fine-tuned       {swept.name}: best {'config' if swept.best_seeds else 'trial'} {swept.metric} "
             f"{swept.best_score:.4f}{f' (the mean over {swept.best_seeds} seeds)' if swept.best_seeds else ''}"]
    if swept.seeds.get("scores"):
        s = swept.seeds
        lines.append(f"over {len(s['scores'])} seeds     median {s['median']:.4f} (std {std_text(s)}, "
                     f"min {s['min']:.4f}, max {s['max']:.4f})")
    if swept.evaluation:
        lines.append(f"evaluation       {swept.eval_metric} {swept.evaluation[swept.eval_metric]:.4f} "
                     f"(the median model on {swept.data[swept.eval_metric.split('/')[0]]['rows']} rows no choice saw)")
    if swept.mlflow.get("version"):
        lines.append(f"registered       models:/{swept.mlflow['registered_model']}@{swept.mlflow['alias']} "
                     f"(v{swept.mlflow['version']})")
    if promoted is not None:
        lines.append(f"promotion        {promoted.decision}: {promoted.reason}")
    if predicted:
        p = predicted
        lines.append(f"predicted        {p['rows']} evaluation rows with {p['uri']} (v{p['version']}) through "
                     f"jobs/predict.py: {p['right']} right ({p['right'] / max(p['rows'], 1):.4f}); {p['output']}")
    lines.append("=" * 72)
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, tuple[PretrainConfig, SweepConfig]]:
    """The command line and the two configs it makes, loaded and validated as a run uses them (no framework
    imported)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrain-config", default=str(PRETRAIN), help="the pretraining's config, overridden by "
                        "pretrain.<key>=<value> (default: %(default)s)")
    parser.add_argument("--sweep-config", default=str(SWEEP), help="the fine-tuning sweep's config, overridden by "
                        "sweep.<key>=<value>; its finetune.init and tracking store are this run's "
                        "(default: %(default)s)")
    console.add_argument(parser)
    add_check_argument(parser)
    parser.add_argument("overrides", nargs="*", help="pretrain.dotted.key=value or sweep.dotted.key=value")
    args = parser.parse_intermixed_args(argv)
    return args, load(args.pretrain_config, args.sweep_config, args.overrides)


def main(argv: list[str] | None = None):
    args, (pretrain_cfg, sweep_cfg) = parse(argv)  # before any Ray work
    console.configure(args.verbose)
    try:
        pretrain_cfg.check_environment()
    except ConfigError as e:
        raise scoped("pretrain", PretrainConfig, e, []) from None
    try:  # the sweep's paths too, before any Ray work: it ran first after the whole pretraining
        sweep_cfg.check_environment()
    except ConfigError as e:
        raise ConfigError(f"sweep.{e}") from None
    if args.check:
        return checked("quickstart", f"{args.pretrain_config} and {args.sweep_config}", args.overrides)
    return run(pretrain_cfg, sweep_cfg)


if __name__ == "__main__":
    cli(main)
