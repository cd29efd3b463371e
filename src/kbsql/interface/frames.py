"""Tables crossing the API: a DataFrame as Arrow, an uploaded file as Arrow.

Shared by the engine (which stores registered frames) and the HTTP client (which uploads
them as Parquet), so the client needs nothing from the engine to send a DataFrame.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kbsql.interface.errors import BadRequest

__all__ = ["read_parquet_bounded", "read_uploaded", "to_arrow"]


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


MAX_UPLOADED_TABLE_BYTES = 512 * 1024 * 1024
"""The most an uploaded Parquet file may take once decoded. Parquet stores a column of
repeated values in almost nothing (200 KB for 50M zeros, 400 MB decoded), so the body limit
alone does not bound the memory an upload takes: a 64 MB file could decode to tens of GB."""
UPLOAD_BATCH_ROWS = 4096


def read_uploaded(raw: bytes, content_type: str = "",
                  max_table_bytes: int = MAX_UPLOADED_TABLE_BYTES) -> pa.Table:
    """An uploaded file as a table: Parquet (by its magic bytes) or CSV (by content type).
    Anything else, a file that does not parse, or a Parquet file decoding to more than
    `max_table_bytes` is a 400 naming the problem."""
    import io

    try:
        if raw[:4] == b"PAR1":
            return read_parquet_bounded(io.BytesIO(raw), max_table_bytes)
        if "csv" in content_type:
            import pyarrow.csv as pcsv

            return pcsv.read_csv(io.BytesIO(raw))
    except (pa.ArrowException, OSError) as exc:
        raise BadRequest(f"The uploaded file cannot be read: {exc}", title="Invalid file") from exc
    raise BadRequest("Upload a Parquet file (or CSV with Content-Type: text/csv)",
                     title="Invalid file")


def read_parquet_bounded(source: Any, limit: int) -> pa.Table:
    """Decode in small batches, counting the decoded bytes: a file whose table would pass
    `limit` is refused before it has taken more than about that much memory."""
    import pyarrow.parquet as pq  # here, not at import: ~5 MB an idle server never needs

    file = pq.ParquetFile(source)
    batches, size = [], 0
    for batch in file.iter_batches(batch_size=UPLOAD_BATCH_ROWS):
        size += batch.nbytes
        if size > limit:
            raise BadRequest(f"The uploaded Parquet file decodes to more than {limit // 2**20} MB "
                             f"(it holds {file.metadata.num_rows} rows): upload it in parts, or "
                             "read it as a `files` data source", title="Invalid file")
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=file.schema_arrow)
