"""Repeated log lines are collapsed to one per interval with a count (server/log_collapse.py);
the flood a real server produced is in tests/test_server_isolation.py."""

from __future__ import annotations

import logging

from kbsql.server.log_collapse import CollapseRepeats


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise OSError(24, "Too many open files")
        except OSError as error:
            exc_info = (type(error), error, error.__traceback__)
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, args or None, exc_info)


def test_the_same_line_is_written_once_per_interval_with_its_count() -> None:
    clock = Clock()
    collapse = CollapseRepeats(interval=10, clock=clock)
    passed = []
    for i in range(1000):
        clock.now = i * 0.01  # 1000 lines in 10 s
        line = record("socket.accept() out of system resource", exc=True)
        if collapse.filter(line):
            passed.append(line)
    assert len(passed) == 1 and passed[0].exc_info is not None  # the first, with its traceback
    clock.now = 10.5
    again = record("socket.accept() out of system resource", exc=True)
    assert collapse.filter(again)
    assert again.getMessage().endswith("[the same line 999 more times in the 10 s before]")
    assert again.exc_info is None  # shown once already


def test_other_lines_pass_and_pending_counts_are_reported_at_the_end() -> None:
    clock = Clock()
    collapse = CollapseRepeats(interval=10, clock=clock)
    assert collapse.filter(record("client %s left", "a"))
    assert collapse.filter(record("client %s left", "b"))  # another message: its own line
    assert not collapse.filter(record("client %s left", "a"))
    assert collapse.flush() == ["client a left [the same line 1 more times since]"]
