"""The import graph of `src/kbsql`, built from the source (no import is executed).

Every import counts: top-level, inside a function, and under `TYPE_CHECKING`, because each
is a real dependency (a lazy import is a cycle waiting for a caller, a type-only import
still couples two modules). The graph must have no cycle, the engine's parts must not name
`Engine` (they receive narrow ports; `Engine.__init__` is the one composition root), and
the layers must point one way: notebook -> client -> engine | HTTP, server -> the service
protocol (interface only: `cli.py` wires it to the engine), all -> interface.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "kbsql"
ROOT_OF_ENGINE = {"kbsql.engine", "kbsql.engine.engine"}  # the composition root and its door


def module_files() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_package(name: str, files: dict[str, Path]) -> bool:
    return files[name].name == "__init__.py"


def imports_of(name: str, files: dict[str, Path]) -> set[str]:
    """The kbsql modules `name` imports, anywhere in its source."""
    tree = ast.parse(files[name].read_text(encoding="utf-8"))
    found: set[str] = set()

    def known(target: str) -> str | None:
        while target and target not in files:  # `import kbsql.x.y` where y is an attribute
            target = target.rpartition(".")[0]
        return target or None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE and (hit := known(alias.name)):
                    found.add(hit)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name if _is_package(name, files) else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                hit = sub if sub in files else known(base)  # a submodule, or a name in base
                if hit:
                    found.add(hit)
    found.discard(name)
    return found


def graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imports_of(name, files) for name in files}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def names_engine(path: Path) -> list[int]:
    """Lines where code (not a comment or docstring) names `Engine`."""
    lines = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    annotations = [a for node in ast.walk(tree) for a in _annotations_of(node)]
    string_annotations = {id(n) for a in annotations for n in ast.walk(a) if isinstance(n, ast.Constant)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and node.id == "Engine") or \
                (isinstance(node, ast.Attribute) and node.attr == "Engine"):
            lines.append(node.lineno)
        elif isinstance(node, ast.alias) and "Engine" in (node.name.split(".")[-1], node.asname):
            lines.append(node.lineno)
        elif id(node) in string_annotations and isinstance(node.value, str) and \
                "Engine" in node.value:  # a string annotation naming it (a column named "Engine" is data)
            lines.append(node.lineno)
    return sorted(lines)


def _annotations_of(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.arg) and node.annotation is not None:
        return [node.annotation]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
        return [node.returns]
    if isinstance(node, ast.AnnAssign):
        return [node.annotation]
    return []


def layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in (
        "interface", "client", "engine", "server", "notebook") else "root"


# what each layer may import (besides itself); "root" is kbsql/__init__, cli, quickstart, ...
ALLOWED = {
    "interface": set(),
    "engine": {"interface", "version"},
    "client": {"interface", "engine"},
    "server": {"interface"},
    "notebook": {"interface", "client", "version"},
    "root": {"interface", "client", "engine", "server", "notebook", "version"},
}


def test_the_graph_sees_the_whole_package() -> None:
    edges = graph()
    assert len(edges) > 80
    assert "kbsql.engine.sql.session" in edges["kbsql.engine.sql.executor"]  # resolved submodules
    assert "kbsql.engine.validate" in edges["kbsql.engine.knowledge.bases"]


def test_cycles_are_detected() -> None:  # the checker itself can fail
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle() -> None:
    found = cycles(graph())
    assert found == [], "import cycles in src/kbsql:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_engine_part_names_engine() -> None:
    files = module_files()
    offenders = {}
    for name, path in files.items():
        if not name.startswith("kbsql.engine.") or name in ROOT_OF_ENGINE:
            continue
        lines = names_engine(path)
        bad_imports = imports_of(name, files) & ROOT_OF_ENGINE
        if lines or bad_imports:
            offenders[name] = (lines, sorted(bad_imports))
    assert offenders == {}, f"engine parts that reach back to Engine: {offenders}"


def test_layers_point_one_way() -> None:
    edges = graph()
    wrong = []
    for name, targets in edges.items():
        for target in targets:
            src, dst = layer(name), layer(target)
            if target == "kbsql._version":
                dst = "version"
            if src != dst and dst not in ALLOWED[src] and not (src == "root" and dst == "root"):
                wrong.append(f"{name} -> {target}")
    assert wrong == [], "imports against the layering:\n" + "\n".join(sorted(wrong))


def test_http_client_imports_nothing_from_the_engine() -> None:
    edges = graph()
    reach, todo = set(), ["kbsql.client.http"]
    while todo:
        for target in edges[todo.pop()]:
            if target not in reach:
                reach.add(target)
                todo.append(target)
    assert not {m for m in reach if m.startswith("kbsql.engine")}


def test_the_server_never_imports_the_engine() -> None:
    """The server is typed on `ServiceApi` and the capabilities a backend declares; `cli.py`
    wires it to the engine. No server module imports an engine module or names `Engine`."""
    files, edges = module_files(), graph()
    offenders = {name: (names_engine(files[name]), sorted(t for t in targets if t.startswith("kbsql.engine")))
                 for name, targets in edges.items() if name.startswith("kbsql.server")}
    assert {k: v for k, v in offenders.items() if v != ([], [])} == {}


def third_party_roots(path: Path) -> set[str]:
    """The top-level packages `path` imports that are not kbsql's."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots - {PACKAGE}


def test_the_mysql_door_stands_beside_the_routes() -> None:
    """The MySQL door is a second door over the same service and lanes, not a part of the
    HTTP adapter: no module of `server/mysql/` imports the HTTP routes or Starlette (its
    worker lanes and `controlled` come from `server/lanes.py`)."""
    files, edges = module_files(), graph()
    door = [name for name in files if name.startswith("kbsql.server.mysql")]
    assert "kbsql.server.mysql.connection" in door
    assert "kbsql.server.lanes" in edges["kbsql.server.mysql.door"]
    offenders = {name: sorted({t for t in edges[name] if t.startswith("kbsql.server.routes")}
                              | ({"starlette"} & third_party_roots(files[name])))
                 for name in door}
    assert {k: v for k, v in offenders.items() if v} == {}
    assert "starlette" in third_party_roots(files["kbsql.server.routes.common"])  # the check sees it
