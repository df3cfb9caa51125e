"""Every test the documents cite exists where they say: a reader copies `tests/unit/test_x.py::test_y` to run the
guarantee it backs, and a test renamed or cited under the wrong file answers "not found".

A citation is a backticked `tests/<path>.py::test_name` (a parametrized id, `::test_name[case]`, names test_name);
`::test_name` alone is shorthand for the file named last on the same line, as the Guarantees table writes a cell.
Only `tests/`-prefixed paths are citations: TESTING.md's timing tables and log name tests as they were then,
relative to tests/ (`unit/test_x.py::...`), renamed since by design.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", "cluster/README.md", "TESTING.md", "BENCHMARKS.md"]
# `tests/a.py::test_b[id]` or `::test_b` (groups 1, 2), or a bare `tests/a.py` (group 3), which later shorthands follow
CITATION = re.compile(r"`(tests/[\w/]+\.py)?::(test_\w+)(?:\[[^\]]*\])?`|`(tests/[\w/]+\.py)`")


def citations(text: str) -> list[tuple[int, str | None, str | None]]:
    """(line number, file or None where a shorthand has none before it, test name or None for a bare file)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        last = None  # a shorthand never reaches back past its own line
        for m in CITATION.finditer(line):
            last = m.group(1) or m.group(3) or last
            found.append((number, last, m.group(2)))
    return found


def test_the_shorthand_follows_the_file_named_last_on_its_line():
    line = "`tests/unit/a.py::test_one`, `::test_two[x-1]`, `tests/unit/b.py`, `::test_three`\n`::test_four`"
    assert citations(line) == [(1, "tests/unit/a.py", "test_one"), (1, "tests/unit/a.py", "test_two"),
                               (1, "tests/unit/b.py", None), (1, "tests/unit/b.py", "test_three"),
                               (2, None, "test_four")]


def test_every_cited_test_is_defined_in_the_file_cited():
    broken = []
    for doc in DOCUMENTS:
        for number, path, test in citations((ROOT / doc).read_text()):
            where = f"{doc}:{number}"
            if path is None:
                broken.append(f"{where}: `::{test}` names no file before it on its line")
            elif not (ROOT / path).is_file():
                broken.append(f"{where}: {path} does not exist")
            elif test and not re.search(rf"^\s*(?:async\s+)?def {test}\(", (ROOT / path).read_text(), re.M):
                broken.append(f"{where}: {path} defines no {test}")
    assert not broken, "citations to fix (name the file that defines each test):\n" + "\n".join(broken)
