"""LIKE with an escape character answers as DuckDB's like_escape does, in time linear in the
text: DuckDB's own matcher backtracks (`like_escape(repeat('a', 80), repeat('%a', 6) || '%b',
'!')` took 15 s, and a served statement ran on past its timeout: redteam2)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbsql.engine import Engine


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with Engine(Path(tmp_path_factory.mktemp("like"))) as e:
        yield e


def answer(engine: Engine, query: str) -> dict:
    return engine.query(query).to_json()


def test_escaped_patterns_mean_what_duckdb_s_like_escape_means(engine: Engine) -> None:
    got = answer(engine, "SELECT like_escape('a%b', 'a!%b', '!') AS a, like_escape('axb', 'a!%b', '!') AS b, "
                         "not_like_escape('axb', 'a!%b', '!') AS c, ilike_escape('A%B', 'a!%b', '!') AS d, "
                         "like_escape('a_b', 'a!_b', '!') AS e, like_escape('acb', 'a!_b', '!') AS f, "
                         "like_escape('a.b', 'a.b', '!') AS g, like_escape('a!b', 'a!!b', '!') AS h, "
                         "like_escape('x' || chr(10) || 'y', 'x%y', '!') AS i, "
                         "like_escape('ab', 'a_', '!') AS j")
    assert got["data"] == [[True, False, True, True, True, False, True, True, True, True]]


def test_a_backtracking_pattern_answers_at_once(engine: Engine) -> None:
    start = time.perf_counter()
    got = answer(engine, "SELECT like_escape(repeat('a', 5000), '%a%a%a%a%a%a%b', '!') AS m, "
                         "like_escape(repeat('a', 5000), '%a%a%a!%a%a%a%b', '!') AS n")
    assert got["data"] == [[False, False]]
    assert time.perf_counter() - start < 5  # DuckDB's own matcher: 15 s at 80 characters


def test_a_pattern_that_is_not_a_constant_is_refused_in_one_line(engine: Engine) -> None:
    got = answer(engine, "SELECT like_escape(repeat('a', 300), repeat('%a', 6) || '%b', '!') AS m")
    assert got["type"] == "error" and "not a constant" in got["error_message"]
    got = answer(engine, "SELECT x LIKE 'a!%' ESCAPE '!' AS m FROM (SELECT 'a%' AS x) t")
    assert got["type"] == "error" and "like_escape" in got["error_message"]  # the parser dropped ESCAPE
