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



def _failing_read(monkeypatch, where: str):
    """open_binary as a disk or an object store fails: at the open, or halfway through the file."""
    import errno

    import pipelines.sources as sources
    from tests.unit.test_stream_io_errors import FailsAt

    reset = lambda: ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")  # noqa: E731

    def open_binary(path: str):
        if where == "open":
            raise reset()
        with open(path, "rb") as f:
            data = f.read()
        return FailsAt(data, len(data) // 2, reset)

    monkeypatch.setattr(sources, "open_binary", open_binary)


@pytest.mark.parametrize("where", ["open", "jsonl.gz", "wiki"])
def test_an_io_error_reading_the_corpus_keeps_its_traceback_and_exit_status_1(tmp_path, monkeypatch, where):
    """A disk error or a network reset reading a corpus file is no config mistake (README: exit status 2): it keeps
    its traceback and ends the job with status 1, as an I/O error reading fine-tuning's own files does; in a Ray task
    too, where the error crosses to the driver pickled inside a RayTaskError."""
    import gzip

    from ray import cloudpickle
    from ray.exceptions import RayTaskError

    from pipelines.config import DataConfig
    from pipelines.sources import iter_documents
    from tests.unit.test_stream_io_errors import jsonl, wiki_dump

    path = tmp_path / ("wiki.xml.bz2" if where == "wiki" else "corpus.jsonl.gz")
    if where == "wiki":
        wiki_dump(path, 400)
    else:
        path.write_bytes(gzip.compress(jsonl(1500)))
    _failing_read(monkeypatch, where)
    with pytest.raises(SourceError) as raised:
        for _ in iter_documents(str(path), path.name, DataConfig(sources=[str(path)])):
            pass
    read_error = raised.value
    assert str(path) in str(read_error) and "Connection reset" in str(read_error)
    in_task = RayTaskError("FlatMap(_parse_file)", "Traceback ...", cloudpickle.loads(cloudpickle.dumps(read_error)))
    for exc in (read_error, cloudpickle.loads(cloudpickle.dumps(in_task)).as_instanceof_cause()):
        with pytest.raises(type(exc)):
            cli(raising(exc))
