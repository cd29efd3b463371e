"""Long statements take turns at the interpreter while they are parsed and compiled.

Why: both parsers (mindsdb_sql_parser's sly and sqlglot) are pure Python and hold the
interpreter lock; a thread waiting for it gets it about once per holder. Four clients of one
token sending `SELECT abs(0) AS c0, ..., abs(5499) AS c5499` (~4 s of Python each, under the
token limit) took another user's `SELECT 1` on the same server from 5 ms to 78 ms median,
479 ms p99; with one such statement at a time, 17 ms (measured on loopback, load ~2).

So a statement of more than `tokens` SQL tokens holds one of `slots` (default 1) from its
parse until its SQL engine work starts (`started`: DuckDB lets go of the lock while it
runs), shared fairly between owners (`fair_slots`: one token's queue of long statements
never keeps another's waiting behind all of it). The wait counts toward the statement's
deadline; one not served in time is a 503 naming the setting. Short statements (nearly
all: a search is a dozen tokens) never wait, nor `INSERT ... VALUES` rows, which skip both
parsers (`values_fastpath`: ~30x cheaper a token) and whose slot would be held while a
knowledge base embeds them. A statement compiled inside one holding a slot
(a view, an agent's SQL tool) runs in its slot: it would otherwise wait for itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar

from kbsql.engine.fair_slots import FairSlots, slot_within
from kbsql.engine.sql.parse.parsing import token_count
from kbsql.interface.control import current as current_control

TOKENS = 1_000
"""Tokens above which a statement is long (~40-80 ms of parsing and compiling)."""
SLOTS = 1
NO_DEADLINE_WAIT_S = 3600.0
"""How long a statement with no deadline (an embedded call without a timeout) may wait."""

_INSERT_VALUES = re.compile(r"\s*insert\s+into\s+[\w.`\"$]+\s*(?:\([^()]*\))?\s*values\b", re.IGNORECASE)
_HOLDING: ContextVar[ExitStack | None] = ContextVar("kbsql_long_statement", default=None)


class LongStatements:
    """The slots of long statements (see the module docstring)."""

    def __init__(self, tokens: int = TOKENS, slots: int = SLOTS, note: str = "long_statement_slots"):
        self.tokens = tokens
        self.slots = FairSlots(slots) if tokens > 0 and slots > 0 else None
        self.note = note

    def is_long(self, query: str) -> bool:
        return (len(query) > self.tokens  # a token is at least one character
                and not _INSERT_VALUES.match(query) and token_count(query) > self.tokens)

    @contextmanager
    def compiling(self, query: str) -> Iterator[None]:
        """Hold a slot while the block parses and compiles `query` if it is long, until
        `started()` or the block's end."""
        if self.slots is None or _HOLDING.get() is not None or not self.is_long(query):
            yield
            return
        control = current_control()
        left = control.remaining() if control is not None else None
        with ExitStack() as stack:
            stack.enter_context(slot_within(
                self.slots, NO_DEADLINE_WAIT_S if left is None else max(0.0, left),
                f"compiling other long statements ({self.note})"))
            token = _HOLDING.set(stack)
            try:
                yield
            finally:
                _HOLDING.reset(token)


def started() -> None:
    """The statement's SQL engine work starts: its slot (if it holds one) is free for the next."""
    stack = _HOLDING.get()
    if stack is not None:
        stack.close()
