"""Benchmark: the offline agent's stream on a 10k-chunk knowledge base, over `kbsql serve`.

Measured from the client's side of a real server: `first_chunk_ms` is from sending the POST
to receiving the first `data:` line (the start chunk, which leaves before any model or tool
work; target <= 20 ms), `total_ms` to the `end` chunk. The baseline, measured in the same
run on the same server, is the same semantic search sent directly to `POST /api/sql/query`:
the agent does that search plus listing, rendering and answering, so `ratio` (total over
baseline) is the agent's own overhead. Embedded (in-process) numbers are reported too.
The knowledge base uses the hash embedder (`kbsql`/`hash-256`) so the numbers measure the
agent, not the embedding model.

`first_token`: a scripted streaming OpenAI-compatible model on loopback (tests/agents/fakes.py,
one event every `--token-delay` seconds) answers; the `%agent` panel (`AgentStreamPanel`) is fed
the stream of the in-process client and of the HTTP client, and the time its answer first
shows text is compared with the moment the model sent its first text event. Target: within
50 ms (`lag_ms`, median and worst). `model_total_ms` is how long the model took to write the
whole answer, the wait a panel that showed text only at the end would impose.

Usage: python benchmarks/bench_agents.py [--chunks 10000] [--repeat 20] [--token-delay 0.05]
Prints JSON and writes benchmarks/results/agents.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.engine import Engine
from kbsql.server.process import spawn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' scripted model server
from tests.agents.fakes import FakeLLM, text

TARGET_FIRST_CHUNK_MS = 20.0
TARGET_FIRST_TOKEN_LAG_MS = 50.0
ANSWER = ("Pump 4321 needs new oil every ninety days; the manual also asks for a seal check "
          "at each change, and a pressure test once a year.")
QUESTION = "How often does pump 4321 need new oil?"
WORDS = "pump valve fan boiler seal oil bearing motor filter pressure flow rpm".split()


def build(data_dir: Path, chunks: int) -> float:
    start = time.perf_counter()
    with Engine(data_dir) as engine:
        engine.query("CREATE KNOWLEDGE_BASE manuals USING embedding_model = "
                     "{'provider': 'kbsql', 'model_name': 'hash-256'}, metadata_columns = ['kind']")
        rows = [{"id": i, "kind": WORDS[i % len(WORDS)],
                 "content": f"Unit {WORDS[i % 12]} {i} needs new {WORDS[(i * 7) % 12]} every "
                            f"{i % 30 + 1} days. Its {WORDS[(i * 5) % 12]} is checked yearly."}
                for i in range(chunks)]
        engine.insert_into_knowledge_base("mindsdb", "manuals", rows)
        engine.create_agent("mindsdb", {"name": "helper",
                                        "data": {"knowledge_bases": ["mindsdb.manuals"]}})
    return time.perf_counter() - start


def timed_stream(client: httpx.Client, url: str) -> tuple[float, float, list[dict]]:
    t0 = time.perf_counter()
    first = 0.0
    chunks = []
    with client.stream("POST", url, json={"messages": [{"question": QUESTION}]}) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                if not first:
                    first = time.perf_counter() - t0
                chunks.append(json.loads(line[6:]))
    return first * 1000, (time.perf_counter() - t0) * 1000, chunks


def panel_first_token(client: Any, agent: str, fake: FakeLLM) -> tuple[float, float]:
    """Feed one answer's stream to the `%agent` panel: (ms from the model's first text event
    to the panel's answer first showing text, ms the model took from request to last event)."""
    from kbsql.notebook.widgets import AgentStreamPanel

    shown: list[float] = []
    panel = AgentStreamPanel(question="How often?", agent=agent)

    def on_answer(change: dict[str, Any]) -> None:
        if not shown and ANSWER[:4] in change["new"]:  # the answer's first token is on screen
            shown.append(time.perf_counter())

    panel.answer.observe(on_answer, names="value")
    fake.first_text_at = None
    t0 = time.perf_counter()
    panel.consume(client.agents.stream(agent, "How often?"))
    assert panel.state.answer == ANSWER, panel.state.answer
    assert fake.first_text_at is not None and shown
    return (shown[0] - fake.first_text_at) * 1000, (time.perf_counter() - t0) * 1000


def first_token(data_dir: Path, repeat: int, delay: float) -> dict[str, Any]:
    """Time to first token in the panel, embedded and over HTTP, against the model's own."""
    out: dict[str, Any] = {"model": "scripted OpenAI-compatible server on loopback",
                           "token_delay_s": delay, "target_lag_ms": TARGET_FIRST_TOKEN_LAG_MS}
    with FakeLLM("openai", [text(ANSWER)] * (2 * repeat + 2), delay=delay) as fake:
        model = {"provider": "openai", "model_name": "m1", "base_url": fake.base_url}
        with Engine(data_dir) as engine:
            engine.create_agent("mindsdb", {"name": "writer", "model": model})
        doors = {"embedded": lambda: kbsql.connect(data_dir=data_dir, progress=None)}
        server = spawn(data_dir)
        doors["http"] = lambda: kbsql.connect(server.url, progress=None)
        try:
            for door, connect in doors.items():
                client = connect()
                try:
                    panel_first_token(client, "writer", fake)  # warm-up
                    runs = [panel_first_token(client, "writer", fake) for _ in range(repeat)]
                finally:
                    client.close()
                lags = [lag for lag, _ in runs]
                out[door] = {"lag_ms": median(lags), "worst_lag_ms": round(max(lags), 3),
                             "model_total_ms": median([total for _, total in runs])}
        finally:
            server.stop()
    worst = max(out[d]["worst_lag_ms"] for d in doors)
    out["ratio"] = round(max(out[d]["lag_ms"] for d in doors) / TARGET_FIRST_TOKEN_LAG_MS, 3)
    out["ok"] = worst <= TARGET_FIRST_TOKEN_LAG_MS
    return out


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--token-delay", type=float, default=0.05,
                        help="seconds between the scripted model's stream events")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    build_s = build(data_dir, args.chunks)

    with Engine(data_dir) as engine:  # embedded: first chunk and total in-process
        emb_first, emb_total = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            stream = engine.stream("mindsdb", "helper", [{"question": QUESTION}])
            next(stream)
            emb_first.append((time.perf_counter() - t0) * 1000)
            for _chunk in stream:
                pass
            emb_total.append((time.perf_counter() - t0) * 1000)

    server = spawn(data_dir)
    base = server.url
    try:
        url = f"{base}/api/projects/mindsdb/agents/helper/completions/stream"
        search = (f"SELECT * FROM manuals WHERE content = '{QUESTION}' LIMIT 5")
        with httpx.Client(timeout=60) as client:
            client.get(f"{base}/api/status")
            timed_stream(client, url)  # warm-up: loads the index
            client.post(f"{base}/api/sql/query", json={"query": search})
            first, total, base_ms = [], [], []
            chunks: list[dict] = []
            for _ in range(args.repeat):
                f, t, chunks = timed_stream(client, url)
                first.append(f)
                total.append(t)
                t0 = time.perf_counter()
                assert client.post(f"{base}/api/sql/query", json={"query": search}).json()["type"] \
                    == "table"
                base_ms.append((time.perf_counter() - t0) * 1000)
    finally:
        server.stop()

    result = {
        "benchmark": "agents_offline_stream",
        "chunks": args.chunks, "repeat": args.repeat, "build_s": round(build_s, 2),
        "http_first_chunk_ms": median(first), "http_total_ms": median(total),
        "baseline_sql_search_ms": median(base_ms),
        "ratio": round(statistics.median(total) / statistics.median(base_ms), 2),
        "embedded_first_chunk_ms": median(emb_first), "embedded_total_ms": median(emb_total),
        "target_first_chunk_ms": TARGET_FIRST_CHUNK_MS,
        "first_chunk_ok": statistics.median(first) <= TARGET_FIRST_CHUNK_MS,
        "kinds": [c.get("type") or next(k for k in ("actions", "steps", "output") if k in c)
                  for c in chunks],
        "answer": chunks[-2].get("output", "")[:200] if len(chunks) > 1 else "",
        "first_token": first_token(Path(tempfile.mkdtemp(prefix="bench-tokens-")),
                                   max(3, args.repeat // 2), args.token_delay),
    }
    write_report("agents", result)


if __name__ == "__main__":
    main()
