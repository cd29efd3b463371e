"""Knowledge bases and agents used as tables inside a query with other tables.

A knowledge-base reference is materialized as its search result: the WHERE conditions of
its own SELECT that name only the knowledge base (`k.content = 'x'`, `k.product = 'y'`, or
unqualified when it is the only table) are taken out of the query and given to the
knowledge-base search (`search_frame` below); the rest of the query (joins,
filters, aggregates) then runs in DuckDB over the result. An agent reference is answered
the same way: its `question = '...'` condition is asked, the answer is one row
(`question`, `answer`); an agent joined on a table's column is asked per row (agent_join).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from mindsdb_sql_parser import ast
from sqlglot import exp

from kbsql.engine.knowledge.search import DEFAULT_LIMIT
from kbsql.engine.sql.kb.kb_columns import Columns
from kbsql.engine.sql.kb.kb_conditions import MAX_COUNT
from kbsql.engine.sql.kb.kb_stream import BATCH, chunk_table, reader
from kbsql.engine.sql.kb.kb_where import read_filters, run_where
from kbsql.engine.sql.tables.sqlglot_render import conjuncts
from kbsql.interface.errors import LimitExceeded, SqlError
from kbsql.interface.results import KB_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from kbsql.engine.catalog import KbRecord
    from kbsql.engine.sql.session import SqlSession
    from kbsql.engine.sql.tables.names import Resolved

_COMPARISONS: dict[type, str] = {exp.EQ: "=", exp.NEQ: "!=", exp.GT: ">", exp.GTE: ">=",
                                 exp.LT: "<", exp.LTE: "<=", exp.Like: "like",
                                 exp.ILike: "ilike", exp.And: "and", exp.Or: "or"}


def materialize(session: SqlSession, table: exp.Table, target: Resolved) -> Any:
    if target.kind == "kb":
        return _kb_frame(session, table, target)
    if target.kind == "agent":
        return _agent_frame(session, table, target)
    raise SqlError(f"Cannot read {target.kind} {target.name} as a table")


def _kb_frame(session: SqlSession, table: exp.Table, target: Resolved) -> Any:
    select = table.find_ancestor(exp.Select)
    single = _is_only_table(select, table)
    conditions = take_conditions(select, table, single, lambda _: True)
    where = _and([to_parser_ast(c) for c in conditions])
    limit = None
    if single and select is not None and isinstance(select.args.get("limit"), exp.Limit):
        value = select.args["limit"].expression
        if isinstance(value, exp.Literal) and not value.is_string:
            limit = int(value.this)
            if limit > MAX_COUNT:
                raise LimitExceeded(f"LIMIT {limit} is too large: at most {MAX_COUNT} (2^63 - 1)")
    # a search alone in a plain SELECT keeps the documented default of 10 rows; feeding a
    # join, an aggregate, a GROUP BY or an ORDER BY it returns every row (never a silent cap)
    capped = single and select is not None and not select.args.get("group") and \
        not select.args.get("order") and select.find(exp.AggFunc) is None
    record = target.record or session.catalog.knowledge_base(target.database, target.name)
    keys = _named_keys(session, select, table, single, record)
    streamed = _streamed(session, record, table, where, keys) if limit is None else None
    if streamed is not None:
        return streamed
    frame = search_frame(session, target.database, target.name, where, limit, capped, record)
    for key in sorted(keys):  # a column of Python values: DuckDB types it
        frame[key] = [None if m is None else m.get(key) for m in frame["metadata"]]
    if "metadata" in frame.columns:  # dicts of varying keys: JSON text (DuckDB's ->> reads it)
        frame = frame.assign(metadata=[None if m is None else json.dumps(m, default=str)
                                       for m in frame["metadata"]])
    return frame


def _named_keys(session: SqlSession, select: exp.Select | None, table: exp.Table, single: bool,
               record: KbRecord) -> set[str]:
    """The metadata keys named as columns of the knowledge base where the query runs over its
    rows (`JOIN t ON t.name = k.product`, `SELECT product, count(*) ... GROUP BY product`):
    each becomes a column of the frame, typed by its values, as MindsDB's knowledge-base rows
    carry their metadata columns. A key the knowledge base cannot hold is MindsDB's Unknown
    column (kb_columns.Columns), not DuckDB's binder error; `_original_doc_id` is the id."""
    if select is None:
        return set()
    alias = table.alias_or_name.lower()
    service = session.kbs.service
    columns = Columns.of(record, service)
    selected = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    keys: set[str] = set()
    for column in list(select.find_all(exp.Column)):
        if not (column.table.lower() == alias or (single and not column.table)) or \
                column.name.lower() in KB_COLUMNS or not isinstance(column.this, exp.Identifier) or \
                column.find_ancestor(exp.Select) is not select:
            continue
        if not column.table and column.name.lower() in selected:
            continue  # ORDER BY n, where n names an expression of the select list
        key = columns.resolve(column.name)
        if key not in KB_COLUMNS:
            keys.add(key)
        if key != column.name:  # _original_doc_id is the id; a key as stored
            if column.parent is select and column.arg_key == "expressions":
                column.replace(exp.alias_(exp.column(key, table=column.table or None, quoted=True),
                                          column.name, quoted=True))
            else:
                column.set("this", exp.to_identifier(key, quoted=True))
    return keys


def _streamed(session: SqlSession, record: KbRecord, table: exp.Table, where: ast.ASTNode | None,
              keys: set[str]) -> pa.Table | None:
    """Every chunk a WHERE without a content search keeps, read in batches into Arrow columns
    (kb_stream; only the columns the query names) rather than Python rows and a pandas frame:
    `count(*)` over 400,000 small chunks in a join grew a server with a 256 MB limit by
    809 MB. None: a search, or a storage that cannot stream."""
    service = session.kbs.service
    read = reader(read_filters(where, Columns.of(record, service)),
                  lambda filters: service.plain_batches(record, filters, BATCH),
                  lambda filters: service.count_matching(record, filters))
    if read is None:
        return None
    root = table.root()
    own = table.alias_or_name.lower()  # `to_json(k)`, `COLUMNS('chunk_.*')` read whole rows too
    every = any(not isinstance(star.parent, exp.Count) for star in root.find_all(exp.Star)) or \
        root.find(exp.Columns) is not None or \
        any(not c.table and c.name.lower() == own for c in root.find_all(exp.Column))
    # the contract's columns only: a metadata key is no column of a joined knowledge base (its
    # name would make another table's column of that name ambiguous)
    keys_named = {k.lower() for k in keys}
    if every:  # every column: the declared metadata columns too, and the keys named
        declared = {c.lower() for c in record.metadata_columns or ()}
        wanted = {*KB_COLUMNS, *declared, *keys_named} if keys_named else None
    else:
        wanted = {str(i.this).lower() for i in root.find_all(exp.Identifier)} & set(KB_COLUMNS) | keys_named
    return chunk_table(read, wanted, None, session.duck.memory_limit // 2, content=False)


def _agent_frame(session: SqlSession, table: exp.Table, target: Resolved) -> pa.Table:
    select = table.find_ancestor(exp.Select)
    single = _is_only_table(select, table)

    def is_question(condition: exp.Expression) -> bool:
        return (isinstance(condition, exp.EQ) and isinstance(condition.left, exp.Column)
                and condition.left.name.lower() == "question"
                and isinstance(condition.right, exp.Literal) and condition.right.is_string)

    taken = take_conditions(select, table, single, is_question)
    if len(taken) != 1:
        raise SqlError(f"Ask agent {target.name} one question: SELECT answer FROM {target.name} "
                       "WHERE question = '...', or one per row of a table: SELECT ... FROM t "
                       f"JOIN {target.name} a ON a.question = t.<column>")
    question = taken[0].right.this
    reply = session.agents.complete(target.database, target.name,
                                     [{"question": question, "answer": ""}])
    answer = ((reply or {}).get("message") or {}).get("content")
    return pa.table({"question": [question], "answer": [answer]})


def _is_only_table(select: exp.Select | None, table: exp.Table) -> bool:
    if select is None or select.args.get("joins"):
        return False
    source = select.args.get("from_") or select.args.get("from")
    return source is not None and source.this is table


def _holders(select: exp.Select | None, table: exp.Table) -> list[tuple[exp.Expression, str]]:
    """Where conditions about `table` can be: the SELECT's WHERE, and the ON of its own
    inner JOIN (an outer join's ON must stay: it decides which rows are kept)."""
    out: list[tuple[exp.Expression, str]] = []
    join = table.parent
    if isinstance(join, exp.Join) and not join.side and join.args.get("on") is not None:
        out.append((join, "on"))
    if select is not None and select.args.get("where") is not None:
        out.append((select, "where"))
    return out


def take_conditions(select: exp.Select | None, table: exp.Table, single: bool,
                    wanted: Callable[[exp.Expression], bool]) -> list[exp.Expression]:
    """Remove the AND-ed conditions that only name `table` (and that `wanted` accepts) from
    the SELECT's WHERE and the table's JOIN ... ON; return them without column qualifiers."""
    alias = table.alias_or_name.lower()

    def own(condition: exp.Expression) -> bool:
        columns = list(condition.find_all(exp.Column))
        if not columns or condition.find(exp.Select) is not None:
            return False
        return all(c.table.lower() == alias or (not c.table and single) for c in columns)

    taken: list[exp.Expression] = []
    for holder, key in _holders(select, table):
        clause = holder.args[key]
        body = clause.this if isinstance(clause, exp.Where) else clause
        terms = conjuncts(body)
        mine = [c for c in terms if own(c) and wanted(c)]
        if not mine:
            continue
        rest = [c for c in terms if all(c is not m for m in mine)]
        if key == "where":
            holder.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
        else:
            holder.set("on", exp.and_(*rest) if rest else exp.true())
        taken.extend(mine)
    out = []
    for condition in taken:
        condition = condition.copy()
        for column in condition.find_all(exp.Column):
            column.set("table", None)
        out.append(condition)
    return out


def _and(conditions: list[ast.ASTNode]) -> ast.ASTNode | None:
    if not conditions:
        return None
    where = conditions[0]
    for condition in conditions[1:]:
        where = ast.BinaryOperation("and", args=[where, condition])
    return where


def to_parser_ast(node: exp.Expression) -> ast.ASTNode:
    """A sqlglot condition as the parser's AST (what the knowledge-base search reads)."""
    if isinstance(node, exp.Paren):
        return to_parser_ast(node.this)
    op = _COMPARISONS.get(type(node))
    if op is not None:
        return ast.BinaryOperation(op, args=[to_parser_ast(node.left), to_parser_ast(node.right)])
    if isinstance(node, exp.In) and node.expressions:
        values = ast.Tuple([to_parser_ast(e) for e in node.expressions])
        return ast.BinaryOperation("in", args=[to_parser_ast(node.this), values])
    if isinstance(node, exp.Between):
        return ast.BetweenOperation(args=[to_parser_ast(node.this), to_parser_ast(node.args["low"]),
                                          to_parser_ast(node.args["high"])])
    if isinstance(node, exp.Not):
        return ast.UnaryOperation("not", args=[to_parser_ast(node.this)])
    if isinstance(node, exp.Column):
        return ast.Identifier(node.name)
    key = _metadata_key(node)
    if key is not None:  # k.metadata->>'product': kb_where reads it as metadata key product
        return ast.BinaryOperation("->>", args=[ast.Identifier("metadata"), ast.Constant(key)])
    if isinstance(node, exp.Literal):
        if node.is_string:
            return ast.Constant(node.this)
        number = float(node.this)
        return ast.Constant(int(number) if number.is_integer() and "." not in node.this else number)
    if isinstance(node, exp.Boolean):
        return ast.Constant(bool(node.this))
    if isinstance(node, exp.Null):
        return ast.NullConstant()
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        inner = to_parser_ast(node.this)
        return ast.Constant(-inner.value)  # type: ignore[attr-defined]
    raise SqlError(f"The condition {node.sql()} on a knowledge base cannot be used inside a "
                   "join; use =, !=, <, <=, >, >=, IN or LIKE against values")


def _metadata_key(node: exp.Expression) -> str | None:
    """`metadata->>'key'` / `metadata->'key'` (sqlglot's JSON path of one key, or of the parts
    of a dotted key): the key; None for anything else."""
    if not isinstance(node, (exp.JSONExtractScalar, exp.JSONExtract)) or \
            not isinstance(node.this, exp.Column) or node.this.name.lower() != "metadata":
        return None
    path = node.expression
    if not isinstance(path, exp.JSONPath):
        return None
    steps = path.expressions[1:] if path.expressions and isinstance(path.expressions[0], exp.JSONPathRoot) \
        else path.expressions
    if not steps or not all(isinstance(s, exp.JSONPathKey) and isinstance(s.this, str) for s in steps):
        return None
    return ".".join(s.this for s in steps)


def search_frame(session: SqlSession, project: str, kb_name: str, where_ast: ast.ASTNode | None,
                 limit: int | None, capped: bool = True, record: KbRecord | None = None) -> pd.DataFrame:
    """Run a knowledge-base search and return it as a DataFrame, for joins done elsewhere.

    `where_ast` is the part of a WHERE clause about this knowledge base (the same dialect as
    `SELECT * FROM kb WHERE ...`, see `kb_where`), with column names unqualified; `limit`
    None means none was given: then a search returns the documented 10 rows when `capped`,
    and every row when it feeds a join or an aggregate (a cap there would corrupt it). The
    frame has the columns id, chunk_id, chunk_content, metadata (dict), relevance, distance,
    best first. `record`: the knowledge base when the caller already resolved it.
    """
    import pandas as pd

    if record is None:
        record = session.catalog.knowledge_base(project, kb_name)
    if limit is not None and int(limit) < 0:
        raise SqlError(f"LIMIT must be a whole number >= 0, not {limit}")
    service = session.kbs.service
    rows = run_where(where_ast, lambda request: service.search(record, request), Columns.of(record, service),
                     limit=limit, cap=DEFAULT_LIMIT if capped else max(service.count(record), 1))
    return pd.DataFrame(rows, columns=list(KB_COLUMNS))
