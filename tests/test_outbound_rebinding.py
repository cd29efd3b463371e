"""A model host checked as public when the call is allowed may resolve to a private address a
moment later, when the connection is made (DNS rebinding). The outbound policy checks again
on the address it connects to (engine/outbound.py `transport`).

The name service is scripted in this process (`socket.getaddrinfo`): the first answer is a
public address, every later one 127.0.0.1, where a real HTTP server on loopback stands for
an internal service. The engine's one outbound model client (`ModelHttp`) is driven the two
ways providers use it: a JSON call (embeddings, rerankers) and an agent provider's call."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kbsql.engine import outbound
from kbsql.engine.models.chat import base as providers_base
from kbsql.engine.models.model_http import ModelHttp
from kbsql.engine.models.providers import ProviderContext
from kbsql.interface.errors import ProviderError

PUBLIC = "93.184.216.34"  # a public address (nothing is sent to it: the check comes first)


class Internal(BaseHTTPRequestHandler):
    calls = 0

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        type(self).calls += 1
        body = b'{"data": [{"embedding": [0.1, 0.2]}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST


@pytest.fixture
def internal() -> Iterator[int]:
    Internal.calls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Internal)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture
def rebinding(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """`rebind.test` answers PUBLIC once, then 127.0.0.1."""
    real = socket.getaddrinfo
    answers: list[str] = []

    def scripted(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        address = PUBLIC if not answers else "127.0.0.1"
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port or 80)))]

    monkeypatch.setattr(socket, "getaddrinfo", scripted)
    yield answers


SHARED = outbound.Policy(allowed=(outbound.ANY_PUBLIC,), confined=True)
"""A shared server's policy: any public host, nothing private unless named."""


def test_an_embedding_call_never_connects_to_a_rebound_private_address(internal: int,
                                                                        rebinding: list[str]) -> None:
    with pytest.raises(ProviderError) as failed:
        ModelHttp(policy=SHARED).post_json(f"http://rebind.test:{internal}/v1/embeddings",
                                           {"input": ["x"]}, "k", "openai model 'e'")
    assert Internal.calls == 0, "the internal service was called"
    assert rebinding[0] == PUBLIC and "127.0.0.1" in rebinding  # checked, then rebound
    assert "could not be reached" in failed.value.detail and len(failed.value.detail.splitlines()) == 1


def test_an_agent_call_never_connects_to_a_rebound_private_address(internal: int,
                                                                    rebinding: list[str]) -> None:
    provider = providers_base.HttpProvider({"provider": "openai", "model_name": "m", "api_key": "k",
                                            "base_url": f"http://rebind.test:{internal}/v1"},
                                           ProviderContext(http=ModelHttp(policy=SHARED)))
    with pytest.raises(ProviderError):  # the shared HTTP path of every chat provider
        provider.request("GET", "/models")
    assert Internal.calls == 0 and rebinding[0] == PUBLIC


def test_a_named_host_is_reached_through_the_same_transport(internal: int) -> None:
    named = outbound.Policy(allowed=(f"127.0.0.1:{internal}",), confined=True)
    answer = ModelHttp(policy=named).post_json(f"http://127.0.0.1:{internal}/v1/embeddings",
                                               {"input": ["x"]}, "k", "openai model 'e'")
    assert answer["data"][0]["embedding"] == [0.1, 0.2] and Internal.calls == 1
