"""The three roles of a task's data (pipelines/tasks/roles.py through jobs/loops/ft_tasks.load_rows), for every kind of
task: no evaluation row (by content, or by SQuAD question id over its context) is in train or select; select is
carved by a stable hash of each row's group, whole groups only, the same for any row order; and changing an
evaluation row changes nothing the run chooses with (train and select stay byte-identical)."""

import copy
import json
import random

import pytest

from bert_core.config import ConfigError
from jobs.loops import ft_tasks
from jobs.config.finetune import TaskConfig
from pipelines.tasks.roles import carve, content_key, leak_keys, split_digest
from tests.unit.test_squad import CONTEXT, answer

KIND = {"sst2": "classification", "squad": "question-answering", "conll": "token-classification",
        "pkgdocs": "classification"}


def write_sst2(root, train, dev):
    root.mkdir(exist_ok=True)
    for name, rows in (("train.tsv", train), ("dev.tsv", dev)):
        (root / name).write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    return root


def squad_json(path, questions):
    """`questions`: (id, question) on one of 40 paragraphs (each a different context: SQuAD groups by context)."""
    paragraphs = {}
    for qid, q, p in questions:
        paragraphs.setdefault(p, []).append({"id": qid, "question": q, "answers": [answer("Denver Broncos")]})
    data = [{"title": "t", "paragraphs": [{"context": f"Paragraph {p}. " + CONTEXT, "qas": [
        {**qa, "answers": [{"text": "Denver Broncos", "answer_start": len(f"Paragraph {p}. ") + a["answer_start"]}
                           for a in qa["answers"]]} for qa in qas]} for p, qas in paragraphs.items()]}]
    path.write_text(json.dumps({"version": "1.1", "data": data}))
    return path


def write_corpus(path, counts):
    """A harvested-docs corpus (pipelines/harvest.py's layout, marked complete): documents with their own
    paragraphs, plus one boilerplate paragraph that every document of a package repeats (a license notice)."""
    docs = []
    for package, n in counts.items():
        for i in range(n):
            own = [f"The {package} module number {i} handles part {j} of its work for the users, in detail." for j in range(3)]
            docs.append({"id": str(len(docs)), "url": f"site:{package}/module_{i}.py", "title": f"module_{i}",
                         "text": "\n\n".join(own + [f"Licensed under the terms of the {package} license, see the file."])})
    path.mkdir()
    (path / "installed-docs-00.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (path / ".harvest.json").write_text("{}")  # complete: the job reuses it
    return path


def conll_text(sentences):
    docs = []
    for d in range(0, len(sentences), 3):  # three sentences per -DOCSTART- document
        blocks = ["\n".join(f"{w} NNP B-NP {'B-PER' if i == 0 else 'O'}" for i, w in enumerate(s.split()))
                  for s in sentences[d:d + 3]]
        docs.append("-DOCSTART- -X- -X- O\n\n" + "\n\n".join(blocks))
    return "\n\n".join(docs) + "\n"


@pytest.fixture
def tasks(tmp_path):
    """One TaskConfig per kind, each with evaluation rows that also occur in its train file (benchmarks have
    such duplicates) and a way to change one evaluation row."""
    sst_train = [(f"review number {i} was {'good' if i % 2 else 'bad'}", i % 2) for i in range(200)]
    sst_dev = [(f"a held out review {i}", i % 2) for i in range(20)] + sst_train[:4] + [  # 5 leaks, one spaced
        (sst_train[4][0].replace(" ", "  ") + " ", sst_train[4][1])]
    squad_train = [(f"q{i}", f"Question {i} about the game?", i // 3) for i in range(120)]
    squad_dev = [(f"d{i}", f"Dev question {i}?", 100 + i) for i in range(10)] + [
        ("q7", "Question 7, reworded?", 2), ("x1", "Question 9 about the game?", 3)]  # an id leak and a content leak
    conll_train = [f"Person{i} visited Town{i % 17} ." for i in range(150)]
    conll_dev = [f"Dev{i} left City{i} ." for i in range(12)] + conll_train[40:42]
    corpus = write_corpus(tmp_path / "corpus", {"alpha": 30, "beta": 24, "gamma": 20})
    (tmp_path / "conll").mkdir()
    made = {
        "sst2": TaskConfig(name="sst2", data_dir=str(write_sst2(tmp_path / "sst2", sst_train, sst_dev))),
        "squad": TaskConfig(name="squad", train_file=str(squad_json(tmp_path / "train.json", squad_train)),
                            dev_file=str(squad_json(tmp_path / "dev.json", squad_dev))),
        "conll": TaskConfig(name="conll", train_file=str(tmp_path / "conll" / "train.txt"),
                            dev_file=str(tmp_path / "conll" / "dev.txt")),
        "pkgdocs": TaskConfig(name="pkgdocs", corpus_dir=str(corpus), num_classes=3, harvest_max_mb=1),
    }
    (tmp_path / "conll" / "train.txt").write_text(conll_text(conll_train))
    (tmp_path / "conll" / "dev.txt").write_text(conll_text(conll_dev))

    def change_one_evaluation_row(name):
        if name == "sst2":
            write_sst2(tmp_path / "sst2", sst_train, [("a brand new dev review", 1)] + sst_dev[1:])
        elif name == "squad":
            squad_json(tmp_path / "dev.json", [("d-new", "A new question?", 300)] + squad_dev[1:])
        elif name == "conll":
            (tmp_path / "conll" / "dev.txt").write_text(conll_text(["Newcomer met Someone ."] + conll_dev[1:]))
        else:  # a dev document's text changes
            docs = [json.loads(line) for line in (corpus / "installed-docs-00.jsonl").read_text().splitlines()]
            dev_doc = ft_tasks.load_rows(made["pkgdocs"]).evaluation["dev"][0]["document"]
            for d in docs:
                if d["url"] == dev_doc:
                    d["text"] = d["text"].replace("The", "A changed", 1)
            (corpus / "installed-docs-00.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))

    return made, change_one_evaluation_row


def strip(rows):
    return [{k: v for k, v in r.items() if k not in ("row_index", "idx", "id")} for r in rows]


@pytest.mark.parametrize("name", list(KIND))
def test_no_evaluation_row_is_in_train_or_select(tasks, name):
    made, _ = tasks
    task, kind = made[name], KIND[name]
    rows = ft_tasks.load_rows(task)
    evaluation = {k for r in rows.evaluation["dev"] for k in leak_keys(r, kind)}
    assert rows.train and rows.select and rows.evaluation["dev"]
    for split in (rows.train, rows.select):
        assert not [r for r in split if leak_keys(r, kind) & evaluation]
    assert not {content_key(r, kind) for r in rows.select} & {content_key(r, kind) for r in rows.train}
    if name != "pkgdocs":  # the fixtures plant leaks; each is removed and counted
        assert rows.dropped["train_in_evaluation"] == {"sst2": 5, "squad": 2, "conll": 2}[name]
    assert [r["row_index"] for r in rows.select] == list(range(len(rows.select)))
    if name == "pkgdocs":  # by document: a document's paragraphs stay in one split
        docs = [{r["document"] for r in split} for split in (rows.train, rows.select, rows.evaluation["dev"])]
        assert not (docs[0] & docs[1] or docs[0] & docs[2] or docs[1] & docs[2])
    if name == "squad":  # by context: a paragraph's questions stay in one split
        assert not {r["context"] for r in rows.train} & {r["context"] for r in rows.select}
    tags = ft_tasks.split_tags(rows)
    assert tags["data.select.rows"] == str(len(rows.select))
    assert tags["data.dev.sha256"] == split_digest(rows.evaluation["dev"])


@pytest.mark.parametrize("name", list(KIND))
def test_changing_an_evaluation_row_changes_no_train_or_select_row(tasks, name):
    made, change = tasks
    before = ft_tasks.load_rows(made[name])
    change(name)
    after = ft_tasks.load_rows(made[name])
    assert split_digest(after.evaluation["dev"]) != split_digest(before.evaluation["dev"])
    assert split_digest(after.train) == split_digest(before.train)
    assert split_digest(after.select) == split_digest(before.select)


def test_a_leak_removed_from_a_document_moves_none_of_its_other_sentences():
    """A CoNLL document is a group named by its sentences. A dev file that now holds one sentence of each of ten
    training documents takes those sentences out of train; the documents keep the names they had, so every other
    sentence stays in the role it had (renamed after the removal, a document would move with its new hash)."""
    from pipelines.tasks.roles import assign_roles

    train = [{"tokens": [f"Person{d}x{i}", "visited", f"Town{i}", "."], "ner_tags": ["B-PER", "O", "B-LOC", "O"],
              "document": d} for d in range(60) for i in range(4)]
    dev = [{"tokens": ["Dev", "left", "."], "ner_tags": ["B-PER", "O", "O"], "document": 0}]
    leaked = [{**train[4 * d + 1], "document": 1} for d in range(0, 60, 6)]
    before = assign_roles(train, {"dev": dev}, "token-classification", 0.3, 100)
    after = assign_roles(train, {"dev": dev + leaked}, "token-classification", 0.3, 100)
    assert after.dropped["train_in_evaluation"] == len(leaked) == 10
    role = {json.dumps(r["tokens"]): "select" for r in before.select}
    moved = [r["tokens"] for r in after.train if role.get(json.dumps(r["tokens"])) == "select"] + [
        r["tokens"] for r in after.select if json.dumps(r["tokens"]) not in role]
    assert 20 <= len(before.select) and not moved


def test_the_capped_sample_keeps_its_rows_when_others_leave():
    """task.max_*_examples keeps a stable sample of N rows. A row leaving the split (a leak now in dev, a group carved
    to select) takes only itself out: the other N-1 stay and the next is drawn in; the same rows in another order are
    the same sample. Chosen by position, one row less before them redrew every row after it."""
    from pipelines.tasks.roles import numbered

    rows = [{"idx": i, "text_a": f"review {i}", "text_b": None, "label": i % 2} for i in range(400)]
    rows += [dict(rows[0]), dict(rows[0])]  # exact duplicates are rows of their own
    sample = [r["idx"] for r in numbered(rows, 50)]
    assert len(sample) == 50 and len(set(sample)) in (48, 49, 50)
    for gone in (0, 7, 199, 399):
        kept = [r["idx"] for r in numbered(rows[:gone] + rows[gone + 1:], 50)]
        assert len(kept) == 50 and len(set(sample) - set(kept)) <= 1, gone
        assert gone in sample or kept == sample
    assert sorted(r["idx"] for r in numbered(rows[::-1], 50)) == sorted(sample)
    assert [r["row_index"] for r in numbered(rows, 50)] == list(range(50))


@pytest.mark.parametrize("id_column", ["", "qid"])
def test_question_ids_that_repeat_across_files_are_no_leak(tmp_path, id_column):
    """Rows without an id column are "<file name>:<n>": train tr/data.jsonl and dev dv/data.jsonl share those ids, as
    do a user's ids that restart in each file. Only a row also in dev (same question and context) leaves train."""
    from pipelines.tasks import Columns, read_file
    from pipelines.tasks.roles import assign_roles

    def qa_file(folder, questions):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "data.jsonl"
        path.write_text("".join(json.dumps({"qid": str(i), "question": q, "context": f"Paragraph {p}. " + CONTEXT,
                                            "answers": []}) + "\n" for i, (q, p) in enumerate(questions)))
        return [r for b in read_file(str(path), "jsonl", "question-answering", Columns(id=id_column)) for r in b.rows]

    train = qa_file("tr", [(f"Train question {i}?", i) for i in range(30)])
    dev = qa_file("dv", [("Train question 0?", 0)] + [(f"Dev question {i}?", 100 + i) for i in range(5)])
    assert train[1]["id"] == dev[1]["id"]  # "data.jsonl:1" or "1"
    rows = assign_roles(train, {"dev": dev}, "question-answering", 0.2, 100)
    assert rows.dropped["train_in_evaluation"] == 1  # the one row dev also holds
    assert len(rows.train) + len(rows.select) == 29


def test_other_questions_on_a_shared_paragraph_with_restarted_ids_stay_in_train():
    """Questions split at random (not by paragraph) and numbered from 0 in each file: train's "0" and dev's "0" ask
    different things of the same paragraph. Only the SQuAD benchmark's ids (global) make an id a leak."""
    from pipelines.tasks.roles import assign_roles

    def row(i, question, paragraph):
        return {"id": str(i), "question": question, "context": f"Paragraph {paragraph}. " + CONTEXT, "answers": []}

    train = [row(0, "What is the capital of France?", 0), row(1, "What is the capital of Germany?", 0)] + [
        row(i, f"Train question {i}?", i) for i in range(2, 40)]
    dev = [row(0, "Which country has Berlin?", 0), row(1, "Which country has Paris?", 0)]
    own = assign_roles(train, {"dev": dev}, "question-answering", 0.2, 100)
    assert own.dropped["train_in_evaluation"] == 0 and len(own.train) + len(own.select) == 40
    benchmark = assign_roles(train, {"dev": dev}, "question-answering", 0.2, 100, global_ids=True)
    assert benchmark.dropped["train_in_evaluation"] == 2  # the same ids over the same paragraph: reworded questions


def test_carve_is_stable_whole_groups_and_capped():
    rows = [{"text_a": f"sentence {i}", "text_b": None, "label": i % 2, "document": f"doc{i // 4}"} for i in range(400)]
    group = lambda r: r["document"]  # noqa: E731
    train, select = carve(rows, group, 0.1, 10_000)
    assert 0.04 * len(rows) < len(select) < 0.2 * len(rows) and len(train) + len(select) == len(rows)
    assert not {r["document"] for r in train} & {r["document"] for r in select}
    shuffled = copy.deepcopy(rows)
    random.Random(0).shuffle(shuffled)
    _, again = carve(shuffled, group, 0.1, 10_000)
    assert sorted(map(json.dumps, again)) == sorted(map(json.dumps, select))  # the order of rows does not matter
    _, capped = carve(rows, group, 0.1, 8)
    assert len(capped) == 8 and {r["document"] for r in capped} <= {r["document"] for r in select}
    _, tiny = carve(rows[:4], group, 0.1, 10)  # one group only: select keeps it (each side keeps one when it can)
    assert len(tiny) == 4
    train2, select2 = carve(rows[:8], group, 0.999, 100)
    assert train2 and select2  # two groups: one each


def test_selection_options_are_validated():
    from bert_core.config import ConfigError
    from jobs.config.finetune import FinetuneConfig

    for bad, match in (({"selection_fraction": 0.0}, "selection_fraction"), ({"selection_fraction": 1.0},
                                                                              "selection_fraction"),
                       ({"selection_max_rows": 0}, "selection_max_rows")):
        cfg = FinetuneConfig(init="x", task=TaskConfig(**bad))
        with pytest.raises(ConfigError, match=match):
            cfg._validate_task()


def test_a_checkpoints_basis_ignores_the_evaluation_split_and_the_runs_digest_does_not(tasks):
    """A resubmitted fine-tune resumes when only dev changed (its checkpoint trained and chose on train and select),
    while the run's data digest (lineage) names all three splits."""
    made, change = tasks
    before = ft_tasks.load_rows(made["sst2"])
    change("sst2")
    after = ft_tasks.load_rows(made["sst2"])
    basis = ("train", ft_tasks.SELECT)
    assert ft_tasks.rows_digest(after, basis) == ft_tasks.rows_digest(before, basis)
    assert ft_tasks.rows_digest(after) != ft_tasks.rows_digest(before)


def test_a_premise_and_its_hypotheses_stay_in_one_split_and_conll_documents_are_named_by_content():
    """Sentence pairs are carved by their first sentence (an MNLI premise has ~3 hypotheses: a hypothesis in select
    whose premise trained the model would flatter select); a CoNLL document keeps its place whatever its number."""
    from pipelines.tasks.roles import group_key

    pairs = [{"text_a": f"premise {i // 3}", "text_b": f"hypothesis {i}", "label": i % 3} for i in range(300)]
    train, select = carve(pairs, group_key(pairs, "classification"), 0.1, 10_000)
    assert select and not {r["text_a"] for r in train} & {r["text_a"] for r in select}
    docs = [{"document": d, "tokens": [f"w{d}", f"s{s}"], "ner_tags": ["O", "O"]} for d in range(40) for s in range(2)]
    _, before = carve(docs, group_key(docs, "token-classification"), 0.2, 10_000)
    shifted = [{**r, "document": r["document"] + 1} for r in docs]  # a document added at the top of the file
    _, after = carve(shifted, group_key(shifted, "token-classification"), 0.2, 10_000)
    assert [r["tokens"] for r in after] == [r["tokens"] for r in before]


def test_a_fine_tune_resubmitted_on_another_worker_count_is_refused():
    """Its step counts batches of the saved worker count: 1 -> 2 workers resumed at step 100 of a new total of 150
    trained 2 of 3 epochs and halved the learning rate, with no error. The basis names the count."""
    from jobs.config.finetune import FinetuneConfig
    from jobs.finetune import continuation_basis

    one = FinetuneConfig(init="x")
    two = FinetuneConfig(init="x")
    two.scaling.num_workers = one.scaling.num_workers + 1
    a, b = continuation_basis(one, "d", "x"), continuation_basis(two, "d", "x")
    assert {k for k in a if a[k] != b[k]} == {"scaling.num_workers"}  # resubmit.check names it and refuses


def test_a_classification_whose_training_rows_hold_one_label_is_refused():
    """A one-output head is a regression head (MSE), and select rows of that one label score accuracy 1.0."""
    task = TaskConfig(name="files", kind="classification")
    with pytest.raises(ConfigError, match=r"at least two labels in the training rows, got \['spam'\]"):
        task.with_labels(("spam",))
    assert task.with_labels(("ham", "spam")).labels == ["ham", "spam"]
    multi = TaskConfig(name="files", kind="multi-label")  # one output: MSE on 0/1, scored through a sigmoid
    with pytest.raises(ConfigError, match=r"multi-label needs at least two labels .*task.kind=classification"):
        multi.with_labels(("spam",))
    assert multi.with_labels(("ham", "spam")).labels == ["ham", "spam"]
    assert TaskConfig(name="files", kind="question-answering").with_labels(()).labels == []
    assert TaskConfig(name="files", kind="regression").with_labels(("score",)).labels == ["score"]
    # GLUE's tasks with the labels ft_tasks.load_rows gives them: STS-B's is its score (it was refused, so no STS-B
    # run could start)
    from pipelines.tasks.glue import GLUE_TASKS

    for name, spec in GLUE_TASKS.items():
        assert TaskConfig(name=name).with_labels(spec.labels or ("score",)).labels == list(spec.labels or ("score",))



@pytest.mark.parametrize("name", ["conll", "pkgdocs"])
def test_an_input_that_two_groups_share_is_dropped_from_select_not_left_in_both(tmp_path, name):
    """The carve keeps a group whole, but groups share inputs: CoNLL-2003 repeats a sentence in many documents (each
    story's "( Reuters )" line), and a package's modules repeat a paragraph. That input is then in train and in
    select, where the model has seen it and select flatters it; select's copy leaves and is counted. pkgdocs ships
    its own select split (by document), which the same rule covers."""
    if name == "conll":
        (tmp_path / "conll").mkdir()
        train = [s for d in range(40)
                 for s in (f"Person{d} visited Town{d} .", "London ( Reuters ) .", f"Aide{d} left .")]
        (tmp_path / "conll" / "train.txt").write_text(conll_text(train))
        (tmp_path / "conll" / "dev.txt").write_text(conll_text([f"Dev{i} left City{i} ." for i in range(12)]))
        task = TaskConfig(name="conll", train_file=str(tmp_path / "conll" / "train.txt"),
                          dev_file=str(tmp_path / "conll" / "dev.txt"))
        field, shared = "tokens", ["London", "(", "Reuters", ")", "."]
    else:
        corpus = write_corpus(tmp_path / "corpus", {"alpha": 30, "beta": 24, "gamma": 20})
        task = TaskConfig(name="pkgdocs", corpus_dir=str(corpus), num_classes=3, harvest_max_mb=1)
        first = ft_tasks.load_rows(task)
        fitted = {r["document"] for split in (first.train, first.select) for r in split}
        field = "text_a"
        shared = "Report every bug you find to the project's issue tracker, with its version and an example."
        docs = [json.loads(line) for line in (corpus / "installed-docs-00.jsonl").read_text().splitlines()]
        for d in docs:  # the documents of train and select, not dev's (a paragraph dev holds leaves both)
            if d["url"] in fitted:
                d["text"] = shared + "\n\n" + d["text"]
        (corpus / "installed-docs-00.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    kind = KIND[name]
    rows = ft_tasks.load_rows(task)
    assert rows.dropped["select_in_train"] > 0
    assert not {content_key(r, kind) for r in rows.select} & {content_key(r, kind) for r in rows.train}
    assert shared in [r[field] for r in rows.train] and shared not in [r[field] for r in rows.select]
    assert rows.select  # the groups' own inputs stay
