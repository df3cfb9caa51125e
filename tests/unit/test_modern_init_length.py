"""jobs/finetune.check_init on a modern release: fine-tuning past the length it was pretrained at is refused as a
BERT release's is, in ModernBERT's terms (rotary attention, no position table) unless the rotary switch is off."""

import pytest
import torch

from bert_core import modern
from bert_core.config import ConfigError
from bert_core.tokenizer import save_tokenizer, train_wordpiece
from jobs.finetune import check_init

TEXTS = [f"the quick brown fox jumps over the lazy dog number {i}" for i in range(300)]


@pytest.mark.parametrize("rotary", [True, False])
def test_a_modern_release_past_its_trained_length_is_refused_in_its_own_terms(tmp_path, rotary):
    tok = train_wordpiece(TEXTS, vocab_size=200, min_frequency=1)
    tokenizer_dir = save_tokenizer(tok, tmp_path / "tokenizer", model_max_length=128)  # a 128-token run's release
    torch.manual_seed(0)
    cfg = modern.tiny(vocab_size=modern.pad_vocab_size(tok.get_vocab_size()), rotary=rotary)
    release = modern.save_pretrained(modern.ModernBertForMaskedLM(cfg), tmp_path / "release", tokenizer_dir)
    check_init(128, "release", release)
    said = ("its rotary positions were trained only up to 128 tokens" if rotary
            else r"position rows 128..255 never learned")  # the rotary switch off: a position table, as BERT's
    with pytest.raises(ConfigError, match=rf"task.max_seq_len=256 exceeds the length 128 of init 'release' .*{said}; "
                                          r"allowed: task.max_seq_len <= 128") as refused:
        check_init(256, "release", release)
    assert rotary == ("position rows" not in str(refused.value))
