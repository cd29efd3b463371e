"""A SELECT whose shape was met before is built from its kept statement, not by sly: it must
be exactly the statement mindsdb_sql_parser builds, whatever its literals hold, and anything
the cache cannot put back goes to the full parser."""

from __future__ import annotations

import pytest
from mindsdb_sql_parser import ast, parse_sql

from kbsql.engine.sql.parse import shape_cache
from kbsql.engine.sql.parse.parsing import parse
from kbsql.engine.sql.parse.shape_cache import ShapeCache

HOSTILE = [
    "'it''s'", r"'back\\slash'", r"'escaped \' quote'", r"'ends with backslash \\'",
    "'''quoted at both ends'''", "'unicode: café ñ 日本語 😀'", "'NULL'", "''", "' '",
    "'a -- not a comment'", "'b /* not a comment */ c'", "'multi\nline\r\nstring'",
    "'semicolon; inside'", "'double \" quote inside'", "'__not_our_mark__'", "'IN (1, 2)'",
    "'`backquoted`'", "'what''s a \"for\" loop? -- /*'",
]


def same(a: ast.ASTNode, b: ast.ASTNode) -> bool:
    return a.to_tree() == b.to_tree() and a.to_string() == b.to_string()


def thrice(cache: ShapeCache, texts: list[str]) -> list[ast.ASTNode]:
    """Each text through the cache; the shape is the same for all of them."""
    return [cache.parse(t) for t in texts]


@pytest.mark.parametrize("literal", HOSTILE)
def test_a_repeated_shape_gives_the_full_parsers_statement(literal: str) -> None:
    cache = ShapeCache()
    shape = "SELECT id, 'tag' AS t FROM kb WHERE content = {} AND source != {} LIMIT 3"
    texts = [shape.format("'first question'", "'a'"), shape.format(literal, "'b'"),
             shape.format("'x'", literal), shape.format(literal, literal)]
    for got, text in zip(thrice(cache, texts), texts, strict=True):
        assert same(got, parse_sql(text)), text
    kept = cache._shapes[shape_cache._split(texts[0])[0]]
    if "\\" in literal:  # a text with a backslash goes to the full parser: met once, not kept
        assert kept is shape_cache._SEEN
    else:
        assert isinstance(kept[0], ast.Select)


@pytest.mark.parametrize("text", [
    "SELECT * FROM kb WHERE content = 'q' AND d > DATE '2020-01-01' ORDER BY id",
    "SELECT a, count(*) FROM (SELECT a FROM t WHERE b LIKE 'x%') AS s GROUP BY a HAVING a <> 'z'",
    "WITH w AS (SELECT 'a' AS c) SELECT * FROM w WHERE c IN ('a', 'b', 'it''s')",
    "SELECT * FROM kb WHERE content = 'q' -- a comment with a 'quote'\nLIMIT 2",
    "SELECT * FROM \"it's\" WHERE `o'k` = 'v' /* 'x' */",
    "SELECT INTERVAL '1' DAY, x 'alias' FROM t WHERE y = 'q'",
    "SELECT @'var', 'v' FROM t",
    "SELECT * FROM kb WHERE content = '__kbsql_lit_0__'",
    "SELECT 1 FROM t WHERE a = -1 AND b = 2.5 AND c IS NULL AND d = TRUE",
    "SELECT CAST(a AS INTEGER), CAST('1' AS DATE) FROM t WHERE b = 'q'",
    "SELECT count(*) OVER (PARTITION BY a ORDER BY b) FROM t WHERE c = 'q'",
    "SELECT metadata->>'k' FROM kb WHERE content = 'q' AND x BETWEEN 'a' AND 'b'",
    "SELECT * FROM t1 JOIN t2 ON t1.a = t2.a WHERE t1.b = 'q' UNION SELECT * FROM t3 WHERE c = 'v'",
])
def test_every_shape_parses_as_the_full_parser_says(text: str) -> None:
    cache = ShapeCache()
    for _ in range(3):
        assert same(cache.parse(text), parse_sql(text))
    other = text.replace("'q'", "'another, longer question?'").replace("'v'", "'w''s'")
    assert same(cache.parse(other), parse_sql(other))


def test_literals_used_other_than_as_constants_are_not_reused() -> None:
    cache = ShapeCache()
    text = "SELECT x 'alias' FROM t WHERE y = 'q'"
    for _ in range(3):
        cache.parse(text)
    assert list(cache._shapes.values()) == [None]  # the alias holds a mark: the full parser each time


def test_the_statement_is_a_copy_and_errors_are_the_parsers() -> None:
    cache = ShapeCache()
    text = "SELECT id FROM kb WHERE content = 'one' LIMIT 10"
    first = [cache.parse(text) for _ in range(3)][-1]
    first.where.args[1].value = "changed by a caller"
    first.limit = None
    assert same(cache.parse(text), parse_sql(text))
    bad = "SELECT id FROM kb WHERE content = 'one' LIMIT 10 10"
    with pytest.raises(Exception) as full:
        parse_sql(bad)
    for _ in range(3):
        with pytest.raises(type(full.value)) as cached:
            cache.parse(bad)
        assert str(cached.value) == str(full.value)


def test_the_engine_parser_uses_it() -> None:
    """parsing.parse (what every statement goes through) answers a repeated search shape from
    the cache, and its statement is the full parser's."""
    texts = [f"SELECT id, distance FROM mindsdb.kb WHERE content = 'question {i}''s words' LIMIT 5"
             for i in range(4)]
    for text in texts:
        assert same(parse(text), parse_sql(text))


def test_a_copy_that_fails_gives_the_parsers_statement(monkeypatch) -> None:
    cache = ShapeCache()
    text = "SELECT id FROM kb WHERE content = 'one' LIMIT 10"
    for _ in range(2):
        cache.parse(text)  # kept

    def broken(*args, **kwargs):
        raise TypeError("cannot copy")

    monkeypatch.setattr(shape_cache.copy, "deepcopy", broken)
    assert same(cache.parse(text), parse_sql(text))
    assert list(cache._shapes.values()) == [None]  # the full parser from now on


def test_a_backslash_or_a_long_text_goes_to_the_full_parser() -> None:
    """An unclosed literal of backslashes made the cache's scan backtrack exponentially (36 of
    them: ~5 s, where the parser stops at once at the `!`); a long SELECT is not kept (a kept
    shape is its whole tree: a 16 KB SELECT kept 3.7 MB)."""
    import time

    cache = ShapeCache()
    start = time.monotonic()
    for _ in range(2):
        with pytest.raises(Exception) as raised:
            cache.parse("SELECT ! '" + "\\" * 36)
        assert type(raised.value).__name__ != "RecursionError"
    assert time.monotonic() - start < 1.5
    long = "SELECT " + ", ".join(f"a{i} + 1" for i in range(100)) + " FROM t WHERE b = 'q'"
    assert len(long) > shape_cache.MAX_TEXT
    for _ in range(3):
        assert same(cache.parse(long), parse_sql(long))
    assert cache._shapes == {}
