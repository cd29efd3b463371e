"""The local engine: projects, knowledge bases, agents and SQL, in-process."""

from kbsql.engine.engine import Engine

__all__ = ["Engine"]
