"""What jobs/predict.py writes and counts, pinned where the user sees it: a run's totals (predict._finish sums a
shard's _rows.json rejects and each part's `truncated` and `windows`), the output's columns as README lists them, a
rerun's handling of an over-full shard, and how a QA model without a registered task_config is windowed."""

import json
import os

import pyarrow as pa

from jobs.inference import shards
from tests.unit.test_prediction_shards import ROOT, part


def classified(ids):
    return [{"id": i, "label": "pos", "score": 0.9, "scores": "{}"} for i in ids]


def test_a_shards_record_counts_the_records_its_file_rejected(tmp_path):
    """The manifest's `rejected`, the run's `rejected` metric and the summary's "rejected ..." are sums over the
    shards' _rows.json: a shard that dropped a bad record without counting it would report nothing lost."""
    from jobs.inference.stages import read_rows
    from pipelines.tasks.files import Columns

    (tmp_path / "in.csv").write_text("text\na\n\nbb\n")  # a blank line: rejected
    list(read_rows({"index": 0, "path": str(tmp_path / "in.csv"), "fmt": "csv"}, "classification",
                   Columns(tokens=""), 10, set(), tmp_path / "out"))
    record = json.loads((tmp_path / "out" / "shards" / "00000-000000" / "_rows.json").read_text())
    assert record["rows"] == 2 and record["rejects"] == {"blank_line": 1}


def test_each_rows_truncated_flag_and_window_count_reach_its_part():
    """The run's `truncated` and `windowed` counts are sums over these columns, and users filter the output on
    `truncated`: a text cut to fit, or read in three windows, must say so in its own row."""
    encoded = [{"truncated": True, "windows": [{}, {}, {}]}, {"truncated": False, "windows": [{}]}]
    table = shards.part_table("classification", classified(["a", "b"]), ["f", "f"], [0, 1], encoded)
    assert table.column("truncated").to_pylist() == [True, False]
    assert table.column("windows").to_pylist() == [3, 1]


def test_parts_have_the_columns_and_types_the_readme_lists():
    """README: classification writes `label`, `score` and `scores` (JSON, every label); QA's `answer_start` is an
    integer, -1 for no answer, so that `context[answer_start:]` slices (a double would not)."""
    encoded = [{"truncated": False, "windows": [{}]}]
    cls = shards.part_table("classification", classified(["a"]), ["f"], [0], encoded)
    assert cls.column_names == ["id", "file", "position", "label", "score", "scores", "truncated", "windows"]
    qa = shards.part_table("question-answering", [{"id": "q", "answer": "", "answer_start": -1, "score": None,
                                                   "null_score": 1.0}], ["f"], [0], encoded)
    assert qa.schema.field("answer_start").type == pa.int64()
    assert qa.column("answer_start").to_pylist() == [-1]


def test_a_shard_whose_parts_hold_more_rows_than_it_has_is_cleared_not_kept(tmp_path):
    """More rows in its parts than in its _rows.json: some row was predicted twice (a part of another run's block
    beside this one's). A rerun clears the shard and predicts it again; kept, it would fail verify's "exactly once"
    on every later run and the folder could never be finished."""
    shards.write_rows(tmp_path, "s", {"rows": 2, "first": 0})
    shards.write_part(tmp_path, "s", part([0, 1]))
    shards.write_part(tmp_path, "s", part([0]))
    states = shards.scan(tmp_path)
    assert not states["s"].complete
    assert shards.clear_incomplete(tmp_path, states) == [] and not (tmp_path / "shards" / "s").exists()


def test_a_qa_model_without_a_task_config_is_windowed_and_decoded_as_fine_tuning_trains_one():
    """A model given as a folder or run path (no registered task_config) is read with QASettings' defaults: they must
    be what jobs/finetune.py trains a SQuAD model with, or its answers change (other windows, fewer n-best
    candidates, longer answers allowed)."""
    from jobs.config.finetune import TaskConfig
    from jobs.config.io import read_yaml
    from jobs.inference.kinds import QASettings

    task, qa = TaskConfig(), QASettings.from_task({})
    assert (qa.doc_stride, qa.max_query_length, qa.n_best, qa.max_answer_length, qa.version_2) == \
        (task.doc_stride, task.max_query_length, task.n_best, task.max_answer_length, task.version_2)
    squad = read_yaml(os.path.join(ROOT, "configs", "finetune", "squad-v1.yaml"))["task"]
    assert qa.max_seq_len == squad["max_seq_len"] == 384  # TaskConfig's own 128 is for sentence classification
