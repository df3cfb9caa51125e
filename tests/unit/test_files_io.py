"""An I/O error partway through a user's file fails the read, naming the file; only a decoder's error on the file's
own bytes is a truncated_<codec> / corrupt_<codec> / corrupt_parquet reject (pipelines.tasks.files.read_file, as
pipelines/sources.py reads a corpus: tests/unit/test_stream_io_errors.py). No Ray.

Counted as corrupt, a network reset on s3:// or a disk error cost every row after it, as one reject, and training went
on without them."""

import bz2
import errno
import gzip
import io
import lzma
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from pipelines.tasks import read_file
from tests.unit.test_stream_io_errors import IO_ERRORS, FailsAt

COMPRESS = {"gzip": (".gz", gzip.compress), "bz2": (".bz2", lambda d: bz2.compress(d, 1)), "xz": (".xz", lzma.compress)}
ROWS = 3000  # ~300 kB of random hex: several read buffers (and bz2 blocks) before the middle


def csv_rows(n: int) -> bytes:
    rng = random.Random(0)
    return b"text,label\n" + b"".join(f"{rng.randbytes(40).hex()},{'pos' if i % 2 else 'neg'}\n".encode()
                                      for i in range(n))


def failing(monkeypatch, name: str, broken) -> None:
    """Open the file called `name` as `broken(its bytes)` (a file that fails partway); any other as it is."""
    real_open = LocalFileSystem._open

    def _open(self, path, mode="rb", **kwargs):
        if not path.endswith(name):
            return real_open(self, path, mode, **kwargs)
        with open(path, "rb") as f:
            return broken(f.read())

    monkeypatch.setattr(LocalFileSystem, "_open", _open)


class Resetting(io.BytesIO):
    """A file whose read across byte `cut` raises ConnectionResetError, as an object store's connection does partway
    through a ranged read (test_corpus_files' Parquet case); its other reads, the footer's, succeed."""

    def __init__(self, data: bytes, cut: int):
        super().__init__(data)
        self.cut = cut

    def read(self, n=-1):
        if self.tell() <= self.cut < self.tell() + (len(self.getvalue()) if n is None or n < 0 else n):
            raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
        return super().read(n)


def read_until_error(path: str, fmt: str) -> tuple[list[dict], dict, OSError]:
    rows, rejects = [], {}
    with pytest.raises(OSError) as raised:
        for batch in read_file(path, fmt, "classification", batch_rows=100):
            rows += batch.rows
            rejects.update(batch.rejects)
    return rows, rejects, raised.value


@pytest.mark.parametrize("error", IO_ERRORS, ids=list(IO_ERRORS))
@pytest.mark.parametrize("codec", COMPRESS)
def test_an_io_error_partway_through_a_compressed_file_raises_naming_it(tmp_path, monkeypatch, codec, error):
    ext, compress = COMPRESS[codec]
    path = tmp_path / f"train.csv{ext}"
    path.write_bytes(compress(csv_rows(ROWS)))
    failing(monkeypatch, path.name, lambda data: FailsAt(data, len(data) // 2, IO_ERRORS[error]))
    rows, rejects, e = read_until_error(str(path), "csv")
    assert str(path) in str(e) and isinstance(e.__cause__, OSError)
    assert e.__cause__.errno == {"EIO": errno.EIO, "ECONNRESET": errno.ECONNRESET, "timeout": None}[error]
    assert len(rows) < ROWS and not rejects  # no corrupt_<codec>: nothing counted (the head's sniff may meet it first)


def test_an_io_error_partway_through_a_parquet_file_raises_naming_it(tmp_path, monkeypatch):
    path = tmp_path / "train.parquet"
    rng = random.Random(0)  # 1.6 MB: the footer's read (64 KiB from the end) does not reach the cut
    texts = [rng.randbytes(40).hex() for _ in range(20_000)]
    pq.write_table(pa.table({"text": texts, "label": ["pos", "neg"] * 10_000}), path, row_group_size=5000,
                   use_dictionary=False)
    cut = pq.read_metadata(path).row_group(2).column(0).data_page_offset
    failing(monkeypatch, path.name, lambda data: Resetting(data, cut))
    rows, rejects, e = read_until_error(str(path), "parquet")
    assert str(path) in str(e) and isinstance(e.__cause__, ConnectionResetError)
    assert len(rows) < 20_000 and not rejects  # not corrupt_parquet (pyarrow reads ahead: rows before it may wait)


def test_an_io_error_in_a_save_to_disk_folder_raises_naming_it(tmp_path, monkeypatch):
    import json

    folder = tmp_path / "hf"
    folder.mkdir()
    table = pa.table({"text": [f"row {i}" for i in range(4000)], "label": ["pos", "neg"] * 2000})
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink, \
            pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=500):
            writer.write_batch(batch)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    failing(monkeypatch, ".arrow", lambda data: Resetting(data, len(data) // 2))
    rows, rejects, e = read_until_error(str(folder), "hf")
    assert str(folder) in str(e) and isinstance(e.__cause__, ConnectionResetError)
    assert 0 < len(rows) < 4000 and not rejects  # not corrupt_hf


def test_damaged_compressed_data_is_still_one_reject(tmp_path):
    """The decoders' own errors on the file's bytes stay counted, the rows before them kept (a Parquet page that does
    not decode: test_files_exports)."""
    data = gzip.compress(csv_rows(ROWS))
    (tmp_path / "cut.csv.gz").write_bytes(data[:len(data) // 2])
    (tmp_path / "crc.csv.gz").write_bytes(data[:-8] + bytes(4) + data[-4:])  # gzip.BadGzipFile, an OSError
    middle = len(compressed := bz2.compress(csv_rows(ROWS), 1)) // 2
    (tmp_path / "zeroed.csv.bz2").write_bytes(compressed[:middle] + bytes(200) + compressed[middle + 200:])
    for name, reason in (("cut.csv.gz", "truncated_gzip"), ("crc.csv.gz", "corrupt_gzip"),
                         ("zeroed.csv.bz2", "corrupt_bz2")):  # bz2: a bare OSError without errno
        batches = list(read_file(str(tmp_path / name), "csv", "classification"))
        assert {r: n for b in batches for r, n in b.rejects.items()} == {reason: 1}
        assert 0 < sum(len(b.rows) for b in batches) <= ROWS


def test_a_workers_or_pyarrows_limits_are_raised_not_counted_as_a_corrupt_file():
    """Out of memory on a busy worker, a column past 2 GiB, a nested conversion pyarrow does not implement: none is
    about the file's bytes, yet each was counted as one corrupt_parquet reject and the rest of a good file dropped."""
    from pipelines.parquet_source import bad_compressed_data

    for limit in (pa.ArrowMemoryError("malloc of 64 MiB failed"), pa.ArrowCapacityError("array past 2 GiB"),
                  pa.ArrowNotImplementedError("Nested data conversions not implemented for chunked array outputs"),
                  MemoryError()):
        assert not bad_compressed_data(limit), limit
    assert bad_compressed_data(pa.ArrowInvalid("Couldn't deserialize thrift")) and bad_compressed_data(EOFError())
