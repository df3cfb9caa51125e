"""The e2e tests' job config: configs/pretrain/quickstart.yaml shrunk to seconds, everything under one tmp dir."""

from __future__ import annotations

from pathlib import Path

from jobs.config.pretrain import PretrainConfig
from jobs.config.io import load_config

QUICKSTART = Path(__file__).resolve().parents[2] / "configs/pretrain/quickstart.yaml"


def quick_config(tmp: Path, name: str, *overrides: str, corpus_mb: float = 0.5, vocab: int = 1000,
                 data_dir: Path | None = None) -> PretrainConfig:
    """Run `name` on a harvested corpus of `corpus_mb` MB and a `vocab`-token tokenizer; output, prepared data
    and the SQLite MLflow store live under `tmp` (runs sharing `tmp` share the corpus and prepared data).
    With `data_dir` (the `shared_data` fixture), the corpus and prepared data live there instead, the corpus
    in a folder named by its size: runs of any module with the same `data_dir` share them."""
    return load_config(PretrainConfig, QUICKSTART, quick_overrides(tmp, name, *overrides, corpus_mb=corpus_mb,
                                                                   vocab=vocab, data_dir=data_dir))


def quick_overrides(tmp: Path, name: str, *overrides: str, corpus_mb: float = 0.5, vocab: int = 1000,
                    data_dir: Path | None = None, tracking: bool = True) -> list[str]:
    """quick_config's overrides of configs/pretrain/quickstart.yaml, for a command line (README.md's commands,
    tests/readme.py); without `tracking`, none of the MLflow store (the command names its own)."""
    corpus = f"{data_dir}/corpus-{corpus_mb:g}mb" if data_dir else f"{tmp}/corpus"
    store = [f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db", f"tracking.artifact_location={tmp}/art"]
    return [f"run_name={name}", f"output_dir={tmp}/runs", f"data.output_root={data_dir or tmp}/prepared",
            f"corpus.harvest_dir={corpus}", f"corpus.harvest_max_mb={corpus_mb}", f"data.tokenizer.vocab_size={vocab}",
            *(store if tracking else []), *overrides]
