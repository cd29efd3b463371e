"""Benchmark: retrieval quality of a knowledge base with default settings, by document.

Corpus: Python's own documentation topics (`pydoc_data.topics`, 79 documents, ~640 chunks,
offline), inserted with default settings (chunk_size 1000 / overlap 200, the default
MiniLM). Questions: QUESTIONS below, each written for one topic. For each question the
knowledge base is searched the way a user does (`SELECT ... WHERE content = '...'`), the
chunks are reduced to their documents in rank order, and recall@5 (the topic is among the
first 5 distinct documents) and MRR (1 / the topic's rank) are computed.

Baseline in the same run: the same search with the exact fp32 model (the numpy MiniLM,
what sentence-transformers computes), so the int8 default is shown not to cost quality;
and the figures MindsDB reaches with the same MiniLM on such a set (recall@5 0.95,
MRR 0.74), the target to beat.

Usage: python benchmarks/bench_retrieval.py [--questions N]
Prints JSON and writes benchmarks/results/retrieval.json.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

from kbsql.engine import Engine
from kbsql.engine.knowledge import minilm
from kbsql.engine.providers import ModelProviders, ProviderContext

TARGET_RECALL_AT_5 = 0.95
TARGET_MRR = 0.74
SEARCH_LIMIT = 30  # chunks asked for: enough to rank 5 distinct documents

QUESTIONS: list[tuple[str, str]] = [
    ("How does the assert statement work and when are assertions removed?", "assert"),
    ("How do I assign values to several targets at once, like unpacking a tuple?", "assignment"),
    ("What do async for and async with do in a coroutine?", "async"),
    ("How does += work on mutable objects?", "augassign"),
    ("What does the await expression suspend?", "await"),
    ("How does Python look up an attribute on an object with the dot operator?", "attribute-references"),
    ("Which operators work on the bits of integers: and, or, xor?", "bitwise"),
    ("What does the break statement do inside a loop?", "break"),
    ("How is a class definition executed and what does it create?", "class"),
    ("How do comparison operators chain, like a < b < c?", "comparisons"),
    ("What methods does an object need to be used in a with statement?", "context-managers"),
    ("How do I skip to the next iteration of a loop?", "continue"),
    ("What is the pdb debugger and how do I set a breakpoint?", "debugger"),
    ("How do I delete a name or an item from a list?", "del"),
    ("How do I create a dictionary with a comprehension or a display?", "dict"),
    ("How are exceptions raised and handled, and what happens to the traceback?", "exceptions"),
    ("What is the execution model: code blocks, scopes and name binding?", "execmodel"),
    ("How are floating point literals written, with exponents?", "floating"),
    ("How does the for statement iterate over a sequence, and when does its else clause run?", "for"),
    ("What is the format specification mini-language for str.format?", "formatstrings"),
    ("How do I define a function with default parameter values and annotations?", "function"),
    ("How does the global statement let a function change a module-level variable?", "global"),
    ("What characters can identifiers and keywords use?", "identifiers"),
    ("How do if, elif and else choose a branch?", "if"),
    ("How does the import statement find and load a module?", "import"),
    ("How are integer literals written in hexadecimal, octal and binary?", "integers"),
    ("How do I write a small anonymous function with lambda?", "lambda"),
    ("How does nonlocal rebind a variable of the enclosing function?", "nonlocal"),
    ("Which special methods implement arithmetic operators like __add__ and __radd__?", "numeric-types"),
    ("What is the precedence of Python operators, from lowest to highest?", "operator-summary"),
    ("What does the pass statement do?", "pass"),
    ("How does the power operator ** bind with unary minus?", "power"),
    ("How do I raise an exception and chain it with from?", "raise"),
    ("What does return do in a generator or a function?", "return"),
    ("How do slicing expressions with start, stop and step work?", "slicings"),
    ("What special attributes such as __dict__ and __class__ do objects have?", "specialattrs"),
    ("What string methods exist, like split, join, strip and replace?", "string-methods"),
    ("How are string literals written, with escape sequences and raw strings?", "strings"),
    ("Which values are considered false in an if condition?", "truth"),
    ("How do try, except, else and finally clauses work together?", "try"),
    ("What methods do dictionaries have, like get, items, setdefault and update?", "typesmapping"),
    ("What operations do lists support, like append, extend, insert, pop and sort?", "typesseq-mutable"),
    ("How does a while loop run and when does its else clause run?", "while"),
    ("What does the yield expression do in a generator function?", "yield"),
]


def corpus(topics: set[str] | None) -> list[dict[str, Any]]:
    import pydoc_data.topics

    return [{"id": name, "content": text} for name, text in sorted(pydoc_data.topics.topics.items())
            if topics is None or name in topics]


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def evaluate(engine: Engine, kb: str, questions: list[tuple[str, str]]) -> dict[str, Any]:
    """recall@5 and MRR by document, searching as a user does."""
    hits, reciprocal, misses, seconds = 0, 0.0, [], 0.0
    for question, expected in questions:
        start = time.perf_counter()
        result = engine.query(f"SELECT id FROM {kb} WHERE content = {quote(question)} LIMIT {SEARCH_LIMIT}")
        seconds += time.perf_counter() - start
        assert result.type == "table", result
        documents: list[str] = []
        for (doc,) in result.data:
            if str(doc) not in documents:
                documents.append(str(doc))
        rank = documents.index(expected) + 1 if expected in documents else None
        if rank is not None and rank <= 5:
            hits += 1
        else:
            misses.append({"question": question, "expected": expected, "got": documents[:5]})
        reciprocal += 1.0 / rank if rank else 0.0
    n = len(questions)
    return {"recall_at_5": round(hits / n, 3), "mrr": round(reciprocal / n, 3),
            "search_ms_mean": round(seconds / n * 1000, 2), "misses": misses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=len(QUESTIONS),
                        help="use the first N questions (and only their topics plus 10 others)")
    args = parser.parse_args()
    questions = QUESTIONS[:args.questions]
    topics = None
    if args.questions < len(QUESTIONS):  # a smoke run: a small corpus
        import pydoc_data.topics

        topics = {t for _, t in questions} | set(sorted(pydoc_data.topics.topics)[:10])
    rows = corpus(topics)
    with tempfile.TemporaryDirectory() as tmp, Engine(Path(tmp) / "e") as engine:
        engine.query("CREATE KNOWLEDGE_BASE docs")  # default settings, default model
        start = time.perf_counter()
        engine.insert_rows(engine.catalog.knowledge_base("mindsdb", "docs"), rows)
        ingest_s = time.perf_counter() - start
        chunks = engine.query("SELECT count(*) FROM (SELECT id FROM docs LIMIT 100000) AS t")
        default = evaluate(engine, "docs", questions)
        default_model = engine.models.context.load_once(minilm.MODEL_NAME, minilm.load_model)
    # the same search with the exact fp32 model: the int8 default must not cost quality
    exact = ProviderContext()
    exact.load_once(minilm.MODEL_NAME, lambda: minilm.MiniLM(minilm.model_dir()))
    with tempfile.TemporaryDirectory() as tmp, \
            Engine(Path(tmp) / "e", models=ModelProviders(exact)) as engine:
        engine.query("CREATE KNOWLEDGE_BASE docs_fp32")
        engine.insert_rows(engine.catalog.knowledge_base("mindsdb", "docs_fp32"), rows)
        fp32 = evaluate(engine, "docs_fp32", questions)
    write_report("retrieval", {
        "benchmark": "retrieval", "documents": len(rows),
        "chunks": chunks.data[0][0] if chunks.data else None,
        "questions": len(questions), "model": type(default_model).__name__,
        "settings": "defaults: chunk_size 1000, chunk_overlap 200, no hybrid search, no reranker",
        "ingest_s": round(ingest_s, 1),
        "kbsql_default": default, "baseline_fp32_model": fp32,
        "baseline_mindsdb_same_model": {"recall_at_5": TARGET_RECALL_AT_5, "mrr": TARGET_MRR},
        "ratio_mrr_to_mindsdb": round(default["mrr"] / TARGET_MRR, 3),
        "target_recall_at_5": TARGET_RECALL_AT_5, "target_mrr": TARGET_MRR,
        "meets_target": default["recall_at_5"] > TARGET_RECALL_AT_5 and default["mrr"] > TARGET_MRR,
        "load_average_1m": round(os.getloadavg()[0], 2),
    })


if __name__ == "__main__":
    main()
