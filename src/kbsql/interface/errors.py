"""Error types of the service interface.

Three shapes exist on the wire (reference-behaviour.md, "Errors"): REST problems
(`application/problem+json` with `title` and `detail`), SQL errors (HTTP 200 with
`type: error`) and server faults (500, still `title`/`detail`). The engine raises these
classes, the server turns them into their wire shape, and the HTTP client turns the wire
shape back into the same classes, so callers catch one thing whichever transport they use.

Each `ServiceError` class has a stable problem type (`problem_type`, an RFC 9457 `type`
URI). The body stays `{"title", "detail"}` exactly as the reference sends it; the type
travels in the `Kbsql-Problem-Type` response header (and is read from a body `type` too,
should a server put it there), and the client rebuilds the class by it, falling back to
the status for servers that send no type. So a `ProviderError` stays a `ProviderError`
over HTTP instead of becoming the `BadRequest` its status alone would say.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


class KbsqlError(Exception):
    """Base class of every error kbsql raises on purpose."""


class ServiceError(KbsqlError):
    """A REST-level failure: an HTTP status with a short title and a sentence of detail."""

    status: int = 500
    default_title: str = "Internal error"
    problem_type: str = "urn:kbsql:problem:internal"
    retry_after: int | None = None
    """Seconds after which the same request may succeed (503s): sent as Retry-After."""
    hint: str = ""
    """Said after `detail` where the text is free (SQL errors, the notebook): e.g. ` (did you
    mean 'docs'?)`. Never in the REST problem body, whose detail is the reference's sentence."""

    def __init__(self, detail: str, title: str | None = None, status: int | None = None):
        self.title = title or self.default_title
        self.detail = detail
        if status is not None:
            self.status = status
        super().__init__(f"{self.title}: {detail}")

    def to_problem(self) -> dict[str, Any]:
        """The problem+json body of this error."""
        return {"title": self.title, "detail": self.detail}

    @staticmethod
    def from_problem(status: int, body: Any, problem_type: str | None = None) -> ServiceError:
        """Rebuild the matching error class from a status, a problem+json body and the
        problem type (the header's, else the body's `type`); the status decides only when
        the type is unknown."""
        title = detail = None
        if isinstance(body, dict):
            title = body.get("title")
            detail = body.get("detail") or body.get("message") or body.get("error")
            problem_type = problem_type or (body.get("type") if isinstance(body.get("type"), str)
                                            else None)
        detail = str(detail) if detail is not None else f"HTTP {status}"
        cls = _BY_TYPE.get(problem_type or "") or _BY_STATUS.get(status, ServiceError)
        return cls(detail, title=title, status=status)


class BadRequest(ServiceError):
    """400: the request body or a parameter is wrong."""

    status = 400
    default_title = "Bad request"
    problem_type = "urn:kbsql:problem:bad-request"


class InvalidParameter(BadRequest):
    """400 "Invalid parameter": a field or option has a value the service cannot use."""

    default_title = "Invalid parameter"
    problem_type = "urn:kbsql:problem:invalid-parameter"


class MissingParameter(BadRequest):
    """400 "Missing parameter": a required field or option was not given."""

    default_title = "Missing parameter"
    problem_type = "urn:kbsql:problem:missing-parameter"


class ConnectionFailed(BadRequest):
    """400 "Connection error": a data source asked to check its connection could not be
    reached (`/api/databases` with `check_connection`, MindsDB's title)."""

    default_title = "Connection error"
    problem_type = "urn:kbsql:problem:connection-error"


class NotFound(ServiceError):
    """404: the project or resource does not exist."""

    status = 404
    default_title = "Not found"
    problem_type = "urn:kbsql:problem:not-found"


class Conflict(ServiceError):
    """409: a resource with that name already exists."""

    status = 409
    default_title = "Already exists"
    problem_type = "urn:kbsql:problem:conflict"


class ProviderError(ServiceError):
    """A model provider (embedding, reranking, LLM) could not be reached or refused a call.

    It is a 400 because the cause is the descriptor the user gave (wrong URL, model, key),
    and the message names the provider and the model so the user knows what to fix.
    """

    status = 400
    default_title = "Model provider error"
    problem_type = "urn:kbsql:problem:provider-error"


class StoreDamaged(ServiceError):
    """A knowledge base's stored chunks cannot be read (a damaged file): the detail names the
    knowledge base and the way out (restore it, or drop it and insert its rows again).
    Other knowledge bases keep working."""

    status = 500
    default_title = "Knowledge base damaged"
    problem_type = "urn:kbsql:problem:store-damaged"


class InsufficientStorage(ServiceError):
    """507: the disk is full. What was being written was rolled back; what was acknowledged
    before is kept."""

    status = 507
    default_title = "Insufficient storage"
    problem_type = "urn:kbsql:problem:insufficient-storage"


class Busy(ServiceError):
    """503: every slot for this kind of work is taken; try again after `retry_after` seconds
    (sent as the Retry-After header)."""

    status = 503
    default_title = "Busy"
    problem_type = "urn:kbsql:problem:busy"

    def __init__(self, detail: str, title: str | None = None, status: int | None = None,
                 retry_after: int = 1):
        super().__init__(detail, title, status)
        self.retry_after = retry_after


class Unavailable(ServiceError):
    """503: a database the service depends on (the shared catalog, a knowledge base's
    PostgreSQL) cannot be reached right now. Nothing is wrong with the request: send it
    again after `retry_after` seconds (the server says so in a Retry-After header). A write
    that answered 503 may or may not have been stored; kbsql's writes are keyed by id, so
    sending it again stores it once."""

    status = 503
    default_title = "Service unavailable"
    problem_type = "urn:kbsql:problem:unavailable"
    retry_after = 1


PROBLEM_TYPE_HEADER = "Kbsql-Problem-Type"

# read-only: the interface holds no mutable module state (tests/architecture/test_state.py)
_BY_STATUS: Mapping[int, type[ServiceError]] = MappingProxyType({400: BadRequest, 404: NotFound,
                                                                 409: Conflict, 503: Unavailable,
                                                                 507: InsufficientStorage})
_BY_TYPE: Mapping[str, type[ServiceError]] = MappingProxyType({
    cls.problem_type: cls for cls in (ServiceError, BadRequest, InvalidParameter, MissingParameter,
                                      ConnectionFailed, NotFound, Conflict, ProviderError,
                                      StoreDamaged, InsufficientStorage, Busy, Unavailable)})


class SqlError(KbsqlError):
    """An SQL statement failed; the service answered `{"type": "error", ...}`."""

    def __init__(self, message: str, error_code: int = 0, context: dict[str, Any] | None = None):
        self.message = message
        self.error_code = error_code
        self.context = context or {}
        super().__init__(message)


class TransportError(KbsqlError):
    """The remote service could not be reached or answered something that is not the interface."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (a kernel's interrupt) stopped a call; the message says what it left stored.

    A KeyboardInterrupt, so whatever stops on Ctrl-C still stops (and a progress bar says
    "stopped"); the notebook shows the message as one line instead of a traceback. `stored`
    is the rows an interrupted insert kept (None when not an insert)."""

    def __init__(self, message: str, stored: int | None = None):
        super().__init__(message)
        self.message = message
        self.stored = stored
