"""jobs/inference/onednn.py: a model's linear layers on oneDNN's prepacked kernels answer as nn.Linear does."""

import copy

import pytest
import torch
import transformers

from jobs.inference import onednn

# the build's oneDNN, not onednn.available(): that also checks the kernels' answers, which these tests must see fail
pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")


def bert(head=transformers.BertForSequenceClassification, hidden_act="gelu"):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, hidden_act=hidden_act,
                                  num_labels=2 if head is transformers.BertForQuestionAnswering else 3)
    return head(cfg).eval()


@pytest.mark.parametrize("head", [transformers.BertForSequenceClassification, transformers.BertForTokenClassification,
                                  transformers.BertForQuestionAnswering])
def test_every_linear_is_packed_and_the_logits_are_nn_linears(head):
    model = bert(head)
    reference = copy.deepcopy(model)
    linears = sum(type(m) is torch.nn.Linear for m in model.modules())
    assert onednn.pack_linears(model) == linears > 0
    assert not any(type(m) is torch.nn.Linear for m in model.modules())
    ids = torch.randint(1, 100, (3, 17))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0  # padding: the kernels see the same masked rows as nn.Linear
    with torch.inference_mode():
        ours, theirs = model(input_ids=ids, attention_mask=mask), reference(input_ids=ids, attention_mask=mask)
    for key in theirs.keys():
        assert torch.allclose(ours[key], theirs[key], rtol=1e-4, atol=1e-5), key


@pytest.mark.parametrize("head, std", [(transformers.BertForSequenceClassification, 2.0),
                                       (transformers.BertForTokenClassification, 0.15)])
def test_the_real_minilms_logits_are_nn_linears_within_a_few_millionths(head, std):
    """The claim onednn.py and README.md make, on the real MiniLM-L6 (6 layers of 384: the sums' rounding adds up
    over its depth and width, as the tiny model's 2 layers of 32 never show) at a trained head's scale (logits ~3, its
    weights drawn to give that): measured 1.5e-6 (sequence) and 2.7e-6 (tokens) of the largest logit; the docs said
    ~1e-7 of the logits and the tiny test checked 1e-4 of logits ~0.1."""
    from test_predictor import MINILM

    tokenizer = transformers.AutoTokenizer.from_pretrained(MINILM)
    batch = tokenizer(["a fine day in the park", "terrible, never again", "It is what it is.",
                       "The committee approved the budget for the new stadium after a long debate"],
                      padding=True, return_tensors="pt")
    torch.manual_seed(0)
    model = head.from_pretrained(MINILM, num_labels=5).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, std)
    reference = copy.deepcopy(model)
    assert onednn.pack_linears(model) > 0
    with torch.inference_mode():
        ours, theirs = model(**batch).logits, reference(**batch).logits
    scale = theirs.abs().max().item()
    assert 2 < scale < 6  # a trained head's logits, not the untrained one's ~0.1
    assert (ours - theirs).abs().max().item() <= 1e-5 * scale


@pytest.mark.parametrize("act, fused", [("gelu", True), ("gelu_new", False), ("gelu_python", False), ("relu", False)])
def test_the_exact_gelu_is_fused_into_the_feed_forward_kernel_and_nothing_else(act, fused):
    """BERT's "gelu" (erf) runs inside the intermediate layer's kernel; tanh GELUs and other activations stay apart.
    Either way the logits are nn.Linear's."""
    model = bert(hidden_act=act)
    reference = copy.deepcopy(model)
    onednn.pack_linears(model)
    for layer in model.bert.encoder.layer:
        block = layer.intermediate
        assert (block.dense.activation == "gelu") is fused
        assert isinstance(block.intermediate_act_fn, torch.nn.Identity) is fused
    ids = torch.randint(1, 100, (3, 11))
    x = 4 * torch.randn(3, 11, 32)  # activations over the range where a tanh GELU and the erf one part by ~1e-3
    with torch.inference_mode():
        assert torch.allclose(model(input_ids=ids).logits, reference(input_ids=ids).logits, rtol=1e-4, atol=1e-5)
        ours, theirs = model.bert.encoder.layer[0].intermediate(x), reference.bert.encoder.layer[0].intermediate(x)
        assert torch.allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_a_packed_model_pickles_and_copies():
    """MLflow pickles a pyfunc holding a Predictor (the QA model), and deepcopy pickles too."""
    import pickle

    model = bert()
    onednn.pack_linears(model)
    ids = torch.randint(1, 100, (2, 9))
    with torch.inference_mode():
        expected = model(input_ids=ids).logits
        for again in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
            assert isinstance(again.classifier, onednn.PackedLinear)
            assert again.bert.encoder.layer[0].intermediate.dense.activation == "gelu"  # still fused
            assert torch.equal(again(input_ids=ids).logits, expected)


def test_only_fp32_cpu_linears_are_packed():
    model = bert().to(torch.bfloat16)
    assert onednn.pack_linears(model) == 0
    assert all(type(m) is not onednn.PackedLinear for m in model.modules())


def test_the_predictor_packs_cpu_fp32_only(tmp_path):
    from jobs.inference.predictor import Predictor
    from tests.unit.test_predictor import tiny

    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=2)
    assert Predictor(folder).packed > 0
    assert Predictor(folder, precision="bf16").packed == 0  # autocast does not reach the packed kernels
    assert Predictor(folder, cpu_kernels="torch").packed == 0
    with pytest.raises(ValueError, match="cpu_kernels must be one of"):
        Predictor(folder, cpu_kernels="mkl")


def test_the_qa_pyfunc_pickles_without_its_loaded_model():
    """MLflow pickles the QA pyfunc after running its input example (load_context done): the weights must not be
    stored a second time beside the model's artifact."""
    import pickle

    from jobs.inference.qa_model import QuestionAnswering

    qa = QuestionAnswering()
    qa.predictor = bert()
    assert "predictor" not in pickle.loads(pickle.dumps(qa)).__dict__
