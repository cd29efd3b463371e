"""The Jupyter server side of the sidebar and the chat, under `<base_url>/kbsql/`:

- `POST catalog`  -> the connection's projects, knowledge bases, agents, data sources;
- `POST search`   -> one knowledge-base search (`project`, `knowledge_base`, `text`);
- `POST agents/stream` -> an agent's answer as newline-delimited JSON chunks (the contract's
  stream chunks, one per line), cancelled when the page disconnects (the Stop button).

Every body may carry `url`, `token`, `notebook`, `kernel` and `kernel_id` (see
`connection.resolve`). POST with a JSON body, never a query string: the token must not
reach an access log. Authenticated like every Jupyter API (token or cookie, plus XSRF).
Errors carry the kbsql problem fields `{"title", "detail"}` so the page shows the service's
own sentence, and a refused token one line on where a token goes; none holds a token.

When the notebook's kernel is connected to a server with credentials, they are asked of
the kernel here (`lend.py`) and used for that server: the sidebar and the chat then see
what the notebook sees, and the credentials never reach the page.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado.iostream import StreamClosedError

from kbsql.interface.stream import close_stream
from kbsql_labextension import catalog, lend
from kbsql_labextension.connection import BadTarget, Clients, Target, resolve

CLIENTS = Clients()


class KbsqlHandler(APIHandler):
    """Shared parts: the JSON body, the target, problem answers."""

    def body(self) -> dict[str, Any]:
        try:
            body = json.loads(self.request.body or b"{}")
        except json.JSONDecodeError as exc:
            raise BadTarget(f"The request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise BadTarget("The request body must be a JSON object")
        return body

    @property
    def root(self) -> Path:
        return Path(self.settings.get("server_root_dir") or ".").expanduser().resolve()

    async def target(self, body: dict[str, Any], *, fresh: bool = False) -> Target:
        """The service of this request; a server the notebook's kernel is connected to with
        credentials gets those (asked of the kernel: `fresh` for a catalog load, else the
        last answer when there is one)."""
        target = resolve(body, self.root)
        kernel, kernel_id = body.get("kernel"), str(body.get("kernel_id") or "")
        if (target.source == "kernel" and target.kind == "remote" and kernel_id
                and isinstance(kernel, dict) and kernel.get("key")):
            headers = await lend.credentials(self.kernel_manager, kernel_id, target.location, fresh=fresh)
            if headers:
                return target.with_lent(headers)
        return target

    def problem(self, status: int, title: str, detail: str, target: Target | None = None) -> None:
        for secret in target.secrets if target is not None else []:
            detail = detail.replace(secret, "***")
        self.set_status(status)
        self.finish(json.dumps({"title": title, "detail": detail}))

    def refused(self, exc: Exception, target: Target | None, body: dict[str, Any]) -> str:
        """One line on where a token goes, after a server refused the one sent (or none)."""
        from kbsql.interface.errors import ServiceError

        if target is None or not isinstance(exc, ServiceError) or exc.status not in (401, 403):
            return ""
        if target.lent:
            lend.forget(str(body.get("kernel_id") or ""), target.location)
            return " (the notebook's credentials were refused: check them in the notebook)"
        if target.source == "settings":
            return " (the token in Settings → kbsql, else $KBSQL_TOKEN of the Jupyter server, was refused)"
        kernel = body.get("kernel") if isinstance(body.get("kernel"), dict) else {}
        if kernel.get("key"):
            return (" (the notebook's kernel has a token but is busy and did not lend it yet: "
                    "Refresh when it is idle, or set one in Settings → kbsql)")
        return (" (a token goes in the notebook: %kbsql_connect URL --token-env VAR, "
                "or in Settings → kbsql for the sidebar and chat)")

    async def call(self, fn: Any, *args: Any) -> Any:
        """Run a blocking client call in a worker thread (the server's loop stays free)."""
        return await asyncio.to_thread(fn, *args)


def _service_error(exc: Exception) -> tuple[int, str]:
    """The status for an error raised by the client: the service's own refusal (an unknown
    name, bad SQL) is a 400 with its sentence; a service that cannot be reached, a 502."""
    from kbsql.interface.errors import KbsqlError, TransportError

    if isinstance(exc, KbsqlError) and not isinstance(exc, TransportError):
        return 400, "kbsql error"
    return 502, "Bad gateway"


class CatalogHandler(KbsqlHandler):
    @tornado.web.authenticated
    async def post(self) -> None:
        target = None
        body: dict[str, Any] = {}
        try:
            body = self.body()
            target = await self.target(body, fresh=True)
            answer: dict[str, Any] = {"connection": target.describe(self.root), "exists": target.exists}
            if target.exists:
                client = await self.call(CLIENTS.get, target)
                answer.update(await self.call(catalog.fetch_catalog, client))
            else:  # nothing to open yet: do not create a data directory just by looking
                answer.update(projects=[], datasources=[])
        except BadTarget as exc:
            return self.problem(400, "Bad request", str(exc))
        except ImportError:
            return self.problem(501, "Not available", "kbsql is not installed in the Jupyter server's "
                                "environment")
        except Exception as exc:
            status, title = _service_error(exc)
            where = target.describe(self.root)["where"] if target else ""
            return self.problem(status, title, f"{where}: {exc}{self.refused(exc, target, body)}", target)
        self.finish(json.dumps(answer, default=str))


class SearchHandler(KbsqlHandler):
    @tornado.web.authenticated
    async def post(self) -> None:
        target = None
        body: dict[str, Any] = {}
        try:
            body = self.body()
            target = await self.target(body)
            project, kb = str(body.get("project") or ""), str(body.get("knowledge_base") or "")
            if not project or not kb:
                raise BadTarget("Name the project and the knowledge base to search")
            client = await self.call(CLIENTS.get, target)
            answer = await self.call(catalog.search, client, project, kb, str(body.get("text") or ""),
                                     int(body.get("limit") or catalog.SEARCH_LIMIT))
        except (BadTarget, ValueError) as exc:
            return self.problem(400, "Bad request", str(exc), target)
        except Exception as exc:
            status, title = _service_error(exc)
            return self.problem(status, title, f"{exc}{self.refused(exc, target, body)}", target)
        self.finish(json.dumps(answer, default=str))


class StreamHandler(KbsqlHandler):
    """One agent answer, chunk by chunk. A closed connection (Stop) closes the stream, which
    cancels the embedded engine's run or drops the HTTP stream to the server."""

    _closed = False
    _chunks: Any = None

    def on_connection_close(self) -> None:
        self._closed = True
        close_stream(self._chunks)

    @tornado.web.authenticated
    async def post(self) -> None:
        target = None
        body: dict[str, Any] = {}
        try:
            body = self.body()
            target = await self.target(body)
            project, agent = str(body.get("project") or ""), str(body.get("agent") or "")
            question = str(body.get("question") or "")
            if not project or not agent or not question.strip():
                raise BadTarget("Name the project and the agent, and ask a question")
            history = [{"question": str(h.get("question") or ""), "answer": str(h.get("answer") or "")}
                       for h in body.get("history") or [] if isinstance(h, dict)]
            client = await self.call(CLIENTS.get, target)
            chunks = await self.call(lambda: client.agents.stream(agent, question, history=history,
                                                                  project=project))
        except BadTarget as exc:
            return self.problem(400, "Bad request", str(exc), target)
        except Exception as exc:
            status, title = _service_error(exc)
            return self.problem(status, title, f"{exc}{self.refused(exc, target, body)}", target)
        self._chunks = chunks
        stream = iter(chunks)
        self.set_header("Content-Type", "application/x-ndjson")
        self.set_header("Cache-Control", "no-cache")
        try:
            while not self._closed:
                chunk = await self.call(_next, stream)
                if chunk is None:
                    break
                self.write(json.dumps(_mask(chunk, target), default=str) + "\n")
                await self.flush()
        except StreamClosedError:
            pass
        except Exception as exc:  # the stream failed midway: one error chunk, as the service does
            if not self._closed:
                self.write(json.dumps({"type": "error", "content": _mask(str(exc), target)}) + "\n")
        finally:
            close_stream(self._chunks)
        if not self._closed:
            try:
                self.finish()
            except StreamClosedError:  # the page went away after the last chunk
                pass


_DONE = object()


def _next(chunks: Any) -> Any:
    chunk = next(chunks, _DONE)
    return None if chunk is _DONE else chunk


def _mask(value: Any, target: Target) -> Any:
    secrets = target.secrets
    if not secrets:
        return value
    text = json.dumps(value, default=str)
    masked = text
    for secret in secrets:
        masked = masked.replace(secret, "***")
    return value if masked == text else json.loads(masked)


def setup_handlers(web_app: Any) -> None:
    base = url_path_join(web_app.settings["base_url"], "kbsql")
    web_app.add_handlers(".*$", [(url_path_join(base, "catalog"), CatalogHandler),
                                 (url_path_join(base, "search"), SearchHandler),
                                 (url_path_join(base, "agents", "stream"), StreamHandler)])
