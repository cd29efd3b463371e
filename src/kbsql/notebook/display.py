"""How results look in a notebook: limited DataFrame views, ok confirmations, short errors.

Why a DataFrame subclass: the magic must *return* the full DataFrame (so `df = %kbsql ...`
and `Out[n]` hold every row) while the cell *shows* only `displaylimit` rows. The subclass
changes nothing but its own repr, and every derived frame (`df.head()`, `df[...]`) is a plain
DataFrame again, so nothing downstream sees a foreign type.
"""

from __future__ import annotations

import html
import re

import pandas as pd

from kbsql.interface.results import OkResult, TableResult
from kbsql.notebook import table_view


def to_frame(result: TableResult) -> pd.DataFrame:
    """The result as a DataFrame, exactly as `client.query()` gives it: the dtype rules (the
    relevance/distance scores as float64, metadata as dicts) live in `TableResult.to_pandas`,
    so a cell and a script see the same frame."""
    return result.to_pandas()


class ResultFrame(pd.DataFrame):
    """A DataFrame that shows at most `display_limit` rows (None or 0: all of them), through
    `table_view` (internal metadata keys hidden, scores rounded, long text behind a click),
    with notes under the table (rows not shown, a default LIMIT that applied)."""

    _metadata = ["_display_limit", "_notes", "_full", "_internal_metadata"]

    @property
    def _constructor(self):  # derived frames are plain DataFrames
        return pd.DataFrame

    @classmethod
    def wrap(cls, frame: pd.DataFrame, display_limit: int | None, *, notes: list[str] | None = None,
             full: bool = False, internal_metadata: bool = False) -> ResultFrame:
        out = cls(frame)
        out._display_limit = display_limit
        out._notes = list(notes or [])
        out._full = full
        out._internal_metadata = internal_metadata
        return out

    def _shown(self) -> tuple[pd.DataFrame, list[str]]:
        limit = getattr(self, "_display_limit", None)
        plain = pd.DataFrame(self)
        notes = list(getattr(self, "_notes", []))
        if limit and len(plain) > limit:
            notes.insert(0, f"{limit} of {len(plain):,} rows shown; the returned DataFrame has all of "
                            "them (set %config KbSql.displaylimit to change)")
            plain = plain.head(limit)
        shown = table_view.display_frame(plain, internal_metadata=getattr(self, "_internal_metadata", False))
        return shown, notes

    def _repr_html_(self) -> str | None:
        shown, notes = self._shown()
        body = table_view.frame_html(shown, full=getattr(self, "_full", False))
        if shown.empty:  # a bare header said nothing of why
            notes.insert(0, "No rows.")
        return body + "".join(f'<p class="kbsql-note"><small>{html.escape(n)}</small></p>' for n in notes)

    def __repr__(self) -> str:
        shown, notes = self._shown()
        if shown.empty:  # not pandas' "Empty DataFrame / Columns: [...] / Index: []"
            columns = ", ".join(map(str, shown.columns))
            text = f"No rows (columns: {columns})." if columns else "No rows."
        else:
            text = table_view.frame_text(shown, full=getattr(self, "_full", False))
        return text + "".join(f"\n{n}" for n in notes)


def default_limit_note(limit: int) -> str:
    """Under a search cut by the service's default LIMIT: say so, and how to get more."""
    return (f"A search without LIMIT returns at most {limit} rows: there may be more matches "
            f"(add LIMIT n to get them)")


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


_READS = re.compile(r"^\s*(SELECT|WITH|SHOW|DESCRIBE|DESC|EXPLAIN)\b", re.IGNORECASE)


def interrupted(exc: KeyboardInterrupt, where: str | None = None, *, remote: bool = False,
                sql: str | None = None, at: str = "") -> ShortError:
    """Ctrl-C (a kernel interrupt) as one line saying what was kept, so the cell fails
    without a traceback. The engine says it when it knows (`Interrupted`: an insert's rows
    stored, a DuckDB statement stopped); a server cannot be asked, so for one the line says
    the client stopped waiting; `sql` None is an agent's answer. `at` (`statement 2 of 3`)
    titles it as short_error does: 'nothing stored' is the stopped statement's, not the
    cell's, whose statements before it ran."""
    from kbsql.interface.errors import Interrupted

    if isinstance(exc, Interrupted) and exc.message:
        message = exc.message
    elif sql is None:
        message = "the answer was stopped (it is not added to the conversation)"
    elif remote:
        message = "stopped waiting for the server" + (
            "" if _READS.match(sql) else ", which may still finish the statement "
            "(information_schema.queries there lists its inserts)")
    else:
        message = "the statement was stopped" if _READS.match(sql) else "nothing stored"
    return ShortError(message, "Interrupted" + _title_suffix(at, where))


def _title_suffix(at: str, where: str | None) -> str:
    """` in statement 2 of 3 [alias: place]`: which statement of a cell, which connection."""
    return (f" in {at}" if at else "") + (f" [{where}]" if where else "")


def short_error(exc: BaseException, where: str | None = None, at: str = "") -> ShortError:
    """The short form of a kbsql error: the service's own message, titled by its kind, the
    statement of a cell's several that failed (`at`: `statement 2 of 3`) and, when known, the
    connection that answered (`SQL error in statement 2 of 3 [remote: http://...]`), since
    with two connections open the same message can come from either."""
    from kbsql.interface.control import Stopped
    from kbsql.interface.errors import ServiceError, SqlError, TransportError
    from kbsql.notebook.connections import ConnectionProblem

    suffix = _title_suffix(at, where)
    if isinstance(exc, Stopped):
        return ShortError(f"The statement was stopped: {exc.reason}", "Stopped" + suffix)
    if isinstance(exc, SqlError):
        return ShortError(exc.message, "SQL error" + suffix)
    if isinstance(exc, ServiceError):  # the hint: a name one edit away (the embedded engine's)
        return ShortError(exc.detail + exc.hint, exc.title + suffix)
    if isinstance(exc, TransportError | ConnectionProblem):
        return ShortError(str(exc), "Connection error" + suffix)
    return ShortError(str(exc), "Error" + suffix)

