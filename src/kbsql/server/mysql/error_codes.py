"""MySQL error packets: the engine's one-line message, with the code and SQLSTATE a client
acts on.

The engine's SQL errors carry kbsql's message and no MySQL code; a few codes change what
clients do, so they are read from the message's known forms: 1146 "table doesn't exist"
(SQLAlchemy's `has_table` answers False on it, and pandas then runs the text as a query),
1049 "unknown database", 1064 syntax error, 1235 not supported. Anything else is 1105
(unknown error). The message itself is sent unchanged: the same line as over HTTP.
"""

from __future__ import annotations

import re

from mysql_mimic.types import Capabilities

NO_SUCH_TABLE = 1146
BAD_DB = 1049
PARSE_ERROR = 1064
EMPTY_QUERY = 1065
NOT_SUPPORTED = 1235
UNKNOWN_ERROR = 1105
ACCESS_DENIED = 1045
HOST_BLOCKED = 1129
PACKET_TOO_LARGE = 1153
MALFORMED_PACKET = 1835
UNKNOWN_COMMAND = 1047
UNKNOWN_STATEMENT = 1243
UNKNOWN_SYSTEM_VARIABLE = 1193
UNKNOWN_TABLE = 1109
TOO_MANY_CONNECTIONS = 1040  # every SQL worker busy past the queue: try again (as HTTP's 503)

SQLSTATES = {
    NO_SUCH_TABLE: b"42S02", BAD_DB: b"42000", PARSE_ERROR: b"42000", EMPTY_QUERY: b"42000",
    NOT_SUPPORTED: b"42000", ACCESS_DENIED: b"28000", HOST_BLOCKED: b"HY000",
    PACKET_TOO_LARGE: b"08S01", UNKNOWN_COMMAND: b"08S01", UNKNOWN_STATEMENT: b"HY000",
    UNKNOWN_SYSTEM_VARIABLE: b"HY000", UNKNOWN_TABLE: b"42S02", TOO_MANY_CONNECTIONS: b"08004",
}

_FORMS = (
    (re.compile(r"^Table '[^']*' not found|^Knowledge base '[^']*' not found|"
                r"^(Knowledge Base|Agent) with name \S+ does not exist"),
     NO_SUCH_TABLE),
    (re.compile(r"^Database '[^']*' not found|^(Database|Project) \S+ does not exist|"
                r"^(Database|Project) with name \S+ does not exist"), BAD_DB),
    (re.compile(r"^Syntax error|^Unknown input|^Cannot parse"), PARSE_ERROR),
    (re.compile(r"not supported", re.IGNORECASE), NOT_SUPPORTED),
)


def code_of(message: str, code: int = 0) -> int:
    """The MySQL error code for an engine error (its own code when it has a MySQL one)."""
    if 1000 <= code < 65536:
        return code
    for pattern, found in _FORMS:
        if pattern.search(message):
            return found
    return UNKNOWN_ERROR


def error_packet(capabilities: Capabilities, code: int, message: str) -> bytes:
    """An ERR packet (utf-8 text; clients cut nothing, but keep it to one line)."""
    head = b"\xff" + code.to_bytes(2, "little")
    if Capabilities.CLIENT_PROTOCOL_41 in capabilities:
        head += b"#" + SQLSTATES.get(code, b"HY000")
    return head + message.encode("utf-8", "replace")
