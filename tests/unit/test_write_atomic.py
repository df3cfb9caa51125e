"""jobs/runtime/files.write_atomic's order of operations (its whole-or-absent writes and their mode are tested with the
prediction shards that use them: tests/unit/test_prediction_shards.py)."""

import os

from jobs.runtime import files


def test_the_file_is_synced_before_its_rename_and_the_folder_after_it(tmp_path, monkeypatch):
    """Whole after a power loss too: the data reaches the disk before the rename makes it the file (else the rename
    can land first and the file read empty), and the folder is synced after it (else the folder can hold the old
    file)."""
    calls, fsync, replace = [], os.fsync, os.replace

    def synced(fd):
        calls.append(("fsync", os.path.realpath(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def renamed(src, dst):
        calls.append(("replace", os.path.realpath(src), os.path.realpath(dst)))
        replace(src, dst)

    monkeypatch.setattr(files.os, "fsync", synced)
    monkeypatch.setattr(files.os, "replace", renamed)
    target = tmp_path / "manifest.json"
    files.write_atomic(target, b"{}")
    temp = next(c[1] for c in calls if c[0] == "replace")
    assert calls == [("fsync", temp), ("replace", temp, os.path.realpath(target)),
                     ("fsync", os.path.realpath(tmp_path))]
    assert target.read_bytes() == b"{}"
