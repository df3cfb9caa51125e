"""A ModernBERT checkpoint's classifier_pooling and classifier_dropout (answerdotai/ModernBERT-base's config.json:
"mean") survive fine-tuning: the head pools as the checkpoint says, and the export (written as the engine writes it)
loads in transformers' ModernBertForSequenceClassification as the same head, with the same logits."""

from pathlib import Path

import torch
import transformers

from bert_core.checkpoint import save_state_dict
from jobs.config.finetune import FinetuneConfig
from jobs.config.io import load_config
from jobs.workers.finetune_model import build_model

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 128


def release(folder: Path) -> Path:
    """A transformers ModernBertForMaskedLM saved with mean pooling and classifier dropout, as ModernBERT-base is."""
    torch.manual_seed(0)
    cfg = transformers.ModernBertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=64, max_position_embeddings=64, local_attention=16,
                                        pad_token_id=0, bos_token_id=None, eos_token_id=None, cls_token_id=None,
                                        sep_token_id=None, classifier_pooling="mean", classifier_dropout=0.1)
    transformers.ModernBertForMaskedLM(cfg).save_pretrained(folder)
    return folder


def test_a_mean_pooled_checkpoint_fine_tunes_and_exports_as_the_same_mean_pooled_head(tmp_path):
    init = release(tmp_path / "init")
    cfg = load_config(FinetuneConfig, ROOT / "configs/finetune/pkgdocs.yaml", [f"init={init}"])
    cfg.task.labels = ["a", "b", "c"]
    model, _ = build_model(cfg, init)
    assert model.config.classifier_pooling == "mean" and model.drop.p == 0.1
    torch.nn.init.normal_(model.classifier.weight)  # a trained classifier: logits far apart between poolings
    out = save_state_dict(model.state_dict(), model.config, tmp_path / "export", [type(model).__name__],
                          id2label=dict(enumerate(cfg.task.labels)), problem_type=model.problem_type)
    theirs = transformers.ModernBertForSequenceClassification.from_pretrained(out).eval()
    assert (theirs.config.classifier_pooling, theirs.config.classifier_dropout) == ("mean", 0.1)
    ids = torch.randint(1, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    mask = (torch.arange(12) < torch.tensor([[12], [5]])).long()
    ids = ids * mask
    with torch.no_grad():
        ours = model.eval()(ids, attention_mask=mask).logits
        torch.testing.assert_close(theirs(input_ids=ids, attention_mask=mask).logits, ours, atol=1e-5, rtol=1e-5)
        theirs.config.classifier_pooling = "cls"  # guard: this batch tells the two poolings apart
        assert (theirs(input_ids=ids, attention_mask=mask).logits - ours).abs().max() > 1e-3
