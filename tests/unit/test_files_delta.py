"""Folders that a table format or a partitioned write leaves: rows the files on disk do not hold as plain files do.

A Delta Lake table folder (Spark's / Databricks' `format("delta")`) keeps the part files that later versions replaced
or deleted until VACUUM; only its hidden `_delta_log/` says which are live. Read as a folder of Parquet files, the
stale rows were trained on (and predicted) beside the live ones, unsaid. A Spark `partitionBy("label")` folder holds
the label in its folder names (`label=ham/`), not in the files: its refusal said "set task.columns.label", which
cannot help. No Ray."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.tasks import read_file, resolve_files
from pipelines.tasks.common import TaskDataError
from pipelines.tasks.files import Columns, check_columns


def delta_table(folder):
    """A Delta table after an overwrite (p_delta.py): version 0 added part aaa, version 1 removed it and added bbb."""
    (folder / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"text": ["old a", "old b"], "label": ["spam", "spam"]}),
                   folder / "part-00000-aaa-c000.snappy.parquet")
    pq.write_table(pa.table({"text": ["new a", "new b"], "label": ["ham", "spam"]}),
                   folder / "part-00000-bbb-c000.snappy.parquet")
    log = [[{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {"add": {"path": "part-00000-aaa-c000.snappy.parquet", "dataChange": True}}],
           [{"remove": {"path": "part-00000-aaa-c000.snappy.parquet", "dataChange": True}},
            {"add": {"path": "part-00000-bbb-c000.snappy.parquet", "dataChange": True}}]]
    for version, actions in enumerate(log):
        (folder / "_delta_log" / f"{version:020d}.json").write_text("\n".join(map(json.dumps, actions)))
    return folder


@pytest.mark.parametrize("labeled", [True, False], ids=["fine-tuning", "prediction"])
def test_a_delta_table_folder_is_refused_not_read_whole(tmp_path, labeled):
    table = delta_table(tmp_path / "reviews")
    with pytest.raises(TaskDataError, match=r"reviews is a Delta table.*_delta_log.*export") as e:
        resolve_files(str(table), labeled=labeled, split="train" if labeled else "")
    assert "DeltaTable" in str(e.value) and "write.parquet" in str(e.value)  # the two ways to export it


def test_a_delta_table_below_the_named_folder_is_refused_naming_it(tmp_path):
    delta_table(tmp_path / "data" / "tables" / "reviews")
    pq.write_table(pa.table({"text": ["x"], "label": ["ham"]}), tmp_path / "data" / "extra.parquet")
    with pytest.raises(TaskDataError, match=r"tables/reviews is a Delta table"):
        resolve_files(str(tmp_path / "data"), split="train")


def test_a_glob_over_a_delta_tables_part_files_is_refused(tmp_path):
    table = delta_table(tmp_path / "reviews")
    with pytest.raises(TaskDataError, match="Delta table"):
        resolve_files(str(table / "*.parquet"), split="train")


def test_a_spark_folder_with_hidden_parts_but_no_delta_log_is_still_read(tmp_path):
    folder = tmp_path / "spark"
    (folder / "_temporary" / "0").mkdir(parents=True)
    (folder / "_SUCCESS").write_text("")
    (folder / "_delta_logs_old").mkdir()  # a name that only starts like the log's
    pq.write_table(pa.table({"text": ["a"], "label": ["ham"]}), folder / "part-00000.parquet")
    assert [p.rsplit("/", 1)[-1] for p, _ in resolve_files(str(folder), split="train")] == ["part-00000.parquet"]


def hive_folder(folder, write):
    """df.write.partitionBy("label") (p_hive.py): the label is in the folder names, not in the files."""
    for label in ("ham", "spam"):
        (folder / f"label={label}").mkdir(parents=True)
        write(folder / f"label={label}", label)
    (folder / "_SUCCESS").write_text("")
    return folder


def test_a_hive_partitioned_label_is_named_not_asked_for_as_a_setting(tmp_path):
    folder = hive_folder(tmp_path / "hive", lambda d, label: pq.write_table(
        pa.table({"text": [f"{label} one", f"{label} two"]}), d / "part-00000-x.c000.snappy.parquet"))
    files = resolve_files(str(folder), split="train")
    with pytest.raises(TaskDataError, match=r"'label' is in the folder names \(label=ham/") as e:
        check_columns(files, "classification")
    assert "write it into the files" in str(e.value) and "set task.columns.label" not in str(e.value)


@pytest.mark.parametrize("ext", ["csv", "json"])
def test_a_hive_partitioned_label_of_a_text_format_is_named(tmp_path, ext):
    row = "text\n{0} one\n" if ext == "csv" else '{{"text": "{0} one"}}\n'
    folder = hive_folder(tmp_path / "hive", lambda d, label: (d / f"part-0.{ext}").write_text(row.format(label)))
    path, fmt = resolve_files(str(folder), split="train")[0]
    with pytest.raises(TaskDataError, match=r"'label' is in the folder names \(label=ham/"):
        list(read_file(path, fmt, "classification"))


def test_a_missing_column_that_is_no_partition_keeps_its_setting(tmp_path):
    """Only the partition column is said to be in the folder names; another missing one still names its setting."""
    folder = hive_folder(tmp_path / "hive", lambda d, label: pq.write_table(
        pa.table({"body": ["x"]}), d / "part-0.parquet"))
    with pytest.raises(TaskDataError, match=r"set task.columns.text\b.*'label' is in the folder names"):
        check_columns(resolve_files(str(folder), split="train"), "classification")
    # a value that merely contains the column's name is no partition of it
    other = tmp_path / "x" / "mylabel=a"
    other.mkdir(parents=True)
    pq.write_table(pa.table({"text": ["x"]}), other / "part-0.parquet")
    with pytest.raises(TaskDataError, match=r"set task.columns.label$"):
        check_columns([(str(other / "part-0.parquet"), "parquet")], "classification", Columns())


def test_a_delta_table_as_a_prediction_input_is_refused_before_ray(tmp_path):
    """jobs/predict.py lists its inputs with the same resolve_files: one line, `input: ...`, before any work."""
    import dataclasses

    from bert_core.config import ConfigError
    from jobs import predict
    from jobs.config.predict import PredictConfig

    table = delta_table(tmp_path / "reviews")
    cfg = dataclasses.replace(PredictConfig(), input=str(table), output=str(tmp_path / "out"))
    with pytest.raises(ConfigError, match=r"^input: .*reviews is a Delta table"):
        predict._plan(cfg, None, tmp_path / "out")
