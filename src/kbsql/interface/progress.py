"""Progress of long work (inserts, evaluations): phases and counts, drawn elsewhere.

Here in the interface because both sides report it: the engine for an insert it runs, the
HTTP client for the batches it sends. The reporter says *what* it is doing
(`update(phase, done, total)`, `done` may be a fraction of a row while a batch is half
embedded) and knows nothing of how it is drawn: a
terminal gets a tqdm bar; a Jupyter kernel gets the notebook's HTML bar, registered by
`kbsql.notebook` through `set_progress_factory` (it saves its final state in the notebook,
which a widget bar does not). Phases, in order: reading, chunking, embedding, storing;
a remote insert reports `sending` (the server does the rest per batch). EVALUATE reports
`generating` (test questions written) and `evaluating` per question; over HTTP one SQL
statement answers once, so the client shows it with an unknown total (`total == 0`):
the phase and the time it took, never a made-up fraction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

READING, CHUNKING, EMBEDDING, STORING = "reading", "chunking", "embedding", "storing"
SENDING = "sending"
GENERATING, EVALUATING = "generating", "evaluating"
PROGRESS_MIN_ROWS = 1000
"""With `progress=None` (the default), inserts of at least this many rows show a bar."""


class Progress(Protocol):
    def update(self, phase: str, done: float, total: int) -> None:
        """`done` of `total` units finished; `phase` names what runs now."""

    def close(self, error: BaseException | None = None) -> None:
        """The work ended (with `error` when it failed): draw the final state."""


ProgressFactory = Callable[[str, int, str], Progress]
"""(description, total, unit) -> a Progress."""

_factory: ProgressFactory | None = None


class Finishing:
    """`with Finishing(bar) as run:` closes `bar` (if any) when the block ends, in its final
    state: failed with the exception that ended the block, or with `run.error` for a failure
    answered without raising (an SQL error result), else done."""

    def __init__(self, bar: Progress | None):
        self.bar = bar
        self.error: BaseException | None = None

    def __enter__(self) -> Finishing:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if self.bar is not None:
            self.bar.close(exc if exc is not None else self.error)


def set_progress_factory(factory: ProgressFactory | None) -> ProgressFactory | None:
    """Install how progress is drawn in this process; returns the previous factory."""
    global _factory
    previous, _factory = _factory, factory
    return previous


def open_progress(description: str, total: int, *, unit: str = "row",
                  progress: bool | ProgressFactory | None = None,
                  min_total: int = PROGRESS_MIN_ROWS) -> Progress | None:
    """A Progress for `total` units, or None when none is wanted.

    `progress`: False never; True always; None when `total >= min_total`; a callable
    is used as the factory for this call only."""
    if progress is False or total <= 0:
        return None
    return _open(description, total, unit, progress, min_total)


def open_indeterminate(description: str, *, unit: str = "row",
                       progress: bool | ProgressFactory | None = None) -> Progress | None:
    """A Progress whose total is unknown (drawn with `total == 0`: phase and elapsed time,
    no fraction), for work that reports only its end, such as one remote SQL statement."""
    if progress is False:
        return None
    return _open(description, 0, unit, progress, 0)


def _open(description: str, total: int, unit: str, progress: bool | ProgressFactory | None,
          min_total: int) -> Progress | None:
    if callable(progress):
        return progress(description, total, unit)
    if progress is None and total < min_total:
        return None
    return (_factory or TqdmProgress)(description, total, unit)


class TqdmProgress:
    """A tqdm bar whose postfix names the phase (rows/s and ETA are tqdm's own)."""

    def __init__(self, description: str, total: int, unit: str = "row"):
        from tqdm import tqdm

        self.bar: Any = tqdm(total=total or None, desc=description, unit=unit)  # 0: unknown
        self.phase = ""

    def update(self, phase: str, done: float, total: int) -> None:
        if phase != self.phase:
            self.phase = phase
            self.bar.set_postfix_str(phase, refresh=False)
        if total:
            self.bar.update(max(0, int(done) - self.bar.n))
        else:
            self.bar.refresh()

    def close(self, error: BaseException | None = None) -> None:
        self.bar.set_postfix_str("failed" if error else "done", refresh=False)
        self.bar.close()
