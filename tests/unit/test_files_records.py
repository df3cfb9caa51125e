"""Own files read as records where their form is ambiguous or their identity must not move: a TSV quote that would
run on over whole rows, and a CoNLL file's documents named by their content (pipelines/tasks/text_records.py,
pipelines/tasks/conll.py, through pipelines.tasks.files.read_file)."""

from pipelines.tasks import Columns
from tests.unit.test_files_task import jsonl, read, write


def test_a_tsv_quote_that_would_swallow_whole_rows_is_never_merged(tmp_path):
    """A GLUE-style line whose last field opens a quotation that its line never closes, and a later line that ends in
    a quote (an inch mark): read as one CSV record, the rows between would become its text, under its label, and
    vanish uncounted. Each of its lines a whole row by itself, the quotes are text (GLUE style), no row lost; where
    one is not (a short line), every line of it is ambiguous_quote, each one counted, and the rows after it are read."""
    data = 'label\ttext\n1\t"Loved it, bought two.\n0\tThe box says 12"\n1\tgreat\n'
    rows, rejects, samples, _ = read(write(tmp_path, "inch.tsv", data), "tsv")
    assert [(r["text_a"], r["label"]) for r in rows] == \
        [('"Loved it, bought two.', "1"), ('The box says 12"', "0"), ("great", "1")] and not rejects
    data = 'text\tlabel\tid\n"opens here\tpos\nthen a row\tneg\tq2\nends here"\tq3\nlast\tpos\tq4\n'  # a short line
    rows, rejects, samples, _ = read(write(tmp_path, "mid.tsv", data), "tsv", columns=Columns(id="id"))
    assert [r["id"] for r in rows] == ["q4"]
    assert rejects == {"ambiguous_quote": 3} and samples[0][:2] == ("ambiguous_quote", "lines 2-4")


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


def test_labels_as_exports_write_them(tmp_path):
    """What tools write into a label column: pandas' astype(str) of a missing label ("nan", "<NA>") and Excel's #N/A
    are no label (not a class "nan"); a header repeated by `cat a.csv b.csv` is no row; JSON true, Excel's TRUE and
    pandas' True are one class; a Parquet DECIMAL is its number; pandas' repr of a list cell is the list."""
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = "text,label\ngood,1.0\nbad,0.0\nunlabeled,nan\nna,<NA>\nexcel,#N/A\ntext,label\nagain,1\n"
    rows, rejects, _, _ = read(write(tmp_path, "joined.csv", data), "csv")
    assert [r["label"] for r in rows] == ["1", "0", "1"]
    assert rejects == {"missing_label": 3, "repeated_header": 1}
    rows, _, _, _ = read(write(tmp_path, "score.csv", "text,label\na,nan\nb,2.5\n"), "csv", "regression")
    assert [r["label"] for r in rows] == [2.5]
    # "null" and "None" are classes of their own in some data (no relation, no intent); a one-column file's row that
    # is its column's name is text
    rows, rejects, _, _ = read(write(tmp_path, "null.jsonl", jsonl({"text": "a", "label": "null"},
                                                                   {"text": "b", "label": "None"})), "jsonl")
    assert [r["label"] for r in rows] == ["null", "None"] and not rejects
    rows, rejects, _, _ = read(write(tmp_path, "inputs.csv", "text\nhello\ntext\n"), "csv", columns=Columns(label=""))
    assert [r["text_a"] for r in rows] == ["hello", "text"] and not rejects
    csv_rows, _, _, _ = read(write(tmp_path, "pandas.csv", "text,label\na,True\nb,False\nc,TRUE\n"), "csv")
    json_rows, rejects, _, _ = read(write(tmp_path, "b.jsonl", jsonl({"text": "a", "label": True},
                                                                     {"text": "b", "label": False})), "jsonl")
    assert [r["label"] for r in csv_rows] == ["true", "false", "true"] and not rejects
    assert [r["label"] for r in json_rows] == ["true", "false"]
    path = tmp_path / "decimal.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "label": pa.array([decimal.Decimal(1), decimal.Decimal(0)],
                                                                    pa.decimal128(38, 0))}), path)
    assert [r["label"] for r in read(str(path), "parquet")[0]] == ["1", "0"]
    pq.write_table(pa.table({"text": ["a"], "label": pa.array([decimal.Decimal("1.25")], pa.decimal128(5, 2))}), path)
    assert [r["label"] for r in read(str(path), "parquet", "regression")[0]] == [1.25]
    rows, rejects, _, _ = read(write(tmp_path, "lists.csv", "text,label\na,\"['x', 'y']\"\nb,[]\nc,[oops\n"), "csv",
                               "multi-label")
    assert [r["label"] for r in rows] == [["x", "y"], []] and rejects == {"unparseable_label": 1}


def test_a_multi_hot_label_column_is_refused_not_read_as_classes(tmp_path):
    """[0, 1, 0, 1] read as a list of classes is the classes 0 and 1: every row would train on two meaningless
    classes. A 0/1 list with a repeat (or of floats) is an indicator vector: the file is refused, saying so."""
    import pytest

    from pipelines.tasks import TaskDataError

    for label in ([0, 1, 0, 1], [1.0, 0.0], [1, 1], [0, 0]):
        path = write(tmp_path, "hot.jsonl", jsonl({"text": "a", "label": [2, 0]}, {"text": "b", "label": label}))
        with pytest.raises(TaskDataError, match="indicator vector"):
            read(path, "jsonl", "multi-label")
    rows, _, _, _ = read(write(tmp_path, "ids.jsonl", jsonl({"text": "a", "label": [1, 0]}, {"text": "b", "label": [1]},
                                                            {"text": "c", "label": [0, 0, 2]})), "jsonl", "multi-label")
    assert [r["label"] for r in rows] == [["1", "0"], ["1"], ["0", "2"]]  # class ids, one twice: no 0/1 vector


def test_a_json_file_is_json_lines_unless_it_is_one_squad_document(tmp_path):
    """A .json of JSON Lines whose first record is bad (a trailing comma) or in another encoding is JSON Lines, that
    record one reject (it was sniffed as SQuAD and the whole file refused); pandas' orient="table" has a "data" list
    of records, not of SQuAD's articles. A glob, as a folder, refuses a file beside its compressed copy."""
    import gzip
    import json

    import pytest

    from pipelines.tasks import TaskDataError
    from pipelines.tasks.file_finder import resolve_files

    comma = write(tmp_path, "comma.json", '{"text": "a", "label": 1},\n{"text": "b", "label": 0}\n')
    latin = write(tmp_path, "latin.json", b'{"text": "caf\xe9", "label": 1}\n{"text": "b", "label": 0}\n')
    squad = write(tmp_path, "squad.json", json.dumps({"data": [{"title": "t", "paragraphs": []}]}, indent=1))
    article = '{"title": "t", "paragraphs": [{"context": "c", "qas": []}]}'  # another first key, an article a line
    other = write(tmp_path, "other.json", '{\n "metadata": 1,\n "data": [\n' + article + '\n]\n}\n')
    assert [fmt for path in (comma, latin, squad, other) for _, fmt in resolve_files(path)] == \
        ["jsonl", "jsonl", "squad", "squad"]
    table = write(tmp_path, "table.json", json.dumps({"schema": {"fields": []}, "data": [{"text": "a", "label": 1}]}))
    with pytest.raises(TaskDataError, match=r"one JSON table \(pandas' to_json\(orient='table'\)\).*"
                                            r"to_json\(orient='records', lines=True\)"):
        resolve_files(table)
    # pandas' to_json() by default: one object of columns, read as one record and rejected whole (every row gone)
    columns = {"text": {"0": "a", "1": "b"}, "label": {"0": 1, "1": 0}}
    split = {"columns": ["text", "label"], "index": [0, 1], "data": [["a", 1], ["b", 0]]}
    for name, table in (("columns", columns), ("split", split), ("big", {"text": {str(i): "word " * 20 for i in
                                                                                  range(20_000)}})):
        with pytest.raises(TaskDataError, match=r"one JSON object holding a table .*orient='records', lines=True"):
            resolve_files(write(tmp_path, f"{name}.json", json.dumps(table)))
    one = write(tmp_path, "one.json", json.dumps({"text": "a", "label": 1}))  # JSON Lines of one record: kept
    nested = write(tmp_path, "nested.json", json.dumps({"meta": {"a": 1}, "body": {"text": "x"}}))  # of objects too
    long = write(tmp_path, "long.json", json.dumps({"meta": {"source": "x" * (2 << 20)}, "text": "a"}) + "\n")
    assert [resolve_files(p)[0][1] for p in (one, nested, long)] == ["jsonl"] * 3  # a first record past the sniff
    rows, rejects, _, _ = read(comma, "jsonl")
    assert [r["text_a"] for r in rows] == ["b"] and rejects == {"bad_json": 1}
    (tmp_path / "g").mkdir()
    write(tmp_path, "g/t.csv", "text,label\na,1\n")
    (tmp_path / "g" / "t.csv.gz").write_bytes(gzip.compress(b"text,label\na,1\n"))
    for spec in (tmp_path / "g", tmp_path / "g" / "*"):
        with pytest.raises(TaskDataError, match="compressed copy"):
            resolve_files(str(spec))


def test_excel_dates_and_floats_read_as_excel_shows_them(tmp_path):
    import datetime

    import openpyxl

    book = openpyxl.Workbook()
    for row in (["text", "label"], [datetime.datetime(2023, 1, 5), 0.1 + 0.2], [datetime.datetime(2023, 1, 5, 9), 2.5]):
        book.active.append(row)
    book.save(tmp_path / "d.xlsx")
    rows, _, _, _ = read(str(tmp_path / "d.xlsx"), "xlsx", "regression")
    assert [(r["text_a"], r["label"]) for r in rows] == [("2023-01-05", 0.3), ("2023-01-05T09:00:00", 2.5)]
    rows, _, _, _ = read(str(tmp_path / "d.xlsx"), "xlsx")
    assert rows[0]["label"] == "0.3"


def test_a_json_lines_file_of_misnamed_columns_is_refused_without_reading_it_to_its_end(tmp_path):
    """Every record misnamed: no row is valid, and the file was read to its end (gigabytes, in the pre-flight
    check_columns too) before it was refused; KEYS_SEEN objects' keys name the columns (the record past them, which
    names `label`, is not reached), and the refusal says so."""
    import pytest

    from pipelines.tasks import TaskDataError
    from pipelines.tasks.files import KEYS_SEEN, check_columns

    path = write(tmp_path, "c.jsonl", jsonl(*[{"text": "hi", "stars": 1}] * KEYS_SEEN, {"text": "hi", "label": 1}))
    with pytest.raises(TaskDataError, match=r"expected columns \['text', 'label'\], found \['text', 'stars'\].* "
                                            r"\(the keys of its first 10,000 JSON objects\)"):
        read(path, "jsonl")
    with pytest.raises(TaskDataError, match=r"found \['text', 'stars'\]"):
        check_columns([(path, "jsonl")], "classification")
    rows, rejects, _, _ = read(write(tmp_path, "d.jsonl", jsonl(*[{"text": "hi"}] * 5, {"text": "hi", "label": 1})),
                               "jsonl")  # a writer that leaves out a null's key: the union of the first objects'
    assert len(rows) == 1 and rejects == {"missing_label": 5}


def test_a_tsv_cell_with_a_tab_before_its_newline_is_one_row_not_pieces(tmp_path):
    """pandas' to_csv(sep="\\t") quotes a cell holding a tab and a newline: its first line then has the header's
    number of fields, and was read GLUE-style, the cell's pieces becoming rows and a word of it their label, silently.
    Read as the CSV record it is; with the text last, a later line of the cell is a whole row by itself, and the
    record is ambiguous_quote, not pieces: counted once per line it loses (2), as the file's lines add up."""
    import pandas as pd

    cell = "Name:\tAlice\nAge:\t30"
    pd.DataFrame({"text": [cell, "fine"], "label": ["pos", "neg"]}).to_csv(tmp_path / "a.tsv", sep="\t", index=False)
    rows, rejects, _, _ = read(str(tmp_path / "a.tsv"), "tsv")
    assert [(r["text_a"], r["label"]) for r in rows] == [(cell, "pos"), ("fine", "neg")] and not rejects
    pd.DataFrame({"label": ["pos", "neg"], "text": [cell, "fine"]}).to_csv(tmp_path / "b.tsv", sep="\t", index=False)
    rows, rejects, _, _ = read(str(tmp_path / "b.tsv"), "tsv")
    assert [(r["text_a"], r["label"]) for r in rows] == [("fine", "neg")] and rejects == {"ambiguous_quote": 2}


def test_a_tsv_cell_with_a_tab_after_a_writers_multi_line_cell_is_one_row_not_pieces(tmp_path):
    """A writer's cell over several lines read as CSV did not count as the file showing a writer's quoting (only a
    one-line quoted cell did): a later cell holding a tab before its newline, its last line a whole row by itself,
    was read GLUE-style: rows of its pieces, a word of it ("size M") a new class, nothing counted."""
    import pandas as pd

    texts = ["Great product.\nWould buy again.", "Specs:\tsize M\nFits well.", "Arrived late."]
    pd.DataFrame({"text": texts, "label": ["pos", "pos", "neg"]}).to_csv(tmp_path / "a.tsv", sep="\t", index=False)
    rows, rejects, _, _ = read(str(tmp_path / "a.tsv"), "tsv")
    assert [(r["text_a"], r["label"]) for r in rows] == list(zip(texts, ["pos", "pos", "neg"])) and not rejects


def test_a_conll_file_with_lone_cr_line_ends_is_read_as_its_sentences(tmp_path, monkeypatch):
    """Old Mac tools end lines with a lone \\r: read at \\n, the file was one line, one row of its first word tagged
    with its last, nothing counted. Lines end at \\n, \\r\\n or a lone \\r; a line past the limit costs its
    sentence (line_too_long), not the file's memory."""
    from pipelines.tasks import text_records

    text = "EU B-ORG\rrejects O\r\rPeter B-PER\rsays O\r"
    for name, data in (("mac.conll", text), ("dos.conll", text.replace("\r", "\r\n")),
                       ("win.conll", text.replace("\r", "\r\r\n"))):  # Windows' text mode writing "\r\n"
        rows, rejects, _, _ = read(write(tmp_path, name, data), "conll", "token-classification")
        assert [(r["tokens"], r["ner_tags"]) for r in rows] == [(["EU", "rejects"], ["B-ORG", "O"]),
                                                              (["Peter", "says"], ["B-PER", "O"])] and not rejects
    monkeypatch.setattr(text_records, "_LINE_BYTES", 100)
    rows, rejects, _, _ = read(write(tmp_path, "long.conll", "x" * 300 + " O\nEU B-ORG\n\nsays O\n"), "conll",
                               "token-classification")
    assert [r["tokens"] for r in rows] == [["says"]] and rejects == {"line_too_long": 1}


def test_plus_one_and_minus_one_classes_are_one_class_in_every_format(tmp_path):
    """+1 / -1 labels (SVMlight-style sentiment): a CSV's "+1", "+1.0" and a JSON 1 are the class "1"; they were
    three classes, and a dev file's 1 was refused as label_not_in_train."""
    csv_rows, _, _, _ = read(write(tmp_path, "t.csv", "id,text,label\n+44,a,+1\n44,b,-1\nx,c,+1.0\ny,d,007\n"), "csv",
                             columns=Columns(id="id"))
    assert [r["id"] for r in csv_rows][:2] == ["+44", "44"]  # an id is no class: "+44" is not the id "44"
    json_rows, _, _, _ = read(write(tmp_path, "d.jsonl", jsonl({"text": "e", "label": 1},
                                                               {"text": "f", "label": -1})), "jsonl")
    assert [r["label"] for r in csv_rows] == ["1", "-1", "1", "007"] and [r["label"] for r in json_rows] == ["1", "-1"]


def test_a_backslash_escaped_quote_is_counted_with_what_to_export_instead(tmp_path):
    """MySQL's OUTFILE and pandas' escapechar exports write a quote as \\" where CSV doubles it: each such row is
    bad_csv, and its sample says why, so the user re-exports instead of losing every row that quotes someone."""
    data = 'text,label\n"he said \\"hi\\" there",pos\n"plain, quoted",neg\n'
    rows, rejects, samples, _ = read(write(tmp_path, "mysql.csv", data), "csv")
    assert [r["label"] for r in rows] == ["neg"] and rejects == {"bad_csv": 1}
    assert 'CSV doubles quotes, ""' in samples[0][2] and '"he said \\"hi' in samples[0][2]
    data = 'text,label\n"ok" then text,pos\n'  # text after a closing quote, no backslash: no advice
    _, _, samples, _ = read(write(tmp_path, "plain.csv", data), "csv")
    assert samples[0][0] == "bad_csv" and "doubles" not in samples[0][2]


def test_a_folder_is_read_with_its_subfolders_and_refused_holding_another_splits_files(tmp_path):
    """A folder's subfolders are read (per-source exports, Spark's `lang=en/part-*.parquet`), a symlinked one too;
    hidden ones (`.ipynb_checkpoints/`, Spark's `_temporary/`) are not, and a save_to_disk folder inside is one
    entry, not its metadata read as JSON Lines; a link to nothing is no file. Read as one split, a folder holding
    names that lead with another's word (`data/` with train.csv and test/) is refused: read whole, the test rows
    would be trained on; a held-out split's folder may hold a test set, and a word inside a name ("ab_test_reviews")
    is none. A file held twice (plain and compressed, in any case, or compressed two ways) is refused: its rows would
    be read twice; two plain files whose names differ in case are two files."""
    import gzip

    import pytest

    from pipelines.tasks import TaskDataError
    from pipelines.tasks.file_finder import resolve_files

    row = "text,label\na,1\n"
    for name in ("d/a.csv", "d/more/b.csv", "d/lang=en/c.csv", "d/.ipynb_checkpoints/a.csv", "d/_temporary/x.csv",
                 "elsewhere/e.csv", "d/hf/state.json", "d/hf/dataset_info.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        write(tmp_path, name, row)
    (tmp_path / "d" / "linked").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "up").symlink_to(tmp_path / "d")  # a loop: each real folder once
    got = [(p.removeprefix(f"{tmp_path}/d/"), f) for p, f in resolve_files(str(tmp_path / "d"), split="train")]
    assert got == [("a.csv", "csv"), ("hf", "hf"), ("lang=en/c.csv", "csv"), ("linked/e.csv", "csv"),
                   ("more/b.csv", "csv")]
    assert [p for p, _ in resolve_files(str(tmp_path / "d"), "csv")][-1].endswith("more/b.csv")  # no hf: csv asked

    for name in ("s/train.csv", "s/test/part-0.csv"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        write(tmp_path, name, row)
    assert len(resolve_files(str(tmp_path / "s"))) == 2  # predict's inputs: no split
    with pytest.raises(TaskDataError, match=r"read as the train split, and holds test/part-0\.csv, named as another"):
        resolve_files(str(tmp_path / "s"), split="train")
    with pytest.raises(TaskDataError, match=r"read as the dev split, and holds train\.csv"):
        resolve_files(str(tmp_path / "s"), split="dev")
    assert len(resolve_files(str(tmp_path / "s" / "*.csv"), split="train")) == 1  # a glob names its files
    (tmp_path / "s" / "train.csv").unlink()  # a test set is a held-out split's (IMDB ships train and test only)
    assert len(resolve_files(str(tmp_path / "s"), split="dev")) == 1 == len(resolve_files(str(tmp_path / "s"),
                                                                                           split="select"))
    for name in ("ab_test_reviews.csv", "speed-test.csv", "web_dev.csv", "testimonials.csv", "Reviews.csv",
                 "reviews.csv"):  # a split's word that does not lead the name is none; two cases are two files
        write(tmp_path, f"d/{name}", row)
    (tmp_path / "d" / "gone.csv").symlink_to(tmp_path / "nowhere.csv")  # a link to nothing is no file
    assert len(resolve_files(str(tmp_path / "d"), split="train")) == len(got) + 6
    (tmp_path / "v").mkdir()
    write(tmp_path, "v/validation-2023.csv", row)
    assert len(resolve_files(str(tmp_path / "v"), split="dev")) == 1 == len(resolve_files(str(tmp_path / "v"),
                                                                                       split="select"))
    with pytest.raises(TaskDataError, match="validation-2023.csv"):
        resolve_files(str(tmp_path / "v"), split="train")

    (tmp_path / "dd" / "inner" / "train").mkdir(parents=True)
    write(tmp_path, "dd/inner/dataset_dict.json", '{"splits": ["train"]}')
    write(tmp_path, "dd/inner/train/state.json", "{}")
    with pytest.raises(TaskDataError, match=r"holds a DatasetDict, inner; name one of its splits as .*/inner:<split>"):
        resolve_files(str(tmp_path / "dd"))

    for copies in (("t.csv", "t.CSV.gz"), ("t.jsonl.gz", "t.jsonl.xz")):
        folder = tmp_path / f"twice{len(copies[1])}"
        folder.mkdir()
        for name in copies:
            (folder / name).write_bytes(gzip.compress(row.encode()) if name.endswith(".gz") else row.encode())
        with pytest.raises(TaskDataError, match=f"holds {copies[0]} and a compressed copy"):
            resolve_files(str(folder))


def test_a_cell_past_the_field_limit_is_one_record_and_the_rows_after_it_are_read(tmp_path, monkeypatch):
    """A quoted cell longer than csv's field limit (16 Mi characters; 1,000 here) was taken for a quote that never
    closes: each of its lines was read again as a row, labelled by the text after its last comma (107,386 made-up
    rows for a 17 Mi-character cell), and the real row after it was lost. It is one field_too_long record, its lines
    not held, and reading goes on after its closing quote; in a TSV of GLUE-style quotes, a quote running on over
    whole rows is text, as a short one is: its 102 lines are 102 rows (counted as one ambiguous_quote, they hid 101
    rows lost); with one line in it not a whole row, each of its lines is one ambiguous_quote, as in a short one. A
    quote that never closes still costs its line alone (the lines after it, read past, are read again from the file's
    start: plain, gzip and transcoded alike)."""
    import csv
    import gzip

    from pipelines.tasks import text_records

    cell = "\n".join(f"paragraph {i}, with a comma" for i in range(100))  # 2,690 characters
    data = {"long.csv": f'text,label\nfirst,a\n"{cell}",b\nafter,c\n',
            "long.tsv": f'"text"\t"label"\n"first"\t"a"\n"{cell}"\t"b"\n"after"\t"c"\n'}  # a CSV writer's TSV
    # 2,200 characters inside the quote: past the limit (at 900, csv read it whole, and skip_long went untested)
    glue = ("label\ttext\n1\t\"Loved it\n" + "".join(f"0\trow {i}, a whole row\n" for i in range(100))
            + '0\tsays 12"\n1\tgreat\n')
    stray = 'text,label\n"opens,a\n' + "".join(f"row {i},b\n" for i in range(300))  # 2,700 characters after it
    limit = csv.field_size_limit()
    monkeypatch.setattr(text_records, "_FIELD_LIMIT", 1000)  # _allow_long_fields raises csv's limit no higher
    try:
        csv.field_size_limit(1000)
        for name, text in data.items():
            rows, rejects, samples, _ = read(write(tmp_path, name, text), name[-3:])
            assert [(r["text_a"], r["label"]) for r in rows] == [("first", "a"), ("after", "c")]
            assert rejects == {"field_too_long": 1} and samples[0][:2] == ("field_too_long", "lines 3-102")
        rows, rejects, samples, _ = read(write(tmp_path, "glue.tsv", glue), "tsv")
        assert [r["text_a"] for r in rows] == ['"Loved it', *(f"row {i}, a whole row" for i in range(100)), 'says 12"',
                                               "great"]
        assert not rejects
        # one line inside it not a whole row: ambiguous, as a short run-on is, each of its 102 lines counted
        mixed = glue.replace("0\trow 50, a whole row\n", "row 50, a short line\n")
        rows, rejects, samples, _ = read(write(tmp_path, "mixed.tsv", mixed), "tsv")
        assert [r["text_a"] for r in rows] == ["great"]
        assert rejects == {"ambiguous_quote": 102} and samples[0][:2] == ("ambiguous_quote", "lines 2-103")
        write(tmp_path, "stray.csv.gz", gzip.compress(stray.encode()))
        for name, columns in (("stray.csv", Columns()), ("stray.csv.gz", Columns()),
                              ("stray.csv", Columns(encoding="cp1252"))):
            rows, rejects, samples, _ = read(write(tmp_path, "stray.csv", stray) if name == "stray.csv"
                                             else str(tmp_path / name), "csv", columns=columns)
            assert [r["text_a"] for r in rows] == [f"row {i}" for i in range(300)] and rejects == {"unclosed_quote": 1}
            assert samples[0][1] == "line 2, quote not closed by line 302"
    finally:
        csv.field_size_limit(limit)


def test_a_folder_refuses_data_it_cannot_read_and_reads_txt_as_the_format_set(tmp_path):
    """A folder passed over its files of a type not read here (`part-0.csv.zst`, an `.xls`, a `.zip`), where a file
    or glob naming one is refused: their rows were missing from training, unsaid. Each is named with what to do; a
    README, a .md, Spark's _SUCCESS and .crc files are still passed over. With task.format set, a .txt file in a
    folder is read as that format, as a .txt file named alone is (GLUE-style .txt TSVs)."""
    import pytest

    from pipelines.tasks import TaskDataError
    from pipelines.tasks.file_finder import resolve_files

    row = "text\tlabel\na\t1\n"
    for name in ("d/a.tsv", "d/README", "d/notes.md", "d/_SUCCESS", "d/.a.tsv.crc", "t/a.txt", "t/more/b.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        write(tmp_path, name, row)
    assert [fmt for _, fmt in resolve_files(str(tmp_path / "d"))] == ["tsv"]
    assert [(p.removeprefix(f"{tmp_path}/t/"), f) for p, f in resolve_files(str(tmp_path / "t"), "tsv")] == \
        [("a.txt", "tsv"), ("more/b.txt", "tsv")]
    assert resolve_files(str(tmp_path / "t" / "a.txt"), "tsv") == [(str(tmp_path / "t" / "a.txt"), "tsv")]
    write(tmp_path, "d/README.txt", "Movie reviews, scraped 2023.\n")  # beside the format's own files: no data
    for fmt in ("tsv", "conll"):  # (conll reads .txt files as its own, as it did)
        assert [p.removeprefix(f"{tmp_path}/d/") for p, _ in resolve_files(str(tmp_path / "d"), fmt)] == \
            (["a.tsv"] if fmt == "tsv" else ["README.txt"])
    assert [f for _, f in resolve_files(str(tmp_path / "d"), "", labeled=False)] == ["text", "tsv"]  # inputs: auto
    (tmp_path / "d" / "more").mkdir()
    for name in ("part-1.csv.zst", "old.xls", "more/export.zip"):
        write(tmp_path, f"d/{name}", b"PK")
    for fmt in ("", "tsv"):
        with pytest.raises(TaskDataError, match=r"holds 3 file\(s\) of a type not read here.*more/export\.zip: "
                                                r"extract it; old\.xls: save it as \.xlsx; part-1\.csv\.zst: "
                                                r"decompress it"):
            resolve_files(str(tmp_path / "d"), fmt)
    with pytest.raises(TaskDataError, match=r"unknown file type '\.zst'"):  # named alone, as before
        resolve_files(str(tmp_path / "d" / "part-1.csv.zst"))


def test_a_header_again_in_another_column_order_is_refused_naming_its_line(tmp_path):
    """`cat a.csv b.csv` where b was written with the same columns in another order: b's header was read as a row and
    each of b's rows under a's names, its text as the label and its label as the text, none rejected. The header
    again in its own order stays a repeated_header reject; in another it is refused, naming the file and line."""
    import pytest

    from pipelines.tasks import TaskDataError

    rows, rejects, _, _ = read(write(tmp_path, "same.csv", "text,label\ngood,pos\ntext,label\nbad,neg\n"), "csv")
    assert [r["label"] for r in rows] == ["pos", "neg"] and rejects == {"repeated_header": 1}
    for name, data in (("swapped.csv", "text,label\ngood,pos\nlabel,text\nneg,bad\n"),
                       ("swapped.tsv", "text\tlabel\ngood\tpos\n label\ttext \nneg\tbad\n")):
        with pytest.raises(TaskDataError, match=rf"{name}, line 3: the header again in another column order "
                                                r"\(\['label', 'text'\].*files joined with cat"):
            read(write(tmp_path, name, data), name[-3:])
    rows, _, _, _ = read(write(tmp_path, "one.csv", "text\nlabel\ntext\n"), "csv", columns=Columns(label=""))
    assert [r["text_a"] for r in rows] == ["label", "text"]  # one column: its name is a text like any other


def test_a_glob_that_matches_another_splits_files_is_refused_as_a_folder_holding_them_is(tmp_path):
    """`task.train_file=data/*.csv` beside train.csv matched dev.csv and test.csv, read as training rows (the folder
    refuses them, and its remedy named a glob). The wildcards' matches are checked as a folder's files are, below
    the pattern's fixed part; a split's word the pattern writes itself (`test*.csv`) is the user's choice, and
    `train*.csv` or shards `train-*.csv` read; predict's inputs (no split) are not checked."""
    import pytest

    from pipelines.tasks import TaskDataError
    from pipelines.tasks.file_finder import resolve_files

    for name in ("data/train.csv", "data/train-0001.csv", "data/dev.csv", "data/test.csv", "data/notes.csv",
                 "parts/train/p-0.csv", "parts/test/p-0.csv"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        write(tmp_path, name, "text,label\na,1\n")
    data = tmp_path / "data"
    with pytest.raises(TaskDataError, match=r"data/\*\.csv is read as the train split, and matches dev\.csv, named as "
                                            r"another split's: narrow the glob to the train files \(`train\*`"):
        resolve_files(str(data / "*.csv"), split="train")
    with pytest.raises(TaskDataError, match=r"read as the train split, and matches test/p-0\.csv"):
        resolve_files(str(tmp_path / "parts" / "*" / "*.csv"), split="train")
    with pytest.raises(TaskDataError, match=r"read as the dev split, and matches train-0001\.csv"):
        resolve_files(str(data / "*.csv"), split="dev")
    with pytest.raises(TaskDataError, match=r"holds dev\.csv.* or a glob that matches them only, as \S*data/train\*\)"):
        resolve_files(str(data), split="train")  # the folder's remedy: a glob that a glob's check lets through
    # the files' word, not valid*
    with pytest.raises(TaskDataError, match=r"holds train-0001\.csv.* as \S*data/dev\*\)"):
        resolve_files(str(data), split="select")
    assert len(resolve_files(str(data / "dev*"), split="select")) == 1  # the remedy, taken, reads
    assert [p.rsplit("/", 1)[1] for p, _ in resolve_files(str(data / "train*.csv"), split="train")] == \
        ["train-0001.csv", "train.csv"]
    assert len(resolve_files(str(data / "train-*.csv"), split="train")) == 1
    assert len(resolve_files(str(data / "test*.csv"), split="train")) == 1  # written by the user: a file named alone
    assert len(resolve_files(str(tmp_path / "parts" / "test" / "*.csv"), split="dev")) == 1  # below its fixed part
    assert len(resolve_files(str(data / "*.csv"))) == 5  # predict's inputs
