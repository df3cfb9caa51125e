"""Every engine backend path trains on 2 Ray Train workers: ZeRO 0, 1, 2, ZeRO-3 (with CPU offload of
optimizer and parameters), LAMB (ours on CPU) under ZeRO-2, and a 2-stage pipeline; each with falling
loss and a release checkpoint. ZeRO-3 without offload steps on 2 ranks in test_resume.py (whose
world-size case continues it exactly on 1) and exports in tests/unit/test_engine.py. The ZeRO-2 run
logs to a real `mlflow server` that is killed mid-run and restarted: the run completes, reports the
outage, and every metric point arrives once."""

import threading
import time
from pathlib import Path

import pytest

from jobs.pretrain import run
from tests.e2e.quick import quick_config
from tests.mlflow_server import start_server

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name, overrides", [
    ("zero0", ["deepspeed.zero_stage=0"]),
    ("zero1", ["deepspeed.zero_stage=1"]),
    ("zero3-offload", ["deepspeed.zero_stage=3", "deepspeed.offload_optimizer=true",
                       "deepspeed.offload_params=true"]),
    ("lamb-zero2", ["deepspeed.zero_stage=2", "optim.name=lamb", "optim.lr=2e-2"]),
    # 2 stages x 2 replicas; rank 1 (stage 0) is SIGKILLed at step 35 and the run resumes from step 20.
    ("pipeline2x2", ["deepspeed.pipeline_stages=2", "deepspeed.zero_stage=1", "scaling.num_workers=4",
                     "scaling.cpus_per_worker=0.25", "train.checkpoint_every=20", "train.fail_at_step=35"]),
])
def test_backend_trains_with_falling_loss(ray_tmp, shared_data, name, overrides):
    cfg = quick_config(ray_tmp, name, "train.max_steps=40", "train.log_every=10", "train.eval_batches=4",
                       "optim.warmup_steps=5", *overrides, data_dir=shared_data)
    if name.startswith("pipeline"):
        cfg.train.record_ids_dir = str(ray_tmp / name)
        (ray_tmp / name).mkdir()
    result = run(cfg)
    m = result.metrics
    assert m["step"] == 40
    assert m["eval_after/mlm_loss"] < m["eval_before/mlm_loss"] - 0.5
    assert (Path(result.release_dir) / "model.safetensors").is_file()  # ZeRO-3 weights consolidated on export
    if name.startswith("pipeline"):
        assert (ray_tmp / name / f"failed-{name}").is_file()  # the worker really died, and the run resumed
        assert_replicas_read_disjoint_shares(ray_tmp / name)


def assert_replicas_read_disjoint_shares(record_dir: Path):
    """Only the first stage's 2 ranks read data, and at every step their examples differ."""
    files = sorted(p.name for p in record_dir.glob("ids-rank*.txt"))
    recorded_steps = [int(line.split()[1]) for line in (record_dir / files[0]).read_text().splitlines()]
    assert recorded_steps.count(20) == 1 and recorded_steps.count(21) == 2  # resumed at step 20, not from 0
    assert files == ["ids-rank0.txt", "ids-rank1.txt"]  # stage 0 = ranks 0 and 1 in DeepSpeed's topology
    steps = [{int(line.split()[1]): set(line.split()[3:]) for line in (record_dir / f).read_text().splitlines()}
             for f in files]
    assert steps[0].keys() == steps[1].keys() == set(range(1, 41))
    assert all(steps[0][s] and steps[1][s] and not steps[0][s] & steps[1][s] for s in range(1, 41))


def test_zero2_survives_a_tracking_server_outage(ray_tmp, shared_data, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    server = start_server(tmp_path)
    cfg = quick_config(ray_tmp, "zero2", "train.max_steps=40", "train.log_every=2", "train.eval_batches=4",
                       "optim.warmup_steps=5", "deepspeed.zero_stage=2", f"tracking.tracking_uri={server.uri}",
                       "tracking.flush_timeout_s=600",  # the end of training waits for a slow restart
                       data_dir=shared_data)
    client, down = MlflowClient(server.uri), {}

    def outage():
        """Kill the server (SIGKILL) once the first training point has arrived; bring it back 5 s later."""
        deadline = time.monotonic() + 3000  # bounded by the test timeout; a loaded machine starts training late
        while time.monotonic() < deadline:
            runs = client.search_runs([e.experiment_id for e in client.search_experiments()], "attributes.run_name = 'zero2'")
            if runs and client.get_metric_history(runs[0].info.run_id, "train/loss"):
                server.stop()
                down["at"] = time.monotonic()
                time.sleep(5)
                server.start(timeout_s=600)  # a loaded 2-core machine has taken minutes to start one
                down["for_s"] = time.monotonic() - down["at"]
                return
            time.sleep(0.2)

    killer = threading.Thread(target=outage, daemon=True)
    killer.start()
    try:
        result = run(cfg)
    finally:
        killer.join(timeout=60)
        server.stop()
    assert down.get("for_s", 0) >= 5, "the server was never taken down during the run"
    m = result.metrics
    assert m["step"] == 40 and m["eval_after/mlm_loss"] < m["eval_before/mlm_loss"] - 0.5
    assert m["tracking_failures"] >= 1 and m["tracking_undelivered"] == 0, m
    assert f"{int(m['tracking_failures'])} failed MLflow writes, retried: every buffered metric delivered" \
        in capsys.readouterr().out
    server.start(timeout_s=600)
    try:
        history = MlflowClient(server.uri).get_metric_history(result.mlflow["run_id"], "train/loss")
    finally:
        server.stop()
    assert sorted(p.step for p in history) == list(range(2, 41, 2))  # every window, once, outage or not
