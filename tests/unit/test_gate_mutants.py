"""The promotion gate's two decisions, property by property: the paired bootstrap (jobs/registry/scorer.py) and the rule
that reads it (jobs/promote.py's decide); no model, no MLflow. Written for the six mutants of paired_bootstrap and
decide that test_promote.py alone left alive (`make mutants`; BENCHMARKS.md, "Quality: mutation testing"): an
ignored seed, a first row never resampled, ties counted as wins, a point estimate at the margin called "within
the noise", and two messages."""

import numpy as np
import pytest

from jobs.registry.scorer import Scores, paired_bootstrap
from jobs.promote import PromoteConfig, decide, decide_first


class Recorded:
    """Per-row correctness as Scores, remembering every resample it was scored on."""

    def __init__(self, correct, value=None):
        self.correct = np.asarray(correct, dtype=float)
        self.resamples: list[np.ndarray] = []
        self.scores = Scores("dev/accuracy", float(self.correct.mean()) if value is None else value,
                             len(self.correct), self.on)

    def on(self, idx: np.ndarray) -> float:
        self.resamples.append(np.array(idx))
        return float(self.correct[idx].mean())


def one_row_apart(n: int = 8, row: int = -1):
    """(candidate, champion): equal on every row but `row`, which only the candidate gets right."""
    champion = np.arange(n) % 2 == 0
    champion[row] = False
    candidate = champion.copy()
    candidate[row] = True
    return Recorded(candidate), Recorded(champion)


def test_models_scored_on_different_rows_are_refused():
    with pytest.raises(ValueError, match=r"different rows \(5 vs 6\)"):
        paired_bootstrap(Recorded([1] * 5).scores, Recorded([1] * 6).scores, 100, 0.95, seed=0)


def test_each_resample_draws_n_rows_from_all_n_and_both_models_are_scored_on_the_same_one():
    n, samples = 6, 300
    mine, best = one_row_apart(n)
    paired_bootstrap(mine.scores, best.scores, samples, 0.95, seed=1)
    assert len(mine.resamples) == len(best.resamples) == samples
    for a, b in zip(mine.resamples, best.resamples):
        assert a.shape == (n,) and np.array_equal(a, b)  # paired: the same rows, repeats and all
    drawn = np.concatenate(mine.resamples)
    assert drawn.min() >= 0 and drawn.max() < n
    assert set(drawn.tolist()) == set(range(n))  # the first and the last row are drawn too


@pytest.mark.parametrize("row", [0, -1])
def test_a_row_only_the_candidate_gets_right_makes_it_better_on_the_resamples_that_draw_it(row):
    """The candidate is never worse, so a resample either ties (the row not drawn) or favours it: P(better) is the
    share of resamples that drew the row, about 1 - (1 - 1/n)^n, and ties do not count as better."""
    n, samples = 8, 2000
    mine, best = one_row_apart(n, row)
    e = paired_bootstrap(mine.scores, best.scores, samples, 0.95, seed=0)
    drew_it = np.mean([(r == row % n).any() for r in mine.resamples])
    assert e["p_better"] == pytest.approx(drew_it)
    assert abs(e["p_better"] - (1 - (1 - 1 / n) ** n)) < 0.04
    assert e["delta"] == pytest.approx(1 / n)


def test_the_bound_is_the_one_sided_quantile_of_the_resampled_deltas_and_p_better_their_share_above_zero():
    rng = np.random.default_rng(3)
    champion = rng.random(50) < 0.6
    candidate = np.where(rng.random(50) < 0.3, ~champion, champion)
    for confidence in (0.5, 0.8, 0.95, 0.99):
        mine, best = Recorded(candidate), Recorded(champion)
        e = paired_bootstrap(mine.scores, best.scores, 500, confidence, seed=4)
        deltas = np.array([candidate[r].mean() - champion[r].mean() for r in mine.resamples])
        assert e["lower_bound"] == pytest.approx(np.quantile(deltas, 1 - confidence))
        assert e["p_better"] == pytest.approx((deltas > 0).mean())
    low = paired_bootstrap(Recorded(candidate).scores, Recorded(champion).scores, 500, 0.99, seed=4)["lower_bound"]
    high = paired_bootstrap(Recorded(candidate).scores, Recorded(champion).scores, 500, 0.5, seed=4)["lower_bound"]
    assert low < high  # a higher level asks for more: its bound is lower


def test_delta_is_the_difference_on_every_row_not_a_resampled_estimate():
    mine = Recorded([1, 0, 1, 1], value=0.7)  # what score() measured on every row, given as is
    best = Recorded([0, 0, 1, 1], value=0.25)
    e = paired_bootstrap(mine.scores, best.scores, 100, 0.95, seed=0)
    assert e["delta"] == pytest.approx(0.45)
    assert set(e) == {"delta", "lower_bound", "p_better"}
    assert all(isinstance(v, float) for v in e.values())


def test_the_same_seed_draws_the_same_resamples_and_another_seed_others():
    rng = np.random.default_rng(0)
    champion = rng.random(40) < 0.5
    candidate = np.where(rng.random(40) < 0.4, ~champion, champion)

    def run(seed):
        return paired_bootstrap(Recorded(candidate).scores, Recorded(champion).scores, 200, 0.9, seed=seed)

    assert run(7) == run(7)
    assert run(7) != run(8)


# -- decide: the rule and the one line that explains it -------------------------------------------------------------

def evidence(lower_bound, delta, candidate=0.8125, champion=0.75):
    return {"candidate": candidate, "champion": champion, "delta": delta, "lower_bound": lower_bound, "p_better": 0.9}


def cfg(min_delta=0.0, confidence=0.95, samples=1000):
    return PromoteConfig(model="m", min_delta=min_delta, confidence=confidence, bootstrap_samples=samples)


@pytest.mark.parametrize("min_delta", [0.0, 0.02])
def test_promoted_exactly_when_the_lower_bound_is_above_min_delta(min_delta):
    assert decide(cfg(min_delta), evidence(min_delta + 1e-9, 0.1), "m", "2", "1", 10)[0] == "promoted"
    assert decide(cfg(min_delta), evidence(min_delta, 0.1), "m", "2", "1", 10)[0] == "kept"  # a tie is not a win
    assert decide(cfg(min_delta), evidence(min_delta - 0.01, 0.1), "m", "2", "1", 10)[0] == "kept"


def test_a_kept_candidate_is_told_whether_its_point_estimate_missed_the_margin_or_only_its_bound_did():
    def why(delta, min_delta=0.02):
        return decide(cfg(min_delta), evidence(-0.01, delta), "m", "2", "1", 10)[1]

    assert why(0.05).endswith("<= min_delta 0.02 (within the noise)")
    assert why(0.02).endswith("(below min_delta)")  # a point estimate at the margin does not clear it
    assert why(-0.03).endswith("(below min_delta)")


def test_the_reason_is_one_line_naming_every_number_the_decision_used():
    decision, reason = decide(cfg(min_delta=0.01, confidence=0.9, samples=400),
                              evidence(0.0125, 0.0625), "dev/accuracy", "5", "3", 320)
    assert decision == "promoted" and "\n" not in reason
    assert reason == ("v5 dev/accuracy 0.8125 vs champion v3 0.7500 on 320 rows: delta +0.0625, "
                      "one-sided 90% lower bound +0.0125 (400 paired resamples) > min_delta 0.01")
    _, kept = decide(cfg(), evidence(-0.0125, -0.0625, 0.6875, 0.75), "dev/f1", "7", "6", 99)
    assert kept == ("v7 dev/f1 0.6875 vs champion v6 0.7500 on 99 rows: delta -0.0625, "
                    "one-sided 95% lower bound -0.0125 (1000 paired resamples) <= min_delta 0 (below min_delta)")


@pytest.mark.parametrize("level, shown", [(0.995, "99.5%"), (0.975, "97.5%"), (0.95, "95%"), (0.99, "99%"),
                                          (0.57, "57%")])
def test_the_bounds_level_is_said_exactly(level, shown):
    """Written with `:.0%`, confidence=0.995 read "one-sided 100% lower bound" (a bound at no level) and 0.975 "98%"."""
    c = cfg(confidence=level)
    assert f", one-sided {shown} lower bound +0.0100 " in decide(c, evidence(0.01, 0.03), "m", "2", "1", 10)[1]
    first = decide_first(c, {"candidate": 0.8, "lower_bound": 0.7}, "m", "1", 10)[1]
    assert f"on 10 rows, one-sided {shown} lower bound 0.7000 (" in first


def test_a_bound_on_too_few_groups_promotes_nothing_and_says_so():
    """Two equal models: on 2 groups one was promoted in 20% of trials at 95% (3: 18%, 6: 10%); a user's QA file of a
    few long contexts is such an evaluation. Below MIN_GROUPS the candidate is kept, the sentence saying why; a first
    champion with no min_score is promoted as before (no bound is read)."""
    from jobs.registry.gate import MIN_GROUPS

    cfg = PromoteConfig(model="m", min_delta=0.0, min_score=0.5)
    clear = {"candidate": 0.9, "champion": 0.5, "delta": 0.4, "lower_bound": 0.3, "p_better": 1.0}
    for groups, decision in ((MIN_GROUPS - 1, "kept"), (MIN_GROUPS, "promoted")):
        said = decide(cfg, {**clear, "groups": groups}, "dev/f1", "2", "1", 120)
        assert said[0] == decision and (f"only {groups} groups" in said[1]) is (decision == "kept"), said
        first = decide_first(cfg, {"candidate": 0.9, "lower_bound": 0.8, "groups": groups}, "dev/f1", "2", 120)
        assert first[0] == decision, first
    assert decide_first(PromoteConfig(model="m"), {"candidate": 0.9, "lower_bound": 0.8, "groups": 3}, "dev/f1", "2",
                        120)[0] == "promoted"
