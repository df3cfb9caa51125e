"""No import cycles inside jobs/ and pipelines/ (module-level imports, TYPE_CHECKING blocks included).

A cycle makes import order matter and hides which module owns what; the shared part goes into a third
module instead (pipelines/layout.py, jobs/engine/seam.py, jobs/engine/ds_config.py).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("jobs", "pipelines")


def module_level_imports(path: Path, package: str, lazy: bool = False) -> set[str]:
    """Modules of `package` that `path` imports outside any function or class body (`lazy`: anywhere)."""
    found: set[str] = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if lazy:
                    visit(node.body)
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)  # `from jobs import engine`
            for field in ("body", "orelse", "handlers", "finalbody"):  # if / try blocks at module level
                visit(getattr(node, field, []) or [])

    visit(ast.parse(path.read_text()).body)
    modules = set(module_names(package))
    return {m for m in found if m in modules}


def module_names(package: str) -> dict[str, Path]:
    """Every module of `package`, sub-packages included, by dotted name (a package by its __init__)."""
    out = {}
    for p in sorted((ROOT / package).rglob("*.py")):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def graph(lazy: bool = False) -> dict[str, set[str]]:
    return {name: module_level_imports(p, pkg, lazy) for pkg in PACKAGES for name, p in module_names(pkg).items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := dfs(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := dfs(node)):
            return cycle
    return None


def test_the_checker_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package):
    edges = {m: deps for m, deps in graph().items() if m.startswith(package + ".")}
    assert edges, f"no modules found under {package}/"
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles_even_through_function_level_imports(package):
    """jobs/engine/data_parallel.py imports jobs/engine/pipeline.py lazily (it imports deepspeed); the way back must not exist."""
    edges = {m: deps for m, deps in graph(lazy=True).items() if m.startswith(package + ".")}
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges))


def test_the_graph_reaches_into_sub_packages():
    """jobs/ is entry points over sub-packages: a graph of the top level alone would check almost nothing."""
    edges = graph(lazy=True)
    assert "jobs.engine.data_parallel" in edges["jobs.workers.pretrain_engine"]
    assert "jobs.loops.ft_tasks" in edges["jobs.workers.finetune_worker"]
