"""Error types of the service interface.

Three shapes exist on the wire (reference-behaviour.md, "Errors"): REST problems
(`application/problem+json` with `title` and `detail`), SQL errors (HTTP 200 with
`type: error`) and server faults (500, still `title`/`detail`). The engine raises these
classes, the server turns them into their wire shape, and the HTTP client turns the wire
shape back into the same classes, so callers catch one thing whichever transport they use.
"""

from __future__ import annotations

from typing import Any


class KbsqlError(Exception):
    """Base class of every error kbsql raises on purpose."""


class ServiceError(KbsqlError):
    """A REST-level failure: an HTTP status with a short title and a sentence of detail."""

    status: int = 500
    default_title: str = "Internal error"

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
    def from_problem(status: int, body: Any) -> ServiceError:
        """Rebuild the matching error class from a status and a problem+json body."""
        title = detail = None
        if isinstance(body, dict):
            title = body.get("title")
            detail = body.get("detail") or body.get("message") or body.get("error")
        detail = str(detail) if detail is not None else f"HTTP {status}"
        cls = _BY_STATUS.get(status, ServiceError)
        return cls(detail, title=title, status=status)


class BadRequest(ServiceError):
    """400: the request body or a parameter is wrong."""

    status = 400
    default_title = "Bad request"


class NotFound(ServiceError):
    """404: the project or resource does not exist."""

    status = 404
    default_title = "Not found"


class Conflict(ServiceError):
    """409: a resource with that name already exists."""

    status = 409
    default_title = "Already exists"


class ProviderError(ServiceError):
    """A model provider (embedding, reranking, LLM) could not be reached or refused a call.

    It is a 400 because the cause is the descriptor the user gave (wrong URL, model, key),
    and the message names the provider and the model so the user knows what to fix.
    """

    status = 400
    default_title = "Model provider error"


_BY_STATUS: dict[int, type[ServiceError]] = {400: BadRequest, 404: NotFound, 409: Conflict}


class SqlError(KbsqlError):
    """An SQL statement failed; the service answered `{"type": "error", ...}`."""

    def __init__(self, message: str, error_code: int = 0, context: dict[str, Any] | None = None):
        self.message = message
        self.error_code = error_code
        self.context = context or {}
        super().__init__(message)


class TransportError(KbsqlError):
    """The remote service could not be reached or answered something that is not the interface."""
