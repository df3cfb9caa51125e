"""Own files read as records where their form is ambiguous or their identity must not move: a TSV quote that would
run on over whole rows, and a CoNLL file's documents named by their content (pipelines/tasks/text_records.py,
pipelines/tasks/conll.py, through pipelines.tasks.files.read_file)."""

from pipelines.tasks import Columns
from tests.unit.test_files_task import read, write


def test_a_tsv_quote_that_would_swallow_whole_rows_is_ambiguous_not_merged(tmp_path):
    """A GLUE-style line whose last field opens a quotation that its line never closes, and a later line that ends in
    a quote (an inch mark): read as one CSV record, the rows between would become its text, under its label, and
    vanish uncounted. Every line of it is ambiguous_quote, counted and shown; the rows after it are read."""
    data = 'label\ttext\n1\t"Loved it, bought two.\n0\tThe box says 12"\n1\tgreat\n'
    rows, rejects, samples, _ = read(write(tmp_path, "inch.tsv", data), "tsv")
    assert [(r["text_a"], r["label"]) for r in rows] == [("great", "1")]
    assert rejects == {"ambiguous_quote": 1} and samples[0][:2] == ("ambiguous_quote", "lines 2-3")
    data = 'text\tlabel\tid\n"opens here\tpos\nthen a row\tneg\tq2\nends here"\tq3\nlast\tpos\tq4\n'  # a short line
    rows, rejects, samples, _ = read(write(tmp_path, "mid.tsv", data), "tsv", columns=Columns(id="id"))
    assert [r["id"] for r in rows] == ["q4"]
    assert rejects == {"ambiguous_quote": 1} and samples[0][:2] == ("ambiguous_quote", "lines 2-4")


def test_conll_documents_are_named_by_their_content_not_their_place(tmp_path):
    """The carve keeps a document whole by its name: named by position ("train.conll:doc3"), a document added at the
    top of the file, or the file renamed, would move every document to another name and reshuffle train, select and
    dev between two versions of the data. Named by content, each keeps its name; a document longer than the
    sentences that name it (NAMING_SENTENCES) has one name for all its sentences."""
    from pipelines.tasks.conll import NAMING_SENTENCES

    def doc(d, sentences=3):
        return "-DOCSTART- -X- O\n\n" + "".join(f"Doc{d} NNP B-ORG\nsays VBZ O\nthing{k} NN O\n\n"
                                              for k in range(sentences))
    docs = [doc(d) for d in range(12)] + [doc(99, NAMING_SENTENCES + 5)]
    names = {}
    for name, text in (("train.conll", "".join(docs)), ("train_v2.conll", doc(50) + "".join(docs))):
        rows, _, _, _ = read(write(tmp_path, name, text), "conll", "token-classification")
        names[name] = {tuple(r["tokens"]): r["document"] for r in rows}
    before, after = names["train.conll"], names["train_v2.conll"]
    assert all(after[tokens] == document for tokens, document in before.items())
    assert len(set(before.values())) == 13 and len(set(after.values())) == 14
    long = {document for tokens, document in before.items() if tokens[0] == "Doc99"}
    assert len(long) == 1 and sum(tokens[0] == "Doc99" for tokens in before) == NAMING_SENTENCES + 5
