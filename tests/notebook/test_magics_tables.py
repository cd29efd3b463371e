"""Honest tables, embedded and over HTTP: a search cut by the default LIMIT says so, internal
metadata keys and long scores are trimmed for the eye only (the DataFrame keeps everything),
long text opens on a click or with --full, and an error names the connection that answered."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import start_server, stop_server

LONG = "The pump moves water from the lower tank to the roof every night at two. " * 4


@pytest.fixture(scope="module")
def file_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One `kbsql serve` for the file's http cases (~1.2 CPU-s a start); `where` drops the
    knowledge base it made, so each case meets an empty catalog as on a fresh server."""
    proc, url = start_server(tmp_path_factory.mktemp("tables") / "server")
    yield url
    stop_server(proc)


@pytest.fixture(params=["embedded", "http"])
def where(request: pytest.FixtureRequest, cells) -> Iterator[str]:
    if request.param == "http":
        url = request.getfixturevalue("file_server_url")
        kbs = httpx.get(f"{url}/api/projects/mindsdb/knowledge_bases", timeout=30).json()
        assert kbs == [], kbs  # the previous case left nothing
        result, out = cells.run(f"%kbsql_connect {url} -a remote")
        assert result.success, out
        request.node.server_url = url
    cells.ok("%kbsql CREATE KNOWLEDGE_BASE notes USING embedding_model = "
             "{'provider': 'kbsql', 'model_name': 'hash-64'}, metadata_columns = ['room']")
    values = ", ".join(f"({i}, 'note {i} about the pump', 'r{i % 3}')" for i in range(14))
    cells.ok(f"%kbsql INSERT INTO notes (id, content, room) VALUES {values}")
    cells.ok(f"%kbsql INSERT INTO notes (id, content, room) VALUES (99, '{LONG.strip()}', 'attic')")
    yield request.param
    if request.param == "http":
        dropped = httpx.delete(f"{request.node.server_url}/api/projects/mindsdb/knowledge_bases/notes",
                               timeout=30)
        assert dropped.status_code == 200, dropped.text


def test_a_search_cut_by_the_default_limit_says_so(cells, where, request):
    frame = cells.ok("%kbsql SELECT * FROM notes WHERE content = 'pump'")
    assert len(frame) == 10
    note = "A search without LIMIT returns at most 10 rows"
    assert note in frame._repr_html_() and note in repr(frame)
    # an explicit LIMIT, or fewer matches than the default: no note
    assert note not in cells.ok("%kbsql SELECT * FROM notes WHERE content = 'pump' LIMIT 10")._repr_html_()
    few = cells.ok("%kbsql SELECT * FROM notes WHERE content = 'pump' AND room = 'r1'")
    assert len(few) < 10 and note not in few._repr_html_()
    assert note not in cells.ok("%kbsql SELECT * FROM notes")._repr_html_()  # a plain select is whole
    if where == "http":  # the field crosses HTTP next to the contract's own, untouched
        body = httpx.post(f"{request.node.server_url}/api/sql/query",
                          json={"query": "SELECT * FROM notes WHERE content = 'pump'"}).json()
        assert body["default_limit"] == 10
        assert {"type", "column_names", "data", "context"} <= set(body) and body["type"] == "table"
        limited = httpx.post(f"{request.node.server_url}/api/sql/query",
                             json={"query": "SELECT * FROM notes WHERE content = 'pump' LIMIT 3"}).json()
        assert "default_limit" not in limited


def test_internal_metadata_and_long_scores_are_trimmed_for_display_only(cells, where):
    frame = cells.ok("%kbsql SELECT * FROM notes WHERE content = 'pump' LIMIT 3")
    meta = frame.iloc[0]["metadata"]
    assert "chunk_index" in meta and "room" in meta  # the DataFrame keeps everything
    html = frame._repr_html_()
    assert "room" in html and "chunk_index" not in html and "original_row_index" not in html
    exact = frame.iloc[0]["relevance"]
    assert exact != round(exact, 4)  # full precision in the frame...
    assert f"{round(exact, 4)}" in html and repr(float(exact)) not in html  # ...rounded on screen
    shown = cells.ok("%kbsql --internal-metadata SELECT * FROM notes WHERE content = 'pump' LIMIT 3")
    assert "chunk_index" in shown._repr_html_()


def test_long_text_opens_on_a_click_or_with_full(cells, where):
    frame = cells.ok("%kbsql SELECT chunk_content FROM notes WHERE id = '99'")
    text = frame.iloc[0]["chunk_content"]
    assert len(text) > 200
    html = frame._repr_html_()
    assert '<details class="kbsql-cell">' in html and text in html.replace("&#x27;", "'")
    assert text not in repr(frame)  # text form is cut...
    full = cells.ok("%kbsql --full SELECT chunk_content FROM notes WHERE id = '99'")
    assert text in repr(full) and "<details" not in full._repr_html_()  # ...unless --full


def test_an_error_names_the_connection_that_answered(cells, where, request):
    result, out = cells.run("%kbsql SELECT * FROM no_such_kb")
    assert not result.success
    if where == "http":
        assert re.search(rf"SQL error \[remote: {re.escape(request.node.server_url)}\]", out), out
    else:
        assert "SQL error [default: embedded]" in out, out


def test_cells_are_escaped(cells):
    cells.ns["evil"] = "<script>alert(1)</script>" + "x" * 100
    frame = cells.ok("%kbsql SELECT :evil AS \"<b>\", :evil AS short")
    html = frame._repr_html_()
    assert "<script>" not in html and "<b>" not in html and "&lt;script&gt;" in html


def test_a_cell_of_several_statements_runs_them_in_order(cells, where, request):
    """A cell of several statements (a knowledge base made, filled and searched, as a user
    writes a setup cell) ran none: the parser's 4-line "Only a single sql statement is
    expected". They run one by one, as jupysql runs them: each statement without rows prints
    its confirmation, the last one's rows are the cell's result; a `;` inside a literal or a
    comment splits nothing; an error stops the cell at its statement and names it."""
    cells.ns["who"] = "it's; quoted"
    result, out = cells.run("""%%kbsql
INSERT INTO notes (id, content, room) VALUES (200, 'the boiler; pressure 1.5 bar', 'cellar');
-- a comment; with a semicolon
UPDATE notes SET room = 'loft' WHERE id = '200';
SELECT id, chunk_content, :who AS who FROM notes WHERE id = '200'""")
    assert result.success, out
    assert out.count("OK") >= 2, out  # the INSERT's and the UPDATE's confirmations
    frame = result.result
    assert frame.to_dict("records") == [{"id": "200", "chunk_content": "the boiler; pressure 1.5 bar",
                                         "who": "it's; quoted"}]
    assert cells.ok("%kbsql SELECT metadata FROM notes WHERE id = '200'")["metadata"][0]["room"] == "loft"
    result, out = cells.run("%kbsql DELETE FROM notes WHERE id = '200'; SELECT * FROM no_such_kb; "
                            "INSERT INTO notes (id, content) VALUES (201, 'never')")
    assert not result.success
    assert "SQL error in statement 2 of 3 [" in out and "no_such_kb" in out, out
    assert cells.ok("%kbsql SELECT id FROM notes WHERE id IN ('200', '201')").empty  # 1 ran, 3 did not


def test_an_empty_result_says_so(cells, where):
    """No rows read as pandas' "Empty DataFrame / Columns: [...] / Index: []" in text and a
    bare header in HTML; the frame itself stays an empty DataFrame with its columns."""
    frame = cells.ok("%kbsql SELECT id, chunk_content FROM notes WHERE id = 'none'")
    assert frame.empty and list(frame.columns) == ["id", "chunk_content"]
    assert repr(frame) == "No rows (columns: id, chunk_content)."
    assert "No rows." in frame._repr_html_() and "<th>chunk_content</th>" in frame._repr_html_()
