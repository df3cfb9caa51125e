"""GLUE-style TSV (quotes are text) read as the user's own files: quotations that open in one row and close in a
later one never merge rows, and every line a quote makes unreadable is counted (pipelines/tasks/text_records.py,
through pipelines.tasks.files.read_file). The lines are MRPC's layout, as the GLUE review reproduced them."""

from pipelines.tasks import Columns
from tests.unit.test_files_task import read, write

MRPC = Columns(text="#1 String", text_pair="#2 String", label="Quality")
HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
OPENS = '0\t3\t4\t" The foodservice pie business does not fit our long-term growth strategy .\tThe pie business .'
CLOSES = '0\t9\t10\tWe will find them and bring them to justice . "\tThe minister said they would find them .'


def _tsv(tmp_path, name, lines):
    return write(tmp_path, name, "\n".join([HEADER, *lines]) + "\n")


def test_glue_style_quotes_never_merge_rows(tmp_path):
    """A line whose quote opens one field and closes a later one is no CSV writer's (a writer doubles a quote inside
    a cell): it split the header's 5 fields on tabs, its CSV reading 4. Taken for a writer's, it was rejected and
    switched off the guard against run-on quotes, so a later opening quote joined the rows up to the next closing
    one into one row's text, under its label: 3 rows gone uncounted. Read GLUE style, every row is its line."""
    lines = ['1\t1\t2\t" We will fight them on the beaches .\tWe shall never surrender , he said . "', OPENS,
             '1\t5\t6\tShares of Genentech fell 2 percent .\tGenentech shares fell 2 percent .',
             '1\t7\t8\tThe dollar was flat against the yen .\tThe dollar was little changed against the yen .',
             CLOSES, '1\t11\t12\tLast row .\tFinal row .']
    rows, rejects, _, _ = read(_tsv(tmp_path, "mrpc.tsv", lines), "tsv", columns=MRPC)
    assert not any("\n" in r["text_a"] or "\t" in r["text_a"] for r in rows)
    assert len(rows) + sum(rejects.values()) == len(lines)
    assert [line.split("\t")[3] for line in lines] == [r["text_a"] for r in rows] and not rejects


def test_a_quotation_over_whole_rows_is_read_glue_style_losing_none(tmp_path):
    """An opening quote in one row's #1 String and a closing one 51 lines later, each line a whole row by itself:
    read as one CSV record it would merge 52 rows, so it was ambiguous_quote, counted once for 52 rows lost. Every
    line holding the header's fields, the quotes are text, as GLUE's own reader takes them."""
    mid = [f"{i % 2}\t{100 + i}\t{200 + i}\tShares of company {i} fell .\tCompany {i} shares fell ." for i in range(50)]
    lines = [OPENS, *mid, CLOSES, "1\t11\t12\tLast row .\tFinal row ."]
    rows, rejects, _, _ = read(_tsv(tmp_path, "ambiguous.tsv", lines), "tsv", columns=MRPC)
    assert len(rows) + sum(rejects.values()) == 53
    assert [r["text_a"] for r in rows] == [line.split("\t")[3] for line in lines] and not rejects
    assert [r["label"] for r in rows] == [line.split("\t")[0] for line in lines]


def test_an_ambiguous_quote_counts_every_line_it_loses(tmp_path):
    """Where a line of the run-on is no whole row by itself (it is no GLUE row either), the record stays
    ambiguous_quote, one count per line lost: the rejects add up to the file's lines, the first sample names them."""
    lines = [OPENS, *(f"1\t{i}\t{i}\trow {i}\tpair {i}" for i in range(20)), "1\t7\tshort line", CLOSES,
             "1\t11\t12\tLast row .\tFinal row ."]
    rows, rejects, samples, _ = read(_tsv(tmp_path, "broken.tsv", lines), "tsv", columns=MRPC)
    assert [r["text_a"] for r in rows] == ["Last row ."] and rejects == {"ambiguous_quote": 23}
    assert samples[0][:2] == ("ambiguous_quote", "lines 2-24") and samples[1][:2] == ("ambiguous_quote", "line 3")


def test_a_glue_line_with_a_quote_inside_a_field_is_no_writers_and_later_rows_stay_rows(tmp_path):
    """'"Hello"' beside 'What does "hi" mean?' parsed as a CSV writer's line (its quotes stripped) and set the file's
    writer flag: a later question that opens a quote then ran on as a quoted cell to the next quote before a tab (a
    12" inches mark), three rows one, no reject. No writer leaves a quote in a field it does not quote."""
    data = ('id\tquestion1\tquestion2\tis_duplicate\n1\t"Hello"\tWhat does "hi" mean?\t0\n'
            '2\t"Quotes are hard. Why?\tWhy are quotes hard?\t1\n3\tWhy is Inception so popular?\tIs it?\t0\n'
            '4\tWhat is love?\tWhat is the meaning of love?\t1\n5\tIs a footlong 12"\tHow long is it?\t1\n')
    columns = Columns(text="question1", text_pair="question2", label="is_duplicate", id="id")
    rows, rejects, _, _ = read(write(tmp_path, "qqp.tsv", data), "tsv", columns=columns)
    assert [r["text_a"] for r in rows] == ['"Hello"', '"Quotes are hard. Why?', "Why is Inception so popular?",
                                           "What is love?", 'Is a footlong 12"'] and not rejects
