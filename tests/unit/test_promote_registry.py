"""Promotion against the registry's real states: a champion moved in the last request, deleted champions in the
history, a registry that fails a request, a champion registered without its task. Real MLflow (SQLite); the scoring
is replaced (promote_kit.promoting): these tests are about what moves, not about the models."""

import pytest

from jobs import promote
from tests.unit.promote_kit import NAME, champion_moved_while_recording, judge, promoting, toy_registry


def test_a_champion_moved_in_the_last_request_is_not_overwritten(tmp_path, empty_store, monkeypatch):
    """The move of @champion itself moves only from the champion judged against: another promotion that moved it
    after every check (here the checks see nothing, the move lands while the decision is recorded) is not
    overwritten; the decision is recorded refused and @challenger stays."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 3)
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    champion_moved_while_recording(monkeypatch, client, "3")
    with pytest.raises(ValueError, match=r"@champion moved from v1 to v3 while v2 was judged against v1"):
        judge(uri, tmp_path / "art", version=2)
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "3"
    assert str(client.get_model_version_by_alias(NAME, "challenger").version) == "2"
    assert client.get_model_version(NAME, "2").tags["promotion.decision"] == "refused"


def test_a_rollback_skips_deleted_champions_and_the_history_drops_them(tmp_path, empty_store):
    """Champions v1 -> v2 -> v3 and v2 deleted: a rollback restores v1 (it crashed asking for v2), and the history
    reads v1 alone; a version promoted after a deleted champion rolls back past it too."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 5)
    for v in "123":
        move_alias(client, NAME, "champion", v, f"promoted: v{v}")
    client.delete_model_version(NAME, "2")
    assert promote.champions(client, NAME) == ["1", "3"]
    assert judge(uri, tmp_path / "art", rollback=True).candidate == "1"
    assert promote.champions(client, NAME) == ["1"]
    move_alias(client, NAME, "champion", "4", "promoted: v4")
    client.delete_model_version(NAME, "4")  # the champion deleted: MLflow drops its alias
    move_alias(client, NAME, "champion", "5", "promoted: v5 with no champion")
    assert promote.champions(client, NAME) == ["1", "5"]
    assert judge(uri, tmp_path / "art", rollback=True).candidate == "1"
    # a version that reigned twice: a rollback to it goes back to its latest reign, not its first
    for v in "3", "1", "3":
        move_alias(client, NAME, "champion", v, f"promoted: v{v}")
    assert promote.champions(client, NAME) == ["1", "3", "1", "3"]
    assert judge(uri, tmp_path / "art", rollback=True).candidate == "1"
    assert promote.champions(client, NAME) == ["1", "3", "1"]


def test_a_registry_error_is_not_read_as_no_champion(tmp_path, empty_store, monkeypatch):
    """A missing alias or model is none; a request the server failed raises (read as "no champion yet", it promoted
    a candidate judged against nothing)."""
    from mlflow.exceptions import MlflowException

    from jobs.registry.versions import version_by_alias

    uri, client = toy_registry(tmp_path, empty_store, 1)
    assert version_by_alias(client, NAME, "champion") is None and version_by_alias(client, "nope", "champion") is None

    def failing(name, alias):
        raise MlflowException("database is locked", error_code="INTERNAL_ERROR")

    monkeypatch.setattr(client, "get_model_version_by_alias", failing)
    with pytest.raises(MlflowException, match="database is locked"):
        version_by_alias(client, NAME, "champion")


def test_a_champion_without_its_task_is_not_judged_against(tmp_path, empty_store, monkeypatch):
    """A champion registered without task_config (by hand, or an older job) could be a model of another task: nothing
    is compared with it (it was skipped, and the candidate scored against it with the candidate's task)."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 1)
    old = client.create_model_version(NAME, str(tmp_path), client.get_model_version(NAME, "1").run_id)
    move_alias(client, NAME, "champion", str(old.version), "promoted: by hand")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    with pytest.raises(ValueError, match=r"v2 has no task_config tag"):
        judge(uri, tmp_path / "art", version=1)
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "2"


def test_a_champion_move_that_fails_leaves_the_version_saying_so_not_promoted(tmp_path, empty_store, monkeypatch):
    """The decision is recorded before @champion moves: a registry error on the move left the version tagged
    promoted while @champion never moved. The version says failed and why; the run ends FAILED."""
    from mlflow.tracking import MlflowClient

    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 1)
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))

    def refusing(client, name, alias, version, *args, **kwargs):
        if alias == "champion":
            raise ConnectionError("the registry went away")
        return move_alias(client, name, alias, version, *args, **kwargs)

    monkeypatch.setattr(promote, "move_alias", refusing)
    with pytest.raises(ConnectionError):
        judge(uri, tmp_path / "art", version=1)
    tags = client.get_model_version(NAME, "1").tags
    assert tags["promotion.decision"] == "failed" and "the registry went away" in tags["promotion.reason"]
    (run,) = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("toy-promotion").experiment_id])
    assert run.info.status == "FAILED"


def test_a_move_whose_record_fails_is_moved_back_or_said_to_have_happened(tmp_path, empty_store, monkeypatch):
    """@champion moved, then the move's record (a registered-model tag) failed: the alias pointed at v3 while the
    history, rollback's source, said v2, and the version was tagged "could not be moved". The move is undone; where
    the registry refuses that too, the version says @champion points at it."""
    from jobs.registry.versions import alias_history, move_alias

    uri, client = toy_registry(tmp_path, empty_store, 3)
    move_alias(client, NAME, "champion", "2", "promoted: v2")
    write_tag = client.set_registered_model_tag
    monkeypatch.setattr(client, "set_registered_model_tag", lambda *a: (_ for _ in ()).throw(ConnectionError("503")))
    with pytest.raises(ConnectionError):
        move_alias(client, NAME, "champion", "3", "promoted: v3")
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "2"
    assert [m.split(" (")[0] for m in alias_history(client, NAME)] == ["champion none -> v2 promoted: v2"]
    monkeypatch.setattr(client, "set_registered_model_tag", write_tag)

    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))

    def recorded_nothing(client, name, alias, version, *args, **kwargs):  # moved, then neither recorded nor undone
        if alias != "champion":
            return move_alias(client, name, alias, version, *args, **kwargs)
        client.set_registered_model_alias(name, alias, version)
        raise ConnectionError("503 on the record and on the move back")

    monkeypatch.setattr(promote, "move_alias", recorded_nothing)
    with pytest.raises(ConnectionError):
        judge(uri, tmp_path / "art", version=3)
    tags = client.get_model_version(NAME, "3").tags
    assert tags["promotion.decision"] == "promoted"
    assert "points at it, but its move is not in" in tags["promotion.reason"]


def test_a_squad_v1_champion_and_a_v2_candidate_are_not_comparable():
    """A v1 question answerer always answers; judged on v2 data by v2 rules it 'abstained' at a threshold of 0 it
    never chose (and it serves without abstaining). The same task name, kind and labels said nothing of it."""
    task = promote.judged_task({"name": "squad", "kind": "question-answering", "version_2": True,
                                "data_dir": "/squad"}, {})
    for version_2 in (False, "false"):
        with pytest.raises(ValueError, match=r"v1 \(champion\) is a SQuAD v1 model .* v2 a SQuAD v2 one: .*not "
                                             r"comparable"):
            promote.refuse_incomparable(task, {"name": "squad", "kind": "question-answering", "labels": task.labels,
                                               "version_2": version_2}, "2", "1")
    promote.refuse_incomparable(task, {"name": "squad", "kind": "question-answering", "labels": task.labels,
                                       "version_2": True}, "2", "1")
    sst2 = promote.judged_task({"name": "sst2", "data_dir": "/glue/SST-2"}, {})
    promote.refuse_incomparable(sst2, {"name": "sst2", "kind": sst2.kind, "labels": sst2.labels, "version_2": True},
                                "2", "1")  # the flag means nothing to a classifier


def test_a_champion_moved_outside_promote_is_in_the_history_a_rollback_restores(tmp_path, empty_store, monkeypatch):
    """@champion set by hand (MLflow's UI) from v1 to v2, then v3 promoted: the history knows v2 only from the
    move's old side, and a rollback restored v1, two reigns back, saying it rolled back; it restores v2."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 3)
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    client.set_registered_model_alias(NAME, "champion", "2")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    assert judge(uri, tmp_path / "art", version=3).decision == "promoted"
    assert promote.champions(client, NAME) == ["1", "2", "3"]
    assert judge(uri, tmp_path / "art", rollback=True).candidate == "2"
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "2"
    # set by hand again, with no promotion after it: a rollback restores the recorded champion it replaced
    client.set_registered_model_alias(NAME, "champion", "3")
    assert judge(uri, tmp_path / "art", rollback=True).candidate == "2"
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "2"
    # rolled back by hand to an earlier reign (v1): the reigns after it are withdrawn, not restored
    client.set_registered_model_alias(NAME, "champion", "1")
    with pytest.raises(ValueError, match=r"no previous champion to roll back to"):
        judge(uri, tmp_path / "art", rollback=True)


def test_a_champion_moved_back_by_hand_then_replaced_rolls_back_as_a_rollback_by_hand(tmp_path, empty_store):
    """v1 -> v2 promoted, @champion set back on v1 by hand (MLflow's UI), then v3 promoted: the history read the hand
    move as a new reign of v1 above v2 (v1, v2, v1, v3), so a second rollback restored v2, the version the operator
    had withdrawn. An unrecorded move back to an earlier reign withdraws the reigns after it, as rollback() reads it."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 4)
    for v in "12":
        move_alias(client, NAME, "champion", v, f"promoted: v{v}")
    client.set_registered_model_alias(NAME, "champion", "1")
    move_alias(client, NAME, "champion", "3", "promoted: v3")
    assert promote.champions(client, NAME) == ["1", "3"]
    assert judge(uri, tmp_path / "art", rollback=True).candidate == "1"
    with pytest.raises(ValueError, match=r"no previous champion to roll back to \(champion history: v1; @champion "
                                         r"is v1\)"):
        judge(uri, tmp_path / "art", rollback=True)
    # a hand move to a version that never reigned is a reign of its own, as before
    client.set_registered_model_alias(NAME, "champion", "4")
    move_alias(client, NAME, "champion", "2", "promoted: v2 again")
    assert promote.champions(client, NAME) == ["1", "4", "2"]


def test_a_version_a_rollback_restores_is_not_marked_withdrawn(tmp_path, empty_store):
    """Champions v1 -> v2 -> v1, then two rollbacks: the first withdraws v1 (tagged promotion.rolled_back), the second
    restores it; the live champion kept the tag that said it was withdrawn."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 2)
    for v in "121":
        move_alias(client, NAME, "champion", v, f"promoted: v{v}")
    assert judge(uri, tmp_path / "art", rollback=True).candidate == "2"
    assert "promotion.rolled_back" in client.get_model_version(NAME, "1").tags
    assert judge(uri, tmp_path / "art", rollback=True).candidate == "1"
    assert "promotion.rolled_back" not in client.get_model_version(NAME, "1").tags
    assert "promotion.rolled_back" in client.get_model_version(NAME, "2").tags


def test_a_second_judgement_leaves_no_evidence_of_the_first_on_the_version(tmp_path, empty_store, monkeypatch):
    """v2 kept against champion v1 (its tags: the champion's score, the delta, P(better)), then v1 deleted and v2
    judged again with no champion: promoted, and the first judgement's negative delta no longer beside it."""
    from types import SimpleNamespace

    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 2)
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    against = {"candidate": 0.8, "groups": 20, "champion": 0.85, "delta": -0.05, "lower_bound": -0.1, "p_better": 0.1}
    monkeypatch.setattr(promote, "_judge", lambda *a: ("kept", "not better", SimpleNamespace(metric="dev/score", n=20),
                                                       against))
    assert judge(uri, tmp_path / "art", version=2).decision == "kept"
    assert client.get_model_version(NAME, "2").tags["promotion.delta"] == "-0.050000"
    client.delete_model_version(NAME, "1")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    assert judge(uri, tmp_path / "art", version=2).decision == "promoted"
    tags = client.get_model_version(NAME, "2").tags
    assert {k for k in tags if k.startswith("promotion.") and k[10:] in promote.EVIDENCE} == {"promotion.candidate"}
    assert (tags["promotion.decision"], tags["promotion.champion_version"]) == ("promoted", "none")


def test_a_champion_move_that_fails_leaves_the_run_saying_so_as_the_version_does(tmp_path, empty_store, monkeypatch):
    """The registry refuses the move's history record, so the move is undone: the version said failed, and the
    promotion run, searched by its decision tag, still said promoted."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 2)
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    tag = MlflowClient.set_registered_model_tag

    def refused(self, name, key, value):
        if value.startswith("champion "):
            raise MlflowException("store hiccup", error_code="INTERNAL_ERROR")
        return tag(self, name, key, value)

    monkeypatch.setattr(MlflowClient, "set_registered_model_tag", refused)
    with pytest.raises(MlflowException, match="store hiccup"):
        judge(uri, tmp_path / "art", version=2)
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "1"
    tags = client.get_model_version(NAME, "2").tags
    run = client.get_run(tags["promotion.run_id"])
    assert tags["promotion.decision"] == run.data.tags["decision"] == "failed"
    assert run.data.tags["reason"] == tags["promotion.reason"] and "could not be moved" in tags["promotion.reason"]
    assert run.info.status == "FAILED"


def test_a_first_candidate_below_min_score_is_kept_and_made_no_champion(tmp_path, empty_store, monkeypatch):
    """With no champion, every first candidate was promoted, one at chance level too: min_score is a floor on its
    one-sided lower bound (the metric's units, as the command line gives it); unset, the first is promoted as before."""
    from types import SimpleNamespace

    from bert_core.config import ConfigError
    from jobs.registry.versions import version_by_alias

    cfg = promote.parse([NAME, "min_score=0.7"])[1]
    e = {"candidate": 0.72, "groups": 20, "lower_bound": 0.66}
    assert promote.decide_first(cfg, e, "dev/accuracy", "1", 20) == (
        "kept", "no champion yet; v1 dev/accuracy 0.7200 on 20 rows, one-sided 95% lower bound 0.6600 (1000 "
                "resamples) < min_score 0.7")
    assert promote.decide_first(cfg, {**e, "lower_bound": 0.7}, "dev/accuracy", "1", 20)[0] == "promoted"
    assert promote.decide_first(promote.parse([NAME])[1], e, "dev/accuracy", "1", 20)[0] == "promoted"
    with pytest.raises(ConfigError, match=r"min_score must be a finite number, got nan"):
        promote.parse([NAME, "min_score=.nan"])
    assert promote.parse([NAME, "min_score=null"])[1].min_score is None
    uri, client = toy_registry(tmp_path, empty_store, 1)
    monkeypatch.setattr(promote, "_judge", lambda cfg, *a: (*promote.decide_first(cfg, e, "dev/score", "1", 20),
                                                            SimpleNamespace(metric="dev/score", n=20), e))
    result = judge(uri, tmp_path / "art", version=1, min_score=0.7)
    assert result.decision == "kept" and version_by_alias(client, NAME, "champion") is None
    tags = client.get_model_version(NAME, "1").tags
    assert (tags["promotion.decision"], tags["promotion.min_score"]) == ("kept", "0.7")
    assert client.get_run(result.run_id).data.params["min_score"] == "0.7"


def test_an_empty_dev_file_names_no_new_rows_and_the_registered_rows_are_checked():
    """`task.dev_file=` (empty) is no file: the task carves dev from its training file again, rows the candidate may
    have trained on, so the registered rows' digest is still checked (only a named file skips it)."""
    from types import SimpleNamespace

    from bert_core.config import ConfigError
    from jobs.config.finetune import TaskConfig
    from jobs.promote import PromoteConfig
    from jobs.registry.evidence import same_data

    task = TaskConfig(name="files", kind="classification", labels=["a", "b"])
    rows = [{"text_a": "x", "label": 0}]
    candidate = SimpleNamespace(version="2", tags={"data.dev.sha256": "0" * 64})
    for given in ({"dev_file": ""}, {}):
        try:
            cfg = PromoteConfig(model=NAME, task=given).validate()
        except ConfigError:  # refused before any registry work: as good as checked
            continue
        with pytest.raises(ValueError, match=r"the 1 dev rows are not those v2 was evaluated on"):
            same_data(cfg, candidate, None, task, "dev", rows, ["a", "b"])
    named = PromoteConfig(model=NAME, task={"dev_file": "new_dev.csv"}).validate()
    same_data(named, candidate, None, task, "dev", rows, ["a", "b"])  # named rows: judged, not checked


def champions_1_then_2(tmp_path, empty_store):
    """Three registered versions, v1 then v2 crowned (@champion on v2, each move recorded), v3 to judge."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 3)
    for v in "12":
        move_alias(client, NAME, "champion", v, f"promoted: v{v}")
    return uri, client


def test_a_deleted_champion_is_not_read_as_no_champion_and_a_rollback_restores_the_one_before(tmp_path, empty_store,
                                                                                            monkeypatch):
    """Champions v1 -> v2, then v2 deleted (MLflow drops @champion): the next promotion took the "no champion yet"
    path and crowned v3 never compared with v1, and --rollback refused ("no previous champion ... history: v1").
    The promotion refuses, naming v1; the rollback restores v1, and v3 is then judged against it."""
    from jobs.registry.versions import version_by_alias

    uri, client = champions_1_then_2(tmp_path, empty_store)
    client.delete_model_version(NAME, "2")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    with pytest.raises(ValueError, match=r"@champion is unset, its champion's version deleted, but the one before "
                                         r"it, v1, is still registered: .*restore v1 with --rollback, then judge"):
        judge(uri, tmp_path / "art", version=3)
    assert version_by_alias(client, NAME, "champion") is None and version_by_alias(client, NAME, "challenger") is None
    back = judge(uri, tmp_path / "art", rollback=True)
    assert (back.decision, back.reason, back.candidate) == ("rolled back", "@champion unset -> v1", "1")
    assert promote.champions(client, NAME) == ["1"]
    assert "champion none -> v1 rollback: @champion unset, v1 restored" in promote.history(client, NAME)[-1]
    assert judge(uri, tmp_path / "art", version=3).champion == "1"  # judged against v1


def test_a_champion_alias_removed_by_hand_withdraws_it_and_a_rollback_goes_back_past_it(tmp_path, empty_store,
                                                                                       monkeypatch):
    """Champions v1 -> v2, then @champion removed from v2 by hand (MLflow's UI, to withdraw it): read as a deleted
    champion's, the promotion named v2 to restore and --rollback put back the model the user had withdrawn. The
    refusal says the alias was removed by hand; the rollback restores v1 and marks v2 withdrawn."""
    from jobs.registry.versions import version_by_alias

    uri, client = champions_1_then_2(tmp_path, empty_store)
    client.delete_registered_model_alias(NAME, "champion")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    with pytest.raises(ValueError, match=r"@champion is unset, its last champion v2 still registered \(the alias "
                                         r"removed by hand\): --rollback restores v1, the one before it"):
        judge(uri, tmp_path / "art", version=3)
    back = judge(uri, tmp_path / "art", rollback=True)
    assert (back.decision, back.reason, back.candidate) == ("rolled back", "@champion unset -> v1", "1")
    assert str(version_by_alias(client, NAME, "champion").version) == "1"
    assert "promotion.rolled_back" in client.get_model_version(NAME, "2").tags and promote.champions(client, NAME) == [
        "1"]
    assert judge(uri, tmp_path / "art", version=3).champion == "1"  # judged against v1


def test_a_rolled_back_version_is_not_judged_again_through_candidate(tmp_path, empty_store, monkeypatch):
    """After --rollback withdrew v2, @candidate still pointed at it: the next scheduled `promote NAME` judged it
    against v1 again, crowned it and cleared its mark, undoing the rollback unasked. Named with --version, it is
    judged (tests/unit/test_promote.py's gate test)."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 2)
    for v in "12":
        move_alias(client, NAME, "champion", v, f"promoted: v{v}")
    move_alias(client, NAME, "candidate", "2", "registered")
    judge(uri, tmp_path / "art", rollback=True)
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    with pytest.raises(ValueError, match=r"^sst-toy v2 \(@candidate\) was withdrawn by a rollback at \S+Z \(champion "
                                         r"v2 -> v1\): not judged again unless named: --version 2$"):
        judge(uri, tmp_path / "art")
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "1"
    assert "promotion.rolled_back" in client.get_model_version(NAME, "2").tags
    assert judge(uri, tmp_path / "art", version=2).decision == "promoted"


def test_two_promotions_of_one_version_at_once_leave_its_evidence_alone(tmp_path, empty_store, monkeypatch):
    """A CI retry or a double submit: two promotions of v2 against champion v1, the other one crowning v2 while this
    one scores (or while it records its decision). This one saw @champion "moved" (to v2 itself), overwrote v2's
    tags with refused ("v2 was never compared with v2") and exited 1: it says v2 is already champion, returns, and
    leaves the version's tags to the promotions that judged it promoted."""
    from types import SimpleNamespace

    from jobs.registry.versions import move_alias, version_by_alias

    for mine in ("promoted", "kept"):  # this one's own judgement of v2
        (tmp_path / mine).mkdir()
        uri, client = toy_registry(tmp_path / mine, empty_store, 2)
        move_alias(client, NAME, "champion", "1", "promoted: the first")
        other = {}

        def the_other_promotes_meanwhile(*args):
            monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
            other["run"] = judge(uri, tmp_path / mine / "art", version=2).run_id
            return mine, "this one's reason", SimpleNamespace(metric="dev/score", n=20), {"candidate": 0.5}

        monkeypatch.setattr(promote, "_judge", the_other_promotes_meanwhile)
        result = judge(uri, tmp_path / mine / "art", version=2)
        assert (result.decision, result.champion) == ("kept", "1")
        assert result.reason == ("v2 is already the champion: another promotion of it moved @champion from v1 while "
                                 f"this one judged it, nothing moved here (this judgement: {mine}: this one's reason)")
        tags = client.get_model_version(NAME, "2").tags
        assert (tags["promotion.decision"], tags["promotion.run_id"], tags["promotion.candidate"]) == (
            "promoted", other["run"], "0.900000")
        assert client.get_run(result.run_id).data.tags["decision"] == "kept"
        assert str(version_by_alias(client, NAME, "champion").version) == "2"
        assert version_by_alias(client, NAME, "challenger") is None
    # the other one crowns v2 after this one's check, while this one records its (promoted) decision
    (tmp_path / "b").mkdir()
    uri, client = toy_registry(tmp_path / "b", empty_store, 2)
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    champion_moved_while_recording(monkeypatch, client, "2")
    result = judge(uri, tmp_path / "b" / "art", version=2)
    assert result.decision == "kept" and "another promotion of it moved @champion from v1" in result.reason
    assert client.get_model_version(NAME, "2").tags["promotion.decision"] == "promoted"
    assert client.get_run(result.run_id).data.tags["reason"] == result.reason
    assert version_by_alias(client, NAME, "challenger") is None


def test_evidence_whose_record_fails_leaves_the_version_saying_failed_not_promoted(tmp_path, empty_store,
                                                                                    monkeypatch):
    """The version's promotion.* tags were written one by one, the decision first: a registry write failing between
    left v2 "promoted" (@champion never moved) over the numbers of the judgement before, which had kept it."""
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 2)
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", lambda *a: ("kept", "worse", SimpleNamespace(metric="dev/score", n=20),
                                                        {"candidate": 0.4, "champion": 0.5, "delta": -0.1}))
    assert judge(uri, tmp_path / "art", version=2).decision == "kept"
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    tag = MlflowClient.set_model_version_tag

    def flaky(self, name, version, key, value):  # the store drops one request of the evidence
        if key == "promotion.candidate":
            raise ConnectionError("tracking server unreachable")
        return tag(self, name, version, key, value)

    monkeypatch.setattr(MlflowClient, "set_model_version_tag", flaky)
    with pytest.raises(ConnectionError):
        judge(uri, tmp_path / "art", version=2)
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "1"
    tags = client.get_model_version(NAME, "2").tags
    run = client.get_run(tags["promotion.run_id"])
    assert tags["promotion.decision"] == run.data.tags["decision"] == "failed"
    assert "evidence could not be recorded" in tags["promotion.reason"] == run.data.tags["reason"]
    assert "promotion.champion" not in tags and "promotion.delta" not in tags  # the kept judgement's numbers gone
