"""What jobs/predict.py records of its input and settings (the manifest, an output folder's basis, each shard's
_rows.json and the rows' `file` and default `id`): an input URL's credentials were written there in clear, and a
threshold a non-multi-label model ignores was part of the basis (a rerun with it was refused)."""

import json
import os
import shutil

import fsspec
import pyarrow as pa
import pytest

from jobs import predict
from jobs.config.predict import PredictConfig
from jobs.inference import inputs, shards
from jobs.inference.model_ref import ModelRef
from jobs.inference.stages import read_rows
from pipelines.tasks.files import Columns

URL = "http://alice:s3cret@host/d.txt?X-Amz-Date=20260101T000000Z&X-Amz-Signature=abc&X-Amz-Credential=AKIAXYZ"
SECRETS = ("alice", "s3cret", "abc", "AKIAXYZ")


def test_an_input_urls_credentials_are_recorded_nowhere(tmp_path, monkeypatch):
    """manifest.json (and its MLflow artifact copy), the basis, _rows.json, the rows' `file` and their default ids
    held the URL's password and presigned signature; only the MLflow `input` param was redacted. The reading still
    uses the URL itself; a URL signed again since (another date and signature) is the same input."""
    monkeypatch.setattr(inputs, "file_versions", lambda files: ["14:etag"])  # fs.info over the network
    out, files = tmp_path / "out", [(URL, "text")]
    cfg = PredictConfig(model="m", input=URL, output=str(tmp_path / "out"))
    model = ModelRef("m", tmp_path, "classification", digest="d")
    basis = predict._basis(cfg, model, files)
    manifest = predict._open_manifest(out, cfg, model, files, basis)
    recorded = "http://***@host/d.txt?X-Amz-Date=20260101T000000Z&X-Amz-Signature=***&X-Amz-Credential=***"
    assert manifest["input"] == manifest["files"][0]["path"] == recorded  # the basis: without the query
    assert basis["input"] == basis["files"][0] == "http://***@host/d.txt"
    assert not [s for s in SECRETS if s in json.dumps(manifest)]
    fresh = URL.replace("abc", "def").replace("20260101T000000Z", "20260102T093000Z")  # presigned again a day later
    assert predict._basis(PredictConfig(model="m", input=fresh, output=str(out)), model, [(fresh, "text")]) == basis
    # a folder whose basis held the query (or, older, the credentials too) resumes with the URL signed again
    for older in (recorded, URL):
        assert predict._refuse_other(out, {"model": {}, "basis": {**basis, "input": older, "files": [older]}},
                                     basis) == ""

    # a read task's record and rows, from a URL fsspec reads here (memory://), as _predict ships it (its name)
    url = "memory://alice:s3cret@host/d.txt?X-Amz-Signature=abc&X-Amz-Credential=AKIAXYZ"
    with fsspec.open(url, "wb") as f:
        f.write(b"first\n\nsecond\n")
    with fsspec.open(empty := url.replace("d.txt", "e.txt"), "wb"):
        pass
    name = inputs.basis_paths([(url, "text")])[0]
    rows = list(read_rows({"index": 0, "path": url, "fmt": "text", "name": name}, "classification",
                          Columns(tokens=""), 10, set(), out))
    assert sorted((json.loads(r["row"])["id"], r["file"]) for r in rows) == [("d.txt:0", name), ("d.txt:2", name)]
    assert list(read_rows({"index": 1, "path": empty, "fmt": "text"}, "classification", Columns(tokens=""), 10,
                          set(), out)) == []  # an empty file: its record alone, named by its path
    for shard in ("00000-000000", "00001-000000"):
        written = (out / shards.SHARDS / shard / shards.ROWS).read_text()
        assert "memory://***@host/" in written and not [s for s in SECRETS if s in written], written
    assert "d.txt:0" in json.dumps(rows) and not [s for s in SECRETS if s in json.dumps(rows)]


@pytest.mark.parametrize("kind", ["classification", "multi-label"])
def test_a_threshold_only_multi_label_uses_is_no_part_of_another_kinds_basis(tmp_path, capsys, kind):
    """threshold= for a classifier is ignored by the replicas, yet the basis stored it: a rerun with it over the
    folder was refused ("differs in threshold"). Now the job says it is ignored, and the folder resumes; a multi-label
    model's folder at another threshold is still refused."""
    from bert_core.config import ConfigError

    data, out = tmp_path / "in.txt", tmp_path / "out"
    data.write_text("a\nb\n")
    files, model = [(str(data), "text")], ModelRef("m", tmp_path, kind, digest="d")
    cfg, given = (PredictConfig(model="m", input=str(data), output=str(out), threshold=t) for t in (0.0, 0.7))
    shards.write_json(out / shards.MANIFEST, {**predict._open_manifest(out, cfg, model, files,
                                                                       predict._basis(cfg, model, files)),
                                              "status": "complete"})
    shards.write_rows(out, "00000-000000", {"file": str(data), "first": 0, "rows": 1})
    shards.write_part(out, "00000-000000", pa.table({"id": ["in.txt:0"], "position": [0]}))
    if kind == "multi-label":
        with pytest.raises(ConfigError, match=r"another model or input \(differs in threshold\)"):
            predict._open_manifest(out, given, model, files, predict._basis(given, model, files))
        return
    assert predict._open_manifest(out, given, model, files, predict._basis(given, model, files))["status"] == "running"
    assert predict._plan(given, model, out) == files
    assert capsys.readouterr().out == "[predict] threshold=0.7 is ignored: a classification model has none\n"


def _complete(out, cfg, model, files, basis):
    """`out` as an earlier run left it: its manifest with `basis`, one complete shard with a row."""
    shards.write_json(out / shards.MANIFEST, {**predict._open_manifest(out, cfg, model, files, basis),
                                              "basis": basis, "status": "complete"})
    shards.write_rows(out, "00000-000000", {"file": files[0][0], "first": 0, "rows": 1})
    shards.write_part(out, "00000-000000", pa.table({"id": ["in:0"], "position": [0]}))


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_a_tsv_folder_whose_ids_numbered_lines_is_refused_another_resumes(tmp_path, fmt):
    """A TSV's default ids number its records now, not its lines: a folder begun before kept its complete shards and
    the new ones numbered differently (ids repeating after a quoted multi-line cell). Its basis lacks `ids`: refused,
    naming it, as `positions` was; a CSV folder's ids are as they were, and it resumes."""
    from bert_core.config import ConfigError

    data, out = tmp_path / f"in.{fmt}", tmp_path / "out"
    data.write_text("text\na\nb\n")
    files, model = [(str(data), fmt)], ModelRef("m", tmp_path, "classification", digest="d")
    cfg = PredictConfig(model="m", input=str(data), output=str(out))
    basis = predict._basis(cfg, model, files)
    assert ("ids" in basis) == (fmt == "tsv")
    _complete(out, cfg, model, files, {k: v for k, v in basis.items() if k != "ids"})
    if fmt == "csv":
        assert predict._open_manifest(out, cfg, model, files, basis)["status"] == "running"
        return
    with pytest.raises(ConfigError, match=r"differs in ids \(an earlier version of jobs/predict.py read a TSV's rows"):
        predict._open_manifest(out, cfg, model, files, basis)
    shutil.rmtree(out)
    _complete(out, cfg, model, files, basis)  # a folder begun after: resumed
    assert predict._open_manifest(out, cfg, model, files, basis)["status"] == "running"


def test_a_tsv_folder_begun_under_the_earlier_tsv_reader_is_refused_or_started_over(tmp_path, capsys):
    """The TSV reader of 2026-12-02 reads a quote that runs on over whole rows line by line: the rows after it have
    other ids and positions. A folder begun under the reader before (ids "records") kept its complete shards of the
    old rows beside new shards of the new ones, rows predicted twice or never: refused, naming the reading; where no
    shard completed, started over."""
    from bert_core.config import ConfigError

    data, out = tmp_path / "in.tsv", tmp_path / "out"
    data.write_text("label\ttext\n1\t\"Loved it\n0\tThe box says 12\"\n1\tgreat\n")
    files, model = [(str(data), "tsv")], ModelRef("m", tmp_path, "classification", digest="d")
    cfg = PredictConfig(model="m", input=str(data), output=str(out))
    basis = predict._basis(cfg, model, files)
    earlier = {**basis, "ids": "records"}  # what the earlier version's basis holds
    _complete(out, cfg, model, files, earlier)
    with pytest.raises(ConfigError, match=r"differs in ids \(an earlier version of jobs/predict.py read a TSV's rows "
                                          r"otherwise\)"):
        predict._open_manifest(out, cfg, model, files, basis)
    shutil.rmtree(out / shards.SHARDS)  # the earlier run completed no shard: nothing to keep
    assert predict._open_manifest(out, cfg, model, files, basis)["basis"] == basis
    assert "with another ids (an earlier version" in capsys.readouterr().out


@pytest.mark.parametrize("given", [0.0, 0.7])
def test_an_older_classifiers_folder_that_stored_its_threshold_resumes(tmp_path, given):
    """A classifier's folder begun before stored the threshold its run was given (0.7); the basis now stores 0.0 for
    it: a rerun with threshold=0.7 was refused ("differs in threshold"). A multi-label model's is still compared."""
    from bert_core.config import ConfigError

    data = tmp_path / "in.txt"
    data.write_text("a\nb\n")
    for kind in ("classification", "multi-label"):
        out = tmp_path / kind
        files, model = [(str(data), "text")], ModelRef("m", tmp_path, kind, digest="d")
        cfg = PredictConfig(model="m", input=str(data), output=str(out), threshold=given)
        _complete(out, cfg, model, files, {**predict._basis(cfg, model, files), "threshold": 0.7})
        if kind == "classification" or given == 0.7:
            assert predict._open_manifest(out, cfg, model, files, predict._basis(cfg, model, files))["status"] \
                == "running"
        else:  # its default, 0.5, in effect: another threshold
            with pytest.raises(ConfigError, match=r"differs in threshold"):
                predict._open_manifest(out, cfg, model, files, predict._basis(cfg, model, files))


def test_a_rerun_reads_past_a_kept_shard_leaving_its_record_as_it_was(tmp_path):
    """A shard complete before the rerun (jobs/predict.py's `skip`) yields no row for the replicas, whose parts would
    be written over the kept ones, and its _rows.json is not written again; the next shard's positions still count
    its rows. Every other test reads with nothing to skip."""
    (tmp_path / "in.csv").write_text("text\n" + "\n".join(f"row {i}" for i in range(5)) + "\n")
    item, out = {"index": 0, "path": str(tmp_path / "in.csv"), "fmt": "csv"}, tmp_path / "out"
    list(read_rows(item, "classification", Columns(tokens=""), 2, set(), out))  # the earlier run's read
    kept = out / shards.SHARDS / "00000-000001" / shards.ROWS
    os.utime(kept, ns=(10**18, 10**18))  # an earlier run's: a rewrite now would show
    before = kept.read_bytes()
    rows = list(read_rows(item, "classification", Columns(tokens=""), 2, {"00000-000001"}, out))
    assert [(r["shard"], r["position"]) for r in rows] == [("00000-000000", 0), ("00000-000000", 1),
                                                           ("00000-000002", 4)]
    assert kept.read_bytes() == before and kept.stat().st_mtime_ns == 10**18
