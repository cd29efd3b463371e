"""EVALUATE KNOWLEDGE_BASE: retrieval quality, as docs/mindsdb_sql/knowledge_bases/evaluate.mdx
defines it (and MindsDB's `interfaces/knowledge_base/evaluate.py` computes it).

- `version = 'doc_id'` (default): each test question is searched (top 20); a hit is the
  expected `doc_id` among the returned ids. Columns: total, total_found, retrieved_in_top_10,
  cumulative_recall (JSON {k: recall@k}, k from 1: MindsDB numbers from 0, which read
  as recall@0 beside text saying recall@1), avg_query_time.
- `version = 'llm_relevancy'`: the top 10 of each question are scored by a model (the `llm`,
  else the knowledge base's reranking model); relevant means score >= 0.5. Columns:
  avg_relevancy, avg_relevance_score_by_k, avg_first_relevant_position, mean_mrr, hit_at_k,
  bin_precision_at_k, avg_entropy, avg_ndcg, avg_query_time.
- test data can be generated from a sample of rows: an OpenAI-compatible `llm` writes one
  question per text; `{"provider": "kbsql"}` (offline) takes the text's first words.

Pure functions over callbacks: the search and the scorer are handed in.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from kbsql.engine.models.model_context import openai_base
from kbsql.engine.models.model_http import ModelHttp
from kbsql.interface.errors import BadRequest, ProviderError

DOC_ID_TOP_K = 20
RELEVANCY_TOP_K = 10
DEFAULT_QUESTION_COUNT = 20
RELEVANT = 0.5
DOC_ID_COLUMNS = ["total", "total_found", "retrieved_in_top_10", "cumulative_recall", "avg_query_time"]
RELEVANCY_COLUMNS = ["avg_relevancy", "avg_relevance_score_by_k", "avg_first_relevant_position", "mean_mrr",
                     "hit_at_k", "bin_precision_at_k", "avg_entropy", "avg_ndcg", "avg_query_time"]
GENERATE_PROMPT = ("Write one question that this text answers, specific enough to identify the text, "
                   "and its answer from the text. Reply as JSON: {\"query\": \"...\", "
                   "\"reference_answer\": \"...\"}.\n\nText:\n")
_WORDS = re.compile(r"\S+")

Search = Callable[[str, int], list[Any]]  # (question, k) -> ids best first
Score = Callable[[str, list[str]], list[float]]  # (question, texts) -> scores in [0, 1]
Step = Callable[[int, int], None]  # (done, total): called after each question, for a progress bar


def evaluate_doc_id(tests: list[dict[str, Any]], search: Search, step: Step | None = None) -> dict[str, Any]:
    if not tests:
        raise BadRequest("The test table holds no questions")
    if {"question", "doc_id"} - set(tests[0]):
        raise BadRequest("Test data must contain \"question\" and \"doc_id\" columns, "
                         f"not {sorted(tests[0])}")
    positions, times = [], []
    for item in tests:
        start = time.perf_counter()
        ids = [str(i) for i in search(str(item["question"]), DOC_ID_TOP_K)]
        times.append(time.perf_counter() - start)
        expected = str(item["doc_id"])
        positions.append(ids.index(expected) if expected in ids else -1)
        if step is not None:
            step(len(positions), len(tests))
    total = len(tests)
    found = [p for p in positions if p >= 0]
    cumulative = {i + 1: sum(1 for p in found if p <= i) / total for i in range(DOC_ID_TOP_K)}
    return {"total": total, "total_found": len(found),
            "retrieved_in_top_10": sum(1 for p in found if p < 10),
            "cumulative_recall": json.dumps(cumulative), "avg_query_time": sum(times) / total}


def evaluate_relevancy(tests: list[dict[str, Any]], search: Callable[[str, int], list[str]],
                       score: Score, step: Step | None = None) -> dict[str, Any]:
    if not tests:
        raise BadRequest("The test table holds no questions")
    if "question" not in tests[0]:
        raise BadRequest(f"Test data must contain a \"question\" column, not {sorted(tests[0])}")
    logs = []
    for item in tests:
        start = time.perf_counter()
        texts = search(str(item["question"]), RELEVANCY_TOP_K)
        elapsed = time.perf_counter() - start
        scores = [float(s) for s in score(str(item["question"]), texts)] if texts else []
        binary = [s >= RELEVANT for s in scores]
        logs.append({"scores": scores, "binary": binary, "time": elapsed,
                     "first": binary.index(True) if True in binary else None})
        if step is not None:
            step(len(logs), len(tests))
    return relevancy_metrics(logs)


def relevancy_metrics(logs: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [g for g in logs if g["scores"]]
    firsts = [g["first"] for g in scored if g["first"] is not None]
    mrr = [1 / (g["first"] + 1) if g["first"] is not None else 0.0 for g in scored]
    hits = [[int(any(g["binary"][:k])) for k in range(1, len(g["binary"]) + 1)] for g in scored]
    precisions = [[sum(g["binary"][:k]) / k for k in range(1, len(g["binary"]) + 1)] for g in scored]

    def columns(matrix: Sequence[Sequence[float]]) -> list[float]:
        return [round(sum(c) / len(c), 2) for c in zip(*matrix, strict=False)] if matrix else []

    def ndcg(scores: list[float]) -> float:
        dcg = sum(s / math.log2(i + 2) for i, s in enumerate(scores))
        ideal = sum(s / math.log2(i + 2) for i, s in enumerate(sorted(scores, reverse=True)))
        return dcg / ideal if ideal > 0 else 0.0

    n = len(logs)
    return {
        "avg_relevancy": sum(sum(g["scores"]) / len(g["scores"]) for g in scored) / n,
        "avg_relevance_score_by_k": json.dumps(columns([g["scores"] for g in scored])),
        "avg_first_relevant_position": sum(firsts) / len(firsts) if firsts else None,
        "mean_mrr": sum(mrr) / len(mrr) if mrr else 0.0,
        "hit_at_k": json.dumps(columns(hits)),
        "bin_precision_at_k": json.dumps(columns(precisions)),
        "avg_entropy": sum(entropy(g["scores"]) for g in scored) / len(scored) if scored else 0.0,
        "avg_ndcg": sum(ndcg(g["scores"]) for g in scored) / len(scored) if scored else 0.0,
        "avg_query_time": sum(g["time"] for g in logs) / n,
    }


def entropy(values: list[float]) -> float:
    total = sum(values)
    if len(values) < 2 or total <= 0:
        return 0.0
    return -sum((v / total) * math.log(v / total) for v in values if v > 0)


def json_object_in(text: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """The first JSON object in a model's answer that has `keys`: models wrap JSON in
    Markdown fences or a sentence ("Here is the question: {...}") however they are asked,
    and MindsDB's evaluator accepts such answers too. ValueError when there is none."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict) and all(k in value for k in keys):
            return value
        start = text.find("{", start + 1)
    raise ValueError(f"no JSON object with {list(keys)} in the answer {text[:200]!r}")


def question_writer(llm: dict[str, Any] | None, http: ModelHttp) -> Callable[[str], tuple[str, str]]:
    """(question, answer) for a text: from an OpenAI-compatible chat model, or offline."""
    if not llm:
        raise BadRequest("generate_data needs a model to write the questions: give llm = {...} "
                         "(or {\"provider\": \"kbsql\"} for offline questions from the text itself)")
    provider = str(llm.get("provider") or "").lower()
    if provider == "kbsql":
        return lambda text: (" ".join(_WORDS.findall(text)[:12]), text)
    base = openai_base(llm)
    what = f"Evaluation model '{llm.get('provider')}' '{llm.get('model_name')}'"

    def ask(text: str) -> tuple[str, str]:
        body = {"model": llm.get("model_name"), "temperature": 0,
                "messages": [{"role": "user", "content": GENERATE_PROMPT + text}]}
        answer = http.post_json(f"{base}/chat/completions", body, llm.get("api_key"), what)
        try:
            content = answer["choices"][0]["message"]["content"] or ""
            data = json_object_in(content, ("query", "reference_answer"))
            return str(data["query"]), str(data["reference_answer"])
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise ProviderError(f"{what} did not answer a question as JSON ({exc!r})") from exc

    return ask


def generate(samples: list[dict[str, Any]], llm: dict[str, Any] | None, count: int, http: ModelHttp,
             step: Step | None = None) -> list[dict[str, Any]]:
    """Test rows {question, answer, doc_id, text} for up to `count` sampled {id, content};
    a remote model is asked over `http`, the engine's pooled client."""
    write = question_writer(llm, http)
    out = []
    chosen = samples[:count]
    for done, item in enumerate(chosen, 1):
        text = str(item.get("content") or item.get("chunk_content") or "")
        if text.strip():
            question, answer = write(text)
            out.append({"question": question, "answer": answer, "doc_id": item.get("id"), "text": text})
        if step is not None:
            step(done, len(chosen))
    if not out:
        raise BadRequest("No test data could be generated: the sample holds no text")
    return out
