"""Values made out of almost nothing are capped per row (engine/sql/value_caps.py): DuckDB's
memory limit does not count them, so `repeat('x', 600000000)` grew a server by 1.2 GB.
Embedded engine with a small SQL memory limit (a 64 KB cap per value); the server-side
test with RSS measured is in tests/test_server_isolation.py."""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from kbsql.engine import Engine

BOMBS = [
    "SELECT length(repeat('x', 600000000))",
    "SELECT length(repeat(repeat('x', 60000), 60000))",
    "SELECT len(repeat(list_value(1, 2), 300000000))",
    "SELECT length(lpad('x', 600000000, 'y'))",
    "SELECT length(rpad('x', 600000000))",
    "SELECT length(printf('%600000000d', 1))",
    "SELECT length(printf('%*d', 600000000, 1))",
    "SELECT length(format('{:>600000000}', 1))",
    "SELECT len(range(80000000))",
    "SELECT len(generate_series(1, 80000000))",
    "SELECT len(range(CAST('1970-01-01' AS TIMESTAMP), CAST('2030-01-01' AS TIMESTAMP), to_seconds(1)))",
    "SELECT len(list_resize(list_value(1), 80000000))",
    "SELECT length(bar(5, 0, 10, 600000000))",
    "SELECT bit_length(bitstring('1', 600000000))",  # 75 MB of bits
    "SELECT length(replace(repeat('x', 60000), 'x', repeat('y', 60000)))",
    "SELECT length(regexp_replace(repeat('x', 60000), 'x', repeat('y', 60000), 'g'))",
    "SELECT sum(length(repeat('x', 70000 + x * 0))) FROM df.n",  # each row under 1 MB
    "SELECT length(repeat('x', 40000) || repeat('y', 40000) || 'z')",  # each part under the cap
    # a covered call inside another's measured operand was built unchecked (300 MB)
    "SELECT length(repeat(repeat('x', 300000000), 1))",
    "SELECT length(concat(lpad('x', 300000000), 'y'))",
    # parts each under the cap, joined past it by a call that holds them all
    "SELECT max(length(concat(s, s, s, s))) FROM (SELECT repeat('x', 30000) || x AS s FROM df.n)",
    "SELECT max(length(concat_ws(',', s, s, s))) FROM (SELECT repeat('x', 30000) || x AS s FROM df.n)",
    "SELECT max(len(list_value(s, s, s))) FROM (SELECT repeat('x', 30000) || x AS s FROM df.n)",
    "SELECT len(list_concat(l, l, l)) FROM (SELECT list_value(repeat('x', 30000)) AS l)",  # (measuring
    # a list casts it to text: over 5,000 rows that alone would take 116 MB)
    "SELECT max(length(printf('%s%s%s', s, s, s))) FROM (SELECT repeat('x', 30000) || x AS s FROM df.n)",
    # calls whose value is many times their argument, or repeat a separator
    "SELECT max(length(bin(s))) FROM (SELECT repeat('x', 20000) || x AS s FROM df.n)",
    "SELECT max(len(string_split(s, ''))) FROM (SELECT repeat('x', 20000) || x AS s FROM df.n)",
    f"SELECT length(array_to_string(range(5000), '{'x' * 2000}'))",  # a separator is a constant
    # calls that build one value out of all their arguments (each under the cap), or whose
    # value is a multiple of an argument: uncovered, json_object grew the process by 196 MB
    "SELECT max(length(json_object('a', s, 'b', s, 'c', s, 'd', s))) "
    "FROM (SELECT repeat('x', 30000) || x AS s FROM df.n)",
    "SELECT max(length(CAST(struct_pack(s, t, u, v) AS VARCHAR))) "
    "FROM (SELECT s, s AS t, s AS u, s AS v FROM (SELECT repeat('x', 30000) || x AS s FROM df.n))",
    "SELECT max(cardinality(map(k, v))) FROM (SELECT list_value(repeat('x', 11000) || x) AS k, "
    "list_value(repeat('y', 11000) || x) AS v FROM df.n WHERE x < 500)",
    "SELECT max(cardinality(map_concat(m, m, m, m))) "
    "FROM (SELECT map(list_value(x), list_value(repeat('x', 10000) || x)) AS m FROM df.n)",
    "SELECT max(length(CAST(struct_concat(r, r, r, r) AS VARCHAR))) "
    "FROM (SELECT row(repeat('x', 10000) || x) AS r FROM df.n)",
    "SELECT max(length(json_merge_patch(j, j))) "
    "FROM (SELECT '\"' || repeat('x', 20000) || x || '\"' AS j FROM df.n)",
    "SELECT max(length(array_to_json(l))) FROM (SELECT range(x, x + 3000) AS l FROM df.n WHERE x < 500)",
    "SELECT max(length(strftime(now(), f))) FROM (SELECT repeat('%c', 10000) || x AS f FROM df.n)",
    "SELECT max(length(translate(s, 'x', 'ꙮ'))) FROM (SELECT repeat('x', 20000) || x AS s FROM df.n)",
    "SELECT length(json_pretty(repeat('[', 3000) || repeat(']', 3000)))",  # 6 KB made 36 MB
    # several capped values in one projection: each a vector of 2,048 of them at once
    "SELECT " + ", ".join(f"max(length(s || '{c}'))" for c in "abcd")
    + " FROM (SELECT repeat('x', 30000) || x AS s FROM df.n)",
]
FINE = {
    "SELECT repeat('ab', 3)": [["ababab"]],
    "SELECT lpad('7', 3, '0'), rpad('a', 3, '-')": [["007", "a--"]],
    "SELECT printf('%5d|%s', 42, 'x')": [["   42|x"]],
    "SELECT format('{} and {}', 1, 2)": [["1 and 2"]],
    "SELECT range(3), generate_series(1, 3, 1)": [[[0, 1, 2], [1, 2, 3]]],
    "SELECT list_resize(list_value(1), 3, 0)": [[[1, 0, 0]]],
    "SELECT len(range(CAST('2020-01-01' AS TIMESTAMP), CAST('2020-01-02' AS TIMESTAMP), to_hours(6)))": [[4]],
    "SELECT sum(length(repeat('x', 1000 + x * 0))) FROM df.n": [[5000 * 1000]],
    "SELECT replace('a-b-c', '-', '+'), regexp_replace('abc', '(b)', '<\\1>')": [["a+b+c", "a<b>c"]],
    "SELECT repeat('x', NULL) IS NULL, length(repeat('x', 30000))": [[True, 30000]],
    "SELECT concat('a', 1, NULL), concat_ws('-', 'a', 'b'), list_value(1, 2)": [["a1", "a-b", [1, 2]]],
    "SELECT hex('a'), bin('a'), string_split('a,b', ','), array_to_string(list_value(1, 2), '+')":
        [["61", "01100001", ["a", "b"], "1+2"]],
    "SELECT 'a' || 'b', 'a' || NULL, 1 || 2, list_value(1) || list_value(2, 3)":
        [["ab", None, "12", [1, 2, 3]]],
    "SELECT string_agg(CAST(x AS VARCHAR), ',') || '!' FROM df.n WHERE x < 3": [["0,1,2!"]],
    "SELECT upper(CAST(x AS VARCHAR) || 'a') || 'b' FROM df.n WHERE x < 2": [["0Ab"], ["1Ab"]],
    "SELECT json_object('a', 1, 'b', 'x'), struct_pack(1, 'a'), "
    "cardinality(map(list_value(1), list_value('a')))":
        [['{"a":1,"b":"x"}', {"_0": 1, "_1": "a"}, 1]],
    "SELECT CAST(bitstring('101', 5) AS VARCHAR), bit_length(bitstring('1', 4000))": [["00101", 4000]],
    "SELECT json_pretty('[1]'), strftime(CAST('2020-01-02' AS DATE), '%Y/%m'), translate('abc', 'a', 'z')":
        [["[\n    1\n]", "2020/01", "zbc"]],
    "SELECT json_merge_patch('{\"a\":1}', '{\"b\":2}'), array_to_json(list_value(1, 2)), "
    "length(json_pretty('[' || repeat('1,', 1000) || '1]'))": [['{"a":1,"b":2}', "[1,2]", 7009]],
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    data = tmp_path_factory.mktemp("caps")
    (data / "config.json").write_text(json.dumps({"sql_memory_mb": 256}))
    with Engine(data) as eng:
        eng.register_dataframe("n", pd.DataFrame({"x": range(5000)}))
        yield eng


@pytest.mark.parametrize("query", BOMBS)
def test_a_value_bomb_is_one_line_and_takes_no_memory(engine: Engine, query: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    answer = engine.query(query).to_json()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert answer["type"] == "error", answer
    message = answer["error_message"]
    assert len(message.splitlines()) == 1 and ("bytes" in message or "not allowed" in message), message
    assert grown_mb < 64, f"{query} grew the process by {grown_mb:.0f} MB"


@pytest.mark.parametrize(("query", "rows"), FINE.items())
def test_ordinary_uses_are_untouched(engine: Engine, query: str, rows: list) -> None:
    answer = engine.query(query).to_json()
    assert answer["type"] == "table" and answer["data"] == rows, answer


def test_the_cap_follows_the_memory_limit(engine: Engine, tmp_path: Path) -> None:
    assert engine.sql.duck.value_cap == 64 * 1024  # 256 MB / (2048 rows x 2 threads)
    with Engine(tmp_path / "big") as bigger:  # DuckDB's default limit: a bigger cap
        assert bigger.sql.duck.value_cap > engine.sql.duck.value_cap
        assert bigger.query("SELECT length(repeat('x', 200000))").to_json()["data"] == [[200000]]


def test_memory_a_statement_freed_goes_back_to_the_system(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """After a refused aggregate of big values, the process's memory falls back within
    seconds, even once the MySQL door's metadata database is open: DuckDB's allocator is one
    per process, and a database opened without `allocator_background_threads` turned off
    the thread that gives memory back for all (a server held 1.1 GB idle afterwards)."""
    from kbsql.engine.sql.tables.watchdog import resident_bytes
    from kbsql.server.mysql import local_sql

    (tmp_path / "config.json").write_text(json.dumps({"sql_memory_mb": 256, "sql_threads": 1}))
    with Engine(tmp_path) as eng:
        assert eng.query("SELECT 1").to_json()["data"] == [[1]]  # the engine's database is open
        monkeypatch.setattr(local_sql, "_duck", None)  # opened anew, after the engine's
        assert local_sql.run_local("SELECT 1 AS x", {}).num_rows == 1
        before = (resident_bytes() or 0) >> 20
        answer = eng.query("SELECT length(string_agg(repeat('x', 120000) || i, '')) "
                           "FROM (SELECT unnest(range(8000)) AS i)").to_json()
        assert answer["type"] == "error" and "memory" in answer["error_message"], answer
        deadline = time.monotonic() + 15
        while ((resident_bytes() or 0) >> 20) > before + 64 and time.monotonic() < deadline:
            time.sleep(0.25)
        assert ((resident_bytes() or 0) >> 20) < before + 64, before


def test_nested_checks_stay_small_or_are_refused_in_one_line(engine: Engine) -> None:
    """Each check writes its operands twice, innermost first (so a measured operand carries
    its own checks): six replace()s in one another still answer, twelve are refused in one
    line before the statement's text doubles twelve times (3^12 copies)."""
    nested = "x"
    for _ in range(6):
        nested = f"replace({nested}, 'a', 'b')"
    answer = engine.query(f"SELECT {nested} AS y FROM (SELECT 'abc' AS x)").to_json()
    assert answer["data"] == [["bbc"]], answer
    for _ in range(6):
        nested = f"replace({nested}, 'a', 'b')"
    started = time.monotonic()
    answer = engine.query(f"SELECT {nested} AS y FROM (SELECT 'abc' AS x)").to_json()
    assert answer["type"] == "error" and "nests too many" in answer["error_message"], answer
    assert len(answer["error_message"].splitlines()) == 1 and time.monotonic() - started < 10


def test_the_check_budget_is_a_setting_named_where_it_is_met(tmp_path: Path) -> None:
    """The budget was a constant (50,000 nodes) a user meets with eight nested replace()s:
    `value_check_nodes` (config.json, --value-check-nodes) sets it, and the refusal names it."""
    import httpx

    from kbsql.server.process import spawn

    nested = "x"
    for _ in range(3):
        nested = f"replace({nested}, 'a', 'b')"
    query = f"SELECT {nested} AS y FROM (SELECT 'abc' AS x)"
    (tmp_path / "config.json").write_text(json.dumps({"value_check_nodes": 100}))
    with Engine(tmp_path) as eng:
        message = eng.query(query).to_json()["error_message"]
        assert "more than 100 expression nodes (value_check_nodes in config.json)" in message, message
    with spawn(tmp_path / "served", args=("--value-check-nodes", "100")) as server:
        answer = httpx.post(f"{server.url}/api/sql/query", json={"query": query}, timeout=60).json()
        assert "more than 100 expression nodes (kbsql serve --value-check-nodes)" in answer["error_message"]
    with Engine(tmp_path / "default") as eng:  # the default budget: three answer
        assert eng.query(query).to_json()["data"] == [["bbc"]]


def test_an_edit_distance_of_long_texts_is_refused_before_it_holds_a_core(tmp_path: Path) -> None:
    """levenshtein is O(n x m) and DuckDB stops a statement only between vectors: two rows of
    60,000-character texts ran 22 s past a 3 s deadline on a kbsql serve (one vector of 2,048
    would run hours). Past `edit_distance_cells` character pairs a call is refused in one
    line naming the setting; ordinary texts answer."""
    import httpx

    from kbsql.server.process import spawn

    bomb = ("SELECT {f}(repeat('a', 60000), repeat('b', 60000) || i) FROM (SELECT unnest(range(2)) AS i)")
    with spawn(tmp_path / "served", args=("--statement-timeout", "3")) as server:
        for f in ("levenshtein", "damerau_levenshtein", "editdist3"):
            started = time.monotonic()
            answer = httpx.post(f"{server.url}/api/sql/query", json={"query": bomb.format(f=f)},
                                timeout=120).json()
            message = answer["error_message"]
            assert "character pairs" in message and "kbsql serve --edit-distance-cells" in message, message
            assert len(message.splitlines()) == 1 and time.monotonic() - started < 3, message
        answer = httpx.post(f"{server.url}/api/sql/query", json={"query": (
            "SELECT levenshtein('kitten', 'sitting'), damerau_levenshtein('ab', 'ba'), "
            "levenshtein(repeat('a', 400), repeat('b', 600))")}, timeout=60).json()
        assert answer["data"] == [[3, 1, 600]], answer


def test_a_jaro_similarity_of_long_texts_is_refused_before_it_holds_a_core(tmp_path: Path) -> None:
    """jaro_similarity is O(n x m) too, 500 times cheaper a pair than levenshtein: two stored
    texts of 2.8 MB held a core for 23 s on a kbsql serve and answered a 3 s deadline after
    46 s. Two of 1.4 MB take 6 s (load 1); refused at once now, short texts still answer."""
    import httpx

    from kbsql.server.process import spawn

    bomb = "SELECT {f}(repeat('ab', 700000), repeat('ba', 700000) || 'y')"
    with spawn(tmp_path / "served", args=("--statement-timeout", "3", "--sql-memory-mb", "6000")) as server:
        for f in ("jaro_similarity", "jaro_winkler_similarity"):
            started = time.monotonic()
            answer = httpx.post(f"{server.url}/api/sql/query", json={"query": bomb.format(f=f)},
                                timeout=120).json()
            message = answer.get("error_message", "")
            assert "character pairs" in message and "kbsql serve --edit-distance-cells" in message, answer
            assert time.monotonic() - started < 2, message
        answer = httpx.post(f"{server.url}/api/sql/query", json={"query": (
            "SELECT round(jaro_similarity('duane', 'dwayne'), 2), "
            "round(jaro_winkler_similarity('martha', 'marhta'), 2), "
            "jaro_similarity(repeat('a', 8000), repeat('a', 8000))")}, timeout=60).json()
        assert answer["data"] == [[0.82, 0.96, 1.0]], answer



def test_a_substring_search_with_a_long_needle_is_refused_before_it_holds_a_core(tmp_path: Path) -> None:
    """contains, strpos, LIKE and replace compare the needle at each place of the text: on
    repetitive text O(n x m), and DuckDB cannot stop one call. A 1.4 MB needle in a stored
    2.8 MB text held a core for over 100 s past a 3 s deadline on a kbsql serve; a 0.7 MB one
    in 1.4 MB takes ~9 s (load 18: 1.7 s for 70 KB). Past 40,000 x edit_distance_cells pairs a
    call is refused at once; short literal patterns are never checked, and answer."""
    import httpx

    from kbsql.server.process import spawn

    haystack, needle = "repeat('a', 1400000)", "repeat('a', 700000) || 'b'"
    bombs = [f"SELECT contains({haystack}, {needle})", f"SELECT strpos({haystack}, {needle})",
             f"SELECT {haystack} LIKE '%' || {needle} || '%'",
             f"SELECT replace({haystack}, {needle}, 'c') = ''"]
    with spawn(tmp_path / "served", args=("--statement-timeout", "3", "--sql-memory-mb", "6000")) as server:
        for bomb in bombs:
            started = time.monotonic()
            answer = httpx.post(f"{server.url}/api/sql/query", json={"query": bomb}, timeout=120).json()
            message = answer.get("error_message", "")
            assert "character pairs" in message and "--edit-distance-cells" in message, answer
            assert time.monotonic() - started < 2, message
        answer = httpx.post(f"{server.url}/api/sql/query", json={"query": (
            "SELECT 'hello world' LIKE '%wor%', contains(repeat('ab', 200000), 'abx'), "
            "strpos('hello', 'lo'), replace('hello', 'l', 'L'), "
            "contains(repeat('a', 100000), repeat('a', 1000) || 'b')")},
            timeout=60).json()
        assert answer.get("data") == [[True, False, 4, "heLLo", False]], answer
