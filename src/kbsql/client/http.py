"""The service interface over HTTP (httpx), for kbsql's server or any reference-compatible one.

It accepts any 2xx, follows redirects (the reference answers 308 for a missing or extra
slash), reads the documented bodies, and turns problem+json errors back into the same
`ServiceError` classes the embedded engine raises.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from kbsql.client.wire import StdlibTransport
from kbsql.interface.api import INSERT_BATCH_ROWS, FileTables, InsertCounts, KnowledgeBaseEditing
from kbsql.interface.batches import row_batches
from kbsql.interface.errors import PROBLEM_TYPE_HEADER, ServiceError, TransportError
from kbsql.interface.jsonable import dumps
from kbsql.interface.models import Agent, KnowledgeBase, mask_url
from kbsql.interface.progress import EVALUATING, PROGRESS_MIN_ROWS, SENDING, OnProgress, Reporter
from kbsql.interface.results import ErrorResult, SqlResult, result_from_json
from kbsql.interface.stream import chunk_kind, completion_answer, normalize_chunk, parse_sse_line

_EVALUATE = re.compile(r"\s*(?:--[^\n]*\n\s*)*EVALUATE\s+KNOWLEDGE_BASE\s+([^\s;]+)", re.IGNORECASE)
"""An EVALUATE KNOWLEDGE_BASE statement (its knowledge base), reported with an unknown total."""

log = logging.getLogger("kbsql.client")
if TYPE_CHECKING:
    pass

DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=600.0)
# httpcore writes a request's head and body in two send() calls. With Nagle's algorithm on,
# the body waits for the ACK of the head, which the server delays (~40 ms) because it is
# waiting for that body: every keep-alive POST would cost ~44 ms instead of ~1 ms.
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


def default_transport(base_url: str) -> httpx.BaseTransport:
    """The transport `HttpApi` uses unless given one: keep-alive pool, TCP_NODELAY; plain
    HTTP on `http.client` (`wire.py`: ~0.1 ms less a request), HTTPS on httpx's own."""
    if base_url.lower().startswith("http://"):
        return StdlibTransport(socket_options=NODELAY)
    return httpx.HTTPTransport(socket_options=NODELAY)


def _seg(name: str) -> str:
    return quote(str(name), safe="")


class HttpApi(FileTables, KnowledgeBaseEditing):
    """`ServiceApi` over HTTP. One connection pool per instance; close it when done.

    It declares the optional capabilities the HTTP API carries: files as tables
    (`/api/files`) and knowledge-base editing (the reference's PUT with alter fields or a
    `query`); not `KnowledgeBaseVectors` (the API never sends embeddings)."""

    embedded = False

    def __init__(self, base_url: str, *, headers: dict[str, str] | None = None,
                 timeout: httpx.Timeout | float | None = None,
                 transport: httpx.BaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, headers=headers or {},
                                  timeout=timeout or DEFAULT_TIMEOUT, follow_redirects=True,
                                  transport=transport or default_transport(self.base_url))

    @property
    def location(self) -> str:
        return self.base_url

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"HttpApi({mask_url(self.base_url)!r})"

    # plumbing -------------------------------------------------------------------------------
    def _send(self, method: str, path: str, body: Any = None) -> httpx.Response:
        content = None if body is None else dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} if body is not None else None
        try:
            response = self._http.request(method, path, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise TransportError(mask_url(f"Cannot reach {self.base_url}{path}: {exc}")) from exc
        self._raise_for_problem(response)
        return response

    @staticmethod
    def _raise_for_problem(response: httpx.Response) -> None:
        if response.is_success:
            return
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text[:500] or response.reason_phrase}
        raise ServiceError.from_problem(response.status_code, body,
                                        response.headers.get(PROBLEM_TYPE_HEADER))

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise TransportError(mask_url(f"Expected JSON from {response.request.url}, got "
                                          f"{response.text[:200]!r}")) from exc

    def _get(self, path: str) -> Any:
        return self._json(self._send("GET", path))

    # status and projects ----------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return self._get("/api/status")

    def list_projects(self) -> list[dict[str, Any]]:
        return self._get("/api/projects")

    def get_project(self, name: str) -> dict[str, Any]:
        return self._get(f"/api/projects/{_seg(name)}")

    # knowledge bases --------------------------------------------------------------------
    @staticmethod
    def _kbs(project: str) -> str:
        return f"/api/projects/{_seg(project)}/knowledge_bases"

    def create_knowledge_base(self, project: str, body: dict[str, Any]) -> KnowledgeBase:
        response = self._send("POST", self._kbs(project), {"knowledge_base": body})
        return KnowledgeBase.from_json(self._json(response))

    def get_knowledge_base(self, project: str, name: str) -> KnowledgeBase:
        return KnowledgeBase.from_json(self._get(f"{self._kbs(project)}/{_seg(name)}"))

    def list_knowledge_bases(self, project: str) -> list[KnowledgeBase]:
        return [KnowledgeBase.from_json(k) for k in self._get(self._kbs(project))]

    def delete_knowledge_base(self, project: str, name: str) -> None:
        self._send("DELETE", f"{self._kbs(project)}/{_seg(name)}")

    def insert_knowledge_base_rows(self, project: str, name: str,
                                   rows: list[dict[str, Any]]) -> dict[str, Any]:
        response = self._send("PUT", f"{self._kbs(project)}/{_seg(name)}",
                              {"knowledge_base": {"rows": rows}})
        return self._json(response) or {}

    def alter_knowledge_base(self, project: str, name: str, changes: dict[str, Any]) -> KnowledgeBase:
        """`KnowledgeBaseEditing`: PUT with the fields to alter (rest/knowledge_bases/alter.mdx)."""
        response = self._send("PUT", f"{self._kbs(project)}/{_seg(name)}", {"knowledge_base": dict(changes)})
        return KnowledgeBase.from_json(self._json(response))

    def insert_query_into_knowledge_base(self, project: str, name: str, query: str,
                                         options: dict[str, Any] | None = None) -> int:
        """`KnowledgeBaseEditing`: PUT with a `query` (and insert `params`), as mindsdb_sdk's
        `kb.insert(query)` sends it; the rows stored, as the server counts them."""
        body: dict[str, Any] = {"query": query}
        if options:
            body["params"] = dict(options)
        answer = self._json(self._send("PUT", f"{self._kbs(project)}/{_seg(name)}", {"knowledge_base": body}))
        return int((answer or {}).get("inserted_rows", 0))

    # agents -----------------------------------------------------------------------------
    @staticmethod
    def _agents(project: str) -> str:
        return f"/api/projects/{_seg(project)}/agents"

    def create_agent(self, project: str, body: dict[str, Any]) -> Agent:
        return Agent.from_json(self._json(self._send("POST", self._agents(project), {"agent": body})))

    def get_agent(self, project: str, name: str) -> Agent:
        return Agent.from_json(self._get(f"{self._agents(project)}/{_seg(name)}"))

    def list_agents(self, project: str) -> list[Agent]:
        return [Agent.from_json(a) for a in self._get(self._agents(project))]

    def update_agent(self, project: str, name: str, body: dict[str, Any]) -> Agent:
        response = self._send("PUT", f"{self._agents(project)}/{_seg(name)}", {"agent": body})
        return Agent.from_json(self._json(response))

    def delete_agent(self, project: str, name: str) -> None:
        self._send("DELETE", f"{self._agents(project)}/{_seg(name)}")

    def insert_into_knowledge_base(self, project: str, name: str, rows: Any, *,
                                   batch_size: int = INSERT_BATCH_ROWS,
                                   progress: OnProgress | None = None) -> InsertCounts:
        """Rows go in PUTs of `batch_size` (the reference's insert route), so a 100k-row
        insert never holds more than one batch of JSON. Progress (as embedded) moves per
        batch sent, phase `sending`: the server chunks, embeds and stores each."""
        sent = stored = 0
        total = len(rows) if hasattr(rows, "__len__") else 0
        with Reporter(progress, f"insert into {name}", total, min_total=PROGRESS_MIN_ROWS) as report:
            for batch in row_batches(rows, batch_size):
                report.update(SENDING, sent)
                answer = self.insert_knowledge_base_rows(project, name, batch)
                sent += len(batch)
                # kbsql says how many rows it stored; a server that does not is taken at its word
                stored += int(answer.get("inserted_rows", len(batch)))
                report.update(SENDING, sent)
        return InsertCounts(sent, stored)

    # registered DataFrames (`df.<name>`) -------------------------------------------------
    def register_dataframe(self, name: str, frame: Any) -> int:
        """Upload a DataFrame as Parquet (`PUT /api/files/{name}`); the server makes it the
        table `df.<name>`. Returns the row count the server stored."""
        import io

        import pyarrow.parquet as pq

        from kbsql.interface.frames import to_arrow  # pyarrow only when a frame is sent

        buffer = io.BytesIO()
        pq.write_table(to_arrow(frame), buffer)
        return self._put_file(name, buffer.getvalue(), "application/vnd.apache.parquet")

    def register_file(self, name: str, raw: bytes, content_type: str = "",
                      max_table_bytes: int | None = None) -> int:
        """`FileTables`: upload a Parquet or CSV file as the table `df.<name>`
        (`max_table_bytes` is the server's own limit, `--max-body-mb`, not sent)."""
        return self._put_file(name, raw, content_type or "application/vnd.apache.parquet")

    def unregister_dataframe(self, name: str) -> bool:
        """`FileTables`: `DELETE /api/databases/df/tables/{name}` (`/api/files` deletes the
        uploaded files of the `files` database, as MindsDB's); False when there was none."""
        try:
            self._send("DELETE", f"/api/databases/df/tables/{_seg(name)}")
        except ServiceError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _put_file(self, name: str, raw: bytes, content_type: str) -> int:
        try:
            response = self._http.put(f"/api/files/{_seg(name)}", content=raw,
                                      headers={"Content-Type": content_type})
        except httpx.HTTPError as exc:
            raise TransportError(mask_url(f"Cannot reach {self.base_url}/api/files: {exc}")) from exc
        self._raise_for_problem(response)
        return int((self._json(response) or {}).get("rows", 0))

    # SQL and completions ----------------------------------------------------------------
    def query(self, query: str, context: dict[str, Any] | None = None,
              params: dict[str, Any] | list[Any] | None = None,
              progress: OnProgress | None = None) -> SqlResult:
        body: dict[str, Any] = {"query": query}
        if context:
            body["context"] = context
        if params:  # rest/sql.mdx: the server fills the `:name` / `?` placeholders
            body["params"] = params
        evaluated = _EVALUATE.match(query) if progress is not None else None
        if evaluated is None:
            return result_from_json(self._json(self._send("POST", "/api/sql/query", body)))
        # One statement answers once: the server cannot report per question, so the task
        # has an unknown total, names its phase, and ends in its final state (done or failed).
        with Reporter(progress, f"evaluate {evaluated.group(1)} on the server", 0, unit="question",
                      min_total=0) as report:
            report.update(EVALUATING, 0)
            result = result_from_json(self._json(self._send("POST", "/api/sql/query", body)))
            if isinstance(result, ErrorResult):
                report.error = result.to_exception()
            return result

    def complete(self, project: str, agent: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The answer of `/completions`. A server whose non-stream endpoint fails with a 500
        (MindsDB 26.1 does: `KeyError: 'trace_id'`, a bug of that version) is asked on the
        stream endpoint instead and the answer is its `output` chunks after the last `actions`
        (MindsDB's `data` chunk, read through `normalize_chunk`)."""
        path = f"{self._agents(project)}/{_seg(agent)}/completions"
        try:
            return self._json(self._send("POST", path, {"messages": messages}))
        except ServiceError as exc:
            if exc.status != 500:
                raise
            log.info("%s answered 500; asking the stream endpoint instead", path)
            return self._complete_from_stream(project, agent, messages, exc)

    def _complete_from_stream(self, project: str, agent: str, messages: list[dict[str, Any]],
                              first: ServiceError) -> dict[str, Any]:
        output: str | None = None
        trace_id = ""
        for chunk in self.stream(project, agent, messages):
            trace_id = str(chunk.get("trace_id") or trace_id)
            kind = chunk_kind(chunk)
            if kind == "error":
                detail = f"the agent {agent} failed: {chunk.get('content') or 'no reason given'}"
                if first.detail and first.detail not in detail:
                    detail += f" (its /completions answered {first.status}: {first.title}: {first.detail})"
                raise ServiceError(detail, title=first.title, status=500)
            if kind == "actions":
                output = None  # the text before a tool call was not the answer
            if kind == "output":  # partial chunks: the answer is their concatenation
                output = (output or "") + str(chunk.get("output") or "")
        if output is None:
            raise first
        return completion_answer(output, trace_id)

    def stream(self, project: str, agent: str,
               messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Yield chunks as they arrive, in the contract's shapes (`normalize_chunk`). Closing
        the iterator closes the connection, which stops the run on the server."""
        path = f"{self._agents(project)}/{_seg(agent)}/completions/stream"
        request = self._http.build_request(
            "POST", path, content=dumps({"messages": messages}).encode("utf-8"),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        try:
            response = self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise TransportError(mask_url(f"Cannot reach {self.base_url}{path}: {exc}")) from exc
        try:
            if not response.is_success:
                response.read()
                self._raise_for_problem(response)
            for line in response.iter_lines():
                chunk = parse_sse_line(line)
                if chunk is not None:
                    chunk = normalize_chunk(chunk)  # a MindsDB 26.1 stream, in the contract's shapes
                    yield chunk
                    if chunk_kind(chunk) == "end":
                        return
        except httpx.HTTPError as exc:
            raise TransportError(mask_url(f"The stream from {self.base_url}{path} broke: {exc}")) from exc
        finally:
            response.close()
