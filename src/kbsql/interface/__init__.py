"""The interface's data shapes: the one place that declares its fields.

Client, engine and server all import from here; nothing else re-declares a field list.
"""

from kbsql.interface.api import DEFAULT_PROJECT, InsertCounts, ServiceApi
from kbsql.interface.errors import (
    BadRequest,
    Conflict,
    InvalidParameter,
    KbsqlError,
    MissingParameter,
    NotFound,
    ProviderError,
    ServiceError,
    SqlError,
    TransportError,
    Unavailable,
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
    "DEFAULT_PROJECT", "KB_COLUMNS", "MASK", "Agent", "BadRequest", "Conflict", "ErrorResult", "InsertCounts",
    "InvalidParameter", "KbsqlError", "KnowledgeBase", "MissingParameter", "ModelDescriptor", "NotFound",
    "OkResult", "ProviderError", "ServiceApi",
    "ServiceError", "SqlError", "SqlResult", "Storage", "TableResult", "TransportError",
    "Unavailable", "result_from_json",
]
