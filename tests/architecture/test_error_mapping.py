"""MySQL error codes come from the error's kind, never from its words: the door's code map
(`server/mysql/error_codes.py`) imports no regular-expression module, and every kind the
interface names has a row in the one table (`interface.errors.KINDS`). Checked from the
source, nothing runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "kbsql"
REGEX_MODULES = {"re", "regex", "fnmatch"}


def regex_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found += [f"{n}:{node.lineno}" for n in names if n.split(".")[0] in REGEX_MODULES]
    return found


def test_the_mysql_code_map_reads_no_message() -> None:
    assert regex_imports((SRC / "server/mysql/error_codes.py").read_text(encoding="utf-8")) == []


def test_the_checker_sees_a_regex() -> None:
    assert regex_imports("import re\nfrom re import compile\n") == ["re:1", "re:2"]


def test_every_typed_sql_error_has_codes() -> None:
    from kbsql.interface import errors

    kinds = [cls.problem_type for name, cls in vars(errors).items()
             if isinstance(cls, type) and issubclass(cls, errors.SqlError) and cls is not errors.SqlError
             and not name.startswith("_")]
    assert kinds and all(kind in errors.KINDS for kind in kinds)
