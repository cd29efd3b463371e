"""`browse(client)`: a small browser of a connection's knowledge bases and agents.

It only calls the public client (list/get and one SELECT per view), so it works the same on
the embedded engine and on a server. Model api keys are shown masked, agents' included.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

import ipywidgets as w

from kbsql.client.params import quote_literal, quote_name
from kbsql.notebook.widgets import html as render
from kbsql.notebook.widgets.snapshot import SnapshotDisplay

SAMPLE_ROWS = 5
SEARCH_ROWS = 10
def quote_text(text: str) -> str:
    """The search text as an SQL literal, by the client's one quoter (`client.params`)."""
    return quote_literal(text)


def sample_query(kb: str, project: str, limit: int = SAMPLE_ROWS) -> str:
    return f"SELECT * FROM {quote_name(project)}.{quote_name(kb)} LIMIT {int(limit)}"


def search_query(kb: str, project: str, text: str, limit: int = SEARCH_ROWS) -> str:
    return (f"SELECT * FROM {quote_name(project)}.{quote_name(kb)} "
            f"WHERE content = {quote_text(text)} LIMIT {int(limit)}")


def _masked(model: Any) -> str:
    return escape(json.dumps(model.masked())) if model is not None else "<i>default</i>"


def kb_info_html(kb: Any) -> str:
    """Columns and models of one knowledge base (api keys masked)."""
    rows = [("content columns", ", ".join(kb.content_columns or ["content"])),
            ("metadata columns", ", ".join(kb.metadata_columns or []) or "(all other columns)"),
            ("id column", kb.id_column or "id"),
            ("storage", f"{kb.vector_database or ''} {kb.vector_database_table or ''}".strip())]
    body = "".join(f"<tr><td style='{render.CELL}'><b>{escape(k)}</b></td>"
                   f"<td style='{render.CELL}'>{escape(str(v))}</td></tr>" for k, v in rows)
    models = (f"<tr><td style='{render.CELL}'><b>embedding model</b></td>"
              f"<td style='{render.CELL}'>{_masked(kb.embedding_model)}</td></tr>"
              f"<tr><td style='{render.CELL}'><b>reranking model</b></td>"
              f"<td style='{render.CELL}'>{_masked(kb.reranking_model)}</td></tr>")
    return (f"<h4 style='margin:4px 0'>{escape(kb.name)}</h4>"
            f"<table style='{render.TABLE}'>{body}{models}</table>")


def agent_info_html(agent: Any) -> str:
    data = agent.data or {}
    return (f"<h4 style='margin:4px 0'>agent {escape(agent.name)}</h4>"
            f"<div><b>model</b> {_masked(agent.model)}</div>"
            f"<div><b>knowledge bases</b> {escape(', '.join(data.get('knowledge_bases') or []))}</div>"
            f"<div><b>tables</b> {escape(', '.join(data.get('tables') or []))}</div>"
            f"{render.code_html(agent.prompt_template or '')}")


def result_html(result: Any) -> str:
    """Rows as a table; metadata without the keys kbsql writes itself (as `%kbsql` shows it)."""
    from kbsql.notebook.table_view import public_metadata

    columns = list(getattr(result, "column_names", []) or [])
    meta = columns.index("metadata") if "metadata" in columns else -1
    rows = [[_cell(public_metadata(v) if i == meta else v) for i, v in enumerate(row)]
            for row in (getattr(result, "data", None) or [])]
    if not columns:
        return "<i>no rows</i>"
    return render.table_html(columns, rows)


def _cell(value: Any) -> Any:
    return json.dumps(value, default=str) if isinstance(value, dict | list) else value


class KnowledgeBaseBrowser(SnapshotDisplay, w.VBox):
    """Knowledge bases and agents on the left; details, sample chunks and search on the right."""

    def __init__(self, client: Any, *, project: str | None = None, **kwargs: Any):
        self.client = client
        self.project = project or client.project
        self.kb_list = w.Select(description="", rows=8, layout=w.Layout(width="220px"))
        self.agent_list = w.Select(description="", rows=5, layout=w.Layout(width="220px"))
        self.details = w.HTML()
        self.sample = w.HTML()
        self.search_box = w.Text(placeholder="search the selected knowledge base…",
                                 layout=w.Layout(flex="1 1 auto", width="auto"))
        self.search_button = w.Button(description="Search", icon="search")
        self.results = w.HTML()
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.kb_list.observe(lambda change: self.show_kb(change["new"]), names="value")
        self.agent_list.observe(lambda change: self.show_agent(change["new"]), names="value")
        self.search_button.on_click(lambda _: self.search(self.search_box.value))
        self.refresh_button.on_click(lambda _: self.refresh())
        left = w.VBox([w.HTML("<b>Knowledge bases</b>"), self.kb_list,
                       w.HTML("<b>Agents</b>"), self.agent_list, self.refresh_button])
        right = w.VBox([self.details, self.sample, w.HBox([self.search_box, self.search_button]),
                        self.results], layout=w.Layout(flex="1 1 auto", min_width="0"))
        super().__init__(children=[w.HTML(f"<b>kbsql</b> project <code>{escape(self.project)}</code>"),
                                   w.HBox([left, right])], **kwargs)
        self.add_class("kbsql-browser")
        self.add_class(render.LIVE_CLASS)
        self.refresh()

    def snapshot_html(self) -> str:
        """The lists (the selected name in bold) and whatever the right side shows now."""
        def listing(title: str, names: Any, selected: str | None) -> str:
            items = "".join(f"<li>{'<b>' + escape(n) + '</b>' if n == selected else escape(n)}</li>"
                            for n in names) or "<li><i>none</i></li>"
            return f"<div><b>{title}</b><ul style='margin:2px 0 6px 0;padding-left:18px'>{items}</ul></div>"

        left = (listing("Knowledge bases", self.kb_list.options, self.kb_list.value)
                + listing("Agents", self.agent_list.options, self.agent_list.value))
        right = "".join(v for v in (self.details.value, self.sample.value, self.results.value) if v)
        return (f'<div class="kbsql-browser-snapshot {render.SNAPSHOT_CLASS}" style="{render.BOX}">'
                f"<b>kbsql</b> project <code>{escape(self.project)}</code>"
                f'<div style="display:flex;gap:12px"><div style="min-width:180px">{left}</div>'
                f'<div style="flex:1 1 auto;min-width:0">{right}</div></div></div>')

    def snapshot_text(self) -> str:
        return (f"kbsql project {self.project}\n"
                f"Knowledge bases: {', '.join(self.kb_list.options) or '(none)'}\n"
                f"Agents: {', '.join(self.agent_list.options) or '(none)'}")

    def refresh(self) -> None:
        self.kb_list.options = [kb.name for kb in self.client.knowledge_bases.list(project=self.project)]
        self.agent_list.options = [a.name for a in self.client.agents.list(project=self.project)]
        if self.kb_list.options and self.kb_list.value is None:
            self.kb_list.value = self.kb_list.options[0]
        self.refresh_snapshot()

    def show_kb(self, name: str | None) -> None:
        if not name:
            return
        try:
            kb = self.client.knowledge_bases.get(name, project=self.project)
            self.details.value = kb_info_html(kb)
            result = self.client.sql(sample_query(name, self.project))
            self.sample.value = f"<b>sample chunks</b>{result_html(result)}"
        except Exception as exc:  # a broken KB must not break the browser
            self.sample.value = f"<span style='color:#d93025'>{escape(str(exc))}</span>"
        self.results.value = ""
        self.refresh_snapshot()

    def show_agent(self, name: str | None) -> None:
        if not name:
            return
        try:
            self.details.value = agent_info_html(self.client.agents.get(name, project=self.project))
            self.sample.value = ""
        except Exception as exc:
            self.details.value = f"<span style='color:#d93025'>{escape(str(exc))}</span>"
        self.refresh_snapshot()

    def search(self, text: str) -> None:
        kb = self.kb_list.value
        if not kb or not text.strip():
            self.results.value = "<i>pick a knowledge base and type a query</i>"
            return
        try:
            result = self.client.sql(search_query(kb, self.project, text.strip()))
            self.results.value = f"<b>results for</b> {escape(text)}{result_html(result)}"
        except Exception as exc:
            self.results.value = f"<span style='color:#d93025'>{escape(str(exc))}</span>"
        self.refresh_snapshot()


def default_client() -> Any:
    """The magics' current connection when `%load_ext kbsql` ran (so the browser shows what
    the notebook's cells use and no second client opens the same data directory), else a
    client on the embedded engine."""
    try:
        from kbsql.notebook import current_client

        return current_client()
    except (ImportError, RuntimeError, AttributeError):
        from kbsql.client import connect

        return connect()


def browse(client: Any = None, *, project: str | None = None) -> KnowledgeBaseBrowser:
    """Open the browser on `client` (default: `default_client()`)."""
    return KnowledgeBaseBrowser(client if client is not None else default_client(), project=project)
