"""bert_core.model on the tiny preset: head shapes, sparse MLM == dense MLM, packed == padded."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bert_core.config import tiny
from bert_core.model import (IGNORE_INDEX, host_packing, masked_lm_loss, BertForPreTraining, BertForQuestionAnswering,
                             BertForSequenceClassification, BertForTokenClassification, BertModel, compile_model)

B, T = 4, 16
LENGTHS = (16, 11, 5, 1)  # one full row, a single-token row: the edges of packing


def config(**kw):
    kw.setdefault("vocab_size", 500)  # keeps the decoder small; the layout is what is under test
    return tiny(**kw).validate()


def batch(seed=0, vocab=500):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (B, T), generator=g)
    mask = (torch.arange(T) < torch.tensor(LENGTHS)[:, None]).long()  # (B, T) right-padded
    ids = ids * mask  # pad id 0 at pad positions, as the collator writes them
    types = ((torch.arange(T) >= 3) & mask.bool()).long()
    labels = torch.full((B, T), IGNORE_INDEX)
    chosen = (torch.rand(B, T, generator=g) < 0.3) & mask.bool()
    chosen[0, 1] = chosen[3, 0] = True  # at least one masked token, also in the one-token row
    labels[chosen] = ids[chosen]
    return ids, types, mask, labels, torch.tensor([0, 1, 1, 0])


def grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_bert_model_shapes_and_pooler_option():
    cfg = config()
    ids, types, mask, *_ = batch()
    seq, pooled = BertModel(cfg)(ids, types, mask)
    assert seq.shape == (B, T, cfg.hidden_size) and pooled.shape == (B, cfg.hidden_size)
    assert torch.all(seq[~mask.bool()] == 0), "packed path leaves pad rows zero"
    seq, pooled = BertModel(cfg, add_pooling_layer=False)(ids)
    assert seq.shape == (B, T, cfg.hidden_size) and pooled is None


def test_init_matches_hf_conventions_and_decoder_is_tied():
    cfg = config(vocab_size=2000)
    model = BertForPreTraining(cfg)
    emb = model.bert.embeddings.word_embeddings.weight
    assert torch.all(emb[cfg.pad_token_id] == 0)
    assert abs(emb[1:].std().item() - cfg.initializer_range) < 2e-3
    assert model.cls.predictions.decoder.weight is emb
    assert torch.all(model.cls.predictions.bias == 0)
    ln = model.bert.encoder.layer[0].output.LayerNorm
    assert torch.all(ln.weight == 1) and torch.all(ln.bias == 0)
    assert torch.all(model.bert.encoder.layer[1].attention.self.query.bias == 0)
    assert len({p.data_ptr() for p in model.parameters()}) == len(list(model.parameters()))


def test_pretraining_outputs_sparse_and_dense():
    cfg = config()
    model = BertForPreTraining(cfg)
    ids, types, mask, labels, nsp = batch()
    out = model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
    n_masked = int((labels != IGNORE_INDEX).sum())
    assert out.mlm_logits.shape == (n_masked, cfg.vocab_size)
    assert torch.equal(out.mlm_targets, labels[labels != IGNORE_INDEX])
    assert out.nsp_logits.shape == (B, 2)
    assert torch.allclose(out.loss, out.mlm_loss + out.nsp_loss)
    dense = model(ids, types, mask)
    assert dense.mlm_logits.shape == (B, T, cfg.vocab_size)
    assert dense.loss is None and dense.mlm_targets is None and dense.mlm_loss is None
    only_mlm = model(ids, types, mask, mlm_labels=labels)
    assert only_mlm.nsp_loss is None and torch.equal(only_mlm.loss, only_mlm.mlm_loss)


def test_a_micro_batch_without_a_masked_token_has_mlm_loss_0_not_nan():
    """Whole-word masking can leave short rows no target: a micro-batch of them only gave a NaN loss (skipped and
    counted as a divergence in training, a NaN in the evaluation's sums). BERT, the modern encoder and the pipeline
    stages' loss alike."""
    from bert_core import modern
    from jobs.engine.pipeline import pretraining_loss

    ids, types, mask, labels, nsp = batch()
    none = torch.full_like(labels, IGNORE_INDEX)
    out = BertForPreTraining(config())(ids, types, mask, mlm_labels=none, next_sentence_label=nsp)
    assert out.mlm_loss.item() == 0.0 and torch.isfinite(out.loss) and out.mlm_targets.numel() == 0
    out.loss.backward()
    mlm = modern.ModernBertForMaskedLM(modern.tiny(vocab_size=512, local_attention=8))(ids, mask, none)
    assert mlm.loss.item() == 0.0
    loss, sums = pretraining_loss((torch.zeros(0, 500), torch.zeros(B, 2), torch.zeros(0, dtype=torch.long), nsp))
    assert torch.isfinite(loss) and sums["mlm_loss_sum"].item() == 0.0 and sums["mlm_count"].item() == 0


def test_sparse_mlm_loss_and_gradients_equal_dense_cross_entropy():
    cfg = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg)
    ids, types, mask, labels, nsp = batch(seed=1)

    sparse = model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
    sparse.loss.backward()
    g_sparse = grads(model)
    model.zero_grad()

    dense = model(ids, types, mask)  # HF-style: logits for all B*T tokens, CE ignoring -100
    mlm = F.cross_entropy(dense.mlm_logits.view(-1, cfg.vocab_size), labels.view(-1), ignore_index=IGNORE_INDEX)
    (mlm + F.cross_entropy(dense.nsp_logits, nsp)).backward()
    g_dense = grads(model)

    torch.testing.assert_close(sparse.mlm_loss, mlm, rtol=1e-6, atol=1e-6)
    assert g_sparse.keys() == g_dense.keys() and "cls.predictions.bias" in g_sparse
    for name in g_dense:
        torch.testing.assert_close(g_sparse[name], g_dense[name], rtol=1e-5, atol=1e-6, msg=name)


def test_packed_path_equals_padded_path_forward_and_backward():
    cfg = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg)
    ids, types, mask, labels, nsp = batch(seed=2)
    real = mask.bool()
    results = {}
    for unpad in (True, False):
        model.bert.unpad = unpad
        model.zero_grad()
        seq, pooled = model.bert(ids, types, mask)
        out = model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
        out.loss.backward()
        results[unpad] = seq[real], pooled, out.mlm_logits, out.loss, grads(model)
    for a, b in zip(results[True][:4], results[False][:4]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for name, g in results[False][4].items():
        torch.testing.assert_close(results[True][4][name], g, rtol=1e-4, atol=1e-6, msg=name)


def test_padding_does_not_change_real_tokens():
    """A row padded to T gives the same hidden states as the same row alone, unpadded."""
    model = BertModel(config()).eval()
    ids, types, mask, *_ = batch(seed=3)
    n = LENGTHS[1]
    with torch.no_grad():
        for unpad in (True, False):
            model.unpad = unpad
            padded, pooled = model(ids, types, mask)
            alone, pooled_alone = model(ids[1:2, :n], types[1:2, :n])
            torch.testing.assert_close(padded[1, :n], alone[0], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(pooled[1], pooled_alone[0], rtol=1e-5, atol=1e-5)


def test_a_left_padded_batch_pools_as_the_padded_path_does():
    """Pads first: the pooler reads position 0, a pad whose query transformers runs through every layer; unpadded,
    that row was zeros and the pooled output tanh(bias). Real tokens agree either way."""
    model = BertModel(config()).eval()
    ids, types, mask, *_ = batch(seed=4)
    ids, mask = (torch.stack([torch.roll(row, T - n, 0) for n, row in zip(LENGTHS, t)]) for t in (ids, mask))
    types = torch.zeros_like(ids)
    out = {}
    with torch.no_grad():
        for unpad in (True, False):
            model.unpad = unpad
            out[unpad] = model(ids, types, mask)
    torch.testing.assert_close(out[True][1], out[False][1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[True][0][mask.bool()], out[False][0][mask.bool()], rtol=1e-5, atol=1e-5)


def test_dropout_is_active_in_train_mode_only():
    model = BertModel(config(hidden_dropout_prob=0.5))
    ids, types, mask, *_ = batch()
    assert not torch.equal(model(ids, types, mask)[0], model(ids, types, mask)[0])
    model.eval()
    assert torch.equal(model(ids, types, mask)[0], model(ids, types, mask)[0])


@pytest.mark.parametrize("cls", [BertForPreTraining, BertForSequenceClassification, BertForTokenClassification])
def test_every_dropout_module_runs_in_train_mode(cls):
    """HF's sites: the embeddings, both residual branches of every block, a task head's input. Two train-mode
    forwards differ while any one of them runs, so each module is watched: blocks that skipped their residual
    dropout trained with none, and the eval-mode parity tests cannot see it."""
    model = cls(config(hidden_dropout_prob=0.5)).train()
    dropouts = {name: m for name, m in model.named_modules() if isinstance(m, nn.Dropout)}
    called = set()
    for name, m in dropouts.items():
        m.register_forward_hook(lambda *_, name=name: called.add(name))
    ids, types, mask, *_ = batch()
    model(ids, types, mask)
    assert called == set(dropouts), sorted(set(dropouts) - called)


def test_embeddings_are_dropped_out_at_hidden_dropout_prob_in_train_mode():
    """The embedding dropout's output is what the encoder reads, not only a module that runs: about half the
    (B, T, H) values are zeroed at p=0.5."""
    embeddings = BertModel(config(hidden_dropout_prob=0.5)).embeddings.train()
    ids, types, *_ = batch()
    x = embeddings(ids, types, torch.arange(T).expand(B, T))  # (B, T, H)
    assert 0.4 < (x == 0).float().mean().item() < 0.6


def test_attention_dropout_is_applied_in_train_mode_only():
    """attention_probs_dropout_prob is an argument of the attention kernel, not an nn.Dropout that a hook could
    watch: with every other dropout at 0, only it can make two train-mode forwards differ."""
    model = BertModel(config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.5))
    ids, types, mask, *_ = batch()
    assert not torch.equal(model(ids, types, mask)[0], model(ids, types, mask)[0])
    model.eval()
    assert torch.equal(model(ids, types, mask)[0], model(ids, types, mask)[0])


@pytest.mark.parametrize("cls", [BertForPreTraining, BertForSequenceClassification, BertForTokenClassification,
                                 BertForQuestionAnswering])
def test_every_linear_of_encoder_and_head_is_initialised_as_hf_bert(cls):
    """HF's _init_weights reaches the heads too: N(0, initializer_range) weights, zero biases. A head left to
    PyTorch's default (kaiming-uniform, non-zero biases) starts elsewhere than transformers' same recipe, and the
    parity tests copy weights, so they never compare inits. H=256 makes the std a sharp test: the bound is 7
    standard errors of a sample std (std / sqrt(2n)), and kaiming's std at fan-in 256 is 1.8x N(0, 0.02)'s."""
    cfg = config(hidden_size=256, num_attention_heads=4)
    torch.manual_seed(0)
    model = cls(cfg)
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear):
            assert m.bias is None or torch.all(m.bias == 0), name
            n = m.weight.numel()
            assert abs(m.weight.std().item() / cfg.initializer_range - 1) < 5 / math.sqrt(n), name


def test_mlm_loss_is_the_mean_over_its_targets_one_target_included():
    """The denominator is the target count, floored at 1 only for a micro-batch with none: whole-word masking and
    small micro-batches do give one-target micro-batches, whose loss a larger floor would shrink."""
    g = torch.Generator().manual_seed(0)
    for m in (1, 2, 5):
        logits, targets = torch.randn(m, 7, generator=g), torch.randint(0, 7, (m,), generator=g)
        torch.testing.assert_close(masked_lm_loss(logits, targets), F.cross_entropy(logits, targets))


def test_sequence_classification_heads():
    cfg = config()
    ids, types, mask, *_ = batch()
    clf = BertForSequenceClassification(cfg, num_labels=3)
    out = clf(ids, types, mask, labels=torch.tensor([0, 2, 1, 2]))
    assert out.logits.shape == (B, 3) and out.loss.ndim == 0
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, torch.tensor([0, 2, 1, 2])))
    assert clf(ids, types, mask).loss is None

    reg = BertForSequenceClassification(cfg, num_labels=1).eval()
    target = torch.tensor([0.5, 1.0, -2.0, 3.0])
    out = reg(ids, types, mask, labels=target)
    assert out.logits.shape == (B, 1)
    torch.testing.assert_close(out.loss, ((out.logits.squeeze(-1) - target) ** 2).mean())
    torch.testing.assert_close(reg(ids, types, mask, labels=target[:, None]).loss, out.loss)  # (B, 1) as HF takes


def test_token_classification_ignores_minus_100():
    cfg = config()
    ids, types, mask, *_ = batch()
    model = BertForTokenClassification(cfg, num_labels=5).eval()
    labels = torch.randint(0, 5, (B, T)).masked_fill(~mask.bool(), IGNORE_INDEX)
    out = model(ids, types, mask, labels=labels)
    assert out.logits.shape == (B, T, 5)
    real = mask.bool()
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits[real], labels[real]))
    assert model.bert.pooler is None


def test_question_answering_loss_and_out_of_window_answers():
    cfg = config()
    ids, types, mask, *_ = batch()
    model = BertForQuestionAnswering(cfg).eval()
    start, end = torch.tensor([1, 2, 3, 0]), torch.tensor([4, 5, 3, 0])
    out = model(ids, types, mask, start_positions=start, end_positions=end)
    assert out.logits.shape == (B, T, 2) and out.start_logits.shape == out.end_logits.shape == (B, T)
    pads = ~mask.bool()  # the softmax runs over each window's real tokens (span_loss)
    start_logits, end_logits = out.start_logits.masked_fill(pads, -1e9), out.end_logits.masked_fill(pads, -1e9)
    expected = (F.cross_entropy(start_logits, start) + F.cross_entropy(end_logits, end)) / 2
    torch.testing.assert_close(out.loss, expected)
    # An answer outside the window (position >= T) is clamped to T and ignored, as HF does.
    far = model(ids, types, mask, start_positions=torch.tensor([1, 2, 3, 99]),
                end_positions=torch.tensor([4, 5, 3, 99])).loss
    keep = slice(0, 3)
    expected = (F.cross_entropy(start_logits[keep], start[keep])
                + F.cross_entropy(end_logits[keep], end[keep])) / 2
    torch.testing.assert_close(far, expected)
    assert model(ids, types, mask).loss is None
    column = model(ids, types, mask, start_positions=start[:, None], end_positions=end[:, None]).loss  # (B, 1)
    torch.testing.assert_close(column, out.loss)


def test_bf16_autocast_runs_and_stays_close():
    cfg = config()
    torch.manual_seed(0)
    model = BertForPreTraining(cfg).eval()
    ids, types, mask, labels, nsp = batch()
    with torch.no_grad():
        ref = model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
    assert low.mlm_logits.dtype == torch.bfloat16 and low.loss.dtype == torch.float32
    assert abs(low.loss.item() - ref.loss.item()) < 0.05


@pytest.mark.slow
def test_compiles_as_one_graph_and_matches_eager():
    cfg = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg)
    ids, types, mask, labels, nsp = batch()
    eager = model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
    eager.loss.backward()
    g_eager = grads(model)
    model.zero_grad()
    torch._dynamo.reset()
    compiled = compile_model(model, fullgraph=True)  # fullgraph: any graph break raises
    out = compiled(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
    out.loss.backward()
    torch.testing.assert_close(out.loss, eager.loss, rtol=1e-5, atol=1e-5)
    for name, g in grads(model).items():
        torch.testing.assert_close(g, g_eager[name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_bf16_packed_matches_padded():
    cfg = config()
    model = BertForPreTraining(cfg).cuda().eval()
    ids, types, mask, labels, nsp = (t.cuda() for t in batch())
    out = {}
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for unpad in (True, False):
            model.bert.unpad = unpad
            out[unpad] = model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp)
    assert out[True].mlm_logits.dtype == torch.bfloat16
    torch.testing.assert_close(out[True].loss, out[False].loss, rtol=2e-2, atol=2e-2)


def test_host_packing_equals_device_packing():
    """The collator-built packing (no host sync in the step) gives the same loss and gradients."""
    cfg = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg)
    ids, types, mask, labels, nsp = batch()
    packing = host_packing(mask, labels)
    assert packing["cu_seqlens"].tolist() == [0, *mask.sum(1).cumsum(0).tolist()]
    assert packing["mlm_positions"].numel() == int((labels != IGNORE_INDEX).sum())
    results = []
    for extra in ({}, packing):
        model.zero_grad()
        out = model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp, **extra)
        out.loss.backward()
        results.append((out.loss.detach(), grads(model)))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=0, atol=0)
    for name, g in results[1][1].items():
        torch.testing.assert_close(g, results[0][1][name], rtol=0, atol=0, msg=name)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_flash_varlen_matches_padded_attention():
    """bf16 on CUDA: the packed path runs FlashAttention's varlen kernel; it must equal the padded
    SDPA path in loss and gradients within bf16 rounding, with host-built packing too."""
    cfg = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg).cuda()
    ids, types, mask, labels, nsp = batch()
    extra = {k: v.cuda() for k, v in host_packing(mask, labels).items()}
    ids, types, mask, labels, nsp = (t.cuda() for t in (ids, types, mask, labels, nsp))
    results = {}
    for unpad in (True, False):
        model.bert.unpad = unpad
        model.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(ids, types, mask, mlm_labels=labels, next_sentence_label=nsp, **(extra if unpad else {}))
        out.loss.backward()
        results[unpad] = (out.loss.detach().float(), grads(model))
    torch.testing.assert_close(results[True][0], results[False][0], rtol=2e-2, atol=2e-2)
    for name, g in results[True][1].items():
        ref = results[False][1][name]
        assert (g - ref).norm() <= 5e-2 * ref.norm() + 1e-6, name


@pytest.mark.parametrize("capability, expected", [((7, 0), False), ((7, 5), False), ((8, 0), True), ((9, 0), True)])
def test_flash_attention_only_on_the_gpus_its_kernel_takes(monkeypatch, capability, expected):
    """torch's FlashAttention kernel refuses GPUs before Ampere (V100 7.0, T4 7.5: 'FlashAttention only supports
    Ampere GPUs or newer'): there the padded attention path runs instead. A bf16 CUDA tensor, as the GPU sees it."""
    from types import SimpleNamespace

    from bert_core import model as bert_model

    monkeypatch.setattr(bert_model, "_capability", lambda device: capability)
    x = SimpleNamespace(is_cuda=True, dtype=torch.bfloat16, device=torch.device("cuda", 0))
    assert bert_model.flash_varlen_available(x, 64) is expected
    assert not bert_model.flash_varlen_available(SimpleNamespace(is_cuda=True, dtype=torch.float32,
                                                                 device=torch.device("cuda", 0)), 64)
