"""jobs/workers/pretrain_worker.py's parts that need no Ray cluster: a pipeline replica's micro-batches, the held-out
set on any worker count, the release tokenizer, MFU's peak and a too-small training split (log windows, checkpoints
and rollbacks: tests/unit/test_pretrain_worker_windows.py; the RNG states a checkpoint carries:
tests/unit/test_checkpoint_parts.py)."""

from types import SimpleNamespace

import numpy as np
import pytest
import ray.train

from jobs.loops.data_position import ExampleIndex
from jobs.workers.pretrain_worker import Worker

SHARD_ROWS = [37, 0, 50, 24]  # 111 examples: the two replicas' shares are 56 and 55 rows


class ShuffledShard:
    """What ray.train.get_dataset_shard gives a pipeline's first-stage rank: the whole set, locally shuffled."""

    def __init__(self, ids: np.ndarray):
        self.ids = ids

    def iter_batches(self, batch_size, batch_format, local_shuffle_buffer_size, local_shuffle_seed):
        assert batch_format == "numpy"
        ids = np.random.default_rng(local_shuffle_seed).permutation(self.ids)
        for i in range(0, len(ids), batch_size):
            yield {"example_id": ids[i:i + batch_size], "input_ids": ids[i:i + batch_size] * 10}


def _replica_reads(monkeypatch, mb: int, replicas: int) -> list[list[dict]]:
    ids = np.array([(s << 32) + r for s, rows in enumerate(SHARD_ROWS) for r in range(rows)], dtype=np.int64)
    monkeypatch.setattr(ray.train, "get_dataset_shard", lambda name: ShuffledShard(ids))
    reads = []
    for replica in range(replicas):
        worker = Worker.__new__(Worker)  # only what _read uses
        worker.t, worker.pipelined = SimpleNamespace(micro_batch_size=mb), True
        worker.replica, worker.replicas, worker.index = replica, replicas, ExampleIndex(SHARD_ROWS)
        reads.append(list(worker._read("train", local_shuffle_buffer_size=8 * mb, local_shuffle_seed=replica)))
    return reads


@pytest.mark.parametrize("mb", [1, 2, 8])
def test_pipeline_replicas_read_full_micro_batches_of_their_own_share_and_end_together(monkeypatch, mb):
    """Each first-stage rank keeps its replica's examples of a shuffled read: its micro-batches hold exactly
    micro_batch_size rows but for its last, every example falls to one replica once, and the replicas' batch counts
    differ by one at most where the longer share's last batch is a single row (left at the lockstep end)."""
    index, replicas = ExampleIndex(SHARD_ROWS), 2
    reads = _replica_reads(monkeypatch, mb, replicas)
    for replica, batches in enumerate(reads):
        assert [len(b["example_id"]) for b in batches[:-1]] == [mb] * (len(batches) - 1)
        assert 1 <= len(batches[-1]["example_id"]) <= mb
        for b in batches:
            assert (index(b["example_id"]) % replicas == replica).all()
            assert (b["input_ids"] == b["example_id"] * 10).all()  # columns stay aligned
    read = np.concatenate([b["example_id"] for batches in reads for b in batches])
    assert sorted(index(read).tolist()) == list(range(index.num_examples))
    counts = [len(batches) for batches in reads]
    in_lockstep = min(counts)
    left = [b for batches in reads for b in batches[in_lockstep:]]
    assert max(counts) - in_lockstep <= 1 and all(len(b["example_id"]) == 1 for b in left)


# -- the held-out set ---------------------------------------------------------------------------------------------

V = 5000


def _eval_rows(n: int, equal: bool = False) -> dict:
    """n eval examples as jobs/pretrain._eval_rows ships them (list columns as object arrays), dynamic masking; all
    of one length with `equal` (most BERT examples are max_seq_len long)."""
    rng = np.random.default_rng(0)
    rows = np.empty(n, dtype=object)
    rows[:] = [np.concatenate([[2], rng.integers(10, V, 30 if equal else rng.integers(5, 40)), [3],
                               rng.integers(10, V, 9), [3]]) for _ in range(n)]
    return {"input_ids": rows, "num_a_tokens": np.array([len(r) - 10 for r in rows]),
            "next_sentence_label": rng.integers(0, 2, n), "example_id": np.arange(1000, 1000 + n)}


def _scored(rows: dict, replicas: int, mb: int) -> dict:
    """Per example id, the masked ids and MLM labels its replica scores, each replica as a worker's evaluate does."""
    from bert_core.masking import MaskingConfig, PretrainingCollator
    from bert_core.tokenizer import SpecialIds
    from jobs.workers.pretrain_worker import eval_share

    special = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
    scored = {}
    for replica in range(replicas):
        collate = PretrainingCollator(special, V, 128, MaskingConfig(), seed=10**6)
        share = eval_share(rows, collate, replica, replicas)
        for i in range(0, len(share["example_id"]), mb):
            out = collate({k: v[i:i + mb] for k, v in share.items()})
            for j, example in enumerate(out["example_id"].tolist()):
                n = int(out["attention_mask"][j].sum())
                scored[example] = (out["input_ids"][j, :n].tolist(), out["mlm_labels"][j, :n].tolist())
    return scored


def test_the_eval_set_is_masked_alike_on_any_worker_count_and_micro_batch_size():
    """A run resubmitted on another worker count scores its after-training metrics on the examples and masks its
    before-training metrics had: dynamic masks are drawn into the whole set before it is split."""
    rows = _eval_rows(70)
    one = _scored(rows, replicas=1, mb=8)
    assert sorted(one) == list(range(1000, 1070))
    targets = sum(sum(label != -100 for label in labels) for _, labels in one.values())
    tokens = sum(len(labels) - 3 for _, labels in one.values())
    assert 0.12 < targets / tokens < 0.18  # masked: the 15% of the config
    assert _scored(rows, replicas=2, mb=8) == one
    assert _scored(rows, replicas=4, mb=5) == one
    equal = _eval_rows(33, equal=True)  # chunks of rows and masks of one length, a last chunk of one row
    assert _scored(equal, replicas=2, mb=8) == _scored(equal, replicas=1, mb=4) and len(_scored(equal, 3, 8)) == 33


def test_the_eval_set_is_as_large_on_any_worker_count(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs.config.pretrain import PretrainConfig
    from jobs.pretrain import _eval_rows as eval_rows

    pq.write_table(pa.table({"example_id": np.arange(5000)}), tmp_path / "eval-0.parquet")
    prepared = SimpleNamespace(eval_files=[str(tmp_path / "eval-0.parquet")])
    sizes = []
    for workers in (1, 2, 3, 4, 6, 8):
        cfg = PretrainConfig()
        cfg.scaling.num_workers, cfg.train.eval_batches, cfg.train.micro_batch_size = workers, 16, 32
        sizes.append(eval_rows(cfg, prepared, ["example_id"])["example_id"].tolist())
    assert sizes[0] == list(range(480)) and all(s == sizes[0] for s in sizes)  # 512 rows asked: 480 split in all
    cfg.scaling.num_workers = 7  # a count 48 has not among its divisors: as many rows each, fewer in all
    assert len(eval_rows(cfg, prepared, ["example_id"])["example_id"]) == 476


def test_a_small_eval_split_is_one_set_on_any_worker_count(tmp_path):
    """A split smaller than eval_batches x micro_batch_size (21 rows here): cut to a multiple of the replicas
    alone, it was 20 rows on two workers and 21 on one, and a run resubmitted on one worker scored its after-training
    metrics on another set than its before-training ones (seen in tests/e2e/test_resume.py)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs.config.pretrain import PretrainConfig
    from jobs.pretrain import _eval_rows as eval_rows

    pq.write_table(pa.table({"example_id": np.arange(21)}), tmp_path / "eval-0.parquet")
    prepared = SimpleNamespace(eval_files=[str(tmp_path / "eval-0.parquet")])
    sizes = set()
    for workers in (1, 2, 4, 8):
        cfg = PretrainConfig()
        cfg.scaling.num_workers = workers
        sizes.add(tuple(eval_rows(cfg, prepared, ["example_id"])["example_id"].tolist()))
    assert sizes == {tuple(range(16))}


def test_a_resubmission_with_another_micro_batch_scores_its_first_evaluations_set(tmp_path):
    """eval_batches x micro_batch_size rows: a run resubmitted with micro_batch_size 8 (it ran out of memory at 24)
    scored 32 examples after training against the 96 its before-training evaluation scored. Its checkpoint's record
    names the count; a new run (no checkpoint) takes the config's."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs.config.pretrain import PretrainConfig
    from jobs.pretrain import _eval_rows as eval_rows
    from jobs.runtime import resubmit

    pq.write_table(pa.table({"example_id": np.arange(500)}), tmp_path / "eval-0.parquet")
    prepared = SimpleNamespace(eval_files=[str(tmp_path / "eval-0.parquet")], path=str(tmp_path))
    cfg = PretrainConfig(run_name="r", output_dir=str(tmp_path / "runs"))
    cfg.train.eval_batches, cfg.train.micro_batch_size = 4, 24
    first = eval_rows(cfg, prepared, ["example_id"])["example_id"].tolist()
    assert first == list(range(96))
    checkpoint = tmp_path / "runs" / "r" / "checkpoint_000003"
    checkpoint.mkdir(parents=True)
    resubmit.record(checkpoint, "run-1", 30, {}, held_out=96)  # what the run read: 4 x 24
    (checkpoint.parent / "checkpoint_manager_snapshot.json").write_text(
        json.dumps({"latest_checkpoint_result": {"checkpoint_dir_name": checkpoint.name}}))
    cfg.train.micro_batch_size = 8
    assert eval_rows(cfg, prepared, ["example_id"])["example_id"].tolist() == first
    cfg.scaling.num_workers = 5  # 96 read, cut to 95 for 5 replicas; the cut count read again would give 45
    assert len(eval_rows(cfg, prepared, ["example_id"])["example_id"]) == 95
    cfg.run_name, cfg.scaling.num_workers = "new", 2
    assert len(eval_rows(cfg, prepared, ["example_id"])["example_id"]) == 32


def test_a_held_out_split_too_small_for_the_replicas_is_refused_not_scored_as_zero(tmp_path):
    """3 held-out examples on 4 replicas: no replica can score as many as the others, the set is empty, and an
    empty set's metrics are 0 loss and 0 accuracy, logged as eval/mlm_loss=0.0: a perfect model. Refused, naming
    the split and what to change."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bert_core.config import ConfigError
    from jobs.config.pretrain import PretrainConfig
    from jobs.pretrain import _eval_rows as eval_rows

    pq.write_table(pa.table({"example_id": np.arange(3)}), tmp_path / "eval-0.parquet")
    prepared = SimpleNamespace(eval_files=[str(tmp_path / "eval-0.parquet")], path=str(tmp_path))
    cfg = PretrainConfig()
    cfg.scaling.num_workers = 4
    with pytest.raises(ConfigError, match=rf"the held-out split of {tmp_path} has 3 examples, too few for 4 "
                                          r"data-parallel replicas .* raise data.eval_fraction"):
        eval_rows(cfg, prepared, ["example_id"])
    cfg.scaling.num_workers = 1
    assert len(eval_rows(cfg, prepared, ["example_id"])["example_id"]) == 3


def test_the_release_tokenizer_never_outruns_the_models_positions(tmp_path):
    """A model that trained 128 positions on a prepared set whose tokenizer says 512: transformers' truncation would
    keep tokens past the trained rows (or the table); the release says 128. One that trained 512 keeps 512. A new
    release replaces the old one whole (a write that fails keeps the old)."""
    import contextlib
    import json

    from jobs.runtime.release import fetch_release as _fetch_release

    (tmp_path / "ckpt" / "release").mkdir(parents=True)
    (tmp_path / "ckpt" / "release" / "config.json").write_text("{}")
    (tmp_path / "tok").mkdir()
    settings = {"model_max_length": 512, "do_lower_case": True}
    (tmp_path / "tok" / "tokenizer_config.json").write_text(json.dumps(settings))
    (tmp_path / "tok" / "vocab.txt").write_text("[PAD]\n")
    checkpoint = SimpleNamespace(as_directory=lambda: contextlib.nullcontext(str(tmp_path / "ckpt")))
    for positions, expected in ((128, 128), (512, 512)):
        release = tmp_path / f"release-{positions}"
        _fetch_release(checkpoint, release, str(tmp_path / "tok"), positions)
        settings = json.loads((release / "tokenizer_config.json").read_text())
        assert settings == {"model_max_length": expected, "do_lower_case": True}
        assert (release / "vocab.txt").is_file() and (release / "config.json").is_file()
    release = tmp_path / "release-512"
    (tmp_path / "tok" / "vocab.txt").unlink()
    (tmp_path / "tok" / "unreadable").mkdir()
    (tmp_path / "tok" / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(json.JSONDecodeError):
        _fetch_release(checkpoint, release, str(tmp_path / "tok"), 128)
    assert (release / "vocab.txt").is_file() and json.loads((release / "tokenizer_config.json").read_text()) == {
        "model_max_length": 512, "do_lower_case": True}  # the old release, whole
    assert not [p.name for p in tmp_path.iterdir() if "tmp" in p.name]
    from jobs.config.pretrain import PretrainConfig
    from jobs.pretrain import trained_positions

    cfg = PretrainConfig()
    cfg.data.max_seq_len, cfg.model.max_position_embeddings = 128, 512
    assert trained_positions(cfg) == 128
    cfg.phase2.max_steps = 10
    assert trained_positions(cfg) == 512


@pytest.mark.parametrize("name, peak", [("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H100 PCIe", 756e12),
                                        ("NVIDIA H100 NVL", 835e12), ("NVIDIA H200", 989e12),
                                        ("NVIDIA H200 NVL", 835e12), ("NVIDIA A100-SXM4-80GB", 312e12),
                                        ("Tesla T4", None)])
def test_mfu_is_against_the_peak_of_the_card_at_hand(name, peak, monkeypatch):
    """An H100 PCIe card peaks at 756 TFLOP/s, not the SXM part's 989: MFU against the wrong one understates it by
    1.3x. An unknown card reports no MFU, and neither does fp32 training."""
    from jobs.loops.metrics import peak_for
    from jobs.workers.pretrain_worker import peak_flops

    assert peak_for(name) == peak
    assert peak_flops(True, "fp32") is None and peak_flops(False, "bf16") is None
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)  # the card at hand, as the job asks for it
    monkeypatch.setattr("torch.cuda.get_device_name", lambda *device: name)
    assert peak_flops(True, "bf16") == peak


def test_a_training_split_smaller_than_the_reading_ranks_is_refused():
    """3 training examples on 4 data-parallel ranks: Ray's equal split hands every rank none in every epoch, and the
    loop would start epoch after epoch without a step, forever. Refused before the run; pipeline stages read on
    their first stage only, so 8 workers in 2 stages are 4 readers."""
    from bert_core.config import ConfigError
    from jobs.config.pretrain import PretrainConfig
    from jobs.pretrain import _readers

    prepared = SimpleNamespace(manifest={"shards": {"train": [{"rows": 2}, {"rows": 1}]}}, path="/data/prepared")
    cfg = PretrainConfig()
    cfg.scaling.num_workers = 4
    with pytest.raises(ConfigError, match=r"training split of /data/prepared has 3 examples, fewer than the 4 "):
        _readers(cfg, prepared)
    cfg.scaling.num_workers, cfg.deepspeed.pipeline_stages = 8, 2
    with pytest.raises(ConfigError, match="fewer than the 4 data-parallel workers"):
        _readers(cfg, prepared)
    cfg.scaling.num_workers = 3
    cfg.deepspeed.pipeline_stages = 1
    assert _readers(cfg, prepared) == 3

