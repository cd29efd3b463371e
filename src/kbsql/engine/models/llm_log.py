"""MindsDB's `log.llm_log`: one row per language-model call this engine made.

MindsDB records every LLM call (its agents', its knowledge bases') and shows them as
`SELECT * FROM log.llm_log` with the columns below (`mindsdb/interfaces/database/log.py`,
`LLMLogTable`). kbsql records the calls its agents' chat models and its chat rerankers make
(`chat/logged.py`, `rerank.py`) in memory, in this engine only: the newest `llm_log_rows`
(a setting; 0 keeps none), so a long-running server never grows with them. Each call's input
and output are cut at `MAX_TEXT` characters.

API keys are never shown: `API_KEY` (MindsDB's caller key) is always NULL, and the provider's
key is scrubbed from the text of a call before it is kept, in case a provider echoed it.
Everyone who may query this engine may read its log, as with `information_schema.queries`:
an operator whose users must not see each other's questions sets `llm_log_rows` to 0.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from kbsql.interface.secrets import scrub_secret

COLUMNS = ("API_KEY", "MODEL_NAME", "INPUT", "OUTPUT", "START_TIME", "END_TIME", "PROMPT_TOKENS",
           "COMPLETION_TOKENS", "TOTAL_TOKENS", "SUCCESS")
MAX_TEXT = 16_384
"""Characters kept of one call's input and of its output (a long conversation of tool
results is cut, with a mark saying how long it was)."""
DEFAULT_ROWS = 500


def _text(value: Any, secret: str | None) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    text = scrub_secret(text, secret)
    if len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + f"... [cut: {len(text)} characters]"
    return text


@dataclass(frozen=True)
class LlmCall:
    """One row of `log.llm_log` (API_KEY is always NULL, so it is not kept)."""

    model_name: str
    input: str | None
    output: str | None
    start_time: dt.datetime
    end_time: dt.datetime
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    success: bool

    def row(self) -> list[Any]:
        return [None, self.model_name, self.input, self.output, self.start_time, self.end_time,
                self.prompt_tokens, self.completion_tokens, self.total_tokens, self.success]


class Recording:
    """One call being recorded: `done(output, usage)` on success; left undone it is a
    failed call (an error, a cancelled stream)."""

    def __init__(self, log: LlmLog, model_name: str, request: Any, secret: str | None):
        self.log, self.model_name, self.secret = log, model_name, secret
        self.request = request
        self.start = dt.datetime.now(dt.UTC).replace(tzinfo=None)

    def finish(self, output: Any, usage: dict[str, Any] | None, success: bool) -> None:
        usage = usage or {}

        def count(key: str) -> int | None:
            value = usage.get(key)
            return int(value) if isinstance(value, (int, float)) else None

        self.log.add(LlmCall(self.model_name, _text(self.request, self.secret), _text(output, self.secret),
                             self.start, dt.datetime.now(dt.UTC).replace(tzinfo=None),
                             count("prompt_tokens"), count("completion_tokens"), count("total_tokens"),
                             success))


class LlmLog:
    """The newest calls of one engine, oldest first; safe to add to from any thread."""

    def __init__(self, rows: int = DEFAULT_ROWS):
        self._lock = threading.Lock()
        self._calls: deque[LlmCall] = deque(maxlen=max(0, rows))

    def keep(self, rows: int) -> None:
        """Keep at most `rows` calls from now on (the engine's `llm_log_rows`)."""
        with self._lock:
            self._calls = deque(self._calls, maxlen=max(0, rows))

    def start(self, model_name: str, request: Any, secret: str | None = None) -> Recording:
        return Recording(self, model_name, request, secret)

    def add(self, call: LlmCall) -> None:
        with self._lock:
            if self._calls.maxlen:
                self._calls.append(call)

    def rows(self) -> list[list[Any]]:
        with self._lock:
            return [c.row() for c in self._calls]
