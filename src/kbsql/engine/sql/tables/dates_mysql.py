"""MySQL's date and time functions written with DuckDB's (mysql_functions.py applies them).

Each takes the parser's call and its (already rewritten) arguments and answers the node that
replaces it, or None to leave the call as written (arguments it cannot read: a DuckDB error
then, as before). Text arguments are read as dates or timestamps, as MySQL and MindsDB's
executor read '2009-10-30 22:23:11'.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mindsdb_sql_parser import ast

from kbsql.engine.sql.tables import mysql_weeks
from kbsql.interface.errors import SqlError

Rewrite = Callable[[ast.Function, list[ast.ASTNode]], ast.ASTNode | None]

_STRFTIME = {"%c": "%-m", "%e": "%-d", "%h": "%I", "%i": "%M", "%k": "%-H", "%l": "%-I",
             "%M": "%B", "%r": "%I:%M:%S %p", "%s": "%S", "%T": "%H:%M:%S", "%W": "%A",
             "%v": "%V", "%x": "%G"}
"""MySQL's DATE_FORMAT specifiers that strftime spells otherwise (the rest are the same; %D,
%u, %V and %X, which strftime lacks, are computed: `_strftime`)."""
_FORMATS = {("DATE", "USA"): "%m.%d.%Y", ("DATE", "JIS"): "%Y-%m-%d", ("DATE", "ISO"): "%Y-%m-%d",
            ("DATE", "EUR"): "%d.%m.%Y", ("DATE", "INTERNAL"): "%Y%m%d",
            ("DATETIME", "USA"): "%Y-%m-%d %H.%i.%s", ("DATETIME", "JIS"): "%Y-%m-%d %H:%i:%s",
            ("DATETIME", "ISO"): "%Y-%m-%d %H:%i:%s", ("DATETIME", "EUR"): "%Y-%m-%d %H.%i.%s",
            ("DATETIME", "INTERNAL"): "%Y%m%d%H%i%s", ("TIME", "USA"): "%h:%i:%s %p",
            ("TIME", "JIS"): "%H:%i:%s", ("TIME", "ISO"): "%H:%i:%s", ("TIME", "EUR"): "%H.%i.%s",
            ("TIME", "INTERNAL"): "%H%i%s"}
"""GET_FORMAT's answers, MySQL's table (GET_FORMAT(TIMESTAMP, ...) is DATETIME's)."""
_EXTRACT_AS_TEXT = {"YEAR_MONTH": "%Y%m", "DAY_MINUTE": "%e%H%i", "DAY_HOUR": "%e%H",
                    "DAY_SECOND": "%e%H%i%s", "HOUR_MINUTE": "%H%i", "HOUR_SECOND": "%H%i%s",
                    "MINUTE_SECOND": "%i%s"}
"""EXTRACT's compound units, which DuckDB lacks: MySQL's digits run together, as a number."""
_DAY_TIME = re.compile(r"^\s*(-?)(?:(\d+) )?(\d+:\d+(?::\d+(?:\.\d+)?)?)\s*$")
"""ADDTIME's time to add, 'D HH:MM:SS.ffffff' or 'HH:MM[:SS.ffffff]' (the day optional, as MySQL)."""
_COMPOUND = {unit: tuple(parts.split()) for unit, parts in (
    ("YEAR_MONTH", "years months"), ("DAY_HOUR", "days hours"), ("DAY_MINUTE", "days hours minutes"),
    ("DAY_SECOND", "days hours minutes seconds"),
    ("DAY_MICROSECOND", "days hours minutes seconds microseconds"),
    ("HOUR_MINUTE", "hours minutes"), ("HOUR_SECOND", "hours minutes seconds"),
    ("HOUR_MICROSECOND", "hours minutes seconds microseconds"), ("MINUTE_SECOND", "minutes seconds"),
    ("MINUTE_MICROSECOND", "minutes seconds microseconds"), ("SECOND_MICROSECOND", "seconds microseconds"))}
"""MySQL's compound interval units and the parts their numbers fill."""
_OFFSET = re.compile(r"^\s*([+-])(\d{1,2}):(\d{2})\s*$")
_CLOCK = re.compile(r"^\s*\d+:\d+(?::\d+(?:\.\d+)?)?\s*$")


def as_date(arg: ast.ASTNode) -> ast.ASTNode:
    return _cast(arg, "date")


def _cast(arg: ast.ASTNode, kind: str) -> ast.ASTNode:
    if isinstance(arg, ast.TypeCast) and str(arg.type_name).lower() == kind:
        return arg
    return ast.TypeCast(kind, arg)


def _word(arg: ast.ASTNode) -> str | None:
    """A bare unit or type name (MINUTE, DATE) as the parser reads it: an identifier."""
    if isinstance(arg, ast.Identifier) and len(arg.parts) == 1:
        return str(arg.parts[0]).upper()
    return None


def _text(arg: ast.ASTNode) -> str | None:
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def _strftime(value: ast.ASTNode, mysql_format: str) -> ast.ASTNode:
    """MySQL's format as strftime; a specifier strftime lacks (`%D`, the day with its English
    suffix, '4th': it answered '4' without a word; the weeks of mysql_weeks.py) is computed and
    written between the pieces strftime answers."""
    pieces = _COMPUTED_SPECIFIER.split(mysql_format)
    if len(pieces) > 1:
        parts = [_COMPUTED[piece](value) if i % 2 else _strftime(value, piece)
                 for i, piece in enumerate(pieces) if piece]
        if len(parts) == 1:
            return parts[0]
        # concat() in one call (nested `||` made the value-size checks copy each level again),
        # NULL for a NULL date (concat() would skip it and answer the constant pieces)
        absent = ast.UnaryOperation("not", args=[ast.BinaryOperation("is", args=[value, ast.NullConstant()])])
        return ast.Case(rules=[[absent, ast.Function("concat", args=parts)]], default=ast.NullConstant())
    spelled = re.sub(r"%[a-zA-Z]", lambda m: _STRFTIME.get(m.group(), m.group()), mysql_format)
    return ast.Function("strftime", args=[_cast(value, "timestamp"), ast.Constant(spelled)])


def _day_with_suffix(value: ast.ASTNode) -> ast.ASTNode:
    day = ast.Function("date_part", args=[ast.Constant("day"), _cast(value, "timestamp")])
    last = ast.BinaryOperation("%", args=[day, ast.Constant(10)])
    teen = ast.BinaryOperation("and", args=[ast.BinaryOperation(">=", args=[day, ast.Constant(11)]),
                                            ast.BinaryOperation("<=", args=[day, ast.Constant(13)])])
    rules = [[teen, ast.Constant("th")]] + [
        [ast.BinaryOperation("=", args=[last, ast.Constant(n)]), ast.Constant(suffix)]
        for n, suffix in ((1, "st"), (2, "nd"), (3, "rd"))]
    return _joined([day, ast.Case(rules=rules, default=ast.Constant("th"))])


_COMPUTED: dict[str, Callable[[ast.ASTNode], ast.ASTNode]] = {
    "%D": _day_with_suffix, "%u": mysql_weeks.week_monday, "%V": mysql_weeks.week_sunday,
    "%X": mysql_weeks.year_of_week_sunday}
_COMPUTED_SPECIFIER = re.compile(f"({'|'.join(_COMPUTED)})")


def _joined(parts: list[ast.ASTNode]) -> ast.ASTNode:
    """`a || b || ...`: NULL when one is (concat() would skip it: DATE_FORMAT(NULL, '%D') 'th')."""
    joined = parts[0]
    for part in parts[1:]:
        joined = ast.BinaryOperation("||", args=[joined, part], parentheses=True)
    return joined


def _date_format(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
    text = _text(args[1]) if len(args) == 2 else None
    return None if text is None else _strftime(args[0], text)


def _get_format(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
    if len(args) != 2 or _word(args[0]) is None or _text(args[1]) is None:
        return None
    kind = "DATETIME" if _word(args[0]) == "TIMESTAMP" else _word(args[0])
    found = _FORMATS.get((str(kind), str(_text(args[1])).upper()))
    return ast.Constant(found)  # MySQL: NULL for a name it does not know


def _extract(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
    unit = _word(args[0]) if len(args) == 1 and node.from_arg is not None else None
    if unit is None:
        return None
    if unit in _EXTRACT_AS_TEXT:
        return ast.TypeCast("bigint", _strftime(node.from_arg, _EXTRACT_AS_TEXT[unit]))
    if isinstance(node.from_arg, ast.Constant):  # text: MySQL reads it as a date or time
        node.from_arg = _cast(node.from_arg, "timestamp")
    return None


def _timestampdiff(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
    unit = _word(args[0]) if len(args) == 3 else None
    if unit is None:
        return None
    return ast.Function("datesub", args=[ast.Constant(unit.lower()), _cast(args[1], "timestamp"),
                                         _cast(args[2], "timestamp")])  # whole units, as MySQL


def _datediff(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
    if len(args) != 2:
        return None
    return ast.Function("datesub", args=[ast.Constant("day"), as_date(args[1]), as_date(args[0])])


def _shift(sign: str, days: bool = False) -> Rewrite:
    """d plus or minus an interval; with `days` (ADDDATE, SUBDATE) a number is that many
    days, as MySQL reads ADDDATE('2008-01-02', 31) (a DuckDB catalog error before)."""
    def rewrite(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
        if len(args) != 2:
            return None  # DuckDB's own three-argument forms: as written
        shift = _compound(args[1])
        if not isinstance(shift, (ast.Interval, ast.TypeCast)):
            if not days:
                return None  # DATE_ADD(d, n): MySQL's error, DuckDB's here
            shift = ast.BinaryOperation("*", args=[shift, ast.Interval("1 day")], parentheses=True)
        return ast.BinaryOperation(sign, args=[_cast(args[0], "timestamp"), shift], parentheses=True)
    return rewrite


def _compound(shift: ast.ASTNode) -> ast.ASTNode:
    """MySQL's INTERVAL '1:1' MINUTE_SECOND (a compound unit, which DuckDB's parser refused in
    four lines) as DuckDB's interval '1 minutes 1 seconds'. Its numbers fill the unit's parts
    from the right (MySQL: '1:10' HOUR_SECOND is 1 minute 10 seconds); a leading '-' takes
    them all away. Another interval is kept."""
    text = str(shift.args[0]).strip() if isinstance(shift, ast.Interval) and shift.args else ""
    value, _, unit = text.rpartition(" ")
    parts = _COMPOUND.get(unit.upper())
    if parts is None:
        return shift
    value = value.strip().strip("'\"")
    sign = "-" if value.startswith("-") else ""
    numbers = re.findall(r"\d+", value)
    if not numbers or len(numbers) > len(parts):
        raise SqlError(f"Incorrect INTERVAL value: '{value}' has more parts than {unit.upper()} "
                       f"({', '.join(parts)})")
    spelled = " ".join(f"{sign}{n} {part}" for n, part in zip(numbers, parts[-len(numbers):], strict=True))
    return ast.TypeCast("interval", ast.Constant(spelled))


def _addtime(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
    match = _DAY_TIME.match(_text(args[1]) or "") if len(args) == 2 else None
    if match is None:
        return None
    sign, days, clock = match.groups()
    shift = ast.TypeCast("interval", ast.Constant(f"{sign}{days or 0} days {sign}{clock}"))
    kind = "time" if _CLOCK.match(_text(args[0]) or "") else "timestamp"  # ADDTIME('01:00:00', ...)
    return ast.BinaryOperation("+", args=[_cast(args[0], kind), shift], parentheses=True)


def _convert_tz(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
    """The time in zone args[1] read in zone args[2]. A zone is a name DuckDB knows ('MET') or
    an offset written in the statement ('+10:00', which DuckDB's timezone() refused in three
    lines, "Unknown TimeZone '+00:00'!"): an offset is added or taken from UTC."""
    if len(args) != 3:
        return None
    moment = _cast(args[0], "timestamp")
    source, target = _offset(args[1]), _offset(args[2])
    utc = ast.Constant("UTC")
    if source is None:
        instant = ast.Function("timezone", args=[args[1], moment])
    else:
        instant = ast.Function("timezone", args=[utc, ast.BinaryOperation("-", args=[moment, source])])
    if target is None:
        return ast.Function("timezone", args=[args[2], instant])
    at_utc = ast.Function("timezone", args=[utc, instant])
    return ast.BinaryOperation("+", args=[at_utc, target], parentheses=True)


def _offset(arg: ast.ASTNode) -> ast.ASTNode | None:
    """MySQL's '+10:00' / '-05:30' as an interval; None for a zone's name."""
    match = _OFFSET.match(_text(arg) or "")
    if match is None:
        return None
    sign, hours, minutes = match.groups()
    sign = "-" if sign == "-" else ""  # DuckDB reads no "+" in an interval
    return ast.TypeCast("interval", ast.Constant(f"{sign}{hours} hours {sign}{minutes} minutes"))


def _from_unixtime(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
    """FROM_UNIXTIME(seconds) in UTC; FROM_UNIXTIME(seconds, format) is that time written as
    DATE_FORMAT writes it (a DuckDB catalog error in two lines before)."""
    if len(args) not in (1, 2) or (len(args) == 2 and _text(args[1]) is None):
        return None
    micros = ast.BinaryOperation("*", args=[_cast(args[0], "bigint"), ast.Constant(1_000_000)])
    moment = ast.Function("make_timestamp", args=[micros])
    return moment if len(args) == 1 else _strftime(moment, str(_text(args[1])))


def _from_days(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
    if len(args) != 1:  # MySQL's day 366 is 0001-01-01 (its year 0 has 366 days)
        return None
    offset = _cast(ast.BinaryOperation("-", args=[args[0], ast.Constant(366)]), "integer")
    return ast.BinaryOperation("+", args=[as_date(ast.Constant("0001-01-01")), offset], parentheses=True)


def _renamed(name: str, cast_to: str | None = None) -> Rewrite:
    def rewrite(node: ast.Function, args: list[ast.ASTNode]) -> ast.ASTNode | None:
        if args:
            return None
        call = ast.Function(name, args=[])
        return call if cast_to is None else ast.TypeCast(cast_to, call)
    return rewrite


DATE_FUNCTIONS: dict[str, Rewrite] = {
    "date_format": _date_format, "get_format": _get_format, "extract": _extract,
    "timestampdiff": _timestampdiff, "datediff": _datediff, "adddate": _shift("+", days=True),
    "date_add": _shift("+"), "date_sub": _shift("-"), "subdate": _shift("-", days=True),
    "addtime": _addtime,
    "convert_tz": _convert_tz, "from_unixtime": _from_unixtime, "from_days": _from_days,
    "curdate": _renamed("current_date"), "curtime": _renamed("get_current_time", "time"),
}
