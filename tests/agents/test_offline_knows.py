"""The offline agent knows when it does not know: over real data with the default model it
answers the questions the data answers (quoting a sentence that says it, citing its chunk),
says plainly when nothing does (quoting nothing), never offers a question as an answer, and
says a count needs SQL. Questions: tests/agents/data/offline_questions.json."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kbsql
from kbsql import quickstart
from kbsql.engine.models import minilm
from kbsql.engine.models.chat.offline import SWITCH_HINT
from kbsql.interface.stream import chunk_kind

pytestmark = pytest.mark.skipif(not minilm.available(), reason="the default model is not installed")

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = json.loads((Path(__file__).parent / "data" / "offline_questions.json").read_text())
NOTHING = "answers this question"


def ticket_rows() -> list[dict[str, str]]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from retrieval import corpora

        return [{"id": r["id"], "content": r["content"], "category": r["category"]}
                for r in corpora.tickets().rows]
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kbsql.Client]:
    client = kbsql.connect(data_dir=tmp_path_factory.mktemp("knows"))
    client.sql("CREATE KNOWLEDGE_BASE python_docs USING metadata_columns = ['topic']")
    client.knowledge_bases.insert("python_docs", quickstart.documents(), progress=False)
    client.sql("CREATE KNOWLEDGE_BASE tickets USING metadata_columns = ['category']")
    client.knowledge_bases.insert("tickets", ticket_rows(), progress=False)
    client.agents.create("python_agent", data={"knowledge_bases": ["mindsdb.python_docs"]})
    client.agents.create("tickets_agent", data={"knowledge_bases": ["mindsdb.tickets"]})
    yield client
    client.close()


def ask(client: kbsql.Client, agent: str, question: str) -> str:
    out = [c["output"] for c in client.agents.stream(f"{agent}_agent", question) if chunk_kind(c) == "output"]
    assert len(out) == 1
    assert out[0].rstrip().endswith(SWITCH_HINT)
    return out[0].split(SWITCH_HINT)[0].strip()


def quoted(answer: str) -> list[str]:
    """The sentences an answer quotes (each ends with its [chunk id] citation)."""
    body = answer.split("\n\nSources:", 1)[0]
    return [s.strip() for s in re.split(r"\s*\[[^\]]+\]\s*", body) if s.strip()]


@pytest.mark.parametrize("agent", ["python", "tickets"])
def test_answers_what_the_data_answers_and_cites_it(agents, agent) -> None:
    for item in QUESTIONS[agent]["answerable"]:
        answer = ask(agents, agent, item["question"])
        assert NOTHING not in answer, (item["question"], answer)
        assert "Sources: " in answer and re.search(r"\[[^\]]+:content:\d+of\d+:", answer), answer
        sentences = quoted(answer)
        assert any(e.lower() in answer.lower() for e in item["expect"]), (item["question"], answer)
        assert not any(s.rstrip("\"')").endswith("?") for s in sentences), answer  # never a question


@pytest.mark.parametrize("agent", ["python", "tickets"])
def test_says_plainly_when_nothing_in_the_data_answers(agents, agent) -> None:
    kb = "python_docs" if agent == "python" else "tickets"
    for question in QUESTIONS[agent]["unanswerable"]:
        answer = ask(agents, agent, question)
        assert answer.startswith(f"Nothing in {kb} {NOTHING}"), (question, answer)
        assert "Sources:" not in answer  # nothing quoted as if it answered


@pytest.mark.parametrize("agent", ["python", "tickets"])
def test_a_count_needs_sql_not_two_sentences(agents, agent) -> None:
    for question in QUESTIONS[agent]["count"]:
        answer = ask(agents, agent, question)
        assert answer.startswith("I cannot count"), (question, answer)
        assert "SELECT count(" in answer and "Sources:" not in answer


def test_the_first_question_of_the_quickstart_quotes_break(agents) -> None:
    answer = ask(agents, "python", "how do I leave a loop early?")
    assert "[break:content:" in answer and "break" in answer.split("Sources:", 1)[1], answer
