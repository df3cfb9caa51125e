"""A resubmission keeps its checkpoint's held-out set whatever train.eval_batches says now
(jobs/pretrain._held_out_read), so evaluations before and after it compare. It did so in silence while MLflow logged
the new train.eval_batches: one [eval] line now says which rows are scored and why."""

import json
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.config.io import load_config
from jobs.config.pretrain import PretrainConfig
from jobs.runtime.resubmit import record


def test_a_resubmission_asking_another_held_out_size_is_told_it_keeps_the_checkpoints(tmp_path, capsys):
    from jobs.pretrain import TRAIN_COLUMNS, _eval_rows, _held_out_read

    n = 1000
    split = str(tmp_path / "eval-0.parquet")
    pq.write_table(pa.table({"example_id": list(range(n)), "input_ids": [[2, 5, 3, 6, 3]] * n,
                             "num_a_tokens": [1] * n, "next_sentence_label": [0, 1] * (n // 2)}), split)
    prepared = SimpleNamespace(eval_files=[split], path="set")

    def cfg(eval_batches: int):
        return load_config(PretrainConfig, None, ["data.sources=[x]", f"output_dir={tmp_path / 'runs'}",
                                                  "run_name=bert", f"train.eval_batches={eval_batches}",
                                                  "train.micro_batch_size=16", "scaling.num_workers=1"])

    assert len(_eval_rows(cfg(2), prepared, TRAIN_COLUMNS)["example_id"]) == 32  # a new run: as asked, said nothing
    assert "[eval]" not in capsys.readouterr().out
    checkpoint = tmp_path / "runs" / "bert" / "checkpoint_1"
    checkpoint.mkdir(parents=True)
    record(checkpoint, "run-a", 1000, {}, held_out=_held_out_read(cfg(2)))
    (checkpoint.parent / "checkpoint_manager_snapshot.json").write_text(
        json.dumps({"latest_checkpoint_result": {"checkpoint_dir_name": checkpoint.name}}))

    assert len(_eval_rows(cfg(50), prepared, TRAIN_COLUMNS)["example_id"]) == 32  # the checkpoint's, as before
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("[eval]")]
    assert lines == ["[eval] bert: the held-out set stays the eval split's first 32 examples, as its checkpoint's "
                     "(this run's train.eval_batches x train.micro_batch_size asks 800), so that evaluations before "
                     "and after the resubmission score the same examples; a new run_name scores 800"], lines
    _eval_rows(cfg(2), prepared, TRAIN_COLUMNS)  # the same size as the checkpoint's: nothing to say
    assert "[eval]" not in capsys.readouterr().out
