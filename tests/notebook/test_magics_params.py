"""Bound parameters without IPython: `client.sql(query, params=...)` and the quoting rules.

Every value is checked against the dialect's own parser (mindsdb_sql_parser): the bound
statement must parse to the same shape, with the value as one constant."""

from __future__ import annotations

import datetime as dt
import random
import string

import pytest
from mindsdb_sql_parser import ast, parse_sql

import kbsql
from kbsql.client.params import ParameterError, bind, placeholders, quote_literal

HOSTILE = ["x'; DROP TABLE t; --", "a\\", "a\\' OR 1=1 --", "\\\\'", "*/ OR 1=1 /*", "'", "''",
           "\n-- comment\n", '"; SELECT 1; "', ":b", "{{x}}", "é ü 中文 🚀", "it's", "\\'\\'"]


def _constants(sql: str) -> list:
    statement = parse_sql(sql)
    assert isinstance(statement, ast.Select)
    return [t.value for t in statement.targets]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_strings_stay_one_literal(value):
    sql = bind("SELECT :v AS v, :w AS w", {"v": value, "w": "after"})
    values = _constants(sql)
    assert len(values) == 2 and values[1] == "after"  # nothing leaked past the literal
    assert isinstance(values[0], str)


def test_random_strings_never_change_the_statement():
    rng = random.Random(5)
    alphabet = string.printable + "'\\\"`;-/*:"
    for _ in range(500):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        values = _constants(bind("SELECT :v AS v, 'end' AS w", {"v": value}))
        assert len(values) == 2 and values[1] == "end", value


def test_plain_strings_round_trip_exactly():
    for value in ["x'; DROP TABLE t; --", "O'Brien", "a\\b", "C:\\path\\file", "multi\nline", ""]:
        assert _constants(bind("SELECT :v AS v", {"v": value}))[0] == value


def test_literals_for_python_types():
    assert quote_literal(None) == "NULL"
    assert quote_literal(True) == "TRUE" and quote_literal(False) == "FALSE"
    assert quote_literal(-3) == "(-3)"  # `a -:v` must not become the comment `a --3`
    assert quote_literal(1e-7) == "0.0000001"  # no exponent: the lexer would split it
    assert quote_literal(float("nan")) == "NULL"
    assert quote_literal(dt.date(2024, 5, 1)) == "'2024-05-01'"
    assert quote_literal([1, "a'b"]) == "(1, 'a''b')"
    assert quote_literal({"provider": "kbsql"}) == "{'provider': 'kbsql'}"
    import numpy as np

    assert quote_literal(np.int64(4)) == "4" and quote_literal(np.float64(0.5)) == "0.5"
    with pytest.raises(ParameterError):
        quote_literal(float("inf"))
    with pytest.raises(ParameterError):
        quote_literal(b"bytes")
    with pytest.raises(ParameterError):
        quote_literal(object())


def test_placeholders_skip_literals_comments_casts_and_json_keys():
    sql = ("SELECT :a, ':b', \":c\", x::int -- :d\n /* :e */ FROM t "
           "WHERE m = {\"k\":true, \"v\": :f} AND y IN :g")
    assert placeholders(sql) == ["a", "f", "g"]
    with pytest.raises(ParameterError, match=":missing"):
        bind("SELECT :missing", {})


def test_client_sql_binds_params_without_ipython(tmp_path):
    with kbsql.connect(data_dir=tmp_path / "e") as client:
        result = client.sql("SELECT :name AS n, :count + 1 AS c", params={"name": "x'; --", "count": 41})
        assert result.to_pandas().iloc[0].tolist() == ["x'; --", 42]
        with pytest.raises(ParameterError):
            client.sql("SELECT :nope", params={})


def _bound_value(value: str) -> str:
    """What the dialect's parser reads back for `value` bound as `:v` (a literal, or a `||`
    concatenation of literals for a value that starts or ends with both quote kinds)."""
    statement = parse_sql(bind("SELECT :v AS v, 'end' AS w", {"v": value}))
    assert statement.targets[1].value == "end"  # nothing leaked past the value

    def read(node):
        if isinstance(node, ast.Constant):
            return node.value
        assert isinstance(node, ast.BinaryOperation) and node.op == "||", node
        return read(node.args[0]) + read(node.args[1])

    return read(statement.targets[0])


def test_every_short_string_of_backslashes_and_quotes_reads_back_exactly():
    # exhaustive over the characters the lexer treats specially: 1365 strings up to length 5
    import itertools

    for n in range(6):
        for chars in itertools.product("\\'\"a", repeat=n):
            value = "".join(chars)
            assert _bound_value(value) == value, (value, bind("SELECT :v", {"v": value}))


def test_random_strings_round_trip_their_value():
    rng = random.Random(11)
    alphabet = string.printable + "'\\\"`;-/*:" + "\\" * 6 + "'" * 3 + "é中🚀"
    for _ in range(1500):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert _bound_value(value) == value, (value, bind("SELECT :v", {"v": value}))


def test_backslash_and_quote_values_round_trip_through_the_engine(tmp_path):
    rng = random.Random(12)
    alphabet = "ab'\"\\\\\\ %_\n"
    values = ["\\\\", "\\", "\\\\\\", "'", "\"", "'x\"", "\"x'", "a\\\"b", "a\\\\'", "\\'\\'",
              "C:\\path\\", "''", "'\"'"]
    values += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(150)]
    with kbsql.connect(data_dir=tmp_path / "e") as client:
        for value in values:
            got = client.sql("SELECT :v AS x", params={"v": value}).to_pandas().iloc[0, 0]
            assert got == value, (value, bind("SELECT :v AS x", {"v": value}))


def test_object_strings_must_be_single_literals():
    assert _bound_value("\\\\") == "\\\\"  # the reviewed case: two backslashes stay two
    assert quote_literal({"k": "'x'"}) == "{'k': \"'x'\"}"
    with pytest.raises(ParameterError, match="both quote kinds"):
        quote_literal({"k": "'x\""})
