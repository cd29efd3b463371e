"""Sizes and names that keep `src/kbsql` readable, checked from the source (nothing runs).

- No function is longer than 80 lines (a route, a handler, a loop body: split by job).
- No two modules share a basename (`__init__.py` aside): `render.py` in two packages made a
  reader open the wrong one.
- ruff's C901 runs in CI with max-complexity 15 (pyproject.toml): this test keeps the
  setting from being dropped or loosened.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "kbsql"
MAX_FUNCTION_LINES = 80
MAX_COMPLEXITY = 15


def functions(path: Path) -> list[tuple[str, int, int]]:
    """(name, first line, line count) of every function and method in a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1)  # type: ignore[operator]
            for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_the_size_check_sees_functions(tmp_path: Path) -> None:  # the checker itself can fail
    module = tmp_path / "m.py"
    module.write_text("def f():\n" + "    x = 1\n" * 90 + "\n\nasync def g():\n    pass\n")
    assert functions(module) == [("f", 1, 91), ("g", 94, 2)]


def test_no_function_over_80_lines() -> None:
    long = [f"{path.relative_to(SRC)}:{line} {name} ({count} lines)"
            for path in sorted(SRC.rglob("*.py")) for name, line, count in functions(path)
            if count > MAX_FUNCTION_LINES]
    assert long == [], "functions over 80 lines:\n" + "\n".join(long)


def test_module_basenames_are_distinct() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in sorted(SRC.rglob("*.py")):
        if path.name != "__init__.py":
            by_name[path.name].append(str(path.relative_to(SRC)))
    repeated = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert repeated == {}, f"modules sharing a name: {repeated}"


def test_ruff_enforces_complexity_15() -> None:
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert {"C90", "C901"} & set(lint["select"]), "ruff's C901 is not selected"
    assert lint["mccabe"]["max-complexity"] <= MAX_COMPLEXITY
