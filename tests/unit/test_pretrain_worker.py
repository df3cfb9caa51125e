"""jobs/workers/pretrain_worker.py's parts that need no Ray cluster: a pipeline replica's micro-batches, the
position metrics a log window reports and the window a checkpoint carries (the RNG states a checkpoint carries:
tests/unit/test_checkpoint_parts.py)."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import ray.train
import torch

from jobs.loops.data_position import DataPosition, ExampleIndex
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


def test_a_log_window_reports_the_optimizer_steps_deepspeed_skipped():
    """fp16 overflow: DeepSpeed skips the update but counts the step; the count reaches train/skipped_steps."""
    worker = Worker.__new__(Worker)
    worker.engine = SimpleNamespace(lr=2e-4, grad_norm=lambda: 0.5, skipped_steps=3)  # lr: the next step's
    worker.step, worker.step_lr, worker.position, worker.rollbacks = 40, 1e-4, DataPosition.start(4), 0
    worker.guard = SimpleNamespace(skipped=1)
    metrics = worker._position_metrics()
    assert metrics == dict(step=40, epoch=0, lr=1e-4, grad_norm=0.5, nonfinite_total=1, rollbacks=0, skipped_steps=3)


def test_no_checkpoint_is_saved_inside_a_nonfinite_streak():
    """A pipeline step whose update the optimizer dropped (NaN) still counts: a checkpoint due then waits for the
    next finite step, so a rollback never restores weights the streak was giving NaN from. The last step saves."""
    worker = Worker.__new__(Worker)
    worker.t, worker.guard, worker.save_owed = SimpleNamespace(checkpoint_every=4), SimpleNamespace(streak=0), False
    saved = []
    for step, streak in enumerate([0, 0, 0, 1, 2, 0, 0, 0, 0, 1], start=1):  # NaN at steps 4, 5 and 10
        worker.step, worker.guard.streak = step, streak
        if worker._checkpoint_due(last=step == 10):
            saved.append(step)
    assert saved == [6, 8, 10]


def test_a_resubmitted_jobs_rollback_compounds_with_the_earlier_jobs_each_counted_once(monkeypatch):
    """The rollback ledger lives one job: a resubmission's starts empty, and scale_lr sets the rate from optim.lr, so
    the first rollback of job 2 (x0.5) trained at job 1's rate again (0.5 x lr, not 0.25 x). The checkpoint carries
    the rollbacks; a restart within a job finds its own in both, counted once."""
    from jobs.workers import pretrain_worker

    monkeypatch.setattr(pretrain_worker.ray, "get", lambda ref: ref)
    scaled = []

    def worker(saved, ledger):
        w = Worker.__new__(Worker)
        w.rank, w.step, w.saved_rollbacks = 1, 30, saved
        w.ledger = SimpleNamespace(rollbacks=SimpleNamespace(remote=lambda: ledger))
        w.engine = SimpleNamespace(scale_lr=scaled.append)
        w._apply_rollbacks()
        return w

    job1 = {"id": "a", "step": 12, "lr_factor": 0.5}
    job2 = {"id": "b", "step": 25, "lr_factor": 0.5}
    assert worker([job1], [job2]).rollbacks == 2 and scaled == [0.25]  # resubmitted, then rolled back
    assert worker([job1, job2], [job2]).rollbacks == 2 and scaled[-1] == 0.25  # a restart within job 2
    assert worker([job1], []).rollback_log == [job1] and scaled[-1] == 0.5  # resubmitted, no rollback yet
    scaled.clear()
    assert worker([], []).rollbacks == 0 and scaled == []


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


# -- the log window across a resume -------------------------------------------------------------------------------


class SavingEngine:
    """What checkpoint() and restore() call on an engine; save writes the client state as DeepSpeed does
    (torch.save) and reads it back into `state` the way a resume does (weights_only)."""

    optim, data_parallel = SimpleNamespace(warmup_steps=10, schedule="linear", poly_power=0.5), (0, 1)

    def save(self, path, client_state):
        Path(path).mkdir(parents=True)
        torch.save(client_state, Path(path) / "client_state.pt")
        self.state = torch.load(Path(path) / "client_state.pt", weights_only=True)

    def resumed_plan(self, *args, **kwargs):
        return ""


def _checkpointing_worker(tmp_path: Path) -> Worker:
    w = Worker.__new__(Worker)  # only what checkpoint(), restore() and _run_window() use
    w.rank, w.world, w.step, w.mask_next, w.pending_ids, w.before, w.rollback_log = 0, 1, 0, 0, [], {}, []
    w.t, w.pipelined, w.carried = SimpleNamespace(max_steps=200), False, None
    w.cfg = SimpleNamespace(faults=SimpleNamespace(record_ids_dir=None), output_dir=str(tmp_path), run_name="pretrain",
                            deepspeed=SimpleNamespace(zero_stage=0, pipeline_stages=1, partition_method="parameters"))
    w.config = {"mlflow_run_id": "run-1", "basis": {}}
    w.position, w.index = DataPosition.start(10), lambda ids: ids.astype(np.int64)
    w.guard, w.engine = SimpleNamespace(skipped=0), SavingEngine()
    w.faults = SimpleNamespace(maybe_fail=lambda *a: None, upload_fn=lambda *a: None)
    w.logger = SimpleNamespace(save_counts=lambda d: None, restore_counts=lambda d: None)
    w._start_masks, w._apply_rollbacks = lambda index: None, lambda: None
    return w


def _window(losses: list[float], nonfinite: int = 0):
    """One rank's log window: a micro-batch a step at these losses, 10 masked tokens each."""
    from jobs.loops.metrics import MetricsWindow

    w = MetricsWindow(nonfinite=nonfinite)
    for loss in losses:
        sums = {"mlm_loss_sum": 10 * loss, "mlm_correct": float(int(3 * loss)), "mlm_count": 10.0}
        w.add(SimpleNamespace(micro_batches=1, loss=loss, sums=sums), tokens=128, samples=4, data_wait=0.0)
    return w


def test_a_resumed_pretraining_run_logs_its_first_window_as_an_uninterrupted_one(reports, monkeypatch, tmp_path):
    """Logged every 4 steps, checkpointed at step 6 (a NaN skipped at 5), restarted: the first log, at step 8, averaged
    steps 7-8 alone where an uninterrupted run averages 5-8. The checkpoint keeps the window's loss, the objective's
    sums and the non-finite count, every rank's (two alike here: the all-reduce doubles), and the resumed worker adds
    them after its own all-reduce, once. Tokens and samples stay its own: its rates are of its own steps and seconds.
    A checkpoint from before the window was kept restores with an empty one."""
    from jobs.workers import pretrain_worker

    monkeypatch.setattr(pretrain_worker, "summed", lambda values: [2 * v for v in values])  # a second rank alike
    losses = [4.0, 3.6, 3.1, 2.9, 2.7, 2.2, 2.05, 1.9]
    clean = _checkpointing_worker(tmp_path)._run_window(_window(losses[4:8], nonfinite=1))

    first = _checkpointing_worker(tmp_path)
    first.step = 6
    first.checkpoint({}, last=False, window=_window(losses[4:6], nonfinite=1))
    second = _checkpointing_worker(tmp_path)
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: ray.train.Checkpoint.from_directory(str(reports[0][1])))
    second._load_engine = lambda d, **kw: dict(first.engine.state)
    second.restore()
    resumed = second._run_window(_window(losses[6:8]))
    assert (resumed.micro_steps, resumed.nonfinite) == (clean.micro_steps, clean.nonfinite) == (8, 1)
    assert resumed.loss == pytest.approx(clean.loss) and resumed.sums == pytest.approx(clean.sums)
    assert (resumed.tokens, resumed.samples) == (clean.tokens / 2, clean.samples / 2)  # steps 7-8 only

    older = _checkpointing_worker(tmp_path)
    older._load_engine = lambda d, **kw: {k: v for k, v in first.engine.state.items() if k != "log_window"}
    older.restore()
    alone = older._run_window(_window(losses[6:8]))
    assert (alone.micro_steps, alone.loss, alone.nonfinite) == (4, pytest.approx(2 * (2.05 + 1.9)), 0)


@pytest.mark.parametrize("lr", [1e-3, 2e-3])
def test_a_resubmission_after_a_rollback_says_the_rates_its_steps_train_at(lr, reports, monkeypatch, tmp_path,
                                                                            caplog):
    """Job 1 (lr 1e-3, 20 steps, 2 warmup) rolled back once (x0.5) and saved at step 12; job 2 resubmits with 40 steps
    (at optim.lr `lr`). Its [resume] line priced the checkpoint's plan at the unscaled peak (0.000444 for 0.000222),
    and was built before the rollbacks were applied: at a new optim.lr it named 0.00147 for the next step, trained at
    half that. Both rates are the scaled ones now, the next step's the engine's."""
    from jobs.config.sections import OptimConfig
    from jobs.engine.ds_config import lr_lambda
    from jobs.engine.seam import EngineBase
    from jobs.workers import pretrain_worker

    class PlanEngine(EngineBase):  # the seam's schedule over a plain torch optimizer: no DeepSpeed
        data_parallel = (0, 1)

    optim = OptimConfig(lr=1e-3, warmup_steps=2)

    def engine(max_steps, optim):
        groups = [{"params": [torch.nn.Parameter(torch.zeros(2))], "weight_decay": 0.01},
                  {"params": [torch.nn.Parameter(torch.zeros(1))], "weight_decay": 0.0}]
        opt = torch.optim.SGD(groups, lr=optim.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(optim, max_steps))
        ds = SimpleNamespace(device="cpu", gradient_clipping=lambda: 1.0)
        return PlanEngine(ds, opt, sched, None, optim=optim, max_steps=max_steps, zero_stage=0)

    job1 = engine(20, optim)
    for step in range(12):
        if step == 10:
            job1.scale_lr(0.5)  # the rollback
        job1.optimizer.step()
        job1.scheduler.step()
    first = _checkpointing_worker(tmp_path)
    first.step, first.t.max_steps, first.engine.optim = 12, 20, optim
    first.rollback_log = [{"id": "a", "step": 10, "lr_factor": 0.5}]
    first.checkpoint({}, last=False)

    def load(d, **kw):  # what DeepSpeed's load_checkpoint and Engine.load do with the saved optimizer and schedule
        second.engine = engine(40, OptimConfig(lr=lr, warmup_steps=2))
        built = [{"weight_decay": g["weight_decay"]} for g in second.engine.optimizer.param_groups]
        second.engine.optimizer.load_state_dict(job1.optimizer.state_dict())
        second.engine.scheduler.load_state_dict(job1.scheduler.state_dict())
        second.engine._keep_config(built)
        return dict(first.engine.state)

    second = _checkpointing_worker(tmp_path)
    second.t.max_steps, second._load_engine = 40, load
    del second._apply_rollbacks  # the worker's own: the resubmission's ledger is empty
    second.ledger = SimpleNamespace(rollbacks=SimpleNamespace(remote=lambda: []))
    monkeypatch.setattr(pretrain_worker.ray, "get", lambda ref: ref)
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: ray.train.Checkpoint.from_directory(str(reports[0][1])))
    with caplog.at_level("WARNING", logger="bert_foundry.train"):
        second.restore()
    now, was = 0.5 * lr * lr_lambda(optim, 40)(12), 0.5 * 1e-3 * lr_lambda(optim, 20)(12)
    assert second.engine.lr == pytest.approx(now) and job1.lr == pytest.approx(was)
    assert [r.getMessage() for r in caplog.records if r.name == "bert_foundry.train"] == [
        f"[resume] train.max_steps 20 -> 40: the learning-rate schedule is planned over the new total, so the next "
        f"step trains at lr {now:.3g}, where the checkpoint's plan was at {was:.3g}"]


def test_a_checkpoint_marks_every_ranks_ids_and_gives_each_rank_its_own_mask_count(reports, monkeypatch, tmp_path):
    """Two ranks (the second's gathers faked): the saved position marks the ids both trained since the last
    checkpoint, and each rank resumes its collator at its own count, not rank 0's (nor at 0: its masks would repeat
    the ones it drew from the start)."""
    from bert_core.masking import PretrainingCollator
    from bert_core.tokenizer import SpecialIds
    from jobs.workers import pretrain_worker

    other = {"ids": np.array([2, 9]), "mask_next": np.array(8)}  # rank 1's, as all_gather_object hands them over

    def gather(value):
        if isinstance(value, dict):  # the RNG states: rank 1's alike (test_checkpoint_parts.py restores each)
            return [value, value]
        return [value, other["ids" if value.ndim else "mask_next"]]

    monkeypatch.setattr(pretrain_worker, "_gather", gather)
    first = _checkpointing_worker(tmp_path)
    first.step, first.mask_next, first.pending_ids = 6, 5, [np.array([1, 4]), np.array([7])]
    first.checkpoint({}, last=False)
    saved = Path(reports[0][1])
    assert np.flatnonzero(DataPosition.from_bytes((saved / "data_position.npz").read_bytes()).consumed).tolist() == \
        [1, 2, 4, 7, 9]
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: ray.train.Checkpoint.from_directory(str(saved)))
    for rank, count in ((0, 5), (1, 8)):
        w = _checkpointing_worker(tmp_path)
        w.rank, w._load_engine, w._open_stream = rank, lambda d, **kw: dict(first.engine.state), lambda: None
        del w._start_masks  # the worker's own
        w.collate = PretrainingCollator(SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4), 100, 16, None, seed=rank)
        w.restore()
        assert (w.collate.batches_produced, w.mask_next) == (count, count), rank
        assert np.flatnonzero(w.position.consumed).tolist() == [1, 2, 4, 7, 9]


def test_a_phase_2_resume_names_the_phase2_settings_it_was_changed_with(caplog):
    """A two-phase job resubmitted with more phase 2 steps, another phase 2 warmup or lr said "train.max_steps 20 ->
    40", "optim.warmup_steps", "optim.lr": settings the user had not touched (phase 2's are phase2.*)."""
    from jobs.config.pretrain import PretrainConfig
    from jobs.config.sections import OptimConfig
    from jobs.engine.ds_config import lr_lambda
    from jobs.engine.seam import EngineBase

    class PlanEngine(EngineBase):  # the seam's schedule over a plain torch optimizer: no DeepSpeed
        data_parallel = (0, 1)

    def engine(max_steps, optim):
        opt = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.zeros(2))], "weight_decay": 0.01}], lr=optim.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(optim, max_steps))
        ds = SimpleNamespace(device="cpu", gradient_clipping=lambda: 1.0)
        return PlanEngine(ds, opt, sched, None, optim=optim, max_steps=max_steps, zero_stage=0)

    cfg = PretrainConfig()
    cfg.phase2.max_steps, cfg.data.sources = 40, ["/corpus"]
    assert cfg.setting_names() == {"total": "train.max_steps", "warmup": "optim.warmup_steps", "lr": "optim.lr"}
    saved = engine(20, OptimConfig(lr=1e-3, warmup_steps=1))
    for _ in range(5):
        saved.optimizer.step()
        saved.scheduler.step()
    resumed = engine(40, OptimConfig(lr=2e-3, warmup_steps=2))
    resumed.names = cfg.phase2_run("/runs/pretrain-phase1", "/runs/tokenizer").setting_names()
    resumed.optimizer.load_state_dict(saved.optimizer.state_dict())
    resumed.scheduler.load_state_dict(saved.scheduler.state_dict())
    with caplog.at_level("WARNING"):
        resumed._keep_config([{"weight_decay": 0.01}])
    assert "this run's: phase 2's lr (phase2.lr, or optim.lr where that is 0) 0.001 -> 0.002" in caplog.text
    assert resumed.replanned(20, OptimConfig(lr=1e-3, warmup_steps=1)).startswith(
        "[resume] phase2.max_steps 20 -> 40, phase2.warmup_steps 1 -> 2: the learning-rate schedule is planned over")
    assert engine(40, OptimConfig()).replanned(20).startswith("[resume] train.max_steps 20 -> 40: ")  # phase 1's
