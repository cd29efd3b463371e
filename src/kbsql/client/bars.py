"""From progress events to drawn bars: what a front end passes as an operation's `progress`.

The engine and the HTTP client report `ProgressEvent`s (`kbsql.interface.progress`); a
front end decides what to draw. `ProgressBars` opens one bar per task from a factory (the
notebook's HTML bar, tqdm, or the caller's own), moves it, and closes it in its final state.
`on_progress` turns the user-facing `progress=` argument (None: a bar for long work, True:
always, False: never, or a factory) into that callback, with the client's own factory as
the default (none: nothing is drawn).
"""

from __future__ import annotations

from kbsql.interface.progress import RUNNING, OnProgress, Progress, ProgressEvent, ProgressFactory

ProgressOption = bool | ProgressFactory | None
"""`progress=`: None (a bar for long work), True (always), False (never), or a factory."""


class ProgressBars:
    """An `OnProgress` that draws each task as a bar made by `factory`: every task when
    `always`, else only the tasks that report themselves `long`."""

    def __init__(self, factory: ProgressFactory, *, always: bool = False):
        self.factory, self.always = factory, always
        self.bars: dict[str, Progress] = {}

    def __call__(self, event: ProgressEvent) -> None:
        bar = self.bars.get(event.task)
        if bar is None:
            if event.state != RUNNING or not (self.always or event.long):
                return
            bar = self.bars[event.task] = self.factory(event.task, event.total, event.unit)
        if event.state == RUNNING:
            bar.update(event.phase, event.done, event.total)
        else:
            del self.bars[event.task]
            bar.close(event.error)


def on_progress(progress: ProgressOption, default: ProgressFactory | None) -> OnProgress | None:
    """The callback for `progress=` (see the module docstring); None when nothing is drawn."""
    if progress is False:
        return None
    if callable(progress):
        return ProgressBars(progress, always=True)
    if default is None:
        return None
    return ProgressBars(default, always=progress is True)
