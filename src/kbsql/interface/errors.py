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

SQL errors have a kind too, typed where they start (`UnknownTable`, `UnknownDatabase`,
`ParseError`, `NotSupported`, `LimitExceeded`, `PathNotAllowed`: each both a `ServiceError`
for the REST routes and an `SqlError` for a statement). One table, `KINDS`, maps a kind (a
problem type) to MindsDB's `error_code` and the MySQL door's number and SQLSTATE; a new kind
is its class here and its row there, and nothing reads a kind back from a message's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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
        KbsqlError.__init__(self, f"{self.title}: {detail}")  # not super(): the SQL kinds
        # below are SqlErrors too, and SqlError's constructor would take this line as the message

    @property
    def kind(self) -> str:
        """The error's kind in `KINDS` (its problem type): what an SQL answer carries."""
        return self.problem_type

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
    stored: int | None = None
    """The rows an insert stopped by it kept (its message says so too), None otherwise."""


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


class PermissionDenied(ServiceError):
    """403: the caller may not do this here (a read-only data directory, a path or host the
    engine's settings do not allow)."""

    status = 403
    default_title = "Permission denied"
    problem_type = "urn:kbsql:problem:permission-denied"


class SqlError(KbsqlError):
    """An SQL statement failed; the service answered `{"type": "error", ...}`.

    `kind` is the failure's problem type (a key of `KINDS`): it survives the executor and the
    wire (as `error_code`, the MySQL number MindsDB sends), so the MySQL door and a caller
    act on the kind, never on the message's words."""

    def __init__(self, message: str, error_code: int = 0, context: dict[str, Any] | None = None,
                 kind: str | None = None):
        self.message = message
        self._kind = kind or kind_of_code(error_code)  # a code read off the wire names its kind
        self.error_code = error_code or codes_of(self._kind).mindsdb
        self.context = context or {}
        super().__init__(message)

    @property
    def kind(self) -> str:
        """The failure's problem type (a key of `KINDS`)."""
        return self._kind


class _SqlKind(ServiceError, SqlError):
    """An error that starts in SQL or in the catalog: a `ServiceError` to the REST routes (its
    status and problem type) and an `SqlError` to a statement (its message is the detail with
    the hint). Raised where the failure starts, so no one reads its kind back from words."""

    def __init__(self, detail: str, title: str | None = None, status: int | None = None):
        ServiceError.__init__(self, detail, title, status)
        self.error_code = codes_of(self.problem_type).mindsdb
        self.context = {}

    @property
    def message(self) -> str:  # type: ignore[override]
        return self.detail + self.hint


class UnknownTable(_SqlKind, NotFound):
    """A table, knowledge base or agent that does not exist (MySQL 1146, SQLSTATE 42S02)."""

    default_title = "Table not found"
    problem_type = "urn:kbsql:problem:unknown-table"


class UnknownDatabase(_SqlKind, NotFound):
    """A database or project that does not exist (MySQL 1049)."""

    default_title = "Database not found"
    problem_type = "urn:kbsql:problem:unknown-database"


class ParseError(_SqlKind, BadRequest):
    """The statement cannot be parsed (MySQL 1064)."""

    default_title = "Syntax error"
    problem_type = "urn:kbsql:problem:parse-error"


class NotSupported(_SqlKind, BadRequest):
    """A statement or feature of the reference dialect the local engine does not run
    (MySQL 1235, "not supported yet")."""

    default_title = "Not supported"
    problem_type = "urn:kbsql:problem:not-supported"


class LimitExceeded(_SqlKind, BadRequest):
    """A value or a statement past one of the engine's limits (a LIMIT past 2^63 - 1, too many
    tokens for the parser)."""

    default_title = "Limit exceeded"
    problem_type = "urn:kbsql:problem:limit-exceeded"


class PathNotAllowed(_SqlKind, PermissionDenied):
    """A data source's file or folder this engine may not open (inside the data directory, or
    outside the folders `--allow-path` names): a permission, in SQL (MySQL 1227) and REST."""


class ReadOnlySource(_SqlKind, PermissionDenied):
    """A write to a connected data source on a server whose operator made them read-only
    (`read_only_sources`): a permission, in SQL (MySQL 1227) and REST (403)."""


@dataclass(frozen=True)
class ErrorCodes:
    """What one kind of error is called on each wire: MindsDB's `error_code` (the MySQL number
    its SQL API exceptions carry, 0 for an error it has no kind for) and the MySQL door's
    error number and SQLSTATE."""

    mindsdb: int
    mysql: int
    sqlstate: str


_UNKNOWN = ErrorCodes(0, 1105, "HY000")
_P = "urn:kbsql:problem:"
SQL_ERROR = _P + "sql-error"
"""The kind of an SQL error that has none of its own (MySQL 1105, MindsDB's 0)."""

KINDS: Mapping[str, ErrorCodes] = MappingProxyType({
    # The one table from a kind (an HTTP problem type) to its codes: a new kind is one row here
    # and its class above. MindsDB sends the MySQL number as `error_code` (its SqlApiException's
    # err_code), so the two columns agree wherever MindsDB has the kind.
    _P + "unknown-table": ErrorCodes(1146, 1146, "42S02"),
    _P + "unknown-database": ErrorCodes(1049, 1049, "42000"),
    _P + "parse-error": ErrorCodes(1064, 1064, "42000"),
    _P + "not-supported": ErrorCodes(1235, 1235, "42000"),
    _P + "permission-denied": ErrorCodes(1227, 1227, "42000"),
    _P + "limit-exceeded": ErrorCodes(1104, 1104, "42000"),
    _P + "conflict": ErrorCodes(1050, 1050, "42S01"),
    _P + "busy": ErrorCodes(1040, 1040, "08004"),
    _P + "store-damaged": ErrorCodes(1034, 1034, "HY000"),
    _P + "insufficient-storage": ErrorCodes(1021, 1021, "HY000"),
    _P + "connection-error": ErrorCodes(1429, 1429, "HY000"),
    _P + "interrupted": ErrorCodes(1317, 1317, "70100"),
})


def codes_of(kind: str) -> ErrorCodes:
    """The codes of `kind`; an error with no kind of its own is MySQL's 1105 (unknown error)
    and MindsDB's 0."""
    return KINDS.get(kind, _UNKNOWN)


def kind_of_code(error_code: int) -> str:
    """The kind an `error_code` on the wire stands for (the HTTP client's way back)."""
    for kind, codes in KINDS.items():
        if error_code and codes.mindsdb == error_code:
            return kind
    return SQL_ERROR


PROBLEM_TYPE_HEADER = "Kbsql-Problem-Type"

# read-only: the interface holds no mutable module state (tests/architecture/test_state.py)
_BY_STATUS: Mapping[int, type[ServiceError]] = MappingProxyType({400: BadRequest, 403: PermissionDenied,
                                                                 404: NotFound,
                                                                 409: Conflict, 503: Unavailable,
                                                                 507: InsufficientStorage})
_BY_TYPE: Mapping[str, type[ServiceError]] = MappingProxyType({
    cls.problem_type: cls for cls in (ServiceError, BadRequest, InvalidParameter, MissingParameter,
                                      ConnectionFailed, NotFound, Conflict, ProviderError,
                                      StoreDamaged, InsufficientStorage, Busy, Unavailable,
                                      PermissionDenied, UnknownTable, UnknownDatabase, ParseError,
                                      NotSupported, LimitExceeded)})


SHOWN_CHARS = 100
"""Characters of a name or value an error detail repeats: enough to recognize it by."""


def clipped(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` whole up to `limit` characters, else its first `limit` and how many more: what
    an error detail (or a stored log) repeats of what a user sent stays short. A 5,000-
    character upload name came back whole in its "Invalid name" detail."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def one_line(text: str) -> str:
    """An error's text (DuckDB's, several lines: a candidates list, a 'LINE 1: ... ^' pointer
    into SQL the user never wrote) as one line: its first, and a 'Did you mean' line after it
    in parentheses. 'Catalog Error: Scalar Function with name adddate does not exist!' then
    'Did you mean "add"?' on a line of its own reached users whole."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return text.strip()
    hint = next((line for line in lines[1:] if line.lower().startswith("did you mean")), None)
    return lines[0] if hint is None else f"{lines[0]} ({hint})"


class TransportError(KbsqlError):
    """The remote service could not be reached or answered something that is not the interface."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (a kernel's interrupt) stopped a call; the message says what it left stored.

    A KeyboardInterrupt, so whatever stops on Ctrl-C still stops (and a progress bar says
    "stopped"); the notebook shows the message as one line instead of a traceback. `stored`
    is the rows an interrupted insert kept (None when not an insert)."""

    kind = "urn:kbsql:problem:interrupted"

    def __init__(self, message: str, stored: int | None = None):
        super().__init__(message)
        self.message = message
        self.stored = stored
