"""The notebook's own credentials for the sidebar and the chat, asked of its kernel here.

When a notebook's kernel is connected to a server with a token (`%kbsql_connect URL
--token-env VAR`, `$KBSQL_TOKEN`, `--ask-key`), the sidebar and the chat should see what the
notebook sees, without the token ever reaching the page (its DOM, its console, its
messages). So this Jupyter server asks the kernel itself: it opens its own client on the
kernel's channels (the kernel manager it already runs), sends a silent `execute_request`
(no history, no output, no execution count) whose one `user_expressions` entry calls
`kbsql.notebook.location.lend_credentials(URL)`, and reads the reply. The kernel lends the
credential header only for the URL its current connection points at.

A busy kernel answers after its cell: the last answer for that kernel and URL is used
meanwhile (None when there is none; the caller then falls back to the settings' token or
`$KBSQL_TOKEN`, and a refusal says where a token goes).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

log = logging.getLogger(__name__)
WAIT_SECONDS = 2.5
"""How long a request waits for the kernel (the page waits as long for the location)."""
_EXPRESSION = "__import__('kbsql.notebook.location', fromlist=['_']).lend_credentials({url!r})"
_lent: dict[tuple[str, str], dict[str, str]] = {}
"""(kernel id, URL) -> the headers last lent (kept in this process only)."""


async def credentials(kernel_manager: Any, kernel_id: str, url: str, *, fresh: bool = True,
                      wait: float = WAIT_SECONDS) -> dict[str, str] | None:
    """The headers the kernel `kernel_id` sends to `url`; `fresh=False` takes the last answer
    when there is one. None when the kernel lends none (no key, another URL) or cannot be
    asked (unknown kernel, busy with no earlier answer)."""
    key = (kernel_id, url)
    if not fresh and key in _lent:
        return _lent[key] or None
    answer = await _ask(kernel_manager, kernel_id, url, wait)
    if answer is None:  # no answer in time: the last one, if any
        return _lent.get(key) or None
    _lent[key] = answer
    return answer or None


def forget(kernel_id: str, url: str) -> None:
    """Drop what was lent (the server refused it: ask again next time)."""
    _lent.pop((kernel_id, url), None)


async def _ask(kernel_manager: Any, kernel_id: str, url: str, wait: float) -> dict[str, str] | None:
    if kernel_manager is None or kernel_id not in kernel_manager:
        return None  # not a kernel of this server (a gateway's, or gone)
    manager = kernel_manager.get_kernel(kernel_id)
    client = manager.client()
    try:
        client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        msg_id = client.execute("", silent=True, store_history=False, allow_stdin=False,
                                stop_on_error=False,
                                user_expressions={"kbsql": _EXPRESSION.format(url=url)})
        reply = await asyncio.wait_for(_reply(client, msg_id), wait)
    except (TimeoutError, OSError, RuntimeError) as exc:
        log.debug("kbsql: the kernel %s lent nothing in time (%s)", kernel_id, type(exc).__name__)
        return None
    finally:
        client.stop_channels()
    expression = (reply.get("content") or {}).get("user_expressions", {}).get("kbsql", {})
    if expression.get("status") != "ok":
        return {}  # kbsql is not installed in that kernel, or too old to lend
    try:
        headers = json.loads(expression["data"]["text/plain"])["headers"]
    except (KeyError, TypeError, ValueError):
        return {}
    if not isinstance(headers, dict):
        return {}
    return {str(k): str(v) for k, v in headers.items() if isinstance(k, str) and isinstance(v, str)}


async def _reply(client: Any, msg_id: str) -> dict[str, Any]:
    while True:
        reply = await client.get_shell_msg()
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            return reply
