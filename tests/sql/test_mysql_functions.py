"""MySQL functions DuckDB also has under the same name, answered as MySQL and MindsDB's
executor answer them (MindsDB's tests/unit/executor/test_executor.py::test_query_df_functions)."""

from __future__ import annotations

import pandas as pd

from kbsql.engine import Engine


def _one(engine: Engine, expression: str) -> object:
    answer = engine.query(f"SELECT {expression} AS result FROM df.dates").to_json()
    assert answer["type"] == "table", answer
    return answer["data"][0][0]


def test_length_char_and_day_functions_answer_as_mysql(engine: Engine) -> None:
    """LENGTH counted characters (2 for '海豚', MySQL: 6 bytes), CHAR(77, 78, 79) answered
    'M', DAYOFWEEK of a Friday 5 (MySQL: 6): each silently; a date held as text was a
    DuckDB binder error for DAYOFYEAR / DAY / DAYNAME, MindsDB reads it as a date."""
    engine.register_dataframe("dates", pd.DataFrame({"created": ["2009-10-30 22:23:11"],
                                                     "word": ["海豚"]}))
    expected = {"length('海豚')": 6, "length(word)": 6, "char_length(word)": 2, "character_length('海豚')": 2,
                "char(77, 78, 79)": "MNO", "char(77)": "M",
                "dayofweek('2009-10-30')": 6, "dayofweek(created)": 6,
                "dayofweek(CAST('2009-11-01' AS DATE))": 1,  # a Sunday: 1 as in MySQL
                "dayofyear(created)": 303, "dayofmonth('2009-10-30')": 30, "day(created)": 30,
                "dayname(created)": "Friday"}
    for expression, value in expected.items():
        assert _one(engine, expression) == value, expression
    # the same statement again (the parser's kept shape) is not rewritten twice
    assert _one(engine, "dayofweek('2009-10-30')") == 6
    assert _one(engine, "dayofweek('2009-10-31')") == 7
