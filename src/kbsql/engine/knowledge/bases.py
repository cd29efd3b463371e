"""Knowledge-base operations that span the catalog and the knowledge service.

Creating, filling and dropping a knowledge base each touch two stores: the catalog (the
record and its spec) and the knowledge service (chunks and vectors). This facade is the one
place that keeps them in step, used alike by the REST routes (through `Engine`) and by SQL
(`CREATE KNOWLEDGE_BASE`, `INSERT INTO kb`, `DROP KNOWLEDGE_BASE`), so both doors
validate and store the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from kbsql.engine import validate
from kbsql.engine.catalog import Catalog, KbRecord
from kbsql.engine.knowledge import batch_insert
from kbsql.engine.knowledge.service import DEFAULT_VECTOR_DATABASE, SHARED_VECTOR_DATABASE, KnowledgeService
from kbsql.interface.control import Control, current
from kbsql.interface.errors import BadRequest, Conflict, InsufficientStorage, Unavailable
from kbsql.interface.models import KnowledgeBase, lifted_params
from kbsql.interface.progress import OnProgress

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_VECTOR_DATABASE", "KnowledgeBases"]


class KnowledgeBases:
    """Create / insert / delete for knowledge bases, over `catalog` and `service`."""

    def __init__(self, catalog: Catalog, service: KnowledgeService):
        self.catalog = catalog
        self.service = service

    def create(self, project: str, body: dict[str, Any], if_not_exists: bool = False) -> KbRecord:
        """Validate everything, check the models answer, then store: nothing half-made."""
        body = lifted_params(validate.require_object(body, "knowledge_base"), KnowledgeBase.PARAMS_FIELDS)
        name = validate.name(body.get("name"), "knowledge base")
        validate.kb_create_params(body.get("params"))
        self.catalog.project(project)  # 404 before any provider call
        existing = self.catalog.find_knowledge_base(project, name)
        if existing is not None and if_not_exists:
            return existing
        self.catalog.check_name_free(project, name, "knowledge base")  # before provider calls
        store = validate.storage(body.get("storage"))
        # no storage: the local store, or pgvector in the database of a shared catalog
        database, table = ((store["database"], store["table"]) if store
                           else self.service.default_storage(project, name))
        spec = {
            "vector_database": database,
            "vector_database_table": table,
            "embedding_model": validate.model(body.get("embedding_model"), "embedding_model")
            or self.service.pinned_default(),
            "reranking_model": validate.model(body.get("reranking_model"), "reranking_model"),
            "metadata_columns": validate.string_list(body.get("metadata_columns"), "metadata_columns"),
            "content_columns": validate.string_list(body.get("content_columns"), "content_columns"),
            "id_column": validate.optional_string(body.get("id_column"), "id_column"),
            "preprocessing": validate.preprocessing(body.get("preprocessing")),
            "query_id": None,
            "params": {"created_embedding_model": f"kb_embedding_{name}",
                       "default_vector_storage": self.service.default_storage(project, name)[0]},
        }
        if existing is None:  # a duplicate is a 409 from the catalog; skip the provider call
            if not self.service.vector_source(database).local:  # a table others may name too
                self._check_table_free(database, table)
            self.service.check_models(spec)
        record = self.catalog.create_knowledge_base(project, name, spec)
        try:
            self.service.create_storage(record)
        except Unavailable as exc:  # a storage named in this statement that does not answer
            self.catalog.delete_knowledge_base(record)
            if database == SHARED_VECTOR_DATABASE:  # the shared catalog's own: away for now
                raise
            raise BadRequest(exc.detail, title="Invalid storage") from None
        except BaseException:  # e.g. the pgvector server refused: nothing half-made stays
            self.catalog.delete_knowledge_base(record)
            raise
        return record

    def _check_table_free(self, database: str, table: str) -> None:
        """One PostgreSQL table holds one knowledge base: a second KB on it would mix chunks
        (and dropping either would drop both)."""
        for other in self.catalog.knowledge_bases():
            if (str(other.spec.get("vector_database", "")).lower() == database.lower()
                    and str(other.spec.get("vector_database_table", "")).lower() == table.lower()):
                raise Conflict(f"Table {table} of {database} already stores knowledge base "
                               f"{other.project_name}.{other.name}", title="Storage in use")

    def delete(self, project: str, name: str) -> None:
        record = self.catalog.knowledge_base(project, name)
        self.catalog.delete_knowledge_base(record)  # atomic; files go after, ids never reused
        self.service.drop_storage(record)

    def insert_rows(self, record: KbRecord, rows: Any, progress: OnProgress | None = None) -> int:
        """Insert rows (list of dicts or a DataFrame) into a knowledge base; returns the count
        of rows stored (rows without content are skipped)."""
        return self.insert(record, rows, progress)[0]

    def insert(self, record: KbRecord, rows: Any,
               progress: OnProgress | None = None) -> tuple[int, KbRecord]:
        """`insert_rows`, answering also the record as stored after it (its new
        `updated_at`), for an answer that shows the knowledge base without reading it back.
        The REST insert's policy: one transaction, row positions counted across the call.
        The record is touched inside that transaction, before it commits: a catalog that
        cannot store it (a full disk) leaves nothing of the insert stored, so its 507 is true
        (a commit failing after the touch leaves only updated_at moved). The statement's or
        request's deadline and cancellation (`control.current()`) stop it between batches,
        with nothing stored (batch_insert.py)."""
        batches, total = self.service.row_batches(rows)
        touched: list[KbRecord] = []

        def touch() -> None:
            touched.append(self.catalog.update_knowledge_base(record))
        count = batch_insert.insert(self.service, record, batches, total, batch_insert.Policy.ONE_TRANSACTION,
                                    progress, touch, watch=current())
        return count, touched[0] if touched else self.catalog.update_knowledge_base(record)

    def insert_batches(self, record: KbRecord, batches: Sequence[list[dict[str, Any]]], *,
                       threads: int = 1, skip: bool = False,
                       progress: OnProgress | None = None,
                       total_rows: int | None = None, watch: Control | None = None) -> int:
        """`INSERT ... USING batch_size, threads, error`: batches embedded `threads` at a time,
        stored in order, one transaction each (knowledge/batch_insert.py); `watch` stops it
        between batches (an inline insert's statement; a background one stops itself)."""
        total = total_rows if total_rows is not None else sum(len(b) for b in batches)
        try:
            count = batch_insert.insert(self.service, record, batches, total,
                                        batch_insert.Policy.per_batch(threads, skip), progress, watch=watch)
        except BaseException:  # batches stored before a failure are there: the record says so,
            try:  # if it can; its error (a full disk's 507 with the rows kept) is the answer
                self.catalog.update_knowledge_base(record)
            except Exception as exc:
                log.warning("knowledge base %s: updated_at not recorded after a failed insert: %s",
                            record.name, exc)
            raise
        try:
            self.catalog.update_knowledge_base(record)
        except InsufficientStorage as exc:  # every batch is stored: say so, not "not stored"
            raise batch_insert.full_insert(f"{record.project_name}.{record.name}", count, count) from exc
        return count

    def delete_rows(self, record: KbRecord, filters: Any) -> int:
        """`DELETE FROM kb WHERE ...`: remove matching rows, then bump the record."""
        count = self.service.delete(record, filters)
        self.catalog.update_knowledge_base(record)
        return count
