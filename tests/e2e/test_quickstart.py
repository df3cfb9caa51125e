"""`make quickstart` end to end on a real local Ray cluster, as shipped (configs/pretrain/quickstart.yaml and
configs/sweep/quickstart.yaml, paths moved under a tmp dir, the sweep's 4 trials as shipped, cut to 2 seeds):
corpus -> examples -> Ray Train + DeepSpeed ZeRO-2 on 2 workers -> release checkpoint -> MLflow run and
registered model -> Ray Tune sweep fine-tuning that release on pkgdocs -> seed-median model registered.
One pretraining serves every test here, and the pretraining-helps comparison."""

import copy
import pickle
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bert_core.checkpoint import load_pretrained, save_pretrained
from bert_core.model import BertForPreTraining
from tests.readme import job_argv, readme, run_job

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]  # the module fixture runs the whole quickstart


# jobs/quickstart.py's main() in a child process, as `make quickstart` runs it (a quiet console), handing back
# what run() returned and the configs it settled; the child's console is kept for the test that reads it
CHILD = """
import pickle, sys
from jobs import quickstart
from jobs.runtime import console
args, (pretrain_cfg, sweep_cfg) = quickstart.parse(sys.argv[2:])
console.configure(args.verbose)
pretrained, swept, promoted, predicted = quickstart.run(pretrain_cfg, sweep_cfg)
with open(sys.argv[1], "wb") as f:
    pickle.dump((pretrained, swept, pretrain_cfg, sweep_cfg, promoted, predicted), f)
"""


@pytest.fixture(scope="module")
def result(no_shared_ray, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quickstart")
    overrides = [
        "pretrain.run_name=qs", f"pretrain.output_dir={tmp}/runs", f"pretrain.data.output_root={tmp}/prepared",
        f"pretrain.corpus.harvest_dir={tmp}/corpus", f"pretrain.tracking.tracking_uri=sqlite:///{tmp}/mlflow.db",
        f"pretrain.tracking.artifact_location={tmp}/art", f"sweep.finetune.output_dir={tmp}/runs",
        f"sweep.finetune.task.corpus_dir={tmp}/corpus", "sweep.seeds.count=2"]
    argv = job_argv(readme("make quickstart"), *overrides)  # README's command: the Makefile's recipe, sized here
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp / "result.pkl"), *argv[2:]], cwd=ROOT,
                         capture_output=True, text=True, timeout=2400)
    (tmp / "console.txt").write_text(out.stdout + out.stderr)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    with open(tmp / "result.pkl", "rb") as f:
        pretrained, swept, pretrain_cfg, sweep_cfg, promoted, predicted = pickle.load(f)  # written by our own child
    yield pretrained, swept, pretrain_cfg, sweep_cfg, tmp, promoted, predicted


def test_the_console_holds_our_lines_only(result):
    """`make quickstart` prints our progress lines, the summaries and the trials table, no Ray, Ray Tune,
    DeepSpeed, MLflow or transformers internals (they are in the log files the summaries name)."""
    from tests.e2e.test_job_submit import foreign_lines

    console = (result[4] / "console.txt").read_text()
    assert "[prepare] done" in console and "[promote]" in console and "quickstart: corpus" in console
    assert foreign_lines(console) == [], foreign_lines(console)


def test_loss_goes_down_and_mlm_accuracy_rises(result):
    pretrained, _, cfg, _, _, _, _ = result
    from mlflow.tracking import MlflowClient

    history = MlflowClient(cfg.tracking.tracking_uri).get_metric_history(pretrained.mlflow["run_id"], "train/loss")
    losses = [m.value for m in sorted(history, key=lambda m: m.step)]
    assert len(losses) == cfg.train.max_steps // cfg.train.log_every  # one point per window, logged live from rank 0
    assert losses[-1] < losses[0] - 1.0
    assert pretrained.mlm_acc_after > pretrained.mlm_acc_before + 0.05
    assert pretrained.metrics["step"] == cfg.train.max_steps
    assert (pretrained.metrics["tracking_failures"], pretrained.metrics["tracking_undelivered"]) == (0, 0)


def test_pretrained_model_is_registered_under_its_alias(result):
    pretrained, _, cfg, _, _, _, _ = result
    from mlflow.tracking import MlflowClient

    t = cfg.tracking
    version = MlflowClient(t.tracking_uri).get_model_version_by_alias(t.registered_model, t.alias)
    assert version.run_id == pretrained.mlflow["run_id"]
    assert str(version.version) == pretrained.mlflow["version"]


def test_registered_model_is_the_whole_release_checkpoint(result, tmp_path):
    """The registered version holds every tensor of the release, pooler and NSP head included, so a fine-tune
    from models:/NAME@candidate starts from all of them."""
    pretrained, _, cfg, _, _, _, _ = result
    from bert_core.checkpoint import read_state_dict
    from jobs.finetune import resolve_init

    t = cfg.tracking
    registered = read_state_dict(resolve_init(f"models:/{t.registered_model}@{t.alias}", t.tracking_uri, tmp_path))
    released = read_state_dict(pretrained.release_dir)
    assert {"bert.pooler.dense.weight", "cls.seq_relationship.weight"} <= released.keys() == registered.keys()
    assert all(torch.equal(registered[k], released[k]) for k in released)


def test_logged_params_are_the_config_the_run_used(result):
    """vocab size and pad id are settled by the trained tokenizer (8192 tokens or fewer, not the preset's 30522)
    before the config is logged; the release checkpoint was built from the same values."""
    pretrained, _, cfg, _, _, _, _ = result
    import json

    from mlflow.tracking import MlflowClient

    from bert_core.tokenizer import SpecialIds, load_tokenizer

    tok = load_tokenizer(pretrained.release_dir)
    pad = SpecialIds.from_tokenizer(tok).pad
    params = MlflowClient(cfg.tracking.tracking_uri).get_run(pretrained.mlflow["run_id"]).data.params
    assert params["model.vocab_size"] == str(tok.get_vocab_size()) != "30522"
    assert params["model.pad_token_id"] == str(pad)
    released = json.loads((Path(pretrained.release_dir) / "config.json").read_text())
    assert (released["vocab_size"], released["pad_token_id"]) == (tok.get_vocab_size(), pad)


def test_run_names_its_prepared_data_tokenizer_and_code(result):
    pretrained, _, cfg, _, _, _, _ = result
    from mlflow.tracking import MlflowClient

    from bert_core.tokenizer import tokenizer_hash

    run = MlflowClient(cfg.tracking.tracking_uri).get_run(pretrained.mlflow["run_id"])
    tags = run.data.tags
    assert tags["lineage.job"] == "pretrain" and tags["lineage.data_name"] == Path(pretrained.data_dir).name
    assert tags["lineage.tokenizer_sha256"] == tokenizer_hash(pretrained.release_dir)
    assert {"code.version", "code.git_commit", "code.git_dirty"} <= tags.keys()
    (data,) = run.inputs.dataset_inputs
    from jobs.registry.tracking import dataset_digest  # the set's name and where it was read

    data_dir = Path(pretrained.data_dir)
    assert data.dataset.digest == dataset_digest(data_dir.resolve().as_uri(), data_dir.name)


def test_release_checkpoint_loads_in_transformers_with_identical_outputs(result):
    pretrained = result[0]
    import transformers

    hf, info = transformers.BertForPreTraining.from_pretrained(pretrained.release_dir, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ours = load_pretrained(pretrained.release_dir, BertForPreTraining).eval()
    tok = transformers.BertTokenizerFast.from_pretrained(pretrained.release_dir)
    batch = tok(["The dataset is read from disk.", "A short one."], ["Each worker trains on its shard.", "Yes."],
                padding=True, return_tensors="pt")
    with torch.no_grad():
        a = hf.eval()(**batch)
        b = ours(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    mask = batch["attention_mask"].bool()
    assert torch.allclose(a.prediction_logits[mask], b.mlm_logits[mask], atol=1e-4)
    assert torch.allclose(a.seq_relationship_logits, b.nsp_logits, atol=1e-5)


def test_sweep_fine_tunes_the_fresh_release_and_registers_the_median_model(result):
    pretrained, swept, _, sweep_cfg, _, _, _ = result
    from mlflow.tracking import MlflowClient
    from transformers import AutoModelForSequenceClassification

    from tests.e2e.test_sweep import children

    # the tiny preset on 2 CPUs: every trial a nested MLflow run under the sweep's one parent, which holds the table
    # and the plot (that ASHA stops trials early: tests/e2e/test_sweep.py's ASHA sweep, which this one had widened
    # to 8 trials to show again)
    assert len(swept.table) == 4 and len(swept.seeds["scores"]) == 2
    assert all(row["status"] in ("finished", "stopped early") for row in swept.table), swept.table
    assert swept.seeds["median"] > 0.25  # 4 balanced classes: chance is 0.25
    t = sweep_cfg.finetune.tracking
    client = MlflowClient(t.tracking_uri)
    parent_id = swept.mlflow["parent_run_id"]
    nested = children(client, parent_id, "search")
    assert {r.info.run_id for r in nested} == {row["mlflow_run_id"] for row in swept.table}
    assert {"trials.csv", "trials.png"} <= {a.path for a in client.list_artifacts(parent_id)}
    # the best configuration over 2 seeds: median and spread on the parent, the registered version tagged with it
    parent = client.get_run(parent_id).data
    for k in ("median", "mean", "std", "min", "max"):
        assert parent.metrics[f"seeds.{k}"] == pytest.approx(swept.seeds[k])
    version = client.get_model_version_by_alias(t.registered_model, t.alias)
    assert str(version.version) == str(swept.mlflow["version"])
    assert version.run_id == swept.mlflow["median_run_id"] and version.tags["seed_spread"] == parent.tags["seed_spread"]
    # lineage: the fine-tuned version and the sweep's parent run name the pretraining run behind them
    assert version.tags["lineage.pretrain_run_id"] == pretrained.mlflow["run_id"]
    assert parent.tags["lineage.pretrain_run_id"] == pretrained.mlflow["run_id"]
    model = AutoModelForSequenceClassification.from_pretrained(swept.export_dir)
    assert model.config.hidden_size == load_pretrained(pretrained.release_dir, BertForPreTraining).config.hidden_size


def test_pretraining_helps(result, tmp_path):
    """The quickstart's pretrained model, fine-tuned on pkgdocs with few labels per class, beats the same
    architecture and tokenizer from random initialization: same step loop (the job's engine and objective,
    in one child process: the engine's one-rank process group stays out of pytest's), hyperparameters, data
    and seeds; medians over 3 seeds."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from bench.hf_finetune_reference import engine_run, features
    from jobs.loops import ft_tasks

    pretrained, _, _, sweep_cfg, _, _, _ = result
    release = pretrained.release_dir
    torch.manual_seed(123)
    save_pretrained(BertForPreTraining(load_pretrained(release, BertForPreTraining).config), tmp_path / "random",
                    tokenizer_dir=release)
    cfg = copy.deepcopy(sweep_cfg.finetune)  # the module's config is the other tests' too: changed here, a copy
    cfg.optim.lr, cfg.optim.warmup_ratio, cfg.train.epochs = 1e-3, 0.1, 4
    rows = ft_tasks.load_rows(cfg.task)
    cfg.task.labels = list(rows.labels)
    best = {}
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
        for name, init in (("pretrained", release), ("random", tmp_path / "random")):
            train, dev = features(cfg, rows.train, init), features(cfg, rows.select, init)
            scores = []
            for seed in (1000, 1001, 1002):
                cfg.train.seed = seed
                scores.append(child.submit(engine_run, cfg, init, train, dev).result()["best"])
            best[name] = statistics.median(scores)
    assert best["pretrained"] > best["random"] + 0.05, best


def test_quickstart_ends_with_a_promotion_and_the_champion_predicts(result, tmp_path):
    """pretrain -> fine-tune -> register -> promote -> load by alias -> predict, on the SQLite store."""
    import mlflow
    import transformers
    from mlflow.tracking import MlflowClient

    from jobs.finetune import find_hf_folder
    from jobs.loops import ft_tasks

    pretrained, swept, _, sweep_cfg, _, promoted, _ = result
    t = sweep_cfg.finetune.tracking
    client = MlflowClient(t.tracking_uri)
    # every job's run: curves as an artifact, system metrics from the training node
    for run_id in (pretrained.mlflow["run_id"], swept.mlflow["median_run_id"]):
        assert "curves.png" in [a.path for a in client.list_artifacts(run_id)]
        assert "system/cpu_utilization_percentage" in client.get_run(run_id).data.metrics
    assert (promoted.decision, promoted.candidate, promoted.champion) == ("promoted", str(swept.mlflow["version"]), "")
    champion = client.get_model_version_by_alias(t.registered_model, "champion")
    assert str(champion.version) == promoted.candidate
    assert champion.tags["promotion.decision"] == "promoted" and champion.tags["promotion.run_id"] == promoted.run_id
    # every run's artifacts under pretrain.tracking.artifact_location, the promotion's too (not ./mlartifacts)
    for run_id in (pretrained.mlflow["run_id"], swept.mlflow["parent_run_id"], promoted.run_id):
        assert client.get_run(run_id).info.artifact_uri.startswith(f"file://{result[4]}/art"), run_id
    # judged on dev, which no trial or seed saw: the score the registered version carries from its evaluation,
    # with each split's size and digest; the decision names the bound it used
    assert swept.metric == "select/accuracy" and swept.eval_metric == "dev/accuracy"
    assert promoted.metric == "dev/accuracy"
    assert promoted.evidence["candidate"] == pytest.approx(swept.evaluation["dev/accuracy"], abs=1e-6)
    assert float(champion.tags["eval.dev/accuracy"]) == pytest.approx(promoted.evidence["candidate"], abs=1e-6)
    for split, info in swept.data.items():
        assert champion.tags[f"data.{split}.rows"] == str(info["rows"])
        assert champion.tags[f"data.{split}.sha256"] == info["sha256"]
    assert champion.tags["promotion.eval_sha256"] == promoted.eval_sha256 == swept.data["dev"]["sha256"]
    assert promoted.eval_rows == swept.data["dev"]["rows"]  # the gate judged exactly the rows the version names
    assert "one-sided 95% lower bound" in promoted.reason and "promotion.lower_bound" in champion.tags
    assert champion.description.startswith("**text-classification")
    mlflow.set_tracking_uri(t.tracking_uri)
    assert mlflow.models.get_model_info(f"models:/{t.registered_model}@champion").signature is not None
    # the champion's folder in a plain transformers pipeline: it loads with no code of ours
    download = mlflow.artifacts.download_artifacts(f"models:/{t.registered_model}@champion", dst_path=str(tmp_path))
    pipe = transformers.pipeline("text-classification", model=str(find_hf_folder(Path(download))))
    task = sweep_cfg.finetune.task
    loaded = ft_tasks.load_rows(task)
    rows, labels = loaded.evaluation["dev"], loaded.labels
    predicted = [p["label"] for p in pipe([r["text_a"] for r in rows], truncation=True, max_length=task.max_seq_len)]
    accuracy = sum(p == labels[r["label"]] for p, r in zip(predicted, rows)) / len(rows)
    assert accuracy == pytest.approx(promoted.evidence["candidate"], abs=0.02)
    # the quickstart's last step: jobs/predict.py with @champion over the same rows, as a user's file
    job = result[6]
    assert (job["version"], job["rows"]) == (promoted.candidate, len(rows))
    assert job["right"] / job["rows"] == pytest.approx(accuracy, abs=0.02)
    assert "predicted        " in (result[4] / "console.txt").read_text()


def test_lineage_of_the_fine_tuned_version_reaches_the_raw_corpus_hashes(result, monkeypatch, capsys):
    """jobs/lineage.py (issue 11): registered version -> seed trial run -> sweep -> pretraining run -> prepared
    data (manifest sha256 checked) -> tokenizer -> every raw corpus file of the manifest, re-hashed."""
    import json

    from jobs import lineage

    pretrained, swept, _, sweep_cfg, tmp, _, _ = result
    t = sweep_cfg.finetune.tracking
    # README.md's command as written, in the folder whose mlflow.db (the default store) is the quickstart's
    assert t.tracking_uri == f"sqlite:///{tmp}/mlflow.db"
    monkeypatch.chdir(tmp)
    found = run_job(readme("python jobs/lineage.py models:/bert-foundry-tiny-pkgdocs@candidate"))
    assert capsys.readouterr().out.strip() == lineage.format(found).strip()  # what it printed
    assert found.missing == []
    by_kind = {link.kind: link for link in found.links}
    assert by_kind["sweep trial run"].name == swept.mlflow["median_run_id"]
    assert by_kind["sweep"].name == swept.mlflow["parent_run_id"]
    assert by_kind["pretraining run"].name == pretrained.mlflow["run_id"]
    assert by_kind["tokenizer"].details[-1].endswith("(re-hashed, equal)")
    out = lineage.format(found)
    inputs = json.loads((Path(pretrained.data_dir) / "manifest.json").read_text())["inputs"]["files"]
    assert inputs and all(f"{f['path']}" in out and f["sha256"] in out for f in inputs)
    assert len([link for link in found.links if link.kind == "corpus file"]) == len(inputs)
    # the sweep's task rows (source and digest) and the pretraining data, on the registered version itself
    from mlflow.tracking import MlflowClient

    version = MlflowClient(t.tracking_uri).get_model_version_by_alias(t.registered_model, t.alias)
    assert len(version.tags["lineage.task_data_sha256"]) == 64 and version.tags["lineage.job"] == "sweep"
    assert f"lineage.task_data_sha256 = {version.tags['lineage.task_data_sha256']}" in out
    for split, info in swept.data.items():  # each split's role, size and digest, on the sweep's run
        assert f"data {split} (" in out and f"{info['rows']} rows, sha256 {info['sha256']}" in out
    assert version.tags["lineage.pretrain_run_id"] == pretrained.mlflow["run_id"]


def test_the_promote_command_as_written_keeps_the_champion_it_already_is(result, monkeypatch):
    """README.md's `python jobs/promote.py bert-foundry-tiny-pkgdocs` in the quickstart's folder (its mlflow.db is
    the default store): the quickstart promoted its candidate already, so the command finds @candidate is
    @champion and keeps it, saying so, before any evaluation (the gate's evaluation: tests/e2e/test_predict.py)."""
    _, _, _, sweep_cfg, tmp, promoted, _ = result
    monkeypatch.chdir(tmp)
    kept = run_job(readme("python jobs/promote.py bert-foundry-tiny-pkgdocs"))
    assert sweep_cfg.finetune.tracking.registered_model == kept.model == "bert-foundry-tiny-pkgdocs"
    assert (kept.decision, kept.reason) == ("kept", f"v{promoted.candidate} is already the champion"), kept


def test_lineage_with_a_link_removed_fails_naming_it(result, tmp_path):
    """The manifest's hash tag deleted from the pretraining run, in a copy of the store (the module's other
    tests keep theirs): the command prints the chain so far and exits 1 naming the tag."""
    import shutil
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    from jobs import lineage

    pretrained, _, _, sweep_cfg, tmp, _, _ = result
    shutil.copy(tmp / "mlflow.db", tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    MlflowClient(uri).delete_tag(pretrained.mlflow["run_id"], "lineage.data_manifest_sha256")
    t = sweep_cfg.finetune.tracking
    model = f"models:/{t.registered_model}@{t.alias}"
    (missing,) = lineage.run(model, uri).missing
    assert "lineage.data_manifest_sha256" in missing and pretrained.mlflow["run_id"] in missing
    # README.md's command as written (the champion: the quickstart promoted the version above), from the copy's folder
    words = readme("python jobs/lineage.py models:/NAME@champion", {"NAME": t.registered_model})
    proc = subprocess.run([sys.executable, str(ROOT / words[1]), *words[2:]], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert f"pretraining run  {pretrained.mlflow['run_id']}" in proc.stdout
    assert "missing link: prepared data tag lineage.data_manifest_sha256" in proc.stdout


def test_glue_command_fine_tunes_the_registered_pretraining_from_a_glue_download(result, tmp_path):
    """README.md's GLUE command as written, run where a user runs it: a checkout (the code and configs linked into
    a folder here) holding glue_data/ (SST-2, written here small) and the MLflow store (a copy of the
    quickstart's). It resolves models:/bert-foundry-tiny@candidate, the quickstart's registered pretraining,
    fine-tunes it and registers bert-foundry-sst2 naming that run."""
    import shutil

    from mlflow.tracking import MlflowClient

    pretrained, _, _, _, tmp, _, _ = result
    for name in ("jobs", "configs", "bert_core", "pipelines", ".venv"):
        (tmp_path / name).symlink_to(ROOT / name)
    shutil.copy(tmp / "mlflow.db", tmp_path / "mlflow.db")  # the store the command's default tracking URI opens
    sst2 = tmp_path / "glue_data" / "SST-2"
    sst2.mkdir(parents=True)
    rng = torch.Generator().manual_seed(0)
    phrases = {1: ["a fine warm film", "truly good fun", "a lovely story"],
               0: ["a dull flat mess", "badly made", "a boring slog"]}
    for split, n in (("train", 96), ("dev", 32)):
        lines = ["sentence\tlabel"]
        for i in range(n):
            label = i % 2
            lines.append(f"{phrases[label][int(torch.randint(3, (1,), generator=rng))]} , take {i}\t{label}")
        (sst2 / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    words = readme("python jobs/finetune.py --config configs/finetune/sst2.yaml")
    argv = job_argv(words, "run_name=sst2", "task.max_seq_len=32", "train.epochs=2", "train.patience=0",
                    "optim.lr=1e-3", "scaling.num_workers=1", "scaling.cpus_per_worker=1")
    out = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "registered model bert-foundry-sst2 v1 (alias @candidate)" in out.stdout, out.stdout[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    version = client.get_model_version_by_alias("bert-foundry-sst2", "candidate")
    tags = client.get_run(version.run_id).data.tags
    assert version.tags["task"] == "sst2" and tags["lineage.init_run_id"] == pretrained.mlflow["run_id"]
    assert (tmp_path / "runs" / "sst2" / "best" / "config.json").is_file()  # the config's relative output_dir
