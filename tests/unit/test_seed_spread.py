"""The seed spread names the metric it spreads: select's main metric (the split every seed choice is made on),
not the evaluation split the registered version's other tags report."""

from types import SimpleNamespace


def test_the_seed_spread_tag_names_the_select_metric(monkeypatch, tmp_path, capsys):
    """One healthy seed run through jobs.sweep.seed_runs (Tune, the evaluation and the registry stubbed): the parent
    run's and the registered version's `seed_spread` read "select/accuracy median ...", not a bare "median ..."
    beside eval.dev/accuracy."""
    import pandas as pd
    from mlflow.tracking import MlflowClient
    from ray.tune import Checkpoint, Result

    from jobs import sweep
    from jobs.config.finetune import FinetuneConfig
    from jobs.config.sweep import SweepConfig
    from jobs.workers.sweep_trial import TrialInputs

    client = MlflowClient(f"sqlite:///{tmp_path}/m.db")
    parent = client.create_run(client.create_experiment("seeds")).info.run_id
    (tmp_path / "ckpt" / "best").mkdir(parents=True)
    df = pd.DataFrame({"step": [2], "score": [0.75], "pred_classes": [2]})
    monkeypatch.setattr(sweep, "fit", lambda *a, **k: [Result(
        metrics={"best_step": 2, "trial_id": "t", "config": {"train.seed": 7}}, error=None, path=str(tmp_path),
        checkpoint=Checkpoint.from_directory(str(tmp_path / "ckpt")), metrics_dataframe=df)])
    monkeypatch.setattr(sweep, "settle_runs", lambda *a, **k: [])
    monkeypatch.setattr(sweep, "_run_of", lambda *a: parent)
    monkeypatch.setattr("jobs.finetune.judge_chosen", lambda *a: {"dev/accuracy": 0.7})
    registered = []
    monkeypatch.setattr(sweep, "register", lambda cfg, client, run_id, export_dir, stats, spread, *a: registered.append(
        spread) or {})
    cfg = SweepConfig(name="s", finetune=FinetuneConfig())
    cfg.seeds.count, cfg.seeds.max_reseeds = 1, 0
    data = TrialInputs(cfg.finetune, [], None, 10, [], {}, "", "", parent, "s")
    result = SimpleNamespace(seeds={}, mlflow={"parent_run_id": parent}, metric="select/accuracy")
    sweep.seed_runs(cfg, data, {}, 0.25, result, client, tmp_path / "out", None)
    tag = client.get_run(parent).data.tags["seed_spread"]
    assert tag.startswith("select/accuracy median 0.7500 ") and tag.endswith(" over 1 seeds"), tag
    assert registered == [tag]
    assert f"[seeds] {tag}; median run seed 7" in capsys.readouterr().out


def test_the_registered_version_counts_the_degenerate_seed_runs_its_spread_leaves_out(monkeypatch, tmp_path):
    """Eight seed runs, three collapsed to one class and replaced (seeds.max_reseeds 3): the version's seed_* tags,
    seed_spread and model card were over the five that survived, the three named only on the parent's
    seeds.degenerate metric and the console. The spread says so, and tag seed_degenerate counts them."""
    import pandas as pd
    from mlflow.tracking import MlflowClient
    from ray.tune import Checkpoint, Result

    from jobs import sweep
    from jobs.config.finetune import FinetuneConfig
    from jobs.config.sweep import SweepConfig
    from jobs.workers.sweep_trial import TrialInputs

    client = MlflowClient(f"sqlite:///{tmp_path}/m.db")
    parent = client.create_run(client.create_experiment("seeds")).info.run_id
    (tmp_path / "ckpt" / "best").mkdir(parents=True)

    def run(seed, score, classes):
        return Result(metrics={"best_step": 2, "trial_id": f"t{seed}", "config": {"train.seed": seed}}, error=None,
                      path=str(tmp_path), checkpoint=Checkpoint.from_directory(str(tmp_path / "ckpt")),
                      metrics_dataframe=pd.DataFrame({"step": [2], "score": [score], "pred_classes": [classes]}))

    rounds = iter([[run(1000, .81, 2), run(1001, .5, 1), run(1002, .5, 1), run(1003, .83, 2), run(1004, .79, 2)],
                   [run(1005, .80, 2), run(1006, .5, 1)], [run(1007, .82, 2)]])
    monkeypatch.setattr(sweep, "fit", lambda *a, **k: next(rounds))
    monkeypatch.setattr(sweep, "settle_runs", lambda *a, **k: [])
    monkeypatch.setattr(sweep, "_run_of", lambda *a: parent)
    monkeypatch.setattr("jobs.finetune.judge_chosen", lambda *a: {"dev/accuracy": 0.7})
    monkeypatch.setattr("jobs.loops.ft_tasks.split_tags", lambda rows: {})
    registered = []
    monkeypatch.setattr("jobs.registry.tracking.finish_run", lambda *a, **k: registered.append(k) or {})
    cfg = SweepConfig(name="s", finetune=FinetuneConfig())
    data = TrialInputs(cfg.finetune, [], None, 10, [], {}, "", "", parent, "s")
    result = SimpleNamespace(seeds={}, mlflow={"parent_run_id": parent}, metric="select/accuracy")
    rows = SimpleNamespace(summary=lambda: {}, held=lambda: [])
    sweep.seed_runs(cfg, data, {}, 0.5, result, client, tmp_path / "out", rows)
    spread = client.get_run(parent).data.tags["seed_spread"]
    assert spread.endswith(" over 5 seeds (3 more left out as degenerate: collapsed or failed)"), spread
    tags = registered[0]["version_tags"]
    assert tags["seed_spread"] == spread and tags["seed_degenerate"] == "3"
    assert f"Seed spread (select split): {spread}" in registered[0]["description"]
