"""The source's own type of each result column that is a source's column, read as it is.

DuckDB reads PostgreSQL's `text`, `character(n)`, `json` and `money` all as VARCHAR, and a
result carries only Arrow types; MindsDB's clients tell them apart (its MySQL door sends
`text` as TEXT, `json` as JSON, `bytea` as BINARY: its postgres handler's `_map_type`).
So a plan notes which output columns are plain references to a data source's column
(`lineage`, at compile time, no I/O), and a run asks that source for its own types
(`own_types`: PostgreSQL's information_schema) and marks those Arrow fields
(`OWN_TYPE_KEY`); the MySQL door maps the mark. A computed column (`upper(t_text)`, a
UNION, an aggregate) has no mark and keeps the mapping of its Arrow type: no guessing.

A `character(n)` column is also padded back to n characters, as PostgreSQL (and MindsDB)
answer it: DuckDB's postgres scanner trims its trailing blanks.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from kbsql.engine.datasources.scans import NativeTable
from kbsql.interface.column_types import OWN_TYPE_KEY


class Sources(Protocol):
    """What `mark` needs of the DuckDB session (duck.DuckSession; not imported: plans.py,
    which duck.py imports, holds this module's types)."""

    def source(self, name: str) -> Any: ...

    def cursor(self) -> AbstractContextManager[Any]: ...


@dataclass(frozen=True)
class SourceItem:
    """A FROM item that reads a data source's table (`item` is the node in the query tree)."""

    item: exp.Expression
    database: str
    scan: NativeTable


@dataclass(frozen=True)
class ColumnLineage:
    """Output column `position` (None: every output column, by name, of a lone `*`; negative:
    counted from the end, for a column after a `*` whose width only the result knows) is
    column `column` of `source`'s table as it is stored."""

    position: int | None
    source: SourceItem
    column: str


def lineage(tree: exp.Expression, items: list[SourceItem]) -> list[ColumnLineage]:
    """The output columns of a top-level SELECT that are plain source columns. Only names
    the top-level FROM resolves are followed: `t.c` where `t` is a source table's alias
    there, or an unqualified `c` when that table is the only FROM item."""
    if not items or not isinstance(tree, exp.Select):
        return []
    from_ = tree.args.get("from_") or tree.args.get("from")
    tops = [from_.this] if isinstance(from_, exp.From) else []
    tops += [join.this for join in tree.args.get("joins") or []]
    by_alias = {}
    for top in tops:
        found = next((i for i in items if i.item is top), None)
        if found is not None:
            by_alias[top.alias_or_name.lower()] = found
    if not by_alias:
        return []
    lone = next(iter(by_alias.values())) if len(tops) == 1 and len(by_alias) == 1 else None
    projections = tree.expressions
    if lone is not None and len(projections) == 1 and isinstance(projections[0], exp.Star):
        return [ColumnLineage(None, lone, "*")]
    stars = [i for i, p in enumerate(projections) if isinstance(p, exp.Star)
             or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))]
    out: list[ColumnLineage] = []
    for index, projection in enumerate(projections):
        column = projection.this if isinstance(projection, exp.Alias) else projection
        if not isinstance(column, exp.Column) or isinstance(column.this, exp.Star):
            continue
        if stars and stars[0] < index < stars[-1]:
            continue  # between two stars: its place in the result is not known here
        # after a star, counted from the end: the star's width is the result's to tell
        position = index - len(projections) if stars and index > stars[-1] else index
        source = by_alias.get(column.table.lower()) if column.table else lone
        if source is not None:
            out.append(ColumnLineage(position, source, column.name))
    return out


def mark(duck: Sources, table: pa.Table, columns: list[ColumnLineage]) -> pa.Table:
    """`table` with its source columns marked with their source's own types (and
    `character(n)` padded to n). Asks each source at most once; a source that cannot tell
    its types (DuckDB, SQLite files, whose types DuckDB reads as declared) marks nothing."""
    own: dict[int, dict[str, tuple[str, int | None]]] = {}
    for lin in columns:
        key = id(lin.source)
        if key not in own:
            own[key] = _own_types(duck, lin.source)
    fields = list(table.schema)
    arrays = list(table.columns)
    changed = False
    for lin in columns:
        types = own[id(lin.source)]
        positions = range(len(fields)) if lin.position is None else [lin.position]
        for position in positions:
            name = fields[position].name if lin.position is None else lin.column
            found = _named(types, name)
            field = fields[position]
            if found is None or (not _is_text(field.type) and found[0] != "bytea"):
                continue
            fields[position] = field.with_metadata({**(field.metadata or {}),
                                                    OWN_TYPE_KEY: found[0].encode()})
            if found[0] in ("character", "bpchar") and found[1] and _is_text(field.type):
                arrays[position] = pc.utf8_rpad(arrays[position], width=found[1], padding=" ")
            changed = True
    if not changed:
        return table
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=table.schema.metadata))


def _own_types(duck: Sources, source: SourceItem) -> dict[str, tuple[str, int | None]]:
    found = duck.source(source.database)
    own_types: Any = getattr(found, "own_types", None)
    if own_types is None:
        return {}
    with duck.cursor() as con:
        return dict(own_types(con, source.scan))


def _named(types: dict[str, tuple[str, int | None]], name: str) -> tuple[str, int | None] | None:
    """The column's own type: by its exact name, else the one column of that name in any
    case (`T_TEXT` names PostgreSQL's t_text, as DuckDB resolves it)."""
    found = types.get(name)
    if found is not None:
        return found
    matches = [kind for column, kind in types.items() if column.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))
