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
    """Under 0.8 x data.nsp_random_prob, and further under it than chance goes (nsp_warning's held-out line)."""
    assert held_out_nsp_warning([0, 1] * 10, 0.5) is None
    assert held_out_nsp_warning([0] * 6 + [1] * 4, 0.5) is None  # 40%: 0.8 x 50%, not under
    assert held_out_nsp_warning([0] * 13 + [1] * 7, 0.5) is None  # 35% of 20: 13% of fair coins do as badly
    assert "29.7% random-next" in held_out_nsp_warning([0] * 90 + [1] * 38, 0.5)  # of 128: 1 in 300,000
    assert "0.0% random-next" in held_out_nsp_warning([0] * 12, 0.5)  # 1 in 4,096
    assert held_out_nsp_warning([0] * 10, 0.0) is None and held_out_nsp_warning([], 0.5) is None


def test_a_small_held_out_split_short_by_chance_is_not_warned():
    """Six documents, every pair free to draw its B from another one: 2 random-next pairs of 9 is a fair coin's
    luck (9% of splits do as badly), not "few others to draw a random B from". It was said for 108 of 400 seeds of
    such a split; a split whose pairs are short because its shards hold one document each is still said."""
    import random

    import numpy as np

    from pipelines.config import DataConfig
    from pipelines.examples import Document, create_examples, nsp_warning

    rng = np.random.default_rng(0)
    docs = []
    for d in range(6):
        offsets = np.concatenate([[0], np.cumsum(rng.integers(8, 30, size=rng.integers(4, 9)))])
        docs.append(Document(f"d{d}", rng.integers(5, 1000, size=offsets[-1]).astype(np.uint16), offsets))
    cfg = DataConfig(sources=["x"])
    examples = list(create_examples(docs, cfg, 2, 3, random.Random(1)))
    random_next = sum(e.is_random_next for e in examples)
    assert (random_next, len(examples)) == (2, 9)  # 22%: under 0.8 x 50%
    train = [{"documents": 5000, "rows": 100000, "random_next": 50000}]
    counts = {"examples": 100000 + len(examples), "random_next": 50000 + random_next, "documents_kept": 5006}
    held_out = {"documents": 6, "rows": len(examples), "random_next": random_next}
    assert nsp_warning(cfg, counts, {"train": train, "eval": [held_out]}) is None
    assert nsp_warning(cfg, counts, {"train": train, "eval": [{"documents": 6, "rows": 10, "random_next": 3}]}) is None
    one_each = [{"documents": 1, "rows": 20, "random_next": 0}] * 2 + [held_out]
    line = nsp_warning(cfg, counts, {"train": train, "eval": one_each})
    assert line.startswith("the held-out split's random-next pairs are 4.1% (2 of 49), not the 50% of "
                           "data.nsp_random_prob: its 3 shard(s) hold 8 document(s), 2 of them alone in a shard "
                           "(40 rows, all 'next': no other document to draw a random B from)"), line
    assert "data.eval_fraction" in line


def test_a_short_held_out_split_with_no_lone_document_says_no_shard_of_one():
    """A short split need not hold a shard of one document: 20 random-next pairs of 200 from 2 documents is past
    chance too. The line said "0 of them alone in a shard (0 rows, all 'next' ...)"; it names lone documents only
    where there are some."""
    from pipelines.config import DataConfig
    from pipelines.examples import nsp_warning

    train = [{"documents": 5000, "rows": 100000, "random_next": 50000}]
    counts = {"examples": 100200, "random_next": 50020, "documents_kept": 5002}
    line = nsp_warning(DataConfig(sources=["x"]), counts,
                       {"train": train, "eval": [{"documents": 2, "rows": 200, "random_next": 20}]})
    assert line.startswith("the held-out split's random-next pairs are 10.0% (20 of 200), not the 50% of "
                           "data.nsp_random_prob: its 1 shard(s) hold 2 document(s), none of them alone in a shard, so "
                           "its NSP accuracy scores mostly the 'follows' class; set data.eval_fraction higher"), line
    assert "smaller documents" not in line and "draw a random B" not in line  # no cause claimed: none is known
