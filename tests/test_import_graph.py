"""The store's modules import one another in one direction: no import circle through the store.

kbmcp/store/backend.py builds the `Store` from the concern contracts (kbmcp/store/<concern>.py);
they and both backends take `Connection` from the leaf kbmcp/store/connection.py and the
resolved search values (`Scope`, `SimilarityFloor`) from the leaf kbmcp/search/resolved.py, and
kbmcp/store/open_store.py, not the contract, knows the two backends. Before that, every concern
imported `Connection` back from backend.py, and kbmcp/store/search.py imported the search layer
that imports `Store`: 21 modules (the contract, its 16 concerns, kbmcp/access.py,
kbmcp/search/scope.py and floor.py) formed one strongly connected component, 74 once the lazy
imports inside functions (open_store's backends) are counted too.

The graph counts module-level imports, including those under `if TYPE_CHECKING:`: those were
the whole circle (at run time the back imports were already type-only), and they are what a
reader follows from one module to the next. Imports inside functions are left out: they are
deliberate lazy loads (a driver imported only for the backend in use).

The bound: no component touching kbmcp.store spans more than 3 modules, and none leaves one
package. What remains is kbmcp/store/sqlite/search/lexical/'s stats, own_tokens and scan: two
row types that name each other for type hints only (`ReadableRows.own: OwnTokens`,
`OwnTokens(readable: ReadableRows)`), inside one package, where one reader reads them together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kbmcp

PACKAGE_ROOT = Path(kbmcp.__file__).parent
LARGEST_STORE_CIRCLE = 3


def module_files() -> dict[str, Path]:
    """Every module of the kbmcp package by its dotted name."""
    modules: dict[str, Path] = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        parts = ["kbmcp", *path.relative_to(PACKAGE_ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _closest_module(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _module_level_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module makes outside functions and classes (under `if` and `try` too, so
    `if TYPE_CHECKING:` counts)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for statement in body:
        if isinstance(statement, ast.Import | ast.ImportFrom):
            found.append(statement)
        elif isinstance(statement, ast.If):
            found += _module_level_imports(statement.body) + _module_level_imports(statement.orelse)
        elif isinstance(statement, ast.Try):
            for block in (statement.body, statement.orelse, statement.finalbody):
                found += _module_level_imports(block)
            for handler in statement.handlers:
                found += _module_level_imports(handler.body)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the kbmcp modules it imports (a package's __init__ counts as imported with any
    module under it)."""
    modules = module_files()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _module_level_imports(ast.parse(path.read_text()).body):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from a import b`: b is a module of a, or a name defined in a.
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                found = _closest_module(target, modules)
                if found is None:
                    continue
                parts = found.split(".")
                for end in range(1, len(parts) + 1):
                    imported = ".".join(parts[:end])
                    if imported in modules and imported != name:
                        graph[name].add(imported)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components (iterative: the graph has hundreds of nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def test_the_finder_sees_a_circle() -> None:
    """The measure itself: a made-up circle a -> b -> c -> a is one component of three."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert sorted(map(sorted, strongly_connected(graph))) == [["a", "b", "c"], ["d"]]


def test_the_graph_reads_type_only_imports() -> None:
    """An import under `if TYPE_CHECKING:` is an edge; one inside a function is not."""
    graph = import_graph()
    assert "kbmcp.store.connection" in graph["kbmcp.store.catalog"]  # type-only import
    assert "kbmcp.store.postgres.store" not in graph["kbmcp.store.open_store"]  # in a function


def test_no_import_circle_through_the_store() -> None:
    circles = [
        component
        for component in strongly_connected(import_graph())
        if len(component) > 1 and any(name.startswith("kbmcp.store") for name in component)
    ]
    for circle in circles:
        assert len(circle) <= LARGEST_STORE_CIRCLE, sorted(circle)
        packages = {name.rpartition(".")[0] for name in circle}
        assert len(packages) == 1, sorted(circle)
    assert all("kbmcp.store.backend" not in circle for circle in circles)
