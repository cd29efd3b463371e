"""kbsql against Chroma, side by side, on the near-duplicate corpus of issue 17.

Run: `python benchmarks/bench_vs_chroma.py [--docs 100000] [--queries 100] [--heldout 50]
[--chroma-python /work/venvs/chroma/bin/python] [--reuse DIR]`. Prints JSON and writes
benchmarks/results/vs_chroma.json (above 100k docs: vs_chroma_<N>k.json, e.g. _1000k at 1M).
`--reuse DIR` keeps the vectors, the exact answers and each side's ingested data in DIR, and a
later run with the same DIR searches them again without ingesting (its report repeats the
first run's ingest figures, marked `reused`): at 1M the ingest is ~10 minutes, so the index
settings and candidates are measured on one ingest (remove the index cache file to have it
rebuilt at open).

Both sides get identical vectors: kbsql embeds with its `hash-384` model; Chroma (embedded,
persisted, its default HNSW settings, cosine space) is fed the same vectors, computed here
once and read back by its process in batches. Its collection is created with an embedding
function that is kbsql's own hash-384 (`chroma_embedding_function`), so Chroma can also be
asked as its users ask it, `collection.query(query_texts=...)`: the `unfiltered_text` route
(in a process of its own, the `text` phase, so importing kbsql's embedder there does not
count in the search phase's peak RSS). kbsql is always asked with text (the query embedded
in its search); Chroma's `unfiltered` route is handed the query vectors, its `unfiltered_text`
route the texts, and `targets` sets kbsql's p50 against both (the one with text on both
sides, the users' path, decides `unfiltered_p50_met` when the collection has the embedding
function; an older --reuse ingest without it has only the vector route). Documents come
from benchmarks/neardup.py (pydoc paragraphs repeated with a unique token each), one chunk
per document, a metadata
column `g` = id % 10 for the filtered searches (10% of rows). Each phase (ingest, open, search)
runs in its own process so its peak RSS is its own; both sides insert in batches of
`--batch` rows.

Queries (issue 37): `--queries` of each kind of `neardup.workloads` (near-copies of
documents, short phrases, questions, paraphrases, queries far from any document), plus
`--heldout` of each kind from the held-out seed, which no setting was tuned on (reported
apart, `heldout:<kind>`). Search: p50/p99 of single queries, unfiltered (every query) and
filtered (the first third of each kind), and per kind the tie-aware recall@10 mean and
worst decile (the mean of its lowest 10% of queries: a mean hides the queries that find
nothing) against exact search over the same vectors. `recall_at_10` is the mean over the
tuning queries, `worst_decile` the lowest of their kinds'. kbsql's search is timed at the
service call (`engine.knowledge.search`, text in, rows with content and metadata out: the
level of Chroma's `collection.query`, which here also returns documents and metadatas)
and through SQL (the first 100 short phrases). kbsql's recall-vs-latency curve over
`nprobe` is recorded too, and over a larger exact re-score pool (`rerank` 5 and 10), or for
a scan over its refine pool (`refine`; the default grows with the rows: scan.auto_refine); the
other index candidates (HNSW, an HNSW coarse quantizer, cells chosen per query, scans of short
codes) are measured by bench_index_curve.py; `--index-candidate SPEC` runs the kbsql side with
one of them in place of the IVF (scan_candidate.py; report in vs_chroma_candidate.json,
defaults untouched). Chroma's own curve is over its HNSW's ef_search (`--chroma-ef`, each value
searched in a process of its own, the collection's setting restored after), and the report
sets kbsql's p50 against Chroma's at the lowest ef_search reaching kbsql's recall, or says that
none does (`targets.at_equal_recall`).

Chroma is an optional extra (`pip install '.[bench]'`, best in its own venv: it pins its own
dependencies): it runs under `--chroma-python` (default `$KBSQL_CHROMA_PYTHON`, else
/work/venvs/chroma/bin/python, else this interpreter). When none has chromadb, the Chroma
side is skipped and the report says so (CI's smoke run has no chromadb).

Recall@10 has one definition here, the same as the outside harness of issue 24: a returned
id is a hit when its exact cosine to the query (recomputed from the vectors, not the index's
approximate score) is at least the exact 10th best minus 1e-5; a query's recall is hits / 10.

Targets (issues 17, 24, 37): per kind, tie-aware recall@10 mean >= 0.97 and worst decile
>= 0.8 at 100k (mean >= 0.95 at 1M), filtered and unfiltered; kbsql search p50 <= half of
Chroma's; kbsql peak RSS <= Chroma's in each phase; ingest >= 2x Chroma's.
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
CURVE_NPROBE = [16, 32, 48, 96, 192, 384]
CURVE_RERANK = [5, 10]  # a larger exact re-score pool at the default nprobe (issue 37's candidates)
CURVE_REFINE = [10, 15, 25, 50, 100, 200]  # a scan's refine pools (the default is scan.auto_refine's)
CHROMA_EF = [200, 400, 800, 1600]  # Chroma's ef_search curve (its default: 100)
CANDIDATE = "KBSQL_BENCH_INDEX_CANDIDATE"
KBSQL_SRC = "KBSQL_BENCH_KBSQL_SRC"  # where the Chroma interpreter imports kbsql's embedder from
EMBEDDER = "kbsql-hash-384"  # the name Chroma persists for chroma_embedding_function


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
    from kbsql.engine.knowledge import scan
    from kbsql.engine.knowledge.search import Filter, SearchRequest

    if os.environ.get(CANDIDATE):  # --index-candidate: scan_candidate.py's index, not the IVF
        import scan_candidate
        scan_candidate.install(os.environ[CANDIDATE])
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
    plan = json.loads((work / "plan.json").read_text())
    t0 = time.perf_counter()
    first = eng.knowledge.search(record, SearchRequest(query=texts[0], limit=10))
    out["first_search_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    assert len(first) == 10
    if phase == "open":
        return out
    handle = eng.knowledge.handle(record)
    # the settings (nlist 0, refine 0: automatic) and what the index really has and uses
    index = handle.index
    out["index"] = {**index.settings.as_dict(), "kind": index.kind,
                    "cells": getattr(index.index, "nlist", None)}
    if index.kind == "scan" and not os.environ.get(CANDIDATE):
        out["index"].update(codes=scan.code_length(index.index), refine_used=index.refine)

    def plain(text):
        return [int(r[0]) for r in eng.knowledge.search(record, SearchRequest(query=text, limit=10))]

    def filtered(text):
        return [int(r[0]) for r in eng.knowledge.search(record, SearchRequest(
            query=text, limit=10, filters=[Filter("g", "=", FILTER_GROUP)]))]

    def via_sql(text):
        result = eng.query(bind("SELECT id FROM dups WHERE content = :q LIMIT 10", {"q": text}))
        assert len(result.data) == 10, result
        return [int(r[0]) for r in result.data]

    out["unfiltered"] = timed(plain, [texts[i] for i in plan["unfiltered"]])
    out["filtered"] = timed(filtered, [texts[i] for i in plan["filtered"]])
    out["sql_unfiltered"] = timed(via_sql, [texts[i] for i in plan["sql"]])
    curve = []
    default = handle.index.settings.nprobe
    if handle.index.kind == "ivf" and not os.environ.get(CANDIDATE):  # (a candidate has no nprobe)
        for nprobe in CURVE_NPROBE:
            handle.index.settings.nprobe = nprobe
            curve.append({"nprobe": nprobe, **timed(plain, [texts[i] for i in plan["unfiltered"]])})
        handle.index.settings.nprobe = default
        for rerank in CURVE_RERANK:
            handle.index.settings.rerank, before = rerank, handle.index.settings.rerank
            curve.append({"nprobe": default, "rerank": rerank,
                          **timed(plain, [texts[i] for i in plan["unfiltered"]])})
            handle.index.settings.rerank = before
    if handle.index.kind == "scan" and not os.environ.get(CANDIDATE):
        for refine in [r for r in CURVE_REFINE if r != handle.index.refine]:  # (the default's, once)
            handle.index.settings.refine = refine
            curve.append({"refine": refine, **timed(plain, [texts[i] for i in plan["unfiltered"]])})
        handle.index.settings.refine = 0
    out["curve"] = curve
    return out


def timed(fn, items: list) -> dict:
    """Each item searched once after 20 warm-up calls: every answer and its seconds (the
    parent groups them by query kind)."""
    for item in items[:20]:
        fn(item)
    times, answers = [], []
    for item in items:
        t = time.perf_counter()
        answers.append(fn(item))
        times.append(time.perf_counter() - t)
    return {"seconds": times, "ids": answers}


# Chroma side (runs in the interpreter that has chromadb) ---------------------------------
def chroma_embedding_function():
    """A Chroma embedding function that is kbsql's hash-384 model itself (imported, at its first
    call, from the kbsql source the parent runs, `KBSQL_SRC`), so Chroma's query_texts route
    embeds a query exactly as kbsql's search does and both sides are timed from the same text.
    Registered under EMBEDDER by every Chroma phase: a collection created with it cannot be
    opened or modified by a process that does not know the name. (Imported lazily so the
    phases that do not embed, the search phase among them, keep their peak RSS.)"""
    from chromadb import EmbeddingFunction
    from chromadb.utils.embedding_functions import register_embedding_function

    class KbsqlHash(EmbeddingFunction):
        def __init__(self) -> None:
            self.inner = None

        def __call__(self, input):  # (Chroma's parameter name)
            if self.inner is None:
                sys.path.insert(0, os.environ[KBSQL_SRC])
                from kbsql.engine.models.embeddings import HashEmbedder

                self.inner = HashEmbedder(DIM)
            return list(self.inner.embed(list(input)))

        @staticmethod
        def name() -> str:
            return EMBEDDER

        def get_config(self) -> dict:
            return {}

        @staticmethod
        def build_from_config(config: dict) -> KbsqlHash:
            return KbsqlHash()

    try:
        register_embedding_function(KbsqlHash)
    except ValueError:  # (registered already in this process)
        pass
    return KbsqlHash()


def chroma_child(phase: str, folder: Path, docs: int, batch: int, work: Path) -> dict:
    import chromadb

    client = chromadb.PersistentClient(path=str(folder))
    out: dict = {"chromadb": chromadb.__version__}
    embedder = chroma_embedding_function()  # (registers its name: see there)
    if phase == "ingest":
        collection = client.create_collection("dups", metadata={"hnsw:space": "cosine"},
                                              embedding_function=embedder)
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
    if phase == "text":  # the users' route: query texts, embedded by the collection's function
        return chroma_text(client, work, embedder)
    collection = client.get_collection("dups")
    if phase.startswith("ef="):  # set ef_search (read at open: a later process searches with it)
        before = collection.configuration_json["hnsw"]["ef_search"]
        collection.modify(configuration={"hnsw": {"ef_search": int(phase[3:])}})
        return {"ef_search_before": before}
    queries = np.load(work / "queries.npy")
    plan = json.loads((work / "plan.json").read_text())
    include = ["documents", "metadatas", "distances"]
    t0 = time.perf_counter()
    assert len(collection.query(query_embeddings=queries[:1], n_results=10, include=include)["ids"][0]) == 10
    out["first_search_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    out["ef_search"] = collection.configuration_json["hnsw"]["ef_search"]
    if phase == "open":
        return out

    def search(where):
        def one(q):
            res = collection.query(query_embeddings=q[None], n_results=10, where=where, include=include)
            return [int(i) for i in res["ids"][0]]
        return one

    out["unfiltered"] = timed(search(None), list(queries[plan["unfiltered"]]))
    if phase == "curve":  # one point of the ef_search curve (run_side)
        return out
    out["filtered"] = timed(search({"g": FILTER_GROUP}), list(queries[plan["filtered"]]))
    return out


def chroma_text(client, work: Path, embedder) -> dict:
    """Chroma's unfiltered searches asked with the query texts (`query_texts`), the
    collection opened with `chroma_embedding_function`; {} for a collection ingested without
    it (an older --reuse directory: Chroma refuses another function than the persisted one)."""
    persisted = client.get_collection("dups").configuration_json.get("embedding_function") or {}
    if persisted.get("name") != EMBEDDER:
        return {}
    collection = client.get_collection("dups", embedding_function=embedder)
    texts = json.loads((work / "queries.json").read_text())
    plan = json.loads((work / "plan.json").read_text())
    include = ["documents", "metadatas", "distances"]

    def one(text):
        return [int(i) for i in collection.query(query_texts=[text], n_results=10, include=include)["ids"][0]]

    return {"unfiltered_text": timed(one, [texts[i] for i in plan["unfiltered"]])}


def child_main(side: str, phase: str, folder: Path, docs: int, batch: int, work: Path) -> None:
    fn = kbsql_child if side == "kbsql" else chroma_child
    out = fn(phase, folder, docs, batch, work)
    out["peak_rss_mb"] = peak_rss_mb()
    print("RESULT " + json.dumps(out))


# the parent: data, exact answers, phases, recall -----------------------------------------
def query_sets(per_kind: int, heldout: int) -> tuple[list[str], list[str], dict]:
    """Every query text, its label (`tuning:<kind>` or `heldout:<kind>`), and which of them
    each route searches: all of them unfiltered; the first third of every label (20 at
    least) filtered (a filtered Chroma search takes ~100 ms); the first 100 short phrases
    through SQL (the harness of issue 37 typed phrases)."""
    texts, labels = [], []
    for name, seed, count in (("tuning", neardup.TUNING_SEED, per_kind),
                              ("heldout", neardup.HELDOUT_SEED, heldout)):
        for kind, block in neardup.workloads(count, seed).items() if count else ():
            texts += block
            labels += [f"{name}:{kind}"] * len(block)
    plan: dict[str, list[int]] = {"unfiltered": list(range(len(texts))), "filtered": [], "sql": []}
    for label in dict.fromkeys(labels):
        rows = [i for i, lab in enumerate(labels) if lab == label]
        plan["filtered"] += rows[:max(20, len(rows) // 3)]
    plan["sql"] = [i for i, lab in enumerate(labels) if lab == "tuning:phrase"][:100]
    return texts, labels, plan


def prepare(work: Path, docs: int, texts: list[str], plan: dict) -> dict:
    """Query vectors; every document's vector (for Chroma); exact top-10 per query,
    unfiltered and filtered, streamed batch by batch."""
    from kbsql.engine.models.embeddings import HashEmbedder

    emb = HashEmbedder(DIM)
    q = emb.embed(texts)
    cached = work / "exact.npz"  # --reuse: the vectors and exact answers of an earlier run
    if cached.exists() and (work / "queries.json").read_text() == json.dumps(texts):
        saved = np.load(cached)
        return {name: (saved[f"{name}_s"], saved[f"{name}_i"]) for name in ("unfiltered", "filtered")}
    (work / "queries.json").write_text(json.dumps(texts))
    (work / "plan.json").write_text(json.dumps(plan))
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
    np.savez(cached, **{f"{name}_{part}": arr for name, (s, i) in best.items()
                        for part, arr in (("s", s), ("i", i))})
    return {name: (s, i) for name, (s, i) in best.items()}


def grade(result: dict, rows: list[int], labels: list[str], exact: tuple[np.ndarray, np.ndarray],
          qvec: np.ndarray) -> dict:
    """A route's answers (`result`: ids and seconds of queries `rows`) graded per label:
    tie-aware recall@10 mean and worst decile, p50; overall: tuning queries' mean recall
    (strict too), the lowest worst decile of any tuning kind, p50/p99 of every query."""
    from kbsql.engine.models.embeddings import HashEmbedder

    emb = HashEmbedder(DIM)
    e_scores, e_ids = exact
    answers = result.pop("ids")
    got_scores = []
    for row, ids in zip(rows, answers, strict=True):
        vectors = emb.embed([neardup.documents(1, i)[0] for i in ids]) if ids else np.zeros((0, DIM))
        got_scores.append(vectors @ qvec[row])
    tie, strict = neardup.recall_per_query([np.array(a) for a in answers], got_scores,
                                           e_ids[rows], e_scores[rows])
    seconds = np.array(result.pop("seconds"))
    row_labels = np.array([labels[r] for r in rows])
    by_label = {}
    for label in dict.fromkeys(row_labels):
        mask = row_labels == label
        by_label[label] = {**neardup.summary(tie[mask]), "p50_ms": pct(list(seconds[mask]), 50)}
    tuning = np.char.startswith(row_labels.astype(str), "tuning:")
    return {"p50_ms": pct(list(seconds), 50), "p99_ms": pct(list(seconds), 99),
            "recall_at_10": round(float(tie[tuning].mean()), 4),
            "recall_at_10_strict": round(float(strict[tuning].mean()), 4),
            "worst_decile": min(v["worst_decile"] for k, v in by_label.items() if k.startswith("tuning:")),
            "by_kind": by_label}


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100, help="per query kind (neardup.KINDS)")
    parser.add_argument("--heldout", type=int, help="held-out queries per kind (default: half --queries)")
    parser.add_argument("--batch", type=int, default=5_000, help="rows per insert call, both sides")
    parser.add_argument("--chroma-python")
    parser.add_argument("--no-chroma", action="store_true")
    parser.add_argument("--index-candidate", help="FAISS spec: scan_candidate.py's index on the kbsql side")
    parser.add_argument("--chroma-ef", type=lambda v: [int(x) for x in v.split(",") if x],
                        default=CHROMA_EF, help="Chroma's ef_search curve, comma-separated ('' for none)")
    parser.add_argument("--timeout", type=int, default=7200)
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "PHASE", "DIR"))
    parser.add_argument("--work")
    parser.add_argument("--reuse", help="keep the vectors and kbsql's data here; a later run reuses them")
    args = parser.parse_args()
    if args.child:
        side, phase, folder = args.child
        child_main(side, phase, Path(folder), args.docs, args.batch, Path(args.work))
        return
    from report import write_report  # benchmarks/report.py

    if args.index_candidate:  # the children inherit it; the report goes to vs_chroma_candidate
        os.environ[CANDIDATE] = args.index_candidate
    import kbsql  # (the source this run searches: Chroma's text route embeds with its hash-384)

    os.environ[KBSQL_SRC] = str(Path(kbsql.__file__).resolve().parents[1])

    heldout = args.queries // 2 if args.heldout is None else args.heldout
    texts, labels, plan = query_sets(args.queries, heldout)
    report: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()[0]},
                    "workload": {"docs": args.docs, "queries_per_kind": args.queries,
                                 "heldout_per_kind": heldout, "kinds": list(neardup.KINDS),
                                 "seeds": {"tuning": neardup.TUNING_SEED, "heldout": neardup.HELDOUT_SEED},
                                 "batch": args.batch,
                                 "embedder": "kbsql hash-384 (identical vectors on both sides)",
                                 "corpus": "pydoc paragraphs + a unique token each (benchmarks/neardup.py)",
                                 "filter": f"g = {FILTER_GROUP} ({100 // GROUPS}% of rows)"}}
    work = Path(args.reuse or tempfile.mkdtemp(prefix="kbsql-vs-chroma-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        exact = prepare(work, args.docs, texts, plan)
        qvec = np.load(work / "queries.npy")
        sides = {"kbsql": sys.executable}
        chroma = None if args.no_chroma else chroma_python(args.chroma_python)
        if chroma:
            sides["chroma"] = chroma
        else:
            report["chroma"] = "skipped: no interpreter with chromadb (pip install '.[bench]')"
        for side, python in sides.items():
            report[side] = run_side(python, side, work / side, args, work, (labels, plan, exact, qvec))
    finally:
        if not args.reuse:
            shutil.rmtree(work, ignore_errors=True)
    report["targets"] = targets(report, args.docs)
    report["machine"]["load_avg_at_end"] = os.getloadavg()[0]
    # 100k (and the smoke runs) in vs_chroma.json; 1M beside it, so both sizes stay on record
    name = "vs_chroma" if args.docs <= 100_000 else f"vs_chroma_{args.docs // 1000}k"
    if args.index_candidate:
        report["index_candidate"] = args.index_candidate
    write_report(name.replace("vs_chroma", "vs_chroma_candidate") if args.index_candidate else name, report)


def run_side(python: str, side: str, folder: Path, args, work: Path, truth: tuple) -> dict:
    """One side's three phases, each in its own process, and its answers graded."""
    labels, plan, exact, qvec = truth
    done = folder / "ingest.json"  # --reuse: the data of an earlier run, and its ingest figures
    if not (args.reuse and done.exists()):
        shutil.rmtree(folder, ignore_errors=True)
        done.write_text(json.dumps(run_phase(python, side, "ingest", folder, args, work)))
    res = {"ingest": {**json.loads(done.read_text()), "reused": bool(args.reuse)}}
    res["disk_mb"] = dir_mb(folder)
    res["open"] = run_phase(python, side, "open", folder, args, work)
    search = run_phase(python, side, "search", folder, args, work)
    if side == "chroma":  # (its own process: see chroma_text)
        text = run_phase(python, side, "text", folder, args, work)
        search["text_peak_rss_mb"] = text.pop("peak_rss_mb")
        search.update(text)
    for route, rows, kind in (("unfiltered", plan["unfiltered"], "unfiltered"),
                              ("unfiltered_text", plan["unfiltered"], "unfiltered"),
                              ("filtered", plan["filtered"], "filtered"),
                              ("sql_unfiltered", plan["sql"], "unfiltered")):
        if route in search:  # sql_unfiltered: the harness's route (kbsql only); unfiltered_text: Chroma's
            search[route] = grade(search[route], rows, labels, exact[kind], qvec)
    if side == "chroma" and args.chroma_ef:
        search["curve"] = chroma_curve(python, folder, args, work)
    for point in search.get("curve", []):
        point.update(grade(point, plan["unfiltered"], labels, exact["unfiltered"], qvec))
    res["search"] = search
    res["peak_rss_mb"] = {p: res[p]["peak_rss_mb"] if p != "search" else search["peak_rss_mb"]
                          for p in ("ingest", "open", "search")}
    if not args.reuse:
        shutil.rmtree(folder, ignore_errors=True)
    return res


def chroma_curve(python: str, folder: Path, args, work: Path) -> list[dict]:
    """Chroma's unfiltered searches at each `--chroma-ef` ef_search, each in a process of its
    own: Chroma reads ef_search when it opens the collection (set and searched in one process,
    the search kept the old one: 100k, ef 100 -> 1600, the same answers). The setting persists
    in the collection, so the one it had is put back, whatever happens."""
    points: list[dict] = []
    default = None
    try:
        for ef in args.chroma_ef:
            before = run_phase(python, "chroma", f"ef={ef}", folder, args, work)["ef_search_before"]
            if default is None:
                default = before
            point = run_phase(python, "chroma", "curve", folder, args, work)
            points.append({"ef_search": point["ef_search"], **point["unfiltered"]})
    finally:
        if default is not None:
            run_phase(python, "chroma", f"ef={default}", folder, args, work)
    return points


def matched_recall(k_search: dict, c_search: dict) -> dict:
    """kbsql's unfiltered p50 against Chroma's at the lowest ef_search of its curve whose
    tuning recall reaches kbsql's (the comparison at equal recall), or, if none does, Chroma's
    best recall on the curve and its p50."""
    want = k_search["unfiltered"]["recall_at_10"]
    points = sorted(c_search.get("curve", []), key=lambda p: p["ef_search"])
    if not points:
        return {}
    reached = [p for p in points if p["recall_at_10"] >= want]
    if reached:
        p = reached[0]
        return {"chroma_ef_at_kbsql_recall": p["ef_search"], "chroma_p50_at_kbsql_recall": p["p50_ms"],
                "p50_ratio_at_equal_recall": round(k_search["unfiltered"]["p50_ms"] / p["p50_ms"], 3)}
    best = max(points, key=lambda p: p["recall_at_10"])
    return {"chroma_reaches_kbsql_recall": False, "kbsql_recall_at_10": want,
            "chroma_best_recall_at_10": best["recall_at_10"], "chroma_best_ef_search": best["ef_search"],
            "chroma_best_p50_ms": best["p50_ms"]}


def targets(report: dict, docs: int) -> dict:
    """Recall per query kind (tuning queries; the held-out ones apart), filtered and not: the
    mean >= 0.97 at 100k (0.95 at 1M) and, at 100k, the worst decile >= 0.8; then the ratios
    to Chroma measured in the same run."""
    k = report["kbsql"]
    floor, decile = (0.97, 0.8) if docs <= 100_000 else (0.95, 0.0)
    out: dict = {"target_recall_at_10": floor, "target_worst_decile": decile}
    for route in ("unfiltered", "filtered", "sql_unfiltered"):
        for name in ("tuning", "heldout"):
            kinds = {key: v for key, v in k["search"][route]["by_kind"].items() if key.startswith(name)}
            if kinds:
                out[f"recall_{route}_{name}_met"] = all(
                    v["mean"] >= floor and v["worst_decile"] >= decile for v in kinds.values())
    c = report.get("chroma")
    if isinstance(c, dict):
        for kind in ("unfiltered", "filtered"):
            ratio = k["search"][kind]["p50_ms"] / c["search"][kind]["p50_ms"]
            out[f"{kind}_p50_ratio_to_chroma"] = round(ratio, 3)
            out[f"{kind}_p50_met"] = ratio <= 0.5
        if "unfiltered_text" in c["search"]:  # text on both sides (kbsql's is always text): this decides
            out["unfiltered_vectors_p50_at_most_half"] = out.pop("unfiltered_p50_met")
            ratio = k["search"]["unfiltered"]["p50_ms"] / c["search"]["unfiltered_text"]["p50_ms"]
            out["unfiltered_text_p50_ratio_to_chroma"] = round(ratio, 3)
            out["unfiltered_p50_met"] = ratio <= 0.5
        out["target_p50_ratio"] = 0.5
        out["at_equal_recall"] = matched_recall(k["search"], c["search"])  # (no target: context)
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
