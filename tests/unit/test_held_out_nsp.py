"""The held-out rows pretraining scores hold the random-next pairs NSP accuracy needs, or a line says they do not."""

from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.examples import held_out_nsp_warning


def shard(path, first_id: int, labels: list[int]) -> str:
    n = len(labels)
    pq.write_table(pa.table({"example_id": list(range(first_id, first_id + n)), "input_ids": [[2, 5, 3, 6, 3]] * n,
                             "num_a_tokens": [1] * n, "next_sentence_label": labels}), path)
    return str(path)


def test_a_held_out_head_of_one_document_is_named(tmp_path, capsys):
    """Eval shard 0 of one document (every pair "next") beside shards whose pairs are half random: the split as a whole
    passed prepare's check (42% against 0.8 x 50%), and the 64 rows pretraining scores, all from shard 0, held none,
    so eval/nsp_acc scored the "follows" class alone with no word said."""
    from jobs.config.pretrain import PretrainConfig
    from jobs.pretrain import TRAIN_COLUMNS, _eval_rows

    cfg = PretrainConfig()
    cfg.output_dir, cfg.train.eval_batches, cfg.train.micro_batch_size = str(tmp_path / "runs"), 4, 16
    alone = shard(tmp_path / "eval-0.parquet", 0, [0] * 80)
    mixed = shard(tmp_path / "eval-1.parquet", 80, [0, 1] * 60)
    _eval_rows(cfg, SimpleNamespace(eval_files=[alone, mixed], path="set"), TRAIN_COLUMNS)
    out = capsys.readouterr().out
    assert "[data] warning: the held-out rows pretraining scores (the eval split's first 48) are 0.0%" in out
    # 48: 64 read, cut to a multiple the replicas share (eval_set_size)
    rows = _eval_rows(cfg, SimpleNamespace(eval_files=[mixed, alone], path="set"), TRAIN_COLUMNS)
    assert rows["next_sentence_label"].mean() == 0.5 and "warning" not in capsys.readouterr().out
    cfg.train.nsp = False  # MLM only: no NSP accuracy to mislead
    _eval_rows(cfg, SimpleNamespace(eval_files=[alone, mixed], path="set"), TRAIN_COLUMNS)
    assert "warning" not in capsys.readouterr().out


def test_the_held_out_share_is_judged_as_prepare_judges_the_split():
    assert held_out_nsp_warning([0, 1] * 10, 0.5) is None
    assert held_out_nsp_warning([0] * 6 + [1] * 4, 0.5) is None  # 40%: 0.8 x 50%, not under
    assert "35.0% random-next" in held_out_nsp_warning([0] * 13 + [1] * 7, 0.5)
    assert held_out_nsp_warning([0] * 10, 0.0) is None and held_out_nsp_warning([], 0.5) is None
