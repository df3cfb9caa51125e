"""The set-up's pins: what `make setup` installs on a machine that sees only PyPI."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_constraints_pin_no_local_version_label_and_torch_as_the_makefile_installs_it():
    """constraints.txt pinned `torch==2.13.0+cpu`, the CPU wheel this project's machines find on disk: no index holds a
    local label, so on a machine that sees only PyPI `make setup` installed torch 2.13.0 (the CUDA build) and then
    failed with ResolutionImpossible. A pin without a local label is matched by both wheels."""
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    assert pins and not {name: v for name, v in pins.items() if "+" in v}
    (made,) = re.findall(r"pip install -q torch==(\S+)", (ROOT / "Makefile").read_text())
    assert pins["torch"] == made
