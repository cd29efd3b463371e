"""Benchmark: one workload against any server of the interface (kbsql, MindsDB, ...).

    python benchmarks/bench_peer.py [URL ...] [--no-kbsql] [--docs 1000] [--repeat 50]

Each server is driven through the real client (`kbsql.connect(url)`, one keep-alive
connection), as users do:
- `SELECT 1`: median round trip;
- insert: `INSERT INTO kb (id, content) VALUES ...` statements of 100 rows, docs/s;
- search: `SELECT * FROM kb WHERE content = '...' LIMIT 5`, median;
- agent: time to the first chunk of `client.agents.stream(...)`, median.

So every server does the same work, the models are the same for all of them: this script
starts one loopback OpenAI-compatible server (`/v1/embeddings`: kbsql's deterministic hash
vectors, 384-d; `/v1/chat/completions`: a scripted streamed answer) and every knowledge base
and agent points at it (`provider: openai`, `base_url`). A `kbsql serve` on a free port is
started as the baseline unless `--no-kbsql`; each other server's figures come with their
ratio to it. How to start MindsDB for it: README, "Benchmarks".

Prints JSON and writes benchmarks/results/peer.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.client.params import bind
from kbsql.engine.knowledge.embeddings import HashEmbedder
from kbsql.server.process import spawn

TARGET_SELECT1_RATIO = 0.1  # kbsql's keep-alive SELECT 1 at <= 1/10 of the peer's
TARGET_INSERT_RATIO = 5.0   # kbsql's SQL insert at >= 5x the peer's
ANSWER = "Refunds take five days. They are paid to the card used for the purchase."


class ModelServer:
    """OpenAI-compatible embeddings + streamed chat on loopback, for every server alike."""

    def __init__(self) -> None:
        embedder = HashEmbedder(384)

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # keep-alive without delayed-ACK stalls
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def send_body(self, data: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.send_body(json.dumps({"object": "list", "data": [
                    {"id": "scripted", "object": "model"}, {"id": "hash-384", "object": "model"}]}).encode(),
                    "application/json")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path.endswith("/embeddings"):
                    texts = body.get("input") or []
                    texts = [texts] if isinstance(texts, str) else texts
                    vectors = embedder.embed([str(t) for t in texts])
                    answer = {"object": "list", "model": body.get("model"), "data": [
                        {"object": "embedding", "index": i, "embedding": v.tolist()}
                        for i, v in enumerate(vectors)], "usage": {"prompt_tokens": 0, "total_tokens": 0}}
                    self.send_body(json.dumps(answer).encode(), "application/json")
                    return
                words = ANSWER.split(" ")
                events = [{"id": "c1", "object": "chat.completion.chunk", "model": "scripted",
                           "choices": [{"index": 0, "delta": {"content": w + " "}, "finish_reason": None}]}
                          for w in words]
                events.append({"id": "c1", "object": "chat.completion.chunk", "model": "scripted",
                               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                if not body.get("stream"):
                    self.send_body(json.dumps({"id": "c1", "object": "chat.completion", "model": "scripted",
                                               "choices": [{"index": 0, "finish_reason": "stop",
                                                            "message": {"role": "assistant",
                                                                        "content": ANSWER}}]}).encode(),
                                   "application/json")
                    return
                data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                self.send_body(data.encode(), "text/event-stream")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def median_ms(fn: Any, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 3)


def sql(client: kbsql.Client, text: str) -> Any:
    result = client.sql(text)
    if result.type == "error":
        raise RuntimeError(f"{text[:120]}...: {result.error_message}")
    return result


def workload(url: str, models: ModelServer, docs: int, repeat: int) -> dict[str, Any]:
    suffix = uuid.uuid4().hex[:8]
    kb, agent = f"peer_kb_{suffix}", f"peer_agent_{suffix}"
    embedding = {"provider": "openai", "model_name": "hash-384", "base_url": models.base_url,
                 "api_key": "peer-bench"}
    with kbsql.connect(url) as client:
        for _ in range(10):
            sql(client, "SELECT 1")
        select_1 = median_ms(lambda: sql(client, "SELECT 1"), repeat)
        client.knowledge_bases.create(kb, embedding_model=embedding)
        statements = []
        for start in range(0, docs, 100):
            rows = [{"id": i, "content": f"Document {i}: refunds, shipping and returns, case {i * 79 % 1000}"}
                    for i in range(start, min(docs, start + 100))]
            statements.append(f"INSERT INTO {kb} (id, content) VALUES "
                              + ", ".join(bind("(:id, :content)", r) for r in rows))
        start = time.perf_counter()
        for text in statements:
            sql(client, text)
        insert_docs_per_s = round(docs / (time.perf_counter() - start), 1)
        query = f"SELECT * FROM {kb} WHERE content = 'refund case 42' LIMIT 5"
        search = median_ms(lambda: sql(client, query), repeat)
        client.agents.create(agent, model={"provider": "openai", "model_name": "scripted",
                                           "base_url": models.base_url, "api_key": "peer-bench"},
                             data={"knowledge_bases": [kb]})

        def first_chunk() -> None:
            stream = client.agents.stream(agent, "How long do refunds take?")
            try:
                next(iter(stream))
            finally:
                stream.close()

        first_chunk()
        agent_first_chunk = median_ms(first_chunk, max(3, repeat // 5))
        try:
            client.agents.delete(agent)
            client.knowledge_bases.delete(kb)
        except Exception:  # cleanup is best effort on a foreign server
            pass
    return {"select_1_ms": select_1, "insert_docs_per_s": insert_docs_per_s, "search_ms": search,
            "agent_first_chunk_ms": agent_first_chunk}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("urls", nargs="*", help="servers to measure besides the local kbsql")
    parser.add_argument("--no-kbsql", action="store_true", help="do not start a local kbsql serve")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    models = ModelServer()
    results: dict[str, Any] = {}
    try:
        if not args.no_kbsql:
            with tempfile.TemporaryDirectory() as tmp, spawn(tmp) as server:
                results["kbsql (local baseline)"] = workload(server.url, models, args.docs, args.repeat)
        for url in args.urls:
            try:
                results[url] = workload(url, models, args.docs, args.repeat)
            except Exception as exc:  # one unreachable peer must not lose the others' figures
                results[url] = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        models.close()
    base = results.get("kbsql (local baseline)")
    ratios = {}
    if base:
        for url, figures in results.items():
            if url.startswith("kbsql (local") or "error" in figures:
                continue
            ratios[url] = {
                "kbsql_select_1_over_peer": round(base["select_1_ms"] / figures["select_1_ms"], 3),
                "kbsql_insert_over_peer": round(base["insert_docs_per_s"] / figures["insert_docs_per_s"], 2),
                "kbsql_search_over_peer": round(base["search_ms"] / figures["search_ms"], 3),
                "kbsql_agent_first_chunk_over_peer": round(base["agent_first_chunk_ms"]
                                                           / figures["agent_first_chunk_ms"], 3),
            }
    write_report("peer", {
        "benchmark": "peer", "docs": args.docs, "repeat": args.repeat, "servers": results,
        "ratios_to_peers": ratios,
        "target_select_1_ratio_max": TARGET_SELECT1_RATIO, "target_insert_ratio_min": TARGET_INSERT_RATIO,
        "meets_target": {url: r["kbsql_select_1_over_peer"] <= TARGET_SELECT1_RATIO
                         and r["kbsql_insert_over_peer"] >= TARGET_INSERT_RATIO for url, r in ratios.items()},
        "load_average_1m": round(os.getloadavg()[0], 2),
    })


if __name__ == "__main__":
    main()
