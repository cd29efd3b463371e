"""DuckDB's errors as a user should read them (duck.DuckSession runs the statements)."""

from __future__ import annotations

import re

import duckdb

from kbsql.engine.datasources.confine import Pinned
from kbsql.engine.sql.tables.duck_settings import DuckSettings
from kbsql.interface.control import Control, Stopped
from kbsql.interface.errors import SqlError

MB = 1024 * 1024
_SERVER_TIMEOUT = "canceling statement due to statement timeout"  # PostgreSQL's words
_POSTGRES_ERROR = re.compile(r"ERROR:\s+([^\n]*)")
_DETACHED = re.compile(r'Catalog "kbsql_ds_[0-9_]+" does not exist')
"""A source's DuckDB catalog (registry.ATTACH_PREFIX) gone under a statement: DROP or ALTER
DATABASE detaches it at once, not behind the swap gate, so a statement reading it then
failed with 'Binder Error: Catalog "kbsql_ds_38" does not exist!', a name the user never
wrote (15 of 218 reads in 20 s while another user altered, dropped and re-created the source, live)."""


def readable(exc: duckdb.Error, control: Control, pinned: list[Pinned], memory_limit: int, spill_limit: int,
             settings: DuckSettings) -> Exception:
    """A stop names its reason, running out of memory names the limits, a postgres source's
    refusal is its own words in one line, and a pinned file is named by its path."""
    if control.stopped and isinstance(exc, duckdb.InterruptException):
        return Stopped(control.reason or "stopped")
    if _SERVER_TIMEOUT in str(exc) and control.expired():  # a postgres source's own bound: the same
        if control.reason is None:  # deadline, reached there a moment before the watchdog saw it
            control.time_up()
        return Stopped(control.reason or "stopped")
    if isinstance(exc, duckdb.OutOfMemoryException):
        first = str(exc).splitlines()[0]
        return SqlError(f"The statement needs more memory than the SQL memory limit "
                        f"({memory_limit // MB} MB, {settings.limit_note}) and its "
                        f"spill space ({spill_limit // MB} MB, {settings.spill_note}) "
                        f"allow: {first}")
    message = str(exc)
    if _DETACHED.search(message):
        return SqlError("A data source this statement reads was dropped or changed (DROP or ALTER "
                        "DATABASE) while it started: run the statement again")
    server = _POSTGRES_ERROR.search(message) if "Failed to prepare" in message or \
        "for COPY" in message else None
    if server is not None:  # a postgres source refused what it was sent: its words, one line
        native = "__unnamed_subquery" in message or "Failed to prepare query" in message
        return SqlError(f"PostgreSQL refused the query: {server.group(1).strip()}" + (
            " (a native query runs there as a read-only subquery: a SELECT)" if native else ""))
    for item in pinned:
        message = message.replace(item.read_path, item.path).replace(item.real, item.path)
    if any(not item.stored for item in pinned) or message != str(exc):
        return SqlError(message)
    return exc  # only the engine's own files, unnamed in it: the error as DuckDB gave it
