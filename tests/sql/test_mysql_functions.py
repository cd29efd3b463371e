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


def test_mysql_date_and_text_functions_duckdb_lacks(engine: Engine) -> None:
    """Each was a DuckDB error before (a missing function, or text it would not read as a
    date), several lines long; MindsDB's executor answers them as MySQL does."""
    engine.register_dataframe("dates", pd.DataFrame({
        "f_seconds": [1447430881], "f_days": [730669], "f_float": [1.1],
        "created": ["2009-10-30 22:23:11"], "updated": ["2011-01-15 01:02:03"]}))
    expected = {
        "format(1234567.89, 0)": "1,234,568", "format(f_float, 2)": "1.10",
        "FORMAT('{:,.2f}', 1234567.89)": "1,234,567.89",  # DuckDB's own form is kept
        "REGEXP_SUBSTR('abc def ghi', '[a-z]+', 1, 1)": "abc",
        "substring_index('www.mysql.com', '.', 2)": "www.mysql",
        "substring_index('www.mysql.com', '.', -2)": "mysql.com",
        "TIMESTAMPDIFF(MINUTE, '2003-02-01', '2003-05-01 12:05:55')": 128885,
        "TIMESTAMPDIFF(MONTH, '2003-02-15', '2003-03-01')": 0,  # whole months, as MySQL
        "EXTRACT(YEAR FROM '2019-07-02')": 2019, "EXTRACT(YEAR_MONTH FROM '2019-07-02')": 201907,
        "EXTRACT(DAY_MINUTE FROM created)": 302223,
        "GET_FORMAT(DATETIME, 'EUR')": "%Y-%m-%d %H.%i.%s",
        "DATE_FORMAT(created, GET_FORMAT(DATE, 'EUR'))": "30.10.2009",
        "DATE_FORMAT('2009-10-04 22:23:00', '%W %M %Y %H:%i:%s')": "Sunday October 2009 22:23:00",
        "FROM_UNIXTIME(f_seconds)": "2015-11-13 16:08:01", "FROM_DAYS(f_days)": "2000-07-03",
        "DATEDIFF(updated, created)": 442,
        "ADDDATE(updated, INTERVAL '31 DAY')": "2011-02-15 01:02:03",
        "DATE_SUB('2011-01-15', INTERVAL 31 DAY)": "2010-12-15 00:00:00",
        "ADDTIME(updated, '1 1:1:1.2')": "2011-01-16 02:03:04.200000",
        "CONVERT_TZ(created, 'GMT', 'MET')": "2009-10-30 23:23:11",
        "CURDATE() = current_date": True, "typeof(CURTIME())": "TIME",
    }
    for expression, value in expected.items():
        got = _one(engine, expression)
        if isinstance(got, str) and got.endswith(".000000"):  # a timestamp's JSON text
            got = got.removesuffix(".000000")
        assert got == value, expression
    # the same shape with another format (the parser's kept statement is copied, then rewritten)
    for mysql_format, shown in (("%Y", "2009"), ("%d", "30"), ("%M", "October"), ("%Y", "2009")):
        assert _one(engine, f"DATE_FORMAT(created, '{mysql_format}')") == shown
    # an unaliased column keeps the name the user wrote
    answer = engine.query("SELECT length('ab'), datediff(updated, created) FROM df.dates").to_json()
    assert answer["column_names"] == ["length('ab')", "datediff(updated, created)"]


def test_group_by_with_rollup(engine: Engine) -> None:
    """MindsDB's test_query_df_with_rollup: `GROUP BY ... WITH ROLLUP` adds the subtotal rows
    (NULL where a column is rolled up); DuckDB's parser refused the MySQL form."""
    engine.register_dataframe("sales", pd.DataFrame({
        "country": ["USA", "USA", "USA", "UK", "UK"], "city": ["NY", "NY", "LA", "London", "London"],
        "amount": [100, 150, 200, 250, 300]}))
    answer = engine.query("SELECT country, SUM(amount) AS total FROM df.sales GROUP BY country WITH ROLLUP "
                          "ORDER BY country NULLS LAST").to_json()
    assert answer["data"] == [["UK", 550], ["USA", 450], [None, 1000]], answer
    answer = engine.query("SELECT country, city, SUM(amount) AS total FROM df.sales "
                          "GROUP BY country, city WITH ROLLUP").to_json()
    rows = answer["data"]
    assert len(rows) == 6 and [None, None, 1000] in rows and ["USA", None, 450] in rows, rows


def test_date_part_names_given_as_strings(engine: Engine) -> None:
    """`date_trunc('month', d)` and `date_diff('day', a, b)`: sqlglot reads the part as a unit
    and upper-cases it, so the placeholder that stands for the string (sqlglot_render) was not
    put back and DuckDB was sent "__KBSQL_LITERAL_0__" ("extract specifier ... not recognized")."""
    answer = engine.query("SELECT date_trunc('month', DATE '2011-01-05') AS m, date_diff('day', "
                          "DATE '2011-01-01', DATE '2011-01-15') AS d, 'month' AS s").to_json()
    assert answer["type"] == "table", answer
    assert [str(answer["data"][0][0])[:10], *answer["data"][0][1:]] == ["2011-01-01", 14, "month"]


def test_sha2_of_another_length_is_refused_not_answered_as_sha256(engine: Engine) -> None:
    """functions/standard-functions.mdx lists SHA2: SHA2('abc', 224) answered the SHA-256
    digest without a word (sqlglot renders every SHA2 as sha256). 256 and 0 are SHA-256, 224,
    384 and 512 are refused in one line (as MindsDB's executor), another length is NULL (MySQL)."""
    engine.register_dataframe("dates", pd.DataFrame({"word": ["abc"]}))
    sha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert _one(engine, "SHA2(word, 256)") == sha256
    assert _one(engine, "SHA2('abc', 0)") == sha256
    assert _one(engine, "SHA2(word, 100)") is None
    for bits in (224, 384, 512):
        answer = engine.query(f"SELECT SHA2(word, {bits}) FROM df.dates").to_json()
        assert answer["type"] == "error", answer
        assert answer["error_message"] == ("not supported by the local engine: SHA2 of "
                                           f"{bits} bits (SHA-256 only: SHA2(s, 256))")


def test_regexp_substr_answers_null_without_a_match_and_reads_pos_and_occurrence(engine: Engine) -> None:
    """functions/standard-functions.mdx lists REGEXP_SUBSTR: with no match it answered ''
    (DuckDB's regexp_extract), MySQL NULL; its pos and occurrence (MySQL's own example,
    occurrence 3: 'ghi') were a DuckDB catalog error in two lines."""
    engine.register_dataframe("dates", pd.DataFrame({"word": ["abc def ghi"]}))
    expected = {"REGEXP_SUBSTR(word, 'z') IS NULL": True, "REGEXP_SUBSTR(word, '[a-z]+')": "abc",
                "REGEXP_SUBSTR(word, '[a-z]+', 1, 3)": "ghi", "REGEXP_SUBSTR(word, '[a-z]+', 2)": "bc",
                "REGEXP_SUBSTR(word, '[a-z]+', 5, 2)": "ghi", "REGEXP_SUBSTR(word, '[a-z]+', 1, 4)": None,
                "REGEXP_SUBSTR(word, 'x*')": ""}  # an empty match is '' in MySQL too
    for expression, value in expected.items():
        assert _one(engine, expression) == value, expression


def test_format_rounds_half_away_from_zero_and_reads_numbers_written_as_text(engine: Engine) -> None:
    """functions/standard-functions.mdx lists FORMAT: FORMAT(2.5, 0) answered '2' (DuckDB's
    format rounds half to even; MySQL '3') and FORMAT('12332.5', 0) answered '12332.5' (read as
    DuckDB's format string; MySQL '12,333'), both silently; a locale was a 7-line binder error."""
    engine.register_dataframe("dates", pd.DataFrame({"half": [2.5], "price": [12332.5]}))
    expected = {"FORMAT(half, 0)": "3", "FORMAT(2.5, 0)": "3", "FORMAT(-1234.5, 0)": "-1,235",
                "FORMAT(price, 0)": "12,333", "FORMAT('12332.5', 0)": "12,333", "FORMAT(0.125, 2)": "0.13",
                "FORMAT(12332.123456, 4)": "12,332.1235", "FORMAT(12332.2, -2)": "12,332",
                "FORMAT('{:,.2f}', 1234567.89)": "1,234,567.89"}  # DuckDB's own form is kept
    for expression, value in expected.items():
        assert _one(engine, expression) == value, expression
    answer = engine.query("SELECT FORMAT(12332.2, 2, 'de_DE') FROM df.dates").to_json()
    assert answer["error_message"] == ("not supported by the local engine: FORMAT with a locale "
                                       "(FORMAT(x, d) writes commas and a point)"), answer


def test_date_format_day_with_english_suffix(engine: Engine) -> None:
    """functions/standard-functions.mdx lists DATE_FORMAT: `%D` (the day with its English
    suffix) answered '4' for the 4th, without a word (strftime has no such specifier)."""
    engine.register_dataframe("dates", pd.DataFrame({"created": ["1900-10-04 22:23:00"]}))
    assert _one(engine, "DATE_FORMAT(created, '%D %y %a %d %m %b %j')") == "4th 00 Thu 04 10 Oct 277"
    days = {1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st",
            22: "22nd", 23: "23rd", 31: "31st"}
    for day, shown in days.items():
        assert _one(engine, f"DATE_FORMAT('2009-10-{day:02d}', '%D')") == shown
    assert _one(engine, "DATE_FORMAT('2009-10-02', 'the %D of %M')") == "the 2nd of October"
    assert _one(engine, "DATE_FORMAT(NULL, '%D')") is None


def test_adddate_and_subdate_of_a_number_of_days(engine: Engine) -> None:
    """functions/standard-functions.mdx lists ADDDATE: MySQL's second form, ADDDATE(d, days)
    (its own example ADDDATE('2008-01-02', 31)), and SUBDATE(d, days) were DuckDB catalog errors
    in two lines ("Scalar Function with name adddate does not exist!")."""
    engine.register_dataframe("dates", pd.DataFrame({"created": ["2008-01-02"], "n": [31]}))
    expected = {"ADDDATE('2008-01-02', 31)": "2008-02-02 00:00:00",
                "ADDDATE(created, n)": "2008-02-02 00:00:00",
                "SUBDATE(created, 31)": "2007-12-02 00:00:00", "ADDDATE(created, -1)": "2008-01-01 00:00:00",
                "ADDDATE(created, INTERVAL 31 DAY)": "2008-02-02 00:00:00"}
    for expression, value in expected.items():
        assert str(_one(engine, expression)).removesuffix(".000000") == value, expression


def test_addtime_of_a_time_without_days(engine: Engine) -> None:
    """functions/standard-functions.mdx lists ADDTIME: a time to add without its day part
    ('1:1:1.000002') and a first argument that is a time ('01:00:00.999999', MySQL's own
    example) were DuckDB catalog errors in two lines; only 'D HH:MM:SS' was read."""
    engine.register_dataframe("dates", pd.DataFrame({"created": ["2007-12-31 23:59:59.999999"]}))
    expected = {"ADDTIME(created, '1 1:1:1.000002')": "2008-01-02 01:01:01.000001",
                "ADDTIME(created, '1:1:1.000002')": "2008-01-01 01:01:01.000001",
                "ADDTIME('2007-12-31 23:59:59', '-1:00')": "2007-12-31 22:59:59.000000",
                "ADDTIME('01:00:00.999999', '02:00:00.999998')": "03:00:01.999997"}
    for expression, value in expected.items():
        assert _one(engine, expression) == value, expression


def test_from_unixtime_with_a_format(engine: Engine) -> None:
    """functions/standard-functions.mdx lists FROM_UNIXTIME: its two-argument form (MySQL's own
    example) was a DuckDB catalog error in two lines; it is the time written as DATE_FORMAT
    writes it (UTC, as the one-argument form)."""
    engine.register_dataframe("dates", pd.DataFrame({"f_seconds": [1447430881]}))
    shown = _one(engine, "FROM_UNIXTIME(f_seconds, '%Y %D %M %h:%i:%s %x')")
    assert shown == "2015 13th November 04:08:01 2015"
    assert _one(engine, "FROM_UNIXTIME(NULL, '%Y')") is None


def test_convert_tz_with_offsets(engine: Engine) -> None:
    """functions/standard-functions.mdx lists CONVERT_TZ (its tooltip warns DuckDB does not read
    '+10:00'): MySQL's own example CONVERT_TZ('2004-01-01 12:00:00', '+00:00', '+10:00') was
    DuckDB's "Unknown TimeZone '+00:00'!" in three lines. An offset is taken from or added to
    UTC, beside a zone's name too."""
    engine.register_dataframe("dates", pd.DataFrame({"created": ["2004-01-01 12:00:00"]}))
    expected = {"CONVERT_TZ(created, '+00:00', '+10:00')": "2004-01-01 22:00:00",
                "CONVERT_TZ(created, '-05:30', 'UTC')": "2004-01-01 17:30:00",
                "CONVERT_TZ(created, 'Europe/Paris', '+01:00')": "2004-01-01 12:00:00",
                "CONVERT_TZ('2004-07-01 12:00:00', '+02:00', 'Europe/Paris')": "2004-07-01 12:00:00",
                "CONVERT_TZ(created, 'GMT', 'MET')": "2004-01-01 13:00:00"}
    for expression, value in expected.items():
        assert str(_one(engine, expression)).removesuffix(".000000") == value, expression


def test_date_add_with_a_compound_interval_unit(engine: Engine) -> None:
    """functions/standard-functions.mdx lists DATE_ADD, DATE_SUB and ADDDATE: MySQL's compound
    units (its own examples: INTERVAL '1:1' MINUTE_SECOND, '1 1:1:1' DAY_SECOND, '-1 10'
    DAY_HOUR, '1.999999' SECOND_MICROSECOND) were DuckDB's parser error in four lines."""
    engine.register_dataframe("dates", pd.DataFrame({"created": ["2018-12-31 23:59:59"]}))
    expected = {"DATE_ADD(created, INTERVAL '1:1' MINUTE_SECOND)": "2019-01-01 00:01:00.000000",
                "DATE_SUB('2025-01-01', INTERVAL '1 1:1:1' DAY_SECOND)": "2024-12-30 22:58:59.000000",
                "DATE_ADD('1900-01-01 00:00:00', INTERVAL '-1 10' DAY_HOUR)": "1899-12-30 14:00:00.000000",
                "DATE_ADD('1992-12-31 23:59:59.000002', INTERVAL '1.999999' SECOND_MICROSECOND)":
                    "1993-01-01 00:00:01.000001",
                "ADDDATE('2024-01-01', INTERVAL '1:10' HOUR_SECOND)": "2024-01-01 00:01:10.000000",
                "DATE_ADD('2024-01-31', INTERVAL '1-1' YEAR_MONTH)": "2025-02-28 00:00:00.000000"}
    for expression, value in expected.items():
        assert _one(engine, expression) == value, expression
    answer = engine.query("SELECT DATE_ADD(created, INTERVAL '1:2:3' MINUTE_SECOND) FROM df.dates").to_json()
    assert answer["error_message"] == ("Incorrect INTERVAL value: '1:2:3' has more parts than "
                                       "MINUTE_SECOND (minutes, seconds)"), answer


def test_date_format_week_specifiers_count_as_mysql(engine: Engine) -> None:
    """functions/standard-functions.mdx lists DATE_FORMAT (its tooltip: "issues with week
    numbers at year boundaries when using the %u and %V specifiers"): %u was ISO's week, %V
    strftime's Sunday week from 00 and %X ISO's year, so 2021-01-01 answered '53 00 2020'
    where MySQL answers '00 52 2020' (and 2017-01-01 '52 01 2016' for '00 01 2017'), silently.
    MySQL's WEEK() modes 1 and 2 are computed; %U, %v and %x were right and stay strftime's."""
    engine.register_dataframe("dates", pd.DataFrame({"day": ["2021-01-01"]}))
    expected = {"2021-01-01": "00 00 52 2020 53 2020", "2008-02-20": "07 08 07 2008 08 2008",
                "2008-12-31": "52 53 52 2008 01 2009", "2024-12-30": "52 53 52 2024 01 2025",
                "2017-01-01": "01 00 01 2017 52 2016"}
    for day, shown in expected.items():
        assert _one(engine, f"DATE_FORMAT('{day}', '%U %u %V %X %v %x')") == shown, day
    assert _one(engine, "DATE_FORMAT(day, '%u/%V')") == "00/52"
    assert _one(engine, "DATE_FORMAT(NULL, 'week %u')") is None


def test_unhex_of_text_that_is_not_hex_is_null(engine: Engine) -> None:
    """functions/standard-functions.mdx lists UNHEX: MySQL answers NULL for 'GG'; DuckDB's
    unhex stopped the whole statement ("Invalid input for hex digit: G")."""
    engine.register_dataframe("dates", pd.DataFrame({"word": ["GG", "4D7953514C"]}))
    answer = engine.query("SELECT UNHEX(word) AS u, UNHEX('F') AS f FROM df.dates").to_json()
    assert answer["type"] == "table", answer
    assert [row[0] is None for row in answer["data"]] == [True, False], answer
    assert _one(engine, "HEX(UNHEX('4142'))") == "4142"
