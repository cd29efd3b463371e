"""The deploy/ recipe's proxy, for real: Caddy with deploy/Caddyfile (TLS from its local CA)
in front of two `kbsql serve` on one PostgreSQL catalog, reached with the kbsql client over
HTTPS with the certificate verified. One server is killed with SIGKILL: requests through
the proxy keep being answered. Skipped where the `caddy` binary (Debian's package) is
missing, except in CI, which installs it.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

import kbsql
from kbsql.interface import ServiceError
from kbsql.interface.stream import chunk_kind
from kbsql.server.process import spawn

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
TOKEN = "deploy-test-token"
HASH_MODEL = {"provider": "kbsql", "model_name": "hash-64"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_recipe_proxy_serves_over_tls_and_survives_a_killed_server(tmp_path, pgvector_dsn):
    caddy = shutil.which("caddy")
    if caddy is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the deploy test: install Debian's caddy")
        pytest.skip("no caddy binary (apt-get install caddy)")
    env = {"KBSQL_CATALOG_URL": pgvector_dsn, "KBSQL_TOKEN": TOKEN}
    servers = [spawn(tmp_path / f"s{i}", env=env) for i in (1, 2)]
    https_port = free_port()
    home = tmp_path / "caddy"
    proxy = subprocess.Popen(
        [caddy, "run", "--config", str(DEPLOY / "Caddyfile"), "--adapter", "caddyfile"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "caddy.log", "w"),
        env={**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
             "XDG_CONFIG_HOME": str(home / "config"), "KBSQL_SITE": "localhost",
             "KBSQL_HTTPS_PORT": str(https_port), "KBSQL_HTTP_PORT": str(free_port()),
             "KBSQL_HEALTH_TIMEOUT": "30s",  # a loaded test machine is slow, not down
             "KBSQL_UPSTREAMS": " ".join(s.url.removeprefix("http://") for s in servers)})
    url = f"https://localhost:{https_port}"
    root = home / "data" / "caddy" / "pki" / "authorities" / "local" / "root.crt"

    def trusting() -> ssl.SSLContext:  # Caddy's local CA, and only it
        return ssl.create_default_context(cafile=str(root))
    try:
        deadline = time.monotonic() + 60
        while True:  # Caddy makes its CA and the certificate, then answers
            try:
                if root.exists() and httpx.get(f"{url}/api/status", verify=trusting()).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proxy.poll() is None and time.monotonic() < deadline, (tmp_path / "caddy.log").read_text()
            time.sleep(0.2)
        status = httpx.get(f"{url}/api/status", verify=trusting()).json()
        assert status["catalog"] == {**status["catalog"], "database": "postgresql", "ok": True}
        transport = httpx.HTTPTransport(verify=trusting())  # the proxy's certificate, checked
        with kbsql.connect(url, token=TOKEN, transport=transport) as client:
            client.knowledge_bases.create("docs", embedding_model=HASH_MODEL)
            client.knowledge_bases.insert("docs", [{"id": i, "content": f"refund rule {i}"}
                                                   for i in range(30)])
            # an agent's answer streams through the proxy (text/event-stream, flushed)
            client.agents.create("helper", data={"knowledge_bases": ["docs"]})  # the offline model
            kinds = [chunk_kind(c) for c in client.agents.stream("helper", "What is refund rule 7?")]
            assert kinds[0] == "start" and kinds[-1] == "end" and "output" in kinds
            with pytest.raises(ServiceError), \
                    kbsql.connect(url, transport=httpx.HTTPTransport(verify=trusting())) as anonymous:
                anonymous.knowledge_bases.list()  # no token: refused by the server behind

            servers[1].process.kill()  # SIGKILL: the proxy must route around it
            servers[1].process.wait()
            lost = 0
            for i in range(20):
                try:
                    found = client.sql(f"SELECT id, chunk_content FROM docs WHERE content = "
                                       f"'refund rule {i}' LIMIT 1").to_pandas()
                except ServiceError as exc:  # requests already on their way to the dead server
                    assert exc.status == 502 and i < 2, exc
                    lost += 1
                    continue
                assert len(found) == 1
            client.knowledge_bases.insert("docs", [{"id": 100, "content": "written after the kill"}])
            assert len(client.sql("SELECT id FROM docs").to_pandas()) == 31
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
        for s in servers:
            s.stop()
