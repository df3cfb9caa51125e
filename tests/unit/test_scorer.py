"""jobs/registry/scorer.py against references computed here, for mutation testing of that module (mutmut): every
number `score`, `evaluate_model`, `entity_counts` and `lower_bound` give is checked against one worked out
independently, so a broken batch loop, slice, padding, threshold or quantile fails a test.

The models are tiny random transformers BERTs (MiniLM's real vocabulary, hidden 32, 64 positions) saved once per
module. The references run the model on each row alone (no padding at all) and read the predictions back word by
word / window by window; the scorer batches rows of very different lengths with a batch size that does not divide
them, pads each batch to its longest row, and must give the same numbers. Where the model's predictions are random,
the gold labels are made from the reference predictions (right on some rows, wrong on others), so every metric
sits strictly between its extremes and any change to the predictions moves it."""

import dataclasses
import json
import random

import numpy as np
import pytest
import torch
import transformers
from scipy.stats import pearsonr, spearmanr
from seqeval.scheme import IOB2, Entities

from jobs.config.finetune import TaskConfig
from jobs.loops import ft_tasks
from jobs.registry import scorer
from pipelines.tasks import ner_metrics, squad_eval_features
from pipelines.tasks.squad import best_spans, example_scores
from tests.unit.scorer_kit import BATCH, MINILM, alone, resample, save, sentences, tiny

IOB = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
WORD_TAGS = ["NOUN", "VERB", "DET", "ADJ", "ADP"]


@pytest.fixture(scope="module")
def tok():
    return transformers.BertTokenizerFast.from_pretrained(MINILM)


# -- classification and regression (GLUE rows) -------------------------------------------------------------------

@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    model = tiny("BertForSequenceClassification", num_labels=2)
    return model, save(model, tmp_path_factory.mktemp("classifier"))


def glue_rows(model, tok, n: int, pairs: bool, seed: int = 0) -> tuple[list[dict], np.ndarray]:
    """(rows as load_rows gives them, whether the reference prediction is right on each): the label is the
    model's own prediction on two rows of three, the other class on the third."""
    text_a, text_b = sentences(n, seed), sentences(n, seed + 1)[::-1] if pairs else [None] * n
    logits = np.stack([alone(model, tok(a, b, truncation=True, max_length=64))["logits"]
                       for a, b in zip(text_a, text_b)])
    assert np.abs(logits[:, 0] - logits[:, 1]).min() > 1e-3  # no near-tie
    predicted = logits.argmax(-1)
    labels = np.where(np.arange(n) % 3 == 0, 1 - predicted, predicted)
    rows = [{"idx": i, "text_a": a, "text_b": b, "label": int(y), "row_index": i}
            for i, (a, b, y) in enumerate(zip(text_a, text_b, labels))]
    return rows, predicted == labels


def test_classification_accuracy_is_the_reference_on_every_row_and_on_any_resample(classifier, tok):
    model, folder = classifier
    rows, right = glue_rows(model, tok, 23, pairs=False)
    s = scorer.score(folder, TaskConfig(name="sst2", max_seq_len=64), "dev", rows, batch_size=BATCH)
    assert s.metric == "dev/score" and s.n == 23
    assert s.value == pytest.approx(right.mean()) and 0 < s.value < 1
    assert s.metrics == pytest.approx({"dev/accuracy": right.mean(), "dev/score": right.mean()})
    assert s.on(np.arange(23)) == pytest.approx(s.value)
    idx = resample(23)
    assert s.on(idx) == pytest.approx(right[idx].mean()) and s.on(idx) != pytest.approx(s.value)
    assert s.on(np.array([0, 0, 3])) == 0.0 and s.on(np.array([1, 22, 1])) == 1.0  # row 0 wrong, 1 and 22 right


def test_sentence_pairs_score_accuracy_and_the_positive_class_f1(classifier, tok):
    model, folder = classifier
    rows, right = glue_rows(model, tok, 19, pairs=True, seed=5)
    s = scorer.score(folder, TaskConfig(name="mrpc", max_seq_len=64), "dev", rows, batch_size=BATCH)
    gold = np.array([r["label"] for r in rows])
    pred = np.where(right, gold, 1 - gold)

    def f1(i):
        tp = np.sum((pred[i] == 1) & (gold[i] == 1))
        return 2 * tp / (np.sum(pred[i] == 1) + np.sum(gold[i] == 1))

    every = np.arange(19)
    expected = {"dev/accuracy": right.mean(), "dev/f1": f1(every), "dev/score": (right.mean() + f1(every)) / 2}
    assert s.metric == "dev/score" and s.n == 19 and s.metrics == pytest.approx(expected)
    assert s.value == pytest.approx(expected["dev/score"])
    idx = resample(19)
    assert s.on(idx) == pytest.approx((right[idx].mean() + f1(idx)) / 2)


def test_regression_scores_the_exact_outputs_so_padding_cannot_change_them(tmp_path_factory, tok):
    """STS-B: Pearson and Spearman see every digit of every output, so a batch padded without its attention mask,
    or rows scored against another row's label, would move them."""
    model = tiny("BertForSequenceClassification", num_labels=1)
    folder = save(model, tmp_path_factory.mktemp("regressor"))
    n = 21
    text_a, text_b = sentences(n, 2), sentences(n, 3)
    outputs = np.array([alone(model, tok(a, b, truncation=True, max_length=64))["logits"][0]
                        for a, b in zip(text_a, text_b)])
    noise = np.random.default_rng(0).normal(0, outputs.std(), n)
    labels = (outputs + noise).astype(np.float32)
    rows = [{"text_a": a, "text_b": b, "label": float(y), "row_index": i}
            for i, (a, b, y) in enumerate(zip(text_a, text_b, labels))]
    s = scorer.score(folder, TaskConfig(name="stsb", max_seq_len=64), "dev", rows, batch_size=BATCH)

    def expected(i):
        p, r = pearsonr(outputs[i], labels[i])[0], spearmanr(outputs[i], labels[i])[0]
        return {"dev/pearson": p, "dev/spearmanr": r, "dev/score": (p + r) / 2}

    assert s.metric == "dev/score" and s.n == n
    assert s.metrics == pytest.approx(expected(np.arange(n)), abs=1e-5)
    assert s.value == pytest.approx(expected(np.arange(n))["dev/score"], abs=1e-5)
    idx = resample(n)
    assert s.on(idx) == pytest.approx(expected(idx)["dev/score"], abs=1e-5)


def test_rows_out_of_step_with_their_features_are_refused(classifier, tok, monkeypatch):
    """One feature per row is what score() reads; a featurizer giving a row two features (as SQuAD windows do) is
    refused rather than scored against the wrong labels."""
    model, folder = classifier
    rows, _ = glue_rows(model, tok, 6, pairs=False)

    class TwoForTheFirstRow(ft_tasks.Featurizer):
        def __call__(self, batch):
            out = super().__call__(batch)
            return {k: np.concatenate([v[:1], v]) for k, v in out.items()}

    monkeypatch.setattr(ft_tasks, "Featurizer", TwoForTheFirstRow)
    with pytest.raises(RuntimeError,
                       match=r"^features out of step with the evaluation rows \(one feature per row expected\)$"):
        scorer.score(folder, TaskConfig(name="sst2", max_seq_len=64), "dev", rows, batch_size=BATCH)


# -- token classification (CoNLL rows) ---------------------------------------------------------------------------

NER_LENGTHS = (1, 6, 14, 2, 1, 9, 20, 3, 1, 11, 4, 17, 2, 7, 1, 5, 12)  # 17 sentences, every one under 64 pieces


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, tok):
    """(model folder, words per sentence, the reference's predicted tag ids per word): first pieces read alone."""
    model = tiny("BertForTokenClassification", num_labels=5)
    folder = save(model, tmp_path_factory.mktemp("tagger"))
    words = [s.split() for s in sentences(len(NER_LENGTHS), 4, NER_LENGTHS)]
    predicted = []
    for w in words:
        enc = tok(w, is_split_into_words=True, truncation=True, max_length=64)
        assert len(enc["input_ids"]) < 64  # nothing cut: every word has its first piece
        logits, seen, ids = alone(model, enc)["logits"], set(), []
        for position, word in enumerate(enc.word_ids()):
            if word is not None and word not in seen:
                seen.add(word)
                ids.append(int(logits[position].argmax()))
        predicted.append(ids)
    return folder, words, predicted


def tag_rows(words, gold) -> list[dict]:
    """Sentences as the CoNLL reader gives them, indexed as load_rows indexes them."""
    return [{"id": i, "document": 0, "tokens": w, "ner_tags": g, "row_index": i}
            for i, (w, g) in enumerate(zip(words, gold))]


def entities(tags: list[str]) -> list:
    """The entities strict IOB2 reads in one sentence (an I- that no B- opens is none)."""
    return Entities([tags], IOB2).entities[0]


def iob_gold(predicted: list[list[str]]) -> list[list[str]]:
    """Gold entity tags: the prediction on one sentence in three, another entity type on the next, on the third
    the prediction with every I- made a B- (an entity per word: more gold entities than predicted, so precision,
    recall and F1 all differ); no entity where the model predicts none."""
    swap = {"B-PER": "B-LOC", "I-PER": "I-LOC", "B-LOC": "B-PER", "I-LOC": "I-PER", "O": "O"}
    out = []
    for i, p in enumerate(predicted):
        if not entities(p):
            out.append(["O"] * len(p))
        elif i % 3 == 0:
            out.append(list(p))
        elif i % 3 == 1:
            out.append([swap[t] for t in p])
        else:
            out.append([t.replace("I-", "B-") for t in p])
    return out


def test_entity_f1_is_seqeval_on_the_first_pieces_and_each_resample_sums_its_sentences(tagger):
    folder, words, predicted = tagger
    pred = [[IOB[i] for i in p] for p in predicted]
    gold = iob_gold(pred)
    task = TaskConfig(name="conll", labels=IOB, max_seq_len=64, iob_scheme="IOB2")
    s = scorer.score(folder, task, "dev", tag_rows(words, gold), batch_size=BATCH)
    reference = ner_metrics(gold, pred, scheme="IOB2")
    assert 0 < reference["f1"] < 1 and len({reference["precision"], reference["recall"], reference["f1"]}) == 3
    assert s.metric == "dev/f1" and s.n == len(words)
    assert s.value == pytest.approx(reference["f1"])
    assert s.metrics == pytest.approx({f"dev/{k}": v for k, v in reference.items()})
    assert s.on(np.arange(len(words))) == pytest.approx(reference["f1"])
    idx = resample(len(words))
    on_idx = ner_metrics([gold[i] for i in idx], [pred[i] for i in idx], scheme="IOB2")["f1"]
    assert s.on(idx) == pytest.approx(on_idx) and on_idx != pytest.approx(reference["f1"])
    empty = [i for i, p in enumerate(pred) if not entities(p)]
    assert empty and s.on(np.array(empty * 2)) == 0.0  # no entity predicted or gold: F1 0, not a division by 0
    exact = [i for i in range(0, len(pred), 3) if entities(pred[i])]
    assert s.on(np.array(exact)) == 1.0
    # a files task whose metric is word accuracy: the gate's value and every resample are accuracy, not entity F1
    files = TaskConfig(name="files", kind="token-classification", labels=IOB, max_seq_len=64, iob_scheme="IOB2",
                       metric="accuracy")
    s = scorer.score(folder, files, "dev", tag_rows(words, gold), batch_size=BATCH)
    assert s.metric == "dev/accuracy" and reference["accuracy"] != pytest.approx(reference["f1"])
    assert s.value == pytest.approx(reference["accuracy"])
    assert s.on(idx) == pytest.approx(ner_metrics([gold[i] for i in idx], [pred[i] for i in idx])["accuracy"])


@pytest.mark.parametrize("metric", ["f1", "accuracy"])
def test_word_tags_are_scored_by_word_on_every_row_and_on_any_resample(tagger, metric):
    """Tags that are not entities (a files task's part-of-speech tags): accuracy and macro F1 over words."""
    from sklearn.metrics import f1_score

    folder, words, predicted = tagger
    pred = [[WORD_TAGS[i] for i in p] for p in predicted]
    rnd = random.Random(7)
    gold = [[t if rnd.random() < 0.6 else rnd.choice(WORD_TAGS) for t in p] for p in pred]
    task = TaskConfig(name="files", kind="token-classification", labels=WORD_TAGS, max_seq_len=64, metric=metric)
    s = scorer.score(folder, task, "dev", tag_rows(words, gold), batch_size=BATCH)

    def expected(idx):
        g = [t for i in idx for t in gold[i]]
        p = [t for i in idx for t in pred[i]]
        return {"dev/accuracy": np.mean([a == b for a, b in zip(g, p)]),
                "dev/f1": f1_score(g, p, average="macro", zero_division=0)}

    every = expected(range(len(words)))
    assert s.metric == f"dev/{metric}" and s.n == len(words)
    assert s.metrics == pytest.approx(every) and 0 < every["dev/accuracy"] < 1
    assert s.value == pytest.approx(every[s.metric]) == s.on(np.arange(len(words)))
    idx = resample(len(words))
    assert s.on(idx) == pytest.approx(expected(idx)[s.metric]) != every[s.metric]


# -- question answering (SQuAD rows) ------------------------------------------------------------------------------

CONTEXTS = [" ".join(["the river flows past Paris and London"] * 9),  # ~64 pieces: several windows each
            "Marie Curie worked in Paris with Pierre Curie at the Sorbonne",
            " ".join(["Marie Curie worked at the Sorbonne in Paris"] * 7),
            "the river is long",
            "a laboratory near Blackburnshire on 1996-08-22",
            " ".join(["London and Paris are cities on rivers"] * 5)]
QUESTIONS = ["where does the river flow", "who worked at the Sorbonne", "when was it", "what is long"]


def qa_task(version_2: bool) -> TaskConfig:
    return TaskConfig(name="squad", max_seq_len=64, doc_stride=16, max_query_length=16, n_best=5,
                      version_2=version_2)


@pytest.fixture(scope="module")
def reader(tmp_path_factory, tok):
    """(model, questions without answers, their windows, the reference's start and end logits per window): each
    window run alone, its positions past the window's end never a candidate.

    The head's bias sits far below zero and [PAD]'s embedding points away from the head, so a padding position is
    never among a window's n_best (a batch padded to its longest window scores as the window alone) and a padding
    column filled with 0 would be."""
    model = tiny("BertForQuestionAnswering")
    with torch.no_grad():
        model.qa_outputs.bias.fill_(-30.0)
        w = model.qa_outputs.weight
        model.bert.embeddings.word_embeddings.weight[tok.pad_token_id] = -50 * (w[0] + w[1])
    rows = [{"id": f"q{i}", "title": "t", "question": QUESTIONS[i % len(QUESTIONS)], "context": c,
             "answers": {"text": [], "answer_start": []}, "is_impossible": False}
            for i, c in enumerate(CONTEXTS * 2)]
    task = qa_task(False)
    feats = squad_eval_features(rows, tok, task.max_seq_len, task.doc_stride, task.max_query_length)
    n, width = feats["input_ids"].shape
    assert n > BATCH and n % BATCH and len(feats["example_id"]) > len(rows)  # long contexts: several windows
    starts, ends = np.full((n, width), -1e9), np.full((n, width), -1e9)
    for i in range(n):
        length = int(feats["attention_mask"][i].sum())
        out = alone(model, {k: feats[k][i, :length].tolist() for k in ft_tasks.MODEL_INPUTS})
        starts[i, :length], ends[i, :length] = out["start_logits"], out["end_logits"]
    return model, rows, feats, starts, ends


def predictions(task, reader, threshold=None) -> dict[str, str]:
    _, rows, feats, starts, ends = reader
    return ft_tasks.squad_predictions(task, rows, feats, starts, ends, threshold)[0]


def with_answers(rows, answers: dict) -> list[dict]:
    """`rows` with gold answers: a text per id, "" for an impossible question."""
    out = []
    for r in rows:
        text = answers[r["id"]]
        gold = {"text": [text], "answer_start": [r["context"].find(text)]} if text else {"text": [], "answer_start": []}
        out.append({**r, "answers": gold, "is_impossible": not text})
    return out


def f1s(rows, predicted: dict) -> np.ndarray:
    return np.array([example_scores(r, predicted[r["id"]])[1] for r in rows]) * 100.0


def test_squad_v1_f1_is_the_mean_of_per_question_f1_over_windows_of_long_contexts(reader, tmp_path_factory):
    model, rows, _, _, _ = reader
    folder = save(model, tmp_path_factory.mktemp("reader"))
    predicted = predictions(qa_task(False), reader)
    # right on every other question, a few words of the context (often partly right) on the others
    answers = {r["id"]: predicted[r["id"]] if i % 2 and predicted[r["id"]] else " ".join(r["context"].split()[1:4])
               for i, r in enumerate(rows)}
    rows = with_answers(rows, answers)
    s = scorer.score(folder, qa_task(False), "dev", rows, batch_size=BATCH)
    f1 = f1s(rows, predicted)
    exact = np.array([example_scores(r, predicted[r["id"]])[0] for r in rows]) * 100.0
    assert 0 < f1.mean() < 100 and len(set(f1.tolist())) > 2
    assert s.metric == "dev/f1" and s.n == len(rows)
    assert s.groups.tolist() == list(range(len(CONTEXTS))) * 2 and s.value == pytest.approx(f1.mean())  # by context
    assert s.metrics == pytest.approx({"dev/exact": exact.mean(), "dev/f1": f1.mean(), "dev/total": len(rows)})
    assert s.on(np.arange(len(rows))) == pytest.approx(f1.mean())
    idx = resample(len(rows))
    assert s.on(idx) == pytest.approx(f1[idx].mean()) != pytest.approx(f1.mean())
    # a files task whose metric is exact match: the gate's value and every resample are exact match, not F1
    files = dataclasses.replace(qa_task(False), name="files", kind="question-answering", metric="exact")
    s = scorer.score(folder, files, "dev", rows, batch_size=BATCH)
    assert s.metric == "dev/exact" and exact.mean() != pytest.approx(f1.mean())
    assert s.value == pytest.approx(exact.mean()) and s.on(idx) == pytest.approx(exact[idx].mean())


@pytest.fixture(scope="module")
def squad_v2(reader, tmp_path_factory):
    """(rows, folders by the null threshold in their config.json (None: none written), the threshold written): it
    splits the questions into answered and not; every other question is impossible."""
    model, rows, feats, starts, ends = reader
    spans = best_spans(rows, feats, starts, ends, qa_task(True).n_best, qa_task(True).max_answer_length)
    gaps = sorted(null - score for _, score, null, _ in spans.values())
    threshold = float((gaps[len(gaps) // 2 - 1] + gaps[len(gaps) // 2]) / 2)
    assert gaps[len(gaps) // 2 - 1] < threshold < gaps[len(gaps) // 2]
    answers = {r["id"]: "" if i % 2 else spans[r["id"]].text for i, r in enumerate(rows)}
    folders = {}
    for key in (None, threshold, -1e9, 1e9):
        root = tmp_path_factory.mktemp("reader-v2")
        folders[key] = save(model, root) if key is None else save(model, root, null_threshold=key)
        assert ("null_threshold" in json.loads((root / "config.json").read_text())) == (key is not None)
        model.config.__dict__.pop("null_threshold", None)
    return with_answers(rows, answers), folders, threshold


@pytest.mark.parametrize("which", ["written", "absent", "never", "always"])
def test_squad_v2_applies_the_null_threshold_of_the_model_config_and_0_without_one(reader, squad_v2, which):
    """The threshold in config.json decides which questions get no answer: -1e9 every one, 1e9 only those without a
    span; a model without one uses 0."""
    rows, folders, written = squad_v2
    threshold = {"written": written, "absent": 0.0, "never": 1e9, "always": -1e9}[which]
    folder = folders[None if which == "absent" else threshold]
    s = scorer.score(folder, qa_task(True), "dev", rows, batch_size=BATCH)
    predicted = predictions(qa_task(True), reader, threshold)
    unanswered = sum(not p for p in predicted.values())
    assert {"always": unanswered == len(rows), "never": unanswered < len(rows) // 2,
            "written": 0 < unanswered == len(rows) // 2, "absent": unanswered < len(rows)}[which]
    f1 = f1s(rows, predicted)
    impossible = sum(r["is_impossible"] for r in rows)
    assert s.metric == "dev/f1" and s.n == len(rows)
    assert s.value == pytest.approx(f1.mean())
    assert s.metrics["dev/f1"] == pytest.approx(f1.mean()) and s.metrics["dev/null_threshold"] == threshold
    assert (s.metrics["dev/NoAns_total"], s.metrics["dev/HasAns_total"]) == (impossible, len(rows) - impossible)
    idx = resample(len(rows))
    assert s.on(idx) == pytest.approx(f1[idx].mean())


def test_squad_v1_reports_no_null_threshold(reader, squad_v2):
    rows, folders, written = squad_v2
    s = scorer.score(folders[written], qa_task(False), "dev", rows, batch_size=BATCH)
    assert "dev/null_threshold" not in s.metrics
    assert s.value == pytest.approx(f1s(rows, predictions(qa_task(False), reader)).mean())


# -- every split ---------------------------------------------------------------------------------------------------

def test_evaluate_model_is_every_split_scored_under_its_own_name(classifier, tok):
    model, folder = classifier
    task = TaskConfig(name="mrpc", max_seq_len=64)
    dev, _ = glue_rows(model, tok, 11, pairs=True, seed=8)
    test, _ = glue_rows(model, tok, 7, pairs=True, seed=9)
    out = scorer.evaluate_model(folder, task, {"dev": dev, "test": test}, batch_size=BATCH)
    expected = {**scorer.score(folder, task, "dev", dev, BATCH).metrics,
                **scorer.score(folder, task, "test", test, BATCH).metrics}
    assert set(out) == {f"{split}/{k}" for split in ("dev", "test") for k in ("accuracy", "f1", "score")}
    assert out == expected and out["dev/accuracy"] != out["test/accuracy"]


# -- entity counts ----------------------------------------------------------------------------------------------

GOLD = [["B-PER", "I-PER", "O", "B-LOC"], ["I-PER", "O", "B-LOC"], [], ["O", "O"], ["B-PER", "B-PER"],
        ["B-PER", "I-LOC"]]
PRED = [["B-PER", "I-PER", "O", "B-ORG"], ["I-PER", "O", "B-LOC"], [], ["B-LOC", "O"], ["B-PER", "I-PER"],
        ["B-PER", "I-PER"]]


@pytest.mark.parametrize("scheme, expected", [
    # strict IOB2: an I- that no B- opens is no entity (sentence 1's I-PER, sentence 5's I-LOC)
    ("IOB2", [(1, 2, 2), (1, 1, 1), (0, 0, 0), (0, 1, 0), (0, 1, 2), (0, 1, 1)]),
    # lenient (conlleval): the stray I- opens an entity of its own
    (None, [(1, 2, 2), (2, 2, 2), (0, 0, 0), (0, 1, 0), (0, 1, 2), (0, 1, 2)]),
])
def test_entity_counts_are_exact_matches_predicted_and_gold_per_sentence(scheme, expected):
    counts = scorer.entity_counts(GOLD, PRED, scheme)
    assert counts.dtype == np.int64 and counts.tolist() == [list(e) for e in expected]
    tp, n_pred, n_gold = counts.sum(0)
    assert 2 * tp / (n_pred + n_gold) == pytest.approx(ner_metrics(GOLD, PRED, scheme=scheme)["f1"])


@pytest.mark.parametrize("gold, pred", [
    ([["B-LOC", "I-LOC", "E-LOC", "O", "S-PER"]], [["B-LOC", "I-LOC", "O", "O", "S-PER"]]),  # IOBES
    ([["B-LOC", "I-LOC", "L-LOC", "O", "U-PER"]], [["B-LOC", "I-LOC", "O", "O", "U-PER"]]),  # BILOU
])
@pytest.mark.parametrize("scheme", ["IOB2", "IOB1"])
def test_iobes_and_bilou_tags_are_counted_as_entities_by_their_own_scheme(gold, pred, scheme):
    """Gold: a LOC of three words and a one-word PER; predicted: the LOC unclosed (no entity), the PER. By IOB's
    readings an S-/U- tag was no entity and the F1 that chooses and judges the model was per tag, not per entity."""
    from jobs.loops import ft_tasks

    assert ft_tasks.is_iob(["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC", "L-PER", "U-PER"])
    assert scorer.entity_counts(gold, pred, scheme).tolist() == [[1, 1, 2]]
    assert ner_metrics(gold, pred, scheme=scheme)["f1"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("scheme", ["IOB2", None])
def test_entity_counts_of_no_sentences_are_an_empty_table(scheme):
    counts = scorer.entity_counts([], [], scheme)
    assert counts.shape == (0, 3) and counts.dtype == np.int64


# -- lower bound --------------------------------------------------------------------------------------------------

class Recorded:
    """Per-row correctness as Scores, remembering every resample it is scored on."""

    def __init__(self, correct):
        self.correct = np.asarray(correct, dtype=float)
        self.resamples: list[np.ndarray] = []
        self.scores = scorer.Scores("dev/accuracy", float(self.correct.mean()), len(self.correct), self.on)

    def on(self, idx: np.ndarray) -> float:
        self.resamples.append(np.array(idx))
        return float(self.correct[idx].mean())


CORRECT = np.random.default_rng(2).random(30) < 0.7


def test_the_lower_bound_is_the_low_quantile_of_the_metric_over_seeded_resamples():
    for confidence in (0.5, 0.9, 0.95):
        rng = np.random.default_rng(11)
        values = [CORRECT[rng.integers(0, 30, 30)].mean() for _ in range(400)]
        assert scorer.lower_bound(Recorded(CORRECT).scores, 400, confidence, seed=11) == pytest.approx(
            np.quantile(values, 1 - confidence))


def test_the_lower_bound_falls_as_the_confidence_rises_and_sits_below_the_point_value():
    bound = {c: scorer.lower_bound(Recorded(CORRECT).scores, 400, c, seed=3) for c in (0.5, 0.95, 0.99)}
    assert bound[0.99] < bound[0.95] < bound[0.5] and bound[0.95] < CORRECT.mean()
    assert isinstance(bound[0.95], float)


def test_each_resample_draws_n_rows_from_all_n_and_the_seed_decides_which():
    r = Recorded(CORRECT)
    scorer.lower_bound(r.scores, 300, 0.95, seed=0)
    assert len(r.resamples) == 300 and all(x.shape == (30,) for x in r.resamples)
    drawn = np.concatenate(r.resamples)
    assert set(drawn.tolist()) == set(range(30))  # the first and the last row too, nothing outside
    again = Recorded(CORRECT)
    scorer.lower_bound(again.scores, 300, 0.95, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(r.resamples, again.resamples))
    bounds = {scorer.lower_bound(Recorded(CORRECT).scores, 300, 0.95, seed=s) for s in range(4)}
    assert len(bounds) > 1

