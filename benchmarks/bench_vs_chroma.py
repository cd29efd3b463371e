"""kbsql against Chroma, side by side, on the near-duplicate corpus of issue 17.

Run: `python benchmarks/bench_vs_chroma.py [--docs 100000] [--queries 300]
[--chroma-python /work/venvs/chroma/bin/python] [--hnsw-curve]`. Prints JSON and writes
benchmarks/results/vs_chroma.json (above 100k docs: vs_chroma_<N>k.json, e.g. _1000k at 1M).

Both sides get identical vectors: kbsql embeds with its `hash-384` model; Chroma (embedded,
persisted, its default HNSW settings, cosine space) is fed the same vectors, computed here
once and read back by its process in batches. Documents come from benchmarks/neardup.py
(pydoc paragraphs repeated with a unique token each), one chunk per document, a metadata
column `g` = id % 10 for the filtered searches (10% of rows). Each phase (ingest, open, search)
runs in its own process so its peak RSS is its own; both sides insert in batches of
`--batch` rows. Search: p50/p99 of single queries, unfiltered and filtered, and recall@10
against exact search over the same vectors, strict (ids) and tie-aware (a result scoring at
least the exact 10th score counts: near-duplicates tie). kbsql's search is timed at the
service call (`engine.knowledge.search`, text in, rows with content and metadata out: the
level of Chroma's `collection.query`, which here also returns documents and metadatas)
and through SQL (`engine.query`). kbsql's recall-vs-latency curve over `nprobe` is
recorded too; `--hnsw-curve` adds FAISS HNSW on the same vectors (the index kbsql used before).

Chroma is an optional extra (`pip install '.[bench]'`, best in its own venv: it pins its own
dependencies): it runs under `--chroma-python` (default `$KBSQL_CHROMA_PYTHON`, else
/work/venvs/chroma/bin/python, else this interpreter). When none has chromadb, the Chroma
side is skipped and the report says so (CI's smoke run has no chromadb).

Recall@10 has one definition here, the same as the outside harness of issue 24: a returned
id is a hit when its exact cosine to the query (recomputed from the vectors, not the index's
approximate score) is at least the exact 10th best minus 1e-5; a query's recall is hits / 10,
averaged over queries. `search.unfiltered` applies it to the service call over all
`--queries`; `search.sql_unfiltered` to the SQL route (`SELECT id FROM dups WHERE content =
... LIMIT 10`) over the first 100 queries, as the harness searches. The two routes return
the same rows (one search function); what moved the figures apart is the workload: the
harness's 0.942 came from its own 100 queries and vectors, this script's (0.99+) from the
queries of neardup.py.

Targets (issues 17, 24): tie-aware recall@10 >= 0.97 at 100k (>= 0.95 at 1M); kbsql search
p50 <= half of Chroma's; kbsql peak RSS <= Chroma's in each phase; ingest >= 2x Chroma's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import neardup  # noqa: E402  (benchmarks/neardup.py; also imported by the Chroma interpreter)

DIM = 384
GROUPS = 10
FILTER_GROUP = 3
CURVE_NPROBE = [4, 8, 16, 32, 48, 64, 128]


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM). Not getrusage's ru_maxrss: Linux carries that across
    fork + exec, so a child would report at least its parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def dir_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def pct(times: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(times), q)) * 1000, 3)


def read_vectors(path: Path, start: int, count: int) -> np.ndarray:
    """Rows start..start+count of the raw float32 file, read (not memory-mapped: mapped pages
    would count in the reader's RSS)."""
    with open(path, "rb") as f:
        f.seek(start * DIM * 4)
        return np.frombuffer(f.read(count * DIM * 4), dtype=np.float32).reshape(-1, DIM)


# kbsql side (runs in this interpreter) ---------------------------------------------------
def kbsql_child(phase: str, folder: Path, docs: int, batch: int, work: Path) -> dict:
    from kbsql.client.params import bind
    from kbsql.engine import Engine
    from kbsql.engine.knowledge.search import Filter, SearchRequest

    eng = Engine(folder)
    out: dict = {}
    if phase == "ingest":
        eng.create_knowledge_base("mindsdb", {
            "name": "dups", "embedding_model": {"provider": "kbsql", "model_name": "hash-384"},
            "metadata_columns": ["g"], "preprocessing": neardup.ONE_CHUNK})
        record = eng.catalog.knowledge_base("mindsdb", "dups")
        t0 = time.perf_counter()
        for start in range(0, docs, batch):
            texts = neardup.documents(min(batch, docs - start), start)
            eng.insert_rows(record, [{"id": start + i, "content": t, "g": (start + i) % GROUPS}
                                     for i, t in enumerate(texts)])
        eng.close()
        out["seconds"] = round(time.perf_counter() - t0, 2)
        out["docs_per_s"] = round(docs / out["seconds"], 1)
        return out
    record = eng.catalog.knowledge_base("mindsdb", "dups")
    texts = json.loads((work / "queries.json").read_text())
    t0 = time.perf_counter()
    first = eng.knowledge.search(record, SearchRequest(query=texts[0], limit=10))
    out["first_search_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    assert len(first) == 10
    if phase == "open":
        return out
    handle = eng.knowledge.handle(record)
    # the settings (nlist 0: automatic) and the cells the index really has
    out["index"] = {**handle.index.settings.as_dict(), "kind": handle.index.kind,
                    "cells": getattr(handle.index.index, "nlist", None)}

    def timed(fn, items):
        for item in items[:20]:
            fn(item)  # warm
        times, answers = [], []
        for item in items:
            t = time.perf_counter()
            answers.append(fn(item))
            times.append(time.perf_counter() - t)
        return times, answers

    def plain(text):
        return [int(r[0]) for r in eng.knowledge.search(record, SearchRequest(query=text, limit=10))]

    def filtered(text):
        return [int(r[0]) for r in eng.knowledge.search(record, SearchRequest(
            query=text, limit=10, filters=[Filter("g", "=", FILTER_GROUP)]))]

    def via_sql(text):
        result = eng.query(bind("SELECT id FROM dups WHERE content = :q LIMIT 10", {"q": text}))
        assert len(result.data) == 10, result
        return [int(r[0]) for r in result.data]

    times, answers = timed(plain, texts)
    out["unfiltered"] = {"p50_ms": pct(times, 50), "p99_ms": pct(times, 99), "ids": answers}
    ftexts = texts[: max(20, len(texts) // 3)]
    times, answers = timed(filtered, ftexts)
    out["filtered"] = {"p50_ms": pct(times, 50), "p99_ms": pct(times, 99), "ids": answers}
    times, answers = timed(via_sql, texts[:100])
    out["sql_unfiltered"] = {"p50_ms": pct(times, 50), "p99_ms": pct(times, 99), "ids": answers}
    curve = []
    default = handle.index.settings.nprobe
    if handle.index.kind == "ivf":
        for nprobe in CURVE_NPROBE:
            handle.index.settings.nprobe = nprobe
            times, answers = timed(plain, texts)
            curve.append({"nprobe": nprobe, "p50_ms": pct(times, 50), "ids": answers})
        handle.index.settings.nprobe = default
    out["curve"] = curve
    return out


# Chroma side (runs in the interpreter that has chromadb) ---------------------------------
def chroma_child(phase: str, folder: Path, docs: int, batch: int, work: Path) -> dict:
    import chromadb

    client = chromadb.PersistentClient(path=str(folder))
    out: dict = {"chromadb": chromadb.__version__}
    if phase == "ingest":
        collection = client.create_collection("dups", metadata={"hnsw:space": "cosine"})
        t0 = time.perf_counter()
        for start in range(0, docs, batch):
            n = min(batch, docs - start)
            collection.add(ids=[str(start + i) for i in range(n)],
                           embeddings=read_vectors(work / "vectors.f32", start, n),
                           documents=neardup.documents(n, start),
                           metadatas=[{"g": (start + i) % GROUPS} for i in range(n)])
        out["seconds"] = round(time.perf_counter() - t0, 2)
        out["docs_per_s"] = round(docs / out["seconds"], 1)
        return out
    collection = client.get_collection("dups")
    queries = np.load(work / "queries.npy")
    include = ["documents", "metadatas", "distances"]
    t0 = time.perf_counter()
    assert len(collection.query(query_embeddings=queries[:1], n_results=10, include=include)["ids"][0]) == 10
    out["first_search_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    if phase == "open":
        return out

    def timed(where, qs):
        for q in qs[:20]:
            collection.query(query_embeddings=q[None], n_results=10, where=where, include=include)
        times, answers = [], []
        for q in qs:
            t = time.perf_counter()
            res = collection.query(query_embeddings=q[None], n_results=10, where=where, include=include)
            times.append(time.perf_counter() - t)
            answers.append([int(i) for i in res["ids"][0]])
        return times, answers

    times, answers = timed(None, queries)
    out["unfiltered"] = {"p50_ms": pct(times, 50), "p99_ms": pct(times, 99), "ids": answers}
    times, answers = timed({"g": FILTER_GROUP}, queries[: max(20, len(queries) // 3)])
    out["filtered"] = {"p50_ms": pct(times, 50), "p99_ms": pct(times, 99), "ids": answers}
    return out


def child_main(side: str, phase: str, folder: Path, docs: int, batch: int, work: Path) -> None:
    fn = kbsql_child if side == "kbsql" else chroma_child
    out = fn(phase, folder, docs, batch, work)
    out["peak_rss_mb"] = peak_rss_mb()
    print("RESULT " + json.dumps(out))


# the parent: data, exact answers, phases, recall -----------------------------------------
def prepare(work: Path, docs: int, queries: int) -> dict:
    """Query texts and vectors; every document's vector (for Chroma); exact top-10 per query,
    unfiltered and filtered, streamed batch by batch."""
    from kbsql.engine.models.embeddings import HashEmbedder

    emb = HashEmbedder(DIM)
    texts = neardup.queries(queries)
    q = emb.embed(texts)
    (work / "queries.json").write_text(json.dumps(texts))
    np.save(work / "queries.npy", q)
    best = {name: (np.full((len(q), 10), -np.inf, np.float32), np.full((len(q), 10), -1, np.int64))
            for name in ("unfiltered", "filtered")}
    with open(work / "vectors.f32", "wb") as f:
        for start in range(0, docs, 20_000):
            x = emb.embed(neardup.documents(min(20_000, docs - start), start))
            f.write(x.tobytes())
            ids = np.arange(start, start + len(x))
            scores = q @ x.T
            for name, mask in (("unfiltered", slice(None)), ("filtered", ids % GROUPS == FILTER_GROUP)):
                s_old, i_old = best[name]
                s_all = np.concatenate([s_old, scores[:, mask]], axis=1)
                i_all = np.concatenate([i_old, np.broadcast_to(ids[mask], (len(q), len(ids[mask])))], axis=1)
                for row in range(len(q)):
                    top = np.lexsort((i_all[row], -s_all[row]))[:10]
                    s_old[row], i_old[row] = s_all[row][top], i_all[row][top]
    return {name: (s, i) for name, (s, i) in best.items()}


def recall(answers: list[list[int]], exact: tuple[np.ndarray, np.ndarray], qvec: np.ndarray) -> dict:
    from kbsql.engine.models.embeddings import HashEmbedder

    emb = HashEmbedder(DIM)
    e_scores, e_ids = exact
    got_scores = []
    for row, ids in enumerate(answers):
        vectors = emb.embed([neardup.documents(1, i)[0] for i in ids]) if ids else np.zeros((0, DIM))
        got_scores.append(vectors @ qvec[row])
    tie, strict = neardup.recall_at_k([np.array(a) for a in answers], got_scores,
                                      e_ids[:len(answers)], e_scores[:len(answers)])
    return {"recall_at_10": round(tie, 4), "recall_at_10_strict": round(strict, 4)}


def chroma_python(explicit: str | None) -> str | None:
    candidates = [explicit, os.environ.get("KBSQL_CHROMA_PYTHON"), "/work/venvs/chroma/bin/python",
                  sys.executable]
    for python in candidates:
        if python and Path(python).exists() and subprocess.run(
                [python, "-c", "import chromadb"], capture_output=True, timeout=120).returncode == 0:
            return python
    return None


def run_phase(python: str, side: str, phase: str, folder: Path, args, work: Path) -> dict:
    cmd = [python, str(Path(__file__).resolve()), "--child", side, phase, str(folder),
           "--docs", str(args.docs), "--batch", str(args.batch), "--work", str(work)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if run.returncode != 0:
        raise RuntimeError(f"{side} {phase} failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout[run.stdout.rindex("RESULT ") + 7:])


def hnsw_curve(work: Path, docs: int, exact, qvec: np.ndarray) -> list[dict]:
    """FAISS HNSW over the same vectors (kbsql's index before issue 17), efSearch swept."""
    import faiss

    x = read_vectors(work / "vectors.f32", 0, docs)
    out = []
    for m, ef_construction in ((32, 64), (32, 200)):
        index = faiss.IndexHNSWFlat(DIM, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        faiss.omp_set_num_threads(os.cpu_count() or 1)
        t0 = time.perf_counter()
        index.add(x)
        build = round(time.perf_counter() - t0, 1)
        faiss.omp_set_num_threads(1)
        for ef in (64, 128, 256, 512):
            params = faiss.SearchParametersHNSW(efSearch=ef)
            times, answers = [], []
            for row in range(len(qvec)):
                t = time.perf_counter()
                _, ids = index.search(qvec[row:row + 1], 10, params=params)
                times.append(time.perf_counter() - t)
                answers.append([int(i) for i in ids[0] if i >= 0])
            out.append({"M": m, "efConstruction": ef_construction, "efSearch": ef, "build_s": build,
                        "bare_p50_ms": pct(times, 50), **recall(answers, exact, qvec)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batch", type=int, default=5_000, help="rows per insert call, both sides")
    parser.add_argument("--chroma-python")
    parser.add_argument("--no-chroma", action="store_true")
    parser.add_argument("--hnsw-curve", action="store_true")
    parser.add_argument("--timeout", type=int, default=7200)
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "PHASE", "DIR"))
    parser.add_argument("--work")
    args = parser.parse_args()
    if args.child:
        side, phase, folder = args.child
        child_main(side, phase, Path(folder), args.docs, args.batch, Path(args.work))
        return
    from report import write_report  # benchmarks/report.py

    report: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()[0]},
                    "workload": {"docs": args.docs, "queries": args.queries, "batch": args.batch,
                                 "embedder": "kbsql hash-384 (identical vectors on both sides)",
                                 "corpus": "pydoc paragraphs + a unique token each (benchmarks/neardup.py)",
                                 "filter": f"g = {FILTER_GROUP} ({100 // GROUPS}% of rows)"}}
    work = Path(tempfile.mkdtemp(prefix="kbsql-vs-chroma-"))
    try:
        exact = prepare(work, args.docs, args.queries)
        qvec = np.load(work / "queries.npy")
        sides = {"kbsql": sys.executable}
        chroma = None if args.no_chroma else chroma_python(args.chroma_python)
        if chroma:
            sides["chroma"] = chroma
        else:
            report["chroma"] = "skipped: no interpreter with chromadb (pip install '.[bench]')"
        for side, python in sides.items():
            folder = work / side
            res = {"ingest": run_phase(python, side, "ingest", folder, args, work)}
            res["disk_mb"] = dir_mb(folder)
            res["open"] = run_phase(python, side, "open", folder, args, work)
            search = run_phase(python, side, "search", folder, args, work)
            for kind in ("unfiltered", "filtered"):
                search[kind].update(recall(search[kind].pop("ids"), exact[kind], qvec))
            if "sql_unfiltered" in search:  # the harness's definition: SQL route, first 100 queries
                search["sql_unfiltered"].update(recall(search["sql_unfiltered"].pop("ids"),
                                                       exact["unfiltered"], qvec))
            for point in search.get("curve", []):
                point.update(recall(point.pop("ids"), exact["unfiltered"], qvec))
            res["search"] = search
            res["peak_rss_mb"] = {p: res[p]["peak_rss_mb"] if p != "search" else search["peak_rss_mb"]
                                  for p in ("ingest", "open", "search")}
            report[side] = res
            shutil.rmtree(folder, ignore_errors=True)
        if args.hnsw_curve:
            report["faiss_hnsw_curve"] = hnsw_curve(work, args.docs, exact["unfiltered"], qvec)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["targets"] = targets(report, args.docs)
    report["machine"]["load_avg_at_end"] = os.getloadavg()[0]
    # 100k (and the smoke runs) in vs_chroma.json; 1M beside it, so both sizes stay on record
    write_report("vs_chroma" if args.docs <= 100_000 else f"vs_chroma_{args.docs // 1000}k", report)


def targets(report: dict, docs: int) -> dict:
    k = report["kbsql"]
    floor = 0.97 if docs <= 100_000 else 0.95
    out = {"target_recall_at_10": floor,
           "recall_met": k["search"]["unfiltered"]["recall_at_10"] >= floor,
           "recall_sql_route_met": k["search"].get("sql_unfiltered", {}).get("recall_at_10", 1.0) >= floor}
    c = report.get("chroma")
    if isinstance(c, dict):
        for kind in ("unfiltered", "filtered"):
            ratio = k["search"][kind]["p50_ms"] / c["search"][kind]["p50_ms"]
            out[f"{kind}_p50_ratio_to_chroma"] = round(ratio, 3)
            out[f"{kind}_p50_met"] = ratio <= 0.5
        out["target_p50_ratio"] = 0.5
        for phase in ("ingest", "open", "search"):
            ratio = k["peak_rss_mb"][phase] / c["peak_rss_mb"][phase]
            out[f"rss_{phase}_ratio_to_chroma"] = round(ratio, 3)
            out[f"rss_{phase}_met"] = ratio <= 1.0
        out["target_rss_ratio"] = 1.0
        ingest = k["ingest"]["docs_per_s"] / c["ingest"]["docs_per_s"]
        out["ingest_ratio_to_chroma"] = round(ingest, 3)
        out["ingest_met"] = ingest >= 2.0
        out["target_ingest_ratio"] = 2.0
    out["all_met"] = all(v for key, v in out.items() if key.endswith("_met"))
    return out


if __name__ == "__main__":
    main()
