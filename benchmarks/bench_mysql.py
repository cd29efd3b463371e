"""Benchmark: the MySQL door against the HTTP door, on the same server, in the same run.

`kbsql serve --port 0 --mysql-port 0` with a knowledge base of Python's documentation topics
(pydoc_data, real text) on the default embedding model. Two statements, each sent through
both doors the way users send them, one kept-alive connection per door, calls interleaved so
both see the same machine:

- MySQL: pymysql (what SQLAlchemy's `mysql+pymysql://`, pandas.read_sql and JupySQL use),
  `cursor.execute(sql); cursor.fetchall()`;
- HTTP: the kbsql client, `kbsql.connect(url).sql(sql)`.

Statements: `SELECT 1` (the doors' own cost) and a knowledge-base search (`WHERE content =
'...' LIMIT 5`, a few question texts in turn). Target: MySQL's median within 1.5x of HTTP's,
for each. mysql-connector-python (pure Python, its binary protocol) is reported beside them.
`rounds` fresh servers, one after another; figures are medians of all calls of all rounds.

Usage: python benchmarks/bench_mysql.py [--calls 300] [--rounds 3] [--docs 300] [--model default|hash-64]
Prints JSON and writes benchmarks/results/mysql.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from typing import Any

import mysql.connector
import pymysql
from report import summary, timed, write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.server.process import spawn

TARGET_RATIO = 1.5
SELECT_1 = "SELECT 1"
QUESTIONS = ["how do I open a file", "what does the with statement do", "raise an exception",
             "format a string with f-strings", "import a module from a package"]
SEARCH = "SELECT id, chunk_content, relevance FROM docs WHERE content = '{}' LIMIT 5"


def documents(count: int) -> list[dict[str, Any]]:
    import pydoc_data.topics

    topics = sorted(pydoc_data.topics.topics.items())
    return [{"id": name, "content": text[:1500]} for name, text in topics[:count]]


def one_round(calls: int, docs: int, model: str) -> dict[str, list[float]]:
    series: dict[str, list[float]] = {k: [] for k in (
        "http_select_1", "mysql_select_1", "http_search", "mysql_search", "connector_select_1",
        "connector_search")}
    with tempfile.TemporaryDirectory() as tmp, \
            spawn(tmp, args=("--mysql-port", "0"), timeout=120) as server:
        embedding = "" if model == "default" else \
            f" USING embedding_model = {{'provider': 'kbsql', 'model_name': '{model}'}}"
        with kbsql.connect(server.url) as client:
            client.sql(f"CREATE KNOWLEDGE_BASE docs{embedding}")
            client.knowledge_bases.insert("docs", documents(docs), progress=False)
            my = pymysql.connect(host="127.0.0.1", port=server.mysql_port, user="bench",
                                 database="mindsdb")
            connector = mysql.connector.connect(host="127.0.0.1", port=server.mysql_port, user="bench",
                                                password="", database="mindsdb", use_pure=True)
            try:
                cursor = my.cursor()
                prepared = connector.cursor(prepared=True)

                def mysql_call(sql: str) -> None:
                    cursor.execute(sql)
                    cursor.fetchall()

                def connector_call(sql: str) -> None:
                    prepared.execute(sql)
                    prepared.fetchall()

                for i in range(20):  # warm up: connections, the model, caches
                    search = SEARCH.format(QUESTIONS[i % len(QUESTIONS)])
                    for sql in (SELECT_1, search):
                        client.sql(sql)
                        mysql_call(sql)
                        connector_call(sql)
                for i in range(calls):  # interleaved: every series sees the same machine
                    search = SEARCH.format(QUESTIONS[i % len(QUESTIONS)])
                    series["http_select_1"] += timed(lambda: client.sql(SELECT_1), 1)
                    series["mysql_select_1"] += timed(lambda: mysql_call(SELECT_1), 1)
                    series["connector_select_1"] += timed(lambda: connector_call(SELECT_1), 1)
                    series["http_search"] += timed(lambda s=search: client.sql(s), 1)
                    series["mysql_search"] += timed(lambda s=search: mysql_call(s), 1)
                    series["connector_search"] += timed(lambda s=search: connector_call(s), 1)
            finally:
                my.close()
                connector.close()
    return series


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300, help="calls per series and round")
    parser.add_argument("--rounds", type=int, default=3, help="fresh servers, one after another")
    parser.add_argument("--docs", type=int, default=300, help="documents in the knowledge base")
    parser.add_argument("--model", default="default",
                        help="embedding model: 'default' (the shipped MiniLM) or kbsql's hash-64")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    merged: dict[str, list[float]] = {}
    per_round: list[dict[str, float]] = []
    for _ in range(args.rounds):
        series = one_round(args.calls, args.docs, args.model)
        per_round.append({k: round(statistics.median(v), 3) for k, v in series.items()})
        for key, values in series.items():
            merged.setdefault(key, []).extend(values)
    report: dict[str, Any] = {"benchmark": "mysql", "calls": args.calls, "rounds": args.rounds,
                              "docs": args.docs, "model": args.model,
                              "target_ratio_mysql_to_http": TARGET_RATIO}
    meets = True
    for statement in ("select_1", "search"):
        http = statistics.median(merged[f"http_{statement}"])
        ratio = round(statistics.median(merged[f"mysql_{statement}"]) / http, 3)
        meets = meets and ratio <= TARGET_RATIO
        report[statement] = {
            "http_kbsql_client_keepalive": summary(merged[f"http_{statement}"]),
            "mysql_pymysql": summary(merged[f"mysql_{statement}"]),
            "mysql_connector_binary_protocol": summary(merged[f"connector_{statement}"]),
            "ratio_mysql_to_http": ratio,
            "round_medians_ms": [{k.split("_")[0]: r[k] for k in r if k.endswith(statement)}
                                 for r in per_round]}
    report["meets_target"] = meets
    report["load_average_1m"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    write_report("mysql", report)


if __name__ == "__main__":
    main()
