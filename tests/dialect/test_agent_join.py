"""An agent joined with a table asks one question per row's value, as MindsDB answers
`select * from files.questions t join my_agent a on a.question = t.q` (its
tests/unit/executor/test_agent.py test_openai_provider); embedded and over HTTP, the model a
scripted OpenAI-compatible server on loopback that answers each question by its product."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents.fakes import FakeLLM, text
from tests.dialect.conftest import HASH, ORDERS, Doc

PRODUCTS = [product for _, product, _ in ORDERS]


class ByProduct(FakeLLM):
    """Answers `<product>: in stock`, for the product the question names."""

    def next_turn(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        super().next_turn(body, headers)
        asked = json.dumps(body["messages"])
        named = [p for p in PRODUCTS if p in asked]
        return text(f"{named[-1]}: in stock" if named else "no product")


@pytest.fixture
def agent(doc: Doc) -> Iterator[ByProduct]:
    with ByProduct("openai", []) as llm:
        model = json.dumps({"provider": "openai", "model_name": "m1", "api_key": "sk-join-key",
                            "base_url": llm.base_url})
        doc.sql(f"CREATE AGENT stock_agent USING model = {model}")
        yield llm


def test_each_row_is_asked_and_joined_to_its_answer(doc: Doc, agent: ByProduct) -> None:
    rows = doc.rows("SELECT o.order_id, a.question, a.answer FROM sample_data.orders o "
                    "JOIN stock_agent a ON a.question = o.product ORDER BY o.order_id")
    assert rows == sorted(({"order_id": i, "question": p, "answer": f"{p}: in stock"}
                           for i, p, _ in ORDERS), key=lambda r: r["order_id"])
    assert agent.chat_calls == len(ORDERS)


def test_the_table_filter_decides_what_is_asked(doc: Doc, agent: ByProduct) -> None:
    """Only the rows the query keeps are asked; none kept, nothing asked and no row (as
    MindsDB's `where t.q = ''`)."""
    rows = doc.rows("SELECT * FROM sample_data.orders o JOIN stock_agent a ON a.question = o.product "
                    "WHERE o.order_id = '3XZ'")
    assert [(r["order_id"], r["answer"]) for r in rows] == [("3XZ", "Bluetooth Speaker: in stock")]
    assert agent.chat_calls == 1
    assert doc.rows("SELECT * FROM sample_data.orders o JOIN stock_agent a ON a.question = o.product "
                    "WHERE o.product = ''") == []
    assert agent.chat_calls == 1
    # a condition on the answer filters after asking, never drops a question unasked
    rows = doc.rows("SELECT o.order_id FROM sample_data.orders o JOIN stock_agent a "
                    "ON a.question = o.product WHERE a.answer LIKE 'Wireless%'")
    assert rows == [{"order_id": "A1B"}]


def test_more_questions_than_the_bound_is_refused_not_cut(doc: Doc, agent: ByProduct) -> None:
    """A join asking more distinct questions than agent_join_max_rows is one error line naming
    the setting; nothing is asked."""
    many = ("SELECT a.order_id || b.order_id || c.order_id || d.order_id || e.order_id AS q "
            "FROM sample_data.orders a, sample_data.orders b, sample_data.orders c, "
            "sample_data.orders d, sample_data.orders e")  # 243 distinct
    message = doc.error(f"SELECT * FROM ({many}) t JOIN stock_agent a ON a.question = t.q")
    assert "more than 100 questions" in message and "agent_join_max_rows" in message
    assert agent.chat_calls == 0
    rows = doc.rows(f"SELECT count(*) AS n FROM ({many} LIMIT 100) t JOIN stock_agent a ON a.question = t.q")
    assert rows == [{"n": 100}]


def test_an_agent_joined_the_other_way_is_refused_in_one_line(doc: Doc, agent: ByProduct) -> None:
    message = doc.error("SELECT * FROM sample_data.orders o RIGHT JOIN stock_agent a "
                        "ON a.question = o.product")
    assert "LEFT JOIN" in message and "\n" not in message
    assert agent.chat_calls == 0
    message = doc.error("SELECT * FROM stock_agent a JOIN sample_data.orders o ON a.question = o.product")
    assert "JOIN stock_agent a ON a.question = t.<column>" in message


def test_a_searched_knowledge_base_is_asked_as_the_join_reads_it(doc: Doc, agent: ByProduct) -> None:
    """The values were read by the query with the agent's join taken out, where a knowledge
    base alone is a search cut at the LIMIT the questions query carries: of 300 chunks (150 near
    the search, 150 far from it) only the near ones' value was asked, and the join answered 150
    rows, without a word. The agent's place is kept by one row joined ON TRUE."""
    doc.sql(f"CREATE KNOWLEDGE_BASE notes_kb USING embedding_model = {HASH}")
    rows = ", ".join(f"({i}, 'widgets widgets widgets {i}', 'near')" if i < 150 else
                     f"({i}, 'a quiet garden path {i}', 'far')" for i in range(300))
    doc.sql(f"INSERT INTO notes_kb (id, content, product) VALUES {rows}")
    got = doc.rows("SELECT count(*) AS n, count(DISTINCT a.question) AS asked FROM notes_kb k "
                   "JOIN stock_agent a ON a.question = k.product WHERE k.content = 'widgets'")
    assert got == [{"n": 300, "asked": 2}]
    assert agent.chat_calls == 2


def test_the_bound_is_the_statements_not_each_joins(doc: Doc, agent: ByProduct) -> None:
    """agent_join_max_rows bounds all the questions of a statement: a UNION of agent joins,
    each under the bound, that together pass it is refused in one line, nothing asked past
    it. Before, each join had its own bound: five joins of 60 questions asked 300 of a
    100-question bound (four times the model calls the setting allows)."""
    many = ("SELECT a.order_id || b.order_id || c.order_id || d.order_id || e.order_id AS q "
            "FROM sample_data.orders a, sample_data.orders b, sample_data.orders c, "
            "sample_data.orders d, sample_data.orders e")  # 243 distinct
    joins = " UNION ALL ".join(f"SELECT t.q, a{k}.answer FROM ({many} ORDER BY q LIMIT 60 OFFSET {k * 60}) t "
                               f"JOIN stock_agent a{k} ON a{k}.question = t.q" for k in range(2))
    message = doc.error(joins)
    assert "more than 100 questions (60 by its other agent joins)" in message, message
    assert "agent_join_max_rows" in message and "\n" not in message
    assert agent.chat_calls == 60  # the first join's, none of the second's
    rows = doc.rows(joins.replace("LIMIT 60", "LIMIT 50"))
    assert len(rows) == 100 and agent.chat_calls == 160
