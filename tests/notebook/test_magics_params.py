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
