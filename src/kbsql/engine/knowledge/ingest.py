"""From inserted rows to chunk rows: ids, content and metadata columns, chunks.

Column rules (reference-behaviour.md): content columns default to `content`; the id is
`id_column`, else a column named `id`, else the first 16 hex digits of the md5 of the
content; with no `metadata_columns`, every other column is metadata. Each content column
of a row is chunked on its own; chunk ids are `<id>:<column>:<n>of<total>:<start>to<end>`
with true character offsets.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kbsql.engine.knowledge.chunking import SOURCE, ChunkingConfig, split_text
from kbsql.interface.errors import BadRequest


@dataclass
class Chunk:
    doc_id: str
    chunk_id: str
    content: str
    metadata: dict[str, Any]


def row_count(rows: Any) -> int:
    return len(rows)


def iter_batches(rows: Any, size: int) -> Iterator[list[dict[str, Any]]]:
    """Rows as lists of plain dicts, `size` at a time (a DataFrame is never copied whole)."""
    if hasattr(rows, "iloc") and hasattr(rows, "columns"):
        for start in range(0, len(rows), size):
            yield rows.iloc[start:start + size].to_dict("records")
        return
    if not isinstance(rows, list | tuple):
        raise BadRequest("rows must be a list of objects or a DataFrame", title="Invalid parameter")
    for start in range(0, len(rows), size):
        batch = list(rows[start:start + size])
        for row in batch:
            if not isinstance(row, dict):
                raise BadRequest("each row must be an object (column -> value)", title="Invalid parameter")
        yield batch


def plain(value: Any) -> Any:
    """A JSON-able Python value: NaN/NaT -> None, numpy scalars -> Python, times -> text."""
    if value is None or type(value).__name__ in ("NaTType", "NAType"):
        return None
    if hasattr(value, "item") and not isinstance(value, list | dict | str | bytes):
        try:
            value = value.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def id_text(value: Any) -> str:
    value = plain(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class RowChunker:
    """Turns rows into chunks following one knowledge base's spec."""

    def __init__(self, spec: dict[str, Any]):
        self.content_columns = list(spec.get("content_columns") or ["content"])
        self.metadata_columns = spec.get("metadata_columns")
        self.id_column = spec.get("id_column")
        self.config = ChunkingConfig.from_preprocessing(spec.get("preprocessing"))

    def document_id(self, row: dict[str, Any], texts: dict[str, str], index: int) -> str:
        if self.id_column:
            if plain(row.get(self.id_column)) is None:
                raise BadRequest(f"row {index} has no value for the id column '{self.id_column}'",
                                 title="Invalid parameter")
            return id_text(row[self.id_column])
        if plain(row.get("id")) is not None:
            return id_text(row["id"])
        joined = "".join(texts[c] for c in self.content_columns if c in texts)
        return hashlib.md5(joined.encode("utf-8")).hexdigest()[:16]

    def metadata(self, row: dict[str, Any], id_column: str | None) -> dict[str, Any]:
        if self.metadata_columns is not None:
            return {c: plain(row.get(c)) for c in self.metadata_columns}
        skip = set(self.content_columns) | {id_column or "id"}
        return {k: plain(v) for k, v in row.items() if k not in skip}

    def chunks(self, row: dict[str, Any], index: int) -> tuple[str, list[Chunk]]:
        """(document id, chunks) of one row; `index` is its position in the insert."""
        if not any(c in row for c in self.content_columns):
            raise BadRequest(f"row {index} has none of the content columns {self.content_columns}; "
                             f"its columns are {sorted(row)}", title="Invalid parameter")
        texts = {}
        for column in self.content_columns:
            value = plain(row.get(column))
            if value is not None and str(value).strip():
                texts[column] = value if isinstance(value, str) else json.dumps(value, default=str)
        doc_id = self.document_id(row, texts, index)
        user_meta = self.metadata(row, self.id_column if self.id_column else
                                  ("id" if "id" in row else None))
        out = []
        for column, text in texts.items():
            spans = split_text(text, self.config)
            for n, (start, end) in enumerate(spans):
                meta = dict(user_meta)
                meta.update({"chunk_index": n, "content_column": column, "start_char": start,
                             "end_char": end, "original_doc_id": doc_id,
                             "original_row_index": str(index), "source": SOURCE})
                out.append(Chunk(doc_id, f"{doc_id}:{column}:{n + 1}of{len(spans)}:{start}to{end}",
                                 text[start:end], meta))
        return doc_id, out
