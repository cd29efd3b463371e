"""The HTTP server: the interface's routes over the local engine."""

from kbsql.server.app import build_app

__all__ = ["build_app"]
