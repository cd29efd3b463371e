"""Each error class keeps its class and its message across HTTP.

The same failure is triggered on the embedded engine and through a real `kbsql serve`; the
caller must catch the same class with the same message (and title and status) on both.
Before the problem type travelled with the answer, a provider failure was a
`ProviderError` embedded and a plain `BadRequest` over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

import kbsql
from kbsql.interface.errors import (
    PROBLEM_TYPE_HEADER,
    BadRequest,
    Conflict,
    InvalidParameter,
    KbsqlError,
    MissingParameter,
    NotFound,
    ProviderError,
    ServiceError,
    SqlError,
    UnknownDatabase,
    UnknownTable,
)
from tests.conftest import start_server, stop_server

OFFLINE = {"provider": "kbsql", "model_name": "retrieval"}
DEAD = {"provider": "openai", "model_name": "gpt-test", "api_key": "sk-never-shown",
        "base_url": "http://127.0.0.1:9/v1"}  # nothing listens on port 9


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, kbsql.Client]]:
    root = tmp_path_factory.mktemp("errors")
    embedded = kbsql.connect(data_dir=root / "embedded")
    server, url = start_server(root / "server")
    remote = kbsql.connect(url)
    for c in (embedded, remote):
        c.agents.create("taken", model=OFFLINE)
    yield {"embedded": embedded, "http": remote, "url": url}  # type: ignore[dict-item]
    remote.close()
    embedded.close()
    stop_server(server)


CASES: dict[str, tuple[type[KbsqlError], Callable[[kbsql.Client], object]]] = {
    "not found": (UnknownTable, lambda c: c.knowledge_bases.get("no_such_kb")),
    "unknown database": (UnknownDatabase, lambda c: c.knowledge_bases.list(project="no_such_project")),
    "conflict": (Conflict, lambda c: c.agents.create("taken", model=OFFLINE)),
    "bad request": (BadRequest, lambda c: c.agents.create("information_schema", model=OFFLINE)),
    "invalid parameter": (InvalidParameter, lambda c: c.agents.create("bad name!", model=OFFLINE)),
    "missing parameter": (MissingParameter, lambda c: c.agents.create("noprov", model={"model_name": "m"})),
    "provider": (ProviderError, lambda c: c.agents.create("dead", model=DEAD)),
    "sql": (SqlError, lambda c: c.sql("SELECT * FROM no_such_table")),
}


def caught(client: kbsql.Client, trigger: Callable[[kbsql.Client], object]) -> KbsqlError:
    with pytest.raises(KbsqlError) as info:
        trigger(client)
    return info.value


def shape(exc: KbsqlError) -> tuple[object, ...]:
    if isinstance(exc, ServiceError):
        return type(exc), str(exc), exc.title, exc.detail, exc.status
    return type(exc), str(exc)


@pytest.mark.parametrize("case", list(CASES))
def test_same_class_and_message_embedded_and_over_http(clients: dict, case: str) -> None:
    expected, trigger = CASES[case]
    embedded = caught(clients["embedded"], trigger)
    remote = caught(clients["http"], trigger)
    assert type(embedded) is expected
    assert shape(remote) == shape(embedded)
    assert "sk-never-shown" not in str(remote)


def test_problem_body_stays_title_and_detail(clients: dict) -> None:
    """The reference's body is kept exactly; the class rides in a header."""
    answer = httpx.post(f"{clients['url']}/api/projects/mindsdb/agents",
                        json={"agent": {"name": "dead", "model": DEAD}}, timeout=30)
    assert answer.status_code == 400
    assert set(answer.json()) == {"title", "detail"}
    assert answer.headers[PROBLEM_TYPE_HEADER] == ProviderError.problem_type


def test_without_a_type_the_status_decides() -> None:
    """A server that sends no problem type (the reference) still maps by status."""
    assert type(ServiceError.from_problem(404, {"title": "t", "detail": "d"})) is NotFound
    assert type(ServiceError.from_problem(400, {"detail": "d"}, ProviderError.problem_type)) \
        is ProviderError
    assert type(ServiceError.from_problem(400, {"detail": "d", "type": "urn:other"})) is BadRequest


@pytest.mark.parametrize("case, title", [("invalid parameter", "Invalid parameter"),
                                         ("missing parameter", "Missing parameter")])
def test_parameter_errors_keep_the_reference_titles(clients: dict, case: str, title: str) -> None:
    """The two subclasses of BadRequest answer with the titles the reference sends."""
    for where in ("embedded", "http"):
        error = caught(clients[where], CASES[case][1])
        assert isinstance(error, BadRequest) and error.title == title and error.status == 400


def test_an_sql_error_keeps_its_kind_over_http(clients: dict) -> None:
    """The kind rides on `error_code` (MindsDB's field): the HTTP client rebuilds the same
    kind as the embedded engine gives, so a caller branches on `kind`, not on words."""
    for where in ("embedded", "http"):
        error = caught(clients[where], lambda c: c.sql("SELECT * FROM no_such_table"))
        assert isinstance(error, SqlError)
        assert (error.kind, error.error_code) == (UnknownTable.problem_type, 1146), where


def test_a_statement_the_parser_trips_on_is_a_syntax_error_in_words(clients: dict) -> None:
    """MindsDB's parser fails in its own code while wording some syntax errors (a DuckDB
    lambda, `x -> s`): the answer was its internal "invalid literal for int() with base 10:
    '[number]'". Now a syntax error (1064) that shows the statement, on both doors alike."""
    query = "SELECT list_transform(l, x -> s) FROM t"
    for where in ("embedded", "http"):
        error = caught(clients[where], lambda c: c.sql(query))
        assert isinstance(error, SqlError) and error.error_code == 1064, (where, error)
        assert str(error) == f"Syntax error: the parser could not read this statement: {query}", where
