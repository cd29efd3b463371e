"""A `%%kbsql` cell running a background insert (`INSERT ... SELECT ... USING batch_size`)
follows it with the progress bar until it ends, returns its final row, fails with its
error, and cancels it on Ctrl-C (keeping what was stored)."""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import pytest

from kbsql.interface.errors import SqlError
from kbsql.notebook import follow
from kbsql.notebook.magics import KbSql

HASH = '{"provider": "kbsql", "model_name": "hash-64"}'


def _client(ip: Any) -> Any:
    magics = next(c for c in ip.configurables if isinstance(c, KbSql))
    return magics._connection(None).client


def _source(ip: Any, rows: int = 300) -> Any:
    client = _client(ip)
    bodies = [f"note {i} on refunds" for i in range(rows)]
    client.register("src", pd.DataFrame({"pk": range(rows), "body": bodies}))
    client.sql(f"CREATE KNOWLEDGE_BASE kb USING embedding_model = {HASH}, content_columns = ['body'], "
               "id_column = 'pk'")
    return client


def test_the_cell_follows_the_insert_to_its_end_with_a_bar(ip, cells) -> None:
    client = _source(ip)
    result, out = cells.run("%%kbsql\nINSERT INTO kb SELECT pk, body FROM df.src USING batch_size = 20")
    assert result.success, out
    frame = result.result
    assert frame.iloc[0]["PROCESSED_ROWS"] == 300 and frame.iloc[0]["FINISHED_AT"] is not None
    assert "insert (query" in out  # the bar (tqdm outside a kernel), with the query id
    assert client.sql("SELECT count(*) AS n FROM kb").rows() == [[300]]


def test_a_failed_insert_fails_the_cell_with_its_error_in_one_line(ip, cells) -> None:
    client = _source(ip, 30)
    client.sql("INSERT INTO kb SELECT pk, body FROM df.src")
    result, out = cells.run("%kbsql INSERT INTO kb SELECT pk, body FROM df.src USING batch_size = 5, "
                            "kb_no_upsert = true")
    assert not result.success
    assert "kb_no_upsert" in out and "Traceback" not in out


def test_ctrl_c_while_following_cancels_the_insert(ip) -> None:
    client = _source(ip, 3000)

    class Interrupting:
        """The cell's client, whose second poll is interrupted (the user's Ctrl-C)."""

        def __init__(self) -> None:
            self.polls = 0

        def sql(self, query: str, **kw: Any) -> Any:
            if "information_schema.queries" in query:
                self.polls += 1
                if self.polls == 2:
                    raise KeyboardInterrupt
            return client.sql(query, **kw)

    started = client.sql("INSERT INTO kb SELECT pk, body FROM df.src USING batch_size = 10")
    assert follow.is_background(started)
    with pytest.raises(KeyboardInterrupt):
        follow.follow(Interrupting(), started, poll=0.01, progress=False)
    query_id = started.rows()[0][0]
    deadline = time.monotonic() + 30
    while True:
        row = client.sql("SELECT ERROR, PROCESSED_ROWS FROM information_schema.queries "
                         f"WHERE ID = {query_id}")
        error, processed = row.rows()[0]
        if error is not None or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert "cancelled" in error and processed < 3000
    assert client.sql("SELECT count(*) AS n FROM kb").rows() == [[processed]]
    with pytest.raises(SqlError, match="cancelled"):  # following it again reports how it ended
        follow.follow(client, started, poll=0.01, progress=False)
