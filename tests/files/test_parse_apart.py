"""An upload parsed in a process of its own (`upload_processes`, datasources/parse_process.py)
gives what the same file parsed in the calling thread gives: the same tables, cell for cell,
or the same refusal, word for word. Only where the work happens may differ."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from kbsql.engine.datasources.parse_process import parse_apart
from kbsql.engine.datasources.upload_formats import UploadBounds, read_pages
from kbsql.engine.fair_slots import FairSlots
from kbsql.interface.errors import ServiceError
from kbsql.interface.frames import to_arrow
from tests.files import makers
from tests.files.bombs import gzipped_zeros, shared_string_workbook, zipped_csv

SMALL = UploadBounds(decoded=8 * 2**20, columns=50, cells=50_000, note=lambda key: f"--{key}")

FILES: list[tuple[str, Callable[[], bytes]]] = [
    ("orders.csv", makers.csv_bytes), ("orders.tsv", lambda: makers.csv_bytes("\t")),
    ("orders.json", makers.json_bytes), ("orders.parquet", makers.parquet_bytes),
    ("book.xlsx", lambda: makers.xlsx_bytes({"a": makers.frame(), "b ": makers.frame().head(1)})),
    ("notes.txt", lambda: makers.text().encode()),
    ("orders.zip", lambda: makers.zipped("o.csv", makers.csv_bytes())),
    ("noname", makers.csv_bytes),
    # refusals: each must be the same line from either place
    ("sheet.xlsx", shared_string_workbook), ("big.zip", lambda: zipped_csv(20)),
    ("zeros.tar.gz", lambda: gzipped_zeros(20)),
    ("wide.csv", lambda: (",".join(f"c{i}" for i in range(60)) + "\n1\n").encode()),
    ("two.zip", lambda: makers.zipped("a.csv", b"a\n1\n", {"b.csv": b"b\n2\n"})),
    ("old.xls", lambda: b"\xd0\xcf\x11\xe0"), ("broken.json", lambda: b"[{"),
    ("bad.parquet", lambda: b"PAR1xxPAR1"),
    ("dup.csv", lambda: b"a, a\n1,2\n"), ("deep.json", lambda: b"[" * 100_000 + b"]" * 100_000),
]


def outcome(raw: bytes, filename: str, bounds: UploadBounds, parse: Any = None) -> Any:
    try:
        pages = read_pages(raw, filename, 64 * 2**20, bounds, parse)
    except ServiceError as exc:
        return (type(exc).__name__, exc.status, exc.title, exc.detail)
    return {page: to_arrow(table).to_pandas() for page, table in pages.items()}


@pytest.mark.parametrize("filename,make", FILES, ids=[f for f, _ in FILES])
def test_a_file_parsed_apart_is_what_it_is_in_the_thread(filename: str, make: Callable[[], bytes]) -> None:
    raw = make()
    here = outcome(raw, filename, SMALL)
    bounds = UploadBounds(**{**SMALL.__dict__, "parse_slots": FairSlots(1)})
    apart = outcome(raw, filename, bounds, parse_apart)
    if isinstance(here, tuple):
        assert apart == here  # type, status, title and detail
    else:
        assert list(apart) == list(here)
        for page, frame in here.items():
            pd.testing.assert_frame_equal(apart[page], frame)


def test_a_child_whose_zygote_died_before_answering_ends_and_the_upload_is_parsed(monkeypatch: Any) -> None:
    """The zygote forks a child and dies before handing back its pidfd (killed, out of memory):
    the upload is parsed by a new zygote's child on a socket of its own, and the orphan, which
    the server cannot name, reads the end of its socket and ends (it shared the retry's socket
    and garbled the file once)."""
    import os
    import socket
    import time
    from pathlib import Path

    from kbsql.engine.datasources import parse_process

    real = parse_process._Zygote.fork
    orphans: list[int] = []
    sockets: list[int] = []  # the inode of the socket each attempt hands a child

    def dies_after_forking(self: Any, sock: socket.socket, deadline: float) -> int:
        sockets.append(os.fstat(sock.fileno()).st_ino)
        if orphans:
            return real(self, sock, deadline)
        socket.send_fds(self.channel, [b"F"], [sock.fileno()])
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        until = time.monotonic() + 10  # the zygote imports the readers first
        while not children.read_text().split() and time.monotonic() < until:
            time.sleep(0.01)
        orphans.extend(int(pid) for pid in children.read_text().split())
        self.process.kill()
        raise EOFError("the zygote forked no child")

    monkeypatch.setattr(parse_process._Zygote, "fork", dies_after_forking)
    bounds = UploadBounds(**{**SMALL.__dict__, "parse_slots": FairSlots(1)})
    pages = read_pages(makers.csv_bytes(), "orders.csv", 64 * 2**20, bounds, parse_apart)
    pd.testing.assert_frame_equal(to_arrow(pages["main"]).to_pandas(), makers.frame())
    assert len(orphans) == 1 and len(set(sockets)) == 2, sockets  # the retry's socket is not the orphan's
    until = time.monotonic() + 2
    while os.path.exists(f"/proc/{orphans[0]}") and time.monotonic() < until:
        state = Path(f"/proc/{orphans[0]}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            break
        time.sleep(0.02)
    assert not os.path.exists(f"/proc/{orphans[0]}") or \
        Path(f"/proc/{orphans[0]}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


_MEASURE = """
import resource, sys
import {preload}
from kbsql.engine.datasources.upload_formats import read_pages
from kbsql.interface.errors import ServiceError
raw = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    read_pages(raw, sys.argv[2])  # the default bounds, as a served upload's child has them
    print("parsed", end=" ")
except ServiceError as exc:
    print("refused", end=" ")
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


@pytest.mark.parametrize("filename,make", [
    ("sheet.xlsx", shared_string_workbook), ("big.zip", lambda: zipped_csv(70)),
    ("zeros.tar.gz", lambda: gzipped_zeros(80)),
    ("wide.csv", lambda: (",".join(f"c{i}" for i in range(60_000)) + "\n" + "1," * 59_999 + "1\n").encode()),
], ids=["xlsx", "zip", "tar.gz", "wide"])
def test_a_bomb_costs_its_parse_process_little_memory(tmp_path: Any, filename: str,
                                                      make: Callable[[], bytes]) -> None:
    """The server-side test (test_server_files) measures the server; the parse now runs in a
    child, so this measures what the child grows by on the same bombs, from where the zygote
    left it (its imports): the findings grew a process by 272-575 MB."""
    import subprocess
    import sys

    from kbsql.engine.datasources.parse_process import PRELOAD

    path = tmp_path / "bomb"
    path.write_bytes(make())
    script = _MEASURE.format(preload=", ".join(PRELOAD))
    run = subprocess.run([sys.executable, "-c", script, str(path), filename],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    outcome_, grown = run.stdout.split()
    assert outcome_ == "refused" and int(grown) < 160, run.stdout
