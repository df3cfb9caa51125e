"""Multistream bz2 XML dumps in ranges of streams: every page read once, by exactly one range, whatever the
ranges and wherever the streams cut the XML (Wikipedia cuts between pages, pbzip2 anywhere). No Ray."""

import bz2
import random

import pytest

from pipelines.config import DataConfig
from pipelines.multistream import stream_offsets
from pipelines.sources import Span, iter_documents
from pipelines.units import file_parts

WORDS = "river stone light garden winter market letter window mountain story paper engine".split()
ROOT = '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">\n'
SITEINFO = "  <siteinfo><sitename>Test</sitename></siteinfo>\n"


def page(rng: random.Random, page_id: int) -> str:
    text = " ".join(" ".join(rng.choice(WORDS) for _ in range(9)).capitalize() + "." for _ in range(rng.randint(3, 12)))
    if page_id % 17 == 0:
        text = f"#REDIRECT [[Page {page_id - 1}]]"  # a reject inside some range
    return (f"  <page>\n    <title>Page {page_id}</title>\n    <ns>0</ns>\n    <id>{page_id}</id>\n"
            f"    <revision><id>{page_id}0</id><text xml:space=\"preserve\">{text} a &lt;page&gt; in text</text>"
            "</revision>\n  </page>\n")


def dump(n_pages: int = 120, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [ROOT + SITEINFO] + [page(rng, i) for i in range(1, n_pages + 1)] + ["</mediawiki>\n"]


def write_multistream(path, pieces: list[str], cut_every: int | None = None) -> list[int]:
    """Streams of 5 pieces each (as Wikipedia: pages whole), or of `cut_every` bytes of XML (as pbzip2:
    cut anywhere, in the middle of tags included). Returns the stream offsets."""
    xml = "".join(pieces).encode()
    if cut_every:
        chunks = [xml[i:i + cut_every] for i in range(0, len(xml), cut_every)]
    else:
        chunks = [pieces[0].encode()] + ["".join(pieces[i:i + 5]).encode() for i in range(1, len(pieces), 5)]
    offsets, data = [], b""
    for chunk in chunks:
        offsets.append(len(data))
        data += bz2.compress(chunk)
    path.write_bytes(data)
    return offsets


def config(path) -> DataConfig:
    return DataConfig(sources=[str(path)], min_document_chars=20)


def outcome(rows) -> tuple[list, list]:
    """The kept documents (id, text) and the rejects other than redirects, sorted, of a read."""
    rows = list(rows)
    return ([(r["doc_id"], r["text"]) for r in rows if not r["reject_reason"]],
            sorted(r["reject_reason"] for r in rows if r["reject_reason"] not in ("", "redirect")))


def read_ranges(path, cuts: list[int]) -> list[dict]:
    rows = []
    for start, end in zip(cuts, cuts[1:] + [-1]):
        rows += iter_documents(str(path), path.name, config(path), Span(start, end))
    return rows


@pytest.mark.parametrize("cut_every", [None, 997, 64], ids=["between-pages", "pbzip2-like", "mid-tag"])
def test_ranges_of_streams_read_every_page_once(tmp_path, cut_every):
    path = tmp_path / "dump.xml.bz2"
    offsets = write_multistream(path, dump(), cut_every)
    assert stream_offsets(open(path, "rb")) == offsets
    whole = list(iter_documents(str(path), path.name, config(path)))  # bz2.BZ2File over the whole file
    assert len(whole) == 120 and sum(r["reject_reason"] == "redirect" for r in whole) == 7
    rng = random.Random(1)
    for cuts in ([0, offsets[1]], offsets, offsets[::3], [0] + sorted(rng.sample(offsets[1:], 5))):
        assert read_ranges(path, cuts) == whole, cuts


def test_a_truncated_last_stream_is_reported_by_its_range_and_the_rest_is_read(tmp_path):
    path = tmp_path / "cut.xml.bz2"
    offsets = write_multistream(path, dump())
    data = path.read_bytes()
    path.write_bytes(data[: offsets[-1] + (len(data) - offsets[-1]) // 2])
    cuts = [0, offsets[10], offsets[-3]]
    rows = read_ranges(path, cuts)
    assert [r["doc_id"] for r in rows if r["reject_reason"] == "truncated_bz2"] == [f"cut.xml.bz2@{offsets[-3]}"]
    whole_pages = [r for r in rows if r["doc_id"].startswith("cut.xml.bz2#")]
    assert [int(r["doc_id"].split("#")[1]) for r in whole_pages] == list(range(1, len(whole_pages) + 1))
    assert len(whole_pages) >= 120 - 10  # at most the cut stream's pages (5) and its range's unfinished page lost


def test_planner_cuts_a_big_dump_at_stream_offsets(tmp_path):
    path = tmp_path / "big.xml.bz2"
    offsets = write_multistream(path, dump(600), 997)
    size = path.stat().st_size
    parts = file_parts([str(path)], [{"bytes": size}], config(path), size // 4)
    assert [p["kind"] for p in parts] == ["bz2_streams"] * len(parts) and 4 <= len(parts) <= 5
    assert {p["start"] for p in parts} <= set(offsets) and parts[0]["start"] == 0 and parts[-1]["end"] == -1
    assert all(a["end"] == b["start"] for a, b in zip(parts, parts[1:]))
    assert sum(p["bytes"] for p in parts) == size
    single = tmp_path / "single.xml.bz2"
    single.write_bytes(bz2.compress("".join(dump(600)).encode()))  # one stream: read whole
    assert [p["kind"] for p in file_parts([str(single)], [{"bytes": size}], config(single), size // 4)] == ["whole"]


def test_every_range_knows_the_dumps_own_namespace_names(tmp_path):
    """A range after the first starts with the dump's root tag and its <siteinfo> (the first stream's): without
    it, a German dump's later ranges kept [[Datei:...|mini|...]] options and [[Kategorie:...]] names as text, and
    the same page read otherwise whole and in ranges."""
    siteinfo = ('  <siteinfo><sitename>Wikipedia</sitename><namespaces><namespace key="6">Datei</namespace>'
                '<namespace key="14">Kategorie</namespace></namespaces></siteinfo>\n')
    pieces = dump(60, seed=3)
    pieces[0] = ROOT + siteinfo
    pieces[1:-1] = [p.replace(" a &lt;page&gt; in text", " [[Datei:Bild.jpg|mini|links]] [[Kategorie:Ort]]")
                    for p in pieces[1:-1]]
    for cut_every in (None, 997):
        path = tmp_path / f"dewiki-{cut_every}.xml.bz2"
        offsets = write_multistream(path, pieces, cut_every)
        whole = list(iter_documents(str(path), path.name, config(path)))
        assert len(whole) == 60 and not [r for r in whole if "mini" in r["text"] or "Kategorie" in r["text"]]
        assert read_ranges(path, offsets) == whole


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_last_stream_costs_the_same_pages_and_rejects_in_any_ranges(tmp_path, damage):
    """A range holds back the last bytes it decompressed (a tag may straddle the next stream): its last page's
    "age>\\n" went out only with the next stream's output. With that stream damaged, the range lost its last page
    and reported the damage as well as the range owning the stream, so pages and reject counts depended on the
    ranges (work_unit_bytes, num_workers). The held bytes go out before the error; the owner alone reports it."""
    path = tmp_path / "dump.xml.bz2"
    offsets = write_multistream(path, dump())  # the last stream holds "</mediawiki>" alone
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: offsets[-1] + (len(data) - offsets[-1]) // 2]
    else:
        data[offsets[-1] + 12:offsets[-1] + 20] = bytes(b ^ 0xFF for b in data[offsets[-1] + 12:offsets[-1] + 20])
    path.write_bytes(bytes(data))

    def outcome(rows):
        rows = list(rows)
        return ([(r["doc_id"], r["text"]) for r in rows if not r["reject_reason"]],
                sorted(r["reject_reason"] for r in rows if r["reject_reason"]))

    whole = outcome(iter_documents(str(path), path.name, config(path)))
    assert len(whole[0]) == 120 - 7 and whole[1] == sorted(["redirect"] * 7 + [f"{damage}_bz2"])
    rng = random.Random(2)
    for cuts in ([0, offsets[-1]], [0, offsets[-2]], offsets, offsets[::4], [0] + sorted(rng.sample(offsets[1:], 6))):
        assert outcome(read_ranges(path, cuts)) == whole, cuts


@pytest.mark.parametrize("cut_every", [None, 997], ids=["between-pages", "pbzip2-like"])
def test_a_damaged_stream_in_the_middle_costs_its_own_pages_in_a_whole_read_and_in_any_ranges(tmp_path, cut_every):
    """A corrupt stream in the middle of a dump stopped a whole read there (every later page lost) and a range at
    the end of that range: the pages kept depended on the plan. Each reads on from the next stream: the loss is the
    damaged stream's pages (and one it shares with a neighbour), the same whole or in any ranges; so is a damaged
    dump header's (the whole dump: no range can parse without it), reported once."""
    path = tmp_path / "dump.xml.bz2"
    offsets = write_multistream(path, dump(), cut_every)
    data = bytearray(path.read_bytes())
    hit = offsets[len(offsets) // 2]
    data[hit + 12:hit + 20] = bytes(b ^ 0xFF for b in data[hit + 12:hit + 20])
    path.write_bytes(bytes(data))

    whole = outcome(iter_documents(str(path), path.name, config(path)))
    kept = {int(doc_id.split("#")[1]) for doc_id, _ in whole[0]}
    assert whole[1] == ["corrupt_bz2"] and max(kept) == 120 and 90 < len(kept) < 113
    rng = random.Random(3)
    for cuts in ([0, hit], offsets, offsets[::3], [0] + sorted(rng.sample(offsets[1:], 5))):
        assert outcome(read_ranges(path, cuts)) == whole, cuts
    data[12:20] = bytes(b ^ 0xFF for b in data[12:20])  # the header's stream too
    path.write_bytes(bytes(data))
    assert outcome(iter_documents(str(path), path.name, config(path))) == ([], ["corrupt_bz2"])
    assert outcome(read_ranges(path, offsets)) == ([], ["corrupt_bz2"])


def test_every_range_and_a_read_past_a_damaged_stream_keep_the_dumps_encoding(tmp_path):
    """The header a range (and a whole read going on past a damaged stream) parses from began at <mediawiki>,
    without the XML declaration: a latin-1 export's pages there were read as UTF-8, every non-ASCII one rejected
    as malformed_xml."""
    pieces = ['<?xml version="1.0" encoding="ISO-8859-1"?>\n' + ROOT + SITEINFO] + [
        page(random.Random(i), i).replace("a &lt;page&gt;", "café") for i in range(1, 31)] + ["</mediawiki>\n"]
    offsets, data = [], b""
    for chunk in [pieces[0]] + ["".join(pieces[i:i + 5]) for i in range(1, len(pieces), 5)]:
        offsets.append(len(data))
        data += bz2.compress(chunk.encode("latin-1"))
    path = tmp_path / "latin.xml.bz2"
    path.write_bytes(data)
    whole = [(r["doc_id"], r["reject_reason"]) for r in iter_documents(str(path), path.name, config(path))]
    assert not [r for r in whole if r[1] not in ("", "redirect")] and len(whole) == 30
    assert [(r["doc_id"], r["reject_reason"]) for r in read_ranges(path, offsets)] == whole
    damaged = bytearray(data)
    damaged[offsets[2] + 12:offsets[2] + 20] = bytes(b ^ 0xFF for b in damaged[offsets[2] + 12:offsets[2] + 20])
    path.write_bytes(bytes(damaged))
    rows = [(r["doc_id"], r["reject_reason"]) for r in iter_documents(str(path), path.name, config(path))]
    assert sorted(reason for _, reason in rows if reason not in ("", "redirect")) == ["corrupt_bz2"]
    assert len([r for r in rows if r[1] != "corrupt_bz2"]) >= 30 - 6


@pytest.mark.parametrize("cut_every", [None, 997], ids=["between-pages", "pbzip2-like"])
@pytest.mark.parametrize("tail", [bytes(512), b"\n", b"appended by a copy tool\n"], ids=["zeros", "newline", "junk"])
def test_data_after_the_last_stream_is_the_dumps_end_not_a_damaged_stream(tmp_path, cut_every, tail):
    """Zero padding or junk after the last stream was fed to a new decompressor, whose "Invalid data stream" was
    counted as a corrupt_bz2 reject in a whole read and in the last range; bz2.open reads such a file without
    complaint. Bytes that do not begin a stream, with no stream after them, end the dump."""
    clean = tmp_path / "clean.xml.bz2"
    offsets = write_multistream(clean, dump(), cut_every)
    path = tmp_path / "padded.xml.bz2"
    path.write_bytes(clean.read_bytes() + tail)
    assert bz2.decompress(path.read_bytes()) == "".join(dump()).encode()

    def rows(p, cuts=None):
        return [(r["doc_id"].split("#")[-1], r["reject_reason"], r["text"])
                for r in (read_ranges(p, cuts) if cuts else iter_documents(str(p), p.name, config(p)))]

    whole = rows(path)
    assert whole == rows(clean) and len(whole) == 120 and not [r for r in whole if r[1] not in ("", "redirect")]
    rng = random.Random(4)
    for cuts in ([0, offsets[-1]], [0, offsets[-2]], offsets, offsets[::3], [0] + sorted(rng.sample(offsets[1:], 5))):
        assert rows(path, cuts) == whole, cuts


@pytest.mark.parametrize("damage, reason", [
    ("truncated", "truncated_bz2"),  # the file ends inside the last stream
    ("truncated+zeros", "corrupt_bz2"),  # the last stream cut short, zeros after it: its header says it is a stream
    ("corrupt+zeros", "corrupt_bz2"),  # bad bytes inside the last stream, zero padding after it
    ("zeros-in-the-middle", "corrupt_bz2"),  # bad data between two streams: a stream follows it
    ("bad-header-in-the-middle", "corrupt_bz2"),  # a stream whose header is damaged, other streams after it
])
def test_damaged_streams_next_to_trailing_data_are_still_rejects(tmp_path, damage, reason):
    """Trailing data ends the dump only where nothing after it is a stream and it does not begin as one: a stream
    damaged past its header, or bad data with streams after it, is still counted once, the same in any ranges."""
    path = tmp_path / "dump.xml.bz2"
    offsets = write_multistream(path, dump())
    data = bytearray(path.read_bytes())
    last, mid = offsets[-1], offsets[len(offsets) // 2]
    if damage.startswith("truncated"):
        data = data[: last + (len(data) - last) // 2]
    elif damage == "corrupt+zeros":
        data[last + 12:last + 20] = bytes(b ^ 0xFF for b in data[last + 12:last + 20])
    elif damage == "zeros-in-the-middle":
        data[mid:mid] = bytes(512)
    else:
        data[mid:mid + 3] = b"XYZ"
    if damage.endswith("+zeros"):
        data += bytes(512)
    path.write_bytes(bytes(data))

    whole = outcome(iter_documents(str(path), path.name, config(path)))
    assert whole[1] == [reason] and len(whole[0]) >= 120 - 7 - 12
    offsets = stream_offsets(open(path, "rb"))  # the inserted zeros moved the later streams; a bad header hid one
    for cuts in ([0, offsets[-1]], offsets, offsets[::3]):
        assert outcome(read_ranges(path, cuts)) == whole, cuts
