"""The main path end to end on a real local Ray cluster: corpus -> examples -> Ray Train + DeepSpeed
ZeRO-2 on 2 workers -> release checkpoint -> MLflow run and registered model."""

from pathlib import Path

import pytest
import ray
import torch

from bert_core.checkpoint import load_pretrained
from bert_core.model import BertForPreTraining
from jobs.pretrain import run
from tests.e2e.quick import quick_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pretrain")
    cfg = quick_config(tmp, "e2e", "train.max_steps=120", "train.log_every=10", "train.eval_batches=8",
                       "optim.warmup_steps=20", "tracking.registered_model=e2e-bert", corpus_mb=1.5, vocab=2000)
    try:
        yield run(cfg), cfg
    finally:
        ray.shutdown()


def test_loss_goes_down_and_mlm_accuracy_rises(result):
    r, cfg = result
    from mlflow.tracking import MlflowClient

    history = MlflowClient(cfg.tracking.tracking_uri).get_metric_history(r.mlflow["run_id"], "train/loss")
    losses = [m.value for m in sorted(history, key=lambda m: m.step)]
    assert len(losses) == 12  # one point per 10-step window, logged live from rank 0
    assert losses[-1] < losses[0] - 1.0
    assert r.mlm_acc_after > r.mlm_acc_before + 0.03
    assert r.metrics["step"] == 120
    assert (r.metrics["tracking_failures"], r.metrics["tracking_undelivered"]) == (0, 0)  # rank 0's, reported


def test_model_is_registered_under_its_alias(result):
    r, cfg = result
    from mlflow.tracking import MlflowClient

    version = MlflowClient(cfg.tracking.tracking_uri).get_model_version_by_alias("e2e-bert", "candidate")
    assert version.run_id == r.mlflow["run_id"]
    assert str(version.version) == r.mlflow["version"]


def test_registered_model_is_the_whole_release_checkpoint(result, tmp_path):
    """The registered version holds every tensor of the release, pooler and NSP head included, so a fine-tune
    from models:/e2e-bert@candidate starts from all of them."""
    r, cfg = result
    from bert_core.checkpoint import read_state_dict
    from jobs.finetune import resolve_init

    registered = read_state_dict(resolve_init("models:/e2e-bert@candidate", cfg.tracking.tracking_uri, tmp_path))
    released = read_state_dict(r.release_dir)
    assert {"bert.pooler.dense.weight", "cls.seq_relationship.weight"} <= released.keys() == registered.keys()
    assert all(torch.equal(registered[k], released[k]) for k in released)


def test_logged_params_are_the_config_the_run_used(result):
    """vocab size and pad id are settled by the trained tokenizer (2000 tokens or fewer, not the preset's 30522)
    before the config is logged; the release checkpoint was built from the same values."""
    r, cfg = result
    import json

    from mlflow.tracking import MlflowClient

    from bert_core.tokenizer import SpecialIds, load_tokenizer

    tok = load_tokenizer(r.release_dir)
    pad = SpecialIds.from_tokenizer(tok).pad
    params = MlflowClient(cfg.tracking.tracking_uri).get_run(r.mlflow["run_id"]).data.params
    assert params["model.vocab_size"] == str(tok.get_vocab_size()) != "30522"
    assert params["model.pad_token_id"] == str(pad)
    released = json.loads((Path(r.release_dir) / "config.json").read_text())
    assert (released["vocab_size"], released["pad_token_id"]) == (tok.get_vocab_size(), pad)


def test_run_names_its_prepared_data_tokenizer_and_code(result):
    r, cfg = result
    from mlflow.tracking import MlflowClient

    from bert_core.tokenizer import tokenizer_hash

    run = MlflowClient(cfg.tracking.tracking_uri).get_run(r.mlflow["run_id"])
    tags = run.data.tags
    assert tags["lineage.job"] == "pretrain" and tags["lineage.data_name"] == Path(r.data_dir).name
    assert tags["lineage.tokenizer_sha256"] == tokenizer_hash(r.release_dir)
    assert {"code.version", "code.git_commit", "code.git_dirty"} <= tags.keys()
    (data,) = run.inputs.dataset_inputs
    assert data.dataset.digest == Path(r.data_dir).name


def test_release_checkpoint_loads_in_transformers_with_identical_outputs(result):
    r, _ = result
    import transformers

    hf, info = transformers.BertForPreTraining.from_pretrained(r.release_dir, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ours = load_pretrained(r.release_dir, BertForPreTraining).eval()
    tok = transformers.BertTokenizerFast.from_pretrained(r.release_dir)
    batch = tok(["The dataset is read from disk.", "A short one."], ["Each worker trains on its shard.", "Yes."],
                padding=True, return_tensors="pt")
    with torch.no_grad():
        a = hf.eval()(**batch)
        b = ours(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    mask = batch["attention_mask"].bool()
    assert torch.allclose(a.prediction_logits[mask], b.mlm_logits[mask], atol=1e-4)
    assert torch.allclose(a.seq_relationship_logits, b.nsp_logits, atol=1e-5)
