"""A knowledge base's columns in SQL: which name a WHERE, a SELECT or an UPDATE means.

`Columns` resolves a name as the reference does, case-insensitively: the row's own columns
(`id`, `chunk_id`, `chunk_content`; `content` and MindsDB's `_original_doc_id` read as those),
the declared metadata columns and the keys its chunking writes (`info.category`), the chunk
keys kbsql writes itself; a name the knowledge base cannot hold is one SQL error naming the
near one, never a filter that matches nothing (kb_where.py reads conditions with it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kbsql.engine.knowledge.ingest import INTERNAL_KEYS
from kbsql.engine.knowledge.json_chunking import metadata_keys
from kbsql.engine.spelling import did_you_mean
from kbsql.interface.errors import SqlError

if TYPE_CHECKING:
    from kbsql.engine.catalog import KbRecord
    from kbsql.engine.knowledge.service import KnowledgeService

HasKey = Callable[[str], bool]
"""Whether some chunk of the knowledge base holds a metadata key (`KbService.has_metadata_key`)."""
CONTENT = ("content",)
ROW_COLUMNS = ("id", "chunk_id", "chunk_content")


class Columns:
    """Resolves a column name as the reference does: case-insensitively, refusing a name the
    knowledge base cannot hold (declared metadata columns; without them, a key no chunk holds,
    as MindsDB checks its `inserted_metadata`), rather than matching nothing."""

    def __init__(self, metadata_columns: list[str] | None, extra_keys: tuple[str, ...] = (),
                 has_key: HasKey | None = None):
        """`extra_keys`: metadata keys the knowledge base writes besides its columns (a
        json_chunking `metadata_fields` path such as `info.category`). `has_key`: asked for a
        name that is none of those when no metadata columns are declared (None: any name)."""
        self.declared = metadata_columns
        self.has_key = has_key
        declared = {c.lower() for c in metadata_columns or []}
        self.listed = None if metadata_columns is None else \
            [*metadata_columns, *(k for k in extra_keys if k.lower() not in declared)]
        """The metadata columns a SELECT reads by name: the declared ones and the keys the
        chunking writes (`info.category`); None when none are declared (a row's keys are)."""
        self.by_lower = {c.lower(): c for c in [*(metadata_columns or []), *extra_keys]}
        self.by_lower.update({k.lower(): k for k in INTERNAL_KEYS})

    @classmethod
    def of(cls, record: KbRecord, service: KnowledgeService | None = None) -> Columns:
        """The columns of knowledge base `record`: its declared metadata columns and the keys
        its chunking writes; with `service`, an undeclared name is looked for in its chunks
        (a filter or a read), without it any name is a key (an UPDATE may set a new one)."""
        has_key = None if service is None else (lambda key: service.has_metadata_key(record, key))
        return cls(record.metadata_columns, metadata_keys(record.spec), has_key)

    def dotted(self, parts: list[str]) -> str | None:
        """A name written with dots (`info.category`, or `kb.info.category`) that is a known
        metadata key, else None (then `kb.product` is column `product` of table `kb`)."""
        for start in range(len(parts) - 1):
            found = self.by_lower.get(".".join(parts[start:]).lower())
            if found is not None:
                return found
        return None

    def resolve(self, name: str) -> str:
        lowered = name.lower()
        if lowered in ROW_COLUMNS:
            return lowered
        if lowered in CONTENT:  # only `content IS [NOT] NULL` is a filter (_content_leaf)
            return "chunk_content"
        if lowered == "_original_doc_id":  # MindsDB's vector-store name of the id
            return "id"
        if lowered in self.by_lower:
            return self.by_lower[lowered]
        if self.declared is None and (self.has_key is None or self.has_key(name)):
            return name
        if self.declared is None:
            raise SqlError(f"Unknown column {name!r} in a knowledge-base condition: no chunk has "
                           f"metadata {name!r} (names of inserted columns are kept as written); the "
                           f"columns are ['id', 'chunk_id', 'chunk_content'] and the chunk keys "
                           f"{sorted(INTERNAL_KEYS)}")
        near = did_you_mean(name, [*ROW_COLUMNS, *self.declared])  # `prodcut`, as an INSERT says
        raise SqlError(f"Unknown column {name!r} in a knowledge-base condition{near}: the columns are "
                       f"['id', 'chunk_id', 'chunk_content'], the metadata columns {self.declared} "
                       f"and the chunk keys {sorted(INTERNAL_KEYS)}")
