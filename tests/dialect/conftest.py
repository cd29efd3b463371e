"""Fixtures for the dialect suite: MindsDB's documented examples, run embedded and over HTTP.

One engine and one real `kbsql serve` per module (starting a server per test would cost
seconds each); every test gets its own project, so names never collide. Hosted models are
stood in for by the deterministic `hash-64` embedder and by scripted OpenAI-compatible /
rerank servers on loopback (`tests.knowledge.fakes`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import kbsql
from kbsql.interface import SqlError
from kbsql.interface.results import ErrorResult, TableResult
from tests.conftest import start_server, stop_server
from tests.knowledge.fakes import FakeProvider

HASH = '{"provider": "kbsql", "model_name": "hash-64"}'
ORDERS = [("A1B", "Wireless Mouse", "Request color: black"),
          ("3XZ", "Bluetooth Speaker", "Gift wrap requested"),
          ("Q7P", "Aluminum Laptop Stand", "Prefer aluminum finish")]
_counter = itertools.count()


class Doc:
    """One test's view of a client: its own project, helpers that read like the docs."""

    def __init__(self, client: kbsql.Client, transport: str, data_dir: Path, provider: FakeProvider):
        self.client = client
        self.transport = transport
        self.provider = provider
        self.data_dir = data_dir
        self.project = f"p{next(_counter)}"
        client.project = "mindsdb"
        client.sql(f"CREATE PROJECT {self.project}")
        client.project = self.project

    def sql(self, query: str, **kw: Any) -> Any:
        return self.client.sql(query, **kw)

    def rows(self, query: str) -> list[dict[str, Any]]:
        result = self.client.sql(query)
        assert isinstance(result, TableResult), result
        return [dict(zip(result.column_names, r, strict=True)) for r in result.rows()]

    def columns(self, query: str) -> list[str]:
        result = self.client.sql(query)
        assert isinstance(result, TableResult), result
        return list(result.column_names)

    def background(self, query: str, timeout: float = 60.0) -> dict[str, Any]:
        """Run `INSERT ... SELECT ... USING batch_size` (MindsDB runs it in the background: the
        answer is the query's row) and wait for it to end: its information_schema.queries row."""
        from tests.waiting import queries_sql, wait_for

        started = self.rows(query)
        assert next(iter(started[0])) == "ID", started
        return wait_for(lambda: self.rows(queries_sql(started[0]["ID"]))[0], timeout=timeout)

    def error(self, query: str) -> str:
        result = self.client.sql(query, raise_on_error=False)
        assert isinstance(result, ErrorResult), f"expected an error, got {result!r}"
        message = result.to_exception().message
        assert "\n" not in message.strip(), message
        assert "Traceback" not in message
        return message

    def refused(self, query: str, what: str = "") -> str:
        message = self.error(query)
        assert message.startswith("not supported by the local engine: "), message
        assert what.lower() in message.lower(), message
        return message

    def orders_kb(self, name: str = "my_kb", extra: str = "", embedding: str = HASH) -> None:
        """The knowledge base of query.mdx: orders with notes as content, product as metadata."""
        self.sql(f"CREATE KNOWLEDGE_BASE {name} USING embedding_model = {embedding}, "
                 f"metadata_columns = ['product'], content_columns = ['notes'], "
                 f"id_column = 'order_id'{extra}")
        self.sql(f"INSERT INTO {name} SELECT order_id, product, notes FROM sample_data.orders")

    def openai(self, model: str = "text-embedding-3-large") -> str:
        """An `openai` descriptor as the docs write it, pointed at the loopback fake."""
        return (f'{{"provider": "openai", "model_name": "{model}", "api_key": "sk-doc-key", '
                f'"base_url": "{self.provider.url}/v1"}}')


def _sample_data(path: Path) -> Path:
    db = path / "sample.duckdb"
    if not db.exists():
        with duckdb.connect(str(db)) as con:
            con.execute("CREATE TABLE orders (order_id VARCHAR, product VARCHAR, notes VARCHAR)")
            con.executemany("INSERT INTO orders VALUES (?, ?, ?)", ORDERS)
    return db


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    yield fake
    fake.close()


@pytest.fixture(scope="module", params=["embedded", "http"])
def module_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[kbsql.Client, str, Path]]:
    base = tmp_path_factory.mktemp(f"dialect-{request.param}")
    sample = _sample_data(base)
    if request.param == "embedded":
        client = kbsql.connect(data_dir=base / "engine")
        server = None
    else:
        server, url = start_server(base / "server")
        client = kbsql.connect(url)
    client.sql(f"CREATE DATABASE sample_data WITH ENGINE = 'duckdb', "
               f"PARAMETERS = {{\"database\": \"{sample}\"}}")
    yield client, request.param, base
    client.close()
    if server is not None:
        stop_server(server)


@pytest.fixture
def doc(module_client: tuple[kbsql.Client, str, Path], provider: FakeProvider) -> Doc:
    client, transport, base = module_client
    return Doc(client, transport, base, provider)


__all__ = ["HASH", "ORDERS", "Doc", "SqlError"]
