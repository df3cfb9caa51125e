"""jobs/promote.py against real MLflow registries (SQLite; a real `mlflow server`): the gate promotes only on
evidence, every alias move is recorded, rollback restores the previous champion, and the champion loads by
alias and predicts.

The models are tiny transformers BERT classifiers on an SST-2-format task written here: one trained until it
separates the two classes, one left at random init (worse), one the trained model with noise far below any
decision (better by less than the noise: equal predictions).
"""

import dataclasses
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch

from bert_core.tokenizer import save_tokenizer, train_wordpiece
from jobs import promote
from jobs.finetune import find_hf_folder
from jobs.registry import scorer
from jobs.config.finetune import TaskConfig
from pipelines.tasks.glue import GLUE_TASKS
from tests.mlflow_server import server  # noqa: F401  (a real mlflow server per test)
from tests.unit.promote_kit import (NAME, ROOT, ROWS, champion_moved_while_recording, gate, judge, pair, promoting,
                                    register, sentences, toy_registry, unpaired_lower_bound)



@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(task config, {"good": dir, "weak": dir, "same": dir}): HF folders with the tokenizer beside them."""
    from transformers import BertConfig, BertForSequenceClassification

    root = tmp_path_factory.mktemp("promote")
    data = root / "SST-2"
    data.mkdir()
    train, dev = sentences(400, 0), sentences(300, 1)
    for split, rows in (("train", train), ("dev", dev)):
        (data / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    tok_dir = root / "tok"
    save_tokenizer(train_wordpiece([s for s, _ in train], vocab_size=200, min_frequency=1), tok_dir)
    from pipelines.tasks.common import load_tokenizer

    tok = load_tokenizer(str(tok_dir))
    labels = list(GLUE_TASKS["sst2"].labels)
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2,
                        id2label=dict(enumerate(labels)), label2id={k: i for i, k in enumerate(labels)})
    torch.manual_seed(0)
    weak = BertForSequenceClassification(config)
    good = BertForSequenceClassification(config)
    good.load_state_dict(weak.state_dict())
    enc = tok([s for s, _ in train], padding=True, return_tensors="pt")
    y = torch.tensor([label for _, label in train])
    opt = torch.optim.AdamW(good.parameters(), lr=3e-3)
    good.train()
    for step in range(150):
        idx = torch.randint(0, len(y), (32,))
        loss = good(**{k: v[idx] for k, v in enc.items()}, labels=y[idx]).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    same = BertForSequenceClassification(config)
    same.load_state_dict({k: v + 1e-7 * torch.randn_like(v) if v.is_floating_point() else v
                          for k, v in good.state_dict().items()})
    dirs = {}
    for name, model in (("good", good), ("weak", weak), ("same", same)):
        dirs[name] = root / name
        model.eval().save_pretrained(dirs[name])
        tok.save_pretrained(dirs[name])
    task = TaskConfig(name="sst2", data_dir=str(data), max_seq_len=32, labels=labels)
    return task, dirs


@pytest.mark.slow  # trains and judges real models (~5-18 s each here): `make test`, not `make test-fast`
def test_the_good_model_separates_the_classes_and_the_weak_one_does_not(models):
    task, dirs = models
    from jobs.loops import ft_tasks

    evals = ft_tasks.load_rows(task).evaluation
    good = scorer.score(dirs["good"], task, "dev", evals["dev"])
    weak = scorer.score(dirs["weak"], task, "dev", evals["dev"])
    assert good.metric == "dev/score" and good.n == 300
    assert good.value > 0.9 and weak.value < 0.7, (good.value, weak.value)
    e = scorer.paired_bootstrap(good, weak, 300, 0.95, seed=0)
    assert e["p_better"] == 1.0 and e["lower_bound"] > 0.1 and e["delta"] == pytest.approx(good.value - weak.value)


@pytest.mark.slow  # trains and judges real models (~5-18 s each here): `make test`, not `make test-fast`
def test_gate_promotes_only_on_evidence_and_rollback_restores_the_champion(models, tmp_path):
    from mlflow.tracking import MlflowClient

    task, dirs = models
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)

    v1 = register(uri, task, dirs["weak"])
    first = judge(uri, tmp_path / "art")
    assert (first.decision, first.candidate, first.champion) == ("promoted", v1, "")
    assert "no champion yet" in first.reason

    v2 = register(uri, task, dirs["good"])
    better = judge(uri, tmp_path / "art")
    assert (better.decision, better.candidate, better.champion) == ("promoted", v2, v1), better.reason
    assert better.evidence["lower_bound"] > 0.1 and better.evidence["delta"] > 0.2
    assert "one-sided 95% lower bound" in better.reason and "300 rows" in better.reason
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == v2

    v3 = register(uri, task, dirs["same"])  # the same predictions: a tie keeps the champion
    noise = judge(uri, tmp_path / "art")
    assert noise.decision == "kept" and noise.evidence["lower_bound"] <= 0, noise.reason
    assert str(client.get_model_version_by_alias(NAME, "challenger").version) == v3  # the one that lost keeps it

    v4 = register(uri, task, dirs["weak"])  # worse
    worse = judge(uri, tmp_path / "art")
    assert worse.decision == "kept" and "below min_delta" in worse.reason and worse.evidence["delta"] < 0

    margin = judge(uri, tmp_path / "art", version=int(v3), min_delta=0.0, confidence=0.5)  # equal: bound 0, not > 0
    assert margin.decision == "kept"

    # the evidence: tags on each judged version, a promotion run per decision, all on the same rows
    for v, r in ((v2, better), (v3, margin), (v4, worse)):
        tags = client.get_model_version(NAME, v).tags
        assert tags["promotion.decision"] == r.decision
        assert tags["promotion.champion_version"] == (v1 if v == v2 else v2)
        assert tags["promotion.eval_sha256"] == better.eval_sha256 and tags["promotion.eval_rows"] == "300"
        for k in ("candidate", "champion", "delta", "lower_bound", "p_better"):
            assert float(tags[f"promotion.{k}"]) == pytest.approx(r.evidence[k], abs=1e-6)
        assert (tags["promotion.level"], tags["promotion.bootstrap_samples"]) == ("0.5" if v == v3 else "0.95", "300")
        run = client.get_run(tags["promotion.run_id"])
        assert run.data.tags["decision"] == r.decision and run.data.metrics["p_better"] == pytest.approx(
            r.evidence["p_better"])

    # the rollback from the command line, as users run it
    cli = [sys.executable, "jobs/promote.py", NAME, "--rollback", f"tracking.tracking_uri={uri}",
           "tracking.experiment=toy-promotion", f"tracking.artifact_location={tmp_path / 'art'}"]
    back = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert back.returncode == 0, back.stderr[-3000:]
    assert f"[promote] {NAME}: rolled back: @champion v{v2} -> v{v1}" in back.stdout, back.stdout
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == v1
    assert "promotion.rolled_back" in client.get_model_version(NAME, v2).tags
    moves = promote.history(client, NAME)
    champion_moves = [m for m in moves if m.startswith("champion ")]
    assert [m.split(" ")[:4] for m in champion_moves] == [["champion", "none", "->", f"v{v1}"],
                                                          ["champion", f"v{v1}", "->", f"v{v2}"],
                                                          ["champion", f"v{v2}", "->", f"v{v1}"]]
    # every alias move is recorded, in order, with the run that made it: registration (@candidate), judging
    # (@challenger), promotion (@champion, and @challenger cleared), the rollback
    runs = {r.info.run_id: r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])}
    expected = [("candidate", "none", v1), ("challenger", "none", v1), ("champion", "none", v1),
                ("challenger", v1, "none"), ("candidate", v1, v2), ("challenger", "none", v2),
                ("champion", v1, v2), ("challenger", v2, "none"), ("candidate", v2, v3), ("challenger", "none", v3),
                ("candidate", v3, v4), ("challenger", v3, v4), ("challenger", v4, v3), ("champion", v2, v1)]
    assert [(m.split(" ")[0], m.split(" ")[1].removeprefix("v"), m.split(" ")[3].removeprefix("v"))
            for m in moves] == expected, moves
    for move in moves:
        run_id = move.rsplit("(run ", 1)[1].split(")")[0]
        assert run_id in runs, move
    assert runs[champion_moves[1].rsplit("(run ", 1)[1].split(")")[0]].data.tags["decision"] == "promoted"
    assert "rollback" in champion_moves[2] and runs[champion_moves[2].rsplit("(run ", 1)[1].split(")")[0]].data.tags[
        "decision"] == "rolled back"
    again = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and again.stderr.startswith("error: ") and "no previous champion" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1, again.stderr  # one line, no traceback
    # v2 judged and promoted again: its withdrawal is history (the alias moves), not a tag beside decision=promoted
    assert judge(uri, tmp_path / "art", version=int(v2)).decision == "promoted"
    assert "promotion.rolled_back" not in client.get_model_version(NAME, v2).tags


@pytest.mark.slow  # trains and judges real models (~5-18 s each here): `make test`, not `make test-fast`
def test_a_champion_moved_while_judging_is_not_replaced_by_a_model_never_compared_with_it(models, tmp_path,
                                                                                         monkeypatch):
    """Two promotions at once: while v2 is scored against champion v1, another promotion crowns v3. v2's evidence
    is against v1, not v3: nothing moves, the error says why, and the promotion run and v2's tags record it."""
    from mlflow.tracking import MlflowClient

    from jobs.registry.versions import move_alias

    task, dirs = models
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    v1 = register(uri, task, dirs["weak"])
    assert judge(uri, tmp_path / "art").decision == "promoted"
    v3 = register(uri, task, dirs["same"])
    v2 = register(uri, task, dirs["good"])
    scored = promote._judge

    def meanwhile(*args, **kwargs):
        out = scored(*args, **kwargs)
        move_alias(client, NAME, "champion", v3, "promoted: by the other promotion")
        return out

    monkeypatch.setattr(promote, "_judge", meanwhile)
    with pytest.raises(ValueError, match=rf"@champion moved from v{v1} to v{v3} while v{v2} was judged against v{v1}"):
        judge(uri, tmp_path / "art", version=int(v2))
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == v3
    tags = client.get_model_version(NAME, v2).tags
    assert tags["promotion.decision"] == "refused" and "nothing moved" in tags["promotion.reason"]
    assert client.get_run(tags["promotion.run_id"]).data.tags["decision"] == "refused"
    assert not [m for m in promote.history(client, NAME) if m.startswith(f"champion v{v3} -> v{v2}")]


def test_a_winner_leaves_challenger_to_the_version_another_promotion_is_judging(tmp_path, empty_store, monkeypatch):
    """v1 and v2 judged at once: v2 takes @challenger while v1 is scored; v1 wins, and @challenger stays v2's."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 2)
    monkeypatch.setattr(promote, "_judge", promoting(lambda: move_alias(client, NAME, "challenger", "2", "judged")))
    assert judge(uri, tmp_path / "art", version=1).decision == "promoted"
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "1"
    assert str(client.get_model_version_by_alias(NAME, "challenger").version) == "2"
    assert not [m for m in promote.history(client, NAME) if m.startswith("challenger v2 -> none")]


def test_a_champion_moved_while_the_decision_was_recorded_is_not_replaced(tmp_path, empty_store, monkeypatch):
    """@champion checked after scoring, then moved by another promotion while this one records its evidence: it is
    checked again right before the move, and the promotion refused as one that saw the move in time."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 3)
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    champion_moved_while_recording(monkeypatch, client, "3")
    with pytest.raises(ValueError, match=r"@champion moved from v1 to v3 while v2 was judged against v1"):
        judge(uri, tmp_path / "art", version=2)
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "3"
    tags = client.get_model_version(NAME, "2").tags
    assert tags["promotion.decision"] == "refused" and "nothing moved" in tags["promotion.reason"]
    assert client.get_run(tags["promotion.run_id"]).data.tags["decision"] == "refused"


def test_two_rollbacks_at_once_roll_back_once(tmp_path, empty_store, monkeypatch):
    """Champions v1 -> v2 -> v3, and two rollbacks at once: the other one restores v2 while this one prepares to; this
    one moves nothing (it would pop the champion history twice: the next rollback restoring v1's predecessor), its run
    ends FAILED, and the history is v1 -> v2."""
    from jobs.registry.versions import move_alias

    uri, client = toy_registry(tmp_path, empty_store, 3)
    for v in "123":
        move_alias(client, NAME, "champion", v, f"promoted: v{v}")
    started = promote._start_record

    def start_meanwhile(*args):
        run_id = started(*args)
        move_alias(client, NAME, "champion", "2", "rollback: v3 withdrawn, v2 restored")  # the other rollback
        return run_id

    monkeypatch.setattr(promote, "_start_record", start_meanwhile)
    with pytest.raises(ValueError, match=r"@champion moved from v3 to v2 while rolling back; nothing moved"):
        judge(uri, tmp_path / "art", rollback=True)
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == "2"
    assert promote.champions(client, NAME) == ["1", "2"]
    assert "promotion.rolled_back" not in client.get_model_version(NAME, "3").tags
    runs = client.search_runs([client.get_experiment_by_name("toy-promotion").experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]


def test_a_task_config_tag_that_is_not_json_is_named():
    """A 250-label task's tag cut at 5,000 characters: one line naming the version and the tag, not a JSON error."""
    from types import SimpleNamespace

    labels = [f"label_{i:03d}_category" for i in range(250)]
    cut = json.dumps(asdict(TaskConfig(name="files", labels=labels)))[:5000]
    with pytest.raises(ValueError, match=r"^v7's task_config tag is not valid JSON \(Unterminated string .*; 5000 "
                                         r"characters\), so the data that evaluates it is unknown"):
        promote._task_of(SimpleNamespace(version="7", tags={"task_config": cut}))


@pytest.mark.slow  # trains and judges real models (~5-18 s each here): `make test`, not `make test-fast`
def test_the_champion_is_scored_with_its_own_sequence_length(models, tmp_path):
    """The data is the candidate's task's, but each model reads it as it serves: a champion registered with another
    max_seq_len was cut to the candidate's and lost on a setting, not on its weights. Its score is its own, and the
    reason says both."""
    from dataclasses import replace

    from jobs.loops import ft_tasks

    task, dirs = models
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    register(uri, replace(task, max_seq_len=4), dirs["good"])  # the champion: 2 word pieces of each sentence
    assert judge(uri, tmp_path / "art").decision == "promoted"
    candidate = register(uri, task, dirs["same"])
    result = judge(uri, tmp_path / "art", version=int(candidate))
    rows = ft_tasks.load_rows(task).evaluation["dev"]
    own = scorer.score(dirs["good"], replace(task, max_seq_len=4), "dev", rows)
    assert result.evidence["champion"] == pytest.approx(own.value)
    assert result.evidence["champion"] != pytest.approx(scorer.score(dirs["good"], task, "dev", rows).value)
    assert f"each with its own max_seq_len {task.max_seq_len} vs 4" in result.reason


@pytest.mark.slow  # trains and judges real models (~5-18 s each here): `make test`, not `make test-fast`
def test_rows_or_labels_other_than_the_registered_ones_are_refused_unless_new_rows_are_named(models, tmp_path,
                                                                                              capsys):
    """The candidate's version records the sha256 of the rows it was evaluated on (data.dev.sha256). Rows that differ
    (the files edited since, or a task.* override that carves dev otherwise and may hand it rows the models trained
    on) are refused, naming both digests; new evaluation rows named on purpose (a GLUE task.data_dir) are judged. A
    task whose data gives other labels than the model's (their order: the head's indices) is refused. So is a champion
    registered on other rows than these (the files changed between the two registrations), or of another kind."""
    from jobs.loops import ft_tasks
    from pipelines.tasks.roles import split_digest

    task, dirs = models
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    digest = split_digest(ft_tasks.load_rows(task).evaluation["dev"])
    register(uri, task, dirs["good"], **{"data.dev.sha256": "0" * 64})
    with pytest.raises(ValueError, match=rf"the 300 dev rows are not those v1 was evaluated on when it was registered "
                                         rf"\(sha256 {digest[:12]} now, 000000000000 then\)"):
        judge(uri, tmp_path / "art")
    assert judge(uri, tmp_path / "art", task={"data_dir": task.data_dir}).decision == "promoted"  # named: judged
    register(uri, task, dirs["weak"], **{"data.dev.sha256": digest})  # v2: these rows, but the champion's differ
    seen = tmp_path / "SST-2"  # named rows that are training rows: refused (evidence.refuse_seen_rows)
    seen.mkdir()
    (seen / "train.tsv").write_text(train_tsv := (Path(task.data_dir) / "train.tsv").read_text())
    (seen / "dev.tsv").write_text("".join(train_tsv.splitlines(keepends=True)[:4]))
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with 2 train rows and 1 "
                                         r"select row v2 was fine-tuned on \('\S+/SST-2': its registered"):
        judge(uri, tmp_path / "art", task={"data_dir": str(seen)})
    with pytest.raises(ValueError, match=rf"not those v1 \(champion\) was evaluated on when it was registered "
                                         rf"\(sha256 {digest[:12]} now, 000000000000 then\)"):
        judge(uri, tmp_path / "art")
    from mlflow.tracking import MlflowClient

    MlflowClient(uri).set_model_version_tag(NAME, "1", "data.dev.sha256", digest)
    assert judge(uri, tmp_path / "art").decision == "kept"  # the same rows for both: judged
    other_kind = dataclasses.replace(task, kind="regression", labels=[])
    v3 = register(uri, other_kind, dirs["same"], **{"data.dev.sha256": digest})
    with pytest.raises(ValueError, match=r"v1 \(champion\) is a sst2 classification model with labels \['0', '1'\]; "
                                         rf"v{v3} is sst2 regression with \[\]: not comparable"):
        judge(uri, tmp_path / "art")
    flipped = dataclasses.replace(task, labels=list(reversed(task.labels)))
    alone = f"sqlite:///{tmp_path}/other.db"  # no champion to compare labels with first
    register(alone, flipped, dirs["same"], **{"data.dev.sha256": digest})
    with pytest.raises(ValueError, match=r"the task's data gives labels \['0', '1'\]; v1 was trained with "
                                         r"\['1', '0'\]"):
        judge(alone, tmp_path / "art")
    # a version whose registration did not finish has partial tags: refused; one that records no rows (registered by
    # hand, or before versions recorded them) is judged, saying that nothing checked its rows
    MlflowClient(alone).set_model_version_tag(NAME, "1", "registration", "incomplete: OSError: disk full")
    with pytest.raises(ValueError, match=r"v1: its registration did not finish \(incomplete: OSError: disk full\)"):
        judge(alone, tmp_path / "art")
    bare = f"sqlite:///{tmp_path}/bare.db"
    register(bare, task, dirs["good"])
    assert judge(bare, tmp_path / "art").decision == "promoted"
    assert "v1 records no dev rows it was evaluated on (no tag data.dev.sha256)" in capsys.readouterr().out


@pytest.mark.slow  # trains and judges real models (~5-18 s each here): `make test`, not `make test-fast`
def test_refused_before_any_evaluation(models, tmp_path):
    from bert_core.config import ConfigError

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with pytest.raises(ConfigError, match="min_delta must be >= 0"):
        judge(uri, tmp_path / "art", min_delta=-0.1)
    with pytest.raises(ConfigError, match="confidence must be in"):
        judge(uri, tmp_path / "art", confidence=1.0)
    with pytest.raises(ConfigError, match="task.labels"):
        judge(uri, tmp_path / "art", task={"labels": ["x"]})


@pytest.mark.slow  # a real `mlflow server` (~7 s to start): `make test`, not `make test-fast`
def test_promoted_model_loads_by_alias_from_a_server_and_predicts(models, server):  # noqa: F811
    import mlflow
    import transformers

    task, dirs = models
    register(server.uri, task, dirs["good"])
    assert judge(server.uri, server.root / "art").decision == "promoted"
    mlflow.set_tracking_uri(server.uri)
    info = mlflow.models.get_model_info(f"models:/{NAME}@champion")
    assert info.signature is not None and info.saved_input_example_info is not None
    download = mlflow.artifacts.download_artifacts(f"models:/{NAME}@champion", dst_path=str(server.root / "dl"))
    pipe = transformers.pipeline("text-classification", model=str(find_hf_folder(Path(download))))  # no code of ours
    texts = ["the plot was superb and lovely", "the film was awful and grim"]
    labels = [p["label"] for p in pipe(texts)]
    assert labels == [task.labels[1], task.labels[0]], labels
    served = mlflow.pyfunc.load_model(f"models:/{NAME}@champion").predict(texts)  # what `mlflow models serve` runs
    assert list(served["label"]) == labels


def test_entity_counts_give_seqeval_micro_f1():
    from pipelines.tasks import ner_metrics

    rnd = np.random.default_rng(0)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    gold = [[tags[i] for i in rnd.integers(0, 5, rnd.integers(1, 12))] for _ in range(200)]
    pred = [[t if rnd.random() < 0.7 else tags[rnd.integers(0, 5)] for t in g] for g in gold]
    for scheme in ("IOB2", None):
        counts = scorer.entity_counts(gold, pred, scheme)
        tp, n_pred, n_gold = counts.sum(0)
        assert 2 * tp / (n_pred + n_gold) == pytest.approx(ner_metrics(gold, pred, scheme=scheme)["f1"])


# -- the gate alone: per-row correctness of two models on the same rows ------------------------------------------

def test_a_candidate_better_by_a_few_rows_is_kept_and_a_clearly_better_one_promoted():
    """Right on 7 rows the champion misses and wrong on 4 it gets right (+3 of 400): not significant, kept.
    +40 rows net: promoted. The reason names the delta, the bound, its level and the rows."""
    decision, reason, e = gate(*pair(7, 4))
    assert decision == "kept" and e["delta"] == pytest.approx(3 / ROWS) and e["lower_bound"] < 0, reason
    assert "within the noise" in reason
    decision, reason, e = gate(*pair(44, 4))
    assert decision == "promoted" and e["lower_bound"] > 0.05, reason
    assert f"delta {e['delta']:+.4f}, one-sided 95% lower bound {e['lower_bound']:+.4f}" in reason
    assert f"on {ROWS} rows" in reason and "2000 paired resamples" in reason


def test_only_a_paired_bound_sees_that_a_correlated_candidate_clears_the_margin():
    """The candidate is the champion plus 12 rows it also gets right (never worse): every paired resample has
    delta >= 0, and the bound clears min_delta 0.01. Resampled unpaired, the models' shared errors look like
    noise and the same bound falls below zero: a gate that lost the pairing would keep the champion."""
    candidate, champion = pair(12)
    decision, reason, e = gate(candidate, champion, min_delta=0.01)
    assert decision == "promoted" and e["lower_bound"] > 0.01, reason
    assert unpaired_lower_bound(candidate, champion) < 0


def test_significantly_better_but_not_by_the_margin_is_kept():
    """+20 rows of 400 (delta 0.05) is significant (bound above 0) and above min_delta 0.04 as a point estimate,
    but its lower bound is not above 0.04: kept. With min_delta 0 the same evidence promotes."""
    candidate, champion = pair(20)
    decision, reason, e = gate(candidate, champion, min_delta=0.04)
    assert decision == "kept" and 0 < e["lower_bound"] <= 0.04 < e["delta"], reason
    assert "<= min_delta 0.04 (within the noise)" in reason
    assert gate(candidate, champion, min_delta=0.0)[0] == "promoted"


def test_a_tie_and_a_worse_candidate_keep_the_champion():
    for candidate, champion in (pair(0), pair(0, 10), pair(5, 5)):
        decision, reason, e = gate(candidate, champion)
        assert decision == "kept" and e["lower_bound"] <= 0, reason


def test_a_promotion_that_fails_ends_its_run_failed_with_the_error(tmp_path, empty_store, monkeypatch):
    """Scoring that raises, or the champion's move refused after the decision was recorded: the promotion run ends
    FAILED naming the error, not RUNNING for ever (or FINISHED for a promotion that never happened)."""
    from jobs.registry import versions

    uri, client = toy_registry(tmp_path, empty_store, 2)

    def broken(*args, **kwargs):
        raise RuntimeError("scorer ran out of memory")

    monkeypatch.setattr(promote, "_judge", broken)
    with pytest.raises(RuntimeError, match="out of memory"):
        judge(uri, tmp_path / "art", version=1)
    (run,) = client.search_runs([client.get_experiment_by_name("toy-promotion").experiment_id])
    assert (run.info.status, run.data.tags["error"]) == ("FAILED", "RuntimeError: scorer ran out of memory")

    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    moved = versions.move_alias

    def refused(client_, name, alias, *args, **kwargs):
        if alias == "champion":
            raise PermissionError("registry is read-only")
        return moved(client_, name, alias, *args, **kwargs)

    monkeypatch.setattr(promote, "move_alias", refused)
    with pytest.raises(PermissionError):
        judge(uri, tmp_path / "art", version=2)
    runs = client.search_runs([client.get_experiment_by_name("toy-promotion").experiment_id],
                              filter_string="tags.decision = 'failed'")  # not 'promoted': nothing moved
    assert [(r.info.status, r.data.tags["error"]) for r in runs] == [("FAILED", "PermissionError: registry is "
                                                                                 "read-only")]


def test_a_nested_task_override_changes_that_key_alone():
    """promote NAME task.dev_file=... task.columns.text=content judged a files model with its whole columns mapping
    replaced by defaults: gold labels read from the wrong column, multi-label cells not split, the file decoded
    otherwise than it was trained."""
    registered = {"name": "files", "kind": "text-classification", "labels": ["a", "b"], "train_file": "/t.csv",
                  "columns": {"text": "body", "label": "topics", "label_separator": "|", "encoding": "cp1252"}}
    task = promote.judged_task(registered, {"dev_file": "/d/heldout.csv", "columns": {"text": "content"}})
    assert (task.dev_file, task.columns.text, task.columns.label, task.columns.label_separator,
            task.columns.encoding) == ("/d/heldout.csv", "content", "topics", "|", "cp1252")


@pytest.mark.parametrize("registered", [{"name": "sst2", "data_dir": "/glue/SST-2"},
                                        {"name": "pkgdocs", "corpus_dir": "/c"}])
def test_held_out_rows_named_where_the_task_reads_none_are_refused(registered):
    """GLUE reads task.data_dir's dev split and pkgdocs its corpus: a task.dev_file was ignored (judged on the
    official dev) and switched off the check that the rows are the registered ones."""
    with pytest.raises(ValueError, match=f"task.dev_file is not read for task '{registered['name']}'"):
        promote.judged_task(registered, {"dev_file": "/d/heldout.tsv"})
    assert promote.judged_task(registered, {}).name == registered["name"]


def test_data_registered_redacted_is_named_again_not_read_as_a_broken_url():
    """Redaction (jobs/registry/redaction.py) hides what looks like credentials, not only credentials: the message
    says the URL was redacted, not that it had credentials."""
    registered = {"name": "files", "kind": "classification", "train_file": "https://***@data.example.com/t.csv"}
    with pytest.raises(ValueError, match=r"^task.train_file was registered redacted \(https://\*\*\*@data.example.com/"
                                         r"t.csv: its credentials, or what looked like them, are not kept\): name it "
                                         r"again, task.train_file=URL$"):
        promote.judged_task(registered, {})
    assert promote.judged_task(registered, {"train_file": "https://u:p@data.example.com/t.csv"}).train_file

