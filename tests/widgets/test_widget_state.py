"""The stream model and its HTML: state after each chunk, tables, escaping, status."""

from __future__ import annotations

from kbsql.interface import stream as s
from kbsql.notebook.widgets import StreamState, parse_observation, render_html, render_text
from kbsql.notebook.widgets import html as render
from tests.widgets.streams import KB_OBSERVATION, KB_SQL, TRACE, scripted_chunks


def test_state_after_each_chunk(chunks):
    state = StreamState(agent="support")
    assert state.status == "waiting"
    seen = []
    for chunk in chunks:
        kind = state.feed(chunk)
        seen.append((kind, state.status, [(st.tool, st.finished) for st in state.steps], state.answer))
    assert seen == [
        ("start", "running", [], None),
        ("actions", "running", [("kb_list_tool", False)], None),
        ("steps", "running", [("kb_list_tool", True)], None),
        ("actions", "running", [("kb_list_tool", True), ("kb_query_tool", False)], None),
        ("steps", "running", [("kb_list_tool", True), ("kb_query_tool", True)], None),
        ("output", "running", [("kb_list_tool", True), ("kb_query_tool", True)], "Refunds: **30 days**."),
        ("end", "done", [("kb_list_tool", True), ("kb_query_tool", True)], "Refunds: **30 days**."),
    ]
    assert state.question == "What is the refund policy?"
    assert state.trace_id == TRACE
    assert state.steps[1].tool_input == KB_SQL
    assert state.steps[1].observation == KB_OBSERVATION
    assert state.steps[0].log == "I should list the knowledge bases"
    assert state.status_text().startswith("done in ")


def test_error_chunk_shows_failed_and_later_chunks_are_ignored():
    state = StreamState()
    for chunk in scripted_chunks(error="model unreachable: connection refused"):
        state.feed(chunk)
    assert state.status == "failed"
    assert state.error == "model unreachable: connection refused"
    assert state.answer is None
    assert "failed" in state.status_text() and "connection refused" in state.status_text()
    html = render_html(state)
    assert 'data-status="failed"' in html and "connection refused" in html


def test_steps_chunk_without_announced_action_gets_its_own_step():
    state = StreamState()
    act = s.action("sql_db_query", "SELECT 1", "")
    state.feed(s.steps_chunk(act, "Output columns: 'x'\nx\n1\n", "t"))
    steps = [(st.tool, st.tool_input, st.finished) for st in state.steps]
    assert steps == [("sql_db_query", "SELECT 1", True)]


def test_parallel_actions_are_matched_by_input():
    state = StreamState()
    a1, a2 = s.action("kb_query_tool", "SELECT 1"), s.action("kb_query_tool", "SELECT 2")
    state.feed(s.actions_chunk([a1, a2], "t"))
    state.feed(s.steps_chunk(a2, "two", "t"))
    assert [st.observation for st in state.steps] == [None, "two"]
    state.feed(s.steps_chunk(a1, "one", "t"))
    assert [st.observation for st in state.steps] == ["one", "two"]


def test_stop_freezes_the_state():
    state = StreamState()
    chunks = scripted_chunks()
    state.feed(chunks[0])
    state.feed(chunks[1])
    state.stop()
    for chunk in chunks[2:]:
        state.feed(chunk)
    assert state.status == "stopped" and state.answer is None
    assert state.steps[0].observation is None


def test_observation_csv_parsed_as_table():
    table = parse_observation(KB_OBSERVATION)
    assert table is not None
    assert table.columns == ["id", "chunk_id", "chunk_content", "metadata", "relevance", "distance"]
    assert table.row_count == 2
    assert table.rows[1][2] == "Shipping, handling <b>fees</b>"
    assert parse_observation('["docs"]') is None
    assert parse_observation("Output columns: 'a'\n") is not None


def test_an_observation_with_a_carriage_return_in_a_cell_shows_as_a_table():
    """A column named by its expression (`round(relevance, 2)`: a comma, so the declared
    names are not the header's) and a chunk whose second line holds a lone carriage return:
    the parser read that line alone as a header candidate, csv refused it and the %agent
    panel failed with "new-line character seen in unquoted field"."""
    from kbsql.engine.agents.render import table_text

    text = table_text(["round(relevance, 2)", "chunk_content"], [["0.5", "first line\nsecond\rline"]])
    table = parse_observation(text)
    assert table is not None and table.columns == ["round(relevance, 2)", "chunk_content"]
    assert table.rows == [["0.5", "first line\nsecond\rline"]]
    assert "1 row" in render.observation_html(text)


def test_long_observation_is_collapsed_with_row_count():
    rows = "\n".join(f"{i},text {i}" for i in range(45))
    html = render.observation_html(f"Output columns: 'id', 'body'\nid,body\n{rows}\n")
    assert "45 rows" in html
    assert "<details>" in html and "showing 10" in html
    short = render.observation_html("Output columns: 'id'\nid\n1\n2\n")
    assert "2 rows" in short and "<details>" not in short


def test_observation_metadata_and_scores_are_trimmed_for_the_eye():
    """A search step's table showed every chunk's internal keys (`_chunk_index`, ...,
    `_updated_at`) and 16-digit relevances: the panel now trims them as a %%kbsql table does
    (what the model read is unchanged)."""
    meta = '"{""product"": ""pump"", ""_chunk_index"": 0, ""chunk_index"": 0, ""_updated_at"": ""2026""}"'
    text = ("Output columns: 'id', 'chunk_content', 'metadata', 'relevance', 'distance'\n"
            f"id,chunk_content,metadata,relevance,distance\n1,Pumps.,{meta},0.638167250767744,0.5669873356819153\n"
            "2,Fans.,not json,n/a,\n")
    html = render.observation_html(text)
    assert "{&quot;product&quot;: &quot;pump&quot;}" in html and "_chunk_index" not in html, html
    assert ">0.6382<" in html and ">0.5670<" in html and "0.638167" not in html
    assert ">not json<" in html and ">n/a<" in html  # a cell that is not JSON or a number stays


def test_untrusted_text_is_escaped(chunks):
    evil = "<img src=x onerror=alert(1)> [click](javascript:alert(2)) **bold**"
    state = StreamState(question="<script>q()</script>")
    for chunk in scripted_chunks(answer=evil):
        state.feed(chunk)
    state.steps[0].observation = "<iframe src=//evil>"
    html = render_html(state)
    assert "<img" not in html and "<iframe" not in html and "<script>q()" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert 'href="javascript:' not in html
    assert "<strong>bold</strong>" in html  # Markdown still works
    assert "&lt;b&gt;fees&lt;/b&gt;" in html  # a table cell from the CSV observation


def test_snapshot_has_steps_sql_highlighting_answer_and_status(chunks):
    state = StreamState(agent="support")
    for chunk in chunks:
        state.feed(chunk)
    html = render_html(state)
    assert html.count("<details") >= 2
    assert 'data-tool="kb_list_tool"' in html and 'data-tool="kb_query_tool"' in html
    assert "<span style=" in html and "SELECT</span>" in html  # Pygments inline highlighting
    assert "<strong>30 days</strong>" in html
    assert "trace trace-123" in html and 'data-status="done"' in html
    text = render_text(state)
    assert "kb_query_tool" in text and "2 rows" in text and "A: Refunds" in text


def test_observation_with_a_summary_line_before_the_csv():
    rows = "\n".join(f"{i}" for i in range(30))
    text = f"Output columns: 'id'\nShowing the first 30 of 120 rows\nid\n{rows}\n"
    table = parse_observation(text)
    assert table is not None and table.columns == ["id"] and table.row_count == 30
    assert table.preamble == "Showing the first 30 of 120 rows"
    html = render.observation_html(text)
    assert "Showing the first 30 of 120 rows" in html and "30 rows" in html


def test_durations_are_honest(monkeypatch):
    """An answer that took 180 ms says so (it said "done in 0.0 s"), and the time counts from
    the question, not from the first chunk: a model that thinks before answering is part of it."""
    import kbsql.notebook.widgets.state as state_module
    from kbsql.notebook.progress_bar import duration

    assert [duration(x) for x in (0.0001, 0.18, 0.9994, 1.0, 2.44, 12.3, 185)] == [
        "<1 ms", "180 ms", "999 ms", "1.0 s", "2.4 s", "12 s", "3 min 05 s"]
    now = [100.0]
    monkeypatch.setattr(state_module.time, "monotonic", lambda: now[0])
    state = StreamState(question="q")  # asked at 100.0
    now[0] = 102.5  # the first chunk comes 2.5 s later
    for chunk in scripted_chunks():
        state.feed(chunk)
        now[0] += 0.01
    assert state.status_text() == "done in 2.6 s"
    quick = StreamState(question="q")
    now[0] += 0.18
    for chunk in scripted_chunks():
        state_module.StreamState.feed(quick, chunk)
    assert quick.status_text() == "done in 180 ms"
