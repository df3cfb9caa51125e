"""What tests/unit/test_promote.py's tests share besides its fixtures: an SST-2-format task of tiny sentences, a
registered version of a model folder, promote.run as the command line runs it, a registry of toy versions, and the
gate's decision on correctness arrays of ROWS rows."""

import json
import random
from dataclasses import asdict
from pathlib import Path

import numpy as np

from jobs import promote
from jobs.config.finetune import TaskConfig
from jobs.promote import PromoteConfig
from jobs.registry import scorer, tracking
from pipelines.tasks.glue import GLUE_TASKS

ROOT = Path(__file__).resolve().parents[2]
NAME = "sst-toy"
GOOD, BAD = ("good", "great", "fine", "lovely", "superb"), ("bad", "awful", "poor", "dreadful", "grim")
FILLER = ("the", "film", "was", "a", "story", "plot", "actors", "very", "quite", "and", "of", "it", "music")


def sentences(n: int, seed: int) -> list[tuple[str, int]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        label = rnd.randint(0, 1)
        words = [rnd.choice(FILLER) for _ in range(rnd.randint(4, 10))]
        words.insert(rnd.randint(0, len(words)), rnd.choice(GOOD if label else BAD))
        out.append((" ".join(words), label))
    return out


def register(uri: str, task: TaskConfig, model_dir, **tags) -> str:
    run_id = tracking.start_run(uri, "toy-finetune", str(model_dir.parent / "art"), "toy", {"task": asdict(task)})
    info = tracking.finish_run(uri, run_id, {}, str(model_dir), NAME, "candidate", task="text-classification",
                               version_tags={"task_config": json.dumps(asdict(task)), **tags},
                               input_example=["the film was good", "the plot was awful"])
    return str(info["version"])


def judge(uri: str, art, **kw) -> promote.PromoteResult:
    return promote.run(PromoteConfig(model=NAME, bootstrap_samples=300, **kw,
                                     tracking=promote.TrackingConfig(tracking_uri=uri, experiment="toy-promotion",
                                                                     artifact_location=str(art))))


def toy_registry(tmp_path, empty_store, versions: int):
    """A registry of `versions` versions of NAME (no weights: promote._judge is replaced), each tagged with an SST-2
    task over a few rows on disk."""
    import shutil

    from mlflow.tracking import MlflowClient

    shutil.copy(empty_store, tmp_path / "mlflow.db")
    data = tmp_path / "SST-2"
    data.mkdir()
    for split, rows in (("train", sentences(20, 0)), ("dev", sentences(20, 1))):
        (data / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    task = TaskConfig(name="sst2", data_dir=str(data), max_seq_len=32, labels=list(GLUE_TASKS["sst2"].labels))
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    client.create_registered_model(NAME)
    run_id = client.create_run(client.create_experiment("toy")).info.run_id
    for _ in range(versions):
        client.create_model_version(NAME, str(tmp_path), run_id, tags={"task_config": json.dumps(asdict(task))})
    return uri, client


def champion_moved_while_recording(monkeypatch, client, to: str) -> None:
    """Another promotion moves @champion to v`to` right after this one records its decision (promote._record)."""
    from jobs.registry.versions import move_alias

    recorded = promote._record

    def record_meanwhile(cfg, client_, result, **kwargs):
        recorded(cfg, client_, result, **kwargs)
        move_alias(client, NAME, "champion", to, "promoted: by the other promotion")

    monkeypatch.setattr(promote, "_record", record_meanwhile)


def promoting(meanwhile):
    """A stand-in for promote._judge: the candidate wins, after `meanwhile()` (another promotion) ran."""
    from types import SimpleNamespace

    def judged(cfg, uri, tasks, split, rows, ours, theirs, has_champion):
        meanwhile()
        return "promoted", "clearly better", SimpleNamespace(metric="dev/score", n=len(rows)), {"candidate": 0.9}
    return judged


ROWS = 400


def accuracy_scores(correct: np.ndarray) -> scorer.Scores:
    return scorer.Scores("dev/accuracy", float(correct.mean()), len(correct), lambda idx: float(correct[idx].mean()))


def pair(extra_right: int, extra_wrong: int = 0, base: int = 300, seed: int = 0):
    """(candidate, champion) correctness on ROWS rows: the champion right on `base` of them; the candidate right
    where the champion is, plus `extra_right` rows the champion misses, minus `extra_wrong` it gets right."""
    rng = np.random.default_rng(seed)
    champion = np.zeros(ROWS, dtype=bool)
    champion[rng.choice(ROWS, base, replace=False)] = True
    candidate = champion.copy()
    candidate[rng.choice(np.flatnonzero(~champion), extra_right, replace=False)] = True
    candidate[rng.choice(np.flatnonzero(champion), extra_wrong, replace=False)] = False
    return candidate, champion


def gate(candidate: np.ndarray, champion: np.ndarray, min_delta: float = 0.0, confidence: float = 0.95):
    cfg = PromoteConfig(model=NAME, min_delta=min_delta, confidence=confidence, bootstrap_samples=2000)
    mine, best = accuracy_scores(candidate), accuracy_scores(champion)
    e = {"candidate": mine.value, "champion": best.value,
         **scorer.paired_bootstrap(mine, best, cfg.bootstrap_samples, cfg.confidence, seed=0)}
    decision, reason = promote.decide(cfg, e, mine.metric, "2", "1", mine.n)
    return decision, reason, e


def unpaired_lower_bound(candidate: np.ndarray, champion: np.ndarray, confidence: float = 0.95) -> float:
    """The same bound from resampling each model's rows on their own: what a gate that ignores the pairing sees."""
    rng = np.random.default_rng(0)
    deltas = [candidate[rng.integers(0, ROWS, ROWS)].mean() - champion[rng.integers(0, ROWS, ROWS)].mean()
              for _ in range(2000)]
    return float(np.quantile(deltas, 1 - confidence))
