"""A train row whose input the model sees as an evaluation row's leaves train (pipelines/tasks/roles.leak_keys): the
same text in other case or accents (an uncased tokenizer, the default, reads them alike), a sentence pair reversed
(QQP, MRPC and STS-B are symmetric), and exact duplicates as before; the carve's groups and digests are unchanged."""

from pipelines.tasks.roles import assign_roles, carve, group_key, leak_keys, split_digest


def rows():
    """A fixed input: single sentences and pairs (the pairs decide the groups: a pair's first sentence)."""
    return [{"id": str(i), "text_a": f"Review {i}: a film about {i % 7} people",
             "text_b": f"Question {i % 11}?" if i % 2 else None, "label": str(i % 2)} for i in range(80)]


def test_case_and_accent_variants_and_reversed_pairs_leave_train_as_exact_duplicates_do():
    train = [*rows(), {"id": "c", "text_a": "great MOVIE!   cafe", "text_b": None, "label": "1"},
             {"id": "p", "text_a": "Is it raining?", "text_b": "Will it rain today?", "label": "1"},
             {"id": "x", "text_a": "an exact  copy", "text_b": None, "label": "0"}]
    dev = [{"id": "d1", "text_a": "Great movie! Café", "text_b": None, "label": "1"},
           {"id": "d2", "text_a": "Will it rain today?", "text_b": "Is it raining?", "label": "1"},
           {"id": "d3", "text_a": "an exact copy", "text_b": None, "label": "0"}]
    split = assign_roles(train, {"dev": dev}, "classification", 0.2, 20)
    assert split.dropped["train_in_evaluation"] == 3
    kept = {r["id"] for r in split.train + split.select}
    assert not kept & {"c", "p", "x"} and len(kept) == 80
    # keys are added, never replaced: a pair's forward key differs from its reversal's; a single sentence has no other
    assert len(leak_keys(train[-2], "classification")) == 3 and len(leak_keys(train[-1], "classification")) == 2
    assert not leak_keys({"tokens": ["Paris", "is", "big"]}, "token-classification") & leak_keys(
        {"tokens": ["big", "is", "Paris"]}, "token-classification")  # words reversed are another sentence
    assert leak_keys({"tokens": ["PARIS", "is"]}, "token-classification") & leak_keys(
        {"tokens": ["Päris", "is"]}, "token-classification")


def test_the_carve_and_its_digests_are_those_of_the_content_keys_alone():
    """The same fixed input carves to the digests it gave before leak_keys took more keys (HEAD 8a294e4): the carve's
    groups, resubmission checks and the digests stored with earlier runs' versions stay valid."""
    data = rows()
    train, select = carve(data, group_key(data, "classification"), 0.2, 20)
    assert (len(train), len(select)) == (69, 11)
    assert split_digest(train) == "8b14dbc4667ea32fb7d068f6bab269ce9e4ff48cece8131bf2853228e2a00f57"
    assert split_digest(select) == "f3a08878bd79f47eff342d0a9ea66adfeab8d5accf98488b166c29c38b3954ca"
    dev = {"dev": [{"id": "d0", "text_a": "Review 3: a film about 3 people", "text_b": "Question 3?", "label": "1"}]}
    split = assign_roles(data, dev, "classification", 0.2, 20)
    assert split.dropped == {"train_in_evaluation": 1, "select_in_evaluation": 0, "select_in_train": 0}
    assert split_digest(split.train) == "b0c25ecfbed9557984226f93f757c3f84347361456d2f1bfcd8df1519bfff46c"
    assert split_digest(split.select) == "f3a08878bd79f47eff342d0a9ea66adfeab8d5accf98488b166c29c38b3954ca"
