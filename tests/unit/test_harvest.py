"""The no-download corpus: real English prose from installed documentation, deterministic and reusable."""

import json

from pipelines.harvest import _blocks, _prose_paragraphs, harvest_installed_docs


def test_harvest_is_deterministic_reused_and_prose(tmp_path):
    a = harvest_installed_docs(tmp_path / "a", max_mb=0.3)
    b = harvest_installed_docs(tmp_path / "b", max_mb=0.3)
    assert a == b and a["documents"] >= 20 and a["bytes"] >= 0.3 * 2**20
    files = sorted((tmp_path / "a").glob("*.jsonl"))
    mtimes = [f.stat().st_mtime_ns for f in files]
    assert harvest_installed_docs(tmp_path / "a", max_mb=0.3) == a  # reused, not rewritten
    assert [f.stat().st_mtime_ns for f in files] == mtimes
    docs = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert len(docs) == a["documents"] and len({d["id"] for d in docs}) == len(docs)
    words = " ".join(d["text"] for d in docs).lower().split()
    assert sum(w in {"the", "a", "of", "to", "is"} for w in words) > 0.05 * len(words)  # English prose
    assert not any("/work/" in d["url"] or "site-packages" in d["url"] for d in docs)  # machine-independent


def test_prose_filter_drops_code_and_keeps_sentences():
    text = """Return the number of items in the container, counting duplicates once.

>>> len([1, 2])
2

```python
x = compute(1, 2)
```

| a | b |
|---|---|

See [the docs](https://example.org) for the full list of options that the parser accepts."""
    paragraphs = _prose_paragraphs(text)
    assert paragraphs == ["Return the number of items in the container, counting duplicates once.",
                          "See the docs for the full list of options that the parser accepts."]


def test_source_files_that_do_not_parse_are_counted_and_named(tmp_path, monkeypatch):
    from pipelines import harvest

    stdlib, purelib = tmp_path / "stdlib", tmp_path / "purelib"
    (stdlib / "pkg").mkdir(parents=True)
    purelib.mkdir()
    prose = "This module explains, in plain words, how the parser reads every line of the input it is given."
    (stdlib / "good.py").write_text(f'"""{prose}\n\n{prose}\n\n{prose}\n\n{prose}\n\n{prose}"""\n')
    (stdlib / "pkg" / "broken.py").write_text('"""A docstring.\n\ndef f(:\n')  # unterminated: a SyntaxError
    (stdlib / "latin1.py").write_bytes(b'"""caf\xe9 with no coding line."""\n')  # not UTF-8
    monkeypatch.setattr(harvest, "_STDLIB", stdlib)
    monkeypatch.setattr(harvest, "_PURELIB", purelib)
    summary = harvest.harvest_installed_docs(tmp_path / "out", max_mb=1)
    assert summary["documents"] == 1
    assert summary["unparsed"] == 2
    assert sorted(summary["unparsed_sample"]) == ["stdlib:latin1.py", "stdlib:pkg/broken.py"]


def test_a_harvest_of_other_settings_or_a_folder_of_other_files_is_refused(tmp_path, monkeypatch):
    """corpus.harvest_max_mb=64 over an 8 MB harvest reused the 8 MB one, unsaid; a harvest_dir holding the user's
    own files (README: /shared/corpus) was deleted as an interrupted harvest. An interrupted harvest's own files are
    still replaced."""
    import pytest

    from pipelines import harvest

    stdlib, purelib = tmp_path / "stdlib", tmp_path / "purelib"
    stdlib.mkdir()
    purelib.mkdir()
    (stdlib / "good.py").write_text('"""' + "\n\n".join(["This module explains how it reads each line."] * 12) + '"""')
    monkeypatch.setattr(harvest, "_STDLIB", stdlib)
    monkeypatch.setattr(harvest, "_PURELIB", purelib)
    first = harvest.harvest_installed_docs(tmp_path / "out", max_mb=1)
    assert harvest.harvest_installed_docs(tmp_path / "out", max_mb=1) == first
    with pytest.raises(ValueError, match=r"holds a harvest made with max_mb=1 \(asked: 64\)"):
        harvest.harvest_installed_docs(tmp_path / "out", max_mb=64)
    mine = tmp_path / "shared" / "my_books"
    mine.mkdir(parents=True)
    (mine / "book1.txt").write_text("my precious book")
    with pytest.raises(ValueError, match=r"shared already holds other files \(my_books\)"):
        harvest.harvest_installed_docs(tmp_path / "shared", max_mb=1)
    assert (mine / "book1.txt").read_text() == "my precious book"
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "installed-docs-03.jsonl").write_text('{"id": "0", "text": "half')  # no .harvest.json: interrupted
    assert harvest.harvest_installed_docs(cut, max_mb=1) == {**first}
    assert not any("half" in f.read_text() for f in cut.glob("*.jsonl"))


def test_this_projects_own_install_is_left_out(tmp_path, monkeypatch):
    """Our README is our METADATA: were it harvested, a README edit would change the quickstart's corpus."""
    from pipelines import harvest

    stdlib, purelib = tmp_path / "stdlib", tmp_path / "purelib"
    stdlib.mkdir()
    prose = "\n\n".join(["This package explains, in plain words, how its parser reads each line it is given."] * 6)
    for dist in ("bert_foundry-0.1.0", "alpha-1.0", "zeta-2.0"):
        (purelib / f"{dist}.dist-info").mkdir(parents=True)
        (purelib / f"{dist}.dist-info" / "METADATA").write_text(f"Name: {dist}\nVersion: 1\n\n{prose}\n")
    (purelib / "__editable___bert_foundry_0_1_0_finder.py").write_text(f'"""{prose}"""\n')
    (purelib / "other.py").write_text(f'"""{prose}"""\n')
    monkeypatch.setattr(harvest, "_STDLIB", stdlib)
    monkeypatch.setattr(harvest, "_PURELIB", purelib)
    harvest.harvest_installed_docs(tmp_path / "out", max_mb=1, num_files=1)
    urls = [json.loads(line)["url"] for line in (tmp_path / "out" / "installed-docs-00.jsonl").open()]
    assert urls == ["readme:alpha-1.0.dist-info/METADATA", "readme:zeta-2.0.dist-info/METADATA", "site:other.py"]


NESTED = '''
"""Module."""
import os
X = [lambda: None for _ in range(3)]
class A:
    """A."""
    def f(self):
        """f."""
        def g():
            """g."""
        class B:
            """B."""
    if os.name:
        def h():
            """h."""
    else:
        async def i():
            """i."""
try:
    def j():
        """j."""
except OSError:
    def k():
        """k."""
else:
    class L:
        """L."""
finally:
    def m():
        """m."""
with open(__file__) as fh:
    for _ in fh:
        while True:
            def n():
                """n."""
            break
match X:
    case [*_]:
        def o():
            """o."""
    case _:
        pass
@staticmethod
def p(q=lambda: None):
    """p."""
'''


def test_the_statement_walk_finds_every_docstring_in_ast_walks_order():
    """_blocks skips expressions (no docstring lives in one) and must keep ast.walk's order, which the corpus'
    content (and every prepared set's hash) depends on; checked on nesting in every kind of block."""
    import ast

    tree = ast.parse(NESTED)
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    walked = [ast.get_docstring(n) for n in ast.walk(tree) if isinstance(n, kinds)]
    assert len(walked) == 14 and None not in walked
    assert [ast.get_docstring(n) for n in _blocks(tree) if isinstance(n, kinds)] == walked
    assert sum(1 for _ in _blocks(tree)) < sum(1 for _ in ast.walk(tree)) / 2


def small_tree(tmp_path, monkeypatch):
    """A stdlib of four documented modules, two of them in sub-packages, and an empty purelib."""
    from pipelines import harvest

    stdlib, purelib = tmp_path / "stdlib", tmp_path / "purelib"
    for name in ("b.py", "a.py", "q/y.py", "p/x.py"):
        (stdlib / name).parent.mkdir(parents=True, exist_ok=True)
        prose = f"This module, {name}, explains in plain words how the parser reads each line it is given."
        (stdlib / name).write_text('"""' + "\n\n".join([prose] * 6) + '"""\n')
    purelib.mkdir()
    monkeypatch.setattr(harvest, "_STDLIB", stdlib)
    monkeypatch.setattr(harvest, "_PURELIB", purelib)
    return harvest


def test_two_harvests_into_one_folder_at_once_both_succeed(tmp_path, monkeypatch):
    """Two pkgdocs fine-tunes (or one beside make quickstart) harvesting a fresh folder shared one `out.tmp`: the
    second crashed (FileNotFoundError on .harvest.json), or removed the first's finished folder while it read it."""
    import threading

    harvest = small_tree(tmp_path, monkeypatch)
    alone = harvest.harvest_installed_docs(tmp_path / "alone", max_mb=1)
    together, candidates = threading.Barrier(2), harvest._candidates
    monkeypatch.setattr(harvest, "_candidates", lambda: (together.wait(30), candidates())[1])  # both mid-harvest
    results, errors = [], []

    def run():
        try:
            results.append(harvest.harvest_installed_docs(tmp_path / "corpus" / "docs", max_mb=1))
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and results == [alone, alone]
    out = tmp_path / "corpus" / "docs"
    assert [p.name for p in (tmp_path / "corpus").iterdir()] == ["docs"]  # no copy left behind
    docs = [json.loads(line) for f in sorted(out.glob("*.jsonl")) for line in f.read_text().splitlines()]
    assert sorted(int(d["id"]) for d in docs) == list(range(alone["documents"])) and alone["documents"] == 4


def test_a_harvest_that_finishes_second_keeps_the_first_ones_folder(tmp_path, monkeypatch):
    """The first finisher's folder may already be being read: the second drops its own copy and leaves it."""
    harvest = small_tree(tmp_path, monkeypatch)
    out, candidates, first = tmp_path / "docs", harvest._candidates, {}

    def another_finishes_meanwhile():
        if not first:
            first["started"] = True
            first["summary"] = harvest.harvest_installed_docs(out, max_mb=1)
            first["inode"] = out.stat().st_ino
        return candidates()

    monkeypatch.setattr(harvest, "_candidates", another_finishes_meanwhile)
    assert harvest.harvest_installed_docs(out, max_mb=1) == first["summary"]
    assert out.stat().st_ino == first["inode"]  # the same folder, not replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "purelib", "stdlib"]  # the second copy is gone


def test_a_harvest_installed_between_the_first_look_and_the_listing_is_reused(tmp_path, monkeypatch):
    """A harvest finishing just after another's first look for a complete one: its .harvest.json was then taken for
    a file that is not harvest output, and the folder refused ('already holds other files')."""
    harvest = small_tree(tmp_path, monkeypatch)
    out, real, first = tmp_path / "docs", harvest._complete, {}

    def complete(folder, asked):  # the first look finds none; another harvest installs its copy right after it
        found = real(folder, asked)
        if not first:
            monkeypatch.setattr(harvest, "_complete", real)
            first["summary"] = harvest.harvest_installed_docs(out, max_mb=1)
        return found

    monkeypatch.setattr(harvest, "_complete", complete)
    assert harvest.harvest_installed_docs(out, max_mb=1) == first["summary"]


def test_the_walk_order_of_the_file_system_does_not_change_the_harvest(tmp_path, monkeypatch):
    """os.walk lists a folder in the file system's order (ext4's hash order, not by name): sorted, so the same
    installed files give the same corpus on every machine."""
    import os

    harvest = small_tree(tmp_path, monkeypatch)
    walk = os.walk

    def reversed_walk(top, *args, **kwargs):
        for dirpath, dirnames, filenames in walk(top, *args, **kwargs):
            dirnames.reverse()  # in place: the harvest's pruning of `dirnames` must still reach the walk
            filenames.reverse()
            yield dirpath, dirnames, filenames

    by_name = harvest.harvest_installed_docs(tmp_path / "a", max_mb=1, num_files=1)
    monkeypatch.setattr(harvest.os, "walk", reversed_walk)
    assert harvest.harvest_installed_docs(tmp_path / "b", max_mb=1, num_files=1) == by_name
    urls = [json.loads(line)["url"] for line in (tmp_path / "b" / "installed-docs-00.jsonl").open()]
    assert urls == ["stdlib:a.py", "stdlib:b.py", "stdlib:p/x.py", "stdlib:q/y.py"]
