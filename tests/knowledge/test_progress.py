"""Insert progress tells the truth: it names its phase, moves by embedding batch (not every
256 rows), ends at the total, and the notebook's bar shows rows/s, ETA and its final state."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kbsql.client.bars import on_progress
from kbsql.interface.progress import CHUNKING, EMBEDDING, READING, STORING, Reporter
from kbsql.notebook.progress_bar import NotebookProgress


class Recorder:
    instances: list[Recorder] = []

    def __init__(self, description: str, total: int, unit: str):
        self.description, self.total, self.unit = description, total, unit
        self.updates: list[tuple[str, float]] = []
        self.closed: tuple[bool, BaseException | None] | None = None
        Recorder.instances.append(self)

    def update(self, phase: str, done: float, total: int) -> None:
        assert total == self.total
        self.updates.append((phase, done))

    def close(self, error: BaseException | None = None) -> None:
        self.closed = (True, error)


def _kb(client, name: str = "docs") -> None:
    client.knowledge_bases.create(name, embedding_model={"provider": "kbsql", "model_name": "hash-64"})


def test_insert_reports_every_phase_moving_steadily(engine):
    from kbsql.client import Client

    client = Client(engine)
    _kb(client)
    Recorder.instances.clear()
    rows = [{"id": i, "content": f"row {i} " * 30} for i in range(600)]
    assert client.knowledge_bases.insert("docs", rows, progress=Recorder) == 600
    bar = Recorder.instances[-1]
    assert bar.description == "insert into docs" and bar.total == 600 and bar.unit == "row"
    phases = [p for p, _ in bar.updates]
    assert phases[0] == READING and {CHUNKING, EMBEDDING, STORING} <= set(phases)
    done = [d for _, d in bar.updates]
    assert done == sorted(done) and done[-1] == 600  # never goes back, ends at the total
    embedding = [d for p, d in bar.updates if p == EMBEDDING]
    assert len(embedding) >= 600 // 64  # one step per embedding batch of 64 chunks
    assert max(b - a for a, b in itertools.pairwise(done)) <= 64.0 + 1e-9  # no 256-row jumps
    assert bar.closed == (True, None)


class Interrupting(Recorder):
    """Stands for anything failing mid-insert (a model dying, Ctrl-C while embedding)."""

    def update(self, phase: str, done: float, total: int) -> None:
        super().update(phase, done, total)
        if phase == STORING:
            raise KeyboardInterrupt


def test_an_interrupted_insert_closes_its_bar_and_stores_nothing(engine):
    from kbsql.client import Client

    client = Client(engine)
    _kb(client)
    Recorder.instances.clear()
    with pytest.raises(KeyboardInterrupt):
        client.knowledge_bases.insert("docs", [{"id": i, "content": "x y"} for i in range(10)],
                                      progress=Interrupting)
    closed, error = Recorder.instances[-1].closed
    assert closed and isinstance(error, KeyboardInterrupt)
    assert len(client.sql("SELECT * FROM docs LIMIT 100")) == 0  # one transaction: nothing half-stored


def _bar_for(rows: int, progress) -> Recorder | None:
    """The bar drawn (with Recorder as the client's own factory) for an insert of `rows`."""
    Recorder.instances.clear()
    with Reporter(on_progress(progress, Recorder), "x", rows, min_total=1000) as report:
        report.update(READING, 0)
    return Recorder.instances[-1] if Recorder.instances else None


def test_small_inserts_show_no_bar_unless_asked():
    assert _bar_for(999, None) is None  # below PROGRESS_MIN_ROWS by default
    assert _bar_for(5000, False) is None
    assert isinstance(_bar_for(5000, None), Recorder)
    assert isinstance(_bar_for(3, True), Recorder)
    assert isinstance(_bar_for(3, Recorder), Recorder)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_notebook_bar_shows_phase_rate_eta_and_saves_its_final_state(monkeypatch):
    shown: list[dict[str, Any]] = []

    class Handle:
        def update(self, bundle: dict[str, str], raw: bool = False) -> None:
            shown.append(bundle)

    monkeypatch.setattr("IPython.display.display", lambda *a, **k: Handle())
    clock = Clock()
    bar = NotebookProgress("insert into docs", 1000, clock=clock, min_interval=0.2)
    clock.now += 2.0
    bar.update(EMBEDDING, 250, 1000)
    line = shown[-1]["text/plain"]
    assert line == "insert into docs: embedding · 250/1,000 rows (25%) · 125 rows/s · ETA 6.0 s"
    assert 'data-phase="embedding"' in shown[-1]["text/html"] and "width:25.0%" in shown[-1]["text/html"]
    clock.now += 0.05
    bar.update(STORING, 260, 1000)  # within min_interval: not redrawn
    assert shown[-1]["text/plain"] == line
    clock.now += 5.95
    bar.close()
    final = shown[-1]
    assert final["text/plain"] == "insert into docs: done, 1,000 rows in 8.0 s (125 rows/s)"
    assert 'data-state="done"' in final["text/html"] and "width:100.0%" in final["text/html"]


def test_notebook_bar_says_where_it_failed(monkeypatch):
    shown: list[dict[str, Any]] = []

    class Handle:
        def update(self, bundle: dict[str, str], raw: bool = False) -> None:
            shown.append(bundle)

    monkeypatch.setattr("IPython.display.display", lambda *a, **k: Handle())
    bar = NotebookProgress("insert into docs", 1000, clock=Clock())
    bar.update(EMBEDDING, 300, 1000)
    bar.close(RuntimeError("model down"))
    assert shown[-1]["text/plain"] == "insert into docs: failed during embedding at 300/1,000 rows"


def test_a_remote_insert_moves_per_batch_it_sends(server_url):
    import kbsql

    client = kbsql.connect(server_url)
    try:
        _kb(client)
        Recorder.instances.clear()
        rows = [{"id": i, "content": f"row {i}"} for i in range(250)]
        assert client.knowledge_bases.insert("docs", rows, batch_size=100, progress=Recorder) == 250
        bar = Recorder.instances[-1]
        assert [d for p, d in bar.updates if p == "sending"] == [0, 100, 100, 200, 200, 250]
        assert bar.closed == (True, None)
    finally:
        client.close()
