"""Benchmark: one user's work must not slow another's on a shared `kbsql serve`.

Four clients (the real client, `kbsql.connect(url)`, one keep-alive connection each) run
`SELECT 1` and a knowledge-base search (the default embedding model) in turn. Measured on
the same server, in the same run, in alternating phases:

- idle: only those four clients;
- load: the same four while 2 heavy statements (a three-way cross join of a registered
  frame, each stopped by the `timeout` it asks for, then sent again) and 20 slow model
  calls (agent completions against a scripted OpenAI-compatible server on loopback that
  holds every chat call `--model-delay` seconds) run from other clients, one client
  uploads bombs in a loop (issue 39: a 3.5 KB xlsx whose shared string fills 150 cells, a
  zip of 70 MB of CSV, a tar.gz of zeros, a PDF whose pages parse for seconds), each
  refused by an upload bound (`--upload-bombs 0` leaves them out), `--background` inserts
  (`INSERT INTO docs SELECT <the cross join> USING batch_size`, in the background lane, each
  stopped by query_cancel after `--heavy-timeout` seconds, then sent again), and
  `--mysql-idlers` connections to the MySQL door that never answer its greeting (each
  reopened when the server closes it: the pre-auth cap, `--max-pending-connections`), from a
  process of their own, as an attacker's would be (as threads here they took the measuring
  clients' interpreter lock, and their own reconnecting was timed as the server's slowness),
  and as many (`--http-idlers`) to the HTTP port that never send a request head, from
  another process, started once the four clients are connected: on loopback they are all of
  one address block, whose new connections the server closes at accept while it floods
  (server/flood.py), so a client connecting then would be refused (one already connected is
  served).

Figures: p50 and p99 of each kind per phase; targets: the p99 under load <= 5x the idle
p99 and <= 50 ms. Server defaults throughout (the flags a user does not set).

Usage: python benchmarks/bench_isolation.py [--rounds 3] [--calls 150] [--model-delay 20] [--docs 150]
       [--mysql-idlers 600] [--http-idlers 600] [--background 1]
Prints JSON and writes benchmarks/results/isolation.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
from report import write_report  # benchmarks/report.py (the script's folder is on sys.path)

import kbsql
from kbsql.server.process import spawn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/files/bombs.py

from tests.files.bombs import gzipped_zeros, shared_stream_pdf, shared_string_workbook, zipped_csv

CLIENTS = 4
HEAVY = 2
MODEL_CALLS = 20
TARGET_RATIO = 5.0
TARGET_P99_MS = 50.0
HEAVY_SQL = "SELECT count(*) FROM df.n a, df.n b, df.n c WHERE a.x + b.x + c.x = -1"
BACKGROUND_SQL = ("INSERT INTO docs SELECT a.x AS id, 'c' AS content FROM df.n a, df.n b, df.n c "
                  "WHERE a.x + b.x + c.x = -1 USING batch_size = 10")
SEARCH_SQL = "SELECT id, chunk_content FROM docs WHERE content = 'how do I sort a list' LIMIT 5"


class SlowModel:
    """An OpenAI-compatible server on loopback: `/models` at once, each chat call after
    `delay` seconds (then one streamed answer)."""

    def __init__(self, delay: float):
        self.delay = delay
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = json.dumps({"data": [{"id": "slow-1"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.calls += 1
                time.sleep(outer.delay)
                chunk = {"choices": [{"index": 0, "delta": {"content": "slow answer"}}]}
                body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the server gave up on the call (its model timeout, a stop)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": round(statistics.median(ordered), 3), "p99_ms": round(p99, 3),
            "max_ms": round(ordered[-1], 3), "n": len(ordered)}


def prepare(url: str, model_url: str, docs: int) -> None:
    from pydoc_data.topics import topics

    with kbsql.connect(url) as client:
        client.register("n", pd.DataFrame({"x": range(3000)}))
        client.sql("CREATE KNOWLEDGE_BASE docs")  # the default embedding model
        rows = [{"id": name, "content": text[:1500]} for name, text in sorted(topics.items())[:docs]]
        client.knowledge_bases.insert("docs", rows)
        client.sql(f"CREATE AGENT slow USING model = {{'provider': 'openai', 'model_name': 'slow-1', "
                   f"'base_url': '{model_url}', 'api_key': 'sk-bench'}}")


def measure(url: str, calls: int, connected: Callable[[], None] = lambda: None) -> dict[str, list[float]]:
    """`calls` rounds of SELECT 1 then the search, from each of the four clients at once;
    `connected` is called once all four are connected and warm."""
    out: dict[str, list[float]] = {"select_1": [], "kb_search": []}
    lock = threading.Lock()
    warm = threading.Barrier(CLIENTS, action=connected)

    def client_loop() -> None:
        mine: dict[str, list[float]] = {"select_1": [], "kb_search": []}
        with kbsql.connect(url) as client:
            for _ in range(5):  # warm: connection, caches
                client.sql("SELECT 1")
                client.sql(SEARCH_SQL)
            warm.wait()
            for _ in range(calls):
                for kind, query in (("select_1", "SELECT 1"), ("kb_search", SEARCH_SQL)):
                    start = time.perf_counter()
                    client.sql(query)
                    mine[kind].append((time.perf_counter() - start) * 1000)
        with lock:
            for kind, values in mine.items():
                out[kind] += values

    failed: list[BaseException] = []

    def guarded() -> None:
        try:
            client_loop()
        except BaseException as exc:  # a measuring client that fails fails the run, never a smaller sample
            failed.append(exc)
            warm.abort()

    threads = [threading.Thread(target=guarded) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise failed[0]
    return out


class Load:
    """The heavy statements, slow model calls, upload bombs and background inserts, looping
    until the load ends, from threads in a process of their own (as other users' would be: as
    threads of this process they took the measuring clients' interpreter lock), and the idlers."""

    def __init__(self, url: str, heavy_timeout: float, upload_bombs: int = 1,
                 mysql_port: int | None = None, idlers: int = 0, http_idlers: int = 0,
                 background: int = 1):
        self.url = url
        self.mysql_port = mysql_port
        self.heavy_timeout = heavy_timeout
        self.stop = threading.Event()
        self.answers: dict[str, int] = {}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._heavy, daemon=True) for _ in range(HEAVY)]
        self.threads += [threading.Thread(target=self._model, daemon=True) for _ in range(MODEL_CALLS)]
        self.threads += [threading.Thread(target=self._bombs, daemon=True) for _ in range(upload_bombs)]
        self.background = background
        self.threads += [threading.Thread(target=self._background, daemon=True) for _ in range(background)]
        fork = multiprocessing.get_context("fork")  # before any thread of this Load starts
        self.load_stop = fork.Event()
        self.answered: Any = fork.Queue()
        self.users = fork.Process(target=self._users, daemon=True)
        self.idlers_stop = fork.Event()
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        self.floods: dict[str, tuple[multiprocessing.process.BaseProcess, Any, Any]] = {}
        for door, at, count in (("mysql", mysql_port, idlers), ("http", int(port), http_idlers)):
            if at is not None and count:
                counts = (fork.Value("l", 0), fork.Value("l", 0))
                self.floods[door] = (fork.Process(target=_idlers, daemon=True, args=(
                    host, at, count, self.idlers_stop, *counts)), *counts)

    def _count(self, what: str) -> None:
        with self.lock:
            self.answers[what] = self.answers.get(what, 0) + 1

    def _heavy(self) -> None:
        with httpx.Client(base_url=self.url, timeout=120) as http:
            while not self.stop.is_set():
                try:
                    answer = http.post("/api/sql/query", json={"query": HEAVY_SQL,
                                                                "timeout": self.heavy_timeout}).json()
                except httpx.HTTPError:  # the server stopping under it at the end
                    return
                self._count("heavy stopped" if answer.get("type") == "error" else "heavy done")

    def _background(self) -> None:
        """A background insert whose SELECT is the cross join (its own lane, `--background-inserts`),
        cancelled with query_cancel after the heavy statements' timeout, then sent again. Its
        row is polled meanwhile, which also keeps the connection open: a new one would be closed
        at accept while the HTTP idlers flood (they are of this client's address block)."""
        with httpx.Client(base_url=self.url, timeout=120) as http:
            def ask(query: str) -> Any:
                return http.post("/api/sql/query", json={"query": query}).json()["data"]

            while not self.stop.is_set():
                try:
                    query_id = ask(BACKGROUND_SQL)[0][0]
                except (httpx.HTTPError, KeyError, IndexError, TypeError):  # the server stopping
                    self._count("background insert not started")
                    return
                cancel_at = time.monotonic() + self.heavy_timeout
                try:
                    while True:
                        if cancel_at and (self.stop.is_set() or time.monotonic() >= cancel_at):
                            # when the load ends too: a background insert outlives its client
                            http.post("/api/sql/query", json={"query": f"SELECT query_cancel({query_id})"})
                            cancel_at = 0.0
                        error, finished = ask("SELECT error, finished_at FROM information_schema.queries "
                                              f"WHERE id = {query_id}")[0]
                        if error is not None or finished is not None:
                            self._count("background insert cancelled" if error else "background insert done")
                            break
                        time.sleep(0.2)
                except (httpx.HTTPError, KeyError, IndexError, TypeError):
                    self._count("background insert lost")
                    return

    def _model(self) -> None:
        body = {"messages": [{"question": "hi", "answer": ""}]}
        with httpx.Client(base_url=self.url, timeout=300) as http:
            while not self.stop.is_set():
                try:
                    answer = http.post("/api/projects/mindsdb/agents/slow/completions", json=body)
                except httpx.HTTPError:
                    return
                self._count(f"model HTTP {answer.status_code}")
                if answer.status_code == 503:
                    time.sleep(float(answer.headers.get("Retry-After", "1")))

    def _bombs(self) -> None:
        bombs = [("sheet.xlsx", shared_string_workbook()), ("big.zip", zipped_csv(70)),
                 ("zeros.tar.gz", gzipped_zeros(80)), ("slow.pdf", shared_stream_pdf())]
        with httpx.Client(base_url=self.url, timeout=300) as http:
            while not self.stop.is_set():
                for filename, raw in bombs:
                    try:
                        answer = http.put("/api/files/bomb", data={"source_type": "file"},
                                          files={"file": (filename, raw)})
                    except httpx.HTTPError:  # a refusal closes the connection; a new one is
                        self._count("upload bomb not connected")  # closed at accept while the
                        time.sleep(0.5)  # HTTP idlers' block (loopback) floods
                        continue
                    self._count(f"upload bomb HTTP {answer.status_code}")
    def _users(self) -> None:
        """The other users' threads (in the forked process), until `load_stop`; their answers' counts
        go back through `answered`."""
        for thread in self.threads:
            thread.start()
        self.load_stop.wait()
        self.stop.set()
        for thread in self.threads[-self.background:] if self.background else []:
            thread.join(10)  # its insert cancelled, not left running into the idle phase
        with self.lock:
            self.answered.put(dict(self.answers))

    def __enter__(self) -> Load:
        if "mysql" in self.floods:
            self.floods["mysql"][0].start()
        self.users.start()
        time.sleep(3)  # the heavy statements running, the model calls held
        return self

    def flood_http(self) -> None:
        """The HTTP idlers start (the measuring clients are connected by now)."""
        if "http" in self.floods:
            self.floods["http"][0].start()

    def __exit__(self, *exc: object) -> None:
        self.load_stop.set()
        self.answers.update(self.answered.get(timeout=60))
        self.users.join(30)
        self.idlers_stop.set()
        for door, (process, closed, refused) in self.floods.items():
            if process.pid is not None:
                process.join(30)
            self.answers.update({f"{door} idler closed by the server": int(closed.value),
                                 f"{door} idler not accepted": int(refused.value)})


def let_in(url: str, within: float = 15.0) -> None:
    """Wait until a new connection is answered: after the HTTP idlers' flood the server closes
    their block's new connections (loopback: every client here) for the flood plus a second."""
    deadline = time.monotonic() + within
    while True:
        try:
            httpx.get(f"{url}/api/status", timeout=5).raise_for_status()
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _idlers(host: str, port: int, count: int, stop: Any, closed: Any, refused: Any) -> None:
    """`count` connections to a door that never log in or send a head, reopened when closed
    (in a process of their own; counts in the shared `closed` and `refused` values)."""
    held: list[socket.socket] = []
    while not stop.is_set():
        for sock in [s for s in held if s.fileno() < 0 or _closed(s)]:
            held.remove(sock)
            sock.close()
            closed.value += 1
        while len(held) < count and not stop.is_set():
            try:
                held.append(socket.create_connection((host, port), timeout=5))
            except OSError:
                refused.value += 1
                break
        time.sleep(0.2)
    for sock in held:
        sock.close()


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (its greeting, if any, is read away)."""
    sock.setblocking(False)
    try:
        while True:
            if not sock.recv(4096):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="idle and load phases, alternating")
    parser.add_argument("--calls", type=int, default=150, help="SELECT 1 + search per client and phase")
    parser.add_argument("--model-delay", type=float, default=20.0, help="seconds each model call is held")
    parser.add_argument("--docs", type=int, default=150, help="pydoc topics in the searched knowledge base")
    parser.add_argument("--heavy-timeout", type=float, default=10.0,
                        help="the timeout each heavy statement asks for (then it is sent again)")
    parser.add_argument("--upload-bombs", type=int, default=1, help="clients uploading bombs in a loop")
    parser.add_argument("--mysql-idlers", type=int, default=600,
                        help="connections to the MySQL door that never log in, during the load")
    parser.add_argument("--background", type=int, default=1,
                        help="background inserts over the cross join, each cancelled after --heavy-timeout")
    parser.add_argument("--http-idlers", type=int, default=600,
                        help="connections to the HTTP port that never send a head, during the load")
    args = parser.parse_args()
    model = SlowModel(args.model_delay)
    samples: dict[str, dict[str, list[float]]] = {"idle": {}, "load": {}}
    answers: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp, spawn(tmp, args=("--mysql-port", "0")) as server:
        prepare(server.url, model.url, args.docs)
        for _ in range(args.rounds):
            for phase in ("idle", "load"):
                if phase == "load":
                    with Load(server.url, args.heavy_timeout, args.upload_bombs, server.mysql_port,
                              args.mysql_idlers, args.http_idlers, args.background) as load:
                        got = measure(server.url, args.calls, load.flood_http)
                    for key, count in load.answers.items():
                        answers[key] = answers.get(key, 0) + count
                    let_in(server.url)  # the next phase's clients connect anew
                else:
                    got = measure(server.url, args.calls)
                for kind, values in got.items():
                    samples[phase].setdefault(kind, []).extend(values)
    model.close()
    result: dict[str, Any] = {"benchmark": "isolation", "clients": CLIENTS, "heavy_statements": HEAVY,
                              "slow_model_calls": MODEL_CALLS, "model_delay_s": args.model_delay,
                              "rounds": args.rounds, "upload_bombs": args.upload_bombs,
                              "mysql_idlers": args.mysql_idlers, "http_idlers": args.http_idlers,
                              "background_inserts": args.background}
    for kind in ("select_1", "kb_search"):
        idle, load = percentiles(samples["idle"][kind]), percentiles(samples["load"][kind])
        ratio = load["p99_ms"] / idle["p99_ms"]
        result[kind] = {"idle": idle, "load": load, "p99_ratio": round(ratio, 2),
                        "meets_target": ratio <= TARGET_RATIO and load["p99_ms"] <= TARGET_P99_MS}
    result["load_answers"] = answers  # what the heavy statements and model calls got
    result["targets"] = {"p99_ratio_max": TARGET_RATIO, "p99_under_load_max_ms": TARGET_P99_MS}
    result["load_average_1m"] = round(os.getloadavg()[0], 2)  # figures are noisy when busy
    write_report("isolation", result)


if __name__ == "__main__":
    main()
