"""Fetching a statement's answer from DuckDB as Arrow (duck.py runs the statement): in
batches, refused past a byte cap, TIME WITH TIME ZONE columns read in UTC; in the main thread
through a relay that Ctrl-C can stop."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import duckdb
import pyarrow as pa

from kbsql.interface.control import Control
from kbsql.interface.errors import SqlError

MB = 1024 * 1024
BATCH_ROWS = 65536  # rows per fetched Arrow batch (the result cap is checked per batch)


def fetch(con: duckdb.DuckDBPyConnection, sql: str, control: Control, query: bool,
          result_cap: int, limit_note: str) -> pa.Table:
    """The result in Arrow batches, refused past `result_cap` bytes (a silently cut result
    would be a wrong answer; `limit_note` says which setting sets the SQL memory limit). A
    query is bound first (a relation: its column types, nothing run yet), so a result with a
    TIME WITH TIME ZONE column is run once, already wrapped to read it in UTC."""
    if query:
        relation = con.sql(sql)
        columns = [(str(name), str(kind) == "TIME WITH TIME ZONE")
                   for name, kind in zip(relation.columns, relation.types, strict=True)]
        if any(zoned for _, zoned in columns):
            relation = con.sql(_times_in_utc(sql, columns))
        reader = relation.to_arrow_reader(BATCH_ROWS)
    else:  # a write: run now (its answer is the rows written)
        con.execute(sql)
        reader = con.to_arrow_reader(BATCH_ROWS)
    batches = []
    size = 0
    for batch in reader:
        size += batch.nbytes
        if size > result_cap:
            raise SqlError(f"The result is over {result_cap // MB} MB, the most one "
                           f"statement may return here (a sixteenth of the SQL memory limit, "
                           f"{limit_note}): add a LIMIT, select fewer columns or aggregate")
        batches.append(batch)
    control.check()
    return pa.Table.from_batches(batches, reader.schema)


def _times_in_utc(sql: str, columns: list[tuple[str, bool]]) -> str:
    """`sql` with its TIME WITH TIME ZONE columns (name, zoned) read in UTC: DuckDB's Arrow
    export keeps a TIMETZ's clock time and drops its offset (PostgreSQL's 14:30:45+03 would
    read 14:30:45, a silently wrong time); MindsDB answers such a column in UTC (11:30:45).
    Columns are taken by position, so two of one name stay apart."""
    def ident(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    targets = [f"CAST(timezone('UTC', #{i}) AS TIME) AS {ident(name)}" if zoned else f"#{i} AS {ident(name)}"
               for i, (name, zoned) in enumerate(columns, start=1)]
    return f"SELECT {', '.join(targets)} FROM ({sql})"


class MainThreadRelay:
    """Fetches for the main thread (a notebook's kernel, a script), where Ctrl-C lands.

    DuckDB notices a SIGINT only when it polls between two of its tasks, and a task of a big
    join can run for minutes (and under load the poll was seen to miss it altogether). So the
    statement runs in a helper thread while the main thread waits, which a KeyboardInterrupt
    does wake: the cursor is interrupted, the helper stops within a vector, and the
    KeyboardInterrupt goes on. (~40 us a statement, paid only in the main thread; the server
    runs statements in its worker threads.)"""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None  # made on first use

    def run(self, fetch_fn: Callable[..., pa.Table], con: duckdb.DuckDBPyConnection, *args: Any) -> pa.Table:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="kbsql-sql-main")
        future = self._pool.submit(fetch_fn, con, *args)
        try:
            return future.result()
        except KeyboardInterrupt:
            con.interrupt()
            try:
                future.result()
            except BaseException:  # the interrupted statement's own error: the Ctrl-C wins
                pass
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
