"""Ctrl-C as a notebook user gives it: nbclient runs notebooks in a real kernel and sends the
kernel an interrupt (what Kernel -> Interrupt sends) in the middle of an insert, a long SQL
statement, a search and an agent's answer, on the embedded engine and on a real `kbsql
serve`. Each interrupted cell fails (so Run All stops) with one line saying what was kept,
no traceback; what is stored is what the line says; the kernel answers the next cell."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

import kbsql
from kbsql.server.process import ServerProcess, spawn
from tests.agents.fakes import FakeLLM, text
from tests.knowledge.fakes import FakeProvider

ROWS = 3000
REMOTE_ROWS = 1000  # the server runs the whole insert on (the test waits for it)
EMBED_DELAY = 0.3  # seconds each embedding call (128 rows) takes: inserts last seconds, as a
# remote model's do, without the CPU of embedding thousands of rows locally (which made this
# file 8 minutes of the suite on a loaded machine); what is stopped and kept is the same


@pytest.fixture(scope="module")
def model() -> Iterator[str]:
    """An OpenAI-compatible embedding server on loopback (tests/knowledge/fakes.py), slow on
    purpose; yields the `embedding_model` of the knowledge bases below."""
    provider = FakeProvider()
    provider.delay = EMBED_DELAY
    yield (f"embedding_model = {{'provider': 'openai', 'model_name': 'emb-1', "
           f"'base_url': '{provider.url}/v1', 'api_key': 'sk-test'}}")
    provider.close()

WATCH = """\
from pathlib import Path
from kbsql.notebook import current_client
from kbsql.notebook.progress_bar import notebook_or_tqdm

class Watched:  # the notebook's own bar, telling the test how far the insert got
    def __init__(self, bar):
        self.bar = bar
    def update(self, phase, done, total):
        self.bar.update(phase, done, total)
        Path("progress.txt").write_text(f"{phase} {done}")
    def close(self, error=None):
        self.bar.close(error)

current_client().progress = lambda *args: Watched(notebook_or_tqdm(*args))  # this connection's bars
"""
FRAMES = """\
import pandas as pd
from kbsql.notebook import current_client
client = current_client()
client.register("tickets", pd.DataFrame({{
    "id": range({rows}),
    "body": [f"Ticket {{i}}: the parcel for order {{i}} arrived late and the customer asks when the "
             f"refund for the missing item will reach the card they paid with." for i in range({rows})]}}))
client.register("big", pd.DataFrame({{"x": range({big})}}))
"""
WAIT_FOR_QUERIES = """\
import time
while client.query("SELECT count(*) AS n FROM information_schema.queries "
                   "WHERE FINISHED_AT IS NULL AND ERROR IS NULL")["n"][0]:
    time.sleep(0.1)  # a cancelled insert ends after the batch it was storing
last = client.query("SELECT PROCESSED_ROWS, ERROR FROM information_schema.queries ORDER BY ID DESC LIMIT 1")
print(last["PROCESSED_ROWS"][0]); print(last["ERROR"][0])
"""
LONG_SQL = "%kbsql SELECT count(*) AS n FROM df.big AS a, df.big AS b WHERE (a.x * b.x) % 7 = 3"


def cells(*sources: str) -> Any:
    return new_notebook(cells=[new_code_cell(s) for s in sources])


def run(nb: Any, cwd: Path, interrupts: dict[int, Callable[[], bool]],
        timeout: float = 600, starting: dict[int, Callable[[], None]] | None = None) -> dict[int, float]:
    """Execute `nb` (errors allowed, as Run All shows them); cell i in `interrupts` gets a
    kernel interrupt once its condition holds (polled every 50 ms, at most 120 s); `starting[i]`
    runs just before cell i is sent to the kernel (so no work of the cell can come first).
    Returns when each interrupt was sent (time.monotonic) and, under key -i-1, when that cell
    ended."""
    times: dict[int, float] = {}
    client: NotebookClient

    async def interrupt_when(index: int, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 120
        while not ready() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        times[index] = time.monotonic()
        await client.km.interrupt_kernel()

    tasks: list[asyncio.Task[None]] = []

    async def on_execute(cell: Any, cell_index: int) -> None:
        if cell_index in (starting or {}):
            (starting or {})[cell_index]()
        if cell_index in interrupts:
            tasks.append(asyncio.ensure_future(interrupt_when(cell_index, interrupts[cell_index])))

    def on_executed(cell: Any, cell_index: int, execute_reply: Any) -> None:
        times[-cell_index - 1] = time.monotonic()
        cell.metadata["status"] = execute_reply["content"]["status"]

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}},
                            on_cell_execute=on_execute, on_cell_executed=on_executed)
    client.execute()
    return times


def error_lines(cell: Any) -> list[str]:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert len(errors) == 1, cell.outputs
    assert cell.metadata["status"] == "error"  # the cell failed: Run All stops there
    return errors[0].traceback


def one_line(cell: Any) -> str:
    """The interrupted cell's error: one red line, no traceback, no KeyboardInterrupt."""
    lines = error_lines(cell)
    assert len(lines) == 1, lines
    line = lines[0].replace("\x1b[0;31m", "").replace("\x1b[0m", "")
    assert "Traceback" not in line and "KeyboardInterrupt" not in line and "File " not in line, line
    streams = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    assert "Traceback" not in streams and "IndexError" not in streams, streams
    return line


def text_of(cell: Any) -> str:
    out = []
    for o in cell.outputs:
        out.append(o.get("text", "") or str(o.get("data", {}).get("text/plain", "")))
    return "\n".join(out)


def progress_at(folder: Path, phase: str, rows: float) -> Callable[[], bool]:
    def ready() -> bool:
        said = (folder / "progress.txt").read_text().split() if (folder / "progress.txt").exists() else []
        return len(said) == 2 and said[0] == phase and float(said[1]) >= rows
    return ready


def after(seconds: float) -> Callable[[], bool]:
    start: list[float] = []

    def ready() -> bool:
        start.append(start[0] if start else time.monotonic())
        return time.monotonic() - start[0] >= seconds
    return ready


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBSQL_HOME", str(tmp_path / "home"))  # the kernel's embedded engine
    return tmp_path / "home"


def test_interrupted_embedded_insert_and_statement(tmp_path: Path, home: Path, model: str):
    count = "print('count', client.query('SELECT count(DISTINCT id) AS n FROM tickets_kb')['n'][0])"
    nb = cells(
        "%load_ext kbsql\n" + WATCH,                                                  # 0
        FRAMES.format(rows=ROWS, big=200_000),                                        # 1
        f"%kbsql CREATE KNOWLEDGE_BASE tickets_kb USING content_columns = ['body'], {model}",  # 2
        "%kbsql INSERT INTO tickets_kb SELECT id, body FROM df.tickets",              # 3: interrupted
        count,                                                                        # 4
        # USING without batch_size: in the statement, batches of 1,000 each stored on its own
        "%kbsql INSERT INTO tickets_kb SELECT id, body FROM df.tickets USING threads = 1",  # 5: int.
        count,                                                                        # 6
        # USING batch_size: in the background, which the cell follows until Ctrl-C cancels it
        "%kbsql INSERT INTO tickets_kb SELECT id, body FROM df.tickets USING batch_size = 250",  # 7: int.
        WAIT_FOR_QUERIES + count,                                                     # 8
        "print(client.query('SELECT PROCESSED_ROWS, ERROR FROM information_schema.queries "
        "ORDER BY ID').values.tolist())",                                             # 9
        LONG_SQL,                                                                     # 10: interrupted
        "%kbsql SELECT 1 AS one",                                                     # 11
        "%kbsql INSERT INTO tickets_kb SELECT id, body FROM df.tickets WHERE id < 10",  # 12
        count,                                                                        # 13
    )
    times = run(nb, tmp_path, {3: progress_at(tmp_path, "embedding", 200),
                               5: progress_at(tmp_path, "embedding", 1200),
                               7: progress_at(tmp_path, "inserting", 500), 10: after(1.5)})
    c = nb.cells

    # The single-transaction insert: nothing stored, the bar says it stopped.
    line = one_line(c[3])
    assert line == ("Interrupted [default: embedded]: insert into tickets_kb: nothing stored "
                    "(an insert is stored whole or not at all)"), line
    # the saved bar's last state: the phase it was in when Ctrl-C arrived (Ctrl-C is sent once
    # embedding passed 200 rows; on a loaded machine the next batch's chunking may have begun)
    assert re.search(r"stopped during (embedding|chunking) at \d", text_of(c[3])), text_of(c[3])
    # at once, not after the model's batch (seconds on a loaded machine): the run is stopped
    assert times[-4] - times[3] < 5, times[-4] - times[3]
    assert text_of(c[4]) == "count 0\n"

    # Batches stored one by one: those stored before Ctrl-C stay, and the line says how many.
    line = one_line(c[5])
    said = line.split("insert into tickets_kb: ", 1)[1]
    stored = int(said.split(" of ")[0].replace(",", ""))
    assert said == (f"{stored:,} of 3,000 rows stored (each batch is stored on its own; run the INSERT "
                    "again with USING kb_skip_existing = true to add the rest)"), said
    assert 0 < stored < ROWS and stored % 1000 == 0, said
    assert text_of(c[6]) == f"count {stored}\n"

    # A background insert: Ctrl-C while the cell follows it cancels it; it stops after the
    # batch it was storing, and what it stored stays (the line says so, the log agrees).
    line = one_line(c[7])
    assert line.startswith("Interrupted [default: embedded]: query 3 cancelled: it stops after the "
                           "batch it is storing ("), line
    assert line.endswith("rows stored so far stay; information_schema.queries says when it stopped); "
                         "SELECT query_resume(3) continues it"), line
    assert times[-8] - times[7] < 5, "the cell kept following after Ctrl-C"
    ended = [x for x in text_of(c[8]).splitlines() if x]  # the prints may come as several outputs
    background = int(ended[0])
    assert 500 <= background < ROWS and background % 250 == 0, ended
    assert ended[1].startswith("Query cancelled (query_cancel)"), ended
    # the rows it re-inserted were the same ids: the count is all that any insert stored
    assert ended[2] == f"count {max(stored, background)}", ended

    # information_schema.queries: the three inserts, with what each kept
    queries = text_of(c[9])
    assert queries.startswith("[[0, 'interrupted: insert into tickets_kb: nothing stored (an insert"), queries
    assert f"[{stored}, 'interrupted: insert into tickets_kb: {stored:,} of 3,000 rows stored" in queries
    assert f"[{background}, 'Query cancelled (query_cancel)" in queries

    # A long DuckDB statement is stopped (not left running): the next one answers at once.
    # (a read: the notebook's line for an interrupted SELECT, as for a search below)
    assert one_line(c[10]) == "Interrupted [default: embedded]: the statement was stopped"
    assert times[-11] - times[10] < 15, "the statement went on after Ctrl-C"
    assert c[11].metadata["status"] == "ok" and "one" in text_of(c[11])
    assert times[-12] - times[-11] < 15  # the connection was free again

    # The kernel and the knowledge base are usable: an insert after it all works.
    assert c[12].metadata["status"] == "ok", text_of(c[12])
    assert text_of(c[13]) == f"count {max(stored, background, 10)}\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with spawn(tmp_path / "server") as served:
        yield served


def test_interrupted_remote_insert_and_statement(tmp_path: Path, home: Path, server: ServerProcess,
                                                 model: str):
    watch = kbsql.connect(server.url)

    def inserts() -> Any:
        return watch.query("SELECT FINISHED_AT, ERROR FROM information_schema.queries")

    def count() -> int:
        return int(watch.query("SELECT count(DISTINCT id) AS n FROM tickets_kb")["n"][0])

    begun = after(0.5)
    nb = cells(
        f"%load_ext kbsql\n%kbsql_connect {server.url} -a team",                     # 0
        FRAMES.format(rows=REMOTE_ROWS, big=25_000),                                  # 1
        f"%kbsql CREATE KNOWLEDGE_BASE tickets_kb USING content_columns = ['body'], {model}",  # 2
        "%kbsql INSERT INTO tickets_kb SELECT id, body FROM df.tickets",              # 3: interrupted
        "print('alive')",                                                             # 4
    )
    # interrupted half a second after the server began the insert (its queries table says so)
    times = run(nb, tmp_path, {3: lambda: len(inserts()) == 1 and begun()})
    c = nb.cells
    where = f"team: {server.url}"
    assert one_line(c[3]) == (f"Interrupted [{where}]: stopped waiting for the server, which may still "
                              "finish the statement (information_schema.queries there lists its inserts)")
    assert times[-4] - times[3] < 10, "the client kept waiting after Ctrl-C"
    assert c[4].outputs[0].text == "alive\n"

    # What the line said is what happened: the server's statement went on to its end (or was
    # stopped there), and at no moment was part of the insert visible.
    seen: set[int] = set()
    deadline = time.monotonic() + 300
    while not inserts()["FINISHED_AT"].notna().all():
        seen.add(count())
        assert time.monotonic() < deadline, "the server's insert did not finish"
        time.sleep(0.5)
    final = count()
    assert final == (REMOTE_ROWS if inserts()["ERROR"].isna().all() else 0)
    assert seen <= {0, REMOTE_ROWS}, seen

    # A long statement: the client stops waiting at once (the server's own run of it is
    # the server's business: it has no deadline yet), and the kernel goes on.
    nb = cells(f"%load_ext kbsql\n%kbsql_connect {server.url} -a team", LONG_SQL, "print('alive again')")
    times = run(nb, tmp_path, {1: after(1.5)})
    c = nb.cells
    assert one_line(c[1]) == f"Interrupted [{where}]: stopped waiting for the server"
    assert times[-2] - times[1] < 10
    assert c[2].outputs[0].text == "alive again\n"

    # A background insert (USING batch_size) on the server: Ctrl-C while the cell follows it
    # cancels it there; it stops after the batch it is storing and what it stored stays.
    nb = cells(
        f"%load_ext kbsql\n%kbsql_connect {server.url} -a team\n" + WATCH,             # 0
        FRAMES.format(rows=REMOTE_ROWS, big=10),                                      # 1
        f"%kbsql CREATE KNOWLEDGE_BASE later_kb USING content_columns = ['body'], {model}",  # 2
        "%kbsql INSERT INTO later_kb SELECT id, body FROM df.tickets USING batch_size = 100",  # 3: int.
        WAIT_FOR_QUERIES + "print(client.query('SELECT count(DISTINCT id) AS n FROM later_kb')['n'][0])",  # 4
    )
    times = run(nb, tmp_path, {3: progress_at(tmp_path, "inserting", 200)})
    c = nb.cells
    line = one_line(c[3])
    assert line.startswith(f"Interrupted [{where}]: query 2 cancelled: it stops after the batch it is "
                           "storing ("), line
    assert line.endswith("SELECT query_resume(2) continues it"), line
    assert times[-4] - times[3] < 10, "the cell kept following after Ctrl-C"
    processed, error, stored = [x for x in text_of(c[4]).splitlines() if x]
    assert error.startswith("Query cancelled (query_cancel)"), error
    assert 200 <= int(processed) < REMOTE_ROWS and int(processed) % 100 == 0, processed
    assert stored == processed  # what the server's log says it kept is what is stored
    watch.close()


def test_interrupted_search_and_agent_answer(tmp_path: Path, home: Path):
    provider = FakeProvider()
    embedding = {"provider": "openai", "model_name": "emb-1", "base_url": f"{provider.url}/v1",
                 "api_key": "sk-test"}
    slow_answer = text("word " * 200)  # streamed in small pieces, 0.05 s apart
    with FakeLLM("openai", [slow_answer, text("Refunds take five days.")], delay=0.05) as llm:
        model = {"provider": "openai", "model_name": "m1", "base_url": llm.base_url, "api_key": "sk-test"}
        nb = cells(
            "%load_ext kbsql\nfrom kbsql.notebook import current_client\nclient = current_client()",  # 0
            f"client.knowledge_bases.create('notes', embedding_model={embedding!r})\n"
            "client.knowledge_bases.insert('notes', [{'id': 1, 'content': 'Refunds take five days.'}])\n"
            f"client.agents.create('slow', model={model!r}, data={{'knowledge_bases': []}})",     # 1
            "%kbsql SELECT * FROM notes WHERE content = 'refund' LIMIT 3",                          # 2: int.
            "%agent slow tell me everything",                                                        # 3: int.
            "%agent slow and how long do refunds take?",                                             # 4
        )

        def slow_model() -> None:  # as the search's cell starts: every embedding call takes 20 s
            provider.delay = 20.0

        def searching() -> bool:
            return provider.active > 0

        calls: list[int] = []

        def answering() -> bool:
            if llm.events_sent >= 10:
                calls.append(llm.chat_calls)
                return True
            return False

        times = run(nb, tmp_path, {2: searching, 3: answering}, starting={2: slow_model})
        provider.delay = 0.0
        provider.close()
    c = nb.cells
    assert one_line(c[2]) == "Interrupted [default: embedded]: the statement was stopped"
    assert times[-3] - times[2] < 10, "the search kept waiting for the model after Ctrl-C"
    assert one_line(c[3]) == ("Interrupted [default: embedded]: the answer was stopped "
                              "(it is not added to the conversation)")
    assert "stopped after" in text_of(c[3])  # the panel's saved snapshot says so too
    assert c[4].metadata["status"] == "ok" and "five days" in text_of(c[4])
    # the stopped answer made no further model call; the follow-up carried no half answer
    assert llm.chat_calls == calls[0] + 1
    last = llm.requests[-1]["messages"]
    assert not any("word word" in str(m.get("content")) for m in last), last
