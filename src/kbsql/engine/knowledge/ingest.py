"""From inserted rows to chunk rows: ids, content and metadata columns, chunks.

Column rules (reference-behaviour.md): content columns default to `content`; the id is
`id_column`, else a column named `id`, else the first 16 hex digits of the md5 of the
content; with no `metadata_columns`, every other column is metadata. Each content column
of a row is chunked on its own; chunk ids are `<id>:<column>:<n>of<total>:<start>to<end>`
with true character offsets. A row whose content columns are all null/NaN/blank yields no
chunks and is skipped (never an upsert to nothing); ids must be scalars (see `id_text`);
metadata may not reuse the internal key names (`INTERNAL_KEYS`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any

from kbsql.engine.knowledge import json_chunking
from kbsql.engine.knowledge.chunking import (
    MAX_CHUNKS_PER_ROW,
    SOURCE,
    ChunkingConfig,
    TooManyChunks,
    split_text,
)
from kbsql.engine.knowledge.json_chunking import JsonChunkingConfig
from kbsql.interface.errors import InvalidParameter
from kbsql.interface.results import KB_INTERNAL_METADATA


@dataclass
class Chunk:
    doc_id: str
    chunk_id: str
    content: str
    metadata: dict[str, Any]


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


# Keys every chunk's metadata carries (contract); a user column of the same name would be
# ambiguous in filters and results, so it is refused at CREATE/ALTER and at insert.
INTERNAL_KEYS = frozenset(KB_INTERNAL_METADATA)  # declared once, in the interface


def id_text(value: Any, index: int | None = None) -> str:
    """The text form of a document id.

    Ids are scalars: a non-empty string, an integer, a finite float (an integer-valued one
    reads as that integer, so 7 and 7.0 from a DataFrame with NaN name the same document),
    a decimal, a UUID, or a date/time (its ISO text). Objects, lists, booleans, NaN/inf and
    blank strings are refused: their text form would be an accident, not an id a user can
    later write in `WHERE id = ...`.
    """
    value = plain(value)
    where = f"row {index}: " if index is not None else ""
    if isinstance(value, bool) or not isinstance(value, str | int | float | decimal.Decimal | uuid.UUID):
        raise InvalidParameter(f"{where}id {value!r} is not usable as an id: use a string or a number "
                               f"(got {type(value).__name__})")
    if isinstance(value, float | decimal.Decimal):
        if not math.isfinite(value):
            raise InvalidParameter(f"{where}id {value!r} is not a finite number")
        if value == int(value):
            return str(int(value))
    if isinstance(value, str) and not value.strip():
        raise InvalidParameter(f"{where}the id is blank")
    return str(value)


def check_metadata_columns(columns: list[str] | None) -> None:
    """Refuse declared metadata columns named like an internal metadata key."""
    clash = sorted(set(columns or ()) & INTERNAL_KEYS)
    if clash:
        raise InvalidParameter(f"metadata column(s) {clash} clash with the metadata keys every chunk carries "
                               f"({sorted(INTERNAL_KEYS)}): rename the column(s)")


def unplaced_column(names: Any, spec: dict[str, Any]) -> str | None:
    """The one line refusing a column an insert names that the knowledge base has no place
    for (with `metadata_columns` declared, neither content, metadata nor the id): it would be
    dropped, as `prodcut` was ("OK, 1 row affected", `product` stored as null). None: every
    name has a place (without `metadata_columns` every other column is metadata)."""
    from kbsql.engine.spelling import did_you_mean

    declared = spec.get("metadata_columns")
    if declared is None:
        return None
    known = [*(spec.get("content_columns") or ["content"]), *declared, spec.get("id_column") or "id"]
    for name in names:
        if name not in known:
            return (f"column '{name}' is neither a content, metadata nor id column of this "
                    f"knowledge base{did_you_mean(str(name), known) or f' (its columns: {known})'}")
    return None


class RowChunker:
    """Turns rows into chunks following one knowledge base's spec."""

    def __init__(self, spec: dict[str, Any], max_chunks: int = MAX_CHUNKS_PER_ROW):
        self.max_chunks = max_chunks  # per row (chunking.MAX_CHUNKS_PER_ROW)
        self.content_columns = list(spec.get("content_columns") or ["content"])
        self.metadata_columns = spec.get("metadata_columns")
        self.id_column = spec.get("id_column")
        self.config = ChunkingConfig.from_preprocessing(spec.get("preprocessing"))
        pre = spec.get("preprocessing") or {}
        self.json = (JsonChunkingConfig.from_dict(pre.get("json_chunking_config"))
                     if isinstance(pre, dict) and pre.get("type") == "json_chunking" else None)

    def document_id(self, row: dict[str, Any], texts: dict[str, str], index: int) -> str:
        if self.id_column:
            if plain(row.get(self.id_column)) is None:
                raise InvalidParameter(f"row {index} has no value for the id column '{self.id_column}'")
            return id_text(row[self.id_column], index)
        if plain(row.get("id")) is not None:
            return id_text(row["id"], index)
        joined = "".join(texts[c] for c in self.content_columns if c in texts)
        return hashlib.md5(joined.encode("utf-8")).hexdigest()[:16]

    def metadata(self, row: dict[str, Any], id_column: str | None, index: int) -> dict[str, Any]:
        """The row's metadata columns as MindsDB makes them (KnowledgeBaseTable's
        `_adapt_column_names`): a column whose value is an object (a PUT row's `"metadata":
        {"a": 1}`, a struct or jsonb column) gives its keys, any other value is kept under its
        column's name, text too: `metadata = '[1,2]'` is {"metadata": "[1,2]"} there as here.
        The object was nested under its column's name, so `WHERE a = 1` found nothing."""
        if self.metadata_columns is not None:
            pairs = [(c, plain(row.get(c))) for c in self.metadata_columns]
        else:
            skip = set(self.content_columns) | {id_column or "id"}
            pairs = [(k, plain(v)) for k, v in row.items() if k not in skip]
        out: dict[str, Any] = {}
        for column, value in pairs:
            if isinstance(value, dict):
                out.update(value)
            else:
                out[column] = value
        clash = INTERNAL_KEYS.intersection(out)
        if clash:
            raise InvalidParameter(f"row {index}: column(s) or key(s) {sorted(clash)} would be metadata "
                                   f"but clash with the metadata keys every chunk carries; rename them, or "
                                   f"list the wanted columns in metadata_columns")
        return out

    def _json_chunks(self, doc_id: str, texts: dict[str, str], user_meta: dict[str, Any],
                     index: int) -> list[Chunk]:
        """json_chunking: chunks from the JSON structure (offsets span each chunk's own text,
        as the reference's JSONChunkingPreprocessor writes them)."""
        assert self.json is not None
        out: list[Chunk] = []
        for column, text in texts.items():
            pieces = [(c, m) for c, m in json_chunking.chunks(text, self.json, f"row {index} column {column}")
                      if c.strip()]
            if len(out) + len(pieces) > self.max_chunks:  # as split_text's bound on a text
                raise TooManyChunks(f"row {index}: the JSON would make more than {self.max_chunks} chunks "
                                    "(json_chunking: one per item or field), the most one row may make "
                                    "(max_chunks_per_row); split it into several rows")
            for n, (content, extracted) in enumerate(pieces):
                meta = {**extracted, **(user_meta if self.json.include_metadata else {})}
                meta.update({"chunk_index": n, "content_column": column, "start_char": 0,
                             "end_char": len(content), "original_doc_id": doc_id,
                             "original_row_index": str(index), "source": json_chunking.SOURCE})
                out.append(Chunk(doc_id, f"{doc_id}:{column}:{n + 1}of{len(pieces)}:0to{len(content)}",
                                 content, meta))
        return out

    def chunks(self, row: dict[str, Any], index: int) -> tuple[str, list[Chunk]] | None:
        """(document id, chunks) of one row; `index` is its position in the insert.

        None when every content column is null, NaN or blank: such a row is skipped (the
        caller counts it) and never replaces a stored document with nothing."""
        if not any(c in row for c in self.content_columns):
            raise InvalidParameter(f"row {index} has none of the content columns {self.content_columns}; "
                                   f"its columns are {sorted(row)}")
        texts = {}
        for column in self.content_columns:
            value = plain(row.get(column))
            if value is not None and str(value).strip():
                texts[column] = value if isinstance(value, str) else json.dumps(value, default=str)
        if not texts:
            return None
        doc_id = self.document_id(row, texts, index)
        user_meta = self.metadata(row, self.id_column if self.id_column else
                                  ("id" if "id" in row else None), index)
        if self.json is not None:
            return doc_id, self._json_chunks(doc_id, texts, user_meta, index)
        out: list[Chunk] = []
        for column, text in texts.items():
            try:
                spans = split_text(text, self.config, self.max_chunks - len(out))
            except TooManyChunks as exc:
                raise TooManyChunks(f"row {index}: {exc.detail}") from None
            for n, (start, end) in enumerate(spans):
                meta = dict(user_meta)
                meta.update({"chunk_index": n, "content_column": column, "start_char": start,
                             "end_char": end, "original_doc_id": doc_id,
                             "original_row_index": str(index), "source": SOURCE})
                out.append(Chunk(doc_id, f"{doc_id}:{column}:{n + 1}of{len(spans)}:{start}to{end}",
                                 text[start:end], meta))
        return doc_id, out
