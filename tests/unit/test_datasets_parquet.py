"""Parquet files that Hugging Face `datasets` wrote (to_parquet, the Hub's converted files): their integer labels and
tags named by the ClassLabel names in the schema's metadata, as a save_to_disk folder's are."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.tasks import Columns, TaskDataError
from pipelines.tasks.files import check_columns
from tests.unit.test_files_task import HF, read


def as_parquet(folder, path, features):
    """The Arrow data of a save_to_disk folder as a Parquet file carrying `features` as datasets writes them."""
    with pa.ipc.open_stream(folder / "data-00000-of-00001.arrow") as reader:
        table = reader.read_all()
    meta = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    pq.write_table(table.replace_schema_metadata(meta), path)
    return str(path)


def test_parquet_written_by_datasets_names_its_class_ids_as_its_folder_would(tmp_path):
    """datasets' to_parquet (and the Hub's auto-converted Parquet) keeps ClassLabel names in the schema's
    b"huggingface" metadata: integer labels and tags read as those names, as from a save_to_disk folder."""
    for folder, kind, columns in ((HF / "sentiment", "classification", Columns(text="sentence")),
                                  (HF / "ner-dict" / "validation", "token-classification", Columns(tags="ner_tags"))):
        features = json.loads((folder / "dataset_info.json").read_text())["features"]
        from_folder = read(str(folder), "hf", kind, columns)
        from_parquet = read(as_parquet(folder, tmp_path / folder.name, features), "parquet", kind, columns)  # same ids
        assert from_parquet[:2] == from_folder[:2]  # rows and rejects (-1: no label; a tag list of another length)
    tags = {"_type": "ClassLabel", "names": ["O", "B-PER", "I-PER"]}
    table = pa.table({"tokens": [["John", "Smith", "ran"]], "ner_tags": [[1, 2, 0]]})
    for older in ({"_type": "Sequence", "feature": tags}, [tags]):  # datasets < 4's sequences, as dict or as list
        meta = {b"huggingface": json.dumps({"info": {"features": {"ner_tags": older}}}).encode()}
        pq.write_table(table.replace_schema_metadata(meta), tmp_path / "old.parquet")
        rows = read(str(tmp_path / "old.parquet"), "parquet", "token-classification", Columns(tags="ner_tags"))[0]
        assert rows[0]["ner_tags"] == ["B-PER", "I-PER", "O"]
    # an unlabeled id (-1) among the tags: the row has no tags (it had the tag "-1")
    unlabeled = pa.table({"tokens": [["John", "ran"], ["Ann"]], "ner_tags": [[1, -1], [1]]})
    pq.write_table(unlabeled.replace_schema_metadata(meta), tmp_path / "unlabeled.parquet")
    rows, rejects = read(str(tmp_path / "unlabeled.parquet"), "parquet", "token-classification",
                         Columns(tags="ner_tags"))[:2]
    assert [r["ner_tags"] for r in rows] == [["B-PER"]] and rejects == {"missing_label": 1}, rejects
    pq.write_table(table.replace_schema_metadata({b"huggingface": b"{not json"}), tmp_path / "bad.parquet")
    with pytest.raises(TaskDataError, match="bad.parquet: the Parquet schema's 'huggingface' metadata"):
        read(str(tmp_path / "bad.parquet"), "parquet", "token-classification", Columns(tags="ner_tags"))
    with pytest.raises(TaskDataError, match="bad.parquet: the Parquet schema's 'huggingface' metadata"):
        check_columns([(str(tmp_path / "bad.parquet"), "parquet")], "token-classification", Columns(tags="ner_tags"))

# --- token classification, question answering ---


def written_classes(tmp_path, name, labels, names=None, fmt="parquet"):
    """stream._read's record of how one file writes its classes (path -> [label type, a class is a name]): a Parquet
    file datasets wrote with ClassLabel `names`, or the dataset's to_json / to_csv export of the same ids."""
    import numpy as np

    from pipelines.tasks.stream import _read

    path = tmp_path / name
    if fmt == "parquet":
        features = {"text": {"_type": "Value", "dtype": "string"}, "label": {"_type": "ClassLabel", "names": names}}
        meta = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
        table = pa.table({"text": [f"t{i}" for i in range(len(labels))], "label": labels})
        pq.write_table(table.replace_schema_metadata(meta), path)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps({"text": f"t{i}", "label": x}) + "\n" for i, x in enumerate(labels)))
    else:
        path.write_text("text,label\n" + "".join(f"t{i},{x}\n" for i, x in enumerate(labels)))
    records = _read({"path": np.asarray([str(path)]), "fmt": np.asarray([fmt])}, "classification", Columns())
    return {p: c for rec in records for p, c in json.loads(rec["classes"][-1]).items()}


def test_class_names_that_are_digits_are_names_beside_the_ids_of_an_export(tmp_path):
    """yelp_polarity's ClassLabel names are "1" and "2" for the ids 0 and 1: its Parquet reads "1" / "2", its to_json
    or to_csv export "0" / "1". Read together, id 1 (the second class) and name "1" (the first) were one class, and
    nothing was refused: the Parquet file is now a file of names, refused beside ids, whatever task.labels says.
    Names that are their ids (ClassLabel(num_classes=2): "0", "1") agree with an export; two Parquet files agree."""
    from pipelines.tasks.stream import _mixed_classes

    digits = written_classes(tmp_path, "train.parquet", [0, 1], ["1", "2"])
    assert list(digits.values()) == [["classlabel", False]]
    for export in (written_classes(tmp_path, "export.jsonl", [0, 1], fmt="jsonl"),
                   written_classes(tmp_path, "export.csv", [0, 1], fmt="csv")):
        for labels in ((), ("0", "1", "2")):
            with pytest.raises(TaskDataError, match=r"export\.(jsonl|csv) writes its classes as integers \(ids\) and "
                                                    r".*train\.parquet as its datasets ClassLabel names"):
                _mixed_classes({**digits, **export}, "data/", labels)
        own_ids = written_classes(tmp_path, "own.parquet", [0, 1], ["0", "1"])
        _mixed_classes({**own_ids, **export}, "data/", ())
    _mixed_classes({**digits, **written_classes(tmp_path, "more.parquet", [1, 0], ["1", "2"])}, "data/", ())
    named = written_classes(tmp_path, "named.parquet", [0, 1], ["neg", "pos"])
    _mixed_classes({**named, **written_classes(tmp_path, "names.csv", ["pos", "neg"], fmt="csv")}, "data/", ())
