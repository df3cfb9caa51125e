"""An I/O error while a CSV's head is sniffed (its encoding, its delimiter) is raised naming the file, as the record
readers raise one, not read as a file whose head is empty; a compressed file cut short still gives the head before
the cut (its records are counted where the reader reaches it)."""

import errno
import gzip
import io

import pytest

from pipelines.tasks import files
from pipelines.tasks.file_head import csv_delimiter, refuse_one_byte_text


class _FailingHead(io.BufferedReader):
    """A file whose first two reads of read1 (file_head's, the encoding's and the delimiter's) fail with an OS error, as
    a flaky disk or network read does; the reads after them succeed."""

    fails = 2

    def read1(self, size=-1):
        if self.fails:
            self.fails -= 1
            raise OSError(errno.EIO, "Input/output error")
        return super().read1(size)


def _failing(data: bytes):
    return _FailingHead(io.BytesIO(data))


def test_an_os_error_in_the_head_is_raised_not_taken_for_an_empty_head():
    """Before, refuse_one_byte_text passed a cp1252 file it could not read, and csv_delimiter guessed "," from
    nothing."""
    cp1252 = "text;label\n".encode() + "".join(f"caf\u00e9 {i};r\u00e9sum\u00e9\n" for i in range(5)).encode("cp1252")
    with pytest.raises(OSError, match="Input/output error"):
        refuse_one_byte_text("data/train.csv", _failing(cp1252))
    with pytest.raises(OSError, match="Input/output error"):
        csv_delimiter(_failing(b"text;label\na;1\nb;2\n"))


def test_read_file_names_the_file_and_the_os_error_met_while_sniffing_its_head(tmp_path, monkeypatch):
    """Before, a `;` CSV whose head could not be read was split at commas and refused for its columns ("expected
    columns ['text', 'label'], found ['text;label']"), pointing at task.columns, not at the disk."""
    path = tmp_path / "train.csv"
    path.write_text("text;label\n" + "".join(f"row {i};{i % 2}\n" for i in range(10)))
    text_file = files.text_file
    monkeypatch.setattr(files, "text_file", lambda *a: _FailingHead(text_file(*a)))
    with pytest.raises(OSError, match=r"error reading \S*train\.csv after 0 records: .*Input/output error"):
        list(files.read_file(str(path), "csv", "classification"))


def test_a_gzip_file_cut_short_still_gives_the_head_before_the_cut(tmp_path):
    data = gzip.compress(b"text;label\n" + b"".join(b"row %d;%d\n" % (i, i % 2) for i in range(5000)))
    with gzip.open(io.BytesIO(data[:len(data) // 2])) as f:
        assert csv_delimiter(f) == ";"
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(data[:len(data) // 2])
    batches = list(files.read_file(str(path), "csv", "classification"))
    assert sum(len(b.rows) for b in batches) > 100 and sum(b.rejects["truncated_gzip"] for b in batches) == 1
