"""The console's progress line (jobs/loops/metrics.py), printed by pretraining and fine-tuning alike: its ETA, the
figure a user plans around, and its one live warning that the loss is diverging."""

from jobs.loops.metrics import format_duration, progress_line

WINDOW = {"loss": 1.0, "mlm_acc": 0.5, "lr": 1e-4, "tokens_per_s": 10.0, "samples_per_s": 1.0,
          "data_wait_share": 0.1}


def test_an_eta_past_an_hour_keeps_its_hours():
    """Hours and minutes past an hour, minutes and seconds below it: 2 h 05 m must not read as "5m00s"."""
    assert format_duration(2 * 3600 + 5 * 60) == "2h05m"
    assert format_duration(3600) == "1h00m"
    assert format_duration(65) == "1m05s"
    assert format_duration(-3) == "0m00s"  # a window that ran past its estimate: no negative ETA
    assert progress_line(5, 10, WINDOW, 7500).endswith("| eta 2h05m")


def test_the_progress_line_names_the_micro_batches_skipped_as_non_finite():
    """Micro-batches skipped for a NaN or inf loss are named while training runs; a window without any says
    nothing."""
    assert "skipped" not in progress_line(5, 10, {**WINDOW, "nonfinite_skipped": 0}, 60)
    line = progress_line(5, 10, {**WINDOW, "nonfinite_skipped": 2}, 60)
    assert line.endswith("| eta 1m00s | skipped 2 non-finite"), line
