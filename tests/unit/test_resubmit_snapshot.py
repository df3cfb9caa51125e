"""jobs/runtime/resubmit.py reading Ray Train's checkpoint manager snapshot: one cut short (a full disk, a head killed
while writing it) made every later submission of the run fail with a bare JSONDecodeError that named no file."""

import pytest

from bert_core.config import ConfigError
from jobs.runtime import resubmit


@pytest.mark.parametrize("text", ["", '{"latest_checkpoint_result": {"checkpoint_dir_name": "checkpoint_2025-'])
def test_a_snapshot_cut_short_is_refused_naming_it_and_the_way_on(tmp_path, text):
    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True)
    snapshot = run_dir / "checkpoint_manager_snapshot.json"
    snapshot.write_text(text)
    for read in (resubmit.latest, resubmit.latest_record, lambda d: resubmit.check(d, {})):
        with pytest.raises(ConfigError) as refused:
            read(run_dir)
        said = str(refused.value)
        assert said.startswith(f"{snapshot}, Ray Train's record of the run's checkpoints, is not whole (")
        assert said.endswith(f"Choose a new run_name, or remove {run_dir} to start over")


def test_a_whole_snapshot_names_the_latest_checkpoint(tmp_path):
    (tmp_path / "checkpoint_manager_snapshot.json").write_text(
        '{"latest_checkpoint_result": {"checkpoint_dir_name": "checkpoint_2"}}')
    assert resubmit.latest(tmp_path) == tmp_path / "checkpoint_2"
    assert resubmit.latest(tmp_path / "new") is None
