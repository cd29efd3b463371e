"""`PUT/GET/DELETE /api/files` through a real `kbsql serve`, as MindsDB's namespaces/file.py
answers them: every format its file handler reads becomes `files.<name>` (with the rows it
reads), MindsDB's titles and codes for what it refuses, and the files in SQL."""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pandas as pd
import pytest

from kbsql.server.process import ServerProcess
from tests.conftest import start_server, stop_server
from tests.files import makers
from tests.files.bombs import gzipped_zeros, shared_stream_pdf, shared_string_workbook, zipped_csv
from tests.files.served import (
    child_processes,
    children_cpu_s,
    cost,
    parse_cpu_s,
    problem,
    sql,
    upload,
    upload_then_leave,
)

TOKEN = "files-token"
LATE_PDF = 200_000
"""Bytes of padding that give the PDF bomb a CPU budget (`--pdf-cpu-per-mb`, 60 per MB:
12 CPU-s) past the --pdf-timeout of 6 s here: it then parses until its deadline."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, httpx.Client]]:
    """One server for the file: a token (the client's) and a user who logs in (another
    owner of the fair shares), one PDF extraction at once, each within 6 s."""
    proc, url = start_server(tmp_path_factory.mktemp("files") / "server",
                             env={"KBSQL_PDF_TIMEOUT": "6", "KBSQL_PDF_WORKERS": "1", "KBSQL_TOKEN": TOKEN,
                                  "KBSQL_USER": "bea", "KBSQL_PASSWORD": "pw-bea"})
    with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        yield proc, http
    stop_server(proc)


@pytest.fixture(scope="module")
def client(served: tuple[ServerProcess, httpx.Client]) -> httpx.Client:
    return served[1]


@pytest.mark.parametrize("filename,raw", [
    ("orders.csv", makers.csv_bytes()), ("orders.tsv", makers.csv_bytes("\t")),
    ("orders.json", makers.json_bytes()), ("orders.parquet", makers.parquet_bytes()),
    ("orders.xlsx", makers.xlsx_bytes()), ("orders.zip", makers.zipped("orders.csv", makers.csv_bytes())),
])
def test_table_formats_become_files_tables(client: httpx.Client, filename: str, raw: bytes) -> None:
    name = "t_" + filename.replace(".", "_")
    answer = upload(client, name, filename, raw, original_file_name=filename)
    assert answer.status_code == 200 and answer.json() == "", answer.text
    assert {"name": name, "row_count": 3, "columns": ["order_id", "product", "notes"]} in \
        client.get("/api/files").json()
    rows = sql(client, f"SELECT order_id FROM files.{name} ORDER BY order_id")
    assert rows["data"] == [["3XZ"], ["A1B"], ["Q7P"]]


def test_text_and_pdf_become_chunk_rows_a_knowledge_base_takes(client: httpx.Client) -> None:
    assert upload(client, "guide", "guide.txt", makers.text(8).encode()).status_code == 200
    pdf = makers.pdf_bytes([["Refunds take five business days."], ["Gift wrap is offered at checkout."]])
    assert upload(client, "policy", "policy.pdf", pdf).status_code == 200
    rows = sql(client, "SELECT content, metadata FROM files.guide")["data"]
    assert len(rows) >= 2 and all(len(r[0]) <= 500 for r in rows)
    assert rows[0][1] == {"source_file": "guide.txt", "file_format": "txt"}
    text = " ".join(r[0] for r in sql(client, "SELECT content FROM files.policy")["data"])
    assert "Refunds take five business days." in text and "Gift wrap" in text
    sql(client, "CREATE KNOWLEDGE_BASE docs USING embedding_model = {\"provider\": \"kbsql\", "
                "\"model_name\": \"hash-64\"}")
    inserted = sql(client, "INSERT INTO docs SELECT content FROM files.policy")
    assert inserted["type"] == "ok", inserted
    found = sql(client, "SELECT chunk_content FROM docs WHERE chunk_content LIKE '%Gift wrap%'")["data"]
    assert found and "Gift wrap" in found[0][0]


def test_a_workbook_of_sheets_is_a_table_of_sheets_and_one_per_sheet(client: httpx.Client) -> None:
    raw = makers.xlsx_bytes({"orders": makers.frame(), "stock": pd.DataFrame({"sku": ["a"], "n": [4]})})
    assert upload(client, "book", "book.xlsx", raw).status_code == 200
    assert sql(client, "SELECT * FROM files.book")["data"] == [["orders"], ["stock"]]
    assert sql(client, "SELECT n FROM files.book.stock")["data"] == [[4]]


def test_mindsdb_refusals_with_its_titles(client: httpx.Client) -> None:
    csv = makers.csv_bytes()
    problem(upload(client, "with.csv", "with.csv", csv), "Error", "File name cannot contain extension.")
    problem(upload(client, "odd", "odd.csv", csv, colour="red"), "Invalid request parameters",
            "Unexpected parameters in request: colour")
    assert upload(client, "twice", "twice.csv", csv).status_code == 200
    problem(upload(client, "twice", "twice.csv", csv), "File already exists",
            "File with name 'twice' already exists")
    problem(upload(client, "fetch", "fetch.csv", csv, source_type="url"), "URL file upload is disabled.")
    problem(client.put("/api/files/fetch", json={"source_type": "url", "source": "http://127.0.0.1:9/x.csv"}),
            "URL file upload is disabled.")
    problem(client.put("/api/files/fetch", json={"source_type": "url", "source": "not_a_url"}), "Invalid URL",
            "The URL is not valid: not_a_url")
    problem(client.put("/api/files/nofile", data={"source_type": "file"},
                       files={"other": ("x.csv", io.BytesIO(csv))}), "Invalid request parameters")
    problem(client.put("/api/files/nofile", json={"source_type": "file"}), "File field is missed")
    problem(upload(client, "old", "old.xls", b"\xd0\xcf\x11\xe0 old excel"), "Error",
            "Not supported format: xls")
    problem(upload(client, "dup", "dup.csv", b"a,a \n1,2\n"), "Error",
            "Each column should have a unique and non-empty name.")
    names = [f["name"] for f in client.get("/api/files").json()]
    assert not {"odd", "fetch", "nofile", "old", "dup"} & set(names)  # nothing stored by a refusal
    problem(client.delete("/api/files/never"), "Error deleting file",
            "There was an error while trying to delete file with name 'never'")


def test_a_long_name_or_value_is_cut_in_the_error_detail(client: httpx.Client) -> None:
    """What the user sent is repeated in the detail up to 100 characters, then counted: a
    5,000-character upload name came back whole (5,092 characters of detail)."""
    csv = makers.csv_bytes()
    long = "é" + "n" * 4999  # a letter the name rule refuses, then 4,999 more
    for answer in (upload(client, long, "x.csv", csv),
                   client.put("/api/files/fetch", json={"source_type": "url", "source": "u" * 5000}),
                   client.put("/api/files/fetch", json={"source_type": "x" * 5000}),
                   client.post("/api/projects/mindsdb/knowledge_bases",
                               json={"knowledge_base": {"name": long}})):
        assert answer.status_code == 400, answer.text
        detail = answer.json()["detail"]
        assert len(detail) < 400 and "more characters]" in detail, detail


def test_files_in_sql_and_dataframes_stay_apart(client: httpx.Client) -> None:
    assert upload(client, "notes", "notes.csv", b"id,body\n1,alpha\n2,beta\n").status_code == 200
    assert "files" in [r[0] for r in sql(client, "SHOW DATABASES")["data"]]
    assert ["notes"] in sql(client, "SHOW TABLES FROM files")["data"]
    # a Parquet body (kbsql's own form: client.register) is the DataFrame df.<name>
    frame = io.BytesIO()
    pd.DataFrame({"id": [1], "n": [9]}).to_parquet(frame, index=False)
    put = client.put("/api/files/notes_df", content=frame.getvalue(),
                     headers={"Content-Type": "application/vnd.apache.parquet"})
    assert put.status_code == 200 and put.json()["table"] == "df.notes_df"
    joined = sql(client, "SELECT f.body, d.n FROM files.notes f JOIN df.notes_df d ON f.id = d.id")
    assert joined["data"] == [["alpha", 9]]
    assert "notes_df" not in [f["name"] for f in client.get("/api/files").json()]
    assert sql(client, "DROP TABLE files.notes")["type"] == "ok"
    assert "notes" not in [f["name"] for f in client.get("/api/files").json()]
    assert upload(client, "gone", "gone.csv", b"a\n1\n").status_code == 200
    assert client.delete("/api/files/gone").status_code == 200
    assert "not found" in sql(client, "SELECT * FROM files.gone")["error_message"]


# --- upload bombs (issue 39): refused by a bound, at a cost bounded by it ------------------

@pytest.mark.parametrize("filename,make,detail", [
    ("sheet.xlsx", shared_string_workbook, "kbsql serve --max-upload-decoded-mb"),
    ("big.zip", lambda: zipped_csv(70), "kbsql serve --max-upload-decoded-mb"),
    ("zeros.tar.gz", lambda: gzipped_zeros(80), "kbsql serve --max-upload-decoded-mb"),
    ("wide.csv", lambda: (",".join(f"c{i}" for i in range(60_000)) + "\n" + "1," * 59_999 + "1\n").encode(),
     "kbsql serve --max-upload-columns"),
])
def test_an_upload_bomb_is_refused_at_a_bounded_cost(served: tuple[ServerProcess, httpx.Client],
                                                      filename: str, make: Callable[[], bytes],
                                                      detail: str) -> None:
    """The findings: the xlsx grew the server 442 MB, the zip was accepted (+272 MB), the
    tar.gz cost 3.3 CPU-s per MB of it, the wide CSV 11 CPU-s and +575 MB."""
    server, client = served
    assert upload(client, "kept", "kept.csv", b"id,v\n1,a\n").status_code in (200, 400)
    raw = make()
    assert len(raw) < 1_000_000
    parsed = parse_cpu_s(server)
    answer, cpu, grown = cost(server, lambda: upload(client, "bomb", filename, raw))
    problem(answer, "Error", detail)
    assert "over this server's bound" in answer.json()["detail"]
    parsing = parse_cpu_s(server) - parsed  # the parse runs in a child of the forkserver
    assert grown < 160 and cpu + parsing < 3, (grown, cpu, parsing)
    assert "bomb" not in [f["name"] for f in client.get("/api/files").json()]
    assert sql(client, "SELECT v FROM files.kept")["data"] == [["a"]]  # nothing stored is lost


def test_a_small_pdf_of_costly_pages_is_refused_within_its_cpu_budget(
        served: tuple[ServerProcess, httpx.Client]) -> None:
    """The finding: 3.7 KB of PDF parsed for 35 CPU-s (to the 60 s deadline). Its budget is
    proportional to its size (--pdf-cpu-per-mb 60, at least 2 CPU-s; the extraction's
    RLIMIT_CPU): refused once it has used 2 CPU-s, in one line naming the flag; an ordinary
    PDF of 20 pages (80 KB, ~0.45 CPU-s, a budget of 5) is read."""
    server, client = served
    raw = shared_stream_pdf()
    assert len(raw) < 10_000
    before, answers = children_cpu_s(server), []
    sender = threading.Thread(target=lambda: answers.append(upload(client, "costly_pdf", "costly.pdf", raw)))
    sender.start()
    limits = set()
    while sender.is_alive():  # the CPU bound each extraction process runs under, as it runs
        for pid in child_processes(server):
            with contextlib.suppress(OSError, StopIteration):
                line = next(x for x in Path(f"/proc/{pid}/limits").read_text().splitlines()
                            if x.startswith("Max cpu time"))
                limits.add(line.split()[3])
        time.sleep(0.02)
    spent = children_cpu_s(server) - before
    assert "2" in limits and spent < 2.5, (limits, spent)  # the old bound: the deadline's (7)
    if spent > 1.9 or "--pdf-cpu-per-mb" in answers[0].text:  # the deadline first only if starved
        problem(answers[0], "Error", "more than 2 CPU-seconds (60 per MB of the file, at least 2): "
                "over this server's bound (kbsql serve --pdf-cpu-per-mb)")
    else:
        problem(answers[0], "Error", "kbsql serve --pdf-timeout")
    assert upload(client, "manual", "manual.pdf", manual(20)).status_code == 200
    text = " ".join(row[0] for row in sql(client, "SELECT content FROM files.manual")["data"])
    assert "Line 44 of page 19: refunds" in text


def test_a_pdf_that_parses_forever_is_stopped_at_its_deadline(
        served: tuple[ServerProcess, httpx.Client]) -> None:
    """Parsed in a process of its own (`--pdf-timeout`, 6 s here), killed at the deadline:
    the answer comes in bounded time, the server spends no CPU on it, no process is left.
    (Padded, so its CPU budget is past the deadline.)"""
    server, client = served
    raw = shared_stream_pdf(padding=LATE_PDF)
    start = time.monotonic()
    answer, cpu, _ = cost(server, lambda: upload(client, "slow_pdf", "slow.pdf", raw))
    problem(answer, "Error", "kbsql serve --pdf-timeout")
    assert time.monotonic() - start < 15 and cpu < 1.5, cpu
    assert child_processes(server) == []
    assert "slow_pdf" not in [f["name"] for f in client.get("/api/files").json()]


def test_pdfs_are_read_a_few_at_a_time(served: tuple[ServerProcess, httpx.Client]) -> None:
    """Each PDF extraction is a process taking a core: three slow PDFs sent at once on a
    server with --pdf-workers 1 run one at a time (16 at once used to mean 16 processes),
    and each answers within its --pdf-timeout (6 s here, the wait for a slot included):
    the deadline's 400, or a 503 naming --pdf-workers for one that never got a slot."""
    server, client = served
    raw = shared_stream_pdf(padding=LATE_PDF)
    answers: list[httpx.Response] = []

    def send(n: int) -> None:
        with httpx.Client(base_url=client.base_url, timeout=60, headers=client.headers) as own:
            answers.append(upload(own, f"queued_pdf_{n}", "slow.pdf", raw))

    threads = [threading.Thread(target=send, args=(n,)) for n in range(3)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    most = 0
    while any(thread.is_alive() for thread in threads):
        most = max(most, len(child_processes(server)))
        time.sleep(0.05)
    took = time.monotonic() - start
    assert most == 1 and took < 12, (most, took)
    kinds = sorted((a.status_code, "--pdf-workers" in a.text or "--pdf-timeout" in a.text) for a in answers)
    assert all(named for _, named in kinds) and {code for code, _ in kinds} <= {400, 503}, kinds
    assert (503, True) in kinds, [a.text for a in answers]
    assert int(next(a for a in answers if a.status_code == 503).headers["Retry-After"]) >= 1


def niceness(server: ServerProcess) -> list[int]:
    """[the server's nice value, its first child's] ([] when the child has ended meanwhile)."""
    with contextlib.suppress(OSError, IndexError):
        return [int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
                for pid in (server.process.pid, int(child_processes(server)[0]))]
    return []


def test_a_client_that_leaves_kills_its_pdf_extraction_at_once(
        served: tuple[ServerProcess, httpx.Client]) -> None:
    """The upload of a PDF that parses for long, its client gone a second in: the extraction
    process is killed then (it used to run on to --pdf-timeout, 6 s here) and nothing is kept."""
    server, client = served
    with upload_then_leave(server, client, "left_pdf", "left.pdf", shared_stream_pdf(padding=LATE_PDF)):
        nice, seen = niceness(server), time.monotonic()
        while len(nice) == 2 and nice[1] < min(19, nice[0] + 10) and time.monotonic() - seen < 10:
            time.sleep(0.05)  # set once the child has used child_limits.DEMOTE_AFTER_S of CPU
            nice = niceness(server)
        assert len(nice) < 2 or nice[1] >= min(19, nice[0] + 10), nice  # below the server's priority
        time.sleep(max(0.0, 0.5 - (time.monotonic() - seen)))
    left = time.monotonic()
    while child_processes(server) and time.monotonic() - left < 5:
        time.sleep(0.05)
    assert not child_processes(server) and time.monotonic() - left < 2.0, time.monotonic() - left
    assert "left_pdf" not in [f["name"] for f in client.get("/api/files").json()]


def manual(pages: int) -> bytes:
    """An ordinary PDF of `pages` pages of 45 lines (20 pages: 80 KB, ~0.45 CPU-s to read)."""
    return makers.pdf_bytes([[f"Line {n} of page {p}: refunds take five business days, gift wrap "
                              f"at checkout." for n in range(45)] for p in range(pages)])


def test_a_user_sending_pdfs_without_pause_leaves_another_user_a_turn(
        served: tuple[ServerProcess, httpx.Client]) -> None:
    """One PDF slot here (--pdf-workers 1, --pdf-timeout 6). The token sends 16 PDFs of
    ~0.45 CPU-s at once, more than the slot reads in 6 s; another user (a login session)
    sends one PDF while the token's first is read. A freed slot goes to the user holding
    fewer, so the other user's PDF is read next (200), not after the token's queue (it used
    to wait behind them until its 503); the token's last ones wait and answer 503 naming
    --pdf-workers (or the deadline's 400)."""
    server, client = served
    session = client.post("/api/login", json={"username": "bea", "password": "pw-bea"}).json()["token"]
    done: list[tuple[str, httpx.Response, float]] = []

    def send(who: str, token: str, name: str, raw: bytes) -> None:
        with httpx.Client(base_url=client.base_url, timeout=60,
                          headers={"Authorization": f"Bearer {token}"}) as own:
            answer = upload(own, name, f"{name}.pdf", raw)
        done.append((who, answer, time.monotonic()))

    each = manual(20)
    flood = [threading.Thread(target=send, args=("token", TOKEN, f"flood_{n}", each)) for n in range(16)]
    for thread in flood:
        thread.start()
    deadline = time.monotonic() + 5
    while not child_processes(server) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # the token's other fifteen are queued by now
    start = time.monotonic()
    send("bea", session, "bea_pdf", manual(2))
    for thread in flood:
        thread.join()
    order = [who for who, _, _ in sorted(done, key=lambda d: d[2])]
    _, answer, answered = next(d for d in done if d[0] == "bea")
    assert answer.status_code == 200 and answered - start < 6, (answer.text, answered - start)
    assert order.index("bea") <= 2, order  # after the token's one or two read meanwhile, not its 16
    theirs = [a for who, a, _ in done if who == "token"]
    assert all(a.status_code == 200 or (a.status_code == 503 and "--pdf-workers" in a.text)
               or (a.status_code == 400 and "--pdf-timeout" in a.text) for a in theirs), \
        [a.text for a in theirs]


def test_an_upload_that_would_leave_too_little_disk_answers_507(tmp_path: Path) -> None:
    """--disk-reserve-mb on the wire: the upload is a 507 naming the flag, in the problem
    shape every error has, and nothing is listed."""
    proc, url = start_server(tmp_path / "server", env={"KBSQL_DISK_RESERVE_MB": str(2**40)})
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            problem(upload(http, "orders", "orders.csv", makers.csv_bytes()), "Insufficient storage",
                    "would leave less than 1099511627776 MB free on the data directory's disk", 507)
            assert http.get("/api/files").json() == []
    finally:
        stop_server(proc)
