"""A knowledge base stored in PostgreSQL with pgvector: one table holds every chunk.

`CREATE DATABASE vdb WITH ENGINE = 'pgvector', PARAMETERS = {host, port, database, user,
password}` then `CREATE KNOWLEDGE_BASE kb USING storage = vdb.kb_chunks` puts the chunks of
`kb` in table `kb_chunks`: (seq, id, chunk_id, content, metadata jsonb, embedding vector(d),
updated_at, tsv tsvector). PostgreSQL is then the only state: any number of kbsql processes
read and write the same table, and backups, replicas and managed offerings come with it.

Search runs in the database: nearest neighbours by an HNSW index (cosine; its knobs and
builds: pg_hnsw.py; the search, filtered or not, and when it is exact: pg_nearest.py), hybrid
search by PostgreSQL full-text search (`tsv @@ to_tsquery`, `ts_rank_cd`).

Writes: one `write()` is one transaction holding a per-table advisory lock, so two
processes upserting the same document serialise instead of both keeping a copy, and a
killed writer leaves nothing (PostgreSQL rolls the transaction back).

psycopg 3 is an optional dependency (the `postgres` extra: `pip install -e '.[postgres]'`), imported through
engine/postgres/pg.py only when a knowledge base or the catalog lives in PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from kbsql.engine.knowledge.search import WORD, Conditions
from kbsql.engine.knowledge.storage import (
    OPERATOR_URL,
    SOURCE_HOSTS,
    ChunkBatch,
    StoragePlace,
    stamped_batches,
)
from kbsql.engine.postgres import pg_hnsw
from kbsql.engine.postgres.pg import (
    StorageUnavailable,
    acquire_pool,
    connection_errors,
    first_line,
    lock_key,
    psycopg_modules,
    release_pool,
    where_of,
)
from kbsql.engine.postgres.pg_filters import filter_sql, json_arg
from kbsql.engine.postgres.pg_hnsw import HnswSettings
from kbsql.engine.postgres.pg_nearest import nearest
from kbsql.interface.control import checkpoint, current
from kbsql.interface.errors import BadRequest

SETTINGS_TTL = 5.0  # seconds a server reuses a table's index settings before reading them again
TEXT_CONFIG = "english"  # full-text stemming, like the local store's porter tokenizer
REQUIRED_COLUMNS = {"seq", "id", "chunk_id", "content", "metadata", "embedding", "updated_at", "tsv"}
_EMPTY = (np.empty(0, np.float32), np.empty(0, np.int64))


def vector_text(vector: np.ndarray) -> str:
    """pgvector's text form `[x,y,...]` (COPY and parameters both take it)."""
    return str(vector.tolist()).replace(" ", "")


def _register_vector(conn: Any) -> None:
    """pgvector-python's adapters on this pooled connection, once (it looks the types up)."""
    if not conn.__dict__.get("_kbsql_vector_types"):
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn._kbsql_vector_types = True


class _Writer:
    def __init__(self, storage: PgVectorStorage, conn: Any, dim: int | None):
        self.storage, self.conn, self.dim = storage, conn, dim
        self.build_index = False

    def set_dim(self, dim: int) -> None:
        """First vectors: fix the column's dimension. The HNSW index is built when this
        transaction ends (`finish`): one bulk build is several times faster than growing
        the graph row by row through a large first insert."""
        self.conn.execute(self.storage.q(f"ALTER TABLE {{t}} ALTER COLUMN embedding TYPE vector({int(dim)})"))
        self.dim = dim
        self.build_index = True

    def finish(self) -> None:
        if self.build_index:
            s = self.storage
            rows = self.conn.execute(s.q("SELECT count(*) FROM {t}")).fetchone()[0]
            self.conn.execute(pg_hnsw.build_memory_sql(self.conn, rows, self.dim or 0, local=True))
            settings = pg_hnsw.read_settings(self.conn, s.schema, s.table)
            self.conn.execute(s.q("CREATE INDEX IF NOT EXISTS {hnsw} ON {t} USING hnsw "
                                  f"(embedding vector_cosine_ops) WITH ({settings.options()})"))
            self.conn.execute(s.q("ANALYZE {t}"))  # row estimates for filtered searches

    def replace(self, doc_ids: list[str], chunks: list[Any], vectors: np.ndarray, stamp: str) -> None:
        s = self.storage
        if doc_ids:
            self.conn.execute(s.q("DELETE FROM {t} WHERE id = ANY(%s)"), (list(doc_ids),))
        if not chunks:
            return
        _register_vector(self.conn)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        # binary COPY: the vectors go as float4 bytes (pgvector-python's dumper), not as
        # decimal text that Python formats and PostgreSQL parses back (half an insert's time)
        from psycopg.types.json import Jsonb

        with self.conn.cursor() as cur, cur.copy(s.q(
                "COPY {t} (id, chunk_id, content, metadata, embedding, updated_at) FROM STDIN "
                "WITH (FORMAT BINARY)")) as copy:
            copy.set_types(["text", "text", "text", "jsonb", "vector", "text"])
            for i, c in enumerate(chunks):
                copy.write_row((c.doc_id, c.chunk_id, c.content.replace("\x00", ""),
                                Jsonb(c.metadata, json_arg), vectors[i], stamp))


class PgVectorBackend:
    """Storage backend `pgvector`: a table in the database the place's PARAMETERS name."""

    def open(self, place: StoragePlace) -> PgVectorStorage:
        from kbsql.engine.postgres.postgres_source import connection, settings

        own = not place.parameters.get(OPERATOR_URL)  # a data source's: its own parameters only
        found = settings(place.parameters, own_only=own)
        hosts = place.parameters.get(SOURCE_HOSTS)  # a shared server: the source-host rule
        if own and hosts is not None:
            found = connection(found, tuple(hosts), f"pgvector storage {place.table}")
        return PgVectorStorage(found, place.table,
                               str(place.parameters.get("schema") or "public"))


class PgVectorStorage:
    """The chunks of one knowledge base in table `schema.table` of a PostgreSQL database."""

    def __init__(self, settings: dict[str, str], table: str, schema: str = "public"):
        self.settings = settings
        self.table, self.schema = table, schema
        self.pool = acquire_pool(settings)
        self._lock_key = lock_key(f"kbsql:{schema}.{table}")
        _, sql, _ = psycopg_modules()
        ident = hashlib.md5(f"{schema}.{table}".encode()).hexdigest()[:10]
        self.index_name = f"kbsql_{ident}_hnsw"
        self.iterative = False  # pgvector >= 0.8: iterative index scans (set by _ensure_table)
        self._settings: tuple[float, HnswSettings] | None = None  # (read at, settings)
        self._names = {"t": sql.Identifier(schema, table), "hnsw": sql.Identifier(self.index_name),
                       "hnsw_new": sql.Identifier(f"kbsql_{ident}_hnsw_new"),
                       "by_id": sql.Identifier(f"kbsql_{ident}_id"),
                       "by_chunk": sql.Identifier(f"kbsql_{ident}_chunk"),
                       "by_tsv": sql.Identifier(f"kbsql_{ident}_tsv")}
        try:
            self._ensure_table()
        except BaseException:
            release_pool(self.pool)
            raise

    def q(self, text: str) -> Any:
        """SQL text with {t} (the table) and index names filled in as quoted identifiers."""
        _, sql, _ = psycopg_modules()
        return sql.SQL(text).format(**{k: v for k, v in self._names.items() if "{" + k + "}" in text})

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        try:
            with self.pool.connection() as conn:
                yield conn
        except connection_errors() as exc:
            raise StorageUnavailable(f"PostgreSQL at {where_of(self.settings)} (table {self.table}): "
                                     f"{first_line(exc)}") from None

    def _ensure_table(self) -> None:
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            self.iterative = pg_hnsw.vector_version(conn) >= (0, 8)
            columns = {r[0] for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s", (self.schema, self.table))}
            if columns and not REQUIRED_COLUMNS <= columns:
                raise BadRequest(f"Table {self.schema}.{self.table} exists and is not a knowledge-base "
                                 f"table (it lacks {', '.join(sorted(REQUIRED_COLUMNS - columns))})",
                                 title="Invalid storage")
            if not columns:
                conn.execute(self.q(
                    "CREATE TABLE {t} (seq bigserial PRIMARY KEY, id text NOT NULL, "
                    "chunk_id text NOT NULL, content text NOT NULL, metadata jsonb NOT NULL, "
                    "embedding vector NOT NULL, updated_at text NOT NULL, tsv tsvector GENERATED "
                    f"ALWAYS AS (to_tsvector('{TEXT_CONFIG}', content)) STORED)"))
                conn.execute(self.q("CREATE INDEX {by_id} ON {t} (id)"))
                conn.execute(self.q("CREATE INDEX {by_chunk} ON {t} (chunk_id)"))
                conn.execute(self.q("CREATE INDEX {by_tsv} ON {t} USING gin (tsv)"))

    def column_dim(self, conn: Any) -> int | None:
        row = conn.execute("SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                           "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                           "AND c.relname = %s AND a.attname = 'embedding'",
                           (self.schema, self.table)).fetchone()
        return int(row[0]) if row and row[0] > 0 else None

    # writes -----------------------------------------------------------------------------
    @contextmanager
    def write(self) -> Iterator[_Writer]:
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            writer = _Writer(self, conn, self.column_dim(conn))
            yield writer
            writer.finish()

    def delete(self, filters: Conditions) -> int:
        where, args = filter_sql(filters)
        with self.write() as w:
            cur = w.conn.execute(self.q("DELETE FROM {t}" + (f" WHERE {where}" if where else "")), args)
            return cur.rowcount

    def index_metadata(self, columns: list[str]) -> None:
        """A btree index on `metadata -> 'col'` per declared metadata column: equality, IN
        and ranges on it read a few rows (and the filtered-search row count stays cheap)."""
        _, sql, _ = psycopg_modules()
        with self.write() as w:
            for column in columns:
                key = f"{self.schema}.{self.table}:{column}"
                name = "kbsql_" + hashlib.md5(key.encode()).hexdigest()[:16]
                w.conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ((metadata -> {}))").format(
                    sql.Identifier(name), self._names["t"], sql.Literal(column)))

    def drop(self) -> None:
        with self._conn() as conn:
            conn.execute(self.q("DROP TABLE IF EXISTS {t}"))

    def close(self) -> None:
        release_pool(self.pool)

    # reads ------------------------------------------------------------------------------
    def sync(self) -> None:
        """Nothing to catch up: the index lives in the database with the rows."""

    def count(self) -> int:
        with self._conn() as conn:
            return int(conn.execute(self.q("SELECT count(*) FROM {t}")).fetchone()[0])

    def dim(self) -> int | None:
        with self._conn() as conn:
            return self.column_dim(conn)

    def export(self, batch: int) -> Iterator[ChunkBatch]:
        """`ExportsChunks`: pages by `seq`, one short read each."""
        after = 0
        while True:
            with self._conn() as conn:
                rows = conn.execute(self.q("SELECT seq, id, chunk_id, content, metadata::text, "
                                           "embedding::text, updated_at FROM {t} WHERE seq > %s "
                                           "ORDER BY seq LIMIT %s"), [after, int(batch)]).fetchall()
            if not rows:
                return
            after = rows[-1][0]
            yield from stamped_batches([(r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows],
                                       lambda text: np.array(json.loads(text), np.float32))

    def chunks_by_id(self, chunk_ids: list[str]) -> dict[str, tuple[str, str, dict[str, Any], np.ndarray]]:
        with self._conn() as conn:
            rows = conn.execute(self.q("SELECT chunk_id, id, content, metadata::text, embedding::text "
                                       "FROM {t} WHERE chunk_id = ANY(%s)"), [chunk_ids]).fetchall()
        return {r[0]: (r[1], r[2], json.loads(r[3]), np.array(json.loads(r[4]), np.float32)) for r in rows}

    def sample(self, limit: int) -> tuple[list[str], list[dict[str, Any]], np.ndarray]:
        with self._conn() as conn:
            dim = self.column_dim(conn)
            rows = conn.execute(self.q("SELECT chunk_id, metadata::text, embedding::text FROM {t} "
                                       "ORDER BY seq LIMIT %s"), [int(limit)]).fetchall() if dim else []
        vectors = (np.array([json.loads(r[2]) for r in rows], dtype=np.float32).reshape(-1, dim or 0)
                   if rows else np.zeros((0, dim or 0), np.float32))
        return [r[0] for r in rows], [json.loads(r[1]) for r in rows], vectors

    def plain_rows(self, filters: Conditions, limit: int | None, offset: int = 0) -> list[list[Any]]:
        where, args = filter_sql(filters)
        text = "SELECT id, chunk_id, content, metadata::text FROM {t}" + (f" WHERE {where}" if where else "")
        text += " ORDER BY seq"
        if limit is not None:
            text += " LIMIT %s OFFSET %s"
            args = [*args, int(limit), int(offset)]
        with self._conn() as conn:
            rows = conn.execute(self.q(text), args).fetchall()
        return [[r[0], r[1], r[2], json.loads(r[3]), None, None] for r in rows]

    def count_matching(self, filters: Conditions) -> int:
        """`CountsChunks`: the matching rows counted by PostgreSQL, none of them sent, within
        what is left of the statement's deadline (`statement_timeout` for this one count)."""
        where, args = filter_sql(filters)
        work = current()
        left = work.remaining() if work is not None else None
        psycopg, _, _ = psycopg_modules()
        with self._conn() as conn, conn.transaction():
            if left is not None:
                conn.execute(f"SET LOCAL statement_timeout = {max(1, int(left * 1000))}")
            try:
                row = conn.execute(self.q("SELECT count(*) FROM {t}" + (f" WHERE {where}" if where else "")),
                                   args).fetchone()
            except psycopg.errors.QueryCanceled:
                checkpoint()  # the deadline's line
                raise
        return int(row[0])

    def has_metadata_key(self, key: str) -> bool:
        """`KnowsKeys`: jsonb's key test; the first row holding `key` ends the read."""
        with self._conn() as conn:
            return conn.execute(self.q("SELECT 1 FROM {t} WHERE jsonb_exists(metadata, %s) LIMIT 1"),
                                [key]).fetchone() is not None

    def plain_batches(self, filters: Conditions, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """`plain_rows` in batches of `size` (metadata as JSON text), on a server-side cursor:
        one snapshot, and one batch at a time in Python (kb_stream)."""
        where, args = filter_sql(filters)
        text = "SELECT id, chunk_id, content, metadata::text FROM {t}" + (f" WHERE {where}" if where else "")
        with self._conn() as conn, conn.transaction(), conn.cursor(name="kbsql_chunks") as cursor:
            cursor.execute(self.q(text + " ORDER BY seq"), args)
            while rows := cursor.fetchmany(size):
                yield rows

    def vector_top(self, query: np.ndarray, k: int, filters: Conditions) -> tuple[np.ndarray, np.ndarray]:
        if k <= 0:
            return _EMPTY
        where, args = filter_sql(filters)
        with self._conn() as conn:
            rows = nearest(conn, self.q, vec=vector_text(query), k=k, where=where, args=args,
                           ef_search=self.index_settings(conn).search_ef(k), iterative=self.iterative,
                           place=(self.schema, self.table))
        if not rows:
            return _EMPTY
        return (np.array([r[1] for r in rows], np.float32), np.array([r[0] for r in rows], np.int64))

    # the index and its knobs (pg_hnsw.py) ----------------------------------------------------
    def index_settings(self, conn: Any) -> HnswSettings:
        """The table's index settings, read again after SETTINGS_TTL seconds (another server
        may have changed them)."""
        cached = self._settings
        if cached is not None and time.monotonic() - cached[0] < SETTINGS_TTL:
            return cached[1]
        settings = pg_hnsw.read_settings(conn, self.schema, self.table)
        self._settings = (time.monotonic(), settings)
        return settings

    def create_index(self, params: dict[str, Any]) -> dict[str, int]:
        """CREATE INDEX ON KNOWLEDGE_BASE (pg_hnsw.py): store the settings, rebuild if needed."""
        settings = HnswSettings.from_params(params)
        with self._conn() as conn:
            pg_hnsw.apply(conn, self, settings)
        self._settings = (time.monotonic(), settings)
        return settings.as_dict()

    def keyword_top(self, text: str, k: int, filters: Conditions) -> dict[int, float]:
        words = WORD.findall(text)
        if not words:
            return {}
        where, args = filter_sql(filters)
        tsquery = " | ".join(words)
        with self._conn() as conn:
            rows = conn.execute(self.q(
                f"SELECT seq, ts_rank_cd(tsv, q) AS s FROM {{t}}, to_tsquery('{TEXT_CONFIG}', %s) q "
                "WHERE tsv @@ q" + (f" AND {where}" if where else "") + " ORDER BY s DESC, seq LIMIT %s"),
                [tsquery, *args, k]).fetchall()
        if not rows:
            return {}
        best = max(float(r[1]) for r in rows) or 1.0
        return {int(r[0]): max(0.0, float(r[1])) / best for r in rows}

    def similarities(self, query: np.ndarray, keys: list[int]) -> dict[int, float]:
        if not keys:
            return {}
        with self._conn() as conn:
            rows = conn.execute(self.q("SELECT seq, 1 - (embedding <=> %s::vector) FROM {t} "
                                       "WHERE seq = ANY(%s)"), [vector_text(query), list(keys)]).fetchall()
        return {int(r[0]): float(r[1]) for r in rows}

    def load_rows(self, keys: list[int]) -> dict[int, tuple[Any, ...]]:
        if not keys:
            return {}
        with self._conn() as conn:
            rows = conn.execute(self.q("SELECT seq, id, chunk_id, content, metadata::text FROM {t} "
                                       "WHERE seq = ANY(%s)"), [list(keys)]).fetchall()
        return {int(r[0]): tuple(r[1:]) for r in rows}

    def updated_at(self, chunk_ids: list[str]) -> dict[str, str]:
        if not chunk_ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(self.q("SELECT chunk_id, updated_at FROM {t} WHERE chunk_id = ANY(%s)"),
                                [list(chunk_ids)]).fetchall()
        return {r[0]: r[1] for r in rows}
