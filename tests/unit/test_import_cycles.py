"""No import cycle anywhere in the product, the client, the local stack or the benchmarks.

The graph is read from the sources with `ast` (nothing is imported). Every import counts, wherever it
stands: at module level, inside a function (a lazy import that closes a loop still makes two modules that
need each other, as `cli.py` and `cli_ops.py` once did), or under `if TYPE_CHECKING:`. One kind does not:
a package's `__init__` importing one of its own submodules inside a function or under TYPE_CHECKING, as a
provider package's `build` loads its driver on first use. Python always runs a package's `__init__`
before any of its submodules, so that edge cannot leave a module half made; it is how a package hands
on its members. A module-level import of a submodule by its package does count.
"""

from __future__ import annotations

import ast
import itertools
from collections import deque
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Each tree with the directory its modules are imported from (what sys.path holds for it).
TREES = {
    "layers": REPO / "layers" / "scheduler",
    "functions": REPO,
    "devstack": REPO,
    "client/src": REPO / "client" / "src",
    "bench": REPO,
}


@dataclass(frozen=True)
class Edge:
    target: str
    line: int
    containment: bool  # a package's lazy or type-only import of its own submodule: not counted


def _modules(repo: Path, trees: dict[str, Path]) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for tree, root in trees.items():
        for path in sorted((repo / tree).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _edges(name: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: list[Edge] = []

    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def add(dotted: str, line: int, deferred: bool) -> None:
        target = known(dotted)
        if target is None or target == name:
            return
        own_submodule = is_package and target.startswith(name + ".")
        found.append(Edge(target, line, containment=own_submodule and deferred))

    def visit(nodes: list[ast.stmt] | list[ast.AST], deferred: bool) -> None:
        for child in nodes:
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(child.body, True)
                visit(child.orelse, deferred)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(list(ast.iter_child_nodes(child)), True)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name, child.lineno, deferred)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, *([child.module] if child.module else [])])
                for alias in child.names:
                    submodule = f"{base}.{alias.name}"  # `from package import module` names a module
                    add(submodule if submodule in modules else base, child.lineno, deferred)
            else:
                visit(list(ast.iter_child_nodes(child)), deferred)

    visit(ast.parse(path.read_text(), str(path)).body, False)
    return found


def import_graph(
    repo: Path = REPO, trees: dict[str, Path] = TREES
) -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    """Module → the modules it imports (with the line of the first import), containment edges left out."""
    modules = _modules(repo, trees)
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, path in modules.items():
        for edge in _edges(name, path, modules):
            if not edge.containment:
                graph[name].setdefault(edge.target, edge.line)
    return graph, modules


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively: the groups of two or more modules that all reach one another."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph[successor])))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)
    return groups


def _one_cycle(graph: dict[str, dict[str, int]], group: set[str]) -> list[str]:
    """A shortest loop through the group's first module (by name), as module names, first repeated last."""
    start = min(group)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(graph[node]):
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if successor in group and successor not in came_from:
                came_from[successor] = node
                queue.append(successor)
    raise AssertionError(f"no loop through {start}")  # a strongly connected group always has one


def describe_cycles(graph: dict[str, dict[str, int]], modules: dict[str, Path], repo: Path = REPO) -> list[str]:
    """Each cycle as `a.py:12 -> b.py:40 -> a.py` (the line of the import that leads on)."""
    described = []
    for group in _strongly_connected(graph):
        loop = _one_cycle(graph, group)
        steps = [
            f"{modules[module].relative_to(repo)}:{graph[module][following]}"
            for module, following in itertools.pairwise(loop)
        ]
        described.append(" -> ".join([*steps, str(modules[loop[0]].relative_to(repo))]))
    return sorted(described)


def test_no_module_imports_itself_through_others() -> None:
    graph, modules = import_graph()
    cycles = describe_cycles(graph, modules)
    assert not cycles, "import cycles (file:line of the import that leads on):\n  " + "\n  ".join(cycles)


def _tree(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    graph, modules = import_graph(tmp_path, {"pkg": tmp_path})
    return describe_cycles(graph, modules, tmp_path)


def test_a_cycle_closed_by_an_import_inside_a_function_is_named(tmp_path: Path) -> None:
    cycles = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "cli.py": "from pkg.ops import OPERATIONS\n",
            "ops.py": "OPERATIONS = {}\n\n\ndef completion():\n    from pkg.cli import build_parser\n",
        },
    )
    assert cycles == ["pkg/cli.py:1 -> pkg/ops.py:5 -> pkg/cli.py"]


def test_a_cycle_closed_by_a_type_only_import_is_named(tmp_path: Path) -> None:
    cycles = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from . import b\n",
            "b.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .a import Thing\n",
        },
    )
    assert cycles == ["pkg/a.py:1 -> pkg/b.py:4 -> pkg/a.py"]


def test_a_package_loading_its_own_driver_on_first_use_is_no_cycle(tmp_path: Path) -> None:
    cycles = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "provider/__init__.py": "NAME = 'p'\n\n\ndef build():\n    from pkg.provider.driver import Driver\n",
            "provider/driver.py": "from pkg.provider import NAME\n",
        },
    )
    assert cycles == []


def test_a_package_importing_at_module_level_a_member_that_imports_it_is_a_cycle(tmp_path: Path) -> None:
    cycles = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "provider/__init__.py": "from pkg.provider.driver import Driver\n\nNAME = 'p'\n",
            "provider/driver.py": "from pkg.provider import NAME\n",
        },
    )
    assert cycles == ["pkg/provider/__init__.py:1 -> pkg/provider/driver.py:1 -> pkg/provider/__init__.py"]
