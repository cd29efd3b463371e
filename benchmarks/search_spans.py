"""Where bench_vs_chroma's kbsql search time goes, step by step (issue 37).

Run: `python benchmarks/search_spans.py [--docs 100000] [--folder DIR] [--reps 3]`. Builds the
benchmark's knowledge base (bench_vs_chroma's own ingest: hash-384, near-duplicates, `g` =
id % 10) in DIR unless DIR already holds it, then times bench_vs_chroma's two service searches
(`engine.knowledge.search`, the level it compares with Chroma's `collection.query`) over its
query plan: unfiltered (every query) and filtered on g = 3 (10% of the rows). Each step is a
perf_counter span around the engine function that does it (the FAISS call, the exact re-score,
the filter's seqs, ...), exclusive of the others; `rest` is what no span covers. Prints one
Markdown table per route: microseconds per search and share of the total.

The spans add ~1 us each; what they show is where the time goes, not a latency figure (take
those from bench_vs_chroma). To compare two versions, run this file with each one's
`PYTHONPATH` on the same folder, with `--answers FILE`: the first run writes every search's
rows (id, distance) there, a later one fails if any answer differs (ids, order or distance).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_vs_chroma as bench  # noqa: E402

STEPS = [("embed", "query embedding (hash-384)"), ("sync", "index sync (store version read)"),
         ("allowed", "filter -> allowed seqs"), ("faiss", "FAISS search (SWIG call + wrapper)"),
         ("vector_index", "VectorIndex.search around FAISS (selector, parameters)"),
         ("exact", "exact re-score (candidate vectors from SQLite)"),
         ("load_rows", "load_rows (content, metadata)")]


class Spans:
    """Seconds spent per step; `wrap` times every call of one function."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, owner: Any, name: str, step: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[step] += time.perf_counter() - start

        setattr(owner, name, timed)


class TimedIndex:
    """The FAISS index with its `search` timed (everything else passed through)."""

    def __init__(self, inner: Any, spans: Spans):
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "spans", spans)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.inner.search(*args, **kwargs)
        finally:
            self.spans.seconds["faiss"] += time.perf_counter() - start


def instrument(eng: Any, record: Any) -> Spans:
    from kbsql.engine.knowledge import local
    from kbsql.engine.knowledge import search as search_mod
    from kbsql.engine.knowledge.index import VectorIndex

    spans = Spans()
    handle = eng.knowledge.handle(record)
    handle.index.index = TimedIndex(handle.index.index, spans)
    spans.wrap(search_mod, "embed_query", "embed")
    if hasattr(local, "AllowedSeqs"):  # kept per filter (knowledge/allowed.py)
        spans.wrap(local.AllowedSeqs, "seqs", "allowed")
    else:
        spans.wrap(local, "matching_seqs", "allowed")
    spans.wrap(local, "_exact", "exact")
    spans.wrap(local, "load_rows", "load_rows")
    spans.wrap(VectorIndex, "search", "vector_index")
    spans.wrap(VectorIndex, "sync", "sync")
    return spans


def table(route: str, totals: list[float], seconds: dict[str, float]) -> str:
    n, total = len(totals), sum(totals)
    own = dict(seconds)
    own["vector_index"] = own.get("vector_index", 0.0) - own.get("faiss", 0.0)  # exclusive
    rows = [(label, own.get(step, 0.0)) for step, label in STEPS]
    rows.append(("rest (service lookups, result rows, JSON, dicts)", total - sum(v for _, v in rows)))
    outside = total - own.get("faiss", 0.0)
    lines = [f"{route}: {n} searches, mean {total / n * 1e6:.0f} us, p50 "
             f"{statistics.median(totals) * 1e6:.0f} us", "| step | us / search | share |", "|---|---|---|"]
    lines += [f"| {label} | {v / n * 1e6:.0f} | {v / total:.1%} |" for label, v in rows if v]
    lines.append(f"| outside FAISS | {outside / n * 1e6:.0f} | {outside / total:.1%} |")
    return "\n".join(lines)


def check_answers(path: Path, answers: dict[str, list[Any]]) -> None:
    """Write `answers` to `path`, or, if it exists, exit non-zero unless they are the same."""
    if not path.exists():
        path.write_text(json.dumps(answers))
        print(f"answers written to {path}")
        return
    before = json.loads(path.read_text())
    differ = {route: sum(a != b for a, b in zip(before[route], got, strict=True))
              for route, got in answers.items()}
    print(f"answers against {path}: {differ} differ")
    if any(differ.values()):
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--folder", help="data directory (the knowledge base is built there if absent)")
    parser.add_argument("--reps", type=int, default=3, help="passes over the query plan per route")
    parser.add_argument("--answers", help="JSON of every answer: written if absent, else compared")
    args = parser.parse_args()
    from kbsql.engine import Engine
    from kbsql.engine.knowledge.search import Filter, SearchRequest

    folder = Path(args.folder or tempfile.mkdtemp(prefix="kbsql-spans-"))
    if not (folder / "knowledge_bases").exists():
        bench.kbsql_child("ingest", folder, args.docs, 5_000, folder)
    texts, _, plan = bench.query_sets(100, 50)
    eng = Engine(folder)
    record = eng.catalog.knowledge_base("mindsdb", "dups")
    eng.knowledge.search(record, SearchRequest(query=texts[0], limit=10))
    spans = instrument(eng, record)
    answers: dict[str, list[list[list[Any]]]] = {}
    for route, filters in (("unfiltered", []), ("filtered", [Filter("g", "=", bench.FILTER_GROUP)])):
        def one(text: str, filters: list[Any] = filters) -> Any:
            return eng.knowledge.search(record, SearchRequest(query=text, limit=10, filters=filters))
        items = [texts[i] for i in plan[route]]
        answers[route] = [[[r[0], r[5]] for r in one(text)] for text in items]  # (and the warm-up)
        spans.seconds.clear()
        totals = []
        for _ in range(args.reps):
            for text in items:
                start = time.perf_counter()
                one(text)
                totals.append(time.perf_counter() - start)
        print(table(route, totals, spans.seconds) + "\n")
    eng.close()
    if args.answers:
        check_answers(Path(args.answers), answers)
    if args.folder is None:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
