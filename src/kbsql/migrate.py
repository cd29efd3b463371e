"""`kbsql migrate --to postgresql://...`: a local data directory into a shared catalog.

What moves: the catalog (projects, knowledge bases, agents, data-source definitions, the
records of uploaded files, with their ids and timestamps), registered DataFrames
(`df.<name>`) and uploaded files' pages (`files.<name>`), and the chunks of every
knowledge base in the local store, vectors included (never re-embedded: no model is called,
no key needed), into a pgvector table of the catalog's database named as a shared catalog
names it (`kb_<project>_<name>`), with its HNSW index built once at the end. Knowledge
bases already stored in a pgvector database keep their table; only their record moves.
The source directory is only read (stop the servers writing to it first). The query log
(`information_schema.queries`) is history of this directory and stays behind.

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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.engine.datasources.frame_store import FrameStore
from kbsql.engine.knowledge.ingest import Chunk
from kbsql.engine.knowledge.service import DEFAULT_VECTOR_DATABASE, SHARED_VECTOR_DATABASE, shared_table
from kbsql.engine.postgres.catalog_pg import SCHEMA, PgConnection, where_of_url
from kbsql.engine.postgres.frame_store_pg import PgFrameStore
from kbsql.engine.postgres.pgvector import PgVectorStorage
from kbsql.engine.postgres.postgres_source import settings as pg_settings
from kbsql.interface.errors import KbsqlError

BATCH = 5_000  # chunks per COPY
TABLES = ("projects", "knowledge_bases", "agents", "datasources", "files")
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


def _rows(db: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    return [dict(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY id")]


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


def _chunk_batches(path: Path) -> Iterator[tuple[str, list[Chunk], np.ndarray]]:
    """(updated_at, chunks, vectors) in insertion order, one stamp and at most BATCH each."""
    db = _source_db(path)
    try:
        yield from _batches_of(db)
    except sqlite3.Error as exc:
        raise MigrationError(f"Cannot read {path}: {exc}") from None
    finally:
        db.close()


def _batches_of(db: sqlite3.Connection) -> Iterator[tuple[str, list[Chunk], np.ndarray]]:
    cursor = db.execute("SELECT id, chunk_id, content, metadata, embedding, updated_at FROM chunks "
                        "ORDER BY seq")
    while rows := cursor.fetchmany(BATCH):
        start = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or rows[i]["updated_at"] != rows[start]["updated_at"]:
                part = rows[start:i]
                chunks = [Chunk(r["id"], r["chunk_id"], r["content"], json.loads(r["metadata"]))
                          for r in part]
                yield (part[0]["updated_at"], chunks,
                       np.stack([np.frombuffer(r["embedding"], np.float32) for r in part]))
                start = i


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
    storage = PgVectorStorage(_own(url), table)
    try:
        path = data_dir / "knowledge_bases" / str(kb["id"]) / "chunks.sqlite"
        copied = 0
        with storage.write() as writer:  # one transaction: the whole knowledge base or nothing
            for stamp, chunks, vectors in _chunk_batches(path) if path.exists() else iter(()):
                if writer.dim is None:
                    writer.set_dim(int(vectors.shape[1]))  # the HNSW index is built at the end
                writer.replace([], chunks, vectors, stamp)
                copied += len(chunks)
        storage.index_metadata(kb["spec_obj"].get("metadata_columns") or [])
        say(f"  knowledge base {kb['project']}.{kb['name']}: {copied} chunks -> table {table}")
    except BaseException:
        storage.drop()
        raise
    finally:
        storage.close()
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
    storage = PgVectorStorage(_own(url), table)
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
    path = data_dir / "knowledge_bases" / str(kb["id"]) / "chunks.sqlite"
    db = _source_db(path) if path.exists() else None
    storage = PgVectorStorage(_own(url), shared_table(kb["project"], kb["name"]))
    try:
        count = int(db.execute("SELECT count(*) FROM chunks").fetchone()[0]) if db else 0
        out: dict[str, Any] = {"rows": count, "target_rows": storage.count()}
        if out["target_rows"] != count:
            fail(f"{label}: {count} rows here, {out['target_rows']} there")
        if not db or not count:
            return out
        step = max(1, count // sample)
        picked = db.execute("SELECT chunk_id, id, content, metadata, embedding FROM chunks "
                            "WHERE (seq % ?) = 0 ORDER BY seq LIMIT ?", (step, sample)).fetchall() or \
            db.execute("SELECT chunk_id, id, content, metadata, embedding FROM chunks LIMIT ?",
                       (sample,)).fetchall()
        there = _target_rows(storage, [r["chunk_id"] for r in picked])
        for r in picked:
            got = there.get(r["chunk_id"])
            if got is None or got[:3] != (r["id"], r["content"], json.loads(r["metadata"])) or \
                    not np.array_equal(got[3], np.frombuffer(r["embedding"], np.float32)):
                fail(f"{label}: row {r['chunk_id']} differs")
        queries = np.stack([np.frombuffer(r["embedding"], np.float32) for r in picked])
        kth, best = _exact_top(db, queries)
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
        if db:
            db.close()


def _target_rows(storage: PgVectorStorage, chunk_ids: list[str]) -> dict[str, tuple[Any, ...]]:
    with storage.pool.connection() as conn:
        rows = conn.execute(storage.q("SELECT chunk_id, id, content, metadata::text, embedding::text "
                                      "FROM {t} WHERE chunk_id = ANY(%s)"), [chunk_ids]).fetchall()
    return {r[0]: (r[1], r[2], json.loads(r[3]), np.array(json.loads(r[4]), np.float32)) for r in rows}


def _exact_top(db: sqlite3.Connection, queries: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """The 10th-best and best cosine similarity of each query over every stored vector
    (streamed in batches: memory stays flat for a million rows)."""
    top = np.full((len(queries), k), -np.inf, np.float32)
    cursor = db.execute("SELECT embedding FROM chunks")
    while batch := cursor.fetchmany(50_000):
        vectors = np.stack([np.frombuffer(r[0], np.float32) for r in batch])
        scores = queries @ vectors.T
        top = np.sort(np.concatenate([top, scores], axis=1), axis=1)[:, -k:]
    return top[:, -min(k, top.shape[1])], top[:, -1]
