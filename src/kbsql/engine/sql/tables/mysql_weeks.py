"""MySQL's week numbers that strftime lacks, for DATE_FORMAT's %u, %V and %X (dates_mysql.py).

Why: they were mapped to strftime's nearest (MindsDB's executor maps them the same way), and
those count otherwise at a year's start, without a word: 2021-01-01 (a Friday) is MySQL's
week 00 by %u (mode 1: Monday first, week 1 the first with 4 days of the year; ISO's %V said
53) and week 52 of 2020 by %V %X (mode 2: Sunday first, week 1 the one of the year's first
Sunday, days before it in the previous year's last; strftime's %U %G said 00 2020-53).
%U (mode 0) and %v %x (ISO, mode 3) are strftime's own and stay so.

Each takes the value (any date or timestamp expression) and answers a text expression.
"""

from __future__ import annotations

from mindsdb_sql_parser import ast


def _call(name: str, *args: ast.ASTNode) -> ast.Function:
    return ast.Function(name, args=list(args))


def _op(op: str, left: ast.ASTNode, right: ast.ASTNode) -> ast.BinaryOperation:
    return ast.BinaryOperation(op, args=[left, right], parentheses=True)


def _weeks_since(start: ast.ASTNode, day: ast.ASTNode) -> ast.ASTNode:
    """1 + whole weeks from `start` to `day` (0 and below before it)."""
    days = _call("date_diff", ast.Constant("day"), start, day)
    return _op("+", ast.TypeCast("integer", _call("floor", _op("/", days, ast.Constant(7.0)))),
               ast.Constant(1))


def _days(count: ast.ASTNode) -> ast.ASTNode:
    """A count DuckDB adds to a date (an INTEGER: date + BIGINT has no operator)."""
    return ast.TypeCast("integer", count)


def _two_digits(number: ast.ASTNode) -> ast.ASTNode:
    return _call("lpad", ast.TypeCast("varchar", number), ast.Constant(2), ast.Constant("0"))


def _day(value: ast.ASTNode) -> ast.ASTNode:
    return ast.TypeCast("date", ast.TypeCast("timestamp", value))


def _first_sunday(year: ast.ASTNode) -> ast.ASTNode:
    jan1 = _call("make_date", year, ast.Constant(1), ast.Constant(1))
    return _op("+", jan1, _days(_op("%", _op("-", ast.Constant(7), _call("isodow", jan1)), ast.Constant(7))))


def _sunday_year(day: ast.ASTNode) -> ast.ASTNode:
    """The year whose mode-2 weeks hold `day`: its own, or the one before when `day` comes
    before the year's first Sunday."""
    year = _call("year", day)
    before = _op("<", day, _first_sunday(year))
    return ast.Case(rules=[[before, _op("-", year, ast.Constant(1))]], default=year)


def week_monday(value: ast.ASTNode) -> ast.ASTNode:
    """%u, MySQL's WEEK(d, 1): 00-53, week 1 starts on the Monday of the week of January 4."""
    day = _day(value)
    jan4 = _call("make_date", _call("year", day), ast.Constant(1), ast.Constant(4))
    start = _op("-", jan4, _days(_op("-", _call("isodow", jan4), ast.Constant(1))))
    week = _weeks_since(start, day)  # before week 1: week 0 (greatest() would turn NULL into 0)
    return _two_digits(ast.Case(rules=[[_op("<", week, ast.Constant(0)), ast.Constant(0)]], default=week))


def week_sunday(value: ast.ASTNode) -> ast.ASTNode:
    """%V, MySQL's WEEK(d, 2): 01-53, counted from the first Sunday of %X's year."""
    day = _day(value)
    return _two_digits(_weeks_since(_first_sunday(_sunday_year(day)), day))


def year_of_week_sunday(value: ast.ASTNode) -> ast.ASTNode:
    """%X: the year of %V's week."""
    return ast.TypeCast("varchar", _sunday_year(_day(value)))
