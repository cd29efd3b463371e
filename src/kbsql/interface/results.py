"""SQL result shapes: `table`, `ok` and `error` answers of `POST /api/sql/query`."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbsql.interface.errors import SQL_ERROR, ServiceError, SqlError, codes_of, kind_of_code

if TYPE_CHECKING:  # pandas is imported lazily: a plain client call must not pay for it
    import pandas as pd


KB_COLUMNS = ("id", "chunk_id", "chunk_content", "metadata", "relevance", "distance")
"""Columns of a SELECT on a knowledge base, in the contract's order."""

KB_INTERNAL_METADATA = ("chunk_index", "content_column", "start_char", "end_char", "original_doc_id",
                        "original_row_index", "source")
"""The contract's metadata keys the engine writes itself (a declared metadata column can
never be named like one)."""
SCORE_COLUMNS = ("relevance", "distance")
"""Search scores: numbers, or null for a plain read. In a DataFrame they are float64 with NaN
for null on every path: an all-null column sent as JSON would otherwise stay an object
column of None over HTTP while the embedded Arrow result already gives float64."""


def default_context(db: str = "mindsdb") -> dict[str, Any]:
    return {"show_secrets": False, "db": db}


@dataclass
class TableResult:
    """Rows with their column names, as the service sent them."""

    column_names: list[str]
    data: list[list[Any]]
    context: dict[str, Any] = field(default_factory=default_context)
    type: str = "table"
    frame: Any = field(default=None, repr=False, compare=False)
    """A DataFrame of the same rows when the engine already has one (embedded mode)."""
    default_limit: int | None = None
    """Set when the service applied its default row limit (a search without LIMIT) and the
    result is as long as that limit, so more rows may exist: a notebook says so under the
    table. kbsql's own field: sent only when set, so the contract's fields stay as they are
    and other clients ignore it."""

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": "table", "column_names": list(self.column_names), "data": self.rows(),
                "context": dict(self.context)}
        if self.default_limit is not None:
            body["default_limit"] = self.default_limit
        return body

    def rows(self) -> list[list[Any]]:
        return self.data

    @property
    def arrow(self) -> Any:
        """The Arrow table the rows come from when the engine made them, else None (rows
        read from JSON). An adapter that streams a large result (the MySQL door) reads it batch
        by batch, with its column types, instead of building `data`."""
        return None

    @property
    def python_columns(self) -> Mapping[int, list[Any]]:
        """The columns (by position) whose values `data` gives as Python objects other than
        what `arrow` holds: JSON objects and lists (held in `arrow` as JSON text) and row
        values. Empty without `arrow`."""
        return {}

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a DataFrame whose columns are `column_names`, in order."""
        import pandas as pd

        if self.frame is not None:
            frame = self.frame.copy(deep=False)
        else:
            frame = pd.DataFrame.from_records(self.data, columns=list(self.column_names))
        return scores_as_float(frame)

    df = to_pandas  # DuckDB's spelling

    def __len__(self) -> int:
        return len(self.data)


def scores_as_float(frame: pd.DataFrame) -> pd.DataFrame:
    """Make an object column named relevance or distance float64 when it holds only numbers
    and nulls (see `SCORE_COLUMNS`); a column holding anything else is left as it is, never
    coerced to NaN."""
    names = list(frame.columns)
    for name in SCORE_COLUMNS:
        if names.count(name) != 1 or frame[name].dtype != object:
            continue
        values = frame[name]
        if all(v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool)) for v in values):
            frame[name] = values.astype("float64")
    return frame


@dataclass
class OkResult:
    """A statement without rows (CREATE, DROP, INSERT, DELETE, UPDATE, USE)."""

    affected_rows: int | None = None
    context: dict[str, Any] = field(default_factory=default_context)
    type: str = "ok"

    def to_json(self) -> dict[str, Any]:
        return {"type": "ok", "affected_rows": self.affected_rows, "context": dict(self.context)}


@dataclass
class ErrorResult:
    """An SQL error; on the wire it is an HTTP 200 answer. `kind` is its problem type (a key of
    `errors.KINDS`); `error_code`, MindsDB's code for it, is filled from that table and is
    what carries the kind over the wire (the answer's shape stays MindsDB's)."""

    error_message: str
    error_code: int = 0
    context: dict[str, Any] = field(default_factory=default_context)
    type: str = "error"
    kind: str = SQL_ERROR

    def __post_init__(self) -> None:
        if not self.error_code:
            self.error_code = codes_of(self.kind).mindsdb
        elif self.kind == SQL_ERROR:
            self.kind = kind_of_code(self.error_code)

    @classmethod
    def of(cls, error: SqlError | ServiceError, context: dict[str, Any]) -> ErrorResult:
        """The answer for an error raised while running a statement: its message (a service
        error's detail with its hint) and its kind."""
        message = error.message if isinstance(error, SqlError) else error.detail + error.hint
        return cls(message, context=context, kind=error.kind)

    def to_json(self) -> dict[str, Any]:
        return {"type": "error", "error_code": self.error_code,
                "error_message": self.error_message, "context": dict(self.context)}

    def to_exception(self) -> SqlError:
        return SqlError(self.error_message, self.error_code, self.context, kind=self.kind)


SqlResult = TableResult | OkResult | ErrorResult


def result_from_json(body: dict[str, Any]) -> SqlResult:
    """Read any of the three answer shapes."""
    kind = body.get("type")
    context = body.get("context") or {}
    if kind == "table":
        limit = body.get("default_limit")
        return TableResult(list(body.get("column_names") or []), body.get("data") or [], context,
                           default_limit=int(limit) if isinstance(limit, int) else None)
    if kind == "error":
        return ErrorResult(str(body.get("error_message")), body.get("error_code") or 0, context)
    if kind == "ok":
        return OkResult(body.get("affected_rows"), context)
    raise ValueError(f"unknown SQL result type {kind!r}")
