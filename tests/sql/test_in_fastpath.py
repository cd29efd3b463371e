"""Long IN lists: the fast path builds exactly the statement mindsdb_sql_parser builds and
steps aside for anything else; long lists return exactly the matching rows (embedded and
over HTTP); a statement too long for the parser is refused whole with one clear line."""

from __future__ import annotations

from typing import Any

import httpx
import pandas as pd
import pytest
from mindsdb_sql_parser import ast, parse_sql

from kbsql.engine.sql.parse.in_fastpath import MIN_ITEMS, parse_in_lists
from kbsql.engine.sql.parse.parsing import MAX_TOKENS, check_size, token_count
from kbsql.engine.sql.parse.variables import Variables
from kbsql.engine.sql.tables import sqlglot_render
from kbsql.engine.sql.tables.sqlglot_render import walk
from kbsql.interface.errors import InvalidParameter, SqlError

FILLER = ", ".join(str(i) for i in range(1000, 1000 + 500))  # > MIN_ITEMS, > MIN_LENGTH chars

HOSTILE = [
    "'it''s'", r"'back\\slash'", r"'escaped \' quote'", r"'ends with backslash \\'",
    "'''quoted at both ends'''", "'unicode: café ñ 日本語 😀'", "NULL", "null", "'NULL'",
    "-8", "-1.5", "3.25", "- 7", "-0", "'(nested (parentheses) in) a string)'", "'((()))'",
    "'a -- not a comment'", "'b /* not a comment */ c'", "11 /* a real comment */",
    "'x' -- a line comment\n", "'multi\nline\r\nstring'", "TRUE", "false", "'semicolon; inside'",
    "'comma, inside'", "''", "' '", "'double \" quote inside'", "12345678901234567890",
    "0.000001", "'IN (1, 2)'", "'__not_our_mark__'",
]


def items_of(statement: ast.ASTNode) -> list[list[tuple[str, Any]]]:
    return [[(type(i).__name__, getattr(i, "value", None)) for i in node.items]
            for node in walk(statement) if isinstance(node, ast.Tuple)]


def both(text: str) -> tuple[ast.ASTNode | None, ast.ASTNode]:
    return parse_in_lists(text), parse_sql(text)


@pytest.mark.parametrize("item", HOSTILE)
def test_hostile_literals_give_the_full_parsers_items(item: str) -> None:
    text = f"SELECT * FROM t WHERE x IN ({item}, {FILLER}) AND y = 'IN (3, 4)'"
    fast, full = both(text)
    assert fast is not None, "the fast path should handle plain literals"
    assert items_of(fast) == items_of(full)
    assert fast.to_string() == full.to_string()


def test_all_hostile_literals_in_several_lists_of_one_statement() -> None:
    hostile = ", ".join(HOSTILE)
    text = (f"SELECT a, b FROM ds.t AS t WHERE (x IN ({hostile}, {FILLER}) OR y NOT  IN\n({FILLER}, "
            f"{hostile})) AND z in (SELECT id FROM u WHERE w IN ({FILLER})) ORDER BY a LIMIT 5;")
    fast, full = both(text)
    assert fast is not None
    assert items_of(fast) == items_of(full)
    assert fast.to_string() == full.to_string()
    assert len(items_of(fast)) == 3 and all(len(i) >= MIN_ITEMS for i in items_of(fast))


@pytest.mark.parametrize("item", [
    '"double quoted"',   # an identifier or a string: the parser decides
    "'a' || 'b'", "upper('a')", ":param", "?", "- -2", "-'text'", "1e5", "12abc", "1.5.2",
    ".5", "x", "(1)", "(SELECT 1)",
])
def test_anything_else_is_left_to_the_full_parser(item: str) -> None:
    assert parse_in_lists(f"SELECT * FROM t WHERE x IN ({FILLER}, {item})") is None


@pytest.mark.parametrize("text", [
    f"SELECT * FROM t WHERE x IN ({', '.join(str(i) for i in range(MIN_ITEMS - 1))}) /* {'p' * 2000} */",
    f"SELECT 'x IN ({FILLER})'",                                  # inside a string
    f"SELECT * FROM t /* x IN ({FILLER}) */",                     # inside a comment
    f"SELECT * FROM t WHERE x IN ({FILLER}",                      # unclosed list
    f"SELECT * FROM t WHERE x IN ({FILLER}) AND y = 'unterminated",
    f"SELECT * FROM t WHERE x IN ({FILLER}) AND AND",             # a syntax error elsewhere
    f"SELECT * FROM t WHERE x IN ({FILLER}) AND y = '__kbsql_in_0__'",  # our mark in the text
    f"SELECT * FROM t WHERE xIN ({FILLER})",                      # not the keyword
    f"SELECT * FROM t WHERE x IN ({FILLER}); SELECT 1",           # a second statement
    "SELECT * FROM t WHERE x IN (1, 2, 3)",                       # short: the parser is cheap
])
def test_other_texts_are_not_taken(text: str) -> None:
    assert parse_in_lists(text) is None


def test_token_limit_counts_like_the_lexer() -> None:
    # a string, a quoted name, a comment (the lexer reads it too), a dotted name: one each
    assert token_count("SELECT 'a, b; c' , `x y` /* 1 2 3 */ FROM t.u") == 7
    check_size("SELECT " + ", ".join(["1"] * (MAX_TOKENS // 2 - 10)))
    with pytest.raises(SqlError) as raised:
        check_size("SELECT " + ", ".join(["1"] * (MAX_TOKENS // 2 + 10)))
    assert f"the limit is {MAX_TOKENS}" in raised.value.message


IDS = list(range(0, 40_000, 2))  # 20k ids, half of them present in the table


def frame() -> pd.DataFrame:
    return pd.DataFrame({"id": range(25_000), "name": [f"n{i}" for i in range(25_000)]})


def in_list(values: list[Any]) -> str:
    return ", ".join(str(v) if isinstance(v, int) else "'" + v.replace("'", "''") + "'" for v in values)


def test_a_20k_in_list_returns_exactly_the_matching_rows(client) -> None:
    client.register("people", frame())
    got = client.query(f"SELECT id FROM df.people WHERE id IN ({in_list(IDS)}) ORDER BY id")
    assert got["id"].tolist() == [i for i in IDS if i < 25_000]
    names = [f"n{i}" for i in range(1, 3000, 3)] + ["it's", "n5, n6", "nope"]
    got = client.query(f"SELECT id FROM df.people WHERE name NOT IN ({in_list(names)}) "
                       f"AND id < 3000 ORDER BY id")
    assert got["id"].tolist() == [i for i in range(3000) if i % 3 != 1]


def test_a_statement_over_the_token_limit_is_an_sql_error(client) -> None:
    client.register("people", frame())
    items = ", ".join(f"id + {i}" for i in range(MAX_TOKENS // 4 + 10))  # not plain literals
    result = client.sql(f"SELECT id FROM df.people WHERE 1 IN ({items})", raise_on_error=False)
    assert result.type == "error"
    assert result.error_message.startswith("not supported by the local engine: a statement of ")
    assert f"the limit is {MAX_TOKENS}" in result.error_message
    assert "JOIN" in result.error_message and "\n" not in result.error_message
    assert client.query("SELECT count(*) AS n FROM df.people")["n"].tolist() == [25_000]


def test_the_refusal_is_http_200_type_error(server_url: str) -> None:
    items = ", ".join(f"x + {i}" for i in range(MAX_TOKENS // 4 + 10))
    answer = httpx.post(f"{server_url}/api/sql/query", json={"query": f"SELECT 1 WHERE 1 IN ({items})"},
                        timeout=60)
    assert answer.status_code == 200
    body = answer.json()
    assert body["type"] == "error" and "the limit is" in body["error_message"]


def test_long_lists_reach_duckdb_as_the_text_round_trip_writes_them() -> None:
    hostile = ", ".join([*HOSTILE, "'__kbsql_literal_0__'", "'__kbsql_literal_2__'", "-0.0"])
    text = (f"SELECT x IN ({hostile}, {FILLER}) AS f, ({FILLER}) AS g FROM t "
            f"WHERE y = '__kbsql_literal_1__' AND x NOT IN ({FILLER}, {hostile}) "
            f"AND (a, b) IN ((1, 2), (3, 4))")
    direct = sqlglot_render.to_duckdb(sqlglot_render.to_tree(parse_sql(text)))
    assert direct == sqlglot_render.to_duckdb(sqlglot_render.to_tree(parse_sql(text), long_lists=False))
    assert direct.count("'__kbsql_literal_") == 5  # the user's strings, kept as written


def test_a_knowledge_base_query_over_the_limit_is_refused_before_parsing(engine) -> None:
    engine.query("CREATE KNOWLEDGE_BASE docs USING embedding_model = "
                 "{'provider': 'kbsql', 'model_name': 'hash-64'}")
    items = ", ".join(f"id + {i}" for i in range(MAX_TOKENS // 4 + 10))
    with pytest.raises(InvalidParameter) as raised:
        engine.insert_query_into_knowledge_base("mindsdb", "docs", f"SELECT 1 AS id WHERE 1 IN ({items})")
    assert f"the limit is {MAX_TOKENS}" in str(raised.value)
    assert engine.query("SELECT count(*) AS n FROM docs").data == [[0]]


def test_many_from_env_calls_between_strings_are_all_read(monkeypatch) -> None:
    monkeypatch.setenv("MDB_X", "v")
    text = "SELECT " + ", ".join(["from_env('MDB_X'), 'from_env(''MDB_X'')' /* from_env('MDB_X') */"] * 3000)
    expanded = Variables().expand(text)
    assert expanded.count("'v'") == 3000
    assert expanded.count("'from_env(''MDB_X'')'") == 3000  # in a string: kept
    assert expanded.count("/* from_env('MDB_X') */") == 3000  # in a comment: kept


def test_an_unclosed_comment_is_one_quick_syntax_error(tmp_path):
    """Every scanner tries `/* ... */` at each `/*`; with no `*/` each try read to the end of
    the text (20,000 of them took 34 s). The text is refused first, in one line, and a `/*`
    inside a string or a line comment is not a comment."""
    from kbsql.engine import Engine

    with Engine(tmp_path) as engine:
        answer = engine.query("SELECT 1 " + "/* " * 20000).to_json()
        assert answer["type"] == "error"
        assert "comment opened by /* at character 10 is never closed" in answer["error_message"]
        assert engine.query("SELECT '/*' AS a -- /*\n").to_json()["data"] == [["/*"]]
        assert engine.query("SELECT 2 /**/").to_json()["data"] == [[2]]
        assert engine.query("SELECT 3 /*/").to_json()["type"] == "error"


def test_an_operator_the_parser_lacks_is_a_syntax_error_not_a_dropped_comparison(tmp_path):
    """The parser has no ILIKE, GLOB, SIMILAR TO, RLIKE, REGEXP: in a select list it read
    `x ILIKE 'Z%' AS m` as `x AS m` (found by redteam2), answering x where a boolean was asked.
    Now one line naming the operator; the words as names, or inside strings, are untouched."""
    from kbsql.engine import Engine

    with Engine(tmp_path) as engine:
        for text, word in (("SELECT 'Zed' ILIKE 'Z%' AS m", "ILIKE"), ("SELECT 'x' GLOB 'x*'", "GLOB"),
                           ("SELECT 'x' similar  to 'a' AS m", "SIMILAR TO"),
                           ("SELECT 'a' AS x, 'b' REGEXP x AS m", "REGEXP")):
            answer = engine.query(text).to_json()
            assert answer["type"] == "error" and f"{word} is not an operator" in answer["error_message"], text
        assert engine.query("SELECT 1 glob, 2 AS regexp, 'x ilike ''y'' z' AS s").to_json()["data"] == \
            [[1, 2, "x ilike 'y' z"]]
