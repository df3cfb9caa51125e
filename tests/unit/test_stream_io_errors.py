"""An I/O error partway through a compressed file or a bz2 wiki dump fails the read, naming the file; only the
decoders' own errors (bad or cut-short data) are counted as corrupt_<codec> / truncated_<codec> rejects. No Ray.

Counted as corrupt, a disk error or a network reset cost every document after it (a gzip JSONL kept 6989 of 20000
records, a bz2 dump 194 of 400 pages) while the run succeeded and its prepared set was reused as complete."""

import bz2
import errno
import gzip
import io
import json
import lzma
import random

import pytest

import pipelines.sources as sources
from pipelines.config import DataConfig
from pipelines.multistream import stream_offsets
from pipelines.source_files import SourceError
from pipelines.sources import Span, iter_documents

COMPRESS = {  # bz2 in 100 kB blocks: a file of one block yields nothing before an error anywhere in it
    "gzip": (".gz", gzip.compress), "bz2": (".bz2", lambda d: bz2.compress(d, 1)), "xz": (".xz", lzma.compress)}
RECORDS = 1500  # 400 kB of JSON lines: several read buffers, and several bz2 blocks, before the middle
IO_ERRORS = {
    "EIO": lambda: OSError(errno.EIO, "Input/output error"),
    "ECONNRESET": lambda: ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
    "timeout": lambda: TimeoutError("The read operation timed out"),  # no errno: an OSError subclass all the same
}


def config(path) -> DataConfig:
    return DataConfig(sources=[str(path)], min_document_chars=20)


def jsonl(n: int, seed: int = 0) -> bytes:
    """Records of random hex words: they compress poorly, so the error comes well after the first records."""
    rng = random.Random(seed)
    return b"".join(json.dumps({"text": " ".join(rng.randbytes(4).hex() for _ in range(30))}).encode() + b"\n"
                    for _ in range(n))


class FailsAt(io.BytesIO):
    """A file that hands out its bytes up to `cut`, then raises the I/O error `error()` on every read, as a disk
    or an object store does when it fails partway through."""

    def __init__(self, data: bytes, cut: int, error):
        super().__init__(data)
        self.cut, self.error = cut, error

    def read(self, n: int = -1) -> bytes:
        if self.tell() >= self.cut:
            raise self.error()
        left = self.cut - self.tell()
        return super().read(left if n is None or n < 0 else min(n, left))


def failing_halfway(monkeypatch, error) -> None:
    def open_binary(path: str) -> FailsAt:
        with open(path, "rb") as f:
            data = f.read()
        return FailsAt(data, len(data) // 2, error)

    monkeypatch.setattr(sources, "open_binary", open_binary)


def read_until_error(rows) -> tuple[list[dict], SourceError]:
    got = []
    with pytest.raises(SourceError) as raised:
        for row in rows:
            got.append(row)
    return got, raised.value


@pytest.mark.parametrize("error", IO_ERRORS, ids=list(IO_ERRORS))
@pytest.mark.parametrize("codec", COMPRESS)
def test_an_io_error_partway_through_a_compressed_file_raises_naming_it(tmp_path, monkeypatch, codec, error):
    ext, compress = COMPRESS[codec]
    path = tmp_path / f"corpus.jsonl{ext}"
    path.write_bytes(compress(jsonl(RECORDS)))
    failing_halfway(monkeypatch, IO_ERRORS[error])
    rows, e = read_until_error(iter_documents(str(path), path.name, config(path)))
    assert str(path) in str(e) and isinstance(e.__cause__, OSError)
    assert e.__cause__.errno == {"EIO": errno.EIO, "ECONNRESET": errno.ECONNRESET, "timeout": None}[error]
    assert rows and all(r["reject_reason"] == "" for r in rows)  # no corrupt_<codec> row: nothing counted
    assert len(rows) < RECORDS


def wiki_dump(path, n_pages: int) -> list[int]:
    """A multistream .xml.bz2 dump, 5 pages a stream (as Wikipedia's); returns the stream offsets."""
    rng = random.Random(1)
    pages = [f"  <page>\n    <title>Page {i}</title>\n    <ns>0</ns>\n    <id>{i}</id>\n    <revision><id>{i}0</id>"
             f"<text>{' '.join(rng.randbytes(4).hex() for _ in range(60))}.</text></revision>\n  </page>\n"
             for i in range(1, n_pages + 1)]
    pieces = ['<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" xml:lang="en">\n'
              "  <siteinfo><sitename>Test</sitename></siteinfo>\n"]
    pieces += ["".join(pages[i:i + 5]) for i in range(0, n_pages, 5)] + ["</mediawiki>\n"]
    path.write_bytes(b"".join(bz2.compress(p.encode()) for p in pieces))
    with open(path, "rb") as f:
        return stream_offsets(f)


@pytest.mark.parametrize("error", IO_ERRORS, ids=list(IO_ERRORS))
def test_an_io_error_partway_through_a_wiki_dump_raises_naming_it(tmp_path, monkeypatch, error):
    path = tmp_path / "wiki.xml.bz2"
    offsets = wiki_dump(path, 400)
    failing_halfway(monkeypatch, IO_ERRORS[error])
    whole, e = read_until_error(iter_documents(str(path), path.name, config(path)))
    assert str(path) in str(e) and isinstance(e.__cause__, OSError)
    assert whole and all(r["reject_reason"] == "" for r in whole) and len(whole) < 400
    # a range of streams (prepare() reads a dump so) that runs into the error
    start = offsets[len(offsets) // 4]
    ranged, e = read_until_error(iter_documents(str(path), path.name, config(path), Span(start, -1)))
    assert str(path) in str(e) and ranged and all(r["reject_reason"] == "" for r in ranged)


def bad_deflate_block(blob: bytes) -> bytes:
    """A good gzip member, then one whose deflate data opens with the reserved block type 11: zlib.error."""
    return blob + gzip.compress(b"")[:10] + b"\x07" + bytes(16)


def zeroed_middle(blob: bytes) -> bytes:
    middle = len(blob) // 2
    return blob[:middle] + bytes(200) + blob[middle + 200:]


def cut_short(blob: bytes) -> bytes:
    return blob[:len(blob) // 2]


DAMAGE = {  # what each decoder raises on the file's own bytes: counted, the read ends with one reject
    "gzip-crc": ("gzip", lambda blob: blob[:-8] + bytes(4) + blob[-4:], "corrupt_gzip"),  # gzip.BadGzipFile
    "gzip-block": ("gzip", bad_deflate_block, "corrupt_gzip"),  # zlib.error
    "gzip-cut": ("gzip", cut_short, "truncated_gzip"),  # EOFError, as every truncated stream
    "bz2-data": ("bz2", zeroed_middle, "corrupt_bz2"),  # OSError("Invalid data stream"), no errno
    "bz2-cut": ("bz2", cut_short, "truncated_bz2"),
    "xz-data": ("xz", zeroed_middle, "corrupt_xz"),  # lzma.LZMAError
    "xz-cut": ("xz", cut_short, "truncated_xz"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_corrupt_and_truncated_compressed_data_is_still_one_reject(tmp_path, damage):
    codec, damaged, reason = DAMAGE[damage]
    ext, compress = COMPRESS[codec]
    path = tmp_path / f"corpus.jsonl{ext}"
    path.write_bytes(damaged(compress(jsonl(RECORDS))))
    rows = list(iter_documents(str(path), path.name, config(path)))
    assert [(r["doc_id"], r["reject_reason"]) for r in rows if r["reject_reason"]] == [(path.name, reason)]
    assert rows[-1]["reject_reason"] == reason
