"""A UI-independent model of one agent completion stream.

Every renderer (the live widget, the static HTML snapshot, the plain-text fallback) reads the
same `StreamState`, so what the user sees live and what a reopened notebook shows cannot drift
apart, and the model can be tested chunk by chunk without a frontend.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kbsql.interface.observation import PREFIX, parse_table
from kbsql.interface.stream import chunk_kind
from kbsql.notebook.progress_bar import duration

RUNNING, DONE, FAILED, STOPPED, WAITING = "running", "done", "failed", "stopped", "waiting"

OBSERVATION_PREFIX = PREFIX
"""kb_query_tool / sql_db_query observations start with this line, then CSV with a header."""


@dataclass
class Step:
    """One tool call: what the agent asked for and, once it ran, what came back."""

    tool: str
    tool_input: str
    log: str = ""
    observation: str | None = None

    @property
    def finished(self) -> bool:
        return self.observation is not None


@dataclass
class StreamState:
    """Everything shown for one question: header, steps, answer, status and timing."""

    question: str = ""
    agent: str = ""
    trace_id: str = ""
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """A server's progress notes (MindsDB's "Creating execution plan...", kind `context`)."""
    answer: str | None = None
    status: str = WAITING
    error: str | None = None
    started_at: float | None = field(default_factory=lambda: time.monotonic())
    """When the question was asked (the state is made then): a model that thinks for
    seconds before its first chunk is part of the answer's time."""
    finished_at: float | None = None
    chunks_seen: int = 0

    @property
    def elapsed(self) -> float:
        """Seconds since the question was asked (frozen once the stream is over)."""
        if self.started_at is None:
            return 0.0
        return (self.finished_at or time.monotonic()) - self.started_at

    @property
    def finished(self) -> bool:
        return self.status in (DONE, FAILED, STOPPED)

    def status_text(self) -> str:
        """The status line: `running`, `done in 1.2 s` (`in 180 ms`), `failed: <error>`, `stopped`."""
        took = duration(self.elapsed)
        if self.status == DONE:
            return f"done in {took}"
        if self.status == FAILED:
            return f"failed after {took}: {self.error or 'unknown error'}"
        if self.status == STOPPED:
            return f"stopped after {took}"
        if self.status == RUNNING:
            return f"running ({took})"
        return "waiting"

    def _begin(self) -> None:
        if self.started_at is None:
            self.started_at = time.monotonic()
        if self.status == WAITING:
            self.status = RUNNING

    def _finish(self, status: str) -> None:
        if not self.finished:
            self.status = status
            self.finished_at = time.monotonic()

    def feed(self, chunk: dict[str, Any]) -> str:
        """Apply one chunk; return its kind. Chunks after the end (or a stop) are ignored."""
        kind = chunk_kind(chunk)
        if self.finished:
            return kind
        self.chunks_seen += 1
        self._begin()
        self.trace_id = self.trace_id or str(chunk.get("trace_id") or "")
        if kind == "start":
            self.question = self.question or str(chunk.get("prompt") or "")
        elif kind == "actions":
            self.answer = None  # text streamed before a tool call was the model thinking aloud
            for act in chunk.get("actions") or []:
                self.steps.append(Step(tool=str(act.get("tool", "")),
                                       tool_input=str(act.get("tool_input", "")),
                                       log=str(act.get("log", ""))))
        elif kind == "steps":
            for item in chunk.get("steps") or []:
                self._observe(item.get("action") or {}, str(item.get("observation", "")))
        elif kind == "context":
            note = str(chunk.get("content") or "").strip()
            if note:
                self.notes.append(note)
        elif kind == "output":  # partial: a streaming model's tokens, the answer their concatenation
            self.answer = (self.answer or "") + str(chunk.get("output") or "")
        elif kind == "error":
            self.error = str(chunk.get("content") or "error")
            self._finish(FAILED)
        elif kind == "end":
            self._finish(DONE)
        return kind

    def _observe(self, act: dict[str, Any], observation: str) -> None:
        """Attach an observation to the oldest pending step of the same tool and input
        (a steps chunk repeats its action); a step never announced gets its own entry."""
        tool, tool_input = str(act.get("tool", "")), str(act.get("tool_input", ""))
        pending = [s for s in self.steps if not s.finished and s.tool == tool]
        match = next((s for s in pending if s.tool_input == tool_input), pending[0] if pending else None)
        if match is None:
            match = Step(tool=tool, tool_input=tool_input, log=str(act.get("log", "")))
            self.steps.append(match)
        match.observation = observation

    def fail(self, message: str) -> None:
        """The stream itself raised (connection lost, HTTP error): show it as failed."""
        self._begin()
        self.error = message
        self._finish(FAILED)

    def stop(self) -> None:
        """The user stopped the answer: freeze the state; later chunks are ignored."""
        self._begin()
        self._finish(STOPPED)

    def close_if_open(self) -> None:
        """The generator ended without an `end` chunk: treat it as done (or failed)."""
        if not self.finished:
            self._finish(DONE)


@dataclass
class ObservationTable:
    """A tabular observation: its column names and rows, parsed from the CSV text."""

    columns: list[str]
    rows: list[list[Any]]
    preamble: str = ""

    @property
    def row_count(self) -> int:
        return len(self.rows)


def parse_observation(text: str | None) -> ObservationTable | None:
    """Parse `Output columns: ...` + CSV observations into a table; None for anything else
    (free text, JSON lists) so the caller shows it verbatim. The format and its one parser
    live in `kbsql.interface.observation`, next to the writer's rules."""
    table = parse_table(text)
    if table is None:
        return None
    return ObservationTable(columns=table.columns, rows=list(table.rows), preamble=table.note)
