"""The kill rate per module from the last `make mutants` (mutmut 3's mutants/*.meta), as BENCHMARKS.md tabulates it.

    python bench/mutants_report.py            # after `make mutants`; run from the repository root

One row per module in [tool.mutmut] only_mutate, one more per function named in FUNCTIONS (the gate's), then every
mutant not killed with its changed lines. Kill rate = killed / mutants run: a timeout (a mutant whose tests never
end: detected, but not failed by an assertion) counts as not killed, and mutants the run did not select (MUTANTS in
the Makefile) are "not run", outside the rate.
"""

from __future__ import annotations

import ast
import difflib
import json
import sys
import tomllib
from collections import Counter
from pathlib import Path

FUNCTIONS = {"jobs/registry/scorer.py": ["paired_bootstrap"], "jobs/promote.py": ["decide", "decide_first"]}
# mutmut.stats.status_by_exit_code folded into the table's columns; any other code (a timeout: mutmut's CPU limit,
# then SIGKILL; a crash; "suspicious") is "timeout/suspicious"
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", None: "not run"}
COLUMNS = ["killed", "survived", "no tests", "timeout/suspicious"]


def function_of(key: str, module: str) -> str:
    """'jobs.promote.x_decide__mutmut_3' -> 'decide'; 'm.xǁClassǁmethod__mutmut_1' -> 'Class.method'."""
    name = key[len(module) + 1:].rsplit("__mutmut_", 1)[0]
    return name[2:] if name.startswith("x_") else name[1:].strip("ǁ").replace("ǁ", ".")


def status_of(code) -> str:
    return STATUS.get(code, "timeout/suspicious")


def row(label: str, codes: list) -> str:
    counts = Counter(status_of(c) for c in codes)
    run = sum(v for k, v in counts.items() if k != "not run")
    cells = [label, str(run)] + [str(counts[c]) for c in COLUMNS]
    cells.append(f"{100 * counts['killed'] / run:.1f}%" if run else "-")
    if counts["not run"]:
        cells[0] += f" ({counts['not run']} more not run)"
    return "| " + " | ".join(cells) + " |"


def functions(source: str) -> dict[str, str]:
    """Every function in mutmut's generated file (the original as NAME__mutmut_orig, each mutant as NAME__mutmut_N)."""
    lines = source.splitlines()
    return {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno]) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef)}


def change(key: str, bodies: dict[str, str]) -> str:
    """The mutant's lines against the original's, "old => new"."""
    name = key.rsplit(".", 1)[1]
    orig = name.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"
    old, new = bodies[orig], bodies[name].replace(name, orig, 1)
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
    return " => ".join(d[1:].strip() for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---")))


def main() -> int:
    cfg = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["mutmut"]
    print("| module | mutants run | killed | survived | no tests | timeout/suspicious | kill rate |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    survivors = []
    for path in cfg["only_mutate"]:
        meta = Path("mutants") / f"{path}.meta"
        if not meta.exists():
            print(f"| `{path}` | no results (run `make mutants`) |")
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        module = path[:-3].replace("/", ".")
        print(row(f"`{path}`", list(codes.values())))
        for fn in FUNCTIONS.get(path, []):
            print(row(f"`{path}` `{fn}`", [c for k, c in codes.items() if function_of(k, module) == fn]))
        bodies = functions((Path("mutants") / path).read_text())
        survivors += [(k, status_of(c), change(k, bodies)) for k, c in codes.items()
                      if status_of(c) not in ("killed", "not run")]
    print()
    for key, status, diff in survivors:
        print(f"- `{key}` ({status}): `{diff}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
