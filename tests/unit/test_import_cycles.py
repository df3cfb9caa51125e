"""No import cycles inside jobs/ and pipelines/ (module-level imports, TYPE_CHECKING blocks included).

A cycle makes import order matter and hides which module owns what; the shared part goes into a third
module instead (pipelines/layout.py, jobs/seam.py, jobs/ds_config.py).
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
    modules = {f"{package}.{p.stem}" for p in (ROOT / package).glob("*.py")}
    return {m for m in found if m in modules}


def graph(lazy: bool = False) -> dict[str, set[str]]:
    return {f"{pkg}.{p.stem}": module_level_imports(p, pkg, lazy)
            for pkg in PACKAGES for p in sorted((ROOT / pkg).glob("*.py"))}


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
    """jobs/engine.py imports jobs/pipeline_parallel.py lazily (it imports deepspeed); the way back must not exist."""
    edges = {m: deps for m, deps in graph(lazy=True).items() if m.startswith(package + ".")}
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges))
