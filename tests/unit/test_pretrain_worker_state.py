"""jobs/workers/pretrain_worker.py's state across a checkpoint, an epoch end and a log: the RNG a resume puts back, the
data position's bitmap, each epoch's shuffle, the per-step id ledger the resume tests read (tests/e2e/records.py), the
rates a log window reports, and the rank listing each checkpoint part ends with. The stub workers are
tests/unit/test_pretrain_worker.py's and test_pretrain_worker_windows.py's."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import ray.train
import torch

from jobs.engine.checkpoint_parts import RANK_FILES, missing_parts
from jobs.engine.seam import StepStats
from jobs.loops.data_position import DataPosition, ExampleIndex
from jobs.workers.pretrain_worker import Prepared, Worker
from tests.unit.test_pretrain_worker import ShuffledShard
from tests.unit.test_pretrain_worker_windows import SavingEngine, _checkpointing_worker


def _saved_position(folder: Path) -> DataPosition:
    return DataPosition.from_bytes((folder / "data_position.npz").read_bytes())


def test_a_resumed_worker_draws_the_dropout_numbers_the_uninterrupted_one_would(reports, monkeypatch, tmp_path):
    """build_engine seeds torch on every rank (torch.manual_seed): without rng.npz's state put back after it, a resumed
    run's dropout masks repeat the ones its first steps drew."""
    first = _checkpointing_worker(tmp_path)
    first.step = 6
    torch.manual_seed(5)
    torch.rand(3)  # the steps before the checkpoint
    first.checkpoint({}, last=False)
    uninterrupted = torch.rand(4)

    def load(d, **kw):
        torch.manual_seed(0)  # what building the engine does
        return dict(first.engine.state)

    second = _checkpointing_worker(tmp_path)
    second._load_engine = load
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: ray.train.Checkpoint.from_directory(str(reports[0][1])))
    second.restore()
    assert torch.equal(torch.rand(4), uninterrupted)


def test_a_checkpoint_after_an_epoch_end_marks_only_the_new_epochs_ids(reports, tmp_path):
    """The ids consumed since the last checkpoint belong to the epoch that ended: marked in the new epoch's bitmap, they
    were skipped in it (a resume reads only the unmarked ones)."""
    w = _checkpointing_worker(tmp_path)
    w.index, w.pending_ids = ExampleIndex([10]), [np.array([3, 8])]  # epoch 0's last micro-batch
    w._new_epoch(None)
    w.pending_ids.append(np.array([1, 5]))
    w.step = 4
    w.checkpoint({}, last=False)
    saved = _saved_position(reports[0][1])
    assert saved.epoch == 1 and np.flatnonzero(saved.consumed).tolist() == [1, 5]


def test_each_epoch_is_shuffled_anew_and_alike_on_a_rerun(monkeypatch):
    """The local shuffle's seed takes the epoch: every epoch read in the order of the first trains on the same
    sequence of micro-batches each time. The same seed, epoch and rank read the same order (a resume relies on it)."""
    monkeypatch.setattr(ray.train, "get_dataset_shard", lambda name: ShuffledShard(np.arange(64)))

    def order(epoch: int, seed: int = 1, rank: int = 0) -> tuple:
        w = Worker.__new__(Worker)  # only what _open_epoch and _read use
        w.t, w.pipelined, w.rank, w.first_epoch = SimpleNamespace(micro_batch_size=8, seed=seed), False, rank, epoch
        w._prepare = lambda raw: raw
        return tuple(np.concatenate([b["example_id"] for b in w._open_epoch(epoch)]).tolist())

    epochs = [order(epoch) for epoch in range(4)]
    assert len(set(epochs)) == 4 and all(sorted(e) == list(range(64)) for e in epochs)
    assert [order(epoch) for epoch in range(4)] == epochs
    assert order(0, seed=2) != epochs[0] and order(0, rank=1) != epochs[0]


# -- the loop, driven with plain batches ----------------------------------------------------------------------------

class LoopEngine:
    """Steps the optimizer every `grad_accum` finite micro-batches; a batch marked "nan" is skipped as the data-parallel
    engine skips a non-finite one (no step, not counted toward the accumulation)."""

    objective = SimpleNamespace(metrics=lambda sums: {"mlm_acc": 0.5})
    lr, skipped_steps = 1e-4, 0

    def __init__(self, grad_accum: int):
        self.grad_accum, self.finite = grad_accum, 0

    def grad_norm(self):
        return 1.0

    def step(self, batch, inject_nan=False):
        if batch["nan"]:
            return StepStats(math.nan, {}, optimizer_stepped=False, finite=False)
        self.finite += 1
        return StepStats(1.0, {}, optimizer_stepped=self.finite % self.grad_accum == 0)


def _micro(ids: list[int], nan: bool = False, tokens: int = 8) -> Prepared:
    return Prepared({"example_id": np.array(ids)}, {"attention_mask": np.ones((len(ids), tokens)), "nan": nan}, 0)


def _looping_worker(tmp_path: Path, items: list, *, max_steps: int, grad_accum: int = 1, pipelined: bool = False,
                    replicas: int = 1, world: int = 1) -> tuple[Worker, list]:
    """A worker whose run() takes `items` (None: an epoch's end) and logs into the list returned with it."""
    from bert_core.config import tiny
    from jobs.loops.loss_guard import LossGuard

    w = Worker.__new__(Worker)  # only what run() uses, restore() and the checkpoints stubbed
    w.rank, w.world, w.attempt, w.rollbacks, w.carried = 0, world, 7, 0, None
    w.pipelined, w.replica, w.replicas = pipelined, 0, replicas
    w.t = SimpleNamespace(max_steps=max_steps, log_every=max_steps, checkpoint_every=0, grad_accum_steps=grad_accum)
    w.cfg = SimpleNamespace(model=tiny(), data=SimpleNamespace(max_seq_len=8), scaling=SimpleNamespace(use_gpu=False),
                            deepspeed=SimpleNamespace(precision="bf16"),
                            faults=SimpleNamespace(record_ids_dir=str(tmp_path)))
    w.step, w.mask_next, w.pending_ids, w.step_ids = 0, 0, [], []
    w.position, w.index, w.guard = DataPosition.start(10), ExampleIndex([10]), LossGuard(0)
    w.faults = SimpleNamespace(nan_now=lambda *a: False, maybe_fail=lambda *a: None)
    w.restore, w.checkpoint = lambda: None, lambda *a: None
    w.evaluate = lambda: {"mlm_acc": 0.1, "mlm_loss": 7.0}
    w.engine, w.stream, logged = LoopEngine(grad_accum), iter(items), []
    w.logger = SimpleNamespace(log=lambda metrics, step: logged.append(metrics))
    return w, logged


def test_the_id_ledger_holds_each_steps_trained_micro_batches_in_their_own_epochs(tmp_path):
    """grad_accum_steps 2: step 2 trains epoch 0's last micro-batch and epoch 1's first, step 3 two of epoch 1 around a
    skipped non-finite one. The ledger took the last two micro-batches consumed, from a list the epoch end emptied:
    step 2 lost its epoch-0 half, and step 3 named the skipped micro-batch and not one it trained."""
    from tests.e2e.records import effective_ids

    items = [_micro([0, 1]), _micro([2, 3]), _micro([4, 5]), None, _micro([6, 7]),
             _micro([0, 1]), _micro([8, 9], nan=True), _micro([2, 3])]
    w, _ = _looping_worker(tmp_path, items, max_steps=3, grad_accum=2)
    w.run()
    assert (tmp_path / "ids-rank0.txt").read_text().splitlines() == [
        "7 1 0 0 1 2 3", "7 2 0 4 5", "7 2 1 6 7", "7 3 1 0 1 2 3"]
    assert sorted(effective_ids(tmp_path, 0)) == [0, 1, 2, 3, 4, 5]
    assert sorted(effective_ids(tmp_path, 1)) == [0, 1, 2, 3, 6, 7]
    assert w.step_ids == [] and w.position.epoch == 1


def test_a_later_pipeline_stage_writes_no_id_ledger(tmp_path):
    """A later stage reads no data (NO_DATA: its input is stage 0's activations), so its steps train no ids of its own:
    it wrote an empty ids-rank2.txt, which tests/e2e/test_zero_stages.py's list of ledgers does not expect."""
    from jobs.workers.pretrain_worker import NO_DATA

    w, _ = _looping_worker(tmp_path, [NO_DATA, NO_DATA], max_steps=2, pipelined=True, replicas=1, world=4)
    w.rank, w.engine.step = 2, lambda batch, inject_nan=False: StepStats(1.0, {}, optimizer_stepped=True)
    w.run()
    assert w.step == 2 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("pipelined", [False, True])
def test_a_log_windows_rates_count_every_replica_once(pipelined, monkeypatch, tmp_path):
    """Data parallel, the window is every rank's already (all-reduced by _run_window: one process here, the sum is its
    own), so its rates are not multiplied again; a pipeline's window is its replica's, times the replicas. MFU divides
    by every device (2 replicas x 2 stages). The window's clock reads 10 s."""
    from jobs.loops import metrics
    from jobs.loops.metrics import MetricsWindow, flops_per_token
    from jobs.workers import pretrain_worker

    monkeypatch.setattr(pretrain_worker, "MetricsWindow", lambda: MetricsWindow(start=0.0))
    monkeypatch.setattr(metrics, "time", SimpleNamespace(perf_counter=lambda: 10.0))
    monkeypatch.setattr(pretrain_worker, "peak_flops", lambda *a: 1e12)
    w, logged = _looping_worker(tmp_path, [_micro([0, 1, 2, 3]), _micro([4, 5, 6, 7])], max_steps=2,
                                pipelined=pipelined, replicas=2, world=4 if pipelined else 2)
    w.run()
    replicas = 2 if pipelined else 1  # 8 rows and 64 tokens read here
    train = logged[-1]
    assert train["train/samples_per_s"] == pytest.approx(8 * replicas / 10)
    assert train["train/tokens_per_s"] == pytest.approx(64 * replicas / 10)
    assert train["train/mfu"] == pytest.approx(64 * replicas / 10 * flops_per_token(w.cfg.model, 8) / (1e12 * w.world))


# -- what a checkpoint part lists -----------------------------------------------------------------------------------

class ExportingEngine(SavingEngine):
    def export(self, out_dir):
        Path(out_dir).mkdir(parents=True)
        (Path(out_dir) / "model.safetensors").write_bytes(b"w" * 64)


def _listed_alike(folder: Path, rank: int) -> None:
    """Every file of the folder (one rank's part) is in its listing, with its size; the listing is whole."""
    listing = folder / RANK_FILES.format(rank)
    files = {p.relative_to(folder).as_posix(): p.stat().st_size for p in folder.rglob("*") if p.is_file()}
    files.pop(listing.name)
    assert json.loads(listing.read_text()) == files


@pytest.mark.parametrize("last", [False, True])
def test_a_pretraining_checkpoint_part_lists_every_file_it_holds(last, reports, tmp_path):
    """The rank listing is the part's last file (jobs/engine/checkpoint_parts.py): a file written after it is no file
    missing_parts can find missing. Rank 0's data position, RNG states, continuation record, topology and tracking
    counts, and the final report's release, are all listed."""
    from jobs.registry.metric_logger import COUNTS_FILE

    w = _checkpointing_worker(tmp_path)
    w.step, w.engine, w.evaluate = 6, ExportingEngine(), lambda: {"mlm_acc": 0.5, "mlm_loss": 2.0}
    w.cfg.tracking = SimpleNamespace(flush_timeout_s=0)
    w.logger = SimpleNamespace(save_counts=lambda d: (Path(d) / COUNTS_FILE).write_text("{}"),
                               close=lambda timeout: {}, log=lambda *a, **kw: None)
    w.checkpoint({}, last=last)
    folder = reports[0][1]
    held = {p.name for p in folder.iterdir()}
    assert {"engine", "data_position.npz", "rng.npz", "continuation.json", "topology.json", COUNTS_FILE} <= held
    assert ("release" in held) == last
    _listed_alike(folder, 0)
    assert missing_parts(folder) == []


def test_a_finetuning_checkpoint_part_lists_every_file_it_holds(reports, tmp_path):
    from jobs.config.sections import OptimConfig
    from jobs.registry.metric_logger import COUNTS_FILE
    from jobs.workers.finetune_worker import Worker as FinetuneWorker

    w = FinetuneWorker.__new__(FinetuneWorker)  # only what _report() uses
    w.rank, w.config = 0, {"mlflow_run_id": "run-1", "basis": {}}
    saved = lambda path, client_state: Path(path).mkdir(parents=True) or (Path(path) / "states.pt").write_bytes(b"s")
    w.engine = SimpleNamespace(save=saved, optim=OptimConfig(warmup_steps=2))
    w.logger = SimpleNamespace(save_counts=lambda d: (Path(d) / COUNTS_FILE).write_text("{}"))
    w.best_dir = tmp_path / "best"
    w.best_dir.mkdir()
    (w.best_dir / "model.safetensors").write_bytes(b"w" * 64)
    w.loop = SimpleNamespace(step=3, total=10, state=lambda: {"step": 3}, best_history=lambda: [])
    w._report({"accuracy": 0.5}, checkpoint=True, final=False)
    folder = reports[0][1]
    assert {"engine", "state.json", "history.json", "model", "rng-rank0.npy", COUNTS_FILE} <= {
        p.name for p in folder.iterdir()}
    _listed_alike(folder, 0)
