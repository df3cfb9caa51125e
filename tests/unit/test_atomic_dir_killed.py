"""A checkpoint write killed between atomic_dir's two renames (the old folder moved aside, the new one not yet in)
left the folder missing, its old copy under .NAME.old-*/ where nothing looked: the next write puts it back first."""

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
