"""The gate (and the dev metrics) score entities by word whatever `label_all_subwords` trained with: scorer.score
featurizes with first pieces alone (ft_tasks.evaluation_task)."""

import torch
import transformers

from jobs.config.finetune import TaskConfig
from jobs.registry import scorer
from tests.unit.test_predictor import tiny


def test_a_model_tagging_every_piece_is_judged_by_word(tmp_path):
    """A tagger that says B-LOC everywhere, on a sentence whose one place is a five-piece word: by word, 3 entities
    predicted for 1 gold (F1 0.5); by piece, as training labeled them, 7 predicted for 5 gold (F1 0.83)."""
    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=2, id2label={0: "O", 1: "B-LOC"},
                  label2id={"O": 0, "B-LOC": 1})
    model = transformers.BertForTokenClassification.from_pretrained(folder)
    with torch.no_grad():
        model.classifier.bias.copy_(torch.tensor([-10.0, 10.0]))
    model.save_pretrained(folder)
    task = TaskConfig(name="files", kind="token-classification", labels=["O", "B-LOC"], label_all_subwords=True,
                      max_seq_len=24)
    rows = [{"row_index": 0, "id": "0", "document": "0", "tokens": ["Visit", "Ouagadougou", "today"],
             "ner_tags": ["O", "B-LOC", "O"]}]
    assert scorer.score(folder, task, "dev", rows).value == 0.5
