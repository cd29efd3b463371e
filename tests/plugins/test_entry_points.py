"""Another package extends kbsql through entry points only, and a knowledge base and an agent
use what it registers by name, embedded and over HTTP (a real `kbsql serve` that finds the
package on its PYTHONPATH).

The package is `site/kbsql_test_plugins` with its `*.dist-info` (entry_points.txt) beside
it, as pip would install it: an embedding provider (`letters`), a storage backend
(`jsonstore`), a chat provider (`parrot`), a reranker (`shortest`), and a broken entry
point (`broken`) whose module does not exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kbsql
from kbsql.interface.errors import ServiceError, SqlError
from tests.conftest import start_server, stop_server

SITE = Path(__file__).resolve().parent / "site"
LETTERS = {"provider": "letters", "model_name": "letters-26"}
DOCS = [{"id": "z", "content": "zzz zigzag pizzazz"},
        {"id": "a", "content": "banana bandana cabana"},
        {"id": "q", "content": "quiet quick quest"}]


def _env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(SITE), os.environ.get("PYTHONPATH")]))}


@pytest.fixture
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(SITE))  # as if pip had installed the package


@pytest.fixture(params=["embedded", "http"])
def where(request: pytest.FixtureRequest, tmp_path: Path,
          plugin_path: None) -> Iterator[tuple[kbsql.Client, Path]]:
    """(a client, the service's data directory): an engine in this process, or a server
    whose PYTHONPATH holds the plugin package (and the test process's does not need it)."""
    data_dir = tmp_path / request.param
    if request.param == "embedded":
        client = kbsql.connect(data_dir=data_dir)
        yield client, data_dir
        client.close()
        return
    server, url = start_server(data_dir, env=_env())
    client = kbsql.connect(url)
    yield client, data_dir
    client.close()
    stop_server(server)


def test_a_knowledge_base_and_an_agent_use_the_plugins_by_name(where: tuple[kbsql.Client, Path]) -> None:
    client, data_dir = where
    kb = client.knowledge_bases.create("docs", embedding_model=LETTERS,
                                       storage={"database": "jsonstore", "table": "docs"})
    assert kb.embedding_model is not None and kb.embedding_model.provider == "letters"
    assert client.knowledge_bases.insert("docs", DOCS) == 3
    store = next((data_dir / "knowledge_bases").glob("*/docs.json"))  # the plugin's file holds them
    assert sorted(r["id"] for r in json.loads(store.read_text())["rows"].values()) == ["a", "q", "z"]

    rows = client.query("SELECT id, relevance FROM docs WHERE content = 'buzz pizza' LIMIT 2")
    assert rows["id"].tolist()[0] == "z" and rows["relevance"].is_monotonic_decreasing
    assert client.query("SELECT id FROM docs WHERE id = 'q'")["id"].tolist() == ["q"]  # its filters
    client.sql("DELETE FROM docs WHERE id = 'a'")
    assert sorted(client.query("SELECT id FROM docs")["id"]) == ["q", "z"]

    client.agents.create("polly", model={"provider": "parrot", "model_name": "polly"},
                         data={"knowledge_bases": ["docs"]})
    answer = client.agents.completion("polly", "pizzazz")
    assert answer.startswith("parrot polly heard:") and "zzz zigzag pizzazz" in answer


def test_a_data_source_of_a_plugin_engine_stores_a_knowledge_base(where: tuple[kbsql.Client, Path]) -> None:
    client, data_dir = where
    client.sql("CREATE DATABASE vs WITH ENGINE = 'jsonstore', PARAMETERS = {\"file\": \"kept.json\"}")
    client.sql("CREATE KNOWLEDGE_BASE kb USING storage = vs.kb, embedding_model = "
               '{"provider": "letters"}, reranking_model = {"provider": "shortest"}')
    client.knowledge_bases.insert("kb", [{"id": "long", "content": "quick quiet quest " * 5},
                                         {"id": "short", "content": "quick"}])
    assert next((data_dir / "knowledge_bases").glob("*/kept.json")).exists()
    got = client.query("SELECT id, relevance FROM kb WHERE content = 'quick quiet quest' LIMIT 2")
    assert got["id"].tolist() == ["short", "long"]  # the reranker's order, not the embedder's
    assert got["relevance"].tolist()[0] == pytest.approx(0.5)  # 1 / (1 + 1 word)
    with pytest.raises(SqlError, match="PARAMETERS file only"):
        client.sql("CREATE DATABASE bad WITH ENGINE = 'jsonstore', PARAMETERS = {\"host\": \"x\"}")


def test_a_data_source_engine_from_a_plugin(where: tuple[kbsql.Client, Path]) -> None:
    """The fifth group, `kbsql.datasources`: CREATE DATABASE ... ENGINE names the plugin's
    engine, its PARAMETERS are checked by it, and its table is read with SQL."""
    client, _ = where
    client.sql('CREATE DATABASE c WITH ENGINE = \'counting\', PARAMETERS = {"n": 4}')
    assert client.query("SELECT sum(n) AS total FROM c.numbers")["total"].tolist() == [10]
    assert "numbers" in client.query("SHOW TABLES FROM c").iloc[:, 0].tolist()
    with pytest.raises(SqlError, match="needs PARAMETERS"):
        client.sql('CREATE DATABASE d WITH ENGINE = \'counting\', PARAMETERS = {"n": "many"}')
    with pytest.raises(SqlError) as unknown:
        client.sql("CREATE DATABASE e WITH ENGINE = 'nope', PARAMETERS = {}")
    assert "counting" in unknown.value.message and unknown.value.error_code == 1235  # listed, typed


def test_a_broken_plugin_is_one_error_naming_it(where: tuple[kbsql.Client, Path]) -> None:
    client, _ = where
    with pytest.raises(ServiceError) as info:
        client.knowledge_bases.create("bad", embedding_model={"provider": "broken"})
    assert "'broken'" in info.value.detail and "kbsql_test_plugins.missing_module" in info.value.detail
    assert info.value.status == 500 and info.value.title == "Plugin error"
    assert [k.name for k in client.knowledge_bases.list()] == []  # nothing half-made
    client.knowledge_bases.create("good", embedding_model=LETTERS)  # everything else still works
    assert client.knowledge_bases.insert("good", DOCS[:1]) == 1


def test_unknown_names_list_the_plugins_without_loading_them(tmp_path: Path, plugin_path: None) -> None:
    from kbsql.engine import Engine

    with Engine(tmp_path / "e") as engine:
        with pytest.raises(ServiceError, match="not supported") as info:
            engine.create_knowledge_base("mindsdb", {"name": "kb", "embedding_model": {"provider": "nope"}})
        assert "letters" in info.value.detail and "broken" in info.value.detail  # from metadata


def test_import_and_a_query_load_no_plugin() -> None:
    """Entry points are read only when a name is not a built-in, and a plugin's module is
    imported only when its name is used: `import kbsql`, an engine and built-in models
    import nothing of the plugin package."""
    script = """
import json, sys, tempfile
import kbsql
from kbsql.engine import Engine
with Engine(tempfile.mkdtemp()) as engine:
    engine.query("SELECT 1")
    engine.create_knowledge_base("mindsdb", {"name": "kb", "embedding_model": {"provider": "kbsql",
                                                                               "model_name": "hash-8"}})
    engine.insert_into_knowledge_base("mindsdb", "kb", [{"content": "x"}])
    before = sorted(m for m in sys.modules if m.startswith("kbsql_test_plugins"))
    engine.create_knowledge_base("mindsdb", {"name": "kb2", "embedding_model": {"provider": "letters"}})
    after = sorted(m for m in sys.modules if m.startswith("kbsql_test_plugins"))
print(json.dumps([before, after]))
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **_env()})
    assert run.returncode == 0, run.stderr[-2000:]
    before, after = json.loads(run.stdout.strip().splitlines()[-1])
    assert before == [] and after == ["kbsql_test_plugins", "kbsql_test_plugins.letters"]
