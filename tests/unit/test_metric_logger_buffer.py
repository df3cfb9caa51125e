"""jobs/registry/metric_logger.py's buffer cap through a long outage, with a fake MLflow client (the approach of
tests/unit/test_metric_logger.py): beyond max_buffered points the oldest go, counted, and the newest are the ones
delivered when the store is back."""

import warnings

from jobs.registry.metric_logger import RankZeroLogger


class Store:
    """A fake MLflow client: down (every write fails) or up (every write lands, its points kept)."""

    def __init__(self):
        self.up, self.points = False, []

    def log_batch(self, run_id, metrics):
        if not self.up:
            raise ConnectionError("store down")
        self.points += [(m.key, m.step) for m in metrics]


def test_a_full_buffer_drops_its_oldest_points_and_counts_them():
    store = Store()
    logger = RankZeroLogger("http://tracking.invalid", "run-1", 0, max_buffered=5, system_metrics_s=0)
    logger.client = store
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the outage's one warning
        for step in range(8):
            logger.log({"train/loss": 1.0 / (step + 1)}, step=step)
    assert [m.step for m in logger.pending] == [3, 4, 5, 6, 7]  # the newest, oldest first
    assert logger.dropped == 3
    assert logger.counts()["tracking_undelivered"] == 8  # 3 dropped + 5 still buffered: none is in MLflow
    store.up = True
    assert logger.close(0)["tracking_undelivered"] == 3
    assert store.points == [("train/loss", step) for step in range(3, 8)]
