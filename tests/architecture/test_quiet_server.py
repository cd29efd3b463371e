"""The server draws nothing: a client's inserts leave the server's stderr empty.

The engine only reports progress to a callback its caller gives; the server gives none, so
a 2,000-row PUT (one request, two engine batches of the one-transaction pipeline) and an
`INSERT ... SELECT` of 2,000 rows, inline and in the background, print no progress bar
(nor anything else) on the server's stderr, where a process-global tqdm fallback used to
draw one per batch.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pandas as pd

import kbsql
from tests.conftest import start_server, stop_server

ROWS = 2000


def test_inserts_print_nothing_on_the_servers_stderr(tmp_path: Path) -> None:
    server, url = start_server(tmp_path / "server")
    try:
        client = kbsql.connect(url)
        client.knowledge_bases.create("docs", embedding_model={"provider": "kbsql", "model_name": "hash-64"})
        client.register("src", pd.DataFrame({"id": range(ROWS),
                                             "content": [f"row {i}" for i in range(ROWS)]}))
        before = server.log_text()
        rows = [{"id": i, "content": f"row {i} text"} for i in range(ROWS)]
        answer = httpx.put(f"{url}/api/projects/mindsdb/knowledge_bases/docs",
                           json={"knowledge_base": {"rows": rows}}, timeout=120)
        assert answer.status_code == 200 and answer.json()["inserted_rows"] == ROWS
        client.sql("INSERT INTO docs SELECT id + 10000 AS id, content FROM df.src")
        # batch_size makes it MindsDB's background insert: it draws nothing either
        client.sql("INSERT INTO docs SELECT id + 20000 AS id, content FROM df.src USING batch_size = 500")
        deadline = time.monotonic() + 60
        while True:
            counted = client.query("SELECT count(*) AS n FROM (SELECT id FROM docs LIMIT 10000) AS t")
            if counted["n"][0] == 3 * ROWS or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert counted["n"][0] == 3 * ROWS
        time.sleep(0.2)  # anything written while answering has reached the file
        assert server.log_text()[len(before):] == ""
        client.close()
    finally:
        stop_server(server)
