"""How results look in a notebook: limited DataFrame views, ok confirmations, short errors.

Why a DataFrame subclass: the magic must *return* the full DataFrame (so `df = %kbsql ...`
and `Out[n]` hold every row) while the cell *shows* only `displaylimit` rows. The subclass
changes nothing but its own repr, and every derived frame (`df.head()`, `df[...]`) is a plain
DataFrame again, so nothing downstream sees a foreign type.
"""

from __future__ import annotations

import html

import pandas as pd

from kbsql.interface.results import OkResult, TableResult


def to_frame(result: TableResult) -> pd.DataFrame:
    """The result as a DataFrame, exactly as `client.query()` gives it: the dtype rules (the
    relevance/distance scores as float64, metadata as dicts) live in `TableResult.to_pandas`,
    so a cell and a script see the same frame."""
    return result.to_pandas()


class ResultFrame(pd.DataFrame):
    """A DataFrame that shows at most `display_limit` rows (None or 0: all of them)."""

    _metadata = ["_display_limit"]

    @property
    def _constructor(self):  # derived frames are plain DataFrames
        return pd.DataFrame

    @classmethod
    def wrap(cls, frame: pd.DataFrame, display_limit: int | None) -> ResultFrame:
        out = cls(frame)
        out._display_limit = display_limit
        return out

    def _shown(self) -> tuple[pd.DataFrame, str | None]:
        limit = getattr(self, "_display_limit", None)
        plain = pd.DataFrame(self)
        if not limit or len(plain) <= limit:
            return plain, None
        note = (f"{limit} of {len(plain):,} rows shown; the returned DataFrame has all of them "
                "(set %config KbSql.displaylimit to change)")
        return plain.head(limit), note

    def _repr_html_(self) -> str | None:
        shown, note = self._shown()
        body = shown._repr_html_() or html.escape(repr(shown))
        return body + (f"<p><small>{html.escape(note)}</small></p>" if note else "")

    def __repr__(self) -> str:
        shown, note = self._shown()
        return repr(shown) + (f"\n{note}" if note else "")


def ok_message(result: OkResult, previous_project: str | None = None) -> str:
    """A one-line confirmation for a statement without rows."""
    parts = ["OK"]
    if result.affected_rows is not None:
        rows = result.affected_rows
        parts.append(f"{rows} row{'s' if rows != 1 else ''} affected")
    db = (result.context or {}).get("db")
    if db and previous_project and db != previous_project:
        parts.append(f"current project: {db}")
    return ", ".join(parts) + "."


class ShortError(Exception):
    """An error shown as its message only, in red, with no Python traceback (like JupySQL).

    IPython calls `_render_traceback_` instead of formatting a traceback; raising still
    fails the cell, so "Run all" stops there."""

    def __init__(self, message: str, kind: str = "Error"):
        super().__init__(message)
        self.message = message
        self.kind = kind

    def _render_traceback_(self) -> list[str]:
        lines = f"{self.kind}: {self.message}".splitlines() or [self.kind]
        return [f"\x1b[0;31m{line}\x1b[0m" for line in lines]


def short_error(exc: BaseException) -> ShortError:
    """The short form of a kbsql error: the service's own message, titled by its kind."""
    from kbsql.interface.errors import ServiceError, SqlError, TransportError

    if isinstance(exc, SqlError):
        return ShortError(exc.message, "SQL error")
    if isinstance(exc, ServiceError):
        return ShortError(exc.detail, exc.title)
    if isinstance(exc, TransportError):
        return ShortError(str(exc), "Connection error")
    return ShortError(str(exc), "Error")

