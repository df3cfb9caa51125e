"""`jobs/predict.py --check` makes the checks a run makes before Ray: it said "valid" for a model folder and an input
that did not exist (it validated the config's fields alone), and called a config given on the command line "the
defaults"."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bert_core.config import ConfigError
from jobs import predict

ROOT = Path(__file__).resolve().parents[2]


def classifier(folder: Path) -> Path:
    """A classifier's folder as the checks read it: its config.json, the name of its weights (never loaded) and a
    WordPiece vocabulary."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nfine\n")
    return folder


def check(tmp_path, model, given: str, output=None, *overrides: str) -> None:
    predict.main([str(model), "--input", given, "--output", str(output or tmp_path / "out"), "--verbose", "--check",
                  f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db", *overrides])


def test_check_refuses_what_a_run_refuses_before_ray(tmp_path, capsys):
    """The model folder (there, a config transformers reads, weights), the input files (listed, their columns read as
    the model's kind reads them) and the output folder (new or this job's) are refused by --check as by a run."""
    model = classifier(tmp_path / "model")
    (tmp_path / "in.csv").write_text("text\nfine\n")
    (tmp_path / "body.csv").write_text("body\nfine\n")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("someone else's")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    (tmp_path / "bare" / "vocab.txt").write_text("[UNK]\n")
    for model_, given, output, error in (
            (tmp_path / "nope", tmp_path / "in.csv", None, r"^model '.*nope' does not resolve: no such folder"),
            (tmp_path / "bare", tmp_path / "in.csv", None, r"^model '.*bare': no weights transformers loads"),
            (model, tmp_path / "missing.csv", None, r"^input: .*missing\.csv"),
            (model, tmp_path / "body.csv", None, r"^input: .*body\.csv: expected columns \['text'\], found \['body'\]"),
            (model, tmp_path / "in.csv", tmp_path / "taken", r"^output .*taken is not empty and holds no manifest"),
            ("models:/m@champion", tmp_path / "missing.csv", None, r"^input: .*missing\.csv")):
        with pytest.raises(ConfigError, match=error):
            check(tmp_path, model_, str(given), output)
    assert capsys.readouterr().out == ""
    check(tmp_path, model, str(tmp_path / "in.csv"), None, "columns.text=text")  # and body.csv read as its column is:
    check(tmp_path, model, str(tmp_path / "body.csv"), None, "columns.text=body")
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"[check] predict: model {model} (classification), input {tmp_path}/{name} (1 csv), output "
                     f"{tmp_path}/out + 2 overrides: valid; nothing was run" for name in ("in.csv", "body.csv")]
    assert not (tmp_path / "out").exists()


def test_check_refuses_a_model_folder_without_a_wordpiece_tokenizer_as_the_run_does(tmp_path, capsys):
    """A folder without a tokenizer, or with a byte-level BPE tokenizer.json (ModernBERT's, RoBERTa's), was "valid"
    to --check, and the run refused it at once (jobs/finetune.resolve_init: every word would be read as [UNK])."""
    (tmp_path / "in.csv").write_text("text\nfine\n")
    model = classifier(tmp_path / "model")
    (model / "vocab.txt").unlink()
    with pytest.raises(ConfigError, match=r"^model '.*model' does not resolve: no tokenizer \(tokenizer.json or "
                                          r"vocab.txt\) in .*model$"):
        check(tmp_path, model, str(tmp_path / "in.csv"))
    (model / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}}))
    with pytest.raises(ConfigError, match=r"tokenizer.json's model is BPE; bert-foundry fine-tunes and predicts with "
                                          r"WordPiece tokenizers only"):
        check(tmp_path, model, str(tmp_path / "in.csv"))
    (model / "tokenizer.json").write_text('{"model": ')
    with pytest.raises(ConfigError, match=r"^model '.*model': its tokenizer.json is not JSON"):
        check(tmp_path, model, str(tmp_path / "in.csv"))
    (model / "tokenizer.json").write_text(json.dumps({"model": {"type": "WordPiece"}}))
    check(tmp_path, model, str(tmp_path / "in.csv"))
    assert capsys.readouterr().out.endswith("valid; nothing was run\n")


def test_a_registry_model_is_left_to_the_run_and_the_line_says_so(tmp_path, capsys):
    """A models:/ URI is MLflow's to resolve, which a check does not import: the line says the run resolves it (and
    reads the columns its kind needs then), not that the model was checked."""
    (tmp_path / "in.csv").write_text("body\nfine\n")
    check(tmp_path, "models:/m@champion", str(tmp_path / "in.csv"))
    assert capsys.readouterr().out == (f"[check] predict: model models:/m@champion (resolved when the job runs; its "
                                       f"columns checked then), input {tmp_path}/in.csv (1 csv), output {tmp_path}/out"
                                       " + 1 override: valid; nothing was run\n")


def test_the_check_imports_no_framework(tmp_path):
    """The check reads the model's config as JSON and the inputs with pyarrow: no torch, transformers, Ray or MLflow
    (each costs a user's wait for a typo's one line)."""
    model = classifier(tmp_path / "model")
    (tmp_path / "in.csv").write_text("text\nfine\n")
    out = subprocess.run([sys.executable, "-X", "importtime", "jobs/predict.py", str(model), "--input",
                          str(tmp_path / "in.csv"), "--output", str(tmp_path / "out"), "--check",
                          f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert re.fullmatch(r"\[check\] predict: model .*model \(classification\), input .* \(1 csv\), output .*: valid; "
                        r"nothing was run\n", out.stdout), out.stdout
    imported = set(re.findall(r"^import time:.*\| *([\w.]+)$", out.stderr, re.M))
    assert not imported & {"torch", "transformers", "ray", "mlflow", "pandas"}, sorted(imported)


def test_check_refuses_an_output_folder_of_another_model_or_input_as_the_run_does(tmp_path, capsys):
    """An earlier run's folder holding predictions: --check said valid whatever the input, settings or model, and
    the run refused it at once ("another model or input"). Compared as the run compares them: every key of the basis
    for a model folder (its files' digest too), those without the model for a models:/ URI the check leaves to the
    run; the same folder and input resume (valid), and the check imports no framework for it either."""
    import pyarrow as pa

    from jobs.inference import shards
    from jobs.inference.model_ref import resolve_model

    model, data, out = classifier(tmp_path / "model"), tmp_path / "in.csv", tmp_path / "out"
    data.write_text("text\nfine\n")
    _, cfg = predict.parse([str(model), "--input", str(data), "--output", str(out),
                            f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db"])
    ref = resolve_model(str(model), "", tmp_path / "download")  # what the run resolves: a folder's digest
    files = predict._plan(cfg, ref, out)
    shards.write_json(out / shards.MANIFEST, {**predict._open_manifest(out, cfg, ref, files,
                                                                       predict._basis(cfg, ref, files)),
                                              "status": "complete"})
    shards.write_rows(out, "00000-000000", {"file": str(data), "rows": 1})
    shards.write_part(out, "00000-000000", pa.table({"id": ["in.csv:0"], "position": [0]}))
    check(tmp_path, model, str(data), out)  # the same model and input: the run resumes
    check(tmp_path, "models:/m@champion", str(data), out)  # the model compared when the run resolves it
    # a threshold: the earlier run's model (a classifier) has none, the run ignores it (it refused a rerun with one)
    check(tmp_path, "models:/m@champion", str(data), out, "threshold=0.7")
    check(tmp_path, model, str(data), out, "threshold=0.7")
    for model_, overrides, differs in ((model, ["shard_rows=5"], r"shard_rows"),
                                       (model, ["format=csv"], r"format"),
                                       ("models:/m@champion", ["precision=bf16"], r"precision")):
        with pytest.raises(ConfigError, match=rf"^output .*out holds predictions of another model or input \(differs "
                                              rf"in {differs}\)"):
            check(tmp_path, model_, str(data), out, *overrides)
    (model / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(ConfigError, match=r"another model or input \(differs in model_sha256\)"):
        check(tmp_path, model, str(data), out)
    check(tmp_path, "models:/m@champion", str(data), out)
    data.write_text("text\nfine!\n")
    with pytest.raises(ConfigError, match=rf"differs in the input files: {data} changed \(size or modification"):
        check(tmp_path, "models:/m@champion", str(data), out)
    printed = capsys.readouterr().out
    assert printed.count("valid; nothing was run") == 5
    assert printed.count("[predict] threshold=0.7 is ignored: a classification model has none") == 1  # the folder
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "shards"]  # the check took no lease
    data.write_text("text\nfine\n")  # comparing with an earlier run's basis imports no framework either
    out_ = subprocess.run([sys.executable, "-X", "importtime", "jobs/predict.py", "models:/m@champion", "--input",
                           str(data), "--output", str(out), "--check", "precision=bf16",
                           f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "differs in" in out_.stdout + out_.stderr, out_.stdout + out_.stderr[-3000:]
    imported = set(re.findall(r"^import time:.*\| *([\w.]+)$", out_.stderr, re.M))
    assert not imported & {"torch", "transformers", "ray", "mlflow", "pandas"}, sorted(imported)
