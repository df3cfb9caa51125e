"""Promotion's gate: the decision, and its one sentence, from the evidence the scorer's bootstrap gave
(jobs/promote.py judges; jobs/registry/scorer.py scores and resamples), and its record on the candidate version."""

from __future__ import annotations

from jobs.config.promote import PromoteConfig

# a judgement's evidence: the candidate's score and its bootstrap's groups; its lower bound alone, or, against a
# champion, the champion's score and the paired bootstrap's delta, lower bound and P(better) (scorer)
EVIDENCE = ("candidate", "groups", "lower_bound", "champion", "delta", "p_better")
# Fewer groups of rows than this (a QA context's questions, a document's sentences are one) and a bootstrap's bound
# is narrower than its level says: of two equally good models one was promoted in 20% of trials on 2 groups, 18% on
# 3, 10% on 6 and 6% on 30, at 95% (a review's simulation, 400 trials each). A bound is not trusted below it.
MIN_GROUPS = 10


def _too_few_groups(e: dict) -> str:
    """The sentence of a judgement whose bound rests on fewer than MIN_GROUPS groups, "" where it does not."""
    groups = int(e.get("groups", MIN_GROUPS))
    if groups >= MIN_GROUPS:
        return ""
    return (f": its rows form only {groups} groups (a QA context, a document), too few for a bootstrap's bound to "
            f"hold its level ({MIN_GROUPS} at least); evaluate on more contexts or documents (task.dev_file)")


def decide_first(cfg: PromoteConfig, e: dict, metric: str, ours: str, rows: int) -> tuple[str, str]:
    """("promoted" or "kept", the sentence) for a candidate with no champion to beat: its bound against min_score."""
    line = (f"no champion yet; v{ours} {metric} {e['candidate']:.4f} on {rows} rows, one-sided "
            f"{cfg.confidence * 100:g}% lower bound {e['lower_bound']:.4f} ({cfg.bootstrap_samples} resamples)")
    if cfg.min_score is None:
        return "promoted", line
    if few := _too_few_groups(e):
        return "kept", f"{line}, not compared with min_score {cfg.min_score:g}{few}"
    if e["lower_bound"] >= cfg.min_score:
        return "promoted", f"{line} >= min_score {cfg.min_score:g}"
    return "kept", f"{line} < min_score {cfg.min_score:g}"


def decide(cfg: PromoteConfig, e: dict, metric: str, ours: str, theirs: str, rows: int) -> tuple[str, str]:
    """("promoted" or "kept", the decision in one sentence) from the paired bootstrap's evidence `e`."""
    line = (f"v{ours} {metric} {e['candidate']:.4f} vs champion v{theirs} {e['champion']:.4f} on {rows} rows"
            + (f" in {e['groups']:.0f} groups" if e.get("groups", rows) != rows else "") + ": "
            f"delta {e['delta']:+.4f}, one-sided {cfg.confidence * 100:g}% lower bound {e['lower_bound']:+.4f} "
            f"({cfg.bootstrap_samples} paired resamples)")
    if few := _too_few_groups(e):
        return "kept", f"{line}, not compared with min_delta {cfg.min_delta:g}{few}"
    if e["lower_bound"] > cfg.min_delta:
        return "promoted", f"{line} > min_delta {cfg.min_delta:g}"
    why = "below min_delta" if e["delta"] <= cfg.min_delta else "within the noise"
    return "kept", f"{line} <= min_delta {cfg.min_delta:g} ({why})"


def tag_version(client, model: str, version: str, tags: dict[str, str], run_id: str) -> None:
    """The candidate version's promotion.* `tags`, its evidence of an earlier judgement (an EVIDENCE key this one
    lacks: judged against a champion then, none now) deleted first. The decision reads "recording" until the last
    write, which sets it: a write that fails between leaves no version saying "promoted" (or "kept") over another
    judgement's numbers; the version and the promotion run (`run_id`) then say "failed", with the error."""
    from jobs.registry import tracking

    client.set_model_version_tag(model, version, "promotion.decision", "recording")
    try:
        before = client.get_model_version(model, version).tags
        for k in EVIDENCE:
            if f"promotion.{k}" not in tags and f"promotion.{k}" in before:
                client.delete_model_version_tag(model, version, f"promotion.{k}")
        last = {"promotion.decision": tags["promotion.decision"]}
        for k, v in [*((k, v) for k, v in tags.items() if k not in last), *last.items()]:
            client.set_model_version_tag(model, version, k, v)
    except Exception as exc:
        try:
            why = tracking.redact(f"{tags['promotion.decision']}, but its evidence could not be recorded on the "
                                  f"version: {type(exc).__name__}: {exc}")[:5000]
            for k, v in {"decision": "failed", "reason": why}.items():
                client.set_model_version_tag(model, version, f"promotion.{k}", v)
                client.set_tag(run_id, k, v)
        except Exception:  # noqa: BLE001 - the registry down for these too: the write's error is the one
            pass
        raise
