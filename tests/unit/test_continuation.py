"""jobs/runtime/resubmit.py on a run folder laid out as Ray Train leaves it (checkpoint_manager_snapshot.json naming the
latest checkpoint folder); the e2e resubmission tests run it on real Ray Train storage."""

import json
import shutil

import pytest

from bert_core.config import ConfigError
from jobs.runtime import resubmit

BASIS = {"prepared set": "set-1a2b", "model.hidden_size": 64}


def run_dir(tmp_path, basis=BASIS, step=20, run_id="run-a", latest="checkpoint_2"):
    """A run folder with an older and a newer checkpoint; the snapshot names `latest`."""
    d = tmp_path / "runs" / "pretrain-x"
    for name, at in (("checkpoint_1", step - 10), ("checkpoint_2", step)):
        (d / name).mkdir(parents=True)
        resubmit.record(d / name, run_id, at, basis)
    (d / "checkpoint_manager_snapshot.json").write_text(json.dumps(
        {"latest_checkpoint_result": {"version": 0, "checkpoint_dir_name": latest, "metrics": {}}}))
    return d


def test_a_new_run_or_a_checkpoint_without_a_record_continues_unchecked(tmp_path):
    assert resubmit.check(tmp_path / "never-ran", BASIS) is None
    d = run_dir(tmp_path)
    (d / "checkpoint_2" / resubmit.FILE).unlink()  # written before records were kept
    assert resubmit.check(d, {"prepared set": "other"}) is None
    assert resubmit.tags(None) == {}


def test_the_same_basis_continues_from_the_checkpoint_the_snapshot_names(tmp_path):
    earlier = resubmit.check(run_dir(tmp_path), dict(BASIS))
    assert (earlier["run_id"], earlier["step"]) == ("run-a", 20)
    assert resubmit.tags(earlier) == {"continued_from": "run-a", "continued_at_step": "20"}
    assert resubmit.line("pretrain-x", earlier, 40) == \
        "[train] pretrain-x continues from its checkpoint at step 20 (MLflow run run-a)"
    assert resubmit.line("pretrain-x", earlier, 20).endswith("; nothing left to train")
    earlier = resubmit.check(run_dir(tmp_path / "older", latest="checkpoint_1"), dict(BASIS))
    assert earlier["step"] == 10  # Ray restores the snapshot's latest, not the newest-looking folder


def test_a_changed_basis_is_refused_naming_every_change(tmp_path):
    d = run_dir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        resubmit.check(d, {"prepared set": "set-9f8e", "model.hidden_size": 64, "model.num_hidden_layers": 3})
    message = str(refused.value)
    assert message.startswith("run_name='pretrain-x' already holds a checkpoint (step 20)")
    assert "model.num_hidden_layers None -> 3; prepared set 'set-1a2b' -> 'set-9f8e'." in message
    assert "model.hidden_size" not in message and str(d) in message


def test_a_key_the_basis_gained_is_not_compared_with_a_record_that_lacks_it(tmp_path):
    """A fine-tune checkpointed before its basis held the ZeRO stage resubmits unchanged; once recorded, it is
    compared."""
    d = run_dir(tmp_path)
    assert resubmit.check(d, {**BASIS, "deepspeed.zero_stage": 0}, added=("deepspeed.zero_stage",)) is not None
    with pytest.raises(ConfigError, match="deepspeed.zero_stage None -> 0"):
        resubmit.check(d, {**BASIS, "deepspeed.zero_stage": 0})
    resubmit.record(d / "checkpoint_2", "run-a", 20, {**BASIS, "deepspeed.zero_stage": 2})
    with pytest.raises(ConfigError, match="deepspeed.zero_stage 2 -> 0"):
        resubmit.check(d, {**BASIS, "deepspeed.zero_stage": 0}, added=("deepspeed.zero_stage",))


def test_a_fine_tunes_basis_holds_its_seed():
    """train.seed orders the training rows, and a resumed epoch skips the batches it took in that order: a
    resubmission with another seed trained some rows twice and others not at all in that epoch, unrefused."""
    from jobs.config.finetune import FinetuneConfig
    from jobs.finetune import continuation_basis

    basis = continuation_basis(FinetuneConfig(), "rows-sha", "/init")
    other = FinetuneConfig()
    other.train.seed += 1
    assert basis["train.seed"] == 0 and continuation_basis(other, "rows-sha", "/init") != basis
    other = FinetuneConfig()
    other.deepspeed.zero_stage = 2  # the checkpoint's layout: a ZeRO-0 one fails to load into a ZeRO-2 engine
    assert continuation_basis(other, "rows-sha", "/init") != basis


def test_a_fine_tune_from_a_release_folder_written_again_is_another_basis(tmp_path):
    """A fine-tune from <out>/pre/release, killed; the pretraining started over on another corpus wrote the folder
    again; the resubmission passed by the folder's path and went on from the first weights, read through the second
    vocabulary. The basis holds the run its record names and its tokenizer's hash; a model URI is pinned already."""
    import json
    import shutil

    from jobs.config.finetune import FinetuneConfig
    from jobs.finetune import continuation_basis
    from jobs.runtime.release import RECORD
    from tests.unit.scorer_kit import MINILM

    release = tmp_path / "release"
    shutil.copytree(MINILM, release)
    (release / RECORD).write_text(json.dumps({"job": "pretrain", "run_id": "first"}))
    basis = continuation_basis(FinetuneConfig(), "rows-sha", str(release), release)
    assert basis["init written by"] == "first" and len(basis["init tokenizer"]) == 64
    assert continuation_basis(FinetuneConfig(), "rows-sha", str(release), release) == basis
    (release / RECORD).write_text(json.dumps({"job": "pretrain", "run_id": "second"}))
    assert continuation_basis(FinetuneConfig(), "rows-sha", str(release), release)["init written by"] == "second"
    assert "init tokenizer" not in continuation_basis(FinetuneConfig(), "rows-sha", "models:/m/3", release)


def test_a_finished_run_submitted_again_with_nothing_left_is_refused_not_registered_twice(tmp_path):
    """The same command again after the job finished (a retried CI step, a RayJob re-run) restored its last
    checkpoint, trained nothing, and registered the same weights as a new version, moving the alias over any model
    promoted since. Refused where the run that wrote the checkpoint, and its parent (a phase's job run, which
    registers), ended FINISHED; a failed or killed one goes on (its registration not done), and so does one given
    more steps; a fine-tune whose patience ran out has nothing left either (its state.json says stopped)."""
    from mlflow.tracking import MlflowClient

    from jobs.finetune import _refuse_finished

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    experiment = client.create_experiment("x", artifact_location=str(tmp_path / "art"))

    def run(status, parent=None):
        r = client.create_run(experiment, tags={"mlflow.parentRunId": parent} if parent else {})
        client.set_terminated(r.info.run_id, status)
        return r.info.run_id

    finished, failed = run("FINISHED"), run("FAILED")
    d = run_dir(tmp_path, run_id=finished)
    earlier = resubmit.check(d, dict(BASIS))
    with pytest.raises(ConfigError, match=rf"run_name='pretrain-x' has finished: .* run {finished} ended FINISHED"):
        resubmit.refuse_finished("pretrain-x", d, earlier, True, uri)
    resubmit.refuse_finished("pretrain-x", d, earlier, False, uri)  # more steps given: goes on
    resubmit.refuse_finished("pretrain-x", d, {**earlier, "run_id": failed}, True, uri)  # registration not done
    job_failed, job_done = run("FAILED"), run("FINISHED")
    resubmit.refuse_finished("pretrain-x", d, {**earlier, "run_id": run("FINISHED", job_failed)}, True, uri)
    with pytest.raises(ConfigError, match="has finished"):
        resubmit.refuse_finished("pretrain-x", d, {**earlier, "run_id": run("FINISHED", job_done)}, True, uri)
    # a two-phase job, judged by phase 2: more phase-1 steps, or phase 1's folder alone removed, would be refused next
    # (phase 2 started from its weights): the ways out are phase 2's steps, or both folders
    with pytest.raises(ConfigError, match=r"Give phase 2 more steps \(phase2.max_steps\), a new run_name, or remove "
                                          rf"{d.parent / 'two-phase1'} and {d.parent / 'two-phase2'} to start over"):
        resubmit.refuse_finished("two-phase2", d.parent / "two-phase2", {**earlier, "run_id": finished}, True, uri)
    # a two-phase job has nothing left only where phase 2's checkpoint is at its end (phase2.max_steps raised: on)
    assert resubmit.at_end(d, 20) and not resubmit.at_end(d, 25) and not resubmit.at_end(tmp_path / "none", 1)
    _refuse_finished("pretrain-x", d, earlier, 40, uri)  # a fine-tune at step 20 of 40: goes on ...
    (d / "checkpoint_2" / "state.json").write_text(json.dumps({"step": 20, "stopped": True}))
    with pytest.raises(ConfigError, match="has finished"):  # ... unless its patience ran out
        _refuse_finished("pretrain-x", d, earlier, 40, uri)


def test_phase_1_given_more_steps_after_phase_2_started_is_refused(tmp_path):
    """A finished two-phase job resubmitted with more steps (what the refusal of a finished run advises): phase 1
    trained them, phase 2 went on from its own checkpoint (phase 1's earlier weights) and the job registered phase
    2's old weights again, its parent run logging phase 1's better numbers. Refused, naming both steps; the same
    steps, or a phase 2 not started, go on."""
    from types import SimpleNamespace

    def job(steps, phase2=30):
        return SimpleNamespace(output_dir=str(tmp_path / "runs"), run_name="two",
                               train=SimpleNamespace(max_steps=steps), phase2=SimpleNamespace(max_steps=phase2))

    (tmp_path / "runs").mkdir()
    run_dir(tmp_path / "p1", step=20).rename(tmp_path / "runs" / "two-phase1")
    resubmit.refuse_phase1_past_hand_off(job(40))  # phase 2 not started: phase 1 trains on, then hands over
    run_dir(tmp_path / "p2", step=30).rename(tmp_path / "runs" / "two-phase2")
    resubmit.refuse_phase1_past_hand_off(job(20))  # the same steps: phase 1 has nothing left, phase 2 goes on
    resubmit.refuse_phase1_past_hand_off(job(40, phase2=0))  # one phase: nothing to refuse
    with pytest.raises(ConfigError, match=r"^two: phase 2 holds a checkpoint \(step 30\) it trained from phase 1's "
                                          r"earlier weights, and phase 1 given more steps \(train.max_steps=40\) "
                                          r"would train on from step 20, into weights phase 2 never reads"):
        resubmit.refuse_phase1_past_hand_off(job(40))
    # phase 1's folder removed, as the refusal of a finished run offers: phase 1 would train anew, phase 2 go on
    shutil.rmtree(tmp_path / "runs" / "two-phase1")
    with pytest.raises(ConfigError, match=r"and phase 1's folder was removed: phase 1 would train anew, into weights"):
        resubmit.refuse_phase1_past_hand_off(job(20))


def test_a_pretraining_run_resubmitted_with_another_optimizer_state_layout_is_refused_on_the_driver(tmp_path):
    """optim.name adamw -> lamb, deepspeed.precision or offload_optimizer changed, or train.nsp=false (its frozen
    pooler and NSP head leave other parameter groups) under the same run_name: accepted on the driver, then every
    worker restart failed to load the saved optimizer state ("a different number of parameter groups") until
    train.max_failures ran out. Refused before any Ray work, naming the setting, its saved and new value and the
    ways on; the same settings, and a record from before the basis held them, go on. A hand-off that carries the
    optimizer over (train.reset_optimizer=false) is refused alike; a fresh optimizer takes the weights."""
    from types import SimpleNamespace

    from jobs.config.io import load_config
    from jobs.config.pretrain import PretrainConfig
    from jobs.engine.checkpoint_parts import write_topology
    from jobs.pretrain import _continues, continuation_basis

    def cfg(*overrides):
        return load_config(PretrainConfig, None, ["data.sources=[x]", "scaling.num_workers=2", "run_name=pretrain-x",
                                                  f"output_dir={tmp_path / 'runs'}", *overrides])

    prepared = SimpleNamespace(path="/data/prepared-1a2b")
    d = run_dir(tmp_path, basis=continuation_basis(cfg("optim.name=adamw"), prepared), step=100)
    checkpoint = d / "checkpoint_2"
    write_topology(checkpoint, 2, cfg().deepspeed.zero_stage)
    assert _continues(cfg("optim.name=adamw", "train.max_steps=2000"), prepared)["step"] == 100
    for change, named in [(["optim.name=lamb"], "optim.name 'adamw' -> 'lamb'"),
                          (["train.nsp=false", "data.nsp_random_prob=0.5"], "train.nsp True -> False"),
                          (["deepspeed.precision=bf16", "scaling.use_gpu=true"],
                           "deepspeed.precision 'fp32' -> 'bf16'"),
                          (["deepspeed.offload_optimizer=true"], "deepspeed.offload_optimizer False -> True")]:
        with pytest.raises(ConfigError) as refused:
            _continues(cfg(*change), prepared)
        message = str(refused.value)
        assert message.startswith(f"run_name='pretrain-x' continues from {checkpoint}, whose optimizer state was "
                                  f"saved with other settings: {named}. It loads only into the optimizer it was "
                                  "saved from"), message
        assert message.endswith(f"start a new run_name from its weights with a fresh optimizer: "
                                f"train.init_checkpoint={checkpoint} train.reset_optimizer=true")
    older = {k: v for k, v in continuation_basis(cfg(), prepared).items() if k not in resubmit.PRETRAINING_OPTIMIZER}
    resubmit.record(checkpoint, "run-a", 100, older)  # written before the basis held them: unchecked
    assert _continues(cfg("optim.name=lamb"), prepared)["step"] == 100
    resubmit.record(checkpoint, "run-a", 100, continuation_basis(cfg(), prepared))
    hand_off = [f"train.init_checkpoint={checkpoint}", "run_name=next"]
    with pytest.raises(ConfigError, match=r"^train.init_checkpoint \(with train.reset_optimizer=false\) carries over "
                                          rf"the optimizer of {checkpoint}, whose .*: optim.name 'adamw' -> 'lamb'\..*"
                                          r"or set train.reset_optimizer=true"):
        _continues(cfg(*hand_off, "train.reset_optimizer=false", "optim.name=lamb"), prepared)
    assert _continues(cfg(*hand_off, "train.reset_optimizer=false"), prepared) is None  # the same optimizer: loads
    assert _continues(cfg(*hand_off, "train.reset_optimizer=true", "optim.name=lamb"), prepared) is None


def test_a_run_resubmitted_from_another_start_is_refused_naming_it(tmp_path, monkeypatch):
    """run_name holding a checkpoint, resubmitted with train.init_checkpoint=<another run's> (and a fresh
    optimizer): the job went on from its own checkpoint, said nothing of the start it dropped, and tagged the run's
    lineage with a checkpoint its weights never came from. Refused now, naming the setting; the same start (however
    its path is written) goes on, and so do a record from before the basis held it and a phase 2 (whose start,
    phase 1's last checkpoint, phase 1 names anew when it runs again)."""
    from types import SimpleNamespace

    from jobs.config.io import load_config
    from jobs.config.pretrain import PretrainConfig
    from jobs.pretrain import _continues, continuation_basis

    def cfg(*overrides):
        return load_config(PretrainConfig, None, ["data.sources=[x]", "run_name=pretrain-x",
                                                  f"output_dir={tmp_path / 'runs'}", *overrides])

    other = tmp_path / "runs" / "exp0" / "checkpoint_3"
    other.mkdir(parents=True)
    prepared = SimpleNamespace(path="/data/prepared-1a2b")
    d = run_dir(tmp_path, basis=continuation_basis(cfg(), prepared), step=100)
    monkeypatch.setattr(resubmit, "refuse_unloadable", lambda *a: None)  # no engine topology in these folders
    assert _continues(cfg(), prepared)["step"] == 100
    with pytest.raises(ConfigError, match=rf"train.init_checkpoint '' -> '{other}'.*choose a new run_name"):
        _continues(cfg(f"train.init_checkpoint={other}", "train.reset_optimizer=true"), prepared)
    started = continuation_basis(cfg(f"train.init_checkpoint={other}", "train.reset_optimizer=true"), prepared)
    for name in ("checkpoint_1", "checkpoint_2"):
        resubmit.record(d / name, "run-a", 100, started)
    monkeypatch.chdir(other.parent)
    assert _continues(cfg("train.init_checkpoint=checkpoint_3/", "train.reset_optimizer=true"), prepared)
    with pytest.raises(ConfigError, match=r"train.reset_optimizer True -> False"):
        _continues(cfg(f"train.init_checkpoint={other}", "train.reset_optimizer=false"), prepared)
    with pytest.raises(ConfigError, match=rf"train.init_checkpoint '{other}' -> ''"):
        _continues(cfg(), prepared)
    older = {k: v for k, v in started.items() if k not in resubmit.STARTED}
    resubmit.record(d / "checkpoint_2", "run-a", 100, older)  # written before the basis held them: unchecked
    assert _continues(cfg(), prepared)["step"] == 100
    phase2 = cfg("phase2.max_steps=10").phase2_run(str(other), "/tok")
    assert not set(resubmit.STARTED) & set(continuation_basis(phase2, prepared))
    # the start's folder rotated away since: the same command validates (its run took it) and goes on
    for name in ("checkpoint_1", "checkpoint_2"):
        resubmit.record(d / name, "run-a", 100, started)
    other.rmdir()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("A sentence.\n")
    same = cfg(f"train.init_checkpoint={other}", "train.reset_optimizer=true", f"data.sources=[{corpus}]")
    assert same.check_environment() is same and _continues(same, prepared)["step"] == 100
    with pytest.raises(ConfigError, match=r"train.init_checkpoint must be an existing checkpoint folder"):
        cfg(f"train.init_checkpoint={other}", "run_name=new-run", f"data.sources=[{corpus}]").check_environment()


def test_a_finished_run_resubmitted_with_other_settings_is_told_it_has_finished_first(tmp_path):
    """The optimizer-layout refusal ran before the finished check: a FINISHED run resubmitted with optim.name=lamb
    was told to set it back, and then, set back, that it had finished: nothing was left to go on with either way.
    The finished check is made before Ray (and so before _continues' basis checks), whatever changed."""
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from jobs.config.io import load_config
    from jobs.config.pretrain import PretrainConfig
    from jobs.engine.checkpoint_parts import write_topology
    from jobs.pretrain import continuation_basis, refuse_finished_before_ray

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    r = client.create_run(client.create_experiment("x", artifact_location=str(tmp_path / "art")))
    client.set_terminated(r.info.run_id, "FINISHED")

    def cfg(*overrides):
        return load_config(PretrainConfig, None, ["data.sources=[x]", "scaling.num_workers=2", "run_name=pretrain-x",
                                                  f"output_dir={tmp_path / 'runs'}", "train.max_steps=100",
                                                  f"tracking.tracking_uri={uri}", *overrides])

    prepared = SimpleNamespace(path="/data/prepared-1a2b")
    d = run_dir(tmp_path, basis=continuation_basis(cfg(), prepared), step=100, run_id=r.info.run_id)
    write_topology(d / "checkpoint_2", 2, cfg().deepspeed.zero_stage)
    for change in ([], ["optim.name=lamb"], ["deepspeed.zero_stage=1"]):
        with pytest.raises(ConfigError, match="run_name='pretrain-x' has finished"):
            refuse_finished_before_ray(cfg(*change))


def test_a_finished_run_is_refused_before_any_ray_work(tmp_path, monkeypatch):
    """The finished refusal came after ensure_capacity and prepare: a finished RayJob re-run waited for its GPU nodes
    (scaling.capacity_timeout_s) before it was told; now before Ray starts. More steps still go on to Ray. A
    two-phase job is judged by phase 2's run and has nothing left only when phase 2's checkpoint is at its end."""
    from mlflow.tracking import MlflowClient

    from jobs import pretrain
    from jobs.config.io import load_config
    from jobs.config.pretrain import PretrainConfig

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    r = client.create_run(client.create_experiment("x", artifact_location=str(tmp_path / "art")))
    client.set_terminated(r.info.run_id, "FINISHED")
    run_dir(tmp_path, step=100, run_id=r.info.run_id)

    def ray_work():
        raise RuntimeError("Ray work")

    monkeypatch.setattr(PretrainConfig, "check_environment", lambda self: None)
    monkeypatch.setattr(pretrain, "init_ray", ray_work)
    for steps, raised in ((100, "run_name='pretrain-x' has finished"), (200, "Ray work")):
        cfg = load_config(PretrainConfig, None, ["data.sources=[x]", "run_name=pretrain-x", f"train.max_steps={steps}",
                                                 f"tracking.tracking_uri={uri}", f"output_dir={tmp_path / 'runs'}"])
        with pytest.raises((ConfigError, RuntimeError), match=raised):
            pretrain.run(cfg)
    (tmp_path / "runs" / "pretrain-x").rename(tmp_path / "runs" / "two-phase1")
    run_dir(tmp_path, step=20, run_id=r.info.run_id).rename(tmp_path / "runs" / "two-phase2")
    for phase2, raised in ((20, "run_name='two-phase2' has finished"), (30, "Ray work")):
        cfg = load_config(PretrainConfig, None, ["data.sources=[x]", "run_name=two", "train.max_steps=100",
                                                 f"phase2.max_steps={phase2}", f"tracking.tracking_uri={uri}",
                                                 f"output_dir={tmp_path / 'runs'}"])
        with pytest.raises((ConfigError, RuntimeError), match=raised):
            pretrain.run(cfg)


def test_a_hand_off_to_another_model_is_refused_on_the_driver(tmp_path):
    """train.init_checkpoint from a run of another model.recipe or model.preset passed the driver, then every worker
    failed on torch's missing keys or size mismatch, restart after restart. Refused before any Ray work, naming each
    setting that decides the parameter set (saved -> new), with or without the optimizer. What the same weights only
    compute otherwise (rope thetas, the local window, activations; positions, where RoPE holds no table) may change;
    a two-phase job's phase 2 (same model, longer rows) goes on, and so does a record that holds no model."""
    from types import SimpleNamespace

    from jobs.config.io import load_config
    from jobs.config.pretrain import PretrainConfig
    from jobs.engine.checkpoint_parts import write_topology
    from jobs.pretrain import _continues, continuation_basis

    def cfg(*overrides):
        return load_config(PretrainConfig, None, ["data.sources=[x]", "scaling.num_workers=2", "run_name=pretrain-x",
                                                  f"output_dir={tmp_path / 'runs'}", *overrides])

    prepared = SimpleNamespace(path="/data/prepared-1a2b")
    checkpoint = tmp_path / "source" / "checkpoint_1"
    checkpoint.mkdir(parents=True)
    write_topology(checkpoint, 2, cfg().deepspeed.zero_stage)

    def hand_off(saved, *now, reset="true"):
        resubmit.record(checkpoint, "run-a", 100, continuation_basis(cfg(*saved), prepared))
        return _continues(cfg(*now, f"train.init_checkpoint={checkpoint}", f"train.reset_optimizer={reset}",
                              "run_name=next"), prepared)

    modern = "model.recipe=modern"
    mini = "model.hidden_size 64 -> 256; model.num_hidden_layers 2 -> 4; model.num_attention_heads 2 -> 4; "
    for saved, now, named in [(["model.recipe=bert"], [modern], "model.recipe 'bert' -> 'modern'."),
                              ([modern], ["model.recipe=bert"], "model.recipe 'modern' -> 'bert'."),
                              ([modern], [modern, "model.preset=mini"], mini + "model.intermediate_size 192 -> 704."),
                              ([], ["model.preset=mini"], mini + "model.intermediate_size 256 -> 1024."),
                              ([], ["model.max_position_embeddings=1024"],  # BERT's table: as phase 2 keeps it
                               "model.max_position_embeddings 512 -> 1024."),
                              ([modern], [modern, "model.glu=false"], "model.intermediate_size 192 -> 256; "
                                                                      "model.glu True -> False."),
                              ([modern], [modern, "model.rotary=false"], "model.rotary True -> False; "
                                                                         "model.max_position_embeddings 8192 -> 512."),
                              ([modern], [modern, "model.mlp_bias=true"], "model.mlp_bias False -> True.")]:
        for reset in ("true", "false"):
            with pytest.raises(ConfigError) as refused:
                hand_off(saved, *now, reset=reset)
            message = str(refused.value)
            assert message.startswith(f"train.init_checkpoint={checkpoint} holds the weights of another model: "
                                      f"{named}"), message
            assert "model.preset" in message and "train.max_failures" in message
    with pytest.raises(ConfigError, match=r"model.vocab_size 30522 -> 1000\. .*data.tokenizer.path=<its tokenizer>"):
        hand_off([], "model.vocab_size=1000")  # another tokenizer
    # what the same weights compute otherwise, or over longer rows, hands off
    assert hand_off([modern], modern, "model.global_rope_theta=640000", "model.local_attention=64",
                    "model.hidden_activation=silu", "model.max_position_embeddings=16384") is None
    assert hand_off([], "model.hidden_act=relu", reset="false") is None
    two = cfg("phase2.max_steps=10", "phase2.max_seq_len=512")
    resubmit.record(checkpoint, "run-a", 100, continuation_basis(two, prepared))
    assert _continues(two.phase2_run(str(checkpoint), str(tmp_path / "tok")), prepared) is None
    resubmit.record(checkpoint, "run-a", 100, {"prepared set": "set-1a2b"})  # a record without the model
    assert _continues(cfg(modern, f"train.init_checkpoint={checkpoint}", "train.reset_optimizer=true",
                          "run_name=next"), prepared) is None
