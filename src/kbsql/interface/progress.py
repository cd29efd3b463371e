"""Progress of long work (inserts, evaluations) as events: phases and counts, drawn elsewhere.

Here in the interface because both sides report it: the engine for an insert or an
EVALUATE it runs, the HTTP client for the batches it sends. The caller of a long operation
passes a callback (`OnProgress`); the work calls it with `ProgressEvent`s: what task,
which phase, how far (`done` may be a fraction of a row while a batch is half embedded),
and finally `done` or `failed`. Nothing here draws and nothing here is global: the front
end that asked turns events into a bar (the notebook's HTML bar or tqdm,
`kbsql.notebook.progress_bar`, through `kbsql.client.bars.ProgressBars`); a server
passes no callback and draws nothing.

Phases, in order: reading, chunking, embedding, storing; a remote insert reports `sending`
(the server does the rest per batch). EVALUATE reports `generating` (test questions
written) and `evaluating` per question; over HTTP one SQL statement answers once, so the
client reports it with an unknown total (`total == 0`): the phase and the time it took,
never a made-up fraction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

READING, CHUNKING, EMBEDDING, STORING = "reading", "chunking", "embedding", "storing"
SENDING = "sending"
GENERATING, EVALUATING = "generating", "evaluating"
RUNNING, DONE, FAILED = "running", "done", "failed"
PROGRESS_MIN_ROWS = 1000
"""Inserts of at least this many rows are `long`: a front end left to its default draws them."""


@dataclass(frozen=True)
class ProgressEvent:
    """One step of one task. `total == 0`: unknown (draw the phase and the time, no
    fraction). `long`: the work says a bar is worth showing by default (an insert of
    PROGRESS_MIN_ROWS rows, any EVALUATE); a caller may draw every task, or none."""

    task: str
    phase: str
    done: float
    total: int
    unit: str = "row"
    state: str = RUNNING
    error: BaseException | None = None
    long: bool = True
    committed: int = 0
    """Input rows settled for good: their batch's transaction committed (stored, or left
    out as empty or as failing under `error = 'skip'`). An insert that commits batch by
    batch raises it after each batch; a one-transaction insert only when it ends. A
    listener that records how far an insert got (a background insert's query log) reads
    this, not `done`, which also counts rows embedded but not yet stored."""


OnProgress = Callable[[ProgressEvent], None]
"""Where an operation reports its progress (called from the thread that called it)."""


class Progress(Protocol):
    """A drawn bar, as a front end makes one (`ProgressFactory`)."""

    def update(self, phase: str, done: float, total: int) -> None:
        """`done` of `total` units finished; `phase` names what runs now."""

    def close(self, error: BaseException | None = None) -> None:
        """The work ended (with `error` when it failed): draw the final state."""


ProgressFactory = Callable[[str, int, str], Progress]
"""(description, total, unit) -> a Progress."""


class Reporter:
    """Reports one task to `on_progress` (None: nobody listens, nothing is built).

    `with Reporter(...) as report:` ends the task when the block ends: failed with the
    exception that ended it, or with `report.error` for a failure answered without raising
    (an SQL error result), else done."""

    def __init__(self, on_progress: OnProgress | None, task: str, total: int, *, unit: str = "row",
                 min_total: int = 1):
        self.on_progress, self.task, self.total, self.unit = on_progress, task, total, unit
        self.long = total >= min_total if total else min_total <= 0
        self.error: BaseException | None = None
        self.phase, self.done, self.committed = READING, 0.0, 0

    @property
    def listening(self) -> bool:
        return self.on_progress is not None

    def update(self, phase: str, done: float, committed: int | None = None) -> None:
        """Report `phase` and `done` (and `committed`, when it moved). What the callback
        raises propagates: a listener may stop the work there (a cancelled insert)."""
        if self.on_progress is not None:
            self.phase, self.done = phase, done
            self.committed = self.committed if committed is None else committed
            self.on_progress(ProgressEvent(self.task, phase, done, self.total, self.unit, long=self.long,
                                           committed=self.committed))

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if self.on_progress is None:
            return
        error = exc if exc is not None else self.error
        self.on_progress(ProgressEvent(self.task, self.phase, self.done, self.total, self.unit,
                                       FAILED if error is not None else DONE, error, self.long,
                                       self.committed))
