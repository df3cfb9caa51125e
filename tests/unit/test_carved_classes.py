"""Your own files' dev and select carved from train: the label set is the training files' (their carved rows too), so
a class whose every row was carved holds no training row. Its rows are rejected there as label_not_in_train, as a given
dev file's would be: scored, they were a term of macro_f1 no model could score (a review: 0.66 for a model right on
every class it trained on). Ray Data runs in this process (tests.unit.test_shared_groups.local_ray)."""

import collections

from jobs.loops import ft_files, ft_tasks
from pipelines.tasks.labels import file_metrics
from pipelines.tasks.roles import content_key
from pipelines.tasks.stream import EVALUATION_SALT, unit_hash
from tests.unit.test_shared_groups import local_ray, write_jsonl  # noqa: F401 (local_ray: a fixture)


def carved_to_dev(text: str) -> bool:
    return unit_hash(EVALUATION_SALT + content_key({"text_a": text, "text_b": None}, "classification")) < 0.1


def test_a_class_whose_rows_were_all_carved_is_rejected_from_dev_not_scored(tmp_path, local_ray):  # noqa: F811
    rare = [t for t in (f"legal complaint {i}" for i in range(200)) if carved_to_dev(t)][:3]
    rows = [{"text": f"ordinary ticket {i} about billing", "label": "billing" if i % 2 else "shipping"}
            for i in range(400)] + [{"text": t, "label": "legal"} for t in rare]
    task = ft_tasks.task_config({"name": "files", "kind": "classification",
                                 "train_file": write_jsonl(tmp_path / "train.jsonl", rows)})
    loaded = ft_files.load_files(task)
    dev = loaded.evaluation["dev"]
    assert loaded.rejected["dev"] == {"label_not_in_train": 3}
    assert "legal" not in {loaded.labels[r["label"]] for r in [*dev, *loaded.select]}
    gold = [r["label"] for r in dev]
    assert file_metrics("classification", gold, gold, loaded.labels)["macro_f1"] == 1.0  # every term a trained class
    assert collections.Counter(loaded.labels[g] for g in gold).keys() == {"billing", "shipping"}
