"""A fine-tuned model folder -> a prediction for each input row: what its transformers pipeline answers
(jobs/inference/serving.pipeline_config: truncation, windows for token classification), computed in batches of
inputs sorted by length; the served model of every kind answers with this class (jobs/inference/served_model.py).
No Ray here: jobs/predict.py runs `encode` in Ray Data tasks and `Predictor.forward` + `Predictor.decode` in an
actor pool; tests call them on plain lists.

    predictor = Predictor(model_dir)
    predictions = predictor.predict([{"id": "a", "text_a": "a fine day"}])  # encode, forward, decode; truncated

Each kind's prediction (the output columns, besides `id` and `file`):
  classification        label, score (its probability), scores (JSON: label -> probability)
  multi-label           labels (JSON list: every label whose sigmoid is over the threshold), score (the
                        best label's), scores
  regression            value (one output: a regression of several is refused, kinds.model_kind)
  token-classification  entities (JSON list of {entity_group, score, word, start, end}, offsets into the
                        text), as the pipeline with aggregation "first" and windows overlapping by a quarter
                        (but for the tail of a word a window opens inside: not tagged alone)
  question-answering    answer, answer_start (-1: none), score (start + end logit), null_score; an
                        answer is "" when the null score beats the span by more than the model's
                        null_threshold (SQuAD v2 models; chosen during fine-tuning; 0 for a v2 task's
                        model without one, as jobs/registry/scorer.py judges it)
`precision="bf16"` runs the model under bfloat16 autocast: not always faster (MiniLM on an H200: 3x slower than
fp32), and no longer equal to the fp32 pipeline to the last digit (BENCHMARKS.md: both, and how often the labels
agree). Rows longer than the model's limit are truncated
(classification) or windowed (token classification, QA): `truncated` counts the first, `windows` > 1 marks the
others.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import torch

from jobs.config.predict import CPU_KERNELS, PRECISIONS
from jobs.inference.kinds import QASettings, model_kind

class Encoder:
    """Rows -> token windows, with the tokenizer and limits of the model folder. Cheap to build (no weights):
    Ray Data's tokenizing tasks build one per process."""

    def __init__(self, model_dir: str | Path, qa: QASettings | None = None):
        from transformers import AutoConfig

        from pipelines.tasks.common import load_tokenizer

        self.config = AutoConfig.from_pretrained(model_dir)
        self.kind = model_kind(self.config, model_dir)
        self.tokenizer = load_tokenizer(model_dir)  # WordPiece only: another kind would be read as [UNK]s
        self.limit = min(int(self.tokenizer.model_max_length), int(self.config.max_position_embeddings))
        self.tokenizer.model_max_length = self.limit  # as a pipeline with serving.pipeline_config
        self.stride = self.limit // 4
        self.qa = q = dataclasses.replace(qa or QASettings())  # a copy: the caller's settings may serve other models
        if q.max_seq_len > self.limit:  # a model of fewer positions: its windows, questions and overlaps shrink
            q.max_seq_len = self.limit
            q.doc_stride = min(q.doc_stride, self.limit // 4)
            q.max_query_length = min(q.max_query_length, self.limit // 4)

    def encode(self, rows: list[dict]) -> list[dict]:
        """One {"windows": [{input_ids, token_type_ids, ...}], "truncated": bool} per row."""
        if not rows:
            return []
        if self.kind == "token-classification":
            return self._tag_windows(rows)
        if self.kind == "question-answering":
            return self._qa_windows(rows)
        # a row's pair is its own: None is a single sentence, a string (even "") a pair, whatever its neighbours
        # hold (the tokenizer takes a batch of pairs or of singles, never both: each group is encoded apart)
        out: dict[int, dict] = {}
        for paired in (False, True):
            group = [i for i, r in enumerate(rows) if (r.get("text_b") is not None) == paired]
            if group:
                out.update(zip(group, self._sentences([rows[i]["text_a"] for i in group],
                                                      [rows[i]["text_b"] for i in group] if paired else None)))
        return [out[i] for i in range(len(rows))]

    def _sentences(self, texts: list[str], pairs: list[str] | None) -> list[dict]:
        """Sentences (or sentence pairs) truncated to the model's limit, as the pipeline's tokenizer call."""
        enc = self.tokenizer(texts, pairs, truncation=True, return_token_type_ids=True)
        at_limit = [i for i, ids in enumerate(enc["input_ids"]) if len(ids) >= self.limit]  # cut, or just fit
        whole = self.tokenizer([texts[i] for i in at_limit], [pairs[i] for i in at_limit] if pairs else None,
                               truncation=False, verbose=False)["input_ids"] if at_limit else []
        cut = {i for i, ids in zip(at_limit, whole) if len(ids) > self.limit}
        return [{"windows": [{"input_ids": ids, "token_type_ids": tt}], "truncated": i in cut}
                for i, (ids, tt) in enumerate(zip(enc["input_ids"], enc["token_type_ids"]))]

    def _tag_windows(self, rows: list[dict]) -> list[dict]:
        """The pipeline's windows (TokenClassificationPipeline.preprocess with `stride`): overlapping by
        `stride` pieces, with offsets and the special-token mask its postprocess reads. A word's end is past the
        combining marks an uncased tokenizer leaves out of every piece (squad.with_final_marks): "José" in decomposed
        text, "गुरु", were entities "Jose", "गुर" by their offsets."""
        from pipelines.tasks.squad import with_final_marks

        texts = [text_of(r) for r in rows]
        enc = self.tokenizer(texts, truncation=True, stride=self.stride, return_overflowing_tokens=True,
                             return_special_tokens_mask=True, return_offsets_mapping=True,
                             return_token_type_ids=True)
        offsets = with_final_marks(enc, texts, sequence=0)
        out = [{"windows": [], "truncated": False} for _ in rows]
        for i, j in enumerate(enc["overflow_to_sample_mapping"]):
            out[j]["windows"].append({"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
                                      "offsets": [list(o) for o in offsets[i]],
                                      "special": enc["special_tokens_mask"][i]})
        return out

    def _qa_windows(self, rows: list[dict]) -> list[dict]:
        from pipelines.tasks.squad import squad_eval_features

        q = self.qa
        # windows keyed by each row's place in the batch, not its id: ids a user's files repeat must not pool two
        # rows' windows (one row would get none, the other a span from the wrong context)
        positional = [{**r, "id": k} for k, r in enumerate(rows)]
        features = squad_eval_features(positional, self.tokenizer, q.max_seq_len, q.doc_stride, q.max_query_length)
        # a context is windowed whole; a question is cut to max_query_length pieces (as in training): truncated then
        pieces = self.tokenizer([r["question"].lstrip() for r in rows], add_special_tokens=False)["input_ids"]
        out = [{"windows": [], "truncated": len(ids) > q.max_query_length} for ids in pieces]
        for i, k in enumerate(features["example_id"]):
            n = int(features["attention_mask"][i].sum())  # the window unpadded
            out[k]["windows"].append(
                {"input_ids": features["input_ids"][i, :n].tolist(),
                 "token_type_ids": features["token_type_ids"][i, :n].tolist(),
                 "offsets": [list(o) if o is not None else None for o in features["offset_mapping"][i][:n]]})
        return out


# tag sets whose entities transformers' pipeline would split (it groups by B-/I- only): each prefix as B- or I-
ENTITY_SCHEMES = ({"B": "B", "I": "I", "E": "I", "S": "B"},  # IOBES: E- ends an entity, S- is one alone
                  {"B": "B", "M": "I", "E": "I", "S": "B"},  # BMES: IOBES with M- for I-
                  {"B": "B", "I": "I", "L": "I", "U": "B"})  # BILOU: L- its last, U- a unit


def grouping_tags(labels: list[str]) -> list[str]:
    """The tags the served pipeline groups entities by: an IOBES, BMES or BILOU set's E-/M-/L- as I- and S-/U- as B-
    of the same type (the pipeline reads E-LOC as another type than LOC and cut "New York City" at City), any other
    set as it is."""
    if not all(t == "O" or "-" in t for t in labels):
        return list(labels)
    prefixes = {t.split("-", 1)[0] for t in labels if t != "O"}
    for scheme in ENTITY_SCHEMES:
        if prefixes <= set(scheme) and prefixes - {"B", "I"}:
            return [t if t == "O" else scheme[t.split("-", 1)[0]] + "-" + t.split("-", 1)[1] for t in labels]
    return list(labels)


def _wordpiece_tagger(pipeline_class, by_word: bool = False):
    """transformers' TokenClassificationPipeline, with a piece read as the continuation of the word before it as
    training labels pieces (pipelines.tasks.conll.conll_features): where it starts with the WordPiece prefix "##"
    (an [UNK] starts a word). The pipeline compared the piece's length with the text it spans, and the normalizer
    shortens some words (a soft hyphen or a zero-width space dropped, a decomposed accent stripped): "Mül\u00adler"
    is the piece "muller" over 7 characters, read as part of the word before it, so its entity was dropped or
    swallowed into a neighbour's. `by_word`: word tags that are not entities (ft_tasks.is_iob false: parts of speech,
    chunks), one item a word, as training scores them: grouped, "stock market news" was one NOUN, its words' own
    tags and scores lost."""

    class WordPieceTagger(pipeline_class):
        def gather_pre_entities(self, sentence, input_ids, *args, **kwargs):
            pre = super().gather_pre_entities(sentence, input_ids, *args, **kwargs)
            for e in pre:
                e["is_subword"] = continues_word(self.tokenizer, int(input_ids[e["index"]]))
            # a window that starts inside a word (windows overlap by pieces, not words): its first pieces are the
            # tail of a word the window before holds whole, and read alone they became an entity "##rie"
            while pre and pre[0]["is_subword"]:
                pre.pop(0)
            return pre

        def aggregate(self, pre_entities, aggregation_strategy):
            if not by_word:
                return super().aggregate(pre_entities, aggregation_strategy)
            return [{"entity_group": w.pop("entity"), **w} for w in self.aggregate_words(pre_entities,
                                                                                          aggregation_strategy)]

    return WordPieceTagger


def continues_word(tokenizer, piece: int) -> bool:
    """A piece that goes on the word before it, as training labels pieces: one starting with the WordPiece prefix
    "##" (an [UNK] starts a word)."""
    prefix = tokenizer.backend_tokenizer.model.continuing_subword_prefix
    return piece != tokenizer.unk_token_id and tokenizer.convert_ids_to_tokens(piece).startswith(prefix)


def text_of(row: dict) -> str:
    """What token classification tags: the row's text, or its words joined by spaces."""
    return row["text"] if "text" in row else " ".join(row["tokens"])


class Predictor(Encoder):
    """The model folder's weights too: `forward` runs windows through the model, `decode` turns logits into
    each row's prediction."""

    def __init__(self, model_dir: str | Path, qa: QASettings | None = None, batch_size: int = 32,
                 threshold: float = 0.5, device: str | None = None, precision: str = "fp32",
                 max_batch_tokens: int = 0, cpu_kernels: str = "onednn"):
        import transformers

        from jobs.inference.serving import TASK_MODELS
        from jobs.loops.ft_tasks import HF_TASK

        super().__init__(model_dir, qa)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        head = getattr(transformers, TASK_MODELS[HF_TASK[self.kind]])
        model, loaded = head.from_pretrained(model_dir, output_loading_info=True)
        unloaded = sorted(loaded["missing_keys"]) + sorted(str(k[0] if isinstance(k, tuple) else k)
                                                          for k in loaded.get("mismatched_keys", ()))
        if unloaded:  # transformers initialises them at random (another per replica) and only logs it
            raise ValueError(f"{model_dir}: the weights do not fit {head.__name__}: {len(unloaded)} of its tensors are "
                             f"not in the folder or of another shape ({', '.join(unloaded[:5])}"
                             f"{', ...' if len(unloaded) > 5 else ''}); it would predict with random ones")
        self.model = model.to(self.device).eval()
        self.batch_size, self.threshold, self.max_batch_tokens = batch_size, threshold, max_batch_tokens
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.precision = precision
        if cpu_kernels not in CPU_KERNELS:
            raise ValueError(f"cpu_kernels must be one of {CPU_KERNELS}, got {cpu_kernels!r}")
        self.packed = 0  # linear layers on oneDNN's prepacked kernels (CPU, fp32): jobs/inference/onednn.py
        if cpu_kernels == "onednn" and self.device.type == "cpu" and precision == "fp32":
            from jobs.inference.onednn import pack_linears

            self.packed = pack_linears(self.model)
        self.labels = [self.config.id2label[i] for i in range(self.config.num_labels)]
        self.null_threshold = getattr(self.config, "null_threshold", 0.0 if self.qa.version_2 else None)
        self._tagger = None

    def predict(self, rows: list[dict]) -> list[dict]:
        """Each row's prediction (`decode`) and whether its input was cut to fit (`truncated`, the encoding's: what
        the served model answers beside it; jobs/predict.py's stages read it from the encoding they keep)."""
        encoded = self.encode(rows)
        return [{**p, "truncated": bool(e["truncated"])}
                for p, e in zip(self.decode(rows, encoded, self.forward(encoded)), encoded)]

    def batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices into `lengths`, shortest first, cut into batches of at most `batch_size` and, with
        `max_batch_tokens`, at most that many padded positions (a batch's rows x its longest): the long tail
        of a window then runs in small batches instead of padding 32 rows to its longest. Measured on 10,000
        real paragraphs (mean 53 pieces, some at 512), windows of 1024 rows in batches of 32: 16% of the
        positions computed were padding, 7% with a budget of 4,096."""
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        out: list[list[int]] = []
        for j in order:
            if out and len(out[-1]) < self.batch_size and (
                    not self.max_batch_tokens or (len(out[-1]) + 1) * lengths[j] <= self.max_batch_tokens):
                out[-1].append(j)
            else:
                out.append([j])
        return out

    @torch.inference_mode()
    def forward(self, encoded: list[dict]) -> list[list[np.ndarray]]:
        """Each row's windows' logits (float32 numpy): the windows of all rows sorted by length and run in
        `batches`, each padded to its longest, so little is spent on padding."""
        windows = [(i, k, w) for i, e in enumerate(encoded) for k, w in enumerate(e["windows"])]
        logits: list[list] = [[None] * len(e["windows"]) for e in encoded]
        for batch in self.batches([len(w["input_ids"]) for _, _, w in windows]):
            chunk = [windows[j] for j in batch]
            width = max(len(w["input_ids"]) for _, _, w in chunk)
            ids = torch.zeros(len(chunk), width, dtype=torch.long)
            types, mask = torch.zeros_like(ids), torch.zeros_like(ids)
            for b, (_, _, w) in enumerate(chunk):
                n = len(w["input_ids"])
                ids[b, :n], types[b, :n] = torch.tensor(w["input_ids"]), torch.tensor(w["token_type_ids"])
                mask[b, :n] = 1
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"):
                out = self.model(input_ids=ids.to(self.device), token_type_ids=types.to(self.device),
                                 attention_mask=mask.to(self.device))
            if self.kind == "question-answering":
                batch = torch.stack([out.start_logits, out.end_logits], -1).float().cpu().numpy()
            else:
                batch = out.logits.float().cpu().numpy()
            for b, (i, k, w) in enumerate(chunk):
                n = len(w["input_ids"])
                logits[i][k] = batch[b, :n] if batch.ndim == 3 else batch[b]
        return logits

    def decode(self, rows: list[dict], encoded: list[dict], logits: list[list[np.ndarray]]) -> list[dict]:
        decode = {"token-classification": self._entities, "question-answering": self._answer}.get(
            self.kind, self._sequence)
        return [{"id": r["id"], **decode(r, e, lg)} for r, e, lg in zip(rows, encoded, logits)]

    def _sequence(self, row: dict, encoded: dict, logits: list[np.ndarray]) -> dict:
        """As TextClassificationPipeline.postprocess: softmax, sigmoid for multi-label (and a single label
        that is not regression), the raw value for regression."""
        x = logits[0].astype(np.float64)
        if self.kind == "regression":
            return {"value": float(x[0])}
        if self.kind == "multi-label" or len(x) == 1:
            p = 1.0 / (1.0 + np.exp(-x))
        else:
            p = np.exp(x - x.max())
            p = p / p.sum()
        scores = json.dumps({label: round(float(v), 6) for label, v in zip(self.labels, p)})
        best = int(np.argmax(p))
        if self.kind == "multi-label":
            chosen = [label for label, v in zip(self.labels, p) if v > self.threshold]
            return {"labels": json.dumps(chosen), "score": float(p[best]), "scores": scores}
        return {"label": self.labels[best], "score": float(p[best]), "scores": scores}

    def _entities(self, row: dict, encoded: dict, logits: list[np.ndarray]) -> dict:
        """TokenClassificationPipeline.postprocess itself, on these windows' logits."""
        from transformers.pipelines import AggregationStrategy, TokenClassificationPipeline

        if self._tagger is None:
            from jobs.loops.ft_tasks import is_iob

            # the pipeline names and groups entities by the model's id2label: an IOBES/BILOU set's, as B-/I- tags
            self.model.config.id2label = dict(enumerate(grouping_tags(self.labels)))
            self._tagger = _wordpiece_tagger(TokenClassificationPipeline, by_word=not is_iob(self.labels))(
                model=self.model, tokenizer=self.tokenizer, device=self.device)
        text, windows = text_of(row), encoded["windows"]
        special = [self._without_cut_word(w, windows[k + 1]) if k + 1 < len(windows) else w["special"]
                   for k, w in enumerate(windows)]
        outputs = [{"logits": torch.from_numpy(lg[None]), "sentence": text if k == 0 else None,
                    "input_ids": torch.tensor([w["input_ids"]]), "offset_mapping": torch.tensor([w["offsets"]]),
                    "special_tokens_mask": torch.tensor([special[k]]), "is_last": k == len(logits) - 1}
                   for k, (w, lg) in enumerate(zip(windows, logits))]
        # the "O" groups left out of each window before the windows' merge (the pipeline's default ignore_labels):
        # there the longest of overlapping groups wins, and an "O" stretch would drop an entity another window found
        entities = self._tagger.postprocess(outputs, aggregation_strategy=AggregationStrategy.FIRST)
        return {"entities": json.dumps([{"entity_group": e["entity_group"], "score": round(float(e["score"]), 6),
                                         "word": e["word"], "start": int(e["start"]), "end": int(e["end"])}
                                        for e in entities], ensure_ascii=False)}

    def _without_cut_word(self, window: dict, following: dict) -> list[int]:
        """`window`'s special-token mask with the pieces of its last word marked, where the word runs on past the
        window (the next window's piece after it is a "##" one) and the next window holds it whole (its first piece
        in the overlap): read alone, "ko ##wal ##cz" of "Kowalczyk" was tagged as a word, and an entity "Kowalcz"
        outlived the next window's in the merge. A word longer than the overlap stays: no window holds it whole."""
        special, ids, offsets = list(window["special"]), window["input_ids"], window["offsets"]
        text = [i for i, s in enumerate(special) if not s]
        if not text:
            return special
        last = first = text[-1]
        after = next((i for i, (o, s) in enumerate(zip(following["offsets"], following["special"]))
                      if not s and o[0] >= offsets[last][1]), None)
        if after is None or not continues_word(self.tokenizer, following["input_ids"][after]):
            return special
        while first > text[0] and continues_word(self.tokenizer, ids[first]):
            first -= 1
        if any(not s and o[0] == offsets[first][0] for o, s in zip(following["offsets"], following["special"])):
            special[first:last + 1] = [1] * (last + 1 - first)
        return special

    def _answer(self, row: dict, encoded: dict, logits: list[np.ndarray]) -> dict:
        from pipelines.tasks.squad import best_spans

        features = {"example_id": [row["id"]] * len(logits),
                    "offset_mapping": [[tuple(o) if o is not None else None for o in w["offsets"]]
                                       for w in encoded["windows"]]}
        width = max(len(lg) for lg in logits)
        start, end = (np.full((len(logits), width), -np.inf, dtype=np.float32) for _ in range(2))
        for k, lg in enumerate(logits):
            start[k, :len(lg)], end[k, :len(lg)] = lg[:, 0], lg[:, 1]
        span = best_spans([row], features, start, end, self.qa.n_best, self.qa.max_answer_length)[row["id"]]
        answered = span.start >= 0 and (self.null_threshold is None or span.null - span.score <= self.null_threshold)
        return {"answer": span.text if answered else "", "answer_start": span.start if answered else -1,
                "score": span.score if math.isfinite(span.score) else None, "null_score": span.null}
