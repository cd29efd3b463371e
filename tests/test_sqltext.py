"""The one scanner of SQL text (`interface.sqltext`) that `:name` binding on the client and
`@variable` expansion in the engine share: both leave literals, quoted names and comments
alone, by the reference lexer's rules."""

from __future__ import annotations

import pytest

from kbsql.client.params import bind, placeholders
from kbsql.engine.sql.parse.variables import Variables
from kbsql.interface.sqltext import segments, statements

TEXT = "SELECT 'it''s :a @a', \"q\\\":a\", `n``:a`, :a, @a -- :a @a\n/* :a @a */ FROM t"


def pieces(sql: str) -> list[tuple[str, bool]]:
    return [(sql[a:b], code) for a, b, code in segments(sql)]


def test_spans_cover_the_text_and_mark_what_is_not_code():
    spans = pieces(TEXT)
    assert "".join(text for text, _ in spans) == TEXT
    assert [text for text, code in spans if not code] == [
        "'it''s :a @a'", '"q\\":a"', "`n``:a`", "-- :a @a", "/* :a @a */"]


@pytest.mark.parametrize("sql, rest", [("SELECT 'open", "'open"), ("SELECT 1 /* open", "/* open"),
                                       ("SELECT `open", "`open"), ("SELECT 1 -- end", "-- end")])
def test_an_unterminated_token_runs_to_the_end(sql, rest):
    assert pieces(sql)[-1] == (rest, False)


def test_binding_and_variables_touch_the_same_places():
    bound = bind(TEXT, {"a": 5})
    assert bound == TEXT.replace(", :a, @a", ", 5, @a")
    assert placeholders(TEXT) == ["a"]
    expanded = Variables().expand(TEXT, {"a": 7})
    assert expanded == TEXT.replace(":a, @a --", ":a, 7 --")


def test_a_hash_is_code_as_in_the_lexer():
    # mindsdb_sql_parser refuses '#', so it starts no comment: what follows is still code
    assert pieces("SELECT 1 # :a") == [("SELECT 1 # :a", True)]
    assert bind("SELECT 1 # :a", {"a": 2}) == "SELECT 1 # 2"


@pytest.mark.parametrize("sql, parts", [
    ("SELECT 1", ["SELECT 1"]),
    ("SELECT 1;", ["SELECT 1"]),
    ("SELECT 1; SELECT 2;\n", ["SELECT 1", "SELECT 2"]),
    ("SELECT ';' AS a; SELECT \"b;\"; SELECT `c;d`", ["SELECT ';' AS a", 'SELECT "b;"', "SELECT `c;d`"]),
    ("SELECT 'it\\'s;' AS a; SELECT 'x'';y'", ["SELECT 'it\\'s;' AS a", "SELECT 'x'';y'"]),
    ("SELECT 1 -- a;b\n; SELECT 2", ["SELECT 1 -- a;b", "SELECT 2"]),
    ("/* x; y */ SELECT 1", ["/* x; y */ SELECT 1"]),
    ("-- only a comment\n; SELECT 1; -- trailing", ["SELECT 1"]),
    (";; ;", []),
    # the parser reads a `;` inside parentheses as part of the statement (raw_query)
    ("CREATE JOB j (INSERT INTO t SELECT 1; INSERT INTO t SELECT 2) EVERY hour; SELECT 3",
     ["CREATE JOB j (INSERT INTO t SELECT 1; INSERT INTO t SELECT 2) EVERY hour", "SELECT 3"]),
    ("SELECT * FROM pg (SELECT 1; SELECT ')') ; SELECT 2", ["SELECT * FROM pg (SELECT 1; SELECT ')')",
                                                            "SELECT 2"]),
    ("SELECT 1); SELECT 2", ["SELECT 1)", "SELECT 2"]),
])
def test_statements_split_at_semicolons_that_are_code(sql, parts):
    """A cell's or a job's statements: a `;` in a literal, a quoted name or a comment splits
    nothing (MindsDB's split_sql split a job at one in a comment); a part of only comments is
    no statement."""
    assert statements(sql) == parts
