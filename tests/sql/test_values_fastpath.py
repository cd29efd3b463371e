"""The INSERT ... VALUES fast path builds exactly the statement mindsdb_sql_parser builds,
and steps aside (returns None) for anything outside its literal subset."""

from __future__ import annotations

from typing import Any

import pytest
from mindsdb_sql_parser import ast, parse_sql

from kbsql.engine.sql.parse.values_fastpath import MIN_LENGTH, parse_insert_values

HEAD = "INSERT INTO proj.docs (id, content, note) VALUES "
FILLER = ", ".join(f"({i}, 'filler row {i}', NULL)" for i in range(100, 100 + MIN_LENGTH // 20))

HOSTILE_ROWS = [
    "(1, 'it''s', 'O''Brien said ''hi''')",
    r"(2, 'back\\slash', 'C:\\path\\to\\file')",
    r"(3, 'escaped \' quote', 'ends with backslash \\')",
    "(4, '''quoted at both ends''', '''')",
    "(5, 'unicode: café ñ 日本語 😀 \u00a0nbsp', 'ünïcödé')",
    "(6, NULL, null)",
    "(7, 'NULL', 'null as text')",
    "(-8, -1.5, 3.25)",
    "(9, '(nested (parentheses) in) a string)', '((()))')",
    "(10, 'a -- not a comment', 'b /* not a comment */ c')",
    "(11 /* a real comment */, 'after a comment', -- a line comment\n 'next line')",
    "(12, 'multi\nline\r\nstring', '\ttabbed')",
    "(13, TRUE, false)",
    "(14, 'semicolon; inside', 'comma, inside')",
    "(15, '', ' ')",
    "(16, 'double \" quote inside', 'x')",
    "(17, '\\n is two characters here', 'percent % and underscore _')",
    "(18, 12345678901234567890, 0.000001)",
    "(19, - 7, -0)",
]


def values_of(statement: ast.Insert) -> list[list[tuple[str, Any]]]:
    return [[(type(v).__name__, getattr(v, "value", None)) for v in row] for row in statement.values]


def both(text: str) -> tuple[ast.Insert | None, ast.Insert]:
    return parse_insert_values(text), parse_sql(text)


@pytest.mark.parametrize("row", HOSTILE_ROWS)
def test_hostile_rows_give_the_full_parsers_values(row: str) -> None:
    text = f"{HEAD}{row}, {FILLER}"
    fast, full = both(text)
    assert fast is not None, "the fast path should handle plain literals"
    assert values_of(fast) == values_of(full)
    assert fast.to_string() == full.to_string()
    assert [c.name for c in fast.columns] == [c.name for c in full.columns]
    assert fast.table.parts == full.table.parts


def test_all_hostile_rows_in_one_statement_with_trailing_semicolons() -> None:
    text = f"{HEAD}{', '.join(HOSTILE_ROWS)}, {FILLER} ;;"
    fast, full = both(text)
    assert fast is not None
    assert values_of(fast) == values_of(full)
    assert len(fast.values) == len(HOSTILE_ROWS) + FILLER.count("(")


def test_backticked_names_are_left_to_the_real_parser() -> None:
    text = f"INSERT INTO `my kb` (`id`, `content`) VALUES (1, 'x'), {FILLER.replace(', NULL)', ')')}"
    fast, full = both(text)
    assert fast is not None
    assert [c.name for c in fast.columns] == [c.name for c in full.columns]
    assert fast.table.parts == full.table.parts and values_of(fast) == values_of(full)


@pytest.mark.parametrize("row", [
    "(1, \"double quoted\", 'x')",       # an identifier or a string: the parser decides
    "(1, 'a' || 'b', 'x')",              # an expression
    "(1, upper('a'), 'x')",              # a function
    "(1, :param, 'x')",                  # a parameter
    "(1, - -2, 'x')",                    # double minus
    "(1, -'text', 'x')",                 # minus before a string
    "(1, 1e5, 'x')",                     # the lexer reads 1e5 as a name
    "(1, 12abc, 'x')",
    "(1, 1.5.2, 'x')",
    "(1, .5, 'x')",
    "(1, 'x', 'y'",                      # unclosed row
    "(1, 'unterminated, 'x')",
    "(1, 'x' 'y', 'z')",                 # two strings without a comma
    "(1, /* unterminated comment, 'x')",
    "(1, 'x', 'y') ON CONFLICT",          # trailing clause
    "(1, 'x', 'y'); SELECT 1",           # a second statement
    "(1, 'x', 'y')\u00a0",               # a space the lexer does not ignore
])
def test_anything_else_falls_back_to_the_full_parser(row: str) -> None:
    text = f"{HEAD}{FILLER}, {row}"
    assert parse_insert_values(text) is None


@pytest.mark.parametrize("text", [
    f"INSERT INTO docs (id, content) SELECT 1, 'x' /* {'pad ' * 600} */",
    f"SELECT '{'x' * MIN_LENGTH}'",
    f"INSERT INTO docs VALUES {FILLER}",                       # no column list
    f"INSERT INTO docs (id, content) VALUE {FILLER}",
    "INSERT INTO docs (id, content) VALUES (1, 'short')",      # short: the full parser is cheap
])
def test_other_statements_are_not_taken(text: str) -> None:
    assert parse_insert_values(text) is None


def test_insert_through_the_engine_stores_the_hostile_strings(engine) -> None:
    engine.query("CREATE KNOWLEDGE_BASE docs USING embedding_model = "
                 "{'provider': 'kbsql', 'model_name': 'hash-64'}, metadata_columns = ['note']")
    text = f"INSERT INTO docs (id, content, note) VALUES {', '.join(HOSTILE_ROWS[:5])}, {FILLER}"
    assert parse_insert_values(text) is not None
    result = engine.query(text)
    assert result.type == "ok", result
    expected = {str(row[0].value): row[1].value for row in parse_sql(text).values}
    stored = engine.query("SELECT id, chunk_content FROM docs LIMIT 1000").data
    assert {str(i): c for i, c in stored} == expected
