"""pkgdocs' `task.corpus_dir` is where fine-tuning harvests its corpus first: a folder this machine cannot write is
refused in one line before any work, as pretraining's `corpus.harvest_dir` is, not as a traceback from the harvest
(in the quickstart, after the whole pretraining)."""

import os
from pathlib import Path

import pytest

from bert_core.config import ConfigError
from jobs import quickstart
from jobs.config.finetune import FinetuneConfig
from jobs.config.io import load_config

ROOT = Path(__file__).resolve().parents[2]
NO_ONE_WRITES = "/proc/bert-foundry-test/docs"  # Linux's /proc takes no new folder from anyone, root included
pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")


def test_an_unwritable_corpus_dir_is_refused_by_finetune(tmp_path):
    init = tmp_path / "init"
    init.mkdir()
    (init / "config.json").write_text("{}")
    cfg = load_config(FinetuneConfig, str(ROOT / "configs/finetune/pkgdocs.yaml"),
                      [f"init={init}", f"output_dir={tmp_path}/runs", f"task.corpus_dir={NO_ONE_WRITES}"])
    with pytest.raises(ConfigError, match=rf"^task\.corpus_dir must be a writable folder, got '{NO_ONE_WRITES}'") as e:
        cfg.check_environment()
    assert "\n" not in str(e.value)


def test_an_unwritable_corpus_dir_is_refused_by_the_quickstart_check(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the configs' relative folders (runs, mlflow.db)
    with pytest.raises(ConfigError, match=r"^sweep\.finetune\.task\.corpus_dir must be a writable folder"):
        quickstart.main(["--check", f"sweep.finetune.task.corpus_dir={NO_ONE_WRITES}"])
    assert "valid; nothing was run" not in capsys.readouterr().out
    # a writable folder of its own still passes
    quickstart.main(["--check", f"sweep.finetune.task.corpus_dir={tmp_path}/docs"])
    assert "valid; nothing was run" in capsys.readouterr().out


def _read_only_for_this_user(monkeypatch, folder):
    """The suite runs as root, whom every permission check passes: report `folder` as read-only instead."""
    real = os.access
    monkeypatch.setattr("jobs.config.sections.os.access",
                        lambda p, mode, **kw: False if Path(p) == folder else real(p, mode, **kw))


def test_a_read_only_corpus_dir_holding_a_finished_harvest_is_reused(tmp_path, monkeypatch):
    # harvest_installed_docs reuses a finished harvest (one holding SUMMARY) without writing, and load_pkgdocs
    # only reads: a shared corpus someone else harvested, or a read-only mount, needs no write access
    from jobs.config.sections import HARVEST_SUMMARY
    from pipelines.harvest import SUMMARY

    assert HARVEST_SUMMARY == SUMMARY  # the config's copy of the marker, kept there to import no Ray
    init, docs = tmp_path / "init", tmp_path / "docs"
    init.mkdir()
    (init / "config.json").write_text("{}")
    docs.mkdir()
    (docs / SUMMARY).write_text("{}")
    _read_only_for_this_user(monkeypatch, docs)
    cfg = load_config(FinetuneConfig, str(ROOT / "configs/finetune/pkgdocs.yaml"),
                      [f"init={init}", f"output_dir={tmp_path}/runs", f"task.corpus_dir={docs}"])
    cfg.check_environment()
    (docs / SUMMARY).unlink()  # no finished harvest: one would be written there, so it is refused
    with pytest.raises(ConfigError, match=rf"^task\.corpus_dir must be a writable folder, got '{docs}' .*read-only"):
        cfg.check_environment()


def test_a_read_only_harvest_dir_holding_a_finished_harvest_is_reused_by_pretraining(tmp_path, monkeypatch):
    """Pretraining's corpus.harvest_dir by the same rule: the quickstart over a shared, harvested corpus."""
    from jobs.config.pretrain import PretrainConfig
    from pipelines.harvest import SUMMARY

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / SUMMARY).write_text("{}")
    _read_only_for_this_user(monkeypatch, docs)
    cfg = load_config(PretrainConfig, str(ROOT / "configs/pretrain/quickstart.yaml"),
                      [f"output_dir={tmp_path}/runs", f"data.output_root={tmp_path}/data", f"corpus.harvest_dir={docs}",
                       f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db"])
    cfg.check_environment()
    (docs / SUMMARY).unlink()
    with pytest.raises(ConfigError, match=rf"^corpus\.harvest_dir must be a writable folder, got '{docs}' .*read-only"):
        cfg.check_environment()
