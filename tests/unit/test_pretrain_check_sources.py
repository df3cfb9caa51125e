"""`--check` (PretrainConfig.check_environment) refuses a local corpus holding a file prepare() would refuse for its
codec (.zst: no decoder here), naming the file, before Ray; and still imports no framework."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.config.io import cli

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "configs/pretrain/quickstart.yaml")
FRAMEWORKS = ("torch", "transformers", "ray", "deepspeed", "mlflow", "sklearn", "scipy", "seqeval", "pandas")


def corpus_argv(tmp_path: Path, zst: bool) -> list[str]:
    corpus = tmp_path / "pile"
    corpus.mkdir(exist_ok=True)
    (corpus / "00.jsonl").write_text('{"text": "A document."}\n')
    if zst:
        (corpus / "01.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd" + bytes(100))
    return ["--config", QUICKSTART, "--check", "corpus.harvest_installed_docs=false", f"output_dir={tmp_path}/runs",
            f"data.output_root={tmp_path}/prepared", f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db",
            f"tracking.artifact_location={tmp_path}/art", f"data.sources=[{corpus}]"]


def test_check_refuses_a_zst_corpus_before_ray_naming_the_file(tmp_path, capsys, monkeypatch):
    """`--check` said "valid; nothing was run" for a folder of The Pile's .zst files, which prepare() refuses only
    after Ray started and the GPU nodes came up."""
    from jobs import pretrain

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    argv = corpus_argv(tmp_path, zst=True)
    with pytest.raises(SystemExit) as ended:
        cli(lambda: pretrain.main(argv))
    err = capsys.readouterr().err
    assert ended.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: data.sources[0]: {tmp_path}/pile/01.jsonl.zst: zstd-compressed (.zst) files "
                          "cannot be read here") and "decompress them first" in err
    (tmp_path / "pile" / "01.jsonl.zst").unlink()
    cli(lambda: pretrain.main(argv))  # the rest of the folder: valid
    assert "valid; nothing was run" in capsys.readouterr().out


def test_the_codec_refusal_is_the_readers_own(tmp_path):
    """One refusal, Ray-free, that prepare's reader (pipelines.sources) and the check both call."""
    from pipelines.source_files import SourceError, refuse_unread_codec

    for name in ("pile.jsonl.zst", "PILE.JSONL.ZSTD"):
        with pytest.raises(SourceError, match=rf"^{name}: zstd-compressed \(\.zstd?\) files cannot be read here"):
            refuse_unread_codec(name)
    for name in ("wiki.xml.bz2", "a.jsonl.gz", "b.txt", "zst"):
        refuse_unread_codec(name)


def test_checking_a_local_corpus_imports_no_framework(tmp_path):
    """The refusal lives in pipelines/source_files.py: pipelines/sources.py imports Ray, which a check must not."""
    out = subprocess.run([sys.executable, "-X", "importtime", "jobs/pretrain.py", *corpus_argv(tmp_path, zst=False)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "valid; nothing was run" in out.stdout, out.stdout + out.stderr[-3000:]
    imported = set(re.findall(r"^import time:.*\| *([\w.]+)$", out.stderr, re.M))
    assert not imported & set(FRAMEWORKS), sorted(imported & set(FRAMEWORKS))
