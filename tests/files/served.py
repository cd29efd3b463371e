"""What the upload tests against a real `kbsql serve` share: sending a file as MindsDB's
clients do, reading an answer, and measuring what an upload costs the server and the processes
doing its work (the PDF extraction children, the parse children of its forkserver)."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from kbsql.server.process import ServerProcess

ZYGOTE = b"kbsql.engine.datasources.parse_process"


def upload(client: httpx.Client, name: str, filename: str, raw: bytes, **fields: str) -> httpx.Response:
    """As mindsdb_sdk and MindsDB's GUI send it: a multipart form with a `file` part."""
    return client.put(f"/api/files/{name}", data={"source_type": "file", **fields},
                      files={"file": (filename, io.BytesIO(raw))})


@contextlib.contextmanager
def upload_then_leave(server: ServerProcess, client: httpx.Client, name: str, filename: str,
                      raw: bytes) -> Iterator[None]:
    """Send an upload on a connection of its own, wait until a process works on it, and close
    the connection (the client leaves) when the block ends."""
    request = client.build_request("PUT", f"/api/files/{name}", data={"source_type": "file"},
                                   files={"file": (filename, io.BytesIO(raw))})
    head = (f"PUT /api/files/{name} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in request.headers.items() if k.lower() != "host")
            + "\r\n").encode()
    host, port = str(client.base_url).split("//", 1)[1].rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port))) as conn:
        conn.sendall(head + request.read())
        deadline = time.monotonic() + 5
        while not child_processes(server) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child_processes(server), "no process ever worked on the upload"
        yield


def sql(client: httpx.Client, query: str) -> dict[str, Any]:
    return client.post("/api/sql/query", json={"query": query}).json()


def problem(response: httpx.Response, title: str, detail: str = "", status: int = 400) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["title"] == title and detail in body["detail"], body


def cost(server: ServerProcess, send: Callable[[], httpx.Response]) -> tuple[httpx.Response, float, float]:
    """(answer, server CPU-seconds, growth of the server's peak RSS in MB) of one request."""
    pid = server.process.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak RSS starts again from now
    status = Path(f"/proc/{pid}/status")

    def peak_mb() -> float:
        line = next(x for x in status.read_text().splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024

    def cpu_s() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    rss, cpu = Path(f"/proc/{pid}/statm").read_text().split()[1], cpu_s()
    answer = send()
    return answer, cpu_s() - cpu, peak_mb() - int(rss) * os.sysconf("SC_PAGE_SIZE") / 2**20


def children_cpu_s(server: ServerProcess) -> float:
    """CPU-seconds of the server's ended child processes (the PDF extractions it waited for)."""
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def parse_cpu_s(server: ServerProcess) -> float:
    """CPU-seconds of the ended children of the server's parse zygote (the uploads it parsed);
    0 before the first upload started it."""
    for pid in _children(str(server.process.pid)):
        with contextlib.suppress(OSError):
            if ZYGOTE in Path(f"/proc/{pid}/cmdline").read_bytes():
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def child_processes(server: ServerProcess) -> list[str]:
    """The processes doing an upload's work: the server's children, whichever of its threads
    started them, and the children of its parse zygote (datasources/parse_process.py), but not
    the zygote itself, which stays."""
    found = []
    for pid in _children(str(server.process.pid)):
        with contextlib.suppress(OSError):  # ended meanwhile
            if ZYGOTE in Path(f"/proc/{pid}/cmdline").read_bytes():
                found += _children(pid)
            else:
                found.append(pid)
    return found


def _children(pid: str) -> list[str]:
    found = []
    with contextlib.suppress(OSError):  # the process ended meanwhile
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                found += (task / "children").read_text().split()
    return found
