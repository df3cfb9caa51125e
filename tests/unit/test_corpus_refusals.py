"""A corpus refused (pipelines.source_files.SourceError: no document kept, a .zst file, a source that matches no
files, prepared data given as a corpus) ends a job as a config mistake does: `error: <message>` on stderr, exit
status 2, no traceback."""

import pytest

from jobs.config.io import cli
from pipelines.source_files import SourceError


def raising(exc):
    def main():
        raise exc
    return main


def test_a_corpus_refusal_ends_a_job_with_one_line_and_exit_status_2(capsys):
    """It came as a 20-line traceback with exit status 1, after Ray and the GPU wait; one raised in a Ray task comes
    as a RayTaskError holding it (`cause`). Any other error keeps its traceback."""
    from ray.exceptions import RayTaskError

    line = "data.sources: 's3://b/x' matches no files"
    in_task = RayTaskError("MapBatches(_count)", "Traceback ...\nlots of lines", SourceError(line))
    for exc in (SourceError(line), in_task.as_instanceof_cause()):
        with pytest.raises(SystemExit) as ended:
            cli(raising(exc))
        assert ended.value.code == 2 and capsys.readouterr().err == f"error: {line}\n"
    with pytest.raises(RuntimeError, match="a bug"):
        cli(raising(RuntimeError("a bug")))

