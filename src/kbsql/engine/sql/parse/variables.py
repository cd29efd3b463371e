"""Variables and parameters of the reference dialect, applied before a statement runs.

- `SET @name = value` (or `= from_env('MDB_NAME')`) stores a variable; `@name` anywhere in a
  later statement (outside string literals), also inside a USING object, reads it;
- `from_env('MDB_NAME')` reads an environment variable. As in MindsDB's
  `VariablesController`, only names starting with `MDB_` can be read, so a statement cannot
  fish other secrets out of the server's environment;
- `params` of `POST /api/sql/query` (rest/sql.mdx) fill `:name` / `?` placeholders (the
  parser's `Parameter` nodes) and are variables too.

`@name` and `from_env(...)` are replaced by SQL literals in the text because the parser in use
has no lexer rule for `@` nor functions inside a JSON object; the scan skips quoted strings,
quoted identifiers and comments (`interface.sqltext`, the scanner the client's `:name`
binding uses too), so text inside a literal is never touched.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Mapping
from typing import Any

from mindsdb_sql_parser import ast, parse_sql

from kbsql.engine.sql.refusals import unsupported
from kbsql.interface.control import current as current_control
from kbsql.interface.errors import SqlError
from kbsql.interface.literals import ParameterError, quote_literal
from kbsql.interface.sqltext import segments

ENV_PREFIX = "MDB_"
_SET = re.compile(r"^\s*SET\s+@([A-Za-z_]\w*)\s*:?=\s*(.+?)\s*;?\s*$", re.IGNORECASE | re.DOTALL)
"""`SET @name = value`, or MySQL's `:=`."""
_SET_NO_VALUE = re.compile(r"^\s*SET\s+@([A-Za-z_]\w*)\s*;?\s*$", re.IGNORECASE)
_ANOTHER = re.compile(r",\s*@[A-Za-z_]\w*\s*:?=")
"""A second assignment of MySQL's `SET @x = 1, @y = 2`, which the code of the value holds."""
_VAR = re.compile(r"@@((?:[A-Za-z_]\w*\.)?[A-Za-z_]\w*)|@([A-Za-z_]\w*)")
"""`@name`, or a MySQL system variable `@@[session.]name` (group 1), refused by name."""
_SET_WORD = re.compile(r"\s*SET\b", re.IGNORECASE)
_FROM_ENV = re.compile(r"from_env\s*\(\s*(['\"])([^'\"]*)\1\s*\)", re.IGNORECASE)


MAX_VARIABLES = 1000
MAX_VALUE_CHARS = 16 * 1024 * 1024
"""What one user's store keeps in all by default (settings max_variables, max_variables_mb):
each SET of a new name kept its value for good (a hundred 0.9 MB values held 90 MB), so SETs
of new names could take a served engine's memory."""


class Variables:
    """The variables of each user of the engine (kept in memory), at most `MAX_VARIABLES`
    names and `MAX_VALUE_CHARS` of values each.

    Why per user (`Control.owner`, the server's credential; None embedded and on a server
    without credentials: one store): MindsDB keeps one store per company, and MindsDB's docs
    put keys in them (`SET @key = from_env('MDB_OPENAI_KEY')`, then `api_key = @key`). One
    store per server let the login user read the token user's key with `SELECT @key`, and
    one user's 1,000 names refused every other user's SET until a restart. A job's runs and
    a background insert carry their creator's owner, so they read their creator's store."""

    def __init__(self, max_names: int = MAX_VARIABLES, max_chars: int = MAX_VALUE_CHARS,
                 note: str = "max_variables, max_variables_mb in config.json") -> None:
        self._stores: dict[str | None, dict[str, Any]] = {}
        self.max_names, self.max_chars, self.note = max_names, max_chars, note

    @property
    def values(self) -> dict[str, Any]:
        """The calling user's variables."""
        control = current_control()
        owner = control.owner if control is not None else None
        return self._stores.setdefault(owner, {})

    def set_statement(self, query: str) -> str | None:
        """The variable name when `query` is `SET @name = value` (then stored), else None.
        `= NULL` forgets the name, so it frees its room among the names as well."""
        match = _SET.match(query)
        if match is None:
            if (bare := _SET_NO_VALUE.match(query)) is not None:  # read as @x unset: misleading
                raise SqlError(f"SET @{bare.group(1)} needs a value: SET @{bare.group(1)} = 'text'")
            return None
        name, expression = match.group(1).lower(), match.group(2)
        if any(_ANOTHER.search(expression[a:b]) for a, b, is_code in segments(expression) if is_code):
            raise _one_each(match.group(1))  # before @y is read: 'Variable @y is not defined'
        value = _value_of(self.expand(expression), match.group(1))
        values = self.values
        if value is None:
            values.pop(name, None)
            return name
        others = {k: v for k, v in values.items() if k != name}
        held = sum(len(str(v)) for v in others.values()) + len(str(value))
        if len(others) >= self.max_names or held > self.max_chars:
            raise SqlError(f"SET @{match.group(1)} would keep more than {self.max_names} variables or "
                           f"{self.max_chars:,} characters of values ({self.note}; SET @name = NULL "
                           "frees a name and its value's space)")
        values[name] = value
        return name

    def expand(self, query: str, params: Mapping[str, Any] | None = None) -> str:
        """The text with `@name` and `from_env('MDB_X')` replaced by literals."""
        if "@" not in query and "from_env" not in query.lower():
            return query
        known = {**self.values, **{str(k).lower(): v for k, v in (params or {}).items()}}

        def variable(m: re.Match[str]) -> str:
            if m.group(1) is not None and _SET_WORD.match(query):  # no session here to keep it in
                raise unsupported(f"SET of MySQL system variables (@@{m.group(1)}) outside the MySQL "
                                  "door: `kbsql serve --mysql-port` keeps them per connection; SET "
                                  "@name = ... sets this engine's own variables")
            if m.group(1) is not None:  # a read: the parser's, answered by information_functions
                return m.group(0)
            name = m.group(2).lower()
            if name not in known:
                raise SqlError(f"Variable @{m.group(2)} is not defined: SET @{m.group(2)} = ... first")
            return literal(known[name])

        text = "".join(_VAR.sub(variable, query[a:b]) if is_code else query[a:b]
                       for a, b, is_code in segments(query))
        # from_env('X') spans a quoted string, so it is matched on the whole text, where it
        # starts in code
        starts = _code_starts(text)
        return _FROM_ENV.sub(lambda m: literal(from_env(m.group(2))) if starts(m.start()) else m.group(0),
                             text)


def _code_starts(text: str) -> Any:
    """Whether position i is in code. A binary search: a scan of every range per match was
    quadratic (4000 from_env calls between strings took 0.46 s; 60k would take minutes)."""
    starts: list[int] = []
    ends: list[int] = []
    for a, b, is_code in segments(text):
        if is_code:
            starts.append(a)
            ends.append(b)

    def starts_in_code(i: int) -> bool:
        k = bisect.bisect_right(starts, i) - 1
        return k >= 0 and i < ends[k]
    return starts_in_code


def from_env(name: str) -> str:
    if not name.startswith(ENV_PREFIX):
        raise SqlError(f"from_env() reads only environment variables whose names start with "
                       f"{ENV_PREFIX}, not {name!r}")
    if name not in os.environ:
        raise SqlError(f"Environment variable {name} is not defined")
    return os.environ[name]


def literal(value: Any) -> str:
    """A value as an SQL literal the parser reads back as exactly that value (the one
    quoter, `interface.literals`; a value it cannot write is an SQL error)."""
    try:
        return quote_literal(value)
    except ParameterError as exc:
        raise SqlError(f"the variable's value cannot be used in SQL: {exc}") from None


def _one_each(name: str) -> SqlError:
    return SqlError(f"SET @{name} = ... sets one variable: one SET each (SET @a = 1; SET @b = 2); "
                    "nothing was set")


def _value_of(expression: str, name: str) -> Any:
    """The one value `expression` writes. More than one (`SET @x = 1, @y = 2`, MySQL's list
    of assignments) is refused: the first was stored and the rest dropped with an OK."""
    try:
        targets = parse_sql(f"SELECT {expression}").targets
    except Exception:
        raise SqlError(f"SET @variable takes a value or from_env('{ENV_PREFIX}NAME'), "
                       f"not {expression}") from None
    if len(targets) != 1:
        raise _one_each(name)
    target = targets[0]
    if isinstance(target, ast.NullConstant):
        return None
    if isinstance(target, ast.Constant):
        return target.value
    raise SqlError(f"SET @variable takes a value or from_env('{ENV_PREFIX}NAME'), not {expression}")


def bind_parameters(node: Any, params: Mapping[str, Any] | list[Any]) -> Any:
    """Replace the parser's `Parameter` nodes by constants: `:name` from a mapping, `?` in
    order from a list."""
    positional = iter(params if isinstance(params, list) else [])
    named = params if isinstance(params, Mapping) else {}

    def value_node(parameter: ast.Parameter) -> ast.ASTNode:
        key = str(parameter.value)
        if key == "?":
            try:
                value = next(positional)
            except StopIteration:
                raise SqlError("Parameter is not set: ? (more ? placeholders than positional params)") \
                    from None
        elif key in named:
            value = named[key]
        else:
            raise SqlError(f"Parameter is not set: {key} (give :{key} a value in params)")
        if value is None:
            return ast.NullConstant()
        if isinstance(value, list | tuple):
            return ast.Tuple([ast.Constant(v) for v in value])
        return ast.Constant(value)

    def walk(item: Any) -> Any:
        if isinstance(item, ast.Parameter):
            return value_node(item)
        if isinstance(item, list):
            return [walk(i) for i in item]
        if isinstance(item, tuple):
            return tuple(walk(i) for i in item)
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, ast.ASTNode):
            for key, value in list(vars(item).items()):
                setattr(item, key, walk(value))
        return item

    return walk(node)
