"""`EVALUATE KNOWLEDGE_BASE kb USING test_table = ..., version = ..., generate_data = ...,
evaluate = ..., llm = {...}, save_to = ...` (docs/mindsdb_sql/knowledge_bases/evaluate.mdx).

Tables are read with SQL; generated test data and results are written as registered frames
(`df.<name>`), the engine's writable tables. The metrics live in `knowledge.evaluate`.
"""

from __future__ import annotations

import datetime as dt
import random
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mindsdb_sql_parser import ast

from kbsql.engine.knowledge import evaluate as metrics
from kbsql.engine.knowledge.search import SearchRequest
from kbsql.engine.models.model_http import ModelHttp
from kbsql.engine.models.rerank import Reranker
from kbsql.engine.sql.refusals import unsupported
from kbsql.interface import progress as progress_mod
from kbsql.interface.control import checkpoint
from kbsql.interface.errors import SqlError
from kbsql.interface.progress import OnProgress, Reporter

_KNOWN = {"test_table", "version", "generate_data", "evaluate", "llm", "save_to"}
WRITABLE = "df"


@dataclass
class EvaluatePorts:
    """What EVALUATE needs from the engine, handed in by the statement router."""

    kb_name: str
    search: Callable[[SearchRequest], list[list[Any]]]
    reranking_model: dict[str, Any] | None
    rows_of: Callable[[str], list[dict[str, Any]]]  # SQL text -> rows as dicts
    sample_of: Callable[[str, int], list[dict[str, Any]]]  # SQL text, count -> `sampled` rows as dicts
    save: Callable[[str, list[dict[str, Any]]], Any]  # frame name -> stored as df.<name>
    reranker: Callable[[dict[str, Any]], Reranker]  # a judge's descriptor -> its scorer (registry)
    http: ModelHttp  # the engine's pooled client, for a question-writing model
    progress: OnProgress | None = None  # where the questions' progress is reported


def _table_name(value: Any, what: str) -> tuple[str, str]:
    parts = [str(p) for p in value.parts] if isinstance(value, ast.Identifier) else str(value).split(".")
    if len(parts) != 2:
        raise SqlError(f"{what} must be written datasource.table, not {value}")
    return parts[0], parts[1]


def _writable(value: Any, what: str) -> str:
    database, table = _table_name(value, what)
    if database.lower() != WRITABLE:
        raise unsupported(f"writing {what} to {database}.{table} (write it to df.{table})")
    return table


def sampled(total: int, count: int) -> list[int]:
    """The positions of the `count` rows of `total` that questions are written from: the first
    `count` of a shuffle seeded with 0, the same sample on every run (the rows shuffled as a
    list before). Only those rows are then read as dicts: reading every row of a 1.1 M-row
    `from_sql` as dicts to use 20 took +310 MB (issue 39); the shuffled positions take 8 bytes a
    row."""
    order = array("q", range(total))
    random.Random(0).shuffle(order)  # the permutation depends only on the length
    return list(order[:count])


EVALUATE_MIN_QUESTIONS = 1
"""A bar from the first question: each one is a search (and, for llm_relevancy, a model
call), so even the default 20 take long enough to want one."""


def _stepped(progress: OnProgress | None, description: str, total: int, phase: str,
             work: Callable[[Any], Any]) -> Any:
    """Run `work(step)` as a task of `total` questions reported to `progress` per question
    (`step(done, total)`) in `phase`, ending done or failed. Each step is also where the
    statement's deadline and its client are checked (`checkpoint`): a question at a time,
    EVALUATE stops with its statement (a question's model call is cut by `ModelHttp`)."""
    def checked(done: int, count: int) -> None:
        checkpoint()

    if progress is None:
        return work(checked)
    with Reporter(progress, description, total, unit="question", min_total=EVALUATE_MIN_QUESTIONS) as report:
        report.update(phase, 0)

        def step(done: int, count: int) -> None:
            report.update(phase, done)
            checkpoint()
        return work(step)


def run(params: dict[str, Any], ports: EvaluatePorts) -> tuple[list[str], list[list[Any]]]:
    params = {k.lower(): v for k, v in (params or {}).items()}
    unknown = set(params) - _KNOWN
    if unknown:
        raise SqlError(f"EVALUATE KNOWLEDGE_BASE does not know {sorted(unknown)}: use {sorted(_KNOWN)}")
    if "test_table" not in params:
        raise SqlError("EVALUATE KNOWLEDGE_BASE needs test_table = datasource.table")
    version = str(params.get("version") or "doc_id").lower()
    if version not in ("doc_id", "llm_relevancy"):
        raise SqlError(f"version must be 'doc_id' or 'llm_relevancy', not {params.get('version')!r}")
    database, table = _table_name(params["test_table"], "test_table")
    llm = params.get("llm") if isinstance(params.get("llm"), dict) else None
    generate = params.get("generate_data", False)
    # where results go is refused before any model call (a files.x target answered after the
    # questions were written: MindsDB's test_evaluate writes test_table = files.eval_test)
    test_target = _writable(params["test_table"], "test_table") if generate not in (False, None) else None
    save_target = _writable(params["save_to"], "save_to") if params.get("save_to") is not None else None

    if test_target is not None:
        options = generate if isinstance(generate, dict) else {}
        count = int(options.get("count") or metrics.DEFAULT_QUESTION_COUNT)
        sql = options.get("from_sql") or f"SELECT chunk_content AS content, id FROM {ports.kb_name}"
        samples = ports.sample_of(sql, count)
        writer = llm or ports.reranking_model
        tests = _stepped(ports.progress, f"generate questions for {ports.kb_name}", min(count, len(samples)),
                         progress_mod.GENERATING,
                         lambda step: metrics.generate(samples, writer, count, ports.http, step))
        ports.save(test_target, tests)
    if params.get("evaluate", True) is False:
        return ["name", "generated_rows"], [[ports.kb_name, len(tests) if generate else 0]]

    tests = ports.rows_of(f"SELECT * FROM {database}.{table}")
    if version == "doc_id":
        def ids(question: str, k: int) -> list[Any]:
            return [r[0] for r in ports.search(SearchRequest(query=question, limit=k))]

        result = _stepped(ports.progress, f"evaluate {ports.kb_name}", len(tests), progress_mod.EVALUATING,
                          lambda step: metrics.evaluate_doc_id(tests, ids, step))
        columns = list(metrics.DOC_ID_COLUMNS)
    else:
        judge = llm or ports.reranking_model
        if not judge:
            raise SqlError("version = 'llm_relevancy' needs llm = {...} or a knowledge base with a "
                           "reranking_model")
        scorer = ports.reranker(judge)

        def texts(question: str, k: int) -> list[str]:
            return [r[2] for r in ports.search(SearchRequest(query=question, limit=k, rerank=False))]

        result = _stepped(ports.progress, f"evaluate {ports.kb_name}", len(tests), progress_mod.EVALUATING,
                          lambda step: metrics.evaluate_relevancy(tests, texts, scorer.score, step))
        columns = list(metrics.RELEVANCY_COLUMNS)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    row = {**result, "name": ports.kb_name, "created_at": now}
    names = [*columns, "name", "created_at"]
    if save_target is not None:
        ports.save(save_target, [row])
    return names, [[row[n] for n in names]]
