"""The best model is fetched out of Ray storage into `best/` atomically: a stop at the final move (Ctrl-C, a
SIGTERM) leaves the earlier model there, never no `best/` beside a stray temp folder."""
import contextlib
import os
from pathlib import Path

import pytest

from jobs import finetune


class Checkpoint:
    """A Ray checkpoint's as_directory over a plain folder."""

    def __init__(self, path: Path):
        self.path = path

    @contextlib.contextmanager
    def as_directory(self):
        yield str(self.path)


def test_a_stop_at_the_final_move_keeps_the_earlier_best(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt"
    (ckpt / "model").mkdir(parents=True)
    (ckpt / "model" / "config.json").write_text('{"new": true}')
    (ckpt / "history.json").write_text("[1]")
    best = tmp_path / "out" / "best"
    best.mkdir(parents=True)
    (best / "config.json").write_text('{"old": true}')

    real_replace, real_rename = os.replace, Path.rename

    def stopped(src, dst):  # the move of the new copy onto best/: the process is stopped there
        if Path(dst) == best and "tmp" in Path(src).name:
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", stopped)
    monkeypatch.setattr(Path, "rename", lambda self, dst: stopped(self, dst) or real_rename(self, dst))
    with pytest.raises(KeyboardInterrupt):
        finetune._fetch_best(Checkpoint(ckpt), best)
    assert (best / "config.json").read_text() == '{"old": true}'
    assert sorted(p.name for p in best.parent.iterdir()) == ["best"]  # nothing left beside it

    monkeypatch.setattr(os, "replace", real_replace)
    monkeypatch.setattr(Path, "rename", real_rename)
    assert finetune._fetch_best(Checkpoint(ckpt), best) == [1]
    assert (best / "config.json").read_text() == '{"new": true}'
    assert sorted(p.name for p in best.parent.iterdir()) == ["best"]
