"""The HNSW index of a pgvector knowledge base, and its knobs.

`CREATE INDEX ON KNOWLEDGE_BASE kb WITH (m = 16, ef_construction = 64, ef_search = 64)`
sets pgvector's own parameters, as the same statement sets `nprobe` and friends for the
local store (settings.py):

- `m`: graph links per node. More is a better graph: higher recall, a larger index.
- `ef_construction`: candidates kept while building (>= 2 m). More is a better graph and a
  slower build.
- `ef_search`: candidates kept while searching (at least twice the LIMIT is always used,
  and twice ef_search under a metadata filter). More is higher recall and a slower search;
  it alone changes without a rebuild.

They live in PostgreSQL, as a JSON comment on the knowledge base's table, so every server
sharing the table searches and builds alike, and dropping the knowledge base (its table)
takes them along; no comment means the defaults. A change of `m` or `ef_construction`
rebuilds the index with CREATE INDEX CONCURRENTLY: searches keep the old index and writes
go on until the new one replaces it.

The first vectors of an empty table build the index in bulk, in the inserting transaction
(pgvector builds several times faster from loaded rows than row by row). The graph must
fit in `maintenance_work_mem` or the build crawls, so a build raises it for itself to an
estimate of the graph's size, up to BUILD_MEMORY_MAX_MB, never below the server's own
setting (a DBA's larger value wins).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from kbsql.engine.knowledge.settings import integer_params
from kbsql.engine.postgres.pg import lock_key, psycopg_modules
from kbsql.interface.errors import BadRequest, Conflict, InvalidParameter

M = 24
EF_CONSTRUCTION = 128
EF_SEARCH = 200
MAX_EF_SEARCH = 1000  # pgvector's limit for hnsw.ef_search
_LIMITS = {"m": (2, 100), "ef_construction": (4, 1000), "ef_search": (1, MAX_EF_SEARCH)}
BUILD_MEMORY_MAX_MB = 4096  # cap of maintenance_work_mem a build sets for itself
COMMENT_KEY = "kbsql_hnsw"


@dataclass(frozen=True)
class HnswSettings:
    m: int = M
    ef_construction: int = EF_CONSTRUCTION
    ef_search: int = EF_SEARCH

    @classmethod
    def from_params(cls, params: dict[str, Any], base: HnswSettings | None = None) -> HnswSettings:
        """Settings from statement parameters over `base` (the defaults when None); unknown
        keys (the local store's `nprobe`, say) and values out of range are refused."""
        values = integer_params(params, _LIMITS, asdict(base or cls()), " for a pgvector knowledge base")
        if values["ef_construction"] < 2 * values["m"]:
            raise InvalidParameter(f"index parameter ef_construction ({values['ef_construction']}) must "
                                   f"be at least 2 * m ({2 * values['m']})")
        return cls(**values)

    @classmethod
    def from_comment(cls, comment: str | None) -> HnswSettings:
        """The settings a table comment holds; the defaults for none or a foreign comment."""
        try:
            stored = json.loads(comment or "{}").get(COMMENT_KEY)
            return cls.from_params(stored) if isinstance(stored, dict) else cls()
        except (ValueError, AttributeError, BadRequest):  # someone else's comment: not ours
            return cls()

    def comment(self) -> str:
        return json.dumps({COMMENT_KEY: asdict(self)})

    def options(self) -> str:
        """The index's WITH options."""
        return f"m = {int(self.m)}, ef_construction = {int(self.ef_construction)}"

    def search_ef(self, k: int) -> int:
        """ef_search for a top-k: the setting, and never under 2k (pgvector returns at most
        ef_search rows per pass)."""
        return min(MAX_EF_SEARCH, max(self.ef_search, 2 * k))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def read_settings(conn: Any, schema: str, table: str) -> HnswSettings:
    row = conn.execute("SELECT obj_description(c.oid, 'pg_class') FROM pg_class c JOIN pg_namespace n "
                       "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
                       (schema, table)).fetchone()
    return HnswSettings.from_comment(row[0] if row else None)


def index_options(conn: Any, schema: str, index: str) -> dict[str, int] | None:
    """The m / ef_construction an existing index was built with; None when there is none."""
    row = conn.execute("SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE n.nspname = %s AND c.relname = %s", (schema, index)).fetchone()
    if row is None:
        return None
    built = {"m": 16, "ef_construction": 64}  # pgvector's defaults, when none were given
    for option in row[0] or []:
        key, _, value = str(option).partition("=")
        if key in built and value.isdigit():
            built[key] = int(value)
    return built


def build_memory_sql(conn: Any, rows: int, dim: int, local: bool) -> str:
    """`SET [LOCAL] maintenance_work_mem` sized to the graph of `rows` vectors: about the
    vector (4 bytes a dimension) plus its links and tuple overhead, with a margin."""
    need_mb = min(BUILD_MEMORY_MAX_MB, max(64, int(rows * (dim * 4 + 400) * 1.25 / 2**20) + 64))
    row = conn.execute("SELECT setting::bigint FROM pg_settings "
                       "WHERE name = 'maintenance_work_mem'").fetchone()
    current_mb = int(row[0]) // 1024 if row else 0  # the setting is in kB
    return f"SET {'LOCAL ' if local else ''}maintenance_work_mem = '{max(need_mb, current_mb)}MB'"


def vector_version(conn: Any) -> tuple[int, ...]:
    """The installed pgvector's version, e.g. (0, 8, 5); (0,) when unknown."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    try:
        return tuple(int(p) for p in str(row[0]).split(".")) if row else (0,)
    except ValueError:
        return (0,)


class IndexedTable(Protocol):
    """What a (re)build needs of the storage (pgvector.PgVectorStorage)."""

    schema: str
    table: str
    index_name: str

    def q(self, text: str) -> Any:
        """SQL text with {t}, {hnsw} and {hnsw_new} filled in as quoted identifiers."""
        ...

    def column_dim(self, conn: Any) -> int | None: ...


def apply(conn: Any, storage: IndexedTable, settings: HnswSettings) -> None:
    """Store `settings` as the table's and, when m or ef_construction differ from the
    index's (or there is no index yet but there are vectors), build the index anew. One
    build per table at a time, across servers (a session advisory lock)."""
    key = lock_key(f"kbsql:index:{storage.schema}.{storage.table}")
    if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
        raise Conflict(f"The index of table {storage.table} is being built by another request; "
                       "try again when it is done", title="Index build in progress")
    try:
        _, sql, _ = psycopg_modules()
        conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(storage.q("{t}"),
                                                                 sql.Literal(settings.comment())))
        built = index_options(conn, storage.schema, storage.index_name)
        dim = storage.column_dim(conn)
        if dim is not None and built != {"m": settings.m, "ef_construction": settings.ef_construction}:
            _rebuild(conn, storage, settings, dim)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def _rebuild(conn: Any, storage: IndexedTable, settings: HnswSettings, dim: int) -> None:
    """CREATE INDEX CONCURRENTLY under a temporary name (searches keep the old index, writes
    go on), then the swap in one short transaction."""
    q = storage.q
    rows = int(conn.execute(q("SELECT count(*) FROM {t}")).fetchone()[0])
    conn.execute(q("DROP INDEX IF EXISTS {hnsw_new}"))  # left by an earlier build that failed
    conn.execute(build_memory_sql(conn, rows, dim, local=False))
    try:
        conn.execute(q("CREATE INDEX CONCURRENTLY {hnsw_new} ON {t} USING hnsw "
                       f"(embedding vector_cosine_ops) WITH ({settings.options()})"))
    except BaseException:
        conn.execute(q("DROP INDEX IF EXISTS {hnsw_new}"))
        raise
    finally:
        conn.execute("RESET maintenance_work_mem")
    with conn.transaction():
        conn.execute(q("DROP INDEX IF EXISTS {hnsw}"))
        conn.execute(q("ALTER INDEX {hnsw_new} RENAME TO {hnsw}"))
