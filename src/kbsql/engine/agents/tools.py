"""The agent's tools, run through the engine like any other SQL, inside the agent's scope.

Knowledge-base tools exist when `data.knowledge_bases` is set, table tools when `data.tables`
is set. A tool never raises: failures and refusals become the observation, so the model can
read them and try something else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kbsql.engine.agents import render
from kbsql.engine.agents.scope import Refused, Scope, check_read, split_dotted_names
from kbsql.engine.models.chat.base import ToolSpec
from kbsql.interface.errors import KbsqlError, Unavailable
from kbsql.interface.results import TableResult

if TYPE_CHECKING:
    from kbsql.engine.ports import RunsSql

SAMPLE_ROWS = 3
_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def _one_string(name: str, text: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string", "description": text}},
            "required": [name]}


KB_TOOLS = [
    ToolSpec("kb_list_tool", "Lists the knowledge bases you can query (JSON list of names).",
             _NO_ARGS),
    ToolSpec("kb_info_tool", "Describes one knowledge base: its columns and a few sample rows.",
             _one_string("name", "the knowledge base name, as kb_list_tool gives it")),
    ToolSpec("kb_query_tool",
             "Runs an SQL SELECT on a knowledge base. Semantic search: "
             "SELECT * FROM <kb> WHERE content = '<text>' LIMIT 5. Metadata columns filter with "
             "=, IN, LIKE. Columns: id, chunk_id, chunk_content, metadata, relevance, distance.",
             _one_string("query", "the SQL SELECT text")),
]
TABLE_TOOLS = [
    ToolSpec("sql_db_list_tables", "Lists the tables you can query, as <data_source>.<table>.",
             _NO_ARGS),
    ToolSpec("sql_db_schema", "Columns and sample rows of tables.",
             _one_string("tables", "comma-separated table names from sql_db_list_tables")),
    ToolSpec("sql_db_query", "Runs an SQL SELECT on the tables; name them <data_source>.<table>.",
             _one_string("query", "the SQL SELECT text")),
]


def tool_input(arguments: dict[str, Any]) -> str:
    """The action's `tool_input` string: the single argument's text, or '' when none."""
    values = [v for v in arguments.values() if v not in (None, "")]
    if not values:
        return ""
    if len(values) == 1:
        return str(values[0])
    return json.dumps(arguments)


@dataclass
class Toolbox:
    sql: RunsSql
    scope: Scope

    def specs(self) -> list[ToolSpec]:
        return ((KB_TOOLS if self.scope.has_kb_entries else []) +
                (TABLE_TOOLS if self.scope.has_table_entries else []))

    def run(self, name: str, arguments: dict[str, Any]) -> str:
        """The observation of one tool call (never raises for a bad input)."""
        handler: Callable[[str], str] | None = getattr(self, f"_{name}", None)
        if handler is None or name not in {s.name for s in self.specs()}:
            return f"Error: there is no tool named {name!r}."
        try:
            return handler(tool_input(arguments))
        except Refused as exc:
            return f"Error: {exc}"
        except Unavailable:  # a database is away: the run fails (503), no answer without it
            raise
        except KbsqlError as exc:
            return f"Error: {exc}"

    def _query(self, sql: str) -> Any:
        return self.sql.query(sql, {"db": self.scope.project})

    # knowledge bases -------------------------------------------------------------------
    def _kb_list_tool(self, _: str) -> str:
        return json.dumps([self.scope.kb_label(r) for r in self.scope.knowledge_bases])

    def _kb_info_tool(self, name: str) -> str:
        record = self.scope.kb_by_label(name)
        if record is None:
            raise Refused(f"'{name}' is not a knowledge base this agent is connected to.")
        spec = record.spec
        model = spec.get("embedding_model") or {}
        label = self.scope.kb_label(record)
        lines = [f"Knowledge base {label} (project {record.project_name}).",
                 f"Content columns: {spec.get('content_columns') or ['content']}; metadata columns: "
                 f"{spec.get('metadata_columns') or 'any inserted column'}; "
                 f"id column: {spec.get('id_column') or 'id'}.",
                 f"Embedding model: {model.get('provider', 'default')}/"
                 f"{model.get('model_name', 'default')}. Last updated {record.updated_at}.",
                 "Sample rows:",
                 render.observation(self._query(f"SELECT * FROM {label} LIMIT {SAMPLE_ROWS}"),
                                    record.updated_at)]
        return "\n".join(lines)

    def _kb_query_tool(self, sql: str) -> str:
        sql = split_dotted_names(sql)
        check_read(sql, self.scope.kb_keys(), f"{self.scope.project}.")
        result = self._query(sql)
        stamps = [r.updated_at for r in self.scope.knowledge_bases]
        return render.observation(result, max(stamps) if stamps else None)

    # tables ----------------------------------------------------------------------------
    def _allowed_tables(self) -> set[str]:
        return {t.lower() for t in self.scope.tables}

    def _sql_db_list_tables(self, _: str) -> str:
        return ", ".join(self.scope.tables) if self.scope.tables else "No tables are connected."

    def _sql_db_schema(self, names: str) -> str:
        parts = []
        for name in [n.strip().strip("`") for n in names.split(",") if n.strip()]:
            if name.lower() not in self._allowed_tables():
                parts.append(f"Error: '{name}' is not a table this agent is connected to.")
                continue
            described = self._query(f"DESCRIBE {name}")
            sample = self._query(f"SELECT * FROM {name} LIMIT {SAMPLE_ROWS}")
            schema = (render.observation(described) if isinstance(described, TableResult)
                      else "")
            parts.append(f"Table {name}:\n{schema}\nSample rows:\n{render.observation(sample)}")
        return "\n\n".join(parts) if parts else "Error: name at least one table."

    def _sql_db_query(self, sql: str) -> str:
        sql = split_dotted_names(sql)
        check_read(sql, self._allowed_tables())
        return render.observation(self._query(sql))
