"""Benchmark: ingest with the default model against sentence-transformers, same texts, same run.

Rows are Python's own documentation topics (pydoc_data); ours is the path a user waits
for: `insert_rows` into a knowledge base with default settings (chunking, the default
all-MiniLM-L6-v2 on ONNX Runtime, SQLite, FAISS), in chunks per second. The baseline is
sentence-transformers (torch, fp32) encoding the same chunk texts with its defaults, in a
child process of a separate venv (`$KBSQL_ST_PYTHON`, else /work/wt/st-venv/bin/python,
else /work/venvs/st/bin/python; `pip install torch==2.13.0 sentence-transformers` there).
Beside them, the model alone in each precision of benchmarks/bench_retrieval.py's MODELS
(`--variants`), with the quality each reached on every evaluation set (read from
results/retrieval.json: the speed of a variant means nothing without it). Runs alternate
between all of them and the best of each is kept (the machine is shared: compare only
figures of one run, and read `load_average_1m`). Without the baseline venv (CI) the
baseline is skipped and said so. Fidelity: cosine of the default's vectors to the exact fp32
model (numpy) on the same chunks. Target: ingest >= 1.5x sentence-transformers with the
default at fp32 quality (recall@5 and MRR within 0.005 of fp32 on every set).

Usage: python benchmarks/bench_embed.py [--chunks 240] [--rounds 3] [--variants onnx-fp32,onnx-int8]
Prints JSON and writes benchmarks/results/embed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

from kbsql.engine import Engine
from kbsql.engine.knowledge.chunking import ChunkingConfig, split_text
from kbsql.engine.models import minilm

TARGET_RATIO = 1.5
TARGET_COSINE = 0.99
ST_PYTHONS = ("/work/wt/st-venv/bin/python", "/work/venvs/st/bin/python")
ST_SCRIPT = """
import json, sys, time
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1], device="cpu")
texts = json.loads(sys.stdin.readline())
model.encode(texts[:8])
print("ready", flush=True)
for line in sys.stdin:
    start = time.perf_counter()
    model.encode(texts)
    print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)
"""


def corpus(max_chunks: int) -> tuple[list[dict[str, Any]], list[str]]:
    import pydoc_data.topics

    rows, chunks = [], []
    for name, text in sorted(pydoc_data.topics.topics.items()):
        spans = split_text(text, ChunkingConfig())
        if len(chunks) + len(spans) > max_chunks:
            continue
        rows.append({"id": name, "content": text})
        chunks.extend(text[s:e] for s, e in spans)
    return rows, chunks


class SentenceTransformers:
    """sentence-transformers in its own venv, kept running: `seconds()` times one encode."""

    def __init__(self, python: str, texts: list[str]):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.proc = subprocess.Popen([python, "-c", ST_SCRIPT, str(minilm.model_dir())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.proc.stdin.write(json.dumps(texts) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        if self.proc.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
            raise RuntimeError("sentence-transformers did not start")

    def seconds(self) -> float:
        self.proc.stdin.write("run\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(self.proc.stdout.readline())["seconds"]  # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=60)


def fidelity(model: Any, chunks: list[str]) -> dict[str, float]:
    ours = model.encode(chunks)
    exact = minilm.MiniLM(minilm.model_dir()).encode(chunks)
    cosines = (ours * exact).sum(axis=1)
    return {"min": round(float(cosines.min()), 4), "mean": round(float(cosines.mean()), 4)}


def quality(variant: str) -> dict[str, Any] | None:
    """recall@5 / MRR of a model's dense search on every set, from results/retrieval.json."""
    path = Path(__file__).resolve().parent / "results" / "retrieval.json"
    if not path.exists():
        return None
    report = json.loads(path.read_text())
    sets = {**report.get("tuning_sets", {}), "heldout": report.get("heldout") or {}}
    out = {name: {k: r[f"{variant}-dense"][k] for k in ("recall_at_5", "mrr")}
           for name, r in sets.items() if f"{variant}-dense" in r}
    return out or None


def main() -> None:
    import bench_retrieval

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="onnx-fp32,onnx-down8,onnx-ffn8,onnx-int8",
                        help="models of bench_retrieval.MODELS timed alone beside the default")
    args = parser.parse_args()
    rows, chunks = corpus(args.chunks)
    candidates = [os.environ.get("KBSQL_ST_PYTHON"), *ST_PYTHONS]
    python = next((c for c in candidates if c and Path(c).exists()), None)
    st = SentenceTransformers(python, chunks) if python else None
    variants = {name: bench_retrieval.MODELS[name][1]() for name in args.variants.split(",") if name}
    ingest, encode, baseline = [], [], []
    alone: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp, Engine(Path(tmp) / "e") as engine:
        model = engine.models.context.load_once(minilm.MODEL_NAME, minilm.load_model)  # the engine's own
        for m in (model, *variants.values()):
            m.encode(chunks[:8])  # load and warm
        for attempt in range(args.rounds):  # alternated: all see the same machine load
            if st is not None:
                baseline.append(len(chunks) / st.seconds())
            start = time.perf_counter()
            model.encode(chunks)
            encode.append(len(chunks) / (time.perf_counter() - start))
            engine.create_knowledge_base("mindsdb", {"name": f"docs{attempt}"})
            record = engine.catalog.knowledge_base("mindsdb", f"docs{attempt}")
            start = time.perf_counter()
            engine.insert_rows(record, rows)
            ingest.append(len(chunks) / (time.perf_counter() - start))
            assert engine.knowledge.count(record) == len(chunks)
            for name, variant in variants.items():
                start = time.perf_counter()
                variant.encode(chunks)
                alone[name].append(len(chunks) / (time.perf_counter() - start))
    if st is not None:
        st.close()
    cosine = fidelity(model, chunks)
    best = max(ingest)
    top = max(baseline) if baseline else None
    report: dict[str, Any] = {
        "benchmark": "embed", "rows": len(rows), "chunks": len(chunks),
        "model": type(model).__name__, "default_precision": minilm.default_precision(),
        "ingest_chunks_per_s": round(best, 2), "ingest_rounds": [round(r, 2) for r in ingest],
        "model_encode_chunks_per_s": round(max(encode), 2),
        "variants_encode_alone": {
            name: {"chunks_per_s": round(max(v), 2), "rounds": [round(x, 2) for x in v],
                   "ratio_to_sentence_transformers": round(max(v) / top, 3) if top else None,
                   "quality_dense": quality(name)} for name, v in alone.items()},
        "quality_dense_fp32": quality("fp32"), "quality_dense_default": quality("default"),
        "cosine_to_fp32": cosine, "target_cosine": TARGET_COSINE,
        "target_ratio": TARGET_RATIO, "load_average_1m": round(os.getloadavg()[0], 2),
    }
    if st is None:
        report.update({"baseline_sentence_transformers_chunks_per_s": None,
                       "baseline_skipped": f"no sentence-transformers venv at {candidates}",
                       "meets_target": None})
    else:
        ratio = best / max(baseline)
        report.update({"baseline_sentence_transformers_chunks_per_s": round(max(baseline), 2),
                       "baseline_rounds": [round(r, 2) for r in baseline],
                       "ratio_ingest_to_sentence_transformers": round(ratio, 3),
                       "meets_target": ratio >= TARGET_RATIO and cosine["min"] >= TARGET_COSINE})
    write_report("embed", report)


if __name__ == "__main__":
    main()
