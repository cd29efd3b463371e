"""MySQL error packets: the engine's one-line message, with the code and SQLSTATE a client
acts on.

An engine error carries its kind (a problem type); `interface.errors.KINDS` maps a kind to its
MySQL number and SQLSTATE, and this module only reads that table: 1146 "table doesn't exist"
(SQLAlchemy's `has_table` answers False on it, and pandas then runs the text as a query), 1049
"unknown database", 1064 syntax error, 1235 not supported... An error with no kind of its own
is 1105 (unknown error). The message is never read for the code, so rewording one changes
nothing a client does; it is sent unchanged: the same line as over HTTP. The door's own
protocol errors (a packet too large, an unknown command) are the constants below.
"""

from __future__ import annotations

from mysql_mimic.types import Capabilities

from kbsql.interface.errors import (
    KINDS,
    SQL_ERROR,
    NotSupported,
    ParseError,
    UnknownDatabase,
    UnknownTable,
    codes_of,
)

NO_SUCH_TABLE = codes_of(UnknownTable.problem_type).mysql  # 1146
BAD_DB = codes_of(UnknownDatabase.problem_type).mysql  # 1049
PARSE_ERROR = codes_of(ParseError.problem_type).mysql  # 1064
NOT_SUPPORTED = codes_of(NotSupported.problem_type).mysql  # 1235
UNKNOWN_ERROR = codes_of(SQL_ERROR).mysql  # 1105
EMPTY_QUERY = 1065
ACCESS_DENIED = 1045
HOST_BLOCKED = 1129
PACKET_TOO_LARGE = 1153
MALFORMED_PACKET = 1835
UNKNOWN_COMMAND = 1047
UNKNOWN_STATEMENT = 1243
UNKNOWN_SYSTEM_VARIABLE = 1193
UNKNOWN_TABLE = 1109
TOO_MANY_CONNECTIONS = 1040  # every SQL worker busy past the queue: try again (as HTTP's 503)
MAX_PREPARED = 1461  # ER_MAX_PREPARED_STMT_COUNT_REACHED: --mysql-max-prepared

SQLSTATES = {  # the door's own codes; the engine's kinds bring theirs from KINDS
    **{codes.mysql: codes.sqlstate.encode() for codes in KINDS.values()},
    EMPTY_QUERY: b"42000", ACCESS_DENIED: b"28000", HOST_BLOCKED: b"HY000",
    PACKET_TOO_LARGE: b"08S01", UNKNOWN_COMMAND: b"08S01", UNKNOWN_STATEMENT: b"HY000",
    UNKNOWN_SYSTEM_VARIABLE: b"HY000", UNKNOWN_TABLE: b"42S02", UNKNOWN_ERROR: b"HY000",
    MAX_PREPARED: b"42000",
}


def code_of(kind: str) -> int:
    """The MySQL error number of an engine error's kind (`ErrorResult.kind`, `SqlError.kind`,
    a `ServiceError`'s problem type)."""
    return codes_of(kind).mysql


def error_packet(capabilities: Capabilities, code: int, message: str) -> bytes:
    """An ERR packet (utf-8 text; clients cut nothing, but keep it to one line)."""
    head = b"\xff" + code.to_bytes(2, "little")
    if Capabilities.CLIENT_PROTOCOL_41 in capabilities:
        head += b"#" + SQLSTATES.get(code, b"HY000")
    return head + message.encode("utf-8", "replace")
