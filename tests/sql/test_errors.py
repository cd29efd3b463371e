"""Every failure is a `type: error` answer a person can act on; no injection."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pandas as pd
import pytest

import kbsql
from kbsql.engine import Engine
from tests.conftest import start_server, stop_server
from tests.datasources.makers import rows


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One `kbsql serve` for the file's four wire checks (~1.2 CPU-s a start): they ask for
    errors and constants; only the did-you-mean test creates objects, and no other test
    reads the catalog, so a fresh server each shows nothing more."""
    proc, url = start_server(tmp_path_factory.mktemp("errors") / "server")
    yield url
    stop_server(proc)


def error(engine: Engine, query: str) -> str:
    result = engine.query(query, {})
    assert result.type == "error", f"expected an error from {query!r}, got {result}"
    return result.error_message


def test_parse_error_shows_the_statement_and_position(engine: Engine) -> None:
    message = error(engine, "SELECT a FROM WHERE b = 1")
    assert "SELECT a FROM WHERE b = 1" in message and "^" in message


@pytest.mark.parametrize(("query", "says"), [
    ("SELECT * FROM t WHERE content = 'refund policy LIMIT 5",
     "the quote ' at character 33 is never closed: 'refund policy LIMIT 5 (a quote inside a text "
     "is written twice, 'it''s', or the value bound as :name)"),
    ("SELECT * FROM t WHERE content = 'it's' LIMIT 3",
     "the quote ' at character 38 is never closed: ' LIMIT 3"),
    ('SELECT "abc FROM t', 'the quote " at character 8 is never closed: "abc FROM t'),
])
def test_a_quote_never_closed_is_named(engine: Engine, query: str, says: str) -> None:
    """A newcomer's missing quote answered "the parser could not read this statement",
    leaving them to find which quote; a statement that parses is never refused for this."""
    message = error(engine, query)
    assert message.startswith(f"Syntax error: {says}"), message
    assert engine.query("SELECT 'it''s' AS a, 'x\\' AS b", {}).type == "table"


def test_a_hash_written_as_a_comment_is_named(engine: Engine) -> None:
    """`SELECT 3 AS z  # why` (a Python habit in a %%kbsql cell) answered "the parser could
    not read this statement"; `#` in a literal or a -- comment is no concern of this."""
    assert error(engine, "SELECT 3 AS z  # a python-style comment\nFROM t").startswith(
        "Syntax error: # at character 16 is not read as a comment here: # a python-style comment")
    assert engine.query("SELECT '# not a comment' AS a -- # nor this", {}).type == "table"
    assert "is not read as a comment" not in error(engine, "SELECT '#' AS a FROM WHERE")


def test_unknown_table_names_table_and_database(connected: Engine) -> None:
    assert "Table 'nope' not found in database 'crm'" in error(connected, "SELECT * FROM crm.nope")
    assert "Table 'nope' not found in database 'shop'" in error(connected, "SELECT * FROM shop.nope")
    assert "Table 'nope' not found in database 'fs'" in error(connected, "SELECT * FROM fs.nope")
    assert "Table 'orders' not found in database 'mindsdb'" in error(connected, "SELECT * FROM orders")
    ghost = error(connected, "SELECT * FROM ghost.t")
    assert "Database 'ghost' not found" in ghost
    assert "not found in the database" in ghost  # MindsDB's words, which its clients match on
    assert "Table 'nope' not found in database 'information_schema'" in error(
        connected, "SELECT * FROM information_schema.nope")


def test_several_statements_are_an_error(connected: Engine) -> None:
    message = error(connected, "SELECT 1; DROP DATABASE crm")
    assert "single" in message
    assert ["crm"] in rows(connected, "SHOW DATABASES")  # nothing ran


def test_identifiers_cannot_inject(connected: Engine) -> None:
    message = error(connected, 'SELECT `id"; DROP TABLE x; --` FROM shop.orders')
    assert 'id"; DROP TABLE x; --' in message  # one (odd) column name, not a statement
    assert "not found in database 'shop'" in error(connected, "SELECT * FROM shop.`orders; DROP TABLE x`")
    assert "Table functions are not allowed" in error(connected, "SELECT * FROM read_csv('/etc/passwd')")
    assert "Table functions are not allowed" in error(
        connected, "SELECT * FROM crm.customers WHERE id IN (SELECT 1 FROM read_text('/etc/hostname'))")
    assert "Table functions are not allowed" in error(
        connected, "SELECT * FROM shop.orders, LATERAL (SELECT * FROM glob('/etc/*')) AS g")
    assert "Table '/etc/passwd' not found" in error(connected, "SELECT * FROM `/etc/passwd`")
    assert rows(connected, "SELECT count(*) FROM shop.orders") == [[4]]


def test_values_cannot_inject(engine: Engine, tmp_path) -> None:
    engine.register_dataframe("users", pd.DataFrame({"name": ["ann", "x' OR '1'='1"]}))
    client = kbsql.Client(engine)
    evil = "nobody' OR '1'='1"
    assert client.sql("SELECT name FROM df.users WHERE name = :n", params={"n": evil}).data == []
    assert rows(engine, "SELECT name FROM df.users WHERE name = 'x\\' OR \\'1\\'=\\'1'") == [
        ["x' OR '1'='1"]]


def test_duckdb_errors_are_sql_errors(connected: Engine) -> None:
    assert "no_such_column" in error(connected, "SELECT no_such_column FROM shop.orders")
    assert "no_such_column" in error(connected, "UPDATE shop.orders SET no_such_column = 'x'")  # a write too


def test_errors_over_http_are_200_with_the_documented_shape(server_url: str) -> None:
    response = httpx.post(f"{server_url}/api/sql/query",
                          json={"query": "SELECT * FROM nowhere.t", "context": {"db": "mindsdb"}})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"type", "error_code", "error_message", "context"}
    assert body["type"] == "error" and "Database 'nowhere' not found" in body["error_message"]
    assert body["context"]["db"] == "mindsdb"


def test_context_db_must_be_a_name(engine: Engine) -> None:
    for bad in (5, ["x"], {"a": 1}, True):
        result = engine.query("SELECT 1", {"db": bad})
        assert result.type == "error" and "context.db" in result.error_message, bad
        assert repr(bad) in result.error_message
        assert result.context["db"] == "mindsdb"  # never echoed back as sent
    assert engine.query("SELECT 1", [1]).type == "error"


def test_unknown_project_in_context_is_named_when_a_statement_needs_it(engine: Engine) -> None:
    engine.query("CREATE KNOWLEDGE_BASE kb_ctx", {})
    answer = engine.query("SELECT 1 AS one", {"db": "other"})  # as the reference: no lookup
    assert answer.type == "table" and answer.context["db"] == "other"
    for query in ("CREATE KNOWLEDGE_BASE k2", "SHOW KNOWLEDGE_BASES", "DROP KNOWLEDGE_BASE kb_ctx",
                  "INSERT INTO kb_ctx (id, content) VALUES (1, 'a')", "DELETE FROM kb_ctx WHERE id = 1",
                  "INSERT INTO other.kb_ctx (id, content) VALUES (1, 'a')"):
        result = engine.query(query, {"db": "other"})
        assert result.type == "error" and "other" in result.error_message, query
        assert "does not exist" in result.error_message or "not found" in result.error_message
    assert [r[0] for r in rows(engine, "SHOW KNOWLEDGE_BASES")] == ["kb_ctx"]  # nothing dropped
    message = error(engine, "INSERT INTO df.t (a) VALUES (1)")
    assert "not supported by the local engine" in message and "knowledge bases only" in message


def test_bad_context_over_http_is_a_200_sql_error(server_url: str) -> None:
    response = httpx.post(f"{server_url}/api/sql/query",
                          json={"query": "SELECT 1", "context": {"db": 5}})
    assert response.status_code == 200
    body = response.json()
    assert body["type"] == "error" and "context.db" in body["error_message"]
    assert body["context"] == {"show_secrets": False, "db": "mindsdb"}


def test_information_schema_knowledge_bases_joins_with_other_tables(engine: Engine) -> None:
    engine.query("CREATE KNOWLEDGE_BASE kb_joined", {})
    got = rows(engine, "SELECT k.NAME, d.TYPE FROM information_schema.knowledge_bases k "
                       "JOIN information_schema.databases d ON d.NAME = k.PROJECT")
    assert got == [["kb_joined", "project"]]


def test_row_values_are_lists_in_rows_and_frames(engine: Engine) -> None:
    result = engine.query("SELECT (1, 2) AS x, row(1, 'a') AS y", {})
    assert result.type == "table", getattr(result, "error_message", result)
    assert result.data == [[[1, 2], [1, "a"]]]
    assert result.frame.to_dict("records") == [{"x": [1, 2], "y": [1, "a"]}]
    nested = engine.query("SELECT list_value(row(1, 2), NULL, row(3, 4)) AS l, "
                          "row(CAST('2020-01-02' AS DATE), row(5, 6)) AS r", {})
    assert nested.data == [[[[1, 2], None, [3, 4]], ["2020-01-02", [5, 6]]]]
    assert nested.frame.iloc[0].tolist() == nested.data[0]


def test_row_values_over_http_are_200_tables(server_url: str) -> None:
    for query in ("SELECT (1, 2) AS x", "SELECT row(1, 2)"):
        response = httpx.post(f"{server_url}/api/sql/query", json={"query": query, "context": {}})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["type"] == "table" and body["data"] == [[[1, 2]]]


def test_a_column_that_cannot_be_converted_is_an_sql_error(engine: Engine, monkeypatch) -> None:
    from kbsql.engine.sql import arrow_results

    def broken(array):
        raise ValueError("cannot convert this")

    monkeypatch.setattr(arrow_results, "_python_values", broken)
    result = engine.query("SELECT (1, 2) AS x", {})
    assert result.type == "error"
    assert "'x'" in result.error_message and "cannot convert" in result.error_message


def test_a_metadata_column_one_edit_away_gets_did_you_mean(engine: Engine) -> None:
    """`WHERE prodcut = 'shop'` listed every column and chunk key but named none, where the
    same typo in an INSERT says "did you mean 'product'?"."""
    engine.query("CREATE KNOWLEDGE_BASE docs USING embedding_model = {'provider': 'kbsql', "
                 "'model_name': 'hash-16'}, metadata_columns = ['product']", {})
    assert error(engine, "SELECT id FROM docs WHERE content = 'a' AND prodcut = 'shop'").startswith(
        "Unknown column 'prodcut' in a knowledge-base condition (did you mean 'product'?): the columns")
    assert "(did you mean 'chunk_id'?)" in error(engine, "SELECT id FROM docs WHERE chunkid = 'x'")
    assert "did you mean" not in error(engine, "SELECT id FROM docs WHERE colour = 'x'")


def test_a_name_one_edit_away_gets_did_you_mean(connected: Engine, server_url: str) -> None:
    """A misspelt knowledge base, agent, table, database or project is named in the error with
    the known name one edit away, in the engine's own message: the same embedded and over
    HTTP. A name further away gets no guess; a REST 404 keeps the reference's exact detail."""
    from kbsql.client import Client

    hint = "(did you mean 'tickets_kb'?)"
    for client in (Client(connected), kbsql.connect(server_url)):
        client.knowledge_bases.create("tickets_kb", embedding_model={"provider": "kbsql",
                                                                     "model_name": "hash-16"})
        client.agents.create("support")

        def said(query: str, client: Client = client) -> str:
            result = client.sql(query, raise_on_error=False)
            assert result.type == "error", query
            return result.error_message

        # a search names a knowledge base: the error says one is missing, with the near name,
        # and nothing about data sources (off-topic there)
        assert said("SELECT * FROM tickest_kb WHERE content = 'late parcel'").endswith(
            f"Knowledge base 'tickest_kb' doesn't exist in project 'mindsdb' {hint}")
        assert said("SELECT * FROM tickets WHERE content = 'late parcel' AND relevance > 0.5").endswith(
            f"Knowledge base 'tickets' doesn't exist in project 'mindsdb' {hint}")  # `_kb` left out
        far = said("SELECT id FROM my_kb WHERE content = 'refund policy' LIMIT 5")
        assert far.endswith("Knowledge base 'my_kb' doesn't exist in project 'mindsdb'; "
                            "SHOW KNOWLEDGE_BASES lists them"), far
        assert "data source" not in far and "did you mean" not in far
        assert said("SELECT * FROM mindsdb.ticket_kb").endswith(hint)
        assert said("DESCRIBE KNOWLEDGE_BASE tickets_kbb").endswith(hint)
        assert said("DROP KNOWLEDGE_BASE tickets_k").endswith(hint)
        assert said("INSERT INTO tickets_bk (id, content) VALUES (1, 'a')") == (
            f"Knowledge base 'tickets_bk' doesn't exist in project 'mindsdb' {hint}")
        assert said("SELECT answer FROM suport WHERE question = 'hi'").endswith("(did you mean 'support'?)")
        assert said("USE mindsbd").endswith("(did you mean 'mindsdb'?)")
        assert "(did you mean 'df'" in said("SELECT * FROM fd.t")  # (or 'fs', a source, embedded)
        assert "did you mean" not in said("SELECT * FROM nothing_like_it")
    assert "did you mean 'orders'" in error(connected, "SELECT * FROM shop.order")  # a source's table
    # REST: the reference's sentence, nothing added
    missing = httpx.get(f"{server_url}/api/projects/mindsdb/knowledge_bases/ticket_kb")
    assert missing.status_code == 404
    assert missing.json()["detail"] == "Knowledge Base with name ticket_kb does not exist"


def test_duckdb_errors_are_one_line(engine: Engine) -> None:
    """functions/custom_functions.mdx calls an uploaded Python function (MindsDB's BYOF), and
    standard-functions.mdx's MySQL functions reach DuckDB in forms it lacks: DuckDB's answers
    came in several lines ('Did you mean "add"?' on a line of its own, a list of candidate
    signatures, a 'LINE 1: ... ^' pointer into the SQL rendered for DuckDB). Each is one
    line: the first, with its 'Did you mean' kept in parentheses."""
    engine.register_dataframe("rentals", pd.DataFrame({"sqft": [917]}))
    message = error(engine, "SELECT add_integers(sqft, 1) AS added_one, sqft FROM df.rentals LIMIT 1")
    assert message == ('Catalog Error: Scalar Function with name add_integers does not exist! '
                       '(Did you mean "add"?)')
    message = error(engine, "SELECT contains(sqft, 'x') FROM df.rentals")
    assert message.startswith("Binder Error: No function matches the given name and argument types")
    assert "\n" not in message and "Candidate" not in message


@pytest.mark.parametrize("query", ["SELECT 1 AS a  # it's one", "# the user's orders\nSELECT 1 AS a",
                                   "SELECT 'x' AS a  # the user's"])
def test_an_apostrophe_in_a_hash_comment_names_the_hash(engine: Engine, query: str) -> None:
    """The quotes were read before the #: a Python-style comment holding an apostrophe (a
    `# the user's orders` line over the SQL) was told "the quote ' ... is never closed" and
    to write 'it''s', a fix for a text the statement does not have. A quote closed early
    inside a text ('it's # x') is still the quote's error."""
    assert "is not read as a comment here: # " in error(engine, query)
    quote = error(engine, "SELECT * FROM t WHERE c = 'it's # x'")
    assert "the quote ' at character 36 is never closed" in quote


def test_a_semicolon_left_out_between_two_statements_is_named(engine: Engine) -> None:
    """A cell of two statements without the `;` between them (a newcomer's CREATE then INSERT)
    got the parser's 'Syntax error, unknown input' with a caret under the second; a line that
    opens a statement after lines that parse alone is now named. A statement continued on the
    next line (UNION, INSERT ... SELECT, a text or comment holding SELECT) is not."""
    assert error(engine, "SELECT 1 AS a\nSELECT 2 AS b") == (
        "Syntax error: a ; is missing before line 2 (SELECT 2 AS b): the lines above it are a whole "
        "statement")
    assert error(engine, "CREATE TABLE files.x (a INT)\n  insert INTO files.x VALUES (1)").startswith(
        "Syntax error: a ; is missing before line 2 (insert INTO files.x VALUES (1))")
    assert engine.query("SELECT 1 AS a\nUNION\nSELECT 2 AS a", {}).type == "table"
    for query in ("SELECT 1 AS a\n  FROM\nSELECT", "SELECT 'a\nselect b' AS x FROM", "SELEC 1\nSELECT 2",
                  "SELECT 1 AS a\n-- SELECT 2\nFROM"):
        assert "is missing before line" not in error(engine, query), query
