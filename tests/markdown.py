"""The shell commands a markdown file shows, as a reader would type them."""

import re
import shlex


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
