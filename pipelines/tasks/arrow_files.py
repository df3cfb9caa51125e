"""Arrow-backed task files -> records for files.py: Parquet files and HF datasets `save_to_disk` folders, read with
pyarrow alone (datasets need not be installed).

Both may carry datasets' features, whose ClassLabel names turn integer label / tag columns into names: a
save_to_disk folder in dataset_info.json, a Parquet file that datasets wrote (`to_parquet`, the Hub's
auto-converted files) in its schema's b"huggingface" metadata, {"info": {"features": {...}}}. A column reads the
same names from either. `require(names)` is files.py's check of a file's columns: the names to read, or it raises.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.tasks.common import TaskDataError


class classlabel(str):  # lower case: its name is the label type files.py records
    """A class read as its ClassLabel name from a `datasets` id. files._Rows takes a label's Python type name as its
    file's label type, so a file of these has the label type "classlabel": stream._mixed_classes then knows its
    classes are names, even digits (yelp_polarity's are "1" and "2" for the ids 0 and 1), and refuses it beside a
    file of ids, such as the dataset's own to_json / to_csv export, where "1" would be another class."""


def _arrow_records(batches, batch_rows: int, classes: dict):
    """Records of Arrow batches; `classes`: column -> ClassLabel names, to turn datasets' ids into
    names (an id out of range, datasets' -1 for unlabeled, drops the label; one in a list drops the whole list).
    Names that are their own ids ("0", "1", ...: ClassLabel(num_classes=n)) stay plain str: an export's ids agree."""
    classes = {c: names if names == [str(i) for i in range(len(names))] else [classlabel(x) for x in names]
               for c, names in classes.items()}
    n = 0
    for batch in batches:
        for start in range(0, batch.num_rows, batch_rows):
            for record in batch.slice(start, batch_rows).to_pylist():
                for column, names in classes.items():
                    value = record.get(column)
                    if isinstance(value, list) and any(isinstance(v, int) and not 0 <= v < len(names) for v in value):
                        del record[column]  # one unlabeled id (-1) among tags or classes: the row has no labels
                    elif isinstance(value, list):
                        record[column] = [names[v] if isinstance(v, int) else v for v in value]
                    elif isinstance(value, int) and 0 <= value < len(names):
                        record[column] = names[value]
                    elif isinstance(value, int):
                        del record[column]
                yield n, f"row {n}", record, record
                n += 1


def _class_names(feature):
    """ClassLabel names of a datasets feature or of its List / Sequence items (datasets < 4: [item])."""
    if isinstance(feature, list):
        return _class_names(feature[0]) if feature else None
    if not isinstance(feature, dict):
        return None
    return feature.get("names") if feature.get("_type") == "ClassLabel" else _class_names(feature.get("feature"))


def _classes(features, columns) -> dict:
    """column -> ClassLabel names, for those of `columns` (the label and tags columns) that datasets' `features`
    declare ClassLabel (or a list of them)."""
    features = features if isinstance(features, dict) else {}
    classes = {c: _class_names(features.get(c)) for c in columns if c}
    return {c: names for c, names in classes.items() if isinstance(names, list) and names}


def parquet_file(path, f) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(f)
    except (pa.ArrowException, OSError) as e:
        raise TaskDataError(f"{path}: not a Parquet file ({e})") from e


def parquet_features(path, pf: pq.ParquetFile):
    """datasets' features in a Parquet schema's b"huggingface" metadata (None without them). Metadata that is no JSON
    raises: read without its names, the file's label ids would silently become its labels."""
    raw = (pf.schema_arrow.metadata or {}).get(b"huggingface")
    if raw is None:
        return None
    try:
        meta = json.loads(raw)
    except ValueError as e:
        raise TaskDataError(f"{path}: the Parquet schema's 'huggingface' metadata (datasets' features) is not JSON "
                            f"({e})") from e
    info = meta.get("info") if isinstance(meta, dict) else None
    return info.get("features") if isinstance(info, dict) else None


def parquet_records(path, f, batch_rows: int, label_columns, require: Callable[[list], list]):
    pf = parquet_file(path, f)
    wanted = require(pf.schema_arrow.names)
    classes = _classes(parquet_features(path, pf), label_columns)
    yield from _arrow_records(pf.iter_batches(batch_size=batch_rows, columns=wanted), batch_rows, classes)


def hf_records(path, batch_rows: int, label_columns, require: Callable[[list], list]):
    """A datasets save_to_disk folder: state.json lists Arrow IPC stream files, dataset_info.json's
    features name the ClassLabel ids."""
    fs, root = fsspec.core.url_to_fs(path)
    try:
        with fs.open(posixpath.join(root, "state.json"), "rb") as f:
            files = [d["filename"] for d in json.load(f)["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TaskDataError(f"{path}: not a datasets save_to_disk folder (state.json with _data_files): {e!r}") from e
    features = {}
    if fs.isfile(posixpath.join(root, "dataset_info.json")):
        with fs.open(posixpath.join(root, "dataset_info.json"), "rb") as f:
            features = json.load(f).get("features") or {}

    def batches():
        for name in files:
            with fs.open(posixpath.join(root, name), "rb") as f:
                try:
                    reader = pa.ipc.open_stream(f)
                except pa.ArrowException as e:
                    raise TaskDataError(f"{path}: {name} is not an Arrow stream ({e})") from e
                wanted = require(reader.schema.names)
                yield from (batch.select(wanted) for batch in reader)

    yield from _arrow_records(batches(), batch_rows, _classes(features, label_columns))
