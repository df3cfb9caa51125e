"""Regressions in promotion's checks of QA overrides, the pipeline warning, the tokenizer check before Ray, and the
non-finite count's padding mask: each test fails on the code before its fix (or with the check it guards removed)."""

import copy
import json
import shutil
import subprocess
import sys
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from bert_core.config import ConfigError
from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig
from jobs.config.promote import PromoteConfig

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "configs/pretrain/quickstart.yaml")


def test_promote_check_takes_a_qa_length_override_without_judging_a_window_nobody_gave():
    """task.max_seq_len=128 was judged against the default query length (64) and stride (128), not the candidate's
    registered ones (the window is judged once its task is read): refused at --check, naming numbers nobody gave."""
    out = subprocess.run([sys.executable, "jobs/promote.py", "any-model", "task.max_seq_len=128", "task.n_best=10",
                          "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "valid" in out.stdout, out.stdout


@pytest.mark.parametrize("overrides", [["task.max_seq_len=64", "task.doc_stride=16"],
                                       ["task.max_seq_len=16", "task.max_query_length=8"]])
def test_promote_judges_only_the_ranges_of_qa_overrides_before_the_registry_is_read(overrides):
    cfg = load_config(PromoteConfig, None, ["model=m", *overrides]).validate()
    assert set(cfg.task) == {o.split("=")[0].removeprefix("task.") for o in overrides}
    with pytest.raises(ConfigError, match=r"^task\.max_query_length must be >= 1"):  # the ranges are still judged
        load_config(PromoteConfig, None, ["model=m", "task.max_seq_len=64", "task.max_query_length=0"]).validate()


def _qa_registry(tmp_path, empty_store, lengths: dict[str, int]) -> str:
    """NAME v1 (@champion) and v2 (@candidate): QA files tasks at the max_seq_len `lengths` gives each role."""
    from mlflow.tracking import MlflowClient

    from jobs.config.finetune import TaskConfig
    from jobs.registry.versions import move_alias

    shutil.copy(empty_store, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    client.create_registered_model("qa-toy")
    run_id = client.create_run(client.create_experiment("toy")).info.run_id
    for role in ("champion", "candidate"):
        task = TaskConfig(name="files", kind="question-answering", train_file=__file__, doc_stride=32,
                          max_seq_len=lengths[role])  # as a fine-tuning job tags it
        version = client.create_model_version("qa-toy", str(tmp_path), run_id,
                                              tags={"task_config": json.dumps(asdict(task))})
        move_alias(client, "qa-toy", role, str(version.version), "by hand")
    return uri


@pytest.mark.parametrize("lengths, said", [({"champion": 128, "candidate": 384}, "v1 (champion)"),
                                           ({"champion": 384, "candidate": 128}, "v2 (candidate)")])
def test_a_window_refused_once_the_task_is_read_is_one_line_exit_2_naming_the_model(tmp_path, empty_store, capsys,
                                                                                     lengths, said):
    """judged_task's ConfigError left promote's main as a ValueError: exit 1, where README's table says 2; and the
    champion's own max_seq_len was named as if it were the candidate's."""
    from jobs import promote
    from jobs.config.io import cli

    uri = _qa_registry(tmp_path, empty_store, lengths)
    argv = ["qa-toy", "task.doc_stride=100", f"tracking.tracking_uri={uri}", "tracking.experiment=toy-promotion",
            f"tracking.artifact_location={tmp_path / 'art'}"]
    with pytest.raises(SystemExit) as ended:
        cli(lambda: promote.main(argv))
    err = capsys.readouterr().err.strip()
    assert ended.value.code == 2, (ended.value.code, err)
    assert err.startswith(f"error: {said}: task.max_query_length (64) + task.doc_stride (100) + 3 must be < "
                          f"task.max_seq_len (128)"), err
    assert "\n" not in err


@pytest.fixture
def no_warning_said(monkeypatch):
    from jobs.config import pretrain

    monkeypatch.setattr(pretrain, "_WARNED", set(), raising=False)  # said in this process by another test: not here


def test_the_pipeline_warning_is_said_once_however_often_the_job_validates(no_warning_said):
    """A job validates its config 2-3 times (parse, resolve, phase 2), and the warning filters change between (console,
    Ray's and MLflow's imports), which resets Python's once-per-location registry: the line printed 2-3 times."""
    overrides = ["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1", "scaling.num_workers=4"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # as a filter change leaves it: every call would print
        cfg = load_config(PretrainConfig, QUICKSTART, overrides)
        copy.deepcopy(cfg).validate()
        load_config(PretrainConfig, QUICKSTART, overrides)
    said = [str(w.message) for w in caught if "pipeline_stages=2" in str(w.message)]
    assert len(said) == 1, said
    assert said[0].startswith("[train] deepspeed.pipeline_stages=2 with train.grad_accum_steps=1")


def test_pretraining_refuses_a_tokenizer_folder_without_mask_before_ray(tmp_path, monkeypatch):
    """The driver's check, not given_tokenizer alone: check_environment is what refuses it before Ray starts."""
    monkeypatch.chdir(ROOT)
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n")  # no [MASK]
    cfg = load_config(PretrainConfig, QUICKSTART, [f"data.tokenizer.path={folder}", f"output_dir={tmp_path}/runs",
                                                   f"data.output_root={tmp_path}/prep"])
    with pytest.raises(ConfigError, match=r"^data\.tokenizer\.path=.*lacks special tokens"):
        cfg.check_environment()


def test_a_repeated_vocab_line_is_refused_with_the_line_to_remove(tmp_path):
    """The folder is a BERT WordPiece tokenizer: "give a BERT WordPiece tokenizer" sent the user to look elsewhere."""
    from bert_core.tokenizer import given_tokenizer

    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nhello\nworld\n")
    with pytest.raises(ConfigError) as refused:
        given_tokenizer(tmp_path)
    message = str(refused.value)
    assert message.startswith(f"data.tokenizer.path={tmp_path}: ") and "line 6" in message, message
    assert "remove" in message and "give a BERT WordPiece tokenizer" not in message, message


def test_the_nonfinite_count_reads_tokens_not_padding():
    """A finite HF BERT is finite at its padding too, so no model test reaches the mask: NaN where attention_mask is
    0 (no metric reads it) is no broken row; at a real token, or anywhere in a row's (B, C) logits, it is."""
    from jobs.registry.scorer import _nonfinite

    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=bool)
    qa = np.zeros((3, 4), dtype=np.float32)
    qa[0, 3] = qa[1, 2] = np.nan  # padding only
    assert not _nonfinite({"start_logits": qa, "end_logits": qa.copy()}, mask).any()
    tags = np.zeros((3, 4, 5), dtype=np.float32)
    tags[1, 3, 2] = np.inf
    assert not _nonfinite({"logits": tags}, mask).any()
    qa[2, 0] = np.nan
    assert _nonfinite({"start_logits": qa}, mask).tolist() == [False, False, True]
    tags[0, 1, 0] = np.nan
    assert _nonfinite({"logits": tags}, mask).tolist() == [True, False, False]
    rows = np.zeros((3, 2), dtype=np.float32)
    rows[1, 1] = np.nan  # a classifier's row: every logit is read
    assert _nonfinite({"logits": rows}, mask).tolist() == [False, True, False]
