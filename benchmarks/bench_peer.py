"""Benchmark: one workload against any server of the interface (kbsql, MindsDB, ...).

    python benchmarks/bench_peer.py [URL ...] [--no-kbsql] [--docs 1000] [--repeat 50]

Each server is driven through the real client (`kbsql.connect(url)`, one keep-alive
connection), as users do:
- `SELECT 1`: median round trip (10 x --repeat calls);
- insert: `INSERT INTO kb (id, content) VALUES ...` statements of 100 rows, docs/s;
- search: `SELECT * FROM kb WHERE content = '...' LIMIT 5`, median;
- agent: time to the first chunk of `client.agents.stream(...)`, median, and time to the
  whole streamed answer (the stream drained to its end), median.

So every server does the same work, the models are the same for all of them: this script
starts one loopback OpenAI-compatible server (`/v1/embeddings`: kbsql's deterministic hash
vectors, 384-d; `/v1/chat/completions`: a scripted answer, streamed or not; a caller asking
for its answer through pydantic-ai's `final_result` output tool, as MindsDB's agents do,
gets that tool called with the same answer) and every knowledge base and agent points at
it (`provider: openai`, `base_url`). A `kbsql serve` on a free port is started as the
baseline unless `--no-kbsql`; each other server's figures come with their ratio to it. A
step a server cannot do is reported with its reason (`agent_error`, ...) instead of a
figure, and the other steps still run. How to start MindsDB for it: README, "Benchmarks".

Prints JSON and writes benchmarks/results/peer.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from report import timed, write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.client.params import bind
from kbsql.engine.models.embeddings import HashEmbedder
from kbsql.server.process import spawn

TARGET_SELECT1_RATIO = 0.1  # kbsql's keep-alive SELECT 1 at <= 1/10 of the peer's
TARGET_INSERT_RATIO = 5.0   # kbsql's SQL insert at >= 5x the peer's
ANSWER = "Refunds take five days. They are paid to the card used for the purchase."


OUTPUT_TOOL = "final_result"  # pydantic-ai's structured-output tool (MindsDB's agents use it)


def tool_call_answer(tool: dict[str, Any]) -> dict[str, Any]:
    """The scripted answer given through the caller's output tool: every string field the
    answer, numbers 1, and a `type` field `final_text` (MindsDB's "answer in text" choice)."""
    arguments: dict[str, Any] = {}
    for name, spec in (tool.get("parameters") or {}).get("properties", {}).items():
        kind = spec.get("type")
        if name == "type":
            arguments[name] = "final_text"
        elif kind in ("integer", "number"):
            arguments[name] = 1
        elif kind == "boolean":
            arguments[name] = True
        else:
            arguments[name] = ANSWER
    call = {"id": "call_1", "type": "function",
            "function": {"name": tool["name"], "arguments": json.dumps(arguments)}}
    return {"id": "c1", "object": "chat.completion", "created": int(time.time()), "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


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
                output_tool = next((t["function"] for t in body.get("tools") or []
                                    if t.get("function", {}).get("name") == OUTPUT_TOOL), None)
                if output_tool is not None:
                    self.send_body(json.dumps(tool_call_answer(output_tool)).encode(), "application/json")
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

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], ConnectionError):  # a stream its caller closed
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def median_ms(fn: Any, repeat: int) -> float:
    return round(statistics.median(timed(fn, repeat)), 3)


def sql(client: kbsql.Client, text: str) -> Any:
    result = client.sql(text)
    if result.type == "error":
        raise RuntimeError(f"{text[:120]}...: {result.error_message}")
    return result


def reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def workload(url: str, models: ModelServer, docs: int, repeat: int) -> dict[str, Any]:
    suffix = uuid.uuid4().hex[:8]
    kb, agent = f"peer_kb_{suffix}", f"peer_agent_{suffix}"
    embedding = {"provider": "openai", "model_name": "hash-384", "base_url": models.base_url,
                 "api_key": "peer-bench"}
    figures: dict[str, Any] = {}
    with kbsql.connect(url) as client:
        for _ in range(20):
            sql(client, "SELECT 1")
        # ten times the repeats: a ~1 ms median on a 2-core VM needs hundreds of calls
        figures["select_1_ms"] = median_ms(lambda: sql(client, "SELECT 1"), 10 * repeat)
        made: list[tuple[Any, str]] = []  # what to delete afterwards, newest first
        step = "creating the knowledge base"
        try:
            client.knowledge_bases.create(kb, embedding_model=embedding)
            made.insert(0, (client.knowledge_bases, kb))
            statements = []
            for first in range(0, docs, 100):
                rows = [{"id": i,
                         "content": f"Document {i}: refunds, shipping and returns, case {i * 79 % 1000}"}
                        for i in range(first, min(docs, first + 100))]
                statements.append(f"INSERT INTO {kb} (id, content) VALUES "
                                  + ", ".join(bind("(:id, :content)", r) for r in rows))
            step = "inserting"
            start = time.perf_counter()
            for text in statements:
                sql(client, text)
            figures["insert_docs_per_s"] = round(docs / (time.perf_counter() - start), 1)
            step = "searching"
            query = f"SELECT * FROM {kb} WHERE content = 'refund case 42' LIMIT 5"
            figures["search_rows"] = len(sql(client, query).data)
            figures["search_ms"] = median_ms(lambda: sql(client, query), repeat)
            figures.update(agent_figures(client, agent, kb, models, repeat, made))
        except Exception as exc:  # the figures so far stay; the rest did not run
            figures["error"] = f"{step} failed: {reason(exc)}"
        finally:
            for resource, name in made:  # best effort: a leftover must not hide the figures
                try:
                    resource.delete(name)
                except Exception as exc:
                    figures.setdefault("cleanup_error", reason(exc))
    return figures


def agent_figures(client: kbsql.Client, agent: str, kb: str, models: ModelServer, repeat: int,
                  made: list[tuple[Any, str]]) -> dict[str, Any]:
    """First chunk and whole answer of the agent's stream; the reason instead when the
    server cannot create or run the agent."""
    try:
        client.agents.create(agent, model={"provider": "openai", "model_name": "scripted",
                                           "base_url": models.base_url, "api_key": "peer-bench"},
                             data={"knowledge_bases": [kb]})
    except Exception as exc:
        return {"agent_first_chunk_ms": None, "agent_answer_ms": None,
                "agent_error": f"creating the agent failed: {reason(exc)}"}
    made.insert(0, (client.agents, agent))

    def first_chunk() -> None:
        stream = client.agents.stream(agent, "How long do refunds take?")
        try:
            next(iter(stream))
        finally:
            stream.close()

    def whole_answer() -> list[dict[str, Any]]:
        return list(client.agents.stream(agent, "How long do refunds take?"))

    try:
        chunks = whole_answer()  # warm-up, and the check that the answer came through
        if ANSWER not in json.dumps(chunks):
            failed = [c for c in chunks if "error" in c or c.get("type") == "error"]
            raise RuntimeError(f"the stream did not carry the answer: {json.dumps(failed or chunks)[:300]}")
        first_chunk()
        rounds = max(3, repeat // 5)
        return {"agent_first_chunk_ms": median_ms(first_chunk, rounds),
                "agent_answer_ms": median_ms(whole_answer, rounds), "agent_stream_chunks": len(chunks)}
    except Exception as exc:
        return {"agent_first_chunk_ms": None, "agent_answer_ms": None,
                "agent_error": f"running the agent failed: {reason(exc)}"}


def ratio(base: dict[str, Any], peer: dict[str, Any], key: str) -> float | None:
    """kbsql's figure over the peer's (for times, below 1 means kbsql is faster; for
    docs/s, above 1); None when either side has no figure."""
    if not base.get(key) or not peer.get(key):
        return None
    return round(base[key] / peer[key], 3)


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
            if url.startswith("kbsql (local") or "select_1_ms" not in figures:
                continue
            ratios[url] = {f"kbsql_{key}_over_peer": ratio(base, figures, key)
                           for key in ("select_1_ms", "insert_docs_per_s", "search_ms",
                                       "agent_first_chunk_ms", "agent_answer_ms")}
    write_report("peer", {
        "benchmark": "peer", "docs": args.docs, "repeat": args.repeat, "servers": results,
        "ratios_to_peers": ratios,
        "target_select_1_ratio_max": TARGET_SELECT1_RATIO, "target_insert_ratio_min": TARGET_INSERT_RATIO,
        "meets_target": {url: r["kbsql_select_1_ms_over_peer"] is not None
                         and r["kbsql_insert_docs_per_s_over_peer"] is not None
                         and r["kbsql_select_1_ms_over_peer"] <= TARGET_SELECT1_RATIO
                         and r["kbsql_insert_docs_per_s_over_peer"] >= TARGET_INSERT_RATIO
                         for url, r in ratios.items()},
        "load_average_1m": round(os.getloadavg()[0], 2),
    })


if __name__ == "__main__":
    main()
