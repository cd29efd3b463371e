"""The one check on a name the catalog stores as given (a project, view, data source or job).

Knowledge bases and agents take `validate.name`'s pattern (their names become folders);
these others take any name SQL can quote, as in MindsDB, but not one that cannot be read or
written back. Kept apart from `validate`, which imports the catalog.
"""

from __future__ import annotations

import re

from kbsql.interface.errors import InvalidParameter, clipped

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


def stored_name(value: str, what: str) -> str:
    """A project's, view's, data source's or job's name as the catalog may store it: SQL
    takes any quoted name there (MindsDB's too), but a NUL, a line break or a name of only
    spaces cannot be written back. A REST job named `a<NUL>b` was stored and ran every hour
    while its POST answered 400 (the read-back's SQL literal ended at the NUL); a view
    `v<NUL>x` beside `v<NUL>w` answered 500 (SQLite's lower() stops at a NUL, so the two
    names were one); a name with a line break or only spaces cannot be told apart in SHOW
    output or a log line."""
    if _UNPRINTABLE.search(value) or not value.strip():
        raise InvalidParameter(f"Invalid {what} name {clipped(repr(value))}: a name cannot hold a "
                               "NUL, a line break or another control character, nor be only spaces")
    return value
