"""The plugin contract is public and typed (checked from the source, nothing runs):

- the example plugin package (tests/plugins/site) imports from kbsql only `kbsql.spi` and
  `kbsql.interface`: what a third party may code against;
- no registry is `Registry[Any]`: each is typed by the protocol its plugins implement;
- nothing probes a plugin with `getattr(backend, ...)`: optional abilities are
  runtime-checkable protocols (`ChecksParameters`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "kbsql"
PLUGINS = ROOT / "tests" / "plugins" / "site"
PUBLIC = ("kbsql.spi", "kbsql.interface")


def private_imports(source: str) -> list[str]:
    """kbsql modules imported that a plugin may not use."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        out += [f"{n}:{node.lineno}" for n in names
                if n.split(".")[0] == "kbsql" and not any(n == p or n.startswith(p + ".") for p in PUBLIC)]
    return out


def test_the_example_plugins_use_only_the_public_api() -> None:
    files = sorted(PLUGINS.rglob("*.py"))
    assert len(files) >= 5
    assert {f.name: private_imports(f.read_text(encoding="utf-8")) for f in files} == \
        {f.name: [] for f in files}


def test_the_checker_sees_a_private_import() -> None:
    source = ("from kbsql.engine.knowledge.search import Filter\nimport kbsql.spi\n"
              "from kbsql.interface.errors import BadRequest\n")
    assert private_imports(source) == ["kbsql.engine.knowledge.search:1"]


def test_registries_are_typed_and_plugins_are_not_probed() -> None:
    untyped = re.compile(r"Registry\[Any\]")
    probe = re.compile(r"getattr\((backend|plugin|implementation)\b")
    found = [f"{p.relative_to(SRC)}" for p in SRC.rglob("*.py")
             if untyped.search(p.read_text(encoding="utf-8")) or probe.search(p.read_text(encoding="utf-8"))]
    assert found == []
