"""Scripted model providers on loopback, speaking the real wire formats:
OpenAI-compatible (/v1/embeddings, /v1/chat/completions), Ollama (/api/embed) and a
Cohere/Jina-style rerank endpoint (/rerank). Embeddings are the hash embedder's, so the
fakes are deterministic and still rank by shared words."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kbsql.engine.models.embeddings import HashEmbedder

_EMBED = HashEmbedder(64)


def word_score(query: str, document: str) -> float:
    """Fraction of the query's words found in the document: the fakes' reranking score."""
    words = set(re.findall(r"\w+", query.lower()))
    found = set(re.findall(r"\w+", document.lower()))
    return len(words & found) / max(1, len(words))


class FakeProvider:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.fail_after: int | None = None  # answer 500 once this many embedding calls were served
        self.embed_calls = 0
        self.delay = 0.0  # seconds each embedding call takes (a remote model's latency)
        self.fail_marker: str | None = None  # answer 500 to a call whose input contains this
        self.active = self.max_active = 0  # embedding calls in progress now / at most at once
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                fake.requests.append((self.path, body, dict(self.headers)))
                status, answer = fake.answer(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path in ("/v1/embeddings", "/api/embed"):
            with self._lock:
                self.embed_calls += 1
                calls = self.embed_calls
                self.active += 1
                self.max_active = max(self.max_active, self.active)
            try:
                if self.delay:
                    time.sleep(self.delay)
            finally:
                with self._lock:
                    self.active -= 1
            if self.fail_after is not None and calls > self.fail_after:
                return 500, {"error": {"message": "the model crashed"}}
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            if self.fail_marker is not None and any(self.fail_marker in t for t in texts):
                return 500, {"error": {"message": "the model cannot embed this text"}}
            vectors = _EMBED.embed(texts).tolist()
            if path == "/api/embed":
                return 200, {"model": body["model"], "embeddings": vectors}
            return 200, {"object": "list", "model": body["model"],
                         "data": [{"object": "embedding", "index": i, "embedding": v}
                                  for i, v in enumerate(vectors)]}
        if path == "/rerank":
            scores = [word_score(body["query"], d) for d in body["documents"]]
            order = sorted(range(len(scores)), key=lambda i: -scores[i])
            return 200, {"results": [{"index": i, "relevance_score": scores[i]} for i in order]}
        if path == "/v1/chat/completions":
            prompt = body["messages"][-1]["content"]
            query = prompt.split("Query: ", 1)[1].split("\n\nDocument: ", 1)[0]
            document = prompt.split("\n\nDocument: ", 1)[1]
            score = word_score(query, document)
            return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": f"{score:.3f}"},
                                      "finish_reason": "stop"}]}
        return 404, {"error": "not found"}
