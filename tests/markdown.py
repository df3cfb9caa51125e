"""The shell commands a markdown file shows, as a reader would type them, and a check of their flags."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


def commands(markdown: str) -> list[list[str]]:
    """The words of each command in the markdown's bash blocks: continuation lines joined, comments and blank lines
    dropped."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                found.append(words)
    return found


def flags_in_help(words: list[str]) -> None:
    """Every flag (--long or -s) of a CLI command is one its help lists: the help of the program with the command's
    subcommand words, the program found beside this Python (the virtual environment's CLIs) or on PATH."""
    program = words[:next((i for i, w in enumerate(words) if w.startswith("-")), len(words))]
    while len(program) > 1 and not re.fullmatch(r"[a-z][a-z-]*", program[-1]):  # drop arguments (files, names)
        program = program[:-1]
    exe = shutil.which(program[0], path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    assert exe, f"{program[0]} is not installed here"
    helptext = subprocess.run([exe, *program[1:], "--help"], capture_output=True, text=True, timeout=120).stdout
    assert helptext, program
    for flag in (w.split("=", 1)[0] for w in words if re.match(r"--?[a-z]", w)):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", helptext), f"{shlex.join(words)}: {flag} not in its help"
