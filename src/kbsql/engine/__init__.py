"""The local engine: projects, knowledge bases, agents and SQL, in-process.

`Engine` is imported on first use: `kbsql serve` reads its settings table
(`kbsql.engine.settings_table`) before anything decides to open an engine, and a package
import must not load the engine's whole SQL and vector stack for that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbsql.engine.engine import Engine

__all__ = ["Engine"]


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from kbsql.engine.engine import Engine

        return Engine
    raise AttributeError(f"module 'kbsql.engine' has no attribute {name!r}")
