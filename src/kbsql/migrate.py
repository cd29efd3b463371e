"""`kbsql migrate --to postgresql://...`: a local data directory into a shared catalog.

What moves: the catalog (projects, knowledge bases, agents, data-source definitions, the
records of uploaded files, views, jobs with their LAST values, with their ids and
timestamps), registered DataFrames (`df.<name>`) and uploaded files' pages (`files.<name>`),
and the chunks of every knowledge base in the local store, vectors included (never
re-embedded: no model is called, no key needed), into a pgvector table of the catalog's
database named as a shared catalog names it (`kb_<project>_<name>`), with its HNSW index
built once at the end. Knowledge bases already stored in a pgvector database keep their
table; only their record moves. The chunks are read and written through the storage protocol
(`kbsql.spi.KbStorage` and `ExportsChunks`: the local store's `export`, pgvector's `write`
and `chunks_by_id`), never through a store's own tables; the catalog rows are copied between
the two catalogs' tables, which share one schema. The source directory is only read (stop
the servers writing to it first). The query log (`information_schema.queries`) and the job
runs (`log.jobs_history`) are history of this directory and stay behind.

The target must be empty (a fresh database, or one where servers started but nothing was
created): migrating onto existing knowledge bases would have to choose between two
states. Each knowledge base's chunks are copied in one transaction and the catalog in one
more, last: a run that fails leaves the catalog empty and drops the tables it made, so it
can simply run again.

Then the verify step (also alone: `--verify`): the same projects, knowledge bases,
agents, data sources and tables by name; per knowledge base the same row count, a sample
of rows identical (id, chunk id, content, metadata, vector bit for bit), and a sample of
searches (the sampled rows' own vectors) answered by the target's index as exact search
over the source's vectors answers them (tie-aware recall@10, and the best match found).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from kbsql.engine.datasources.frame_store import FrameStore
from kbsql.engine.knowledge.local import LocalBackend
from kbsql.engine.knowledge.service import DEFAULT_VECTOR_DATABASE, SHARED_VECTOR_DATABASE, shared_table
from kbsql.engine.knowledge.storage import ExportsChunks, KbStorage, StoragePlace
from kbsql.engine.postgres.catalog_pg import SCHEMA, PgConnection, where_of_url
from kbsql.engine.postgres.frame_store_pg import PgFrameStore
from kbsql.engine.postgres.pgvector import PgVectorStorage
from kbsql.engine.postgres.postgres_source import settings as pg_settings
from kbsql.interface.errors import KbsqlError

BATCH = 5_000  # chunks per COPY
TABLES = ("projects", "knowledge_bases", "agents", "datasources", "files", "views", "jobs")
PLACES = {"frames": "table df.{}", "uploads": "pages {}"}  # FrameStores: DataFrames, uploaded files
FILE_ENGINES = {"files", "sqlite", "duckdb"}  # their parameters name paths on this machine
SEARCH_RECALL_MIN = 0.9  # tie-aware recall@10 of the sampled searches below which verify fails


class MigrationError(KbsqlError):
    """The migration cannot start or did not complete (one line: why, what to do)."""


def _source_db(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise MigrationError(f"{path} does not exist: is this a kbsql data directory?")
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)  # reads the WAL too
    db.row_factory = sqlite3.Row
    return db


def _rows(db: sqlite3.Connection, table: str, order: str = "id") -> list[dict[str, Any]]:
    """The table's rows; none from a table the catalog's version did not have yet (views, jobs)."""
    try:
        return [dict(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY {order}")]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise


def _local_kbs(catalog: sqlite3.Connection) -> list[dict[str, Any]]:
    """Knowledge-base rows with their project name and parsed spec."""
    projects = {p["id"]: p["name"] for p in _rows(catalog, "projects")}
    out = []
    for kb in _rows(catalog, "knowledge_bases"):
        kb["project"], kb["spec_obj"] = projects[kb["project_id"]], json.loads(kb["spec"])
        out.append(kb)
    return out


def _is_local(kb: dict[str, Any]) -> bool:
    return kb["spec_obj"].get("vector_database") in (None, "", DEFAULT_VECTOR_DATABASE)


class _Exporting(KbStorage, ExportsChunks, Protocol):
    """A storage that can also export its chunks (both built-in storages)."""


def _source(data_dir: Path, kb_id: int) -> _Exporting | None:
    """The local store of knowledge base `kb_id`, read only, through the storage backend's
    own interface (None when it never stored a chunk)."""
    directory = data_dir / "knowledge_bases" / str(kb_id)
    if not (directory / "chunks.sqlite").exists():
        return None
    try:
        storage = LocalBackend().open(StoragePlace(directory, "", read_only=True))
    except sqlite3.Error as exc:
        raise MigrationError(f"Cannot read {directory / 'chunks.sqlite'}: {exc}") from None
    return storage


def _target(url: str, table: str) -> _Exporting:
    """Table `table` of the catalog's database as a pgvector knowledge-base storage."""
    return PgVectorStorage(_own(url), table)


def _check_empty(target: PgConnection, url: str) -> None:
    held = {t: int(target.execute(f"SELECT count(*) FROM {SCHEMA}.{t}").fetchone()[0])
            for t in ("knowledge_bases", "agents", "datasources", "frames", "files", "uploads")}
    projects = [r[0] for r in target.execute(f"SELECT name FROM {SCHEMA}.projects")]
    if any(held.values()) or [p for p in projects if p.lower() != "mindsdb"]:
        what = ", ".join(f"{n} {t}" for t, n in held.items() if n) or f"projects {projects}"
        raise MigrationError(f"The catalog at {where_of_url(url)} already holds {what}: migrate into "
                             "an empty database")


def _copy_chunks(kb: dict[str, Any], data_dir: Path, url: str, target: PgConnection,
                 say: Callable[[str], None]) -> str:
    """The chunks of one local knowledge base into its new table; returns the table (a
    copy that fails drops it: nothing half-made stays)."""
    table = shared_table(kb["project"], kb["name"])
    if target.execute("SELECT to_regclass(?) AS t", (f"public.{table}",)).fetchone()[0] is not None:
        raise MigrationError(f"Table {table} already exists in the target database: drop it, or "
                             "migrate into an empty database")
    storage = _target(url, table)
    source = None
    try:
        source = _source(data_dir, kb["id"])
        copied = 0
        with storage.write() as writer:  # one transaction: the whole knowledge base or nothing
            for batch in source.export(BATCH) if source is not None else iter(()):
                if writer.dim is None:
                    writer.set_dim(int(batch.vectors.shape[1]))  # the HNSW index is built at the end
                writer.replace([], batch.chunks, batch.vectors, batch.stamp)
                copied += len(batch.chunks)
        storage.index_metadata(kb["spec_obj"].get("metadata_columns") or [])
        say(f"  knowledge base {kb['project']}.{kb['name']}: {copied} chunks -> table {table}")
    except BaseException:
        storage.drop()
        raise
    finally:
        storage.close()
        if source is not None:
            source.close()
    return table


def _copy_catalog(source: sqlite3.Connection, target: PgConnection, tables: dict[int, str]) -> None:
    """Every catalog row with its id, in one transaction; local KBs now point at their tables."""
    target.execute("BEGIN")
    try:
        target.execute(f"DELETE FROM {SCHEMA}.projects")  # the default project a server made
        for name in TABLES:
            for row in _rows(source, name):
                if name == "knowledge_bases" and row["id"] in tables:
                    spec = json.loads(row["spec"])
                    spec["vector_database"] = SHARED_VECTOR_DATABASE
                    spec["vector_database_table"] = tables[row["id"]]
                    spec.setdefault("params", {})["default_vector_storage"] = SHARED_VECTOR_DATABASE
                    row["spec"] = json.dumps(spec)
                columns = list(row)
                target.execute(f"INSERT INTO {SCHEMA}.{name} ({', '.join(columns)}) VALUES "
                               f"({', '.join('?' * len(columns))})", [row[c] for c in columns])
            target.execute(f"SELECT setval(pg_get_serial_sequence('{SCHEMA}.{name}', 'id'), "
                           f"coalesce((SELECT max(id) FROM {SCHEMA}.{name}), 0) + 1, false)")
        for row in _rows(source, "jobs_last", order="job_id"):  # the jobs' LAST values move with them
            target.execute(f"INSERT INTO {SCHEMA}.jobs_last (job_id, cond_key, value) VALUES (?, ?, ?)",
                           [row["job_id"], row["cond_key"], row["value"]])
    except BaseException:
        target.execute("ROLLBACK")
        raise
    target.execute("COMMIT")


def _own(url: str) -> dict[str, str]:
    """libpq settings of the operator's own URL: its environment (PGPASSWORD, ~/.pgpass) may
    fill what the URL leaves out, unlike a data source's."""
    return pg_settings({"dsn": url}, own_only=False)


def migrate(data_dir: str | Path, url: str, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Copy `data_dir` into the (empty) catalog at `url`; returns what moved."""
    data_dir = Path(data_dir)
    source = _source_db(data_dir / "catalog.sqlite")
    target = PgConnection(url)  # creates the schema, or checks its version
    made: list[str] = []
    stores = {place: PgFrameStore(url, place) for place in PLACES}
    try:
        _check_empty(target, url)
        say(f"migrating {data_dir} -> {where_of_url(url)}")
        tables: dict[int, str] = {}
        for kb in _local_kbs(source):
            if _is_local(kb):
                tables[kb["id"]] = _copy_chunks(kb, data_dir, url, target, say)
                made.append(tables[kb["id"]])
            else:
                say(f"  knowledge base {kb['project']}.{kb['name']}: stays in "
                    f"{kb['spec_obj'].get('vector_database')}.{kb['spec_obj'].get('vector_database_table')}")
        frame_count = {}
        for place, label in PLACES.items():
            local_frames = FrameStore(data_dir, place)
            frame_count[place] = len(local_frames.tables())
            for name in local_frames.tables():
                table = local_frames.table(name)
                if table is not None:
                    stores[place].register(name, table)
                    if place == "frames":
                        say(f"  {label.format(name)}: {table.num_rows} rows")
        _copy_catalog(source, target, tables)
        counts = {t: len(_rows(source, t)) for t in TABLES}
        say("  catalog: " + ", ".join(f"{n} {t}" for t, n in counts.items()))
        for ds in _rows(source, "datasources"):
            if ds["engine"].lower() in FILE_ENGINES:
                say(f"  note: data source {ds['name']} ({ds['engine']}) reads a path on this machine; "
                    "servers elsewhere need the same path (--allow-path)")
        return {"knowledge_bases_copied": len(tables), "frames": frame_count["frames"],
                "uploads": frame_count["uploads"], **counts}
    except BaseException:
        for table in made:  # nothing half-made stays: the run can simply start again
            _drop_table(url, table)
        for store in stores.values():
            for name in store.tables():
                store.unregister(name)
        raise
    finally:
        for store in stores.values():
            store.close()
        target.close()
        source.close()


def _drop_table(url: str, table: str) -> None:
    storage = _target(url, table)
    try:
        storage.drop()
    finally:
        storage.close()


def verify(data_dir: str | Path, url: str, sample: int = 10,
           say: Callable[[str], None] = print) -> dict[str, Any]:
    """Compare the target with the source; `ok` says whether everything matched."""
    data_dir = Path(data_dir)
    source = _source_db(data_dir / "catalog.sqlite")
    target = PgConnection(url)
    report: dict[str, Any] = {"ok": True, "counts": {}, "knowledge_bases": {}}

    def fail(text: str) -> None:
        report["ok"] = False
        say(f"  MISMATCH {text}")

    try:
        for name in TABLES:
            want = {r["name"].lower() for r in _rows(source, name)}
            got = {r[0].lower() for r in target.execute(f"SELECT name FROM {SCHEMA}.{name}")}
            report["counts"][name] = len(got)
            if want != got:
                fail(f"{name}: {sorted(want ^ got)} on one side only")
        for place, label in PLACES.items():
            frames, local_frames = PgFrameStore(url, place), FrameStore(data_dir, place)
            try:
                for name in local_frames.tables():
                    here, there = local_frames.table(name), frames.table(name)
                    if there is None or here is None or not here.equals(there):
                        fail(f"{label.format(name)} differ")
            finally:
                frames.close()
        for kb in _local_kbs(source):
            if _is_local(kb):
                report["knowledge_bases"][f"{kb['project']}.{kb['name']}"] = _verify_kb(
                    kb, data_dir, url, sample, fail)
        say(f"verify: {'ok' if report['ok'] else 'FAILED'} " + json.dumps(report["knowledge_bases"]))
        return report
    finally:
        target.close()
        source.close()


def _verify_kb(kb: dict[str, Any], data_dir: Path, url: str, sample: int,
               fail: Callable[[str], None]) -> dict[str, Any]:
    label = f"{kb['project']}.{kb['name']}"
    source = _source(data_dir, kb["id"])
    storage = _target(url, shared_table(kb["project"], kb["name"]))
    try:
        count = source.count() if source is not None else 0
        out: dict[str, Any] = {"rows": count, "target_rows": storage.count()}
        if out["target_rows"] != count:
            fail(f"{label}: {count} rows here, {out['target_rows']} there")
        if source is None or not count:
            return out
        picked = _spread_sample(source, count, sample)
        there = storage.chunks_by_id(list(picked))
        for chunk_id, (doc_id, content, metadata, vector) in picked.items():
            got = there.get(chunk_id)
            if got is None or got[:3] != (doc_id, content, metadata) or not np.array_equal(got[3], vector):
                fail(f"{label}: row {chunk_id} differs")
        queries = np.stack([row[3] for row in picked.values()])
        kth, best = _exact_top(source, queries)
        hits = found_best = 0
        for q, (k_score, b_score) in zip(queries, zip(kth, best, strict=True), strict=True):
            scores, _ = storage.vector_top(q, 10, [])
            hits += int(np.sum(scores >= k_score - 1e-4))
            found_best += bool(len(scores)) and scores[0] >= b_score - 1e-4
        out["search_recall_at_10"] = round(hits / (10 * len(queries)), 4) if count >= 10 else None
        out["searches_finding_the_best"] = f"{found_best}/{len(queries)}"
        if found_best < len(queries) or (count >= 10 and out["search_recall_at_10"] < SEARCH_RECALL_MIN):
            fail(f"{label}: searches differ ({out})")
        return out
    finally:
        storage.close()
        if source is not None:
            source.close()


def _spread_sample(source: _Exporting, count: int, sample: int) -> dict[str, tuple[Any, ...]]:
    """About `sample` chunks spread over the whole store (every `count // sample`-th):
    chunk_id -> (doc_id, content, metadata, vector)."""
    step, seen = max(1, count // sample), 0
    picked: dict[str, tuple[Any, ...]] = {}
    for batch in source.export(BATCH):
        for chunk, vector in zip(batch.chunks, batch.vectors, strict=True):
            if seen % step == 0 and len(picked) < sample:
                picked[chunk.chunk_id] = (chunk.doc_id, chunk.content, chunk.metadata, vector)
            seen += 1
    return picked


def _exact_top(source: _Exporting, queries: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """The 10th-best and best cosine similarity of each query over every stored vector
    (streamed in batches: memory stays flat for a million rows)."""
    top = np.full((len(queries), k), -np.inf, np.float32)
    for batch in source.export(50_000):
        scores = queries @ batch.vectors.T
        top = np.sort(np.concatenate([top, scores], axis=1), axis=1)[:, -k:]
    return top[:, -min(k, top.shape[1])], top[:, -1]
