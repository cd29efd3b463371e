"""HTML for a `StreamState`: the pieces the live panel shows and the static snapshot.

The same functions feed the live widget and the snapshot saved in the notebook, so a reopened
notebook (or one rendered on GitHub / by nbconvert) shows what the user saw. Everything that
came from the agent (tool inputs, observations, answers, errors) is untrusted: it is escaped,
or rendered by markdown-it with raw HTML disabled. Styles are inline (GitHub strips <style>);
steps use <details> so they stay collapsible without any JavaScript.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape

from kbsql.notebook.table_view import display_cells
from kbsql.notebook.widgets.state import DONE, FAILED, RUNNING, STOPPED, Step, StreamState, parse_observation

MAX_TABLE_ROWS = 10
"""Observation tables longer than this are collapsed behind a `<details>` with the row count."""
MAX_CELL_CHARS = 300
SQL_TOOLS = ("kb_query_tool", "sql_db_query")

STATUS_COLOURS = {RUNNING: "#1a73e8", DONE: "#188038", FAILED: "#d93025", STOPPED: "#e37400"}
BOX = ("font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;"
       "border:1px solid #d0d7de;border-radius:6px;padding:8px 10px;margin:4px 0;max-width:100%;")
PRE = ("margin:4px 0;padding:6px 8px;background:#f6f8fa;border-radius:4px;overflow-x:auto;"
       "white-space:pre-wrap;font-size:12px;")
TABLE = "border-collapse:collapse;font-size:12px;margin:4px 0;"
CELL = ("border:1px solid #d0d7de;padding:2px 6px;text-align:left;vertical-align:top;"
        "max-width:28em;overflow-wrap:break-word;")

SNAPSHOT_CLASS = "kbsql-snapshot"
LIVE_CLASS = "kbsql-live"
HIDE_REDUNDANT_CSS = (
    # In JupyterLab / Notebook 7 a live panel and its snapshot sit side by side in one output
    # area: hide the snapshot while the live panel renders, and hide a widget output that is
    # not a live panel (after reopening: "Loading widget..." / "model not found"; widget
    # outputs are the ones without a data-mime-type) when its snapshot follows.
    f".jp-OutputArea-child:has(.{LIVE_CLASS}) ~ .jp-OutputArea-child:has(.{SNAPSHOT_CLASS})"
    "{display:none}"
    f".jp-OutputArea-child:not(:has(.{LIVE_CLASS})):has(> .jp-OutputArea-output:not([data-mime-type]))"
    f":has(+ .jp-OutputArea-child .{SNAPSHOT_CLASS}){{display:none}}"
)


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    # html=False: raw HTML in an answer is escaped, never injected; link validation drops
    # javascript: URLs.
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown_html(text: str) -> str:
    """The agent's answer as HTML (untrusted Markdown, raw HTML escaped)."""
    return _markdown().render(text or "")


def sql_html(sql: str) -> str:
    """SQL shown as highlighted code with inline styles (works without a stylesheet)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import SqlLexer

    formatter = HtmlFormatter(noclasses=True, nowrap=True, style="default")
    return f'<pre style="{PRE}">{highlight(sql, SqlLexer(), formatter)}</pre>'


def code_html(text: str) -> str:
    return f'<pre style="{PRE}">{escape(text)}</pre>'


def _cell(value: object) -> str:
    text = str(value)
    if len(text) > MAX_CELL_CHARS:
        text = text[:MAX_CELL_CHARS] + "…"
    return f'<td style="{CELL}">{escape(text)}</td>'


def table_html(columns: list[str], rows: list[list[object]], *, max_rows: int = MAX_TABLE_ROWS) -> str:
    """A small table; longer ones show the first rows and collapse the rest with a row count."""
    head = "".join(f'<th style="{CELL}background:#f6f8fa;">{escape(c)}</th>' for c in columns)

    def body(part: list[list[object]]) -> str:
        return "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in part)

    def table(part: list[list[object]]) -> str:
        return (f'<div style="overflow-x:auto"><table style="{TABLE}"><thead><tr>{head}</tr></thead>'
                f"<tbody>{body(part)}</tbody></table></div>")

    count = f'<span class="kbsql-rowcount">{len(rows)} row{"s" if len(rows) != 1 else ""}</span>'
    if len(rows) <= max_rows:
        return table(rows) + f'<div style="color:#57606a;font-size:11px">{count}</div>'
    return (table(rows[:max_rows])
            + f'<details><summary style="cursor:pointer;color:#57606a;font-size:11px">{count} '
              f"(showing {max_rows}; expand for all)</summary>{table(rows)}</details>")


def observation_html(observation: str | None) -> str:
    if observation is None:
        return '<div style="color:#57606a;font-style:italic">running…</div>'
    parsed = parse_observation(observation)
    if parsed is None:
        return code_html(observation)
    pre = code_html(parsed.preamble) if parsed.preamble else ""
    return pre + table_html(parsed.columns, display_cells(parsed.columns, parsed.rows))


TITLE_SEP = " · "
TITLE_INPUT_CHARS = 80


def step_title(index: int, step: Step) -> str:
    """Plain-text title of a step (also the accordion title in the live panel): number, tool,
    done mark and the start of its input, so a collapsed step still says what it did."""
    mark = "✓" if step.finished else "…"
    title = f"{index + 1}. {step.tool} {mark}"
    preview = " ".join(step.tool_input.split())
    if preview:
        if len(preview) > TITLE_INPUT_CHARS:
            preview = preview[:TITLE_INPUT_CHARS - 1] + "…"
        title += TITLE_SEP + preview
    return title


def step_body_html(step: Step) -> str:
    """Tool input (SQL highlighted) and the observation under it."""
    if step.tool in SQL_TOOLS and step.tool_input.strip():
        tool_input = sql_html(step.tool_input)
    elif step.tool_input.strip():
        tool_input = code_html(step.tool_input)
    else:
        tool_input = '<div style="color:#57606a;font-style:italic">(no input)</div>'
    return (f'<div class="kbsql-step" data-tool="{escape(step.tool)}">'
            f'<div style="font-weight:600;font-size:11px;color:#57606a">input</div>{tool_input}'
            f'<div style="font-weight:600;font-size:11px;color:#57606a">observation</div>'
            f"{observation_html(step.observation)}</div>")


def step_html(index: int, step: Step, *, open_: bool = False) -> str:
    return (f'<details{" open" if open_ else ""} style="margin:4px 0;border-left:3px solid #d0d7de;'
            f'padding-left:8px"><summary style="cursor:pointer;font-weight:600">'
            f"{escape(step_title(index, step))}</summary>{step_body_html(step)}</details>")


def header_html(state: StreamState) -> str:
    agent = f'<span style="color:#57606a">agent</span> <b>{escape(state.agent)}</b> ' if state.agent else ""
    trace = (f'<span style="color:#57606a;font-size:11px" class="kbsql-trace">trace {escape(state.trace_id)}'
             "</span>") if state.trace_id else ""
    return (f'<div class="kbsql-header">{agent}{trace}'
            f'<div style="font-size:14px;margin-top:2px"><span style="color:#57606a">Q:</span> '
            f"{escape(state.question)}</div></div>")


NOTE_CHARS = 300


def _note(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= NOTE_CHARS else one_line[:NOTE_CHARS - 1] + "…"


def notes_html(state: StreamState) -> str:
    """A server's progress notes, one grey line each (MindsDB plans before it answers)."""
    if not state.notes:
        return ""
    lines = "".join(f"<div>· {escape(_note(n))}</div>" for n in state.notes)
    return f'<div class="kbsql-notes" style="color:#57606a;font-size:12px;margin:4px 0">{lines}</div>'


def answer_html(state: StreamState) -> str:
    if state.answer is None:
        return ""
    return (f'<div class="kbsql-answer" style="border-top:1px solid #d0d7de;margin-top:6px;padding-top:4px">'
            f"{markdown_html(state.answer)}</div>")


def status_html(state: StreamState) -> str:
    colour = STATUS_COLOURS.get(state.status, "#57606a")
    return (f'<div class="kbsql-status" data-status="{escape(state.status)}" '
            f'style="color:{colour};font-size:12px;margin-top:4px">● {escape(state.status_text())}</div>')


def render_html(state: StreamState, *, snapshot: bool = True) -> str:
    """The whole panel as one self-contained HTML fragment (the saved snapshot)."""
    steps = "".join(step_html(i, s) for i, s in enumerate(state.steps))
    css = f"<style>{HIDE_REDUNDANT_CSS}</style>" if snapshot else ""
    cls = f"kbsql-panel {SNAPSHOT_CLASS}" if snapshot else "kbsql-panel"
    return (f'{css}<div class="{cls}" style="{BOX}">{header_html(state)}{notes_html(state)}'
            f'<div class="kbsql-steps">{steps}</div>{answer_html(state)}{status_html(state)}</div>')


def render_text(state: StreamState) -> str:
    """Plain-text rendering for terminals and `text/plain` fallbacks."""
    lines = [f"Q: {state.question}" + (f"  [agent {state.agent}]" if state.agent else "")]
    lines += [f"  · {_note(n)}" for n in state.notes]
    for i, step in enumerate(state.steps):
        lines.append(f"  {i + 1}. {step.tool}: {step.tool_input.strip()[:200]}")
        if step.observation is not None:
            parsed = parse_observation(step.observation)
            lines.append(f"     -> {parsed.row_count} rows" if parsed is not None
                         else f"     -> {step.observation.strip()[:200]}")
    if state.answer is not None:
        lines.append(f"A: {state.answer}")
    lines.append(f"[{state.status_text()}]")
    return "\n".join(lines)
