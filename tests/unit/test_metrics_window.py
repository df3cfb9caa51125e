"""jobs/loops/metrics.py's step window: what a pipeline engine's steps average to, and the rates a summary reports
over a known elapsed time (the pretraining worker's tests log with micro_batches=1 and no peak FLOPs)."""

from types import SimpleNamespace

import pytest

from jobs.engine.seam import StepStats
from jobs.loops import metrics
from jobs.loops.metrics import MetricsWindow


def test_a_pipeline_steps_loss_weighs_as_many_micro_batches_as_it_averages():
    """A pipeline engine reports once per step, its loss the mean over grad_accum micro-batches: a step of 4 at 2.0
    and one micro-batch at 6.0 average (2 * 4 + 6) / 5 over the window, not (2 + 6) / 5."""
    w = MetricsWindow(start=0.0)
    w.add(StepStats(2.0, micro_batches=4), tokens=512, samples=16, data_wait=0.0)
    w.add(StepStats(6.0, micro_batches=1), tokens=128, samples=4, data_wait=0.0)
    assert w.micro_steps == 5
    assert w.summary(1, 1.0, None, devices=1)["loss"] == pytest.approx((2.0 * 4 + 6.0) / 5)


def test_mfu_divides_by_every_devices_peak_and_the_data_wait_is_a_share_of_the_window(monkeypatch):
    """4 s of window on 2 replicas x 2 pipeline stages: a rank's 1,000 tokens are 2,000 of the run's, 500 tokens/s; at
    3 FLOPs a token against 4 devices of 500 FLOP/s each, MFU 0.75 (1,500 / 2,000). Waiting 1 s of the 4 for data
    is a share of 0.25."""
    monkeypatch.setattr(metrics, "time", SimpleNamespace(perf_counter=lambda: 6.0))
    w = MetricsWindow(start=2.0)
    w.add(StepStats(1.0), tokens=600, samples=5, data_wait=0.25)
    w.add(StepStats(1.0), tokens=400, samples=3, data_wait=0.75)
    m = w.summary(2, 3.0, 500.0, devices=4)
    assert m["tokens_per_s"] == pytest.approx(500.0) and m["samples_per_s"] == pytest.approx(4.0)
    assert m["mfu"] == pytest.approx(500.0 * 3.0 / (500.0 * 4))
    assert m["data_wait_share"] == pytest.approx(0.25)
    assert "mfu" not in w.summary(2, 3.0, None, devices=4)  # a device of no known peak: no MFU, not a guess
