"""The interface's data shapes: the one place that declares its fields.

Client, engine and server all import from here; nothing else re-declares a field list.
"""

from kbsql.interface.api import DEFAULT_PROJECT, InsertCounts, ServiceApi
from kbsql.interface.errors import (
    BadRequest,
    Busy,
    Conflict,
    ConnectionFailed,
    InsufficientStorage,
    Interrupted,
    InvalidParameter,
    KbsqlError,
    LimitExceeded,
    MissingParameter,
    NotFound,
    NotSupported,
    ParseError,
    PermissionDenied,
    ProviderError,
    ServiceError,
    SqlError,
    StoreDamaged,
    TransportError,
    Unavailable,
    UnknownDatabase,
    UnknownTable,
)
from kbsql.interface.models import MASK, Agent, KnowledgeBase, ModelDescriptor, Storage
from kbsql.interface.results import (
    KB_COLUMNS,
    ErrorResult,
    OkResult,
    SqlResult,
    TableResult,
    result_from_json,
)

__all__ = [
    "DEFAULT_PROJECT", "KB_COLUMNS", "MASK", "Agent", "BadRequest", "Busy", "Conflict", "ConnectionFailed",
    "ErrorResult", "InsertCounts", "InsufficientStorage", "Interrupted", "InvalidParameter", "KbsqlError",
    "KnowledgeBase", "LimitExceeded", "MissingParameter", "ModelDescriptor", "NotFound",
    "NotSupported", "OkResult", "ParseError", "PermissionDenied", "ProviderError", "ServiceApi",
    "ServiceError", "SqlError", "SqlResult", "Storage", "StoreDamaged", "TableResult", "TransportError",
    "Unavailable", "UnknownDatabase", "UnknownTable", "result_from_json",
]
