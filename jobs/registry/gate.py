"""Promotion's gate: the decision, and its one sentence, from the evidence the scorer's bootstrap gave
(jobs/promote.py judges; jobs/registry/scorer.py scores and resamples)."""

from __future__ import annotations

from jobs.config.promote import PromoteConfig


def decide_first(cfg: PromoteConfig, e: dict, metric: str, ours: str, rows: int) -> tuple[str, str]:
    """("promoted" or "kept", the sentence) for a candidate with no champion to beat: its bound against min_score."""
    line = (f"no champion yet; v{ours} {metric} {e['candidate']:.4f} on {rows} rows, one-sided "
            f"{cfg.confidence * 100:g}% lower bound {e['lower_bound']:.4f} ({cfg.bootstrap_samples} resamples)")
    if cfg.min_score is None:
        return "promoted", line
    if e["lower_bound"] >= cfg.min_score:
        return "promoted", f"{line} >= min_score {cfg.min_score:g}"
    return "kept", f"{line} < min_score {cfg.min_score:g}"


def decide(cfg: PromoteConfig, e: dict, metric: str, ours: str, theirs: str, rows: int) -> tuple[str, str]:
    """("promoted" or "kept", the decision in one sentence) from the paired bootstrap's evidence `e`."""
    line = (f"v{ours} {metric} {e['candidate']:.4f} vs champion v{theirs} {e['champion']:.4f} on {rows} rows"
            + (f" in {e['groups']:.0f} groups" if e.get("groups", rows) != rows else "") + ": "
            f"delta {e['delta']:+.4f}, one-sided {cfg.confidence * 100:g}% lower bound {e['lower_bound']:+.4f} "
            f"({cfg.bootstrap_samples} paired resamples)")
    if e["lower_bound"] > cfg.min_delta:
        return "promoted", f"{line} > min_delta {cfg.min_delta:g}"
    why = "below min_delta" if e["delta"] <= cfg.min_delta else "within the noise"
    return "kept", f"{line} <= min_delta {cfg.min_delta:g} ({why})"
