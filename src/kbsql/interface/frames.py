"""Tables crossing the API: a DataFrame as Arrow, an uploaded file as Arrow.

Shared by the engine (which stores registered frames) and the HTTP client (which uploads
them as Parquet), so the client needs nothing from the engine to send a DataFrame.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kbsql.interface.errors import BadRequest

__all__ = ["read_uploaded", "to_arrow"]


def to_arrow(frame: Any) -> pa.Table:
    """A pandas DataFrame (or anything Arrow accepts) as an Arrow table, index dropped."""
    if isinstance(frame, pa.Table):
        return frame
    try:
        import pandas as pd

        if isinstance(frame, pd.DataFrame):
            frame = frame.copy(deep=True)  # Arrow would share the caller's numpy buffers
            frame.columns = [str(c) for c in frame.columns]
            return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise BadRequest(f"The DataFrame cannot be stored as a table: {exc}",
                         title="Invalid table") from exc
    raise BadRequest(f"Expected a pandas DataFrame, got {type(frame).__name__}",
                     title="Invalid table")


def read_uploaded(raw: bytes, content_type: str = "") -> pa.Table:
    """An uploaded file as a table: Parquet (by its magic bytes) or CSV (by content type).
    Anything else, or a file that does not parse, is a 400 naming the problem."""
    import io

    try:
        if raw[:4] == b"PAR1":
            import pyarrow.parquet as pq  # here, not at import: ~5 MB an idle server never needs

            return pq.read_table(io.BytesIO(raw))
        if "csv" in content_type:
            import pyarrow.csv as pcsv

            return pcsv.read_csv(io.BytesIO(raw))
    except (pa.ArrowException, OSError) as exc:
        raise BadRequest(f"The uploaded file cannot be read: {exc}", title="Invalid file") from exc
    raise BadRequest("Upload a Parquet file (or CSV with Content-Type: text/csv)",
                     title="Invalid file")
