"""Variables in a cell: `{{name}}` templates and `:name` bound parameters.

Two syntaxes on purpose, like JupySQL: `{{name}}` pastes the value's text into the SQL (for
names of tables, columns or whole fragments — trusted input only), while `:name` binds the
value as one quoted literal (for data — safe with any text, see `kbsql.client.params`).
Templates resolve dotted names only (`{{cfg.table}}`), never arbitrary expressions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kbsql.client.params import ParameterError, placeholders

_TEMPLATE = re.compile(r"\{\{\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*\}\}")


def _lookup(path: str, namespace: Mapping[str, Any]) -> Any:
    head, *rest = path.split(".")
    if head not in namespace:
        raise ParameterError(f"Undefined template variable {{{{{path}}}}}: no variable {head!r}")
    value = namespace[head]
    for attr in rest:
        if isinstance(value, Mapping) and attr in value:
            value = value[attr]
        elif hasattr(value, attr):
            value = getattr(value, attr)
        else:
            raise ParameterError(f"Undefined template variable {{{{{path}}}}}: no {attr!r}")
    return value


def expand_template(sql: str, namespace: Mapping[str, Any]) -> str:
    """Replace each `{{name}}` by `str(value)` taken from `namespace`."""
    return _TEMPLATE.sub(lambda m: str(_lookup(m.group(1), namespace)), sql)


def collect_params(sql: str, namespace: Mapping[str, Any]) -> dict[str, Any] | None:
    """Values for the `:name` placeholders of `sql` from `namespace`, or None if it has none.

    A placeholder with no variable of that name is an error (a typo must not silently
    reach the server as `:nmae`)."""
    names = placeholders(sql)
    if not names:
        return None
    missing = [n for n in names if n not in namespace]
    if missing:
        raise ParameterError(f"No variable for the parameter :{missing[0]} "
                             "(define it in the notebook, or use --no-vars to send the text as is)")
    return {n: namespace[n] for n in names}


def strip_comment(line: str) -> str:
    """A magic line without its trailing `# comment`, as the editor shows it.

    A `#` starts a comment when it stands alone as a word (whitespace or the line's start
    before it, whitespace or the end after it) outside quotes, so `'#1'`, `C#` or `#tag` stay
    part of the text."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif (ch == "#" and (i == 0 or line[i - 1].isspace())
              and (i + 1 == len(line) or line[i + 1].isspace())):
            return line[:i].rstrip()
    return line
