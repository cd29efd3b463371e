"""EVALUATE KNOWLEDGE_BASE shows progress as inserts do: embedded, a bar per question
(`generating`, then `evaluating`) that ends at the total; over HTTP one statement answers once,
so the bar names the phase with no fraction and ends in its final state (done or failed)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from kbsql.interface.errors import SqlError
from kbsql.interface.progress import EVALUATING, GENERATING
from kbsql.notebook.progress_bar import NotebookProgress


class Recorder:
    instances: list[Recorder] = []

    def __init__(self, description: str, total: int, unit: str):
        self.description, self.total, self.unit = description, total, unit
        self.updates: list[tuple[str, float, int]] = []
        self.closed: tuple[bool, BaseException | None] | None = None
        Recorder.instances.append(self)

    def update(self, phase: str, done: float, total: int) -> None:
        self.updates.append((phase, done, total))

    def close(self, error: BaseException | None = None) -> None:
        self.closed = (True, error)


@pytest.fixture
def recorded():
    """The bars of clients that draw with Recorder (`progress=Recorder`)."""
    Recorder.instances.clear()
    return Recorder.instances


def _kb_with_questions(client) -> None:
    client.knowledge_bases.create("docs", embedding_model={"provider": "kbsql", "model_name": "hash-64"})
    texts = ["pump oil change", "filter cleaning", "belt tension", "valve seal", "motor bearing"]
    client.knowledge_bases.insert("docs", [{"id": f"d{i}", "content": t} for i, t in enumerate(texts)],
                                  progress=False)
    client.register("qs", pd.DataFrame({"question": texts, "doc_id": [f"d{i}" for i in range(5)]}))


def test_embedded_evaluate_moves_per_question(engine, recorded):
    from kbsql.client import Client

    client = Client(engine, progress=Recorder)
    _kb_with_questions(client)
    row = client.query("EVALUATE KNOWLEDGE_BASE docs USING test_table = df.qs").iloc[0]
    assert row["total"] == 5
    bar = recorded[-1]
    assert bar.description == "evaluate mindsdb.docs" and bar.total == 5 and bar.unit == "question"
    assert bar.updates == [(EVALUATING, d, 5) for d in range(6)]  # 0, then one step per question
    assert bar.closed == (True, None)


def test_embedded_generate_then_evaluate_has_two_phases(engine, recorded):
    from kbsql.client import Client

    client = Client(engine, progress=Recorder)
    _kb_with_questions(client)
    client.sql("EVALUATE KNOWLEDGE_BASE docs USING test_table = df.gen, "
               "generate_data = {'count': 3}, llm = {'provider': 'kbsql'}")
    generating, evaluating = recorded[-2:]
    assert generating.description == "generate questions for mindsdb.docs" and generating.total == 3
    assert [(p, d) for p, d, _ in generating.updates] == [(GENERATING, d) for d in range(4)]
    assert evaluating.total == 3 and evaluating.updates[-1] == (EVALUATING, 3, 3)
    assert generating.closed == evaluating.closed == (True, None)


def test_a_failing_evaluation_closes_its_bar_with_the_error(engine, recorded):
    from kbsql.client import Client

    client = Client(engine, progress=Recorder)
    _kb_with_questions(client)
    client.register("bad", pd.DataFrame({"question": ["x"], "expected": ["d1"]}))  # no doc_id
    with pytest.raises(SqlError, match="doc_id"):
        client.sql("EVALUATE KNOWLEDGE_BASE docs USING test_table = df.bad")
    closed, error = recorded[-1].closed
    assert closed and error is not None


def test_remote_evaluate_shows_its_phase_and_final_state_only(server_url, recorded):
    import kbsql

    client = kbsql.connect(server_url, progress=Recorder)
    try:
        _kb_with_questions(client)
        recorded.clear()
        assert client.query("-- how good is it?\nevaluate knowledge_base docs "
                            "USING test_table = df.qs").iloc[0]["total"] == 5
        bar = recorded[-1]
        assert bar.description == "evaluate docs on the server" and bar.total == 0  # unknown
        assert bar.updates == [(EVALUATING, 0, 0)] and bar.closed == (True, None)
        with pytest.raises(SqlError):
            client.sql("EVALUATE KNOWLEDGE_BASE docs USING test_table = df.nowhere")
        closed, error = recorded[-1].closed
        assert closed and isinstance(error, SqlError)
        client.sql("SELECT 1")  # other statements show no bar
        assert len(recorded) == 2
    finally:
        client.close()


def test_notebook_bar_of_unknown_total_invents_no_fraction(monkeypatch):
    shown: list[dict[str, Any]] = []

    class Handle:
        def update(self, bundle: dict[str, str], raw: bool = False) -> None:
            shown.append(bundle)

    class Clock:
        now = 10.0

        def __call__(self) -> float:
            return self.now

    monkeypatch.setattr("IPython.display.display", lambda *a, **k: Handle())
    clock = Clock()
    bar = NotebookProgress("evaluate docs on the server", 0, "question", clock=clock)
    bar.update(EVALUATING, 0, 0)
    assert shown[-1]["text/plain"] == "evaluate docs on the server: evaluating …"
    assert "width:0.0%" in shown[-1]["text/html"] and "%)" not in shown[-1]["text/plain"]
    clock.now += 4.2
    bar.close()
    assert shown[-1]["text/plain"] == "evaluate docs on the server: done in 4.2 s"
    assert 'data-state="done"' in shown[-1]["text/html"] and "width:100.0%" in shown[-1]["text/html"]
