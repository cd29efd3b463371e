"""Keep SQLAlchemy out of `mindsdb_sql_parser`'s import.

`mindsdb_sql_parser.ast.create` imports SQLAlchemy when it is installed (`try: from
sqlalchemy import types`), only to print a `CREATE TABLE` column whose type is given as a
SQLAlchemy class; the parser itself makes types strings, and kbsql never builds such nodes.
Where SQLAlchemy is installed (JupySQL brings it; the test extra has it) that import cost
0.3-0.6 s in every process that parses SQL: each `kbsql serve`, each notebook kernel, paid
by the first statement (measured with `-X importtime`, 2-core machine, load ~1-3).

The finder below answers "no such module" to that one import, asked from that one module;
every other import of SQLAlchemy (JupySQL's, the user's) is untouched, and once SQLAlchemy
is loaded by anyone the finder is not even asked.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

_ASKER = "mindsdb_sql_parser.ast.create"


class _NoSqlalchemyForTheParser(MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != "sqlalchemy":
            return None
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_globals.get("__name__") == _ASKER:
                raise ModuleNotFoundError(f"kbsql: {_ASKER} runs without SQLAlchemy", name=fullname)
            frame = frame.f_back  # type: ignore[assignment]
        return None


def install() -> None:
    """Put the finder first on `sys.meta_path`, once per process (before the parser loads)."""
    if _ASKER not in sys.modules and not any(isinstance(f, _NoSqlalchemyForTheParser) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoSqlalchemyForTheParser())
