"""The front end's progress bars: the notebook's HTML bar, and tqdm outside a notebook.

The engine and the HTTP client only report progress events (`kbsql.interface.progress`);
this module draws them, for the clients the notebook opens and for `kbsql.connect` (the
factory `notebook_or_tqdm`). A server draws nothing: it passes no callback.

The notebook's bar: one HTML display updated in place, saved in its final state.

Why not tqdm's widget bar: a widget output is saved as its model id plus the repr it had
when first shown ("0%"), so a reopened notebook says the insert never moved. This bar is a
plain display (`display_id`) updated with `update_display_data`: every frontend shows it
live, and what the notebook saves is the last update, "done: 1,000 rows in 8.1 s". It names
the phase the engine reports (reading, chunking, embedding, storing), rows/s and the ETA.
"""

from __future__ import annotations

import time
from html import escape
from typing import Any

MIN_INTERVAL = 0.2
"""Seconds between two redraws (the last state is always drawn)."""

BAR = ("display:inline-block;width:260px;height:10px;background:#eaeef2;border-radius:5px;"
       "vertical-align:middle;")


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class NotebookProgress:
    """`Progress` for the engine (see kbsql.interface.progress), drawn as HTML."""

    def __init__(self, description: str, total: int, unit: str = "row", *,
                 min_interval: float = MIN_INTERVAL, clock: Any = time.monotonic):
        from IPython.display import display

        self.description, self.total, self.unit = description, total, unit
        self.phase, self.done, self.state = "starting", 0.0, "running"
        self.min_interval, self.clock = min_interval, clock
        self.started = clock()
        self.finished: float | None = None
        self._last_draw = -1e9
        self.handle = display(self.bundle(), raw=True, display_id=True)

    # -- model -----------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        return (self.finished or self.clock()) - self.started

    @property
    def rate(self) -> float | None:
        """Units per second so far (None before anything finished)."""
        return self.done / self.elapsed if self.done > 0 and self.elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        rate = self.rate
        return (self.total - self.done) / rate if rate and self.state == "running" else None

    def update(self, phase: str, done: float, total: int) -> None:
        self.phase, self.done, self.total = phase, min(float(done), float(total)), total
        now = self.clock()
        if now - self._last_draw >= self.min_interval:
            self._draw(now)

    def close(self, error: BaseException | None = None) -> None:
        self.finished = self.clock()
        if error is None:
            self.state, self.done = "done", float(self.total)
        else:
            self.state = "stopped" if isinstance(error, KeyboardInterrupt) else "failed"
        self._draw(self.finished)

    def _draw(self, now: float) -> None:
        self._last_draw = now
        if self.handle is not None:
            self.handle.update(self.bundle(), raw=True)

    # -- rendering -------------------------------------------------------------------------
    def text(self) -> str:
        """One line: what, phase, count, percent, rate, ETA (or the final state)."""
        units = f"{self.unit}s"
        if not self.total:  # unknown total (one remote statement): phase and time, no fraction
            if self.state == "done":
                return f"{self.description}: done in {_duration(self.elapsed)}"
            if self.state != "running":
                return f"{self.description}: {self.state} during {self.phase} after {_duration(self.elapsed)}"
            return f"{self.description}: {self.phase} …"  # drawn once: an elapsed time would freeze
        count = f"{int(self.done):,}/{self.total:,} {units}"
        rate = self.rate
        speed = (f"{rate:,.0f} {units}/s" if rate >= 10 else f"{rate:.1f} {units}/s") if rate else ""
        if self.state == "done":
            return (f"{self.description}: done, {self.total:,} {units} in {_duration(self.elapsed)}"
                    + (f" ({speed})" if speed else ""))
        if self.state != "running":
            return f"{self.description}: {self.state} during {self.phase} at {count}"
        percent = 100.0 * self.done / self.total
        eta = self.eta
        parts = [f"{self.description}: {self.phase}", f"{count} ({percent:.0f}%)"]
        if speed:
            parts.append(speed)
        parts.append(f"ETA {_duration(eta)}" if eta is not None else "ETA …")
        return " · ".join(parts)

    def html(self) -> str:
        if self.total:
            percent = 100.0 * self.done / self.total
        else:  # unknown total: empty while running, full when done (no invented fraction)
            percent = 100.0 if self.state == "done" else 0.0
        colour = {"running": "#1a73e8", "done": "#188038", "failed": "#d93025"}.get(self.state, "#e37400")
        return (f'<div class="kbsql-progress" data-state="{self.state}" data-phase="{escape(self.phase)}" '
                f'data-done="{int(self.done)}" data-total="{self.total}" '
                'style="font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:12px;'
                'margin:2px 0">'
                f'<span style="{BAR}"><span style="display:block;height:100%;width:{percent:.1f}%;'
                f'background:{colour};border-radius:5px"></span></span> '
                f"<span>{escape(self.text())}</span></div>")

    def bundle(self) -> dict[str, str]:
        return {"text/html": self.html(), "text/plain": self.text()}


def in_kernel() -> bool:
    """True inside a Jupyter kernel (where displays reach a notebook)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class TqdmProgress:
    """A tqdm bar (on stderr) whose postfix names the phase (rows/s and ETA are tqdm's own)."""

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


def notebook_or_tqdm(description: str, total: int, unit: str = "row") -> Any:
    """The front end's bar factory: the HTML bar in a kernel, tqdm elsewhere."""
    if in_kernel():
        return NotebookProgress(description, total, unit)
    return TqdmProgress(description, total, unit)
