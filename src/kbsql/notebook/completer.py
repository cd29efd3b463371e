"""Tab completion inside `%%kbsql` cells: knowledge bases, tables, columns, metadata keys.

An IPython matcher (not a frontend extension), so it works wherever the kernel completes:
JupyterLab, Notebook 7, VS Code, the terminal. It only answers in a cell that starts with
`%%kbsql` (or a `%kbsql` line) and then it is the only matcher (Python names make no sense in
SQL). Names come from the current connection through the public client, cached for a few
seconds so a burst of Tab presses costs one round of look-ups.
"""

from __future__ import annotations

import re
import time
from typing import Any

from IPython.core.completer import SimpleCompletion, SimpleMatcherResult, context_matcher

from kbsql.interface.results import KB_COLUMNS

CACHE_SECONDS = 5.0
_NAME_BEFORE = re.compile(r"\b(FROM|JOIN|INTO|KNOWLEDGE_BASE|TABLE|DESCRIBE)\s+$", re.IGNORECASE)
_TABLE_IN_CELL = re.compile(r"\b(?:FROM|JOIN|INTO)\s+([\w.`]+)", re.IGNORECASE)
_TOKEN = re.compile(r"[\w.]*$")


def _word(text: str) -> str:
    """The name being typed at the end of `text` (possibly empty)."""
    found = _TOKEN.search(text)
    return found.group(0) if found else ""


class Names:
    """What the current connection has, fetched lazily and cached per connection."""

    def __init__(self, client: Any):
        self.client = client
        self.fetched = 0.0
        self.kbs: dict[str, list[str]] = {}  # kb -> its metadata columns
        self.databases: list[str] = []
        self._tables: dict[str, list[str]] = {}
        self._columns: dict[str, list[str]] = {}

    def refresh(self) -> None:
        if time.monotonic() - self.fetched < CACHE_SECONDS:
            return
        self.kbs = {kb.name: list(kb.metadata_columns or []) for kb in self.client.knowledge_bases.list()}
        shown = self.client.sql("SHOW DATABASES")
        self.databases = [str(r[0]) for r in shown.data]
        self._tables, self._columns = {}, {}
        self.fetched = time.monotonic()

    def tables(self, database: str) -> list[str]:
        if database not in self._tables:
            try:
                result = self.client.sql(f"SHOW TABLES FROM {database}")
                self._tables[database] = [str(r[0]) for r in result.data]
            except Exception:  # a source that cannot list: no names, no error mid-typing
                self._tables[database] = []
        return self._tables[database]

    def columns(self, table: str) -> list[str]:
        name = table.strip("`")
        short = name.split(".")[-1]
        if short in self.kbs:
            return [*KB_COLUMNS, "content", *self.kbs[short]]
        if name not in self._columns:
            try:
                self._columns[name] = list(self.client.sql(f"SELECT * FROM {table} LIMIT 0").column_names)
            except Exception:
                self._columns[name] = []
        return self._columns[name]


def _in_kbsql_cell(full_text: str) -> bool:
    first = full_text.lstrip().split("\n", 1)[0]
    return first.startswith(("%%kbsql", "%kbsql ")) and not first.startswith("%%kbsql_")


def candidates(names: Names, full_text: str, before_cursor: str) -> list[tuple[str, str]]:
    """(completion, kind) pairs for the word being typed."""
    token = _word(before_cursor)
    head = before_cursor[: len(before_cursor) - len(token)]
    names.refresh()
    if "." in token:  # db.<table>, or kb.<metadata key> is not SQL: tables only
        database, _, _ = token.rpartition(".")
        return [(f"{database}.{t}", "table") for t in names.tables(database)]
    if _NAME_BEFORE.search(head):
        return ([(kb, "knowledge base") for kb in names.kbs]
                + [(f"{db}.", "database") for db in names.databases])
    out: list[tuple[str, str]] = []
    for table in dict.fromkeys(_TABLE_IN_CELL.findall(full_text)):
        metadata = names.kbs.get(table.strip("`").split(".")[-1], [])
        for column in names.columns(table):
            out.append((column, "metadata column" if column in metadata else "column"))
    out += [(kb, "knowledge base") for kb in names.kbs]
    return list(dict.fromkeys(out))


def make_matcher(client_of: Any) -> Any:
    """A matcher reading names from `client_of()` (the magics' current client)."""
    cache: dict[int, Names] = {}

    @context_matcher()
    def kbsql_matcher(context: Any) -> SimpleMatcherResult:
        empty: SimpleMatcherResult = {"completions": [], "suppress": False}
        if not _in_kbsql_cell(context.full_text):
            return empty
        before = _cursor_prefix(context)
        if context.cursor_line == 0 and before.lstrip().startswith("%"):  # the magic line itself
            if not re.search(r"\b(FROM|JOIN|INTO)\s+\S*$", before, re.IGNORECASE):
                return empty
        try:
            client = client_of()
            names = cache.setdefault(id(client), Names(client))
            found = candidates(names, context.full_text, before)
        except Exception:  # never break Tab on a connection problem
            return empty
        token = _word(before)
        matches = [SimpleCompletion(text, type=kind) for text, kind in found if text.startswith(token)]
        return {"completions": matches, "suppress": bool(matches)}

    return kbsql_matcher


def _cursor_prefix(context: Any) -> str:
    """The cursor's line up to the cursor."""
    lines = context.full_text.split("\n")
    line = lines[context.cursor_line] if context.cursor_line < len(lines) else ""
    column = context.cursor_position
    return line[:column]
