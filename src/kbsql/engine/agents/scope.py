"""What an agent may reach: its `data` entries resolved against the catalog at question time.

Wildcards (`<project>.*`, `<data_source>.*`, and patterns such as `kb_show*` or
`files.show*`, matched as MindsDB's agents match them, case-insensitively) are expanded when a
run starts, so a knowledge base created after the agent is seen. Every SQL text a tool
receives is parsed and each table it names (joins, subqueries and unions included) must be in
scope, or the query is refused.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mindsdb_sql_parser import ast

from kbsql.engine.catalog import AgentRecord, Catalog, KbRecord
from kbsql.engine.sql.parse.parsing import parse
from kbsql.interface.errors import KbsqlError, NotFound, Unavailable
from kbsql.interface.literals import quote_identifier
from kbsql.interface.results import TableResult

if TYPE_CHECKING:
    from kbsql.engine.ports import RunsSql

READ_STATEMENTS = (ast.Select, ast.Union, ast.Intersect, ast.Except)
# DuckDB functions that read files or run other SQL would bypass the table check
FORBIDDEN_FUNCTIONS = ("read_", "glob", "query", "query_table", "sniff_csv", "parquet_scan",
                       "csv_scan", "getenv", "load", "install")


class Refused(Exception):
    """A tool input names something the agent is not connected to (or is not a read)."""


@dataclass
class Scope:
    project: str
    knowledge_bases: list[KbRecord] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)  # "<data_source>.<table>"
    has_kb_entries: bool = False
    has_table_entries: bool = False

    def kb_label(self, record: KbRecord) -> str:
        """How tools name a KB: bare in the agent's project, `project.kb` elsewhere."""
        if record.project_name.lower() == self.project.lower():
            return record.name
        return f"{record.project_name}.{record.name}"

    def kb_by_label(self, label: str) -> KbRecord | None:
        key = label.strip().strip("`").lower()
        for record in self.knowledge_bases:
            if key in (self.kb_label(record).lower(),
                       f"{record.project_name}.{record.name}".lower()):
                return record
        return None

    def kb_keys(self) -> set[str]:
        keys = set()
        for r in self.knowledge_bases:
            keys.add(f"{r.project_name}.{r.name}".lower())
            if r.project_name.lower() == self.project.lower():
                keys.add(r.name.lower())
        return keys


def resolve(catalog: Catalog, sql: RunsSql, record: AgentRecord) -> Scope:
    data = record.data or {}
    kb_entries = [str(e) for e in data.get("knowledge_bases") or []]
    table_entries = [str(e) for e in data.get("tables") or []]
    scope = Scope(record.project_name, has_kb_entries=bool(kb_entries),
                  has_table_entries=bool(table_entries))
    seen: set[int] = set()
    missing = []
    for entry in kb_entries:
        found = _knowledge_bases(catalog, record.project_name, entry)
        if not found and not _pattern(entry):
            missing.append(entry)
        for kb in found:
            if kb.id not in seen:
                seen.add(kb.id)
                scope.knowledge_bases.append(kb)
    if missing:  # named, not a pattern: answering without it would pass for "nothing found"
        raise NotFound(f"Agent {record.name}'s knowledge base{'s' if len(missing) > 1 else ''} "
                       f"{', '.join(missing)} {'do' if len(missing) > 1 else 'does'} not exist: create "
                       "it, or change the agent's data.knowledge_bases", title="Knowledge Base not found")
    unread = [e for e in table_entries if "." in e and not _pattern(e) and not _readable(sql, e)]
    if unread:
        raise NotFound(f"Agent {record.name}'s table{'s' if len(unread) > 1 else ''} {', '.join(unread)} "
                       f"cannot be read (no such table, or its data source failed): create "
                       f"{'them' if len(unread) > 1 else 'it'}, or change the agent's data.tables",
                       title="Table not found")
    for entry in table_entries:
        for table in _tables(sql, entry):
            if table.lower() not in {t.lower() for t in scope.tables}:
                scope.tables.append(table)
    return scope


def _knowledge_bases(catalog: Catalog, project: str, entry: str) -> list[KbRecord]:
    owner, _, name = entry.rpartition(".")
    owner = owner or project
    try:
        if _pattern(name):
            return [kb for kb in catalog.knowledge_bases(owner) if _matches(kb.name, name)]
        found = catalog.find_knowledge_base(owner, name)
    except Unavailable:  # the catalog is away: never an agent quietly without its KBs
        raise
    except KbsqlError:  # the project is gone: the entry connects nothing
        return []
    return [found] if found is not None else []


def _tables(sql: RunsSql, entry: str) -> list[str]:
    source, _, table = entry.partition(".")
    if not table:
        return []
    if not _pattern(table):
        return [entry]
    listed = _listed(sql, f"SHOW TABLES FROM `{source}`") or []
    schema, dot, pattern = table.rpartition(".")
    if not dot or _pattern(schema):
        return [f"{source}.{name}" for name in listed if _matches(name, table)]
    # `pg.public.*`: SHOW TABLES names the default schema's tables bare and others `s2.t`
    split = [n.partition(".") for n in listed]
    names = [name for owner, _, name in split if name and owner.lower() == schema.lower()]
    bare = [n for n in listed if "." not in n]
    if bare and _listed(sql, f"SELECT * FROM `{source}`.`{schema}`.`{bare[0]}` LIMIT 0") is not None:
        names += bare  # the entry's schema is the default one
    return [f"{source}.{schema}.{name}" for name in names if _matches(name, pattern)]


def _readable(sql: RunsSql, entry: str) -> bool:
    """Whether a named table (`source.table`, `source.schema.table`) answers a read, so a
    table that is gone fails the run instead of the agent finding "nothing" in it."""
    quoted = ".".join(quote_identifier(part) for part in entry.split("."))
    return _listed(sql, f"SELECT * FROM {quoted} LIMIT 0") is not None


def _listed(sql: RunsSql, query: str) -> list[str] | None:
    """The first column of a query's rows (a table list), or None when it fails; a database
    that is away fails the run (never an agent quietly without its tables)."""
    try:
        result = sql.query(query)
    except Unavailable:
        raise
    except KbsqlError:
        return None
    if not isinstance(result, TableResult):
        return None
    return [str(row[0]) for row in result.data if row]


def _pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


def _matches(name: str, pattern: str) -> bool:
    """`kb_show*` matched as a glob, case-insensitively; such an entry was taken for the name
    of one knowledge base or table, so the agent was quietly connected to nothing."""
    return fnmatch.fnmatchcase(name.lower(), pattern.lower())


def check_read(sql: str, allowed: set[str], default_prefix: str = "") -> ast.ASTNode:
    """Parse `sql` and refuse it unless it only reads tables in `allowed` (lower-case keys)."""
    try:
        statement = parse(sql)  # bounded, as every statement the engine runs
    except Exception as exc:
        raise Refused(f"The query could not be parsed: {exc}") from exc
    if not isinstance(statement, READ_STATEMENTS):
        raise Refused("Only SELECT queries are allowed.")
    refs = table_refs(statement)
    if not refs:
        raise Refused("The query must read from a connected table or knowledge base.")
    for ref in refs:
        if ref.lower() not in allowed and f"{default_prefix}{ref}".lower() not in allowed:
            raise Refused(f"Access to '{ref}' is not allowed: this agent is not connected to it.")
    return statement


def split_dotted_names(sql: str) -> str:
    """A dotted name a model quoted whole (FROM `mindsdb.kb1`) read as its parts (mindsdb.kb1),
    as MindsDB's agents take it (its executor test test_agent_accept_wrong_quoting); the text
    is returned unchanged when no table name holds a dot (or it does not parse: check_read
    says why)."""
    try:
        statement = parse(sql)
    except Exception:
        return sql
    walker = _TableWalker()
    try:
        walker.walk(statement)
    except Refused:
        return sql
    dotted = [i for i in walker.identifiers if any("." in str(p) for p in i.parts)]
    for item in dotted:
        pieces = [(q, quoted) for p, quoted in zip(item.parts, item.is_quoted, strict=False)
                  for q in str(p).split(".")]
        item.parts, item.is_quoted = [q for q, _ in pieces], [quoted for _, quoted in pieces]
    return statement.to_string() if dotted else sql


def table_refs(statement: ast.ASTNode) -> list[str]:
    """Every table named anywhere in the statement, as dotted names."""
    walker = _TableWalker()
    walker.walk(statement)
    return walker.refs


class _TableWalker:
    """Walks a parsed statement, collecting the tables it reads (FROM items, joins,
    subqueries anywhere) and refusing functions an agent's query may not call."""

    def __init__(self) -> None:
        self.refs: list[str] = []
        self.identifiers: list[ast.Identifier] = []

    def walk(self, node: Any) -> None:
        if isinstance(node, ast.Select):
            self.from_item(node.from_table)
            for key, value in vars(node).items():
                if key != "from_table":
                    self.walk(value)
        elif isinstance(node, ast.Function):
            self.function(node)
        elif isinstance(node, ast.ASTNode):
            self.walk(list(vars(node).values()))
        elif isinstance(node, list | tuple):
            for value in node:
                self.walk(value)

    def from_item(self, item: Any) -> None:
        if item is None:
            return
        if isinstance(item, ast.Identifier):
            self.refs.append(".".join(str(p) for p in item.parts))
            self.identifiers.append(item)
        elif isinstance(item, ast.Join):
            self.from_item(item.left)
            self.from_item(item.right)
            self.walk(item.condition)
        elif isinstance(item, READ_STATEMENTS):
            self.walk(item)
        else:
            raise Refused(f"Unsupported table expression: {item}")

    def function(self, node: ast.Function) -> None:
        if str(node.op).lower().startswith(FORBIDDEN_FUNCTIONS):
            raise Refused(f"The function {node.op} is not allowed.")
        self.walk(node.args)
