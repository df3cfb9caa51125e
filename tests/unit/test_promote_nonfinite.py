"""Promotion refuses a model whose outputs on the evaluation rows are not finite (diverged, or overflowed in half
precision): argmax read a NaN row as class 0, so a first candidate with no finite output was promoted on the class-0
share of the gold labels, and a correlation over a NaN prediction is NaN, so a regression gate blamed "constant gold
scores" and asked for more rows. The models are tiny real BERTs (MiniLM's vocabulary) with some weights set to NaN:
the classifier head (every row), or one word's embedding (only the rows holding that word); the registry is a real
SQLite MLflow store."""

import random
import shutil
from pathlib import Path

import pytest
import torch
import transformers

from jobs import promote
from jobs.config.finetune import TaskConfig
from jobs.registry import scorer
from jobs.registry.versions import move_alias
from pipelines.tasks import squad_eval_features
from tests.unit.promote_kit import NAME, judge, register, sentences
from tests.unit.scorer_kit import MINILM, save, tiny

BROKEN = "paris"  # the word whose embedding is NaN: every output of a row (a window) holding it is NaN
IOB = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def nan_on(model, word: str = BROKEN):
    """`model` with `word`'s embedding NaN: attention spreads it over its row, and to no other row of the batch."""
    tok = transformers.BertTokenizerFast.from_pretrained(MINILM)
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight[tok.convert_tokens_to_ids(word)] = float("nan")
    return model


def texts(n: int, broken: list[int], seed: int = 0) -> list[str]:
    """`n` short sentences of finite words; `BROKEN` inserted into those at the indices `broken`."""
    out = [s for s, _ in sentences(n, seed)]
    return [f"{s} {BROKEN}" if i in broken else s for i, s in enumerate(out)]


BROKEN_ROWS = [1, 5, 6, 12]  # 17 rows, batches of 5: broken rows share batches with finite ones


def rows_of(kind: str) -> tuple[TaskConfig, list[dict]]:
    """A task of `kind` and its evaluation rows, as load_rows gives them, the BROKEN_ROWS holding BROKEN."""
    a, b = texts(17, BROKEN_ROWS), texts(17, [], seed=1)
    if kind == "question-answering":
        task = TaskConfig(name="squad", max_seq_len=64, doc_stride=16, max_query_length=16, n_best=5)
        return task, [{"id": f"q{i}", "title": "t", "question": "what was it", "context": " ".join([t] * 6),
                       "answers": {"text": [t.split()[0]], "answer_start": [0]}, "is_impossible": False}
                      for i, t in enumerate(a)]
    if kind == "token-classification":
        task = TaskConfig(name="conll", labels=IOB, max_seq_len=64, iob_scheme="IOB2")
        return task, [{"id": i, "document": 0, "tokens": t.split(), "ner_tags": ["O"] * len(t.split()),
                       "row_index": i} for i, t in enumerate(a)]
    rnd = random.Random(0)
    if kind == "multi-label":
        task = TaskConfig(name="files", kind="multi-label", labels=["x", "y", "z"])
        return task, [{"text_a": t, "text_b": None, "label": [i % 3], "row_index": i} for i, t in enumerate(a)]
    if kind == "regression":
        task = TaskConfig(name="stsb", max_seq_len=64)
        return task, [{"text_a": x, "text_b": y, "label": rnd.uniform(0, 5), "row_index": i}
                      for i, (x, y) in enumerate(zip(a, b))]
    task = TaskConfig(name="sst2", max_seq_len=64)
    return task, [{"idx": i, "text_a": t, "text_b": None, "label": i % 2, "row_index": i} for i, t in enumerate(a)]


HEADS = {"classification": ("BertForSequenceClassification", {"num_labels": 2}),
         "regression": ("BertForSequenceClassification", {"num_labels": 1}),
         "multi-label": ("BertForSequenceClassification", {"num_labels": 3,
                                                           "problem_type": "multi_label_classification"}),
         "token-classification": ("BertForTokenClassification", {"num_labels": len(IOB)}),
         "question-answering": ("BertForQuestionAnswering", {})}


@pytest.mark.parametrize("kind", list(HEADS))
def test_the_rows_whose_outputs_are_not_finite_are_counted_for_every_kind(kind, tmp_path):
    """Exactly the rows holding the broken word: padding (which no metric reads) and the batch's other rows do not
    count; for SQuAD a question counts once however many of its windows are broken."""
    head, config = HEADS[kind]
    task, rows = rows_of(kind)
    if kind == "question-answering":  # several windows per question: the count is of questions
        feats = squad_eval_features(rows, transformers.BertTokenizerFast.from_pretrained(MINILM), 64, 16, 16)
        assert len(feats["example_id"]) > len(rows)
    fine = scorer.score(save(tiny(head, **config), tmp_path / "fine"), task, "dev", rows, batch_size=5)
    broken = scorer.score(save(nan_on(tiny(head, **config)), tmp_path / "broken"), task, "dev", rows, batch_size=5)
    assert (fine.nonfinite, broken.nonfinite, broken.n) == (0, len(BROKEN_ROWS), 17)
    scorer.refuse_nonfinite(fine, "v1 (candidate)", "it is not promoted")  # finite: nothing refused
    with pytest.raises(ValueError, match=r"^v2 \(champion\): its outputs are not finite \(NaN or inf\) on 4 of the "
                                         r"17 evaluation rows.*: roll it back$"):
        scorer.refuse_nonfinite(broken, "v2 (champion)", "roll it back")


@pytest.fixture
def store(tmp_path, empty_store):
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path}/mlflow.db"


def glue_folder(root, task: str, dev: list[str], score: bool):
    """A GLUE task folder (SST-2 or STS-B format): train rows enough to carve a select split, `dev` the evaluation
    rows."""
    rnd = random.Random(0)
    folder = root / ("STS-B" if score else "SST-2")
    folder.mkdir()
    for split, rows in (("train", [s for s, _ in sentences(100, 5)]), ("dev", dev)):
        if score:
            lines = "sentence1\tsentence2\tscore\n" + "".join(f"{s}\t{s[::-1]}\t{rnd.uniform(0, 5):.3f}\n"
                                                               for s in rows)
        else:
            lines = "sentence\tlabel\n" + "".join(f"{s}\t{rnd.randint(0, 1)}\n" for s in rows)
        (folder / f"{split}.tsv").write_text(lines)
    return TaskConfig(name=task, data_dir=str(folder), max_seq_len=32,
                      labels=[] if score else ["0", "1"])


def failed_run(client):
    (run,) = client.search_runs([client.get_experiment_by_name("toy-promotion").experiment_id])
    return run.info.status, run.data.tags.get("error", "")


def test_a_first_candidate_whose_outputs_are_nan_is_refused_not_promoted(tmp_path, store):
    """No champion and no min_score (the default): the NaN classifier was promoted on the class-0 share of the
    gold labels ("no champion yet; v1 dev/score 0.4... on 40 rows")."""
    from mlflow.tracking import MlflowClient

    task = glue_folder(tmp_path, "sst2", texts(40, []), score=False)
    model = tiny("BertForSequenceClassification", num_labels=2)
    with torch.no_grad():
        model.classifier.weight.fill_(float("nan"))
    v1 = register(store, task, Path(save(model, tmp_path / "nan")))
    with pytest.raises(ValueError) as refused:
        judge(store, tmp_path / "art")
    assert str(refused.value) == (f"v{v1} (candidate): its outputs are not finite (NaN or inf) on 40 of the 40 "
                                  "evaluation rows, so its dev/score is no evidence (a diverged or overflowed model): "
                                  "it is not promoted"), refused.value
    client = MlflowClient(store)
    assert promote.version_by_alias(client, NAME, "champion") is None
    assert failed_run(client) == ("FAILED", f"ValueError: {refused.value}")


def test_a_regression_champion_with_one_nan_prediction_is_named_with_the_way_out(tmp_path, store):
    """STS-B, the champion NaN on one row of 40 whose gold scores vary: the refusal said the gold scores were all
    equal and asked for more rows (more rows only resample the NaN row more often). A first champion has none to roll
    back to (--rollback refused it, and removing its alias by hand too): deleting its version is the way on."""
    from mlflow.tracking import MlflowClient

    task = glue_folder(tmp_path, "stsb", texts(40, [17]), score=True)
    v1 = register(store, task, Path(save(nan_on(tiny("BertForSequenceClassification", num_labels=1)), tmp_path / "a")))
    client = MlflowClient(store)
    move_alias(client, NAME, "champion", v1, "promoted: by hand")
    v2 = register(store, task, Path(save(tiny("BertForSequenceClassification", num_labels=1), tmp_path / "b")))
    argv = [NAME, f"tracking.tracking_uri={store}", "tracking.experiment=toy-promotion",
            f"tracking.artifact_location={tmp_path / 'art'}", "bootstrap_samples=300"]
    with pytest.raises(SystemExit) as ended:
        promote.main(argv)
    line = str(ended.value.code)
    assert line == (f"error: v{v1} (champion): its outputs are not finite (NaN or inf) on 1 of the 40 evaluation "
                    "rows, so its dev/score is no evidence (a diverged or overflowed model): no candidate can be "
                    f"judged against it, and no champion came before it to roll back to: delete v{v1} from the "
                    f"registry (MlflowClient().delete_model_version('{NAME}', {v1})), then judge again: the "
                    "candidate is judged as the first champion"), line
    assert "gold scores" not in line and "\n" not in line
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == v1  # nothing moved
    assert str(client.get_model_version_by_alias(NAME, "challenger").version) == v2
    assert failed_run(client) == ("FAILED", f"ValueError: {line.removeprefix('error: ')}")
    client.delete_model_version(NAME, v1)  # as the line says
    assert promote.main(argv).decision == "promoted"
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == v2


def test_a_nan_champion_with_one_before_it_is_named_with_the_rollback_that_restores_it(tmp_path, store):
    from mlflow.tracking import MlflowClient

    task = glue_folder(tmp_path, "sst2", texts(40, [3]), score=False)
    client = MlflowClient(store)
    versions = []
    for i, model in enumerate([tiny("BertForSequenceClassification", num_labels=2),
                               nan_on(tiny("BertForSequenceClassification", num_labels=2))]):
        versions.append(register(store, task, Path(save(model, tmp_path / f"m{i}"))))
        move_alias(client, NAME, "champion", versions[-1], "promoted: by hand")
    register(store, task, Path(save(tiny("BertForSequenceClassification", num_labels=2), tmp_path / "new")))
    with pytest.raises(ValueError, match=rf"^v{versions[1]} \(champion\): its outputs are not finite .* on 1 of the 40 "
                                         rf".*: roll it back \(jobs/promote.py {NAME} --rollback restores "
                                         rf"v{versions[0]}\)$"):
        judge(store, tmp_path / "art")
