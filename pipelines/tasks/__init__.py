"""Fine-tuning datasets -> model features: GLUE (glue), SQuAD v1.1/v2.0 (squad), CoNLL-2003 NER (conll),
and a user's own labeled files (files: CSV, TSV, JSON Lines, Parquet, datasets folders) for five kinds of task.

Each module has a reader (`load_*` -> tasks.common.TaskSplit: row dicts + reject counts), a
featurizer (`*_features` -> dict of fixed-shape numpy arrays named as transformers' heads expect
them: input_ids, token_type_ids, attention_mask, labels / start_positions / end_positions), and
the task's official metric. Tokenizers are any fast BERT tokenizer or a directory holding one.
"""

from pipelines.tasks.common import TaskDataError, TaskFeaturizer, TaskSplit, load_tokenizer
from pipelines.tasks.file_finder import resolve_files
from pipelines.tasks.files import FORMATS, KINDS, Columns, FileBatch, read_file
from pipelines.tasks.labels import encode_labels, file_metrics, label_set
from pipelines.tasks.conll import CONLL_LABELS, conll_features, load_conll, ner_metrics
from pipelines.tasks.glue import GLUE_TASKS, GlueTask, glue_features, glue_metrics, glue_task, load_glue
from pipelines.tasks.squad import (best_null_threshold, best_spans, load_squad, postprocess_predictions, squad_eval_features, squad_metrics,
                                   squad_train_features)

__all__ = [
    "TaskDataError", "TaskFeaturizer", "TaskSplit", "load_tokenizer",
    "FORMATS", "KINDS", "Columns", "FileBatch", "encode_labels", "file_metrics", "label_set", "read_file", "resolve_files",
    "CONLL_LABELS", "conll_features", "load_conll", "ner_metrics",
    "GLUE_TASKS", "GlueTask", "glue_features", "glue_metrics", "glue_task", "load_glue",
    "best_null_threshold", "best_spans", "load_squad", "postprocess_predictions", "squad_eval_features", "squad_metrics", "squad_train_features",
]
