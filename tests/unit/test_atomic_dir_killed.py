"""A checkpoint write killed between atomic_dir's two renames (the old folder moved aside, the new one not yet in)
left the folder missing, its old copy under .NAME.old-*/ where nothing looked: the next write puts it back first."""

import re
import subprocess
import sys
import textwrap

import pytest

from bert_core.checkpoint import atomic_dir

KILLED_BETWEEN_RENAMES = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from bert_core.checkpoint import atomic_dir

    out = Path(sys.argv[1])
    with atomic_dir(out) as tmp:
        (tmp / "weights").write_text("old")
    calls, replace = [], os.replace

    def replace_then_die(src, dst):
        calls.append(src)
        if len(calls) == 2:  # the old folder is aside; the new one would be renamed in now
            os._exit(9)
        replace(src, dst)

    os.replace = replace_then_die
    with atomic_dir(out) as tmp:
        (tmp / "weights").write_text("new")
""")


def test_a_write_killed_between_its_renames_gets_the_old_folder_back_at_the_next_write(tmp_path):
    out = tmp_path / "best"
    killed = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(out)], cwd=".")
    assert killed.returncode == 9 and not out.exists()  # the window: neither copy at the folder's name
    with pytest.raises(RuntimeError), atomic_dir(out):  # a next write, failing: the old copy is back anyway
        raise RuntimeError("the next write fails too")
    assert (out / "weights").read_text() == "old"
    assert not list(tmp_path.glob(".best.old-*"))
    with atomic_dir(out) as tmp:
        (tmp / "weights").write_text("newer")
    assert (out / "weights").read_text() == "newer"


def test_a_reader_of_a_folder_a_killed_write_left_missing_names_its_last_whole_copy(tmp_path):
    """Until the next write put it back, a job reading the folder said only "no such folder": its whole copy sat
    under .NAME.old-*/ unnamed. Readers name it and move nothing (a rename of theirs could land in a write's gap)."""
    from bert_core.config import ConfigError
    from jobs.config.finetune import FinetuneConfig
    from jobs.config.io import from_dict, load_config
    from jobs.config.pretrain import PretrainConfig
    from jobs.inference.model_ref import model_folder_kind, resolve_model

    out = tmp_path / "release"
    assert subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(out)], cwd=".").returncode == 9
    aside = next(tmp_path.glob(".release.old-*/release"))
    for read in (lambda: model_folder_kind(str(out)),
                 lambda: resolve_model(str(out), f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "dl"),
                 lambda: from_dict(FinetuneConfig, {"init": str(out)}).validate(),
                 lambda: load_config(PretrainConfig, "configs/pretrain/quickstart.yaml", [
                     f"output_dir={tmp_path}/runs", f"train.init_checkpoint={out}"]).check_environment()):
        with pytest.raises(ConfigError, match=re.escape(f"last whole copy at {aside}")):
            read()
    assert not out.exists() and (aside / "weights").read_text() == "old"  # moved by no reader
    (tmp_path / "other").mkdir()
    with pytest.raises(ConfigError) as refused:  # a folder no write left aside: no such sentence
        model_folder_kind(str(tmp_path / "other" / "release"))
    assert "whole copy" not in str(refused.value)
