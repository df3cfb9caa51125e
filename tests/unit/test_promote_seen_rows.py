"""Named evaluation rows (a GLUE task.data_dir, a task.dev_file) are checked against the rows each judged version was
fine-tuned on: its REGISTERED task's train and select rows, not the named folder's train.tsv (jobs/registry/evidence.py
refuse_seen_rows). Real MLflow (SQLite) and a toy SST-2 registry; the scoring is replaced (promote_kit.promoting)."""

import json
import shutil
from dataclasses import asdict, replace
from types import SimpleNamespace

import numpy as np
import pytest

from jobs import promote
from jobs.config.finetune import TaskConfig
from jobs.loops import ft_tasks
from jobs.promote import PromoteConfig
from jobs.registry.evidence import refuse_seen_rows
from jobs.registry.versions import move_alias
from pipelines.tasks.roles import TaskRows, keys_of, split_digest, without
from pipelines.tasks.stream import StreamedSplit
from tests.unit.promote_kit import NAME, judge, promoting, sentences, toy_registry


def tsv(folder, **splits) -> str:
    folder.mkdir(exist_ok=True)
    for split, rows in splits.items():
        (folder / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    return str(folder)


def registered_task(client, version: str) -> dict:
    return json.loads(client.get_model_version(NAME, version).tags["task_config"])


def test_named_evaluation_rows_that_are_training_rows_are_refused(tmp_path):
    """Rows named for a promotion that are also rows of the registered task's training file: the loader takes them
    out of train as leaks and keeps them for evaluation, right for a fine-tune that has not trained yet; both models
    here already trained on them, so they would be judged on rows they fitted."""
    data = tmp_path / "SST-2"
    data.mkdir()
    train = [f"a sentence of the training file number {i}\t{i % 2}\n" for i in range(60)]
    new = [f"a held-out sentence number {i}\t{i % 2}\n" for i in range(10)]
    (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(train))
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(new + train[:3]))
    task = TaskConfig(name="sst2", data_dir=str(data), labels=["0", "1"])
    loaded = ft_tasks.load_rows(task)
    rows = loaded.evaluation["dev"]
    assert len(rows) == 13 and loaded.dropped["train_in_evaluation"] == 3
    named = PromoteConfig(model=NAME, task={"data_dir": str(data)}).validate()
    config = json.dumps(asdict(task))
    other = SimpleNamespace(version="2", tags={"data.dev.sha256": "0" * 64, "task_config": config})  # others
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with 3 train rows v2 was "
                                         r"fine-tuned on \('\S+SST-2': its registered training data\): it trained"):
        refuse_seen_rows(named, task, "dev", loaded, (other, None))
    refuse_seen_rows(PromoteConfig(model=NAME).validate(), task, "dev", loaded, (other, None))  # carved
    # the rows both versions were evaluated on: their fine-tunes' loaders took the 3 out of train as this one does
    these = SimpleNamespace(version="1", tags={"data.dev.sha256": split_digest(rows), "task_config": config})
    refuse_seen_rows(named, task, "dev", loaded, (these, these))
    with pytest.raises(ValueError, match=r"^the named evaluation rows share .* v2 \(champion\) was fine-tuned on"):
        refuse_seen_rows(named, task, "dev", loaded, (these, other))
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(new))
    refuse_seen_rows(named, task, "dev", ft_tasks.load_rows(task), (other, other))  # new rows: judged


def test_select_rows_alone_seen_are_refused():
    """No named row is a train row, two are select rows (the rows that chose the checkpoint): refused, naming
    them; a select row whose input is in train is no evaluation row and is not named."""
    task = TaskConfig(name="files", kind="classification", labels=["a", "b"], train_file="train.csv")
    rows = [{"text_a": "x", "label": 0, "row_index": 0}]
    loaded = TaskRows([], [], {"dev": rows},
                      dropped={"train_in_evaluation": 0, "select_in_evaluation": 2, "select_in_train": 5})
    version = SimpleNamespace(version="4", tags={"task_config": json.dumps(asdict(task))})
    named = PromoteConfig(model=NAME, task={"dev_file": "heldout.csv"}).validate()
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with 2 select rows v4 was "
                                         r"fine-tuned on \('train.csv': its registered training data\)"):
        refuse_seen_rows(named, task, "dev", loaded, (version, None))


def test_a_held_out_folder_is_checked_against_the_registered_training_rows(tmp_path, empty_store, monkeypatch):
    """`task.data_dir=HELD-OUT`: its train.tsv is no model's training data (here a placeholder), its dev.tsv holds 8
    rows both versions trained on. Checked against that train.tsv, the rows passed and the candidate was promoted on
    rows it fitted; checked against each version's registered training rows, refused. Rows none trained on: judged."""
    uri, client = toy_registry(tmp_path, empty_store, 2)
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    placeholder = sentences(20, 99)
    seen = tsv(tmp_path / "SST-2-heldout", train=placeholder, dev=sentences(20, 0)[:8] + sentences(10, 77))
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with \d+ train rows (and "
                                         r"\d select rows? )?v2 was fine-tuned on \('\S+/SST-2': its registered"):
        judge(uri, tmp_path / "art", version=2, task={"data_dir": seen})
    clean = tsv(tmp_path / "SST-2-new", train=placeholder, dev=sentences(10, 77))
    assert judge(uri, tmp_path / "art", version=2, task={"data_dir": clean}).decision == "promoted"


def test_named_rows_only_the_champion_trained_on_are_refused(tmp_path, empty_store, monkeypatch):
    """The champion was fine-tuned on other files than the candidate (the data updated between versions); the named
    rows hold 3 of the champion's training rows, none of the candidate's: judged on them, the champion is scored on
    rows it fitted (its score inflated, a better candidate kept). Refused, naming the champion and its files."""
    uri, client = toy_registry(tmp_path, empty_store, 2)
    theirs = sentences(20, 5)
    older = tsv(tmp_path / "SST-2-v1", train=theirs, dev=sentences(20, 1))
    client.set_model_version_tag(NAME, "1", "task_config", json.dumps({**registered_task(client, "1"),
                                                                        "data_dir": older}))
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    named = tsv(tmp_path / "SST-2-heldout", train=sentences(20, 99), dev=theirs[:3] + sentences(10, 77))
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with 2 train rows and 1 "
                                         r"select row v1 \(champion\) was fine-tuned on \('\S+/SST-2-v1'"):
        judge(uri, tmp_path / "art", version=2, task={"data_dir": named})
    assert client.get_model_version(NAME, "2").tags.get("promotion.decision") is None  # refused before any record


def test_training_rows_that_cannot_be_read_as_registered_are_refused_unless_moved_unchanged(tmp_path, empty_store,
                                                                                           monkeypatch):
    """A version whose registered training files are gone, or hold other rows than its recorded digests: nothing
    shows the named rows are not rows it trained on, so the named rows are refused, saying why. Files moved and
    named again unchanged (the train and select rows left beside the named rows are its recorded ones): judged."""
    uri, client = toy_registry(tmp_path, empty_store, 1)
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    task = registered_task(client, "1")
    then = ft_tasks.load_rows(ft_tasks.task_config(task)).summary()
    client.set_model_version_tag(NAME, "1", "data.train.sha256", "0" * 64)  # the files edited since
    heldout = tsv(tmp_path / "SST-2-heldout", train=sentences(20, 99), dev=sentences(10, 77))
    with pytest.raises(ValueError, match=r"^the named evaluation rows cannot be checked against the rows v1 was "
                                         r"fine-tuned on: its registered data \('\S+/SST-2': what it read to train, "
                                         r"its dev file too, which took its overlaps out of train\) gives other "
                                         r"train rows now than it recorded when registered \(sha256 \w{12} now, "
                                         r"000000000000 then: its files edited since, or read by other rules\)"):
        judge(uri, tmp_path / "art", version=1, task={"data_dir": heldout})
    for split in ("train", "select"):
        client.set_model_version_tag(NAME, "1", f"data.{split}.sha256", then[split]["sha256"])
    moved = tmp_path / "moved"
    shutil.move(task["data_dir"], moved)  # its folder elsewhere now; named again with other evaluation rows
    with pytest.raises(ValueError, match=r"v1 was fine-tuned on: its registered data \('\S+/SST-2': what it read to "
                                         r"train, its dev file too, which took its overlaps out of train\) "
                                         r"cannot be read \(.*; put those files back as they were registered, or "
                                         r"judge on the rows it was registered with \(no task.data_dir=...\)"):
        judge(uri, tmp_path / "art", version=1, task={"data_dir": heldout})
    (moved / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in sentences(10, 77)))
    assert judge(uri, tmp_path / "art", version=1, task={"data_dir": str(moved)}).decision == "promoted"


def recorded(client, version: str, summary: dict, **digests) -> None:
    """The train and select digests a fine-tune records on its version (`digests`: others in their place)."""
    for split in ("train", "select"):
        client.set_model_version_tag(NAME, version, f"data.{split}.sha256",
                                     digests.get(split, summary[split]["sha256"]))


def test_training_rows_moved_out_of_the_registered_folder_into_the_named_rows_are_refused(tmp_path, empty_store,
                                                                                        monkeypatch):
    """v1 was fine-tuned on SST-2/train.tsv; 6 of its rows are moved into dev.tsv of the same folder, named again
    (task.data_dir=SST-2). Its registered task reads the judged files, but those are not the rows it trained on: the
    loader's counts of today's train.tsv found none of the 6 and v1 was promoted on rows it fitted. Read as
    registered, the train rows are not those it recorded: refused. So are select rows other than its recorded ones,
    where the train rows are; with its files put back, rows none of them holds are judged."""
    uri, client = toy_registry(tmp_path, empty_store, 1)
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    task = registered_task(client, "1")
    recorded(client, "1", ft_tasks.load_rows(ft_tasks.task_config(task)).summary(), select="0" * 64)
    heldout = tsv(tmp_path / "SST-2-heldout", train=sentences(20, 99), dev=sentences(10, 77))
    with pytest.raises(ValueError, match=r"v1 was fine-tuned on: its registered data \('\S+/SST-2': what it read to "
                                         r"train, its dev file too, which took its overlaps out of train\) gives "
                                         r"other select rows now than it recorded when registered \(sha256 \w{12} "
                                         r"now, 000000000000 then"):
        judge(uri, tmp_path / "art", version=1, task={"data_dir": heldout})
    recorded(client, "1", ft_tasks.load_rows(ft_tasks.task_config(task)).summary())
    moved = sentences(20, 0)[:6]
    tsv(tmp_path / "SST-2", train=sentences(20, 0)[6:], dev=sentences(20, 1) + moved)
    with pytest.raises(ValueError, match=r"v1 was fine-tuned on: its registered data \('\S+/SST-2': what it read to "
                                         r"train, its dev file too, which took its overlaps out of train\) gives "
                                         r"other train rows now than it recorded when registered"):
        judge(uri, tmp_path / "art", version=1, task={"data_dir": task["data_dir"]})
    tsv(tmp_path / "SST-2", train=sentences(20, 0), dev=sentences(20, 1))  # put back as registered
    assert judge(uri, tmp_path / "art", version=1, task={"data_dir": heldout}).decision == "promoted"


def test_a_champion_fine_tuned_on_the_candidates_folder_is_read_once(tmp_path, empty_store, monkeypatch):
    """Candidate and champion fine-tuned on one folder (the champion with another max_seq_len, which reads no other
    rows), judged on a held-out folder: the held-out rows and the registered rows are read once each, not once per
    version."""
    uri, client = toy_registry(tmp_path, empty_store, 2)
    client.set_model_version_tag(NAME, "1", "task_config", json.dumps({**registered_task(client, "1"),
                                                                        "max_seq_len": 64}))
    move_alias(client, NAME, "champion", "1", "promoted: the first")
    monkeypatch.setattr(promote, "_judge", promoting(lambda: None))
    reads, load_rows = [], ft_tasks.load_rows
    monkeypatch.setattr(ft_tasks, "load_rows", lambda t, *a, **kw: reads.append(t.data_dir) or load_rows(t, *a, **kw))
    heldout = tsv(tmp_path / "SST-2-heldout", train=sentences(20, 99), dev=sentences(10, 77))
    assert judge(uri, tmp_path / "art", version=2, task={"data_dir": heldout}).decision == "promoted"
    assert reads == [heldout, registered_task(client, "2")["data_dir"]]


def squad_file(path, paragraphs) -> str:
    """A SQuAD v1 file: `paragraphs` [(context, [(id, question, answer)])]."""
    path.write_text(json.dumps({"data": [{"title": "toy", "paragraphs": [
        {"context": c, "qas": [{"id": i, "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}
                               for i, q, a in qas]} for c, qas in paragraphs]}]}))
    return str(path)


def test_a_squad_question_reworded_over_its_training_context_is_refused(tmp_path):
    """SQuAD's question ids name one question in every split (the benchmark's): a named question with the id of one
    a version trained on, over the same paragraph, reworded, is that question; it is counted against the registered
    training rows by its id too, as the loader counts it."""
    colours = ("red", "green", "blue", "yellow", "white", "black")
    paragraph = [(f"In the toy world item {i} is painted {colours[i % 6]} by its maker.",
                  [(f"q{i}", f"What colour is item {i}?", colours[i % 6])]) for i in range(16)]
    task = TaskConfig(name="squad", train_file=squad_file(tmp_path / "train.json", paragraph[:12]),
                      dev_file=squad_file(tmp_path / "dev.json", paragraph[12:]))
    then = ft_tasks.load_rows(task).summary()
    version = SimpleNamespace(version="3", tags={"task_config": json.dumps(asdict(task)),
                                                 **{f"data.{s}.sha256": then[s]["sha256"] for s in then}})
    reworded = [(paragraph[5][0], [("q5", "Which colour does its maker paint item 5?", colours[5])])]
    judged = replace(task, dev_file=squad_file(tmp_path / "heldout.json", reworded + paragraph[13:]))
    named = PromoteConfig(model=NAME, task={"dev_file": judged.dev_file}).validate()
    with pytest.raises(ValueError, match=r"^the named evaluation rows share their inputs with 1 (train|select) row "
                                         r"v3 was fine-tuned on \('\S+train.json'"):
        refuse_seen_rows(named, judged, "dev", ft_tasks.load_rows(judged), (version, None))


OWN = [{"text_a": f"a row of the training file number {i}", "label": i % 2} for i in range(10)]
NEW = [{"text_a": f"a held-out row number {i}", "label": i % 2} for i in range(3)]


class Blocks:
    """A ray.data.Dataset of JSON rows (stream.StreamedSplit's) without Ray: map_batches over its numpy blocks,
    take_all the records it gives back."""

    def __init__(self, rows: list[dict], per_block: int = 3):
        self.blocks = [[json.dumps(r) for r in rows[i:i + per_block]] for i in range(0, len(rows), per_block)]

    def map_batches(self, fn, batch_size=None, batch_format="numpy", fn_kwargs=None):
        out = [fn({"row": np.asarray(b, dtype=object)}, **(fn_kwargs or {})) for b in self.blocks]
        return SimpleNamespace(take_all=lambda: [dict(zip(rec, row)) for rec in out for row in zip(*rec.values())])


def own_files(named: dict[str, list[dict]], reads: list):
    """ft_tasks.load_rows for your own files (OWN in train.csv) as stream.py gives them, with no Ray: dev carved
    (OWN[:2]) unless a dev file is named (its rows from `named`), select carved (OWN[8:]), the training split left
    in the cluster; leaks out. A URL whose credentials were redacted cannot be read. `reads`: the tasks read."""
    from jobs.registry.redaction import REDACTED

    def load_rows(t):
        reads.append(t)
        if REDACTED in t.train_file:
            raise OSError(f"{t.train_file}: 401 unauthorized")
        dev = named[t.dev_file] if t.dev_file else OWN[:2]
        train, leaks = without(OWN[:8] if t.dev_file else OWN[2:8], keys_of(dev, t.kind), t.kind)
        select, chosen = without(OWN[8:], keys_of(dev, t.kind), t.kind)
        return TaskRows(StreamedSplit(Blocks(train), len(train), split_digest(train)), select, {"dev": dev},
                        dropped={"train_in_evaluation": leaks, "select_in_evaluation": chosen})
    return load_rows


def own_version(task: TaskConfig, load_rows, config: str = "") -> SimpleNamespace:
    then = load_rows(task).summary()
    return SimpleNamespace(version="4", tags={"task_config": config or json.dumps(asdict(task)),
                                              **{f"data.{s}.sha256": then[s]["sha256"] for s in then}})


def test_own_files_whose_dev_was_carved_are_checked_against_the_rows_carved_then(monkeypatch):
    """Your own files, registered with dev carved from train.csv (task.dev_file ""): with a dev file named, nothing
    is carved as dev, so the rows carved then come back into train; read that way, a named row that was a dev row
    then was counted as a training row (and the train rows could never match the recorded digest). Read as
    registered (dev carved, its digests checked), only rows it trained or was chosen on are refused; the training
    split stays in the cluster, its rows counted there."""
    reads, named = [], {"heldout.csv": [OWN[0], *NEW], "trained.csv": [OWN[6], *NEW], "chosen.csv": [OWN[9], *NEW]}
    load_rows = own_files(named, reads)
    monkeypatch.setattr(ft_tasks, "load_rows", load_rows)
    task = TaskConfig(name="files", kind="classification", labels=["0", "1"], train_file="train.csv")
    version = own_version(task, load_rows)
    for dev_file, error in (("heldout.csv", None), ("trained.csv", "1 train row"), ("chosen.csv", "1 select row")):
        judged, reads[:] = replace(task, dev_file=dev_file), []
        cfg = PromoteConfig(model=NAME, task={"dev_file": dev_file}).validate()
        if error is None:
            refuse_seen_rows(cfg, judged, "dev", load_rows(judged), (version, None))
        else:
            with pytest.raises(ValueError, match=rf"^the named evaluation rows share their inputs with {error} v4 was "
                                                 r"fine-tuned on \('train.csv': its registered training data\)"):
                refuse_seen_rows(cfg, judged, "dev", load_rows(judged), (version, None))
        assert [t.dev_file for t in reads] == [dev_file, ""]  # the named rows, then its rows as registered


def test_a_registered_url_redacted_is_read_with_its_credentials_named_again(monkeypatch):
    """A training file's URL registered without its credentials (the registry keeps none): named again for the
    promotion (task.train_file=URL), the version's rows are read with them, not refused as unreadable."""
    from jobs.registry.redaction import redact

    reads = []
    load_rows = own_files({"heldout.csv": NEW}, reads)
    monkeypatch.setattr(ft_tasks, "load_rows", load_rows)
    task = TaskConfig(name="files", kind="classification", labels=["0", "1"],
                      train_file="https://user:s3cret@data.example/train.csv")
    version = own_version(task, load_rows, config=json.dumps(redact(asdict(task))))
    assert "s3cret" not in version.tags["task_config"]
    judged = replace(task, dev_file="heldout.csv")
    cfg = PromoteConfig(model=NAME, task={"dev_file": "heldout.csv", "train_file": task.train_file}).validate()
    refuse_seen_rows(cfg, judged, "dev", load_rows(judged), (version, None))
    assert reads[-1].train_file == task.train_file and reads[-1].dev_file == ""
