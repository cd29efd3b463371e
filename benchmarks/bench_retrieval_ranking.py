"""Benchmark: which ranking puts the answer first (issue 37, item 3)?

The default search finds a right answer among the first 5 documents for most questions, but
often 2nd or 3rd. This script measures ranking candidates on every evaluation set of
bench_retrieval.py (benchmarks/retrieval/: `pydoc`, `stdlib`, `tickets` for tuning, `heldout`
never tuned on and reported apart), all over the same candidates:

Each corpus goes into a knowledge base with default settings (the shipped model, chunk_size
1000 / overlap 200); each question is searched once through the embedded client
(`kbsql.connect(data_dir=...)`), as a user does:
- vector: `SELECT id, chunk_id, chunk_content, distance FROM kb WHERE content = '<q>'
  AND hybrid_search = false LIMIT 50` (the shipped ranking; the first 30 rows are exactly
  what bench_retrieval's `default` scores);
- keyword: `... AND hybrid_search_alpha = 0 LIMIT 100`: the keyword ranking first, its
  relevance the keyword score (for the fusion rankings).
Each ranking reorders those candidates; its first 30 chunks are reduced to documents and
scored as bench_retrieval does (recall@1, recall@5, MRR).

Rankings (`dense` is the shipped one):
- `sentence-<w>-top<N>`: each of the first N chunks scored (1 - w) x its cosine + w x its best
  sentence's (whole sentences as the offline agent reads them, `offline_text.sentences`;
  embedded at query time by the same model: the cost grows with N, not with the knowledge base);
- `sentmax-top<N>`: each of the first N chunks scored by the better of its cosine and its best
  sentence's;
- `sentrank-<w>-k<k>-top<N>`: reciprocal rank fusion of the chunks' own ranking and their
  ranking by best sentence (weight w, RRF_K = k) over the first N chunks;
- `plain<ranking>` (`plainsentence-...`, `plainsentrank-...`, `plainsentmax-...`): the same with
  sentences cut plainly (`plain_units`: nothing dropped);
- `fusion-a<alpha>-k<k>`: weighted reciprocal rank fusion of the vector and keyword rankings
  (`search.weights`, with RRF_K = k);
- `maxsim-<w>-top<N>`: a reranker built on the bundled model: token-level late interaction
  (each query token's best cosine among the chunk's tokens, the model's last hidden states
  in fp32, averaged), mixed with the chunk's cosine as above.
A ranking wins when its MRR is above `dense`'s on every set, held out included, and its
recall@5 is nowhere below. Cost: p50 of the shipped search through the embedded client, and
the median of each ranking's own work a question (its model calls on the top N, from
nothing: no vector known), timed on the first COST_SAMPLE questions of each set.
The misses (questions whose answer did not come first) are kept for `dense` and the winners.
The committed results/retrieval_ranking.json merges runs of this script over subsets of the
rankings (its `runs`: which, with each run's search p50, costs and load; `dense` identical in
each), and says in `conclusion` what was kept and why.

Usage: python benchmarks/bench_retrieval_ranking.py [--rankings all] [--smoke] [--cache DIR]
Writes benchmarks/results/retrieval_ranking.json.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_retrieval import CachedModel, engine_with, quote, score, smoke_rows
from report import write_report
from retrieval import corpora

import kbsql
from kbsql.engine.knowledge.search import keyword_terms, weights
from kbsql.engine.models import minilm
from kbsql.engine.models.chat import offline_text

VECTOR_LIMIT, KEYWORD_LIMIT, SCORED = 50, 100, 30
COST_SAMPLE = 8  # questions a set whose rankings' work is timed from nothing
Candidate = tuple[str, float]  # (document id, cosine similarity)


class Question:
    """One question's candidates, as the searches returned them."""

    def __init__(self, q: corpora.Question, vector: list[list[Any]], keyword: list[list[Any]]):
        self.q, self.text = q, q.question
        self.vector = [(str(r[0]), str(r[1]), str(r[2]), 1.0 - float(r[3])) for r in vector]
        self.keyword = [(str(r[0]), str(r[1]), float(r[3]), 1.0 - float(r[4])) for r in keyword
                        if float(r[3]) > 0]


class TokenMiniLM(minilm.MiniLM):
    """The bundled model in fp32 (numpy) giving its last hidden states, L2-normalised per
    token (what late interaction compares), rather than their mean."""

    def tokens(self, text: str) -> np.ndarray:
        from kbsql.engine.models.minilm import _gelu_inplace, _layer_norm_inplace, _linear

        ids = self.tokenizer.encode(text).ids
        n, head_dim = len(ids), self.dim // self.heads
        x = self.word[np.array([ids])] + self.position[:n] + self.token_type
        x = _layer_norm_inplace(x, *self.emb_ln, self.eps)
        bias, scale = np.zeros((1, 1, 1, n), np.float32), np.float32(1.0 / np.sqrt(head_dim))
        for layer in self.layers:
            qkv = _linear(x, layer["qkv"], layer["qkv_b"], None).reshape(1, n, 3, self.heads, head_dim)
            context = np.empty((1, n, self.heads, head_dim), dtype=np.float32)
            self._attention(qkv, bias, scale, context)
            h = _linear(context.reshape(1, n, self.dim), layer["o"], layer["o_b"], None) + x
            x = _layer_norm_inplace(h, layer["ln1"][0], layer["ln1"][1], self.eps)
            h = _linear(_gelu_inplace(_linear(x, layer["i"], layer["i_b"], None)), layer["out"],
                        layer["out_b"], None) + x
            x = _layer_norm_inplace(h, layer["ln2"][0], layer["ln2"][1], self.eps)
        t = x[0, 1:-1] if n > 2 else x[0]  # [CLS] and [SEP] say nothing of the words
        return t / np.linalg.norm(t, axis=1, keepdims=True)


class Rankers:
    """The rankings' model work. Vectors are kept by text (a sentence or chunk met again,
    by another question or ranking, is not computed again), so the cost is timed apart:
    the whole work of a question from nothing (no vector known), on its set's first
    COST_SAMPLE questions (`cost_ms`)."""

    def __init__(self, model: Any, tokens: TokenMiniLM | None, cache: Path | None):
        self.model, self.token_model = model, tokens
        self.vectors = CachedModel(model, "default_units", cache)
        self.plain_vectors = CachedModel(model, "default_sent", cache)
        self.token_vectors: dict[str, np.ndarray] = {}
        self.cost_ms: dict[str, list[float]] = {}
        self.timed: set[tuple[str, str, str]] = set()

    def _cost(self, name: str, q: Question, cold: Callable[[], Any]) -> None:
        key = (name, q.q.set, q.text)
        if key in self.timed or len(self.cost_ms.get(f"{name}|{q.q.set}", [])) >= COST_SAMPLE:
            return
        self.timed.add(key)
        start = time.perf_counter()
        cold()
        self.cost_ms.setdefault(f"{name}|{q.q.set}", []).append((time.perf_counter() - start) * 1000)

    def sentence_best(self, q: Question, n: int, plain: bool = False) -> list[float]:
        """Each of the first n chunks' best sentence cosine (its own cosine when it has no
        sentence); the sentences of all n chunks go to the model in one call. Sentences: the
        offline agent's whole ones (`offline_text.sentences`), or `plain_units`."""
        units = [plain_units(content) if plain else
                 [s.unit for s in offline_text.sentences([(content, chunk_id)])]
                 for _, chunk_id, content, _ in q.vector[:n]]
        flat = [u for chunk in units for u in chunk]
        self._cost(f"{'plain' if plain else ''}sentence-top{n}", q, lambda: self.model.encode(flat))
        vectors = self.plain_vectors if plain else self.vectors
        query = vectors.encode([q.text])[0]  # the search has it already
        sims = vectors.encode(flat) @ query if flat else np.zeros(0)
        out, at = [], 0
        for chunk, (_, _, _, sim) in zip(units, q.vector[:n], strict=False):
            out.append(float(sims[at:at + len(chunk)].max()) if chunk else sim)
            at += len(chunk)
        return out

    def maxsim(self, q: Question, n: int) -> list[float]:
        model = self.token_model
        assert model is not None
        contents = [content for _, _, content, _ in q.vector[:n]]
        with model._single_threaded_blas():  # spinning BLAS threads collapse on a shared machine
            self._cost(f"maxsim-top{n}", q, lambda: [model.tokens(t) for t in [q.text, *contents]])
            for text in [q.text, *contents]:
                if text not in self.token_vectors:
                    self.token_vectors[text] = model.tokens(text)
        query = self.token_vectors[q.text]
        return [float((query @ self.token_vectors[c].T).max(1).mean()) for c in contents]


def plain_units(content: str, most_words: int = 60) -> list[str]:
    """A chunk's sentences cut plainly: paragraphs (blank lines) with their lines joined, cut
    after every . ! ? : ; and every `most_words` words; pieces of 3 words or more, grammar
    and titles included (`offline_text.sentences` drops what is not a whole sentence)."""
    out = []
    for block in re.split(r"\n\s*\n", content):
        for piece in re.split(r"(?<=[.!?:;])\s+", " ".join(block.split())):
            words = piece.split()
            out += [" ".join(words[i:i + most_words]) for i in range(0, len(words), most_words)
                    if len(words[i:i + most_words]) >= 3]
    return out


def mixed(q: Question, n: int, w: float, other: list[float]) -> list[str]:
    """Documents of the first n chunks by (1 - w) x cosine + w x other, then the rest."""
    top = q.vector[:n]
    order = sorted(range(len(top)), key=lambda i: -((1 - w) * top[i][3] + w * other[i]))
    return [top[i][0] for i in order] + [c[0] for c in q.vector[n:]]


def sentence_rank(q: Question, n: int, w: float, k: int, best: list[float]) -> list[str]:
    """The first n chunks by RRF of their own rank (weight 1) and their best sentence's
    (weight w), RRF_K = k; ties by cosine; then the rest."""
    top = q.vector[:n]
    by_sentence = sorted(range(len(top)), key=lambda i: -best[i])
    fused = [1 / (k + i + 1) for i in range(len(top))]
    for rank, i in enumerate(by_sentence, 1):
        fused[i] += w / (k + rank)
    order = sorted(range(len(top)), key=lambda i: (-fused[i], -top[i][3]))
    return [top[i][0] for i in order] + [c[0] for c in q.vector[n:]]


def fusion(q: Question, alpha: float, k: int) -> list[str]:
    """Weighted RRF (the engine's weights, RRF_K = k), ties by cosine, as search._ranked."""
    w_vector, w_keyword = weights(len(keyword_terms(q.text)), alpha)
    fused: dict[str, float] = {}
    doc, sim = {}, {}
    for rank, (d, chunk, _, s) in enumerate(q.vector, 1):
        fused[chunk], doc[chunk], sim[chunk] = w_vector / (k + rank), d, s
    for rank, (d, chunk, _, s) in enumerate(sorted(q.keyword, key=lambda r: -r[2]), 1):
        fused[chunk] = fused.get(chunk, 0.0) + w_keyword / (k + rank)
        doc[chunk], sim[chunk] = d, s
    return [doc[c] for c in sorted(fused, key=lambda c: (-fused[c], -sim[c]))]


RANKINGS = ("dense", "sentence-0.25-top10", "sentence-0.5-top10", "sentence-1.0-top10",
            "sentrank-0.5-k5-top10", "sentrank-0.5-k5-top20", "sentrank-0.4-k10-top20",
            "sentmax-top5", "sentmax-top10", "plainsentence-0.25-top10", "plainsentence-0.5-top10",
            "plainsentrank-0.5-k5-top20", "plainsentrank-0.4-k8-top20", "plainsentmax-top10",
            "fusion-a0.5-k5", "fusion-a0.6-k30", "fusion-a0.8-k10", "maxsim-0.5-top3",
            "maxsim-1.0-top3")


def ranked(name: str, q: Question, rankers: Rankers) -> list[str]:
    """Documents of question `q`'s candidates in the order of ranking `name`."""
    kind, *parts = name.split("-")
    plain = kind.startswith("plain")  # sentences cut at every stop, nothing dropped (plain_units)
    kind = kind.removeprefix("plain")
    if kind == "dense":
        return [c[0] for c in q.vector]
    if kind == "fusion":
        return fusion(q, float(parts[0][1:]), int(parts[1][1:]))
    w, n = float(parts[0]) if len(parts) > 1 else 1.0, int(parts[-1].removeprefix("top"))
    if kind == "sentmax":  # sentmax-top<N>: the better of the chunk's cosine and its best sentence's
        best = rankers.sentence_best(q, n, plain)
        return mixed(q, n, 1.0, [max(c[3], b) for c, b in zip(q.vector[:n], best, strict=True)])
    if kind == "sentrank":
        return sentence_rank(q, n, w, int(parts[1][1:]), rankers.sentence_best(q, n, plain))
    if kind == "sentence":
        return mixed(q, n, w, rankers.sentence_best(q, n, plain))
    if kind == "maxsim":
        return mixed(q, n, w, rankers.maxsim(q, n))
    raise SystemExit(f"unknown ranking {name!r}")


def scored(documents: list[str]) -> list[str]:
    """The distinct documents of the first SCORED chunks, in rank order (bench_retrieval)."""
    out: list[str] = []
    for d in documents[:SCORED]:
        if d not in out:
            out.append(d)
    return out


def ingest(folder: Path, smoke: bool, cache: Path | None) -> None:
    """Every corpus into its knowledge base, default settings (`cache`: vectors kept across
    runs, for exploration)."""
    model: Any = minilm.load_model()
    if cache:
        model = CachedModel(model, "default", cache)
    with engine_with(model, folder) as engine:
        for name in corpora.CORPORA:
            rows = corpora.corpus(name).rows
            if smoke:
                rows = smoke_rows(rows)
            engine.query(f"CREATE KNOWLEDGE_BASE {name}_kb")
            engine.insert_rows(engine.catalog.knowledge_base("mindsdb", f"{name}_kb"), rows)
    if cache:
        model.save()


def collect(client: Any, questions: dict[str, list[corpora.Question]]
            ) -> tuple[dict[str, list[Question]], list[float]]:
    """Each question's candidates through the client, and the shipped search's milliseconds."""
    out: dict[str, list[Question]] = {}
    latency = []
    for set_name, qs in questions.items():
        for q in qs:
            where = f"FROM {q.corpus}_kb WHERE content = {quote(q.question)}"
            start = time.perf_counter()
            client.sql(f"SELECT id, chunk_id, chunk_content, distance {where} LIMIT {SCORED}")
            latency.append((time.perf_counter() - start) * 1000)
            vector = client.sql(f"SELECT id, chunk_id, chunk_content, distance {where} "
                                f"AND hybrid_search = false LIMIT {VECTOR_LIMIT}").data
            keyword = client.sql(f"SELECT id, chunk_id, chunk_content, relevance, distance {where} "
                                 f"AND hybrid_search_alpha = 0 LIMIT {KEYWORD_LIMIT}").data
            out.setdefault(set_name, []).append(Question(q, vector, keyword))
    return out, latency


def verdicts(results: dict[str, dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """Per ranking: MRR above dense on every set and recall@5 nowhere below (`wins`)."""
    out = {}
    for name in names:
        if name == "dense":
            continue
        deltas = {s: {m: round(r[name][m] - r["dense"][m], 3) for m in ("recall_at_1", "recall_at_5", "mrr")}
                  for s, r in results.items()}
        out[name] = {"wins": all(d["mrr"] > 0 and d["recall_at_5"] >= 0 for d in deltas.values()),
                     "delta_vs_dense": deltas}
    return out


def run(names: list[str], smoke: bool, cache: Path | None) -> dict[str, Any]:
    questions = {s: corpora.questions(s)[:3] if smoke else corpora.questions(s) for s in corpora.SETS}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        ingest(Path(tmp), smoke, cache)
        ingest_s = time.perf_counter() - started
        print(f"ingested in {ingest_s:.0f} s", file=sys.stderr, flush=True)
        with kbsql.connect(data_dir=tmp) as client:
            candidates, latency = collect(client, questions)
    model = minilm.load_model()
    tokens = TokenMiniLM(minilm.model_dir()) if any(n.startswith("maxsim") for n in names) else None
    rankers = Rankers(model, tokens, cache)
    results: dict[str, dict[str, Any]] = {}
    for set_name, qs in candidates.items():
        results[set_name] = {}
        for name in names:
            documents = [scored(ranked(name, q, rankers)) for q in qs]
            results[set_name][name] = score(documents, [q.q for q in qs])
            print(f"{set_name} {name}: MRR {results[set_name][name]['mrr']}", file=sys.stderr, flush=True)
    rankers.vectors.save()
    rankers.plain_vectors.save()
    search_p50 = statistics.median(latency)
    cost: dict[str, Any] = {}
    for key in sorted({k.split("|")[0] for k in rankers.cost_ms}):
        samples = [v for k, vs in rankers.cost_ms.items() if k.split("|")[0] == key for v in vs]
        median = statistics.median(samples)
        cost[key] = {"questions_timed": len(samples), "median_ms": round(median, 1),
                     "search_p50_with_it_ms": round(search_p50 + median, 1),
                     "growth": round((search_p50 + median) / search_p50, 2)}
    return {"results": results, "ingest_s": round(ingest_s, 1), "search_p50_ms": round(search_p50, 1),
            "ranking_cost": cost}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rankings", default="all")
    parser.add_argument("--smoke", action="store_true", help="3 questions a set, 6 short documents a corpus")
    parser.add_argument("--cache", type=Path, help="keep the corpora's vectors here across runs")
    args = parser.parse_args()
    names = list(RANKINGS) if args.rankings == "all" else ["dense", *args.rankings.split(",")]
    started = time.perf_counter()
    out = run(list(dict.fromkeys(names)), args.smoke, args.cache)
    results = out.pop("results")
    winners = [n for n, v in verdicts(results, names).items() if v["wins"]]
    for by_ranking in results.values():  # the questions each missed: the shipped ranking's and winners'
        for name, figures in by_ranking.items():
            if name != "dense" and name not in winners:
                figures.pop("misses")
    report: dict[str, Any] = {
        "benchmark": "retrieval_ranking",
        "questions": {s: len(corpora.questions(s)) for s in corpora.SETS},
        "python": platform.python_version(),
        "settings": "knowledge bases with default settings; candidates: SELECT ... WHERE content = "
                    f"'<question>' LIMIT {VECTOR_LIMIT} (vector) and hybrid_search_alpha = 0 LIMIT "
                    f"{KEYWORD_LIMIT} (keyword) through kbsql.connect(data_dir=...)",
        "tuning_sets": {s: r for s, r in results.items() if s != "heldout"},
        "heldout": results.get("heldout"),
        "verdicts": verdicts(results, names),
        "winners": winners,
        "target": "MRR above dense on every set (held out included), recall@5 nowhere below",
        **out,
        "seconds": round(time.perf_counter() - started, 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    if args.smoke:
        report["smoke"] = True
    write_report("retrieval_ranking", report)


if __name__ == "__main__":
    sys.exit(main())
