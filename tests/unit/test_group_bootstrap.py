"""The promotion bootstrap resamples groups of rows (jobs/registry/scorer.py): rows that share a SQuAD context, a
pair's first sentence or a document are drawn together, both models on the same draw, and where every row is its
own group the result is the row bootstrap's, bit for bit. No model: per-row correctness as Scores."""

import numpy as np
import pytest

from jobs.registry import scorer
from pipelines.tasks.roles import group_key


class Recorded:
    """Per-row correctness as Scores in `groups`, remembering every resample it was scored on."""

    def __init__(self, correct, groups=None):
        self.correct = np.asarray(correct, dtype=float)
        self.resamples: list[np.ndarray] = []
        self.scores = scorer.Scores("dev/accuracy", float(self.correct.mean()), len(self.correct), self.on,
                                    groups=groups)

    def on(self, idx: np.ndarray) -> float:
        self.resamples.append(np.array(idx))
        return float(self.correct[idx].mean())


def clustered(groups: int = 10, size: int = 20, wins: int = 6):
    """(candidate, champion, groups): `groups` groups of `size` rows whose rows all agree; the candidate is right
    and the champion wrong on every row of the first `wins` groups, the other way round on the rest. Per row the
    candidate looks clearly better; per group it is 6 against 4, a coin could do that."""
    labels = np.repeat(np.arange(groups), size)
    candidate = labels < wins
    return candidate, ~candidate, labels


def test_a_bound_the_row_bootstrap_makes_too_optimistic_on_clustered_rows_is_widened_by_the_groups():
    candidate, champion, labels = clustered()
    by_row = scorer.paired_bootstrap(Recorded(candidate).scores, Recorded(champion).scores, 1000, 0.95, seed=0)
    by_group = scorer.paired_bootstrap(Recorded(candidate, labels).scores, Recorded(champion, labels).scores,
                                       1000, 0.95, seed=0)
    assert by_row["delta"] == by_group["delta"] == pytest.approx(0.2)
    assert by_row["lower_bound"] > 0.05  # 200 "independent" rows: the gate would promote on 10 coin flips
    assert by_group["lower_bound"] < 0 < by_row["lower_bound"]
    assert by_group["delta"] - by_group["lower_bound"] > 2 * (by_row["delta"] - by_row["lower_bound"])
    alone = scorer.lower_bound(Recorded(candidate).scores, 1000, 0.95, seed=0)
    assert scorer.lower_bound(Recorded(candidate, labels).scores, 1000, 0.95, seed=0) < alone - 0.1


def test_each_resample_takes_whole_groups_as_many_as_there_are_and_both_models_the_same_rows():
    labels = np.array(["c", "a", "c", "b", "a", "c", "d", "b", "c", "e"])  # interleaved, of sizes 4, 2, 2, 1, 1
    candidate, champion = Recorded(np.arange(10) % 2, labels), Recorded(np.arange(10) % 3 == 0, labels)
    assert candidate.scores.n_groups == 5
    assert candidate.scores.groups.tolist() == [0, 1, 0, 2, 1, 0, 3, 2, 0, 4]  # numbered by first row
    scorer.paired_bootstrap(candidate.scores, champion.scores, 200, 0.95, seed=5)
    assert len(candidate.resamples) == len(champion.resamples) == 200
    assert all(np.array_equal(a, b) for a, b in zip(candidate.resamples, champion.resamples))
    members = {g: np.flatnonzero(labels == g) for g in "abcde"}
    for idx in candidate.resamples:
        times = np.bincount(idx, minlength=10)
        draws = {g: times[rows[0]] for g, rows in members.items()}
        assert all((times[rows] == draws[g]).all() for g, rows in members.items())  # a group whole, or not at all
        assert sum(draws.values()) == 5 and len(idx) == sum(draws[g] * len(rows) for g, rows in members.items())
    assert set(np.concatenate(candidate.resamples).tolist()) == set(range(10))


def row_bootstrap(candidate: np.ndarray, champion: np.ndarray, samples: int, confidence: float, seed: int):
    """The bootstrap before groups, as it was written: n rows drawn from n, each on its own."""
    n, rng = len(candidate), np.random.default_rng(seed)
    deltas, alone = np.empty(samples), []
    for b in range(samples):
        idx = rng.integers(0, n, n)
        deltas[b] = float(candidate[idx].mean()) - float(champion[idx].mean())
    rng = np.random.default_rng(seed)
    for _ in range(samples):
        alone.append(float(candidate[rng.integers(0, n, n)].mean()))
    return float(np.quantile(deltas, 1 - confidence)), float((deltas > 0).mean()), float(
        np.quantile(alone, 1 - confidence))


@pytest.mark.parametrize("labels", [None, "reversed", "names"])
def test_rows_each_their_own_group_give_the_row_bootstrap_bit_for_bit(labels):
    rng = np.random.default_rng(9)
    champion = rng.random(57) < 0.6
    candidate = np.where(rng.random(57) < 0.3, ~champion, champion).astype(float)
    champion = champion.astype(float)
    groups = {None: None, "reversed": np.arange(57)[::-1], "names": [f"row {i}" for i in range(57)]}[labels]
    mine, best = Recorded(candidate, groups).scores, Recorded(champion, groups).scores
    assert mine.n_groups == 57 and mine.groups.tolist() == list(range(57))
    e = scorer.paired_bootstrap(mine, best, 500, 0.95, seed=3)
    bound, p_better, alone = row_bootstrap(candidate, champion, 500, 0.95, seed=3)
    assert (e["lower_bound"], e["p_better"]) == (bound, p_better)  # equal, not approximately
    assert scorer.lower_bound(mine, 500, 0.95, seed=3) == alone


def test_models_whose_rows_are_grouped_differently_are_refused_and_groups_must_cover_every_row():
    a, b = np.repeat([0, 1, 2], 2), np.array([0, 0, 1, 1, 1, 2])
    with pytest.raises(ValueError, match=r"grouped differently \(3 vs 3 groups\)"):
        scorer.paired_bootstrap(Recorded([1] * 6, a).scores, Recorded([0] * 6, b).scores, 100, 0.95, seed=0)
    with pytest.raises(ValueError, match=r"groups must label each of the 6 rows once, got shape \(5,\)"):
        Recorded([1] * 6, [0, 0, 1, 1, 2])


def test_rows_that_are_all_one_group_are_refused_not_bounded_at_their_point_value():
    """One SQuAD context: every resample would be every row, so any positive delta would clear the gate."""
    one = [0] * 6
    with pytest.raises(ValueError, match=r"the 6 evaluation rows form 1 group\(s\).*at least 2"):
        scorer.paired_bootstrap(Recorded([1] * 6, one).scores, Recorded([0] * 6, one).scores, 100, 0.95, seed=0)
    with pytest.raises(ValueError, match=r"dev/accuracy: the 6 evaluation rows form 1 group\(s\)"):
        scorer.lower_bound(Recorded([1] * 6, one).scores, 100, 0.95, seed=0)
    two = Recorded([1, 1, 1, 0, 0, 1], [0, 0, 0, 1, 1, 1]).scores  # 3 of 3 right, 1 of 3: the second drawn twice
    assert scorer.lower_bound(two, 100, 0.95, seed=0) == pytest.approx(1 / 3)


def partition(keys: list) -> list[int]:
    """Keys numbered by first appearance."""
    ids: dict = {}
    return [ids.setdefault(k, len(ids)) for k in keys]


def test_row_groups_are_the_groups_the_carve_keeps_whole():
    squad = [{"id": f"q{i}", "question": f"q{i}", "context": c} for i, c in enumerate("xyxxzy")]
    assert scorer.row_groups(squad, "question-answering").tolist() == [0, 1, 0, 0, 2, 1]
    pairs = [{"text_a": a, "text_b": f"h{i}"} for i, a in enumerate(["p", "q", "p ", "r", "q"])]
    assert scorer.row_groups(pairs, "classification").tolist() == [0, 1, 0, 2, 1]  # whitespace as the tokenizer
    singles = [{"text_a": t, "text_b": None} for t in ["a", "b", "c", "a"]]
    assert scorer.row_groups(singles, "classification").tolist() == [0, 1, 2, 0]  # the same input: one group
    sentences = [{"document": i // 3, "tokens": [f"w{i}"]} for i in range(36)]  # 12 documents of 3 sentences
    assert scorer.row_groups(sentences, "token-classification").tolist() == [i // 3 for i in range(36)]
    few = sentences[:15]  # 5 documents: too few for the carve to split by, still 5 groups of correlated sentences
    assert scorer.row_groups(few, "token-classification").tolist() == [i // 3 for i in range(15)]
    # a CoNLL file without -DOCSTART-: every sentence in one document, which made one group, and promotion refused
    # every such model ("a bootstrap needs at least two"); by sentence, as the carve splits it
    one = [{"document": "dev.conll:doc0", "tokens": [f"w{i}"]} for i in range(6)]
    assert scorer.row_groups(one, "token-classification").tolist() == list(range(6))
    for rows, kind in ((squad, "question-answering"), (pairs, "classification"), (sentences, "token-classification")):
        key = group_key(rows, kind)
        assert scorer.row_groups(rows, kind).tolist() == partition([key(r) for r in rows])


def test_a_resample_without_a_value_is_refused_not_a_nan_bound():
    """Pearson over a resample of rows whose gold scores are all equal is undefined: with three rows, a resample
    often draws one row three times. A NaN among the deltas made the bound NaN, and `NaN > min_delta` kept the
    champion with NaN as its evidence. Refused, naming the metric and how many resamples had no value."""
    gold = np.array([0.0, 1.0, 2.0])

    def pearson(idx):
        g = gold[idx]
        return float(np.corrcoef(g, g + 0.1)[0, 1]) if g.std() > 0 else float("nan")

    scores = scorer.Scores("dev/pearson", 1.0, 3, pearson)
    with pytest.raises(ValueError, match=r"dev/pearson: \d+ of 300 bootstrap resamples of the 3 evaluation rows "
                                         r"\(3 groups\) have no value"):
        scorer.paired_bootstrap(scores, scores, 300, 0.95, seed=0)
    with pytest.raises(ValueError, match=r"have no value"):
        scorer.lower_bound(scores, 300, 0.95, seed=0)
