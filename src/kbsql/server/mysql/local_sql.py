"""The door's own small DuckDB: a client's metadata statement (`SHOW ... WHERE`, a query over
MySQL's `information_schema`) run over in-memory tables the door built.

The statement is the client's text, so this database is bounded like the engine's (issue 22)
even though it holds only a few small tables:

- no file or network access, configuration locked. `SHOW VARIABLES WHERE ... read_text(
  'config.json') ...` read the operator's API key before (as a cast error's message);
- 64 MB of memory, one thread, no spill; a result of at most `MAX_RESULT_BYTES`;
- no function that makes a big value out of a small argument (`repeat('x', 600000000)`
  grew the server by 1.2 GB) nor a recursive CTE (a string doubling per step): one line;
- `TIMEOUT_S` at most, and stopped when the connection's client goes away (the request's
  `Control`, `interface.control.CURRENT`).
"""

from __future__ import annotations

import itertools
import threading

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import expressions as exp
from sqlglot.tokens import TokenType

from kbsql.interface.control import current
from kbsql.server.door_bounds import METADATA_TIMEOUT_S

TIMEOUT_S = METADATA_TIMEOUT_S  # its one home is door_bounds, beside the door's other bounds
MAX_TEXT = 32 * 1024
"""Characters of a statement this door's metadata database reads (a SHOW ... WHERE or LIKE):
sqlglot parses the text in Python before any deadline can act, and a 1 MB `SHOW VARIABLES
WHERE 1=1 AND ...` held a worker for 34 CPU-s and another client's SELECT 1 for 17 s (the
engine's 60,000-token bound never saw it). A tool's filter is a few hundred characters."""
MAX_RESULT_BYTES = 64 * 1024 * 1024
CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False, "memory_limit": "64MiB", "threads": 1,
    "max_temp_directory_size": "0MiB", "lock_configuration": True,
    "allocator_background_threads": True}
"""`allocator_background_threads`: DuckDB's allocator is one per process, and a database opened
without it turns off the thread that gives freed memory back (the SQL engine sets it too)."""
GENERATORS = frozenset({
    "repeat", "space", "lpad", "rpad", "printf", "format", "range", "generate_series",
    "list_resize", "array_resize", "bar", "replace", "regexp_replace", "string_agg",
    "group_concat", "listagg", "list", "array_agg", "histogram", "unnest",
})
"""Functions whose output size an argument or a whole column sets: not needed to filter a
metadata answer, refused here."""


class LocalRefused(ValueError):
    """The statement uses what the door's metadata database does not run (one line)."""


_lock = threading.Lock()
_duck: duckdb.DuckDBPyConnection | None = None


def run_local(sql: str | exp.Expression, tables: dict[str, pa.Table], timeout: float = TIMEOUT_S) -> pa.Table:
    """A MySQL statement over in-memory tables (their names as the statement uses them), in
    DuckDB: a cursor of one shared in-memory database, so each call costs ~1 ms. `timeout`:
    the most it may run (the door gives the server's --statement-timeout when that is less)."""
    global _duck
    if isinstance(sql, str) and len(sql) > MAX_TEXT:
        raise LocalRefused(f"A SHOW ... WHERE or LIKE on this door may be at most {MAX_TEXT // 1024} KB "
                           f"long; this one is {len(sql) // 1024} KB")
    tree = sqlglot.parse_one(sql, read="mysql") if isinstance(sql, str) else sql
    tree = _having_as_where(tree.transform(lambda node: exp.ILike(this=node.this, expression=node.expression)
                                           if isinstance(node, exp.Like) else node))
    text = tree.sql(dialect="duckdb")
    _check(text)
    with _lock:
        if _duck is None:
            _duck = duckdb.connect(config=CONFIG)
        cursor = _duck.cursor()
    control = current()
    timer = threading.Timer(timeout, cursor.interrupt)
    timer.daemon = True
    try:
        for name, table in tables.items():
            cursor.register(name, table)
        timer.start()
        if control is None:
            return _fetch(cursor, text)
        with control.stoppable(cursor.interrupt):
            return _fetch(cursor, text)
    except duckdb.InterruptException:
        if control is not None:
            control.check()  # the client's reason (it went away), when it is that
        raise LocalRefused(f"The statement ran past the {timeout:g} s a metadata statement may take "
                           f"on this door (at most {TIMEOUT_S:g}, kbsql serve --statement-timeout)") from None
    finally:
        timer.cancel()
        cursor.close()


def _fetch(cursor: duckdb.DuckDBPyConnection, text: str) -> pa.Table:
    reader = cursor.execute(text).to_arrow_reader(1_000_000)
    batches, size = [], 0
    for batch in reader:
        size += batch.nbytes
        if size > MAX_RESULT_BYTES:
            raise LocalRefused(f"The answer is over {MAX_RESULT_BYTES // (1024 * 1024)} MB, the most "
                               "a metadata statement may return on this door: narrow it")
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=reader.schema)


def _check(text: str) -> None:
    """Refuse a generator function or a recursive CTE (see GENERATORS) in the DuckDB text."""
    tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(text)
    for token, following in itertools.pairwise(tokens):
        if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            continue
        word = token.text.lower()
        if word == "recursive":
            raise LocalRefused("A recursive WITH is not supported in metadata statements on this door")
        if word in GENERATORS and following.token_type == TokenType.L_PAREN:
            raise LocalRefused(f"{word}() is not supported in metadata statements on this door "
                               "(SHOW ... WHERE, information_schema)")


def having_as_where(sql: str) -> str | None:
    """A SELECT's text with MySQL's HAVING-without-GROUP-BY made a WHERE (Connector/J's
    getTables sends it on information_schema), for the engine to run again; None when the
    statement has no such HAVING."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except sqlglot.errors.ParseError:
        return None
    rewritten = _having_as_where(tree)
    return None if rewritten is tree else rewritten.sql(dialect="mysql")


def _having_as_where(tree: exp.Expression) -> exp.Expression:
    """MySQL's HAVING without GROUP BY filters the select list's rows, by their aliases
    (JDBC's getTables does so); DuckDB wants it as a WHERE on the aliased expressions."""
    if not isinstance(tree, exp.Select) or not tree.args.get("having") or tree.args.get("group"):
        return tree
    aliases = {p.alias.lower(): p.this for p in tree.expressions if isinstance(p, exp.Alias)}

    def unalias(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases:
            return aliases[node.name.lower()].copy()
        return node

    condition = tree.args["having"].this.transform(unalias)
    tree = tree.copy()
    tree.set("having", None)
    return tree.where(condition)
